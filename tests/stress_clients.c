/*
 * stress_clients.c - test_stress's client threads: each owns names t<id>_... in the shared
 * directories and in small directories of its own, keeps a model of their bytes and entries,
 * and runs a random mix of operations on them, checking what it reads and lists as it goes.
 * A failure names the operation, the path and the errno (w->err) and stops every thread.
 */
#include "stress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

const char *ename(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "?";
}

uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A word at a time: the test program runs under the sanitizers too. */
void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;

		x ^= x >> 29;
		memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
	}
}

/* ---- a thread's model ------------------------------------------------------------------- */

const char *const op_names[OP_NR] = {
	"create", "append", "overwrite", "truncate", "fsync", "verify", "stat", "readdir",
	"unlink", "rename", "mkdir", "rename-dir", "rmdir", "fsync-dir",
};
/* Out of 100; an operation that does not apply (no free slot, no file) draws again. */
static const int op_weight[OP_NR] = {12, 12, 12, 8, 8, 10, 2, 8, 6, 12, 3, 4, 2, 1};

struct worker g_w[NTHREADS];

static const char *dir_path(char *buf, const struct worker *w, int parent)
{
	if (parent < NSHARED)
		snprintf(buf, 400, "%s/s%d", g_mnt, parent);
	else
		snprintf(buf, 400, "%s/s%d/%s", g_mnt, w->d[parent - NSHARED].parent,
			 w->d[parent - NSHARED].name);
	return buf;
}

static const char *file_path(char *buf, const struct worker *w, const struct sfile *f)
{
	char d[400];

	snprintf(buf, 512, "%s/%s", dir_path(d, w, f->parent), f->name);
	return buf;
}

static const char *own_dir_path(char *buf, const struct sdir *d)
{
	snprintf(buf, 512, "%s/s%d/%s", g_mnt, d->parent, d->name);
	return buf;
}

void act_set(struct activity *a, const char *what)
{
	pthread_mutex_lock(&a->lock);
	snprintf(a->what, sizeof(a->what), "%s", what);
	a->since = now_s();
	pthread_mutex_unlock(&a->lock);
}

/* Seconds A has been at its current operation (0 between operations), and what it is. */
double act_age(struct activity *a, char *what, size_t len)
{
	double age;

	pthread_mutex_lock(&a->lock);
	snprintf(what, len, "%s", a->what);
	age = a->what[0] ? now_s() - a->since : 0;
	pthread_mutex_unlock(&a->lock);
	return age;
}

/* Messages name paths from the mount down (s1/t3_f7): the mount's path goes. */
static void strip_mnt(char *s)
{
	size_t n = strlen(g_mnt);
	char *at;

	while ((at = strstr(s, g_mnt)) && at[n] == '/')
		memmove(at, at + n + 1, strlen(at + n + 1) + 1);
}

