/*
 * zlfs-compress-limit.c - the limit tools/bench-compress measures zlfs against: the blocks a
 * corpus takes when every file is cut into clusters and each cluster compressed by the
 * filesystem's own codec (fs/base/cluster.c), outside any filesystem.
 *
 *   zlfs-compress-limit --alg none|lz4|zstd[:LEVEL] [--cluster-blocks N] PATH...
 *
 * Every regular file under the PATHs (symbolic links not followed) is read in clusters of N
 * blocks (default 4, mkfs.zlfs's); the last cluster of a file is padded with zeros (the best
 * any layout can do with a file's tail). A cluster costs k blocks when cluster_compress gives
 * k, else its blocks that hold a byte of the file and are not all zero (zlfs stores all-zero
 * blocks of a raw cluster as holes); with --alg none, every such block. Prints one line of
 * JSON: files, user_bytes (the files' sizes), blocks (the files' blocks, rounded up),
 * stored_blocks, stored_bytes, ratio (stored_bytes / user_bytes), clusters and
 * compressed_clusters.
 *
 * Owns: the command line and the walk. May call: libc, cluster.h.
 */
#include "cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS ZLFS_BLOCK_SIZE

static struct {
	unsigned alg;
	int level;
	uint32_t log;
	struct cluster_ctx *cx;
	uint8_t *in, *out;
	uint64_t files, user_bytes, blocks, stored, clusters, compressed;
	int err;
} L = {.log = ZLFS_CLUSTER_LOG_MIN};

static int usage(FILE *f, int code)
{
	fprintf(f, "usage: zlfs-compress-limit --alg none|lz4|zstd[:LEVEL] [--cluster-blocks N] "
		   "PATH...\n"
		   "  the blocks the regular files under PATH take when each cluster of N blocks\n"
		   "  (4, 8, 16, 32 or 64; default 4) is compressed by zlfs's codec: one JSON line\n");
	return code;
}

static int zero(const uint8_t *b, size_t n)
{
	return !n || (!b[0] && !memcmp(b, b + 1, n - 1));
}

/* Blocks of the cluster at IN holding LEN bytes of the file that are not all zero. */
static uint64_t raw_blocks(const uint8_t *in, size_t len)
{
	uint64_t n = 0;

	for (size_t off = 0; off < len; off += BS)
		n += !zero(in + off, len - off < BS ? len - off : BS);
	return n;
}

static int one_file(const char *path, uint64_t ino)
{
	size_t cb = (size_t)BS << L.log;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t idx = 0;
	ssize_t got;

	if (fd < 0)
		return -errno;
	for (;; idx++) {
		size_t len = 0;

		while (len < cb && (got = read(fd, L.in + len, cb - len)) > 0)
			len += (size_t)got;
		if (got < 0) {
			int e = -errno;

			close(fd);
			return e;
		}
		if (!len)
			break;
		memset(L.in + len, 0, cb - len);
		L.user_bytes += len;
		L.blocks += (len + BS - 1) / BS;
		L.clusters++;
		if (L.alg && !zero(L.in, cb)) {
			struct cluster_place at = {0, (uint32_t)ino, idx};
			int k = cluster_compress(L.cx, &at, L.alg, L.level, L.in, L.log, L.out);

			if (k < 0) {
				close(fd);
				return k;
			}
			if (k > 0) {
				L.stored += (uint64_t)k;
				L.compressed++;
				if (len < cb)
					break;
				continue;
			}
		}
		L.stored += raw_blocks(L.in, len);
		if (len < cb)
			break;
	}
	close(fd);
	return 0;
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	int ret;

	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	ret = one_file(path, ++L.files);
	if (ret) {
		fprintf(stderr, "zlfs-compress-limit: %s: %s\n", path, strerror(-ret));
		L.err = 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1, alg_set = 0;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return usage(stdout, 0);
		if (i + 1 >= argc)
			return usage(stderr, 2);
		if (!strcmp(argv[i], "--alg")) {
			if (cluster_opt_parse(argv[++i], &L.alg, &L.level)) {
				fprintf(stderr, "zlfs-compress-limit: --alg takes none, lz4, zstd or "
						"zstd:LEVEL (1-22), not '%s'\n", argv[i]);
				return 2;
			}
			alg_set = 1;
		} else if (!strcmp(argv[i], "--cluster-blocks")) {
			char *end;
			unsigned long n = strtoul(argv[++i], &end, 10);

			for (L.log = ZLFS_CLUSTER_LOG_MIN; L.log <= ZLFS_CLUSTER_LOG_MAX; L.log++)
				if (n == 1ul << L.log)
					break;
			if (*end || L.log > ZLFS_CLUSTER_LOG_MAX) {
				fprintf(stderr, "zlfs-compress-limit: --cluster-blocks takes 4, 8, 16, "
						"32 or 64\n");
				return 2;
			}
		} else {
			return usage(stderr, 2);
		}
	}
	if (!alg_set || i >= argc)
		return usage(stderr, 2);
	L.cx = cluster_ctx_new();
	L.in = malloc((size_t)BS << L.log);
	L.out = malloc((size_t)BS << L.log);
	if (!L.cx || !L.in || !L.out) {
		fprintf(stderr, "zlfs-compress-limit: out of memory\n");
		return 1;
	}
	for (; i < argc; i++)
		if (nftw(argv[i], visit, 64, FTW_PHYS)) {
			fprintf(stderr, "zlfs-compress-limit: %s: %s\n", argv[i], strerror(errno));
			L.err = 1;
		}
	printf("{\"files\": %llu, \"user_bytes\": %llu, \"blocks\": %llu, \"stored_blocks\": %llu, "
	       "\"stored_bytes\": %llu, \"ratio\": %.4f, \"clusters\": %llu, "
	       "\"compressed_clusters\": %llu}\n",
	       (unsigned long long)L.files, (unsigned long long)L.user_bytes,
	       (unsigned long long)L.blocks, (unsigned long long)L.stored,
	       (unsigned long long)L.stored * BS,
	       L.user_bytes ? (double)L.stored * BS / (double)L.user_bytes : 0.0,
	       (unsigned long long)L.clusters, (unsigned long long)L.compressed);
	cluster_ctx_free(L.cx);
	free(L.in);
	free(L.out);
	return L.err;
}
