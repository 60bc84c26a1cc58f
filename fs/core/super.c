/*
 * super.c - superblock records in the two superblock zones (see super.h).
 *
 * Owns: the superblock ping-pong. Each superblock zone holds one record at its first block
 * and is finished after writing, so it never counts against the device's active-zone limit.
 * An update goes to the zone that does not hold the newest record; the newest one stays
 * intact until the new one is durable, so a power cut during an update loses nothing.
 * Also zlfs_feature_incompat (core.h): an incompatible feature turned on by a new record,
 * here so that any file of core may call it (npack.c's first spanning slot, in a checkpoint)
 * without a circle through mount.c.
 * May call: format.h, zdev.h, log.h.
 */
#include "super.h"
#include "core.h"
#include "log.h"

#include <pthread.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zlfs_first_seq_zone(struct zdev *dev)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone z;
	uint32_t i;
	int ret;

	for (i = 0; i < g->nr_zones; i++) {
		ret = zdev_report_one(dev, i, &z);
		if (ret)
			return ret;
		if (z.type == ZDEV_ZONE_SEQ)
			return (int)i;
	}
	return -ENODEV;
}

/* Decode the record at the start of ZONE: 0, -ENOENT when the zone holds none. *WHOLE is set
 * when the record's checksum holds, whatever else is wrong with it. */
static int sb_read_zone(struct zdev *dev, uint32_t zone, void *buf, struct zlfs_sb_info *sbi,
			int *whole)
{
	struct zdev_zone z;
	int ret = zdev_report_one(dev, zone, &z);

	if (ret)
		return ret;
	if (z.cond == ZDEV_COND_EMPTY || z.cond == ZDEV_COND_OFFLINE ||
	    (z.cond != ZDEV_COND_FULL && z.wp < z.start + ZLFS_BLOCK_SIZE))
		return -ENOENT;
	ret = zdev_read(dev, buf, ZLFS_BLOCK_SIZE, z.start);
	if (ret)
		return ret;
	if (le32_get(((const struct zlfs_blkhdr *)buf)->magic) != ZLFS_MAGIC)
		return -ENOENT;
	*whole = !zlfs_blk_verify(buf, zlfs_csum_seed(((const struct zlfs_super *)buf)->uuid),
				  ZLFS_KIND_SUPER);
	return zlfs_sb_decode(buf, sbi);
}

/* The layout was made for a device: this one must still be it (zone size, enough zones, each
 * zone the layout uses sequential and at least as large as the capacity it was given). The
 * superblock is found in the first two sequential zones, so it must say it lies there. */
int zlfs_sb_check_device(struct zdev *dev, const struct zlfs_sb_info *sbi, char *why, size_t len)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone *zones;
	int first = zlfs_first_seq_zone(dev), ret = 0;
	uint32_t i;

	if (g->zone_size != sbi->zone_size || g->nr_zones < sbi->nr_zones) {
		snprintf(why, len, "superblock zone_size = %llu, nr_zones = %u; the device has %u "
			 "zones of %llu bytes", (unsigned long long)sbi->zone_size, sbi->nr_zones,
			 g->nr_zones, (unsigned long long)g->zone_size);
		return -EUCLEAN;
	}
	if (first < 0 || sbi->sb_zone[0] != (uint32_t)first) {
		snprintf(why, len, "superblock sb_zone[0] = %u, but the device's first sequential "
			 "zone is %d", sbi->sb_zone[0], first);
		return -EUCLEAN;
	}
	/* Every log keeps a zone open, beside the checkpoint and metadata logs: a device that
	 * allows fewer fails the first write past them, after the mount has said yes. */
	if ((g->max_open && sbi->nr_logs + 2 > g->max_open) ||
	    (g->max_active && sbi->nr_logs + 2 > g->max_active)) {
		snprintf(why, len, "the device allows %u open and %u active zones; the "
			 "superblock's %u logs + checkpoint log + metadata log need %u",
			 g->max_open, g->max_active, sbi->nr_logs, sbi->nr_logs + 2);
		return -EUCLEAN;
	}
	zones = calloc(sbi->nr_zones, sizeof(*zones));
	if (!zones)
		return -ENOMEM;
	ret = zdev_report(dev, 0, sbi->nr_zones, zones);
	for (i = (uint32_t)first; !ret && i < sbi->nr_zones; i++) {
		int gone = zones[i].cond == ZDEV_COND_OFFLINE || zones[i].cond == ZDEV_COND_RDONLY;

		if (zones[i].type != ZDEV_ZONE_SEQ || (!gone && zones[i].capacity < sbi->zone_capacity)) {
			snprintf(why, len, "zone %u is %s with a capacity of %llu bytes; the superblock "
				 "needs sequential zones of at least zone_capacity = %llu", i,
				 zdev_type_name(zones[i].type), (unsigned long long)zones[i].capacity,
				 (unsigned long long)sbi->zone_capacity);
			ret = -EUCLEAN;
		}
	}
	free(zones);
	return ret;
}

