/*
 * dmap.c - the block map: a file's tree of nodes from file blocks to device blocks, appending
 * whole blocks to the log, and dropping blocks from a range.
 *
 * Owns: the shape of a file's tree (979 addresses in the inode, two direct nodes, two
 * indirect, one double-indirect, 1014 entries per node) and the node offsets ("ofs") that
 * name each tree position for GC and roll-forward; which log a user block goes to (warm data
 * lanes, hot files); fallocate's reservations as the slots hold them. Holes are null
 * addresses and read as zeros. Every data block write appends a new copy and re-points the
 * owning node. Contents of an encrypted file are ciphertext below this file: a block is
 * encrypted (AES-256-XTS, tweak = its block number in the file) as it enters the log, so the
 * zone write buffer, the device and GC only ever see ciphertext, and decrypted after it is
 * read. An inline file (inline.c) has no tree: mapping one of its blocks is refused.
 * Writes of any size are data.c's, reads data_read.c's; both call down to this file.
 * May call: node.c, segment.c (through core.h), fcrypt.c, crypto/zcrypt.h, log.h.
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

/* The data slots the inode and each direct node map: all of them, but whole clusters only in
 * a compressed file, so that one node holds a cluster (format.h, zlfs_cluster_slots).
 * Indirect nodes keep all NA children either way, and node offsets do not change. */
struct dshape {
	uint32_t ia, nd;
};

uint32_t data_cluster_log(const struct node_page *inode)
{
	const struct zlfs_inode *in = inode->buf;

	/* a directory's flag is only what it passes on: its blocks are mapped as any */
	return (le32_get(in->flags) & ZLFS_IFLAG_COMPRESS) && S_ISREG(le32_get(in->mode))
		       ? in->cluster_log : 0;
}

static struct dshape shape_of_log(uint32_t log)
{
	return (struct dshape){zlfs_cluster_slots(IA, log), zlfs_cluster_slots(NA, log)};
}

static struct dshape shape_of(const struct node_page *inode)
{
	return shape_of_log(data_cluster_log(inode));
}

static int data_path(uint64_t idx, struct dshape sh, struct dpath *p)
{
	uint64_t nd = sh.nd;

	if (idx < sh.ia) {
		p->depth = 0;
		p->slot[0] = (uint32_t)idx;
		return 0;
	}
	idx -= sh.ia;
	if (idx < 2 * nd) {
		p->depth = 1;
		p->slot[0] = (uint32_t)(idx / nd);
		p->slot[1] = (uint32_t)(idx % nd);
		p->ofs[1] = 1 + p->slot[0];
		return 0;
	}
	idx -= 2 * nd;
	if (idx < 2ULL * NA * nd) {
		p->depth = 2;
		p->slot[0] = 2 + (uint32_t)(idx / (NA * nd));
		p->slot[1] = (uint32_t)(idx / nd % NA);
		p->slot[2] = (uint32_t)(idx % nd);
		p->ofs[1] = 3 + (p->slot[0] - 2);
		p->ofs[2] = 5 + (p->slot[0] - 2) * NA + p->slot[1];
		return 0;
	}
	idx -= 2ULL * NA * nd;
	if (idx < (uint64_t)NA * NA * nd) {
		p->depth = 3;
		p->slot[0] = 4;
		p->slot[1] = (uint32_t)(idx / (NA * nd));
		p->slot[2] = (uint32_t)(idx / nd % NA);
		p->slot[3] = (uint32_t)(idx % nd);
		p->ofs[1] = 5 + 2 * NA;
		p->ofs[2] = 6 + 2 * NA + p->slot[1];
		p->ofs[3] = 6 + 3 * NA + p->slot[1] * NA + p->slot[2];
		return 0;
	}
	return -EFBIG;
}

