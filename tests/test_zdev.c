/*
 * test_zdev.c - backend-neutral tests of the zoned-device interface (zdev.h).
 *
 * Owns: the behaviour every backend must show: geometry, zone reports, sequential writes at
 * the write pointer, reads, zone state transitions, open/active limits, flush.
 * May call: zdev.h, wbuf.h (the write buffer's runs), and zdev_emu.h only to create the
 * default image and count the emulator's writes.
 *
 * By default each test gets a fresh emulator image (64 MiB, 4 MiB zones of 3 MiB capacity,
 * 2 conventional zones, max_open 4, max_active 6). With ZLFS_TEST_DEV=PATH the same tests
 * run against that device instead. That is destructive: they reset the zones they use and,
 * for the limit tests, every open or closed zone. They touch a few zones, never all.
 */
#include "testutil.h"
#include "zdev.h"
#include "zdev_emu.h"
#include "wbuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ull * 1024)

static const struct zemu_create_opts emu_opts = {
	.size = 64 * MIB,
	.zone_size = 4 * MIB,
	.zone_capacity = 3 * MIB,
	.lblock_size = 4096,
	.nr_conv = 2,
	.max_open = 4,
	.max_active = 6,
};

static struct zdev *dev;
static const struct zdev_geometry *geo;
static char dev_path[512];

static const char *test_dev(void)
{
	const char *p = getenv("ZLFS_TEST_DEV");

	return p && *p ? p : NULL;
}

static void setup(void)
{
	int ret;

	if (test_dev()) {
		snprintf(dev_path, sizeof(dev_path), "%s", test_dev());
	} else {
		tu_path(dev_path, sizeof(dev_path), "zdev.img");
		ret = zemu_create(dev_path, &emu_opts);
		ck_assert_msg(ret == 0, "zemu_create: %s", strerror(-ret));
	}
	ret = zdev_open(dev_path, NULL, &dev);
	ck_assert_msg(ret == 0, "zdev_open %s: %s", dev_path, strerror(-ret));
	geo = zdev_geometry(dev);
}

static void teardown(void)
{
	zdev_close(dev);
	dev = NULL;
}

/* --- helpers ------------------------------------------------------------------------------ */

static struct zdev_zone zone_info(uint32_t z)
{
	struct zdev_zone zi;
	int ret = zdev_report_one(dev, z, &zi);

	ck_assert_msg(ret == 0, "report zone %u: %s", z, strerror(-ret));
	return zi;
}

/* Index of the Nth sequential zone, or -1 when the device has fewer. */
static long seq_zone(uint32_t nth)
{
	struct zdev_zone zi;
	uint32_t z;

	for (z = 0; z < geo->nr_zones; z++) {
		ck_assert_int_eq(zdev_report_one(dev, z, &zi), 0);
		if (zi.type == ZDEV_ZONE_SEQ && nth-- == 0)
			return z;
	}
	return -1;
}

static uint32_t need_seq_zone(uint32_t nth)
{
	long z = seq_zone(nth);

	ck_assert_msg(z >= 0, "device has fewer than %u sequential zones", nth + 1);
	return (uint32_t)z;
}

static void reset_zone(uint32_t z)
{
	struct zdev_zone zi;
	int ret = zdev_zone_reset(dev, z);

	ck_assert_msg(ret == 0, "reset zone %u: %s", z, strerror(-ret));
	zi = zone_info(z);
	ck_assert_int_eq(zi.cond, ZDEV_COND_EMPTY);
	ck_assert_uint_eq(zi.wp, zi.start);
}

/* Reset every open or closed zone so that limit tests start with no active zone. */
static void release_active_zones(void)
{
	struct zdev_zone *zones = calloc(geo->nr_zones, sizeof(*zones));
	uint32_t z;

	ck_assert_ptr_nonnull(zones);
	ck_assert_int_eq(zdev_report(dev, 0, geo->nr_zones, zones), 0);
	for (z = 0; z < geo->nr_zones; z++)
		if (zones[z].cond == ZDEV_COND_IMP_OPEN || zones[z].cond == ZDEV_COND_EXP_OPEN ||
		    zones[z].cond == ZDEV_COND_CLOSED)
			reset_zone(z);
	free(zones);
}

static void assert_same_zone(const struct zdev_zone *a, const struct zdev_zone *b)
{
	ck_assert_uint_eq(a->start, b->start);
	ck_assert_uint_eq(a->len, b->len);
	ck_assert_uint_eq(a->capacity, b->capacity);
	ck_assert_uint_eq(a->wp, b->wp);
	ck_assert_uint_eq(a->type, b->type);
	ck_assert_uint_eq(a->cond, b->cond);
}

