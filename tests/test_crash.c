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

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 64
#define MAX_STAGES 96

struct file_exp {
	char path[64];
	uint32_t seed;
	size_t size;
	int may_be_absent; /* written but never made durable: absent, or a prefix of it */
};

struct stage {
	long ops; /* logged operations when the fsync returned */
	int nfiles;
	struct file_exp f[MAX_FILES];
};

static struct stage stages[MAX_STAGES];
static int nstages;
static char img[512], logpath[512], mnt[512], out[512], bin[512];

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 9)); }

static void fill(uint8_t *b, size_t n, uint32_t seed, size_t base)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, base + i);
}

static pid_t daemon_start(const char *image)
{
	return tu_daemon_start(image, mnt, "cp_interval=0");
}

static int daemon_stop(pid_t pid) { return tu_daemon_stop(mnt, pid); }

static void write_file(const char *rel, uint32_t seed, size_t size, size_t at, int do_fsync)
{
	char p[600];
	uint8_t *b = malloc(size);
	int fd;

	snprintf(p, sizeof(p), "%s/%s", mnt, rel);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	fill(b, size, seed, at);
	ck_assert_int_eq(pwrite(fd, b, size, (off_t)at), (ssize_t)size);
	if (do_fsync)
		ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	free(b);
}

static void fsync_path(const char *rel)
{
	char p[600];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", mnt, rel);
	fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
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
	ck_assert_int_gt(s->ops, 0);
}

static struct file_exp *stage_file(struct stage *s, const char *path)
{
	int i;

	for (i = 0; i < s->nfiles; i++)
		if (!strcmp(s->f[i].path, path))
			return &s->f[i];
	ck_assert_int_lt(s->nfiles, MAX_FILES);
	memset(&s->f[s->nfiles], 0, sizeof(s->f[0]));
	snprintf(s->f[s->nfiles].path, sizeof(s->f[0].path), "%s", path);
	return &s->f[s->nfiles++];
}

static void stage_drop(struct stage *s, const char *path)
{
	int i;

	for (i = 0; i < s->nfiles; i++)
		if (!strcmp(s->f[i].path, path))
			s->f[i] = s->f[--s->nfiles];
}

/* The workload: each stage ends with the fsync that makes it durable. */
static void workload(void)
{
	struct stage *s;
	char p[600], q[600];
	int i;

	write_file("a", 1, 64 * 1024, 0, 1);
	s = stage_next();
	*stage_file(s, "a") = (struct file_exp){"a", 1, 64 * 1024, 0};
	stage_seal(s);

	snprintf(p, sizeof(p), "%s/d", mnt);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	write_file("d/b", 2, 200 * 1024 + 100, 0, 1);
	fsync_path("d");
	s = stage_next();
	*stage_file(s, "d/b") = (struct file_exp){"d/b", 2, 200 * 1024 + 100, 0};
	stage_seal(s);

	write_file("c", 4, 1024 * 1024, 0, 0); /* never fsync'ed on its own */
	write_file("e", 5, 4096, 0, 1);
	s = stage_next();
	*stage_file(s, "e") = (struct file_exp){"e", 5, 4096, 0};
	*stage_file(s, "c") = (struct file_exp){"c", 4, 1024 * 1024, 1};
	stage_seal(s);

	snprintf(p, sizeof(p), "%s/d/b", mnt);
	snprintf(q, sizeof(q), "%s/a", mnt);
	ck_assert_int_eq(rename(p, q), 0);
	fsync_path("d");
	fsync_path(".");
	s = stage_next();
	stage_drop(s, "d/b");
	*stage_file(s, "a") = (struct file_exp){"a", 2, 200 * 1024 + 100, 0};
	stage_seal(s);

	for (i = 0; i < 40; i++) {
		char rel[32];

		snprintf(rel, sizeof(rel), "d/s%02d", i);
		write_file(rel, 100 + (uint32_t)i, 100 + (size_t)i * 97, 0, 0);
	}
	fsync_path("d");
	s = stage_next();
	for (i = 0; i < 40; i++) {
		char rel[32];

		struct file_exp *f;

		snprintf(rel, sizeof(rel), "d/s%02d", i);
		f = stage_file(s, rel);
		f->seed = 100 + (uint32_t)i;
		f->size = 100 + (size_t)i * 97;
		f->may_be_absent = 0;
	}
	stage_seal(s);

	snprintf(p, sizeof(p), "%s/e", mnt);
	ck_assert_int_eq(unlink(p), 0);
	write_file("big", 9, 3 * 1024 * 1024, 0, 1);
	s = stage_next();
	stage_drop(s, "e");
	*stage_file(s, "big") = (struct file_exp){"big", 9, 3 * 1024 * 1024, 0};
	stage_seal(s);

	/* Files that exist in a checkpoint: fsync rolls them forward without one. */
	write_file("a", 11, 200 * 1024 + 100, 0, 1);
	s = stage_next();
	*stage_file(s, "a") = (struct file_exp){"a", 11, 200 * 1024 + 100, 0};
	stage_seal(s);

	write_file("big", 9, 3 * 1024 * 1024, 3 * 1024 * 1024, 1); /* grows into direct nodes */
	s = stage_next();
	*stage_file(s, "big") = (struct file_exp){"big", 9, 6 * 1024 * 1024, 0};
	stage_seal(s);

	snprintf(p, sizeof(p), "%s/a", mnt);
	ck_assert_int_eq(truncate(p, 5000), 0);
	fsync_path("a");
	write_file("d/s07", 12, 100 + 7 * 97, 0, 1);
	s = stage_next();
	*stage_file(s, "a") = (struct file_exp){"a", 11, 5000, 0};
	*stage_file(s, "d/s07") = (struct file_exp){"d/s07", 12, 100 + 7 * 97, 0};
	stage_seal(s);
}

