/*
 * recovery.c - rolling fsync'ed files forward after a power cut.
 *
 * Owns: finding the node blocks an fsync made durable after the newest checkpoint, and
 * putting them back into the NAT, the SIT and the segment summaries.
 * May call: nat.c (nat_get, nat_set), npack.c (a checkpointed copy in a pack: read, and its
 * death), segment.c (seg_mark, blk_seal), format.h, zdev.h, log.h.
 *
 * fsync makes the file's data durable, then writes its changed nodes into one zone under the
 * version of the checkpoint still to come, its inode last with the FSYNC flag, and flushes;
 * it writes no checkpoint. After a crash those nodes
 * sit past the checkpoint's log positions: in the node logs' zones beyond their recorded
 * position, or in zones the checkpoint lists as free that a node log opened afterwards.
 * For every inode with a marker, its node copies up to the marker count, and for every node
 * id the copy with the highest sequence number wins. Data blocks the new
 * copy points to become valid and those only the old copy pointed to become invalid. Blocks
 * written after the checkpoint that no fsync'ed node claims stay unreferenced.
 *
 * Everything written here is idempotent: a crash during recovery followed by another mount
 * finds the same nodes and reaches the same state.
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_BATCH 64 /* blocks read at once while scanning */

struct rnode {
	uint32_t nid;
	uint32_t ino;
	uint32_t addr;
	uint64_t seq;
	uint8_t fsync;   /* the last node an fsync wrote: everything of INO before it is durable */
	uint8_t group;   /* ... when its group is whole (FSYNC_GROUP): COUNT copies before it */
	uint8_t data_ok; /* every data block it points to is below its zone's write pointer */
	uint8_t dmark;   /* a dentry mark (r->dmarks[count]), no node: counts in its group */
	uint32_t count;
};

struct rsum {
	uint32_t addr;
	uint32_t nid;
	uint16_t ofs;
};

struct rec {
	struct zlfs_fs *fs;
	struct zdev_zone *zones;   /* all zones, reported once */
	struct rnode *nodes;
	size_t nnodes, cap_nodes, nnodes_seen;
	struct rsum *sums;         /* owners of blocks made valid by recovery */
	size_t nsums, cap_sums;
	struct rec_dmark *dmarks;  /* every dentry mark found, in scan order */
	size_t ndmarks, cap_dmarks;
	uint8_t *buf;              /* SCAN_BATCH blocks */
	uint8_t *old;              /* one block */
	uint8_t *post;             /* per zone: written after the checkpoint, free in it */
	uint64_t max_seq;
};

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
	void *n;
	size_t c = *cap ? *cap * 2 : 256;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	n = realloc(*v, c * elem);
	if (!n)
		return -ENOMEM;
	*v = n;
	*cap = c;
	return 0;
}

static int is_node_kind(unsigned k)
{
	return k == ZLFS_KIND_INODE || k == ZLFS_KIND_DNODE || k == ZLFS_KIND_INDNODE ||
	       k == ZLFS_KIND_XATTR || k == ZLFS_KIND_XVALUE || k == ZLFS_KIND_DMARK ||
	       k == ZLFS_KIND_IPACK; /* a checkpoint's, never rolled forward (index 0) */
}

/* A node block written under the checkpoint still to come (whatever its flags)? */
static int is_new_node(const struct rec *r, const void *blk)
{
	const struct zlfs_blkhdr *h = blk;

	return !zlfs_blk_verify(blk, r->fs->sb.seed, ZLFS_KIND_MAX) &&
	       is_node_kind(le16_get(h->kind)) && le64_get(h->cp_ver) == r->fs->cp_ver;
}

static const le32 *data_ptrs(const void *blk, uint32_t *n);
static uint32_t zone_wp_blk(const struct rec *r, uint32_t zone);

