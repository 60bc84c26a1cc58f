/*
 * test_posix_threads.c - concurrent clients, through the mounted daemon: eight threads write,
 * read back, rename, delete and list files in four shared directories against a model of each
 * one's own files, then everything is checked, and again after a remount. Part of test_posix
 * (test_posix.c); CK_RUN_CASE=threads runs it alone (test_posix_threads, and under
 * ThreadSanitizer in tools/run-tests).
 */
#include "posix_testutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- concurrent clients ------------------------------------------------------------------ */

#define THREADS 8
#define TDIRS 4
#define TFILES 48 /* file slots per thread */

struct tfile {
	int live;
	int dir;
	char name[32];
	uint64_t seed;
	size_t len;
};

struct tstate {
	int id;
	double until;
	uint64_t rng;
	struct tfile f[TFILES];
	long ops, writes, reads, renames, deletes, readdirs;
	char err[256];
};

static const char *tpath(char *buf, int dir, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/thr/d%d/%s", g_mnt, dir, name);
	return buf;
}

#define TFAIL(ts, ...)                                                                       \
	do {                                                                                 \
		snprintf((ts)->err, sizeof((ts)->err), __VA_ARGS__);                         \
		return -1;                                                                   \
	} while (0)

static int t_write(struct tstate *ts, struct tfile *f, uint8_t *buf)
{
	char p[PATH_MAX];
	size_t pos = 0;
	int fd;

	f->seed = rnd(&ts->rng);
	f->len = rnd(&ts->rng) % (3 * 65536 + 1);
	pat_fill(buf, f->len, f->seed, 0);
	fd = open(tpath(p, f->dir, f->name), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		TFAIL(ts, "create %s: %s", p, ename(errno));
	while (pos < f->len) { /* chunks of random, unaligned sizes */
		size_t n = 1 + rnd(&ts->rng) % 20000;

		if (n > f->len - pos)
			n = f->len - pos;
		if (pwrite(fd, buf + pos, n, (off_t)pos) != (ssize_t)n)
			TFAIL(ts, "write %s: %s", p, ename(errno));
		pos += n;
	}
	if (rnd(&ts->rng) % 16 == 0 && fsync(fd))
		TFAIL(ts, "fsync %s: %s", p, ename(errno));
	close(fd);
	f->live = 1;
	ts->writes++;
	return 0;
}

static int t_verify(struct tstate *ts, const struct tfile *f, uint8_t *buf, uint8_t *want)
{
	char p[PATH_MAX];
	int fd = open(tpath(p, f->dir, f->name), O_RDONLY);
	ssize_t n;

	if (fd < 0)
		TFAIL(ts, "open %s: %s", p, ename(errno));
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	n = pread(fd, buf, f->len + 1, 0);
	close(fd);
	pat_fill(want, f->len, f->seed, 0);
	if (n != (ssize_t)f->len || memcmp(buf, want, f->len))
		TFAIL(ts, "%s: read %zd of %zu bytes, content %s", p, n, f->len,
		      n == (ssize_t)f->len ? "differs" : "-");
	ts->reads++;
	return 0;
}

static int t_rename_one(struct tstate *ts, struct tfile *f)
{
	char p[PATH_MAX], q[PATH_MAX];
	int k = (int)(rnd(&ts->rng) % TFILES), dir = (int)(rnd(&ts->rng) % TDIRS);
	struct tfile *o = &ts->f[k];
	char name[32];

	if (o != f && o->live && rnd(&ts->rng) % 2) { /* over another file of ours */
		if (rename(tpath(p, f->dir, f->name), tpath(q, o->dir, o->name)))
			TFAIL(ts, "rename %s over %s: %s", p, q, ename(errno));
		f->dir = o->dir;
		strcpy(f->name, o->name);
		o->live = 0;
	} else {
		snprintf(name, sizeof(name), "t%d_%lu", ts->id, (unsigned long)(rnd(&ts->rng) % 1000000));
		for (k = 0; k < TFILES; k++)
			if (ts->f[k].live && !strcmp(ts->f[k].name, name))
				return 0;
		if (rename(tpath(p, f->dir, f->name), tpath(q, dir, name)))
			TFAIL(ts, "rename %s to %s: %s", p, q, ename(errno));
		f->dir = dir;
		strcpy(f->name, name);
	}
	ts->renames++;
	return 0;
}

/* Every live file of ours in DIR appears exactly once. */
static int t_readdir(struct tstate *ts, int dir)
{
	char p[PATH_MAX], prefix[16];
	int cnt[TFILES] = {0}, k;
	long total = 0;
	struct dirent *e;
	DIR *d;

	snprintf(p, sizeof(p), "%s/thr/d%d", g_mnt, dir);
	snprintf(prefix, sizeof(prefix), "t%d_", ts->id);
	d = opendir(p);
	if (!d)
		TFAIL(ts, "opendir %s: %s", p, ename(errno));
	while ((e = readdir(d))) {
		if (++total > 1000000) {
			closedir(d);
			TFAIL(ts, "readdir d%d never ends", dir);
		}
		for (k = 0; k < TFILES; k++)
			if (ts->f[k].live && ts->f[k].dir == dir && !strcmp(ts->f[k].name, e->d_name))
				cnt[k]++;
	}
	closedir(d);
	for (k = 0; k < TFILES; k++)
		if (ts->f[k].live && ts->f[k].dir == dir && cnt[k] != 1)
			TFAIL(ts, "readdir d%d: %s seen %d times", dir, ts->f[k].name, cnt[k]);
	ts->readdirs++;
	return 0;
}

static void *t_main(void *arg)
{
	struct tstate *ts = arg;
	uint8_t *buf = malloc(3 * 65536 + 2), *want = malloc(3 * 65536 + 2);
	char p[PATH_MAX];
	int ret = 0;

	/* Six seconds, and on a slow machine on until this thread did its share of what the
	 * test counts (up to a minute): the assertions are about work done, not time. */
	while (!ret && (now_s() < ts->until ||
			((ts->writes < 13 || ts->renames < 3 || ts->deletes < 2) &&
			 now_s() < ts->until + 54))) {
		struct tfile *f = &ts->f[rnd(&ts->rng) % TFILES];
		int op = (int)(rnd(&ts->rng) % 10);

		ts->ops++;
		if (!f->live) {
			f->dir = (int)(rnd(&ts->rng) % TDIRS);
			snprintf(f->name, sizeof(f->name), "t%d_n%ld", ts->id, ts->ops);
			ret = t_write(ts, f, buf);
		} else if (op < 2) {
			ret = t_write(ts, f, buf);
		} else if (op < 5) {
			ret = t_verify(ts, f, buf, want);
		} else if (op < 7) {
			ret = t_rename_one(ts, f);
		} else if (op < 8) {
			if (unlink(tpath(p, f->dir, f->name))) {
				snprintf(ts->err, sizeof(ts->err), "unlink %s: %s", p, ename(errno));
				ret = -1;
			}
			f->live = 0;
			ts->deletes++;
		} else {
			ret = t_readdir(ts, (int)(rnd(&ts->rng) % TDIRS));
		}
	}
	free(buf);
	free(want);
	return NULL;
}

/* After the run: the directories hold exactly the live files, each with its content. */
void threads_verify(struct tstate *ts)
{
	uint8_t *buf = malloc(3 * 65536 + 2), *want = malloc(3 * 65536 + 2);
	long expected = 0, found = 0;
	int t, k, d;

	for (t = 0; t < THREADS; t++)
		for (k = 0; k < TFILES; k++)
			if (ts[t].f[k].live) {
				expected++;
				ck_assert_msg(!t_verify(&ts[t], &ts[t].f[k], buf, want), "%s", ts[t].err);
			}
	for (d = 0; d < TDIRS; d++) {
		DIR *dir = opendir(P("thr/d%d", d));
		struct dirent *e;

		ck_assert_ptr_nonnull(dir);
		while ((e = rd_next(dir)))
			found += e->d_name[0] == 't';
		closedir(dir);
	}
	ck_assert_int_eq(found, expected);
	free(buf);
	free(want);
}

struct tstate *g_threads;

START_TEST(t_threads)
{
	pthread_t th[THREADS];
	struct tstate *ts = calloc(THREADS, sizeof(*ts));
	long ops = 0, w = 0, r = 0, rn = 0, del = 0, rd = 0;
	double t0 = now_s();
	int t;

	OK(mkdir(P("thr"), 0755));
	for (t = 0; t < TDIRS; t++)
		OK(mkdir(P("thr/d%d", t), 0755));
	for (t = 0; t < THREADS; t++) {
		ts[t].id = t;
		ts[t].until = t0 + 6;
		ts[t].rng = 0x1234567ull * (uint64_t)(t + 1);
		ck_assert_int_eq(pthread_create(&th[t], NULL, t_main, &ts[t]), 0);
	}
	for (t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		ck_assert_msg(!ts[t].err[0], "thread %d: %s", t, ts[t].err);
		ops += ts[t].ops, w += ts[t].writes, r += ts[t].reads, rn += ts[t].renames;
		del += ts[t].deletes, rd += ts[t].readdirs;
	}
	printf("threads: %d threads, %.1f s: %ld ops (%ld writes, %ld reads, %ld renames, "
	       "%ld deletes, %ld readdirs)\n", THREADS, now_s() - t0, ops, w, r, rn, del, rd);
	ck_assert_int_gt(w, 100);
	ck_assert_int_gt(rn, 20);
	ck_assert_int_gt(del, 10);
	threads_verify(ts);
	remount();
	threads_verify(ts);
	g_threads = ts;
}
END_TEST

/* ---- a listing read beside a rename ------------------------------------------------------
 * One thread lists two directories over and over while this one moves files between them and,
 * after each rename, lists the source itself: a listing the kernel read while the rename ran
 * must not be what a later opendir is given (the readdir cache, see op_opendir). */

#define LR_FILES 32

static volatile int lr_stop;

static int lr_has(const char *dirpath, const char *name)
{
	DIR *d = opendir(dirpath);
	struct dirent *e;
	int found = 0, n = 0;

	if (!d)
		return -1;
	/* readdir, not rd_next (main thread only): a bound of its own on offsets that stall */
	while ((e = readdir(d)) && ++n < 100000)
		found |= !strcmp(e->d_name, name);
	closedir(d);
	if (n >= 100000)
		return -1;
	return found;
}

struct lr_lister {
	char a[PATH_MAX], b[PATH_MAX]; /* its own paths: P()'s ring is not for threads */
	long lists;
};

static void *lr_lister(void *arg)
{
	struct lr_lister *l = arg;

	while (!__atomic_load_n(&lr_stop, __ATOMIC_RELAXED)) {
		lr_has(l->a, "");
		lr_has(l->b, "");
		l->lists++;
	}
	return NULL;
}

START_TEST(t_listing_after_rename)
{
	char from[PATH_MAX], to[PATH_MAX], name[32], to_name[32], err[PATH_MAX * 3] = "";
	int side[LR_FILES] = {0}; /* 0: in a as f<k>, 1: in b as g<k> */
	struct lr_lister l = {.lists = 0};
	double t0 = now_s();
	long moves = 0;
	pthread_t th;

	OK(mkdir(P("lr"), 0755));
	OK(mkdir(P("lr/a"), 0755));
	OK(mkdir(P("lr/b"), 0755));
	for (int k = 0; k < LR_FILES; k++)
		OK(close(open(P("lr/a/f%d", k), O_CREAT | O_WRONLY, 0644)));
	snprintf(l.a, sizeof(l.a), "%s", P("lr/a"));
	snprintf(l.b, sizeof(l.b), "%s", P("lr/b"));
	lr_stop = 0;
	ck_assert_int_eq(pthread_create(&th, NULL, lr_lister, &l), 0);
	for (int k = 0; !err[0] && now_s() - t0 < 4; k = (k + 1) % LR_FILES, moves++) {
		const char *src = side[k] ? "b" : "a", *dst = side[k] ? "a" : "b";

		snprintf(name, sizeof(name), "%c%d", side[k] ? 'g' : 'f', k);
		snprintf(to_name, sizeof(to_name), "%c%d", side[k] ? 'f' : 'g', k);
		snprintf(from, sizeof(from), "%s", P("lr/%s/%s", src, name));
		snprintf(to, sizeof(to), "%s", P("lr/%s/%s", dst, to_name));
		if (rename(from, to))
			snprintf(err, sizeof(err), "rename %s: %s", from, ename(errno));
		side[k] ^= 1;
		if (!err[0] && lr_has(P("lr/%s", src), name) != 0)
			snprintf(err, sizeof(err), "move %ld: %s still listed after its rename to %s",
				 moves, from, to);
		if (!err[0] && lr_has(P("lr/%s", dst), to_name) != 1)
			snprintf(err, sizeof(err), "move %ld: %s not listed after the rename of %s",
				 moves, to, from);
	}
	/* The lister uses this frame: it stops before any assertion can leave it. */
	__atomic_store_n(&lr_stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	ck_assert_msg(!err[0], "%s", err);
	printf("listing after rename: %ld moves, %ld listings beside them\n", moves, l.lists);
	ck_assert_int_gt(moves, 50);
	ck_assert_int_gt(l.lists, 50);
}
END_TEST

int posix_threads_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_threads;
	t[n++] = t_listing_after_rename;
	return n;
}
