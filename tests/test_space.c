/*
 * test_space.c - space that is free is usable, through the real daemon.
 *
 * RocksDB's way with space: every file is preallocated with fallocate(KEEP_SIZE), written in
 * part, fsync'ed, and the unused rest given back when it is closed, by a truncate to its size
 * or a punch past the end of file (PUNCH_HOLE|KEEP_SIZE); a write-ahead log is appended to
 * beside it in small records and deleted once its table is written; old tables are deleted
 * as compaction replaces them. t_rocksdb_pattern runs that until live data and reservations
 * reach 90% of what df calls the filesystem's size, and on at that level, and no call may
 * fail with ENOSPC; after each give-back st_blocks and df show the space back; a power cut in
 * the middle (daemon killed, the emulator's unflushed writes dropped) keeps every file that
 * was fsync'ed and leaves fsck clean. t_reserved_clean_zones takes what is clean with a
 * reservation while the rest of the free space is dead blocks: a write must get GC to
 * collect them rather than fail. t_direct_until_full fills it with O_DIRECT writes: the
 * one that finds no room says ENOSPC, not EIO.
 */
#include "testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define BS 4096u
#define MAX_FILES 1024
#define SST_PRE (8u << 20)  /* the preallocation of a table file (RocksDB: 64 MiB and more) */
#define WAL_PRE (2u << 20)  /* and of a write-ahead log */
#define ZONE_BLOCKS 512     /* 2 MiB zones */

static char img[512], mnt[512], bin[512];

struct file {
	char name[16];
	uint32_t seed;
	size_t size;
	int live;
};

static struct file files[MAX_FILES];
static int nfiles;
static unsigned rnd = 12345;
static uint64_t live_peak; /* the most live data (tables and log) after a table was written */

static unsigned next_rnd(void)
{
	rnd = rnd * 1103515245 + 12345;
	return rnd >> 8;
}

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 12)); }

static const char *at_mnt(char *p, size_t len, const char *name)
{
	snprintf(p, len, "%s/%s", mnt, name);
	return p;
}

static struct statvfs vfs(void)
{
	struct statvfs s;

	ck_assert_int_eq(statvfs(mnt, &s), 0);
	return s;
}

/* A call that ran out of room: say what the filesystem had, then fail. */
static void no_room(const char *what, int err)
{
	struct statvfs s = vfs();

	tu_sh("%s stats %s | grep -E '\"zones\"|\"blocks\"|\"phase\"|wakes'",
	      tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt);
	ck_abort_msg("%s: %s with %llu of %llu blocks free by df", what, strerror(err),
		     (unsigned long long)s.f_bavail, (unsigned long long)s.f_blocks);
}

#define MUST(call, what)                                                                     \
	do {                                                                                 \
		if ((call) < 0)                                                              \
			no_room(what, errno);                                                \
	} while (0)

/* Append LEN bytes of SEED's pattern at OFF in pieces of at most PIECE. */
static void put(int fd, uint32_t seed, size_t off, size_t len, size_t piece)
{
	static uint8_t buf[1 << 20];
	size_t done = 0, i;

	while (done < len) {
		size_t n = len - done < piece ? len - done : piece;

		for (i = 0; i < n; i++)
			buf[i] = pat(seed, off + done + i);
		if (pwrite(fd, buf, n, (off_t)(off + done)) != (ssize_t)n)
			no_room("write", errno);
		done += n;
	}
}

static uint64_t blocks_of(size_t bytes) { return (bytes + BS - 1) / BS; }

static void fsync_dir(void)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY);

	ck_assert_int_ge(fd, 0);
	MUST(fsync(fd), "fsync of the directory");
	close(fd);
}

/* Give the preallocation past SIZE back as RocksDB does when it closes a file - a truncate to
 * the size (TRUNC), or a punch past the end of file, which it does where the truncate left
 * st_blocks above the size - and check that st_blocks and df show it back at once (within a
 * zone: changed nodes are owed by the zone). */