/* Deterministic contents: every 8-byte word names its byte offset and a seed. */
static void *pattern(size_t len, uint64_t off, uint64_t seed)
{
	uint64_t *buf = zdev_buf_alloc(len);
	size_t i;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < len / 8; i++)
		buf[i] = (off + i * 8) ^ (seed * 0x9e3779b97f4a7c15ull);
	return buf;
}

static void write_pattern(uint64_t off, size_t len, uint64_t seed)
{
	void *buf = pattern(len, off, seed);
	int ret = zdev_write(dev, buf, len, off);

	ck_assert_msg(ret == 0, "write %zu at %llu: %s", len, (unsigned long long)off,
		      strerror(-ret));
	zdev_buf_free(buf);
}

static void check_pattern(uint64_t off, size_t len, uint64_t seed)
{
	void *want = pattern(len, off, seed);
	void *got = zdev_buf_alloc(len);
	int ret;

	ck_assert_ptr_nonnull(got);
	memset(got, 0xa5, len);
	ret = zdev_read(dev, got, len, off);
	ck_assert_msg(ret == 0, "read %zu at %llu: %s", len, (unsigned long long)off,
		      strerror(-ret));
	ck_assert_msg(memcmp(want, got, len) == 0, "data read at %llu differs from what was written",
		      (unsigned long long)off);
	zdev_buf_free(want);
	zdev_buf_free(got);
}

static int write_one_block(uint64_t off)
{
	void *buf = pattern(geo->lblock_size, off, 99);
	int ret = zdev_write(dev, buf, geo->lblock_size, off);

	zdev_buf_free(buf);
	return ret;
}

/* --- geometry and reports ---------------------------------------------------------------- */

START_TEST(t_geometry)
{
	const struct zdev_info *info = zdev_info(dev);
	struct stat st;

	ck_assert_msg(geo->lblock_size == 512 || geo->lblock_size == 4096, "lblock %u",
		      geo->lblock_size);
	ck_assert_uint_gt(geo->nr_zones, 0);
	ck_assert_uint_lt(geo->nr_conv, geo->nr_zones);
	ck_assert_uint_eq(geo->zone_size % geo->lblock_size, 0);
	ck_assert_uint_gt(geo->zone_capacity, 0);
	ck_assert_uint_le(geo->zone_capacity, geo->zone_size);
	ck_assert_uint_eq(geo->zone_capacity % geo->lblock_size, 0);
	ck_assert_uint_eq(geo->capacity, (uint64_t)geo->nr_zones * geo->zone_size);
	if (geo->max_open && geo->max_active)
		ck_assert_uint_le(geo->max_open, geo->max_active);
	ck_assert_str_eq(info->path, dev_path);
	ck_assert_uint_eq(zdev_zone_of(dev, geo->zone_size * 3 + 5), 3);

	if (!test_dev()) {
		ck_assert_int_eq(info->kind, ZDEV_KIND_EMU);
		ck_assert_uint_eq(geo->lblock_size, 4096);
		ck_assert_uint_eq(geo->nr_zones, 16);
		ck_assert_uint_eq(geo->nr_conv, 2);
		ck_assert_uint_eq(geo->zone_size, 4 * MIB);
		ck_assert_uint_eq(geo->zone_capacity, 3 * MIB);
		ck_assert_uint_eq(geo->max_open, 4);
		ck_assert_uint_eq(geo->max_active, 6);
		return;
	}
	ck_assert_int_eq(stat(dev_path, &st), 0);
	ck_assert_int_eq(info->kind, S_ISBLK(st.st_mode) ? ZDEV_KIND_ZBD : ZDEV_KIND_EMU);
	/* Identity from sysfs: an NVMe controller has a model and firmware, null_blk has none. */
	if (strstr(dev_path, "/nvme"))
		ck_assert_msg(info->model[0] && info->firmware[0], "nvme model '%s' firmware '%s'",
			      info->model, info->firmware);
	if (strstr(dev_path, "/nullb"))
		ck_assert_msg(!info->model[0] && !info->vendor[0], "null_blk model '%s'", info->model);
	printf("zdev: %s: %u zones of %llu MiB (capacity %llu MiB), %u conventional, "
	       "max_open %u, max_active %u, lblock %u, model '%s' firmware '%s'\n",
	       dev_path, geo->nr_zones, (unsigned long long)(geo->zone_size / MIB),
	       (unsigned long long)(geo->zone_capacity / MIB), geo->nr_conv, geo->max_open,
	       geo->max_active, geo->lblock_size, info->model, info->firmware);
}
END_TEST