/* Note the operation about to run: the watchdog sees it, a failure report lists it. */
static void begin(struct worker *w, enum op op, const char *fmt, ...)
{
	char what[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	strip_mnt(what);
	w->opno++;
	w->count[op]++;
	snprintf(w->hist[w->opno % HISTORY], sizeof(w->hist[0]), "#%ld %s %s", w->opno,
		 op_names[op], what);
	act_set(&w->act, w->hist[w->opno % HISTORY]);
}

/* Record the first failure of this thread and stop everyone. */
static int tfail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tfail(struct worker *w, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	strip_mnt(msg);
	if (!w->err[0])
		snprintf(w->err, sizeof(w->err), "thread %d, last op %s: %s", w->id,
			 w->hist[w->opno % HISTORY], msg);
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	return -1;
}

#define SYS(w, call, what, path)                                                            \
	do {                                                                                 \
		if ((call) < 0)                                                              \
			return tfail(w, "%s %s: %s", what, path, ename(errno));              \
	} while (0)

static int pick_live_file(struct worker *w)
{
	int k = (int)(rnd(&w->rng) % NFILES), i;

	for (i = 0; i < NFILES; i++, k = (k + 1) % NFILES)
		if (w->f[k].live)
			return k;
	return -1;
}

static int pick_free(struct worker *w, int files)
{
	int n = files ? NFILES : NDIRS, k = (int)(rnd(&w->rng) % (unsigned)n), i;

	for (i = 0; i < n; i++, k = (k + 1) % n)
		if (files ? !w->f[k].live : !w->d[k].live)
			return k;
	return -1;
}

static int pick_live_dir(struct worker *w)
{
	int k = (int)(rnd(&w->rng) % NDIRS), i;

	for (i = 0; i < NDIRS; i++, k = (k + 1) % NDIRS)
		if (w->d[k].live)
			return k;
	return -1;
}

/* A shared directory or one of our own. */
static int pick_parent(struct worker *w)
{
	int k = pick_live_dir(w);

	if (k >= 0 && rnd(&w->rng) % 3 == 0)
		return NSHARED + k;
	return (int)(rnd(&w->rng) % NSHARED);
}

static int files_in(const struct worker *w, int parent)
{
	int k, n = 0;

	for (k = 0; k < NFILES; k++)
		n += w->f[k].live && w->f[k].parent == parent;
	return n;
}

/* ---- file operations ------------------------------------------------------------------ */

static int write_model(struct worker *w, struct sfile *f, int fd, size_t off, size_t len,
		       const char *p)
{
	ssize_t n;

	fill(w->buf, len, rnd(&w->rng));
	n = pwrite(fd, w->buf, len, (off_t)off);
	if (n != (ssize_t)len)
		return tfail(w, "pwrite %zu at %zu of %s: %zd (%s)", len, off, p, n,
			    n < 0 ? ename(errno) : "short");
	if (off > f->size)
		memset(f->data + f->size, 0, off - f->size);
	memcpy(f->data + off, w->buf, len);
	if (off + len > f->size)
		f->size = off + len;
	return 0;
}

static int op_create(struct worker *w)
{
	int k = pick_free(w, 1), fd, ret;
	struct sfile *f;
	char p[512];

	if (k < 0)
		return 1;
	f = &w->f[k];
	f->parent = pick_parent(w);
	snprintf(f->name, sizeof(f->name), "t%d_f%ld", w->id, w->seq++);
	f->size = 0;
	begin(w, OP_CREATE, "%s", file_path(p, w, f));
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	SYS(w, fd, "create", p);
	f->live = 1;
	ret = write_model(w, f, fd, 0, rnd(&w->rng) % (2 * WRITE_MAX + 1), p);
	if (close(fd) && !ret)
		return tfail(w, "close %s: %s", p, ename(errno));
	return ret;
}

static int op_write(struct worker *w, int append)
{
	int k = pick_live_file(w), fd, ret;
	size_t off, len = 1 + rnd(&w->rng) % WRITE_MAX;
	struct sfile *f;
	char p[512];

	if (k < 0)
		return 1;
	f = &w->f[k];
	off = append ? f->size : f->size ? rnd(&w->rng) % f->size : 0;
	if (off + len > FILE_MAX) {
		if (off >= FILE_MAX)
			return 1;
		len = FILE_MAX - off;
	}
	begin(w, append ? OP_APPEND : OP_OVERWRITE, "%zu at %zu of %s (size %zu)", len, off,
	      file_path(p, w, f), f->size);
	fd = open(p, append ? O_WRONLY | O_APPEND : O_RDWR);
	SYS(w, fd, "open", p);
	ret = write_model(w, f, fd, off, len, p);
	if (close(fd) && !ret)
		return tfail(w, "close %s: %s", p, ename(errno));
	return ret;
}

static int op_truncate(struct worker *w)
{
	int k = pick_live_file(w), fd = -1, down = rnd(&w->rng) % 2;
	struct sfile *f;
	size_t to;
	char p[512];

	if (k < 0)
		return 1;
	f = &w->f[k];
	to = down ? (f->size ? rnd(&w->rng) % f->size : 0)
		  : f->size + rnd(&w->rng) % (FILE_MAX - f->size + 1);
	begin(w, OP_TRUNCATE, "%s from %zu to %zu", file_path(p, w, f), f->size, to);
	if (rnd(&w->rng) % 2) {
		SYS(w, truncate(p, (off_t)to), "truncate", p);
	} else {
		fd = open(p, O_WRONLY);
		SYS(w, fd, "open", p);
		if (ftruncate(fd, (off_t)to)) {
			close(fd);
			return tfail(w, "ftruncate %s: %s", p, ename(errno));
		}
		close(fd);
	}
	if (to > f->size)
		memset(f->data + f->size, 0, to - f->size);
	f->size = to;
	return 0;
}

/* A small overwrite, then fsync or fdatasync of it. */
static int op_fsync(struct worker *w)
{
	int k = pick_live_file(w), fd, data = rnd(&w->rng) % 2, ret;
	struct sfile *f;
	size_t off;
	char p[512];

	if (k < 0)
		return 1;
	f = &w->f[k];
	off = f->size ? rnd(&w->rng) % f->size : 0;
	begin(w, OP_FSYNC, "(%s) %s after 100 bytes at %zu", data ? "fdatasync" : "fsync",
	      file_path(p, w, f), off);
	fd = open(p, O_RDWR);
	SYS(w, fd, "open", p);
	ret = write_model(w, f, fd, off, off + 100 > FILE_MAX ? FILE_MAX - off : 100, p);
	if (!ret && (data ? fdatasync(fd) : fsync(fd)))
		ret = tfail(w, "%s %s: %s", data ? "fdatasync" : "fsync", p, ename(errno));
	close(fd);
	return ret;
}

/* The file holds exactly the model's bytes, read past the page cache. */
int check_file(struct worker *w, const struct sfile *f, uint8_t *buf, const char *when)
{
	char p[512];
	struct stat st;
	ssize_t n;
	size_t i;
	int fd;

	fd = open(file_path(p, w, f), O_RDONLY);
	if (fd < 0)
		return tfail(w, "%s: open %s: %s", when, p, ename(errno));
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (fstat(fd, &st)) {
		close(fd);
		return tfail(w, "%s: fstat %s: %s", when, p, ename(errno));
	}
	if ((size_t)st.st_size != f->size || !S_ISREG(st.st_mode)) {
		close(fd);
		return tfail(w, "%s: %s has size %lld mode %o, the model %zu", when, p,
			    (long long)st.st_size, st.st_mode, f->size);
	}
	n = pread(fd, buf, FILE_MAX + 1, 0);
	close(fd);
	if (n != (ssize_t)f->size)
		return tfail(w, "%s: read %s: %zd of %zu bytes (%s)", when, p, n, f->size,
			    n < 0 ? ename(errno) : "short");
	if (!memcmp(buf, f->data, f->size))
		return 0;
	for (i = 0; buf[i] == f->data[i]; i++)
		;
	return tfail(w, "%s: %s differs at byte %zu of %zu: %#x, the model %#x", when, p, i,
		     f->size, buf[i], f->data[i]);
}

static int op_verify(struct worker *w)
{
	int k = pick_live_file(w);
	char p[512];

	if (k < 0)
		return 1;
	begin(w, OP_VERIFY, "%s (size %zu)", file_path(p, w, &w->f[k]), w->f[k].size);
	return check_file(w, &w->f[k], w->buf, "during the run");
}

static int op_stat(struct worker *w)
{
	int k = pick_live_file(w);
	struct stat st;
	char p[512];

	if (k < 0)
		return 1;
	begin(w, OP_STAT, "%s", file_path(p, w, &w->f[k]));
	SYS(w, lstat(p, &st), "lstat", p);
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size != w->f[k].size)
		return tfail(w, "lstat %s: size %lld mode %o, the model %zu", p, (long long)st.st_size,
			    st.st_mode, w->f[k].size);
	return 0;
}

