/*
 * fuse_ioctl.c - the ioctls on one file: chattr's inode flags (FS_IOC_GETFLAGS, SETFLAGS,
 * FSGETXATTR), zlfs's collapse and insert ranges, and compress-info. fuse_ops.c's op_ioctl
 * hands them here.
 *
 * Owns: the map between the kernel's FS_*_FL flags and the inode's, who may change them, and
 * the checks an ioctl needs because the kernel makes none for it.
 * May call: fuse_int.h (with_inode, fallocate_any), files.h, core.h, zlfs_ioctl.h.
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "zlfs_ioctl.h"
#include "files.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdint.h>
#include <string.h>

/* An ioctl carries no open mode, and the kernel checks no permission for it: the caller must
 * be allowed to write the file (supplementary groups are not consulted). */
static int may_write_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	const struct zlfs_inode *in = inode_of(np);
	uint32_t mode = le32_get(in->mode);

	(void)z;
	(void)arg;
	if (!c->uid)
		return 0;
	if (c->uid == le32_get(in->uid))
		return mode & S_IWUSR ? 0 : -EACCES;
	if (c->gid == le32_get(in->gid))
		return mode & S_IWGRP ? 0 : -EACCES;
	return mode & S_IWOTH ? 0 : -EACCES;
}

void ioctl_shift(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, const void *in_buf,
		 size_t in_size)
{
	struct zlfs_ioc_range r = {0};
	struct zfuse *z = zf(req);
	int mode = cmd == ZLFS_IOC_COLLAPSE_RANGE ? FALLOC_FL_COLLAPSE_RANGE : FALLOC_FL_INSERT_RANGE;
	int ret = in_buf && in_size >= sizeof(r) ? 0 : -EINVAL;

	if (!ret) /* the caller's bytes, copied: FUSE promises no alignment */
		memcpy(&r, in_buf, sizeof(r));
	if (!ret && (r.off > INT64_MAX || r.len > INT64_MAX))
		ret = -EINVAL;

	if (!ret && z->opts.writeback_cache)
		ret = -EOPNOTSUPP; /* dirty pages in the kernel would land at their old offsets */
	if (!ret)
		ret = with_inode(z, req, ino, 0, may_write_fn, NULL);
	if (!ret)
		ret = fallocate_any(z, req, ino, mode, (off_t)r.off, (off_t)r.len);
	if (!ret) /* the data moved under the kernel's cached pages and size */
		fuse_lowlevel_notify_inval_inode(z->se, ino, 0, 0);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

/* ---- inode flags (lsattr, chattr) -------------------------------------------------------
 * The kernel turns FS_IOC_GETFLAGS and SETFLAGS into these ioctls (fileattr), checking the
 * owner itself for SETFLAGS, which reads the old attributes with FS_IOC_FSGETXATTR first.
 * Kept: compression (a regular file's, changed while it is empty: dclu_set; a directory's,
 * inherited), immutable, append-only, nodump and noatime; any other flag is refused with
 * EOPNOTSUPP, as a kernel filesystem refuses a flag it does not have. */
static const struct { uint32_t fs, iflag; } attr_flag_map[] = {
	{FS_IMMUTABLE_FL, ZLFS_IFLAG_IMMUTABLE},
	{FS_APPEND_FL, ZLFS_IFLAG_APPEND},
	{FS_NODUMP_FL, ZLFS_IFLAG_NODUMP},
	{FS_NOATIME_FL, ZLFS_IFLAG_NOATIME},
};
#define FLAGS_KEPT (FS_COMPR_FL | FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL)

static int getflags_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	uint32_t iflags = le32_get(inode_of(np)->flags);
	int flags = dclu_flagged(np) ? FS_COMPR_FL : 0;

	(void)z;
	(void)req;
	for (size_t i = 0; i < sizeof(attr_flag_map) / sizeof(attr_flag_map[0]); i++)
		if (iflags & attr_flag_map[i].iflag)
			flags |= (int)attr_flag_map[i].fs;
	*(int *)arg = flags;
	return 0;
}

/* Who may change +i and +a is CAP_LINUX_IMMUTABLE's holder, whom FUSE does not name: root. */
static int setflags_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	uint32_t iflags = 0, old = le32_get(inode_of(np)->flags);
	int flags = *(int *)arg, ret;

	if (c->uid && c->uid != le32_get(inode_of(np)->uid))
		return -EPERM;
	for (size_t i = 0; i < sizeof(attr_flag_map) / sizeof(attr_flag_map[0]); i++)
		if ((uint32_t)flags & attr_flag_map[i].fs)
			iflags |= attr_flag_map[i].iflag;
	if (c->uid && ((iflags ^ old) & (ZLFS_IFLAG_IMMUTABLE | ZLFS_IFLAG_APPEND)))
		return -EPERM;
	/* a file that stays immutable changes no other flag (+i goes first, as on ext4) */
	if ((old & iflags & ZLFS_IFLAG_IMMUTABLE) &&
	    (((old ^ iflags) & ZLFS_IFLAG_ATTR) || !(flags & FS_COMPR_FL) != !dclu_flagged(np)))
		return -EPERM;
	ret = dclu_set(z->fs, np, flags & FS_COMPR_FL);
	return ret ? ret : inode_set_attr_flags(z->fs, np, iflags);
}

void ioctl_flags(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, const void *in_buf,
		 size_t in_size, size_t out_size)
{
	struct zfuse *z = zf(req);
	struct fsxattr none = {0};

	if (cmd == FS_IOC_FSGETXATTR) { /* what a SETFLAGS reads first: no xflag is kept */
		if (out_size < sizeof(none))
			fuse_reply_err(req, EINVAL);
		else
			fuse_reply_ioctl(req, 0, &none, sizeof(none));
		return;
	}
	int flags = 0, get = cmd == FS_IOC_GETFLAGS;
	int ret = get ? (out_size >= sizeof(flags) ? 0 : -EINVAL)
		      : (in_buf && in_size >= sizeof(flags) ? 0 : -EINVAL);

	if (!ret && !get) /* the caller's bytes, copied: FUSE promises no alignment */
		memcpy(&flags, in_buf, sizeof(flags));
	if (!ret && !get && (flags & ~FLAGS_KEPT))
		ret = -EOPNOTSUPP;
	if (!ret && !get)
		ret = writable(z);
	if (!ret)
		ret = with_inode(z, req, ino, !get, get ? getflags_fn : setflags_fn, &flags);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_ioctl(req, 0, get ? &flags : NULL, get ? sizeof(flags) : 0);
}

/* zlfs-ctl compress-info: the inode's size, stored blocks and cluster shape, as they are. */
static int cinfo_fn(struct zfuse *z, fuse_req_t req, struct node_page *np, void *arg)
{
	const struct zlfs_inode *in = inode_of(np);
	struct zlfs_ioc_compress_info *ci = arg;
	uint32_t log = data_cluster_log(np);

	(void)z;
	(void)req;
	ci->size = le64_get(in->size);
	ci->stored_blocks = le64_get(in->blocks);
	ci->cluster_blocks = log ? 1u << log : 0;
	ci->alg = log ? in->compress_alg : 0;
	ci->flags = log ? ZLFS_CINFO_COMPRESSED : 0;
	return 0;
}

void ioctl_compress_info(fuse_req_t req, fuse_ino_t ino, size_t out_size)
{
	struct zlfs_ioc_compress_info ci = {0};
	int ret = out_size < sizeof(ci) ? -EINVAL : with_inode(zf(req), req, ino, 0, cinfo_fn, &ci);

	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_ioctl(req, 0, &ci, sizeof(ci));
}
