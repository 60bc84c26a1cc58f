/*
 * test_crash_check.c - one crash point of test_crash: the device rebuilt from the write log
 * up to it, mounted (recovery), every file compared with what the fsyncs before it promised
 * and the tree with every state the workload passed through, new work made durable, a
 * remount and fsck.zlfs. Part of test_crash (test_crash.c).
 */
#include "crash_testutil.h"

#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	return bad ? bad : xattr_match(path, f->xops, why, wl);
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
 * gave it after its fsync: a change made after an fsync may become durable at any time (a
 * checkpoint for any reason), so it may replace what that fsync made durable - as a prefix,
 * mid-write. After its fsync, not after S: with several writers, S may be another thread's
 * fsync, sealed after this file's next write was recorded but while only its first part was
 * in a checkpoint (a write is cut into FUSE requests). */
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
	for (k = f->hist_from; k < nhist; k++)
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

/* A name a directory fsync removed is not back: absent, or in a state it was given since. */
static const char *verify_gone(const struct gone *g, char *why, size_t wl)
{
	char p[600], tmp[256];
	struct stat st;
	uint8_t *b = NULL;
	ssize_t n;
	int k, ok = 0;

	if (stat(at_mnt(p, sizeof(p), g->path), &st))
		return NULL;
	n = S_ISDIR(st.st_mode) ? -1 : read_whole(g->path, &b);
	for (k = g->hist_from; k < nhist && !ok && n >= 0; k++)
		ok = !strcmp(hist[k].path, g->path) && !hist[k].is_dir &&
		     !match(g->path, b, n, &hist[k], 1, tmp, sizeof(tmp));
	free(b);
	if (ok)
		return NULL;
	snprintf(why, wl, "%.60s is back after the directory fsync that removed it", g->path);
	return why;
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

/* Mount the rebuilt device and check what stage SI promised, and the whole tree. */
static const char *check_mounted(int si, char *why, size_t wl, int *was_full)
{
	const struct stage *s = si >= 0 ? &stages[si] : NULL;
	int i;

	for (i = 0; s && i < s->nfiles; i++)
		if (verify_any(si, i, why, wl))
			return why;
	for (i = 0; s && i < s->ngone; i++)
		if (verify_gone(&s->gone[i], why, wl))
			return why;
	if (verify_tree(why, wl))
		return why;
	return life_after(why, wl, was_full); /* recovered: can it go on? */
}

uint32_t lose_zone = UINT32_MAX;
long lose_from;

/* Rebuild, mount, compare, write more, unmount, remount, fsck. NULL when the point passes. */
const char *try_point(long n, int torn, char *why, size_t wl)
{
	const char *bad;
	pid_t pid;
	int i, rc, si = -1, was_full = 0;

	for (i = 0; i < nstages; i++)
		if (stages[i].ops <= n)
			si = i;
	unlink(out);
	if (zemu_replay_lose(img, logpath, n, out, torn, lose_zone, lose_from)) {
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