START_TEST(t_report_all)
{
	struct zdev_zone *zones = calloc(geo->nr_zones, sizeof(*zones));
	struct zdev_zone one, part[3];
	uint64_t min_cap = 0;
	uint32_t z, conv = 0;

	ck_assert_ptr_nonnull(zones);
	ck_assert_int_eq(zdev_report(dev, 0, geo->nr_zones, zones), 0);
	for (z = 0; z < geo->nr_zones; z++) {
		const struct zdev_zone *zi = &zones[z];

		ck_assert_uint_eq(zi->start, (uint64_t)z * geo->zone_size);
		ck_assert_uint_eq(zi->len, geo->zone_size);
		ck_assert_uint_le(zi->capacity, zi->len);
		ck_assert_msg(zi->type == ZDEV_ZONE_CONV || zi->type == ZDEV_ZONE_SEQ,
			      "zone %u type %u", z, zi->type);
		if (zi->type == ZDEV_ZONE_CONV) {
			conv++;
			ck_assert_int_eq(zi->cond, ZDEV_COND_NOT_WP);
			continue;
		}
		ck_assert_int_ne(zi->cond, ZDEV_COND_NOT_WP);
		ck_assert_uint_le(zi->cond, ZDEV_COND_OFFLINE);
		/* read-only and offline zones have no valid write pointer */
		if (zi->cond != ZDEV_COND_RDONLY && zi->cond != ZDEV_COND_OFFLINE) {
			ck_assert_uint_ge(zi->wp, zi->start);
			ck_assert_uint_le(zi->wp, zi->start +
				(zi->cond == ZDEV_COND_FULL ? zi->len : zi->capacity));
		}
		if (!min_cap || zi->capacity < min_cap)
			min_cap = zi->capacity;
	}
	ck_assert_uint_eq(conv, geo->nr_conv);
	ck_assert_uint_eq(min_cap, geo->zone_capacity);

	/* A partial report and a single-zone report say the same as the full one. */
	ck_assert_uint_ge(geo->nr_zones, 3);
	z = geo->nr_zones - 3;
	ck_assert_int_eq(zdev_report(dev, z, 3, part), 0);
	assert_same_zone(&part[0], &zones[z]);
	assert_same_zone(&part[1], &zones[z + 1]);
	assert_same_zone(&part[2], &zones[z + 2]);
	ck_assert_int_eq(zdev_report_one(dev, geo->nr_zones - 1, &one), 0);
	assert_same_zone(&one, &zones[geo->nr_zones - 1]);
	ck_assert_int_eq(zdev_report(dev, geo->nr_zones - 1, 2, part), -EINVAL);
	free(zones);
}
END_TEST

/* --- writes, reads, write pointer -------------------------------------------------------- */

START_TEST(t_write_advances_wp)
{
	uint32_t z = need_seq_zone(0), lbs = geo->lblock_size;
	struct zdev_zone zi;

	reset_zone(z);
	zi = zone_info(z);
	write_pattern(zi.start, 2 * lbs, 1);
	zi = zone_info(z);
	ck_assert_uint_eq(zi.wp, zi.start + 2 * lbs);
	ck_assert_int_eq(zi.cond, ZDEV_COND_IMP_OPEN);
	write_pattern(zi.wp, 5 * lbs, 2);
	zi = zone_info(z);
	ck_assert_uint_eq(zi.wp, zi.start + 7 * lbs);
	reset_zone(z);
}
END_TEST

START_TEST(t_write_elsewhere_fails)
{
	uint32_t z = need_seq_zone(1), lbs = geo->lblock_size;
	struct zdev_zone zi;

	reset_zone(z);
	zi = zone_info(z);
	write_pattern(zi.start, 4 * lbs, 3);
	/* Past the write pointer, before it, and at an empty zone's non-start block. */
	ck_assert_int_eq(write_one_block(zi.start + 5 * lbs), -EIO);
	ck_assert_int_eq(write_one_block(zi.start + lbs), -EIO);
	ck_assert_uint_eq(zone_info(z).wp, zi.start + 4 * lbs);
	reset_zone(z);
	ck_assert_int_eq(write_one_block(zi.start + lbs), -EIO);
	ck_assert_uint_eq(zone_info(z).wp, zi.start);
	/* Misaligned requests never reach the device. */
	ck_assert_int_eq(write_one_block(zi.start + 1), -EINVAL);
	reset_zone(z);
}
END_TEST

START_TEST(t_read_back)
{
	uint32_t z = need_seq_zone(2), lbs = geo->lblock_size;
	uint64_t start = zone_info(z).start;
	size_t big = 64 * lbs;

	reset_zone(z);
	write_pattern(start, lbs, 10);
	write_pattern(start + lbs, 3 * lbs, 11);
	write_pattern(start + 4 * lbs, big, 12);
	check_pattern(start, lbs, 10);
	check_pattern(start + lbs, 3 * lbs, 11);
	check_pattern(start + 4 * lbs, big, 12);
	check_pattern(start + 4 * lbs + 7 * lbs, 9 * lbs, 12); /* inside one write */
	reset_zone(z);
}
END_TEST

