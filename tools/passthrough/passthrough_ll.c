/*
 * passthrough_ll.c - zlfs-passthrough: a small low-level FUSE passthrough, the baseline that
 * tools/bench compares zlfs against.
 *
 *   zlfs-passthrough [FUSE options] SOURCE_DIR MOUNTPOINT
 *
 * Every file under MOUNTPOINT is the file of the same name under SOURCE_DIR. The FUSE inode
 * number is the source inode number (the source root is FUSE_ROOT_ID); a hash table maps each
 * inode the kernel knows to its lookup count and its path relative to SOURCE_DIR, as of its
 * latest lookup, and every operation is a *at() call on that path from the SOURCE_DIR
 * descriptor. (Paths rather than a descriptor per inode: one descriptor per known inode runs
 * into RLIMIT_NOFILE long before 100k files, and raising the hard limit needs
 * CAP_SYS_RESOURCE.) Requests are served by the multithreaded loop, writes may be up to
 * 1 MiB, and opens keep their flags, O_DIRECT included: O_DIRECT data goes through a
 * page-aligned bounce buffer. Only the operations a benchmark needs are here: no rename,
 * links, symlinks, xattrs or locks; and the source must be one filesystem (a mount point
 * below SOURCE_DIR is refused with EXDEV).
 */
#define FUSE_USE_VERSION 314
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define TIMEOUT 1.0                /* entry and attribute timeout, the same as zlfs */
#define MAX_IO (1024 * 1024)       /* max_write; also the bounce buffer size */
#define NBUCKETS 65536u

struct pnode {
	fuse_ino_t ino;          /* FUSE inode number: the source st_ino, FUSE_ROOT_ID for the root */
	char *path;              /* relative to the source directory; "." for the root */
	uint64_t nlookup;
	struct pnode *next;
};

struct pfile {                   /* fi->fh of open files and directories */
	int fd;
	int direct;              /* opened with O_DIRECT */
	DIR *dir;                /* directories: the stream over fd */
};

static struct {
	pthread_mutex_t lock;
	struct pnode *buckets[NBUCKETS];
	struct pnode root;
	int rootfd;              /* the source directory */
	dev_t dev;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_key_t bounce_key;

/* A page-aligned MAX_IO buffer per worker thread, for O_DIRECT reads and writes. */
static char *bounce(void)
{
	void *b = pthread_getspecific(bounce_key);

	if (!b) {
		if (posix_memalign(&b, 4096, MAX_IO))
			return NULL;
		pthread_setspecific(bounce_key, b);
	}
	return b;
}

static struct pnode *find_locked(fuse_ino_t ino)
{
	struct pnode *n;

