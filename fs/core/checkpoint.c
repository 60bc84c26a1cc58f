/*
 * checkpoint.c - checkpoint packs in the checkpoint log (see super.h).
 *
 * Owns: the pack layout on the device (HEAD, summaries, orphan blocks, TAIL) and finding the
 * newest complete pack. Packs are appended in one checkpoint zone until it is full; the next
 * pack goes to the other zone, which is reset first - safe because the zone being left holds
 * the newest valid pack. A pack counts only if HEAD, every payload block and TAIL validate
 * and agree on the version, so a pack torn by a power cut is skipped, never half-used.
 * May call: format.h, zdev.h, log.h.
 */
#include "core.h"
#include "log.h"
#include "super.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t cp_zone_off(const struct zlfs_sb_info *sbi, int slot, uint32_t blk)
{
	return (uint64_t)sbi->cp_zone[slot] * sbi->zone_size + (uint64_t)blk * ZLFS_BLOCK_SIZE;
}

static void ckpt_fill_orphans(uint8_t *blocks, const struct zlfs_cp_info *cpi,
			      const uint32_t *orphans, uint64_t seed)
{
	uint32_t b, i, n = 0;

	for (b = 0; b < cpi->nr_orphan_blocks; b++) {
		struct zlfs_cp_orphan *ob = (void *)(blocks + (size_t)b * ZLFS_BLOCK_SIZE);

		memset(ob, 0, sizeof(*ob));
		zlfs_blk_init(ob, ZLFS_KIND_CP_ORPHAN, b, 0, cpi->version);
		for (i = 0; i < ZLFS_ORPHANS_PER_BLOCK && n < cpi->nr_orphans; i++)
			ob->ino[i] = le32_put(orphans[n++]);
		zlfs_blk_seal(ob, seed);
	}
}

static void ckpt_fill_remaps(uint8_t *blocks, const struct zlfs_cp_info *cpi,
			     const struct zlfs_remap_entry *remaps, uint64_t seed)
{
	uint32_t b, n = 0;

	for (b = 0; b < cpi->nr_remap_blocks; b++) {
		struct zlfs_cp_remap *rb = (void *)(blocks + (size_t)b * ZLFS_BLOCK_SIZE);
		uint32_t k = cpi->nr_remaps - n < ZLFS_REMAPS_PER_BLOCK ? cpi->nr_remaps - n
									 : ZLFS_REMAPS_PER_BLOCK;

		memset(rb, 0, sizeof(*rb));
		zlfs_blk_init(rb, ZLFS_KIND_CP_REMAP, b, 0, cpi->version);
		memcpy(rb->e, remaps + n, k * sizeof(*remaps));
		n += k;
		zlfs_blk_seal(rb, seed);
	}
}

static uint32_t remap_blocks(uint32_t n)
{
	return (n + ZLFS_REMAPS_PER_BLOCK - 1) / ZLFS_REMAPS_PER_BLOCK;
}

int ckpt_write_pack(struct zdev *dev, const struct zlfs_sb_info *sbi, struct zlfs_cp_info *cpi,
		    int slot, uint32_t blk, struct zlfs_summary *sums, const uint8_t *sum_logs,
		    uint32_t nsum, const uint32_t *orphans, const struct zlfs_remap_entry *remaps)
{
	uint32_t i, nblocks;
	uint8_t *buf;
	int ret;

	cpi->nr_summaries = nsum;
	cpi->nr_orphan_blocks =
		(cpi->nr_orphans + ZLFS_ORPHANS_PER_BLOCK - 1) / ZLFS_ORPHANS_PER_BLOCK;
	cpi->nr_remap_blocks = remap_blocks(cpi->nr_remaps);
	if (cpi->nr_orphan_blocks > ZLFS_CP_ORPHAN_BLOCKS_MAX || nsum > ZLFS_NR_LOG_TYPES ||
	    cpi->nr_remap_blocks > ZLFS_REMAP_BLOCKS_MAX)
		return -ENOSPC;
	cpi->pack_blocks = nblocks = 2 + nsum + cpi->nr_orphan_blocks + cpi->nr_remap_blocks;
	buf = zdev_buf_alloc((size_t)nblocks * ZLFS_BLOCK_SIZE);
	if (!buf)
		return -ENOMEM;
	zlfs_cp_head_encode(cpi, sbi->seed, buf);
	for (i = 0; i < nsum; i++) {
		struct zlfs_summary *s = (void *)(buf + (size_t)(1 + i) * ZLFS_BLOCK_SIZE);

		memcpy(s, &sums[i], sizeof(*s));
		zlfs_blk_init(s, ZLFS_KIND_CP_SUMMARY, sum_logs[i], 0, cpi->version);
		zlfs_blk_seal(s, sbi->seed);
	}
	ckpt_fill_orphans(buf + (size_t)(1 + nsum) * ZLFS_BLOCK_SIZE, cpi, orphans, sbi->seed);
	ckpt_fill_remaps(buf + (size_t)(1 + nsum + cpi->nr_orphan_blocks) * ZLFS_BLOCK_SIZE, cpi,
			 remaps, sbi->seed);
	zlfs_cp_tail_encode(cpi->version, zlfs_blk_csum(buf, sbi->seed), sbi->seed,
			    buf + (size_t)(nblocks - 1) * ZLFS_BLOCK_SIZE);
	ret = zdev_write(dev, buf, (size_t)nblocks * ZLFS_BLOCK_SIZE, cp_zone_off(sbi, slot, blk));
	zdev_buf_free(buf);
	return ret;
}

