/*
 * test_stress.c - the daemon's fine-grained locking under concurrent load (fs/core/core.h has the
 * lock order; docs/design.md, "Concurrency").
 *
 * Eight client threads share four directories for ZLFS_STRESS_SECONDS (12) seconds, each doing
 * a random mix on names of its own: create, append, overwrite in the middle, truncate down and
 * up, fsync and fdatasync, read back, stat, readdir, unlink, rename of files (within and
 * between the shared directories, into and out of its own small directories, over its own
 * files), mkdir, rename (between directories, over an empty one) and rmdir of small
 * directories, now and then an fsync of a directory (a checkpoint). Meanwhile another thread
 * forces a checkpoint every 100 ms and samples the GC phase, on a small image pre-filled with
 * half-dead zones and mounted with raised watermarks, so that boosted garbage collection moves
 * live blocks of the very files being changed; at the end its stats must show reclaimed zones.
 *
 * Each thread keeps a model of its files (bytes) and directories and checks what it reads and
 * lists as it goes; at the end every file's content and every listing is checked, after a
 * remount again, and fsck.zlfs -n must be clean. A failure names the thread, its operation
 * (number and kind), the path and the errno, prints that thread's last operations and the seed
 * (ZLFS_STRESS_SEED replays the same per-thread sequences; the interleaving still varies).
 * An operation stuck for HANG_S seconds is taken for a deadlock: the daemon's threads are
 * printed with gdb before it is killed. In the test builds the daemon checks its lock order
 * (ZLFS_LOCK_CHECK: a wrong order aborts it) and under ThreadSanitizer a race makes it exit 66.
 *
 * The clients are in stress_clients.c; this file is the harness.
 */
#include "testutil.h"
#include "stress.h"

#include "zdev_emu.h"
#include "zlfs_ioctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HANG_S 60        /* an operation this long is a deadlock, even under TSan */
#define CP_EVERY_MS 100
#define BALLAST_FILES 12 /* pre-fill: 12 live files of 1 MiB, 12 deleted */
#define BALLAST_SIZE (1 << 20)
#define BALLAST_CHUNK (256 << 10) /* live and doomed files take turns: zones half garbage */

char g_mnt[512];
int g_stop;
double g_until;
static char g_img[512], g_log[512];
static pid_t g_pid = -1;
static uint64_t g_seed = 1;

/* ---- the checkpointer: a checkpoint every CP_EVERY_MS, the GC phase sampled --------------- */

static struct {
	struct activity act;
	long syncs, samples;
	long phase_seen[4]; /* samples in no-gc, normal, boosted, foreground */
	double max_sync_s;
	char err[256];
} g_cp;

static void sample_phase(int fd, struct zlfs_ioc_stats *st)
{
	static const char *const phases[] = {"no-gc", "normal", "boosted", "foreground"};
	char want[48];
	int i;

	if (ioctl(fd, ZLFS_IOC_STATS, st))
		return;
	st->json[sizeof(st->json) - 1] = 0;
	g_cp.samples++;
	for (i = 0; i < 4; i++) {
		snprintf(want, sizeof(want), "\"phase\": \"%s\"", phases[i]);
		if (strstr(st->json, want))
			g_cp.phase_seen[i]++;
	}
}

static void *cp_main(void *arg)
{
	struct zlfs_ioc_stats *st = malloc(sizeof(*st));
	int fd = open(g_mnt, O_RDONLY | O_DIRECTORY);

	(void)arg;
	if (fd < 0)
		snprintf(g_cp.err, sizeof(g_cp.err), "open %s: %s", g_mnt, ename(errno));
	while (fd >= 0 && !__atomic_load_n(&g_stop, __ATOMIC_RELAXED) && now_s() < g_until) {
		double t0 = now_s();

		act_set(&g_cp.act, "ZLFS_IOC_SYNC (a checkpoint)");
		if (ioctl(fd, ZLFS_IOC_SYNC)) {
			snprintf(g_cp.err, sizeof(g_cp.err), "checkpointer: ioctl ZLFS_IOC_SYNC on %s: %s",
				 g_mnt, ename(errno));
			__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
			break;
		}
		g_cp.syncs++;
		if (now_s() - t0 > g_cp.max_sync_s)
			g_cp.max_sync_s = now_s() - t0;
		act_set(&g_cp.act, "ZLFS_IOC_STATS");
		sample_phase(fd, st);
		act_set(&g_cp.act, "");
		usleep(CP_EVERY_MS * 1000);
	}
	if (fd >= 0)
		close(fd);
	free(st);
	return NULL;
}

