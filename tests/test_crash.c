/*
 * test_crash.c - power cuts in the write path and the checkpoint, through the real daemon.
 *
 * A workload runs on a mounted image whose emulator records a write log. After every fsync
 * that returns, the test notes how many device operations were logged: from that point on,
 * what the fsync covered must survive any power cut. The device is then rebuilt as it was at
 * every flush boundary and at sampled writes in between (whole and torn), mounted again
 * (recovery), compared with what was made durable, and checked with fsck.zlfs.
 */
#include "testutil.h"

#include "zdev_emu.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 400
#define MAX_STAGES 96
#define MAX_EXT 12
#define MAX_HIST 2048
#define MAX_FOCUS 8

/* A file's content: byte i is pat(seed, base + i - off) of the last extent covering i, else 0
 * (a hole): BASE is where in its pattern an extent starts (its offset, until a collapse or an
 * insert moves it). IS_DIR marks a directory (no content). */
struct ext {
	uint32_t off, len, seed, base;
};

struct file_exp {
	char path[64];
	int is_dir;
	size_t size;
	int nex;
	struct ext e[MAX_EXT];
	int may_be_absent; /* written but never made durable: absent, or a prefix of it */
};

struct stage {
	long ops; /* logged operations when the fsync returned */
	int nhist; /* states recorded (hist) by then */
	int nfiles;
	struct file_exp f[MAX_FILES];
};

static struct stage stages[MAX_STAGES];
static int nstages;
/* The tree as the workload sees it now, and every state any path ever had: after a crash, a
 * path may only be found in one of its states (or, mid-write, a prefix of one). */
static struct stage cur;
static struct file_exp hist[MAX_HIST];
static int nhist;
/* Ranges of logged operations where every operation is a crash point (see focus_begin). */
static long focus[MAX_FOCUS][2];
static int nfocus;
static char img[512], logpath[512], mnt[512], out[512], bin[512];

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 9)); }

static void fill(uint8_t *b, size_t n, uint32_t seed, size_t base)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, base + i);
}

/* A file holding SEED's pattern over its SIZE bytes. */
static struct file_exp fe(const char *path, uint32_t seed, size_t size, int may_be_absent)
{
	struct file_exp f = {.size = size, .nex = 1, .may_be_absent = may_be_absent};

	snprintf(f.path, sizeof(f.path), "%s", path);
	f.e[0] = (struct ext){0, (uint32_t)size, seed, 0};
	return f;
}

static struct file_exp *find_in(struct stage *s, const char *path)
{
	for (int i = 0; i < s->nfiles; i++)
		if (!strcmp(s->f[i].path, path))
			return &s->f[i];
	return NULL;
}

static void drop_in(struct stage *s, const char *path)
{
	int i;

	for (i = 0; i < s->nfiles; i++)
		if (!strcmp(s->f[i].path, path))
			s->f[i] = s->f[--s->nfiles];
}

static void hist_add(const struct file_exp *f)
{
	ck_assert_int_lt(nhist, MAX_HIST);
	hist[nhist++] = *f;
}

/* The current state of PATH, created (empty) if new. */
static struct file_exp *cur_file(const char *path)
{
	struct file_exp *f = find_in(&cur, path);