/*
 * Fill a zone to its capacity in large writes: a write crossing the capacity fails, the last
 * block makes the zone FULL, and a full zone takes no more writes.
 */
START_TEST(t_fill_zone)
{
	uint32_t z = need_seq_zone(3), lbs = geo->lblock_size;
	size_t chunk = 1 * MIB, n;
	struct zdev_zone zi;
	uint64_t off, end;
	void *buf, *got;

	reset_zone(z);
	zi = zone_info(z);
	end = zi.start + zi.capacity;
	if (chunk > zi.capacity / 2)
		chunk = zi.capacity / 2 / lbs * lbs;
	buf = pattern(chunk, 0, 20);
	for (off = zi.start; off < end - lbs; off += n) {
		n = end - lbs - off < chunk ? (size_t)(end - lbs - off) : chunk;
		ck_assert_int_eq(zdev_write(dev, buf, n, off), 0);
	}
	ck_assert_uint_eq(zone_info(z).wp, end - lbs);
	if (zi.capacity < zi.len) {
		ck_assert_int_lt(zdev_write(dev, buf, 2 * lbs, end - lbs), 0);
		/* a failed write may have moved the write pointer: look again */
		ck_assert_uint_eq(zone_info(z).wp, end - lbs);
	}
	write_pattern(end - lbs, lbs, 21);

	zi = zone_info(z);
	ck_assert_int_eq(zi.cond, ZDEV_COND_FULL);
	ck_assert_uint_ge(zi.wp, zi.start + zi.capacity);
	ck_assert_uint_le(zi.wp, zi.start + zi.len);
	ck_assert_int_eq(write_one_block(end - lbs), -EIO);
	if (zi.capacity < zi.len)
		ck_assert_int_eq(write_one_block(end), -EIO);

	check_pattern(end - lbs, lbs, 21);
	got = zdev_buf_alloc(chunk);
	ck_assert_ptr_nonnull(got);
	ck_assert_int_eq(zdev_read(dev, got, chunk, zi.start), 0);
	ck_assert_int_eq(memcmp(got, buf, chunk), 0);
	zdev_buf_free(got);
	zdev_buf_free(buf);
	reset_zone(z);
}
END_TEST

START_TEST(t_reset)
{
	uint32_t z = need_seq_zone(5), lbs = geo->lblock_size;
	struct zdev_zone zi;

	reset_zone(z);
	zi = zone_info(z);
	write_pattern(zi.start, 8 * lbs, 30);
	ck_assert_uint_eq(zone_info(z).wp, zi.start + 8 * lbs);
	reset_zone(z); /* asserts EMPTY and wp == start */
	/* The zone is writable from its start again. */
	write_pattern(zi.start, lbs, 31);
	check_pattern(zi.start, lbs, 31);
	reset_zone(z);
}
END_TEST

/* --- explicit zone management ------------------------------------------------------------ */

START_TEST(t_open_close_finish)
{
	uint32_t z = need_seq_zone(6), lbs = geo->lblock_size;
	struct zdev_zone zi;
	int cond;

	reset_zone(z);
	zi = zone_info(z);

	/* EMPTY -> EXP_OPEN -> (EMPTY or CLOSED: the zone holds no data) */
	ck_assert_int_eq(zdev_zone_open(dev, z), 0);
	ck_assert_int_eq(zone_info(z).cond, ZDEV_COND_EXP_OPEN);
	ck_assert_int_eq(zdev_zone_close(dev, z), 0);
	cond = zone_info(z).cond;
	ck_assert_msg(cond == ZDEV_COND_EMPTY || cond == ZDEV_COND_CLOSED, "cond %s",
		      zdev_cond_name(cond));
	reset_zone(z);

	/* write: IMP_OPEN -> open: EXP_OPEN -> close: CLOSED -> write: open again */
	write_pattern(zi.start, 2 * lbs, 40);
	ck_assert_int_eq(zone_info(z).cond, ZDEV_COND_IMP_OPEN);
	ck_assert_int_eq(zdev_zone_open(dev, z), 0);
	ck_assert_int_eq(zone_info(z).cond, ZDEV_COND_EXP_OPEN);
	ck_assert_int_eq(zdev_zone_close(dev, z), 0);
	zi = zone_info(z);
	ck_assert_int_eq(zi.cond, ZDEV_COND_CLOSED);
	ck_assert_uint_eq(zi.wp, zi.start + 2 * lbs);
	write_pattern(zi.wp, lbs, 41);
	cond = zone_info(z).cond;
	ck_assert_msg(cond == ZDEV_COND_IMP_OPEN, "after writing a closed zone: %s",
		      zdev_cond_name(cond));

	/* finish: FULL, data kept, no more writes */
	ck_assert_int_eq(zdev_zone_finish(dev, z), 0);
	zi = zone_info(z);
	ck_assert_int_eq(zi.cond, ZDEV_COND_FULL);
	ck_assert_int_eq(write_one_block(zi.start + 3 * lbs), -EIO);
	check_pattern(zi.start, 2 * lbs, 40);
	check_pattern(zi.start + 2 * lbs, lbs, 41);

	/* finishing an empty zone makes it FULL too */
	reset_zone(z);
	ck_assert_int_eq(zdev_zone_finish(dev, z), 0);
	ck_assert_int_eq(zone_info(z).cond, ZDEV_COND_FULL);
	reset_zone(z);
}
END_TEST

