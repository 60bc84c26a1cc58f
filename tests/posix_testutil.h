/*
 * posix_testutil.h - what the files of test_posix share: exact-errno assertions, paths in the
 * mount, deterministic file contents, the daemon as a child process with its log, the
 * fixtures of the shared filesystem, and a manifest of a tree (posix_manifest.c).
 *
 * The tests themselves are in test_posix_*.c by concern; test_posix.c orders them.
 */
#ifndef ZLFS_POSIX_TESTUTIL_H
#define ZLFS_POSIX_TESTUTIL_H

#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

/* Paths here are the scratch directory plus short names; truncation cannot happen. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define FUSE_MAGIC 0x65735546
#define BLK 4096
/* Usable blocks of one 8 MiB zone: 4 segments of 512 blocks, each ending in a summary. */
#define ZONE_USABLE (4 * 511)
/* Tools run on the mount are stopped if they hang (a readdir that never ends, say). */
#define TMO "timeout 120 "

extern char g_img[PATH_MAX], g_mnt[PATH_MAX], g_log[PATH_MAX];
extern pid_t g_pid;

/* ---- assertions ---------------------------------------------------------------------------- */

const char *ename(int e);

/* EXPR must succeed (not return -1). */
#define OK(expr)                                                                             \
	do {                                                                                 \
		errno = 0;                                                                   \
		long long r_ = (long long)(expr);                                            \
		ck_assert_msg(r_ != -1, "%s failed: %s", #expr, ename(errno));               \
	} while (0)

/* EXPR must fail with exactly ERR. */
#define FAILS(expr, err)                                                                     \
	do {                                                                                 \
		errno = 0;                                                                   \
		long long r_ = (long long)(expr);                                            \
		int e_ = errno;                                                              \
		ck_assert_msg(r_ == -1 && e_ == (err), "%s: want %s, got %lld / %s", #expr,  \
			      ename(err), r_, r_ == -1 ? ename(e_) : "success");             \
	} while (0)

/* A path inside the mount; a ring of buffers so several can be live in one call. */
const char *P(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t ts_ns(struct timespec t);
double now_s(void);
void sleep_ms(int ms);
struct stat lst(const char *path);
int xopen(const char *path, int flags, mode_t mode);
void write_all(int fd, const void *buf, size_t len, off_t off);
void put_file(const char *path, const void *buf, size_t len, mode_t mode);
/* Whole file, read after dropping its cached pages so the daemon serves it. */
char *get_file(const char *path, size_t *len);
void expect_content(const char *path, const void *want, size_t len);
/* Deterministic bytes for (SEED, offset): content is checkable without keeping it. */
uint8_t pat(uint64_t seed, uint64_t off);
void pat_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off);
uint64_t rnd(uint64_t *s);
int is_zero(const void *buf, size_t len);
struct statvfs vfs(void);
/* Make everything durable: fsync on a directory is a checkpoint in zlfs. */
void fs_sync(void);
void print_log_tail(void);
/* readdir that fails the test when cookies stop advancing. Main thread only. */
struct dirent *rd_next(DIR *d);
/* A name of LEN bytes C (two buffers, used in turn). */
char *long_name(char c, size_t len);
int cmp_str(const void *a, const void *b);

/* ---- the daemon ------------------------------------------------------------------------------ */

int is_mounted(void);
void daemon_start_opts(const char *extra);
void daemon_start(void);
/* Close whatever a failed test left open inside the mount, so unmount is not refused. */
void close_mount_fds(void);
/* Unmount and require the daemon to exit with status 0 (clean checkpoint, no leak). */
void daemon_stop(void);
void remount(void);
/* Unmount cleanly and require a daemon log without sanitizer reports or damage. */
void stop_and_check_log(void);

/* Fixtures: the big image (6 GiB, sparse), the small one that fills up, and the mount check
 * before each test. */
void setup_fs(void);
void setup_small(void);
void teardown_fs(void);
void need_mount(void);

/* ---- a manifest of a tree: every attribute that must survive a remount ------------------- */

enum { MF_ALL, MF_COPY };

struct mf {
	char **lines;
	size_t n, cap;
	const char *root;
	int mode;
	int bad_dirs;
};

/* Subdirectories of PATH, and the inode numbers readdir gives for "." and "..". */
size_t subdirs(const char *path, ino_t *dot, ino_t *dotdot);
struct mf *manifest(const char *root, int mode);
void mf_free(struct mf *m);
/* Number of lines that differ; the first few are printed. */
size_t mf_diff(const struct mf *a, const struct mf *b, const char *what);

/* ---- what one file checks for another --------------------------------------------------- */

struct tstate;
extern struct tstate *g_threads; /* t_threads' clients, for t_final */
/* After the run: the directories hold exactly the live files, each with its content. */
void threads_verify(struct tstate *ts);
void sparse_verify(void);

/* ---- the tests, by file; test_posix.c puts them in order --------------------------------- */

/* Each appends its tests to T and returns how many. */
int posix_data_tests(const TTest **t);
int posix_names_tests(const TTest **t);
int posix_attrs_tests(const TTest **t);
int posix_persist_tests(const TTest **t);
int posix_threads_tests(const TTest **t);

#endif
