/*
 * data.c - file data: mapping file blocks to device blocks through the node tree, reading,
 * writing, truncating and punching holes.
 *
 * Owns: the shape of a file's tree (979 addresses in the inode, two direct nodes, two
 * indirect, one double-indirect, 1014 entries per node) and the node offsets ("ofs") that
 * name each tree position for GC and roll-forward. Holes are null addresses and read as
 * zeros. Every data block write appends a new copy and re-points the owning node.
 * Contents of an encrypted file are ciphertext below this file: a block is encrypted
 * (AES-256-XTS, tweak = its block number in the file) as it enters the log, so the zone write
 * buffer, the device and GC only ever see ciphertext, and decrypted after it is read. Holes
 * stay holes and read as zeros. Reading is in data_read.c.
 * An inline file (inline.c) has no tree: reads, sizes and punches of one are inline.c's, and
 * mapping one of its blocks is refused.
 * May call: node.c, segment.c (through core.h), inode.c, fcrypt.c, inline.c, tailbuf.c,
 * crypto/zcrypt.h, log.h.
 */
#include "data_int.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NA ZLFS_NODE_ADDRS
#define S_ISREG_OR_LNK(m) (S_ISREG(m) || S_ISLNK(m))
#define IA ZLFS_INODE_ADDRS
#define L1_END ((uint64_t)IA + 2ULL * NA)
#define L2_END (L1_END + 2ULL * NA * NA)
#define L3_END (L2_END + (uint64_t)NA * NA * NA)

/* The path from the inode to block IDX: the inode's nid slot, then child slots, and the node
 * offset (ofs) of each node on the way. Depth 0 means the inode's own address array. */
struct dpath {
	int depth;
	uint32_t slot[4];
	uint32_t ofs[4];
};

static int data_path(uint64_t idx, struct dpath *p)
{
	if (idx < IA) {
		p->depth = 0;
		p->slot[0] = (uint32_t)idx;
		return 0;
	}
	idx -= IA;
	if (idx < 2ULL * NA) {
		p->depth = 1;
		p->slot[0] = (uint32_t)(idx / NA);
		p->slot[1] = (uint32_t)(idx % NA);
		p->ofs[1] = 1 + p->slot[0];
		return 0;
	}
	idx -= 2ULL * NA;
	if (idx < 2ULL * NA * NA) {
		p->depth = 2;
		p->slot[0] = 2 + (uint32_t)(idx / ((uint64_t)NA * NA));
		p->slot[1] = (uint32_t)(idx / NA % NA);
		p->slot[2] = (uint32_t)(idx % NA);
		p->ofs[1] = 3 + (p->slot[0] - 2);
		p->ofs[2] = 5 + (p->slot[0] - 2) * NA + p->slot[1];
		return 0;
	}
	idx -= 2ULL * NA * NA;
	if (idx < (uint64_t)NA * NA * NA) {
		p->depth = 3;
		p->slot[0] = 4;
		p->slot[1] = (uint32_t)(idx / ((uint64_t)NA * NA));
		p->slot[2] = (uint32_t)(idx / NA % NA);
		p->slot[3] = (uint32_t)(idx % NA);
		p->ofs[1] = 5 + 2 * NA;
		p->ofs[2] = 6 + 2 * NA + p->slot[1];
		p->ofs[3] = 6 + 3 * NA + p->slot[1] * NA + p->slot[2];
		return 0;
	}
	return -EFBIG;
}

le32 *node_slot(struct node_page *np, uint32_t slot)
{
	const struct zlfs_blkhdr *h = np->buf;

	if (le16_get(h->kind) == ZLFS_KIND_INODE)
		return slot < IA ? &inode_of(np)->addr[slot] : &inode_of(np)->nid[slot - IA];
	return &((struct zlfs_node *)np->buf)->ptr[slot];
}

