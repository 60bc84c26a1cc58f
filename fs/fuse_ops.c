/*
 * fuse_ops.c - the FUSE low-level operations: the top layer of the daemon.
 *
 * Owns: turning each kernel request into calls on the file layer under fs->lock, POSIX rules
 * that live above single files (link counts, rename rules and loops, setgid directories,
 * name limits, times of parents), the kernel's lookup counts and when an unlinked inode may
 * really be freed, and the periodic checkpoint.
 * May call: files.h, core.h (checkpoints, free space), log.h.
 */
#define FUSE_USE_VERSION 314
#include "fuse_ops.h"
#include "background.h"
#include "files.h"
#include "log.h"
#include "zlfs_ioctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define LINK_MAX_ZLFS 65000
#define ATTR_TIMEOUT 1.0

struct zfuse {
	struct zlfs_fs *fs;
	struct zlfs_ops_opts opts;
	/* lookup counts the kernel holds, per inode */
	struct iref {
		struct iref *next;
		uint32_t ino;
		uint64_t nlookup;
	} **irefs;
	uint32_t nbuckets;
	pthread_t cp_thread;
	struct bg *bg;
	pthread_cond_t cp_cond;
	int cp_stop;
};

static struct zfuse *zf(fuse_req_t req) { return fuse_req_userdata(req); }

static uint32_t fino(fuse_ino_t ino) { return ino == FUSE_ROOT_ID ? ZLFS_ROOT_INO : (uint32_t)ino; }
static fuse_ino_t kino(uint32_t ino) { return ino == ZLFS_ROOT_INO ? FUSE_ROOT_ID : ino; }

/* ---- lookup counts and orphans ----------------------------------------------------------- */

static struct iref **iref_slot(struct zfuse *z, uint32_t ino)
{
	struct iref **pp = &z->irefs[ino % z->nbuckets];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static void iref_get(struct zfuse *z, uint32_t ino)
{
	struct iref **pp = iref_slot(z, ino);

	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return; /* the inode is then freed at unlink time: never leaked */
		(*pp)->ino = ino;
	}
	(*pp)->nlookup++;
}

static int iref_held(struct zfuse *z, uint32_t ino) { return *iref_slot(z, ino) != NULL; }

/* The last name of INO is gone: free it now, or when the kernel forgets it. The name is
 * already removed, so a full orphan list must not fail the call: the inode is still freed
 * at forget, only a crash before that would leak it (until fsck). */
static int inode_unlinked(struct zfuse *z, uint32_t ino)
{
	int ret;

	if (!iref_held(z, ino))
		return inode_free(z->fs, ino);
	ret = orphan_add(z->fs, ino);
	if (ret)
		zlog_warn("inode %u unlinked while open cannot be recorded (%s): a crash before "
			  "its last close leaks it until fsck", ino, strerror(-ret));
	return 0;
}

/* The kernel dropped its last reference: an inode whose last name went meanwhile (it is on
 * the orphan list, and only such inodes are) can go now. No inode read for the others. */
