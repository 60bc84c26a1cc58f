/*
 * test_tail.c - partial blocks in memory (fs/file/tailbuf.c), through the real daemon.
 *
 * Appends of 1 KB records cost about what they carry on the device (at most 1.1 times the
 * user bytes, checkpoint included; the same appends with -o tail_blocks=0 cost more than 3
 * times); reads see every byte at every step, through a second descriptor that goes to the
 * daemon (O_DIRECT), through the page cache after it was dropped and through a mapping, also
 * after truncation, punching, every fallocate mode, the collapse ioctl, a write through
 * another descriptor and a remount; st_blocks counts a held block; the bound on held blocks
 * and their age limit; release and fsync write them. An fsync'ed prefix of appended records
 * survives kill -9 of the daemon, and kill -9 with a power cut of the emulated device.
 * Mounted with noinline_data: a small file would otherwise keep its bytes in its inode, where
 * nothing is held.
 *
 * The "compressed" cases run the same on an image made with mkfs.zlfs --compress=lz4, where
 * what is held is a file's last cluster of 4 blocks (docs/compression.md, "The last cluster in
 * memory"): appends cost at most half the user bytes (the pattern compresses; more than 3
 * times without held clusters), and every read, truncate, punch, fallocate mode, the bound,
 * the age limit, release, fsync and the crashes as above (COLLAPSE and INSERT are refused on
 * compressed files). Random bytes appended and fdatasync'ed a record at a time cost a
 * compressed file at most 1.25 times what they cost a plain one: a held cluster that stays
 * raw writes only the blocks that changed.
 */
#include "testutil.h"

#include "zdev_emu.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLK 4096u
#define MODEL_MAX (16u << 20)

static char img[512], mnt[512], bin[512], path[600];
static int dfd = -1; /* PATH opened with O_DIRECT, kept open between checks */
static uint8_t *model; /* what the file holds: its first msize bytes */
static size_t msize;
static int comp;           /* the compressed cases: mkfs.zlfs --compress=lz4 */
static unsigned span = 1;  /* blocks held for a file: 1, or a compressed file's cluster */
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fresh(const char *name, uint64_t size)
{
	struct zemu_create_opts o = {.size = size, .zone_size = 8 << 20};

	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	if (comp)
		ck_assert_int_eq(tu_sh("%s -q -f --compress=lz4 %s",
				       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img), 0);
	snprintf(path, sizeof(path), "%s/f", mnt);
	if (!model)
		model = malloc(MODEL_MAX);
	ck_assert_ptr_nonnull(model);
	memset(model, 0, MODEL_MAX);
	msize = 0;
}

static long stat_of(const char *key)
{
	long v = tu_ctl_stat(mnt, key);

	ck_assert_msg(v >= 0, "zlfs-ctl stats has no %s", key);
	return v;
}

/* The files with something held: blocks held over blocks a file holds at once. */
static long held(void)
{
	long n = stat_of("partial_held_in_memory");

	ck_assert_msg(n % span == 0, "%ld blocks held, in spans of %u", n, span);
	return n / span;
}

/* Whether a file of SIZE bytes whose last write ended at its end has something held. */
static int held_at(size_t size) { return size % (span * BLK) != 0; }

/* The compressed cases: clusters of 4 blocks (mkfs.zlfs's default). */
static void compressed(void)
{
	comp = 1;
	span = 4;
}

static int fsck_clean(void)
{
	return tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img) == 0;
}

/* Bytes for the file at OFF: the model's content is a function of the offset and a seed. */
static void pattern(uint8_t *b, size_t n, uint64_t off, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 29 + (off + i) * 13 + ((off + i) >> 11));
}

/* pwrite on FD and in the model. */
static void put(int fd, uint64_t off, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n);

	ck_assert_uint_le(off + n, MODEL_MAX);
	pattern(b, n, off, seed);
	ck_assert_int_eq(pwrite(fd, b, n, (off_t)off), (ssize_t)n);
	memcpy(model + off, b, n);
	if (off + n > msize)
		msize = off + n;
	free(b);
}

static void model_size(size_t size)
{
	if (size < msize && msize <= MODEL_MAX) /* the bound tells -O3 the length is sane */
		memset(model + size, 0, msize - size);
	msize = size;
}

static void direct_close(void)
{
	if (dfd >= 0)
		close(dfd);
	dfd = -1;
}

