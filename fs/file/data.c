/*
 * data.c - file contents as a program writes them: writes of any size and alignment, the
 * partial block held in memory, the size, and holes punched in a range.
 *
 * Owns: how a write is cut into whole-block runs and partial pieces, when a write's last,
 * partial block is held (tailbuf.c) rather than appended - for a compressed file, the last
 * cluster a write at its end of file ended inside - and zeroing the bytes a truncate or punch
 * leaves inside a block. An inline file (inline.c) is inline.c's. The tree, block
 * addresses and appends are dmap.c's: this file calls down to it, never the reverse.
 * May call: dmap.c, dcluster.c, inline.c, tailbuf.c (through files.h and data_int.h), node.c
 * (core.h).
 */
#include "data_int.h"

#include <errno.h>
#include <string.h>

/* ---- partial blocks in memory ----------------------------------------------------------
 * A write that ends inside a block of a regular file leaves that block held in memory
 * (tailbuf.c) rather than appended anew, since the next write is likely to go on in it: a
 * write of 1 KB at the end of file no longer costs 4 KiB of device, nor does a log rewritten
 * in place from its start (SQLite's write-ahead log once it wraps writes a 24-byte frame
 * header and a 4 KiB page, each ending inside a block). One block per file: a write ending
 * in another block while one is held writes through, unless it finishes the held one first.
 * Later writes change the held block in memory; it is written as any block once a write
 * fills it or begins past it, or when tailbuf.c says (fsync, release, checkpoint, age).
 * Truncation drops it or zeroes it in memory; punching and fallocate write it out first. */

/* N bytes of SRC into the held span H (file blocks from FIRST on), at byte AT of it. */
static void held_put(struct zlfs_fs *fs, struct node_page *inode, uint8_t *h, uint64_t first,
		     uint64_t at, const uint8_t *src, uint64_t n)
{
	memcpy(h + at, src, n);
	tail_touch(fs, inode->nid, first + at / ZLFS_BLOCK_SIZE,
		   first + (at + n + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE);
	data_changed(fs, inode);
}

/* A span just held (file blocks from FIRST on) was read into H with the result READ
 * (negative: an errno, and it goes): N bytes of SRC at AT go into it. 1, or the errno. */
static int held_fill(struct zlfs_fs *fs, struct node_page *inode, int read, uint8_t *h,
		     uint64_t first, uint64_t at, const uint8_t *src, uint64_t n)
{
	if (read < 0) {
		tail_drop(fs, inode->nid);
		return read;
	}
	held_put(fs, inode, h, first, at, src, n);
	return 1;
}

/* Hold block IDX, N bytes of SRC at AT in it: 1 when held, 0 when the bound or the free
 * space says to write it through, or a negative errno. */
static int hold_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		      uint64_t idx, uint64_t at, const uint8_t *src, uint64_t n)
{
	uint32_t raw;
	uint8_t *h;
	int ret;

	if (idx >= data_max_blocks()) /* past what a tree maps: written through, which says EFBIG */
		return 0;
	ret = data_slot_raw(fs, inode, idx, &raw);
	if (ret || !(h = tail_hold(fs, inode->nid, idx, 1, !raw)))
		return ret;
	ret = data_read_addr(fs, dk, idx, raw == ZLFS_ADDR_PREALLOC ? ZLFS_ADDR_NULL : raw, h);
	return held_fill(fs, inode, ret, h, idx, at, src, n);
}

/* Write N bytes of SRC at AT into block IDX, through BLK (scratch): into the held block if it
 * is IDX (written out once complete), held (MAY_HOLD: the write's last, partial block), or
 * read, changed and appended. */
static int write_piece(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		       uint64_t idx, uint64_t at, const uint8_t *src, uint64_t n, uint8_t *blk,
		       int may_hold)
{
	uint64_t hidx;
	uint8_t *h = tail_block(fs, inode->nid, &hidx, NULL);
	int ret = 0;

	if (h && hidx == idx && !tail_redirty(fs, inode->nid)) {
		held_put(fs, inode, h, idx, at, src, n);
		return at + n == ZLFS_BLOCK_SIZE ? tail_write(fs, inode) : 0;
	}
	if (may_hold && (ret = hold_block(fs, inode, dk, idx, at, src, n)))
		return ret < 0 ? ret : 0;
	if (n < ZLFS_BLOCK_SIZE)
		ret = data_read_block(fs, inode, dk, idx, blk);
	if (ret)
		return ret;
	memcpy(blk + at, src, n);
	return data_write_block(fs, inode, dk, idx, blk);
}

