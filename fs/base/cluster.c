/*
 * cluster.c - compressed clusters: the codec between a cluster's 2^n blocks and its k stored
 * blocks (format.h, "compressed clusters"; docs/compression.md).
 *
 * Owns: the choice to store a cluster compressed (it must save a block; the first block alone
 * is tried first), the stored form's header, zero tail and hash, and decompression bounded
 * to exactly the cluster's size. Stored blocks are device input: every field is checked
 * before it sizes anything, and any mismatch is -EIO, never a read or write out of bounds.
 * May call: format_check.c (the header's ranges), format.c (the hash), LZ4, zstd, libc.
 * State lives in the caller's struct cluster_ctx: nothing global, so no lock.
 */
#include "cluster.h"

#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zstd.h>

struct cluster_ctx {
	void *lz4;            /* LZ4_sizeofState() bytes */
	ZSTD_CCtx *zc;
	ZSTD_DCtx *zd;
	char probe[CLUSTER_PROBE_MAX];
};

struct cluster_ctx *cluster_ctx_new(void)
{
	struct cluster_ctx *cx = calloc(1, sizeof(*cx));

	if (!cx)
		return NULL;
	cx->lz4 = malloc((size_t)LZ4_sizeofState());
	cx->zc = ZSTD_createCCtx();
	cx->zd = ZSTD_createDCtx();
	if (!cx->lz4 || !cx->zc || !cx->zd) {
		cluster_ctx_free(cx);
		return NULL;
	}
	return cx;
}

void cluster_ctx_free(struct cluster_ctx *cx)
{
	if (!cx)
		return;
	free(cx->lz4);
	ZSTD_freeCCtx(cx->zc);
	ZSTD_freeDCtx(cx->zd);
	free(cx);
}

int cluster_level_ok(unsigned alg, int level)
{
	if (alg == ZLFS_CLUSTER_LZ4)
		return level == 0;
	return alg == ZLFS_CLUSTER_ZSTD && level >= 0 && level <= ZSTD_maxCLevel();
}

int cluster_opt_parse(const char *s, unsigned *alg, int *level)
{
	const char *lv = !strncmp(s, "zstd:", 5) ? s + 5 : NULL;
	char *end;
	long v;

	*level = 0;
	if (!strcmp(s, "none") || !strcmp(s, "lz4") || !strcmp(s, "zstd")) {
		*alg = s[0] == 'n' ? 0 : s[0] == 'l' ? ZLFS_CLUSTER_LZ4 : ZLFS_CLUSTER_ZSTD;
		return 0;
	}
	if (!lv || *lv < '0' || *lv > '9') /* digits only: no sign, no space */
		return -EINVAL;
	v = strtol(lv, &end, 10);
	if (*end || v < 1 || v > ZSTD_maxCLevel())
		return -EINVAL;
	*alg = ZLFS_CLUSTER_ZSTD;
	*level = (int)v;
	return 0;
}

/* ---- extension lists --------------------------------------------------------------------- */

/* The suffix of LIST at *AT into its length *N; the next one's place after it. 0 at the end. */
static int ext_next(const char **at, size_t *n)
{
	const char *s = *at;

	if (!s || !*s)
		return 0;
	*n = strcspn(s, ":");
	*at = s[*n] ? s + *n + 1 : s + *n;
	return 1;
}

/* Whether LIST holds the suffix EXT of N bytes. */
static int ext_in(const char *list, const char *ext, size_t n)
{
	const char *at = list, *s;
	size_t m;

	for (s = at; ext_next(&at, &m); s = at)
		if (m == n && !strncasecmp(s, ext, n))
			return 1;
	return 0;
}

int cluster_ext_check(const char *list, const char *other)
{
	const char *at = list, *s;
	size_t n;
	int count = 0;

	if (!list || strlen(list) >= CLUSTER_EXT_LIST)
		return -EINVAL;
	for (s = at; ext_next(&at, &n); s = at) {
		if (!n || n > CLUSTER_EXT_LEN || memchr(s, '/', n) || ++count > CLUSTER_EXT_MAX)
			return -EINVAL;
		if (other && ext_in(other, s, n))
			return -EEXIST;
	}
	return count ? 0 : -EINVAL;
}

int cluster_ext_match(const char *list, const char *name)
{
	const char *at = list, *s;
	size_t n, len = name ? strlen(name) : 0;

	for (s = at; ext_next(&at, &n); s = at) {
		if (n == 1 && *s == '*')
			return 1;
		if (len > n + 1 && name[len - n - 1] == '.' && !strncasecmp(name + len - n, s, n))
			return 1;
	}
	return 0;
}

/* ---- compression ------------------------------------------------------------------------- */

/* Bytes ALG wrote of SIZE at IN into DST of CAP, 0 when they did not fit (or an error). */
static size_t compress_into(struct cluster_ctx *cx, unsigned alg, int level, const void *in,
			    size_t size, void *dst, size_t cap)
{
	size_t n;

	if (alg == ZLFS_CLUSTER_LZ4)
		return (size_t)LZ4_compress_fast_extState(cx->lz4, in, dst, (int)size, (int)cap, 1);
	n = ZSTD_compressCCtx(cx->zc, dst, cap, in, size, level ? level : ZSTD_CLEVEL_DEFAULT);
	return ZSTD_isError(n) ? 0 : n;
}

int cluster_compress(struct cluster_ctx *cx, const struct cluster_place *at, unsigned alg,
		     int level, const void *in, uint32_t log, void *out)
{
	return cluster_compress_probed(cx, at, alg, level, in, log, out, 1);
}

