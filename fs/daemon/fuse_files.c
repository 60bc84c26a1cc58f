/*
 * fuse_files.c - the FUSE operations on one inode: attributes, open, read, write, sync,
 * fallocate, directory listings, statfs and extended attributes (its ioctls: fuse_ioctl.c).
 *
 * Owns: turning those requests into calls on the file layer, the set-id rules of truncation,
 * and readdirplus entries (which take lookup counts like lookups do).
 * May call: fuse_int.h (the FUSE layer's helpers), files.h, core.h, log.h.
 *
 * Locks (core.h): each request locks its inode, shared to read and exclusive to change (then
 * with cp_lock shared, through with_inode); a listing locks the directory as a parent and
 * reads its children's attributes from the attribute cache or under their own locks.
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "files.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>


static int with_inode_once(struct zfuse *z, fuse_req_t req, uint32_t ino, int change,
			   inode_fn fn, void *arg)
{
	struct node_page *np;
	struct ilock *il;
	int ret;

	op_enter(z, change);
	il = ilock_take(z->fs, ino, change, LR_ICHILD, ino);
	ret = il ? (change ? writable(z) : 0) : -ENOMEM;
	if (!ret)
		ret = inode_get(z->fs, ino, &np);
	if (!ret) {
		if (change && S_ISDIR(le32_get(inode_of(np)->mode))) /* no dentry mark says it */
			dmark_taint(z->fs, ino);
		ret = fn(z, req, np, arg);
		node_put(z->fs, np);
	}
	ilock_drop(z->fs, il);
	op_leave(z, change);
	return ret;
}

/* Tries of a change that ran out of room: concurrent writers (one O_DIRECT write is several
 * requests) may each collect and then find the room taken by another's retry. */
#define CHANGE_TRIES 4

/* FN on INO: reading under its lock shared, or (CHANGE) changing under it exclusive, tried
 * again after a foreground GC or a checkpoint when it ran out of room or fresh nids, for as
 * long as GC still finds something to collect. */
int with_inode(struct zfuse *z, fuse_req_t req, fuse_ino_t ino, int change, inode_fn fn,
	       void *arg)
{
	int ret = with_inode_once(z, req, fino(ino), change, fn, arg), n;

	for (n = 1; change && n < CHANGE_TRIES && op_retry(z, ret); n++)
		ret = with_inode_once(z, req, fino(ino), change, fn, arg);
	return ret == -EAGAIN ? -ENOSPC : ret;
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	uint32_t gen;
	struct stat st;
	int ret;

	(void)fi;
	op_enter(z, 0);
	ret = inode_stat(z->fs, fino(ino), &st, &gen);
	st.st_ino = ino;
	op_leave(z, 0);
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

struct sa {
	const struct stat *a;
	int to_set;
	struct stat out;
};

static int setattr_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	struct sa *sa = arg;
	const struct stat *a = sa->a;
	struct zlfs_inode *in = inode_of(np);
	uint64_t now = inode_now_ns();
	int to_set = sa->to_set, ret = inode_frozen(np), set = to_set;

	(void)req;
	/* +a lets the times move to now (touch), as the VFS does, and nothing else; the kernel
	 * sends a time to set with each "now" */
	if (set & FUSE_SET_ATTR_ATIME_NOW)
		set &= ~FUSE_SET_ATTR_ATIME;
	if (set & FUSE_SET_ATTR_MTIME_NOW)
		set &= ~FUSE_SET_ATTR_MTIME;
	if (!ret && (set & ~(FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW |
			     FUSE_SET_ATTR_CTIME)))
		ret = inode_pinned(np);
	if (ret)
		return ret;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (S_ISDIR(le32_get(in->mode)))
			return -EISDIR;
		ret = data_set_size(z->fs, np, (uint64_t)a->st_size);
		if (ret)
			return ret;
		in->mtime_ns = le64_put(now);
	}
	if (to_set & FUSE_SET_ATTR_MODE) {
		in->mode = le32_put((le32_get(in->mode) & S_IFMT) | (a->st_mode & 07777));
		ret = z->posix_acl ? acl_chmod(z->fs, np) : 0; /* the access ACL follows */
		if (ret)
			return ret;
	}
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
	inode_fill_stat(z->fs, np, &sa->out);
	return 0;
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct sa sa = {.a = attr, .to_set = to_set};
	int ret;

	(void)fi;
	ret = with_inode(z, req, ino, 1, setattr_fn, &sa);
	sa.out.st_ino = ino;
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_attr(req, &sa.out, z->opts.attr_timeout);
}