/* Whole blocks [IDX, IDX+N) were written: a held copy of one of them is stale. */
static void held_replaced(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint64_t n)
{
	uint64_t hidx;

	if (tail_block(fs, inode->nid, &hidx, NULL) && hidx >= idx && hidx - idx < n)
		tail_drop(fs, inode->nid);
}

/* ---- a compressed file's last cluster in memory ------------------------------------------
 * A compressed file is stored by whole clusters, so an append of a line would store its
 * cluster again, compressed, for every line (57 times the device bytes of a plain file for
 * logs appended a line at a time). The cluster a write at the end of file ends inside is held
 * in memory whole instead (tailbuf.c: one span per file, counted against the same bound, its
 * 2^n blocks owed), and stored once: when a write fills it, and whenever a held block would
 * be written (fsync, release, checkpoint, age, a write that begins past it, truncate, punch,
 * fallocate). Writes that end inside a cluster before the end of file are not held: they
 * rewrite that cluster as before (dcluster.c), since a cluster held for a random write would
 * cost a whole cluster where a raw one changes one block. */

/* Hold cluster CIDX, N bytes of SRC at AT in it: 1 when held, 0 when the bound or the free
 * space says to write through, or a negative errno. Any other span held for the file goes
 * first: it is no longer the last. */
static int hold_cluster(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
			uint64_t cidx, uint64_t at, const uint8_t *src, uint64_t n)
{
	uint32_t c = 1u << data_cluster_log(inode);
	uint64_t first = cidx * c, hidx;
	uint8_t *h;
	int ret;

	if (first + c > data_max_blocks()) /* past what a tree maps: written through, EFBIG */
		return 0;
	ret = tail_block(fs, inode->nid, &hidx, NULL) ? tail_write(fs, inode) : 0;
	if (!ret)
		ret = dclu_read(fs, inode, dk, cidx, NULL); /* its blocks on the device */
	if (ret < 0 || !(h = tail_hold(fs, inode->nid, first, c, !ret)))
		return ret < 0 ? ret : 0;
	return held_fill(fs, inode, dclu_read(fs, inode, dk, cidx, h), h, first, at, src, n);
}

/* Where dcluster.c's write of cluster [POS, CEND) may go on to, in a write ending at END
 * (clusters of CB bytes): over the whole clusters that follow a whole one, stored in runs,
 * up to the held span (block HIDX, H set), which its own branch fills. */
static uint64_t whole_to(uint64_t pos, uint64_t cend, uint64_t end, uint64_t cb, const uint8_t *h,
			 uint64_t hidx)
{
	uint64_t to = end / cb * cb, held = hidx * ZLFS_BLOCK_SIZE;

	if (pos % cb || cend - pos != cb || to <= cend)
		return cend;
	return h && held > pos && held < to ? held : to;
}

/* Bytes [OFF, END) of a compressed file from SRC, cluster by cluster: into the held cluster
 * (stored once the write reaches its end), held when the write ends inside a cluster at or
 * past the end of file, else stored as dcluster.c does. *POS: how far it got. */
static int write_clusters(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
			  const uint8_t *src, uint64_t off, uint64_t end, uint64_t *pos)
{
	uint32_t log = data_cluster_log(inode);
	uint64_t cb = (uint64_t)ZLFS_BLOCK_SIZE << log, size = le64_get(inode_of(inode)->size);
	int ret = 0;

	for (*pos = off; !ret && *pos < end;) {
		uint64_t cidx = *pos / cb, cstart = cidx * cb, cend = end < cstart + cb ? end : cstart + cb;
		uint64_t hidx, at = *pos - cstart;
		uint8_t *h = tail_block(fs, inode->nid, &hidx, NULL);
		const uint8_t *s = src + (*pos - off);

		if (h && hidx == cidx << log && !tail_redirty(fs, inode->nid)) {
			held_put(fs, inode, h, hidx, at, s, cend - *pos);
			ret = cend == cstart + cb ? tail_write(fs, inode) : 0;
		} else if (cend == end && end % cb && end >= size &&
			   (ret = hold_cluster(fs, inode, dk, cidx, at, s, cend - *pos))) {
			ret = ret < 0 ? ret : 0;
		} else {
			ret = dclu_write(fs, inode, dk, s, *pos, whole_to(*pos, cend, end, cb, h, hidx),
					 pos);
			continue; /* *POS is where it got */
		}
		if (!ret)
			*pos = cend;
	}
	return ret;
}

