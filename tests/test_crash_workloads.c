/*
 * test_crash_workloads.c - the workloads test_crash cuts power in: files and renames, GC under
 * fsync, overwrites, an unlinked open file, directory churn, many small files, large
 * checkpoints, a full device, four writers at once, an encrypted root, fallocate, RocksDB's
 * preallocate-write-punch, fsync's one flush with each zone's unflushed writes lost alone, and
 * small appends on partial blocks held in memory, small files kept inline and converted,
 * extended attributes grown past one node and shrunk, GC at the reserve of a folded layout
 * (compressed files' are in test_crash_compress.c).
 * Each notes in the model (crash_testutil.h) what every fsync made durable. Part of test_crash
 * (test_crash.c).
 */
#include "crash_testutil.h"

#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* ---- workloads --------------------------------------------------------------------------
 * Each stage ends with the fsync, fsyncdir or sync that makes it durable. */

/* create + write + fsync, renames, truncation, roll-forward of files a checkpoint knows. */
void workload(void)
{
	struct stage *s;
	int i;

	write_file("a", 1, 64 * 1024, 0, 1);
	s = stage_next();
	stage_take(s, "a");
	stage_seal(s);

	mkdir_path("d");
	write_file("d/b", 2, 200 * 1024 + 100, 0, 1);
	fsync_path("d");
	s = stage_next();
	stage_take_dir(s, "d");
	stage_take(s, "d");
	stage_seal(s);

	write_file("c", 4, 1024 * 1024, 0, 0); /* never fsync'ed on its own */
	write_file("e", 5, 4096, 0, 1);
	s = stage_next();
	stage_take(s, "e");
	*stage_file(s, "c") = fe("c", 4, 1024 * 1024, 1);
	stage_seal(s);

	rename_path("d/b", "a"); /* rename over an existing file + fsync of the directories */
	fsync_path("d");
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, "d");
	stage_take_dir(s, ".");
	stage_seal(s);

	for (i = 0; i < 40; i++) {
		char rel[32];

		snprintf(rel, sizeof(rel), "d/s%02d", i);
		write_file(rel, 100 + (uint32_t)i, 100 + (size_t)i * 97, 0, 0);
	}
	fsync_path("d");
	s = stage_next();
	stage_take_dir(s, "d");
	stage_seal(s);

	unlink_path("e");
	write_file("big", 9, 3 * 1024 * 1024, 0, 1);
	s = stage_next();
	stage_drop(s, "e");
	stage_take(s, "big");
	stage_seal(s);

	/* Files that exist in a checkpoint: fsync rolls them forward without one. */
	write_file("a", 11, 200 * 1024 + 100, 0, 1);
	s = stage_next();
	stage_take(s, "a");
	stage_seal(s);

	write_file("big", 9, 3 * 1024 * 1024, 3 * 1024 * 1024, 1); /* grows into direct nodes */
	s = stage_next();
	stage_take(s, "big");
	stage_seal(s);

	truncate_file("a", 5000);
	fsync_path("a");
	write_file("d/s07", 12, 100 + 7 * 97, 0, 1);
	s = stage_next();
	stage_take(s, "a");
	stage_take(s, "d/s07");
	stage_seal(s);
}

/* GC under fsync: a small image churned, each put fsync'ed, and after every tenth put a
 * collection of up to 4 zones (zlfs-ctl gc; the workload mounts without background GC, whose
 * share depends on timing): moved data that dies in between makes later collections move
 * data a second time, to the frozen log, on every machine alike. Foreground GC joins in when
 * the churn runs short of free zones. */
void workload_gc(void)
{
	unsigned rnd = 777, emptied = 0;
	int i, r;

	for (i = 0; i < 20; i++) {
		char rel[16];
		struct stage *s;

		snprintf(rel, sizeof(rel), "g%02d", i);
		write_file(rel, 200 + (uint32_t)i, (size_t)(900 + i * 13) * 1024, 0, 1);
		s = stage_next();
		stage_take(s, rel);
		stage_seal(s);
	}
	for (r = 0; r < 60; r++) {
		char rel[16];
		struct stage *s;
		size_t size;

		rnd = rnd * 1103515245 + 12345;
		i = (int)((rnd >> 8) % 20);
		size = (size_t)(500 + (rnd >> 20) % 500) * 1024;
		snprintf(rel, sizeof(rel), "g%02d", i);
		truncate_file(rel, 0);
		write_file(rel, 300 + (uint32_t)r, size, 0, 1);
		s = stage_next();
		stage_take(s, rel);
		stage_seal(s);
		if (r % 10 == 9)
			emptied += gc_now(4);
	}
	ck_assert_uint_gt(emptied, 0);
}