/* ---- files --------------------------------------------------------------------------------- */

/* Whether the caller of REQ is in group GID (its own or a supplementary one). */
static int caller_in_group(fuse_req_t req, uint32_t gid)
{
	gid_t groups[64];
	int n = fuse_req_getgroups(req, 64, groups), i;

	if (fuse_req_ctx(req)->gid == gid)
		return 1;
	for (i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* A change of a file's data by a caller without CAP_FSETID drops its privileges, as the
 * kernel does for a write (setattr_should_drop_sgid, file_remove_privs): S_ISUID always;
 * S_ISGID with group execute, or when the caller is not in the file's group; and the file
 * capabilities. The kernel does this itself for write and truncate; it leaves it to the
 * filesystem for an atomic O_TRUNC and for fallocate. FUSE passes no capabilities, so root
 * stands for CAP_FSETID. */
static int kill_setid(struct zlfs_fs *fs, fuse_req_t req, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t mode = le32_get(in->mode);
	int ret;

	if (!fuse_req_ctx(req)->uid || !S_ISREG(mode))
		return 0;
	ret = xattr_remove(fs, np, "security.capability");
	if (ret && ret != -ENODATA)
		return ret;
	mode &= ~(uint32_t)S_ISUID;
	if ((mode & S_ISGID) && ((mode & S_IXGRP) || !caller_in_group(req, le32_get(in->gid))))
		mode &= ~(uint32_t)S_ISGID;
	in->mode = le32_put(mode);
	return 0;
}

static int open_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	const struct fuse_file_info *fi = arg;
	int ret = fcrypt_need_key(z->fs, np); /* an encrypted file's contents need the key */
	int wr = (fi->flags & O_ACCMODE) != O_RDONLY;

	/* +i: no writer; +a: writers that append only, and no truncation */
	if (!ret && (wr || (fi->flags & O_TRUNC)))
		ret = (fi->flags & O_APPEND) && !(fi->flags & O_TRUNC) ? inode_frozen(np)
									 : inode_pinned(np);
	if (!ret && (fi->flags & O_TRUNC) && wr) {
		ret = kill_setid(z->fs, req, np);
		if (!ret)
			ret = data_set_size(z->fs, np, 0);
		if (!ret)
			inode_touch(z->fs, np, INODE_MTIME | INODE_CTIME);
	}
	return ret;
}

void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	int wr = (fi->flags & O_ACCMODE) != O_RDONLY, ret;

	ret = wr && ATOMIC_GET(&z->fs->readonly) ? -EROFS
		: with_inode(z, req, ino, wr && (fi->flags & O_TRUNC), open_fn, fi);
	if (ret) {
		reply_err(req, ret);
		return;
	}
	if (z->opts.direct_io)
		fi->direct_io = 1;
	fi->keep_cache = !z->opts.direct_io && !iref_direct_seen(z, fino(ino));
	fi->noflush = 1; /* nothing to do at close (no remote locks): spare the round trip */
	fuse_reply_open(req, fi);
}

struct rdq {
	size_t size;
	off_t off;
	struct data_rplan p;
};

/* Plan and device I/O both under the file's lock, shared: the blocks mapped stay valid. */
static int read_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	struct rdq *q = arg;
	int ret = data_read_plan(z->fs, np, q->size, (uint64_t)q->off, &q->p);

	(void)req;
	if (!ret && q->p.len)
		ret = data_read_do(z->fs, &q->p);
	return ret;
}

static int ahead_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	(void)req;
	data_read_ahead(z->fs, np, arg);
	return 0;
}

/* Reads, and writes of GC_BULK_BYTES or more, are counted so that background GC can leave
 * the device to them (gc_step_budget). */
static void read_enter(struct zfuse *z) { ATOMIC_ADD(&z->fs->users_reading, 1); }

static void read_leave(struct zfuse *z, size_t size)
{
	ATOMIC_SET(size >= GC_BULK_BYTES ? &z->fs->last_bulk_read_ns : &z->fs->last_read_ns,
		   mono_ns());
	ATOMIC_ADD(&z->fs->users_reading, -1);
}

