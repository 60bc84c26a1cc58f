/*
 * test_crash_compress.c - the workload test_crash cuts power in on compressed files
 * (docs/compression.md): clusters rewritten whole, truncated and punched, a log appended a
 * record at a time whose last cluster is held in memory, and directories flagged with
 * chattr +c. It notes in the model (crash_testutil.h) what every fsync made durable. Part of
 * test_crash (test_crash.c).
 */
#include "crash_testutil.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* chattr +c on a directory (its inode's flag, which new files and directories in it take),
 * a directory made in it and a file in that, fsync'ed: every flush boundary finds the tree
 * old or new, and fsck accepts the flagged directories. */
static void compressed_dir(void)
{
	struct stage *s;
	char p[600];
	int fd, flags = FS_COMPR_FL;

	mkdir_path("D");
	fd = open(at_mnt(p, sizeof(p), "D"), O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
	close(fd);
	mkdir_path("D/S");
	write_file("D/S/f", 806, 3 * 16384 + 100, 0, 1);
	fsync_path("D/S");
	fsync_path("D");
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, "D/S");
	stage_take_dir(s, "D");
	stage_take_dir(s, ".");
	stage_seal(s);
}

/* Two logs appended a record at a time (100 to 2,000 bytes) to compressed files kept open, one
 * of text-like bytes and one of bytes that do not compress (PAT_RANDOM): each one's last
 * cluster is held in memory (fs/file/data.c, tailbuf.c) and stored when a record fills it, at
 * each fsync (every fifth record, fsync and fdatasync in turn, the cluster then kept as a
 * clean copy that the next record holds again) and at the release of a close half-way (no
 * flush); the random log's clusters stay raw, and only the blocks a record changed are
 * written. At every flush boundary each log holds at least what its last fsync covered, and
 * past that only whole records, never other bytes. */
static void compressed_logs(void)
{
	static const char *rel[2] = {"A", "B"};
	static const uint32_t seed[2] = {807, PAT_RANDOM + 808};
	size_t size[2] = {0, 0};
	int k;

	for (k = 0; k < 2; k++)
		write_file(rel[k], seed[k], 0, 0, 0);
	fsync_path(".");
	stage_root_now();
	append_logs(rel, seed, size);
}

#define CLU 16384u /* the image's clusters: 4 blocks */
#define BLK 4096u

/* One pwrite of LEN bytes at AT of REL (created if need be), SEED's text-like bytes but for
 * the sixth cluster from AT's (random bytes, stored raw) and, with ZEROS, the first block of
 * the eighth (zeros): a run of clusters with a raw one and a compressed one in its middle,
 * stored by dcluster.c's runs. Noted in the model piece by piece (those states are among the
 * ones the file passes through; the model keeps 12 extents a file, so zeros only twice). */
static void write_mixed(const char *rel, uint32_t seed, size_t at, size_t len, int zeros,
			int do_fsync)
{
	size_t rnd = (at / CLU + 5) * CLU, zero = zeros ? (at / CLU + 7) * CLU : SIZE_MAX / 2;
	uint8_t *b = malloc(len);
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), rel), O_CREAT | O_WRONLY, 0644);

	ck_assert_msg(fd >= 0 && b, "open %s: %s", rel, strerror(errno));
	fill(b, len, seed, at);
	if (rnd + CLU <= at + len)
		fill(b + (rnd - at), CLU, PAT_RANDOM + seed, rnd);
	if (zero + BLK <= at + len)
		memset(b + (zero - at), 0, BLK);
	ck_assert_int_eq(pwrite(fd, b, len, (off_t)at), (ssize_t)len);
	cur_write(rel, seed, at, len);
	if (rnd + CLU <= at + len)
		cur_write(rel, PAT_RANDOM + seed, rnd, CLU);
	if (zero + BLK <= at + len)
		cur_zero(rel, zero, BLK, 1);
	if (do_fsync)
		ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	free(b);
}

/* Writes of many clusters, which go to the device in runs (one append and one node update for
 * up to 16 clusters): a file written in one pwrite, overwritten across runs starting and
 * ending inside clusters, grown past its end by a write ending inside a cluster (held), and a
 * write across that held cluster into new ones; each fsync'ed or fdatasync'ed. At every
 * flush boundary each run is found old or new, and what an fsync covered is there. */
static void compressed_runs(void)
{
	size_t size = 640 * 1024 + 3000;

	write_mixed("M", 810, 0, size, 1, 1);
	fsync_path(".");
	stage_root_now();
	write_mixed("M", 811, 10000, 300 * 1024, 1, 0);
	fdatasync_path("M");
	stage_file_now("M");
	write_mixed("M", 812, 500 * 1024 + 7, size - 500 * 1024 + 40 * 1024, 0, 1);
	size = 680 * 1024 + 3007;
	stage_file_now("M");
	write_mixed("M", 813, size - 9000, 190 * 1024 + 123, 0, 1); /* over the held cluster */
	stage_file_now("M");
}

/* Compressed files (mkfs --compress, compress=lz4; the patterns compress about 4:1): whole
 * clusters written, then every way a cluster is rewritten whole - a partial overwrite across
 * two (read, changed, stored again), a truncate and a punch inside one, small appends that
 * finish one - and whole ones dropped; each step fsync'ed or fdatasync'ed; then a log appended
 * a record at a time, its last cluster held in memory (compressed_logs), a directory flagged
 * with chattr +c (compressed_dir), and writes of many clusters stored in runs
 * (compressed_runs). Every flush boundary is tried: a cluster, or a run of them in one node,
 * is one node update, so it is found old or new, never torn. */
void workload_compressed(void)
{
	size_t size = 256 * 1024;
	int i;

	write_file("C", 800, size, 0, 1);
	write_file("R", 801, 3 * 16384 + 5000, 0, 0);
	fsync_path(".");
	stage_root_now();
	write_file("C", 802, 10000, 5000, 0); /* into clusters 0 and 1 */
	fdatasync_path("C");
	stage_file_now("C");
	write_file("C", 803, 3 * 16384, 4 * 16384, 1); /* whole clusters replaced */
	stage_file_now("C");
	truncate_file("C", 100 * 1024 + 77);
	fsync_path("C");
	stage_file_now("C");
	size = 100 * 1024 + 77;
	falloc_path("C", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 20000, 40000);
	cur_zero("C", 20000, 40000, 1);
	stage_file_now("C");
	for (i = 0; i < 6; i++) { /* appends, each closed: the last cluster held, stored at release */
		write_file("C", 804, 3000, size, 0);
		size += 3000;
	}
	fdatasync_path("C");
	stage_file_now("C");
	truncate_file("R", 16384 + 1);
	write_file("R", 805, 7000, 16384 - 3000, 0);
	fsync_path("R");
	stage_file_now("R");
	unlink_path("R");
	fsync_path(".");
	stage_root_now();
	compressed_logs();
	compressed_dir();
	compressed_runs();
}