/* Overwrites in the middle of a large file, each made durable by fdatasync: aligned, unaligned,
 * across the end, and a truncation that drops index nodes. */
void workload_overwrite(void)
{
	static const struct {
		size_t at, len;
	} w[] = {{3 * 1024 * 1024 + 12 * 1024, 256 * 1024}, {5 * 1024 * 1024 + 333, 10000},
		 {64 * 1024 - 100, 300}, {8 * 1024 * 1024 - 4096, 64 * 1024},
		 {6 * 1024 * 1024, 1024 * 1024}};
	struct stage *s;
	size_t i;

	write_file("L", 40, 8 * 1024 * 1024, 0, 1);
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, ".");
	stage_seal(s);
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		write_file("L", 41 + (uint32_t)i, w[i].len, w[i].at, 0);
		fdatasync_path("L");
		s = stage_next();
		stage_take(s, "L");
		stage_seal(s);
		if (i == 2) {
			truncate_file("L", 7 * 1024 * 1024 + 5);
			fdatasync_path("L");
			s = stage_next();
			stage_take(s, "L");
			stage_seal(s);
		}
	}
}

/* Files rewritten often beside one that stays. Once a file's rewrites come within half the
 * turnover, its data goes to the hot data log, beside directory blocks (data.c, "hot
 * files"): cuts land in those appends, in the hot log's zone switches and in GC moving out of
 * its zones, and each fdatasync'ed rewrite must survive them. test_crash checks that the
 * recording did send data to the hot log. */
void workload_hot(void)
{
	struct stage *s;
	char rel[16];
	int i;

	write_file("cold", 60, 20 * 1024 * 1024, 0, 1);
	for (i = 0; i < 4; i++) {
		snprintf(rel, sizeof(rel), "h%d", i);
		write_file(rel, 61 + (uint32_t)i, 512 * 1024, 0, 1);
	}
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, ".");
	stage_seal(s);
	for (i = 0; i < 64; i++) {
		snprintf(rel, sizeof(rel), "h%d", i % 4);
		write_file(rel, 70 + (uint32_t)i, 512 * 1024, 0, 0);
		fdatasync_path(rel);
		s = stage_next();
		stage_take(s, rel);
		stage_seal(s);
	}
}

/* fsync with one device flush (the ONE_FLUSH feature mkfs sets): files a checkpoint knows,
 * rewritten in place and grown, fsync'ed over and over - one of them large enough for direct
 * and indirect nodes, the other rewritten often enough to turn hot - so that each flush
 * follows data, node copies and a marker in different zones, and test_crash loses each zone's
 * share alone (try_zone_losses). */
void workload_fsync(void)
{
	struct stage *s;
	int i;

	write_file("a", 80, 64 * 1024, 0, 0);
	write_file("big", 81, 5 * 1024 * 1024, 0, 0);
	ctl_sync(); /* both known to a checkpoint: their fsyncs need none */
	s = stage_next();
	stage_take(s, "a");
	stage_take(s, "big");
	stage_seal(s);
	for (i = 0; i < 6; i++) {
		write_file("a", 82 + (uint32_t)i, 16 * 1024, (size_t)(i % 4) * 16 * 1024, 1);
		write_file("big", 90 + (uint32_t)i, 64 * 1024, (size_t)(4 + i) * 1024 * 1024 / 2, 1);
		s = stage_next();
		stage_take(s, "a");
		stage_take(s, "big");
		stage_seal(s);
	}
	write_file("big", 100, 8192, 12 * 1024 * 1024, 1); /* past the direct nodes */
	write_file("a", 101, 4096, 8192, 0);
	fdatasync_path("a");
	s = stage_next();
	stage_take(s, "a");
	stage_take(s, "big");
	stage_seal(s);
}