	if (f)
		return f;
	ck_assert_int_lt(cur.nfiles, MAX_FILES);
	f = &cur.f[cur.nfiles++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	return f;
}

static void cur_write(const char *path, uint32_t seed, size_t at, size_t len)
{
	struct file_exp *f = cur_file(path);

	if (f->nex == MAX_EXT) { /* fold the oldest two: only when the newer covers the older */
		ck_assert(f->e[1].off <= f->e[0].off &&
			  f->e[1].off + f->e[1].len >= f->e[0].off + f->e[0].len);
		memmove(&f->e[0], &f->e[1], sizeof(f->e[0]) * --f->nex);
	}
	f->e[f->nex++] = (struct ext){(uint32_t)at, (uint32_t)len, seed, (uint32_t)at};
	if (at + len > f->size)
		f->size = at + len;
	hist_add(f);
}

static void cur_truncate(const char *path, size_t size)
{
	struct file_exp *f = cur_file(path);

	for (int k = 0; k < f->nex; k++) {
		if (f->e[k].off >= size)
			f->e[k].len = 0;
		else if (f->e[k].off + f->e[k].len > size)
			f->e[k].len = (uint32_t)(size - f->e[k].off);
	}
	f->size = size;
	hist_add(f);
}

/* Split extent K of F at offset AT (inside it): the second piece follows the first. */
static void ext_split(struct file_exp *f, int k, size_t at)
{
	struct ext *e = &f->e[k];
	uint32_t cut = (uint32_t)(at - e->off);

	ck_assert_int_lt(f->nex, MAX_EXT);
	memmove(&f->e[k + 1], &f->e[k], sizeof(*e) * (size_t)(f->nex - k));
	f->nex++;
	e->len = cut;
	f->e[k + 1].off += cut;
	f->e[k + 1].len -= cut;
	f->e[k + 1].base += cut;
}

/* Split every extent of F that straddles AT. */
static void ext_split_at(struct file_exp *f, size_t at)
{
	for (int k = 0; k < f->nex; k++)
		if (f->e[k].off < at && f->e[k].off + f->e[k].len > at)
			ext_split(f, k++, at);
}

/* Bytes [OFF, OFF+LEN) read as zeros; extents at or past END move by DELTA. */
static void ext_cut(struct file_exp *f, size_t off, size_t len)
{
	ext_split_at(f, off);
	ext_split_at(f, off + len);
	for (int k = 0; k < f->nex; k++)
		if (f->e[k].off >= off && f->e[k].off + f->e[k].len <= off + len)
			f->e[k].len = 0;
}

/* ZERO_RANGE: zeros, and the size grows unless KEEP. */
static void cur_zero(const char *path, size_t off, size_t len, int keep)
{
	struct file_exp *f = cur_file(path);

	ext_cut(f, off, len);
	if (!keep && off + len > f->size)
		f->size = off + len;
	hist_add(f);
}

/* COLLAPSE_RANGE (INSERT = 0) or INSERT_RANGE of [OFF, OFF+LEN). */
static void cur_shift(const char *path, size_t off, size_t len, int insert)
{
	struct file_exp *f = cur_file(path);

	if (!insert)
		ext_cut(f, off, len);
	else
		ext_split_at(f, off);
	for (int k = 0; k < f->nex; k++)
		if (f->e[k].len && f->e[k].off >= (insert ? off : off + len))
			f->e[k].off = insert ? f->e[k].off + (uint32_t)len : f->e[k].off - (uint32_t)len;
	f->size = insert ? f->size + len : f->size - len;
	hist_add(f);
}

static void cur_mkdir(const char *path)
{
	struct file_exp *f = cur_file(path);

	f->is_dir = 1;
	hist_add(f);
}

/* Rename OLD to NEW in the model, with everything below OLD when it is a directory. */
static void cur_rename(const char *old, const char *new)
{
	size_t ol = strlen(old);
	int i;

	drop_in(&cur, new);
	for (i = 0; i < cur.nfiles; i++) {
		struct file_exp *f = &cur.f[i];
		char tail[64];

		if (strncmp(f->path, old, ol) || (f->path[ol] && f->path[ol] != '/'))
			continue;
		snprintf(tail, sizeof(tail), "%s", f->path + ol);
		snprintf(f->path, sizeof(f->path), "%s%s", new, tail);
		hist_add(f);
	}
}

static char mount_opts[700] = "cp_interval=0"; /* with the key for encrypted workloads */
static int want_encrypted_root; /* the workload's filesystem came from mkfs --encrypt */

static pid_t daemon_start(const char *image)
{
	return tu_daemon_start(image, mnt, mount_opts);
}

static int daemon_stop(pid_t pid) { return tu_daemon_stop(mnt, pid); }

static const char *at_mnt(char *p, size_t len, const char *rel)
{
	snprintf(p, len, "%s/%s", mnt, rel);
	return p;
}

/* Write SIZE bytes of SEED's pattern at AT; the model follows. */
static void write_file(const char *rel, uint32_t seed, size_t size, size_t at, int do_fsync)
{
	char p[600];
	uint8_t *b = malloc(size);
	int fd;

	fd = open(at_mnt(p, sizeof(p), rel), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	fill(b, size, seed, at);
	ck_assert_int_eq(pwrite(fd, b, size, (off_t)at), (ssize_t)size);
	cur_write(rel, seed, at, size);
	if (do_fsync)
		ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	free(b);
}

/* As write_file, for a device that may be full: the open or the write may stop at ENOSPC,
 * and the model follows what was written. Returns 0 or ENOSPC. */
static int write_file_room(const char *rel, uint32_t seed, size_t size)
{
	char p[600];
	uint8_t *b;
	ssize_t n;
	int fd = open(at_mnt(p, sizeof(p), rel), O_CREAT | O_WRONLY, 0644);

	if (fd < 0) {
		ck_assert_int_eq(errno, ENOSPC);
		return ENOSPC;
	}
	b = malloc(size);
	fill(b, size, seed, 0);
	n = pwrite(fd, b, size, 0);
	if (n < 0)
		ck_assert_int_eq(errno, ENOSPC);
	cur_write(rel, seed, 0, n > 0 ? (size_t)n : 0);
	close(fd);
	free(b);
	return n == (ssize_t)size ? 0 : ENOSPC;
}

static void fsync_path(const char *rel)
{
	char p[600];
	int fd;

	fd = open(at_mnt(p, sizeof(p), rel), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

static void truncate_file(const char *rel, size_t size)
{
	char p[600];

	ck_assert_int_eq(truncate(at_mnt(p, sizeof(p), rel), (off_t)size), 0);
	cur_truncate(rel, size);
}

static void rename_path(const char *from, const char *to)
{
	char p[600], q[600];

	ck_assert_int_eq(rename(at_mnt(p, sizeof(p), from), at_mnt(q, sizeof(q), to)), 0);
	cur_rename(from, to);
}

static void unlink_path(const char *rel)
{
	char p[600];

	ck_assert_int_eq(unlink(at_mnt(p, sizeof(p), rel)), 0);
	drop_in(&cur, rel);
}

static void mkdir_path(const char *rel)
{
	char p[600];

	ck_assert_int_eq(mkdir(at_mnt(p, sizeof(p), rel), 0755), 0);
	cur_mkdir(rel);
}

static void rmdir_path(const char *rel)
{
	char p[600];

	ck_assert_int_eq(rmdir(at_mnt(p, sizeof(p), rel)), 0);
	drop_in(&cur, rel);
}

/* `zlfs-ctl sync`: how a sync reaches the daemon (sync(2) does not reach FUSE daemons). */
static void ctl_sync(void)
{
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
}

/* Every operation logged between focus_begin and focus_end is tried as a crash point. */
static void focus_begin(void)
{
	ck_assert_int_lt(nfocus, MAX_FOCUS);
	focus[nfocus][0] = zemu_log_count(logpath) + 1;
}

static void focus_end(void) { focus[nfocus++][1] = zemu_log_count(logpath); }

static int in_focus(long n)
{
	for (int i = 0; i < nfocus; i++)
		if (n >= focus[i][0] && n <= focus[i][1])
			return 1;
	return 0;
}

/* Everything the fsyncs so far promised; stage files are copied forward and edited. */
static struct stage *stage_next(void)
{
	struct stage *s;

	ck_assert_int_lt(nstages, MAX_STAGES);
	s = &stages[nstages];
	if (nstages)
		*s = stages[nstages - 1];
	nstages++;
	return s;
}

static void stage_seal(struct stage *s)
{
	s->ops = zemu_log_count(logpath);
	s->nhist = nhist;
	ck_assert_int_gt(s->ops, 0);
}

static struct file_exp *stage_file(struct stage *s, const char *path)
{
	struct file_exp *f = find_in(s, path);

	if (f)
		return f;
	ck_assert_int_lt(s->nfiles, MAX_FILES);
	f = &s->f[s->nfiles++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	return f;
}

static void stage_drop(struct stage *s, const char *path) { drop_in(s, path); }

/* PATH is durable as the workload has it now (fsync of a file). */
static void stage_take(struct stage *s, const char *path)
{
	struct file_exp *f = find_in(&cur, path);

	ck_assert_ptr_nonnull(f);
	*stage_file(s, path) = *f;
}

static int parent_is(const char *path, const char *dir)
{
	const char *slash = strrchr(path, '/');
	size_t dl = strlen(dir);

	if (!strcmp(dir, "."))
		return !slash;
	return slash && (size_t)(slash - path) == dl && !strncmp(path, dir, dl);
}

/* fsync of directory DIR: its entries are durable as they are now - present ones with their
 * content (a directory fsync is a checkpoint), removed ones gone. */
static void stage_take_dir(struct stage *s, const char *dir)
{
	int i;

	for (i = 0; i < s->nfiles; i++)
		if (parent_is(s->f[i].path, dir) && !find_in(&cur, s->f[i].path))
			s->f[i--] = s->f[--s->nfiles];
	for (i = 0; i < cur.nfiles; i++)
		if (parent_is(cur.f[i].path, dir))
			*stage_file(s, cur.f[i].path) = cur.f[i];
}

/* `zlfs-ctl sync` (a checkpoint): the whole tree is durable as it is now. */
static void stage_take_all(struct stage *s)
{
	memcpy(s->f, cur.f, sizeof(cur.f[0]) * (size_t)cur.nfiles);
	s->nfiles = cur.nfiles;
}

/* ---- workloads --------------------------------------------------------------------------
 * Each stage ends with the fsync, fsyncdir or sync that makes it durable. */

/* create + write + fsync, renames, truncation, roll-forward of files a checkpoint knows. */
static void workload(void)
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

/* GC under fsync: a small image churned until zones must be migrated, each put fsync'ed. */
static void workload_gc(void)
{
	unsigned rnd = 777;
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
	}
}

static void fdatasync_path(const char *rel)
{
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), rel), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fdatasync(fd), 0);
	close(fd);
}

/* Overwrites in the middle of a large file, each made durable by fdatasync: aligned, unaligned,
 * across the end, and a truncation that drops index nodes. */
static void workload_overwrite(void)
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

/* Unlink while open: the orphan goes into checkpoints while it is still written to; after a
 * crash the next mount must free it (the inode count check in try_point sees a leak). */
static void workload_unlink_open(void)
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
static void workload_dirs(void)
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
static void workload_small(void)
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
static void workload_checkpoint(void)
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
static void workload_full(void)
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

/* ---- checking a crash point ------------------------------------------------------------- */

/* F's content, SIZE bytes of it, into B. */
static void expect_into(const struct file_exp *f, uint8_t *b, size_t size)
{
	memset(b, 0, size);
	for (int k = 0; k < f->nex; k++) {
		size_t off = f->e[k].off, len = f->e[k].len;

		if (off < size)
			fill(b + off, off + len > size ? size - off : len, f->e[k].seed, f->e[k].base);
	}
}

/* Read PATH whole: its size, or -1. *B is malloc'ed. */
static ssize_t read_whole(const char *path, uint8_t **b)
{
	char p[600];
	struct stat st;
	ssize_t n = -1;
	int fd = open(at_mnt(p, sizeof(p), path), O_RDONLY);

	*b = NULL;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*b = malloc((size_t)st.st_size + 1);
	n = read(fd, *b, (size_t)st.st_size + 1);
	close(fd);
	return n == st.st_size ? n : -1;
}

/* NULL when content B of N bytes is F's exactly, or, with PREFIX_OK, a prefix of it. */
static const char *match(const char *path, const uint8_t *b, ssize_t n,
			 const struct file_exp *f, int prefix_ok, char *why, size_t wl)
{
	uint8_t *e;
	const char *bad = NULL;

	if ((size_t)n != f->size && !(prefix_ok && (size_t)n < f->size)) {
		snprintf(why, wl, "%s has size %zd, expected %zu", path, n, f->size);
		return why;
	}
	e = malloc((size_t)n + 1);
	expect_into(f, e, (size_t)n);
	if (memcmp(b, e, (size_t)n)) {
		for (ssize_t i = 0; i < n; i++)
			if (b[i] != e[i]) {
				snprintf(why, wl, "%s differs at byte %zd", path, i);
				break;
			}
		bad = why;
	}
	free(e);
	return bad;
}

/* NULL when the file at PATH holds F's content exactly, or, with PREFIX_OK, a prefix of it. */
static const char *verify_file_as(const char *path, const struct file_exp *f, int prefix_ok,
				  char *why, size_t wl)
{
	char p[600];
	struct stat st;
	uint8_t *b;
	ssize_t n;
	const char *bad;

	if (stat(at_mnt(p, sizeof(p), path), &st)) {
		snprintf(why, wl, "%s missing", path);
		return why;
	}
	if (f->is_dir || S_ISDIR(st.st_mode)) {
		snprintf(why, wl, "%s is %sa directory", path, S_ISDIR(st.st_mode) ? "" : "not ");
		return f->is_dir == !!S_ISDIR(st.st_mode) ? NULL : why;
	}
	n = read_whole(path, &b);
	if (n < 0) {
		snprintf(why, wl, "%s: cannot read it whole", path);
		free(b);
		return why;
	}
	bad = match(path, b, n, f, prefix_ok, why, wl);
	free(b);
	return bad;
}

static const char *verify_file(const struct file_exp *f, char *why, size_t wl)
{
	char p[600];
	struct stat st;

	if (f->may_be_absent && stat(at_mnt(p, sizeof(p), f->path), &st))
		return NULL;
	return verify_file_as(f->path, f, f->may_be_absent, why, wl);
}

/* A file of stage S may also be found as a later stage left it (the crash came after that
 * state was durable but before the test saw its fsync return), or in any state the workload
 * gave it after S: a change made after an fsync may become durable at any time (a checkpoint
 * for any reason), so it may replace what that fsync made durable - as a prefix, mid-write. */
static const char *verify_any(int si, int fi, char *why, size_t wl)
{
	const struct file_exp *f = &stages[si].f[fi];
	char later[256], p[600];
	struct stat st;
	int k, i;

	if (!verify_file(f, why, wl))
		return NULL;
	for (k = si + 1; k < nstages; k++) {
		for (i = 0; i < stages[k].nfiles; i++)
			if (!strcmp(stages[k].f[i].path, f->path))
				break;
		if (i < stages[k].nfiles && !verify_file(&stages[k].f[i], later, sizeof(later)))
			return NULL;
		if (i == stages[k].nfiles && stat(at_mnt(p, sizeof(p), f->path), &st))
			return NULL;
	}
	for (k = stages[si].nhist; k < nhist; k++)
		if (!strcmp(hist[k].path, f->path) && !hist[k].is_dir &&
		    !verify_file_as(f->path, &hist[k], 1, later, sizeof(later)))
			return NULL;
	return why;
}

/* No file holds data it never had, no entry the workload never made: every path found must
 * be, exactly or as a prefix cut by the crash, one of the states that path passed through. */
static const char *walk_one(const char *rel, int is_dir, char *why, size_t wl)
{
	char tmp[256] = "";
	uint8_t *b = NULL;
	ssize_t n = is_dir ? 0 : read_whole(rel, &b);
	int i, seen = 0, ok = 0;

	for (i = 0; i < nhist && !ok && n >= 0; i++) {
		if (strcmp(hist[i].path, rel))
			continue;
		seen = 1;
		if (is_dir || hist[i].is_dir)
			ok = is_dir == hist[i].is_dir;
		else
			ok = !match(rel, b, n, &hist[i], 1, tmp, sizeof(tmp));
	}
	free(b);
	if (ok)
		return NULL;
	if (seen)
		snprintf(why, wl, "%.60s holds a state it never had (%.150s, for one)", rel, tmp);
	else
		snprintf(why, wl, "%.60s: the workload never made it", rel);
	return why;
}

static const char *walk_tree(const char *rel, long *inodes, char *why, size_t wl)
{
	char p[600], sub[300];
	struct dirent *de;
	const char *bad = NULL;
	DIR *d = opendir(at_mnt(p, sizeof(p), rel));

	if (!d) {
		snprintf(why, wl, "cannot list %s", rel);
		return why;
	}
	++*inodes;
	while (!bad && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strcmp(rel, "."))
			snprintf(sub, sizeof(sub), "%s", de->d_name);
		else
			snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name);
		bad = walk_one(sub, de->d_type == DT_DIR, why, wl);
		if (!bad && de->d_type == DT_DIR)
			bad = walk_tree(sub, inodes, why, wl);
		else if (!bad)
			++*inodes;
	}
	closedir(d);
	return bad;
}

