/*
 * resize_core.c - growing a filesystem offline onto more zones of its device (see super.h).
 * resize.zlfs is a thin command line around it; the tests call it directly.
 *
 * Owns: what a larger layout may be (mkfs's rules applied to the new main area, within what
 * the metadata area and the checkpoint already written can describe) and the order of the
 * writes that switch to it.
 * May call: super.c, checkpoint.c (reading the newest pack), mkfs_core.c (the GC reserve
 * rule), format.h, zdev.h, log.h.
 *
 * Crash safety: the new zones are appended to the main area, after every zone the old layout
 * uses, and nothing the old layout references moves or changes. So the whole switch is one
 * superblock record: the new zones are reset first (the old layout never reads them), then the
 * record with the new size is written into the superblock zone that does not hold the newest
 * one (zlfs_sb_write: reset, write, flush, finish). A power cut before that record is durable
 * leaves the newest record the old one, and the filesystem as it was; after, the new one. The
 * checkpoint on the device must be valid under both: the layout keeps the node id count, so
 * the NAT keeps its size and the SIT only grows at its end into entries never written (which
 * read as free segments), and the count of map blocks the checkpoint carries must not change.
 * A growth that needs more map blocks, or more room in the metadata area than its halves
 * hold, is refused with the largest size that fits (docs/tools.md).
 */
#include "super.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t map_blocks(const struct zlfs_sb_info *s)
{
	return (uint32_t)(((uint64_t)s->nat_blocks + s->sit_blocks + ZLFS_MAP_PER_BLOCK - 1) /
			  ZLFS_MAP_PER_BLOCK);
}

/* OLD's layout on NR_ZONES zones: the main area takes them all, with mkfs's SIT size and GC
 * reserve for it; everything before the main area stays. */
static void layout_grown(const struct zlfs_sb_info *old, uint32_t nr_zones, struct zlfs_sb_info *s)
{
	*s = *old;
	s->nr_zones = nr_zones;
	s->main_zones = nr_zones - s->main_zone_first;
	s->sit_blocks = (uint32_t)(((uint64_t)s->main_zones * s->segs_per_zone + ZLFS_SIT_PER_BLOCK - 1) /
				   ZLFS_SIT_PER_BLOCK);
	s->reserved_zones = zlfs_layout_reserve(s->main_zones, s->ovp_percent, s->nr_logs);
	if (s->reserved_zones < old->reserved_zones)
		s->reserved_zones = old->reserved_zones;
}

/* Whether the layout on NR_ZONES zones is one the format allows and CP stays valid under. */
static int layout_fits(const struct zlfs_sb_info *old, const struct zlfs_cp_info *cp,
		       uint32_t nr_zones, char *why, size_t wl)
{
	struct zlfs_sb_info s;

	layout_grown(old, nr_zones, &s);
	if (map_blocks(&s) != map_blocks(old)) {
		snprintf(why, wl, "the SIT of %u zones needs %u map blocks, and the checkpoint "
			 "carries %u", nr_zones, map_blocks(&s), map_blocks(old));
		return -EFBIG;
	}
	if (zlfs_sb_check_layout(&s, why, wl))
		return -EFBIG;
	return zlfs_cp_check(&s, cp, why, wl) ? -EFBIG : 0;
}

/* The largest zone count from OLD's up to WANT that fits (OLD's own when none does). */
static uint32_t largest_fit(const struct zlfs_sb_info *old, const struct zlfs_cp_info *cp,
			    uint32_t want)
{
	char why[256];

	while (want > old->nr_zones && layout_fits(old, cp, want, why, sizeof(why)))
		want--;
	return want;
}

static int resize_check_source(struct zdev *dev, struct zlfs_sb_info *old, int *newest,
			       struct zlfs_cp_info *cp, char *why, size_t wl)
{
	struct zlfs_cp_pos pos;
	int ret = zlfs_sb_read(dev, old, newest);

	if (ret) {
		snprintf(why, wl, "%s", ret == -ENOENT ? "no zlfs filesystem on the device"
					: "its superblock cannot be read (run fsck.zlfs)");
		return ret;
	}
	ret = ckpt_read_newest(dev, old, cp, &pos);
	if (ret) {
		snprintf(why, wl, "no valid checkpoint (run fsck.zlfs): %s", strerror(-ret));
		return ret;
	}
	if (!(cp->flags & ZLFS_CP_CLEAN)) {
		snprintf(why, wl, "the filesystem was not unmounted cleanly: mount and unmount it "
			 "(or run fsck.zlfs -p) first");
		return -EUCLEAN;
	}
	return 0;
}

/* Reset zones [FROM, TO) that hold anything: what was there before never reads as ours. */
static int reset_new_zones(struct zdev *dev, uint32_t from, uint32_t to)
{
	struct zdev_zone z;
	int ret = 0;

	for (uint32_t i = from; !ret && i < to; i++) {
		ret = zdev_report_one(dev, i, &z);
		if (!ret && z.cond != ZDEV_COND_EMPTY)
			ret = zdev_zone_reset(dev, i);
	}
	return ret ? ret : zdev_flush(dev);
}

int zlfs_resize(struct zdev *dev, const struct zlfs_resize_opts *o, struct zlfs_resize_result *r)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zlfs_sb_info *old = calloc(2, sizeof(*old)), *s = old + 1;
	struct zlfs_cp_info *cp = calloc(1, sizeof(*cp));
	uint32_t want = o->nr_zones ? o->nr_zones : g->nr_zones;
	int newest = 0, ret = old && cp ? 0 : -ENOMEM;

	memset(r, 0, sizeof(*r));
	if (!ret)
		ret = resize_check_source(dev, old, &newest, cp, r->why, sizeof(r->why));
	if (ret)
		goto out;
	r->old_zones = old->nr_zones;
	r->old_main = old->main_zones;
	if (want > g->nr_zones) {
		snprintf(r->why, sizeof(r->why), "the device has %u zones, not %u", g->nr_zones, want);
		ret = -EINVAL;
		goto out;
	}
	if (want < old->nr_zones) {
		snprintf(r->why, sizeof(r->why), "the filesystem uses %u zones: resize.zlfs grows, it "
			 "does not shrink", old->nr_zones);
		ret = -EINVAL;
		goto out;
	}
	r->new_zones = want;
	r->new_main = old->main_zones;
	if (want == old->nr_zones)
		goto out; /* nothing to do: ret 0 */
	ret = layout_fits(old, cp, want, r->why, sizeof(r->why));
	if (ret) {
		r->largest = largest_fit(old, cp, want);
		goto out;
	}
	layout_grown(old, want, s);
	ret = zlfs_sb_check_device(dev, s, r->why, sizeof(r->why));
	r->new_main = s->main_zones;
	if (ret || o->dry_run)
		goto out;
	ret = reset_new_zones(dev, old->nr_zones, want);
	if (ret) {
		snprintf(r->why, sizeof(r->why), "cannot reset the new zones: %s", strerror(-ret));
		goto out;
	}
	s->sb_seq = old->sb_seq + 1;
	ret = zlfs_sb_write(dev, s, newest); /* the switch */
	if (ret)
		snprintf(r->why, sizeof(r->why), "writing the superblock: %s (the filesystem keeps "
			 "its old size, or has the new one: run resize.zlfs again)", strerror(-ret));
	r->done = !ret;
out:
	free(old);
	free(cp);
	return ret;
}