/* Unmount (nothing of ours left open) and require a clean exit. */
static void stop(pid_t pid)
{
	direct_close();
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
}

/* The file's bytes [OFF, OFF+LEN) as the daemon serves them: an O_DIRECT read (aligned
 * buffer and range), which the kernel sends to the daemon whatever its page cache holds. */
static void expect_direct(uint64_t off, size_t len, const char *what)
{
	uint64_t a = off / BLK * BLK, e = (off + len + BLK - 1) / BLK * BLK;
	uint8_t *b;
	ssize_t n;

	if (dfd < 0)
		dfd = open(path, O_RDONLY | O_DIRECT);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(posix_memalign((void **)&b, BLK, e - a + BLK), 0);
	n = pread(dfd, b, e - a, (off_t)a);
	ck_assert_int_eq(n, (ssize_t)(msize > e ? e - a : msize > a ? msize - a : 0));
	/* the first byte that differs, if any (one assertion: Check marks each it passes) */
	for (ssize_t i = memcmp(b, model + a, (size_t)n) ? 0 : n; i < n; i++)
		if (b[i] != model[a + i])
			ck_abort_msg("%s: byte %llu is %u, want %u (size %zu)", what,
				     (unsigned long long)(a + i), b[i], model[a + i], msize);
	free(b);
}

/* The whole file through the page cache once its pages are dropped, and through a mapping. */
static void expect_cached_and_mapped(const char *what)
{
	struct stat st;
	uint8_t *b = malloc(msize + 1), *m;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)msize);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	ck_assert_int_eq(pread(fd, b, msize + 1, 0), (ssize_t)msize);
	ck_assert_msg(!memcmp(b, model, msize), "%s: read differs from the model", what);
	if (msize) {
		m = mmap(NULL, msize, PROT_READ, MAP_SHARED, fd, 0);
		ck_assert_ptr_ne(m, MAP_FAILED);
		ck_assert_msg(!memcmp(m, model, msize), "%s: mapping differs from the model", what);
		munmap(m, msize);
	}
	free(b);
	close(fd);
}

static void expect_all(const char *what)
{
	expect_direct(0, msize, what);
	expect_cached_and_mapped(what);
}

static double ratio(long dev0, long user0)
{
	long user = stat_of("bytes_written_by_users") - user0;

	ck_assert_int_gt(user, 0);
	return (double)(stat_of("bytes_written_to_device") - dev0) / (double)user;
}

/* N appends of SIZE bytes through FD (O_APPEND), every EVERY-th read back from the daemon at
 * once (a number prime to the records in a block, so every place in a block is seen). */
static void append_records(int fd, int n, size_t size, uint32_t seed, int every)
{
	uint8_t *b = malloc(size);

	for (int i = 0; i < n; i++) {
		pattern(b, size, msize, seed);
		ck_assert_int_eq(write(fd, b, size), (ssize_t)size);
		memcpy(model + msize, b, size);
		msize += size;
		if (i % every == 0)
			expect_direct(msize - size, size, "append");
	}
	free(b);
}