/* Returns a description of the first mismatch, or NULL. */
static const char *verify_file(const struct file_exp *f, char *why, size_t wl)
{
	char p[600];
	struct stat st;
	uint8_t *b;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", mnt, f->path);
	if (stat(p, &st)) {
		if (f->may_be_absent)
			return NULL;
		snprintf(why, wl, "%s missing", f->path);
		return why;
	}
	if ((size_t)st.st_size != f->size && !(f->may_be_absent && (size_t)st.st_size < f->size)) {
		snprintf(why, wl, "%s has size %lld, expected %zu", f->path, (long long)st.st_size,
			 f->size);
		return why;
	}
	b = malloc(f->size + 1);
	fd = open(p, O_RDONLY);
	n = fd >= 0 ? read(fd, b, f->size + 1) : -1;
	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; n == st.st_size && i < n; i++)
		if (b[i] != pat(f->seed, (size_t)i)) {
			snprintf(why, wl, "%s differs at byte %zd", f->path, i);
			free(b);
			return why;
		}
	free(b);
	if (n != st.st_size) {
		snprintf(why, wl, "%s: read %zd of %lld bytes", f->path, n, (long long)st.st_size);
		return why;
	}
	return NULL;
}

/* A file of stage S may also be found as a later stage left it: the crash came after that
 * state was durable but before the test saw its fsync return. */
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
		snprintf(p, sizeof(p), "%s/%s", mnt, f->path);
		if (i == stages[k].nfiles && stat(p, &st))
			return NULL;
	}
	return why;
}

static int file_there(const char *rel)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", mnt, rel);
	return !stat(p, &st) && st.st_size == 4096;
}

/* After recovery the filesystem must take new work and make it durable: a new file and a
 * directory fsync (a checkpoint). NULL on success. */
static const char *life_after(char *why, size_t wl)
{
	write_file("after-recovery", 77, 4096, 0, 1);
	fsync_path(".");
	if (!file_there("after-recovery")) {
		snprintf(why, wl, "cannot write after recovery");
		return why;
	}
	return NULL;
}

