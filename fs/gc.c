/*
 * gc.c - garbage collection: emptying zones whose blocks are mostly dead.
 *
 * Owns: choosing victim zones (greedy: fewest valid blocks; cost-benefit: (1-u)*age/(1+u))
 * and migrating their valid blocks: a data block is copied as it is (ciphertext stays
 * ciphertext) to the cold data log and its owner node re-pointed; a node block is rewritten
 * through the node cache, which only moves its NAT entry. Owners come from the segment
 * summaries and are checked against the owner's pointer before anything moves.
 * May call: segment.c, node.c, format.h, zdev.h, log.h.
 *
 * A victim is never reset here: once empty it is prefree, becomes free only after the next
 * checkpoint is durable (that checkpoint no longer points into it) and is reset when a log
 * takes it. So a power cut anywhere in a pass loses nothing: before the checkpoint the old
 * copies are the ones the durable checkpoint knows.
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint32_t zone_usable(const struct zlfs_fs *fs) { return seg_usable_per_zone(fs); }

static uint64_t zone_mtime(const struct zlfs_fs *fs, uint32_t mz)
{
	uint64_t m = 0;
	uint32_t s;

	for (s = 0; s < fs->sb.segs_per_zone; s++)
		if (fs->sit[mz * fs->sb.segs_per_zone + s].mtime > m)
			m = fs->sit[mz * fs->sb.segs_per_zone + s].mtime;
	return m;
}

/* Cost-benefit as in the log-structured file system papers: the space a victim frees, (1-u),
 * weighed by how long its data has been left alone, against reading and rewriting u. */
static double gc_score(const struct zlfs_fs *fs, uint32_t mz, int greedy, uint64_t now)
{
	double u = (double)fs->zone_valid[mz] / zone_usable(fs);
	uint64_t mt = zone_mtime(fs, mz);
	double age = now > mt ? (double)(now - mt) : 0.0;

	if (greedy)
		return 1.0 - u;
	return (1.0 - u) * (age + 1.0) / (1.0 + u);
}

int gc_pick_victim(struct zlfs_fs *fs, int greedy, uint32_t *zone)
{
	uint64_t now = (uint64_t)time(NULL);
	double best = -1.0;
	uint32_t mz;

	for (mz = 0; mz < fs->sb.main_zones; mz++) {
		double sc;

		if (fs->zone_state[mz] != ZONE_USED || !fs->zone_valid[mz] ||
		    fs->zone_valid[mz] >= zone_usable(fs))
			continue;
		sc = gc_score(fs, mz, greedy, now);
		if (sc > best) {
			best = sc;
			*zone = fs->sb.main_zone_first + mz;
		}
	}
	return best < 0 ? -ENOENT : 0;
}

