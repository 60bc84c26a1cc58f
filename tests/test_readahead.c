/*
 * test_readahead.c - the daemon's read-ahead (fs/file/readahead.c) through the real daemon.
 *
 * Reads that reach the daemon in 128 KiB pieces, in sequence, must reach the device as large
 * reads (the stats' read-size counters show reads of 512 KiB and more), and what a window
 * holds must never hide a change: an overwrite inside a window just read ahead, a truncate
 * and a hole punched through it are all seen by the reads that follow, for a plain and an
 * encrypted file, and every byte read is checked. A buffered sequential read, whose requests
 * the kernel sends several at once, reads each block from the device about once; and the
 * device reads the next extension while the reader is served from the last one.
 */
#include "testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FSIZE (8u << 20)
#define PIECE (128u << 10)

static char img[512], mnt[512], bin[512];
static uint8_t *want;

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(seed * 37 + i * 11 + (i >> 12)); }

static void fill(uint8_t *b, size_t n, uint32_t seed, size_t base)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, base + i);
}

/* O_DIRECT: every read reaches the daemon as asked, past the kernel's page cache. */
static int open_direct(const char *name, int flags)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", mnt, name);
	return open(p, flags | O_DIRECT, 0644);
}

static void *abuf(size_t n)
{
	void *b = NULL;

	ck_assert_int_eq(posix_memalign(&b, 4096, n), 0);
	return b;
}

/* Read [FROM, TO) in pieces and compare with the model. */
static void read_check(int fd, size_t from, size_t to, size_t fsize, const char *when)
{
	uint8_t *b = abuf(PIECE);

	for (size_t off = from; off < to; off += PIECE) {
		ssize_t n = pread(fd, b, PIECE, (off_t)off), exp;

		exp = off >= fsize ? 0 : (ssize_t)(fsize - off < PIECE ? fsize - off : PIECE);
		ck_assert_msg(n == exp, "%s: read at %zu gave %zd, expected %zd", when, off, n, exp);
		for (ssize_t k = 0; k < n; k++)
			if (b[k] != want[off + (size_t)k])
				ck_abort_msg("%s: byte %zu is %u, expected %u", when, off + (size_t)k,
					     b[k], want[off + (size_t)k]);
	}
	free(b);
}

/* Device bytes read so far, once no read ahead is still under way (the extension a request
 * asks for is read after its reply): the stat read until it holds still. */
static long read_bytes_settled(void)
{
	long prev = -1, cur = tu_ctl_stat(mnt, "host_read_bytes");

	for (int i = 0; i < 100 && cur != prev; i++) {
		usleep(10 * 1000);
		prev = cur;
		cur = tu_ctl_stat(mnt, "host_read_bytes");
	}
	return cur;
}

static void run(const char *name)
{
	uint8_t *b = abuf(FSIZE);
	int fd = open_direct(name, O_CREAT | O_RDWR);

	ck_assert_int_ge(fd, 0);
	fill(want, FSIZE, 7, 0);
	memcpy(b, want, FSIZE);
	ck_assert_int_eq(pwrite(fd, b, FSIZE, 0), FSIZE);
	ck_assert_int_eq(fsync(fd), 0);
	read_check(fd, 0, 2 << 20, FSIZE, "sequential");
	/* The window now holds what follows 2 MiB: change it under the window. Each change
	 * comes once the extension asked for is in (the settled stats), so the change meets
	 * a window already kept, not a race with the read still under way. */
	read_bytes_settled();
	fill(b, 64 << 10, 9, (2 << 20) + 4096);
	memcpy(want + (2 << 20) + 4096, b, 64 << 10);
	ck_assert_int_eq(pwrite(fd, b, 64 << 10, (2 << 20) + 4096), 64 << 10);
	read_check(fd, 2 << 20, 4 << 20, FSIZE, "after an overwrite in the window");
	read_bytes_settled();
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   (4 << 20) + 8192, 256 << 10), 0);
	memset(want + (4 << 20) + 8192, 0, 256 << 10);
	read_check(fd, 4 << 20, 6 << 20, FSIZE, "after a hole punched in the window");
	read_bytes_settled();
	ck_assert_int_eq(ftruncate(fd, (6 << 20) + 100), 0);
	read_check(fd, 6 << 20, FSIZE, (6 << 20) + 100, "after a truncate in the window");
	close(fd);
	free(b);
}

