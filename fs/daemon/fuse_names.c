/*
 * fuse_names.c - the FUSE operations on names: lookup and forget, making names (mknod,
 * mkdir, create, symlink, link), removing them (unlink, rmdir) and rename.
 *
 * Owns: the POSIX rules that live above single files: link counts, rename rules and the
 * loop check, setgid directories, name limits, times of parents, and what happens to an inode
 * whose last name goes (freed now, or an orphan until the kernel forgets it).
 * May call: fuse_int.h (the FUSE layer's helpers), files.h, core.h, log.h.
 *
 * Locks (core.h): a directory is locked as a parent (shared to look up, exclusive to change
 * its entries), then the inodes named in it as children; rename takes rename_lock first when
 * a name moves between directories, its two parents ancestor first, and its two children by
 * inode number. Every change holds cp_lock shared (op_enter) and is tried once more after a
 * foreground GC or a checkpoint when it ran out of room or of fresh nids (op_retry).
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

static struct ilock *lock_parent(struct zfuse *z, uint32_t dir, int excl, uint64_t key)
{
	return ilock_take(z->fs, dir, excl, LR_IPARENT, key);
}

static struct ilock *lock_child(struct zfuse *z, uint32_t ino)
{
	return ilock_take(z->fs, ino, 1, LR_ICHILD, ino);
}

/* ---- lookup, forget ------------------------------------------------------------------------ */

/* The kernel's export operations (open_by_handle_at, NFS) look an inode up by number as "."
 * in itself, whatever its type, and a directory's parent as ".." in it, once its own caches
 * have let the inode go. A freed inode answers ENOENT, which the kernel turns into ESTALE; a
 * reused number carries a new generation, which the kernel compares with the handle's. */
static int lookup_by_number(struct zfuse *z, fuse_ino_t ino, const char *name,
			    struct fuse_entry_param *e)
{
	struct node_page *np;
	uint32_t target = fino(ino);
	int ret = 0;