/* Unlink while open: the orphan goes into checkpoints while it is still written to; after a
 * crash the next mount must free it (the inode count check in try_point sees a leak). */
void workload_unlink_open(void)
{
	char p[600];
	uint8_t *b = malloc(512 * 1024);
	struct stage *s;
	int fd;

	write_file("keep", 50, 100 * 1024, 0, 1);
	write_file("u", 51, 2 * 1024 * 1024, 0, 1);
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, ".");
	stage_seal(s);

	fd = open(at_mnt(p, sizeof(p), "u"), O_RDWR);
	ck_assert_int_ge(fd, 0);
	unlink_path("u");
	fsync_path("."); /* a checkpoint carrying the orphan */
	s = stage_next();
	stage_take_dir(s, ".");
	stage_seal(s);
	fill(b, 512 * 1024, 52, 0);
	ck_assert_int_eq(pwrite(fd, b, 512 * 1024, 0), 512 * 1024);
	ck_assert_int_eq(fsync(fd), 0); /* fsync of an inode with no name */
	write_file("keep", 53, 100 * 1024, 0, 1);
	s = stage_next();
	stage_take(s, "keep");
	stage_seal(s);
	fsync_path(".");
	close(fd); /* the last reference: freed now */
	write_file("after", 54, 8192, 0, 1);
	fsync_path(".");
	s = stage_next();
	stage_take_dir(s, ".");
	stage_seal(s);
	free(b);
}

/* Directory tree churn, each step made durable by fsync of the directories it touched. */
void workload_dirs(void)
{
	struct stage *s;

	mkdir_path("t");
	mkdir_path("t/a");
	mkdir_path("t/a/b");
	mkdir_path("t/e");
	write_file("t/a/f1", 60, 5000, 0, 0);
	write_file("t/a/b/f2", 61, 70 * 1024, 0, 0);
	fsync_path("t/a/b");
	fsync_path("t/a");
	fsync_path("t");
	s = stage_next();
	stage_take_dir(s, "t/a/b");
	stage_take_dir(s, "t/a");
	stage_take_dir(s, "t");
	stage_seal(s);

	rename_path("t/a", "t/c"); /* a directory moves with its subtree */
	rmdir_path("t/e");
	fsync_path("t");
	s = stage_next();
	for (int i = 0; i < s->nfiles; i++) /* everything below t/a moved */
		if (!strncmp(s->f[i].path, "t/a", 3))
			s->f[i--] = s->f[--s->nfiles];
	stage_take_dir(s, "t");
	stage_take_dir(s, "t/c");
	stage_take_dir(s, "t/c/b");
	stage_seal(s);

	mkdir_path("x");
	rename_path("t/c/f1", "x/f1");
	rename_path("t/c/b", "x/b");
	write_file("x/b/f3", 62, 3000, 0, 0);
	fsync_path("x/b");
	fsync_path("x");
	fsync_path("t/c");
	fsync_path(".");
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);

	unlink_path("x/b/f2");
	unlink_path("x/b/f3");
	rmdir_path("x/b");
	rename_path("x", "t/c/x");
	fsync_path("t/c");
	fsync_path(".");
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
}

/* Many small files, then one sync; then changes to many of them, and another sync. */
void workload_small(void)
{
	struct stage *s;
	char rel[32];
	int i;

	mkdir_path("m");
	for (i = 0; i < 160; i++) {
		snprintf(rel, sizeof(rel), "%s%03d", i % 2 ? "m/" : "r", i);
		write_file(rel, 500 + (uint32_t)i, 50 + (size_t)i * 37, 0, 0);
	}
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);

	for (i = 0; i < 160; i += 3) {
		snprintf(rel, sizeof(rel), "%s%03d", i % 2 ? "m/" : "r", i);
		if (i % 9 == 0)
			unlink_path(rel);
		else
			write_file(rel, 700 + (uint32_t)i, 9000, 0, 0);
	}
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
}

/* Checkpoints in progress: large ones (hundreds of dirty nodes and directory blocks), every
 * operation of them a crash point. */
