/*
 * passthrough_ll.c - zlfs-passthrough: a small low-level FUSE passthrough, the baseline that
 * tools/bench compares zlfs against.
 *
 *   zlfs-passthrough [FUSE options] SOURCE_DIR MOUNTPOINT
 *
 * Every file under MOUNTPOINT is the file of the same name under SOURCE_DIR. The FUSE inode
 * number is the source inode number (the source root is FUSE_ROOT_ID); pt_nodes.c keeps, for
 * each inode the kernel knows, its lookup count and the names the kernel knows it by, and
 * every operation is a *at() call on a path made from them, relative to the SOURCE_DIR
 * descriptor. (Paths rather than a descriptor per inode: one descriptor per known inode runs
 * into RLIMIT_NOFILE long before 100k files, and raising the hard limit needs
 * CAP_SYS_RESOURCE.) Requests are served by the multithreaded loop, writes may be up to
 * 1 MiB, and opens keep their flags, O_DIRECT included: O_DIRECT data goes through a
 * page-aligned bounce buffer.
 *
 * Enough of POSIX for real applications (RocksDB, SQLite, tar, git): rename with renameat2's
 * flags, hard links, symlinks, mknod, extended attributes, fallocate, fsync and fsyncdir,
 * lseek's SEEK_DATA/SEEK_HOLE, statfs. Locks (fcntl, flock) are left to the kernel, which
 * keeps them locally when a FUSE filesystem does not serve them. The source must be one
 * filesystem (a mount point below SOURCE_DIR is refused with EXDEV) and nothing else may
 * change it while it is mounted (the names pt_nodes.c knows would go stale: ESTALE).
 *
 * Owns: the FUSE operations and open-file handles. May call: libfuse, libc, pt_nodes.h.
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
#include <sys/xattr.h>
#include <unistd.h>

#include "pt_nodes.h"

#define TIMEOUT 1.0                /* entry and attribute timeout, the same as zlfs */
#define MAX_IO (1024 * 1024)       /* max_write; also the bounce buffer size */

struct pfile {                   /* fi->fh of open files and directories */
	int fd;
	int direct;              /* opened with O_DIRECT */
	DIR *dir;                /* directories: the stream over fd */
};

static struct {
	int rootfd;              /* the source directory */
	char *src;               /* its absolute path (the xattr calls take whole paths) */
	dev_t dev;
} P;

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

static struct pfile *pfile_of(struct fuse_file_info *fi)
{
	return (struct pfile *)(uintptr_t)fi->fh;
}