/* RocksDB's write-ahead log without fsync: records of 1,040 bytes appended one by one. */
static void appends_cost(void)
{
	long user0, dev0;
	double during, synced, plain;
	pid_t pid;
	int fd;

	fresh("tail-waf.img", 512ull << 20);
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	user0 = stat_of("bytes_written_by_users");
	dev0 = stat_of("bytes_written_to_device");
	fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
	ck_assert_int_ge(fd, 0);
	append_records(fd, 10000, 1040, 1, 7);
	ck_assert_int_eq(held(), 1); /* 10,400,000 bytes: the last block is partial */
	during = ratio(dev0, user0);
	close(fd);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(held(), 0);
	synced = ratio(dev0, user0);
	printf("10,000 appends of 1,040 bytes: device/user %.3f, %.3f with the checkpoint\n",
	       during, synced);
	ck_assert_msg(during <= (comp ? 0.5 : 1.1) && synced <= (comp ? 0.5 : 1.1),
		      "device/user %.3f, %.3f", during, synced);
	stop(pid);

	/* Without held blocks the same appends cost a block each: the figure above is theirs. */
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc,tail_blocks=0");
	ck_assert_int_gt(pid, 0);
	expect_all("after the remount");
	user0 = stat_of("bytes_written_by_users");
	dev0 = stat_of("bytes_written_to_device");
	fd = open(path, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	append_records(fd, 2000, 1040, 2, 7);
	ck_assert_int_eq(held(), 0);
	plain = ratio(dev0, user0);
	printf("with tail_blocks=0: device/user %.3f\n", plain);
	ck_assert_msg(plain > 3.0, "device/user %.3f without held blocks", plain);
	close(fd);
	stop(pid);
	ck_assert(fsck_clean());
}

START_TEST(t_appends_cost_what_they_carry) { appends_cost(); }
END_TEST

START_TEST(t_compressed_appends_cost_what_they_carry)
{
	compressed();
	appends_cost();
}
END_TEST

/* SQLite's write-ahead log once it wraps: COMMITS commits of two frames (a 24-byte header
 * and a 4 KiB page each) rewritten in place from byte 32 of a file of 2 MiB, each commit
 * fdatasync'ed. Device bytes over user bytes; the device's reads in *READS (with CHECK, the
 * frames are read back through the daemon now and then, which reads too). */
static double wal_rewrites(int commits, uint32_t seed, int check, long *reads)
{
	long user0 = stat_of("bytes_written_by_users"), dev0 = stat_of("bytes_written_to_device");
	long reads0 = stat_of("host_reads");
	uint64_t pos = 32;
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	for (int c = 0; c < commits; c++) {
		for (int i = 0; i < 4; i++) {
			size_t n = i % 2 ? BLK : 24;

			put(fd, pos, n, seed + (uint32_t)c);
			pos += n;
		}
		ck_assert_int_eq(fdatasync(fd), 0);
		if (check && c % 16 == 0)
			expect_direct(pos - 2 * (BLK + 24), 2 * (BLK + 24), "commit");
	}
	close(fd);
	*reads = stat_of("host_reads") - reads0;
	return ratio(dev0, user0);
}

/* The block a write ends inside is held also within the file: a wrapped write-ahead log
 * writes each block of its commits once, where writing every partial write through costs
 * each block twice (a 24-byte header and the page after it both end inside a block). And
 * the block an fsync wrote stays in memory, clean: the next commit's first frame, which
 * begins inside it, is not read from the device again. */
START_TEST(t_rewrites_cost_what_they_carry)
{
	double held_ratio, plain;
	long reads, plain_reads;
	pid_t pid;
	int fd;

	fresh("tail-wal.img", 256ull << 20);
	/* without the read cache, which would serve every read counted here */
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc,read_cache_blocks=0");
	ck_assert_int_gt(pid, 0);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	put(fd, 0, 2u << 20, 1);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	held_ratio = wal_rewrites(200, 100, 1, &reads);
	expect_all("after the held rewrites");
	(void)wal_rewrites(100, 200, 0, &reads);
	expect_all("after the held rewrites, unchecked");
	stop(pid);

	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc,tail_blocks=0,"
			      "read_cache_blocks=0");
	ck_assert_int_gt(pid, 0);
	plain = wal_rewrites(200, 400, 1, &plain_reads);
	(void)wal_rewrites(100, 500, 0, &plain_reads);
	expect_all("after the rewrites written through");
	stop(pid);
	printf("200 wrapped WAL commits: device/user %.3f held, %.3f written through; 100 more "
	       "read %ld and %ld times from the device\n", held_ratio, plain, reads, plain_reads);
	ck_assert_msg(held_ratio < 0.7 * plain, "device/user %.3f held, %.3f written through",
		      held_ratio, plain);
	/* Each commit ends inside a block the file already had (the log wraps over its old
	 * frames): a new held block reads the old one, twice a commit. The block the last fsync
	 * wrote, where the next commit begins, is read no more: without its clean copy, three. */
	ck_assert_msg(reads <= 2 * 100 + 5 && plain_reads >= 3 * 100, "100 commits read the "
		      "device %ld times with held blocks, %ld without", reads, plain_reads);

	/* With the read cache (asked for: it is off by default): the blocks the log had before
	 * were written by the commits of its last round, a few hundred blocks ago, and are read
	 * from memory. */
	pid = tu_daemon_start(img, mnt,
			      "noinline_data,cp_interval=0,nogc,read_cache_blocks=4096");
	ck_assert_int_gt(pid, 0);
	(void)wal_rewrites(200, 600, 0, &reads); /* a round to fill it: the mount starts empty */
	(void)wal_rewrites(100, 700, 0, &reads);
	expect_all("after the rewrites with the read cache");
	stop(pid);
	printf("with the read cache: 100 commits read %ld times from the device\n", reads);
	ck_assert_msg(reads <= 5, "100 commits read the device %ld times with the read cache",
		      reads);
	ck_assert(fsck_clean());
}
END_TEST