int data_write(struct zlfs_fs *fs, struct node_page *inode, const void *buf, size_t size,
	       uint64_t off)
{
	struct zlfs_inode *in = inode_of(inode);
	uint8_t *blk = zdev_buf_alloc(ZLFS_BLOCK_SIZE), *scratch = NULL;
	uint64_t pos = off, end = off + size, hidx;
	uint32_t hn;
	/* the write ends in a partial block, which the next write is likely to go on in: an
	 * append, or a log rewritten in place from its start (SQLite's WAL once it wraps) */
	int hold = end % ZLFS_BLOCK_SIZE && S_ISREG(le32_get(in->mode));
	int clustered = data_cluster_log(inode) != 0; /* a compressed file: by clusters */
	struct dkey dk;
	int ret = blk ? dkey_get(fs, inode, &dk) : -ENOMEM;

	if (!ret && size >= 2 * ZLFS_BLOCK_SIZE && dk.on && !clustered &&
	    !(scratch = zdev_buf_alloc((size_t)WRITE_RUN * ZLFS_BLOCK_SIZE)))
		ret = -ENOMEM;
	data_lane_enter(fs, inode);
	/* A write that begins past the held span leaves it whole: zeros up to its end. */
	if (!ret && tail_block(fs, inode->nid, &hidx, &hn) && off >= (hidx + hn) * ZLFS_BLOCK_SIZE)
		ret = tail_write(fs, inode);
	if (!ret && clustered)
		ret = write_clusters(fs, inode, &dk, buf, off, end, &pos);
	while (!ret && pos < end) {
		uint64_t idx = pos / ZLFS_BLOCK_SIZE, at = pos % ZLFS_BLOCK_SIZE;
		uint64_t n = ZLFS_BLOCK_SIZE - at < end - pos ? ZLFS_BLOCK_SIZE - at : end - pos;

		if (!at && (scratch || !dk.on) && end - pos >= 2 * ZLFS_BLOCK_SIZE) {
			uint64_t whole = (end - pos) / ZLFS_BLOCK_SIZE;

			ret = data_write_run(fs, inode, &dk, idx, whole < WRITE_RUN ? (uint32_t)whole
					: WRITE_RUN, (const uint8_t *)buf + (pos - off), scratch);
			if (ret > 0) {
				held_replaced(fs, inode, idx, (uint64_t)ret);
				pos += (uint64_t)ret * ZLFS_BLOCK_SIZE;
				ret = 0;
			}
			continue;
		}
		ret = write_piece(fs, inode, &dk, idx, at, (const uint8_t *)buf + (pos - off), n,
				  blk, hold && pos + n == end);
		if (!ret)
			pos += n;
	}
	if (blk)
		dkey_put(&dk);
	zdev_buf_free(blk);
	zdev_buf_free(scratch);
	if (pos > off) {
		if (pos > le64_get(in->size))
			in->size = le64_put(pos);
		ATOMIC_ADD(&fs->user_bytes, pos - off);
		node_dirty(fs, inode);
		return (int)(pos - off);
	}
	return ret;
}

/* Zero the bytes of block IDX from byte AT on (the part past a new end of file). */
static int zero_tail(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint64_t at,
		     uint64_t len)
{
	uint8_t *blk;
	uint32_t addr;
	struct dkey dk;
	int ret = data_addr(fs, inode, idx, &addr);

	if (ret || addr == ZLFS_ADDR_NULL)
		return ret;
	blk = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!blk)
		return -ENOMEM;
	ret = dkey_get(fs, inode, &dk);
	if (!ret)
		ret = data_read_block(fs, inode, &dk, idx, blk);
	if (!ret) {
		memset(blk + at, 0, len);
		ret = data_write_block(fs, inode, &dk, idx, blk);
	}
	dkey_put(&dk);
	zdev_buf_free(blk);
	return ret;
}

/* Truncating frees the blocks past the new size, also to the size the file has: a
 * KEEP_SIZE reservation past the end of file goes with any truncate that does not grow the
 * file, as on ext4 (ftruncate to the same size is how a program gives one back). */
