/*
 * super.c - superblock records in the two superblock zones (see super.h).
 *
 * Owns: the superblock ping-pong. Each superblock zone holds one record at its first block
 * and is finished after writing, so it never counts against the device's active-zone limit.
 * An update goes to the zone that does not hold the newest record; the newest one stays
 * intact until the new one is durable, so a power cut during an update loses nothing.
 * May call: format.h, zdev.h, log.h.
 */
#include "super.h"
#include "log.h"

#include <errno.h>
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

/* Decode the record at the start of ZONE: 0, -ENOENT when the zone holds none. */
static int sb_read_zone(struct zdev *dev, uint32_t zone, void *buf, struct zlfs_sb_info *sbi)
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
	return zlfs_sb_decode(buf, sbi);
}

int zlfs_sb_read(struct zdev *dev, struct zlfs_sb_info *sbi, int *zone_out)
{
	struct zlfs_sb_info cand[2];
	int first = zlfs_first_seq_zone(dev), ret[2], best = -1, i;
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
	for (i = 0; i < 2; i++) {
		ret[i] = sb_read_zone(dev, (uint32_t)first + i, buf, &cand[i]);
		if ((!ret[i] || ret[i] == -EPROTONOSUPPORT) &&
		    (best < 0 || cand[i].sb_seq > cand[best].sb_seq))
			best = i;
	}
	zdev_buf_free(buf);
	if (best < 0) /* report the more informative failure: a damaged record beats none */
		return ret[0] == -ENOENT ? ret[1] : ret[0];
	*sbi = cand[best];
	if (zone_out)
		*zone_out = best;
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
