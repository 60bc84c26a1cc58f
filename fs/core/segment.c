/*
 * segment.c - the active logs, the zones they append to, and segment usage (SIT).
 *
 * Owns: placing every block written after mkfs: which zone a log appends to, the segment
 * summary at the end of each segment, the valid-block bitmaps and counts, when a zone is
 * free again, and finishing a zone when a log moves on so that the device's open and active
 * limits hold.
 * May call: zdev.h, format.h, lock.h, log.h (messages). Called by node.c, ckpt.c, the file
 * layer.
 *
 * Locks (core.h): each log's lock serialises its appends, so every zone is written at its
 * write pointer, while other logs append at once; the SIT, zone states and free counts are
 * under seg_lock, where each log also publishes its position for the free-space sums.
 *
 * A zone emptied of valid blocks is not reused at once: the last durable checkpoint may still
 * reference its blocks. It is "prefree" until the next checkpoint is durable, then free; it is
 * reset only when a log takes it.
 */
#include "core.h"
#include "log.h"
#include "wbuf.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static uint32_t zone_blocks(const struct zlfs_fs *fs) { return zlfs_zone_blocks(&fs->sb); }

uint32_t seg_usable_per_zone(const struct zlfs_fs *fs)
{
	return fs->sb.segs_per_zone * (fs->sb.seg_blocks - 1);
}

/* Main-area zone index of ADDR, or -1 if ADDR is not a block of a main-area segment (past
 * a zone's segments it would name another zone's segment, or one past the SIT). */
static int64_t main_zone_of(const struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t zone = addr / zone_blocks(fs);

	if (zone < fs->sb.main_zone_first || zone >= fs->sb.nr_zones ||
	    addr % zone_blocks(fs) >= fs->sb.segs_per_zone * fs->sb.seg_blocks)
		return -1;
	return zone - fs->sb.main_zone_first;
}

static uint32_t segno_of(const struct zlfs_fs *fs, uint32_t mz, uint32_t blk_in_zone)
{
	return mz * fs->sb.segs_per_zone + blk_in_zone / fs->sb.seg_blocks;
}

