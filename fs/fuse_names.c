/*
 * fuse_names.c - the FUSE operations on names: lookup and forget, making names (mknod,
 * mkdir, create, symlink, link), removing them (unlink, rmdir) and rename.
 *
 * Owns: the POSIX rules that live above single files: link counts, rename rules and the
 * loop check, setgid directories, name limits, times of parents, and what happens to an inode
 * whose last name goes (freed now, or an orphan until the kernel forgets it).
 * May call: fuse_int.h (the FUSE layer's helpers), files.h, core.h, log.h.
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "files.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>

/* ---- lookup, attributes ------------------------------------------------------------------ */

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zfuse *z = zf(req);
	struct fuse_entry_param e;
	struct node_page *dir;
	uint32_t ino;
	int ret = check_name(name);

	lock(z);
	if (!ret)
		ret = get_dir(z, parent, &dir);
	if (!ret) {
		ret = dir_lookup(z->fs, dir, name, strlen(name), &ino, NULL);
		node_put(z->fs, dir);
	}
	if (!ret)
		ret = fill_entry_ino(z, ino, &e);
	unlock(z);
	if (ret == -ENOENT && z->opts.entry_timeout > 0) {
		/* the kernel may remember the name is not there: only a request through it can
		 * add it, and that request replaces the remembered miss */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = z->opts.entry_timeout;
		fuse_reply_entry(req, &e);
	} else if (ret) {
		reply_err(req, ret);
	} else {
		fuse_reply_entry(req, &e);
	}
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct zfuse *z = zf(req);

	lock(z);
	iref_forget(z, fino(ino), nlookup);
	unlock(z);
	fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct zfuse *z = zf(req);
	size_t i;

	lock(z);
	for (i = 0; i < count; i++)
		iref_forget(z, fino(forgets[i].ino), forgets[i].nlookup);
	unlock(z);
	fuse_reply_none(req);
}

/* ---- making names ------------------------------------------------------------------------ */

/* Create an inode of MODE named NAME in PARENT; returns it held in *OUT. */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev, struct node_page **out)
{
	struct zfuse *z = zf(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct node_page *dir, *np;
	struct zlfs_inode *din;
	uint32_t ino, gid = ctx->gid;
	int ret = check_name(name);

	if (!ret)
		ret = writable(z);
	if (!ret)
		ret = get_dir(z, parent, &dir);
	if (ret)
		return ret;
	din = inode_of(dir);
	ret = fcrypt_need_key(z->fs, dir); /* a locked directory takes no new names */
	if (!ret)
		ret = dir_lookup(z->fs, dir, name, strlen(name), &ino, NULL);
	if (ret != -ENOENT) {
		node_put(z->fs, dir);
		return ret ? ret : -EEXIST;
	}
	if (S_ISDIR(mode) && le32_get(din->nlink) >= LINK_MAX_ZLFS) {
		node_put(z->fs, dir);
		return -EMLINK;
	}
	if (le32_get(din->mode) & S_ISGID) { /* setgid directory: group and bit are inherited */
		gid = le32_get(din->gid);
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	ret = inode_new(z->fs, mode, ctx->uid, gid, (uint32_t)rdev, dir->nid, &np);
	if (ret == -ENOSPC && gc_foreground(z->fs) >= 0) /* the room may be in dead blocks */
		ret = inode_new(z->fs, mode, ctx->uid, gid, (uint32_t)rdev, dir->nid, &np);
	if (!ret) {
		ret = fcrypt_inherit(z->fs, dir, np);
		if (!ret)
			ret = dir_add(z->fs, dir, name, strlen(name), np->nid, (uint8_t)IFTODT(mode));
		if (ret) {
			ino = np->nid; /* np may not be used once put */
			node_put(z->fs, np);
			inode_free(z->fs, ino);
		}
	}
	if (!ret) {
		if (S_ISDIR(mode))
			din->nlink = le32_put(le32_get(din->nlink) + 1);
		inode_touch(z->fs, dir, INODE_MTIME | INODE_CTIME);
		*out = np;
	}
	node_put(z->fs, dir);
	return ret;
}

static void reply_new(fuse_req_t req, int ret, struct node_page *np, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(req);
	struct fuse_entry_param e;

	if (!ret) {
		fill_entry(z, np, &e);
		node_put(z->fs, np);
	}
	unlock(z);
	if (ret)
		reply_err(req, ret);
	else if (fi)
		fuse_reply_create(req, &e, fi);
	else
		fuse_reply_entry(req, &e);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = make_node(req, parent, name, mode, rdev, &np);
	reply_new(req, ret, np, NULL);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, &np);
	reply_new(req, ret, np, NULL);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, &np);
	if (!ret && zf(req)->opts.direct_io)
		fi->direct_io = 1;
	fi->noflush = 1; /* as op_open */
	reply_new(req, ret, np, fi);
}