uint64_t data_dnode_base(uint32_t ofs, uint32_t log)
{
	struct dshape sh = shape_of_log(log);
	uint64_t nd = sh.nd, l1 = sh.ia + 2 * nd, l2 = l1 + 2ULL * NA * nd;

	if (ofs == 0)
		return 0;
	if (ofs == 1 || ofs == 2)
		return sh.ia + (ofs - 1) * nd;
	if (ofs >= 5 && ofs < 5 + 2 * NA)
		return l1 + (uint64_t)(ofs - 5) * nd;
	if (ofs >= 6 + 3 * NA && ofs - (6 + 3 * NA) < NA * NA)
		return l2 + (uint64_t)(ofs - (6 + 3 * NA)) * nd;
	return UINT64_MAX;
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
	struct dshape sh = shape_of(inode);
	struct dpath p;
	int ret = data_path(idx, sh, &p), d;

	if (inline_is(inode)) /* its address area holds bytes: a caller that forgot to convert */
		return -EUCLEAN;
	if (ret)
		return ret;
	node_ref(fs, inode);
	if (p.depth == 0) {
		ref->np = inode;
		ref->slot = p.slot[0];
		ref->end = sh.ia;
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
	ref->end = sh.nd;
	return 0;
}

/* The pointer of file block IDX as the tree holds it (ZLFS_ADDR_NULL where no node maps it). */
int data_slot_raw(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint32_t *raw)
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
	int ret = data_slot_raw(fs, inode, idx, addr);

	if (*addr == ZLFS_ADDR_PREALLOC) /* reserved, never written: reads as a hole */
		*addr = ZLFS_ADDR_NULL;
	return ret;
}

void data_changed(struct zlfs_fs *fs, struct node_page *inode)
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

void data_lane_enter(struct zlfs_fs *fs, struct node_page *inode)
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

/* Whether a slot holds data a write would replace (not a hole, not a reservation; a
 * compressed cluster's marker stands for its data). */
static int slot_has_data(uint32_t addr) { return addr && addr != ZLFS_ADDR_PREALLOC; }

/* Whether a slot holds a block of the device (not a hole, reservation or marker). */
static int slot_is_block(uint32_t addr)
{
	return addr && addr != ZLFS_ADDR_PREALLOC && addr != ZLFS_ADDR_COMPRESSED;
}

/* REF's slot lies in a cluster stored compressed, whose slots only the cluster's own writes
 * may change (dcluster.c): a block write there would tear it. */
static int in_compressed_cluster(const struct node_page *inode, const struct dref *ref)
{
	uint32_t log = data_cluster_log(inode);

	return log && le32_get(*node_slot(ref->np, ref->slot & ~((1u << log) - 1u))) ==
			      ZLFS_ADDR_COMPRESSED;
}

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
	if (in_compressed_cluster(inode, &ref)) {
		zlog_err("inode %u: a block write into compressed cluster %llu", inode->nid,
			 (unsigned long long)(idx >> data_cluster_log(inode)));
		node_put(fs, ref.np);
		return -EIO;
	}
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

int data_read_addr(struct zlfs_fs *fs, const struct dkey *dk, uint64_t idx, uint32_t addr,
		     uint8_t *buf)
{
	int ret;

	if (addr == ZLFS_ADDR_NULL) {
		memset(buf, 0, ZLFS_BLOCK_SIZE);
		return 0;
	}
	if (addr == ZLFS_ADDR_COMPRESSED) /* a cluster is read whole (dcluster.c), never so */
		return -EIO;
	ret = seg_read(fs, addr, buf);
	if (!ret && dk->on)
		ret = zcrypt_xts_decrypt(&dk->k, idx, buf, buf, ZLFS_BLOCK_SIZE);
	return ret;
}

int data_read_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		      uint64_t idx, uint8_t *buf)
{
	uint32_t addr;
	int ret = data_addr(fs, inode, idx, &addr);

	return ret ? ret : data_read_addr(fs, dk, idx, addr, buf);
}

int data_write_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
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