/* The read cache (fs/core/rcache.c) keeps blocks by device address, so a zone reset must
 * forget them: each round writes a file of 12 MiB, in 4 KiB writes (which fill the cache) or
 * in 1 MiB writes (which do not), reads every fourth block back alone, deletes the file and
 * syncs, so its zones go back to the free pool; on a 160 MiB device (14 main zones of 8 MiB)
 * later rounds' files take those zones again, and a block read alone must be the new file's,
 * not what the cache kept of an old one. */
START_TEST(t_read_cache_forgets_reset_zones)
{
	const size_t fsize = 12u << 20;
	long hits0;
	pid_t pid;
	int fd;

	fresh("tail-rcache.img", 160ull << 20);
	pid = tu_daemon_start(img, mnt,
			      "noinline_data,cp_interval=0,nogc,read_cache_blocks=4096");
	ck_assert_int_gt(pid, 0);
	hits0 = stat_of("hits");
	for (uint32_t round = 0; round < 10; round++) {
		size_t piece = round % 2 ? 1u << 20 : BLK;

		fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		model_size(0);
		for (size_t off = 0; off < fsize; off += piece)
			put(fd, off, piece, 50 + round);
		ck_assert_int_eq(fsync(fd), 0);
		close(fd);
		for (size_t off = 0; off < fsize; off += 4 * BLK)
			expect_direct(off, BLK, "a block read alone");
		direct_close();
		ck_assert_int_eq(unlink(path), 0);
		ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	}
	/* the rounds of small writes read some of their blocks from the cache */
	ck_assert_msg(stat_of("hits") - hits0 >= 5 * 256, "the read cache served %ld reads",
		      stat_of("hits") - hits0);
	stop(pid);
	ck_assert(fsck_clean());
}
END_TEST

/* A write of N bytes at OFF through FD; then the bytes around it and, now and then, the
 * whole file are compared with the model. */
static void step(int fd, uint64_t off, size_t n, uint32_t seed, int whole)
{
	put(fd, off, n, seed);
	expect_direct(off > BLK ? off - BLK : 0, n + 2 * BLK, "write");
	if (whole)
		expect_all("write");
}

static void do_fallocate(int fd, int mode, uint64_t off, uint64_t len)
{
	ck_assert_msg(!fallocate(fd, mode, (off_t)off, (off_t)len), "fallocate %d: %s", mode,
		      strerror(errno));
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		uint64_t end = off + len < msize ? off + len : msize;

		if (off < end)
			memset(model + off, 0, end - off);
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > msize)
		model_size(off + len);
}

/* COLLAPSE or INSERT (zlfs's ioctl CMD) of [OFF, OFF+LEN) through FD: done (0), or refused
 * on a compressed file (-1: the model stays). */
static int shift(int fd, unsigned long cmd, uint64_t off, uint64_t len)
{
	struct zlfs_ioc_range r = {.off = off, .len = len};
	int ret = ioctl(fd, cmd, &r);

	if (comp) {
		ck_assert_int_eq(ret, -1);
		ck_assert_int_eq(errno, EOPNOTSUPP);
		return -1;
	}
	ck_assert_int_eq(ret, 0);
	return 0;
}

