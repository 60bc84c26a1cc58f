/*
 * verify.c - the consistency check behind fsck.zlfs: does the newest checkpoint describe a
 * filesystem whose parts agree with each other and with the device? This file holds what is
 * checked of each inode, node and directory, and of what the walk leaves (links, the
 * unreachable); verify_run.c puts the phases in order (docs/fsck.md names the files).
 *
 * Owns: the cross-checks - NAT entries <-> node blocks, node trees and data pointers in range
 * and not shared, xattr nodes well formed, encryption flags against the superblock and against
 * the directories naming an inode (everything an encrypted directory names is encrypted), SIT
 * bitmaps and counts <-> blocks actually referenced, directory entries <-> inodes, link
 * counts, "..", reachability from the root, orphans, log positions <-> write pointers - and,
 * on request, the list of repairs that would settle what it found (verify.h). It only reads;
 * fsck.zlfs applies repairs.
 * May call: verify_int.h (verify_report.c), files.h (inodes, directories, data mapping),
 * core.h, format.h, zdev.h, log.h.
 */
#include "verify_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int nat_block_unused(struct zlfs_fs *fs, uint32_t b)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nat_block_unused_locked(fs, b);
	zlock_unlock(&fs->nat_lock);
	return ret;
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

/* The current copy of node NID, of inode INO, referenced as WHAT: its block, or the inode pack
 * holding it, which all its live slots reference once together. */
static void ref_node(struct chk *c, uint32_t nid, uint32_t ino, const char *what)
{
	struct nat_ent e = chk_nat(c, nid);

	if (e.packed && in_main(c->fs, e.blkaddr) && bit(c->packref, e.blkaddr))
		return;
	ref_block(c, e.blkaddr, ino, what);
	if (e.packed && in_main(c->fs, e.blkaddr))
		c->packref[e.blkaddr / 8] |= (uint8_t)(1u << (e.blkaddr % 8));
}

/* A data pointer: a block, or a reservation (counted, to match the checkpoint's total); a
 * compressed cluster's marker is no block (check_clusters sees to its place). */
static void ref_data(struct chk *c, uint32_t addr, uint32_t ino, uint32_t nid, uint32_t ofs)
{
	uint64_t errors = c->rep->errors;

	if (addr == ZLFS_ADDR_COMPRESSED)
		return;
	c->fblocks++;
	if (addr != ZLFS_ADDR_PREALLOC) {
		ref_block(c, addr, ino, "data block");
		if (c->rep->errors == errors) /* in the main area, referenced once */
			check_summary(c, addr, ino, nid, (uint16_t)ofs);
	} else if (!(c->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_FALLOC))
		finding(c, ZLFS_FIND_ERROR, "inode %u holds a reserved block on a filesystem "
			"without the fallocate feature", ino);
	else
		c->prealloc++;
}

/* The N data slots at SLOTS of the file being walked, mapping file blocks from FIRST: in a
 * compressed file, whole clusters in the part a node maps and nothing past it, and each
 * cluster stored compressed decompresses to what its header's hash says (where fsck can
 * read it: a plain file, or with the key); in any other file, no marker. */
static void check_clusters(struct chk *c, const le32 *slots, uint32_t n, uint64_t first,
			   const char *what, uint32_t nid)
{
	uint32_t ino = c->file->nid, log = c->clog, m = zlfs_cluster_slots(n, log), i;
	uint32_t addr[1u << ZLFS_CLUSTER_LOG_MAX];
	char why[200];
	int ret;

	if (!log) {
		for (i = node_next_ptr(slots, 0, n); i < n; i = node_next_ptr(slots, i + 1, n))
			if (le32_get(slots[i]) == ZLFS_ADDR_COMPRESSED)
				finding(c, ZLFS_FIND_ERROR, "inode %u: %s %u slot %u holds a compressed "
					"cluster's marker, but the file is not compressed", ino, what,
					nid, i);
		return;
	}
	for (i = m; i < n; i++)
		if (le32_get(slots[i]))
			finding(c, ZLFS_FIND_ERROR, "inode %u: %s %u slot %u lies past the whole "
				"clusters a compressed file maps there, but is not null", ino, what,
				nid, i);
	if (zlfs_cluster_slots_check(&c->fs->sb, log, slots, m, what, why, sizeof(why))) {
		finding(c, ZLFS_FIND_ERROR, "inode %u, %s %u: %s", ino, what, nid, why);
		return;
	}
	if (fcrypt_is_encrypted(c->file) && !c->fs->master)
		return; /* ciphertext: the hash binds the plaintext */
	for (i = 0; i < m; i += 1u << log) {
		if (le32_get(slots[i]) != ZLFS_ADDR_COMPRESSED)
			continue;
		for (uint32_t j = 0; j < 1u << log; j++)
			addr[j] = le32_get(slots[i + j]);
		ret = data_cluster_check(c->fs, c->file, first + i, addr);
		if (ret == -ENOMEM) { /* fsck's own trouble, not the image's */
			zlog_err("inode %u: no memory to check compressed cluster %llu", ino,
				 (unsigned long long)((first + i) >> log));
			c->rep->incomplete = 1;
		} else if (ret) {
			finding(c, ZLFS_FIND_ERROR, "inode %u: compressed cluster %llu (%s %u, slot %u) "
				"does not decompress to what its header says", ino,
				(unsigned long long)((first + i) >> log), what, nid, i);
		}
	}
}