static int op_unlink(struct worker *w)
{
	int k = pick_live_file(w);
	char p[512];

	if (k < 0)
		return 1;
	begin(w, OP_UNLINK, "%s", file_path(p, w, &w->f[k]));
	SYS(w, unlink(p), "unlink", p);
	w->f[k].live = 0;
	return 0;
}

/* To a new name anywhere we may write, or over another file of ours. */
static int op_rename(struct worker *w)
{
	int k = pick_live_file(w), o = pick_live_file(w);
	struct sfile *f, *to, tmp;
	char p[512], q[512];

	if (k < 0)
		return 1;
	f = &w->f[k];
	if (o >= 0 && o != k && rnd(&w->rng) % 5 < 2) {
		struct stat a, b;

		to = &w->f[o];
		begin(w, OP_RENAME, "%s over %s", file_path(p, w, f), file_path(q, w, to));
		/* two files of ours are two inodes: the same one would make the kernel skip the
		 * rename without asking the daemon, leaving both names */
		if (!lstat(p, &a) && !lstat(q, &b) && a.st_ino == b.st_ino)
			return tfail(w, "before rename over: %s and %s are one inode (%llu)", p, q,
				     (unsigned long long)a.st_ino);
		SYS(w, rename(p, q), "rename over", p);
		f->parent = to->parent;
		strcpy(f->name, to->name);
		to->live = 0;
		return 0;
	}
	tmp = *f;
	tmp.parent = pick_parent(w);
	snprintf(tmp.name, sizeof(tmp.name), "t%d_f%ld", w->id, w->seq++);
	begin(w, OP_RENAME, "%s to %s", file_path(p, w, f), file_path(q, w, &tmp));
	SYS(w, rename(p, q), "rename", p);
	f->parent = tmp.parent;
	strcpy(f->name, tmp.name);
	return 0;
}

