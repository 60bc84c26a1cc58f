/*
 * dump_inode.c - zlfs-dump's view of one inode: every field of it, its NAT entry, its node
 * tree (each node's nid, kind, offset, parent and block) and its data blocks, as extents of
 * consecutive blocks in one zone written by one log, with where each lies (dump_where).
 * It only reads, through the library a read-only mount gives (node_get, nat_get, dir_lookup).
 * May call: dump.h, files.h, core.h, format.h.
 */
#include "dump.h"

#include <errno.h>
#include <string.h>

/* A run of file blocks at consecutive addresses in one segment (so one log). */
struct extent {
	uint64_t file_blk;
	uint32_t addr, n, seg;
	uint8_t log;
	int open;
};

struct walk {
	struct out *o;
	struct zlfs_fs *fs;
	uint32_t ino;
	struct extent ex;
	uint64_t data_blocks, reserved_blocks, nodes, compressed_clusters;
	uint32_t clog; /* a compressed file's cluster size's log2, else 0 */
	int errors;
};

static uint8_t log_of_addr(struct zlfs_fs *fs, uint32_t addr)
{
	uint64_t born;
	uint8_t log;

	seg_origin(fs, addr, &born, &log);
	return log;
}

static void extent_flush(struct walk *w)
{
	struct extent *e = &w->ex;

	if (!e->open)
		return;
	out_obj(w->o, NULL);
	out_u(w->o, "file_block", e->file_blk);
	out_u(w->o, "blocks", e->n);
	if (e->addr == ZLFS_ADDR_PREALLOC) {
		out_s(w->o, "addr", "reserved");
	} else {
		out_u(w->o, "addr", e->addr);
		dump_where(w->o, w->fs, e->addr);
	}
	out_end(w->o);
	e->open = 0;
}

/* A compressed cluster's marker: no block; its k stored blocks follow in its next slots. */
static void cluster_marker(struct walk *w, uint64_t file_blk)
{
	extent_flush(w);
	w->compressed_clusters++;
	out_obj(w->o, NULL);
	out_u(w->o, "file_block", file_blk);
	out_u(w->o, "blocks", 0);
	out_s(w->o, "addr", "compressed cluster");
	out_end(w->o);
}

static void data_block(struct walk *w, uint64_t file_blk, uint32_t addr)
{
	struct extent *e = &w->ex;
	int reserved = addr == ZLFS_ADDR_PREALLOC;
	const struct zlfs_sb_info *sb = &w->fs->sb;
	uint32_t zb = zlfs_zone_blocks(sb), seg;
	uint8_t log;

	if (addr == ZLFS_ADDR_COMPRESSED) {
		cluster_marker(w, file_blk);
		return;
	}
	seg = reserved ? 0 : addr / zb * sb->segs_per_zone + addr % zb / sb->seg_blocks;
	log = reserved ? ZLFS_LOG_NONE : log_of_addr(w->fs, addr);

	if (reserved)
		w->reserved_blocks++;
	else
		w->data_blocks++;
	if (e->open && file_blk == e->file_blk + e->n && seg == e->seg && log == e->log &&
	    (reserved ? e->addr == ZLFS_ADDR_PREALLOC
		      : e->addr != ZLFS_ADDR_PREALLOC && addr == e->addr + e->n)) {
		e->n++;
		return;
	}
	extent_flush(w);
	*e = (struct extent){file_blk, addr, 1, seg, log, 1};
}

/* The first file block under child I of the inode. */
static uint64_t inode_child_base(uint32_t i)
{
	static const uint64_t n = ZLFS_NODE_ADDRS;

	if (i < 2)
		return ZLFS_INODE_ADDRS + i * n;
	if (i < 4)
		return ZLFS_INODE_ADDRS + 2 * n + (i - 2) * n * n;
	return ZLFS_INODE_ADDRS + 2 * n + 2 * n * n;
}

static uint64_t span_of(int depth)
{
	uint64_t s = 1;

	for (int d = 0; d <= depth; d++)
		s *= ZLFS_NODE_ADDRS;
	return s; /* file blocks under one node of DEPTH levels (0: a direct node) */
}

static void walk_node(struct walk *w, uint32_t nid, uint32_t parent, uint32_t slot, int depth,
		      uint64_t base, int data);

/* What an xattr node links to (XATTR_NODES): each external entry's value nodes and the next
 * node, listed as nodes with their parent; BASE is the node's place (a chain longer than
 * the format allows, or a cycle, ends the listing). */