static int bulk_write_enter(struct zfuse *z, size_t size)
{
	if (size < GC_BULK_BYTES)
		return 0;
	ATOMIC_ADD(&z->fs->users_bulk_writing, 1);
	return 1;
}

static void bulk_write_leave(struct zfuse *z, int bulk)
{
	if (!bulk)
		return;
	ATOMIC_SET(&z->fs->last_bulk_write_ns, mono_ns());
	ATOMIC_ADD(&z->fs->users_bulk_writing, -1);
}

/* The reply goes first; the blocks the plan reads ahead come after it, on this worker, with
 * the file locked again: the device reads the next extension while the kernel copies this
 * one out and asks for the next piece, instead of the request waiting for both. */
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct rdq q = {.size = size, .off = off};
	int ret;

	(void)fi;
	read_enter(z);
	ret = with_inode(z, req, ino, 0, read_fn, &q);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_buf(req, q.p.len ? (const char *)q.p.buf + q.p.skip : NULL, q.p.len);
	if (q.p.ahead.n && with_inode(z, NULL, ino, 0, ahead_fn, &q.p.ahead))
		ra_cancel(z->fs, fino(ino), &q.p.ahead);
	read_leave(z, size); /* after the read-ahead: its device reads are the reader's too */
	data_read_free(&q.p);
}

struct wrq {
	const char *buf;
	size_t size, done;
	uint64_t off;
	int append;
};

/* Write what is left of the request; a write cut short by want of room or of fresh nids
 * returns why, so with_inode collects or checkpoints and the next try goes on from there. */
static int write_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	struct wrq *q = arg;
	int ret = inode_frozen(np); /* made immutable since the file was opened: as ext4 */

	(void)req;
	if (ret)
		return ret;
	if (q->append) { /* the end as of the first try: a retry continues the same write */
		q->off = le64_get(inode_of(np)->size);
		q->append = 0;
	}
	while (q->done < q->size) {
		ret = inline_try_write(z->fs, np, q->buf + q->done, q->size - q->done,
				       q->off + q->done);
		if (!ret)
			ret = data_write(z->fs, np, q->buf + q->done, q->size - q->done,
					 q->off + q->done);
		if (ret <= 0)
			break;
		q->done += (size_t)ret;
		inode_touch(z->fs, np, INODE_MTIME | INODE_CTIME);
	}
	return ret < 0 ? ret : 0;
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	      struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct wrq q = {.buf = buf, .size = size, .off = (uint64_t)off,
			.append = !!(fi->flags & O_APPEND)};
	int bulk = bulk_write_enter(z, size), ret = with_inode(z, req, ino, 1, write_fn, &q);

	bulk_write_leave(z, bulk);
	if (q.done && (fi->flags & O_DIRECT) && !fi->writepage)
		iref_direct_written(z, fino(ino)); /* before the reply: the next open sees it */
	/* The kernel turns a short reply to an O_DIRECT write into EIO (its asynchronous
	 * direct I/O counts any short piece as an error): say why instead. The bytes written
	 * before the failure stay, as after a failed write(2) that wrote some. */
	if (ret < 0 && (!q.done || (fi->flags & O_DIRECT)))
		reply_err(req, ret);
	else
		fuse_reply_write(req, q.done); /* short only when the second try failed too */
}

void op_sync(fuse_req_t req)
{
	struct zfuse *z = zf(req);
	int ret;

	op_enter(z, 0);
	ret = ATOMIC_GET(&z->fs->readonly) ? 0 : files_sync(z->fs);
	op_leave(z, 0);
	reply_err(req, ret);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	int ret;

	(void)datasync; /* the inode's nodes carry its block pointers: both write them */
	(void)fi;
	op_enter(z, 0);
	ret = ATOMIC_GET(&z->fs->readonly) ? 0 : files_fsync(z->fs, fino(ino));
	op_leave(z, 0);
	reply_err(req, ret);
}

void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static int release_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	(void)req;
	(void)arg;
	return tail_write(z->fs, np);
}