	if (name[1]) { /* ".." */
		ret = get_dir(z, ino, &np);
		if (ret)
			return ret;
		target = le32_get(__atomic_load_n(&inode_of(np)->parent_ino, __ATOMIC_RELAXED));
		node_put_unchanged(z->fs, np);
	}
	return fill_entry_ino(z, target, e);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zfuse *z = zf(req);
	struct fuse_entry_param e;
	struct node_page *dir;
	struct ilock *il;
	uint32_t ino;
	int ret = check_name(name);

	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		op_enter(z, 0);
		ret = lookup_by_number(z, parent, name, &e);
		op_leave(z, 0);
		if (ret)
			reply_err(req, ret);
		else
			fuse_reply_entry(req, &e);
		return;
	}
	op_enter(z, 0);
	il = ret ? NULL : lock_parent(z, fino(parent), 0, 0);
	if (!ret)
		ret = il ? get_dir(z, parent, &dir) : -ENOMEM;
	if (!ret) {
		ret = dir_lookup(z->fs, dir, name, strlen(name), &ino, NULL);
		node_put(z->fs, dir);
	}
	if (!ret)
		ret = fill_entry_ino(z, ino, &e);
	ilock_drop(z->fs, il);
	op_leave(z, 0);
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
	iref_forget(zf(req), fino(ino), nlookup);
	fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		iref_forget(zf(req), fino(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

/* ---- making names ------------------------------------------------------------------------ */

/* What a new name is made of. */
struct mk {
	fuse_req_t req;
	fuse_ino_t parent;
	const char *name;
	mode_t mode;
	dev_t rdev;
	const char *target;      /* a symlink's */
	struct fuse_entry_param e;
};

/* Under DIR's lock: may NAME be made in it, and with which gid and mode? */
static int make_check(struct zfuse *z, struct node_page *dir, struct mk *m, uint32_t *gid)
{
	struct zlfs_inode *din = inode_of(dir);
	uint32_t ino;
	int ret = fcrypt_need_key(z->fs, dir); /* a locked directory takes no new names */

	if (!ret)
		ret = inode_frozen(dir);
	if (!ret)
		ret = dir_lookup(z->fs, dir, m->name, strlen(m->name), &ino, NULL);
	if (ret != -ENOENT)
		return ret ? ret : -EEXIST;
	if (S_ISDIR(m->mode) && le32_get(din->nlink) >= LINK_MAX_ZLFS)
		return -EMLINK;
	*gid = fuse_req_ctx(m->req)->gid;
	if (le32_get(din->mode) & S_ISGID) { /* setgid directory: group and bit are inherited */
		*gid = le32_get(din->gid);
		if (S_ISDIR(m->mode))
			m->mode |= S_ISGID;
	}
	return 0;
}

/* Under DIR's lock (exclusive): the new inode, named, with its entry for the kernel. */
static int make_in(struct zfuse *z, struct node_page *dir, struct mk *m)
{
	struct node_page *np;
	struct ilock *il;
	uint32_t gid, ino;
	int ret = make_check(z, dir, m, &gid);

	if (!ret)
		ret = inode_new(z->fs, m->mode, fuse_req_ctx(m->req)->uid, gid, (uint32_t)m->rdev,
				dir->nid, &np);
	if (ret)
		return ret;
	ino = np->nid;
	il = lock_child(z, ino); /* nobody can reach it yet: uncontended, for the rule's sake */
	ret = il ? fcrypt_inherit(z->fs, dir, np) : -ENOMEM;
	if (!ret && z->posix_acl) /* the directory's default ACL, or the umask */
		ret = acl_inherit(z->fs, dir, np, fuse_req_ctx(m->req)->umask);
	if (!ret)
		dclu_start(z->fs, dir, np, m->name);
	if (!ret && !z->opts.noinline_data)
		inline_start(z->fs, np);
	if (!ret && m->target)
		ret = symlink_store(z->fs, np, m->target);
	if (!ret)
		ret = dir_add(z->fs, dir, m->name, strlen(m->name), ino, (uint8_t)IFTODT(m->mode));
	if (!ret) {
		if (S_ISDIR(m->mode))
			inode_of(dir)->nlink = le32_put(le32_get(inode_of(dir)->nlink) + 1);
		inode_touch(z->fs, dir, INODE_MTIME | INODE_CTIME);
		fill_entry(z, np, &m->e);
	}
	node_put(z->fs, np);
	if (ret)
		inode_free(z->fs, ino);
	ilock_drop(z->fs, il);
	return ret;
}

static int make_once(struct zfuse *z, struct mk *m)
{
	struct node_page *dir;
	struct ilock *il;
	int ret;

	op_enter(z, 1);
	il = lock_parent(z, fino(m->parent), 1, 0);
	ret = il ? writable(z) : -ENOMEM;
	if (!ret)
		ret = get_dir(z, m->parent, &dir);
	if (!ret) {
		ret = make_in(z, dir, m);
		node_put(z->fs, dir);
	}
	ilock_drop(z->fs, il);
	op_leave(z, 1);
	return ret;
}

/* Make the name and reply: with an open file (FI) for create. */
static void make_node(struct mk *m, struct fuse_file_info *fi)
{
	struct zfuse *z = zf(m->req);
	int ret = check_name(m->name);

	if (!ret && m->target && strlen(m->target) >= PATH_MAX)
		ret = -ENAMETOOLONG;
	if (!ret) {
		ret = make_once(z, m);
		if (op_retry(z, ret))
			ret = make_once(z, m);
	}
	if (ret)
		reply_err(m->req, ret == -EAGAIN ? -ENOSPC : ret);
	else if (fi)
		fuse_reply_create(m->req, &m->e, fi);
	else
		fuse_reply_entry(m->req, &m->e);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct mk m = {.req = req, .parent = parent, .name = name, .mode = mode, .rdev = rdev};

	make_node(&m, NULL);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct mk m = {.req = req, .parent = parent, .name = name,
		       .mode = S_IFDIR | (mode & 07777)};

	make_node(&m, NULL);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi)
{
	struct mk m = {.req = req, .parent = parent, .name = name,
		       .mode = S_IFREG | (mode & 07777)};

	if (zf(req)->opts.direct_io)
		fi->direct_io = 1;
	fi->noflush = 1; /* as op_open */
	make_node(&m, fi);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct mk m = {.req = req, .parent = parent, .name = name, .mode = S_IFLNK | 0777,
		       .target = link};

	make_node(&m, NULL);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct zfuse *z = zf(req);
	struct node_page *np;
	char buf[PATH_MAX + 1];
	struct ilock *il;
	int ret;

	op_enter(z, 0);
	il = ilock_take(z->fs, fino(ino), 0, LR_ICHILD, fino(ino));
	ret = il ? inode_get(z->fs, fino(ino), &np) : -ENOMEM;
	if (!ret) {
		ret = symlink_load(z->fs, np, buf);
		node_put(z->fs, np);
	}
	ilock_drop(z->fs, il);
	op_leave(z, 0);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_readlink(req, buf);
}

/* Under both locks: add NEWNAME in DIR for NP. */
static int link_in(struct zfuse *z, struct node_page *dir, struct node_page *np,
		   const char *newname)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t other;
	int ret;

	if (S_ISDIR(le32_get(in->mode)) || inode_pinned(np) || inode_frozen(dir))
		return -EPERM;
	if (le32_get(in->nlink) >= LINK_MAX_ZLFS)
		return -EMLINK;
	/* names keep their directory's encryption: no plaintext name for an encrypted file and
	 * no unencrypted file under an encrypted directory (as fscrypt) */
	ret = fcrypt_same_policy(dir, np) ? fcrypt_need_key(z->fs, dir) : -EXDEV;
	if (!ret)
		ret = dir_lookup(z->fs, dir, newname, strlen(newname), &other, NULL);
	ret = ret == -ENOENT ? 0 : ret ? ret : -EEXIST;
	if (!ret)
		ret = dir_add(z->fs, dir, newname, strlen(newname), np->nid,
			      (uint8_t)IFTODT(le32_get(in->mode)));
	if (!ret) {
		in->nlink = le32_put(le32_get(in->nlink) + 1);
		inode_touch(z->fs, np, INODE_CTIME);
		inode_touch(z->fs, dir, INODE_MTIME | INODE_CTIME);
	}
	return ret;
}

static int link_once(struct zfuse *z, uint32_t ino, fuse_ino_t newparent, const char *newname,
		     struct fuse_entry_param *e)
{
	struct node_page *np = NULL, *dir = NULL;
	struct ilock *pl, *cl = NULL;
	int ret;

	op_enter(z, 1);
	pl = lock_parent(z, fino(newparent), 1, 0);
	ret = pl ? writable(z) : -ENOMEM;
	if (!ret && !(cl = lock_child(z, ino)))
		ret = -ENOMEM;
	if (!ret)
		ret = get_dir(z, newparent, &dir);
	if (!ret)
		ret = inode_get(z->fs, ino, &np);
	if (!ret)
		ret = link_in(z, dir, np, newname);
	if (!ret)
		fill_entry(z, np, e);
	node_put(z->fs, np);
	node_put(z->fs, dir);
	ilock_drop(z->fs, cl);
	ilock_drop(z->fs, pl);
	op_leave(z, 1);
	return ret;
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct zfuse *z = zf(req);
	struct fuse_entry_param e;
	struct stat st;
	uint32_t gen;
	int ret = check_name(newname);

	/* A directory is never linked (the kernel refuses it first): knowing it before any
	 * lock keeps a directory from being locked as the child of its own descendant. */
	if (!ret)
		ret = inode_stat(z->fs, fino(ino), &st, &gen);
	if (!ret && S_ISDIR(st.st_mode))
		ret = -EPERM;
	if (!ret) {
		ret = link_once(z, fino(ino), newparent, newname, &e);
		if (op_retry(z, ret))
			ret = link_once(z, fino(ino), newparent, newname, &e);
	}
	if (ret)
		reply_err(req, ret == -EAGAIN ? -ENOSPC : ret);
	else
		fuse_reply_entry(req, &e);
}

/* ---- removing names ---------------------------------------------------------------------- */

/* Drop one link of *VICTIM (named in DIR, already removed from it; both locked). When that
 * was its last, the page is put and *VICTIM cleared: the inode is freed, or an orphan. */
static int drop_link(struct zfuse *z, struct node_page *dir, struct node_page **victim)
{
	struct zlfs_inode *in = inode_of(*victim);
	int isdir = S_ISDIR(le32_get(in->mode));
	uint32_t ino = (*victim)->nid;

	if (isdir) {
		in->nlink = 0;
		inode_of(dir)->nlink = le32_put(le32_get(inode_of(dir)->nlink) - 1);
	} else {
		in->nlink = le32_put(le32_get(in->nlink) - 1);
	}
	inode_touch(z->fs, *victim, INODE_CTIME);
	if (in->nlink)
		return 0;
	node_put(z->fs, *victim); /* it may be freed now */
	*victim = NULL;
	return inode_unlinked(z, ino);
}

/* Under DIR's lock (exclusive) and the victim's. */
static int remove_in(struct zfuse *z, struct node_page *dir, const char *name,
		     struct node_page **np, int want_dir)
{
	int isdir = S_ISDIR(le32_get(inode_of(*np)->mode));
	int ret = 0;

	if (want_dir && !isdir)
		ret = -ENOTDIR;
	else if (!want_dir && isdir)
		ret = -EISDIR;
	else if (want_dir && le32_get(inode_of(*np)->dir_entries))
		ret = -ENOTEMPTY;
	if (!ret)
		ret = inode_pinned(dir);
	if (!ret)
		ret = inode_pinned(*np);
	if (!ret)
		ret = dir_remove(z->fs, dir, name, strlen(name));
	if (ret)
		return ret;
	inode_touch(z->fs, dir, INODE_MTIME | INODE_CTIME);
	return drop_link(z, dir, np);
}

static int remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int want_dir)
{
	struct zfuse *z = zf(req);
	struct node_page *dir, *np;
	struct ilock *pl, *cl = NULL;
	uint32_t ino;
	int ret;

	op_enter(z, 1);
	pl = lock_parent(z, fino(parent), 1, 0);
	ret = pl ? writable(z) : -ENOMEM;
	if (!ret)
		ret = get_dir(z, parent, &dir);
	if (ret)
		goto out;
	ret = dir_lookup(z->fs, dir, name, strlen(name), &ino, NULL);
	if (!ret && !(cl = lock_child(z, ino)))
		ret = -ENOMEM;
	if (!ret)
		ret = inode_get(z->fs, ino, &np);
	if (!ret) {
		ret = remove_in(z, dir, name, &np, want_dir);
		node_put(z->fs, np); /* NULL when it was the last link */
	}
	node_put(z->fs, dir);
out:
	ilock_drop(z->fs, cl);
	ilock_drop(z->fs, pl);
	op_leave(z, 1);
	return ret;
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, remove_name(req, parent, name, 0));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, remove_name(req, parent, name, 1));
}

