/*
 * cluster.h - the codec of compressed clusters (cluster.c): 2^n blocks of a file to k stored
 * blocks under struct zlfs_cluster_hdr and back, with LZ4 or zstd (docs/compression.md).
 *
 * Pure computation over caller buffers: no device, no lock, no global state. Each thread
 * that compresses or decompresses owns a struct cluster_ctx (the libraries' contexts and a
 * probe buffer) and passes it in.
 */
#ifndef ZLFS_CLUSTER_H
#define ZLFS_CLUSTER_H

#include "format.h"

#include <stddef.h>
#include <stdint.h>

struct cluster_ctx;

/* A context for one thread at a time; NULL when memory is short. */
struct cluster_ctx *cluster_ctx_new(void);
void cluster_ctx_free(struct cluster_ctx *cx);

/* Where a cluster belongs: the filesystem's checksum seed (zlfs_sb_info.seed), the inode and
 * the cluster's index in the file (block index >> cluster_log). Its hash binds it there. */
struct cluster_place {
	uint64_t seed;
	uint32_t ino;
	uint64_t index;
};

/* cluster_compress's answer when the compressed form would not save a block. */
#define CLUSTER_RAW 0

/* The first block alone must compress to this many bytes (7/8 of a block) or the cluster is
 * stored raw without trying the rest: random data costs one block's LZ4 pass, not 2^n. */
#define CLUSTER_PROBE_MAX (ZLFS_BLOCK_SIZE - ZLFS_BLOCK_SIZE / 8)

/* The zstd levels cluster_compress takes (0: zstd's default); LZ4 takes only 0. */
int cluster_level_ok(unsigned alg, int level);
/* The mount option's value, "lz4", "zstd", "zstd:LEVEL" or "none": ALG (0 for none) and
 * LEVEL, or -EINVAL. */
int cluster_opt_parse(const char *s, unsigned *alg, int *level);

/* compress_extension= and nocompress_extension=: suffixes separated by colons, each 1 to
 * CLUSTER_EXT_LEN bytes without '/' (a dot inside, "tar.gz", is fine), at most CLUSTER_EXT_MAX
 * of them; "*" in a list stands for every name. */
#define CLUSTER_EXT_MAX 16
#define CLUSTER_EXT_LEN 15
#define CLUSTER_EXT_LIST (CLUSTER_EXT_MAX * (CLUSTER_EXT_LEN + 1))
/* 0, or -EINVAL when LIST breaks those rules, or -EEXIST when one of its suffixes is in OTHER
 * too (may be NULL): a name cannot be both compressed and not. */
int cluster_ext_check(const char *list, const char *other);
/* Whether NAME ends in "." and one of LIST's suffixes (ASCII case ignored), with something
 * before the dot, or LIST holds "*". LIST may be NULL or empty: no. */
int cluster_ext_match(const char *list, const char *name);

/* Compress the 2^LOG blocks at IN with ALG (enum zlfs_cluster_alg) at LEVEL into OUT, which
 * holds 2^LOG - 1 blocks. Returns k, 1 <= k < 2^LOG: OUT's first k blocks are the cluster's
 * stored form (header, data, zeros to the end of block k); or CLUSTER_RAW when that would
 * not save a block, or when the library failed (OUT's content is then undefined); or -EINVAL
 * (ALG, LEVEL or LOG out of range). */
int cluster_compress(struct cluster_ctx *cx, const struct cluster_place *at, unsigned alg,
		     int level, const void *in, uint32_t log, void *out);
/* cluster_compress without the first-block probe when PROBE is 0: for a cluster whose
 * neighbour in the same write just compressed, the probe would compress its first block twice
 * (a quarter more LZ4 work on a cluster of 4 blocks). The answer differs only where the probe
 * would have said raw and the whole cluster saves a block (then it is stored compressed). */
int cluster_compress_probed(struct cluster_ctx *cx, const struct cluster_place *at,
			    unsigned alg, int level, const void *in, uint32_t log, void *out,
			    int probe);

/* Decompress the K stored blocks at IN of a cluster of 2^LOG blocks (LOG the inode's
 * cluster_log) into OUT, 2^LOG blocks. The header is checked (zlfs_cluster_hdr_check), then
 * the hash against AT, then the zeros after the data; the output is bounded to exactly 2^LOG
 * blocks. 0, or -EIO with WHY (may be NULL) saying what failed and OUT zeroed (left alone
 * when LOG is out of range: it sizes OUT). */
int cluster_decompress(struct cluster_ctx *cx, const struct cluster_place *at, const void *in,
		       uint32_t k, uint32_t log, void *out, char *why, size_t len);

#endif