void workload_checkpoint(void)
{
	struct stage *s;
	char rel[32];
	int i, round;

	for (i = 0; i < 6; i++) {
		snprintf(rel, sizeof(rel), "k%d", i);
		mkdir_path(rel);
	}
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 240; i++) {
			snprintf(rel, sizeof(rel), "k%d/f%03d", i % 6, i);
			write_file(rel, 800 + (uint32_t)(round * 1000 + i), 200 + (size_t)i * 20, 0, 0);
		}
		if (round == 1) /* updates of files a checkpoint knows: the bigger pack */
			focus_begin();
		ctl_sync();
		if (round == 1)
			focus_end();
		s = stage_next();
		stage_take_all(s);
		stage_seal(s);
	}
}

/* Filling the device with files synced in batches until ENOSPC, then the checkpoint of the
 * full device (every operation of it a crash point), deletes, and an fsync'ed file in the
 * room they made. */
void workload_full(void)
{
	struct stage *s;
	char rel[32];
	int i, n, err = 0;

	mkdir_path("full");
	for (n = 0; !err; n++) {
		ck_assert_int_lt(n, MAX_FILES - 8);
		snprintf(rel, sizeof(rel), "full/f%03d", n);
		err = write_file_room(rel, 1100 + (uint32_t)n, 120 * 1024);
		if (n % 60 == 59 && !err) {
			ctl_sync();
			s = stage_next();
			stage_take_all(s);
			stage_seal(s);
		}
	}
	ck_assert_int_eq(err, ENOSPC);
	focus_begin();
	ctl_sync();
	focus_end();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);

	for (i = 0; i < n - 1; i += 4) {
		snprintf(rel, sizeof(rel), "full/f%03d", i);
		unlink_path(rel);
	}
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
	write_file("full/after", 1700, 300 * 1024, 0, 1);
	s = stage_next();
	stage_take(s, "full/after");
	stage_seal(s);
}

/* GC at the reserve on a folded layout (--logs 4: moved data goes to the users' warm log).
 * Two files' blocks interleaved until no room is left, one of each pair deleted: every zone
 * half dead, only the reserve free. Then overwrites, each fsync'ed, find their room through
 * foreground GC, which takes zones of the reserve for the warm log that users may not fill
 * meanwhile (segment.c, reserve_paid): power fails while a victim moves into such a zone,
 * while users wait for it, and in the checkpoint that frees it; before that, at the full
 * device, in the checkpoint a packed inode's fsync takes. */
void workload_reserve(void)
{
	struct stage *s;
	char rel[32];
	int i, n, err = 0;

	mkdir_path("r");
	for (i = 0; i < 6; i++) { /* small files, whose inodes the checkpoint packs */
		snprintf(rel, sizeof(rel), "r/s%d", i);
		write_file(rel, 2000 + (uint32_t)i, 8192, 0, 0);
	}
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
	for (n = 0; !err; n++) {
		ck_assert_int_lt(n, MAX_FILES / 2 - 8);
		snprintf(rel, sizeof(rel), "r/a%03d", n);
		err = write_file_room(rel, 2100 + (uint32_t)n, 192 * 1024);
		snprintf(rel, sizeof(rel), "r/b%03d", n);
		if (!err)
			err = write_file_room(rel, 2500 + (uint32_t)n, 192 * 1024);
	}
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
	/* Only the reserve is left: the fsync of a packed inode, which would write it whole out
	 * of its pack, takes a checkpoint instead (node.c, leaves_pack_near_full); every
	 * operation of it a crash point. */
	focus_begin();
	truncate_file("r/s3", 4096);
	fsync_path("r/s3");
	focus_end();
	s = stage_next();
	stage_take(s, "r/s3");
	stage_seal(s);
	for (i = 0; i < n - 1; i++) { /* the last pair is cut short */
		snprintf(rel, sizeof(rel), "r/b%03d", i);
		unlink_path(rel);
	}
	ctl_sync();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
	for (i = 0; i < 60; i++) { /* about a fifth of the device: GC takes zones of the reserve */
		snprintf(rel, sizeof(rel), "r/a%03d", i % (n - 1));
		write_file(rel, 3000 + (uint32_t)i, 192 * 1024, 0, 1);
		s = stage_next();
		stage_take(s, rel);
		stage_seal(s);
	}
}