static void iref_forget(struct zfuse *z, uint32_t ino, uint64_t n)
{
	struct iref **pp = iref_slot(z, ino), *r = *pp;

	if (!r)
		return;
	r->nlookup = r->nlookup > n ? r->nlookup - n : 0;
	if (r->nlookup)
		return;
	*pp = r->next;
	free(r);
	if (orphan_is(z->fs, ino)) {
		orphan_del(z->fs, ino);
		inode_free(z->fs, ino);
	}
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* Users are counted in and out so background GC can stand aside while they wait. */
static void lock(struct zfuse *z)
{
	__atomic_add_fetch(&z->fs->users_active, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&z->fs->lock);
}

static void user_left(struct zlfs_fs *fs)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	__atomic_store_n(&fs->last_user_ns, (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec,
			 __ATOMIC_RELAXED);
	__atomic_sub_fetch(&fs->users_active, 1, __ATOMIC_RELAXED);
}

/* Free zones down to what the logs need: empty the emptiest zones now, and checkpoint so
 * they become free. */
static int gc_foreground(struct zlfs_fs *fs)
{
	int ret = gc_reclaim(fs, seg_reserve(fs) + fs->sb.nr_logs + 2, 1, 4);

	/* Emptied zones (by GC or by deletes) only become free with a checkpoint. */
	if (ret >= 0 && seg_prefree_zones(fs))
		ret = files_sync(fs);
	return ret == -ENOENT ? -ENOSPC : ret;
}

static void unlock(struct zfuse *z)
{
	gc_phase_update(z->fs); /* transitions are logged when they happen, not when GC wakes */
	if (gc_urgent(z->fs))
		gc_foreground(z->fs);
	if (ckpt_due(z->fs))
		files_sync(z->fs); /* on failure the FS is read-only and says why */
	node_shrink(z->fs);
	user_left(z->fs);
	pthread_mutex_unlock(&z->fs->lock);
}

static int reply_err(fuse_req_t req, int err) { return fuse_reply_err(req, err < 0 ? -err : err); }

static int check_name(const char *name)
{
	return strlen(name) > ZLFS_NAME_MAX ? -ENAMETOOLONG : 0;
}

static int writable(struct zfuse *z) { return z->fs->readonly ? -EROFS : 0; }

static void fill_entry(struct zfuse *z, struct node_page *np, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	inode_fill_stat(z->fs, np, &e->attr);
	e->attr.st_ino = kino(np->nid);
	e->ino = kino(np->nid);
	e->generation = le32_get(inode_of(np)->generation);
	e->attr_timeout = ATTR_TIMEOUT;
	e->entry_timeout = ATTR_TIMEOUT;
	iref_get(z, np->nid);
}

/* An entry for INO from its cached attributes (no node read when they are cached). */
static int fill_entry_ino(struct zfuse *z, uint32_t ino, struct fuse_entry_param *e)
{
	uint32_t gen;
	int ret;

	memset(e, 0, sizeof(*e));
	ret = inode_stat(z->fs, ino, &e->attr, &gen);
	if (ret)
		return ret;
	e->attr.st_ino = kino(ino);
	e->ino = kino(ino);
	e->generation = gen;
	e->attr_timeout = ATTR_TIMEOUT;
	e->entry_timeout = ATTR_TIMEOUT;
	iref_get(z, ino);
	return 0;
}

static int get_dir(struct zfuse *z, fuse_ino_t ino, struct node_page **np)
{
	int ret = inode_get(z->fs, fino(ino), np);

	if (!ret && !S_ISDIR(le32_get(inode_of(*np)->mode))) {
		node_put(z->fs, *np);
		return -ENOTDIR;
	}
	return ret;
}

/* ---- lookup, attributes ------------------------------------------------------------------ */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
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
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct zfuse *z = zf(req);

	lock(z);
	iref_forget(z, fino(ino), nlookup);
	unlock(z);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct zfuse *z = zf(req);
	size_t i;

	lock(z);
	for (i = 0; i < count; i++)
		iref_forget(z, fino(forgets[i].ino), forgets[i].nlookup);
	unlock(z);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
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

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
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
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
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

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = make_node(req, parent, name, mode, rdev, &np);
	reply_new(req, ret, np, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, &np);
	reply_new(req, ret, np, NULL);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct node_page *np = NULL;
	int ret;

	lock(zf(req));
	ret = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, &np);
	if (!ret && zf(req)->opts.direct_io)
		fi->direct_io = 1;
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

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
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

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
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

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
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

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int ret;

	lock(zf(req));
	ret = remove_name(req, parent, name, 0);
	unlock(zf(req));
	reply_err(req, ret);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
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

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
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

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
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

static void op_sync(fuse_req_t req)
{
	struct zfuse *z = zf(req);
	int ret;

	lock(z);
	ret = z->fs->readonly ? 0 : files_sync(z->fs);
	unlock(z);
	reply_err(req, ret);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
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

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	readdir_common(req, ino, size, off, 1);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	op_sync(req);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
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

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
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

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
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

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
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

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
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

/* ---- session ------------------------------------------------------------------------------- */

static int encrypt_policy_set(struct zfuse *z, fuse_req_t req, struct node_page *np)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	int ret = writable(z), was;

	if (!ret && uid && uid != le32_get(inode_of(np)->uid))
		ret = -EACCES; /* only the owner (or root) chooses a directory's policy */
	if (ret)
		return ret;
	was = fcrypt_is_encrypted(np);
	ret = fcrypt_set_policy(z->fs, np);
	/* durable before the call returns: names added later are read as ciphertext only if
	 * the flag and nonce they were made under survive a crash */
	return ret || was ? ret : files_sync(z->fs);
}