static void reads_see_every_byte(void)
{
	struct stat st;
	pid_t pid;
	int fd, fd2, i;

	fresh("tail-reads.img", 256ull << 20);
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0");
	ck_assert_int_gt(pid, 0);
	fd = open(path, O_CREAT | O_RDWR, 0644);
	ck_assert_int_ge(fd, 0);

	/* A new file's first bytes: held, and counted in st_blocks as a block. */
	step(fd, 0, 100, 1, 1);
	ck_assert_int_eq(held(), 1);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_blocks, BLK / 512);
	/* Appends of every size, in and across blocks. */
	for (i = 0; i < 300; i++)
		step(fd, msize, 1 + rnd() % 5000, 2 + (uint32_t)i, i % 50 == 0);
	ck_assert_int_eq(held(), held_at(msize));
	/* Into the held block below the end of file, then through a second descriptor. */
	step(fd, msize / BLK * BLK, msize % BLK / 2 + 1, 400, 1);
	fd2 = open(path, O_WRONLY);
	ck_assert_int_ge(fd2, 0);
	step(fd2, msize - 1, 1, 401, 1);
	step(fd2, msize, 700, 402, 1);
	close(fd2);

	/* Truncation: inside the held block, up inside it, before it, past it. */
	step(fd, msize, 3000, 403, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(msize - 1000)), 0);
	model_size(msize - 1000);
	expect_all("truncate inside the held block");
	ck_assert_int_eq(ftruncate(fd, (off_t)(msize + 200)), 0);
	model_size(msize + 200);
	expect_all("truncate up inside the held block");
	step(fd, msize, 50, 404, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(msize / BLK * BLK - 10)), 0);
	model_size(msize / BLK * BLK - 10);
	expect_all("truncate before the held block");
	step(fd, msize, 60, 405, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(msize + 3 * BLK + 5)), 0);
	model_size(msize + 3 * BLK + 5);
	expect_all("truncate past the held block");

	/* A write past the held block, leaving a hole after it. */
	step(fd, msize, 10, 406, 0);
	step(fd, msize + 5 * BLK + 77, 123, 407, 1);

	/* Every fallocate mode, each with a block held. */
	step(fd, msize, 900, 408, 0);
	do_fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, msize - 2000, 1500);
	expect_all("punch across the held block");
	step(fd, msize, 900, 409, 0);
	do_fallocate(fd, FALLOC_FL_KEEP_SIZE, msize - 100, 3 * BLK);
	expect_all("KEEP_SIZE reservation");
	step(fd, msize, 900, 410, 1); /* into the reserved blocks */
	do_fallocate(fd, 0, msize - 10, 2 * BLK);
	expect_all("fallocate past the end");
	step(fd, msize, 900, 411, 0);
	do_fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, msize - 1500, 1000);
	expect_all("ZERO_RANGE | KEEP_SIZE");
	do_fallocate(fd, FALLOC_FL_ZERO_RANGE, msize - 300, 1000);
	expect_all("ZERO_RANGE past the end");
	step(fd, msize, 900, 412, 0);
	if (!shift(fd, ZLFS_IOC_COLLAPSE_RANGE, BLK, 2 * BLK)) { /* collapse: zlfs's ioctl */
		memmove(model + BLK, model + 3 * BLK, msize - 3 * BLK);
		model_size(msize - 2 * BLK);
	}
	expect_all("collapse");
	step(fd, msize, 900, 413, 0);
	if (!shift(fd, ZLFS_IOC_INSERT_RANGE, BLK, BLK)) {
		memmove(model + 2 * BLK, model + BLK, msize - BLK);
		memset(model + BLK, 0, BLK);
		msize += BLK;
	}
	expect_all("insert");

	/* A checkpoint and a remount: the held block is written and reads back. */
	step(fd, msize, 1234, 414, 0);
	ck_assert_int_eq(held(), held_at(msize));
	close(fd);
	stop(pid);
	ck_assert(fsck_clean());
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0");
	ck_assert_int_gt(pid, 0);
	expect_all("after the remount");
	/* An O_TRUNC open drops a held block. */
	fd = open(path, O_WRONLY | O_APPEND);
	append_records(fd, 3, 1000, 415, 1);
	close(fd);
	fd = open(path, O_RDWR | O_TRUNC);
	model_size(0);
	step(fd, 0, 10, 416, 1);
	close(fd);
	stop(pid);
	ck_assert(fsck_clean());
}

START_TEST(t_reads_see_every_byte) { reads_see_every_byte(); }
END_TEST

START_TEST(t_compressed_reads_see_every_byte)
{
	compressed();
	reads_see_every_byte();
}
END_TEST

/* Poll for up to about 15 s until WANT blocks are held. */
static long held_becomes(long want)
{
	long h = held();

	for (int i = 0; i < 150 && h != want; i++) {
		usleep(100000);
		h = held();
	}
	return h;
}

