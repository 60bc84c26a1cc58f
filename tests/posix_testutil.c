/*
 * posix_testutil.c - see posix_testutil.h: assertions and file helpers, the daemon, fixtures.
 */
#include "posix_testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

char g_img[PATH_MAX], g_mnt[PATH_MAX], g_log[PATH_MAX];
pid_t g_pid = -1;
static char g_tmp[PATH_MAX];

/* ---- assertions ---------------------------------------------------------------------------- */

const char *ename(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "?";
}

/* A path inside the mount; a ring of buffers so several can be live in one call. */
const char *P(const char *fmt, ...)
{
	static char ring[16][PATH_MAX + 300];
	static int next;
	char rel[PATH_MAX];
	char *b = ring[next++ % 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(b, PATH_MAX + 300, "%s/%s", g_mnt, rel);
	return b;
}

uint64_t ts_ns(struct timespec t)
{
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&t, NULL);
}

struct stat lst(const char *path)
{
	struct stat st;

	ck_assert_msg(lstat(path, &st) == 0, "lstat %s: %s", path, ename(errno));
	return st;
}

int xopen(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags, mode);

	ck_assert_msg(fd >= 0, "open %s: %s", path, ename(errno));
	return fd;
}

void write_all(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n = pwrite(fd, buf, len, off);

	ck_assert_msg(n == (ssize_t)len, "pwrite %zu at %lld: %zd (%s)", len, (long long)off, n,
		      ename(errno));
}

void put_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = xopen(path, O_CREAT | O_WRONLY | O_TRUNC, mode);

	if (len)
		write_all(fd, buf, len, 0);
	ck_assert_int_eq(close(fd), 0);
}

/* Whole file, read after dropping its cached pages so the daemon serves it. */
char *get_file(const char *path, size_t *len)
{
	int fd = xopen(path, O_RDONLY, 0);
	struct stat st;
	char *buf;
	ssize_t n;

	ck_assert_int_eq(fstat(fd, &st), 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	n = pread(fd, buf, (size_t)st.st_size + 1, 0);
	ck_assert_msg(n == st.st_size, "read %s: %zd of %lld (%s)", path, n,
		      (long long)st.st_size, ename(errno));
	close(fd);
	buf[n] = 0;
	*len = (size_t)n;
	return buf;
}

void expect_content(const char *path, const void *want, size_t len)
{
	size_t n;
	char *got = get_file(path, &n);

	ck_assert_msg(n == len, "%s: size %zu, want %zu", path, n, len);
	ck_assert_msg(!memcmp(got, want, len), "%s: content differs", path);
	free(got);
}

/* Deterministic bytes for (SEED, offset): content is checkable without keeping it. */
uint8_t pat(uint64_t seed, uint64_t off)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (off / 8) * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 29;
	return (uint8_t)(x >> (8 * (off % 8)));
}

void pat_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pat(seed, off + i);
}

uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int is_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

struct statvfs vfs(void)
{
	struct statvfs s;

	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	return s;
}

/* Make everything durable: fsync on a directory is a checkpoint in zlfs. */
void fs_sync(void)
{
	int fd = xopen(g_mnt, O_RDONLY | O_DIRECTORY, 0);

	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

void print_log_tail(void)
{
	char cmd[PATH_MAX + 64];

	fprintf(stderr, "---- daemon log (last 40 lines) ----\n");
	snprintf(cmd, sizeof(cmd), "tail -n 40 '%s' >&2", g_log);
	if (system(cmd))
		fprintf(stderr, "(no log)\n");
}

/* readdir that fails the test, instead of looping forever, when cookies stop advancing
 * (no directory here holds a million entries). Main thread only. */
struct dirent *rd_next(DIR *d)
{
	static DIR *last;
	static long n;
	struct dirent *e = readdir(d);

	if (d != last || !e) { /* a new directory stream, or the end of one */
		last = e ? d : NULL;
		n = 0;
	}
	if (e && ++n > 1000000)
		ck_abort_msg("readdir returned a million entries: its offsets do not advance");
	return e;
}

/* ---- the daemon ------------------------------------------------------------------------------ */

int is_mounted(void)
{
	struct statfs s;

	return statfs(g_mnt, &s) == 0 && s.f_type == FUSE_MAGIC;
}

void daemon_start_opts(const char *extra)
{
	char opts[256];
	char bin[PATH_MAX];
	double t0 = now_s();
	int st;

	tu_bin(bin, sizeof(bin), "zlfs");
	fflush(NULL);
	g_pid = fork();
	ck_assert_int_ge(g_pid, 0);
	if (!g_pid) {
		int fd = open(g_log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* allow_other: the permission tests act as other users; cp_interval short so
		 * background checkpoints interleave with the tests. */
		snprintf(opts, sizeof(opts), "allow_other,cp_interval=3%s", extra);
		execl(bin, "zlfs", "-f", "-o", opts, g_img, g_mnt, (char *)NULL);
		_exit(127);
	}
	while (!is_mounted()) {
		if (waitpid(g_pid, &st, WNOHANG) == g_pid) {
			g_pid = -1;
			print_log_tail();
			ck_abort_msg("zlfs exited before mounting (status %#x)", st);
		}
		if (now_s() - t0 > 60) {
			print_log_tail();
			ck_abort_msg("zlfs did not mount within 60 s");
		}
		sleep_ms(20);
	}
}

void daemon_start(void) { daemon_start_opts(""); }

/* Close whatever a failed test left open inside the mount, so unmount is not refused. */
void close_mount_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char p[64], t[PATH_MAX];
	size_t ml = strlen(g_mnt);

	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		ssize_t n;

		if (fd <= 2 || fd == dirfd(d))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		n = readlink(p, t, sizeof(t) - 1);
		if (n > 0 && (size_t)n >= ml && !strncmp(t, g_mnt, ml))
			close(fd);
	}
	closedir(d);
}