int cluster_compress_probed(struct cluster_ctx *cx, const struct cluster_place *at,
			    unsigned alg, int level, const void *in, uint32_t log, void *out,
			    int probe)
{
	size_t size = (size_t)ZLFS_BLOCK_SIZE << log, clen;
	struct zlfs_cluster_hdr h;
	uint32_t k;

	if (!cluster_level_ok(alg, level) || log < ZLFS_CLUSTER_LOG_MIN ||
	    log > ZLFS_CLUSTER_LOG_MAX)
		return -EINVAL;
	/* LZ4 for the probe whatever ALG is: the cheapest answer to "is this random?" */
	if (probe && !LZ4_compress_fast_extState(cx->lz4, in, cx->probe, ZLFS_BLOCK_SIZE,
						 CLUSTER_PROBE_MAX, 1))
		return CLUSTER_RAW;
	clen = compress_into(cx, alg, level, in, size, (uint8_t *)out + sizeof(h),
			     ZLFS_CLUSTER_CLEN_MAX((1u << log) - 1));
	if (!clen) /* it did not fit in one block fewer than the cluster, or it failed */
		return CLUSTER_RAW;
	k = (uint32_t)((clen + sizeof(h) + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE);
	memset((uint8_t *)out + sizeof(h) + clen, 0, (size_t)k * ZLFS_BLOCK_SIZE - sizeof(h) - clen);
	h = (struct zlfs_cluster_hdr){.magic = le16_put(ZLFS_CLUSTER_MAGIC), .alg = (uint8_t)alg,
				      .log = (uint8_t)log, .clen = le32_put((uint32_t)clen)};
	h.hash = le64_put(zlfs_cluster_hash(&h, (uint8_t *)out + sizeof(h), at->seed, at->ino,
					    at->index));
	memcpy(out, &h, sizeof(h));
	return (int)k;
}

/* ---- decompression ----------------------------------------------------------------------- */

#define fail(why, len, ...) zlfs_why(-EIO, why, len, __VA_ARGS__)

/* zstd: one frame, exactly CLEN bytes, that says it holds exactly CAP bytes, and does. */
static int unzstd(struct cluster_ctx *cx, const void *src, size_t clen, void *out, size_t cap,
		  char *why, size_t len)
{
	unsigned long long content = ZSTD_getFrameContentSize(src, clen);
	size_t frame = ZSTD_findFrameCompressedSize(src, clen), n;

	if (content != cap)
		return fail(why, len, "cluster: zstd frame content size %lld, expected %zu",
			    content >= ZSTD_CONTENTSIZE_ERROR ? -1LL : (long long)content, cap);
	if (ZSTD_isError(frame) || frame != clen)
		return fail(why, len, "cluster: zstd frame of %zu bytes in a clen of %zu",
			    ZSTD_isError(frame) ? 0 : frame, clen);
	n = ZSTD_decompressDCtx(cx->zd, out, cap, src, clen);
	if (ZSTD_isError(n) || n != cap)
		return fail(why, len, "cluster: zstd: %s",
			    ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output");
	return 0;
}

static int unlz4(const void *src, size_t clen, void *out, size_t cap, char *why, size_t len)
{
	int n = LZ4_decompress_safe(src, out, (int)clen, (int)cap);

	if (n != (int)cap)
		return fail(why, len, "cluster: LZ4 gave %d bytes of %zu", n, cap);
	return 0;
}

static int check_stored(const struct cluster_place *at, const uint8_t *in, uint32_t k,
			uint32_t log, const struct zlfs_cluster_hdr *h, char *why, size_t len)
{
	uint32_t clen = le32_get(h->clen);
	size_t end = (size_t)k * ZLFS_BLOCK_SIZE, i;

	if (zlfs_cluster_hdr_check(h, log, k, why, len))
		return -EIO;
	if (le64_get(h->hash) != zlfs_cluster_hash(h, in + sizeof(*h), at->seed, at->ino,
						   at->index))
		return fail(why, len, "cluster %llu of inode %u: hash mismatch (damaged, or "
			    "another file's or place's cluster)", (unsigned long long)at->index,
			    at->ino);
	for (i = sizeof(*h) + clen; i < end; i++)
		if (in[i])
			return fail(why, len, "cluster: byte %zu of its stored blocks, past the "
				    "data, is not zero", i);
	return 0;
}

int cluster_decompress(struct cluster_ctx *cx, const struct cluster_place *at, const void *in,
		       uint32_t k, uint32_t log, void *out, char *why, size_t len)
{
	const uint8_t *src = (const uint8_t *)in + sizeof(struct zlfs_cluster_hdr);
	struct zlfs_cluster_hdr h;
	size_t cap;
	int ret;

	if (log < ZLFS_CLUSTER_LOG_MIN || log > ZLFS_CLUSTER_LOG_MAX)
		return fail(why, len, "cluster: log %u out of range [%u, %u]", log,
			    ZLFS_CLUSTER_LOG_MIN, ZLFS_CLUSTER_LOG_MAX);
	cap = (size_t)ZLFS_BLOCK_SIZE << log;
	if (!k || k >= 1u << log) { /* before the header is read: K blocks must hold it */
		ret = fail(why, len, "cluster: %u stored blocks, out of range [1, %u]", k,
			   (1u << log) - 1);
	} else {
		memcpy(&h, in, sizeof(h));
		ret = check_stored(at, in, k, log, &h, why, len);
	}
	if (!ret && h.alg == ZLFS_CLUSTER_LZ4)
		ret = unlz4(src, le32_get(h.clen), out, cap, why, len);
	else if (!ret)
		ret = unzstd(cx, src, le32_get(h.clen), out, cap, why, len);
	if (ret)
		memset(out, 0, cap); /* nothing half-decoded reaches a reader */
	return ret;
}
