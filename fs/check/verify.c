/*
 * verify.c - the consistency check behind fsck.zlfs: does the newest checkpoint describe a
 * filesystem whose parts agree with each other and with the device?
 *
 * Owns: the cross-checks - NAT entries <-> node blocks, node trees and data pointers in range
 * and not shared, xattr nodes well formed, encryption flags against the superblock and against
 * the directories naming an inode (everything an encrypted directory names is encrypted), SIT
 * bitmaps and counts <-> blocks actually referenced, directory entries <-> inodes, link
 * counts, "..", reachability from the root, orphans, log positions <-> write pointers - and,
 * on request, the list of repairs that would settle what it found (verify.h). It only reads;
 * fsck.zlfs applies repairs.
 * May call: files.h (inodes, directories, data mapping), core.h, format.h, zdev.h, log.h.
 */
#include "verify.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { SEEN_NODE = 1, SEEN_REACHED = 2, SEEN_LOST = 3, SEEN_DAMAGED = 4 };

struct chk {
	struct zlfs_fs *fs;
	struct zlfs_check_report *rep;
	uint8_t *ref;        /* per device block: referenced by the tree walk */
	uint32_t *links;     /* per nid: names found in reachable directories */
	uint32_t *parent;    /* per nid: directory holding its (last seen) name */
	uint8_t *seen;       /* per nid: SEEN_* */
	uint8_t *named_lost; /* per nid: named by a directory that is itself unreachable */
	uint8_t *named_enc;  /* per nid: named by an encrypted directory */
	uint32_t *subdirs;   /* per directory: subdirectories found */
	uint32_t nblocks;
	uint64_t prealloc;   /* data pointers reserved by fallocate */
	uint64_t xv_bytes;   /* bytes in the value nodes of the xattr value being walked */
};

static void finding(struct chk *c, enum zlfs_finding_class cls, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void finding(struct chk *c, enum zlfs_finding_class cls, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cls == ZLFS_FIND_DEVICE)
		c->rep->device_errors++;
	else if (cls == ZLFS_FIND_MISMATCH)
		c->rep->mismatches++;
	else
		c->rep->errors++;
	if (c->rep->print)
		c->rep->print(c->rep->print_arg, cls, msg);
}

static void propose(struct chk *c, enum zlfs_fix_kind kind, uint32_t a, uint32_t b,
		    const char *name, size_t len)
{
	struct zlfs_check_report *r = c->rep;
	struct zlfs_fix *f;

	if (!r->want_fixes)
		return;
	if (r->nfixes == r->cap_fixes) {
		size_t cap = r->cap_fixes ? r->cap_fixes * 2 : 64;
		struct zlfs_fix *n = realloc(r->fixes, cap * sizeof(*n));

		if (!n) {
			r->incomplete = 1; /* a repair list with holes must not be trusted */
			return;
		}
		r->fixes = n;
		r->cap_fixes = cap;
	}
	f = &r->fixes[r->nfixes++];
	memset(f, 0, sizeof(*f));
	*f = (struct zlfs_fix){.kind = kind, .a = a, .b = b};
	if (name) {
		f->name_len = (uint16_t)(len > ZLFS_NAME_MAX ? ZLFS_NAME_MAX : len);
		memcpy(f->name, name, f->name_len);
	}
}

static void progress(struct chk *c, enum zlfs_check_phase ph, uint64_t done, uint64_t total)
{
	if (c->rep->progress)
		c->rep->progress(c->rep->progress_arg, ph, done, total);
}

static int in_main(const struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t zone = addr / zlfs_zone_blocks(&fs->sb);

	return zone >= fs->sb.main_zone_first && zone < fs->sb.nr_zones;
}

static int bit(const uint8_t *map, uint32_t i) { return !!(map[i / 8] & (1u << (i % 8))); }

/* NID's NAT entry; one that cannot be read makes the report incomplete and reads as free. */
static struct nat_ent chk_nat(struct chk *c, uint32_t nid)
{
	struct nat_ent e;

	if (nat_get(c->fs, nid, &e))
		c->rep->incomplete = 1;
	return e;
}

static int nat_block_unused(struct zlfs_fs *fs, uint32_t b)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nat_block_unused_locked(fs, b);
	zlock_unlock(&fs->nat_lock);
	return ret;
}

/* Segment SEG's SIT entry, as chk_nat. */
static struct seg_ent chk_sit(struct chk *c, uint32_t seg)
{
	struct seg_ent e = {0};
	const struct seg_ent *p;

	zlock_lock(&c->fs->seg_lock);
	p = sit_ent_locked(c->fs, seg);
	if (p)
		e = *p;
	zlock_unlock(&c->fs->seg_lock);
	if (!p)
		c->rep->incomplete = 1;
	return e;
}