/* ---- rename ----------------------------------------------------------------------------------
 * A name moving between directories takes rename_lock, under which the tree's shape (the
 * parent links of directories) holds still: the walks up from a directory below read parent
 * links of directories that are not locked, which only such renames change. */

/* Is directory ANC an ancestor of (or) directory DIR? */
static int is_ancestor(struct zfuse *z, uint32_t anc, uint32_t dir)
{
	uint32_t cur = dir, hops = 0;
	struct node_page *np;

	while (cur != ZLFS_ROOT_INO && hops++ < 100000) {
		if (cur == anc)
			return 1;
		if (inode_get(z->fs, cur, &np))
			return 0;
		cur = le32_get(__atomic_load_n(&inode_of(np)->parent_ino, __ATOMIC_RELAXED));
		node_put_unchanged(z->fs, np);
	}
	return cur == anc;
}

struct rn {
	fuse_req_t req;
	fuse_ino_t parent, newparent;
	const char *oname, *nname;
	unsigned flags;
	uint32_t src_ino, dst_ino;    /* dst_ino 0: no target */
	uint8_t src_type, dst_type;
	struct ilock *locks[4];       /* parents, then children, in the order taken */
	struct node_page *odir, *ndir, *src, *dst;
	struct node_page *wh;         /* RENAME_WHITEOUT: the whiteout left at the old name */
};

