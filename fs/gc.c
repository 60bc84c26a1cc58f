/*
 * gc.c - garbage collection: emptying zones whose blocks are mostly dead.
 *
 * Owns: choosing victim zones (greedy: fewest valid blocks; cost-benefit: (1-u)*age/(1+u))
 * and migrating their valid blocks: a data block is copied as it is (ciphertext stays
 * ciphertext) to the cold data log and its owner node re-pointed; a node block is rewritten
 * through the node cache, which only moves its NAT entry. Owners come from the segment
 * summaries and are checked against the owner's pointer before anything moves.
 * May call: segment.c, node.c, ilock.c, format.h, zdev.h, lock.h, log.h.
 *
 * Locks: one collector at a time (gc_lock, held by the caller); each step holds cp_lock
 * shared. Victim blocks are read with no inode lock, so users are not held off while GC
 * reads; a block is then moved under its owner's inode lock, and only if the owner still
 * points at the block read - a user write to the file in between wins, and GC's copy is
 * simply not used. The victim is pinned while GC works on it, so no checkpoint frees it.
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

/* A zone is worth collecting only if it frees at least 1/GC_MIN_GAIN of itself: near full,
 * moving a zone to win back a few blocks costs a whole zone of writes for each deleted file
 * (a foreground pass per request, write amplification without bound) and never reaches the
 * free zones it is after. Such thin garbage waits until more of its zone dies. */
#define GC_MIN_GAIN 8

int gc_pick_victim(struct zlfs_fs *fs, int greedy, uint32_t *zone)
{
	uint64_t now = (uint64_t)time(NULL);
	uint32_t mz, usable = zone_usable(fs), min_gain = usable / GC_MIN_GAIN + 1;
	double best = -1.0;

	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++) {
		double sc;

		if (fs->zone_state[mz] != ZONE_USED || !fs->zone_valid[mz] ||
		    fs->zone_valid[mz] + min_gain > usable)
			continue;
		sc = gc_score(fs, mz, greedy, now);
		if (sc > best) {
			best = sc;
			*zone = fs->sb.main_zone_first + mz;
		}
	}
	zlock_unlock(&fs->seg_lock);
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

/* A victim's blocks are read GC_WINDOW at a time, valid or not, rather than one by one:
 * victims are mostly valid, and one 256 KiB read costs a device about what a 4 KiB one does.
 * A window ends at the last valid block before its segment's summary slot, so it never
 * reaches past what was written. The data of a closed zone never changes, so a window stays
 * good while its zone is the victim. */
#define GC_WINDOW 64u

static int gc_window_fill(struct zlfs_fs *fs, struct gc_window *w, uint32_t addr)
{
	int ret;

	w->start = addr;
	w->n = seg_valid_span(fs, addr, GC_WINDOW);
	ret = seg_read_run(fs, addr, w->n, w->buf);
	ATOMIC_ADD(&fs->gc.bytes_read, (uint64_t)w->n * ZLFS_BLOCK_SIZE);
	if (ret)
		w->n = 0;
	return ret;
}

/* The data of block ADDR of the victim, through window W. */
static int gc_block(struct zlfs_fs *fs, struct gc_window *w, uint32_t addr, const uint8_t **data)
{
	int ret = 0;

	if (!w->n || addr < w->start || addr >= w->start + w->n)
		ret = gc_window_fill(fs, w, addr);
	*data = ret ? NULL : w->buf + (size_t)(addr - w->start) * ZLFS_BLOCK_SIZE;
	return ret;
}

/* The owner of node NID locked exclusively, with NID's NAT entry as seen under that lock;
 * NULL when NID is gone (its blocks died with it). */
static struct ilock *gc_lock_owner(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e)
{
	struct ilock *il;
	uint32_t ino;

