/*
 * testutil.c - see testutil.h.
 */
#include "testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tu_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("ZLFS_TEST_TMP");

	snprintf(buf, len, "%s/%s", dir && *dir ? dir : "/tmp", name);
	return buf;
}

/* $ZLFS_BIN_DIR, else bin/ beside the tests/ folder this program was built in. */
const char *tu_bin(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("ZLFS_BIN_DIR");
	char self[1024];
	ssize_t n;

	if (dir && *dir) {
		snprintf(buf, len, "%s/%s", dir, name);
		return buf;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(buf, len, "%s/../bin/%s", n > 0 ? dirname(self) : ".", name);
	return buf;
}

int tu_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(NULL);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int tu_file_has(const char *file, const char *s)
{
	static char buf[1 << 16];
	FILE *f = fopen(file, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	return strstr(buf, s) != NULL;
}

#define FUSE_SUPER_MAGIC 0x65735546

int tu_mounted(const char *dir)
{
	struct statfs st;

	return !statfs(dir, &st) && st.f_type == FUSE_SUPER_MAGIC;
}

pid_t tu_daemon_start(const char *image, const char *mnt, const char *opts)
{
	return tu_daemon_start_log(image, mnt, opts, NULL);
}

pid_t tu_daemon_start_log(const char *image, const char *mnt, const char *opts,
			  const char *errlog)
{
	char bin[1024];
	pid_t pid;
	int i, st;

	tu_bin(bin, sizeof(bin), "zlfs");
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 1);
		if (errlog) {
			fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0)
				dup2(fd, 2);
		}
		if (opts)
			execl(bin, "zlfs", "-f", "-o", opts, image, mnt, (char *)NULL);
		else
			execl(bin, "zlfs", "-f", image, mnt, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 2400 && !tu_mounted(mnt); i++) { /* 60 s: a loaded machine is slow */
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(25000);
	}
	return tu_mounted(mnt) ? pid : -1;
}

int tu_daemon_stop(const char *mnt, pid_t pid)
{
	int st = 0;

	if (tu_sh("fusermount3 -u %s", mnt))
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

long tu_ctl_stat(const char *mnt, const char *key)
{
	char out[1024], line[512], bin[1024];
	long v = -1;
	FILE *f;

	tu_path(out, sizeof(out), "ctl-stats.json");
	if (tu_sh("%s stats %s > %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt, out))
		return -1;
	f = fopen(out, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *at = strstr(line, key);

		if (at && at > line && at[-1] == '"' && at[strlen(key)] == '"' &&
		    sscanf(at + strlen(key) + 1, " : %ld", &v) == 1)
			break;
	}
	if (f)
		fclose(f);
	return v;
}

void tu_fresh_fs(const char *name, const struct zemu_create_opts *o, char *img, size_t il,
		 char *mnt, size_t ml)
{
	char bin[1024];

	tu_path(img, il, name);
	tu_path(mnt, ml, "mnt");
	tu_sh("fusermount3 -uz %s 2>/dev/null", mnt); /* a mount left by an earlier run */
	mkdir(mnt, 0755);
	unlink(img);
	if (o->log_path)
		unlink(o->log_path);
	ck_assert_int_eq(zemu_create(img, o), 0);
	/* ZLFS_TEST_MKFS_OPTS: a layout to try the suites against (e.g. "--logs 4") */
	ck_assert_int_eq(tu_sh("%s -q %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
			       getenv("ZLFS_TEST_MKFS_OPTS") ? getenv("ZLFS_TEST_MKFS_OPTS") : "",
			       img), 0);
}

int tu_fuse_missing(void)
{
	if (!access("/dev/fuse", R_OK | W_OK))
		return 0;
	printf("SKIP: /dev/fuse not available: this test mounts the real daemon\n");
	return 1;
}

int tu_run_suite(Suite *suite)
{
	SRunner *sr = srunner_create(suite);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void tu_collect(struct tu_tests *all, int (*tests)(const TTest **t))
{
	all->n += tests(all->t + all->n);
}

/* NAME is one of the comma-separated names in LIST. */
static int tu_named(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

void tu_add_tests(struct tu_tests *all, TCase *tc, const char *const *names)
{
	int i;

	for (; *names; names++) {
		for (i = 0; i < all->n && strcmp(all->t[i]->name, *names); i++)
			;
		if (i == all->n) {
			fprintf(stderr, "%s: no test %s\n", program_invocation_short_name, *names);
			exit(EXIT_FAILURE);
		}
		/* ZLFS_TEST_ONLY="t_a,t_b": run only the tests it names (while working on them) */
		if (!getenv("ZLFS_TEST_ONLY") || tu_named(getenv("ZLFS_TEST_ONLY"), *names))
			tcase_add_test(tc, all->t[i]);
		all->placed[i] = 1;
	}
}

int tu_unplaced(const struct tu_tests *all)
{
	for (int i = 0; i < all->n; i++)
		if (!all->placed[i]) {
			fprintf(stderr, "%s: %s is in no case\n", program_invocation_short_name,
				all->t[i]->name);
			return 1;
		}
	return 0;
}