static void sit_set_dirty(struct zlfs_fs *fs, uint32_t segno)
{
	if (!fs->sit_dirty[segno / ZLFS_SIT_PER_BLOCK]) {
		fs->sit_dirty[segno / ZLFS_SIT_PER_BLOCK] = 1;
		__atomic_add_fetch(&fs->dirty_meta, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&fs->dirty, 1, __ATOMIC_RELAXED);
}

/* A segment's mtime is the mean write time of the blocks it holds (seconds), the age that
 * cost-benefit GC weighs. BORN is when the block's data was written: now for new data, the
 * victim segment's mtime for data GC moves, so moving data does not make it look young. A
 * block that dies leaves the mean as it was. */
static void seg_mark_locked(struct zlfs_fs *fs, uint32_t addr, int valid, uint64_t born)
{
	int64_t mz = addr == ZLFS_ADDR_NULL || addr == ZLFS_ADDR_NEW ? -1 : main_zone_of(fs, addr);
	uint32_t in_zone, segno, bit;
	struct seg_ent *se;

	if (mz < 0)
		return;
	in_zone = addr % zone_blocks(fs);
	segno = segno_of(fs, (uint32_t)mz, in_zone);
	bit = in_zone % fs->sb.seg_blocks;
	se = sit_ent_locked(fs, segno);
	if (!se)
		return; /* read-only from here: nothing will be written with this count */
	if (!valid && fs->remap)
		remap_drop_locked(fs, addr); /* a dead or moved block needs no owner */
	if (!!(se->bitmap[bit / 8] & (1u << (bit % 8))) == !!valid || (!valid && !se->valid) ||
	    (valid && se->valid >= fs->sb.seg_blocks - 1)) {
		zlog_err("segment %u block %u already %s: accounting error", segno, bit,
			 valid ? "valid" : "invalid");
		return;
	}
	se->bitmap[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	if (valid) {
		uint64_t before = se->mtime * se->valid; /* the zone's age sum, modulo 2^64 */

		se->mtime = se->valid ? (se->mtime * se->valid + born) / (se->valid + 1u) : born;
		se->valid++;
		fs->zone_born[mz] += se->mtime * se->valid - before;
		fs->zone_valid[mz]++;
		fs->valid_blocks++;
		if (fs->zone_state[mz] == ZONE_FREE) { /* only recovery adds blocks to such a zone */
			fs->zone_state[mz] = ZONE_USED;
			ATOMIC_ADD(&fs->free_zones, (uint32_t)-1);
		}
	} else {
		se->valid--;
		fs->zone_born[mz] -= se->mtime;
		fs->valid_blocks--;
		if (--fs->zone_valid[mz] == 0 && fs->zone_state[mz] == ZONE_USED)
			fs->zone_prefree[mz] = 1;
	}
	sit_set_dirty(fs, segno);
}

void seg_mark(struct zlfs_fs *fs, uint32_t addr, int valid)
{
	seg_mark_n(fs, &addr, 1, valid);
}

void seg_mark_n(struct zlfs_fs *fs, const uint32_t *addr, uint32_t n, int valid)
{
	uint64_t now = zlfs_now_s();

	zlock_lock(&fs->seg_lock);
	for (uint32_t i = 0; i < n; i++)
		if (addr[i] != ZLFS_ADDR_NULL && addr[i] != ZLFS_ADDR_NEW)
			seg_mark_locked(fs, addr[i], valid, now);
	zlock_unlock(&fs->seg_lock);
}

/* The SIT entry of the segment holding ADDR, or NULL outside the main area (or unreadable);
 * seg_lock held. */
static const struct seg_ent *seg_ent_of(struct zlfs_fs *fs, uint32_t addr)
{
	int64_t mz = main_zone_of(fs, addr);

	return mz < 0 ? NULL : sit_ent_locked(fs, segno_of(fs, (uint32_t)mz, addr % zone_blocks(fs)));
}

void seg_origin(struct zlfs_fs *fs, uint32_t addr, uint64_t *born, uint8_t *log)
{
	const struct seg_ent *se;

	*born = zlfs_now_s();
	*log = ZLFS_LOG_NONE;
	zlock_lock(&fs->seg_lock);
	se = seg_ent_of(fs, addr);
	if (se) {
		*born = se->mtime;
		*log = se->log;
	}
	zlock_unlock(&fs->seg_lock);
}

uint32_t seg_zone_valid(struct zlfs_fs *fs, uint32_t zone)
{
	uint32_t v;

	zlock_lock(&fs->seg_lock);
	v = fs->zone_valid[zone - fs->sb.main_zone_first];
	zlock_unlock(&fs->seg_lock);
	return v;
}

/* A new inode brings node and directory blocks, which may use the GC reserve: once only the
 * reserve is left, creating stops, or names alone could eat the zones GC needs to turn
 * deletions back into free space (a device wedged full with nothing left to move into). */
static uint64_t seg_free_blocks_locked(const struct zlfs_fs *fs, uint64_t dead);

int seg_room_for_user(struct zlfs_fs *fs)
{
	int ret;

	zlock_lock(&fs->seg_lock);
	ret = fs->free_zones > seg_reserve(fs) && seg_free_blocks_locked(fs, 0) > 0;
	zlock_unlock(&fs->seg_lock);
	return ret;
}

uint32_t seg_reserve(const struct zlfs_fs *fs)
{
	uint32_t need = zlfs_gc_zones_needed(fs->sb.nr_logs);

	return fs->sb.reserved_zones > need ? fs->sb.reserved_zones : need;
}

uint32_t seg_prefree_zones(struct zlfs_fs *fs)
{
	uint32_t mz, n = 0;

	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++)
		n += fs->zone_prefree[mz];
	zlock_unlock(&fs->seg_lock);
	return n;
}

/* Blocks left in the zone a log appends to, summary slots not counted. */
static uint64_t log_room(const struct zlfs_fs *fs, const struct zlog_state *l)
{
	uint64_t per = seg_usable_per_zone(fs), used;

	if (l->zone == ZLFS_ZONE_NONE)
		return 0;
	used = l->next_blk - l->next_blk / fs->sb.seg_blocks;
	return used < per ? per - used : 0;
}

uint64_t seg_log_room_locked(const struct zlfs_fs *fs, enum zlfs_log_type type)
{
	return log_room(fs, &fs->logs[fs->log_of[type]]);
}

void seg_owe(struct zlfs_fs *fs, enum zlfs_log_type type, int delta)
{
	uint32_t *n = &fs->owed_of[fs->log_of[type]], old = __atomic_load_n(n, __ATOMIC_RELAXED);

	for (;;) { /* never below zero: a wrapped count would refuse all data for good */
		uint32_t want = delta < 0 && old < (uint32_t)-delta ? 0 : old + (uint32_t)delta;

		if (__atomic_compare_exchange_n(n, &old, want, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			if (delta < 0 && !want && old < (uint32_t)-delta)
				zlog_err("accounting error: log %u owes %u blocks, %d given back",
					 fs->log_of[type], old, -delta);
			return;
		}
	}
}

static uint32_t owed_of(const struct zlfs_fs *fs, int log)
{
	return __atomic_load_n(&fs->owed_of[log], __ATOMIC_RELAXED);
}

uint64_t seg_log_owed(const struct zlfs_fs *fs, enum zlfs_log_type type)
{
	return owed_of(fs, fs->log_of[type]);
}

uint64_t seg_owed_blocks(const struct zlfs_fs *fs)
{
	uint64_t n = 0;

	for (int i = 0; i < ZLFS_NR_LOG_TYPES; i++)
		n += owed_of(fs, i);
	return n;
}

/* Blocks changed in memory (nodes, directory blocks) take log blocks when the next
 * checkpoint writes them. User data must leave them that room: a device filled to its last
 * block by data has no place for the nodes that point to the data, the checkpoint fails, and
 * every file written since the previous one is gone at unmount. A log owes the zones its
 * changed blocks need beyond the room left in its zone (both in usable blocks: segment
 * summaries have their own slots). The nodes one more data block dirties are owed from the
 * next check on; until then the GC reserve, which nodes may use, covers them. *DATA_OWED is
 * what the active log DATA, which user data is to go to, itself owes. */
static uint32_t seg_zones_owed(const struct zlfs_fs *fs, uint32_t data, uint64_t *data_owed)
{
	uint64_t per = seg_usable_per_zone(fs), need, room;
	uint32_t owed = 0, i;

	*data_owed = 0;
	for (i = 0; i < ZLFS_NR_LOG_TYPES; i++) {
		need = owed_of(fs, i); /* room and zones are counted without summary slots */
		if (!need)
			continue;
		room = log_room(fs, &fs->logs[i]);
		if (i == data) /* changed blocks owed to the target log: taken from its room */
			*data_owed = need < room ? need : room;
		if (need > room)
			owed += (uint32_t)((need - room + per - 1) / per);
	}
	return owed;
}

uint32_t seg_owed_zones_bound(const struct zlfs_fs *fs)
{
	uint64_t per = seg_usable_per_zone(fs);
	uint32_t n = 0;

	for (int i = 0; i < ZLFS_NR_LOG_TYPES; i++)
		n += (uint32_t)((owed_of(fs, i) + per - 1) / per);
	return n;
}

/* What user data appended to log TYPE can still take: the rest of that log's zone and the
 * free zones above the reserve, less what changed metadata owes and what fallocate reserved
 * (a write into a reserved block gives its reservation back first: data_put_block). Room
 * left in other logs is not data space. DEAD blocks count as free zones would, for the
 * space GC can turn back into free zones (statfs); writes pass 0. */
static uint64_t seg_free_blocks_in_locked(const struct zlfs_fs *fs, enum zlfs_log_type type,
					  uint64_t dead)
{
	uint32_t avail = fs->free_zones > seg_reserve(fs) ? fs->free_zones - seg_reserve(fs) : 0;
	uint32_t data = fs->log_of[type], owed;
	uint64_t data_owed, per = seg_usable_per_zone(fs);
	int64_t room;

	/* The hot log also opens zones for directory blocks and GC, which may take the reserve:
	 * hot user data uses such a zone only while the reserve is whole, and goes to the warm
	 * log otherwise (data.c). */
	if (type == SEG_LOG_HOT_USER && fs->free_zones <= seg_reserve(fs))
		return 0;
	owed = seg_zones_owed(fs, data, &data_owed);
	/* A log GC shares with user data (folded layouts: cold data goes to the warm log) may
	 * have taken its zone out of the reserve for the data GC moves. Users filling it would
	 * make GC take the next zone of the reserve for the same victim, and the one after,
	 * until no zone is left for the checkpoint that frees the victims (the device is then
	 * wedged full of dead blocks). Such a zone is GC's until the reserve is whole again. */
	if (fs->logs[data].reserve_paid && fs->free_zones <= seg_reserve(fs))
		data_owed = log_room(fs, &fs->logs[data]);
	/* signed: zones owed beyond the free ones, and reservations, are debts dead blocks may
	 * cover; with none counted, the log's zone is never more than the zone owed past it */
	room = (int64_t)(log_room(fs, &fs->logs[data]) - data_owed) +
	       ((int64_t)avail - (int64_t)owed) * (int64_t)per + (int64_t)dead -
	       (int64_t)fs->prealloc_blocks;
	return room > 0 ? (uint64_t)room : 0;
}

/* What statfs reports: the room of the warm data log, and the room left in the open zones of
 * its other lanes, which a write that finds its own lane full goes on to (data.c). When the
 * warm log has none (metadata owes the free zones, or reservations take them) it reports
 * none: the lanes' last blocks may still take a write, but df must not promise them. */
static uint64_t seg_free_blocks_locked(const struct zlfs_fs *fs, uint64_t dead)
{
	uint64_t room = seg_free_blocks_in_locked(fs, ZLFS_LOG_WARM_DATA, dead), lane, owed;

	for (uint32_t i = 1; room && i < fs->nr_lanes; i++) {
		lane = log_room(fs, &fs->logs[seg_lane_type(i)]);
		owed = owed_of(fs, seg_lane_type(i));
		room += lane > owed ? lane - owed : 0;
	}
	return room;
}

void seg_prealloc_add(struct zlfs_fs *fs, int64_t delta)
{
	zlock_lock(&fs->seg_lock);
	ATOMIC_ADD(&fs->prealloc_blocks, (uint64_t)delta); /* GC's levels read it without the lock */
	zlock_unlock(&fs->seg_lock);
}

uint32_t seg_prealloc_zones(struct zlfs_fs *fs)
{
	uint64_t per = seg_usable_per_zone(fs);

	return (uint32_t)((ATOMIC_GET(&fs->prealloc_blocks) + per - 1) / per);
}

uint64_t seg_prealloc(struct zlfs_fs *fs)
{
	uint64_t n;

	zlock_lock(&fs->seg_lock);
	n = fs->prealloc_blocks;
	zlock_unlock(&fs->seg_lock);
	return n;
}

uint64_t seg_free_blocks_plus(struct zlfs_fs *fs, uint64_t dead)
{
	uint64_t n;

	zlock_lock(&fs->seg_lock);
	n = seg_free_blocks_locked(fs, dead);
	zlock_unlock(&fs->seg_lock);
	return n;
}

uint64_t seg_free_blocks(struct zlfs_fs *fs) { return seg_free_blocks_plus(fs, 0); }

void blk_seal(struct zlfs_fs *fs, void *buf)
{
	struct zlfs_blkhdr *h = buf;

	h->cp_ver = le64_put(fs->cp_ver);
	h->seq = le64_put(__atomic_add_fetch(&fs->seq, 1, __ATOMIC_RELAXED));
	zlfs_blk_seal(buf, fs->sb.seed);
}

/* Reads of at most SEG_RCACHE_RUN_MAX blocks look in the read cache (rcache.c), and writes
 * of user data of at most SEG_RCACHE_FILL_MAX fill it: what a program writes in pieces and
 * reads back, or rewrites in part, is small. Reads do not fill it: the kernel keeps a page
 * read whole, and a block read to be rewritten in part dies with the rewrite. */
#define SEG_RCACHE_RUN_MAX 8
#define SEG_RCACHE_FILL_MAX 4

int seg_read(struct zlfs_fs *fs, uint32_t addr, void *buf)
{
	uint32_t zb = zone_blocks(fs);

	if ((fs->wb && wbuf_read(fs->wb, addr / zb, addr % zb, buf)) || rcache_get(fs, addr, buf))
		return 0;
	return zdev_read(fs->dev, buf, ZLFS_BLOCK_SIZE, (uint64_t)addr * ZLFS_BLOCK_SIZE);
}

int seg_read_run(struct zlfs_fs *fs, uint32_t addr, uint32_t n, void *buf)
{
	uint32_t zb = zone_blocks(fs), i = 0, j;
	uint8_t got[256];
	int ret = 0;

	if (n > sizeof(got) || addr / zb != (addr + n - 1) / zb)
		return -EINVAL;
	memset(got, 0, n);
	if (fs->wb)
		wbuf_read_run(fs->wb, addr / zb, addr % zb, n, buf, got);
	/* The read cache serves short runs only: a long one read in one piece from the device
	 * beats one cut around a few cached blocks, and the kernel's cache keeps long reads. */
	for (j = 0; fs->rcache && n <= SEG_RCACHE_RUN_MAX && j < n; j++)
		if (!got[j])
			got[j] = (uint8_t)rcache_get(fs, addr + j, (uint8_t *)buf + (size_t)j * ZLFS_BLOCK_SIZE);
	while (!ret && i < n) { /* the rest comes from the device, a run at a time */
		for (; i < n && got[i]; i++)
			;
		for (j = i; j < n && !got[j]; j++)
			;
		if (j > i)
			ret = zdev_read(fs->dev, (uint8_t *)buf + (size_t)i * ZLFS_BLOCK_SIZE,
					(size_t)(j - i) * ZLFS_BLOCK_SIZE,
					(uint64_t)(addr + i) * ZLFS_BLOCK_SIZE);
		i = j;
	}
	return ret;
}

uint32_t seg_valid_span(struct zlfs_fs *fs, uint32_t addr, uint32_t max)
{
	uint32_t zone = addr / zone_blocks(fs), seg = fs->sb.seg_blocks;
	uint32_t in_zone = addr - zlfs_zone_start_blk(&fs->sb, zone);
	const struct seg_ent *se;
	uint32_t b = in_zone % seg, last = b, i;

	if (zone < fs->sb.main_zone_first || zone >= fs->sb.nr_zones)
		return 1;
	zlock_lock(&fs->seg_lock);
	se = sit_ent_locked(fs, (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + in_zone / seg);
	for (i = b; se && i + 1 < seg && i < b + max; i++)
		if (se->bitmap[i / 8] & (1u << (i % 8)))
			last = i;
	zlock_unlock(&fs->seg_lock);
	return last - b + 1;
}

uint32_t seg_next_valid(struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t zone = addr / zone_blocks(fs), seg = fs->sb.seg_blocks, found = UINT32_MAX;
	uint32_t segs = fs->sb.segs_per_zone, zstart, sg, i;

	if (zone < fs->sb.main_zone_first || zone >= fs->sb.nr_zones)
		return UINT32_MAX;
	zstart = zlfs_zone_start_blk(&fs->sb, zone);
	zlock_lock(&fs->seg_lock);
	/* one SIT entry per segment; a segment's last slot is its summary, never valid data */
	for (sg = (addr - zstart) / seg, i = (addr - zstart) % seg; sg < segs && found == UINT32_MAX;
	     sg++, i = 0) {
		const struct seg_ent *se = sit_ent_locked(fs, (zone - fs->sb.main_zone_first) * segs + sg);

		if (!se) /* its SIT page could not be read: no guess */
			break;
		for (; i + 1 < seg && found == UINT32_MAX; i++)
			if (se->bitmap[i / 8] & (1u << (i % 8)))
				found = zstart + sg * seg + i;
	}
	zlock_unlock(&fs->seg_lock);
	return found;
}

/* A write that failed may have moved the write pointer: never retry blind. Stop writing
 * (errors=remount-ro) so nothing acknowledged is put at risk. */
static int seg_write_failed(struct zlfs_fs *fs, uint32_t zone, int err)
{
	struct zdev_zone z;

	if (!zdev_report_one(fs->dev, zone, &z))
		zlog_err("write to zone %u failed (%s); write pointer now at block %llu of the zone; "
			 "filesystem switched to read-only", zone, strerror(-err),
			 (unsigned long long)((z.wp - z.start) / ZLFS_BLOCK_SIZE));
	else
		zlog_err("write to zone %u failed (%s); filesystem switched to read-only", zone,
			 strerror(-err));
	__atomic_store_n(&fs->readonly, 1, __ATOMIC_RELAXED);
	return -EIO;
}


/* Stage N consecutive blocks of log LOG at BLK of ZONE (one run of the zone's blocks). */
static int seg_write_n(struct zlfs_fs *fs, int log, uint32_t zone, uint32_t blk,
		       const void *buf, uint32_t n)
{
	uint64_t bytes = (uint64_t)n * ZLFS_BLOCK_SIZE;
	int ret = wbuf_add_n(fs->wb, log, zone, blk, buf, n);

	if (ret)
		return seg_write_failed(fs, zone, ret);
	/* Small writes of user data are what a program writes again in pieces, or reads back
	 * while the kernel's cache has only part of the page: kept for reading. */
	if (fs->rcache && n <= SEG_RCACHE_FILL_MAX && log > ZLFS_LOG_COLD_NODE)
		for (uint32_t i = 0; i < n; i++)
			rcache_put(fs, zlfs_zone_start_blk(&fs->sb, zone) + blk + i,
				   (const uint8_t *)buf + (size_t)i * ZLFS_BLOCK_SIZE);
	ATOMIC_ADD(&fs->dev_bytes, bytes);
	ATOMIC_ADD(&fs->dev_bytes_main, bytes);
	if (log <= ZLFS_LOG_COLD_NODE)
		ATOMIC_ADD(&fs->dev_bytes_node, bytes);
	return 0;
}

static int seg_write_at(struct zlfs_fs *fs, int log, uint32_t zone, uint32_t blk,
			const void *buf)
{
	return seg_write_n(fs, log, zone, blk, buf, 1);
}

/* Close the open segment of log L: its summary goes to the segment's last block. */
static int seg_write_summary(struct zlfs_fs *fs, struct zlog_state *l)
{
	int log = (int)(l - fs->logs);
	uint32_t mz = l->zone - fs->sb.main_zone_first;
	uint32_t segno = segno_of(fs, mz, l->next_blk);
	uint8_t *buf = l->sumbuf ? l->sumbuf : (l->sumbuf = zdev_buf_alloc(ZLFS_BLOCK_SIZE));
	int ret;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, &l->sum, ZLFS_BLOCK_SIZE);
	zlfs_blk_init(buf, ZLFS_KIND_SUMMARY, segno, 0, fs->cp_ver);
	blk_seal(fs, buf);
	ret = seg_write_at(fs, log, l->zone, l->next_blk, buf);
	if (ret)
		return ret;
	zlock_lock(&fs->seg_lock);
	l->next_blk++;
	zlock_unlock(&fs->seg_lock);
	l->nr_entries = 0;
	memset(&l->sum, 0, sizeof(l->sum));
	return 0;
}

/* The log is done with ZONE: its staged blocks go first, then the zone is finished so it
 * no longer counts against the device's open and active limits. */
static int seg_finish_zone(struct zlfs_fs *fs, uint32_t zone)
{
	struct zdev_zone z;
	int ret = wbuf_flush_zone(fs->wb, zone);

	if (ret)
		return seg_write_failed(fs, zone, ret);
	ret = zdev_report_one(fs->dev, zone, &z);

	if (!ret && z.cond != ZDEV_COND_FULL)
		ret = zdev_zone_finish(fs->dev, zone);
	/* A group of fsync'ed nodes may continue in the next zone: what went to this one must
	 * be durable before anything lands there. */
	if (!ret)
		ret = zdev_flush(fs->dev);
	if (ret)
		zlog_err("cannot finish zone %u: %s", zone, strerror(-ret));
	return ret;
}

/* Only user file data is refused the reserve: nodes and directory blocks must always find
 * room, or a full device could not write the checkpoint that records what it holds. */
static int seg_is_user_data(enum zlfs_log_type type)
{
	return type == SEG_LOG_HOT_USER || seg_is_lane(type);
}

static int zone_is_bad(const struct zdev_zone *z)
{
	return z->cond == ZDEV_COND_OFFLINE || z->cond == ZDEV_COND_RDONLY;
}

/* A device retires worn zones (offline, or read-only first). A free one holds nothing of
 * ours: it leaves the free pool, statfs shrinks by a zone, and writing goes on elsewhere. */
/* Under seg_lock. */
static void seg_retire(struct zlfs_fs *fs, uint32_t mz, const struct zdev_zone *z)
{
	if (fs->zone_state[mz] != ZONE_FREE)
		return;
	fs->zone_state[mz] = ZONE_RETIRED;
	ATOMIC_ADD(&fs->free_zones, (uint32_t)-1);
	ATOMIC_ADD(&fs->retired_zones, 1);
	zlog_warn("zone %u is %s on the device: no longer used (%u zones retired)",
		  fs->sb.main_zone_first + mz, zdev_cond_name(z->cond), fs->retired_zones);
}

void seg_retire_bad_zones(struct zlfs_fs *fs, const struct zdev_zone *z)
{
	uint32_t mz;

	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++)
		if (zone_is_bad(&z[fs->sb.main_zone_first + mz]))
			seg_retire(fs, mz, &z[fs->sb.main_zone_first + mz]);
	zlock_unlock(&fs->seg_lock);
}

/* Whether a log of TYPE may take one more free zone: user data leaves the reserve alone. */
static int seg_zone_allowed(const struct zlfs_fs *fs, enum zlfs_log_type type)
{
	return fs->free_zones && !(seg_is_user_data(type) && fs->free_zones <= seg_reserve(fs));
}

/* Claim the lowest free zone for a log (it is OPEN from here on, so no other log takes it):
 * its main-zone index, or -ENOSPC. *FROM_RESERVE: no free zone was left above the reserve. */
static int64_t seg_claim_free(struct zlfs_fs *fs, enum zlfs_log_type type, int *from_reserve)
{
	int64_t got = -ENOSPC;

	zlock_lock(&fs->seg_lock);
	for (uint32_t mz = 0; seg_zone_allowed(fs, type) && mz < fs->sb.main_zones; mz++) {
		if (fs->zone_state[mz] == ZONE_FREE) {
			*from_reserve = fs->free_zones <= seg_reserve(fs);
			fs->zone_state[mz] = ZONE_OPEN;
			ATOMIC_ADD(&fs->free_zones, (uint32_t)-1);
			if (seg_is_user_data(type))
				ATOMIC_ADD(&fs->data_zones_taken, 1);
			got = mz;
			break;
		}
	}
	zlock_unlock(&fs->seg_lock);
	return got;
}

/* Give a claimed zone back: free again, or retired when the device reports it bad. */
static void seg_unclaim(struct zlfs_fs *fs, uint32_t mz, const struct zdev_zone *bad)
{
	zlock_lock(&fs->seg_lock);
	fs->zone_state[mz] = ZONE_FREE;
	ATOMIC_ADD(&fs->free_zones, 1);
	if (bad)
		seg_retire(fs, mz, bad);
	zlock_unlock(&fs->seg_lock);
}

/* Take a free zone for a log, resetting it if it is not empty: a free zone holds no valid
 * block, so no reader can be in it (reads go to valid blocks under their owner's lock, and
 * GC pins its victim). User data leaves the reserve alone. */
static int seg_take_zone(struct zlfs_fs *fs, enum zlfs_log_type type, uint32_t *zone,
			 int *from_reserve)
{
	struct zdev_zone z;
	int64_t mz;
	int ret;

	while ((mz = seg_claim_free(fs, type, from_reserve)) >= 0) {
		*zone = fs->sb.main_zone_first + (uint32_t)mz;
		ret = zdev_report_one(fs->dev, *zone, &z);
		if (!ret && zone_is_bad(&z)) {
			seg_unclaim(fs, (uint32_t)mz, &z);
			continue;
		}
		rcache_forget(fs, *zone * zone_blocks(fs), zone_blocks(fs));
		if (!ret && z.cond != ZDEV_COND_EMPTY)
			ret = zdev_zone_reset(fs->dev, *zone);
		if (ret) {
			seg_unclaim(fs, (uint32_t)mz, NULL);
			zlog_err("cannot reset zone %u: %s", *zone, strerror(-ret));
		}
		return ret;
	}
	return (int)mz;
}

/* Under the log's lock. */
static int seg_next_zone(struct zlfs_fs *fs, struct zlog_state *l, enum zlfs_log_type type)
{
	uint32_t zone;
	int ret, from_reserve = 0;

	if (l->zone != ZLFS_ZONE_NONE) {
		uint32_t mz = l->zone - fs->sb.main_zone_first;

		ret = seg_finish_zone(fs, l->zone);
		if (ret)
			return ret;
		zlock_lock(&fs->seg_lock);
		fs->zone_state[mz] = ZONE_USED;
		if (!fs->zone_valid[mz])
			fs->zone_prefree[mz] = 1;
		l->zone = ZLFS_ZONE_NONE; /* done with it, even if no new zone can be had */
		zlock_unlock(&fs->seg_lock);
	}
	ret = seg_take_zone(fs, type, &zone, &from_reserve);
	if (ret)
		return ret;
	zlock_lock(&fs->seg_lock);
	l->zone = zone;
	l->next_blk = 0;
	l->reserve_paid = (uint8_t)from_reserve;
	zlock_unlock(&fs->seg_lock);
	if (from_reserve) /* what a wedged GC's log at debug level needs to show */
		zlog_debug("log %d takes zone %u out of the GC reserve", (int)(l - fs->logs), zone);
	l->nr_entries = 0;
	memset(&l->sum, 0, sizeof(l->sum));
	__atomic_store_n(&fs->dirty, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Under the log's lock: make the position one a data block may go to. */
static int seg_ready(struct zlfs_fs *fs, struct zlog_state *l, enum zlfs_log_type type)
{
	uint32_t seg = fs->sb.seg_blocks;
	int ret = 0;

	while (!ret) { /* a position on a summary slot happens only after a crash: close it */
		if (l->zone == ZLFS_ZONE_NONE || l->next_blk >= fs->sb.segs_per_zone * seg)
			ret = seg_next_zone(fs, l, type);
		else if (l->next_blk % seg == seg - 1)
			ret = seg_write_summary(fs, l);
		else
			break;
	}
	return ret;
}

/* Append up to N blocks that fit before the open segment's summary slot: how many. */
static int seg_append_run(struct zlfs_fs *fs, struct zlog_state *l, enum zlfs_log_type type,
			  const uint8_t *buf, uint32_t n, uint32_t nid, uint16_t ofs,
			  const uint16_t *ofsv, uint64_t born, uint32_t *addr)
{
	uint32_t seg = fs->sb.seg_blocks, slot, k, i, first;
	struct seg_ent *se;
	int ret = seg_ready(fs, l, type);

	if (ret)
		return ret;
	slot = l->next_blk % seg;
	k = seg - 1 - slot < n ? seg - 1 - slot : n;
	ret = seg_write_n(fs, (int)(l - fs->logs), l->zone, l->next_blk, buf, k);
	if (ret)
		return ret;
	first = zlfs_zone_start_blk(&fs->sb, l->zone) + l->next_blk;
	for (i = 0; i < k; i++) {
		l->sum.nid[slot + i] = le32_put(nid);
		/* a run of data blocks fills consecutive slots of one node, or OFSV's */
		l->sum.ofs[slot + i] = le16_put(ofsv ? ofsv[i] : ofs == ZLFS_SUM_NODE ? ofs
								     : (uint16_t)(ofs + i));
		addr[i] = first + i;
	}
	l->nr_entries = slot + k;
	zlock_lock(&fs->seg_lock);
	l->next_blk += k;
	for (i = 0; i < k; i++)
		seg_mark_locked(fs, first + i, 1, born);
	se = sit_ent_locked(fs, segno_of(fs, l->zone - fs->sb.main_zone_first, l->next_blk - 1));
	if (se)
		se->log = (uint8_t)fs->log_of[type];
	zlock_unlock(&fs->seg_lock);
	if (slot + k + 1 == seg) { /* the segment's data is complete: close it now */
		ret = seg_write_summary(fs, l);
		if (ret)
			return ret;
	}
	return (int)k;
}

static int seg_append_born_n(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf,
			     uint32_t n, uint32_t nid, uint16_t ofs, const uint16_t *ofsv,
			     uint64_t born, uint32_t *addr)
{
	struct zlog_state *l = &fs->logs[fs->log_of[type]];
	uint32_t done = 0;
	int ret = 0;

	zlock_lock_at(&l->lock, fs->log_of[type]);
	if (ATOMIC_GET(&fs->readonly))
		ret = -EROFS;
	while (!ret && done < n) {
		uint32_t want = n - done;

		if (seg_is_user_data(type)) {
			/* what is left is owed to dirty nodes and the GC reserve */
			uint64_t room;

			zlock_lock(&fs->seg_lock);
			room = seg_free_blocks_in_locked(fs, type, 0);
			zlock_unlock(&fs->seg_lock);

			if (!room)
				ret = -ENOSPC;
			else if (room < want)
				want = (uint32_t)room;
		}
		if (!ret)
			ret = seg_append_run(fs, l, type, (const uint8_t *)buf +
					     (size_t)done * ZLFS_BLOCK_SIZE, want, nid,
					     ofs == ZLFS_SUM_NODE ? ofs : (uint16_t)(ofs + done),
					     ofsv ? ofsv + done : NULL, born, addr + done);
		if (ret > 0) {
			done += (uint32_t)ret;
			ret = 0;
		}
	}
	zlock_unlock(&l->lock);
	if (type == SEG_LOG_HOT_USER && done && fs->log_of[type] != fs->log_of[ZLFS_LOG_WARM_DATA])
		ATOMIC_ADD(&fs->hot_user_bytes, (uint64_t)done * ZLFS_BLOCK_SIZE);
	return done ? (int)done : ret;
}

int seg_append_n(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t n,
		 uint32_t nid, uint16_t ofs, uint32_t *addr)
{
	return seg_append_born_n(fs, type, buf, n, nid, ofs, NULL, zlfs_now_s(), addr);
}

int seg_append_slots(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t n,
		     uint32_t nid, const uint16_t *ofs, uint32_t *addr)
{
	return seg_append_born_n(fs, type, buf, n, nid, 0, ofs, zlfs_now_s(), addr);
}

int seg_append_born(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t nid,
		    uint16_t ofs, uint64_t born, uint32_t *addr)
{
	int ret = seg_append_born_n(fs, type, buf, 1, nid, ofs, NULL, born, addr);

	return ret < 0 ? ret : 0;
}

int seg_append(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t nid,
	       uint16_t ofs, uint32_t *addr)
{
	return seg_append_born(fs, type, buf, nid, ofs, zlfs_now_s(), addr);
}

void seg_ckpt_done(struct zlfs_fs *fs)
{
	uint32_t mz;

	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++) {
		if (!fs->zone_prefree[mz] || fs->sb.main_zone_first + mz == fs->gc_pin)
			continue; /* GC may still be reading its victim: it frees it when done */
		fs->zone_prefree[mz] = 0;
		if (fs->zone_state[mz] == ZONE_USED && !fs->zone_valid[mz]) {
			fs->zone_state[mz] = ZONE_FREE;
			ATOMIC_ADD(&fs->free_zones, 1);
		}
	}
	zlock_unlock(&fs->seg_lock);
}

/* Zone states from the SIT and the logs of the checkpoint just loaded. */
int seg_is_valid(struct zlfs_fs *fs, uint32_t addr)
{
	int64_t mz = main_zone_of(fs, addr);
	uint32_t in_zone = addr % zone_blocks(fs), bit = in_zone % fs->sb.seg_blocks;
	const struct seg_ent *se;
	int ret;

	if (mz < 0)
		return 0;
	zlock_lock(&fs->seg_lock);
	se = sit_ent_locked(fs, segno_of(fs, (uint32_t)mz, in_zone));
	ret = !se || (se->bitmap[bit / 8] & (1u << (bit % 8))); /* unknown: keep it */
	zlock_unlock(&fs->seg_lock);
	return ret;
}

/* Written under seg_lock with atomic stores, so read here without it: every request asks. */
uint32_t seg_free_zones(struct zlfs_fs *fs) { return ATOMIC_GET(&fs->free_zones); }

int seg_zone_state(struct zlfs_fs *fs, uint32_t zone)
{
	int st;

	zlock_lock(&fs->seg_lock);
	st = fs->zone_state[zone - fs->sb.main_zone_first];
	zlock_unlock(&fs->seg_lock);
	return st;
}

void seg_pin(struct zlfs_fs *fs, uint32_t zone)
{
	zlock_lock(&fs->seg_lock);
	fs->gc_pin = zone;
	zlock_unlock(&fs->seg_lock);
}

int seg_init(struct zlfs_fs *fs)
{
	uint32_t mz, i;

	fs->gc_pin = ZLFS_ZONE_NONE;
	ATOMIC_SET(&fs->free_zones, 0);
	ATOMIC_SET(&fs->retired_zones, 0);
	fs->valid_blocks = 0;
	for (mz = 0; mz < fs->sb.main_zones; mz++) { /* zone_valid: sit_scan's, then seg_mark's */
		fs->valid_blocks += fs->zone_valid[mz];
		fs->zone_state[mz] = fs->zone_valid[mz] ? ZONE_USED : ZONE_FREE;
	}
	for (i = 0; i < ZLFS_NR_LOG_TYPES; i++) {
		uint32_t zone = fs->logs[i].zone;

		if (zone == ZLFS_ZONE_NONE)
			continue;
		if (zone < fs->sb.main_zone_first || zone >= fs->sb.nr_zones)
			return -EUCLEAN;
		fs->zone_state[zone - fs->sb.main_zone_first] = ZONE_OPEN;
	}
	for (mz = 0; mz < fs->sb.main_zones; mz++)
		if (fs->zone_state[mz] == ZONE_FREE)
			ATOMIC_ADD(&fs->free_zones, 1);
	return 0;
}