static void give_back(int fd, size_t size, size_t pre, const char *name, int trunc)
{
	/* GC may move blocks meanwhile (background, or more so on a loaded machine): what it
	 * wrote before its victim is freed is taken from df for the while, so it is allowed */
	long moved0 = tu_ctl_stat(mnt, "bytes_migrated"), moved1;
	struct statvfs before = vfs(), after;
	uint64_t gone = (uint64_t)pre / BS - blocks_of(size), gc_blocks;
	struct stat st;

	if (trunc)
		MUST(ftruncate(fd, (off_t)size), "truncate to the size");
	else
		MUST(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)size,
			       (off_t)(pre - size)), "punch past the end of file");
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)size);
	ck_assert_msg(st.st_blocks == (blkcnt_t)(blocks_of(size) * (BS / 512)),
		      "%s: %zu bytes, st_blocks %lld after the %s", name, size,
		      (long long)st.st_blocks, trunc ? "truncate" : "punch");
	after = vfs();
	moved1 = tu_ctl_stat(mnt, "bytes_migrated");
	gc_blocks = moved0 >= 0 && moved1 > moved0 ? (uint64_t)(moved1 - moved0) / BS : 0;
	ck_assert_msg(after.f_bfree + ZONE_BLOCKS + gc_blocks >= before.f_bfree + gone,
		      "%s: df free went from %llu to %llu blocks for %llu punched (GC moved %llu)",
		      name, (unsigned long long)before.f_bfree, (unsigned long long)after.f_bfree,
		      (unsigned long long)gone, (unsigned long long)gc_blocks);
}

static struct file *new_file(const char *prefix)
{
	struct file *f;

	ck_assert_int_lt(nfiles, MAX_FILES);
	f = &files[nfiles];
	snprintf(f->name, sizeof(f->name), "%s%04d", prefix, nfiles);
	f->seed = (uint32_t)nfiles * 17 + 3;
	f->size = 0;
	f->live = 0;
	nfiles++;
	return f;
}

static int open_prealloc(struct file *f, size_t pre)
{
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), f->name), O_CREAT | O_WRONLY | O_TRUNC, 0644);

	if (fd < 0)
		no_room("create", errno);
	MUST(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)pre), "preallocation");
	return fd;
}

static void delete_file(struct file *f)
{
	char p[600];

	ck_assert_int_eq(unlink(at_mnt(p, sizeof(p), f->name)), 0);
	f->live = 0;
}

static void check_file(const struct file *f, const char *when)
{
	static uint8_t buf[1 << 20];
	char p[600];
	size_t at = 0, i;
	ssize_t n;
	int fd = open(at_mnt(p, sizeof(p), f->name), O_RDONLY);

	ck_assert_msg(fd >= 0, "%s: %s is missing", when, f->name);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (i = 0; i < (size_t)n; i++)
			if (buf[i] != pat(f->seed, at + i))
				ck_abort_msg("%s: %s differs at byte %zu", when, f->name, at + i);
		at += (size_t)n;
	}
	close(fd);
	ck_assert_msg(n == 0 && at == f->size, "%s: %s has %zu bytes, not %zu", when, f->name, at,
		      f->size);
}

static void check_all(const char *when)
{
	for (int i = 0; i < nfiles; i++)
		if (files[i].live)
			check_file(&files[i], when);
}

static uint64_t live_bytes(void)
{
	uint64_t n = 0;

	for (int i = 0; i < nfiles; i++)
		n += files[i].live ? files[i].size : 0;
	return n;
}

/* One flush of a memtable: a table file written while the write-ahead log takes records
 * between its pieces (so zones hold both, and the log's death leaves them partly dead), both
 * given their rest back; the log deleted once the table is durable. CUT_AT: a piece after
 * which the daemon dies, both files open (0: none); returns 1 if it did. */