/* Every data block BLK points to is on the device: below its zone's write pointer (all of a
 * full zone). A block written after the checkpoint and lost with the volatile cache lies at
 * or past it; one the checkpoint knew lies below it, since no zone it needs is reset before
 * the next checkpoint. */
static int data_durable(const struct rec *r, const void *blk)
{
	uint32_t n, i, zb = zlfs_zone_blocks(&r->fs->sb);
	const le32 *p = data_ptrs(blk, &n);

	for (i = 0; i < n; i++) {
		uint32_t a = le32_get(p[i]);

		if (a == ZLFS_ADDR_NULL || a == ZLFS_ADDR_PREALLOC || a == ZLFS_ADDR_COMPRESSED)
			continue; /* no block */
		if (a / zb >= r->fs->sb.nr_zones || a % zb >= zone_wp_blk(r, a / zb))
			return 0;
	}
	return 1;
}

/* A dentry mark of the coming checkpoint: kept aside, and counted in its inode's group. */
static int collect_dmark(struct rec *r, const struct zlfs_dentry_mark *m, uint32_t addr)
{
	char why[200];
	int ret;

	if (zlfs_dmark_check(&r->fs->sb, m, why, sizeof(why))) {
		zlog_err("recovery: the dentry mark at block %u, written after checkpoint %llu, is "
			 "damaged (%s): run fsck.zlfs", addr, (unsigned long long)r->fs->cp.version,
			 why);
		return -EUCLEAN;
	}
	ret = grow((void **)&r->dmarks, &r->cap_dmarks, r->ndmarks + 1, sizeof(*r->dmarks));
	if (!ret)
		ret = grow((void **)&r->nodes, &r->cap_nodes, r->nnodes + 1, sizeof(*r->nodes));
	if (ret)
		return ret;
	r->dmarks[r->ndmarks] = (struct rec_dmark){
		.seq = le64_get(m->hdr.seq), .ino = le32_get(m->hdr.ino), .addr = addr,
		.parent = le32_get(m->parent_ino), .generation = le32_get(m->generation),
		.len = le16_get(m->name_len)};
	memcpy(r->dmarks[r->ndmarks].name, m->name, le16_get(m->name_len));
	r->nodes[r->nnodes++] = (struct rnode){.ino = le32_get(m->hdr.ino), .addr = addr,
					       .seq = le64_get(m->hdr.seq), .data_ok = 1,
					       .dmark = 1, .count = (uint32_t)r->ndmarks++};
	return 0;
}

static int collect(struct rec *r, const void *blk, uint32_t addr)
{
	const struct zlfs_blkhdr *h = blk;
	char why[200];
	int ret;

	/* Only a block whose checksum holds says anything about the sequence: a torn or crafted
	 * one could push it to the edge of its range, and the next writes would wrap. */
	if (!zlfs_blk_verify(blk, r->fs->sb.seed, ZLFS_KIND_MAX) && le64_get(h->seq) > r->max_seq)
		r->max_seq = le64_get(h->seq);
	if (!is_new_node(r, blk))
		return 0;
	if (le16_get(h->kind) == ZLFS_KIND_DMARK)
		return collect_dmark(r, blk, addr);
	if (le32_get(h->index) >= r->fs->sb.max_nid || !le32_get(h->index) ||
	    le32_get(h->ino) >= r->fs->sb.max_nid)
		return 0;
	/* Written by this filesystem for the coming checkpoint (the checksum holds), yet out of
	 * the format's limits: damage, which no mount may roll forward or silently drop. */
	if (zlfs_node_check(&r->fs->sb, le32_get(h->index), blk, why, sizeof(why))) {
		zlog_err("recovery: node %u at block %u, written after checkpoint %llu, is damaged "
			 "(%s): run fsck.zlfs", le32_get(h->index), addr,
			 (unsigned long long)r->fs->cp.version, why);
		return -EUCLEAN;
	}
	ret = grow((void **)&r->nodes, &r->cap_nodes, r->nnodes + 1, sizeof(*r->nodes));
	if (ret)
		return ret;
	r->nodes[r->nnodes++] = (struct rnode){
		.nid = le32_get(h->index), .ino = le32_get(h->ino), .addr = addr,
		.seq = le64_get(h->seq), .fsync = !!(le16_get(h->flags) & ZLFS_NODE_FSYNC),
		.group = !!(le16_get(h->flags) & ZLFS_NODE_FSYNC_GROUP),
		.count = le16_get(h->kind) == ZLFS_KIND_INODE ?
				 le32_get(((const struct zlfs_inode *)blk)->fsync_nodes) : 0,
		.data_ok = data_durable(r, blk)};
	return 0;
}