/* Mark ADDR referenced by WHAT; a second reference or an address outside the main area is an
 * error. */
static void ref_block(struct chk *c, uint32_t addr, uint32_t ino, const char *what)
{
	if (!in_main(c->fs, addr)) {
		finding(c, ZLFS_FIND_ERROR, "inode %u: %s at block %u lies outside the main area",
			ino, what, addr);
		return;
	}
	if (bit(c->ref, addr)) {
		finding(c, ZLFS_FIND_ERROR, "inode %u: %s at block %u is referenced twice", ino,
			what, addr);
		return;
	}
	c->ref[addr / 8] |= (uint8_t)(1u << (addr % 8));
	c->rep->blocks++;
}

/* A data pointer: a block, or a reservation (counted, to match the checkpoint's total). */
static void ref_data(struct chk *c, uint32_t addr, uint32_t ino)
{
	if (addr != ZLFS_ADDR_PREALLOC)
		ref_block(c, addr, ino, "data block");
	else if (!(c->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_FALLOC))
		finding(c, ZLFS_FIND_ERROR, "inode %u holds a reserved block on a filesystem "
			"without the fallocate feature", ino);
	else
		c->prealloc++;
}

/* The checkpoint's count of reserved blocks against the pointers found. */
static void check_prealloc(struct chk *c)
{
	uint64_t counted = seg_prealloc(c->fs);

	if (c->prealloc == counted || c->rep->incomplete)
		return;
	finding(c, ZLFS_FIND_ERROR, "%llu blocks are reserved by fallocate, the filesystem counts "
		"%llu", (unsigned long long)c->prealloc, (unsigned long long)counted);
	propose(c, ZLFS_FIX_PREALLOC_COUNT, (uint32_t)c->prealloc, 0, NULL, 0);
}

/* Where a child node hangs: the pointer at SLOT of node PARENT, and the node offset the
 * child must have there (NODE_OFS_ANY for an xattr node). */
struct ptr {
	uint32_t parent, slot, ofs;
};

static int check_node(struct chk *c, uint32_t nid, uint32_t ino, int depth, struct ptr at);

/* The daemon refuses to follow the pointer AT: -y clears it (the node, unreachable then, is
 * freed in a later round), and nothing is freed in this one. */
static void bad_pointer(struct chk *c, struct ptr at)
{
	propose(c, ZLFS_FIX_PTR_CLEAR, at.parent, at.slot, NULL, 0);
	c->rep->incomplete = 1;
}

/* A child node NID under inode INO: NAT must agree, then walk it (DEPTH as check_node's). */
static void walk_child(struct chk *c, uint32_t nid, uint32_t ino, int depth, struct ptr at)
{
	struct nat_ent e = chk_nat(c, nid);

	if (nid >= c->fs->sb.max_nid || e.blkaddr == ZLFS_ADDR_NULL) {
		finding(c, ZLFS_FIND_ERROR, "inode %u points to node %u, which the NAT lists as free",
			ino, nid);
		bad_pointer(c, at);
		return;
	}
	if (e.ino != ino) {
		finding(c, ZLFS_FIND_ERROR, "node %u belongs to inode %u in the NAT but hangs under "
			"inode %u", nid, e.ino, ino);
		bad_pointer(c, at);
		return;
	}
	if (c->seen[nid]) {
		finding(c, ZLFS_FIND_ERROR, "node %u is reached twice", nid);
		return;
	}
	c->seen[nid] = SEEN_NODE;
	check_node(c, nid, ino, depth, at);
}

#define DEPTH_XATTR (-1)  /* check_node's depth of an xattr node */
#define DEPTH_XVALUE (-2) /* ... of an xattr value node */

/* What an xattr node (XATTR_NODES) links to: the value nodes of each external entry, which
 * must hold the entry's size together (damage in them drops the entry: -y clears the
 * pointer at the entry's offset), and the chain's next node. Its entries themselves passed
 * the node check when it was read. */
static void check_xattr_links(struct chk *c, struct node_page *np, uint32_t ino)
{
	const struct zlfs_xattr_node *x = np->buf;
	uint32_t used = le32_get(x->used), off, next = le32_get(x->next);

	for (off = 0; off + 4 <= used;
	     off += (4u + x->data[off + 1] + (x->data[off + 2] | x->data[off + 3] << 8) + 3) & ~3u) {
		const uint8_t *e = x->data + off;
		uint64_t errors = c->rep->errors;
		le32 raw[2];

		if (!(e[0] & ZLFS_XATTR_EXTERNAL))
			continue;
		memcpy(raw, e + 4 + e[1], sizeof(raw));
		c->xv_bytes = 0;
		walk_child(c, le32_get(raw[0]), ino, DEPTH_XVALUE, (struct ptr){np->nid, off, 0});
		if (c->rep->errors == errors && c->xv_bytes != le32_get(raw[1])) {
			finding(c, ZLFS_FIND_ERROR, "inode %u: the xattr value at byte %u of node %u "
				"is %u bytes, its value nodes hold %llu", ino, off, np->nid,
				le32_get(raw[1]), (unsigned long long)c->xv_bytes);
			bad_pointer(c, (struct ptr){np->nid, off, 0});
		}
	}
	if (next)
		walk_child(c, next, ino, DEPTH_XATTR,
			   (struct ptr){np->nid, ZLFS_FIX_SLOT_XATTR, le32_get(x->ofs) + 1});
}

