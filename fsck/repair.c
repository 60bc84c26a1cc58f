/*
 * repair.c - the repairs fsck.zlfs applies: each finding's proposed fix (verify.h), made
 * through the file layer as the daemon would make it, within what the mode allows (-p the
 * safe ones, -y all), and a checkpoint that makes a round's repairs durable together.
 * May call: verify.h, files.h, core.h, log.h.
 */
#include "fsck.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void said(struct fsck_run *r, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	list_put(&r->repairs, "action", "repaired", msg);
	r->made++;
}

/* A repair of inode INO that cannot be made: said once per inode, however many rounds try. */
static void not_repaired(struct fsck_run *r, uint32_t ino, const char *action, const char *fmt,
			 ...) __attribute__((format(printf, 4, 5)));
static void not_repaired(struct fsck_run *r, uint32_t ino, const char *action, const char *fmt,
			 ...)
{
	char msg[384];
	va_list ap;

	if (r->told && r->told[ino])
		return;
	if (r->told)
		r->told[ino] = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	list_put(&r->repairs, "action", action, msg);
}

static int set_inode_field(struct zlfs_fs *fs, uint32_t ino, int parent, uint32_t val)
{
	struct node_page *np;
	int ret = inode_get(fs, ino, &np);

	if (ret)
		return ret;
	if (parent)
		inode_of(np)->parent_ino = le32_put(val);
	else
		inode_of(np)->nlink = le32_put(val);
	node_dirty(fs, np);
	node_put(fs, np);
	return 0;
}

/* Block ADDR lies below its zone's write pointer: the device still holds it. */
static int block_on_device(struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t zb = zlfs_zone_blocks(&fs->sb);
	struct zdev_zone z;

	if (zdev_report_one(fs->dev, addr / zb, &z))
		return 0;
	if (z.cond == ZDEV_COND_FULL)
		return 1;
	if (z.cond == ZDEV_COND_OFFLINE || z.cond == ZDEV_COND_RDONLY)
		return 0;
	return (uint64_t)addr * ZLFS_BLOCK_SIZE < z.wp;
}

/* A segment's count from its bitmap: after the bitmap repairs of this round. */
static void fix_seg_count(struct fsck_run *r, struct zlfs_fs *fs, uint32_t seg)
{
	uint32_t b, n = 0, mz = seg / fs->sb.segs_per_zone;
	struct seg_ent *se;

	zlock_lock(&fs->seg_lock);
	se = sit_ent_locked(fs, seg);
	for (b = 0; se && b < fs->sb.seg_blocks; b++)
		n += !!(se->bitmap[b / 8] & (1u << (b % 8)));
	if (!se || n == se->valid) {
		zlock_unlock(&fs->seg_lock);
		return;
	}
	fs->zone_valid[mz] = fs->zone_valid[mz] - se->valid + n;
	fs->zone_born[mz] = fs->zone_born[mz] - se->mtime * se->valid + se->mtime * n;
	fs->valid_blocks = fs->valid_blocks - se->valid + n;
	said(r, "segment %u: valid block count %u set to %u", seg, se->valid, n);
	se->valid = (uint16_t)n;
	if (!fs->sit_dirty[seg / ZLFS_SIT_PER_BLOCK]) {
		fs->sit_dirty[seg / ZLFS_SIT_PER_BLOCK] = 1;
		fs->dirty_meta++;
	}
	fs->dirty = 1;
	zlock_unlock(&fs->seg_lock);
}

/* A new /lost+found under ROOT: encrypted under an encrypted root, as any new directory. */
static int lost_found_create(struct zlfs_fs *fs, struct node_page *root, const char *name,
			     struct node_page **out)
{
	struct node_page *np;
	uint32_t ino;
	int ret = inode_new(fs, S_IFDIR | 0700, 0, 0, 0, ZLFS_ROOT_INO, &np);

	if (ret)
		return ret;
	ret = fcrypt_inherit(fs, root, np);
	if (!ret)
		ret = dir_add(fs, root, name, strlen(name), np->nid, DT_DIR);
	if (ret) {
		ino = np->nid;
		node_put(fs, np);
		inode_free(fs, ino);
		return ret;
	}
	inode_of(root)->nlink = le32_put(le32_get(inode_of(root)->nlink) + 1);
	inode_touch(fs, root, INODE_MTIME | INODE_CTIME);
	node_dirty(fs, root);
	*out = np;
	return 0;
}

/* /lost+found, created when missing. Under an encrypted root its name is ciphertext, and so
 * are the names it takes: without the key it can be neither found nor given a name, so
 * -ENOKEY, before anything is allocated. */