START_TEST(t_readahead)
{
	struct zemu_create_opts o = {.size = 256 << 20, .zone_size = 16 << 20};
	long big0, big1;
	pid_t pid;

	want = malloc(FSIZE);
	tu_fresh_fs("ra.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, "dev_direct");
	ck_assert_int_gt(pid, 0);
	big0 = tu_ctl_stat(mnt, "ge_512k");
	run("plain");
	big1 = tu_ctl_stat(mnt, "ge_512k");
	ck_assert_msg(big1 > big0, "no read of 512 KiB or more reached the device (%ld, %ld)", big0,
		      big1);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
	free(want);
}
END_TEST

/* A buffered sequential read: the kernel's read-ahead sends several requests at once, and
 * each must not read again what another is reading ahead (before the wait in readahead.c the
 * device read 1.8 times the file). Read from a fresh mount, so the page cache is cold. */
#define BSIZE (32u << 20)

START_TEST(t_readahead_buffered_once)
{
	struct zemu_create_opts o = {.size = 256 << 20, .zone_size = 16 << 20};
	uint8_t *b = malloc(1 << 20), *w = malloc(BSIZE);
	char path[600];
	long r0, r1;
	pid_t pid;
	int fd;

	tu_fresh_fs("rab.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, "dev_direct");
	ck_assert_int_gt(pid, 0);
	snprintf(path, sizeof(path), "%s/seq", mnt);
	fill(w, BSIZE, 5, 0);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, w, BSIZE), BSIZE);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	pid = tu_daemon_start(img, mnt, "dev_direct");
	ck_assert_int_gt(pid, 0);
	r0 = tu_ctl_stat(mnt, "host_read_bytes");
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (size_t off = 0; off < BSIZE; off += 1 << 20) {
		ck_assert_int_eq(read(fd, b, 1 << 20), 1 << 20);
		ck_assert_msg(!memcmp(b, w + off, 1 << 20), "the MiB at %zu is not what was written",
			      off);
	}
	close(fd);
	r1 = tu_ctl_stat(mnt, "host_read_bytes");
	ck_assert_int_ge(r0, 0);
	ck_assert_msg(r1 - r0 <= BSIZE + BSIZE / 4,
		      "a sequential read of %u bytes read %ld from the device", BSIZE, r1 - r0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	free(b);
	free(w);
}
END_TEST

/* A fresh image IMAGE with file NAME holding W (SIZE bytes, written in PIECEs and fsync'ed),
 * remounted so nothing of it is cached: the daemon's pid, and NAME opened O_DIRECT in *FD. */
static pid_t written_then_cold(const char *image, const char *name, const uint8_t *w,
			       size_t size, int *fd)
{
	struct zemu_create_opts o = {.size = 256 << 20, .zone_size = 16 << 20};
	pid_t pid;

	tu_fresh_fs(image, &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, "dev_direct");
	ck_assert_int_gt(pid, 0);
	*fd = open_direct(name, O_CREAT | O_RDWR);
	ck_assert_int_ge(*fd, 0);
	for (size_t off = 0; off < size; off += PIECE)
		ck_assert_int_eq(pwrite(*fd, w + off, PIECE, (off_t)off), PIECE);
	ck_assert_int_eq(fsync(*fd), 0);
	close(*fd);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	pid = tu_daemon_start(img, mnt, "dev_direct");
	ck_assert_int_gt(pid, 0);
	*fd = open_direct(name, O_RDONLY);
	ck_assert_int_ge(*fd, 0);
	return pid;
}

/* The next extension is read while the reader is still in the last one, so that the device
 * is busy while the kernel is served from memory: read in sequence one 128 KiB piece at a
 * time, the device gets more than one whole extension (1 MiB) ahead of the reader. When an
 * extension was read only once a request went past the last one, the lead was never more
 * than that one extension. */
#define LSIZE (8u << 20)
#define LEAD_MIN (3u << 19)

START_TEST(t_readahead_leads)
{
	uint8_t *b = abuf(PIECE), *w = malloc(LSIZE);
	long r0, lead, lead_max = 0;
	pid_t pid;
	int fd;

	fill(w, LSIZE, 3, 0);
	pid = written_then_cold("ral.img", "lead", w, LSIZE, &fd);
	r0 = read_bytes_settled();
	ck_assert_int_ge(r0, 0);
	for (size_t off = 0; off + PIECE <= LSIZE / 2; off += PIECE) {
		ck_assert_int_eq(pread(fd, b, PIECE, (off_t)off), PIECE);
		ck_assert_msg(!memcmp(b, w + off, PIECE), "the piece at %zu is not what was written",
			      off);
		lead = read_bytes_settled() - r0 - (long)(off + PIECE);
		lead_max = lead > lead_max ? lead : lead_max;
	}
	close(fd);
	ck_assert_msg(lead_max >= (long)LEAD_MIN, "the device was at most %ld bytes ahead of a "
		      "sequential reader (at least %u: the next extension is read while the last "
		      "is read from)", lead_max, LEAD_MIN);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	free(b);
	free(w);
}
END_TEST

/* Random reads are not read ahead: 4 KiB reads at random places in a 16 MiB file read about
 * what they ask for from the device (node blocks included). A build that took every read as
 * sequential and read an extension past each read 227 MB here for 2 MiB asked. */
#define RSIZE (16u << 20)
#define RREADS 512

START_TEST(t_readahead_random_reads)
{
	uint8_t *b = abuf(PIECE), *w = malloc(RSIZE);
	uint32_t x = 12345;
	long r0, r1;
	pid_t pid;
	int fd;

	fill(w, RSIZE, 4, 0);
	pid = written_then_cold("rar.img", "rand", w, RSIZE, &fd);
	r0 = read_bytes_settled();
	for (int i = 0; i < RREADS; i++) {
		size_t off;

		x = x * 1103515245u + 12345u;
		off = (size_t)((x >> 8) % (RSIZE / 4096)) * 4096;
		ck_assert_int_eq(pread(fd, b, 4096, (off_t)off), 4096);
		ck_assert_msg(!memcmp(b, w + off, 4096), "the block at %zu is not what was written",
			      off);
	}
	r1 = read_bytes_settled();
	close(fd);
	ck_assert_int_ge(r0, 0);
	ck_assert_msg(r1 - r0 <= 2L * RREADS * 4096, "%d random reads of 4 KiB read %ld bytes from "
		      "the device (at most %ld)", RREADS, r1 - r0, 2L * RREADS * 4096);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	free(b);
	free(w);
}
END_TEST

/* A second pass from the start is read ahead like the first: a read far from where the
 * stream was starts a new one, and what the old one kept or has in flight does not hold it
 * off (it had: the old windows lay ahead of the reader, and no extension was read again
 * until the reader passed them). */
#define PSIZE (4u << 20)

static long big_reads_in_pass(int fd, const uint8_t *w)
{
	uint8_t *b = abuf(PIECE);
	long g0 = tu_ctl_stat(mnt, "ge_512k");

	for (size_t off = 0; off < PSIZE; off += PIECE) {
		ck_assert_int_eq(pread(fd, b, PIECE, (off_t)off), PIECE);
		ck_assert_msg(!memcmp(b, w + off, PIECE), "the piece at %zu is not what was written",
			      off);
	}
	read_bytes_settled();
	free(b);
	return tu_ctl_stat(mnt, "ge_512k") - g0;
}

START_TEST(t_readahead_second_pass)
{
	uint8_t *w = malloc(PSIZE);
	long first, second;
	pid_t pid;
	int fd;

	fill(w, PSIZE, 6, 0);
	pid = written_then_cold("rap.img", "again", w, PSIZE, &fd);
	first = big_reads_in_pass(fd, w);
	second = big_reads_in_pass(fd, w);
	close(fd);
	ck_assert_msg(first > 0, "the first pass read nothing of 512 KiB or more");
	ck_assert_msg(second >= first - 1, "the second pass made %ld device reads of 512 KiB or "
		      "more, the first %ld", second, first);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	free(w);
}
END_TEST

START_TEST(t_readahead_encrypted)
{
	struct zemu_create_opts o = {.size = 256 << 20, .zone_size = 16 << 20};
	char key[600], opts[700];
	pid_t pid;

	want = malloc(FSIZE);
	tu_fresh_fs("rae.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	tu_path(key, sizeof(key), "ra.key");
	unlink(key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	ck_assert_int_eq(tu_sh("%s -q -f --encrypt --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), key, img), 0);
	snprintf(opts, sizeof(opts), "dev_direct,encrypt_all,keyfile=%s", key);
	pid = tu_daemon_start(img, mnt, opts);
	ck_assert_int_gt(pid, 0);
	run("secret");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	free(want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readahead");
	TCase *tc = tcase_create("readahead");

	if (tu_fuse_missing())
		return 77;
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_readahead);
	tcase_add_test(tc, t_readahead_encrypted);
	tcase_add_test(tc, t_readahead_buffered_once);
	tcase_add_test(tc, t_readahead_leads);
	tcase_add_test(tc, t_readahead_random_reads);
	tcase_add_test(tc, t_readahead_second_pass);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
