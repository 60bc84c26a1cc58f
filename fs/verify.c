/*
 * verify.c - the consistency check behind fsck.zlfs: does the newest checkpoint describe a
 * filesystem whose parts agree with each other and with the device?
 *
 * Owns: the cross-checks - NAT entries <-> node blocks, node trees and data pointers in range
 * and not shared, SIT bitmaps and counts <-> blocks actually referenced, directory entries <->
 * inodes, link counts, "..", reachability from the root, orphans, log positions <-> write
 * pointers. It reads only; repairs belong to fsck.
 * May call: files.h (inodes, directories, data mapping), core.h, format.h, zdev.h, log.h.
 */
#include "verify.h"
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chk {
	struct zlfs_fs *fs;
	struct zlfs_check_report *rep;
	uint8_t *ref;        /* per device block: referenced by the tree walk */
	uint32_t *links;     /* per nid: names found in directories */
	uint32_t *parent;    /* per nid: directory holding its (last seen) name */
	uint8_t *seen;       /* per nid: 1 reached from an inode, 2 an inode reached from root */
	uint32_t *subdirs;   /* per directory: subdirectories found */
	uint32_t nblocks;
};

static void finding(struct chk *c, enum zlfs_finding_class cls, const char *fmt, ...)
{
	char msg[256];
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

static int in_main(const struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t zone = addr / zlfs_zone_blocks(&fs->sb);

	return zone >= fs->sb.main_zone_first && zone < fs->sb.nr_zones;
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
	if (c->ref[addr / 8] & (1u << (addr % 8))) {
		finding(c, ZLFS_FIND_ERROR, "inode %u: %s at block %u is referenced twice", ino,
			what, addr);
		return;
	}
	c->ref[addr / 8] |= (uint8_t)(1u << (addr % 8));
	c->rep->blocks++;
}

static int check_node(struct chk *c, uint32_t nid, uint32_t ino, int depth);

/* A child node NID under inode INO: NAT must agree, then walk it. */
static void walk_child(struct chk *c, uint32_t nid, uint32_t ino, int depth)
{
	if (nid >= c->fs->sb.max_nid || c->fs->nat[nid].blkaddr == ZLFS_ADDR_NULL) {
		finding(c, ZLFS_FIND_ERROR, "inode %u points to node %u, which the NAT lists as free",
			ino, nid);
		return;
	}
	if (c->fs->nat[nid].ino != ino)
		finding(c, ZLFS_FIND_ERROR, "node %u belongs to inode %u in the NAT but hangs under "
			"inode %u", nid, c->fs->nat[nid].ino, ino);
	if (c->seen[nid]) {
		finding(c, ZLFS_FIND_ERROR, "node %u is reached twice", nid);
		return;
	}
	c->seen[nid] = 1;
	check_node(c, nid, ino, depth);
}

/* DEPTH: levels of nodes below NID (0: direct node). */
static int check_node(struct chk *c, uint32_t nid, uint32_t ino, int depth)
{
	struct node_page *np;
	struct zlfs_node *n;
	uint32_t i;
	int ret = node_get(c->fs, nid, &np);

	if (ret) {
		finding(c, ZLFS_FIND_ERROR, "inode %u: node %u unreadable (%s)", ino, nid,
			strerror(-ret));
		return ret;
	}
	ref_block(c, c->fs->nat[nid].blkaddr, ino, "node");
	n = np->buf;
	if (le32_get(n->hdr.ino) != ino)
		finding(c, ZLFS_FIND_ERROR, "node %u names inode %u, expected %u", nid,
			le32_get(n->hdr.ino), ino);
	if (le16_get(n->hdr.kind) != (depth ? ZLFS_KIND_INDNODE : ZLFS_KIND_DNODE))
		finding(c, ZLFS_FIND_ERROR, "node %u is a %s where a %s node belongs", nid,
			zlfs_kind_name(le16_get(n->hdr.kind)), depth ? "indirect" : "direct");
	for (i = 0; i < ZLFS_NODE_ADDRS; i++) {
		uint32_t p = le32_get(n->ptr[i]);

		if (!p)
			continue;
		if (depth)
			walk_child(c, p, ino, depth - 1);
		else
			ref_block(c, p, ino, "data block");
	}
	node_put(c->fs, np);
	return 0;
}

static void check_inode_tree(struct chk *c, struct node_page *np)
{
	static const int depth[ZLFS_INODE_NIDS] = {0, 0, 1, 1, 2};
	struct zlfs_inode *in = inode_of(np);
	uint32_t i, xnid = le32_get(in->xattr_nid);

	ref_block(c, c->fs->nat[np->nid].blkaddr, np->nid, "inode");
	if (!(le32_get(in->flags) & ZLFS_IFLAG_INLINE)) {
		for (i = 0; i < ZLFS_INODE_ADDRS; i++)
			if (le32_get(in->addr[i]))
				ref_block(c, le32_get(in->addr[i]), np->nid, "data block");
		for (i = 0; i < ZLFS_INODE_NIDS; i++)
			if (le32_get(in->nid[i]))
				walk_child(c, le32_get(in->nid[i]), np->nid, depth[i]);
	}
	if (xnid) {
		walk_child(c, xnid, np->nid, -1);
	}
}

struct dirwalk {
	struct chk *c;
	uint32_t dir;
	uint32_t *queue;
	uint32_t *qlen;
};

static int dir_entry(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		     uint64_t next)
{
	struct dirwalk *w = arg;
	struct chk *c = w->c;

	(void)type;
	(void)next;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	c->rep->dentries++;
	if (ino >= c->fs->sb.max_nid || c->fs->nat[ino].blkaddr == ZLFS_ADDR_NULL ||
	    c->fs->nat[ino].ino != ino) {
		finding(c, ZLFS_FIND_ERROR, "directory %u: entry \"%.*s\" points to inode %u, which "
			"does not exist", w->dir, (int)len, name, ino);
		return 0;
	}
	c->links[ino]++;
	c->parent[ino] = w->dir;
	if (c->seen[ino] != 2) {
		c->seen[ino] = 2;
		w->queue[(*w->qlen)++] = ino;
	}
	return 0;
}

/* Breadth-first from the root: every inode reached gets its tree and entries checked. */
static void check_tree(struct chk *c)
{
	uint32_t *queue = calloc(c->fs->sb.max_nid, sizeof(*queue)), qlen = 0, qi;
	struct node_page *np;

	if (!queue) {
		finding(c, ZLFS_FIND_ERROR, "out of memory");
		return;
	}
	queue[qlen++] = ZLFS_ROOT_INO;
	c->seen[ZLFS_ROOT_INO] = 2;
	c->parent[ZLFS_ROOT_INO] = ZLFS_ROOT_INO;
	for (qi = 0; qi < qlen; qi++) {
		uint32_t ino = queue[qi];
		struct dirwalk w = {c, ino, queue, &qlen};

		if (inode_get(c->fs, ino, &np)) {
			finding(c, ZLFS_FIND_ERROR, "inode %u unreadable", ino);
			continue;
		}
		c->rep->inodes++;
		check_inode_tree(c, np);
		if (S_ISDIR(le32_get(inode_of(np)->mode))) {
			if (ino != ZLFS_ROOT_INO)
				c->subdirs[c->parent[ino]]++;
			if (le32_get(inode_of(np)->parent_ino) != c->parent[ino])
				finding(c, ZLFS_FIND_ERROR, "directory %u: \"..\" is %u but it is named "
					"in %u", ino, le32_get(inode_of(np)->parent_ino), c->parent[ino]);
			if (dir_iterate(c->fs, np, 0, dir_entry, &w))
				finding(c, ZLFS_FIND_ERROR, "directory %u unreadable", ino);
		}
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

		if (c->seen[ino] != 2 || inode_get(c->fs, ino, &np))
			continue;
		nlink = le32_get(inode_of(np)->nlink);
		isdir = S_ISDIR(le32_get(inode_of(np)->mode));
		want = isdir ? 2 + c->subdirs[ino] : c->links[ino];
		if (ino == ZLFS_ROOT_INO && !isdir)
			finding(c, ZLFS_FIND_ERROR, "the root inode is not a directory");
		if (isdir && ino != ZLFS_ROOT_INO && c->links[ino] != 1)
			finding(c, ZLFS_FIND_ERROR, "directory %u has %u names", ino, c->links[ino]);
		if (nlink != want)
			finding(c, ZLFS_FIND_ERROR, "inode %u has link count %u, expected %u", ino,
				nlink, want);
		node_put(c->fs, np);
	}
}

/* Inodes in the NAT that no directory reaches: orphans if listed, else lost. */
static void check_unreachable(struct chk *c)
{
	uint32_t nid, ino;

	for (ino = orphan_next(c->fs, 0); ino; ino = orphan_next(c->fs, ino)) {
		struct node_page *np;

		if (c->seen[ino] || inode_get(c->fs, ino, &np)) {
			finding(c, ZLFS_FIND_ERROR, "orphan list names inode %u, which is not an "
				"unlinked inode", ino);
			continue;
		}
		c->seen[ino] = 2;
		c->rep->orphans++;
		check_inode_tree(c, np);
		node_put(c->fs, np);
	}
	for (nid = 1; nid < c->fs->sb.max_nid; nid++) {
		const struct nat_ent *e = &c->fs->nat[nid];

		if (e->blkaddr == ZLFS_ADDR_NULL || c->seen[nid])
			continue;
		finding(c, ZLFS_FIND_ERROR, "%s %u (inode %u) is in the NAT but unreachable",
			e->ino == nid ? "inode" : "node", nid, e->ino);
	}
}

/* Every referenced block valid in the SIT, every valid block referenced, counts right. */
static void check_sit(struct chk *c)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t segs = zlfs_main_segments(s), seg, b, zb = zlfs_zone_blocks(s);

	for (seg = 0; seg < segs; seg++) {
		const struct seg_ent *se = &c->fs->sit[seg];
		uint32_t zone = s->main_zone_first + seg / s->segs_per_zone;
		uint32_t base = zone * zb + (seg % s->segs_per_zone) * s->seg_blocks, n = 0;

		for (b = 0; b < s->seg_blocks; b++) {
			uint32_t addr = base + b;
			int valid = !!(se->bitmap[b / 8] & (1u << (b % 8)));
			int ref = !!(c->ref[addr / 8] & (1u << (addr % 8)));

			n += valid;
			if (valid != ref)
				finding(c, ZLFS_FIND_ERROR, "block %u (segment %u) is %s in the SIT but "
					"%sreferenced", addr, seg, valid ? "valid" : "free",
					ref ? "" : "not ");
		}
		if (n != se->valid)
			finding(c, ZLFS_FIND_ERROR, "segment %u counts %u valid blocks, its bitmap %u",
				seg, se->valid, n);
	}
}