/* A value node: its bytes count towards its value, and the chain goes on under the pointer
 * AT to the value's entry. */
static void check_xvalue(struct chk *c, struct node_page *np, uint32_t ino, struct ptr at)
{
	const struct zlfs_xattr_node *x = np->buf;

	c->xv_bytes += le32_get(x->used);
	if (le32_get(x->next))
		walk_child(c, le32_get(x->next), ino, DEPTH_XVALUE,
			   (struct ptr){at.parent, at.slot, at.ofs + 1});
}

static unsigned node_kind_expected(int depth)
{
	return depth == DEPTH_XVALUE  ? ZLFS_KIND_XVALUE
	       : depth == DEPTH_XATTR ? ZLFS_KIND_XATTR
	       : depth                ? ZLFS_KIND_INDNODE
				      : ZLFS_KIND_DNODE;
}

/* A node that cannot be used: why, in the finding, as the daemon logs it. */
static void node_damaged(struct chk *c, uint32_t nid, uint32_t ino, int err)
{
	char why[200];

	if (err == -EUCLEAN && node_explain(c->fs, nid, why, sizeof(why)))
		finding(c, ZLFS_FIND_ERROR, "inode %u: node %u is damaged: %s", ino, nid, why);
	else
		finding(c, ZLFS_FIND_ERROR, "inode %u: node %u unreadable (%s)", ino, nid,
			strerror(-err));
}

/* DEPTH: levels of nodes below NID (0: direct node), or DEPTH_XATTR, DEPTH_XVALUE. */
static int check_node(struct chk *c, uint32_t nid, uint32_t ino, int depth, struct ptr at)
{
	struct node_page *np;
	struct zlfs_node *n;
	unsigned kind;
	uint32_t i;
	int ret = node_get(c->fs, nid, &np);

	if (ret) {
		node_damaged(c, nid, ino, ret);
		if (ret == -EUCLEAN)
			bad_pointer(c, at);
		c->rep->incomplete = 1;
		return ret;
	}
	ref_block(c, chk_nat(c, nid).blkaddr, ino, "node");
	n = np->buf;
	kind = le16_get(n->hdr.kind);
	if (le32_get(n->hdr.ino) != ino || kind != node_kind_expected(depth) ||
	    (at.ofs != NODE_OFS_ANY && le32_get(n->ofs) != at.ofs)) {
		/* the daemon follows no such pointer: what lies below is nobody's */
		finding(c, ZLFS_FIND_ERROR, "inode %u points to node %u, but that is a %s of inode "
			"%u (offset %u), not its %s%s", ino, nid, zlfs_kind_name(kind),
			le32_get(n->hdr.ino), le32_get(n->ofs),
			zlfs_kind_name(node_kind_expected(depth)),
			at.ofs == NODE_OFS_ANY ? "" : " at that offset");
		bad_pointer(c, at);
	} else if (depth == DEPTH_XVALUE) {
		check_xvalue(c, np, ino, at);
	} else if (depth == DEPTH_XATTR) {
		if (c->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_XATTR_NODES)
			check_xattr_links(c, np, ino);
	} else {
		for (i = 0; i < ZLFS_NODE_ADDRS; i++) {
			uint32_t p = le32_get(n->ptr[i]);
			struct ptr sub = {nid, i, data_child_ofs(at.ofs, i)};

			if (!p)
				continue;
			if (depth)
				walk_child(c, p, ino, depth - 1, sub);
			else
				ref_data(c, p, ino);
		}
	}
	node_put(c->fs, np);
	return 0;
}

/* An encrypted inline symlink's target must decrypt with the key (readlink would fail with
 * EUCLEAN): checked when fsck has the key. */
static void check_symlink_target(struct chk *c, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);
	char *buf;

	if (!S_ISLNK(le32_get(in->mode)) || !(le32_get(in->flags) & ZLFS_IFLAG_INLINE) ||
	    !fcrypt_is_encrypted(np) || !c->fs->master || !(buf = malloc(ZLFS_INLINE_MAX + 1)))
		return;
	if (fcrypt_symlink_decrypt(c->fs, np, (const uint8_t *)in->addr,
				   le32_get(in->inline_size), buf) < 0) {
		finding(c, ZLFS_FIND_ERROR, "inode %u is damaged: its symlink target does not "
			"decrypt with the key", np->nid);
		if (np->nid != ZLFS_ROOT_INO)
			propose(c, ZLFS_FIX_NODE_DROP, np->nid, 0, NULL, 0);
	}
	free(buf);
}