int data_set_size(struct zlfs_fs *fs, struct node_page *inode, uint64_t size)
{
	struct zlfs_inode *in = inode_of(inode);
	uint64_t old = le64_get(in->size), hidx, from;
	uint32_t hn = 1;
	uint8_t *h;
	int ret = 0, cut = 0;

	if (size >= data_max_blocks() * ZLFS_BLOCK_SIZE)
		return -EFBIG;
	tail_forget_clean(fs, inode->nid); /* a held span changes below, not a clean copy */
	h = tail_block(fs, inode->nid, &hidx, &hn);
	ret = inline_resize(fs, inode, size);
	if (ret)
		return ret < 0 ? ret : 0;
	/* The held span goes with a new end before it, is whole with one past it, and else
	 * keeps the end of file, zeroed past it in memory. */
	if (h && size <= hidx * ZLFS_BLOCK_SIZE)
		tail_drop(fs, inode->nid);
	else if (h && size >= (hidx + hn) * ZLFS_BLOCK_SIZE)
		ret = tail_write(fs, inode);
	if (ret)
		return ret;
	h = tail_block(fs, inode->nid, &hidx, &hn);
	from = (size + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE;
	if (h) /* the new end is in the held span: its write replaces the blocks it zeroes below */
		from = hidx + hn;
	else if (size <= old && data_cluster_log(inode)) /* a compressed cluster goes whole or not */
		ret = cut = dclu_cut(fs, inode, size, old, &from);
	if (ret < 0)
		return ret;
	ret = size <= old ? data_truncate_blocks(fs, inode, from) : 0;
	/* past the new end, zeros: in memory, in its block, or (CUT) in its compressed cluster */
	if (!ret && size < old && h) {
		memset(h + (size - hidx * ZLFS_BLOCK_SIZE), 0,
		       hn * ZLFS_BLOCK_SIZE - (size - hidx * ZLFS_BLOCK_SIZE));
		tail_touch(fs, inode->nid, size / ZLFS_BLOCK_SIZE, hidx + hn);
	} else if (!ret && !cut && size < old && size % ZLFS_BLOCK_SIZE)
		ret = zero_tail(fs, inode, size / ZLFS_BLOCK_SIZE, size % ZLFS_BLOCK_SIZE,
				ZLFS_BLOCK_SIZE - size % ZLFS_BLOCK_SIZE);
	if (ret)
		return ret;
	in->size = le64_put(size);
	data_changed(fs, inode);
	node_dirty(fs, inode);
	return 0;
}

/* Zero bytes [FROM, TO) of block IDX, as far as they lie before the end of file FSIZE: the
 * bytes past it read as zeros already, and rewriting a block for them would spend a block. */
static int zero_part(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint64_t from,
		     uint64_t to, uint64_t fsize)
{
	uint64_t base = idx * ZLFS_BLOCK_SIZE;

	if (base + to > fsize)
		to = fsize > base ? fsize - base : 0;
	return from < to ? zero_tail(fs, inode, idx, from, to - from) : 0;
}

/* The whole blocks of the range go wherever they are, before or past the end of file: past
 * it they hold only reservations (RocksDB preallocates each file with KEEP_SIZE and punches
 * the unused rest past the end when it closes it), which would otherwise stay taken until the
 * file is deleted. Partial blocks at the ends are zeroed, within the file only. */
int data_punch(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, fsize = le64_get(inode_of(inode)->size), first, last, at;
	/* A punch within the file writes the held block first, so its zeros land on the
	 * device's copy; past the end of file the held block's bytes are unchanged. */
	int ret = off < fsize ? tail_write(fs, inode) : 0;

	tail_forget_clean(fs, inode->nid);
	if (ret)
		return ret;
	if (inline_is(inode))
		return inline_punch(fs, inode, off, len);
	if (end < off || end > data_max_blocks() * ZLFS_BLOCK_SIZE) /* wrapped, or past what a tree holds */
		end = data_max_blocks() * ZLFS_BLOCK_SIZE;
	if (off < end && data_cluster_log(inode))
		ret = dclu_punch_ends(fs, inode, &off, &end, fsize);
	if (ret || off >= end)
		return ret;
	first = (off + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE;
	at = off % ZLFS_BLOCK_SIZE;
	last = end / ZLFS_BLOCK_SIZE;
	if (at)
		ret = zero_part(fs, inode, off / ZLFS_BLOCK_SIZE, at,
				end - off < ZLFS_BLOCK_SIZE - at ? at + (end - off) : ZLFS_BLOCK_SIZE,
				fsize);
	if (!ret && end % ZLFS_BLOCK_SIZE && last >= first)
		ret = zero_part(fs, inode, last, 0, end % ZLFS_BLOCK_SIZE, fsize);
	if (!ret && first < last)
		ret = data_drop_blocks(fs, inode, first, last);
	return ret;
}
