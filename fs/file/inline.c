/*
 * inline.c - inline data: a small regular file's bytes kept in its inode's address area.
 *
 * Owns: the rules of an inline regular file (INLINE_DATA feature; docs/design.md, "Inline
 * data"): bytes [0, size) in addr[], inline_size == size <= ZLFS_INLINE_MAX, no block and no
 * node mapped, the rest of the area zero. Which new files start inline; reading, writing,
 * truncating and punching one in place; and its conversion to an ordinary file (the bytes
 * become data block 0) when a write, truncate or fallocate would take it past the area.
 * A file of a few kilobytes then costs one node write instead of a node and a data block,
 * and its unlink frees no block. Symlinks keep their targets inline too (symlink.c).
 * May call: dmap.c (data_put_block, for the conversion), fcrypt.c, node.c (through core.h), log.h.
 * Called at the entries of data.c's read and size functions and of the FUSE write and
 * fallocate requests, with the inode locked (exclusive for a change, cp_lock shared).
 */
#include "files.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <string.h>

/* An encrypted file never starts inline: XTS encrypts whole blocks with the block number as
 * tweak, and an inode is not a block of the file. Nor does a compressed one: its tree maps
 * clusters from the first byte. */
void inline_start(struct zlfs_fs *fs, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);

	if (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_INLINE_DATA) ||
	    !S_ISREG(le32_get(in->mode)) || fcrypt_is_encrypted(np) || le64_get(in->size) ||
	    le64_get(in->blocks) || (le32_get(in->flags) & ZLFS_IFLAG_COMPRESS))
		return;
	in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_INLINE);
	in->inline_size = 0;
	node_dirty(fs, np);
}

/* The size, refused past the area: the node check keeps it there on every read, so a larger
 * one means memory went bad under us. */
static int inline_size_of(struct node_page *np, uint64_t *size)
{
	*size = le64_get(inode_of(np)->size);
	if (*size <= ZLFS_INLINE_MAX)
		return 0;
	zlog_err("inode %u: inline file of %llu bytes: run fsck.zlfs", np->nid,
		 (unsigned long long)*size);
	return -EUCLEAN;
}

static void inline_set(struct zlfs_fs *fs, struct node_page *np, uint64_t size)
{
	struct zlfs_inode *in = inode_of(np);

	in->size = le64_put(size);
	in->inline_size = le32_put((uint32_t)size);
	node_dirty(fs, np);
}

/* Everything happens to the inode's page under its lock, and that page reaches the device
 * only whole (a checkpoint, or an fsync under the same lock): a power cut leaves the inline
 * file or the converted one, never a file between. On failure the page is as it was. */
int inline_convert(struct zlfs_fs *fs, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);
	uint8_t *blk, saved[ZLFS_INLINE_MAX];
	uint64_t size;
	int ret = inline_size_of(np, &size);

	if (ret)
		return ret;
	blk = size ? zdev_buf_alloc(ZLFS_BLOCK_SIZE) : NULL;
	if (size && !blk)
		return -ENOMEM;
	memcpy(saved, in->addr, sizeof(saved));
	in->flags = le32_put(le32_get(in->flags) & ~ZLFS_IFLAG_INLINE);
	in->inline_size = 0;
	memset(in->addr, 0, sizeof(in->addr));
	if (size) {
		memset(blk, 0, ZLFS_BLOCK_SIZE);
		memcpy(blk, saved, size);
		ret = data_put_block(fs, np, 0, blk, ZLFS_LOG_WARM_DATA);
		zdev_buf_free(blk);
	}
	if (ret) {
		memcpy(in->addr, saved, sizeof(saved));
		in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_INLINE);
		in->inline_size = le32_put((uint32_t)size);
	}
	node_dirty(fs, np);
	return ret;
}

/* The plan of data.c's reads with the bytes already in its buffer: nothing to read from the
 * device (as for a plan read-ahead served), nothing to read ahead. */
int inline_read_plan(struct zlfs_fs *fs, struct node_page *np, size_t size, uint64_t off,
		     struct data_rplan *p)
{
	uint64_t fsize, end;
	int ret = inline_size_of(np, &fsize);

	(void)fs;
	memset(p, 0, sizeof(*p));
	if (ret || off >= fsize || !size)
		return ret;
	end = size < fsize - off ? off + size : fsize;
	p->buf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!p->buf)
		return -ENOMEM;
	memcpy(p->buf, inode_of(np)->addr, fsize);
	p->nblocks = 1;
	p->from_ra = 1;
	p->ino = np->nid;
	p->skip = (size_t)off;
	p->len = (size_t)(end - off);
	return 0;
}

int inline_try_write(struct zlfs_fs *fs, struct node_page *np, const void *buf, size_t size,
		     uint64_t off)
{
	uint64_t fsize;
	int ret;

	if (!inline_is(np) || !size)
		return 0;
	if (size > ZLFS_INLINE_MAX || off > ZLFS_INLINE_MAX - size) {
		ret = inline_convert(fs, np);
		return ret < 0 ? ret : 0;
	}
	ret = inline_size_of(np, &fsize);
	if (ret)
		return ret;
	memcpy((uint8_t *)inode_of(np)->addr + off, buf, size);
	if (off + size > fsize)
		inline_set(fs, np, off + size);
	node_dirty(fs, np);
	ATOMIC_ADD(&fs->user_bytes, size);
	return (int)size;
}

/* Growing reads zeros, as the area past the size is; shrinking zeroes what it cuts off. A
 * size past the area converts the file: 0, and the caller sets it as for any file. */
int inline_resize(struct zlfs_fs *fs, struct node_page *np, uint64_t size)
{
	uint64_t old;
	int ret;

	if (!inline_is(np))
		return 0;
	if (size > ZLFS_INLINE_MAX)
		return inline_convert(fs, np);
	ret = inline_size_of(np, &old);
	if (ret)
		return ret;
	if (size < old)
		memset((uint8_t *)inode_of(np)->addr + size, 0, old - size);
	inline_set(fs, np, size);
	return 1;
}

/* A hole punched in an inline file is zeros in place: it keeps its size and its place. */
int inline_punch(struct zlfs_fs *fs, struct node_page *np, uint64_t off, uint64_t len)
{
	uint64_t fsize, end = off + len < off ? UINT64_MAX : off + len;
	int ret = inline_size_of(np, &fsize);

	if (ret || off >= fsize)
		return ret;
	if (end > fsize)
		end = fsize;
	memset((uint8_t *)inode_of(np)->addr + off, 0, end - off);
	node_dirty(fs, np);
	return 0;
}

/* Every fallocate mode but a hole punch (done in place) works on blocks: the file becomes an
 * ordinary one first. A reservation in the inode would have nothing to reserve. A mode the
 * request refuses anyway (a punch without KEEP_SIZE, modes zlfs does not offer) leaves the
 * file as it is. */
int inline_before_fallocate(struct zlfs_fs *fs, struct node_page *np, int mode)
{
	if (!inline_is(np))
		return 0;
	switch (mode) {
	case 0:
	case FALLOC_FL_KEEP_SIZE:
	case FALLOC_FL_ZERO_RANGE:
	case FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE:
	case FALLOC_FL_COLLAPSE_RANGE:
	case FALLOC_FL_INSERT_RANGE:
		return inline_convert(fs, np);
	}
	return 0;
}