static void check_inode_fields(struct chk *c, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t flags = le32_get(in->flags);

	check_symlink_target(c, np);
	if ((flags & ZLFS_IFLAG_ENCRYPT) && !(c->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_ENCRYPT))
		finding(c, ZLFS_FIND_ERROR, "inode %u is flagged encrypted on a filesystem without "
			"encryption", np->nid);
	if ((flags & ZLFS_IFLAG_INLINE) && le32_get(in->inline_size) > sizeof(in->addr))
		finding(c, ZLFS_FIND_ERROR, "inode %u: inline size %u exceeds %zu bytes", np->nid,
			le32_get(in->inline_size), sizeof(in->addr));
	if (S_ISDIR(le32_get(in->mode)) && le32_get(in->dir_depth) > ZLFS_DIR_DEPTH_MAX)
		finding(c, ZLFS_FIND_ERROR, "directory %u: hash depth %u exceeds %u", np->nid,
			le32_get(in->dir_depth), ZLFS_DIR_DEPTH_MAX);
}

static void check_inode_tree(struct chk *c, struct node_page *np)
{
	static const int depth[ZLFS_INODE_NIDS] = {0, 0, 1, 1, 2};
	struct zlfs_inode *in = inode_of(np);
	uint32_t i, xnid = le32_get(in->xattr_nid);

	check_inode_fields(c, np);
	ref_block(c, chk_nat(c, np->nid).blkaddr, np->nid, "inode");
	if (!(le32_get(in->flags) & ZLFS_IFLAG_INLINE)) {
		for (i = 0; i < ZLFS_INODE_ADDRS; i++)
			if (le32_get(in->addr[i]))
				ref_data(c, le32_get(in->addr[i]), np->nid);
		for (i = 0; i < ZLFS_INODE_NIDS; i++)
			if (le32_get(in->nid[i]))
				walk_child(c, le32_get(in->nid[i]), np->nid, depth[i],
					   (struct ptr){np->nid, ZLFS_INODE_ADDRS + i,
							data_child_ofs(0, i)});
	}
	if (xnid) /* with XATTR_NODES, the first of a chain, at place 0 */
		walk_child(c, xnid, np->nid, DEPTH_XATTR,
			   (struct ptr){np->nid, ZLFS_FIX_SLOT_XATTR,
					(c->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_XATTR_NODES)
						? 0 : NODE_OFS_ANY});
}

static int is_inode(struct chk *c, uint32_t ino)
{
	struct nat_ent e;

	if (!ino || ino >= c->fs->sb.max_nid)
		return 0;
	e = chk_nat(c, ino);
	return e.blkaddr != ZLFS_ADDR_NULL && e.ino == ino;
}

static int dir_readable(struct chk *c, struct node_page *np)
{
	if (le32_get(inode_of(np)->flags) & ZLFS_IFLAG_INLINE)
		finding(c, ZLFS_FIND_ERROR, "directory %u is flagged inline", np->nid);
	else if (le32_get(inode_of(np)->dir_depth) <= ZLFS_DIR_DEPTH_MAX)
		return 1;
	c->rep->incomplete = 1; /* depth: already reported with the inode's fields */
	return 0;
}

struct dirwalk {
	struct chk *c;
	uint32_t dir;
	int encrypted;       /* DIR is: every inode it names must be */
	uint32_t *queue;
	uint32_t *qlen;
};

static int is_dot(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
}

static int dir_entry(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		     uint64_t next)
{
	struct dirwalk *w = arg;
	struct chk *c = w->c;

	(void)type;
	(void)next;
	if (is_dot(name, len))
		return 0;
	c->rep->dentries++;
	if (!is_inode(c, ino)) {
		finding(c, ZLFS_FIND_ERROR, "directory %u: entry \"%.*s\" points to inode %u, which "
			"does not exist", w->dir, (int)len, name, ino);
		propose(c, ZLFS_FIX_DENTRY_DROP, w->dir, ino, name, len);
		return 0;
	}
	c->links[ino]++;
	c->parent[ino] = w->dir;
	c->named_enc[ino] |= (uint8_t)w->encrypted;
	if (c->seen[ino] != SEEN_REACHED) {
		if (c->seen[ino] == SEEN_NODE)
			finding(c, ZLFS_FIND_ERROR, "node %u is reached both as an inode and as a node",
				ino);
		c->seen[ino] = SEEN_REACHED;
		w->queue[(*w->qlen)++] = ino;
	}
	return 0;
}