static int gc_read_summary(struct zlfs_fs *fs, uint32_t zone, uint32_t seg,
			   struct zlfs_summary *sum)
{
	uint32_t segno = (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + seg;
	uint32_t addr = zlfs_zone_start_blk(&fs->sb, zone) + (seg + 1) * fs->sb.seg_blocks - 1;
	int ret = seg_read(fs, addr, sum);

	if (!ret)
		ret = zlfs_blk_verify(sum, fs->sb.seed, ZLFS_KIND_SUMMARY);
	if (!ret && le32_get(sum->hdr.index) != segno)
		ret = -EUCLEAN;
	if (ret)
		zlog_err("GC: summary of segment %u (block %u) unreadable: %s", segno, addr,
			 strerror(-ret));
	return ret;
}

static le32 *owner_slot(struct node_page *np, uint16_t ofs)
{
	const struct zlfs_blkhdr *h = np->buf;

	if (le16_get(h->kind) == ZLFS_KIND_INODE && ofs < ZLFS_INODE_ADDRS)
		return &((struct zlfs_inode *)np->buf)->addr[ofs];
	if (le16_get(h->kind) == ZLFS_KIND_DNODE && ofs < ZLFS_NODE_ADDRS)
		return &((struct zlfs_node *)np->buf)->ptr[ofs];
	return NULL;
}

/* Move one data block at ADDR owned by slot OFS of node NID. */
static int gc_move_data(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs,
			uint8_t *buf)
{
	struct node_page *np;
	uint32_t to;
	le32 *slot;
	int ret = node_get(fs, nid, &np);

	if (ret)
		return ret;
	slot = owner_slot(np, ofs);
	if (!slot || le32_get(*slot) != addr) {
		zlog_err("GC: block %u is valid but node %u slot %u does not point to it", addr,
			 nid, ofs);
		node_put(fs, np);
		return -EUCLEAN;
	}
	ret = seg_read(fs, addr, buf);
	if (!ret)
		ret = seg_append(fs, ZLFS_LOG_COLD_DATA, buf, nid, ofs, &to);
	if (!ret) {
		seg_mark(fs, addr, 0);
		*slot = le32_put(to);
		node_dirty(fs, np);
		fs->gc_bytes += ZLFS_BLOCK_SIZE;
	}
	node_put(fs, np);
	return ret;
}

/* A node block moves by being written again; only its NAT entry changes. */
static int gc_move_node(struct zlfs_fs *fs, uint32_t addr, uint32_t nid)
{
	struct node_page *np;
	int ret;

	if (nid >= fs->sb.max_nid || fs->nat[nid].blkaddr != addr)
		return 0; /* a newer copy exists in memory: this one dies at its write */
	ret = node_get(fs, nid, &np);
	if (ret)
		return ret;
	node_dirty(fs, np);
	node_put(fs, np);
	fs->gc_bytes += ZLFS_BLOCK_SIZE;
	return 0;
}

static int gc_migrate_segment(struct zlfs_fs *fs, uint32_t zone, uint32_t seg, uint8_t *buf,
			      struct zlfs_summary *sum)
{
	uint32_t segno = (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + seg;
	uint32_t base = zlfs_zone_start_blk(&fs->sb, zone) + seg * fs->sb.seg_blocks, b;
	const struct seg_ent *se = &fs->sit[segno];
	int ret;

	if (!se->valid)
		return 0;
	ret = gc_read_summary(fs, zone, seg, sum);
	for (b = 0; !ret && b + 1 < fs->sb.seg_blocks; b++) {
		uint32_t nid = le32_get(sum->nid[b]);
		uint16_t ofs = le16_get(sum->ofs[b]);

		if (!(se->bitmap[b / 8] & (1u << (b % 8))))
			continue;
		if (ofs == ZLFS_SUM_NODE)
			ret = gc_move_node(fs, base + b, nid);
		else
			ret = gc_move_data(fs, base + b, nid, ofs, buf);
	}
	return ret;
}

int gc_migrate_zone(struct zlfs_fs *fs, uint32_t zone)
{
	struct zlfs_summary *sum = zdev_buf_alloc(sizeof(*sum));
	uint8_t *buf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	uint32_t seg;
	int ret = sum && buf ? 0 : -ENOMEM;

	for (seg = 0; !ret && seg < fs->sb.segs_per_zone; seg++)
		ret = gc_migrate_segment(fs, zone, seg, buf, sum);
	if (!ret)
		ret = node_flush_all(fs); /* moved nodes and re-pointed owners leave the zone */
	zdev_buf_free(sum);
	zdev_buf_free(buf);
	if (!ret)
		fs->gc_zones++;
	return ret;
}

int gc_reclaim(struct zlfs_fs *fs, uint32_t want_free, int greedy, uint32_t max_zones)
{
	uint32_t zone, done = 0, prefree, mz;
	int ret;

	for (;;) {
		for (prefree = 0, mz = 0; mz < fs->sb.main_zones; mz++)
			prefree += fs->zone_prefree[mz];
		if (fs->free_zones + prefree >= want_free || done >= max_zones)
			return (int)done;
		ret = gc_pick_victim(fs, greedy, &zone);
		if (ret)
			return done ? (int)done : ret;
		ret = gc_migrate_zone(fs, zone);
		if (ret)
			return ret;
		done++;
	}
}

/* Foreground collection starts when the free zones are down to the reserve plus one zone
 * per log: below that a log could need a zone that only GC can give. */
int gc_urgent(const struct zlfs_fs *fs)
{
	return !fs->readonly && fs->free_zones <= fs->sb.reserved_zones + fs->sb.nr_logs;
}
