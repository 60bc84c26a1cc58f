/*
 * fuse_files.c - the FUSE operations on one inode: attributes, open, read, write, sync,
 * fallocate, directory listings, statfs and extended attributes.
 *
 * Owns: turning those requests into calls on the file layer, the set-id rules of truncation,
 * and readdirplus entries (which take lookup counts like lookups do).
 * May call: fuse_int.h (the FUSE layer's helpers), files.h, core.h, log.h.
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "files.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	uint32_t gen;
	struct stat st;
	int ret;

	(void)fi;
	lock(z);
	ret = inode_stat(z->fs, fino(ino), &st, &gen);
	st.st_ino = ino;
	unlock(z);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_attr(req, &st, z->opts.attr_timeout);
}

/* Signed nanoseconds (see inode.c), clamped to what 64 bits hold (years 1678 to 2262), as
 * Linux filesystems clamp times to their range instead of failing. */
static uint64_t ts_ns(const struct timespec *ts)
{
	const int64_t lim = INT64_MAX / 1000000000LL - 1;

	if (ts->tv_sec > lim)
		return (uint64_t)(lim * 1000000000LL);
	if (ts->tv_sec < -lim)
		return (uint64_t)(-lim * 1000000000LL);
	return (uint64_t)((int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec);
}

static int setattr_locked(struct zfuse *z, struct node_page *np, const struct stat *a, int to_set)
{
	struct zlfs_inode *in = inode_of(np);
	uint64_t now = inode_now_ns();
	int ret = 0;

	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (S_ISDIR(le32_get(in->mode)))
			return -EISDIR;
		ret = data_set_size(z->fs, np, (uint64_t)a->st_size);
		if (ret)
			return ret;
		in->mtime_ns = le64_put(now);
	}
	if (to_set & FUSE_SET_ATTR_MODE)
		in->mode = le32_put((le32_get(in->mode) & S_IFMT) | (a->st_mode & 07777));
	if (to_set & FUSE_SET_ATTR_UID)
		in->uid = le32_put(a->st_uid);
	if (to_set & FUSE_SET_ATTR_GID)
		in->gid = le32_put(a->st_gid);
	if (to_set & FUSE_SET_ATTR_ATIME)
		in->atime_ns = le64_put(ts_ns(&a->st_atim));
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		in->atime_ns = le64_put(now);
	if (to_set & FUSE_SET_ATTR_MTIME)
		in->mtime_ns = le64_put(ts_ns(&a->st_mtim));
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		in->mtime_ns = le64_put(now);
	in->ctime_ns = le64_put(to_set & FUSE_SET_ATTR_CTIME ? ts_ns(&a->st_ctim) : now);
	node_dirty(z->fs, np);
	return 0;
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	struct stat st;
	int ret;

	(void)fi;
	lock(z);
	ret = writable(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = setattr_locked(z, np, attr, to_set);
		inode_fill_stat(z->fs, np, &st);
		st.st_ino = ino;
		node_put(z->fs, np);
	}
	unlock(z);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_attr(req, &st, z->opts.attr_timeout);
}

/* ---- files --------------------------------------------------------------------------------- */

/* Truncating drops the set-id bits as truncate(2) does (S_ISGID only with group exec),
 * unless the caller may keep them; FUSE passes no capabilities, so root stands for
 * CAP_FSETID. With atomic O_TRUNC the kernel leaves this to the filesystem. */
static void kill_setid(struct node_page *np, uid_t caller)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t mode = le32_get(in->mode);

	if (!caller || !S_ISREG(mode))
		return;
	mode &= ~(uint32_t)S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~(uint32_t)S_ISGID;
	in->mode = le32_put(mode);
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	int ret;

	lock(z);
	ret = inode_get(z->fs, fino(ino), &np);
	if (ret) {
		unlock(z);
		reply_err(req, ret);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY && z->fs->readonly)
		ret = -EROFS;
	if (!ret) /* an encrypted file's contents need the key */
		ret = fcrypt_need_key(z->fs, np);
	if (!ret && (fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		ret = data_set_size(z->fs, np, 0);
		if (!ret) {
			kill_setid(np, fuse_req_ctx(req)->uid);
			inode_touch(z->fs, np, INODE_MTIME | INODE_CTIME);
		}
	}
	node_put(z->fs, np);
	unlock(z);
	if (ret) {
		reply_err(req, ret);
		return;
	}
	if (z->opts.direct_io)
		fi->direct_io = 1;
	fi->keep_cache = !z->opts.direct_io;
	fi->noflush = 1; /* nothing to do at close (no remote locks): spare the round trip */
	fuse_reply_open(req, fi);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct data_rplan p = {0};
	struct node_page *np;
	int ret;

	(void)fi;
	lock(z);
	ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = data_read_plan(z->fs, np, size, (uint64_t)off, &p);
		node_put(z->fs, np);
	}
	/* No GC or checkpoint on the way out: they may reset a zone, which waits for io_lock,
	 * and the plan holds it until the read below is done. */
	user_left(z->fs);
	pthread_mutex_unlock(&z->fs->lock);
	if (!ret && p.len) /* the device I/O, without the filesystem lock */
		ret = data_read_do(z->fs, &p);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_buf(req, (const char *)p.buf + p.skip, p.len);
	data_read_free(&p);
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	int ret;

	lock(z);
	ret = writable(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		if (fi->flags & O_APPEND)
			off = (off_t)le64_get(inode_of(np)->size);
		ret = data_write(z->fs, np, buf, size, (uint64_t)off);
		if (ret == -ENOSPC && gc_foreground(z->fs) >= 0) /* space may be only dead blocks */
			ret = data_write(z->fs, np, buf, size, (uint64_t)off);
		if (ret > 0)
			inode_touch(z->fs, np, INODE_MTIME | INODE_CTIME);
		node_put(z->fs, np);
	}
	unlock(z);
	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_write(req, (size_t)ret);
}