/* A file closed after writing: its partial block held in memory is written now (a failure
 * leaves it held, for the checkpoint to write or report), and its warm data lane is free. */
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		/* only a hint without the file's lock: the write itself takes it */
		if (tail_held(z->fs, fino(ino)) && !ATOMIC_GET(&z->fs->readonly))
			with_inode(z, req, ino, 1, release_fn, NULL);
		data_lane_release(z->fs, fino(ino));
	}
	fuse_reply_err(req, 0);
}

struct fa {
	int mode;
	uint64_t off, len;
};

static int fallocate_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	struct fa *a = arg;
	int keep = !!(a->mode & FALLOC_FL_KEEP_SIZE), ret;

	/* +a allows reserving room and nothing that frees or moves data (vfs_fallocate) */
	ret = a->mode & ~FALLOC_FL_KEEP_SIZE ? inode_pinned(np) : inode_frozen(np);
	if (!ret)
		ret = kill_setid(z->fs, req, np);

	/* Every mode maps, frees or moves blocks, or moves the end of file: the partial block
	 * held in memory (tailbuf.c) goes to the device first, and the mode sees a plain file. */
	if (!ret)
		ret = tail_write(z->fs, np);
	if (!ret)
		ret = inline_before_fallocate(z->fs, np, a->mode);
	if (ret)
		return ret;
	switch (a->mode & ~FALLOC_FL_KEEP_SIZE) {
	case 0:
		ret = falloc_reserve(z->fs, np, a->off, a->len, keep);
		break;
	case FALLOC_FL_PUNCH_HOLE:
		ret = keep ? data_punch(z->fs, np, a->off, a->len) : -EOPNOTSUPP;
		break;
	case FALLOC_FL_ZERO_RANGE:
		ret = falloc_zero(z->fs, np, a->off, a->len, keep);
		break;
	case FALLOC_FL_COLLAPSE_RANGE:
		ret = keep ? -EINVAL : falloc_collapse(z->fs, np, a->off, a->len);
		break;
	case FALLOC_FL_INSERT_RANGE:
		ret = keep ? -EINVAL : falloc_insert(z->fs, np, a->off, a->len);
		break;
	default:
		ret = -EOPNOTSUPP;
	}
	if (!ret)
		inode_touch(z->fs, np, INODE_MTIME | INODE_CTIME);
	return ret;
}