/* What block I of a pack is: summaries, then orphan lists, then remap lists (TAIL last). */
static enum zlfs_blk_kind ckpt_payload_kind(const struct zlfs_cp_info *cpi, uint32_t i)
{
	if (i <= cpi->nr_summaries)
		return ZLFS_KIND_CP_SUMMARY;
	if (i <= cpi->nr_summaries + cpi->nr_orphan_blocks)
		return ZLFS_KIND_CP_ORPHAN;
	return ZLFS_KIND_CP_REMAP;
}

/* The written blocks of one checkpoint zone, read CP_SCAN_RUN at a time: a zone holds
 * hundreds of packs of a few blocks each, and every mount (and fsck) walks them all. */
#define CP_SCAN_RUN 64u
struct cp_window {
	struct zdev *dev;
	const struct zlfs_sb_info *sbi;
	int slot;
	uint32_t start, n, limit; /* blocks [start, start + n) are in buf; limit: written */
	uint8_t *buf;
};

/* Block BLK (below the limit) of the zone, or NULL with the read's error in *ERR. */
static const uint8_t *cp_block(struct cp_window *w, uint32_t blk, int *err)
{
	if (blk < w->start || blk >= w->start + w->n) {
		uint32_t n = w->limit - blk < CP_SCAN_RUN ? w->limit - blk : CP_SCAN_RUN;

		w->n = 0;
		*err = zdev_read(w->dev, w->buf, (size_t)n * ZLFS_BLOCK_SIZE,
				 cp_zone_off(w->sbi, w->slot, blk));
		if (*err)
			return NULL;
		w->start = blk;
		w->n = n;
	}
	return w->buf + (size_t)(blk - w->start) * ZLFS_BLOCK_SIZE;
}

/* Validate the pack whose head is at BLK of W's zone. 0 and CPI filled, or -EUCLEAN / an I/O
 * error. */
static int ckpt_read_pack(struct cp_window *w, uint32_t blk, struct zlfs_cp_info *cpi)
{
	const struct zlfs_sb_info *sbi = w->sbi;
	uint64_t head_csum;
	uint32_t i;
	int ret = 0;
	const uint8_t *buf = cp_block(w, blk, &ret);

	if (!buf)
		return ret;
	ret = zlfs_cp_head_decode(buf, sbi->seed, cpi);
	if (ret)
		return ret;
	if (cpi->pack_blocks > w->limit - blk)
		return -EUCLEAN;
	head_csum = zlfs_blk_csum(buf, sbi->seed);
	for (i = 1; i < cpi->pack_blocks; i++) {
		const struct zlfs_blkhdr *h;

		if (!(buf = cp_block(w, blk + i, &ret)))
			return ret;
		if (i == cpi->pack_blocks - 1)
			return zlfs_cp_tail_check(buf, sbi->seed, cpi->version, head_csum);
		h = (const void *)buf;
		ret = zlfs_blk_verify(buf, sbi->seed, ckpt_payload_kind(cpi, i));
		if (ret || le64_get(h->cp_ver) != cpi->version)
			return -EUCLEAN;
	}
	return -EUCLEAN;
}

/* Walk the packs of one checkpoint zone, keeping the newest valid one in BEST. */
static int ckpt_scan_zone(struct zdev *dev, const struct zlfs_sb_info *sbi, int slot,
			  uint8_t *buf, struct zlfs_cp_info *best, struct zlfs_cp_pos *pos,
			  struct zlfs_cp_info *tmp)
{
	struct cp_window w = {.dev = dev, .sbi = sbi, .slot = slot, .buf = buf};
	struct zdev_zone z;
	uint32_t blk = 0;
	int ret = zdev_report_one(dev, sbi->cp_zone[slot], &z);

	if (ret)
		return ret;
	if (z.cond == ZDEV_COND_OFFLINE || z.cond == ZDEV_COND_EMPTY)
		return 0;
	w.limit = (uint32_t)(((z.cond == ZDEV_COND_FULL ? z.capacity : z.wp - z.start)) /
			     ZLFS_BLOCK_SIZE);
	while (blk + 2 <= w.limit) {
		ret = ckpt_read_pack(&w, blk, tmp);
		if (ret == -EUCLEAN || ret == -EBADMSG)
			break; /* a torn or foreign tail ends this zone's log */
		if (ret)
			return ret;
		if (tmp->version >= best->version) { /* a later pack of one version wins */
			*best = *tmp;
			pos->slot = slot;
			pos->blk = blk;
		}
		blk += tmp->pack_blocks;
	}
	return 0;
}

