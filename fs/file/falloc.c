/*
 * falloc.c - fallocate as F2FS offers it: reserving space, zeroing a range, and collapsing or
 * inserting a block-aligned range by moving pointers in the file's node tree.
 *
 * Owns: what "reserved" means in a log-structured filesystem and how ranges move.
 *  - A log-structured filesystem cannot pin blocks: a block is placed when it is written.
 *    A reservation is a data pointer holding ZLFS_ADDR_PREALLOC, counted in the inode's
 *    blocks and in fs->prealloc_blocks, which seg_free_blocks (what user data may take) and
 *    gc_free_blocks (what statfs reports) subtract, and which GC's levels count as taken
 *    (gc_free_zones). Writing the block spends its reservation (data_put_block); truncating
 *    (to any size not above the old one), punching (past the end of file too) or unlinking
 *    drops it with the pointer (drop_block). The pointers
 *    are written with the nodes and the count with every checkpoint, and roll-forward moves
 *    the count with the nodes it applies, so a remount or a crash neither loses nor leaks one.
 *  - COLLAPSE_RANGE and INSERT_RANGE move data pointers, never data. A moved block keeps its
 *    segment summary (written once, in a sequential zone), so its new owner is recorded in the
 *    remap table (remap.c) that GC consults; once the table is full, the remaining blocks are
 *    copied instead. A moved file's next fsync writes a checkpoint: roll-forward replays
 *    nodes, not moves.
 * May call: data.c, inode.c (files.h), node/log layer (core.h), log.h.
 */
#include "files.h"
#include "log.h"

#include <errno.h>
#include <string.h>

#define BS ZLFS_BLOCK_SIZE

static uint64_t blocks_up(uint64_t bytes) { return (bytes + BS - 1) / BS; }

/* The pointer of block IDX: ZLFS_ADDR_NULL when it or a node on the way is missing. */
static int slot_get(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint32_t *addr)
{
	struct dref ref;
	int ret = data_ref(fs, inode, idx, 0, &ref);

	*addr = ZLFS_ADDR_NULL;
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	*addr = le32_get(*node_slot(ref.np, ref.slot));
	node_put(fs, ref.np);
	return 0;
}

/* Whether file block IDX lies in a compressed cluster, whose null slots are no holes: a
 * compressed file's reservations go only to raw clusters (docs/compression.md). */
static int in_compressed(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx)
{
	uint32_t log = data_cluster_log(inode), first;

	return log && !slot_get(fs, inode, idx >> log << log, &first) &&
	       first == ZLFS_ADDR_COMPRESSED;
}

/* Holes in blocks [FIRST, END): what a reservation of that range needs. */
static int count_holes(struct zlfs_fs *fs, struct node_page *inode, uint64_t first, uint64_t end,
		       uint64_t *holes)
{
	uint32_t addr;
	int ret = 0;

	for (*holes = 0; !ret && first < end; first++) {
		ret = slot_get(fs, inode, first, &addr);
		*holes += !ret && addr == ZLFS_ADDR_NULL && !in_compressed(fs, inode, first);
	}
	return ret;
}

/* Reserve every hole in blocks [FIRST, END). */
static int reserve_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t first, uint64_t end)
{
	struct zlfs_inode *in = inode_of(inode);
	uint64_t holes, idx;
	struct dref ref;
	int ret = count_holes(fs, inode, first, end, &holes);

	if (ret || !holes)
		return ret;
	/* what df shows may be promised: dead blocks too, which GC turns back into free
	 * zones once the reservations leave too few (gc_free_zones) */
	if (holes > seg_free_blocks(fs) && holes > gc_free_blocks(fs))
		return -ENOSPC;
	ret = zlfs_feature_incompat(fs, ZLFS_FEAT_INCOMPAT_FALLOC);
	for (idx = first; !ret && idx < end; idx++) {
		le32 *slot;

		ret = data_ref(fs, inode, idx, 1, &ref);
		if (ret)
			break;
		slot = node_slot(ref.np, ref.slot);
		if (!le32_get(*slot) && !in_compressed(fs, inode, idx)) {
			*slot = le32_put(ZLFS_ADDR_PREALLOC);
			node_dirty(fs, ref.np);
			in->blocks = le64_put(le64_get(in->blocks) + 1);
			seg_prealloc_add(fs, 1);
		}
		node_put(fs, ref.np);
	}
	node_dirty(fs, inode);
	return ret;
}

static int check_regular(struct node_page *inode)
{
	uint32_t mode = le32_get(inode_of(inode)->mode);

	return S_ISDIR(mode) ? -EISDIR : S_ISREG(mode) ? 0 : -ENODEV;
}

/* A regular file, and a range its tree can address. */
static int range_ok(struct node_page *inode, uint64_t end)
{
	int ret = check_regular(inode);

	return !ret && end > (uint64_t)BS * data_max_blocks() ? -EFBIG : ret;
}

/* Without KEEP_SIZE, the file grows to END. */
static int grow_to(struct zlfs_fs *fs, struct node_page *inode, uint64_t end, int keep_size)
{
	return !keep_size && end > le64_get(inode_of(inode)->size) ? data_set_size(fs, inode, end)
								    : 0;
}