/* Four writers at once, each on its own file: overwrites at random places, each made durable
 * by its own fsync while the others write (the daemon's per-file locks, appends from several
 * threads to one log, roll-forward groups of several inodes interleaved in one zone). The
 * model is shared, so its updates take a lock; a stage is sealed after its fsync returned,
 * so it counts from a point at or after the true one. Another writer's fsync may checkpoint
 * a write half done (cur_write_parts). */
#define TH_N 4
#define TH_ROUNDS 6

static pthread_mutex_t model_lock = PTHREAD_MUTEX_INITIALIZER;

struct th_arg {
	int id;
	char err[160];
};

static void *th_main(void *arg)
{
	struct th_arg *a = arg;
	unsigned rnd = 1000u + (unsigned)a->id * 7919u;
	uint8_t *b = malloc(256 * 1024);
	char rel[16], p[600];
	int fd, r;

	snprintf(rel, sizeof(rel), "t%d", a->id);
	fd = open(at_mnt(p, sizeof(p), rel), O_CREAT | O_RDWR, 0644);
	for (r = 0; fd >= 0 && !a->err[0] && r < TH_ROUNDS; r++) {
		size_t len, at;
		uint32_t seed = 5000u + (uint32_t)(a->id * 100 + r);
		struct stage *s;

		rnd = rnd * 1103515245u + 12345u;
		at = (size_t)(rnd >> 8) % (384 * 1024);
		len = 4096 + (size_t)(rnd >> 4) % (252 * 1024);
		fill(b, len, seed, at);
		if (pwrite(fd, b, len, (off_t)at) != (ssize_t)len) {
			snprintf(a->err, sizeof(a->err), "%s: pwrite: %s", rel, strerror(errno));
			break;
		}
		pthread_mutex_lock(&model_lock);
		cur_write_parts(rel, seed, at, len);
		cur_write(rel, seed, at, len);
		pthread_mutex_unlock(&model_lock);
		if (r % 3 == 2 ? fdatasync(fd) : fsync(fd)) {
			snprintf(a->err, sizeof(a->err), "%s: fsync: %s", rel, strerror(errno));
			break;
		}
		pthread_mutex_lock(&model_lock);
		s = stage_next();
		stage_take(s, rel);
		stage_seal(s);
		pthread_mutex_unlock(&model_lock);
	}
	if (fd < 0)
		snprintf(a->err, sizeof(a->err), "open %s: %s", rel, strerror(errno));
	else
		close(fd);
	free(b);
	return NULL;
}

void workload_threads(void)
{
	struct th_arg a[TH_N] = {{0}};
	pthread_t th[TH_N];
	int i;

	for (i = 0; i < TH_N; i++) {
		a[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, th_main, &a[i]), 0);
	}
	for (i = 0; i < TH_N; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < TH_N; i++)
		ck_assert_msg(!a[i].err[0], "writer %d: %s", i, a[i].err);
}

/* The files workload with the whole tree encrypted: mkfs --encrypt made the root encrypted,
 * so every name, symlink and block goes through the encrypted paths, and every crash point of
 * this first mount must come back with the root still encrypted (try_point). */
void workload_encrypted(void)
{
	ck_assert(root_encrypted());
	workload();
}

void falloc_path(const char *rel, int mode, size_t off, size_t len)
{
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), rel), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, mode, (off_t)off, (off_t)len), 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

static void shift_path(const char *rel, size_t off, size_t len, int insert)
{
	struct zlfs_ioc_range r = {off, len};
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), rel), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ioctl(fd, insert ? ZLFS_IOC_INSERT_RANGE : ZLFS_IOC_COLLAPSE_RANGE, &r), 0);
	cur_shift(rel, off, len, insert);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

void stage_file_now(const char *rel)
{
	struct stage *s = stage_next();

	stage_take(s, rel);
	stage_seal(s);
}

void stage_root_now(void)
{
	struct stage *s = stage_next();

	stage_take_dir(s, ".");
	stage_seal(s);
}