START_TEST(t_flush)
{
	uint32_t z = need_seq_zone(7);

	reset_zone(z);
	write_pattern(zone_info(z).start, geo->lblock_size, 50);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	reset_zone(z);
}
END_TEST

/* Conventional zones take writes anywhere, in any order, and overwrites. */
START_TEST(t_conventional)
{
	uint32_t z, lbs = geo->lblock_size;
	struct zdev_zone zi;

	if (!geo->nr_conv) {
		printf("zdev: no conventional zones: t_conventional skipped\n");
		return;
	}
	for (z = 0; z < geo->nr_zones && zone_info(z).type != ZDEV_ZONE_CONV; z++)
		;
	ck_assert_uint_lt(z, geo->nr_zones);
	zi = zone_info(z);
	write_pattern(zi.start + zi.len - lbs, lbs, 60);
	write_pattern(zi.start + 5 * lbs, 3 * lbs, 61);
	write_pattern(zi.start, lbs, 62);
	write_pattern(zi.start + 6 * lbs, lbs, 63); /* overwrite the middle block */
	check_pattern(zi.start + zi.len - lbs, lbs, 60);
	check_pattern(zi.start + 5 * lbs, lbs, 61);
	check_pattern(zi.start + 6 * lbs, lbs, 63);
	check_pattern(zi.start + 7 * lbs, lbs, 61);
	check_pattern(zi.start, lbs, 62);
	ck_assert_int_eq(zone_info(z).cond, ZDEV_COND_NOT_WP);
}
END_TEST

/* --- open and active zone limits --------------------------------------------------------- */

/*
 * Opening max_open zones works; one more explicit open fails with ETOOMANYREFS, as the kernel
 * reports BLK_STS_ZONE_OPEN_RESOURCE; so does a write that would implicitly open another zone
 * while every open zone is explicitly open. Closing one makes room.
 */
START_TEST(t_max_open)
{
	uint32_t n = geo->max_open, i, zs[256];

	if (!n) {
		printf("zdev: no open zone limit: t_max_open skipped\n");
		return;
	}
	ck_assert_uint_lt(n + 1, 256);
	release_active_zones();
	for (i = 0; i <= n; i++) {
		zs[i] = need_seq_zone(i);
		reset_zone(zs[i]);
	}
	for (i = 0; i < n; i++) {
		ck_assert_msg(zdev_zone_open(dev, zs[i]) == 0, "open %u of %u", i + 1, n);
		ck_assert_int_eq(zone_info(zs[i]).cond, ZDEV_COND_EXP_OPEN);
	}
	ck_assert_int_eq(zdev_zone_open(dev, zs[n]), -ETOOMANYREFS);
	ck_assert_int_eq(write_one_block(zone_info(zs[n]).start), -ETOOMANYREFS);
	ck_assert_int_eq(zone_info(zs[n]).cond, ZDEV_COND_EMPTY);

	ck_assert_int_eq(zdev_zone_close(dev, zs[0]), 0);
	ck_assert_int_eq(zdev_zone_open(dev, zs[n]), 0);
	ck_assert_int_eq(zone_info(zs[n]).cond, ZDEV_COND_EXP_OPEN);
	for (i = 0; i <= n; i++)
		reset_zone(zs[i]);
}
END_TEST

/*
 * Closed zones with data stay active: with max_active of them, opening or writing another
 * empty zone fails with EOVERFLOW (BLK_STS_ZONE_ACTIVE_RESOURCE); finishing one makes room.
 */
