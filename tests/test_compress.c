/*
 * test_compress.c - the codec of compressed clusters (fs/base/cluster.c) on its own: round
 * trips for LZ4 and zstd at every cluster size, what is stored raw, and stored blocks that are
 * damaged or hostile (a valid hash is no proof: the seed is in the superblock) answered with
 * -EIO, the output zeroed, and no read or write outside the buffers (every buffer is its exact
 * size on the heap, so the sanitizer build sees any overrun). No device is opened.
 */
#include "testutil.h"

#include "cluster.h"
#include "format.h"

#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define BS ZLFS_BLOCK_SIZE

static const struct cluster_place here = {.seed = 0x1234567890abcdefULL, .ino = 42, .index = 7};
static struct cluster_ctx *cx;
static char why[256];

static void setup(void)
{
	cx = cluster_ctx_new();
	ck_assert_ptr_nonnull(cx);
}

static void teardown(void) { cluster_ctx_free(cx); }

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd(&seed) >> 32);
}

/* Words from a small vocabulary: compresses about 2-4x, as text does. */
static void fill_text(uint8_t *p, size_t n, uint64_t seed)
{
	static const char *const w[] = {"zoned ", "block ", "cluster ", "log ", "segment ",
					"checkpoint ", "node ", "inode ", "garbage ", "the "};
	size_t i = 0;

	while (i < n) {
		const char *s = w[rnd(&seed) % 10];
		size_t l = strlen(s) < n - i ? strlen(s) : n - i;

		memcpy(p + i, s, l);
		i += l;
	}
}

/* A test's buffers, each of exactly its size in blocks so that an overrun is the sanitizer's:
 * the cluster, its stored form and the output. */
struct bufs {
	uint8_t *in, *st, *out;
};

static uint8_t *blocks(uint32_t n)
{
	uint8_t *p = malloc((size_t)n * BS);

	ck_assert_ptr_nonnull(p);
	return p;
}

static struct bufs bufs_new(uint32_t in, uint32_t st, uint32_t out)
{
	return (struct bufs){blocks(in), blocks(st), blocks(out)};
}

static void bufs_free(struct bufs *b)
{
	free(b->in);
	free(b->st);
	free(b->out);
}

/* Text of 2^LOG blocks (SEED) into B's input, compressed with ALG at LEVEL into its stored
 * form: k, at least 1. */
static int pack_text(struct bufs *b, unsigned alg, int level, uint32_t log, uint64_t seed)
{
	int k;

	fill_text(b->in, (size_t)BS << log, seed);
	k = cluster_compress(cx, &here, alg, level, b->in, log, b->st);
	ck_assert_msg(k >= 1 && k < 1 << log, "alg %u log %u: k = %d", alg, log, k);
	return k;
}