/* A directory block the daemon refuses: -y drops it with its names (they go to lost+found
 * once the block is gone; until then they look lost, so nothing else is settled). */
static void dir_block_damaged(struct chk *c, uint32_t dir, uint32_t blk, const char *why)
{
	finding(c, ZLFS_FIND_ERROR, "directory %u block %u is damaged: %s", dir, blk, why);
	propose(c, ZLFS_FIX_DIRBLOCK_DROP, dir, blk, NULL, 0);
	c->rep->incomplete = 1;
}

static int dir_block_bad(void *arg, uint32_t blk, const char *why)
{
	struct dirwalk *w = arg;

	dir_block_damaged(w->c, w->dir, blk, why);
	return 0;
}

static void check_dir(struct chk *c, struct node_page *np, struct dirwalk *w)
{
	uint32_t ino = np->nid, parent = le32_get(inode_of(np)->parent_ino);
	int ret;

	if (ino != ZLFS_ROOT_INO)
		c->subdirs[c->parent[ino]]++;
	if (parent != c->parent[ino]) {
		finding(c, ZLFS_FIND_ERROR, "directory %u: \"..\" is %u but it is named in %u", ino,
			parent, c->parent[ino]);
		propose(c, ZLFS_FIX_PARENT, ino, c->parent[ino], NULL, 0);
	}
	if (!dir_readable(c, np))
		return;
	w->encrypted = fcrypt_is_encrypted(np);
	ret = dir_iterate_check(c->fs, np, dir_entry, dir_block_bad, w);
	if (ret) {
		finding(c, ZLFS_FIND_ERROR, "directory %u unreadable (%s)", ino, strerror(-ret));
		c->rep->incomplete = 1;
	}
}

/* INO's inode page, or 0 when it cannot be had: a damaged inode (other than the root) is
 * proposed for dropping (-y), and its names follow it as names of no inode. */
static int inode_usable(struct chk *c, uint32_t ino, struct node_page **np)
{
	char why[200];
	int ret = inode_get(c->fs, ino, np);

	if (!ret)
		return 1;
	c->rep->incomplete = 1;
	if (ret == -EUCLEAN) /* its block is the inode's, damaged or not: not a leak */
		ref_block(c, chk_nat(c, ino).blkaddr, ino, "inode");
	if (ret != -EUCLEAN || !node_explain(c->fs, ino, why, sizeof(why))) {
		finding(c, ZLFS_FIND_ERROR, "inode %u unreadable (%s)", ino, strerror(-ret));
		return 0;
	}
	finding(c, ZLFS_FIND_ERROR, "inode %u is damaged: %s", ino, why);
	if (ino != ZLFS_ROOT_INO)
		propose(c, ZLFS_FIX_NODE_DROP, ino, 0, NULL, 0);
	return 0;
}

/* Breadth-first from the root: every inode reached gets its tree and entries checked. */
static void check_tree(struct chk *c)
{
	uint32_t *queue = calloc(c->fs->sb.max_nid, sizeof(*queue)), qlen = 0, qi;
	struct node_page *np;

	if (!queue) {
		finding(c, ZLFS_FIND_ERROR, "out of memory");
		c->rep->incomplete = 1;
		return;
	}
	queue[qlen++] = ZLFS_ROOT_INO;
	c->seen[ZLFS_ROOT_INO] = SEEN_REACHED;
	c->parent[ZLFS_ROOT_INO] = ZLFS_ROOT_INO;
	for (qi = 0; qi < qlen; qi++) {
		uint32_t ino = queue[qi];
		struct dirwalk w = {.c = c, .dir = ino, .queue = queue, .qlen = &qlen};

		if (!(qi & 1023))
			progress(c, ZLFS_PHASE_TREE, qi, c->fs->valid_inodes);
		if (!inode_usable(c, ino, &np))
			continue;
		c->rep->inodes++;
		check_inode_tree(c, np);
		if (S_ISDIR(le32_get(inode_of(np)->mode)))
			check_dir(c, np, &w);
		node_put(c->fs, np);
	}
	free(queue);
}