/* The source inode number under PATH, or 0 if there is none (the name's node in pn_*). */
static fuse_ino_t ino_at(const char *path)
{
	struct stat st;

	return fstatat(P.rootfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ? 0 : st.st_ino;
}

/* Look NAME up in PARENT, count the lookup and fill E. */
static int do_lookup(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	char path[PATH_MAX];
	int err = pn_path(parent, name, path);

	memset(e, 0, sizeof(*e));
	if (err)
		return err;
	if (fstatat(P.rootfd, path, &e->attr, AT_SYMLINK_NOFOLLOW) < 0)
		return errno;
	if (e->attr.st_dev != P.dev || e->attr.st_ino == FUSE_ROOT_ID)
		return EXDEV;
	e->ino = e->attr.st_ino;
	e->attr_timeout = e->entry_timeout = TIMEOUT;
	return pn_lookup(parent, name, e->ino);
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
	pn_forget(ino, nlookup);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		pn_forget(f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	struct stat st;
	int err = 0;

	if (fi && fi->fh)
		err = fstat(pfile_of(fi)->fd, &st) < 0 ? errno : 0;
	else if (!(err = pn_path(ino, NULL, path)))
		err = fstatat(P.rootfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static int do_truncate(const char *path, off_t size)
{
	int fd = openat(P.rootfd, path, O_WRONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -1;
	ret = ftruncate(fd, size);
	close(fd);
	return ret;
}

/* The times of A that SET names, for utimensat/futimens (UTIME_OMIT for the others). */
static void set_times(const struct stat *a, int set, struct timespec tv[2])
{
	tv[0] = tv[1] = (struct timespec){.tv_nsec = UTIME_OMIT};
	if (set & FUSE_SET_ATTR_ATIME_NOW)
		tv[0].tv_nsec = UTIME_NOW;
	else if (set & FUSE_SET_ATTR_ATIME)
		tv[0] = a->st_atim;
	if (set & FUSE_SET_ATTR_MTIME_NOW)
		tv[1].tv_nsec = UTIME_NOW;
	else if (set & FUSE_SET_ATTR_MTIME)
		tv[1] = a->st_mtim;
}

/* Through the open file when the kernel names one (it may be unlinked), else by path. */
static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int set,
		       struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	int fd = fi && fi->fh ? pfile_of(fi)->fd : -1, ret = 0, err = 0;
	uid_t uid = (set & FUSE_SET_ATTR_UID) ? a->st_uid : (uid_t)-1;
	gid_t gid = (set & FUSE_SET_ATTR_GID) ? a->st_gid : (gid_t)-1;
	struct timespec tv[2];

	if (fd < 0 && (err = pn_path(ino, NULL, path))) {
		fuse_reply_err(req, err);
		return;
	}
	if (set & FUSE_SET_ATTR_MODE)
		ret = fd >= 0 ? fchmod(fd, a->st_mode) : fchmodat(P.rootfd, path, a->st_mode, 0);
	if (!ret && (set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		ret = fd >= 0 ? fchown(fd, uid, gid)
			      : fchownat(P.rootfd, path, uid, gid, AT_SYMLINK_NOFOLLOW);
	if (!ret && (set & FUSE_SET_ATTR_SIZE))
		ret = fd >= 0 ? ftruncate(fd, a->st_size) : do_truncate(path, a->st_size);
	if (!ret && (set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		set_times(a, set, tv);
		ret = fd >= 0 ? futimens(fd, tv) : utimensat(P.rootfd, path, tv, AT_SYMLINK_NOFOLLOW);
	}
	if (ret < 0)
		fuse_reply_err(req, errno);
	else
		pt_getattr(req, ino, fi);
}

/* After MADE (0, or the errno of making NAME in PARENT): its entry, or the error. */
static void reply_made(fuse_req_t req, int made, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (made)
		fuse_reply_err(req, made);
	else
		reply_entry_or_err(req, do_lookup(parent, name, &e), &e);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	char path[PATH_MAX];
	int err = pn_path(parent, name, path);

	if (!err && mkdirat(P.rootfd, path, mode) < 0)
		err = errno;
	reply_made(req, err, parent, name);
}

static void pt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	char path[PATH_MAX];
	int err = pn_path(parent, name, path);

	if (!err && mknodat(P.rootfd, path, mode, rdev) < 0)
		err = errno;
	reply_made(req, err, parent, name);
}

static void pt_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	char path[PATH_MAX];
	int err = pn_path(parent, name, path);

	if (!err && symlinkat(target, P.rootfd, path) < 0)
		err = errno;
	reply_made(req, err, parent, name);
}

static void pt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	char path[PATH_MAX], newpath[PATH_MAX];
	int err = pn_path(ino, NULL, path);

	if (!err)
		err = pn_path(newparent, newname, newpath);
	if (!err && linkat(P.rootfd, path, P.rootfd, newpath, 0) < 0)
		err = errno;
	reply_made(req, err, newparent, newname);
}

static void pt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char path[PATH_MAX], target[PATH_MAX];
	int err = pn_path(ino, NULL, path);
	ssize_t n = 0;

	if (!err && (n = readlinkat(P.rootfd, path, target, sizeof(target) - 1)) < 0)
		err = errno;
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	target[n] = '\0';
	fuse_reply_readlink(req, target);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	char path[PATH_MAX];
	int err = pn_path(parent, name, path);
	fuse_ino_t ino = 0;

	if (!err) /* which inode loses the name: the request does not say */
		ino = ino_at(path);
	if (!err && unlinkat(P.rootfd, path, flags) < 0)
		err = errno;
	if (!err)
		pn_unlinked(parent, name, ino);
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

/* renameat2 with the request's flags (RENAME_NOREPLACE, _EXCHANGE, _WHITEOUT): the source
 * filesystem refuses what it cannot do. */
static void pt_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	char path[PATH_MAX], newpath[PATH_MAX];
	int err = pn_path(parent, name, path);
	fuse_ino_t ino = 0, target = 0;

	if (!err)
		err = pn_path(newparent, newname, newpath);
	if (!err) {
		ino = ino_at(path);
		target = ino_at(newpath);
		if (renameat2(P.rootfd, path, P.rootfd, newpath, flags) < 0)
			err = errno;
	}
	if (!err)
		pn_renamed(parent, name, newparent, newname, ino, target,
			   !!(flags & RENAME_EXCHANGE));
	fuse_reply_err(req, err);
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
	int fd = -1, err = pn_path(parent, name, path);

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
	int fd = -1, err = pn_path(ino, NULL, path);

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
	struct pfile *f = pfile_of(fi);

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
	int fd = pfile_of(fi)->fd;

	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? errno : 0);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pfile *f = pfile_of(fi);
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
	struct pfile *f = pfile_of(fi);
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
	fuse_reply_err(req, fallocate(pfile_of(fi)->fd, mode, off, len) < 0
				    ? errno : 0);
}

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[PATH_MAX];
	int fd = -1, err = pn_path(ino, NULL, path);
	struct pfile *f;

	if (!err && (fd = openat(P.rootfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		err = errno;
	if (!err && !(err = file_new(fd, 0, fi))) {
		f = pfile_of(fi);
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
	DIR *d = pfile_of(fi)->dir;
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
	struct pfile *f = pfile_of(fi);

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

static void pt_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	off_t r = lseek(pfile_of(fi)->fd, off, whence);

	(void)ino;
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}

/* ---- extended attributes: by whole path, not following a symlink (its own attributes) --- */

static int abs_path(fuse_ino_t ino, char *buf)
{
	char rel[PATH_MAX];
	int err = pn_path(ino, NULL, rel), n;

	if (err)
		return err;
	n = strcmp(rel, ".") ? snprintf(buf, PATH_MAX, "%s/%s", P.src, rel)
			     : snprintf(buf, PATH_MAX, "%s", P.src);
	return n < 0 || n >= PATH_MAX ? ENAMETOOLONG : 0;
}

/* getxattr of NAME, or listxattr without NAME, into a buffer of SIZE (0: the size wanted). */
static void get_or_list(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[PATH_MAX], *buf = NULL;
	int err = abs_path(ino, path);
	ssize_t n;

	if (!err && size && !(buf = malloc(size)))
		err = ENOMEM;
	if (!err) {
		n = name ? lgetxattr(path, name, buf, size) : llistxattr(path, buf, size);
		if (n < 0)
			err = errno;
		else if (!size)
			fuse_reply_xattr(req, (size_t)n);
		else
			fuse_reply_buf(req, buf, (size_t)n);
	}
	if (err)
		fuse_reply_err(req, err);
	free(buf);
}

static void pt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	get_or_list(req, ino, name, size);
}

static void pt_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	get_or_list(req, ino, NULL, size);
}

static void pt_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	char path[PATH_MAX];
	int err = abs_path(ino, path);

	if (!err && lsetxattr(path, name, value, size, flags) < 0)
		err = errno;
	fuse_reply_err(req, err);
}

static void pt_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[PATH_MAX];
	int err = abs_path(ino, path);

	if (!err && lremovexattr(path, name) < 0)
		err = errno;
	fuse_reply_err(req, err);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.readlink = pt_readlink,
	.mknod = pt_mknod,
	.mkdir = pt_mkdir,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.symlink = pt_symlink,
	.rename = pt_rename,
	.link = pt_link,
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
	.fsyncdir = pt_fsync, /* a directory's pfile has its descriptor in fd too */
	.statfs = pt_statfs,
	.setxattr = pt_setxattr,
	.getxattr = pt_getxattr,
	.listxattr = pt_listxattr,
	.removexattr = pt_removexattr,
	.lseek = pt_lseek,
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
	P.src = src;
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