static int lost_found(struct zlfs_fs *fs, struct node_page **out)
{
	static const char name[] = "lost+found";
	struct node_page *root;
	uint32_t ino;
	uint8_t type;
	int ret = inode_get(fs, ZLFS_ROOT_INO, &root);

	if (ret)
		return ret;
	ret = fcrypt_need_key(fs, root);
	if (!ret)
		ret = dir_lookup(fs, root, name, sizeof(name) - 1, &ino, &type);
	if (!ret && type != DT_DIR)
		ret = -ENOTDIR;
	if (!ret)
		ret = inode_get(fs, ino, out);
	else if (ret == -ENOENT)
		ret = lost_found_create(fs, root, name, out);
	node_put(fs, root);
	if (!ret && (ret = fcrypt_need_key(fs, *out))) /* its owner marked it (zlfs-ctl encrypt) */
		node_put(fs, *out);
	return ret;
}

/* Name lost inode INO "#INO" in /lost+found. It must be encrypted to be named in an encrypted
 * /lost+found (verify.c checks that of every name). */
static int fix_lost(struct fsck_run *r, struct zlfs_fs *fs, uint32_t ino, uint8_t type)
{
	struct node_page *lf, *np;
	char name[32];
	int ret = lost_found(fs, &lf);

	if (ret == -ENOKEY) {
		if (!r->told || !r->told[ino])
			r->needs_key++;
		not_repaired(r, ino, "needs-key", "inode %u not moved to /lost+found, which is "
			     "encrypted: a name there needs the key (--keyfile FILE, --passphrase)",
			     ino);
		return ret;
	}
	if (ret)
		return ret;
	ret = inode_get(fs, ino, &np);
	if (ret) {
		node_put(fs, lf);
		return ret;
	}
	if (fcrypt_is_encrypted(lf) && !fcrypt_is_encrypted(np)) {
		not_repaired(r, ino, "not-repaired", "inode %u not moved to /lost+found: it is not "
			     "encrypted and /lost+found is", ino);
		ret = -EXDEV;
	}
	snprintf(name, sizeof(name), "#%u", ino);
	if (!ret)
		ret = dir_add(fs, lf, name, strlen(name), ino, type);
	if (!ret) {
		if (type == DT_DIR) {
			inode_of(lf)->nlink = le32_put(le32_get(inode_of(lf)->nlink) + 1);
			inode_of(np)->parent_ino = le32_put(lf->nid);
		} else {
			inode_of(np)->nlink = le32_put(1);
		}
		node_dirty(fs, np);
		inode_touch(fs, lf, INODE_MTIME | INODE_CTIME);
		node_dirty(fs, lf);
		said(r, "inode %u moved to /lost+found/%s", ino, name);
	}
	node_put(fs, np);
	node_put(fs, lf);
	return ret;
}

static int fix_dentry(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	struct node_page *dir;
	int ret = inode_get(fs, f->a, &dir);

	if (ret)
		return ret;
	ret = dir_remove(fs, dir, f->name, f->name_len);
	if (!ret) {
		struct nat_ent e;

		inode_touch(fs, dir, INODE_MTIME | INODE_CTIME);
		node_dirty(fs, dir);
		if (!nat_get(fs, f->b, &e) && e.blkaddr != ZLFS_ADDR_NULL && e.ino == f->b)
			said(r, "directory %u: entry \"%.*s\" of inode %u, no valid name, removed "
			     "(the inode goes to /lost+found unless named elsewhere)", f->a,
			     (int)f->name_len, f->name, f->b);
		else
			said(r, "directory %u: entry \"%.*s\" to the missing inode %u removed",
			     f->a, (int)f->name_len, f->name, f->b);
	}
	node_put(fs, dir);
	return ret;
}

/* Frees need a complete picture of what is referenced: one unreadable node and its blocks
 * would look leaked. */
static int fix_free(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	struct nat_ent e;
	int ret;

	if (f->kind == ZLFS_FIX_BLOCK_FREE) {
		if (!seg_is_valid(fs, f->a)) /* an earlier repair of the round settled it */
			return -EAGAIN;
		seg_mark(fs, f->a, 0);
		said(r, "block %u: valid in the SIT but unreferenced, freed", f->a);
		return 0;
	}
	ret = nat_get(fs, f->a, &e);
	if (ret)
		return ret;
	if (e.ino >= fs->sb.max_nid)
		return -EUCLEAN;
	node_free(fs, f->a);
	said(r, "node %u: in the NAT but unreachable, freed", f->a);
	return 0;
}

static int fix_field(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	int parent = f->kind == ZLFS_FIX_PARENT, ret = set_inode_field(fs, f->a, parent, f->b);

	if (!ret && parent)
		said(r, "directory %u: \"..\" set to %u", f->a, f->b);
	else if (!ret)
		said(r, "inode %u: link count set to %u", f->a, f->b);
	return ret;
}