static void bound_age_release_fsync(void)
{
	char p[640];
	int fds[12], i;
	uint8_t b[300];
	pid_t pid;

	fresh("tail-bound.img", 256ull << 20);
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,tail_blocks=8,tail_secs=5");
	ck_assert_int_gt(pid, 0);
	for (i = 0; i < 12; i++) { /* twelve files, eight blocks held: the rest written through */
		snprintf(p, sizeof(p), "%s/b%02d", mnt, i);
		fds[i] = open(p, O_CREAT | O_RDWR, 0644);
		ck_assert_int_ge(fds[i], 0);
		memset(b, 'a' + i, sizeof(b));
		ck_assert_int_eq(write(fds[i], b, sizeof(b)), (ssize_t)sizeof(b));
	}
	ck_assert_int_eq(held(), 8 / span);
	for (i = 0; i < 12; i++) {
		struct stat st;

		ck_assert_int_eq(fstat(fds[i], &st), 0);
		ck_assert_int_eq(st.st_blocks, BLK / 512);
		direct_close();
		snprintf(path, sizeof(path), "%s/b%02d", mnt, i);
		memset(model, 'a' + i, sizeof(b));
		msize = sizeof(b);
		expect_direct(0, msize, "bound");
	}
	/* The age limit: each is written within about one and a half times tail_secs. */
	ck_assert_int_eq(held_becomes(0), 0);
	/* Release and fsync write what is held (the files known to a checkpoint: the fsync of
	 * a new one is a checkpoint, which writes every held block). */
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(write(fds[0], b, sizeof(b)), (ssize_t)sizeof(b));
	ck_assert_int_eq(write(fds[1], b, sizeof(b)), (ssize_t)sizeof(b));
	ck_assert_int_eq(held(), 2);
	ck_assert_int_eq(fsync(fds[0]), 0);
	ck_assert_int_eq(held(), 1);
	close(fds[1]);
	ck_assert_int_eq(held_becomes(0), 0);
	for (i = 0; i < 12; i++)
		if (i != 1)
			close(fds[i]);
	stop(pid);
	ck_assert(fsck_clean());
}

START_TEST(t_bound_age_release_fsync) { bound_age_release_fsync(); }
END_TEST

START_TEST(t_compressed_bound_age_release_fsync)
{
	compressed();
	bound_age_release_fsync();
}
END_TEST

/* Appended records of 100 to 2,000 bytes, every seventh fsync'ed (fdatasync in turn), then a
 * few more; then the daemon is killed (and, with POWER, the device loses what was not
 * flushed). After recovery the file holds at least the fsync'ed prefix, and nothing but
 * bytes the records wrote. */
static void crash_after_appends(int power)
{
	size_t durable = 0;
	struct stat st;
	uint8_t *b;
	pid_t pid;
	int fd, i;

	fresh(power ? "tail-power.img" : "tail-kill.img", 256ull << 20);
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc,tail_secs=0"); /* no age limit */
	ck_assert_int_gt(pid, 0);
	fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < 400; i++) {
		size_t n = 100 + rnd() % 1901;

		b = malloc(n);
		pattern(b, n, msize, 7);
		ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
		memcpy(model + msize, b, n);
		msize += n;
		free(b);
		if (i % 7 == 6 && i < 390) {
			ck_assert_int_eq(i % 14 == 6 ? fsync(fd) : fdatasync(fd), 0);
			durable = msize;
		}
	}
	ck_assert_int_eq(held(), held_at(msize));
	kill(pid, SIGKILL); /* no release, no checkpoint: the held block dies with it */
	waitpid(pid, NULL, 0);
	close(fd);
	tu_sh("fusermount3 -uz %s", mnt);
	if (power)
		ck_assert_int_eq(tu_sh("%s powercut %s >/dev/null",
				       tu_bin(bin, sizeof(bin), "zlfs-emu"), img), 0);
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_msg((size_t)st.st_size >= durable && (size_t)st.st_size <= msize,
		      "size %lld after the crash: fsync'ed %zu, written %zu",
		      (long long)st.st_size, durable, msize);
	msize = (size_t)st.st_size;
	expect_all("after the crash");
	stop(pid);
	ck_assert(fsck_clean());
}

START_TEST(t_fsynced_prefix_survives_kill) { crash_after_appends(0); }
END_TEST

START_TEST(t_fsynced_prefix_survives_power_cut) { crash_after_appends(1); }
END_TEST

/* N bytes of B appended through FD (O_APPEND), and to the model. */
static void put_bytes(int fd, const uint8_t *b, size_t n)
{
	ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
	memcpy(model + msize, b, n);
	msize += n;
}

/* 400 records of 1,000 random bytes appended to NAME, each fdatasync'ed (PLAIN: the file made
 * plain with chattr -c while empty); the first file's bytes are the model's. Device bytes
 * over user bytes. */