START_TEST(t_max_active)
{
	uint32_t n = geo->max_active, i, zs[256];

	if (!n) {
		printf("zdev: no active zone limit: t_max_active skipped\n");
		return;
	}
	ck_assert_uint_lt(n + 1, 256);
	release_active_zones();
	for (i = 0; i <= n; i++) {
		zs[i] = need_seq_zone(i);
		reset_zone(zs[i]);
	}
	for (i = 0; i < n; i++) {
		ck_assert_msg(write_one_block(zone_info(zs[i]).start) == 0, "write zone %u", zs[i]);
		ck_assert_int_eq(zdev_zone_close(dev, zs[i]), 0);
		ck_assert_int_eq(zone_info(zs[i]).cond, ZDEV_COND_CLOSED);
	}
	ck_assert_int_eq(zdev_zone_open(dev, zs[n]), -EOVERFLOW);
	ck_assert_int_eq(write_one_block(zone_info(zs[n]).start), -EOVERFLOW);
	ck_assert_int_eq(zone_info(zs[n]).cond, ZDEV_COND_EMPTY);

	ck_assert_int_eq(zdev_zone_finish(dev, zs[0]), 0);
	ck_assert_int_eq(zone_info(zs[0]).cond, ZDEV_COND_FULL);
	ck_assert_int_eq(write_one_block(zone_info(zs[n]).start), 0);
	ck_assert_int_eq(zone_info(zs[n]).cond, ZDEV_COND_IMP_OPEN);
	for (i = 0; i <= n; i++)
		reset_zone(zs[i]);
}
END_TEST

/* --- opening ---------------------------------------------------------------------------- */

START_TEST(t_readonly)
{
	struct zdev_open_opts ro = {.readonly = 1};
	uint32_t z = need_seq_zone(0);
	struct zdev_zone zi;

	teardown();
	ck_assert_int_eq(zdev_open(dev_path, &ro, &dev), 0);
	geo = zdev_geometry(dev);
	zi = zone_info(z);
	ck_assert_int_eq(write_one_block(zi.wp), -EROFS);
	ck_assert_int_eq(zdev_zone_reset(dev, z), -EROFS);
	ck_assert_int_eq(zdev_flush(dev), 0);
}
END_TEST

/* A kernel zoned device is claimed exclusively: a second open sees EBUSY. */
START_TEST(t_exclusive)
{
	struct zdev *other = NULL;

	if (zdev_info(dev)->kind != ZDEV_KIND_ZBD) {
		printf("zdev: not a kernel zoned device: t_exclusive skipped\n");
		return;
	}
	ck_assert_int_eq(zdev_open(dev_path, NULL, &other), -EBUSY);
	ck_assert_ptr_null(other);
}
END_TEST

/* --- vectored writes and the write buffer's runs ----------------------------------------- */

/* Three pieces of one patterned buffer written with zdev_writev land one after the other at
 * the write pointer, as one write of their total would; a vectored write not at the write
 * pointer, or with a misaligned piece, moves nothing. */
START_TEST(t_writev)
{
	uint32_t z = need_seq_zone(3), lbs = geo->lblock_size;
	uint64_t start = zone_info(z).start;
	uint8_t *buf = pattern(6 * lbs, start, 21);
	struct iovec iov[3] = {{buf, 2 * lbs}, {buf + 2 * lbs, lbs}, {buf + 3 * lbs, 3 * lbs}};
	struct iovec bad[2] = {{buf, lbs}, {buf + lbs, 100}};

	reset_zone(z);
	ck_assert_int_eq(zdev_writev(dev, iov, 3, start), 0);
	ck_assert_uint_eq(zone_info(z).wp, start + 6 * lbs);
	check_pattern(start, 6 * lbs, 21);
	ck_assert_int_eq(zdev_writev(dev, iov, 3, start), -EIO);        /* before the wp */
	ck_assert_int_eq(zdev_writev(dev, iov, 3, start + 7 * lbs), -EIO); /* past it */
	ck_assert_int_eq(zdev_writev(dev, bad, 2, start + 6 * lbs), -EINVAL);
	ck_assert_uint_eq(zone_info(z).wp, start + 6 * lbs);
	check_pattern(start, 6 * lbs, 21);
	zdev_buf_free(buf);
	reset_zone(z);
}
END_TEST

/* The write buffer writes the slots of a zone that follow on as one device write, at most a
 * megabyte: ten 64 KiB slots staged in one call (the flushers cannot take the buffer's lock
 * meanwhile) reach the emulator as 10 / 16 rounded up = 1 write, twenty as 2, and the zone
 * holds every block in order. */