static void walk_xattr_links(struct walk *w, struct node_page *np, int depth, uint64_t base)
{
	const struct zlfs_xattr_node *x = np->buf;
	uint32_t used = le32_get(x->used), off;

	if (!(w->fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_XATTR_NODES) ||
	    base + 1 >= (depth == -1 ? ZLFS_XATTR_NODES_MAX : ZLFS_XVALUE_NODES_MAX))
		return;
	for (off = 0; depth == -1 && off + 4 <= used && used <= ZLFS_XATTR_NODE_SPACE;
	     off += (4u + x->data[off + 1] + (x->data[off + 2] | x->data[off + 3] << 8) + 3) & ~3u) {
		le32 raw;

		if (!(x->data[off] & ZLFS_XATTR_EXTERNAL) || off + 4 + x->data[1 + off] + 4 > used)
			continue;
		memcpy(&raw, x->data + off + 4 + x->data[off + 1], sizeof(raw));
		walk_node(w, le32_get(raw), np->nid, off, -2, 0, 0);
	}
	if (le32_get(x->next))
		walk_node(w, le32_get(x->next), np->nid, ZLFS_INODE_ADDRS + ZLFS_INODE_NIDS, depth,
			  base + 1, 0);
}

/* One node of the tree and, in the second pass (DATA), the data blocks below it. DEPTH as
 * verify.c counts it: 0 a direct node, -1 an xattr node, -2 a value node (BASE: its place). */
static void walk_node(struct walk *w, uint32_t nid, uint32_t parent, uint32_t slot, int depth,
		      uint64_t base, int data)
{
	struct nat_ent e = {0};
	struct node_page *np;
	struct zlfs_node *n;
	int ret;

	if (nat_get(w->fs, nid, &e) || (ret = node_get(w->fs, nid, &np))) {
		if (!data) {
			out_obj(w->o, NULL);
			out_u(w->o, "nid", nid);
			out_u(w->o, "parent", parent);
			out_s(w->o, "error", "unreadable or damaged (fsck.zlfs -v says why)");
			out_end(w->o);
			w->errors++;
		}
		return;
	}
	n = np->buf;
	if (!data) {
		w->nodes++;
		out_obj(w->o, NULL);
		out_u(w->o, "nid", nid);
		out_s(w->o, "kind", zlfs_kind_name(le16_get(n->hdr.kind)));
		out_u(w->o, "ofs", le32_get(n->ofs));
		out_u(w->o, "parent", parent);
		out_u(w->o, "slot", slot);
		out_u(w->o, "nat_ino", e.ino);
		out_u(w->o, "nat_version", e.version);
		out_u(w->o, "addr", e.blkaddr);
		out_u(w->o, "seq", le64_get(n->hdr.seq));
		out_u(w->o, "cp_ver", le64_get(n->hdr.cp_ver));
		dump_where(w->o, w->fs, e.blkaddr);
		out_end(w->o);
	}
	if (depth < 0 && !data && (le16_get(n->hdr.kind) == ZLFS_KIND_XATTR ||
				   le16_get(n->hdr.kind) == ZLFS_KIND_XVALUE))
		walk_xattr_links(w, np, depth, base);
	if (depth >= 0 && le16_get(n->hdr.kind) != ZLFS_KIND_XATTR) {
		for (uint32_t i = 0; i < ZLFS_NODE_ADDRS; i++) {
			uint32_t p = le32_get(n->ptr[i]);

			if (!p)
				continue;
			if (!depth && data) /* a compressed file's nodes map fewer blocks */
				data_block(w, (w->clog ? data_dnode_base(le32_get(n->ofs), w->clog)
						       : base) + i, p);
			else if (depth)
				walk_node(w, p, nid, i, depth - 1, base + i * span_of(depth - 1),
					  data);
		}
	}
	node_put(w->fs, np);
}

static void walk_tree(struct walk *w, struct node_page *inp, int data)
{
	static const int depth[ZLFS_INODE_NIDS] = {0, 0, 1, 1, 2};
	struct zlfs_inode *in = inode_of(inp);
	uint32_t xnid = le32_get(in->xattr_nid);

	if (!data && xnid)
		walk_node(w, xnid, w->ino, ZLFS_INODE_ADDRS + ZLFS_INODE_NIDS, -1, 0, 0);
	if (zlfs_iflags_area_inline(le32_get(in->flags)))
		return;
	w->clog = data_cluster_log(inp);
	for (uint32_t i = 0; data && i < ZLFS_INODE_ADDRS; i++)
		if (le32_get(in->addr[i]))
			data_block(w, i, le32_get(in->addr[i]));
	for (uint32_t i = 0; i < ZLFS_INODE_NIDS; i++)
		if (le32_get(in->nid[i]))
			walk_node(w, le32_get(in->nid[i]), w->ino, ZLFS_INODE_ADDRS + i, depth[i],
				  inode_child_base(i), data);
	if (data)
		extent_flush(w);
}