static int flush_one(size_t live_target, int cut_at, pid_t pid)
{
	struct file *sst = new_file("sst"), *wal = new_file("wal");
	size_t size = SST_PRE / 2 + next_rnd() % (SST_PRE / 2 - BS), off, piece = 256 << 10;
	int fs = open_prealloc(sst, SST_PRE), fw = open_prealloc(wal, WAL_PRE), k = 0;
	int sst_trunc = (int)(next_rnd() % 2); /* tables both ways, the log by a punch */

	for (off = 0; off < size; off += piece, k++) {
		size_t rec = 100 + next_rnd() % 3000;

		put(fs, sst->seed, off, size - off < piece ? size - off : piece, piece);
		if (wal->size + rec <= WAL_PRE) {
			put(fw, wal->seed, wal->size, rec, rec);
			wal->size += rec;
			MUST(fdatasync(fw), "fdatasync of the log");
		}
		if (cut_at && k == cut_at) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			tu_sh("fusermount3 -uz %s 2>/dev/null", mnt);
			close(fs);
			close(fw);
			return 1;
		}
	}
	sst->size = size;
	MUST(fsync(fs), "fsync");
	give_back(fs, size, SST_PRE, sst->name, sst_trunc);
	MUST(fsync(fs), "fsync after the punch");
	close(fs);
	sst->live = 1;
	if (live_bytes() + wal->size > live_peak)
		live_peak = live_bytes() + wal->size;
	fsync_dir();
	give_back(fw, wal->size, WAL_PRE, wal->name, 0);
	close(fw);
	delete_file(wal);
	/* compaction: old tables go as new ones replace them, down to the target */
	while (live_bytes() + SST_PRE > live_target) {
		int i = (int)(next_rnd() % (unsigned)nfiles);

		if (files[i].live)
			delete_file(&files[i]);
	}
	fsync_dir();
	return 0;
}

/* After the power cut: the tables fsync'ed are whole, the two files open at the cut are
 * dropped (RocksDB deletes files its manifest does not name), fsck is clean. */
static pid_t after_cut(void)
{
	char p[600];
	pid_t pid;

	ck_assert_int_ge(zemu_powercut(img, -1, 0, 0), 0);
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	check_all("after the power cut");
	for (int i = nfiles - 2; i < nfiles; i++)
		unlink(at_mnt(p, sizeof(p), files[i].name));
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	return pid;
}

/* Twice: with the warm data lanes (the table and the log in zones of their own), and with 7
 * logs (zone limits of 10 leave no lanes), where the log's records sit between the table's
 * blocks and its death leaves every zone partly dead. */
