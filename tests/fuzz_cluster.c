/*
 * fuzz_cluster.c - fuzz target: the stored blocks of a compressed cluster are device input
 * (and a hostile image can seal any of them, the seed being on the device), so
 * cluster_decompress must answer 0 or -EIO - never crash, never touch a byte outside its
 * buffers - whatever they hold. Each input is:
 *   byte 0   the cluster's size (2 + bits 0-2 % 5: 4 to 64 blocks); bit 6: make the header
 *            one its checks pass (magic, log, clen = what follows it, the algorithm from
 *            bit 3), bit 7: seal its hash over whatever follows (else nearly every input
 *            stops at the header or the hash, and the decoders behind them are what matters);
 *   then     the stored blocks, zero-padded to whole blocks (k of them, at most 2^n - 1),
 *            copied into a buffer of exactly k blocks so that the sanitizers see an overrun.
 * After -EIO the output must be all zeros.
 *
 * Built with libFuzzer (LLVMFuzzerTestOneInput) when ZLFS_FUZZ is on and the compiler is
 * clang, and always as a plain driver that replays files named on the command line, or runs
 * N generated inputs (-nN; ctest fuzz_cluster_sweep): real clusters of both algorithms with a
 * few bytes changed, most of them resealed.
 * May call: cluster.h, format.h, libc.
 */
#include "cluster.h"
#include "format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS ZLFS_BLOCK_SIZE
static const struct cluster_place at = {.seed = 0x5eedULL, .ino = 11, .index = 3};
static struct cluster_ctx *cx;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_cluster: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t log, k;
	uint8_t *in, *out;
	size_t len;
	int ret;

	if (!cx && !(cx = cluster_ctx_new()))
		die("no memory for a context");
	if (!size)
		return 0;
	log = ZLFS_CLUSTER_LOG_MIN + (data[0] & 7u) % 5;
	len = size - 1 < ((size_t)BS << log) - BS ? size - 1 : ((size_t)BS << log) - BS;
	k = (uint32_t)((len + BS - 1) / BS);
	in = calloc(k ? k : 1, BS);
	out = malloc((size_t)BS << log);
	if (!in || !out)
		die("no memory for buffers");
	memcpy(in, data + 1, len);
	if ((data[0] & 0xc0) && len > sizeof(struct zlfs_cluster_hdr)) {
		struct zlfs_cluster_hdr h;

		memcpy(&h, in, sizeof(h));
		if (data[0] & 0x40)
			h = (struct zlfs_cluster_hdr){
				.magic = le16_put(ZLFS_CLUSTER_MAGIC), .log = (uint8_t)log,
				.alg = data[0] & 8 ? ZLFS_CLUSTER_ZSTD : ZLFS_CLUSTER_LZ4,
				.clen = le32_put((uint32_t)(len - sizeof(h)))};
		if ((data[0] & 0x80) && le32_get(h.clen) <= (size_t)k * BS - sizeof(h)) /* it reads clen */
			h.hash = le64_put(zlfs_cluster_hash(&h, in + sizeof(h), at.seed, at.ino,
							    at.index));
		memcpy(in, &h, sizeof(h));
	}
	ret = cluster_decompress(cx, &at, in, k, log, out, NULL, 0);
	if (ret && ret != -EIO)
		die("an answer other than 0 or -EIO");
	for (size_t i = 0; ret && i < ((size_t)BS << log); i++)
		if (out[i])
			die("output left after -EIO");
	free(in);
	free(out);
	return 0;
}

#ifndef ZLFS_LIBFUZZER
static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A real cluster (runs of a few byte values: it compresses) with a few bytes changed. */
static size_t gen_input(uint64_t *s, uint8_t *buf, uint8_t *raw)
{
	uint32_t log = ZLFS_CLUSTER_LOG_MIN + (uint32_t)(next(s) % 5);
	unsigned alg = next(s) % 2 ? ZLFS_CLUSTER_LZ4 : ZLFS_CLUSTER_ZSTD;
	size_t n = 0, len;
	int k;

	while (n < ((size_t)BS << log)) {
		size_t run = 1 + next(s) % 64;
		uint8_t v = (uint8_t)(next(s) % 4 * 37);

		run = run < ((size_t)BS << log) - n ? run : ((size_t)BS << log) - n;
		memset(raw + n, v, run);
		n += run;
	}
	k = cluster_compress(cx, &at, alg, 0, raw, log, buf + 1);
	if (k < 1)
		die("a generated cluster did not compress");
	len = (size_t)k * BS;
	buf[0] = (uint8_t)((log - ZLFS_CLUSTER_LOG_MIN) | (next(s) % 8 ? 0x80 : 0));
	for (unsigned j = 0, m = 1 + (unsigned)(next(s) % 4); j < m; j++)
		buf[1 + next(s) % len] = (uint8_t)next(s);
	return 1 + len;
}

static int replay_file(const char *path, uint8_t *buf, size_t max)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		perror(path);
		return 1;
	}
	n = fread(buf, 1, max, f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 && !strncmp(argv[1], "-n", 2) ? atol(argv[1] + 2) : 0;
	size_t max = 1 + ((size_t)BS << ZLFS_CLUSTER_LOG_MAX);
	uint8_t *buf = malloc(max), *raw = malloc((size_t)BS << ZLFS_CLUSTER_LOG_MAX);
	uint64_t s = 0x9e3779b97f4a7c15ull;
	int rc = 0;

	if (!buf || !raw || !(cx = cluster_ctx_new()))
		die("no memory");
	if (argc > 1 && !iters) {
		for (int i = 1; i < argc; i++)
			rc |= replay_file(argv[i], buf, max);
	} else {
		for (long j = 0; j < (iters ? iters : 1000); j++)
			LLVMFuzzerTestOneInput(buf, gen_input(&s, buf, raw));
		printf("fuzz_cluster: %ld inputs, no crash\n", iters ? iters : 1000);
	}
	cluster_ctx_free(cx);
	free(buf);
	free(raw);
	return rc;
}
#endif