static void check_links(struct chk *c)
{
	struct node_page *np;
	uint32_t ino;

	for (ino = 1; ino < c->fs->sb.max_nid; ino++) {
		uint32_t nlink, want;
		int isdir;

		if (c->seen[ino] != SEEN_REACHED || inode_get(c->fs, ino, &np))
			continue;
		nlink = le32_get(inode_of(np)->nlink);
		isdir = S_ISDIR(le32_get(inode_of(np)->mode));
		want = isdir ? 2 + c->subdirs[ino] : c->links[ino];
		if (ino == ZLFS_ROOT_INO && !isdir)
			finding(c, ZLFS_FIND_ERROR, "the root inode is not a directory");
		/* zlfs never makes one (inheritance, EXDEV): its name would be ciphertext and its
		 * contents plain */
		if (c->named_enc[ino] && !fcrypt_is_encrypted(np))
			finding(c, ZLFS_FIND_ERROR, "inode %u is named in an encrypted directory but "
				"is not encrypted", ino);
		if (isdir && ino != ZLFS_ROOT_INO && c->links[ino] != 1)
			finding(c, ZLFS_FIND_ERROR, "directory %u has %u names", ino, c->links[ino]);
		else if (nlink != want) {
			finding(c, ZLFS_FIND_ERROR, "inode %u has link count %u, expected %u", ino,
				nlink, want);
			propose(c, ZLFS_FIX_NLINK, ino, want, NULL, 0);
		}
		node_put(c->fs, np);
	}
}

static void check_orphans(struct chk *c)
{
	uint32_t ino;

	for (ino = orphan_next(c->fs, 0); ino; ino = orphan_next(c->fs, ino)) {
		struct node_page *np;

		if (c->seen[ino] || !is_inode(c, ino) || inode_get(c->fs, ino, &np)) {
			finding(c, ZLFS_FIND_ERROR, "orphan list names inode %u, which is not an "
				"unlinked inode", ino);
			propose(c, ZLFS_FIX_ORPHAN_DROP, ino, 0, NULL, 0);
			continue;
		}
		c->seen[ino] = SEEN_REACHED;
		c->rep->orphans++;
		check_inode_tree(c, np);
		node_put(c->fs, np);
	}
}

static int lost_entry(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		      uint64_t next)
{
	struct chk *c = arg;

	(void)type;
	(void)next;
	if (!is_dot(name, len) && ino < c->fs->sb.max_nid)
		c->named_lost[ino] = 1;
	return 0;
}

static int lost_block_bad(void *arg, uint32_t blk, const char *why)
{
	(void)arg, (void)blk, (void)why;
	return 0; /* the directory is unreachable: what it names is found lost anyway */
}

/* Inodes in the NAT that no directory reaches: their trees are walked (their blocks are
 * theirs, not leaked), and those no lost directory names either go to /lost+found. */
static void walk_lost_inodes(struct chk *c)
{
	struct node_page *np;
	uint32_t ino;

	for (ino = 2; ino < c->fs->sb.max_nid; ino++) {
		if (c->seen[ino] || !is_inode(c, ino))
			continue;
		if (!inode_usable(c, ino, &np)) {
			c->seen[ino] = SEEN_DAMAGED; /* reported: dropped, not moved to lost+found */
			continue;
		}
		c->seen[ino] = SEEN_LOST;
		check_inode_tree(c, np);
		if (S_ISDIR(le32_get(inode_of(np)->mode)) && dir_readable(c, np) &&
		    dir_iterate_check(c->fs, np, lost_entry, lost_block_bad, c))
			c->rep->incomplete = 1;
		node_put(c->fs, np);
	}
}

static uint8_t inode_dtype(struct chk *c, uint32_t ino)
{
	struct node_page *np;
	uint8_t t = DT_REG;

	if (!inode_get(c->fs, ino, &np)) {
		t = (uint8_t)IFTODT(le32_get(inode_of(np)->mode));
		node_put(c->fs, np);
	}
	return t;
}

/* The checkpoint's counts of nodes and inodes against the NAT's: a count a repair would go on
 * from (node_free decrements them) must start right, or the next checkpoint is refused. */
static void check_node_counts(struct chk *c, uint64_t nodes, uint64_t inodes)
{
	if (c->fs->valid_nodes == nodes && c->fs->valid_inodes == inodes)
		return;
	finding(c, ZLFS_FIND_ERROR, "the checkpoint counts %llu nodes and %llu inodes, the NAT "
		"holds %llu and %llu", (unsigned long long)c->fs->valid_nodes,
		(unsigned long long)c->fs->valid_inodes, (unsigned long long)nodes,
		(unsigned long long)inodes);
	propose(c, ZLFS_FIX_NODE_COUNT, (uint32_t)nodes, (uint32_t)inodes, NULL, 0);
}