int data_write_run(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		   uint64_t idx, uint32_t n, const uint8_t *src, uint8_t *scratch)
{
	uint32_t addr[WRITE_RUN], old[WRITE_RUN], fresh = 0, k, i, reserved = 0, replaced = 0;
	struct zlfs_inode *in = inode_of(inode);
	struct dref ref;
	int ret = data_ref(fs, inode, idx, 1, &ref);

	if (ret)
		return ret;
	if (data_cluster_log(inode)) { /* compressed files are written by clusters (dcluster.c) */
		node_put(fs, ref.np);
		return -EIO;
	}
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

/* ---- compressed clusters --------------------------------------------------------------
 * A cluster of a compressed file is re-pointed whole, in the one node that holds it, so the
 * checkpoint and roll-forward see it old or new, never torn. */

/* Append the N blocks of BUF to log TYPE for slots OFS[0]... of node NID, trying the warm
 * data log's other lanes when TYPE has no room, as data_append_n: a log that runs out of room
 * part way leaves the rest to the next. ADDR keeps what was appended even when an error ends
 * it, so that the caller can give those blocks back. */
static int append_slots(struct zlfs_fs *fs, enum zlfs_log_type type, const uint8_t *buf,
			uint32_t n, uint32_t nid, const uint16_t *ofs, uint32_t *addr)
{
	uint32_t done = 0;

	while (done < n) {
		const uint8_t *b = buf + (size_t)done * ZLFS_BLOCK_SIZE;
		int ret = seg_append_slots(fs, type, b, n - done, nid, ofs + done, addr + done);

		for (uint32_t i = 0; ret == -ENOSPC && i < fs->nr_lanes; i++)
			if (seg_lane_type(i) != type)
				ret = seg_append_slots(fs, seg_lane_type(i), b, n - done, nid,
						       ofs + done, addr + done);
		if (ret < 0)
			return ret;
		done += (uint32_t)ret;
	}
	return 0;
}

/* The node slots (from SLOT, clusters of C) the N clusters of CL store their blocks in, one
 * per stored block: after a compressed cluster's marker, or a raw one's slots but its holes. */
static uint32_t run_slots(const struct dclu_put *cl, uint32_t n, uint32_t c, uint32_t slot,
			  uint16_t *ofs)
{
	uint32_t m = 0;

	for (uint32_t i = 0; i < n; i++, slot += c)
		for (uint32_t j = 0; j < c; j++)
			if (cl[i].compressed ? j >= 1 && j <= cl[i].k : !(cl[i].holes >> j & 1))
				ofs[m++] = (uint16_t)(slot + j);
	return m;
}

/* The slot values the run's appended blocks ADDR (in RUN_SLOTS' order) give its N clusters,
 * into VAL: markers, addresses, holes. */
static void run_values(const struct dclu_put *cl, uint32_t n, uint32_t c, const uint32_t *addr,
		       uint32_t *val)
{
	uint32_t m = 0;

	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < c; j++)
			val[i * c + j] = cl[i].compressed ? (j == 0 ? ZLFS_ADDR_COMPRESSED
							    : j <= cl[i].k ? addr[m++] : 0)
					 : cl[i].holes >> j & 1 ? 0 : addr[m++];
}

int data_put_clusters(struct zlfs_fs *fs, struct node_page *inode, uint64_t cidx,
		      const uint8_t *buf, const struct dclu_put *cl, uint32_t n, int owed)
{
	uint32_t log = data_cluster_log(inode), c = 1u << log, old[WRITE_RUN], val[WRITE_RUN];
	uint32_t addr[WRITE_RUN] = {0}, i, reserved = 0, had = 0, now, m, rewrite = 0;
	uint16_t ofs[WRITE_RUN];
	struct zlfs_inode *in = inode_of(inode);
	enum zlfs_log_type type;
	struct dref ref;
	le32 *s;
	int ret = log ? data_ref(fs, inode, cidx << log, 1, &ref) : -EINVAL;

	if (ret)
		return ret;
	n = n * c <= WRITE_RUN ? n : WRITE_RUN / c; /* one node, and WRITE_RUN slots at most */
	n = n * c <= slots_left(&ref) ? n : slots_left(&ref) / c;
	if (!n) { /* a node maps whole clusters (struct dshape): memory went bad */
		node_put(fs, ref.np);
		return -EIO;
	}
	s = node_slot(ref.np, ref.slot);
	for (i = 0; i < n * c; i++) {
		old[i] = le32_get(s[i]);
		reserved += old[i] == ZLFS_ADDR_PREALLOC;
		had += slot_is_block(old[i]) || old[i] == ZLFS_ADDR_PREALLOC;
		rewrite |= i % c == 0 && old[i] == ZLFS_ADDR_COMPRESSED;
	}
	if (reserved) /* they pay for this write, and those it leaves unused go */
		seg_prealloc_add(fs, -(int64_t)reserved);
	type = data_user_log(fs, inode, had > reserved || rewrite);
	m = run_slots(cl, n, c, ref.slot, ofs);
	ret = append_slots(fs, type, buf, m, ref.np->nid, ofs, addr);
	if (ret == -ENOSPC && owed) { /* its room was owed: the reserve's log takes it */
		seg_mark_n(fs, addr, m, 0);
		memset(addr, 0, sizeof(addr));
		ret = append_slots(fs, ZLFS_LOG_HOT_DATA, buf, m, ref.np->nid, ofs, addr);
	}
	if (ret < 0) {
		seg_mark_n(fs, addr, m, 0); /* what did get appended is nobody's */
		if (reserved)
			seg_prealloc_add(fs, (int64_t)reserved);
		node_put(fs, ref.np);
		return ret;
	}
	run_values(cl, n, c, addr, val);
	data_changed(fs, inode);
	for (i = 0, now = 0; i < n * c; i++) {
		s[i] = le32_put(val[i]);
		now += slot_is_block(val[i]);
		if (!slot_is_block(old[i])) /* to the SIT only the old blocks go */
			old[i] = ZLFS_ADDR_NULL;
	}
	seg_mark_n(fs, old, n * c, 0);
	node_dirty(fs, ref.np);
	in->blocks = le64_put(le64_get(in->blocks) + now - had);
	node_dirty(fs, inode);
	node_put(fs, ref.np);
	return (int)n;
}