/* Clear the pointer at slot F->b of node F->a (F->a itself is readable: the check walked
 * it). The node pointed to is left for a later round to free as unreachable. */
static int fix_pointer(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	struct node_page *np;
	uint32_t old;
	int ret = node_get(fs, f->a, &np);

	if (ret)
		return ret;
	if (f->b == ZLFS_FIX_SLOT_XATTR && le16_get(inode_of(np)->hdr.kind) == ZLFS_KIND_INODE) {
		old = le32_get(inode_of(np)->xattr_nid);
		inode_of(np)->xattr_nid = 0;
	} else if (le16_get(inode_of(np)->hdr.kind) == ZLFS_KIND_XATTR) {
		ret = xattr_node_cut(fs, np, f->b, &old); /* the chain's next, or an entry */
		if (ret) {
			node_put(fs, np);
			return ret;
		}
	} else if (f->b < (le16_get(inode_of(np)->hdr.kind) == ZLFS_KIND_INODE ?
				   ZLFS_INODE_ADDRS + ZLFS_INODE_NIDS : ZLFS_NODE_ADDRS)) {
		old = le32_get(*node_slot(np, f->b));
		*node_slot(np, f->b) = 0;
	} else {
		node_put(fs, np);
		return -EINVAL;
	}
	node_dirty(fs, np);
	node_put(fs, np);
	said(r, "node %u: the pointer to the damaged node %u dropped (what it held is lost)", f->a,
	     old);
	return 0;
}

/* Free the nid of damaged inode F->a: nothing reads it. Its names are dropped as names of no
 * inode, its nodes and blocks freed as unreachable, in the rounds that follow. */
static int fix_drop_inode(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	uint32_t owner;
	struct nat_ent e;
	int ret = nat_get(fs, f->a, &e);

	if (ret)
		return ret;
	if (e.blkaddr == ZLFS_ADDR_NULL || f->a == ZLFS_ROOT_INO)
		return -EAGAIN;
	orphan_del(fs, f->a);
	if (e.packed && !npack_slot_owner(fs, e.blkaddr, e.slot, &owner) && owner != f->a) {
		/* the slot is another inode's (or none's): only the entry naming it goes */
		node_free_stray(fs, f->a);
		said(r, "inode %u: its NAT entry named slot %u of inode pack %u, which holds %s %u; "
		     "entry dropped", f->a, e.slot, e.blkaddr, owner ? "inode" : "no inode", owner);
		return 0;
	}
	node_free(fs, f->a);
	said(r, "inode %u: damaged, dropped (its contents are lost)", f->a);
	return 0;
}

/* Drop block F->b of directory F->a: the names it held go; their inodes, named nowhere then,
 * go to /lost+found in a later round. */
static int fix_dir_block(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	struct node_page *dir;
	int ret = inode_get(fs, f->a, &dir);

	if (ret)
		return ret;
	ret = dir_drop_block(fs, dir, f->b);
	if (!ret) { /* the block never loaded: nothing of it is cached */
		inode_touch(fs, dir, INODE_MTIME | INODE_CTIME);
		node_dirty(fs, dir);
		said(r, "directory %u: damaged block %u dropped with the names it held", f->a, f->b);
	}
	node_put(fs, dir);
	return ret;
}

/* Inode F->a's count of blocks from its pointers as they are now (a repair of the same round
 * may have changed them since the check: a name put in /lost+found, say). The pointers are
 * the data; only the count changes. */
static int fix_block_count(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	struct node_page *np;
	uint64_t n, was;
	int ret = inode_get(fs, f->a, &np);

	if (ret)
		return ret;
	was = le64_get(inode_of(np)->blocks);
	ret = data_count_blocks(fs, np, &n);
	if (!ret && n == was)
		ret = -EAGAIN; /* settled already */
	if (!ret) {
		inode_of(np)->blocks = le64_put(n);
		node_dirty(fs, np);
		said(r, "inode %u: blocks set to %llu, what its pointers hold (it said %llu)", f->a,
		     (unsigned long long)n, (unsigned long long)was);
	}
	node_put(fs, np);
	return ret;
}

/* Data block F->a, whose summary entry names another owner than node F->b's slot pointing
 * at it: moved to a new block, whose entry is right, as GC moves it (a sealed summary is not
 * rewritten in place); the old entry then describes a dead block. The data is the same. */
static int fix_summary(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f)
{
	uint32_t was = f->a;
	int ret = gc_relocate(fs, f->a, f->b);

	if (!ret)
		said(r, "data block %u of node %u moved to a new block whose summary entry names "
		     "its owner (the old entry named another)", was, f->b);
	return ret;
}

/* The counts of nodes and inodes from the NAT as it is now, so that frees of the same round,
 * before or after, count down from the right numbers (node_free decrements them). */