int fallocate_any(struct zfuse *z, fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len)
{
	struct fa a = {.mode = mode, .off = (uint64_t)off, .len = (uint64_t)len};
	int ret = writable(z);

	if (!ret && (off < 0 || len <= 0 || off + len < off))
		ret = -EINVAL;
	return ret ? ret : with_inode(z, req, ino, 1, fallocate_fn, &a);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		  struct fuse_file_info *fi)
{
	(void)fi;
	reply_err(req, fallocate_any(zf(req), req, ino, mode, off, len));
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

		/* the child's attributes: cached, or read under its lock (a child's rank) */
		if (dot || fill_entry_ino(r->z, ino, &e)) {
			e.attr.st_ino = kino(ino);
			e.attr.st_mode = (mode_t)DTTOIF(type);
		}
		n = fuse_add_direntry_plus(r->req, r->buf + r->used, r->size - r->used, nm, &e,
					   (off_t)next);
		if (n > r->size - r->used) {
			if (!dot && e.ino)
				iref_undo(r->z, ino);
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
	struct ilock *il;
	int ret;

	r.buf = malloc(size);
	if (!r.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	op_enter(z, 0);
	il = ilock_take(z->fs, fino(ino), 0, LR_IPARENT, 0);
	ret = il ? get_dir(z, ino, &dir) : -ENOMEM;
	if (!ret) {
		ret = dir_iterate(z->fs, dir, (uint64_t)off, rd_fill, &r);
		node_put(z->fs, dir);
	}
	ilock_drop(z->fs, il);
	op_leave(z, 0);
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

/* A checkpoint, unless every name change in the directory since the last one is said by a
 * durable dentry mark (files_fsync). */
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct zfuse *z = zf(req);
	const struct zlfs_sb_info *s = &z->fs->sb;
	struct statvfs st = {0};
	uint64_t nodes, retired;

	(void)ino;
	op_enter(z, 0);
	zlfs_counts(z->fs, &nodes, &retired);
	st.f_bsize = st.f_frsize = ZLFS_BLOCK_SIZE;
	st.f_blocks = (fsblkcnt_t)(s->main_zones - seg_reserve(z->fs) - retired) *
		      seg_usable_per_zone(z->fs);
	/* Garbage GC will reclaim counts as free: pacing does not clean ahead of need.
	 * Reservations are subtracted from the two together, not from clean space alone. */
	st.f_bfree = (fsblkcnt_t)gc_free_blocks(z->fs);
	if (st.f_bfree > st.f_blocks)
		st.f_bfree = st.f_blocks;
	st.f_bavail = st.f_bfree;
	st.f_files = s->max_nid - 1;
	/* Creating stops once only the GC reserve is left (seg_room_for_user), while writes to
	 * existing files may still fill the data log's zone: say so, as a filesystem out of
	 * inodes does, rather than promise files that would meet ENOSPC. */
	st.f_ffree = st.f_favail = seg_room_for_user(z->fs) ? (fsfilcnt_t)(s->max_nid - 1 - nodes) : 0;
	st.f_namemax = ZLFS_NAME_MAX;
	op_leave(z, 0);
	fuse_reply_statfs(req, &st);
}

/* ---- xattrs ------------------------------------------------------------------------------- */

struct xa {
	const char *name;
	const char *value;
	char *buf;
	size_t size;
	int flags;
};

/* system.* holds only POSIX ACLs, and only when the kernel enforces them (op_init). */
static int xattr_refused(struct zfuse *z, const char *name)
{
	return !strncmp(name, "system.", 7) && (!z->posix_acl || !acl_name(name));
}

static int setxattr_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	struct xa *x = arg;
	int which = acl_name(x->name);

	if (xattr_refused(z, x->name))
		return -EOPNOTSUPP;
	if (inode_pinned(np))
		return -EPERM;
	if (!which)
		return xattr_set(z->fs, np, x->name, x->value, x->size, x->flags);
	/* as posix_acl_update_mode: a caller outside the group and not root drops setgid */
	return acl_set(z->fs, np, which, x->value, x->size,
		       fuse_req_ctx(req)->uid && !caller_in_group(req, le32_get(inode_of(np)->gid)));
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		 size_t size, int flags)
{
	struct xa x = {.name = name, .value = value, .size = size, .flags = flags};

	reply_err(req, with_inode(zf(req), req, ino, 1, setxattr_fn, &x));
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

static int getxattr_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	struct xa *x = arg;

	(void)req;
	if (x->name && xattr_refused(z, x->name))
		return -EOPNOTSUPP;
	return x->name ? xattr_get(z->fs, np, x->name, x->buf, x->size)
		       : xattr_list(z->fs, np, x->buf, x->size);
}

/* The kernel asks for security.capability before every buffered write to a FUSE file (its
 * file_remove_privs: FUSE files never get S_NOSEC), a round trip per write that RocksDB's
 * one-record appends pay each time (12.9% of the daemon's samples in its overwrite). A file
 * without xattrs, as the attribute cache knows it, answers without its lock or inode page. */
static int no_xattrs(struct zfuse *z, fuse_ino_t ino, const char *name)
{
	struct iattr a;

	return name && !strcmp(name, "security.capability") &&
	       !iattr_get(z->fs, fino(ino), &a) && !a.xattrs;
}

/* NAME NULL: the list of names. */
static void getxattr_common(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct xa x = {.name = name, .size = size, .buf = NULL};
	int ret;

	if (no_xattrs(zf(req), ino, name)) {
		reply_err(req, -ENODATA);
		return;
	}
	x.buf = malloc(size ? size : 1);
	ret = x.buf ? with_inode(zf(req), req, ino, 0, getxattr_fn, &x) : -ENOMEM;

	xattr_reply(req, ret, size, x.buf);
	free(x.buf);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	getxattr_common(req, ino, name, size);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	getxattr_common(req, ino, NULL, size);
}

static int removexattr_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	(void)req;
	if (xattr_refused(z, ((struct xa *)arg)->name))
		return -EOPNOTSUPP;
	if (inode_pinned(np))
		return -EPERM;
	return xattr_remove(z->fs, np, ((struct xa *)arg)->name);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct xa x = {.name = name};

	reply_err(req, with_inode(zf(req), req, ino, 1, removexattr_fn, &x));
}