START_TEST(t_rocksdb_pattern)
{
	struct zemu_create_opts o = {.size = 512ULL << 20, .zone_size = 2 << 20,
				     .max_open = _i ? 10 : 0, .max_active = _i ? 10 : 0};
	struct statvfs s0;
	uint64_t written = 0, cap, peak = 0;
	size_t target;
	int flushes = 0, at_target = 0, cut = 0;
	pid_t pid;

	nfiles = 0;
	tu_fresh_fs("space.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	s0 = vfs();
	cap = (uint64_t)s0.f_blocks * BS;
	target = (size_t)(cap * 9 / 10);
	/* fill to 90% live, then as much again written at that level (at least 60 flushes) */
	while (at_target < 60 || written < cap) {
		int cut_at = !cut && at_target == 20 ? 7 : 0;

		if (flush_one(target, cut_at, pid)) {
			cut = 1;
			pid = after_cut();
			continue;
		}
		written += files[nfiles - 2].size;
		flushes++;
		if (live_peak > peak)
			peak = live_peak;
		at_target += live_bytes() + 2 * SST_PRE > target;
	}
	printf("rocksdb pattern, %s: %d flushes, %llu MiB of tables written on %llu MiB, live "
	       "data up to %.1f%%, GC reclaimed %ld zones, %ld bytes reserved at the end\n",
	       _i ? "7 logs" : "lanes", flushes, (unsigned long long)(written >> 20),
	       (unsigned long long)(cap >> 20), 100.0 * (double)peak / (double)cap,
	       tu_ctl_stat(mnt, "zones_reclaimed"), tu_ctl_stat(mnt, "reserved_by_fallocate"));
	ck_assert_int_eq(cut, 1);
	ck_assert_uint_ge(peak * 100, cap * 89);
	ck_assert_int_eq(tu_ctl_stat(mnt, "reserved_by_fallocate"), 0); /* all given back */
	ck_assert_int_gt(tu_ctl_stat(mnt, "zones_reclaimed"), 0);
	check_all("at the end");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
}
END_TEST

/* Two files written interleaved and one deleted: a third of the space is dead blocks in
 * half-valid zones. A reservation takes the clean zones; a new file of nine tenths of what df
 * then shows must be written (GC collecting with reservations counted as taken, in the
 * request path: background GC is off), and the reservation still filled. */
START_TEST(t_reserved_clean_zones)
{
	struct zemu_create_opts o = {.size = 256ULL << 20, .zone_size = 2 << 20, .max_open = 10,
				     .max_active = 10}; /* no lanes: the two files share zones */
	struct file *a, *b, *r, *w;
	long clean, dead;
	int fa, fb, fr, fw;
	size_t piece = 64 << 10, want;
	pid_t pid;

	nfiles = 0;
	tu_fresh_fs("clean.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, "nogc");
	ck_assert_int_gt(pid, 0);
	a = new_file("a");
	b = new_file("b");
	fa = open_prealloc(a, BS);
	fb = open_prealloc(b, BS);
	want = (size_t)vfs().f_bavail * BS * 3 / 10;
	for (a->size = 0; a->size < want; a->size += piece, b->size += piece) {
		put(fa, a->seed, a->size, piece, piece);
		put(fb, b->seed, b->size, piece, piece);
	}
	close(fa);
	close(fb);
	a->live = 1;
	delete_file(b);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	clean = tu_ctl_stat(mnt, "free_for_data");
	dead = (long)vfs().f_bavail - clean;
	ck_assert_int_gt(dead, (long)(want / BS / 2));
	r = new_file("r");
	fr = open_prealloc(r, (size_t)clean * BS); /* all that is clean */
	printf("reserved clean zones: %ld blocks clean reserved, %ld dead, df %llu free\n", clean,
	       dead, (unsigned long long)vfs().f_bavail);
	ck_assert_int_le(tu_ctl_stat(mnt, "free_for_data"), 8);
	w = new_file("w");
	fw = open_prealloc(w, BS);
	w->size = (size_t)vfs().f_bavail * BS * 9 / 10; /* most of what df shows */
	put(fw, w->seed, 0, w->size, piece); /* only collection makes this room */
	MUST(fsync(fw), "fsync");
	close(fw);
	w->live = 1;
	put(fr, r->seed, 0, (size_t)clean * BS, piece); /* and the promise is kept */
	r->size = (size_t)clean * BS;
	MUST(fsync(fr), "fsync");
	close(fr);
	r->live = 1;
	printf("reserved clean zones: GC reclaimed %ld zones for the writes\n",
	       tu_ctl_stat(mnt, "zones_reclaimed"));
	ck_assert_int_gt(tu_ctl_stat(mnt, "zones_reclaimed"), 0);
	check_all("after the writes");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
}
END_TEST

/* O_DIRECT writes of 1 MiB (several requests in flight: the kernel's asynchronous direct
 * I/O) into a filesystem until it is full: the write that finds no room fails with ENOSPC,
 * never EIO (a request cut short by the room running out was answered with the bytes it
 * wrote, and the kernel counts a short piece of an O_DIRECT write as an I/O error); every
 * write that returned reads back; fsck clean. Several rounds, each on a fresh image. */
START_TEST(t_direct_until_full)
{
	struct zemu_create_opts o = {.size = 64ULL << 20, .zone_size = 2 << 20};
	static uint8_t buf[1 << 20] __attribute__((aligned(4096)));
	char p[600];
	size_t done = 0;
	ssize_t n = 0;
	pid_t pid;
	int fd;

	tu_fresh_fs("direct.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	fd = open(at_mnt(p, sizeof(p), "d"), O_CREAT | O_WRONLY | O_DIRECT, 0644);
	ck_assert_int_ge(fd, 0);
	for (;;) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = pat(7, done + i);
		n = pwrite(fd, buf, sizeof(buf), (off_t)done);
		if (n != (ssize_t)sizeof(buf))
			break;
		done += sizeof(buf);
	}
	ck_assert_msg(n < 0 && errno == ENOSPC, "the write past the room: %zd (%s) after %zu MiB",
		      n, n < 0 ? strerror(errno) : "short", done >> 20);
	ck_assert_uint_gt(done, 16u << 20);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (size_t off = 0; off < done; off += sizeof(buf)) {
		ck_assert_int_eq(pread(fd, buf, sizeof(buf), (off_t)off), (ssize_t)sizeof(buf));
		for (size_t i = 0; i < sizeof(buf); i += 509)
			ck_assert_msg(buf[i] == pat(7, off + i), "byte %zu", off + i);
	}
	close(fd);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("space");
	tc = tcase_create("space");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, t_reserved_clean_zones);
	tcase_add_loop_test(tc, t_direct_until_full, 0, 4);
	tcase_add_loop_test(tc, t_rocksdb_pattern, 0, 2);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