/* Recompute the header's hash after a test changed the stored form, as a hostile image would. */
static void reseal(uint8_t *st, const struct cluster_place *at)
{
	struct zlfs_cluster_hdr h;

	memcpy(&h, st, sizeof(h));
	h.hash = le64_put(zlfs_cluster_hash(&h, st + sizeof(h), at->seed, at->ino, at->index));
	memcpy(st, &h, sizeof(h));
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Decompress the K blocks at ST (copied into a buffer of exactly K blocks) for a cluster of
 * 2^LOG: the answer, with OUT zeroed whenever it is -EIO. */
static int unpack(const uint8_t *st, int k, uint32_t log, const struct cluster_place *at,
		  uint8_t *out)
{
	uint8_t *in = malloc(k ? (size_t)k * BS : 1);
	/* a LOG out of range sizes nothing: OUT is then left alone */
	size_t cap = log >= ZLFS_CLUSTER_LOG_MIN && log <= ZLFS_CLUSTER_LOG_MAX ? (size_t)BS << log
										  : 0;
	int ret;

	memcpy(in, st, (size_t)k * BS);
	memset(out, 0xa5, cap);
	ret = cluster_decompress(cx, at, in, (uint32_t)k, log, out, why, sizeof(why));
	free(in);
	if (ret)
		ck_assert_msg(all_zero(out, cap), "output not zeroed after %d", ret);
	return ret;
}

/* B's stored form of K blocks decompresses to its input, at the place it was made for. */
static void round_trips(const struct bufs *b, int k, uint32_t log)
{
	ck_assert_msg(unpack(b->st, k, log, &here, b->out) == 0, "k %d log %u: %s", k, log, why);
	ck_assert_msg(!memcmp(b->in, b->out, (size_t)BS << log), "k %d log %u: differs", k, log);
}

START_TEST(t_round_trip)
{
	for (unsigned alg = ZLFS_CLUSTER_LZ4; alg < ZLFS_CLUSTER_ALG_MAX; alg++)
		for (uint32_t log = ZLFS_CLUSTER_LOG_MIN; log <= ZLFS_CLUSTER_LOG_MAX; log++) {
			uint32_t n = 1u << log;
			struct bufs b = bufs_new(n, n - 1, n);
			uint8_t *st = b.st;
			int k = pack_text(&b, alg, alg == ZLFS_CLUSTER_ZSTD ? 3 : 0, log, log * 31 + alg);
			struct zlfs_cluster_hdr h;

			ck_assert_msg(k <= (int)n / 2, "text saved less than half: k = %d of %u", k, n);
			memcpy(&h, st, sizeof(h));
			ck_assert_uint_eq(h.alg, alg);
			ck_assert_uint_eq(h.log, log);
			ck_assert(all_zero(st + sizeof(h) + le32_get(h.clen),
					   (size_t)k * BS - sizeof(h) - le32_get(h.clen)));
			round_trips(&b, k, log);
			bufs_free(&b);
		}
}
END_TEST

START_TEST(t_zstd_levels)
{
	struct bufs b = bufs_new(16, 15, 16);
	uint8_t *in = b.in, *st = b.st;
	int k1, k19;

	k1 = pack_text(&b, ZLFS_CLUSTER_ZSTD, 1, 4, 5);
	round_trips(&b, k1, 4);
	k19 = cluster_compress(cx, &here, ZLFS_CLUSTER_ZSTD, 19, in, 4, st);
	ck_assert_int_ge(k19, 1);
	ck_assert_int_le(k19, k1);
	round_trips(&b, k19, 4);
	ck_assert_int_eq(cluster_compress(cx, &here, ZLFS_CLUSTER_ZSTD, ZSTD_maxCLevel() + 1, in, 4,
					  st), -EINVAL);
	ck_assert_int_eq(cluster_compress(cx, &here, ZLFS_CLUSTER_ZSTD, -1, in, 4, st), -EINVAL);
	ck_assert_int_eq(cluster_compress(cx, &here, ZLFS_CLUSTER_LZ4, 1, in, 4, st), -EINVAL);
	ck_assert_int_eq(cluster_compress(cx, &here, 0, 0, in, 4, st), -EINVAL);
	ck_assert_int_eq(cluster_compress(cx, &here, ZLFS_CLUSTER_ALG_MAX, 0, in, 4, st), -EINVAL);
	ck_assert_int_eq(cluster_compress(cx, &here, ZLFS_CLUSTER_LZ4, 0, in, 1, st), -EINVAL);
	ck_assert_int_eq(cluster_compress(cx, &here, ZLFS_CLUSTER_LZ4, 0, in, 7, st), -EINVAL);
	bufs_free(&b);
}
END_TEST

/* Random data does not save a block: stored raw at every size, by both algorithms. Zeros
 * take one block. */
START_TEST(t_random_raw_zeros_one_block)
{
	for (unsigned alg = ZLFS_CLUSTER_LZ4; alg < ZLFS_CLUSTER_ALG_MAX; alg++)
		for (uint32_t log = ZLFS_CLUSTER_LOG_MIN; log <= ZLFS_CLUSTER_LOG_MAX; log++) {
			uint32_t n = 1u << log;
			struct bufs b = bufs_new(n, n - 1, n);
			uint8_t *in = b.in, *st = b.st, *out = b.out;

			fill_random(in, (size_t)n * BS, log + 100 * alg);
			ck_assert_int_eq(cluster_compress(cx, &here, alg, 0, in, log, st), CLUSTER_RAW);
			memset(in, 0, (size_t)n * BS);
			ck_assert_int_eq(cluster_compress(cx, &here, alg, 0, in, log, st), 1);
			ck_assert_int_eq(unpack(st, 1, log, &here, out), 0);
			ck_assert(all_zero(out, (size_t)n * BS));
			bufs_free(&b);
		}
}
END_TEST

/* The probe: a random first block ends the attempt (zeros after it would have compressed:
 * the probe's documented cost); a compressible first block goes on to the whole cluster,
 * which is raw when the rest does not save a block. */
START_TEST(t_probe)
{
	struct bufs b = bufs_new(4, 3, 1);
	uint8_t *in = b.in, *st = b.st;

	for (unsigned alg = ZLFS_CLUSTER_LZ4; alg < ZLFS_CLUSTER_ALG_MAX; alg++) {
		memset(in, 0, 4 * BS);
		fill_random(in, BS, 9);
		ck_assert_int_eq(cluster_compress(cx, &here, alg, 0, in, 2, st), CLUSTER_RAW);
		memset(in, 0, BS);
		fill_random(in + BS, 3 * BS, 10);
		ck_assert_int_eq(cluster_compress(cx, &here, alg, 0, in, 2, st), CLUSTER_RAW);
		fill_text(in, BS, 11);
		memset(in + BS, 0, 3 * BS);
		ck_assert_int_eq(cluster_compress(cx, &here, alg, 0, in, 2, st), 1);
	}
	bufs_free(&b);
}
END_TEST

/* Every byte of the stored blocks (header, data, zero tail) changed alone: -EIO. */
START_TEST(t_each_byte_corrupted)
{
	for (unsigned alg = ZLFS_CLUSTER_LZ4; alg < ZLFS_CLUSTER_ALG_MAX; alg++) {
		struct bufs b = bufs_new(4, 3, 4);
		uint8_t *st = b.st, *out = b.out;
		int k;

		k = pack_text(&b, alg, 0, 2, alg);
		for (size_t i = 0; i < (size_t)k * BS; i++)
			for (unsigned x = 1; x < 256; x <<= 7) { /* 0x01 and 0x80 */
				st[i] ^= (uint8_t)x;
				ck_assert_msg(unpack(st, (uint32_t)k, 2, &here, out) == -EIO,
					      "alg %u: byte %zu ^ 0x%x accepted", alg, i, x);
				st[i] ^= (uint8_t)x;
			}
		round_trips(&b, k, 2);
		bufs_free(&b);
	}
}
END_TEST

/* The hash binds a cluster to its inode, its index and the filesystem. */
START_TEST(t_place_bound)
{
	struct bufs b = bufs_new(8, 7, 8);
	uint8_t *st = b.st, *out = b.out;
	struct cluster_place other;
	int k;

	k = pack_text(&b, ZLFS_CLUSTER_LZ4, 0, 3, 3);
	other = here;
	other.index++;
	ck_assert_int_eq(unpack(st, (uint32_t)k, 3, &other, out), -EIO);
	ck_assert_msg(strstr(why, "hash"), "%s", why);
	other = here;
	other.ino++;
	ck_assert_int_eq(unpack(st, (uint32_t)k, 3, &other, out), -EIO);
	other = here;
	other.seed ^= 1;
	ck_assert_int_eq(unpack(st, (uint32_t)k, 3, &other, out), -EIO);
	round_trips(&b, k, 3);
	bufs_free(&b);
}
END_TEST

/* Lengths and counts past their bounds, hash recomputed so only the bound can refuse them. */
START_TEST(t_length_bounds)
{
	struct bufs b = bufs_new(8, 8, 16);
	uint8_t *st = b.st, *out = b.out; /* st: k = 8 is read; out: log 4 */
	struct zlfs_cluster_hdr h;
	int k;

	k = pack_text(&b, ZLFS_CLUSTER_LZ4, 0, 3, 4);
	ck_assert_int_ge(k, 2);
	memcpy(&h, st, sizeof(h));
	ck_assert_int_eq(unpack(st, 0, 3, &here, out), -EIO);   /* no block: header never read */
	ck_assert_int_eq(unpack(st, k - 1, 3, &here, out), -EIO); /* clen needs k */
	ck_assert_msg(strstr(why, "clen"), "%s", why);
	ck_assert_int_eq(unpack(st, k + 1, 3, &here, out), -EIO); /* more blocks than clen needs */
	ck_assert_int_eq(unpack(st, 8, 3, &here, out), -EIO);   /* k must be below 2^n */
	ck_assert_int_eq(unpack(st, k, 4, &here, out), -EIO);   /* the inode's log is not 3 */
	ck_assert_msg(strstr(why, "header log"), "%s", why);
	ck_assert_int_eq(unpack(st, k, 7, &here, out), -EIO);   /* past LOG_MAX */
	ck_assert_int_eq(unpack(st, k, 1, &here, out), -EIO);
	for (int over = 0; over < 2; over++) { /* clen 0, and one past k blocks */
		struct zlfs_cluster_hdr bad = h;

		bad.clen = le32_put(over ? ZLFS_CLUSTER_CLEN_MAX(k) + 1 : 0);
		memcpy(st, &bad, sizeof(bad));
		ck_assert_int_eq(unpack(st, k, 3, &here, out), -EIO);
		ck_assert_msg(strstr(why, "clen"), "%s", why);
	}
	/* shorter and longer than the LZ4 data, within the blocks: LZ4 stops at its input */
	for (int d = -300; d <= 300; d += 600) {
		struct zlfs_cluster_hdr bad = h;

		bad.clen = le32_put((uint32_t)((int)le32_get(h.clen) + d));
		if (le32_get(bad.clen) <= ZLFS_CLUSTER_CLEN_MAX(k - 1) ||
		    le32_get(bad.clen) > ZLFS_CLUSTER_CLEN_MAX(k))
			continue;
		memcpy(st, &bad, sizeof(bad));
		reseal(st, &here);
		ck_assert_int_eq(unpack(st, k, 3, &here, out), -EIO);
	}
	h.alg = ZLFS_CLUSTER_ALG_MAX; /* an unknown algorithm, sealed */
	memcpy(st, &h, sizeof(h));
	reseal(st, &here);
	ck_assert_int_eq(unpack(st, k, 3, &here, out), -EIO);
	ck_assert_msg(strstr(why, "alg"), "%s", why);
	h.alg = ZLFS_CLUSTER_ZSTD;     /* LZ4 data read as zstd, sealed */
	memcpy(st, &h, sizeof(h));
	reseal(st, &here);
	ck_assert_int_eq(unpack(st, k, 3, &here, out), -EIO);
	bufs_free(&b);
}
END_TEST

/* Write DATA of CLEN bytes as a sealed cluster of log LOG with ALG into ST (k blocks, k back). */
static uint32_t forge(uint8_t *st, unsigned alg, uint32_t log, const void *data, size_t clen)
{
	struct zlfs_cluster_hdr h = {.magic = le16_put(ZLFS_CLUSTER_MAGIC), .alg = (uint8_t)alg,
				     .log = (uint8_t)log, .clen = le32_put((uint32_t)clen)};
	uint32_t k = (uint32_t)((clen + sizeof(h) + BS - 1) / BS);

	ck_assert_uint_lt(k, 1u << log);
	memset(st, 0, (size_t)k * BS);
	memcpy(st, &h, sizeof(h));
	memcpy(st + sizeof(h), data, clen);
	reseal(st, &here);
	return k;
}

/* Hostile frames with valid hashes: zstd claiming more (or less, or no) content than the
 * cluster, two frames, LZ4 data that decodes past the cluster or short of it. */
START_TEST(t_hostile_frames)
{
	uint8_t *big = calloc(8, BS), *st = blocks(3), *out = blocks(4), *z = malloc(BS);
	ZSTD_CCtx *zc = ZSTD_createCCtx();
	size_t n, m;
	uint32_t k;

	n = ZSTD_compressCCtx(zc, z, BS, big, 8 * BS, 1); /* 32 KiB of zeros for a 16 KiB cluster */
	ck_assert(!ZSTD_isError(n));
	k = forge(st, ZLFS_CLUSTER_ZSTD, 2, z, n);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), -EIO);
	ck_assert_msg(strstr(why, "content size"), "%s", why);
	n = ZSTD_compressCCtx(zc, z, BS, big, 2 * BS, 1);     /* 8 KiB: less than the cluster */
	k = forge(st, ZLFS_CLUSTER_ZSTD, 2, z, n);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), -EIO);
	m = ZSTD_compressCCtx(zc, z + n, BS - n, big, 2 * BS, 1); /* two frames of 8 KiB */
	k = forge(st, ZLFS_CLUSTER_ZSTD, 2, z, n + m);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), -EIO);
	ck_assert_int_eq(ZSTD_CCtx_setParameter(zc, ZSTD_c_contentSizeFlag, 0), 0);
	n = ZSTD_compress2(zc, z, BS, big, 4 * BS);           /* the right size, not declared */
	ck_assert(!ZSTD_isError(n));
	k = forge(st, ZLFS_CLUSTER_ZSTD, 2, z, n);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), -EIO);
	n = (size_t)LZ4_compress_default((char *)big, (char *)z, 8 * BS, BS); /* LZ4, 32 KiB */
	ck_assert_uint_gt(n, 0);
	k = forge(st, ZLFS_CLUSTER_LZ4, 2, z, n);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), -EIO);
	n = (size_t)LZ4_compress_default((char *)big, (char *)z, 2 * BS, BS); /* LZ4, 8 KiB */
	k = forge(st, ZLFS_CLUSTER_LZ4, 2, z, n);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), -EIO);
	n = (size_t)LZ4_compress_default((char *)big, (char *)z, 4 * BS, BS); /* exact: accepted */
	k = forge(st, ZLFS_CLUSTER_LZ4, 2, z, n);
	ck_assert_int_eq(unpack(st, k, 2, &here, out), 0);
	ck_assert(all_zero(out, 4 * BS));
	ZSTD_freeCCtx(zc);
	free(big);
	free(st);
	free(out);
	free(z);
}
END_TEST