/* Child node at SLOT of PARENT, created when CREATE (a direct node at the last level). */
static int child_get(struct zlfs_fs *fs, struct node_page *parent, uint32_t slot, int last,
		     uint32_t ofs, int create, struct node_page **out)
{
	le32 *p = node_slot(parent, slot);
	uint32_t nid = le32_get(*p), ino = le32_get(((struct zlfs_blkhdr *)parent->buf)->ino);
	int ret;

	if (nid) {
		ret = node_get_as(fs, nid, ino, last ? ZLFS_KIND_DNODE : ZLFS_KIND_INDNODE, ofs, out);
		if (!ret)
			node_set_hot(fs, *out, parent->hot);
		return ret;
	}
	if (!create)
		return -ENOENT;
	ret = node_alloc_nid(fs, ino, &nid);
	if (ret)
		return ret;
	ret = node_new(fs, nid, ino, last ? ZLFS_KIND_DNODE : ZLFS_KIND_INDNODE, out);
	if (ret) {
		node_free(fs, nid);
		return ret;
	}
	((struct zlfs_node *)(*out)->buf)->ofs = le32_put(ofs);
	node_set_hot(fs, *out, parent->hot);
	*p = le32_put(nid);
	node_dirty(fs, parent);
	return 0;
}

int data_ref(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, int create,
	     struct dref *ref)
{
	struct node_page *cur = inode, *next;
	struct dpath p;
	int ret = data_path(idx, &p), d;

	if (inline_is(inode)) /* its address area holds bytes: a caller that forgot to convert */
		return -EUCLEAN;
	if (ret)
		return ret;
	node_ref(fs, inode);
	if (p.depth == 0) {
		ref->np = inode;
		ref->slot = p.slot[0];
		return 0;
	}
	for (d = 0; d < p.depth; d++) {
		uint32_t slot = d == 0 ? IA + p.slot[0] : p.slot[d];

		ret = child_get(fs, cur, slot, d + 1 == p.depth, p.ofs[d + 1], create, &next);
		node_put(fs, cur);
		if (ret)
			return ret;
		cur = next;
	}
	ref->np = cur;
	ref->slot = p.slot[p.depth];
	return 0;
}

/* The pointer of file block IDX as the tree holds it (ZLFS_ADDR_NULL where no node maps it). */
static int slot_raw(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint32_t *raw)
{
	struct dref ref;
	int ret = data_ref(fs, inode, idx, 0, &ref);

	*raw = ZLFS_ADDR_NULL;
	if (ret == -ENOENT || ret == -EFBIG)
		return 0;
	if (ret)
		return ret;
	*raw = le32_get(*node_slot(ref.np, ref.slot));
	node_put(fs, ref.np);
	return 0;
}

int data_addr(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint32_t *addr)
{
	int ret = slot_raw(fs, inode, idx, addr);

	if (*addr == ZLFS_ADDR_PREALLOC) /* reserved, never written: reads as a hole */
		*addr = ZLFS_ADDR_NULL;
	return ret;
}

/* The file changed: read-ahead windows of it no longer hold. */
static void data_changed(struct zlfs_fs *fs, struct node_page *inode)
{
	inode->data_gen = ATOMIC_ADD(&fs->data_gen_seq, 1);
}

/* ---- warm data lanes ----------------------------------------------------------------------
 * With 10 logs the warm data log has four lanes, each its own open zone (docs/design.md,
 * "Warm data lanes"). A lane belongs to the file that last wrote to it until that file is
 * released (closed) or has not written for LANE_IDLE_NS. A write request keeps to its file's
 * lane while that is free or the file's own, and otherwise takes a free lane, sharing its
 * current one only when none is free. So one writer keeps to WARM_DATA as it would without
 * lanes, files written at the same time go to zones the device writes in parallel, and each
 * file's data stays together. */
#define LANE_IDLE_NS 1000000000ull