START_TEST(t_wbuf_runs)
{
	struct wbuf_opts o = {.policy = WBUF_DYNAMIC, .budget = 32 * 64 * 1024, .slot_size = 64 * 1024};
	uint32_t z = need_seq_zone(4), lbs = geo->lblock_size, per = 64 * 1024 / WBUF_BLOCK;
	uint64_t start = zone_info(z).start;
	struct zemu_stats st0, st1;
	uint8_t *buf;
	struct wbuf *wb;
	int n;

	if (lbs != WBUF_BLOCK)
		return; /* the write buffer stages 4 KiB blocks */
	reset_zone(z);
	ck_assert_int_eq(wbuf_init(dev, &o, &wb), 0);
	buf = pattern(30 * (size_t)per * WBUF_BLOCK, start, 31);
	for (n = 0; n < 2; n++) {
		uint32_t first = n ? 10 * per : 0, count = n ? 20 * per : 10 * per;

		if (zdev_is_emu(dev))
			ck_assert_int_eq(zemu_dev_stats(dev, &st0), 0);
		ck_assert_int_eq(wbuf_add_n(wb, 0, z, first, buf + (size_t)first * WBUF_BLOCK, count), 0);
		ck_assert_int_eq(wbuf_flush_zone(wb, z), 0);
		if (zdev_is_emu(dev)) {
			ck_assert_int_eq(zemu_dev_stats(dev, &st1), 0);
			ck_assert_uint_eq(st1.host_writes - st0.host_writes, n ? 2 : 1);
		}
	}
	wbuf_destroy(wb);
	zdev_buf_free(buf);
	ck_assert_uint_eq(zone_info(z).wp, start + 30ull * per * WBUF_BLOCK);
	check_pattern(start, 30 * (size_t)per * WBUF_BLOCK, 31);
	reset_zone(z);
}
END_TEST

/* The static policy holds one superpage buffer per log it was made for, no more: a write for a
 * log beyond them is refused, not staged in memory that belongs to no log. */
START_TEST(t_wbuf_static_logs)
{
	struct wbuf_opts o = {.policy = WBUF_STATIC, .superpage = 64 * 1024, .nlogs = 3};
	uint32_t z = need_seq_zone(5), per = 64 * 1024 / WBUF_BLOCK;
	struct wbuf_stats st;
	uint8_t *buf;
	struct wbuf *wb;

	if (geo->lblock_size != WBUF_BLOCK)
		return;
	reset_zone(z);
	ck_assert_int_eq(wbuf_init(dev, &o, &wb), 0);
	wbuf_stats(wb, &st);
	ck_assert_uint_eq(st.nslots, 3);
	buf = pattern((size_t)per * WBUF_BLOCK, zone_info(z).start, 41);
	ck_assert_int_eq(wbuf_add_n(wb, 3, z, 0, buf, per), -EINVAL);
	ck_assert_int_eq(wbuf_add_n(wb, 2, z, 0, buf, per), 0);
	ck_assert_int_eq(wbuf_flush_all(wb), 0);
	wbuf_destroy(wb);
	check_pattern(zone_info(z).start, (size_t)per * WBUF_BLOCK, 41);
	zdev_buf_free(buf);
	reset_zone(z);
}
END_TEST

/* A log's copy into the write buffer runs with the buffer's lock dropped. Held in the middle
 * of a three-slot append (a hook in its second copy), the buffer still serves a read of the
 * slot already copied, another log's zone is staged and flushed, and nothing of the held
 * call is written: its slots go out after it, in order, so a drain of its zone waits for
 * the copy and then finds every block on the device. */
struct held_copy {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls, in_copy, release;
};

static void hold_second_copy(void *arg)
{
	struct held_copy *h = arg;

	pthread_mutex_lock(&h->lock);
	if (++h->calls == 2) {
		h->in_copy = 1;
		pthread_cond_broadcast(&h->cond);
		while (!h->release)
			pthread_cond_wait(&h->cond, &h->lock);
	}
	pthread_mutex_unlock(&h->lock);
}

struct wbuf_call {
	struct wbuf *wb;
	int op; /* 0: add, 1: flush the zone, 2: read the run */
	int log;
	uint32_t zone, blk, n;
	uint8_t *buf, got[64];
	int ret;
};

static void *wbuf_call_main(void *arg)
{
	struct wbuf_call *c = arg;

	if (c->op == 0)
		c->ret = wbuf_add_n(c->wb, c->log, c->zone, c->blk, c->buf, c->n);
	else if (c->op == 1)
		c->ret = wbuf_flush_zone(c->wb, c->zone);
	else
		c->ret = wbuf_read_run(c->wb, c->zone, c->blk, c->n, c->buf, c->got);
	return NULL;
}

/* Run C on a thread of its own and wait at most 10 s for it: 0 when it returned. */
static int wbuf_call_within(struct wbuf_call *c, pthread_t *t, int wait)
{
	struct timespec ts;

	ck_assert_int_eq(pthread_create(t, NULL, wbuf_call_main, c), 0);
	if (!wait)
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	return pthread_timedjoin_np(*t, NULL, &ts);
}

