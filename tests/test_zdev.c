/*
 * test_zdev.c - backend-neutral tests of the zoned-device interface (zdev.h).
 *
 * Owns: the behaviour every backend must show: geometry, zone reports, sequential writes at
 * the write pointer, reads, zone state transitions, open/active limits, flush.
 * May call: zdev.h, and zdev_emu.h only to create the default image. The write buffer's
 * tests over the same fixture are in test_wbuf.c; the helpers they share are in
 * zdev_test.h.
 *
 * By default each test gets a fresh emulator image (64 MiB, 4 MiB zones of 3 MiB capacity,
 * 2 conventional zones, max_open 4, max_active 6). With ZLFS_TEST_DEV=PATH the same tests
 * run against that device instead. That is destructive: they reset the zones they use and,
 * for the limit tests, every open or closed zone. They touch a few zones, never all.
 */
#include "testutil.h"
#include "zdev_emu.h"
#include "zdev_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

struct zdev *dev;
const struct zdev_geometry *geo;
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

struct zdev_zone zone_info(uint32_t z)
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

uint32_t need_seq_zone(uint32_t nth)
{
	long z = seq_zone(nth);

	ck_assert_msg(z >= 0, "device has fewer than %u sequential zones", nth + 1);
	return (uint32_t)z;
}

void reset_zone(uint32_t z)
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
void *pattern(size_t len, uint64_t off, uint64_t seed)
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

void check_pattern(uint64_t off, size_t len, uint64_t seed)
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

/* --- vectored writes ------------------------------------------------------------------- */

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
	wbuf_tests(tc);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