	*e = nat_get(fs, nid);
	if (e->blkaddr == ZLFS_ADDR_NULL)
		return NULL;
	/* A nid freed meanwhile is not reused before the next checkpoint, which waits for this
	 * step (cp_lock): after the lock is taken, the entry tells whether it is still ours. */
	ino = e->ino;
	il = ilock_take(fs, ino, 1, LR_ICHILD, ino);
	*e = nat_get(fs, nid);
	if (il && (e->blkaddr == ZLFS_ADDR_NULL || e->ino != ino)) {
		ilock_drop(fs, il);
		il = NULL;
	}
	return il;
}

/* Move one data block at ADDR owned by slot OFS of node NID, whose contents are DATA. */
static int gc_move_data(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs,
			const uint8_t *data)
{
	struct node_page *np;
	struct nat_ent e;
	struct ilock *il;
	uint32_t to;
	le32 *slot;
	int ret;

	/* moved by fallocate: the summary names the old slot. Moves stay inside their file and
	 * happen under its lock, so once that lock is held the table's answer stands. */
	remap_find(fs, addr, &nid, &ofs);
	il = gc_lock_owner(fs, nid, &e);
	if (!il)
		return seg_is_valid(fs, addr) ? -EUCLEAN : 0;
	remap_find(fs, addr, &nid, &ofs);
	ret = node_get(fs, nid, &np);
	if (ret) {
		ilock_drop(fs, il);
		return ret;
	}
	slot = owner_slot(np, ofs);
	if (!slot || le32_get(*slot) != addr) {
		/* rewritten or dropped since the window was read: the user's write stands */
		ret = seg_is_valid(fs, addr) ? -EUCLEAN : 0;
		if (ret)
			zlog_err("GC: block %u is valid but node %u slot %u does not point to it",
				 addr, nid, ofs);
	} else {
		ret = seg_append(fs, ZLFS_LOG_COLD_DATA, data, nid, ofs, &to);
		if (!ret) {
			seg_mark(fs, addr, 0);
			*slot = le32_put(to);
			node_dirty(fs, np);
			ATOMIC_ADD(&fs->gc_bytes, ZLFS_BLOCK_SIZE);
		}
	}
	node_put(fs, np);
	ilock_drop(fs, il);
	return ret;
}

/* A node block moves by being written again (at the next checkpoint); only its NAT entry
 * changes. */
static int gc_move_node(struct zlfs_fs *fs, uint32_t addr, uint32_t nid)
{
	struct node_page *np;
	struct nat_ent e;
	struct ilock *il;
	int ret;

	if (nid >= fs->sb.max_nid || nat_get(fs, nid).blkaddr != addr)
		return 0; /* a newer copy exists: this one died when it was written */
	il = gc_lock_owner(fs, nid, &e);
	if (!il || e.blkaddr != addr) {
		ilock_drop(fs, il);
		return 0;
	}
	ret = node_get(fs, nid, &np);
	if (!ret) {
		node_dirty(fs, np);
		node_put(fs, np);
		ATOMIC_ADD(&fs->gc_bytes, ZLFS_BLOCK_SIZE);
	}
	ilock_drop(fs, il);
	return ret;
}

/* Move the valid block ADDR of the victim, whose summary entry is NID/OFS. */
static int gc_move(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs,
		   struct gc_window *w)
{
	const uint8_t *data;
	int ret;

	if (ofs == ZLFS_SUM_NODE)
		return gc_move_node(fs, addr, nid);
	ret = gc_block(fs, w, addr, &data); /* read before the owner is locked */
	return ret ? ret : gc_move_data(fs, addr, nid, ofs, data);
}