/* Random damage to the data with the hash recomputed: 0 or -EIO, never a sanitizer report. */
START_TEST(t_resealed_damage)
{
	uint64_t seed = 77;

	for (unsigned alg = ZLFS_CLUSTER_LZ4; alg < ZLFS_CLUSTER_ALG_MAX; alg++) {
		struct bufs b = bufs_new(16, 15, 16);
		uint8_t *st = b.st, *out = b.out, *good = blocks(15);
		struct zlfs_cluster_hdr h;
		int k = pack_text(&b, alg, 0, 4, 8), ret;

		memcpy(good, st, (size_t)k * BS);
		memcpy(&h, good, sizeof(h));
		for (int round = 0; round < 3000; round++) {
			memcpy(st, good, (size_t)k * BS);
			for (int j = 0; j < 1 + round % 4; j++)
				st[sizeof(h) + rnd(&seed) % le32_get(h.clen)] = (uint8_t)rnd(&seed);
			reseal(st, &here);
			ret = unpack(st, (uint32_t)k, 4, &here, out);
			ck_assert_msg(ret == 0 || ret == -EIO, "round %d: %d", round, ret);
		}
		bufs_free(&b);
		free(good);
	}
}
END_TEST

/* The mount option's values: the four forms, and everything near them refused. */
START_TEST(t_option_parse)
{
	static const char *const bad[] = {"", "LZ4", "lz4:1", "zstd:", "zstd:0", "zstd:23",
					  "zstd:-1", "zstd:+3", "zstd: 3", "zstd:3x", "zstd:99999999999",
					  "nonex", "none:1", "zstd3", "gzip"};
	unsigned alg = 9;
	int level = 9;

	ck_assert_int_eq(cluster_opt_parse("none", &alg, &level), 0);
	ck_assert_uint_eq(alg, 0);
	ck_assert_int_eq(level, 0);
	ck_assert_int_eq(cluster_opt_parse("lz4", &alg, &level), 0);
	ck_assert_uint_eq(alg, ZLFS_CLUSTER_LZ4);
	ck_assert_int_eq(cluster_opt_parse("zstd", &alg, &level), 0);
	ck_assert_uint_eq(alg, ZLFS_CLUSTER_ZSTD);
	ck_assert_int_eq(level, 0);
	ck_assert_int_eq(cluster_opt_parse("zstd:1", &alg, &level), 0);
	ck_assert_int_eq(level, 1);
	ck_assert_int_eq(cluster_opt_parse("zstd:22", &alg, &level), 0);
	ck_assert_uint_eq(alg, ZLFS_CLUSTER_ZSTD);
	ck_assert_int_eq(level, 22);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cluster_opt_parse(bad[i], &alg, &level) == -EINVAL, "'%s' taken", bad[i]);
}
END_TEST