static void rn_put(struct zfuse *z, struct rn *r)
{
	node_put(z->fs, r->odir);
	node_put(z->fs, r->ndir);
	node_put(z->fs, r->src);
	node_put(z->fs, r->dst);
	for (int i = 3; i >= 0; i--)
		ilock_drop(z->fs, r->locks[i]);
}

static int rn_isdir(struct node_page *np) { return np && S_ISDIR(le32_get(inode_of(np)->mode)); }

static void rn_move_dir(struct zfuse *z, struct node_page *d, struct node_page *from,
			struct node_page *to)
{
	if (!rn_isdir(d) || from == to)
		return;
	__atomic_store_n(&inode_of(d)->parent_ino, le32_put(to->nid), __ATOMIC_RELAXED);
	inode_of(from)->nlink = le32_put(le32_get(inode_of(from)->nlink) - 1);
	inode_of(to)->nlink = le32_put(le32_get(inode_of(to)->nlink) + 1);
	node_dirty(z->fs, d);
	dmark_taint(z->fs, d->nid); /* its ".." moved: no dentry mark says so */
}

static int rn_exchange(struct zfuse *z, struct rn *r)
{
	uint8_t st = (uint8_t)IFTODT(le32_get(inode_of(r->src)->mode));
	uint8_t dt = (uint8_t)IFTODT(le32_get(inode_of(r->dst)->mode));
	int ret = dir_retarget(z->fs, r->odir, r->oname, strlen(r->oname), r->dst->nid, dt);

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
	if (!ret && r->wh)
		ret = dir_retarget(z->fs, r->odir, r->oname, strlen(r->oname), r->wh->nid, DT_CHR);
	else if (!ret)
		ret = dir_remove(z->fs, r->odir, r->oname, strlen(r->oname));
	if (ret)
		return ret;
	rn_move_dir(z, r->src, r->odir, r->ndir);
	inode_touch(z->fs, r->src, INODE_CTIME);
	return r->dst ? drop_link(z, r->ndir, &r->dst) : 0;
}