static double random_fsyncs(const char *name, int plain)
{
	long user0, dev0;
	int fd, flags = 0;
	uint8_t b[1000];

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
	ck_assert_int_ge(fd, 0);
	if (plain)
		ck_assert_int_eq(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	user0 = stat_of("bytes_written_by_users");
	dev0 = stat_of("bytes_written_to_device");
	for (int i = 0; i < 400; i++) {
		for (size_t j = 0; j < sizeof(b); j++)
			b[j] = (uint8_t)rnd();
		if (plain)
			ck_assert_int_eq(write(fd, b, sizeof(b)), (ssize_t)sizeof(b));
		else
			put_bytes(fd, b, sizeof(b));
		ck_assert_int_eq(fdatasync(fd), 0);
	}
	close(fd);
	return ratio(dev0, user0);
}

/* After random_fsyncs: random bytes up to the third block of a cluster, fdatasync'ed (the
 * cluster raw on the device: its first block does not compress), a record into that third
 * block (the clean copy the fdatasync kept, held again), a truncate into the second block, an
 * fdatasync (the cluster still raw: only its changed blocks are written, and the truncate's
 * zeroed ones are among them, or the device would keep the old bytes past the new end), and
 * a truncate up: zeros there. */
static void random_truncate(void)
{
	const uint64_t cb = span * BLK;
	uint64_t cs;
	uint8_t b[4 * BLK];
	size_t n = (size_t)((2 * BLK + cb - msize % cb) % cb);
	int fd = open(path, O_WRONLY | O_APPEND);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_le(cb, sizeof(b));
	for (size_t j = 0; j < sizeof(b); j++)
		b[j] = (uint8_t)rnd();
	put_bytes(fd, b, n);
	ck_assert_int_eq(fdatasync(fd), 0);
	cs = msize - 2 * BLK;
	put_bytes(fd, b + n, 100);
	ck_assert_int_eq(ftruncate(fd, (off_t)(cs + BLK + 100)), 0);
	model_size(cs + BLK + 100);
	ck_assert_int_eq(fdatasync(fd), 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(cs + 3 * BLK)), 0);
	model_size(cs + 3 * BLK);
	close(fd);
	expect_all("a truncate inside a held raw cluster, then up");
}

START_TEST(t_compressed_random_fsyncs)
{
	double comp_ratio, plain;
	pid_t pid;

	compressed();
	fresh("tail-random.img", 256ull << 20);
	pid = tu_daemon_start(img, mnt, "noinline_data,cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	plain = random_fsyncs("p", 1);
	comp_ratio = random_fsyncs("f", 0);
	expect_all("random records");
	random_truncate();
	printf("400 random records fdatasync'ed one by one: device/user %.3f compressed, %.3f "
	       "plain\n", comp_ratio, plain);
	ck_assert_msg(comp_ratio <= 1.25 * plain, "device/user %.3f compressed, %.3f plain",
		      comp_ratio, plain);
	stop(pid);
	ck_assert(fsck_clean());
}
END_TEST

START_TEST(t_compressed_fsynced_prefix_survives_kill)
{
	compressed();
	crash_after_appends(0);
}
END_TEST

START_TEST(t_compressed_fsynced_prefix_survives_power_cut)
{
	compressed();
	crash_after_appends(1);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("tail");
	tc = tcase_create("tail");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_appends_cost_what_they_carry);
	tcase_add_test(tc, t_rewrites_cost_what_they_carry);
	tcase_add_test(tc, t_read_cache_forgets_reset_zones);
	tcase_add_test(tc, t_reads_see_every_byte);
	tcase_add_test(tc, t_bound_age_release_fsync);
	tcase_add_test(tc, t_fsynced_prefix_survives_kill);
	tcase_add_test(tc, t_fsynced_prefix_survives_power_cut);
	suite_add_tcase(s, tc);
	tc = tcase_create("compressed");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_compressed_appends_cost_what_they_carry);
	tcase_add_test(tc, t_compressed_reads_see_every_byte);
	tcase_add_test(tc, t_compressed_bound_age_release_fsync);
	tcase_add_test(tc, t_compressed_random_fsyncs);
	tcase_add_test(tc, t_compressed_fsynced_prefix_survives_kill);
	tcase_add_test(tc, t_compressed_fsynced_prefix_survives_power_cut);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