/* compress_extension= lists: a suffix after a dot, case ignored, "*" for all; the rules of a
 * list (length, count, no slash, no empty suffix) and of two lists (no suffix in both). */
START_TEST(t_ext_lists)
{
	ck_assert_int_eq(cluster_ext_match("txt:log", "a.txt"), 1);
	ck_assert_int_eq(cluster_ext_match("txt:log", "A.LOG"), 1);
	ck_assert_int_eq(cluster_ext_match("txt:log", "a.txt.jpg"), 0);
	ck_assert_int_eq(cluster_ext_match("txt:log", "txt"), 0);
	ck_assert_int_eq(cluster_ext_match("txt:log", ".txt"), 0);
	ck_assert_int_eq(cluster_ext_match("txt:log", "atxt"), 0);
	ck_assert_int_eq(cluster_ext_match("tar.gz", "x.tar.gz"), 1);
	ck_assert_int_eq(cluster_ext_match("gz", "x.tar.gz"), 1);
	ck_assert_int_eq(cluster_ext_match("*", "anything"), 1);
	ck_assert_int_eq(cluster_ext_match("", "a.txt"), 0);
	ck_assert_int_eq(cluster_ext_match(NULL, "a.txt"), 0);
	ck_assert_int_eq(cluster_ext_check("txt:log", NULL), 0);
	ck_assert_int_eq(cluster_ext_check("txt:", NULL), 0);
	ck_assert_int_eq(cluster_ext_check("", NULL), -EINVAL);
	ck_assert_int_eq(cluster_ext_check(":txt", NULL), -EINVAL);
	ck_assert_int_eq(cluster_ext_check("a/b", NULL), -EINVAL);
	ck_assert_int_eq(cluster_ext_check("0123456789abcde", NULL), 0);
	ck_assert_int_eq(cluster_ext_check("0123456789abcdef", NULL), -EINVAL);
	ck_assert_int_eq(cluster_ext_check("a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p", NULL), 0);
	ck_assert_int_eq(cluster_ext_check("a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:q", NULL), -EINVAL);
	ck_assert_int_eq(cluster_ext_check("so:TXT", "zip:txt"), -EEXIST);
	ck_assert_int_eq(cluster_ext_check("so:txt", "zip:tx"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("compress");
	TCase *tc = tcase_create("compress");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, t_round_trip);
	tcase_add_test(tc, t_ext_lists);
	tcase_add_test(tc, t_zstd_levels);
	tcase_add_test(tc, t_random_raw_zeros_one_block);
	tcase_add_test(tc, t_probe);
	tcase_add_test(tc, t_each_byte_corrupted);
	tcase_add_test(tc, t_place_bound);
	tcase_add_test(tc, t_length_bounds);
	tcase_add_test(tc, t_hostile_frames);
	tcase_add_test(tc, t_resealed_damage);
	tcase_add_test(tc, t_option_parse);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