void op_sync(fuse_req_t req)
{
	struct zfuse *z = zf(req);
	int ret;

	lock(z);
	ret = z->fs->readonly ? 0 : files_sync(z->fs);
	unlock(z);
	reply_err(req, ret);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	int ret;

	(void)datasync; /* the inode's nodes carry its block pointers: both write them */
	(void)fi;
	lock(z);
	ret = z->fs->readonly ? 0 : files_fsync(z->fs, fino(ino));
	unlock(z);
	reply_err(req, ret);
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	int ret = writable(z);

	(void)fi;
	if (!ret && mode != 0 && mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		ret = -EOPNOTSUPP;
	if (!ret && (off < 0 || len <= 0))
		ret = -EINVAL;
	lock(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		if (mode) {
			ret = data_punch(z->fs, np, (uint64_t)off, (uint64_t)len);
		} else if ((end - (uint64_t)off) / ZLFS_BLOCK_SIZE > seg_free_blocks(z->fs)) {
			ret = -ENOSPC; /* a log-structured FS cannot pin blocks; it checks room */
		} else if (end > le64_get(inode_of(np)->size)) {
			ret = data_set_size(z->fs, np, end);
		}
		if (!ret)
			inode_touch(z->fs, np, INODE_MTIME | INODE_CTIME);
		node_put(z->fs, np);
	}
	unlock(z);
	reply_err(req, ret);
}

/* ---- directories ------------------------------------------------------------------------ */

struct rd {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	int plus;
	struct zfuse *z;
};

static int rd_fill(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		   uint64_t next)
{
	struct rd *r = arg;
	char nm[ZLFS_NAME_MAX + 1];
	size_t n;

	memcpy(nm, name, len);
	nm[len] = 0;
	if (r->plus) {
		struct fuse_entry_param e = {0};
		int dot = !strcmp(nm, ".") || !strcmp(nm, "..");

		if (dot || fill_entry_ino(r->z, ino, &e)) {
			e.attr.st_ino = kino(ino);
			e.attr.st_mode = (mode_t)DTTOIF(type);
		}
		n = fuse_add_direntry_plus(r->req, r->buf + r->used, r->size - r->used, nm, &e,
					   (off_t)next);
		if (n > r->size - r->used) {
			if (!dot && e.ino)
				iref_forget(r->z, ino, 1);
			return 1;
		}
	} else {
		struct stat st = {.st_ino = kino(ino), .st_mode = (mode_t)DTTOIF(type)};

		n = fuse_add_direntry(r->req, r->buf + r->used, r->size - r->used, nm, &st,
				      (off_t)next);
		if (n > r->size - r->used)
			return 1;
	}
	r->used += n;
	return 0;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct zfuse *z = zf(req);
	struct rd r = {.req = req, .size = size, .plus = plus, .z = z};
	struct node_page *dir;
	int ret;

	r.buf = malloc(size);
	if (!r.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	lock(z);
	ret = get_dir(z, ino, &dir);
	if (!ret) {
		ret = dir_iterate(z->fs, dir, (uint64_t)off, rd_fill, &r);
		node_put(z->fs, dir);
	}
	unlock(z);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_buf(req, r.buf, r.used);
	free(r.buf);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, 0);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, 1);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	op_sync(req);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct zfuse *z = zf(req);
	const struct zlfs_sb_info *s = &z->fs->sb;
	struct statvfs st = {0};

	(void)ino;
	lock(z);
	st.f_bsize = st.f_frsize = ZLFS_BLOCK_SIZE;
	st.f_blocks = (fsblkcnt_t)(s->main_zones - seg_reserve(z->fs) - z->fs->retired_zones) *
		      seg_usable_per_zone(z->fs);
	st.f_bfree = st.f_bavail = (fsblkcnt_t)seg_free_blocks(z->fs);
	st.f_files = s->max_nid - 1;
	st.f_ffree = st.f_favail = (fsfilcnt_t)(s->max_nid - 1 - z->fs->valid_nodes);
	st.f_namemax = ZLFS_NAME_MAX;
	unlock(z);
	fuse_reply_statfs(req, &st);
}

/* ---- xattrs ------------------------------------------------------------------------------- */

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	int ret;

	lock(z);
	ret = writable(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = xattr_set(z->fs, np, name, value, size, flags);
		node_put(z->fs, np);
	}
	unlock(z);
	reply_err(req, ret);
}

static void xattr_reply(fuse_req_t req, int ret, size_t size, const char *buf)
{
	if (ret < 0)
		reply_err(req, ret);
	else if (!size)
		fuse_reply_xattr(req, (size_t)ret);
	else
		fuse_reply_buf(req, buf, (size_t)ret);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	char *buf = malloc(size ? size : 1);
	int ret = buf ? 0 : -ENOMEM;

	lock(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = xattr_get(z->fs, np, name, buf, size);
		node_put(z->fs, np);
	}
	unlock(z);
	xattr_reply(req, ret, size, buf);
	free(buf);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	char *buf = malloc(size ? size : 1);
	int ret = buf ? 0 : -ENOMEM;

	lock(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = xattr_list(z->fs, np, buf, size);
		node_put(z->fs, np);
	}
	unlock(z);
	xattr_reply(req, ret, size, buf);
	free(buf);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	int ret;

	lock(z);
	ret = writable(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = xattr_remove(z->fs, np, name);
		node_put(z->fs, np);
	}
	unlock(z);
	reply_err(req, ret);
}