/* fallocate: reservations (KEEP_SIZE, mode 0) written into, zeroed ranges, collapses and
 * inserts moving blocks (with GC-visible remapped owners), a truncation and an unlink that
 * give reservations back; each step fsync'ed. fsck after every crash point checks that the
 * reserved count matches the reserved pointers. */
void workload_falloc(void)
{
	char p[600];

	write_file("F", 500, 256 * 1024, 0, 1);
	fsync_path(".");
	stage_root_now();
	falloc_path("F", FALLOC_FL_KEEP_SIZE, 256 * 1024, 768 * 1024);
	stage_file_now("F");
	write_file("F", 501, 64 * 1024, 512 * 1024, 0);
	fdatasync_path("F");
	stage_file_now("F");
	falloc_path("F", FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 16 * 1024 + 100, 40000);
	cur_zero("F", 16 * 1024 + 100, 40000, 1);
	stage_file_now("F");
	shift_path("F", 64 * 1024, 32 * 1024, 0);
	stage_file_now("F");
	shift_path("F", 128 * 1024, 16 * 1024, 1);
	stage_file_now("F");
	write_file("F", 502, 8 * 1024, 100 * 1024, 0);
	fdatasync_path("F");
	stage_file_now("F");
	write_file("G", 503, 100 * 1024, 0, 1);
	falloc_path("G", 0, 100 * 1024, 300 * 1024);
	cur_zero("G", 100 * 1024, 300 * 1024, 0);
	fsync_path(".");
	stage_root_now();
	truncate_file("F", 300 * 1024);
	fsync_path("F");
	stage_file_now("F");
	unlink_path("G");
	fsync_path(".");
	ck_assert_int_eq(access(at_mnt(p, sizeof(p), "G"), F_OK), -1);
	stage_root_now();
}

/* RocksDB's way with space: each table preallocated with KEEP_SIZE, written in part and
 * fsync'ed, the rest punched past the end of file (PUNCH_HOLE|KEEP_SIZE) and fsync'ed again;
 * a log preallocated beside them takes a record per table (fdatasync), then is punched and
 * deleted; a table preallocated again is truncated to its own size (which gives that back)
 * and the other is deleted with a reservation. Every flush boundary is tried; fsck after each
 * crash point counts the reserved pointers against the checkpoint. */
void workload_punch(void)
{
	const size_t pre = 1024 * 1024;
	size_t size[2], wal = 0;
	char name[16];
	int i;

	write_file("L", 600, 0, 0, 0);
	for (i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "T%d", i);
		write_file(name, 610 + (uint32_t)i, 0, 0, 0);
	}
	fsync_path(".");
	stage_root_now();
	falloc_path("L", FALLOC_FL_KEEP_SIZE, 0, 512 * 1024);
	stage_file_now("L");
	for (i = 0; i < 2; i++) {
		size_t rec = 1000 + (size_t)i * 777;

		snprintf(name, sizeof(name), "T%d", i);
		size[i] = 300 * 1024 + (size_t)i * 50 * 1024 + 123;
		falloc_path(name, FALLOC_FL_KEEP_SIZE, 0, pre);
		write_file(name, 610 + (uint32_t)i, size[i], 0, 1);
		stage_file_now(name);
		falloc_path(name, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size[i], pre - size[i]);
		stage_file_now(name);
		cur_write_parts("L", 620 + (uint32_t)i, wal, rec);
		write_file("L", 620 + (uint32_t)i, rec, wal, 0);
		fdatasync_path("L");
		wal += rec;
		stage_file_now("L");
	}
	falloc_path("L", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, wal, 512 * 1024 - wal);
	unlink_path("L");
	fsync_path(".");
	stage_root_now();
	falloc_path("T1", FALLOC_FL_KEEP_SIZE, 0, pre);
	truncate_file("T1", size[1]);
	fsync_path("T1");
	stage_file_now("T1");
	falloc_path("T0", FALLOC_FL_KEEP_SIZE, 0, pre);
	unlink_path("T0");
	fsync_path(".");
	stage_root_now();
}

