/*
 * fuzz_mutate.c - the black-box mode's mutator (tests/fuzz_blackbox.py) and its explainer:
 *   fuzz_mutate mutate IN OUT SEED [NOPS] [--seal]   copy image IN to OUT (sparse) and apply
 *       NOPS (default 1-6) mutations generated from SEED; one line per mutation on stdout.
 *       --seal: resealed mutations only (no torn block, no raw byte).
 *   fuzz_mutate set IN OUT KIND FIELD[IDX]=VALUE [WHERE]   copy IN to OUT and set one field,
 *       resealed (fuzz_mut.h, fz_set: KIND emu_hdr, emu_zent, super, cp_head, inode, ...;
 *       WHERE the zone or device block; the newest superblock or pack by default).
 *   fuzz_mutate list IMG      the metadata blocks found: device block, kind, nid, inode mode.
 *   fuzz_mutate explain A B   how image B differs from A: region, block, structure, fields.
 * Exit 0 on success, 1 on failure, 2 on a usage error.
 * May call: fuzz_mut.h, libc.
 */
#include "fuzz_mut.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copy IN to OUT, leaving holes where IN reads as zeros. */
static int copy_sparse(const char *in, const char *out)
{
	static uint8_t buf[1 << 16], zero[4096];
	int fi = open(in, O_RDONLY), fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), ret = 0;
	off_t off = 0, end = fi >= 0 ? lseek(fi, 0, SEEK_END) : -1;
	ssize_t n;

	if (fi < 0 || fo < 0 || end < 0 || ftruncate(fo, end))
		ret = -1;
	while (!ret && (n = pread(fi, buf, sizeof(buf), off)) > 0) {
		for (ssize_t b = 0; b < n; b += 4096) {
			size_t len = (size_t)(n - b < 4096 ? n - b : 4096);

			if (memcmp(buf + b, zero, len) &&
			    pwrite(fo, buf + b, len, off + b) != (ssize_t)len)
				ret = -1;
		}
		off += n;
	}
	if (fi >= 0)
		close(fi);
	if (fo >= 0 && close(fo))
		ret = -1;
	return ret;
}

static int mutate(const char *in, const char *out, uint64_t seed, int nops, int seal_only)
{
	struct fz_edit e = {.n = 0};
	struct fz_img img;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
	char desc[256];
	int ret;

	if (copy_sparse(in, out)) {
		fprintf(stderr, "fuzz_mutate: copy %s to %s: %s\n", in, out, strerror(errno));
		return 1;
	}
	if (fz_img_open(&img, out)) {
		fz_img_close(&img);
		return 1;
	}
	for (int i = 0; i < 3; i++) /* mix the seed */
		fz_gen_op(&s, (uint8_t[FZ_OP_SIZE]){0}, 1);
	if (nops <= 0)
		nops = 1 + (int)(s >> 40) % 6;
	for (int i = 0; i < nops; i++) {
		uint8_t op[FZ_OP_SIZE];

		fz_gen_op(&s, op, !seal_only);
		fz_apply(&img, &e, op, desc, sizeof(desc));
		printf("%s\n", desc[0] ? desc : "(no change)");
	}
	ret = fz_edit_commit(&img, &e);
	fz_edit_free(&e);
	fz_img_close(&img);
	return ret ? 1 : 0;
}

static int set_field(int argc, char **argv)
{
	char field[64] = "";
	unsigned long long val;
	unsigned idx = 0;
	struct fz_edit e = {.n = 0};
	struct fz_img img;
	const char *eq = strchr(argv[5], '=');
	int ret;

	if (!eq || sscanf(argv[5], "%63[a-z_.0-9]", field) != 1)
		return 2;
	if (strchr(field, '[') || strchr(argv[5], '['))
		sscanf(strchr(argv[5], '['), "[%u]", &idx);
	val = strtoull(eq + 1, NULL, 0);
	if (copy_sparse(argv[2], argv[3]) || fz_img_open(&img, argv[3])) {
		fz_img_close(&img);
		return 1;
	}
	ret = fz_set(&img, &e, argv[4], field, idx, val,
		     argc > 6 ? (uint32_t)strtoul(argv[6], NULL, 0) : 0);
	if (ret)
		fprintf(stderr, "fuzz_mutate: %s %s: %s\n", argv[4], field, strerror(-ret));
	else
		ret = fz_edit_commit(&img, &e);
	fz_edit_free(&e);
	fz_img_close(&img);
	return ret ? 1 : 0;
}

static int list_blocks(const char *path)
{
	struct fz_img img;
	uint8_t b[ZLFS_BLOCK_SIZE];

	if (fz_img_open(&img, path)) {
		fz_img_close(&img);
		return 1;
	}
	printf("newest superblock at %u, newest checkpoint pack at %u (%u blocks)\n", img.sb_blk,
	       img.pack_head, img.pack_blocks);
	for (uint32_t i = 0; i < img.nmeta; i++) {
		const struct zlfs_inode *in = (const void *)b;

		if (fz_pread(img.fd, b, sizeof(b), img.data_off + (uint64_t)img.meta[i] * sizeof(b)))
			break;
		printf("%u %s index %u ino %u", img.meta[i], zlfs_kind_name(img.kind[i]),
		       le32_get(in->hdr.index), le32_get(in->hdr.ino));
		if (img.kind[i] == ZLFS_KIND_INODE)
			printf(" mode %o size %llu", le32_get(in->mode),
			       (unsigned long long)le64_get(in->size));
		printf("\n");
	}
	fz_img_close(&img);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "list"))
		return list_blocks(argv[2]);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "set"))
		return set_field(argc, argv);
	if (argc >= 5 && !strcmp(argv[1], "mutate")) {
		int seal = argc > 5 && !strcmp(argv[argc - 1], "--seal");
		int nops = argc > 5 + seal ? atoi(argv[5]) : 0;

		return mutate(argv[2], argv[3], strtoull(argv[4], NULL, 0), nops, seal);
	}
	if (argc == 4 && !strcmp(argv[1], "explain")) {
		int n = fz_explain(argv[2], argv[3], stdout);

		return n < 0 ? 1 : 0;
	}
	fprintf(stderr, "usage: fuzz_mutate mutate IN OUT SEED [NOPS] [--seal]\n"
			"       fuzz_mutate set IN OUT KIND FIELD[IDX]=VALUE [WHERE]\n"
			"       fuzz_mutate list IMG\n"
			"       fuzz_mutate explain A B\n");
	return 2;
}