/* The tree holds only states the workload passed through, and the filesystem counts exactly
 * the inodes the tree has: an orphan left behind by the crash would be one more. */
static const char *verify_tree(char *why, size_t wl)
{
	long inodes = 0, counted;

	if (walk_tree(".", &inodes, why, wl))
		return why;
	counted = tu_ctl_stat(mnt, "inodes");
	if (counted != inodes) {
		snprintf(why, wl, "%ld inodes in use, %ld in the tree: an orphan was not freed",
			 counted, inodes);
		return why;
	}
	return NULL;
}

static int file_there(const char *rel)
{
	char p[600];
	struct stat st;

	return !stat(at_mnt(p, sizeof(p), rel), &st) && st.st_size == 4096;
}

/* Whether the device was left full: no free zone above the GC reserve, or no room for data
 * (what a new inode and its directory block owe can take the last of it). */
static int device_left_full(void)
{
	long free = tu_ctl_stat(mnt, "free"), reserve = tu_ctl_stat(mnt, "free_zone_reserve");
	long room = tu_ctl_stat(mnt, "free_for_data");

	if (free < 0 || reserve < 0 || room < 0)
		return 0; /* stats unreadable: no excuse */
	return free <= reserve || room == 0;
}

/* After recovery the filesystem must take new work and make it durable: a new file and a
 * directory fsync (a checkpoint). A device left full may refuse it with ENOSPC (*WAS_FULL).
 * NULL on success. */