int falloc_reserve(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len,
		   int keep_size)
{
	uint64_t end = off + len;
	int ret = range_ok(inode, end);

	if (!ret)
		ret = reserve_blocks(fs, inode, off / BS, blocks_up(end));
	return ret ? ret : grow_to(fs, inode, end, keep_size);
}

int falloc_zero(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len,
		int keep_size)
{
	uint64_t end = off + len;
	int ret = range_ok(inode, end);

	if (!ret)
		ret = data_punch(fs, inode, off, len); /* frees what is there, zeroes partial ends */
	if (!ret && blocks_up(off) < end / BS)
		ret = reserve_blocks(fs, inode, blocks_up(off), end / BS);
	return ret ? ret : grow_to(fs, inode, end, keep_size);
}

/* Block SRC's pointer moves to DST, whose slot is empty. A block keeps its place on the
 * device; its new owner goes to the remap table, or, when that is full, it is copied. */
static int move_block(struct zlfs_fs *fs, struct node_page *inode, uint64_t src, uint64_t dst,
		      uint8_t *buf)
{
	struct dref from, to;
	uint32_t addr;
	int ret = slot_get(fs, inode, src, &addr);

	if (ret || addr == ZLFS_ADDR_NULL)
		return ret;
	if (addr != ZLFS_ADDR_PREALLOC && !remap_room(fs)) {
		ret = seg_read(fs, addr, buf);
		if (!ret)
			ret = data_put_block(fs, inode, dst, buf, ZLFS_LOG_WARM_DATA);
		return ret ? ret : data_drop_blocks(fs, inode, src, src + 1);
	}
	ret = data_ref(fs, inode, dst, 1, &to); /* first, so a failure changes nothing */
	if (ret)
		return ret;
	ret = data_ref(fs, inode, src, 0, &from);
	if (ret) {
		node_put(fs, to.np);
		return ret;
	}
	*node_slot(from.np, from.slot) = 0;
	node_dirty(fs, from.np);
	*node_slot(to.np, to.slot) = le32_put(addr);
	node_dirty(fs, to.np);
	if (addr != ZLFS_ADDR_PREALLOC)
		ret = remap_set(fs, addr, to.np->nid, (uint16_t)to.slot);
	node_put(fs, from.np);
	node_put(fs, to.np);
	return ret;
}

/* Common checks of COLLAPSE_RANGE and INSERT_RANGE, and what both do first: past the end of
 * file nothing moves, so reservations there are dropped. */
static int shift_prepare(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len)
{
	int ret = check_regular(inode);

	if (ret)
		return ret;
	if (fcrypt_is_encrypted(inode) || data_cluster_log(inode))
		return -EOPNOTSUPP; /* the XTS tweak, a cluster's hash: the position in the file */
	if (off % BS || len % BS || !len)
		return -EINVAL;
	ret = zlfs_feature_incompat(fs, ZLFS_FEAT_INCOMPAT_FALLOC);
	if (!ret)
		ret = data_truncate_blocks(fs, inode, blocks_up(le64_get(inode_of(inode)->size)));
	node_fsync_needs_checkpoint(fs, inode->nid);
	return ret;
}

/* Blocks [FROM, END) move by N: down (collapse: lowest first) or up (insert: highest first),
 * so no pointer still to move is overwritten. */
static int shift_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from, uint64_t end,
			uint64_t n, int up)
{
	uint8_t *buf = zdev_buf_alloc(BS);
	uint64_t i;
	int ret = buf ? 0 : -ENOMEM;

	for (i = 0; !ret && i < end - from; i++) {
		uint64_t idx = up ? end - 1 - i : from + i;

		ret = move_block(fs, inode, idx, up ? idx + n : idx - n, buf);
	}
	zdev_buf_free(buf);
	/* Pointers moved under read-ahead's feet: a window read before the move holds the
	 * blocks that were at these offsets, and only a new generation tells it so. */
	data_changed(fs, inode);
	return ret;
}

int falloc_collapse(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len)
{
	uint64_t size = le64_get(inode_of(inode)->size), first = off / BS, n = len / BS;
	int ret;

	if (off + len < off || off + len >= size)
		return -EINVAL; /* as Linux: the range must end before the end of file */
	ret = shift_prepare(fs, inode, off, len);
	if (!ret)
		ret = data_drop_blocks(fs, inode, first, first + n);
	if (!ret && first + n < blocks_up(size))
		ret = shift_blocks(fs, inode, first + n, blocks_up(size), n, 0);
	return ret ? ret : data_set_size(fs, inode, size - len);
}

int falloc_insert(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len)
{
	uint64_t size = le64_get(inode_of(inode)->size);
	int ret;

	if (off >= size)
		return -EINVAL; /* as Linux: inserting at or past the end of file is a plain extend */
	if (size + len < size || size + len > (uint64_t)BS * data_max_blocks())
		return -EFBIG;
	ret = shift_prepare(fs, inode, off, len);
	if (!ret)
		ret = shift_blocks(fs, inode, off / BS, blocks_up(size), len / BS, 1);
	if (!ret) {
		inode_of(inode)->size = le64_put(size + len);
		node_dirty(fs, inode);
	}
	return ret;
}