/* The checkpoint's count of reserved blocks against the pointers found. */
void check_prealloc(struct chk *c)
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
	ref_node(c, nid, ino, "node");
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
		for (i = node_next_ptr(n->ptr, 0, ZLFS_NODE_ADDRS); i < ZLFS_NODE_ADDRS;
		     i = node_next_ptr(n->ptr, i + 1, ZLFS_NODE_ADDRS)) {
			uint32_t p = le32_get(n->ptr[i]);
			struct ptr sub = {nid, i, data_child_ofs(at.ofs, i)};

			if (depth)
				walk_child(c, p, ino, depth - 1, sub);
			else
				ref_data(c, p, ino, nid, i);
		}
		if (!depth)
			check_clusters(c, n->ptr, ZLFS_NODE_ADDRS, data_dnode_base(at.ofs, c->clog),
				       "node", nid);
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

/* The inode's count of blocks against the data pointers its tree holds (the daemon frees by
 * the pointers, but stat reports the count, and a file's changes of shape go by it), once its
 * whole tree was read without other damage (ERRORS, the count of findings before): a damaged
 * or shared node is reported by itself, and its repair changes the count. The repair is
 * safe: no pointer changes. */
static void check_block_count(struct chk *c, struct node_page *np, uint64_t errors)
{
	uint64_t stored = le64_get(inode_of(np)->blocks);

	if (c->rep->incomplete || c->rep->errors != errors || stored == c->fblocks)
		return;
	finding(c, ZLFS_FIND_ERROR, "inode %u: blocks = %llu, but its pointers hold %llu",
		np->nid, (unsigned long long)stored, (unsigned long long)c->fblocks);
	propose(c, ZLFS_FIX_BLOCK_COUNT, np->nid, (uint32_t)c->fblocks, NULL, 0);
}

static void check_inode_tree(struct chk *c, struct node_page *np)
{
	static const int depth[ZLFS_INODE_NIDS] = {0, 0, 1, 1, 2};
	struct zlfs_inode *in = inode_of(np);
	uint32_t i, xnid = le32_get(in->xattr_nid);
	int incomplete = c->rep->incomplete;
	uint64_t errors;

	check_inode_fields(c, np);
	ref_node(c, np->nid, np->nid, "inode");
	c->file = np;
	c->clog = data_cluster_log(np);
	c->fblocks = 0;
	c->rep->incomplete = 0;
	errors = c->rep->errors;
	if (!zlfs_iflags_area_inline(le32_get(in->flags))) {
		for (i = node_next_ptr(in->addr, 0, ZLFS_INODE_ADDRS); i < ZLFS_INODE_ADDRS;
		     i = node_next_ptr(in->addr, i + 1, ZLFS_INODE_ADDRS))
			ref_data(c, le32_get(in->addr[i]), np->nid, np->nid, i);
		check_clusters(c, in->addr, ZLFS_INODE_ADDRS, 0, "inode", np->nid);
		for (i = 0; i < ZLFS_INODE_NIDS; i++)
			if (le32_get(in->nid[i]))
				walk_child(c, le32_get(in->nid[i]), np->nid, depth[i],
					   (struct ptr){np->nid, ZLFS_INODE_ADDRS + i,
							data_child_ofs(0, i)});
	}
	check_block_count(c, np, errors);
	c->rep->incomplete |= incomplete;
	if (xnid) /* with XATTR_NODES, the first of a chain, at place 0 */
		walk_child(c, xnid, np->nid, DEPTH_XATTR,
			   (struct ptr){np->nid, ZLFS_FIX_SLOT_XATTR,
					(c->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_XATTR_NODES)
						? 0 : NODE_OFS_ANY});
}