static uint64_t lane_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Take lane I for NID if it is free, stale or NID's already. */
static int lane_take(struct zlfs_fs *fs, uint32_t i, uint32_t nid, uint64_t now)
{
	uint32_t owner = ATOMIC_GET(&fs->lanes[i].owner);

	if (owner && owner != nid && now - ATOMIC_GET(&fs->lanes[i].last_ns) < LANE_IDLE_NS)
		return 0;
	if (owner != nid && !__atomic_compare_exchange_n(&fs->lanes[i].owner, &owner, nid, 0,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(&fs->lanes[i].last_ns, now, __ATOMIC_RELAXED);
	return 1;
}

static void lane_enter(struct zlfs_fs *fs, struct node_page *inode)
{
	uint32_t n = fs->nr_lanes, cur = inode->lane ? inode->lane - 1u : 0, i;
	uint64_t now;

	if (n < 2)
		return;
	now = lane_clock();
	for (i = 0; i < n && !lane_take(fs, (cur + i) % n, inode->nid, now); i++)
		;
	inode->lane = (uint8_t)(1 + (i < n ? (cur + i) % n : cur));
}

void data_lane_release(struct zlfs_fs *fs, uint32_t ino)
{
	for (uint32_t i = 0; i < fs->nr_lanes; i++) {
		uint32_t owner = ino;

		__atomic_compare_exchange_n(&fs->lanes[i].owner, &owner, 0, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	}
}

static enum zlfs_log_type data_lane(const struct zlfs_fs *fs, const struct node_page *inode)
{
	return fs->nr_lanes >= 2 && inode->lane ? seg_lane_type(inode->lane - 1u)
						 : ZLFS_LOG_WARM_DATA;
}

/* ---- hot files ------------------------------------------------------------------------------
 * User data of a file rewritten often goes to a log of its own (docs/design.md, "Hot and warm
 * user data"): zones that fill with such data die whole before GC reaches them, where mixed
 * with data that stays they would be moved again and again. A file is hot when its data is
 * replaced again within half the turnover, the user bytes it takes to write the device's
 * valid data once over: under uniform rewrites a file's turn comes once per turnover. The
 * clock counts user bytes, not seconds, so the split does not depend on the write rate. One
 * rewrite of a file is one episode: writes within twice its size of user bytes since the
 * episode began continue it, so a rewrite cut into requests is not its own hot successor.
 * Appending to a file, and the first rewrite seen since its inode page was read, are warm.
 * State is in memory only: no format change, and a remount starts all files warm. */
#define HEAT_EPISODE_MIN (8ull << 20)

static enum zlfs_log_type data_user_log(struct zlfs_fs *fs, struct node_page *inode,
					int rewrite)
{
	uint64_t now = ATOMIC_GET(&fs->user_bytes) + 1, size = le64_get(inode_of(inode)->size);
	uint64_t episode = 2 * size > HEAT_EPISODE_MIN ? 2 * size : HEAT_EPISODE_MIN;
	uint64_t since = now - inode->heat_at, turnover;

	if (!inode->heat_at || since >= episode) {
		rewrite |= inode->heat_rewrite;
		if (rewrite && inode->heat_at) {
			zlock_lock(&fs->seg_lock);
			turnover = fs->valid_blocks * ZLFS_BLOCK_SIZE;
			zlock_unlock(&fs->seg_lock);
			inode->heat_hot = since < turnover / 2;
		} else {
			inode->heat_hot = 0;
		}
		inode->heat_at = now;
		inode->heat_rewrite = 0;
	}
	return inode->heat_hot ? SEG_LOG_HOT_USER : data_lane(fs, inode);
}

/* Append user data to log TYPE. Data that finds no room there tries the warm data log and
 * its lanes, whose open zones may still have some: a full hot zone, or one lane's full zone,
 * must not make a device with room say ENOSPC (statfs counts the room of every lane). */
static int data_append_n(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf,
			 uint32_t n, uint32_t nid, uint16_t ofs, uint32_t *addr)
{
	int ret = seg_append_n(fs, type, buf, n, nid, ofs, addr);

	for (uint32_t i = 0; ret == -ENOSPC && i < fs->nr_lanes; i++)
		if (seg_lane_type(i) != type)
			ret = seg_append_n(fs, seg_lane_type(i), buf, n, nid, ofs, addr);
	return ret;
}

/* Whether a slot holds data a write would replace (not a hole, not a reservation). */
static int slot_has_data(uint32_t addr) { return addr && addr != ZLFS_ADDR_PREALLOC; }

int data_put_block(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, const void *buf,
		   enum zlfs_log_type type)
{
	struct zlfs_inode *in = inode_of(inode);
	struct dref ref;
	uint32_t old, addr;
	le32 *slot;
	int ret = data_ref(fs, inode, idx, 1, &ref);

	if (ret)
		return ret;
	slot = node_slot(ref.np, ref.slot);
	old = le32_get(*slot);
	if (old == ZLFS_ADDR_PREALLOC) /* the block's reservation pays for it */
		seg_prealloc_add(fs, -1);
	if (type == ZLFS_LOG_WARM_DATA) /* user data: by how soon the file's is replaced */
		type = data_user_log(fs, inode, slot_has_data(old));
	ret = data_append_n(fs, type, buf, 1, ref.np->nid, (uint16_t)ref.slot, &addr);
	ret = ret < 0 ? ret : 0;
	if (ret && old == ZLFS_ADDR_PREALLOC)
		seg_prealloc_add(fs, 1);
	if (!ret) {
		data_changed(fs, inode);
		seg_mark(fs, old, 0);
		*slot = le32_put(addr);
		node_dirty(fs, ref.np);
		if (!old) {
			in->blocks = le64_put(le64_get(in->blocks) + 1);
			node_dirty(fs, inode);
		}
	}
	node_put(fs, ref.np);
	return ret;
}

int dkey_get(struct zlfs_fs *fs, struct node_page *inode, struct dkey *dk)
{
	dk->on = fcrypt_is_encrypted(inode) && S_ISREG_OR_LNK(le32_get(inode_of(inode)->mode));
	return dk->on ? fcrypt_file_key(fs, inode, &dk->k) : 0;
}

void dkey_put(struct dkey *dk)
{
	if (dk->on)
		zcrypt_wipe(&dk->k, sizeof(dk->k));
}

/* File block IDX, at ADDR (ZLFS_ADDR_NULL: a hole, zeros), in plaintext. */
static int read_addr(struct zlfs_fs *fs, const struct dkey *dk, uint64_t idx, uint32_t addr,
		     uint8_t *buf)
{
	int ret;

	if (addr == ZLFS_ADDR_NULL) {
		memset(buf, 0, ZLFS_BLOCK_SIZE);
		return 0;
	}
	ret = seg_read(fs, addr, buf);
	if (!ret && dk->on)
		ret = zcrypt_xts_decrypt(&dk->k, idx, buf, buf, ZLFS_BLOCK_SIZE);
	return ret;
}

/* File block IDX in plaintext (zeros for a hole). */
static int read_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		      uint64_t idx, uint8_t *buf)
{
	uint32_t addr;
	int ret = data_addr(fs, inode, idx, &addr);

	return ret ? ret : read_addr(fs, dk, idx, addr, buf);
}

/* Append plaintext block BUF as file block IDX; BUF is scratch (encrypted in place). */
static int write_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		       uint64_t idx, uint8_t *buf)
{
	int ret = dk->on ? zcrypt_xts_encrypt(&dk->k, idx, buf, buf, ZLFS_BLOCK_SIZE) : 0;

	return ret ? ret : data_put_block(fs, inode, idx, buf, ZLFS_LOG_WARM_DATA);
}

int data_write_held(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx,
		    const uint8_t *plain)
{
	uint8_t *scratch = NULL;
	const uint8_t *b = plain;
	struct dkey dk;
	int ret = dkey_get(fs, inode, &dk);

	if (!ret && dk.on) { /* the held plaintext stays as it is should the write fail */
		scratch = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
		ret = scratch ? zcrypt_xts_encrypt(&dk.k, idx, plain, scratch, ZLFS_BLOCK_SIZE)
			      : -ENOMEM;
		b = scratch;
	}
	if (!ret)
		ret = data_put_block(fs, inode, idx, b, ZLFS_LOG_WARM_DATA);
	/* Its room was owed while it was held; should another writer's race have taken it, the
	 * hot data log, which may use the GC reserve as directory blocks do, takes the block:
	 * a write() that returned must not fail later for want of room. */
	if (ret == -ENOSPC)
		ret = data_put_block(fs, inode, idx, b, ZLFS_LOG_HOT_DATA);
	dkey_put(&dk);
	zdev_buf_free(scratch);
	return ret;
}


/* Whole blocks are written in runs of up to WRITE_RUN that share one owner node: mapped,
 * appended and re-pointed with one hold of the node and one acquisition of each lock. */
#define WRITE_RUN 64u

/* Write up to N whole blocks of SRC as file blocks IDX... (encrypted into SCRATCH, WRITE_RUN
 * blocks, for an encrypted file): how many were written, or a negative errno when none was. */
static int write_run(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		     uint64_t idx, uint32_t n, const uint8_t *src, uint8_t *scratch)
{
	uint32_t addr[WRITE_RUN], old[WRITE_RUN], fresh = 0, k, i, reserved = 0, replaced = 0;
	struct zlfs_inode *in = inode_of(inode);
	struct dref ref;
	int ret = data_ref(fs, inode, idx, 1, &ref);

	if (ret)
		return ret;
	k = n < WRITE_RUN ? n : WRITE_RUN;
	k = k < slots_left(&ref) ? k : slots_left(&ref);
	for (i = 0; i < k; i++) { /* reserved blocks pay for themselves, as in data_put_block */
		uint32_t a = le32_get(*node_slot(ref.np, ref.slot + i));

		reserved += a == ZLFS_ADDR_PREALLOC;
		replaced += slot_has_data(a);
	}
	if (reserved)
		seg_prealloc_add(fs, -(int64_t)reserved);
	for (i = 0; !ret && dk->on && i < k; i++) /* plaintext goes to the buffer as it is */
		ret = zcrypt_xts_encrypt(&dk->k, idx + i, src + (size_t)i * ZLFS_BLOCK_SIZE,
					 scratch + (size_t)i * ZLFS_BLOCK_SIZE, ZLFS_BLOCK_SIZE);
	if (!ret)
		ret = data_append_n(fs, data_user_log(fs, inode, replaced > 0),
				    dk->on ? scratch : src, k, ref.np->nid, (uint16_t)ref.slot, addr);
	for (i = 0; ret > 0 && i < (uint32_t)ret; i++) {
		le32 *slot = node_slot(ref.np, ref.slot + i);

		old[i] = le32_get(*slot);
		fresh += !old[i]; /* a reserved block counts in the file's blocks already */
		reserved -= old[i] == ZLFS_ADDR_PREALLOC;
		*slot = le32_put(addr[i]);
	}
	if (reserved) /* reservations of blocks this run did not reach stay */
		seg_prealloc_add(fs, (int64_t)reserved);
	if (ret > 0) {
		data_changed(fs, inode);
		seg_mark_n(fs, old, (uint32_t)ret, 0);
		node_dirty(fs, ref.np);
		if (fresh) {
			in->blocks = le64_put(le64_get(in->blocks) + fresh);
			node_dirty(fs, inode);
		}
	}
	node_put(fs, ref.np);
	return ret;
}

/* ---- partial blocks in memory ----------------------------------------------------------
 * The block holding a regular file's end of file, when that end is not at a block boundary,
 * is held in memory (tailbuf.c) rather than appended anew by every write that adds to it: a
 * write of 1 KB no longer costs 4 KiB of device. It is held by the write that makes it the
 * last block (a write ending at or past the end of file), changed in memory by later writes,
 * and written as any block once a write fills it or goes past it (it is whole then), or when
 * tailbuf.c says (fsync, release, checkpoint, age). Truncation drops it or zeroes it in
 * memory; punching and fallocate write it out first. */

/* Hold block IDX, N bytes of SRC at AT in it: 1 when held, 0 when the bound or the free
 * space says to write it through, or a negative errno. */
static int hold_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		      uint64_t idx, uint64_t at, const uint8_t *src, uint64_t n)
{
	uint32_t raw;
	uint8_t *h;
	int ret;

	if (idx >= L3_END) /* past what a tree maps: written through, which says EFBIG */
		return 0;
	ret = slot_raw(fs, inode, idx, &raw);
	if (ret || !(h = tail_hold(fs, inode->nid, idx, !raw)))
		return ret;
	ret = read_addr(fs, dk, idx, raw == ZLFS_ADDR_PREALLOC ? ZLFS_ADDR_NULL : raw, h);
	if (ret) {
		tail_drop(fs, inode->nid);
		return ret;
	}
	memcpy(h + at, src, n);
	data_changed(fs, inode);
	return 1;
}