/* A target that fits is kept in the inode: as ciphertext (CBC-CTS, inline_size its padded
 * length) for an encrypted inode. Longer ones are file data, encrypted like any. */
static int symlink_store(struct zfuse *z, struct node_page *np, const char *target)
{
	struct zlfs_inode *in = inode_of(np);
	size_t len = strlen(target), stored = len;
	int ret;

	if (len > ZLFS_INLINE_MAX) {
		ret = data_write(z->fs, np, target, len, 0);
		return ret < 0 ? ret : 0;
	}
	if (fcrypt_is_encrypted(np)) {
		ret = fcrypt_symlink_encrypt(z->fs, np, target, len, (uint8_t *)in->addr);
		if (ret < 0)
			return ret;
		stored = (size_t)ret;
	} else {
		memcpy(in->addr, target, len);
	}
	in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_INLINE);
	in->inline_size = le32_put((uint32_t)stored);
	in->size = le64_put(len);
	node_dirty(z->fs, np);
	return 0;
}

static int symlink_load(struct zfuse *z, struct node_page *np, char *buf)
{
	struct zlfs_inode *in = inode_of(np);
	uint64_t len = le64_get(in->size);
	uint32_t stored = le32_get(in->inline_size);
	int ret;

	if (!S_ISLNK(le32_get(in->mode)) || len > PATH_MAX)
		return -EINVAL;
	if (!(le32_get(in->flags) & ZLFS_IFLAG_INLINE)) {
		ret = data_read(z->fs, np, buf, len, 0);
		buf[ret < 0 ? 0 : len] = 0;
		return ret < 0 ? ret : 0;
	}
	if (!fcrypt_is_encrypted(np)) {
		memcpy(buf, in->addr, len);
		buf[len] = 0;
		return 0;
	}
	if (stored > ZLFS_INLINE_MAX)
		return -EUCLEAN;
	ret = fcrypt_symlink_decrypt(z->fs, np, (const uint8_t *)in->addr, stored, buf);
	return ret < 0 ? ret : 0;
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = strlen(link) >= PATH_MAX ? -ENAMETOOLONG : 0;
	if (!ret)
		ret = make_node(req, parent, name, S_IFLNK | 0777, 0, &np);
	if (!ret)
		ret = symlink_store(zf(req), np, link);
	reply_new(req, ret, np, NULL);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	char buf[PATH_MAX + 1];
	int ret;

	lock(z);
	ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		ret = symlink_load(z, np, buf);
		node_put(z->fs, np);
	}
	unlock(z);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_readlink(req, buf);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct zfuse *z = zf(req);
	struct node_page *np = NULL, *dir;
	uint32_t other;
	int ret = check_name(newname);

	lock(z);
	if (!ret)
		ret = writable(z);
	if (!ret)
		ret = inode_get(z->fs, fino(ino), &np);
	if (!ret && S_ISDIR(le32_get(inode_of(np)->mode)))
		ret = -EPERM;
	if (!ret && le32_get(inode_of(np)->nlink) >= LINK_MAX_ZLFS)
		ret = -EMLINK;
	if (!ret && !(ret = get_dir(z, newparent, &dir))) {
		/* names keep their directory's encryption: no plaintext name for an encrypted
		 * file and no unencrypted file under an encrypted directory (as fscrypt) */
		ret = fcrypt_same_policy(dir, np) ? fcrypt_need_key(z->fs, dir) : -EXDEV;
		if (!ret)
			ret = dir_lookup(z->fs, dir, newname, strlen(newname), &other, NULL);
		ret = ret == -ENOENT ? 0 : ret ? ret : -EEXIST;
		if (!ret)
			ret = dir_add(z->fs, dir, newname, strlen(newname), np->nid,
				      (uint8_t)IFTODT(le32_get(inode_of(np)->mode)));
		if (!ret) {
			struct zlfs_inode *in = inode_of(np);

			in->nlink = le32_put(le32_get(in->nlink) + 1);
			inode_touch(z->fs, np, INODE_CTIME);
			inode_touch(z->fs, dir, INODE_MTIME | INODE_CTIME);
		}
		node_put(z->fs, dir);
	}
	if (ret && np) {
		node_put(z->fs, np);
		np = NULL;
	}
	reply_new(req, ret, np, NULL);
}