/* The block of inode INO, or 0 when INO is not an inode in the NAT. */
static uint32_t inode_addr(struct chk *c, uint32_t ino)
{
	struct nat_ent e;

	if (!ino || ino >= c->fs->sb.max_nid)
		return 0;
	e = chk_nat(c, ino);
	return e.ino == ino ? e.blkaddr : ZLFS_ADDR_NULL;
}

static int is_inode(struct chk *c, uint32_t ino) { return inode_addr(c, ino) != ZLFS_ADDR_NULL; }

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
	struct todo *todo;
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
	uint32_t addr;

	(void)next;
	if (is_dot(name, len))
		return 0;
	c->rep->dentries++;
	if (type & DIR_TYPE_NOKEY) {
		/* -y takes the name away (it reads as nothing anyone gave): the inode, named
		 * nowhere else, then goes to /lost+found with its data */
		type &= (uint8_t)~DIR_TYPE_NOKEY;
		finding(c, ZLFS_FIND_ERROR, "directory %u: the name of inode %u does not decrypt "
			"to a valid name with the key (its nonce or the name is damaged); shown as "
			"\"%.*s\"", w->dir, ino, (int)len, name);
		propose(c, ZLFS_FIX_DENTRY_DROP, w->dir, ino, name, len);
	}
	addr = inode_addr(c, ino);
	if (addr == ZLFS_ADDR_NULL) {
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
		walk_reached(w->todo, ino, addr, type);
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

void check_dir(struct chk *c, struct node_page *np, struct todo *t)
{
	uint32_t ino = np->nid, parent = le32_get(inode_of(np)->parent_ino);
	struct dirwalk dw = {.c = c, .dir = ino, .todo = t}, *w = &dw;
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
int inode_usable(struct chk *c, uint32_t ino, struct node_page **np)
{
	char why[200];
	int ret = inode_get(c->fs, ino, np);

	if (!ret)
		return 1;
	c->rep->incomplete = 1;
	if (ret == -EUCLEAN) /* its block is the inode's, damaged or not: not a leak */
		ref_node(c, ino, ino, "inode");
	if (ret != -EUCLEAN || !node_explain(c->fs, ino, why, sizeof(why))) {
		finding(c, ZLFS_FIND_ERROR, "inode %u unreadable (%s)", ino, strerror(-ret));
		return 0;
	}
	finding(c, ZLFS_FIND_ERROR, "inode %u is damaged: %s", ino, why);
	if (ino != ZLFS_ROOT_INO)
		propose(c, ZLFS_FIX_NODE_DROP, ino, 0, NULL, 0);
	return 0;
}

/* An inode read: what check_links needs of it, and its tree. */
void inode_seen(struct chk *c, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);

	if (!(c->rep->inodes++ & 1023))
		progress(c, ZLFS_PHASE_TREE, c->rep->inodes, c->fs->valid_inodes);
	c->nlink[np->nid] = le32_get(in->nlink);
	c->iflags[np->nid] = INODE_READ | (S_ISDIR(le32_get(in->mode)) ? INODE_DIR : 0) |
			     (fcrypt_is_encrypted(np) ? INODE_ENC : 0);
	check_inode_tree(c, np);
}

/* Link counts against the names found, from what the walk kept of each inode. */
void check_links(struct chk *c)
{
	uint32_t ino;

	for (ino = 1; ino < c->fs->sb.max_nid; ino++) {
		uint32_t nlink = c->nlink[ino], want;
		int isdir = !!(c->iflags[ino] & INODE_DIR);

		if (c->seen[ino] != SEEN_REACHED || !(c->iflags[ino] & INODE_READ))
			continue;
		want = isdir ? 2 + c->subdirs[ino] : c->links[ino];
		if (ino == ZLFS_ROOT_INO && !isdir)
			finding(c, ZLFS_FIND_ERROR, "the root inode is not a directory");
		/* zlfs never makes one (inheritance, EXDEV): its name would be ciphertext and its
		 * contents plain */
		if (c->named_enc[ino] && !(c->iflags[ino] & INODE_ENC))
			finding(c, ZLFS_FIND_ERROR, "inode %u is named in an encrypted directory but "
				"is not encrypted", ino);
		if (isdir && ino != ZLFS_ROOT_INO && c->links[ino] != 1)
			finding(c, ZLFS_FIND_ERROR, "directory %u has %u names", ino, c->links[ino]);
		else if (nlink != want) {
			finding(c, ZLFS_FIND_ERROR, "inode %u has link count %u, expected %u", ino,
				nlink, want);
			propose(c, ZLFS_FIX_NLINK, ino, want, NULL, 0);
		}
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
		if (!(ino & 1023))
			node_shrink(c->fs);
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

void check_unreachable(struct chk *c)
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