int ckpt_read_newest(struct zdev *dev, const struct zlfs_sb_info *sbi, struct zlfs_cp_info *cpi,
		     struct zlfs_cp_pos *pos)
{
	struct zlfs_cp_info *tmp = malloc(sizeof(*tmp));
	uint8_t *buf = zdev_buf_alloc((size_t)CP_SCAN_RUN * ZLFS_BLOCK_SIZE);
	char why[200];
	int ret = 0, slot;

	if (!tmp || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	memset(cpi, 0, sizeof(*cpi));
	for (slot = 0; slot < 2 && !ret; slot++)
		ret = ckpt_scan_zone(dev, sbi, slot, buf, cpi, pos, tmp);
	if (!ret && !cpi->version)
		ret = -ENOENT;
	/* A whole pack whose checksums hold but whose values do not fit the layout was written
	 * by no zlfs: damage, never a reason to fall back to an older pack. */
	if (!ret && zlfs_cp_check(sbi, cpi, why, sizeof(why))) {
		zlog_err("checkpoint %llu is damaged: %s", (unsigned long long)cpi->version, why);
		ret = -EUCLEAN;
	}
out:
	free(tmp);
	zdev_buf_free(buf);
	return ret;
}

/* ==== the checkpoint of a mounted filesystem ================================================
 * Above: packs on the device (shared with mkfs). Below: loading the NAT, SIT and log state a
 * checkpoint describes, and writing a new checkpoint: dirty nodes to their logs, changed
 * NAT/SIT blocks and their map blocks to the meta log, a device flush, then the pack and
 * another flush. The pack is written only once everything it references is durable.
 */
static uint32_t meta_half_zones(const struct zlfs_fs *fs) { return fs->sb.meta_zones / 2; }
static uint32_t cap_blocks(const struct zlfs_fs *fs)
{
	return (uint32_t)(fs->sb.zone_capacity / ZLFS_BLOCK_SIZE);
}

static int ckpt_alloc(struct zlfs_fs *fs)
{
	const struct zlfs_sb_info *s = &fs->sb;

	fs->nr_meta = s->nat_blocks + s->sit_blocks;
	fs->nr_map = (fs->nr_meta + ZLFS_MAP_PER_BLOCK - 1) / ZLFS_MAP_PER_BLOCK;
	fs->nat_dirty = calloc(s->nat_blocks, 1);
	fs->sit_dirty = calloc(s->sit_blocks, 1);
	fs->meta_addr = calloc(fs->nr_meta, sizeof(*fs->meta_addr));
	fs->map_addr = calloc(fs->nr_map, sizeof(*fs->map_addr));
	fs->map_dirty = calloc(fs->nr_map, 1);
	fs->zone_valid = calloc(s->main_zones, sizeof(*fs->zone_valid));
	fs->zone_born = calloc(s->main_zones, sizeof(*fs->zone_born));
	fs->zone_state = calloc(s->main_zones, 1);
	fs->zone_prefree = calloc(s->main_zones, 1);
	if (!fs->nat_dirty || !fs->sit_dirty || !fs->meta_addr || !fs->map_addr ||
	    !fs->map_dirty || !fs->zone_valid || !fs->zone_born || !fs->zone_state ||
	    !fs->zone_prefree)
		return -ENOMEM;
	return 0;
}

void ckpt_free(struct zlfs_fs *fs)
{
	mcache_destroy(fs);
	free(fs->nat_dirty);
	free(fs->sit_dirty);
	free(fs->meta_addr);
	free(fs->map_addr);
	free(fs->map_dirty);
	free(fs->zone_valid);
	free(fs->zone_born);
	free(fs->zone_state);
	free(fs->zone_prefree);
}

static int ckpt_load_map(struct zlfs_fs *fs, uint8_t *buf)
{
	const struct zlfs_map_block *m = (const void *)buf;
	uint32_t i, j;
	int ret;

	if (fs->cp.nr_map != fs->nr_map)
		return -EUCLEAN;
	for (i = 0; i < fs->nr_map; i++) {
		fs->map_addr[i] = fs->cp.map_addr[i];
		if (fs->map_addr[i] == ZLFS_ADDR_NULL)
			continue;
		ret = meta_block_read(fs, fs->map_addr[i], buf, ZLFS_KIND_MAP, i);
		if (ret)
			return ret;
		for (j = 0; j < ZLFS_MAP_PER_BLOCK && i * ZLFS_MAP_PER_BLOCK + j < fs->nr_meta; j++) {
			uint32_t a = le32_get(m->addr[j]);

			if (a != ZLFS_ADDR_NULL && !zlfs_addr_is_meta(&fs->sb, a)) {
				zlog_err("meta map block %u: addr[%u] = %u is not a block of the meta "
					 "area: run fsck.zlfs", i, j, a);
				return -EUCLEAN;
			}
			fs->meta_addr[i * ZLFS_MAP_PER_BLOCK + j] = a;
		}
	}
	return 0;
}

/* Inodes that were unlinked but open when the checkpoint was taken: freed by the mount. */
static int ckpt_load_orphans(struct zlfs_fs *fs, uint8_t *buf, uint64_t off)
{
	const struct zlfs_cp_orphan *ob = (const void *)buf;
	uint32_t b, i, n = 0;
	int ret;

	for (b = 0; b < fs->cp.nr_orphan_blocks; b++) {
		ret = zdev_read(fs->dev, buf, ZLFS_BLOCK_SIZE, off + (uint64_t)b * ZLFS_BLOCK_SIZE);
		if (ret)
			return ret;
		for (i = 0; i < ZLFS_ORPHANS_PER_BLOCK && n < fs->cp.nr_orphans; i++, n++) {
			uint32_t ino = le32_get(ob->ino[i]);

			ret = ino == ZLFS_NID_NULL ? -EUCLEAN : orphan_add(fs, ino);
			if (ret == -EUCLEAN)
				zlog_err("checkpoint orphan list: entry %u = %u is not an inode number "
					 "below %u: run fsck.zlfs", n, ino, fs->sb.max_nid);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Owners of moved data blocks (remap.c). */
static int ckpt_load_remaps(struct zlfs_fs *fs, uint8_t *buf, uint64_t off)
{
	const struct zlfs_cp_remap *rb = (const void *)buf;
	uint32_t b, i, n = 0;
	int ret;

	for (b = 0; b < fs->cp.nr_remap_blocks; b++) {
		ret = zdev_read(fs->dev, buf, ZLFS_BLOCK_SIZE, off + (uint64_t)b * ZLFS_BLOCK_SIZE);
		if (ret)
			return ret;
		if (le16_get(rb->hdr.kind) != ZLFS_KIND_CP_REMAP)
			return -EUCLEAN;
		for (i = 0; i < ZLFS_REMAPS_PER_BLOCK && n < fs->cp.nr_remaps; i++, n++) {
			const struct zlfs_remap_entry *e = &rb->e[i];
			char why[160];

			if (!zlfs_addr_is_main(&fs->sb, le32_get(e->addr)) || !le32_get(e->nid) ||
			    zlfs_sum_entry_check(&fs->sb, le32_get(e->nid), le16_get(e->ofs), why,
						 sizeof(why))) {
				zlog_err("checkpoint remap entry %u (block %u, nid %u, ofs %u) is "
					 "damaged: run fsck.zlfs", n, le32_get(e->addr),
					 le32_get(e->nid), le16_get(e->ofs));
				return -EUCLEAN;
			}
			ret = remap_set(fs, le32_get(e->addr), le32_get(e->nid), le16_get(e->ofs));
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* An open segment's summary in the pack: of an open log with a segment under way, one per
 * log, every entry within the format's limits. */
static int ckpt_summary_check(struct zlfs_fs *fs, uint32_t t, const struct zlfs_summary *sum,
			      uint8_t *seen)
{
	char why[160] = "";
	uint32_t i;

	if (t >= ZLFS_NR_LOG_TYPES || fs->cp.logs[t].zone == ZLFS_ZONE_NONE ||
	    !(fs->cp.logs[t].next_blk % fs->sb.seg_blocks) || seen[t]) {
		zlog_err("checkpoint summary block for log %u: no open segment of that log needs "
			 "one (or it came twice): run fsck.zlfs", t);
		return -EUCLEAN;
	}
	seen[t] = 1;
	for (i = 0; i < ZLFS_SUM_ENTRIES; i++)
		if (zlfs_sum_entry_check(&fs->sb, le32_get(sum->nid[i]), le16_get(sum->ofs[i]), why,
					 sizeof(why))) {
			zlog_err("checkpoint summary of log %u, entry %u: %s: run fsck.zlfs", t, i, why);
			return -EUCLEAN;
		}
	return 0;
}

/* Logs and their open segments' summaries, carried in the pack. */
static int ckpt_load_logs(struct zlfs_fs *fs, uint8_t *buf)
{
	uint64_t base = (uint64_t)fs->sb.cp_zone[fs->cp_pos.slot] * fs->sb.zone_size +
			(uint64_t)fs->cp_pos.blk * ZLFS_BLOCK_SIZE;
	uint8_t seen[ZLFS_NR_LOG_TYPES] = {0};
	uint32_t i, t;
	int ret;

	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		fs->logs[t].zone = fs->cp.logs[t].zone;
		fs->logs[t].next_blk = fs->cp.logs[t].next_blk;
		fs->logs[t].nr_entries = fs->cp.logs[t].nr_entries;
	}
	for (i = 0; i < fs->cp.nr_summaries; i++) {
		ret = zdev_read(fs->dev, buf, ZLFS_BLOCK_SIZE, base + (uint64_t)(1 + i) * ZLFS_BLOCK_SIZE);
		if (ret)
			return ret;
		t = le32_get(((struct zlfs_blkhdr *)buf)->index);
		ret = ckpt_summary_check(fs, t, (const void *)buf, seen);
		if (ret)
			return ret;
		memcpy(&fs->logs[t].sum, buf, ZLFS_BLOCK_SIZE);
	}
	ret = ckpt_load_orphans(fs, buf, base + (uint64_t)(1 + i) * ZLFS_BLOCK_SIZE);
	return ret ? ret : ckpt_load_remaps(fs, buf, base + (uint64_t)(1 + i + fs->cp.nr_orphan_blocks) *
							      ZLFS_BLOCK_SIZE);
}

/* Which active log each type appends to: with fewer logs, the colder types fold into the
 * warmer ones (docs/format.md, "Main area"). */
static void ckpt_log_map(struct zlfs_fs *fs)
{
	uint32_t t, n = fs->sb.nr_logs;

	for (t = 0; t < ZLFS_NR_LOG_TYPES_R2; t++) {
		int node = t <= ZLFS_LOG_COLD_NODE;
		uint32_t warm = node ? ZLFS_LOG_WARM_NODE : ZLFS_LOG_WARM_DATA;
		int cold = t == ZLFS_LOG_COLD_NODE || t == ZLFS_LOG_COLD_DATA || t == ZLFS_LOG_FROZEN_DATA;

		if (n >= ZLFS_NR_LOG_TYPES_R2)
			fs->log_of[t] = (uint8_t)t;
		else if (n == 6)
			fs->log_of[t] = (uint8_t)(t == ZLFS_LOG_FROZEN_DATA ? ZLFS_LOG_COLD_DATA : t);
		else if (n == 4)
			fs->log_of[t] = (uint8_t)(cold ? warm : t);
		else
			fs->log_of[t] = (uint8_t)warm;
	}
	for (; t < ZLFS_NR_LOG_TYPES; t++) /* the warm data lanes */
		fs->log_of[t] = (uint8_t)(n >= ZLFS_NR_LOG_TYPES ? t : fs->log_of[ZLFS_LOG_WARM_DATA]);
	fs->log_of[SEG_LOG_HOT_USER] = fs->log_of[ZLFS_LOG_HOT_DATA];
	fs->nr_lanes = n >= ZLFS_NR_LOG_TYPES ? ZLFS_DATA_LANES : 1;
}

int ckpt_load(struct zlfs_fs *fs, size_t budget)
{
	int ret = ckpt_read_newest(fs->dev, &fs->sb, &fs->cp, &fs->cp_pos);

	if (ret) {
		if (ret != -EUCLEAN) /* damage has been named already */
			zlog_err("no valid checkpoint found (%s): run fsck.zlfs", strerror(-ret));
		return ret;
	}
	fs->cp_ver = fs->cp.version + 1;
	ckpt_log_map(fs);
	ret = ckpt_alloc(fs);
	if (!ret)
		ret = ckpt_load_map(fs, fs->iobuf);
	if (!ret)
		ret = mcache_init(fs, budget);
	if (!ret)
		ret = sit_scan(fs);
	if (!ret)
		ret = ckpt_load_logs(fs, fs->iobuf);
	if (ret)
		return ret;
	fs->meta_zone = fs->cp.meta_zone;
	fs->meta_next = fs->cp.meta_next_blk;
	fs->nid_hint = fs->cp.next_free_nid;
	fs->seq = fs->cp.seq;
	fs->valid_nodes = fs->cp.valid_nodes;
	fs->valid_inodes = fs->cp.valid_inodes;
	fs->user_bytes = fs->cp.user_bytes;
	fs->dev_bytes = fs->cp.dev_bytes;
	fs->gc_bytes = fs->gc_bytes_at_mount = fs->cp.gc_bytes;
	fs->prealloc_blocks = fs->cp.prealloc_blocks;
	return 0;
}

/* ---- writing ------------------------------------------------------------------------------ */

static int meta_zone_close(struct zlfs_fs *fs, uint32_t zone)
{
	struct zdev_zone z;
	int ret = zdev_report_one(fs->dev, zone, &z);

	if (!ret && z.cond != ZDEV_COND_FULL && z.cond != ZDEV_COND_EMPTY)
		ret = zdev_zone_finish(fs->dev, zone);
	return ret;
}

static int meta_zone_clear(struct zlfs_fs *fs, uint32_t zone)
{
	struct zdev_zone z;
	int ret = zdev_report_one(fs->dev, zone, &z);

	if (!ret && z.cond != ZDEV_COND_EMPTY)
		ret = zdev_zone_reset(fs->dev, zone);
	return ret;
}

static int meta_append(struct zlfs_fs *fs, void *buf, uint32_t *addr)
{
	int ret;

	if (fs->meta_next >= cap_blocks(fs)) {
		uint32_t half = (fs->meta_zone - fs->sb.meta_zone_first) / meta_half_zones(fs);
		uint32_t end = fs->sb.meta_zone_first + (half + 1) * meta_half_zones(fs);

		if (fs->meta_zone + 1 >= end)
			return -ENOSPC; /* sized away by mkfs; never expected */
		ret = meta_zone_close(fs, fs->meta_zone);
		if (!ret) /* a crashed checkpoint may have left blocks there; none is referenced */
			ret = meta_zone_clear(fs, fs->meta_zone + 1);
		if (ret)
			return ret;
		fs->meta_zone++;
		fs->meta_next = 0;
	}
	blk_seal(fs, buf);
	ret = zdev_write(fs->dev, buf, ZLFS_BLOCK_SIZE,
			 (uint64_t)fs->meta_zone * fs->sb.zone_size +
				 (uint64_t)fs->meta_next * ZLFS_BLOCK_SIZE);
	if (ret) {
		zlog_err("write to metadata zone %u failed (%s); filesystem switched to read-only",
			 fs->meta_zone, strerror(-ret));
		ATOMIC_SET(&fs->readonly, 1);
		return ret;
	}
	*addr = zlfs_zone_start_blk(&fs->sb, fs->meta_zone) + fs->meta_next++;
	ATOMIC_ADD(&fs->dev_bytes, ZLFS_BLOCK_SIZE);
	ATOMIC_ADD(&fs->dev_bytes_meta, ZLFS_BLOCK_SIZE);
	return 0;
}

static uint32_t meta_dirty_count(const struct zlfs_fs *fs)
{
	uint32_t n = fs->nr_map, b;

	for (b = 0; b < fs->sb.nat_blocks; b++)
		n += fs->nat_dirty[b];
	for (b = 0; b < fs->sb.sit_blocks; b++)
		n += fs->sit_dirty[b];
	return n;
}

/* The current half is too full: start the other half with a copy of every live block. */
static int meta_switch_half(struct zlfs_fs *fs)
{
	uint32_t hz = meta_half_zones(fs), z, b;
	uint32_t half = (fs->meta_zone - fs->sb.meta_zone_first) / hz;
	uint32_t first = fs->sb.meta_zone_first + (!half) * hz;
	int ret = meta_zone_close(fs, fs->meta_zone);

	for (z = first; !ret && z < first + hz; z++)
		ret = zdev_zone_reset(fs->dev, z);
	if (ret) {
		zlog_err("cannot switch metadata zones: %s", strerror(-ret));
		return ret;
	}
	fs->meta_zone = first;
	fs->meta_next = 0;
	/* Blocks not cached are brought in to be copied: eviction reads these flags. */
	zlock_lock(&fs->nat_lock);
	for (b = 0; b < fs->sb.nat_blocks; b++)
		fs->nat_dirty[b] |= fs->meta_addr[b] != ZLFS_ADDR_NULL;
	zlock_unlock(&fs->nat_lock);
	zlock_lock(&fs->seg_lock);
	for (b = 0; b < fs->sb.sit_blocks; b++)
		fs->sit_dirty[b] |= fs->meta_addr[fs->sb.nat_blocks + b] != ZLFS_ADDR_NULL;
	zlock_unlock(&fs->seg_lock);
	for (b = 0; b < fs->nr_map; b++)
		fs->map_dirty[b] |= fs->map_addr[b] != ZLFS_ADDR_NULL;
	return 0;
}

static void meta_set_addr(struct zlfs_fs *fs, uint32_t idx, uint32_t addr)
{
	fs->meta_addr[idx] = addr;
	fs->map_dirty[idx / ZLFS_MAP_PER_BLOCK] = 1;
}

/* Append NAT or SIT block B from its cached page. The tables do not change under cp_lock
 * exclusive, but readers may be bringing other pages in: the cache and the block's address
 * are touched under the table's lock. */
static int meta_write_table(struct zlfs_fs *fs, uint32_t b, int sit)
{
	struct zlock *lock = sit ? &fs->seg_lock : &fs->nat_lock;
	uint32_t idx = sit ? fs->sb.nat_blocks + b : b, addr;
	int ret;

	memset(fs->iobuf, 0, ZLFS_BLOCK_SIZE);
	zlock_lock(lock);
	/* Not cached: the half switch wants a copy of a block as it is. Copied without caching
	 * it, or a switch would bring in the whole table. */
	ret = mcache_copy_or_encode(fs, b, sit, fs->iobuf);
	zlock_unlock(lock); /* a dirty page stays cached: no lock needed across the write */
	zlfs_blk_init(fs->iobuf, sit ? ZLFS_KIND_SIT : ZLFS_KIND_NAT, idx, 0, fs->cp_ver);
	if (!ret)
		ret = meta_append(fs, fs->iobuf, &addr);
	if (ret)
		return ret;
	zlock_lock(lock); /* the new address first: once clean, the page may be evicted */
	meta_set_addr(fs, idx, addr);
	(sit ? fs->sit_dirty : fs->nat_dirty)[b] = 0;
	zlock_unlock(lock);
	return 0;
}

static int meta_write_map(struct zlfs_fs *fs, uint32_t m)
{
	struct zlfs_map_block *mb = (void *)fs->iobuf;
	uint32_t j, idx;
	int ret;

	memset(mb, 0, sizeof(*mb));
	zlfs_blk_init(mb, ZLFS_KIND_MAP, m, 0, fs->cp_ver);
	for (j = 0; j < ZLFS_MAP_PER_BLOCK; j++) {
		idx = m * ZLFS_MAP_PER_BLOCK + j;
		if (idx >= fs->nr_meta)
			break;
		mb->addr[j] = le32_put(fs->meta_addr[idx]);
	}
	ret = meta_append(fs, mb, &fs->map_addr[m]);
	if (!ret)
		fs->map_dirty[m] = 0;
	return ret;
}

static int meta_write_all(struct zlfs_fs *fs)
{
	uint32_t hz = meta_half_zones(fs), b;
	uint32_t half = (fs->meta_zone - fs->sb.meta_zone_first) / hz;
	uint64_t used = (uint64_t)(fs->meta_zone - fs->sb.meta_zone_first - half * hz) *
				cap_blocks(fs) + fs->meta_next;
	int ret = 0;

	if (used + meta_dirty_count(fs) > (uint64_t)hz * cap_blocks(fs))
		ret = meta_switch_half(fs);
	for (b = 0; !ret && b < fs->sb.nat_blocks; b++)
		if (fs->nat_dirty[b])
			ret = meta_write_table(fs, b, 0);
	for (b = 0; !ret && b < fs->sb.sit_blocks; b++)
		if (fs->sit_dirty[b])
			ret = meta_write_table(fs, b, 1);
	for (b = 0; !ret && b < fs->nr_map; b++)
		if (fs->map_dirty[b])
			ret = meta_write_map(fs, b);
	return ret;
}

/* Fill the new pack's head and collect the open segments' summaries. */
static uint32_t ckpt_fill(struct zlfs_fs *fs, struct zlfs_cp_info *c, int clean,
			  struct zlfs_summary *sums, uint8_t *sum_logs)
{
	uint32_t t, nsum = 0;

	memset(c, 0, sizeof(*c));
	c->version = fs->cp_ver;
	c->time_ns = zlfs_now_ns();
	c->flags = clean ? ZLFS_CP_CLEAN : 0;
	c->nr_logs = fs->sb.nr_logs;
	c->meta_zone = fs->meta_zone;
	c->meta_next_blk = fs->meta_next;
	c->nr_map = fs->nr_map;
	c->next_free_nid = nid_resume_point(fs);
	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		const struct zlog_state *l = &fs->logs[t];

		c->logs[t].zone = l->zone;
		c->logs[t].next_blk = l->next_blk;
		c->logs[t].nr_entries = l->nr_entries;
		if (l->zone != ZLFS_ZONE_NONE && l->next_blk % fs->sb.seg_blocks) {
			memcpy(&sums[nsum], &l->sum, sizeof(l->sum));
			sum_logs[nsum++] = (uint8_t)t;
		}
	}
	c->valid_blocks = fs->valid_blocks;
	c->valid_nodes = fs->valid_nodes;
	c->valid_inodes = fs->valid_inodes;
	c->user_bytes = ATOMIC_GET(&fs->user_bytes);
	c->dev_bytes = ATOMIC_GET(&fs->dev_bytes);
	c->gc_bytes = ATOMIC_GET(&fs->gc_bytes);
	c->prealloc_blocks = seg_prealloc(fs);
	c->seq = fs->seq;
	memcpy(c->map_addr, fs->map_addr, fs->nr_map * sizeof(uint32_t));
	return nsum;
}

/* Where the next pack goes: right after the newest one, or at the start of the other zone.
 * Anything between the newest valid pack and the write pointer (a pack torn by a power cut,
 * or one whose write failed) would hide every pack written after it from the next mount, so
 * then the other zone is used: it holds only older packs. */
static int ckpt_place(struct zlfs_fs *fs, uint32_t blocks, struct zlfs_cp_pos *pos)
{
	struct zdev_zone z;
	uint32_t after = fs->cp_pos.blk + fs->cp.pack_blocks;
	int ret = zdev_report_one(fs->dev, fs->sb.cp_zone[fs->cp_pos.slot], &z);

	if (ret)
		return ret;
	pos->slot = fs->cp_pos.slot;
	pos->blk = (uint32_t)((z.wp - z.start) / ZLFS_BLOCK_SIZE);
	if (z.cond != ZDEV_COND_FULL && pos->blk == after && pos->blk + blocks <= cap_blocks(fs))
		return 0;
	pos->slot = !fs->cp_pos.slot;
	pos->blk = 0;
	ret = zdev_zone_reset(fs->dev, fs->sb.cp_zone[pos->slot]);
	if (!ret)
		ret = meta_zone_close(fs, fs->sb.cp_zone[fs->cp_pos.slot]);
	return ret;
}

/* A checkpoint rewrites every changed NAT/SIT block: bound their number so a checkpoint
 * stays short and fits its meta half, and bound the nodes waiting in memory. */
#define CKPT_DIRTY_META 256
#define CKPT_DIRTY_NODES 4096

/* The limits times SCALE have been reached. */
static int ckpt_past(const struct zlfs_fs *fs, uint32_t scale)
{
	uint32_t half = fs->sb.meta_zones / 2 * cap_blocks(fs);
	uint32_t meta = ATOMIC_GET(&fs->dirty_meta);

	return ATOMIC_GET(&fs->dirty) && !ATOMIC_GET(&fs->readonly) &&
	       (meta >= CKPT_DIRTY_META * scale || meta >= half / 4 * scale ||
		ATOMIC_GET(&fs->nr_dirty_nodes) >= CKPT_DIRTY_NODES * scale ||
		seg_owed_blocks(fs) >= CKPT_DIRTY_NODES * 2 * scale);
}

int ckpt_due(const struct zlfs_fs *fs) { return ckpt_past(fs, 1); }
int ckpt_overdue(const struct zlfs_fs *fs) { return ckpt_past(fs, 2); }

/* Everything staged reaches the device before the metadata that points to it. */
static int ckpt_drain(struct zlfs_fs *fs)
{
	uint32_t zone = 0;
	int ret = wbuf_flush_all(fs->wb);

	if (ret) {
		wbuf_error(fs->wb, &zone);
		zlog_err("write to zone %u failed (%s); filesystem switched to read-only", zone,
			 strerror(-ret));
		ATOMIC_SET(&fs->readonly, 1);
	}
	return ret;
}

/* The orphan list this checkpoint carries. A pack must fit in a checkpoint zone: past that
 * (a burst of unlinks the kernel has not forgotten yet) the rest is left out with a warning;
 * after a crash fsck finds those inodes unreachable. */
static uint32_t *ckpt_orphans(struct zlfs_fs *fs, struct zlfs_cp_info *c, uint32_t nsum)
{
	uint32_t room = cap_blocks(fs) - 2 - nsum, max, n = 0, ino;
	uint32_t *list;

	if (room > ZLFS_CP_ORPHAN_BLOCKS_MAX)
		room = ZLFS_CP_ORPHAN_BLOCKS_MAX;
	max = room * ZLFS_ORPHANS_PER_BLOCK;
	list = malloc(((fs->nr_orphans < max ? fs->nr_orphans : max) + 1) * sizeof(*list));
	if (!list)
		return NULL;
	for (ino = orphan_next(fs, 0); ino && n < max; ino = orphan_next(fs, ino))
		list[n++] = ino;
	if (n < fs->nr_orphans)
		zlog_warn("checkpoint %llu lists %u of %u unlinked-but-open inodes",
			  (unsigned long long)c->version, n, fs->nr_orphans);
	c->nr_orphans = n;
	return list;
}

int ckpt_write(struct zlfs_fs *fs, int clean)
{
	struct zlfs_summary *sums = zdev_buf_alloc(ZLFS_NR_LOG_TYPES * sizeof(*sums));
	struct zlfs_cp_info *c = malloc(sizeof(*c));
	uint8_t sum_logs[ZLFS_NR_LOG_TYPES];
	uint32_t *orphans = NULL;
	struct zlfs_remap_entry *remaps = NULL;
	struct zlfs_cp_pos pos;
	uint32_t nsum;
	int ret = sums && c ? 0 : -ENOMEM;

	LOCK_ASSERT_HELD(&fs->cp_lock); /* exclusive: nothing changes while it is written */
	if (!ret && ATOMIC_GET(&fs->readonly))
		ret = -EROFS;
	if (!ret)
		ret = node_flush_all(fs);
	if (!ret)
		ret = ckpt_drain(fs);
	if (!ret)
		ret = meta_write_all(fs);
	/* A NAT or SIT page that could not be read on the way (logged, read-only since) left an
	 * update undone: no pack may make that state durable. */
	if (!ret && ATOMIC_GET(&fs->readonly))
		ret = -EROFS;
	if (!ret)
		ret = zdev_flush(fs->dev);
	if (!ret) {
		nsum = ckpt_fill(fs, c, clean, sums, sum_logs);
		remaps = malloc((remap_count(fs) + 1) * sizeof(*remaps));
		c->nr_remaps = remaps ? remap_export(fs, remaps, remap_count(fs)) : 0;
		orphans = remaps ? ckpt_orphans(fs, c, nsum + remap_blocks(c->nr_remaps)) : NULL;
		ret = orphans ? ckpt_place(fs, 2 + nsum + (c->nr_orphans + ZLFS_ORPHANS_PER_BLOCK - 1) /
							    ZLFS_ORPHANS_PER_BLOCK +
							    remap_blocks(c->nr_remaps), &pos)
			      : -ENOMEM;
	}
	if (!ret)
		ret = ckpt_write_pack(fs->dev, &fs->sb, c, pos.slot, pos.blk, sums, sum_logs, nsum,
				      orphans, remaps);
	if (!ret)
		ret = zdev_flush(fs->dev);
	if (!ret) {
		ATOMIC_ADD(&fs->dev_bytes, (uint64_t)c->pack_blocks * ZLFS_BLOCK_SIZE);
		ATOMIC_ADD(&fs->dev_bytes_meta, (uint64_t)c->pack_blocks * ZLFS_BLOCK_SIZE);
		fs->cp = *c;
		fs->cp_pos = pos;
		fs->cp_ver++;
		ATOMIC_SET(&fs->dirty, 0);
		ATOMIC_SET(&fs->dirty_meta, 0);
		node_ckpt_done(fs);
		seg_ckpt_done(fs);
		mcache_trim(fs);
	} else if (ret != -EROFS) {
		/* Never write another pack behind one that may be half there. */
		zlog_err("checkpoint %llu failed: %s; filesystem switched to read-only",
			 (unsigned long long)fs->cp_ver, strerror(-ret));
		ATOMIC_SET(&fs->readonly, 1);
	}
	free(orphans);
	free(remaps);
	zdev_buf_free(sums);
	free(c);
	return ret;
}