	if (ino == FUSE_ROOT_ID)
		return &P.root;
	for (n = P.buckets[ino % NBUCKETS]; n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

/* Copy the path of INO, then "/NAME" if NAME, into BUF (PATH_MAX); 0 or an errno. */
static int node_path(fuse_ino_t ino, const char *name, char *buf)
{
	struct pnode *n;
	int len = -1;

	pthread_mutex_lock(&P.lock);
	n = find_locked(ino);
	if (n && !name)
		len = snprintf(buf, PATH_MAX, "%s", n->path);
	else if (n)
		len = ino == FUSE_ROOT_ID ? snprintf(buf, PATH_MAX, "%s", name)
					  : snprintf(buf, PATH_MAX, "%s/%s", n->path, name);
	pthread_mutex_unlock(&P.lock);
	return len < 0 ? ESTALE : len >= PATH_MAX ? ENAMETOOLONG : 0;
}

/* Look NAME up in PARENT, count the lookup and fill E. */
static int do_lookup(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	char path[PATH_MAX], *dup;
	struct pnode *n;
	int err = node_path(parent, name, path);

	memset(e, 0, sizeof(*e));
	if (err)
		return err;
	if (fstatat(P.rootfd, path, &e->attr, AT_SYMLINK_NOFOLLOW) < 0)
		return errno;
	if (e->attr.st_dev != P.dev || e->attr.st_ino == FUSE_ROOT_ID)
		return EXDEV;
	e->ino = e->attr.st_ino;
	e->attr_timeout = e->entry_timeout = TIMEOUT;
	if (!(dup = strdup(path)))
		return ENOMEM;
	pthread_mutex_lock(&P.lock);
	n = find_locked(e->ino);
	if (!n && (n = calloc(1, sizeof(*n)))) {
		n->ino = e->ino;
		n->next = P.buckets[n->ino % NBUCKETS];
		P.buckets[n->ino % NBUCKETS] = n;
	}
	if (n) { /* the latest name wins: the inode number may have been reused */
		free(n->path);
		n->path = dup;
		n->nlookup++;
	}
	pthread_mutex_unlock(&P.lock);
	if (!n) {
		free(dup);
		return ENOMEM;
	}
	return 0;
}

static void forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	struct pnode **pp, *n;

	if (ino == FUSE_ROOT_ID)
		return;
	pthread_mutex_lock(&P.lock);
	for (pp = &P.buckets[ino % NBUCKETS]; (n = *pp); pp = &n->next)
		if (n->ino == ino)
			break;
	if (n && nlookup >= n->nlookup) {
		*pp = n->next;
		free(n->path);
		free(n);
	} else if (n) {
		n->nlookup -= nlookup;
	}
	pthread_mutex_unlock(&P.lock);
}

static void reply_entry_or_err(fuse_req_t req, int err, struct fuse_entry_param *e)
{
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, e);
}

static void pt_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = MAX_IO;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	reply_entry_or_err(req, do_lookup(parent, name, &e), &e);
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		forget_one(f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	struct stat st;
	int err = 0;

	if (fi && fi->fh)
		err = fstat(((struct pfile *)(uintptr_t)fi->fh)->fd, &st) < 0 ? errno : 0;
	else if (!(err = node_path(ino, NULL, path)))
		err = fstatat(P.rootfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static int do_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int fd, ret;

	if (fi && fi->fh)
		return ftruncate(((struct pfile *)(uintptr_t)fi->fh)->fd, size);
	fd = openat(P.rootfd, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ret = ftruncate(fd, size);
	close(fd);
	return ret;
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int set,
		       struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	int ret = 0, err = node_path(ino, NULL, path);

	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (set & FUSE_SET_ATTR_MODE)
		ret = fchmodat(P.rootfd, path, a->st_mode, 0);
	if (!ret && (set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		ret = fchownat(P.rootfd, path, (set & FUSE_SET_ATTR_UID) ? a->st_uid : (uid_t)-1,
			       (set & FUSE_SET_ATTR_GID) ? a->st_gid : (gid_t)-1, AT_SYMLINK_NOFOLLOW);
	if (!ret && (set & FUSE_SET_ATTR_SIZE))
		ret = do_truncate(path, a->st_size, fi);
	if (!ret && (set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};

		if (set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (set & FUSE_SET_ATTR_ATIME)
			tv[0] = a->st_atim;
		if (set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (set & FUSE_SET_ATTR_MTIME)
			tv[1] = a->st_mtim;
		ret = utimensat(P.rootfd, path, tv, AT_SYMLINK_NOFOLLOW);
	}
	if (ret < 0)
		fuse_reply_err(req, errno);
	else
		pt_getattr(req, ino, fi);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	char path[PATH_MAX];
	int err = node_path(parent, name, path);

	if (!err && mkdirat(P.rootfd, path, mode) < 0)
		err = errno;
	if (!err)
		err = do_lookup(parent, name, &e);
	reply_entry_or_err(req, err, &e);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	char path[PATH_MAX];
	int err = node_path(parent, name, path);

	if (!err && unlinkat(P.rootfd, path, flags) < 0)
		err = errno;
	fuse_reply_err(req, err);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, 0);
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, AT_REMOVEDIR);
}

static int file_new(int fd, int flags, struct fuse_file_info *fi)
{
	struct pfile *f = malloc(sizeof(*f));

	if (!f) {
		close(fd);
		return ENOMEM;
	}
	f->fd = fd;
	f->direct = !!(flags & O_DIRECT);
	f->dir = NULL;
	fi->fh = (uintptr_t)f;
	return 0;
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	char path[PATH_MAX];
	int fd = -1, err = node_path(parent, name, path);

	if (!err && (fd = openat(P.rootfd, path, fi->flags | O_CREAT | O_CLOEXEC, mode)) < 0)
		err = errno;
	if (!err && !(err = file_new(fd, fi->flags, fi)) && (err = do_lookup(parent, name, &e))) {
		close(fd);
		free((void *)(uintptr_t)fi->fh);
	}
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_create(req, &e, fi);
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	int fd = -1, err = node_path(ino, NULL, path);

	if (!err && (fd = openat(P.rootfd, path, fi->flags | O_CLOEXEC)) < 0)
		err = errno;
	if (!err)
		err = file_new(fd, fi->flags, fi);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_open(req, fi);
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pfile *f = (struct pfile *)(uintptr_t)fi->fh;

	(void)ino;
	close(f->fd);
	free(f);
	fuse_reply_err(req, 0);
}

static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int fd = ((struct pfile *)(uintptr_t)fi->fh)->fd;

	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? errno : 0);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pfile *f = (struct pfile *)(uintptr_t)fi->fh;
	char *buf = bounce();
	ssize_t n;

	(void)ino;
	if (!buf || size > MAX_IO) {
		fuse_reply_err(req, buf ? EINVAL : ENOMEM);
		return;
	}
	n = pread(f->fd, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void pt_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct pfile *f = (struct pfile *)(uintptr_t)fi->fh;
	ssize_t n;

	(void)ino;
	if (f->direct && ((uintptr_t)buf & 4095)) { /* O_DIRECT wants an aligned buffer */
		char *b = bounce();

		if (!b || size > MAX_IO) {
			fuse_reply_err(req, b ? EINVAL : ENOMEM);
			return;
		}
		buf = memcpy(b, buf, size);
	}
	n = pwrite(f->fd, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, fallocate(((struct pfile *)(uintptr_t)fi->fh)->fd, mode, off, len) < 0
				    ? errno : 0);
}

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	int fd = -1, err = node_path(ino, NULL, path);
	struct pfile *f;

	if (!err && (fd = openat(P.rootfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		err = errno;
	if (!err && !(err = file_new(fd, 0, fi))) {
		f = (struct pfile *)(uintptr_t)fi->fh;
		if (!(f->dir = fdopendir(fd))) {
			err = errno;
			close(fd);
			free(f);
		}
	}
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_open(req, fi);
}

/* Plain readdir: the kernel looks names up itself. The offset is the telldir cookie. */
static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	DIR *d = ((struct pfile *)(uintptr_t)fi->fh)->dir;
	char *buf = malloc(size);
	size_t used = 0;
	struct dirent *de;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	seekdir(d, off);
	while ((de = readdir(d))) {
		struct stat st = {.st_ino = de->d_ino, .st_mode = (mode_t)de->d_type << 12};
		size_t len = fuse_add_direntry(req, buf + used, size - used, de->d_name, &st,
					       telldir(d));

		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pfile *f = (struct pfile *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(f->dir);
	free(f);
	fuse_reply_err(req, 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	if (fstatvfs(P.rootfd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.mkdir = pt_mkdir,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.create = pt_create,
	.open = pt_open,
	.read = pt_read,
	.write = pt_write,
	.flush = pt_flush,
	.release = pt_release,
	.fsync = pt_fsync,
	.fallocate = pt_fallocate,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.statfs = pt_statfs,
};

static int source_opt(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	char **src = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && !*src) {
		*src = realpath(arg, NULL);
		if (!*src) {
			fprintf(stderr, "zlfs-passthrough: %s: %s\n", arg, strerror(errno));
			return -1;
		}
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts o;
	struct fuse_loop_config *lc;
	struct fuse_session *se;
	char *src = NULL, fsname[PATH_MAX + 32];
	struct stat st;
	int ret = 1;

	if (fuse_opt_parse(&args, &src, NULL, source_opt) || fuse_parse_cmdline(&args, &o))
		return 2;
	if (o.show_help || o.show_version || !src || !o.mountpoint) {
		printf("usage: %s [FUSE options] SOURCE_DIR MOUNTPOINT\n", argv[0]);
		if (o.show_help)
			fuse_cmdline_help();
		return o.show_help || o.show_version ? 0 : 2;
	}
	P.root.ino = FUSE_ROOT_ID;
	P.root.path = ".";
	P.rootfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (P.rootfd < 0 || fstat(P.rootfd, &st) < 0) {
		fprintf(stderr, "zlfs-passthrough: %s: not a directory\n", src);
		return 1;
	}
	P.dev = st.st_dev;
	pthread_key_create(&bounce_key, free);
	snprintf(fsname, sizeof(fsname), "-ofsname=%s,subtype=passthrough", src);
	fuse_opt_add_arg(&args, fsname);
	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	if (se && !fuse_set_signal_handlers(se) && !fuse_session_mount(se, o.mountpoint)) {
		fuse_daemonize(o.foreground);
		lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lc, o.clone_fd);
		fuse_loop_cfg_set_max_threads(lc, o.max_threads);
		ret = o.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
		fuse_session_unmount(se);
	}
	if (se) {
		fuse_remove_signal_handlers(se);
		fuse_session_destroy(se);
	}
	free(o.mountpoint);
	free(src);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