/* ---- directory operations ------------------------------------------------------------- */

static int op_mkdir(struct worker *w)
{
	int k = pick_free(w, 0);
	char p[512];

	if (k < 0)
		return 1;
	w->d[k].parent = (int)(rnd(&w->rng) % NSHARED);
	snprintf(w->d[k].name, sizeof(w->d[k].name), "t%d_d%ld", w->id, w->seq++);
	begin(w, OP_MKDIR, "%s", own_dir_path(p, &w->d[k]));
	SYS(w, mkdir(p, 0755), "mkdir", p);
	w->d[k].live = 1;
	return 0;
}

/* To a new name in a shared directory, or over another of ours that is empty. */
static int op_rename_dir(struct worker *w)
{
	int k = pick_live_dir(w), o = pick_live_dir(w);
	struct sdir *d, tmp;
	char p[512], q[512];

	if (k < 0)
		return 1;
	d = &w->d[k];
	if (o >= 0 && o != k && !files_in(w, NSHARED + o) && rnd(&w->rng) % 3 == 0) {
		begin(w, OP_RENAME_DIR, "%s over the empty %s", own_dir_path(p, d),
		      own_dir_path(q, &w->d[o]));
		SYS(w, rename(p, q), "rename directory over", p);
		d->parent = w->d[o].parent;
		strcpy(d->name, w->d[o].name);
		w->d[o].live = 0;
		return 0;
	}
	tmp = *d;
	tmp.parent = (int)(rnd(&w->rng) % NSHARED);
	snprintf(tmp.name, sizeof(tmp.name), "t%d_d%ld", w->id, w->seq++);
	begin(w, OP_RENAME_DIR, "%s (%d files) to %s", own_dir_path(p, d),
	      files_in(w, NSHARED + k), own_dir_path(q, &tmp));
	SYS(w, rename(p, q), "rename directory", p);
	*d = tmp;
	return 0;
}

/* A directory that still has files must refuse; then they go, and it does too. */
static int op_rmdir(struct worker *w)
{
	int k = pick_live_dir(w), i;
	char p[512], q[512];

	if (k < 0)
		return 1;
	begin(w, OP_RMDIR, "%s (%d files)", own_dir_path(p, &w->d[k]), files_in(w, NSHARED + k));
	if (files_in(w, NSHARED + k)) {
		errno = 0;
		if (rmdir(p) == 0 || errno != ENOTEMPTY)
			return tfail(w, "rmdir of the non-empty %s: %s, not ENOTEMPTY", p,
				    errno ? ename(errno) : "success");
		for (i = 0; i < NFILES; i++)
			if (w->f[i].live && w->f[i].parent == NSHARED + k) {
				SYS(w, unlink(file_path(q, w, &w->f[i])), "unlink", q);
				w->f[i].live = 0;
			}
	}
	SYS(w, rmdir(p), "rmdir", p);
	w->d[k].live = 0;
	return 0;
}