/* Read blocks [FROM, TO) of ZONE and keep the fsync'ed nodes among them. */
static int scan_zone(struct rec *r, uint32_t zone, uint32_t from, uint32_t to)
{
	uint32_t base = zlfs_zone_start_blk(&r->fs->sb, zone), b, i, n;
	int ret;

	for (b = from; b < to; b += n) {
		n = to - b < SCAN_BATCH ? to - b : SCAN_BATCH;
		ret = zdev_read(r->fs->dev, r->buf, (size_t)n * ZLFS_BLOCK_SIZE,
				(uint64_t)(base + b) * ZLFS_BLOCK_SIZE);
		if (ret)
			return ret;
		for (i = 0; i < n; i++) {
			ret = collect(r, r->buf + (size_t)i * ZLFS_BLOCK_SIZE, base + b + i);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static uint32_t zone_wp_blk(const struct rec *r, uint32_t zone)
{
	const struct zdev_zone *z = &r->zones[zone];

	if (z->cond == ZDEV_COND_FULL)
		return (uint32_t)(z->capacity / ZLFS_BLOCK_SIZE);
	if (z->cond == ZDEV_COND_OFFLINE || z->cond == ZDEV_COND_RDONLY)
		return 0;
	return (uint32_t)((z->wp - z->start) / ZLFS_BLOCK_SIZE);
}

static int is_log_zone(const struct zlfs_fs *fs, uint32_t zone)
{
	uint32_t t;

	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++)
		if (fs->cp.logs[t].zone == zone)
			return 1;
	return 0;
}

static uint32_t zone_valid_blocks(const struct zlfs_fs *fs, uint32_t zone)
{
	return fs->zone_valid[zone - fs->sb.main_zone_first]; /* mount: no other thread yet */
}

/* A zone the checkpoint calls free but that was written afterwards. */
static int is_post_cp_zone(const struct rec *r, uint32_t zone)
{
	return !is_log_zone(r->fs, zone) && !zone_valid_blocks(r->fs, zone) &&
	       zone_wp_blk(r, zone) > 0;
}

static int scan_all(struct rec *r)
{
	const struct zlfs_sb_info *s = &r->fs->sb;
	uint32_t t, zone;
	int ret = 0;

	for (t = ZLFS_LOG_HOT_NODE; t <= ZLFS_LOG_COLD_NODE && !ret; t++) {
		zone = r->fs->cp.logs[t].zone;
		if (zone != ZLFS_ZONE_NONE && zone < s->nr_zones)
			ret = scan_zone(r, zone, r->fs->cp.logs[t].next_blk, zone_wp_blk(r, zone));
	}
	for (zone = s->main_zone_first; zone < s->nr_zones && !ret; zone++) {
		if (!is_post_cp_zone(r, zone))
			continue;
		r->post[zone] = 1;
		ret = zdev_read(r->fs->dev, r->buf, ZLFS_BLOCK_SIZE,
				(uint64_t)zlfs_zone_start_blk(s, zone) * ZLFS_BLOCK_SIZE);
		if (!ret && is_new_node(r, r->buf)) /* a node log opened this zone */
			ret = scan_zone(r, zone, 0, zone_wp_blk(r, zone));
	}
	return ret;
}

static int by_nid_seq(const void *a, const void *b)
{
	const struct rnode *x = a, *y = b;

	if (x->nid != y->nid)
		return x->nid < y->nid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int note_owner(struct rec *r, uint32_t addr, uint32_t nid, uint16_t ofs)
{
	int ret = grow((void **)&r->sums, &r->cap_sums, r->nsums + 1, sizeof(*r->sums));

	if (!ret)
		r->sums[r->nsums++] = (struct rsum){addr, nid, ofs};
	return ret;
}

/* Data pointers of a node block, or NULL (indirect and xattr nodes point to no data). */
static const le32 *data_ptrs(const void *blk, uint32_t *n)
{
	const struct zlfs_blkhdr *h = blk;

	if (le16_get(h->kind) == ZLFS_KIND_DNODE) {
		*n = ZLFS_NODE_ADDRS;
		return ((const struct zlfs_node *)blk)->ptr;
	}
	if (le16_get(h->kind) == ZLFS_KIND_INODE &&
	    !zlfs_iflags_area_inline(le32_get(((const struct zlfs_inode *)blk)->flags))) {
		*n = ZLFS_INODE_ADDRS;
		return ((const struct zlfs_inode *)blk)->addr;
	}
	*n = 0;
	return NULL;
}

/* Move validity from the blocks only the old copy used to those only the new one uses. */
static int diff_data(struct rec *r, uint32_t nid, const void *oldb, const void *newb)
{
	uint32_t no = 0, nn = 0, i;
	const le32 *op = oldb ? data_ptrs(oldb, &no) : NULL, *np = data_ptrs(newb, &nn);
	int ret;

	for (i = 0; i < no || i < nn; i++) {
		uint32_t o = i < no ? le32_get(op[i]) : 0, n = i < nn ? le32_get(np[i]) : 0;

		if (o == n)
			continue;
		if (o == ZLFS_ADDR_PREALLOC) /* fallocate's reservations travel with the nodes */
			seg_prealloc_add(r->fs, -1);
		if (n == ZLFS_ADDR_PREALLOC)
			seg_prealloc_add(r->fs, 1);
		if (o != ZLFS_ADDR_PREALLOC && o != ZLFS_ADDR_COMPRESSED) /* markers are no block */
			seg_mark(r->fs, o, 0);
		if (!n || n == ZLFS_ADDR_PREALLOC || n == ZLFS_ADDR_COMPRESSED)
			continue;
		seg_mark(r->fs, n, 1);
		ret = note_owner(r, n, nid, (uint16_t)i);
		if (ret)
			return ret;
	}
	return 0;
}

static int apply_node(struct rec *r, const struct rnode *rn)
{
	struct zlfs_fs *fs = r->fs;
	struct nat_ent e;
	char why[200];
	uint32_t old;
	int ret = nat_get(fs, rn->nid, &e);

	if (ret)
		return ret;
	old = e.blkaddr;
	ret = zdev_read(fs->dev, r->buf, ZLFS_BLOCK_SIZE, (uint64_t)rn->addr * ZLFS_BLOCK_SIZE);
	if (!ret && old != ZLFS_ADDR_NULL) /* a whole block, or a pack's slot expanded */
		ret = node_read_current(fs, rn->nid, &e, r->old);
	if (ret)
		return ret;
	if (old != ZLFS_ADDR_NULL && node_block_check(fs, rn->nid, r->old, why, sizeof(why))) {
		zlog_err("recovery: node %u's checkpointed copy at block %u is damaged (%s)",
			 rn->nid, old, why);
		return -EUCLEAN;
	}
	ret = diff_data(r, rn->nid, old != ZLFS_ADDR_NULL ? r->old : NULL, r->buf);
	if (ret)
		return ret;
	if (old == ZLFS_ADDR_NULL) {
		fs->valid_nodes++;
		if (le32_get(((struct zlfs_blkhdr *)r->buf)->ino) == rn->nid)
			fs->valid_inodes++;
	}
	seg_mark(fs, rn->addr, 1);
	ret = nat_set(fs, rn->nid, rn->addr, le32_get(((struct zlfs_blkhdr *)r->buf)->ino));
	if (!ret) /* after the NAT moved: a pack's other slots are asked about then */
		node_addr_dead(fs, rn->nid, &e);
	return ret ? ret : note_owner(r, rn->addr, rn->nid, ZLFS_SUM_NODE);
}

/* Recovered blocks in a log's open segment get their summary entries back. */
static void fix_log_summaries(struct rec *r)
{
	struct zlfs_fs *fs = r->fs;
	uint32_t t, seg = fs->sb.seg_blocks;
	size_t i;

	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		struct zlog_state *l = &fs->logs[t];
		uint32_t base;

		if (l->zone == ZLFS_ZONE_NONE)
			continue;
		base = zlfs_zone_start_blk(&fs->sb, l->zone) + l->next_blk / seg * seg;
		for (i = 0; i < r->nsums; i++) {
			uint32_t a = r->sums[i].addr;

			if (a >= base && a < base + l->next_blk % seg) {
				l->sum.nid[a - base] = le32_put(r->sums[i].nid);
				l->sum.ofs[a - base] = le16_put(r->sums[i].ofs);
				if (a - base + 1 > l->nr_entries)
					l->nr_entries = a - base + 1;
			}
		}
	}
}

/* A zone opened after the checkpoint now holds recovered blocks but no log will write it
 * again: complete its open segment (zero blocks, then the summary) and finish it, so GC can
 * find every block's owner. */
static int seal_zone(struct rec *r, uint32_t zone, struct zlfs_summary *sum)
{
	struct zlfs_fs *fs = r->fs;
	uint32_t seg = fs->sb.seg_blocks, wp = zone_wp_blk(r, zone);
	uint32_t start = zlfs_zone_start_blk(&fs->sb, zone), base = start + wp / seg * seg;
	uint64_t off = (uint64_t)start * ZLFS_BLOCK_SIZE;
	size_t i;
	int ret = 0;

	if (wp % seg && wp / seg < fs->sb.segs_per_zone) {
		memset(sum, 0, sizeof(*sum));
		for (i = 0; i < r->nsums; i++)
			if (r->sums[i].addr >= base && r->sums[i].addr < start + wp) {
				sum->nid[r->sums[i].addr - base] = le32_put(r->sums[i].nid);
				sum->ofs[r->sums[i].addr - base] = le16_put(r->sums[i].ofs);
			}
		memset(r->old, 0, ZLFS_BLOCK_SIZE);
		for (; !ret && wp % seg != seg - 1; wp++)
			ret = zdev_write(fs->dev, r->old, ZLFS_BLOCK_SIZE,
					 off + (uint64_t)wp * ZLFS_BLOCK_SIZE);
		zlfs_blk_init(sum, ZLFS_KIND_SUMMARY,
			      (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + wp / seg, 0,
			      fs->cp_ver);
		blk_seal(fs, sum);
		if (!ret)
			ret = zdev_write(fs->dev, sum, ZLFS_BLOCK_SIZE,
					 off + (uint64_t)wp * ZLFS_BLOCK_SIZE);
	}
	if (!ret && r->zones[zone].cond != ZDEV_COND_FULL)
		ret = zdev_zone_finish(fs->dev, zone);
	return ret;
}

/* Zones written after the checkpoint: keep and seal those holding recovered blocks, reset
 * the open or closed rest (nothing durable references them) so they stop counting as active
 * zones. Full ones wait to be reset when a log takes them: after a clean unmount that is every
 * such zone, and the mount writes nothing. */
static int settle_post_cp_zones(struct rec *r)
{
	struct zlfs_fs *fs = r->fs;
	struct zlfs_summary *sum = zdev_buf_alloc(sizeof(*sum));
	uint32_t zone;
	int ret = sum ? 0 : -ENOMEM;

	for (zone = fs->sb.main_zone_first; zone < fs->sb.nr_zones && !ret; zone++) {
		if (!r->post[zone])
			continue;
		if (zone_valid_blocks(fs, zone))
			ret = seal_zone(r, zone, sum);
		else if (r->zones[zone].cond != ZDEV_COND_FULL) /* open or closed: still active */
			ret = zdev_zone_reset(fs->dev, zone);
	}
	zdev_buf_free(sum);
	return ret;
}

static int by_dmark_seq(const void *a, const void *b)
{
	const struct rec_dmark *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_ino_seq(const void *a, const void *b)
{
	const struct rnode *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The sequence number of the last marker of inode nodes [I, J) (sorted by seq) whose group
 * and every group before it are whole, or 0. A marker without FSYNC_GROUP was written after
 * its data and nodes were flushed: it is whole by its presence. One with it counts the copies
 * of its group, and every copy and the marker point only to blocks on the device. */
static uint64_t last_whole_mark(const struct rec *r, size_t i, size_t j)
{
	uint64_t mark = 0;
	uint32_t since = 0;
	int ok = 1;

	for (size_t k = i; k < j; k++) {
		const struct rnode *n = &r->nodes[k];

		ok &= n->data_ok;
		if (!n->fsync) {
			since++;
			continue;
		}
		if (n->group && (!ok || since != n->count)) {
			zlog_warn("recovery: inode %u's last fsync after checkpoint %llu did not "
				  "finish before the power cut (%u of its %u node copies found, %s): "
				  "the state its previous fsync made durable is kept", n->ino,
				  (unsigned long long)r->fs->cp.version, since, n->count,
				  ok ? "its data whole" : "data blocks missing");
			break; /* nothing after a torn group was acknowledged */
		}
		mark = n->seq;
		since = 0;
		ok = 1;
	}
	return mark;
}

/* Keep, per inode, the node copies written up to its last whole fsync group: an fsync writes
 * the file's nodes into one zone and its inode last, marked. Copies after that marker were
 * never (or not wholly) made durable by an fsync that returned. */
static void keep_fsynced(struct rec *r)
{
	size_t i = 0, j, k, out = 0;

	qsort(r->nodes, r->nnodes, sizeof(*r->nodes), by_ino_seq);
	while (i < r->nnodes) {
		uint64_t mark;

		for (j = i; j < r->nnodes && r->nodes[j].ino == r->nodes[i].ino; j++)
			;
		mark = last_whole_mark(r, i, j);
		for (k = i; k < j; k++)
			if (mark && r->nodes[k].seq <= mark)
				r->nodes[out++] = r->nodes[k];
		i = j;
	}
	r->nnodes = out;
}

/* The dentry marks of the groups taken, in write order, go to the file layer (which links
 * their names after the mount); until it has, their blocks count as valid so that no zone
 * holding one is reset by settle_post_cp_zones. */
static int by_dmark_ino_seq(const void *a, const void *b)
{
	const struct rec_dmark *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return by_dmark_seq(a, b);
}

/* The daemon writes one mark per new file between checkpoints (its later fsyncs write none);
 * a device showing more names one inode twice, and linking both would give a file of one
 * link two names. The newest is kept. Returns how many are left in V. */
static size_t one_dmark_per_inode(struct rec_dmark *v, size_t n)
{
	size_t i, out = 0;

	qsort(v, n, sizeof(*v), by_dmark_ino_seq);
	for (i = 0; i < n; i++) {
		if (i + 1 < n && v[i + 1].ino == v[i].ino) {
			zlog_warn("recovery: inode %u has another dentry mark after the one at block "
				  "%u: only the newest is linked (run fsck.zlfs)", v[i].ino, v[i].addr);
			continue;
		}
		v[out++] = v[i];
	}
	return out;
}

static int keep_dmarks(struct rec *r)
{
	struct zlfs_fs *fs = r->fs;
	struct rec_dmark *kept;
	size_t i, out = 0;

	for (i = 0; i < r->nnodes; i++)
		out += r->nodes[i].dmark;
	if (!out)
		return 0;
	kept = malloc(out * sizeof(*kept));
	if (!kept)
		return -ENOMEM;
	for (i = 0, out = 0; i < r->nnodes; i++) {
		struct nat_ent e;
		int ret;

		if (!r->nodes[i].dmark)
			continue;
		/* Before the nodes are applied the NAT is the checkpoint's: a mark names only an
		 * inode made since, whose name no dentry block holds. Else the device lies. */
		ret = nat_get(fs, r->nodes[i].ino, &e);
		if (ret) {
			free(kept);
			return ret;
		}
		if (e.blkaddr != ZLFS_ADDR_NULL) {
			zlog_warn("recovery: the dentry mark at block %u names inode %u, which the "
				  "checkpoint already has: not linked (run fsck.zlfs)",
				  r->nodes[i].addr, r->nodes[i].ino);
			continue;
		}
		kept[out++] = r->dmarks[r->nodes[i].count];
	}
	out = one_dmark_per_inode(kept, out);
	for (i = 0; i < out; i++)
		seg_mark(fs, kept[i].addr, 1);
	qsort(kept, out, sizeof(*kept), by_dmark_seq);
	free(fs->rec_dmarks);
	fs->rec_dmarks = kept;
	fs->nr_rec_dmarks = (uint32_t)out;
	return 0;
}

static int apply_all(struct rec *r)
{
	size_t i;
	int ret = 0;

	r->nnodes_seen = r->nnodes;
	if (!r->nnodes)
		return 0;
	keep_fsynced(r);
	ret = keep_dmarks(r);
	qsort(r->nodes, r->nnodes, sizeof(*r->nodes), by_nid_seq);
	for (i = 0; i < r->nnodes && !ret; i++) {
		if (r->nodes[i].dmark)
			continue; /* no node: kept above */
		if (i + 1 < r->nnodes && r->nodes[i + 1].nid == r->nodes[i].nid)
			continue; /* a later copy of the same node follows */
		ret = apply_node(r, &r->nodes[i]);
	}
	return ret;
}

int recover_roll_forward(struct zlfs_fs *fs, uint32_t *recovered)
{
	struct rec r = {.fs = fs};
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	int ret = -ENOMEM;

	*recovered = 0;
	r.zones = calloc(g->nr_zones, sizeof(*r.zones));
	r.post = calloc(g->nr_zones, 1);
	r.buf = zdev_buf_alloc((size_t)SCAN_BATCH * ZLFS_BLOCK_SIZE);
	r.old = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (r.zones && r.post && r.buf && r.old)
		ret = zdev_report(fs->dev, 0, g->nr_zones, r.zones);
	if (!ret)
		ret = scan_all(&r);
	if (!ret)
		ret = apply_all(&r);
	if (!ret) {
		/* after roll-forward: a zone it filled holds valid blocks and is not free */
		seg_retire_bad_zones(fs, r.zones);
		/* Any node of the coming version on the device, fsync'ed or not: the next
		 * checkpoint must move the version past it before anything new is written. */
		if (r.nnodes_seen)
			fs->dirty = 1;
		if (r.max_seq > fs->seq)
			fs->seq = r.max_seq;
		fix_log_summaries(&r);
		if (!fs->readonly)
			ret = settle_post_cp_zones(&r);
		*recovered = (uint32_t)r.nnodes;
	}
	if (ret)
		zlog_err("roll-forward recovery failed: %s", strerror(-ret));
	free(r.zones);
	free(r.post);
	free(r.nodes);
	free(r.sums);
	free(r.dmarks);
	zdev_buf_free(r.buf);
	zdev_buf_free(r.old);
	return ret;
}