START_TEST(t_wbuf_copy_outside_lock)
{
	struct held_copy h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
	struct wbuf_opts o = {.policy = WBUF_DYNAMIC, .budget = 32 * 64 * 1024,
			      .slot_size = 64 * 1024, .copy_hook = hold_second_copy,
			      .copy_hook_arg = &h};
	uint32_t z1 = need_seq_zone(6), z2 = need_seq_zone(7), per = 64 * 1024 / WBUF_BLOCK;
	uint64_t s1 = zone_info(z1).start, s2 = zone_info(z2).start;
	uint8_t *buf1, *buf2, *rd;
	struct wbuf_call add1, add2, flush1, flush2, read1;
	pthread_t ta, tb, tf1, tf2, tr;
	struct wbuf *wb;

	if (geo->lblock_size != WBUF_BLOCK)
		return;
	reset_zone(z1);
	reset_zone(z2);
	ck_assert_int_eq(wbuf_init(dev, &o, &wb), 0);
	buf1 = pattern(3 * (size_t)per * WBUF_BLOCK, s1, 51);
	buf2 = pattern((size_t)per * WBUF_BLOCK, s2, 52);
	rd = zdev_buf_alloc((size_t)per * WBUF_BLOCK);
	add1 = (struct wbuf_call){wb, 0, 0, z1, 0, 3 * per, buf1};
	wbuf_call_within(&add1, &ta, 0);
	pthread_mutex_lock(&h.lock);
	while (!h.in_copy)
		pthread_cond_wait(&h.cond, &h.lock);
	pthread_mutex_unlock(&h.lock);

	read1 = (struct wbuf_call){wb, 2, 0, z1, 0, per, rd};
	ck_assert_msg(!wbuf_call_within(&read1, &tr, 1), "a read waited for another log's copy");
	ck_assert_int_eq(read1.ret, (int)per);
	ck_assert_mem_eq(rd, buf1, (size_t)per * WBUF_BLOCK);

	add2 = (struct wbuf_call){wb, 0, 1, z2, 0, per, buf2};
	flush2 = (struct wbuf_call){wb, 1, 1, z2};
	ck_assert_msg(!wbuf_call_within(&add2, &tb, 1), "another log waited for the copy");
	ck_assert_msg(!wbuf_call_within(&flush2, &tf2, 1), "another zone's drain waited");
	ck_assert_int_eq(add2.ret, 0);
	ck_assert_int_eq(flush2.ret, 0);
	ck_assert_uint_eq(zone_info(z2).wp, s2 + (uint64_t)per * WBUF_BLOCK);

	flush1 = (struct wbuf_call){wb, 1, 0, z1};
	wbuf_call_within(&flush1, &tf1, 0);
	usleep(100 * 1000);
	ck_assert_uint_eq(zone_info(z1).wp, s1); /* the held call's full slot is not written */
	pthread_mutex_lock(&h.lock);
	h.release = 1;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	pthread_join(ta, NULL);
	pthread_join(tf1, NULL);
	ck_assert_int_eq(add1.ret, 0);
	ck_assert_int_eq(flush1.ret, 0);
	ck_assert_uint_eq(zone_info(z1).wp, s1 + 3ull * per * WBUF_BLOCK);
	wbuf_destroy(wb);
	check_pattern(s1, 3 * (size_t)per * WBUF_BLOCK, 51);
	check_pattern(s2, (size_t)per * WBUF_BLOCK, 52);
	zdev_buf_free(buf1);
	zdev_buf_free(buf2);
	zdev_buf_free(rd);
	reset_zone(z1);
	reset_zone(z2);
}
END_TEST

START_TEST(t_not_a_device)
{
	char path[512];
	struct zdev *d = NULL;

	tu_path(path, sizeof(path), "plain-file");
	ck_assert_int_eq(tu_sh("echo not an image > '%s'", path), 0);
	ck_assert_int_eq(zdev_open(path, NULL, &d), -ENODEV);
	ck_assert_ptr_null(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("zdev");
	TCase *tc = tcase_create("zdev");

	printf("zdev: testing %s\n", test_dev() ? test_dev() : "a fresh emulator image");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_geometry);
	tcase_add_test(tc, t_report_all);
	tcase_add_test(tc, t_write_advances_wp);
	tcase_add_test(tc, t_write_elsewhere_fails);
	tcase_add_test(tc, t_read_back);
	tcase_add_test(tc, t_fill_zone);
	tcase_add_test(tc, t_reset);
	tcase_add_test(tc, t_open_close_finish);
	tcase_add_test(tc, t_flush);
	tcase_add_test(tc, t_conventional);
	tcase_add_test(tc, t_max_open);
	tcase_add_test(tc, t_max_active);
	tcase_add_test(tc, t_readonly);
	tcase_add_test(tc, t_exclusive);
	tcase_add_test(tc, t_not_a_device);
	tcase_add_test(tc, t_writev);
	tcase_add_test(tc, t_wbuf_runs);
	tcase_add_test(tc, t_wbuf_static_logs);
	tcase_add_test(tc, t_wbuf_copy_outside_lock);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