static void inode_fields(struct out *o, const struct zlfs_inode *in)
{
	static const char *const nid_names[ZLFS_INODE_NIDS] = {"direct0", "direct1", "indirect0",
								"indirect1", "double_indirect"};

	out_u(o, "hdr_flags", le16_get(in->hdr.flags));
	out_u(o, "hdr_ino", le32_get(in->hdr.ino));
	out_u(o, "cp_ver", le64_get(in->hdr.cp_ver));
	out_u(o, "seq", le64_get(in->hdr.seq));
	out_mode(o, "mode", le32_get(in->mode));
	out_u(o, "uid", le32_get(in->uid));
	out_u(o, "gid", le32_get(in->gid));
	out_u(o, "nlink", le32_get(in->nlink));
	out_u(o, "flags", le32_get(in->flags));
	out_b(o, "inline", !!(le32_get(in->flags) & ZLFS_IFLAG_INLINE));
	out_b(o, "inline_dentries", !!(le32_get(in->flags) & ZLFS_IFLAG_INLINE_DENTRY));
	out_b(o, "encrypted", !!(le32_get(in->flags) & ZLFS_IFLAG_ENCRYPT));
	out_b(o, "orphan", !!(le32_get(in->flags) & ZLFS_IFLAG_ORPHAN));
	out_b(o, "compressed", !!(le32_get(in->flags) & ZLFS_IFLAG_COMPRESS));
	out_b(o, "immutable", !!(le32_get(in->flags) & ZLFS_IFLAG_IMMUTABLE));
	out_b(o, "append_only", !!(le32_get(in->flags) & ZLFS_IFLAG_APPEND));
	out_b(o, "nodump", !!(le32_get(in->flags) & ZLFS_IFLAG_NODUMP));
	out_b(o, "noatime", !!(le32_get(in->flags) & ZLFS_IFLAG_NOATIME));
	out_u(o, "compress_alg", in->compress_alg);
	out_u(o, "cluster_log", in->cluster_log);
	out_u(o, "generation", le32_get(in->generation));
	out_u(o, "xattr_nid", le32_get(in->xattr_nid));
	out_u(o, "parent_ino", le32_get(in->parent_ino));
	out_u(o, "rdev", le32_get(in->rdev));
	out_u(o, "dir_depth", le32_get(in->dir_depth));
	out_u(o, "dir_entries", le32_get(in->dir_entries));
	out_u(o, "inline_size", le32_get(in->inline_size));
	out_u(o, "size", le64_get(in->size));
	out_u(o, "blocks", le64_get(in->blocks));
	out_u(o, "atime_ns", le64_get(in->atime_ns));
	out_u(o, "mtime_ns", le64_get(in->mtime_ns));
	out_u(o, "ctime_ns", le64_get(in->ctime_ns));
	out_u(o, "crtime_ns", le64_get(in->crtime_ns));
	out_hex(o, "nonce", in->nonce, sizeof(in->nonce));
	out_u(o, "fsync_nodes", le32_get(in->fsync_nodes));
	out_obj(o, "nid");
	for (uint32_t i = 0; i < ZLFS_INODE_NIDS; i++)
		out_u(o, nid_names[i], le32_get(in->nid[i]));
	out_end(o);
}

int dump_inode(struct out *o, struct zlfs_fs *fs, uint32_t ino)
{
	struct walk w = {.o = o, .fs = fs, .ino = ino};
	struct node_page *np;
	struct nat_ent e;
	int ret;

	if (ino == ZLFS_NID_NULL || ino >= fs->sb.max_nid)
		return -ERANGE;
	ret = nat_get(fs, ino, &e);
	if (!ret && e.blkaddr == ZLFS_ADDR_NULL)
		return -ENOENT;
	if (!ret)
		ret = inode_get(fs, ino, &np);
	if (ret)
		return ret;
	out_obj(o, NULL);
	out_u(o, "ino", ino);
	out_u(o, "addr", e.blkaddr);
	if (e.packed) /* PACKED_INODES: the inode is this slot of the inode pack at addr */
		out_u(o, "pack_slot", e.slot);
	out_u(o, "nat_version", e.version);
	dump_where(o, fs, e.blkaddr);
	inode_fields(o, inode_of(np));
	out_list(o, "nodes");
	walk_tree(&w, np, 0);
	out_end(o);
	out_list(o, "extents");
	walk_tree(&w, np, 1);
	out_end(o);
	out_u(o, "node_count", w.nodes);
	out_u(o, "data_blocks", w.data_blocks);
	/* an inline regular file's bytes are in the inode (fs/inline.c), a symlink's target too */
	out_u(o, "inline_bytes", le32_get(inode_of(np)->flags) & ZLFS_IFLAG_INLINE
				 ? le32_get(inode_of(np)->inline_size) : 0);
	out_u(o, "reserved_blocks", w.reserved_blocks);
	out_u(o, "compressed_clusters", w.compressed_clusters);
	out_u(o, "unreadable_nodes", (uint64_t)w.errors);
	out_end(o);
	node_put(fs, np);
	return 0;
}

int dump_path(struct out *o, struct zlfs_fs *fs, const char *path)
{
	uint32_t ino = ZLFS_ROOT_INO;
	const char *p = path;

	while (*p) {
		struct node_page *dir;
		size_t len;
		uint8_t type;
		int ret;

		while (*p == '/')
			p++;
		len = strcspn(p, "/");
		if (!len)
			break;
		if ((ret = inode_get(fs, ino, &dir)))
			return ret;
		if (!S_ISDIR(le32_get(inode_of(dir)->mode)))
			ret = -ENOTDIR;
		else
			ret = dir_lookup(fs, dir, p, len, &ino, &type);
		node_put(fs, dir);
		if (ret)
			return ret;
		p += len;
	}
	return dump_inode(o, fs, ino);
}