/* Move valid blocks of the victim from the cursor on, at most BUDGET of them. */
static int gc_step_blocks(struct zlfs_fs *fs, uint32_t budget)
{
	struct zlfs_summary *sum = fs->gc.sum;
	uint32_t zone = fs->gc.victim, seg_blocks = fs->sb.seg_blocks, moved = 0;
	uint32_t end = fs->sb.segs_per_zone * seg_blocks;
	int ret = 0;

	while (!ret && moved < budget && fs->gc.cursor < end) {
		uint32_t seg = fs->gc.cursor / seg_blocks, b = fs->gc.cursor % seg_blocks;
		uint32_t segno = (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + seg;
		uint32_t addr = zlfs_zone_start_blk(&fs->sb, zone) + fs->gc.cursor;

		fs->gc.cursor++;
		if (b + 1 == seg_blocks || !seg_is_valid(fs, addr))
			continue;
		if (fs->gc.sum_segno != segno) { /* written once when the segment closed */
			ret = gc_read_summary(fs, zone, seg, sum);
			if (ret)
				break;
			fs->gc.sum_segno = segno;
		}
		ret = gc_move(fs, addr, le32_get(sum->nid[b]), le16_get(sum->ofs[b]), &fs->gc.win);
		moved++;
	}
	return ret ? ret : (int)moved;
}

/* Make ZONE the victim, pinned, with its cursor at the start. */
static void gc_take_victim(struct zlfs_fs *fs, uint32_t zone)
{
	fs->gc.victim = zone;
	fs->gc.has_victim = 1;
	fs->gc.cursor = 0;
	fs->gc.sum_segno = UINT32_MAX; /* a zone reused since may carry the same numbers */
	fs->gc.win.n = 0;
	seg_pin(fs, zone);
}

/* The victim is done (or dropped): unpin it; the next checkpoint writes its moved nodes,
 * which leaves it empty and free. */
static void gc_drop_victim(struct zlfs_fs *fs, int emptied)
{
	fs->gc.has_victim = 0;
	seg_pin(fs, ZLFS_ZONE_NONE);
	if (emptied)
		ATOMIC_ADD(&fs->gc_zones, 1);
}

static int gc_buffers(struct zlfs_fs *fs)
{
	if (!fs->gc.sum) {
		fs->gc.sum = zdev_buf_alloc(sizeof(*fs->gc.sum));
		fs->gc.sum_segno = UINT32_MAX;
	}
	if (!fs->gc.win.buf) { /* apart: one failed allocation must not stick for the mount */
		fs->gc.win.buf = zdev_buf_alloc((size_t)GC_WINDOW * ZLFS_BLOCK_SIZE);
		fs->gc.win.n = 0;
	}
	return fs->gc.sum && fs->gc.win.buf ? 0 : -ENOMEM;
}

/* Up to BUDGET blocks of the current victim, under cp_lock shared: blocks moved, or 0 when
 * the victim is done. */
static int gc_victim_step(struct zlfs_fs *fs, uint32_t budget)
{
	int ret;

	zrw_rdlock(&fs->cp_lock);
	ret = gc_buffers(fs);
	if (!ret)
		ret = gc_step_blocks(fs, budget);
	zrw_unlock(&fs->cp_lock);
	if (ret < 0)
		gc_drop_victim(fs, 0);
	else if (!ret || fs->gc.cursor >= fs->sb.segs_per_zone * fs->sb.seg_blocks)
		gc_drop_victim(fs, 1);
	return ret;
}

int gc_migrate_zone(struct zlfs_fs *fs, uint32_t zone)
{
	int ret;

	gc_take_victim(fs, zone);
	while ((ret = gc_victim_step(fs, UINT32_MAX)) > 0 && fs->gc.has_victim)
		;
	return ret < 0 ? ret : 0;
}

int gc_reclaim(struct zlfs_fs *fs, uint32_t want_free, int greedy, uint32_t max_zones)
{
	uint32_t zone, done = 0, prefree, mz;
	int ret;

	for (;;) {
		uint32_t free_zones;

		zlock_lock(&fs->seg_lock);
		for (prefree = 0, mz = 0; mz < fs->sb.main_zones; mz++)
			prefree += fs->zone_prefree[mz];
		free_zones = fs->free_zones;
		zlock_unlock(&fs->seg_lock);
		/* victims emptied in this pass count too: the caller's checkpoint frees them */
		if (free_zones + prefree + done >= want_free || done >= max_zones)
			return (int)done;
		/* With fewer zones left a pass could spend the last ones and leave nothing to
		 * write the checkpoint that frees its victim with. */
		if (free_zones < ZLFS_GC_ZONES_NEEDED)
			return done ? (int)done : -ENOSPC;
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
int gc_urgent(struct zlfs_fs *fs)
{
	return !ATOMIC_GET(&fs->readonly) && seg_free_zones(fs) <= seg_reserve(fs) + fs->sb.nr_logs;
}

void gc_defaults(struct gc_opts *o)
{
	o->high_pct = 60;
	o->low_pct = 25;
	o->idle_ms = 500;
	o->boost_zones = 4;
	o->pe_cycles = 3000;
	/* From the UFS 4.0 notes in shared/seeds: 5 GB read for 0.81 Wh is about 580 nJ/byte;
	 * writes run at 2.76 against 4.19 GB/s at a similar rail power, so about 1.5x that. */
	o->read_nj_per_byte = 583.0;
	o->write_nj_per_byte = 883.0;
}

const char *gc_phase_name(enum gc_phase p)
{
	static const char *const names[] = {"no-gc", "normal", "boosted", "foreground"};

	return p <= GC_FOREGROUND ? names[p] : "unknown";
}

/* A phase is left only with some margin past its threshold, so that a filesystem hovering at
 * a watermark does not flap (and flood the transition log). */
#define GC_HYST_ZONES 2
#define GC_HYST_PCT 5

enum gc_phase gc_phase_update(struct zlfs_fs *fs)
{
	uint32_t free_zones, retired;
	uint32_t fg = seg_reserve(fs) + fs->sb.nr_logs, usable;
	enum gc_phase cur, p = GC_NONE;
	struct timespec ts;
	uint64_t pct;

	free_zones = ATOMIC_GET(&fs->free_zones);
	retired = ATOMIC_GET(&fs->retired_zones);
	usable = fs->sb.main_zones - retired;
	pct = usable ? (uint64_t)free_zones * 100 / usable : 0;
	cur = ATOMIC_GET(&fs->gc.phase);
	if ((!ATOMIC_GET(&fs->readonly) && free_zones <= fg) ||
	    (cur == GC_FOREGROUND && free_zones <= fg + GC_HYST_ZONES))
		p = GC_FOREGROUND;
	else if (pct < fs->gc.o.low_pct ||
		 (cur >= GC_BOOSTED && pct < fs->gc.o.low_pct + GC_HYST_PCT))
		p = GC_BOOSTED;
	else if (pct < fs->gc.o.high_pct ||
		 (cur >= GC_NORMAL && pct < fs->gc.o.high_pct + GC_HYST_PCT))
		p = GC_NORMAL;
	if (p == cur) /* every request asks: only a change takes the lock */
		return p;
	zlock_lock(&fs->stats_lock);
	if (p != fs->gc.phase) {
		uint32_t i = fs->gc.nlog++ % GC_LOG_MAX;

		clock_gettime(CLOCK_REALTIME, &ts);
		fs->gc.log[i].time_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
		fs->gc.log[i].from = (uint8_t)fs->gc.phase;
		fs->gc.log[i].to = (uint8_t)p;
		fs->gc.log[i].free_zones = free_zones;
		zlog_info("GC phase %s -> %s (%u of %u zones free)", gc_phase_name(fs->gc.phase),
			  gc_phase_name(p), free_zones, fs->sb.main_zones);
		ATOMIC_SET(&fs->gc.phase, p);
	}
	zlock_unlock(&fs->stats_lock);
	return p;
}

int gc_step(struct zlfs_fs *fs, int greedy, uint32_t budget)
{
	int ret;

	if (fs->gc.has_victim && seg_zone_state(fs, fs->gc.victim) != ZONE_USED)
		gc_drop_victim(fs, 0); /* emptied meanwhile by foreground GC or deletes */
	if (!fs->gc.has_victim) {
		uint32_t zone;

		ret = gc_pick_victim(fs, greedy, &zone);
		if (ret)
			return ret;
		gc_take_victim(fs, zone);
	}
	return gc_victim_step(fs, budget);
}