/* Unmount and require the daemon to exit with status 0 (clean checkpoint, no leak). */
void daemon_stop(void)
{
	double t0;
	int st, i;

	if (g_pid < 0)
		return;
	close_mount_fds();
	for (i = 0; i < 100 && is_mounted(); i++) {
		if (!tu_sh("fusermount3 -u '%s' 2>/dev/null", g_mnt))
			break;
		sleep_ms(100);
	}
	ck_assert_msg(!is_mounted() || i < 100, "fusermount3 -u kept failing");
	t0 = now_s();
	while (waitpid(g_pid, &st, WNOHANG) != g_pid) {
		if (now_s() - t0 > 120) {
			kill(g_pid, SIGKILL);
			waitpid(g_pid, &st, 0);
			g_pid = -1;
			print_log_tail();
			ck_abort_msg("zlfs did not exit within 120 s of the unmount");
		}
		sleep_ms(20);
	}
	g_pid = -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		print_log_tail();
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zlfs exit status %#x", st);
}

void remount(void)
{
	daemon_stop();
	daemon_start();
}

char *long_name(char c, size_t len)
{
	static char buf[2][300];
	static int k;
	char *b = buf[k++ % 2];

	memset(b, c, len);
	b[len] = 0;
	return b;
}

/* Unmount cleanly and require a daemon log without sanitizer reports or damage. */
void stop_and_check_log(void)
{
	daemon_stop();
	ck_assert_msg(tu_sh("! grep -E 'Sanitizer|runtime error|accounting error|damaged|"
			    "run fsck' '%s' >&2", g_log) == 0,
		      "the daemon log reports errors (see above)");
}

/* ---- setup ------------------------------------------------------------------------------- */

void need_mount(void)
{
	struct statvfs s;

	ck_assert_msg(is_mounted(), "zlfs is not mounted on %s", g_mnt);
	if (!statvfs(g_mnt, &s) && (s.f_flag & ST_RDONLY)) /* a failed t_readonly */
		remount();
}

static const char *g_size = "6G";

void setup_fs(void)
{
	char emu[PATH_MAX], mkfs[PATH_MAX];

	tu_path(g_tmp, sizeof(g_tmp), "");
	tu_path(g_img, sizeof(g_img), "posix.img");
	tu_path(g_mnt, sizeof(g_mnt), "mnt");
	tu_path(g_log, sizeof(g_log), strcmp(g_size, "6G") ? "zlfs-small.log" : "zlfs.log");
	tu_bin(emu, sizeof(emu), "zlfs-emu");
	tu_bin(mkfs, sizeof(mkfs), "mkfs.zlfs");
	tu_sh("fusermount3 -uz '%s' 2>/dev/null", g_mnt);
	unlink(g_log);
	mkdir(g_mnt, 0755);
	chmod(g_mnt, 0755);
	/* 6 GiB (sparse): 100k inodes need 100k node ids, one per 8 main-area blocks */
	if (tu_sh("'%s' create '%s' --size %s --zone-size 8M >/dev/null", emu, g_img, g_size) ||
	    tu_sh("'%s' -q '%s'", mkfs, g_img)) {
		fprintf(stderr, "cannot create the image\n");
		return;
	}
	daemon_start();
}

void setup_small(void)
{
	g_size = "256M";
	setup_fs();
}

void teardown_fs(void)
{
	if (g_pid > 0) {
		close_mount_fds();
		tu_sh("fusermount3 -uz '%s' 2>/dev/null", g_mnt);
		kill(g_pid, SIGTERM);
		waitpid(g_pid, NULL, 0);
		g_pid = -1;
	}
	if (!getenv("ZLFS_KEEP_IMAGE"))
		unlink(g_img);
}