/* ---- truncation and holes -----------------------------------------------------------------
 * Blocks in [FROM, TO) are dropped by walking the tree: a node whose whole range lies inside
 * is freed with everything under it, a node straddling an end keeps its other entries, and
 * nodes outside are not read. So punching a hole costs the nodes it touches, not one lookup
 * per block of the range (a terabyte-sized punch would otherwise hold the file's lock, and the
 * checkpoint behind it, for minutes). */

struct drange {
	uint64_t from, to;
	struct dshape sh;
	uint64_t short_by; /* blocks dropped past what the inode's count had */
};

static void drop_block(struct zlfs_fs *fs, struct node_page *inode, le32 *slot,
		       struct drange *r)
{
	struct zlfs_inode *in = inode_of(inode);
	uint32_t addr = le32_get(*slot);

	if (!addr)
		return;
	data_changed(fs, inode);
	inode->heat_rewrite |= slot_has_data(addr); /* a truncate and rewrite replaces data too */
	if (addr == ZLFS_ADDR_COMPRESSED) { /* no block: the cluster's k blocks go one by one */
		*slot = 0;
		node_dirty(fs, inode);
		return;
	}
	if (addr == ZLFS_ADDR_PREALLOC)
		seg_prealloc_add(fs, -1); /* the reservation goes with the pointer */
	seg_mark(fs, addr, 0);
	*slot = 0;
	if (le64_get(in->blocks))
		in->blocks = le64_put(le64_get(in->blocks) - 1);
	else
		r->short_by++;
	node_dirty(fs, inode);
}