/* Write N bytes of SRC at AT into block IDX, through BLK (scratch): into the held block if it
 * is IDX (written out once complete), held (MAY_HOLD: the write's last, partial block, at or
 * past the end of file), or read, changed and appended. */
static int write_piece(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		       uint64_t idx, uint64_t at, const uint8_t *src, uint64_t n, uint8_t *blk,
		       int may_hold)
{
	uint64_t hidx;
	uint8_t *h = tail_block(fs, inode->nid, &hidx);
	int ret = 0;

	if (h && hidx == idx) {
		memcpy(h + at, src, n);
		data_changed(fs, inode);
		return at + n == ZLFS_BLOCK_SIZE ? tail_write(fs, inode) : 0;
	}
	if (may_hold && (ret = hold_block(fs, inode, dk, idx, at, src, n)))
		return ret < 0 ? ret : 0;
	if (n < ZLFS_BLOCK_SIZE)
		ret = read_block(fs, inode, dk, idx, blk);
	if (ret)
		return ret;
	memcpy(blk + at, src, n);
	return write_block(fs, inode, dk, idx, blk);
}

/* Whole blocks [IDX, IDX+N) were written: a held copy of one of them is stale. */
static void held_replaced(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint64_t n)
{
	uint64_t hidx;

	if (tail_block(fs, inode->nid, &hidx) && hidx >= idx && hidx - idx < n)
		tail_drop(fs, inode->nid);
}