static int op_fsync_dir(struct worker *w)
{
	int parent = pick_parent(w), fd, ret = 0;
	char p[512];

	begin(w, OP_FSYNC_DIR, "%s", dir_path(p, w, parent));
	fd = open(p, O_RDONLY | O_DIRECTORY);
	SYS(w, fd, "open", p);
	if (fsync(fd))
		ret = tfail(w, "fsync of the directory %s: %s", p, ename(errno));
	close(fd);
	return ret;
}

/* Which of our entries NAME in PARENT is: file slot k, NFILES + directory slot k, or -1. */
static int find_entry(const struct worker *w, int parent, const char *name)
{
	int k;

	for (k = 0; k < NFILES; k++)
		if (w->f[k].live && w->f[k].parent == parent && !strcmp(w->f[k].name, name))
			return k;
	for (k = 0; k < NDIRS && parent < NSHARED; k++)
		if (w->d[k].live && w->d[k].parent == parent && !strcmp(w->d[k].name, name))
			return NFILES + k;
	return -1;
}

/* Our entries in PARENT are exactly the model's, each once, with the right type; in a
 * directory of our own there is nothing else. */
int check_listing(struct worker *w, int parent, const char *when)
{
	int seen[NFILES + NDIRS] = {0}, k;
	char p[512], prefix[16];
	struct dirent *e;
	long n = 0;
	DIR *d;

	snprintf(prefix, sizeof(prefix), "t%d_", w->id);
	d = opendir(dir_path(p, w, parent));
	if (!d)
		return tfail(w, "%s: opendir %s: %s", when, p, ename(errno));
	while ((e = readdir(d)) && ++n < 100000) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (parent < NSHARED && strncmp(e->d_name, prefix, strlen(prefix)))
			continue; /* another thread's */
		k = find_entry(w, parent, e->d_name);
		if (k < 0 || e->d_type != (k < NFILES ? DT_REG : DT_DIR)) {
			int ret = tfail(w, "%s: readdir %s: %s entry %s (type %d)", when, p,
					k < 0 ? "unexpected" : "wrong type for", e->d_name, e->d_type);

			closedir(d); /* after the report: the entry lives in the stream */
			return ret;
		}
		seen[k]++;
	}
	closedir(d);
	if (n >= 100000)
		return tfail(w, "%s: readdir %s never ends", when, p);
	for (k = 0; k < NFILES + NDIRS; k++) {
		int live = k < NFILES ? w->f[k].live && w->f[k].parent == parent
				      : parent < NSHARED && w->d[k - NFILES].live &&
						w->d[k - NFILES].parent == parent;

		if (live && seen[k] != 1)
			return tfail(w, "%s: readdir %s: %s seen %d times", when, p,
				    k < NFILES ? w->f[k].name : w->d[k - NFILES].name, seen[k]);
	}
	return 0;
}

static int op_readdir(struct worker *w)
{
	int parent = pick_parent(w);
	char p[512];

	begin(w, OP_READDIR, "%s", dir_path(p, w, parent));
	return check_listing(w, parent, "during the run");
}

static int (*const op_fn[OP_NR])(struct worker *) = {
	[OP_CREATE] = op_create, [OP_TRUNCATE] = op_truncate, [OP_FSYNC] = op_fsync,
	[OP_VERIFY] = op_verify, [OP_STAT] = op_stat, [OP_READDIR] = op_readdir,
	[OP_UNLINK] = op_unlink, [OP_RENAME] = op_rename, [OP_MKDIR] = op_mkdir,
	[OP_RENAME_DIR] = op_rename_dir, [OP_RMDIR] = op_rmdir, [OP_FSYNC_DIR] = op_fsync_dir,
};

static int run_op(struct worker *w, enum op op)
{
	if (op == OP_APPEND || op == OP_OVERWRITE)
		return op_write(w, op == OP_APPEND);
	return op_fn[op](w);
}

static enum op draw_op(struct worker *w)
{
	int r = (int)(rnd(&w->rng) % 100), op;

	for (op = 0; op < OP_NR - 1 && r >= op_weight[op]; op++)
		r -= op_weight[op];
	return (enum op)op;
}

void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED) && now_s() < g_until) {
		int ret = run_op(w, draw_op(w)); /* > 0: did not apply, draw again */

		act_set(&w->act, "");
		if (ret < 0)
			break;
	}
	return NULL;
}