/* Zones against the checkpoint: a write pointer behind what the checkpoint wrote, or a zone
 * offline/read-only/empty under valid blocks, is the device's fault; a write pointer ahead
 * is normal after a crash and the mount recovers it. */
static void check_zones(struct chk *c)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t zb = zlfs_zone_blocks(s), mz, t, seg;
	struct zdev_zone z;

	for (mz = 0; mz < s->main_zones; mz++) {
		uint32_t zone = s->main_zone_first + mz, last = 0, wp;

		if (zdev_report_one(c->fs->dev, zone, &z))
			continue;
		for (seg = 0; seg < s->segs_per_zone; seg++) {
			const struct seg_ent *se = &c->fs->sit[mz * s->segs_per_zone + seg];

			for (t = 0; t < s->seg_blocks; t++)
				if (se->bitmap[t / 8] & (1u << (t % 8)))
					last = seg * s->seg_blocks + t + 1;
		}
		for (t = 0; t < ZLFS_NR_LOG_TYPES; t++)
			if (c->fs->cp.logs[t].zone == zone && c->fs->cp.logs[t].next_blk > last)
				last = c->fs->cp.logs[t].next_blk;
		wp = z.cond == ZDEV_COND_FULL ? zb : (uint32_t)((z.wp - z.start) / ZLFS_BLOCK_SIZE);
		if (last && (z.cond == ZDEV_COND_OFFLINE || z.cond == ZDEV_COND_RDONLY))
			finding(c, ZLFS_FIND_DEVICE, "zone %u is %s but holds blocks the checkpoint "
				"needs (up to block %u)", zone, zdev_cond_name(z.cond), last);
		else if (last > wp)
			finding(c, ZLFS_FIND_DEVICE, "zone %u: write pointer at block %u is behind the "
				"checkpoint's block %u (the device lost written data)", zone, wp, last);
		for (t = 0; t < ZLFS_NR_LOG_TYPES; t++)
			if (c->fs->cp.logs[t].zone == zone && wp > c->fs->cp.logs[t].next_blk &&
			    last <= wp)
				finding(c, ZLFS_FIND_MISMATCH, "zone %u: write pointer at block %u is "
					"ahead of the checkpoint's block %u (writes after the last "
					"checkpoint; the next mount recovers)", zone, wp,
					c->fs->cp.logs[t].next_blk);
	}
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
	if (c.ref && c.links && c.parent && c.subdirs && c.seen) {
		check_zones(&c);
		check_tree(&c);
		check_links(&c);
		check_unreachable(&c);
		check_sit(&c);
	} else {
		finding(&c, ZLFS_FIND_ERROR, "out of memory");
	}
	free(c.ref);
	free(c.links);
	free(c.parent);
	free(c.subdirs);
	free(c.seen);
	return rep->errors || rep->device_errors ? 1 : 0;
}