int data_write(struct zlfs_fs *fs, struct node_page *inode, const void *buf, size_t size,
	       uint64_t off)
{
	struct zlfs_inode *in = inode_of(inode);
	uint8_t *blk = zdev_buf_alloc(ZLFS_BLOCK_SIZE), *scratch = NULL;
	uint64_t pos = off, end = off + size, hidx;
	/* the write ends in a partial block that will hold the end of file */
	int hold = end % ZLFS_BLOCK_SIZE && end >= le64_get(in->size) &&
		   S_ISREG(le32_get(in->mode));
	struct dkey dk;
	int ret = blk ? dkey_get(fs, inode, &dk) : -ENOMEM;

	if (!ret && size >= 2 * ZLFS_BLOCK_SIZE && dk.on &&
	    !(scratch = zdev_buf_alloc((size_t)WRITE_RUN * ZLFS_BLOCK_SIZE)))
		ret = -ENOMEM;
	lane_enter(fs, inode);
	/* A write that begins past the held block leaves it whole: zeros up to its end. */
	if (!ret && tail_block(fs, inode->nid, &hidx) && off >= (hidx + 1) * ZLFS_BLOCK_SIZE)
		ret = tail_write(fs, inode);
	while (!ret && pos < end) {
		uint64_t idx = pos / ZLFS_BLOCK_SIZE, at = pos % ZLFS_BLOCK_SIZE;
		uint64_t n = ZLFS_BLOCK_SIZE - at < end - pos ? ZLFS_BLOCK_SIZE - at : end - pos;

		if (!at && (scratch || !dk.on) && end - pos >= 2 * ZLFS_BLOCK_SIZE) {
			uint64_t whole = (end - pos) / ZLFS_BLOCK_SIZE;

			ret = write_run(fs, inode, &dk, idx, whole < WRITE_RUN ? (uint32_t)whole
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

/* ---- truncation and holes -----------------------------------------------------------------
 * Blocks in [FROM, TO) are dropped by walking the tree: a node whose whole range lies inside
 * is freed with everything under it, a node straddling an end keeps its other entries, and
 * nodes outside are not read. So punching a hole costs the nodes it touches, not one lookup
 * per block of the range (a terabyte-sized punch would otherwise hold the file's lock, and the
 * checkpoint behind it, for minutes). */

static void drop_block(struct zlfs_fs *fs, struct node_page *inode, le32 *slot)
{
	struct zlfs_inode *in = inode_of(inode);
	uint32_t addr = le32_get(*slot);

	if (!addr)
		return;
	data_changed(fs, inode);
	inode->heat_rewrite |= slot_has_data(addr); /* a truncate and rewrite replaces data too */
	if (addr == ZLFS_ADDR_PREALLOC)
		seg_prealloc_add(fs, -1); /* the reservation goes with the pointer */
	seg_mark(fs, addr, 0);
	*slot = 0;
	in->blocks = le64_put(le64_get(in->blocks) - 1);
	node_dirty(fs, inode);
}

struct drange {
	uint64_t from, to;
};

uint32_t data_child_ofs(uint32_t ofs, uint32_t i)
{
	static const uint32_t of_inode[ZLFS_INODE_NIDS] = {1, 2, 3, 4, 5 + 2 * NA};

	if (ofs == 0)
		return i < ZLFS_INODE_NIDS ? of_inode[i] : UINT32_MAX;
	if (ofs == 3 || ofs == 4) /* the inode's indirect nodes: direct children */
		return 5 + (ofs - 3) * NA + i;
	if (ofs == 5 + 2 * NA) /* the double-indirect node: indirect children */
		return 6 + 2 * NA + i;
	return 6 + 3 * NA + (ofs - (6 + 2 * NA)) * NA + i; /* their direct children */
}

/* Drop [R->from, R->to) from the subtree of node NID (at node offset OFS) covering
 * [BASE, BASE + span), where DEPTH counts node levels below it (0: a direct node). */
static int trunc_node(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid, uint32_t ofs,
		      int depth, uint64_t base, const struct drange *r)
{
	struct node_page *np;
	uint64_t span = 1;
	uint32_t i;
	int d, ret = node_get_as(fs, nid, inode->nid, depth ? ZLFS_KIND_INDNODE : ZLFS_KIND_DNODE,
				 ofs, &np);

	if (ret)
		return ret;
	for (d = 0; d < depth; d++)
		span *= NA;
	for (i = 0; i < NA && !ret; i++) {
		uint64_t cb = base + i * span;
		le32 *slot = &((struct zlfs_node *)np->buf)->ptr[i];
		uint32_t child = le32_get(*slot);

		if (cb + span <= r->from || cb >= r->to || !child)
			continue;
		if (depth == 0) {
			drop_block(fs, inode, slot);
			node_dirty(fs, np);
			continue;
		}
		ret = trunc_node(fs, inode, child, data_child_ofs(ofs, i), depth - 1, cb, r);
		if (!ret && cb >= r->from && cb + span <= r->to) {
			node_free(fs, child);
			*slot = 0;
			node_dirty(fs, np);
		}
	}
	node_put(fs, np);
	return ret;
}

static int drop_range(struct zlfs_fs *fs, struct node_page *inode, const struct drange *r)
{
	static const uint64_t base[ZLFS_INODE_NIDS] = {IA, IA + NA, L1_END, L1_END + (uint64_t)NA * NA,
						       L2_END};
	static const uint64_t end[ZLFS_INODE_NIDS] = {IA + NA, L1_END, L1_END + (uint64_t)NA * NA,
						      L2_END, L3_END};
	static const int depth[ZLFS_INODE_NIDS] = {0, 0, 1, 1, 2};
	struct zlfs_inode *in = inode_of(inode);
	uint64_t i;
	int k, ret = 0;

	if (!le64_get(in->blocks)) { /* no data block anywhere: only the nodes may need going */
		for (k = 0; k < ZLFS_INODE_NIDS && !in->nid[k]; k++)
			;
		if (k == ZLFS_INODE_NIDS)
			return 0;
	}
	for (i = r->from; i < IA && i < r->to; i++)
		drop_block(fs, inode, &in->addr[i]);
	for (k = 0; k < ZLFS_INODE_NIDS && !ret; k++) {
		uint32_t nid = le32_get(in->nid[k]);

		if (!nid || end[k] <= r->from || base[k] >= r->to)
			continue;
		ret = trunc_node(fs, inode, nid, data_child_ofs(0, (uint32_t)k), depth[k], base[k], r);
		if (!ret && base[k] >= r->from && end[k] <= r->to) {
			node_free(fs, nid);
			in->nid[k] = 0;
			node_dirty(fs, inode);
		}
	}
	return ret;
}

int data_drop_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from, uint64_t to)
{
	struct drange r = {from, to};

	return drop_range(fs, inode, &r);
}

uint64_t data_max_blocks(void) { return L3_END; }

int data_truncate_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from)
{
	struct drange r = {from, UINT64_MAX};

	return drop_range(fs, inode, &r);
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
		ret = read_block(fs, inode, &dk, idx, blk);
	if (!ret) {
		memset(blk + at, 0, len);
		ret = write_block(fs, inode, &dk, idx, blk);
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
	uint64_t old = le64_get(in->size), hidx;
	uint8_t *h = tail_block(fs, inode->nid, &hidx);
	int ret = 0;

	if (size >= L3_END * ZLFS_BLOCK_SIZE)
		return -EFBIG;
	ret = inline_resize(fs, inode, size);
	if (ret)
		return ret < 0 ? ret : 0;
	/* The held block goes with a new end before it, is whole with one past it, and else
	 * keeps the end of file, zeroed past it in memory. */
	if (h && size <= hidx * ZLFS_BLOCK_SIZE)
		tail_drop(fs, inode->nid);
	else if (h && size >= (hidx + 1) * ZLFS_BLOCK_SIZE)
		ret = tail_write(fs, inode);
	if (ret)
		return ret;
	h = tail_block(fs, inode->nid, &hidx);
	if (size <= old)
		ret = data_truncate_blocks(fs, inode, (size + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE);
	if (!ret && size < old && size % ZLFS_BLOCK_SIZE && h)
		memset(h + size % ZLFS_BLOCK_SIZE, 0, ZLFS_BLOCK_SIZE - size % ZLFS_BLOCK_SIZE);
	else if (!ret && size < old && size % ZLFS_BLOCK_SIZE)
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
	uint64_t end = off + len, fsize = le64_get(inode_of(inode)->size);
	uint64_t first = (off + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE, last;
	uint64_t at = off % ZLFS_BLOCK_SIZE;
	/* A punch within the file writes the held block first, so its zeros land on the
	 * device's copy; past the end of file the held block's bytes are unchanged. */
	int ret = off < fsize ? tail_write(fs, inode) : 0;

	if (ret)
		return ret;
	if (inline_is(inode))
		return inline_punch(fs, inode, off, len);
	if (end < off || end > L3_END * ZLFS_BLOCK_SIZE) /* wrapped, or past what a tree holds */
		end = L3_END * ZLFS_BLOCK_SIZE;
	if (off >= end)
		return 0;
	last = end / ZLFS_BLOCK_SIZE;
	if (at)
		ret = zero_part(fs, inode, off / ZLFS_BLOCK_SIZE, at,
				end - off < ZLFS_BLOCK_SIZE - at ? at + (end - off) : ZLFS_BLOCK_SIZE,
				fsize);
	if (!ret && end % ZLFS_BLOCK_SIZE && last >= first)
		ret = zero_part(fs, inode, last, 0, end % ZLFS_BLOCK_SIZE, fsize);
	if (!ret && first < last) {
		struct drange r = {first, last};

		ret = drop_range(fs, inode, &r);
	}
	return ret;
}