int zlfs_sb_read(struct zdev *dev, struct zlfs_sb_info *sbi, int *zone_out)
{
	struct zlfs_sb_info cand[2];
	int first = zlfs_first_seq_zone(dev), ret[2], best = -1, i;
	char why[256];
	void *buf;

	if (first < 0)
		return first;
	if ((uint32_t)first + 1 >= zdev_geometry(dev)->nr_zones)
		return -ENOENT;
	buf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!buf)
		return -ENOMEM;
	/* The newest record whose checksum holds decides, even one this reader cannot use:
	 * falling back to the older half of the ping-pong would hide a feature the filesystem
	 * has since turned on. */
	/* A record whose checksum holds but whose layout does not was written by no zlfs: it
	 * takes part, and if it is the newest the filesystem is damaged (the older record may
	 * describe what is no longer there). */
	for (i = 0; i < 2; i++) {
		int whole = 0;

		ret[i] = sb_read_zone(dev, (uint32_t)first + i, buf, &cand[i], &whole);
		if ((!ret[i] || ret[i] == -EPROTONOSUPPORT || (ret[i] == -EUCLEAN && whole)) &&
		    (best < 0 || cand[i].sb_seq > cand[best].sb_seq))
			best = i;
	}
	zdev_buf_free(buf);
	if (best < 0) /* report the more informative failure: a damaged record beats none */
		return ret[0] == -ENOENT ? ret[1] : ret[0];
	*sbi = cand[best];
	if (zone_out)
		*zone_out = best;
	if (ret[best] == -EUCLEAN) {
		zlfs_sb_check_layout(sbi, why, sizeof(why));
		zlog_err("superblock in zone %u is damaged: %s", (uint32_t)first + best, why);
	} else if (!ret[best] && zlfs_sb_check_device(dev, sbi, why, sizeof(why))) {
		zlog_err("superblock does not fit the device: %s", why);
		return -EUCLEAN;
	}
	return ret[best];
}

int zlfs_sb_write(struct zdev *dev, const struct zlfs_sb_info *sbi, int newest_zone)
{
	uint32_t zone = sbi->sb_zone[newest_zone < 0 ? 0 : !newest_zone];
	void *buf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	uint64_t start = (uint64_t)zone * sbi->zone_size;
	int ret;

	if (!buf)
		return -ENOMEM;
	zlfs_sb_encode(sbi, buf);
	ret = zdev_zone_reset(dev, zone);
	if (!ret)
		ret = zdev_write(dev, buf, ZLFS_BLOCK_SIZE, start);
	if (!ret)
		ret = zdev_flush(dev);
	if (!ret)
		ret = zdev_zone_finish(dev, zone);
	zdev_buf_free(buf);
	if (ret)
		zlog_err("cannot write the superblock to zone %u: %s", zone, strerror(-ret));
	return ret;
}

int zlfs_feature_incompat(struct zlfs_fs *fs, uint32_t bit)
{
	/* one writer of the superblock at a time: two requests may want the feature at once */
	static pthread_mutex_t sb_mutex = PTHREAD_MUTEX_INITIALIZER;
	struct zlfs_sb_info sb;
	int ret = 0;

	if (ATOMIC_GET(&fs->sb.feat_incompat) & bit)
		return 0;
	if (ATOMIC_GET(&fs->readonly))
		return -EROFS;
	pthread_mutex_lock(&sb_mutex);
	sb = fs->sb;
	if (!(sb.feat_incompat & bit)) {
		sb.feat_incompat |= bit;
		sb.sb_seq++;
		ret = zlfs_sb_write(fs->dev, &sb, fs->sb_zone);
		if (!ret) {
			fs->sb_zone = !fs->sb_zone;
			fs->sb.sb_seq = sb.sb_seq;
			ATOMIC_SET(&fs->sb.feat_incompat, sb.feat_incompat);
			zlog_info("incompatible feature 0x%x turned on: older zlfs releases refuse "
				  "this filesystem from now on", bit);
		}
	}
	pthread_mutex_unlock(&sb_mutex);
	return ret;
}