static const char *life_after(char *why, size_t wl, int *was_full)
{
	char p[600];
	uint8_t b[4096];
	const char *step = "create";
	int fd = open(at_mnt(p, sizeof(p), "after-recovery"), O_CREAT | O_WRONLY, 0644);
	int err = fd < 0 ? errno : 0;

	fill(b, sizeof(b), 77, 0);
	errno = 0;
	if (fd >= 0 && ((step = "write", write(fd, b, sizeof(b)) != (ssize_t)sizeof(b)) ||
			(step = "fsync", fsync(fd))))
		err = errno ? errno : EIO; /* a short write sets no errno */
	if (fd >= 0)
		close(fd);
	*was_full = err == ENOSPC && device_left_full();
	if (err && !*was_full) {
		snprintf(why, wl, "cannot %s after recovery: %s (%ld zones free, %ld blocks valid, "
			 "%ld free for data)", step, strerror(err), tu_ctl_stat(mnt, "free"),
			 tu_ctl_stat(mnt, "valid"), tu_ctl_stat(mnt, "free_for_data"));
		return why;
	}
	if (!err)
		fsync_path(".");
	return NULL;
}

/* Whether the root of the mounted filesystem is encrypted. */
static int root_encrypted(void)
{
	struct zlfs_ioc_encrypt e = {0};
	int fd = open(mnt, O_RDONLY | O_DIRECTORY), ret;

	ret = fd >= 0 && !ioctl(fd, ZLFS_IOC_GET_ENCRYPT, &e) && (e.flags & ZLFS_ENC_ENCRYPTED);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Mount the rebuilt device and check what stage SI promised, and the whole tree. */
static const char *check_mounted(int si, char *why, size_t wl, int *was_full)
{
	const struct stage *s = si >= 0 ? &stages[si] : NULL;
	int i;

	for (i = 0; s && i < s->nfiles; i++)
		if (verify_any(si, i, why, wl))
			return why;
	if (verify_tree(why, wl))
		return why;
	return life_after(why, wl, was_full); /* recovered: can it go on? */
}

/* Rebuild, mount, compare, write more, unmount, remount, fsck. NULL when the point passes. */
static const char *try_point(long n, int torn, char *why, size_t wl)
{
	const char *bad;
	pid_t pid;
	int i, rc, si = -1, was_full = 0;

	for (i = 0; i < nstages; i++)
		if (stages[i].ops <= n)
			si = i;
	unlink(out);
	if (zemu_replay(img, logpath, n, out, torn)) {
		snprintf(why, wl, "replay failed");
		return why;
	}
	pid = daemon_start(out);
	if (pid < 0) {
		snprintf(why, wl, "mount failed");
		return why;
	}
	bad = check_mounted(si, why, wl, &was_full);
	if (!bad && want_encrypted_root && !root_encrypted())
		bad = strcpy(why, "the root directory is not encrypted");
	rc = daemon_stop(pid);
	if (bad)
		return bad;
	if (rc) {
		snprintf(why, wl, "daemon exited with %d", rc);
		return why;
	}
	pid = daemon_start(out); /* what it wrote after recovery is there after a remount */
	if (pid < 0) {
		snprintf(why, wl, "the mount after recovery failed");
		return why;
	}
	if (!was_full && !file_there("after-recovery")) {
		daemon_stop(pid);
		snprintf(why, wl, "a file made durable after recovery is lost at the next mount");
		return why;
	}
	daemon_stop(pid);
	rc = tu_sh("%s -n %s >/dev/null 2>&1", tu_bin(bin, sizeof(bin), "fsck.zlfs"), out);
	if (rc) {
		snprintf(why, wl, "fsck.zlfs -n exits %d", rc);
		return why;
	}
	return NULL;
}

/* Four writers at once, each on its own file: overwrites at random places, each made durable
 * by its own fsync while the others write (the daemon's per-file locks, appends from several
 * threads to one log, roll-forward groups of several inodes interleaved in one zone). The
 * model is shared, so its updates take a lock; a stage is sealed after its fsync returned,
 * so it counts from a point at or after the true one. */
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

static void workload_threads(void)
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

/* ---- enumeration -------------------------------------------------------------------------- */

/* The files workload with the whole tree encrypted: mkfs --encrypt made the root encrypted,
 * so every name, symlink and block goes through the encrypted paths, and every crash point of
 * this first mount must come back with the root still encrypted (try_point). */
static void workload_encrypted(void)
{
	ck_assert(root_encrypted());
	workload();
}

static void falloc_path(const char *rel, int mode, size_t off, size_t len)
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

static void stage_file_now(const char *rel)
{
	struct stage *s = stage_next();

	stage_take(s, rel);
	stage_seal(s);
}

static void stage_root_now(void)
{
	struct stage *s = stage_next();

	stage_take_dir(s, ".");
	stage_seal(s);
}

/* fallocate: reservations (KEEP_SIZE, mode 0) written into, zeroed ranges, collapses and
 * inserts moving blocks (with GC-visible remapped owners), a truncation and an unlink that
 * give reservations back; each step fsync'ed. fsck after every crash point checks that the
 * reserved count matches the reserved pointers. */
static void workload_falloc(void)
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

/* A workload and how its crash points are chosen. Adding one is one entry here. */
struct workload_def {
	const char *name;
	uint64_t size;    /* image bytes */
	void (*run)(void);
	long max;         /* sampled crash points in the quick run */
	int every_flush;  /* also every flush boundary and the write before each (torn) */
	int encrypt;      /* mkfs --encrypt, mounted with its key */
};

static const struct workload_def workloads[] = {
	{"files", 256ULL << 20, workload, 30, 1},
	{"gc", 64ULL << 20, workload_gc, 30, 0},
	{"overwrite", 64ULL << 20, workload_overwrite, 8, 0},
	{"unlink-open", 64ULL << 20, workload_unlink_open, 8, 0},
	{"dirs", 64ULL << 20, workload_dirs, 8, 0},
	{"small", 64ULL << 20, workload_small, 6, 0},
	{"checkpoint", 64ULL << 20, workload_checkpoint, 4, 0},
	{"full", 64ULL << 20, workload_full, 6, 0},
	{"encrypted", 256ULL << 20, workload_encrypted, 20, 0, 1},
	{"threads", 64ULL << 20, workload_threads, 20, 0},
	{"falloc", 64ULL << 20, workload_falloc, 12, 0},
};

/* An image formatted with encryption and a key file next to it; mounts pass the key. */
static void encrypted_fs(const char *file, const struct zemu_create_opts *o)
{
	char key[512];

	tu_fresh_fs(file, o, img, sizeof(img), mnt, sizeof(mnt));
	tu_path(key, sizeof(key), "crash.key");
	unlink(key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	ck_assert_int_eq(tu_sh("%s -q -f --encrypt --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), key, img), 0);
	snprintf(mount_opts, sizeof(mount_opts), "cp_interval=0,keyfile=%s", key);
}

static void model_reset(void)
{
	nstages = 0;
	nhist = 0;
	nfocus = 0;
	memset(&cur, 0, sizeof(cur));
}

/* Run the workload on a fresh logged image; returns the zones GC reclaimed meanwhile. */
static long record(const struct workload_def *w, long *first)
{
	struct zemu_create_opts o = {.size = w->size, .zone_size = 2 << 20, .max_open = 12,
				     .max_active = 12};
	char file[64];
	long gc_zones;
	pid_t pid;

	model_reset();
	snprintf(file, sizeof(file), "%s.log", w->name);
	tu_path(logpath, sizeof(logpath), file);
	tu_path(out, sizeof(out), "crash-out.img");
	unlink(out);
	o.log_path = logpath;
	snprintf(file, sizeof(file), "%s.img", w->name);
	snprintf(mount_opts, sizeof(mount_opts), "cp_interval=0");
	want_encrypted_root = w->encrypt;
	if (w->encrypt)
		encrypted_fs(file, &o);
	else
		tu_fresh_fs(file, &o, img, sizeof(img), mnt, sizeof(mnt));
	*first = zemu_log_count(logpath); /* before this the device holds no filesystem yet */
	pid = daemon_start(img);
	ck_assert_int_gt(pid, 0);
	w->run();
	gc_zones = tu_ctl_stat(mnt, "zones_reclaimed");
	ck_assert_int_eq(daemon_stop(pid), 0);
	return gc_zones;
}

/* Try crash points of workload W: with every_flush, every flush boundary and the write just
 * before each flush, torn (a checkpoint pack, the last slot of an fsync); every operation in
 * a focus range, whole and torn; a sample of about MAX other writes (whole and torn); the
 * end. With ZLFS_CRASH_ALL=1, every operation, whole and torn. */
static long enumerate(const struct workload_def *w)
{
	char why[512], *kinds;
	long total, n, tried = 0, failed = 0, points = 0, first, step, gc_zones;
	int all = getenv("ZLFS_CRASH_ALL") && atoi(getenv("ZLFS_CRASH_ALL"));
	int torn;

	gc_zones = record(w, &first);
	total = zemu_log_count(logpath);
	kinds = malloc((size_t)total + 1);
	ck_assert_int_eq(zemu_log_kinds(logpath, kinds, total), total);
	for (n = first; n <= total; n++)
		points += kinds[n - 1] == 'W' || (!w->every_flush && kinds[n - 1] == 'F');
	step = all || points <= w->max ? 1 : points / w->max + 1;
	for (n = first, points = 0; n <= total; n++) {
		int wr = kinds[n - 1] == 'W', f = kinds[n - 1] == 'F', foc = in_focus(n);
		int before_flush = w->every_flush && wr && n < total && kinds[n] == 'F';
		int sampled = (wr || (f && !w->every_flush)) && (points++ % step == 0);

		if (!(f && w->every_flush) && !before_flush && !sampled && !foc && n != total)
			continue;
		for (torn = before_flush && !sampled && !foc; torn <= wr; torn++) {
			tried++;
			if (try_point(n, torn, why, sizeof(why))) {
				failed++;
				printf("%s: crash point %ld/%ld%s: %s\n", w->name, n, total,
				       torn ? " (torn)" : "", why);
			}
		}
	}
	printf("%s: crash points tried: %ld, failed: %ld (%ld logged operations, %d durable "
	       "stages, %ld zones reclaimed by GC)\n", w->name, tried, failed, total, nstages,
	       gc_zones);
	fflush(stdout);
	free(kinds);
	ck_assert_int_gt(tried, 10);
	ck_assert_int_eq(failed, 0);
	return gc_zones;
}

START_TEST(t_crash)
{
	long gc = enumerate(&workloads[_i]);

	if (!strcmp(workloads[_i].name, "gc"))
		ck_assert_int_gt(gc, 0); /* GC did run */
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	int i, n = (int)(sizeof(workloads) / sizeof(workloads[0]));

	if (tu_fuse_missing())
		return 77;
	s = suite_create("crash");
	for (i = 0; i < n; i++) { /* CK_RUN_CASE=<workload name> runs one of them */
		tc = tcase_create(workloads[i].name);
		tcase_set_timeout(tc, 1800);
		tcase_add_loop_test(tc, t_crash, i, i + 1);
		suite_add_tcase(s, tc);
	}
	return tu_run_suite(s);
}
