/*
 * testutil.h - helpers shared by the Check test programs: scratch paths, running the
 * project's own binaries, and a main() that runs one suite.
 */
#ifndef ZLFS_TESTUTIL_H
#define ZLFS_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

/* A path under this test's scratch directory ($ZLFS_TEST_TMP, else /tmp). */
const char *tu_path(char *buf, size_t len, const char *name);
/* Run a shell command line; returns its exit status (or -1). Output goes to the test log. */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Full path of one of the project's binaries ($ZLFS_BIN_DIR/NAME). */
const char *tu_bin(char *buf, size_t len, const char *name);
/* Start the zlfs daemon in the foreground on IMAGE at MNT with -o OPTS (NULL: none) and wait
 * until it is mounted: its pid, or -1 if it exited or did not mount within 60 s. */
pid_t tu_daemon_start(const char *image, const char *mnt, const char *opts);
/* The same, with the daemon's standard error going to the file ERRLOG. */
pid_t tu_daemon_start_log(const char *image, const char *mnt, const char *opts,
			  const char *errlog);
/* Unmount MNT, wait for PID, return its exit status (-1 if it did not exit normally). */
int tu_daemon_stop(const char *mnt, pid_t pid);
/* A number from `zlfs-ctl stats MNT` ("KEY": N anywhere in the JSON), or -1. */
long tu_ctl_stat(const char *mnt, const char *key);
/* Whether FILE (its first 64 KiB) contains S. */
int tu_file_has(const char *file, const char *s);
/* Whether DIR is a FUSE mount. */
int tu_mounted(const char *dir);
struct zemu_create_opts;
/* A fresh emulated image NAME (its write log removed too, if O names one) formatted with
 * mkfs.zlfs, and an empty mount point "mnt" with nothing left mounted on it. The paths go to
 * IMG and MNT. Fails the test on error. */
void tu_fresh_fs(const char *name, const struct zemu_create_opts *o, char *img, size_t il,
		 char *mnt, size_t ml);
/* 1 (with a message) when /dev/fuse is missing: main() then returns 77 (skipped). */
int tu_fuse_missing(void);
/* Run SUITE and return the process exit status. */
int tu_run_suite(Suite *suite);

/* The tests of a program kept in several files, put into cases by name so that their order
 * is written in one place: each file's function appends its tests to T and returns how many. */
#define TU_MAX_TESTS 64
struct tu_tests {
	const TTest *t[TU_MAX_TESTS];
	int n, placed[TU_MAX_TESTS];
};
void tu_collect(struct tu_tests *all, int (*tests)(const TTest **t));
/* Add the tests named in NAMES (NULL-terminated) to TC in that order; exits on an unknown name. */
void tu_add_tests(struct tu_tests *all, TCase *tc, const char *const *names);
/* 0, or 1 (with a message) when a test was added to no case. */
int tu_unplaced(const struct tu_tests *all);

#endif
