/*
 * compress_fs.h - what test_compress_fs.c's cases share with test_compress_runs.c: a model of
 * each file's bytes, writes through it, the image's mkfs and mount, and the checks.
 */
#ifndef ZLFS_TEST_COMPRESS_FS_H
#define ZLFS_TEST_COMPRESS_FS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#define CB (16u * 1024) /* mkfs's default cluster: 4 blocks */

/* The model: a file's expected bytes. */
struct mfile {
	const char *name;
	uint8_t *d;
	size_t size;
};

/* NAME's model (made empty on first use); its size changed (zeros past the old one). */
struct mfile *mf(const char *name);
void msize(struct mfile *f, size_t size);
void model_free(void);
/* Compressible text (a line numbered by its offset) or random bytes for file bytes OFF... */
void gen(uint8_t *b, size_t n, size_t off, int random);
/* NAME's path in the mount, and the mount's. */
const char *at(const char *name);
const char *mnt_dir(void);
/* Write N bytes (text or random) at OFF of NAME in requests of up to CHUNK, as the model. */
void put(const char *name, size_t off, size_t n, int random, size_t chunk, int flags);
/* Every file of the model reads back byte for byte, and has its size. */
void check_all(void);
/* NAME's stored bytes (st_blocks). */
long stored(const char *name);
/* A fresh image made with MKFS_ARGS (and a key: ENCRYPT); the model emptied. */
void fresh(const char *mkfs_args, int encrypt);
/* Mount with compress=ALG; unmount, fsck clean (with the key, every cluster's hash). */
void up(const char *alg);
void down(void);
/* Every file checked, unmounted (fsck), mounted with compress=ALG, checked again, unmounted;
 * the model emptied. */
void remount_end(const char *alg);

/* test_compress_runs.c's cases. */
void compress_runs_cases(TCase *tc);

#endif