/* ---- removing names ---------------------------------------------------------------------- */

/* Drop one link of VICTIM (named in DIR, already removed from it). */
static int drop_link(struct zfuse *z, struct node_page *dir, struct node_page *victim)
{
	struct zlfs_inode *in = inode_of(victim);
	int isdir = S_ISDIR(le32_get(in->mode));

	if (isdir) {
		in->nlink = 0;
		inode_of(dir)->nlink = le32_put(le32_get(inode_of(dir)->nlink) - 1);
	} else {
		in->nlink = le32_put(le32_get(in->nlink) - 1);
	}
	inode_touch(z->fs, victim, INODE_CTIME);
	if (!in->nlink)
		return inode_unlinked(z, victim->nid);
	return 0;
}

static int remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int want_dir)
{
	struct zfuse *z = zf(req);
	struct node_page *dir, *np;
	uint32_t ino;
	int ret = writable(z);

	if (!ret)
		ret = get_dir(z, parent, &dir);
	if (ret)
		return ret;
	ret = dir_lookup(z->fs, dir, name, strlen(name), &ino, NULL);
	if (!ret)
		ret = inode_get(z->fs, ino, &np);
	if (ret) {
		node_put(z->fs, dir);
		return ret;
	}
	if (want_dir && !S_ISDIR(le32_get(inode_of(np)->mode)))
		ret = -ENOTDIR;
	else if (!want_dir && S_ISDIR(le32_get(inode_of(np)->mode)))
		ret = -EISDIR;
	else if (want_dir && le32_get(inode_of(np)->dir_entries))
		ret = -ENOTEMPTY;
	if (!ret)
		ret = dir_remove(z->fs, dir, name, strlen(name));
	if (!ret) {
		inode_touch(z->fs, dir, INODE_MTIME | INODE_CTIME);
		node_put(z->fs, np);
		ret = drop_link(z, dir, np);
	} else {
		node_put(z->fs, np);
	}
	node_put(z->fs, dir);
	return ret;
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int ret;

	lock(zf(req));
	ret = remove_name(req, parent, name, 0);
	unlock(zf(req));
	reply_err(req, ret);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int ret;

	lock(zf(req));
	ret = remove_name(req, parent, name, 1);
	unlock(zf(req));
	reply_err(req, ret);
}

/* ---- rename ----------------------------------------------------------------------------- */

/* Would moving directory INO under NEWPARENT put it inside itself? */
static int is_ancestor(struct zfuse *z, uint32_t ino, uint32_t newparent)
{
	uint32_t cur = newparent, hops = 0;
	struct node_page *np;

	while (cur != ZLFS_ROOT_INO && hops++ < 100000) {
		if (cur == ino)
			return 1;
		if (inode_get(z->fs, cur, &np))
			return 0;
		cur = le32_get(inode_of(np)->parent_ino);
		node_put(z->fs, np);
	}
	return cur == ino;
}

struct rn {
	struct node_page *odir, *ndir, *src, *dst;
	const char *oname, *nname;
};

static void rn_put(struct zfuse *z, struct rn *r)
{
	node_put(z->fs, r->odir);
	node_put(z->fs, r->ndir);
	node_put(z->fs, r->src);
	node_put(z->fs, r->dst);
}

static int rn_isdir(struct node_page *np) { return np && S_ISDIR(le32_get(inode_of(np)->mode)); }

static void rn_move_dir(struct zfuse *z, struct node_page *d, struct node_page *from,
			struct node_page *to)
{
	if (!rn_isdir(d) || from == to)
		return;
	inode_of(d)->parent_ino = le32_put(to->nid);
	inode_of(from)->nlink = le32_put(le32_get(inode_of(from)->nlink) - 1);
	inode_of(to)->nlink = le32_put(le32_get(inode_of(to)->nlink) + 1);
	node_dirty(z->fs, d);
}

