/*
 * dir_inline.c - inline directories (INLINE_DENTRIES feature; docs/format.md, "Inline
 * directories"): a directory whose one dentry block is block 0, and whose entries fit,
 * keeps them in its inode's address area and has no data block.
 *
 * Owns: when block 0 of a directory is stored in the inode rather than as a block, and the
 * switches between the two. The directory cache keeps block 0 as a whole dentry block in
 * memory either way, so dir.c never sees the difference: dir_cache.c calls here when it reads
 * block 0 of an inline directory and when dir_flush writes a directory's blocks (before each
 * checkpoint, which makes the inode and the blocks durable together).
 * May call: format.h (the codec, dentry_inline.c), dmap.c (data_addr, data_drop_blocks),
 * node and zlfs_feature_incompat (core.h).
 *
 * Locks: the directory's inode lock, exclusive for a change (the flush, fsck's repair), shared
 * at least for a read.
 */
#include "dir_int.h"

#include <errno.h>
#include <string.h>

int dinline_is(struct node_page *dir)
{
	return !!(le32_get(inode_of(dir)->flags) & ZLFS_IFLAG_INLINE_DENTRY);
}

int dinline_read(struct zlfs_fs *fs, struct node_page *dir, struct zlfs_dentry_block *b,
		 char *why, size_t len)
{
	memset(b, 0, ZLFS_BLOCK_SIZE);
	zlfs_blk_init(b, ZLFS_KIND_DENTRY, 0, dir->nid, fs->cp_ver);
	return zlfs_dentry_inline_decode((const uint8_t *)inode_of(dir)->addr, b, why, len);
}

/* DIR has or will have a block past block 0: level 0's second block (BLOCK1: the cache holds
 * it; else on the device) or a deeper level. An inline directory has none on the device. */
static int dinline_more_blocks(struct zlfs_fs *fs, struct node_page *dir, int block1, int *more)
{
	uint32_t addr = ZLFS_ADDR_NULL;
	int ret = 0;

	*more = block1 || le32_get(inode_of(dir)->dir_depth) > 1;
	if (!*more && !dinline_is(dir))
		ret = data_addr(fs, dir, 1, &addr);
	*more |= addr != ZLFS_ADDR_NULL;
	return ret;
}

int dinline_store(struct zlfs_fs *fs, struct node_page *dir, const struct zlfs_dentry_block *b,
		  int block1)
{
	struct zlfs_inode *in = inode_of(dir);
	uint8_t area[ZLFS_DENTRY_INLINE_SIZE];
	int more, ret;

	/* An image of another revision (an older mkfs's, kept readable by that revision) is left
	 * with the features it has: only this revision's images turn the feature on. */
	if (fs->noinline_dentry || fs->sb.revision != ZLFS_REVISION ||
	    !S_ISDIR(le32_get(in->mode)) || (le32_get(in->flags) & ZLFS_IFLAG_INLINE))
		return 0;
	/* entries too many for the area: no need to look for a block 1 on the device */
	if (zlfs_dentry_inline_encode(b, area))
		return 0;
	ret = dinline_more_blocks(fs, dir, block1, &more);
	if (ret || more)
		return ret;
	/* the superblock says so before any checkpoint holds an inline directory */
	ret = zlfs_feature_incompat(fs, ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES);
	if (!ret && !dinline_is(dir)) /* the old block 0 dies with this checkpoint */
		ret = data_drop_blocks(fs, dir, 0, 1);
	if (ret)
		return ret;
	memcpy(in->addr, area, sizeof(area));
	in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_INLINE_DENTRY);
	node_dirty(fs, dir);
	return 1;
}

void dinline_leave(struct zlfs_fs *fs, struct node_page *dir,
		   uint8_t saved[ZLFS_DENTRY_INLINE_SIZE])
{
	struct zlfs_inode *in = inode_of(dir);

	memcpy(saved, in->addr, ZLFS_DENTRY_INLINE_SIZE);
	memset(in->addr, 0, ZLFS_DENTRY_INLINE_SIZE);
	in->flags = le32_put(le32_get(in->flags) & ~ZLFS_IFLAG_INLINE_DENTRY);
	node_dirty(fs, dir);
}

void dinline_undo(struct zlfs_fs *fs, struct node_page *dir,
		  const uint8_t saved[ZLFS_DENTRY_INLINE_SIZE])
{
	struct zlfs_inode *in = inode_of(dir);

	memcpy(in->addr, saved, ZLFS_DENTRY_INLINE_SIZE);
	in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_INLINE_DENTRY);
	node_dirty(fs, dir);
}

int dir_drop_block(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx)
{
	uint8_t saved[ZLFS_DENTRY_INLINE_SIZE];

	if (!dinline_is(dir))
		return data_drop_blocks(fs, dir, idx, (uint64_t)idx + 1);
	if (idx == 0) /* its one block: the entries go, the directory stays */
		dinline_leave(fs, dir, saved);
	return 0;
}