/* Append a record of N bytes of seed SEED through FD, at the end SIZE of REL. The file is one
 * extent of its seed from 0 (a pattern is a function of the offset), so the model takes the
 * append as that extent grown, however many records there are. */
void append_record(int fd, const char *rel, uint32_t seed, size_t *size, size_t n)
{
	uint8_t *b = malloc(n);

	fill(b, n, seed, *size);
	ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
	cur_write_parts(rel, seed, *size, n);
	*size += n;
	cur_write(rel, seed, 0, *size);
	free(b);
}

/* Two logs REL, appended in turn 64 records of 100 to 2,000 bytes on descriptors kept open,
 * fsync and fdatasync in turn every fifth record (each staged), the first log's descriptor
 * closed and opened again half-way (a release, no flush), both fdatasync'ed at the end. */
void append_logs(const char *const rel[2], const uint32_t seed[2], size_t size[2])
{
	char p[600];
	int fd[2], i, k;

	for (k = 0; k < 2; k++) {
		fd[k] = open(at_mnt(p, sizeof(p), rel[k]), O_WRONLY | O_APPEND);
		ck_assert_int_ge(fd[k], 0);
	}
	for (i = 0; i < 64; i++) {
		k = i % 2;
		append_record(fd[k], rel[k], seed[k], &size[k], 100 + (size_t)(i * 397 % 1901));
		if (i % 5 == 4) {
			ck_assert_int_eq(i % 10 == 4 ? fsync(fd[k]) : fdatasync(fd[k]), 0);
			stage_file_now(rel[k]);
		}
		if (i == 31) { /* release: the held block or cluster is stored, without a flush */
			close(fd[0]);
			fd[0] = open(at_mnt(p, sizeof(p), rel[0]), O_WRONLY | O_APPEND);
			ck_assert_int_ge(fd[0], 0);
		}
	}
	for (k = 0; k < 2; k++) {
		ck_assert_int_eq(fdatasync(fd[k]), 0);
		stage_file_now(rel[k]);
		close(fd[k]);
	}
}

/* A log rewritten in place from near its start, as SQLite's write-ahead log once it wraps:
 * frames of a 24-byte header and a 4 KiB page, two frames to a commit, each commit
 * fdatasync'ed. Every write ends inside a block, which is held (fs/file/tailbuf.c) although
 * the end of file lies far beyond it; each commit must find its frames on the device. */
static void rewrite_frames(const char *rel, uint32_t seed)
{
	size_t pos = 32, piece[2] = {24, 4096};
	uint8_t *b = malloc(4096);
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), rel), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	for (int commit = 0; commit < 5; commit++) { /* the last one past the end of file */
		for (int i = 0; i < 4; i++) {
			size_t n = piece[i % 2];

			fill(b, n, seed, pos);
			ck_assert_int_eq(pwrite(fd, b, n, (off_t)pos), (ssize_t)n);
			cur_write_parts(rel, seed, pos, n);
			pos += n;
			cur_write(rel, seed, 32, pos - 32);
		}
		ck_assert_int_eq(fdatasync(fd), 0);
		stage_file_now(rel);
	}
	close(fd);
	free(b);
}

/* RocksDB's write-ahead log on partial blocks held in memory (fs/file/tailbuf.c): two logs kept
 * open take records of 100 to 2,000 bytes one by one, most of them inside one block, and
 * every fifth record fsync's or fdatasync's its log in turn; one log is closed half-way
 * (release writes its held block without a flush) and opened again. A held block reaches the
 * device when it fills, at fsync, release or a checkpoint: at every flush boundary each log
 * must hold at least what its last fsync covered, and past that only whole records it was
 * given (a state it passed through), never other bytes. */
void workload_tail(void)
{
	const char *rel[2] = {"W0", "W1"};
	const uint32_t seed[2] = {700, 701};
	size_t size[2] = {0, 0};
	int k;

	for (k = 0; k < 2; k++)
		write_file(rel[k], seed[k], 0, 0, 0);
	fsync_path(".");
	stage_root_now();
	append_logs(rel, seed, size);
	rewrite_frames(rel[1], 760);
}