static void ioctl_encrypt(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, size_t out_size)
{
	struct zfuse *z = zf(req);
	struct zlfs_ioc_encrypt e = {0};
	struct node_page *np;
	int ret;

	if (cmd == ZLFS_IOC_GET_ENCRYPT && out_size < sizeof(e)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	lock(z);
	ret = inode_get(z->fs, fino(ino), &np);
	if (!ret) {
		if (cmd == ZLFS_IOC_SET_ENCRYPT)
			ret = encrypt_policy_set(z, req, np);
		e.flags = (fcrypt_is_encrypted(np) ? ZLFS_ENC_ENCRYPTED : 0) |
			  (z->fs->master ? ZLFS_ENC_KEY : 0);
		node_put(z->fs, np);
	}
	unlock(z);
	if (ret)
		reply_err(req, ret);
	else if (cmd == ZLFS_IOC_GET_ENCRYPT)
		fuse_reply_ioctl(req, 0, &e, sizeof(e));
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

/* zlfs-ctl talks to the daemon through ioctls on the mount's root (zlfs_ioctl.h), and on a
 * directory for its encryption policy. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_size,
		     size_t out_size)
{
	struct zfuse *z = zf(req);
	struct zlfs_ioc_stats *st;
	int ret;

	(void)arg;
	(void)fi;
	(void)in_buf;
	(void)in_size;
	if (!(flags & FUSE_IOCTL_COMPAT) &&
	    (cmd == ZLFS_IOC_SET_ENCRYPT || cmd == ZLFS_IOC_GET_ENCRYPT)) {
		ioctl_encrypt(req, ino, cmd, out_size);
		return;
	}
	if (ino != FUSE_ROOT_ID || (flags & FUSE_IOCTL_COMPAT)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (cmd == ZLFS_IOC_SYNC) {
		lock(z);
		ret = z->fs->readonly ? 0 : files_sync(z->fs);
		unlock(z);
		if (ret)
			reply_err(req, ret);
		else
			fuse_reply_ioctl(req, 0, NULL, 0);
		return;
	}
	if (cmd != ZLFS_IOC_STATS || out_size < sizeof(*st)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	lock(z);
	ret = zlfs_stats_json(z->fs, st->json, sizeof(st->json));
	unlock(z);
	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_ioctl(req, 0, st, sizeof(*st));
	free(st);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct zfuse *z = userdata;

	conn->max_write = 1024 * 1024;
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	if (z->opts.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

static void *cp_thread(void *arg)
{
	struct zfuse *z = arg;
	struct timespec ts;

	pthread_mutex_lock(&z->fs->lock);
	while (!z->cp_stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += z->opts.cp_interval;
		pthread_cond_timedwait(&z->cp_cond, &z->fs->lock, &ts);
		if (!z->cp_stop && z->fs->dirty && !z->fs->readonly)
			files_sync(z->fs);
	}
	pthread_mutex_unlock(&z->fs->lock);
	return NULL;
}

static const struct fuse_lowlevel_ops zlfs_ll_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
	.ioctl = op_ioctl,
};

const struct fuse_lowlevel_ops *zlfs_fuse_ops(void) { return &zlfs_ll_ops; }

struct zfuse *zfuse_new(struct zlfs_fs *fs, const struct zlfs_ops_opts *o)
{
	struct zfuse *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->fs = fs;
	z->opts = *o;
	z->nbuckets = 65536;
	z->irefs = calloc(z->nbuckets, sizeof(*z->irefs));
	pthread_cond_init(&z->cp_cond, NULL);
	if (!z->irefs) {
		free(z);
		return NULL;
	}
	return z;
}

int zfuse_start(struct zfuse *z)
{
	if (!z->fs->readonly && z->opts.background_gc && bg_start(z->fs, &z->bg))
		zlog_warn("background GC could not start: collection runs in the foreground only");
	if (z->fs->readonly || !z->opts.cp_interval)
		return 0;
	return -pthread_create(&z->cp_thread, NULL, cp_thread, z);
}

/* Stop the timer, free what only the kernel still held, and unmount cleanly. */
int zfuse_destroy(struct zfuse *z)
{
	uint32_t b;
	int ret;

	bg_stop(z->bg);
	if (z->opts.verbose) {
		char *json = malloc(ZLFS_STATS_MAX);

		if (json && zlfs_stats_json(z->fs, json, ZLFS_STATS_MAX) > 0)
			zlog(ZLOG_ERR, "statistics at unmount:\n%s", json); /* shown at any level */
		free(json);
	}
	if (z->cp_thread) {
		pthread_mutex_lock(&z->fs->lock);
		z->cp_stop = 1;
		pthread_cond_signal(&z->cp_cond);
		pthread_mutex_unlock(&z->fs->lock);
		pthread_join(z->cp_thread, NULL);
	}
	for (uint32_t ino = orphan_next(z->fs, 0); ino && !z->fs->readonly;
	     ino = orphan_next(z->fs, ino)) {
		orphan_del(z->fs, ino);
		inode_free(z->fs, ino);
	}
	ret = files_unmount(z->fs);
	for (b = 0; b < z->nbuckets; b++)
		while (z->irefs[b]) {
			struct iref *r = z->irefs[b];

			z->irefs[b] = r->next;
			free(r);
		}
	free(z->irefs);
	pthread_cond_destroy(&z->cp_cond);
	free(z);
	return ret;
}