/* Rebuild, mount, compare, write more, unmount, remount, fsck. NULL when the point passes. */
static const char *try_point(long n, int torn, char *why, size_t wl)
{
	const struct stage *s = NULL;
	pid_t pid;
	int i, rc, si = -1;

	for (i = 0; i < nstages; i++)
		if (stages[i].ops <= n)
			si = i;
	s = si >= 0 ? &stages[si] : NULL;
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
	for (i = 0; s && i < s->nfiles; i++)
		if (verify_any(si, i, why, wl))
			break;
	if (!(s && i < s->nfiles) && life_after(why, wl)) /* recovered: can it go on? */
		i = -1;
	rc = daemon_stop(pid);
	if ((s && i < s->nfiles) || i < 0)
		return why;
	if (rc) {
		snprintf(why, wl, "daemon exited with %d", rc);
		return why;
	}
	pid = daemon_start(out); /* what it wrote after recovery is there after a remount */
	if (pid < 0 || !file_there("after-recovery")) {
		if (pid > 0)
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

/* GC under fsync: a small image churned until zones must be migrated, each put fsync'ed. */
static void workload_gc(void)
{
	unsigned rnd = 777;
	int i, r;

	for (i = 0; i < 20; i++) {
		char rel[16];
		struct stage *s;
		struct file_exp *f;

		snprintf(rel, sizeof(rel), "g%02d", i);
		write_file(rel, 200 + (uint32_t)i, (size_t)(900 + i * 13) * 1024, 0, 1);
		s = stage_next();
		f = stage_file(s, rel);
		f->seed = 200 + (uint32_t)i;
		f->size = (size_t)(900 + i * 13) * 1024;
		stage_seal(s);
	}
	for (r = 0; r < 60; r++) {
		char rel[16], p[600];
		struct stage *s;
		struct file_exp *f;
		size_t size;

		rnd = rnd * 1103515245 + 12345;
		i = (int)((rnd >> 8) % 20);
		size = (size_t)(500 + (rnd >> 20) % 500) * 1024;
		snprintf(rel, sizeof(rel), "g%02d", i);
		snprintf(p, sizeof(p), "%s/%s", mnt, rel);
		ck_assert_int_eq(truncate(p, 0), 0);
		write_file(rel, 300 + (uint32_t)r, size, 0, 1);
		s = stage_next();
		f = stage_file(s, rel);
		f->seed = 300 + (uint32_t)r;
		f->size = size;
		stage_seal(s);
	}
}

/* Run WORKLOAD on a fresh logged image of SIZE, then try crash points (see below), or every
 * operation, whole and torn, with ZLFS_CRASH_ALL=1. */
static long enumerate(const char *name, uint64_t size, void (*wl)(void), long max,
		      int every_flush)
{
	struct zemu_create_opts o = {.size = size, .zone_size = 2 << 20, .max_open = 12,
				     .max_active = 12};
	char why[256], *kinds, file[64];
	long total, n, tried = 0, failed = 0, points = 0, first, step, gc_zones;
	/* ZLFS_CRASH_ALL=1: every logged operation, not a sample */
	int all = getenv("ZLFS_CRASH_ALL") && atoi(getenv("ZLFS_CRASH_ALL"));
	pid_t pid;
	int torn;

	nstages = 0;
	snprintf(file, sizeof(file), "%s.log", name);
	tu_path(logpath, sizeof(logpath), file);
	tu_path(out, sizeof(out), "crash-out.img");
	unlink(out);
	o.log_path = logpath;
	snprintf(file, sizeof(file), "%s.img", name);
	tu_fresh_fs(file, &o, img, sizeof(img), mnt, sizeof(mnt));
	first = zemu_log_count(logpath); /* before this the device holds no filesystem yet */
	pid = daemon_start(img);
	ck_assert_int_gt(pid, 0);
	wl();
	gc_zones = tu_ctl_stat(mnt, "zones_reclaimed");
	ck_assert_int_eq(daemon_stop(pid), 0);

	total = zemu_log_count(logpath);
	kinds = malloc((size_t)total + 1);
	ck_assert_int_eq(zemu_log_kinds(logpath, kinds, total), total);
	/* With EVERY_FLUSH: every flush boundary and the write just before each flush, torn (a
	 * checkpoint pack, the last slot of an fsync), plus a sample of about MAX other writes.
	 * Without: a sample of about MAX of all of them. */
	for (n = first; n <= total; n++)
		points += kinds[n - 1] == 'W' || (!every_flush && kinds[n - 1] == 'F');
	step = all || points <= max ? 1 : points / max + 1;
	for (n = first, points = 0; n <= total; n++) {
		int w = kinds[n - 1] == 'W', f = kinds[n - 1] == 'F';
		int before_flush = every_flush && w && n < total && kinds[n] == 'F';
		int sampled = (w || (f && !every_flush)) && (points++ % step == 0);

		if (!(f && every_flush) && !before_flush && !sampled && n != total)
			continue;
		for (torn = before_flush && !sampled; torn <= w; torn++) {
			tried++;
			if (try_point(n, torn, why, sizeof(why))) {
				failed++;
				printf("%s: crash point %ld/%ld%s: %s\n", name, n, total,
				       torn ? " (torn)" : "", why);
			}
		}
	}
	printf("%s: crash points tried: %ld, failed: %ld (%ld logged operations, %d durable "
	       "stages, %ld zones reclaimed by GC)\n", name, tried, failed, total, nstages, gc_zones);
	free(kinds);
	ck_assert_int_gt(tried, 10);
	ck_assert_int_eq(failed, 0);
	return gc_zones;
}

START_TEST(t_crash_files)
{
	enumerate("files", 256ULL << 20, workload, 40, 1);
}
END_TEST

START_TEST(t_crash_gc)
{
	ck_assert_int_gt(enumerate("gc", 64ULL << 20, workload_gc, 40, 0), 0); /* GC did run */
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("crash");
	tc = tcase_create("files"); /* CK_RUN_CASE=files or gc runs one of them */
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, t_crash_files);
	suite_add_tcase(s, tc);
	tc = tcase_create("gc");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, t_crash_gc);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