/* What the daemon reports only when something is wrong (errors of fs/, the lock checker,
 * the sanitizers). */
#define LOG_TROUBLE "Sanitizer|runtime error|lock order|lock violation|accounting error|damaged|" \
		    "run fsck|does not point|GC stopped|read-only|failed"

static void print_log(void)
{
	fprintf(stderr, "---- the daemon's log %s (last 200 lines) ----\n", g_log);
	tu_sh("tail -n 200 %s >&2", g_log);
}

/* ---- the watchdog: a deadlock or a dead daemon ends the run with evidence ---------------- */

static int g_done; /* atomic: threads finished */

static void *run_thread(void *(*fn)(void *), void *arg)
{
	fn(arg);
	__atomic_add_fetch(&g_done, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void *worker_thread(void *arg) { return run_thread(worker_main, arg); }
static void *cp_thread(void *arg) { return run_thread(cp_main, arg); }

/* Print what every thread is doing; 1 if one of them has been at it for HANG_S. */
static int report_stuck(int print)
{
	char what[160];
	int i, stuck = 0;
	double age;

	for (i = 0; i <= NTHREADS; i++) {
		struct activity *a = i < NTHREADS ? &g_w[i].act : &g_cp.act;

		age = act_age(a, what, sizeof(what));
		stuck |= age > HANG_S;
		if (print && what[0] && i < NTHREADS)
			fprintf(stderr, "  thread %d: %.1f s in %s\n", i, age, what);
		else if (print && what[0])
			fprintf(stderr, "  checkpointer: %.1f s in %s\n", age, what);
	}
	return stuck;
}

static void dump_daemon_stacks(void)
{
	fprintf(stderr, "---- the daemon's threads (gdb -p %d) ----\n", (int)g_pid);
	if (tu_sh("command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' "
		  "</dev/null >&2 2>&1", (int)g_pid))
		fprintf(stderr, "(gdb is not installed or could not attach)\n");
}

/* If the daemon has died, say how in MSG (and unmount, which frees the clients waiting). */
static int daemon_died(char *msg, size_t len)
{
	int st;

	if (g_pid < 0 || waitpid(g_pid, &st, WNOHANG) != g_pid)
		return 0;
	snprintf(msg, len, "the daemon died during the run (%s %d%s)",
		 WIFSIGNALED(st) ? "signal" : "exit status",
		 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
		 WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT
			 ? ": an abort, as the lock-order checker does; its log says why" : "");
	g_pid = -1;
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	tu_sh("fusermount3 -uz %s", g_mnt);
	return 1;
}

/* Wait for every thread; returns a message when the run had to be ended. */
static const char *watch(void)
{
	static char msg[256];
	int st;

	msg[0] = 0;
	while (__atomic_load_n(&g_done, __ATOMIC_RELAXED) < NTHREADS + 1) {
		usleep(200000);
		if (!msg[0] && daemon_died(msg, sizeof(msg)))
			fprintf(stderr, "%s\n", msg);
		else if (!msg[0] && report_stuck(0)) {
			snprintf(msg, sizeof(msg), "an operation did not finish in %d s: deadlock", HANG_S);
			fprintf(stderr, "%s; the threads:\n", msg);
			report_stuck(1);
			dump_daemon_stacks();
			__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
			kill(g_pid, SIGKILL);
			waitpid(g_pid, &st, 0);
			g_pid = -1;
			tu_sh("fusermount3 -uz %s", g_mnt);
		}
	}
	/* a client that failed first may have ended the run before the daemon's death was seen */
	if (!msg[0])
		daemon_died(msg, sizeof(msg));
	if (msg[0])
		print_log();
	return msg[0] ? msg : NULL;
}

/* ---- the image: pre-filled with half-dead zones ------------------------------------------- */

/* Live files b00.. written interleaved with files g00.. that are then deleted: every zone they
 * fill is half garbage, and the free zones are below gc_low from the start. */
static void prefill(void)
{
	uint8_t *buf = malloc(BALLAST_CHUNK);
	int fd[2 * BALLAST_FILES], i, c;
	char p[600];

	snprintf(p, sizeof(p), "%s/ballast", g_mnt);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	for (i = 0; i < 2 * BALLAST_FILES; i++) {
		snprintf(p, sizeof(p), "%s/ballast/%c%02d", g_mnt, i % 2 ? 'g' : 'b', i / 2);
		fd[i] = open(p, O_CREAT | O_WRONLY, 0644);
		ck_assert_msg(fd[i] >= 0, "create %s: %s", p, ename(errno));
	}
	for (c = 0; c < BALLAST_SIZE / BALLAST_CHUNK; c++)
		for (i = 0; i < 2 * BALLAST_FILES; i++) {
			fill(buf, BALLAST_CHUNK, (uint64_t)i << 32 | (uint64_t)c);
			ck_assert_int_eq(write(fd[i], buf, BALLAST_CHUNK), BALLAST_CHUNK);
		}
	for (i = 0; i < 2 * BALLAST_FILES; i++) {
		ck_assert_int_eq(close(fd[i]), 0);
		snprintf(p, sizeof(p), "%s/ballast/g%02d", g_mnt, i / 2);
		if (i % 2)
			ck_assert_int_eq(unlink(p), 0);
	}
	free(buf);
}

static void check_ballast(const char *when)
{
	uint8_t *buf = malloc(BALLAST_SIZE), *want = malloc(BALLAST_CHUNK);
	char p[600];
	int i, c, fd;

	for (i = 0; i < 2 * BALLAST_FILES; i += 2) {
		snprintf(p, sizeof(p), "%s/ballast/b%02d", g_mnt, i / 2);
		fd = open(p, O_RDONLY);
		ck_assert_msg(fd >= 0, "%s: open %s: %s", when, p, ename(errno));
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		ck_assert_msg(pread(fd, buf, BALLAST_SIZE, 0) == BALLAST_SIZE, "%s: read %s", when, p);
		close(fd);
		for (c = 0; c < BALLAST_SIZE / BALLAST_CHUNK; c++) {
			fill(want, BALLAST_CHUNK, (uint64_t)i << 32 | (uint64_t)c);
			ck_assert_msg(!memcmp(buf + c * BALLAST_CHUNK, want, BALLAST_CHUNK),
				      "%s: %s differs in its chunk %d (GC moved it?)", when, p, c);
		}
	}
	free(buf);
	free(want);
}

/* ---- the run and the checks ----------------------------------------------------------------- */

static void print_history(const struct worker *w)
{
	long i;

	fprintf(stderr, "thread %d's last operations (seed %" PRIu64 "):\n", w->id, g_seed);
	for (i = w->opno - HISTORY + 1; i <= w->opno; i++)
		if (i > 0)
			fprintf(stderr, "  %s\n", w->hist[i % HISTORY]);
}

/* Print every thread's error with its last operations; the first one, or NULL. */
static const char *print_errors(void)
{
	const char *first = NULL;
	int t;

	for (t = 0; t < NTHREADS; t++)
		if (g_w[t].err[0]) {
			fprintf(stderr, "%s\n", g_w[t].err);
			print_history(&g_w[t]);
			first = first ? first : g_w[t].err;
		}
	if (g_cp.err[0])
		fprintf(stderr, "%s\n", g_cp.err);
	return first ? first : g_cp.err[0] ? g_cp.err : NULL;
}

static void assert_no_errors(const char *when)
{
	const char *first = print_errors();

	ck_assert_msg(!first, "%s (seed %" PRIu64 "): %s", when, g_seed, first);
}

/* Nothing but the top level's five directories, and in the shared ones nothing but names of
 * the clients (each checks its own). */
static void check_names(const char *when)
{
	const char *top[] = {"s0", "s1", "s2", "s3", "ballast"};
	char p[600];
	struct dirent *e;
	int k, n = 0;
	DIR *d;

	d = opendir(g_mnt);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (k = 0; k < 5 && strcmp(top[k], e->d_name); k++)
			;
		ck_assert_msg(k < 5, "%s: unexpected %s at the top", when, e->d_name);
		n++;
	}
	closedir(d);
	ck_assert_int_eq(n, 5);
	for (k = 0; k < NSHARED; k++) {
		snprintf(p, sizeof(p), "%s/s%d", g_mnt, k);
		d = opendir(p);
		ck_assert_ptr_nonnull(d);
		while ((e = readdir(d)))
			ck_assert_msg(e->d_name[0] == '.' ||
					      (e->d_name[0] == 't' && e->d_name[1] >= '0' &&
					       e->d_name[1] < '0' + NTHREADS && e->d_name[2] == '_'),
				      "%s: unexpected s%d/%s", when, k, e->d_name);
		closedir(d);
	}
}

/* Every thread's files and listings as its model has them, the top level and the ballast. */
static void check_all(const char *when)
{
	int t, k;

	for (t = 0; t < NTHREADS; t++) {
		struct worker *w = &g_w[t];

		for (k = 0; k < NFILES && !w->err[0]; k++)
			if (w->f[k].live)
				check_file(w, &w->f[k], w->buf, when);
		for (k = 0; k < NSHARED + NDIRS && !w->err[0]; k++)
			if (k < NSHARED || w->d[k - NSHARED].live)
				check_listing(w, k, when);
	}
	assert_no_errors(when);
	check_names(when);
	check_ballast(when);
}

static void start_workers(pthread_t *th)
{
	uint64_t s = g_seed;
	int t;

	for (t = 0; t < NTHREADS; t++) {
		struct worker *w = &g_w[t];

		memset(w, 0, sizeof(*w));
		w->id = t;
		s += 0x9e3779b97f4a7c15ull; /* splitmix64: a nonzero, distinct stream per thread */
		w->rng = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ull;
		w->rng = (w->rng ^ (w->rng >> 27)) * 0x94d049bb133111ebull | 1;
		w->buf = malloc(FILE_MAX + 1);
		for (int k = 0; k < NFILES; k++)
			w->f[k].data = malloc(FILE_MAX);
		pthread_mutex_init(&w->act.lock, NULL);
		ck_assert_int_eq(pthread_create(&th[t], NULL, worker_thread, w), 0);
	}
}

static void free_workers(void)
{
	int t, k;

	for (t = 0; t < NTHREADS; t++) {
		for (k = 0; k < NFILES; k++)
			free(g_w[t].f[k].data);
		free(g_w[t].buf);
	}
}

static void print_counts(double secs)
{
	long sum[OP_NR] = {0}, total = 0;
	int t, op;

	for (t = 0; t < NTHREADS; t++)
		for (op = 0; op < OP_NR; op++)
			sum[op] += g_w[t].count[op];
	printf("stress: %d threads, %.1f s, seed %" PRIu64 ":", NTHREADS, secs, g_seed);
	for (op = 0; op < OP_NR; op++) {
		printf(" %s %ld", op_names[op], sum[op]);
		total += sum[op];
	}
	printf("; %ld in all\n", total);
	printf("stress: %ld checkpoints (longest %.2f s); GC phase in %ld samples: no-gc %ld, "
	       "normal %ld, boosted %ld, foreground %ld\n", g_cp.syncs, g_cp.max_sync_s,
	       g_cp.samples, g_cp.phase_seen[0], g_cp.phase_seen[1], g_cp.phase_seen[2],
	       g_cp.phase_seen[3]);
	fflush(stdout);
}

/* The mix ran, every kind of it, and so did the checkpoints. */
static void assert_mix_ran(void)
{
	int t, op;

	for (op = 0; op < OP_NR; op++) {
		long n = 0;

		for (t = 0; t < NTHREADS; t++)
			n += g_w[t].count[op];
		ck_assert_msg(n > 0, "no %s ran", op_names[op]);
	}
	ck_assert_int_ge(g_cp.syncs, 10);
}

/* Raised watermarks: GC is boosted (below 70% of the zones free) from the pre-fill on, with
 * room to spare so that the clients never meet ENOSPC nor foreground GC. Here and at 48 MiB
 * with gc_low=50 (ZLFS_STRESS_MB, ZLFS_STRESS_OPTS) it found renamed names still listed in CI:
 * the kernel's readdir cache, which zlfs now turns off (op_opendir; t_listing_after_rename in
 * test_posix is the reproducer). */
static void start_daemon(void)
{
	const char *opts = getenv("ZLFS_STRESS_OPTS");

	g_pid = tu_daemon_start_log(g_img, g_mnt, opts ? opts : "gc_high=90,gc_low=70", g_log);
	if (g_pid < 0)
		print_log();
	ck_assert_msg(g_pid > 0, "the daemon did not mount %s", g_img);
}

/* Unmount: the daemon must exit 0 with nothing wrong in its log. */
static void stop_daemon(const char *when)
{
	int st = tu_daemon_stop(g_mnt, g_pid), trouble;

	g_pid = -1;
	trouble = !tu_sh("grep -E '" LOG_TROUBLE "' %s >&2", g_log);
	if (st || trouble)
		print_log();
	ck_assert_msg(st == 0, "%s: the daemon exited with status %d%s", when, st,
		      st == 66 ? " (a ThreadSanitizer report: see its log above)" : "");
	ck_assert_msg(!trouble, "%s: the daemon's log reports trouble (above)", when);
}

START_TEST(t_stress)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 1 << 20};
	const char *seed = getenv("ZLFS_STRESS_SEED"), *ended;
	const char *secs = getenv("ZLFS_STRESS_SECONDS");
	pthread_t th[NTHREADS], cp;
	double t0 = now_s(), t1;
	char p[600], bin[512];
	int t;

	if (seed)
		g_seed = strtoull(seed, NULL, 0);
	if (getenv("ZLFS_STRESS_MB")) /* ZLFS_STRESS_MB=48 ZLFS_STRESS_OPTS=gc_high=70,gc_low=50 */
		o.size = strtoull(getenv("ZLFS_STRESS_MB"), NULL, 0) << 20;
	tu_fresh_fs("stress.img", &o, g_img, sizeof(g_img), g_mnt, sizeof(g_mnt));
	unlink(tu_path(g_log, sizeof(g_log), "zlfs.log"));
	start_daemon();
	for (t = 0; t < NSHARED; t++) {
		snprintf(p, sizeof(p), "%s/s%d", g_mnt, t);
		ck_assert_int_eq(mkdir(p, 0755), 0);
	}
	prefill();
	t1 = now_s();
	printf("stress: %s mounted (paths below are from there) and pre-filled in %.1f s; "
	       "zones_reclaimed %ld before the run\n", g_mnt, t1 - t0,
	       tu_ctl_stat(g_mnt, "zones_reclaimed"));
	fflush(stdout);
	g_until = now_s() + (secs ? atof(secs) : 12);
	pthread_mutex_init(&g_cp.act.lock, NULL);
	start_workers(th);
	ck_assert_int_eq(pthread_create(&cp, NULL, cp_thread, NULL), 0);
	ended = watch();
	for (t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	pthread_join(cp, NULL);
	print_counts(now_s() - t1);
	if (ended) {
		print_errors();
		ck_abort_msg("%s (seed %" PRIu64 ")", ended, g_seed);
	}
	assert_no_errors("during the run");
	assert_mix_ran();
	t1 = now_s();
	check_all("after the run");
	printf("stress: GC reclaimed %ld zones, moved %ld bytes\n",
	       tu_ctl_stat(g_mnt, "zones_reclaimed"), tu_ctl_stat(g_mnt, "bytes_migrated"));
	ck_assert_msg(g_cp.phase_seen[2] > 0, "GC was never seen in its boosted phase");
	ck_assert_int_gt(tu_ctl_stat(g_mnt, "zones_reclaimed"), 0);
	stop_daemon("unmount after the run");
	start_daemon();
	check_all("after a remount");
	stop_daemon("unmount after the remount");
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), g_img), 0);
	printf("stress: checks, remount and fsck %.1f s; %.1f s in all\n", now_s() - t1,
	       now_s() - t0);
	unlink(g_img);
	free_workers();
}
END_TEST

/* After a failed run (in the parent process): a lazy unmount makes a daemon left behind exit. */
static void unmount_leftover(void)
{
	char mnt[512];

	tu_sh("fusermount3 -uz %s 2>/dev/null", tu_path(mnt, sizeof(mnt), "mnt"));
}

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("stress");
	tc = tcase_create("stress");
	tcase_set_timeout(tc, 400);
	tcase_add_unchecked_fixture(tc, NULL, unmount_leftover);
	tcase_add_test(tc, t_stress);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
