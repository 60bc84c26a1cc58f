/*
 * test_compress_runs.c - writes of many clusters of a compressed file, which dcluster.c stores
 * in runs (up to 16 clusters of 4 blocks compressed one after another, their stored forms
 * packed, one device append and one node update): part of test_compress_fs (its model and
 * mounts, compress_fs.h), with LZ4 and zstd, plain and encrypted.
 *
 * A run with raw clusters (random bytes, one with a block of zeros: a hole) and compressed
 * ones (text, all zeros, text with a block of zeros) in its middle; overwrites starting and
 * ending inside clusters across runs; a write that begins inside the held last cluster
 * (tailbuf.c) and goes on past it, and one of whole clusters over it on the descriptor that
 * holds it (the run must stop before it: its held copy would otherwise be written over the
 * run's later); writes across the end of the inode's slots into direct
 * nodes (a run never spans two nodes). Every byte against the model, the mount's counts of
 * raw and compressed clusters, the stored blocks of raw clusters with holes, after a remount
 * too, and fsck clean (with the key it decompresses every cluster).
 */
#include "compress_fs.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLK 4096u

/* N bytes for NAME at OFF: text, but clusters RND[] (from OFF's cluster on, -1 ends) random,
 * cluster ZC all zeros and the first block of cluster ZB zeros (-1: none); one pwrite on FD. */
static void pwrite_mixed(int fd, const char *name, size_t off, size_t n, const int *rnd, int zc,
			 int zb)
{
	struct mfile *f = mf(name);
	uint8_t *b = malloc(n);
	size_t c0 = off / CB * CB;

	gen(b, n, off, 0);
	for (; *rnd >= 0; rnd++)
		if (c0 + (*rnd + 1) * CB <= off + n)
			gen(b + c0 + *rnd * CB - off, CB, 0, 1);
	if (zc >= 0 && c0 + (zc + 1) * CB <= off + n)
		memset(b + c0 + zc * CB - off, 0, CB);
	if (zb >= 0 && c0 + zb * CB + BLK <= off + n)
		memset(b + c0 + zb * CB - off, 0, BLK);
	ck_assert_int_eq(pwrite(fd, b, n, (off_t)off), (ssize_t)n);
	if (off + n > f->size)
		msize(f, off + n);
	memcpy(f->d + off, b, n);
	free(b);
}

static int open_rw(const char *name)
{
	int fd = open(at(name), O_WRONLY | O_CREAT, 0644);

	ck_assert_int_ge(fd, 0);
	return fd;
}

/* pwrite_mixed on a descriptor of its own, closed after. */
static void put_mixed(const char *name, size_t off, size_t n, const int *rnd, int zc, int zb)
{
	int fd = open_rw(name);

	pwrite_mixed(fd, name, off, n, rnd, zc, zb);
	close(fd);
}

static void runs_case(const char *alg, int encrypt)
{
	static const int rnd[] = {5, 20, 21, -1}, none[] = {-1};
	size_t size = 40 * CB + 1000;
	long raw, comp;
	int fd;

	fresh("--compress", encrypt);
	up(alg);
	/* clusters 0..39 whole, in three runs (16, 16, 8), the 41st held (stored by the fsync,
	 * or the release before it): 5, 20 and 21 raw */
	raw = tu_ctl_stat(mnt_dir(), "clusters_raw");
	comp = tu_ctl_stat(mnt_dir(), "clusters_compressed");
	put_mixed("m", 0, size, rnd, 9, 10);
	fd = open_rw("m");
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(tu_ctl_stat(mnt_dir(), "clusters_raw") - raw, 3);
	ck_assert_int_eq(tu_ctl_stat(mnt_dir(), "clusters_compressed") - comp, 38);
	ck_assert_int_lt(stored("m"), (long)size / 2);
	check_all();
	/* on one descriptor, a write ending inside a new last cluster (held), then whole
	 * clusters over it: the run stops before it, which takes the write as held */
	fd = open_rw("h");
	pwrite_mixed(fd, "h", 0, 3 * CB + 100, none, -1, -1);
	pwrite_mixed(fd, "h", CB, 4 * CB + 7, rnd, -1, -1);
	check_all();
	close(fd);
	/* random clusters, one with a block of zeros: a hole, the others packed around it */
	put_mixed("r", 0, 8 * CB, (const int[]){0, 1, 2, 3, 4, 5, 6, 7, -1}, -1, 3);
	ck_assert_int_eq(stored("r"), 8 * CB - BLK);
	check_all();
	/* across runs, from and to the middle of clusters */
	put_mixed("m", 10000, 400 << 10, rnd, -1, 12);
	put_mixed("r", 5000, 5 * CB, none, 2, -1);
	check_all();
	/* into the held last cluster and on past it: held again at the new end */
	put_mixed("m", size - 500, (300 << 10) + 77, rnd, 3, -1);
	check_all();
	fd = open_rw("m");
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	/* past the inode's slots into a direct node's, and across that node's end */
	put("big", 0, 6 << 20, 0, 1 << 20, 0);
	put_mixed("big", (1 << 20) + 5, 5 << 20, rnd, 30, 40);
	remount_end(alg);
}

START_TEST(t_runs_lz4) { runs_case("lz4", 0); }
END_TEST

START_TEST(t_runs_zstd) { runs_case("zstd", 0); }
END_TEST

START_TEST(t_runs_lz4_encrypted) { runs_case("lz4", 1); }
END_TEST

void compress_runs_cases(TCase *tc)
{
	tcase_add_test(tc, t_runs_lz4);
	tcase_add_test(tc, t_runs_zstd);
	tcase_add_test(tc, t_runs_lz4_encrypted);
}