static void check_unreachable(struct chk *c)
{
	uint64_t nodes = 0, inodes = 0;
	uint32_t nid;

	check_orphans(c);
	walk_lost_inodes(c);
	for (nid = 1; nid < c->fs->sb.max_nid; nid++) {
		struct nat_ent en;
		const struct nat_ent *e = &en;

		if (nid % ZLFS_NAT_PER_BLOCK == 0 && nat_block_unused(c->fs, nid / ZLFS_NAT_PER_BLOCK)) {
			nid += ZLFS_NAT_PER_BLOCK - 1; /* never written: every nid in it is free */
			continue;
		}
		en = chk_nat(c, nid);
		nodes += e->blkaddr != ZLFS_ADDR_NULL;
		inodes += e->blkaddr != ZLFS_ADDR_NULL && e->ino == nid;
		if (e->blkaddr == ZLFS_ADDR_NULL || c->seen[nid] == SEEN_NODE ||
		    c->seen[nid] == SEEN_REACHED || c->seen[nid] == SEEN_DAMAGED)
			continue;
		if (c->seen[nid] == SEEN_LOST && c->named_lost[nid]) {
			finding(c, ZLFS_FIND_ERROR, "inode %u is named only in an unreachable directory",
				nid);
		} else if (c->seen[nid] == SEEN_LOST) {
			finding(c, ZLFS_FIND_ERROR, "inode %u is in the NAT but no directory names it",
				nid);
			propose(c, ZLFS_FIX_LOST_FOUND, nid, inode_dtype(c, nid), NULL, 0);
		} else {
			finding(c, ZLFS_FIND_ERROR, "%s %u (inode %u) is in the NAT but unreachable",
				e->ino == nid ? "inode" : "node", nid, e->ino);
			propose(c, ZLFS_FIX_NODE_FREE, nid, 0, NULL, 0);
		}
	}
	check_node_counts(c, nodes, inodes);
}

/* Every referenced block valid in the SIT, every valid block referenced, counts right. */
static void check_segment(struct chk *c, uint32_t seg)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	struct seg_ent sit = chk_sit(c, seg);
	const struct seg_ent *se = &sit;
	uint32_t zone = s->main_zone_first + seg / s->segs_per_zone;
	uint32_t base = zone * zlfs_zone_blocks(s) + (seg % s->segs_per_zone) * s->seg_blocks;
	uint32_t b, n = 0;

	for (b = 0; b < s->seg_blocks; b++) {
		uint32_t addr = base + b;
		int valid = bit(se->bitmap, b), ref = bit(c->ref, addr);

		n += valid;
		if (valid == ref)
			continue;
		finding(c, ZLFS_FIND_ERROR, "block %u (segment %u) is %s in the SIT but %sreferenced",
			addr, seg, valid ? "valid" : "free", ref ? "" : "not ");
		propose(c, valid ? ZLFS_FIX_BLOCK_FREE : ZLFS_FIX_BLOCK_VALID, addr, seg, NULL, 0);
	}
	if (n != se->valid) {
		finding(c, ZLFS_FIND_ERROR, "segment %u counts %u valid blocks, its bitmap %u", seg,
			se->valid, n);
		propose(c, ZLFS_FIX_SEG_COUNT, seg, n, NULL, 0);
	}
}

static void check_sit(struct chk *c)
{
	uint32_t segs = zlfs_main_segments(&c->fs->sb), seg;

	for (seg = 0; seg < segs; seg++) {
		if (!(seg & 255))
			progress(c, ZLFS_PHASE_SIT, seg, segs);
		check_segment(c, seg);
	}
}

/* The last block of zone MZ (main-area index) that the checkpoint needs, plus one. */
static uint32_t zone_needed(struct chk *c, uint32_t mz)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t seg, t, last = 0, zone = s->main_zone_first + mz;

	for (seg = 0; seg < s->segs_per_zone; seg++) {
		struct seg_ent sit = chk_sit(c, mz * s->segs_per_zone + seg);
		const struct seg_ent *se = &sit;

		for (t = 0; t < s->seg_blocks; t++)
			if (bit(se->bitmap, t))
				last = seg * s->seg_blocks + t + 1;
	}
	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++)
		if (c->fs->cp.logs[t].zone == zone && c->fs->cp.logs[t].next_blk > last)
			last = c->fs->cp.logs[t].next_blk;
	return last;
}

/* Zones against the checkpoint: a write pointer behind what the checkpoint wrote, or a zone
 * offline/read-only under valid blocks, is the device's fault; a write pointer ahead is
 * normal after a crash and the mount recovers it. */