/* Lock the two parents: the ancestor first, else by inode number. */
static int rn_lock_parents(struct zfuse *z, struct rn *r)
{
	uint32_t a = fino(r->parent), b = fino(r->newparent), first = a, second = b;

	if (a == b) {
		r->locks[0] = lock_parent(z, a, 1, 0);
		return r->locks[0] ? 0 : -ENOMEM;
	}
	if (is_ancestor(z, b, a) || (!is_ancestor(z, a, b) && b < a)) {
		first = b;
		second = a;
	}
	r->locks[0] = lock_parent(z, first, 1, 1);
	r->locks[1] = r->locks[0] ? lock_parent(z, second, 1, 2) : NULL;
	return r->locks[1] ? 0 : -ENOMEM;
}

/* With the parents locked: the names, the loop checks, then the children locked and got. */
static int rn_load(struct zfuse *z, struct rn *r)
{
	uint32_t lo, hi;
	int ret = get_dir(z, r->parent, &r->odir), cross = r->parent != r->newparent;

	if (!ret)
		ret = get_dir(z, r->newparent, &r->ndir);
	if (!ret && !fcrypt_same_policy(r->odir, r->ndir)) /* see link_in */
		ret = -EXDEV;
	if (!ret)
		ret = dir_lookup(z->fs, r->odir, r->oname, strlen(r->oname), &r->src_ino,
				 &r->src_type);
	if (ret)
		return ret;
	ret = dir_lookup(z->fs, r->ndir, r->nname, strlen(r->nname), &r->dst_ino, &r->dst_type);
	if (ret && ret != -ENOENT)
		return ret;
	/* A directory never moves below itself, nor replaces one above its old place (the
	 * kernel refuses both first); checked before the children are locked, so no inode is
	 * ever locked as the child of its own descendant. */
	if (cross && r->src_type == DT_DIR && is_ancestor(z, r->src_ino, fino(r->newparent)))
		return -EINVAL;
	if (cross && r->dst_ino && r->dst_type == DT_DIR &&
	    is_ancestor(z, r->dst_ino, fino(r->parent)))
		return r->flags & RENAME_EXCHANGE ? -EINVAL : -ENOTEMPTY;
	lo = r->dst_ino && r->dst_ino < r->src_ino ? r->dst_ino : r->src_ino;
	hi = r->dst_ino && r->dst_ino != r->src_ino ? (lo == r->src_ino ? r->dst_ino : r->src_ino)
						     : 0;
	r->locks[2] = lock_child(z, lo);
	r->locks[3] = hi ? lock_child(z, hi) : NULL;
	if (!r->locks[2] || (hi && !r->locks[3]))
		return -ENOMEM;
	ret = inode_get(z->fs, r->src_ino, &r->src);
	if (!ret && r->dst_ino)
		ret = inode_get(z->fs, r->dst_ino, &r->dst);
	return ret;
}