static int fix_node_count(struct fsck_run *r, struct zlfs_fs *fs)
{
	uint64_t nodes = 0, inodes = 0;
	struct nat_ent e;
	uint32_t nid;
	int ret;

	for (nid = 1; nid < fs->sb.max_nid; nid++) {
		if ((ret = nat_get(fs, nid, &e)))
			return ret;
		nodes += e.blkaddr != ZLFS_ADDR_NULL;
		inodes += e.blkaddr != ZLFS_ADDR_NULL && e.ino == nid;
	}
	fs->valid_nodes = nodes;
	fs->valid_inodes = inodes;
	ATOMIC_SET(&fs->dirty, 1);
	said(r, "nodes and inodes recounted from the NAT: %llu and %llu",
	     (unsigned long long)nodes, (unsigned long long)inodes);
	return 0;
}

static int apply_fix(struct fsck_run *r, struct zlfs_fs *fs, const struct zlfs_fix *f,
		     int complete)
{
	switch (f->kind) {
	case ZLFS_FIX_NLINK:
	case ZLFS_FIX_PARENT:
		return fix_field(r, fs, f);
	case ZLFS_FIX_BLOCK_FREE:
	case ZLFS_FIX_NODE_FREE:
		return complete ? fix_free(r, fs, f) : -EAGAIN;
	case ZLFS_FIX_BLOCK_VALID:
		if (!block_on_device(fs, f->a) || seg_is_valid(fs, f->a))
			return -ENODATA; /* the device lost it: not something to mark valid */
		seg_mark(fs, f->a, 1);
		said(r, "block %u: referenced but free in the SIT, marked valid", f->a);
		return 0;
	case ZLFS_FIX_SEG_COUNT:
		fix_seg_count(r, fs, f->a);
		return 0;
	case ZLFS_FIX_ORPHAN_DROP:
		orphan_del(fs, f->a);
		said(r, "inode %u dropped from the orphan list", f->a);
		return 0;
	case ZLFS_FIX_PREALLOC_COUNT:
		if (!complete)
			return -EAGAIN;
		seg_prealloc_add(fs, (int64_t)f->a - (int64_t)seg_prealloc(fs));
		ATOMIC_SET(&fs->dirty, 1);
		said(r, "blocks reserved by fallocate recounted: %u", f->a);
		return 0;
	case ZLFS_FIX_NODE_COUNT:
		return fix_node_count(r, fs);
	case ZLFS_FIX_BLOCK_COUNT:
		return fix_block_count(r, fs, f);
	case ZLFS_FIX_SUMMARY_MOVE:
		return fix_summary(r, fs, f);
	case ZLFS_FIX_DENTRY_DROP:
		return fix_dentry(r, fs, f);
	case ZLFS_FIX_LOST_FOUND:
		return fix_lost(r, fs, f->a, (uint8_t)f->b);
	case ZLFS_FIX_PTR_CLEAR:
		return fix_pointer(r, fs, f);
	case ZLFS_FIX_NODE_DROP:
		return fix_drop_inode(r, fs, f);
	case ZLFS_FIX_DIRBLOCK_DROP:
		return fix_dir_block(r, fs, f);
	}
	return -EINVAL;
}

/* One round: check, apply what the mode allows (segment counts last, after the bitmaps), and
 * write a checkpoint. The number of repairs made, or a negative errno. */
int repair_round(struct fsck_run *r, struct zlfs_fs *fs)
{
	struct zlfs_check_report rep = {.want_fixes = 1};
	int made = 0, ret = 0, pass, damage = 0;
	size_t i;

	zlfs_check(fs, &rep);
	for (i = 0; i < rep.nfixes && r->a.mode == MODE_YES; i++)
		damage |= zlfs_fix_drops_damage(rep.fixes[i].kind);
	for (pass = 0; pass < 2 && ret >= 0; pass++)
		for (i = 0; i < rep.nfixes; i++) {
			const struct zlfs_fix *f = &rep.fixes[i];
			int err;

			if ((f->kind == ZLFS_FIX_SEG_COUNT) != pass ||
			    (!zlfs_fix_is_safe(f->kind) && r->a.mode != MODE_YES) ||
			    (damage && !zlfs_fix_drops_damage(f->kind)))
				continue;
			err = apply_fix(r, fs, f, !rep.incomplete);
			if (!err)
				made++;
			else if (err != -EAGAIN && err != -ENODATA && r->a.verbose)
				fprintf(stderr, "fsck.zlfs: a repair failed: %s\n", strerror(-err));
		}
	zlfs_check_report_free(&rep);
	if (made)
		ret = files_sync(fs); /* the repairs become durable together, or not at all */
	return ret < 0 ? ret : made;
}

