/*
 * verify_zones.c - the consistency check's zone and SIT half (verify_int.h): each zone's write
 * pointer against what the checkpoint needs of it (device write-pointer errors, checkpoint
 * mismatches), the metadata zones' conditions, and every segment's SIT bitmap and count
 * against the blocks the tree walk referenced.
 * May call: verify_int.h, core.h, format.h, zdev.h.
 */
#include "verify_int.h"

/* Every referenced block valid in the SIT, every valid block referenced, counts right. */
static void check_segment(struct chk *c, uint32_t seg)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	struct seg_ent sit = chk_sit(c, seg);
	const struct seg_ent *se = &sit;
	uint32_t zone = s->main_zone_first + seg / s->segs_per_zone;
	uint32_t base = zone * zlfs_zone_blocks(s) + (seg % s->segs_per_zone) * s->seg_blocks;
	uint32_t b, n = 0;

	for (b = 0; b < s->seg_blocks; b++) {
		uint32_t addr = base + b;
		int valid = bit(se->bitmap, b), ref = bit(c->ref, addr);

		n += valid;
		if (valid == ref)
			continue;
		finding(c, ZLFS_FIND_ERROR, "block %u (segment %u) is %s in the SIT but %sreferenced",
			addr, seg, valid ? "valid" : "free", ref ? "" : "not ");
		propose(c, valid ? ZLFS_FIX_BLOCK_FREE : ZLFS_FIX_BLOCK_VALID, addr, seg, NULL, 0);
	}
	if (n != se->valid) {
		finding(c, ZLFS_FIND_ERROR, "segment %u counts %u valid blocks, its bitmap %u", seg,
			se->valid, n);
		propose(c, ZLFS_FIX_SEG_COUNT, seg, n, NULL, 0);
	}
}

void check_sit(struct chk *c)
{
	uint32_t segs = zlfs_main_segments(&c->fs->sb), seg;

	for (seg = 0; seg < segs; seg++) {
		if (!(seg & 255))
			progress(c, ZLFS_PHASE_SIT, seg, segs);
		check_segment(c, seg);
	}
}

/* The last block of zone MZ (main-area index) that the checkpoint needs, plus one. */
static uint32_t zone_needed(struct chk *c, uint32_t mz)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t seg, t, last = 0, zone = s->main_zone_first + mz;

	for (seg = 0; seg < s->segs_per_zone; seg++) {
		struct seg_ent sit = chk_sit(c, mz * s->segs_per_zone + seg);
		const struct seg_ent *se = &sit;

		for (t = 0; t < s->seg_blocks; t++)
			if (bit(se->bitmap, t))
				last = seg * s->seg_blocks + t + 1;
	}
	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++)
		if (c->fs->cp.logs[t].zone == zone && c->fs->cp.logs[t].next_blk > last)
			last = c->fs->cp.logs[t].next_blk;
	return last;
}

/* Zones against the checkpoint: a write pointer behind what the checkpoint wrote, or a zone
 * offline/read-only under valid blocks, is the device's fault; a write pointer ahead is
 * normal after a crash and the mount recovers it. */
static void check_zone(struct chk *c, uint32_t mz)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t zone = s->main_zone_first + mz, last, wp, t;
	struct zdev_zone z;

	if (zdev_report_one(c->fs->dev, zone, &z)) {
		finding(c, ZLFS_FIND_DEVICE, "zone %u cannot be reported", zone);
		return;
	}
	last = zone_needed(c, mz);
	wp = z.cond == ZDEV_COND_FULL ? zlfs_zone_blocks(s)
				      : (uint32_t)((z.wp - z.start) / ZLFS_BLOCK_SIZE);
	if (last && (z.cond == ZDEV_COND_OFFLINE || z.cond == ZDEV_COND_RDONLY))
		finding(c, ZLFS_FIND_DEVICE, "zone %u is %s but holds blocks the checkpoint needs "
			"(up to block %u)", zone, zdev_cond_name(z.cond), last);
	else if (last > wp)
		finding(c, ZLFS_FIND_DEVICE, "zone %u: write pointer at block %u is behind the "
			"checkpoint's block %u (the device lost written data%s)", zone, wp, last,
			z.cond == ZDEV_COND_EMPTY ? ", or the zone was reset underneath it" : "");
	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		uint32_t cp_blk = c->fs->cp.logs[t].next_blk;

		if (c->fs->cp.logs[t].zone != zone || wp <= cp_blk || last > wp)
			continue;
		if (log_summary_lost(c->fs, zone, cp_blk, wp))
			finding(c, ZLFS_FIND_DEVICE, "zone %u: write pointer at block %u is past the "
				"segment the checkpoint left open at block %u, whose summary was never "
				"written (the device moved the write pointer itself)", zone, wp,
				cp_blk);
		else
			finding(c, ZLFS_FIND_MISMATCH, "zone %u: write pointer at block %u is ahead "
				"of the checkpoint's block %u (writes after the last checkpoint; the "
				"next mount or fsck -p rolls them forward)", zone, wp, cp_blk);
	}
}

/* The superblock, checkpoint and meta zones: a device that took one offline or made it
 * read-only keeps zlfs from writing its metadata (the daemon refuses a read-write mount). */
static void check_meta_zones(struct chk *c)
{
	const struct zlfs_sb_info *s = &c->fs->sb;
	uint32_t z;
	struct zdev_zone r;

	for (z = s->sb_zone[0]; z < s->meta_zone_first + s->meta_zones; z++) {
		if (zdev_report_one(c->fs->dev, z, &r)) {
			finding(c, ZLFS_FIND_DEVICE, "zone %u cannot be reported", z);
			continue;
		}
		if (r.cond == ZDEV_COND_OFFLINE || r.cond == ZDEV_COND_RDONLY)
			finding(c, ZLFS_FIND_DEVICE, "%s zone %u is %s: zlfs cannot write its metadata "
				"there", z < s->cp_zone[0] ? "superblock" : z < s->meta_zone_first ?
				"checkpoint" : "metadata", z, zdev_cond_name(r.cond));
		else if (z == c->fs->meta_zone && r.cond != ZDEV_COND_FULL &&
			 (r.wp - r.start) / ZLFS_BLOCK_SIZE < c->fs->cp.meta_next_blk)
			finding(c, ZLFS_FIND_DEVICE, "metadata zone %u: write pointer at block %llu is "
				"behind the checkpoint's next metadata block %u (the device lost written "
				"data)", z, (unsigned long long)((r.wp - r.start) / ZLFS_BLOCK_SIZE),
				c->fs->cp.meta_next_blk);
	}
}

void check_zones(struct chk *c)
{
	uint32_t mz;

	check_meta_zones(c);
	for (mz = 0; mz < c->fs->sb.main_zones; mz++) {
		if (!(mz & 63))
			progress(c, ZLFS_PHASE_ZONES, mz, c->fs->sb.main_zones);
		check_zone(c, mz);
	}
}