/* RENAME_WHITEOUT (overlayfs's upper layer): the old name is left to a character device 0:0,
 * made before anything moves, so that nothing has moved if it cannot be made. Nobody can
 * reach it before the rename names it, so it needs no lock of its own. */
static int rn_whiteout_new(struct zfuse *z, struct rn *r)
{
	const struct fuse_ctx *c = fuse_req_ctx(r->req);
	int ret = inode_new(z->fs, S_IFCHR, c->uid, c->gid, 0, r->odir->nid, &r->wh);

	if (!ret)
		ret = fcrypt_inherit(z->fs, r->odir, r->wh);
	return ret;
}

/* The whiteout of a rename that failed is freed; one that was named is the name's now. */
static void rn_whiteout_put(struct zfuse *z, struct rn *r, int failed)
{
	uint32_t ino = r->wh ? r->wh->nid : 0;

	node_put(z->fs, r->wh);
	r->wh = NULL;
	if (ino && failed)
		inode_free(z->fs, ino);
}

/* chattr +i and +a: a name leaves ODIR and SRC moves; DST loses its name, or NDIR gains one. */
static int rn_allowed(struct rn *r)
{
	int ret = inode_pinned(r->odir);

	if (!ret)
		ret = inode_pinned(r->src);
	if (!ret)
		ret = r->dst ? inode_pinned(r->ndir) : inode_frozen(r->ndir);
	if (!ret && r->dst)
		ret = inode_pinned(r->dst);
	return ret;
}

static int rename_once(struct zfuse *z, struct rn *r)
{
	int ret, cross = r->parent != r->newparent;

	if (cross)
		zlock_lock(&z->fs->rename_lock);
	op_enter(z, 1);
	ret = writable(z);
	if (!ret)
		ret = rn_lock_parents(z, r);
	if (!ret)
		ret = rn_load(z, r);
	if (ret || r->dst == r->src) /* same inode: POSIX says do nothing */
		goto out;
	ret = rn_allowed(r);
	if (ret)
		goto out;
	if (r->flags & RENAME_EXCHANGE)
		ret = r->dst ? rn_exchange(z, r) : -ENOENT;
	else if ((r->flags & RENAME_NOREPLACE) && r->dst)
		ret = -EEXIST;
	else {
		if (r->flags & RENAME_WHITEOUT)
			ret = rn_whiteout_new(z, r);
		if (!ret)
			ret = rn_replace(z, r);
		rn_whiteout_put(z, r, ret);
	}
	if (!ret) {
		inode_touch(z->fs, r->odir, INODE_MTIME | INODE_CTIME);
		inode_touch(z->fs, r->ndir, INODE_MTIME | INODE_CTIME);
	}
out:
	rn_put(z, r);
	if (cross)
		zlock_unlock(&z->fs->rename_lock);
	op_leave(z, 1);
	return ret;
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	       const char *newname, unsigned int flags)
{
	struct zfuse *z = zf(req);
	struct rn r = {.req = req, .parent = parent, .newparent = newparent, .oname = name,
		       .nname = newname, .flags = flags};
	int ret = check_name(newname);

	if (!ret && ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) ||
		     ((flags & RENAME_EXCHANGE) && (flags & ~RENAME_EXCHANGE))))
		ret = -EINVAL;
	if (!ret) {
		ret = rename_once(z, &r);
		if (op_retry(z, ret)) {
			memset(r.locks, 0, sizeof(r.locks));
			r.odir = r.ndir = r.src = r.dst = NULL;
			ret = rename_once(z, &r);
		}
	}
	reply_err(req, ret == -EAGAIN ? -ENOSPC : ret);
}