/* Inline data (fs/file/inline.c): small files written and fsync'ed, then rewritten in place and
 * fsync'ed (roll-forward restores the inode with its bytes, no checkpoint), grown past the
 * inode's area by an append or a truncate (the conversion: the inline file or the converted
 * one, never between), shrunk, punched, and one unlinked. Every flush boundary is tried. */
void workload_inline(void)
{
	static const size_t size[6] = {1, 700, 2048, 3000, 3907, 3908};
	char name[16];
	int i;

	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "i%d", i);
		write_file(name, 900 + (uint32_t)i, size[i], 0, 1);
	}
	fsync_path(".");
	stage_root_now();
	ctl_sync(); /* known to a checkpoint: their fsyncs roll forward from here */
	for (i = 1; i < 6; i++) {
		snprintf(name, sizeof(name), "i%d", i);
		write_file(name, 910 + (uint32_t)i, size[i] / 2, size[i] / 4, 1);
		stage_file_now(name);
	}
	write_file("i4", 920, 2, 3907, 1); /* 3,907 -> 3,909 bytes: converted */
	stage_file_now("i4");
	write_file("i1", 921, 5000, 700, 1); /* 700 -> 5,700 bytes */
	stage_file_now("i1");
	truncate_file("i2", 9000);           /* converted by a truncate */
	fsync_path("i2");
	stage_file_now("i2");
	truncate_file("i3", 1000);           /* stays inline, the cut bytes zeroed */
	write_file("i3", 922, 10, 2000, 1);  /* and a hole between */
	stage_file_now("i3");
	falloc_path("i5", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 1000);
	cur_zero("i5", 100, 1000, 1);
	stage_file_now("i5");
	truncate_file("i4", 1000);           /* converted files stay in blocks */
	fsync_path("i4");
	stage_file_now("i4");
	unlink_path("i0");
	write_file("n", 923, 3333, 0, 1);    /* a new one, fsync'ed alone */
	fsync_path(".");
	stage_root_now();
}

/* Extended attributes past one xattr node (fs/file/xattr_node.c): a file's attributes grow
 * to 160 small ones over four nodes and three 64 KiB values in value nodes, fsync'ed every
 * 20 operations, with replacements small -> big -> small; then shrink (nodes emptied, the
 * chain compacted, value nodes freed) under fsync; a second file with a chain and a big value
 * is unlinked. Every operation is a state: at each flush boundary every file must have the
 * attributes of its last fsync or of a state after it. */
void workload_xattr(void)
{
	unsigned i;

	write_file("X0", 950, 100, 0, 1);
	write_file("X1", 951, 10, 0, 1);
	fsync_path(".");
	stage_root_now();
	ctl_sync();
	for (i = 0; i < 160; i++) {
		xattr_set_path("X0", i, 40 + i % 50, 1000 + i);
		if (i % 20 == 19) {
			fsync_path("X0");
			stage_file_now("X0");
		}
	}
	for (i = 200; i < 203; i++) {
		xattr_set_path("X0", i, 65536, 2000 + i);
		fsync_path("X0");
		stage_file_now("X0");
	}
	xattr_set_path("X0", 201, 30, 3000);    /* big -> small */
	xattr_set_path("X0", 5, 20000, 3001);   /* small -> big */
	xattr_set_path("X0", 200, 9000, 3002);  /* big -> big */
	fsync_path("X0");
	stage_file_now("X0");
	for (i = 0; i < 40; i++)
		xattr_set_path("X1", i, 100, 4000 + i);
	xattr_set_path("X1", 100, 65536, 4100);
	fsync_path("X1");
	stage_file_now("X1");
	for (i = 0; i < 160; i += 1 + (i >= 100)) {
		if (i == 5)
			continue;
		xattr_rm_path("X0", i);
		if (i % 25 == 24) {
			fsync_path("X0");
			stage_file_now("X0");
		}
	}
	xattr_rm_path("X0", 202);
	fsync_path("X0");
	stage_file_now("X0");
	unlink_path("X1");
	fsync_path(".");
	stage_root_now();
	xattr_set_path("X0", 7, 65536, 5000);   /* after the shrink, grown again */
	fsync_path("X0");
	stage_file_now("X0");
}