static int rn_exchange(struct zfuse *z, struct rn *r)
{
	uint8_t st = (uint8_t)IFTODT(le32_get(inode_of(r->src)->mode));
	uint8_t dt = (uint8_t)IFTODT(le32_get(inode_of(r->dst)->mode));
	int ret;

	if ((rn_isdir(r->src) && is_ancestor(z, r->src->nid, r->ndir->nid)) ||
	    (rn_isdir(r->dst) && is_ancestor(z, r->dst->nid, r->odir->nid)))
		return -EINVAL;
	ret = dir_retarget(z->fs, r->odir, r->oname, strlen(r->oname), r->dst->nid, dt);
	if (!ret)
		ret = dir_retarget(z->fs, r->ndir, r->nname, strlen(r->nname), r->src->nid, st);
	if (ret)
		return ret;
	rn_move_dir(z, r->src, r->odir, r->ndir);
	rn_move_dir(z, r->dst, r->ndir, r->odir);
	inode_touch(z->fs, r->src, INODE_CTIME);
	inode_touch(z->fs, r->dst, INODE_CTIME);
	return 0;
}

static int rn_replace(struct zfuse *z, struct rn *r)
{
	uint8_t st = (uint8_t)IFTODT(le32_get(inode_of(r->src)->mode));
	size_t nl = strlen(r->nname);
	int ret;

	if (rn_isdir(r->src) && is_ancestor(z, r->src->nid, r->ndir->nid))
		return -EINVAL;
	if (r->dst) {
		if (rn_isdir(r->dst) && !rn_isdir(r->src))
			return -EISDIR;
		if (!rn_isdir(r->dst) && rn_isdir(r->src))
			return -ENOTDIR;
		if (rn_isdir(r->dst) && le32_get(inode_of(r->dst)->dir_entries))
			return -ENOTEMPTY;
		ret = dir_retarget(z->fs, r->ndir, r->nname, nl, r->src->nid, st);
	} else {
		if (rn_isdir(r->src) && r->odir != r->ndir &&
		    le32_get(inode_of(r->ndir)->nlink) >= LINK_MAX_ZLFS)
			return -EMLINK;
		ret = dir_add(z->fs, r->ndir, r->nname, nl, r->src->nid, st);
	}
	if (!ret)
		ret = dir_remove(z->fs, r->odir, r->oname, strlen(r->oname));
	if (ret)
		return ret;
	rn_move_dir(z, r->src, r->odir, r->ndir);
	inode_touch(z->fs, r->src, INODE_CTIME);
	if (r->dst)
		ret = drop_link(z, r->ndir, r->dst);
	return ret;
}

static int rn_load(struct zfuse *z, struct rn *r, fuse_ino_t parent, fuse_ino_t newparent)
{
	uint32_t ino;
	int ret = get_dir(z, parent, &r->odir);

	if (!ret)
		ret = get_dir(z, newparent, &r->ndir);
	if (!ret)
		ret = dir_lookup(z->fs, r->odir, r->oname, strlen(r->oname), &ino, NULL);
	if (!ret)
		ret = inode_get(z->fs, ino, &r->src);
	if (ret)
		return ret;
	ret = dir_lookup(z->fs, r->ndir, r->nname, strlen(r->nname), &ino, NULL);
	if (ret == -ENOENT)
		return 0;
	return ret ? ret : inode_get(z->fs, ino, &r->dst);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct zfuse *z = zf(req);
	struct rn r = {.oname = name, .nname = newname};
	int ret = check_name(newname);

	lock(z);
	if (!ret)
		ret = writable(z);
	if (!ret && (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)))
		ret = -EINVAL;
	if (!ret)
		ret = rn_load(z, &r, parent, newparent);
	if (!ret && !fcrypt_same_policy(r.odir, r.ndir)) /* see op_link */
		ret = -EXDEV;
	if (!ret && r.dst == r.src) /* same inode: POSIX says do nothing */
		goto out;
	if (!ret && (flags & RENAME_EXCHANGE))
		ret = r.dst ? rn_exchange(z, &r) : -ENOENT;
	else if (!ret && (flags & RENAME_NOREPLACE) && r.dst)
		ret = -EEXIST;
	else if (!ret)
		ret = rn_replace(z, &r);
	if (!ret) {
		inode_touch(z->fs, r.odir, INODE_MTIME | INODE_CTIME);
		inode_touch(z->fs, r.ndir, INODE_MTIME | INODE_CTIME);
	}
out:
	rn_put(z, &r);
	unlock(z);
	reply_err(req, ret);
}