/* File blocks under one child slot of a node with DEPTH levels of nodes below it. */
static uint64_t child_span(const struct dshape *sh, int depth)
{
	uint64_t span = depth ? sh->nd : 1;

	for (int d = 1; d < depth; d++)
		span *= NA;
	return span;
}

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
		      int depth, uint64_t base, struct drange *r)
{
	struct node_page *np;
	uint64_t span = child_span(&r->sh, depth);
	uint32_t i, n = depth ? NA : r->sh.nd;
	int ret = node_get_as(fs, nid, inode->nid, depth ? ZLFS_KIND_INDNODE : ZLFS_KIND_DNODE,
			      ofs, &np);

	if (ret)
		return ret;
	for (i = 0; i < n && !ret; i++) {
		uint64_t cb = base + i * span;
		le32 *slot = &((struct zlfs_node *)np->buf)->ptr[i];
		uint32_t child = le32_get(*slot);

		if (cb + span <= r->from || cb >= r->to || !child)
			continue;
		if (depth == 0) {
			drop_block(fs, inode, slot, r);
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

/* Levels of nodes below each of the inode's nids: two direct nodes, two indirect, one
 * double-indirect. */
static const int nid_depth[ZLFS_INODE_NIDS] = {0, 0, 1, 1, 2};

/* The blocks of a file's tree counted from its pointers, as the count in its inode is kept:
 * each block and each reservation, not a compressed cluster's marker. */
static int count_node(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid, uint32_t ofs,
		      int depth, uint64_t *n)
{
	struct node_page *np;
	const le32 *p;
	uint32_t i;
	int ret = node_get_as(fs, nid, inode->nid, depth ? ZLFS_KIND_INDNODE : ZLFS_KIND_DNODE,
			      ofs, &np);

	if (ret)
		return ret;
	p = ((const struct zlfs_node *)np->buf)->ptr;
	for (i = node_next_ptr(p, 0, NA); i < NA && !ret; i = node_next_ptr(p, i + 1, NA))
		if (depth)
			ret = count_node(fs, inode, le32_get(p[i]), data_child_ofs(ofs, i),
					 depth - 1, n);
		else
			*n += le32_get(p[i]) != ZLFS_ADDR_COMPRESSED;
	node_put(fs, np);
	return ret;
}

int data_count_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t *n)
{
	const struct zlfs_inode *in = inode_of(inode);
	int ret = 0;

	*n = 0;
	if (zlfs_iflags_area_inline(le32_get(in->flags)))
		return 0; /* its area holds bytes, and it has no tree */
	for (uint32_t i = 0; i < IA; i++)
		*n += in->addr[i] && le32_get(in->addr[i]) != ZLFS_ADDR_COMPRESSED;
	for (int k = 0; k < ZLFS_INODE_NIDS && !ret; k++)
		if (in->nid[k])
			ret = count_node(fs, inode, le32_get(in->nid[k]),
					 data_child_ofs(0, (uint32_t)k), nid_depth[k], n);
	return ret;
}

/* The count went below zero: a damaged (or hostile) inode said fewer blocks than it held. The
 * blocks went all the same, since freeing follows the pointers, never the count (a count
 * trusted would leave blocks valid with nothing pointing at them); the count is taken from
 * the pointers left, as F2FS warns of an inconsistent i_blocks rather than wrap it. */
static void drop_recount(struct zlfs_fs *fs, struct node_page *inode, const struct drange *r)
{
	struct zlfs_inode *in = inode_of(inode);
	uint64_t n;

	if (!r->short_by || data_count_blocks(fs, inode, &n))
		return;
	zlog_err("inode %u: its count of blocks was %llu short of the blocks it held: recounted "
		 "as %llu (run fsck.zlfs)", inode->nid, (unsigned long long)r->short_by,
		 (unsigned long long)n);
	in->blocks = le64_put(n);
	node_dirty(fs, inode);
}

static int drop_range(struct zlfs_fs *fs, struct node_page *inode, struct drange *r)
{
	struct zlfs_inode *in = inode_of(inode);
	uint64_t base[ZLFS_INODE_NIDS + 1], i;
	int k, ret = 0;

	base[0] = r->sh.ia;
	for (k = 0; k < ZLFS_INODE_NIDS; k++) /* child k maps [base[k], base[k + 1]) */
		base[k + 1] = base[k] + child_span(&r->sh, nid_depth[k] + 1);

	/* Every slot is looked at, whatever the count of blocks says: a count of 0 on a damaged
	 * image would otherwise leave the blocks behind it valid, and their pointers overwritten
	 * (an inline directory's entries) or freed with the inode. An area of bytes (inline data
	 * or entries) has no pointers. */
	if (!zlfs_iflags_area_inline(le32_get(in->flags)))
		for (i = r->from; i < r->sh.ia && i < r->to; i++)
			drop_block(fs, inode, &in->addr[i], r);
	for (k = 0; k < ZLFS_INODE_NIDS && !ret; k++) {
		uint32_t nid = le32_get(in->nid[k]);

		if (!nid || base[k + 1] <= r->from || base[k] >= r->to)
			continue;
		ret = trunc_node(fs, inode, nid, data_child_ofs(0, (uint32_t)k), nid_depth[k], base[k],
				 r);
		if (!ret && base[k] >= r->from && base[k + 1] <= r->to) {
			node_free(fs, nid);
			in->nid[k] = 0;
			node_dirty(fs, inode);
		}
	}
	if (!ret)
		drop_recount(fs, inode, r);
	return ret;
}

int data_drop_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from, uint64_t to)
{
	struct drange r = {from, to, shape_of(inode), 0};

	return drop_range(fs, inode, &r);
}

uint64_t data_max_blocks(void) { return L3_END; }

int data_truncate_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from)
{
	struct drange r = {from, UINT64_MAX, shape_of(inode), 0};

	return drop_range(fs, inode, &r);
}