static void check_zone(struct chk *c, uint32_t mz)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t zone = s->main_zone_first + mz, last, wp, t;
	struct zdev_zone z;

	if (zdev_report_one(c->fs->dev, zone, &z)) {
		finding(c, ZLFS_FIND_DEVICE, "zone %u cannot be reported", zone);
		return;
	}
	last = zone_needed(c, mz);
	wp = z.cond == ZDEV_COND_FULL ? zlfs_zone_blocks(s)
				      : (uint32_t)((z.wp - z.start) / ZLFS_BLOCK_SIZE);
	if (last && (z.cond == ZDEV_COND_OFFLINE || z.cond == ZDEV_COND_RDONLY))
		finding(c, ZLFS_FIND_DEVICE, "zone %u is %s but holds blocks the checkpoint needs "
			"(up to block %u)", zone, zdev_cond_name(z.cond), last);
	else if (last > wp)
		finding(c, ZLFS_FIND_DEVICE, "zone %u: write pointer at block %u is behind the "
			"checkpoint's block %u (the device lost written data%s)", zone, wp, last,
			z.cond == ZDEV_COND_EMPTY ? ", or the zone was reset underneath it" : "");
	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		uint32_t cp_blk = c->fs->cp.logs[t].next_blk;

		if (c->fs->cp.logs[t].zone != zone || wp <= cp_blk || last > wp)
			continue;
		if (log_summary_lost(c->fs, zone, cp_blk, wp))
			finding(c, ZLFS_FIND_DEVICE, "zone %u: write pointer at block %u is past the "
				"segment the checkpoint left open at block %u, whose summary was never "
				"written (the device moved the write pointer itself)", zone, wp,
				cp_blk);
		else
			finding(c, ZLFS_FIND_MISMATCH, "zone %u: write pointer at block %u is ahead "
				"of the checkpoint's block %u (writes after the last checkpoint; the "
				"next mount or fsck -p rolls them forward)", zone, wp, cp_blk);
	}
}

/* The superblock, checkpoint and meta zones: a device that took one offline or made it
 * read-only keeps zlfs from writing its metadata (the daemon refuses a read-write mount). */
static void check_meta_zones(struct chk *c)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t z;
	struct zdev_zone r;

	for (z = s->sb_zone[0]; z < s->meta_zone_first + s->meta_zones; z++) {
		if (zdev_report_one(c->fs->dev, z, &r)) {
			finding(c, ZLFS_FIND_DEVICE, "zone %u cannot be reported", z);
			continue;
		}
		if (r.cond == ZDEV_COND_OFFLINE || r.cond == ZDEV_COND_RDONLY)
			finding(c, ZLFS_FIND_DEVICE, "%s zone %u is %s: zlfs cannot write its metadata "
				"there", z < s->cp_zone[0] ? "superblock" : z < s->meta_zone_first ?
				"checkpoint" : "metadata", z, zdev_cond_name(r.cond));
		else if (z == c->fs->meta_zone && r.cond != ZDEV_COND_FULL &&
			 (r.wp - r.start) / ZLFS_BLOCK_SIZE < c->fs->cp.meta_next_blk)
			finding(c, ZLFS_FIND_DEVICE, "metadata zone %u: write pointer at block %llu is "
				"behind the checkpoint's next metadata block %u (the device lost written "
				"data)", z, (unsigned long long)((r.wp - r.start) / ZLFS_BLOCK_SIZE),
				c->fs->cp.meta_next_blk);
	}
}

static void check_zones(struct chk *c)
{
	uint32_t mz;

	check_meta_zones(c);
	for (mz = 0; mz < c->fs->sb.main_zones; mz++) {
		if (!(mz & 63))
			progress(c, ZLFS_PHASE_ZONES, mz, c->fs->sb.main_zones);
		check_zone(c, mz);
	}
}

static void chk_free(struct chk *c)
{
	free(c->ref);
	free(c->links);
	free(c->parent);
	free(c->subdirs);
	free(c->seen);
	free(c->named_lost);
	free(c->named_enc);
}

int zlfs_check(struct zlfs_fs *fs, struct zlfs_check_report *rep)
{
	struct chk c = {.fs = fs, .rep = rep};
	uint32_t n = fs->sb.max_nid;

	c.nblocks = fs->sb.nr_zones * zlfs_zone_blocks(&fs->sb);
	c.ref = calloc(c.nblocks / 8 + 1, 1);
	c.links = calloc(n, sizeof(*c.links));
	c.parent = calloc(n, sizeof(*c.parent));
	c.subdirs = calloc(n, sizeof(*c.subdirs));
	c.seen = calloc(n, 1);
	c.named_lost = calloc(n, 1);
	c.named_enc = calloc(n, 1);
	if (c.ref && c.links && c.parent && c.subdirs && c.seen && c.named_lost && c.named_enc) {
		check_zones(&c);
		check_tree(&c);
		progress(&c, ZLFS_PHASE_LINKS, 0, 1);
		check_links(&c);
		progress(&c, ZLFS_PHASE_UNREACHABLE, 0, 1);
		check_unreachable(&c);
		check_prealloc(&c);
		check_sit(&c);
		progress(&c, ZLFS_PHASE_SIT, 1, 1);
	} else {
		finding(&c, ZLFS_FIND_ERROR, "out of memory");
		rep->incomplete = 1;
	}
	chk_free(&c);
	return rep->errors || rep->device_errors ? 1 : 0;
}

void zlfs_check_report_free(struct zlfs_check_report *rep)
{
	free(rep->fixes);
	rep->fixes = NULL;
	rep->nfixes = rep->cap_fixes = 0;
}
