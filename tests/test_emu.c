/*
 * test_emu.c - Check tests for the zoned-device emulator (fs/zdev_emu.c) and the zlfs-emu
 * command.
 *
 * Owns: the tests of every zone rule and its error code, durability (flush, power cut, kill),
 * fault injection, the write log and replay, image validation and the CLI.
 * May call: zdev.h, zdev_emu.h, testutil.h, libc.
 */
#include "testutil.h"
#include "zdev.h"
#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KB 1024ull
#define BLK 4096u
/* default test geometry: 8 zones of 64K, zone 0 conventional, sequential capacity 48K */
#define ZS (64 * KB)
#define ZCAP (48 * KB)

static char img[512], aux[512], lg[512];

static struct zemu_create_opts geo_opts(void)
{
	struct zemu_create_opts o = {.size = 8 * ZS, .zone_size = ZS, .zone_capacity = ZCAP,
				     .lblock_size = BLK, .nr_conv = 1};
	return o;
}

static void mkimg(const char *name, const struct zemu_create_opts *o)
{
	tu_path(img, sizeof(img), name);
	ck_assert_int_eq(zemu_create(img, o), 0);
}

static void mkdefault(const char *name)
{
	struct zemu_create_opts o = geo_opts();
	mkimg(name, &o);
}

static struct zdev *opn(const char *path)
{
	struct zdev *d = NULL;
	int ret = zdev_open(path, NULL, &d);

	ck_assert_msg(ret == 0, "open %s: %d", path, ret);
	return d;
}

static uint64_t zs(uint32_t z) { return z * ZS; }

static void pattern(void *buf, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 12345;
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345;
		p[i] = (uint8_t)(x >> 16);
	}
}

static int wr(struct zdev *d, uint64_t off, size_t len, uint32_t seed)
{
	void *b = zdev_buf_alloc(len);
	int ret;

	ck_assert_ptr_nonnull(b);
	pattern(b, len, seed);
	ret = zdev_write(d, b, len, off);
	zdev_buf_free(b);
	return ret;
}

/* 1 if [off, off+len) holds pattern SEED (or zeros when SEED is 0). */
static int holds(struct zdev *d, uint64_t off, size_t len, uint32_t seed)
{
	uint8_t *b = zdev_buf_alloc(len), *e = malloc(len);
	int ok;

	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(zdev_read(d, b, len, off), 0);
	if (seed)
		pattern(e, len, seed);
	else
		memset(e, 0, len);
	ok = !memcmp(b, e, len);
	zdev_buf_free(b);
	free(e);
	return ok;
}

static struct zdev_zone rep(struct zdev *d, uint32_t z)
{
	struct zdev_zone zone;

	ck_assert_int_eq(zdev_report_one(d, z, &zone), 0);
	return zone;
}

static void expect_zone(struct zdev *d, uint32_t z, int cond, uint64_t wp)
{
	struct zdev_zone zone = rep(d, z);

	ck_assert_msg(zone.cond == cond, "zone %u cond %s, expected %s", z,
		      zdev_cond_name(zone.cond), zdev_cond_name(cond));
	ck_assert_msg(zone.wp == wp, "zone %u wp %llu, expected %llu", z,
		      (unsigned long long)zone.wp, (unsigned long long)wp);
}

/* ---- geometry and basic rules ------------------------------------------------------------ */

START_TEST(t_geometry)
{
	struct zemu_create_opts o = geo_opts();
	const struct zdev_geometry *g;
	const struct zdev_info *in;
	struct zdev *d;

	o.max_open = 2;
	o.max_active = 3;
	mkimg("geo.img", &o);
	d = opn(img);
	g = zdev_geometry(d);
	ck_assert_uint_eq(g->lblock_size, BLK);
	ck_assert_uint_eq(g->nr_zones, 8);
	ck_assert_uint_eq(g->nr_conv, 1);
	ck_assert_uint_eq(g->max_open, 2);
	ck_assert_uint_eq(g->max_active, 3);
	ck_assert_uint_eq(g->zone_size, ZS);
	ck_assert_uint_eq(g->zone_capacity, ZCAP);
	ck_assert_uint_eq(g->capacity, 8 * ZS);
	in = zdev_info(d);
	ck_assert_int_eq(in->kind, ZDEV_KIND_EMU);
	ck_assert_str_eq(in->model, "zlfs-emu");
	ck_assert_str_eq(in->vendor, "zlfs");
	ck_assert_str_eq(in->path, img);
	ck_assert_uint_gt(strlen(in->firmware), 0);
	ck_assert(zdev_is_emu(d));
	{
		struct zdev_zone c = rep(d, 0), s = rep(d, 5);
		ck_assert_int_eq(c.type, ZDEV_ZONE_CONV);
		ck_assert_int_eq(c.cond, ZDEV_COND_NOT_WP);
		ck_assert_uint_eq(c.capacity, ZS);
		ck_assert_uint_eq(c.wp, ZS); /* null_blk: conventional wp = zone end */
		ck_assert_int_eq(s.type, ZDEV_ZONE_SEQ);
		ck_assert_int_eq(s.cond, ZDEV_COND_EMPTY);
		ck_assert_uint_eq(s.start, zs(5));
		ck_assert_uint_eq(s.len, ZS);
		ck_assert_uint_eq(s.capacity, ZCAP);
		ck_assert_uint_eq(s.wp, zs(5));
	}
	zdev_close(d);
}
END_TEST

START_TEST(t_create_rejects)
{
	struct zemu_create_opts o = geo_opts();

	tu_path(img, sizeof(img), "bad.img");
	o.lblock_size = 1024;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = geo_opts();
	o.zone_capacity = ZS + BLK;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = geo_opts();
	o.nr_conv = 8;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = geo_opts();
	o.max_open = 4;
	o.max_active = 2;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = geo_opts();
	o.size = ZS - 1;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = geo_opts();
	o.zone_size = 1000;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
}
END_TEST

START_TEST(t_write_rules)
{
	struct zdev *d;
	uint8_t *b;

	mkdefault("rules.img");
	d = opn(img);
	/* not at the write pointer */
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 1), -EIO);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	ck_assert_int_eq(wr(d, zs(1), 2 * BLK, 1), 0);
	expect_zone(d, 1, ZDEV_COND_IMP_OPEN, zs(1) + 2 * BLK);
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), -EIO);           /* behind the wp */
	ck_assert_int_eq(wr(d, zs(1) + 3 * BLK, BLK, 1), -EIO); /* ahead of it */
	/* past the zone capacity (48K): 10 blocks left, 11 asked */
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, 11 * BLK, 2), -EIO);
	expect_zone(d, 1, ZDEV_COND_IMP_OPEN, zs(1) + 2 * BLK);
	/* filling to capacity makes it FULL; the wp is reported at the zone end */
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, 10 * BLK, 2), 0);
	expect_zone(d, 1, ZDEV_COND_FULL, zs(1) + ZS);
	ck_assert_int_eq(wr(d, zs(1) + ZCAP, BLK, 3), -EIO);
	ck_assert_int_eq(wr(d, zs(1) + ZS - BLK, BLK, 3), -EIO);
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	ck_assert(holds(d, zs(1) + 2 * BLK, 10 * BLK, 2));
	/* between capacity and zone size reads zeros */
	ck_assert(holds(d, zs(1) + ZCAP, ZS - ZCAP, 0));
	/* alignment and range, checked by zdev.c */
	ck_assert_int_eq(wr(d, zs(2), 100, 1), -EINVAL);
	ck_assert_int_eq(wr(d, zs(2) + 512, BLK, 1), -EINVAL);
	ck_assert_int_eq(wr(d, 8 * ZS, BLK, 1), -EINVAL);
	b = zdev_buf_alloc(2 * BLK);
	ck_assert_int_eq(zdev_write(d, b + 8, BLK, zs(2)), -EINVAL);
	zdev_buf_free(b);
	/* a write crossing from zone 2 into zone 3 fails like any write past capacity */
	ck_assert_int_eq(wr(d, zs(2), ZS + BLK, 1), -EIO);
	/* conventional zone: anywhere, any order; not into a sequential zone */
	ck_assert_int_eq(wr(d, 8 * BLK, BLK, 4), 0);
	ck_assert_int_eq(wr(d, 0, BLK, 5), 0);
	ck_assert_int_eq(wr(d, 8 * BLK, BLK, 6), 0);
	ck_assert(holds(d, 0, BLK, 5));
	ck_assert(holds(d, 8 * BLK, BLK, 6));
	ck_assert_int_eq(wr(d, ZS - BLK, 2 * BLK, 7), -EIO);
	expect_zone(d, 0, ZDEV_COND_NOT_WP, ZS);
	zdev_close(d);
}
END_TEST

START_TEST(t_read_zeros)
{
	struct zdev *d;
	uint8_t *b;

	mkdefault("zeros.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(2), BLK, 9), 0);
	b = zdev_buf_alloc(4 * BLK);
	memset(b, 0xaa, 4 * BLK);
	ck_assert_int_eq(zdev_read(d, b, 4 * BLK, zs(2)), 0);
	ck_assert(holds(d, zs(2), BLK, 9));
	for (unsigned i = BLK; i < 4 * BLK; i++)
		ck_assert_uint_eq(b[i], 0);
	zdev_buf_free(b);
	/* a read spanning zones 1..3 */
	ck_assert(holds(d, zs(1), ZS, 0));
	ck_assert(holds(d, zs(2) + BLK, 2 * ZS - BLK, 0));
	zdev_close(d);
}
END_TEST

/* ---- limits -------------------------------------------------------------------------------- */

START_TEST(t_open_limit)
{
	struct zemu_create_opts o = geo_opts();
	struct zdev *d;

	o.max_open = 2;
	mkimg("open.img", &o);
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	ck_assert_int_eq(wr(d, zs(2), BLK, 1), 0);
	/* the third implicit open closes an implicitly open zone (round robin: zone 1) */
	ck_assert_int_eq(wr(d, zs(3), BLK, 1), 0);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	expect_zone(d, 2, ZDEV_COND_IMP_OPEN, zs(2) + BLK);
	expect_zone(d, 3, ZDEV_COND_IMP_OPEN, zs(3) + BLK);
	/* explicit opens are never closed implicitly */
	ck_assert_int_eq(zdev_zone_open(d, 4), 0);
	expect_zone(d, 4, ZDEV_COND_EXP_OPEN, zs(4));
	ck_assert_int_eq(zdev_zone_open(d, 5), 0);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + BLK);
	expect_zone(d, 3, ZDEV_COND_CLOSED, zs(3) + BLK);
	ck_assert_int_eq(wr(d, zs(6), BLK, 1), -ETOOMANYREFS);
	expect_zone(d, 6, ZDEV_COND_EMPTY, zs(6));
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 1), -ETOOMANYREFS); /* closed zone too */
	ck_assert_int_eq(zdev_zone_open(d, 6), -ETOOMANYREFS);
	ck_assert_int_eq(zdev_zone_finish(d, 6), -ETOOMANYREFS);
	/* writing into explicitly open zones is fine */
	ck_assert_int_eq(wr(d, zs(4), BLK, 1), 0);
	expect_zone(d, 4, ZDEV_COND_EXP_OPEN, zs(4) + BLK);
	ck_assert_int_eq(zdev_zone_close(d, 5), 0);
	expect_zone(d, 5, ZDEV_COND_EMPTY, zs(5)); /* closed with nothing written */
	ck_assert_int_eq(wr(d, zs(6), BLK, 1), 0);
	expect_zone(d, 6, ZDEV_COND_IMP_OPEN, zs(6) + BLK);
	zdev_close(d);
}
END_TEST

START_TEST(t_active_limit)
{
	struct zemu_create_opts o = geo_opts();
	struct zdev *d;

	o.max_active = 2;
	mkimg("active.img", &o);
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	ck_assert_int_eq(wr(d, zs(2), BLK, 1), 0);
	ck_assert_int_eq(wr(d, zs(3), BLK, 1), -EOVERFLOW);
	ck_assert_int_eq(zdev_zone_open(d, 3), -EOVERFLOW);
	ck_assert_int_eq(zdev_zone_finish(d, 3), -EOVERFLOW);
	expect_zone(d, 3, ZDEV_COND_EMPTY, zs(3));
	/* closed zones still count as active */
	ck_assert_int_eq(zdev_zone_close(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	ck_assert_int_eq(wr(d, zs(3), BLK, 1), -EOVERFLOW);
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 1), 0); /* CLOSED -> IMP_OPEN: no new resource */
	/* a finished (full) zone is no longer active */
	ck_assert_int_eq(zdev_zone_finish(d, 1), 0);
	ck_assert_int_eq(wr(d, zs(3), BLK, 1), 0);
	ck_assert_int_eq(wr(d, zs(4), BLK, 1), -EOVERFLOW);
	ck_assert_int_eq(zdev_zone_reset(d, 2), 0);
	ck_assert_int_eq(wr(d, zs(4), BLK, 1), 0);
	zdev_close(d);

	/* null_blk: at the open limit an implicit zone is closed only if the active limit allows */
	o.max_open = 1;
	o.max_active = 2;
	mkimg("active2.img", &o);
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	ck_assert_int_eq(wr(d, zs(2), BLK, 1), 0);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 1), -ETOOMANYREFS);
	zdev_close(d);
}
END_TEST

START_TEST(t_transitions)
{
	struct zdev *d;

	mkdefault("trans.img");
	d = opn(img);
	ck_assert_int_eq(zdev_zone_close(d, 1), -EIO); /* EMPTY */
	ck_assert_int_eq(zdev_zone_open(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_EXP_OPEN, zs(1));
	ck_assert_int_eq(zdev_zone_open(d, 1), 0);
	ck_assert_int_eq(zdev_zone_close(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	expect_zone(d, 1, ZDEV_COND_IMP_OPEN, zs(1) + BLK);
	ck_assert_int_eq(zdev_zone_open(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_EXP_OPEN, zs(1) + BLK);
	ck_assert_int_eq(zdev_zone_close(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	ck_assert_int_eq(zdev_zone_close(d, 1), 0);
	ck_assert_int_eq(zdev_zone_open(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_EXP_OPEN, zs(1) + BLK);
	ck_assert_int_eq(zdev_zone_finish(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_FULL, zs(1) + ZS);
	ck_assert_int_eq(zdev_zone_finish(d, 1), 0);
	ck_assert_int_eq(zdev_zone_open(d, 1), -EIO);
	ck_assert_int_eq(zdev_zone_close(d, 1), -EIO);
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 1), -EIO);
	ck_assert(holds(d, zs(1), BLK, 1));
	ck_assert(holds(d, zs(1) + BLK, ZS - BLK, 0));
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	ck_assert(holds(d, zs(1), ZS, 0));
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0);
	ck_assert_int_eq(wr(d, zs(1), BLK, 2), 0);
	ck_assert(holds(d, zs(1), BLK, 2));
	ck_assert_int_eq(zdev_zone_finish(d, 2), 0); /* EMPTY -> FULL */
	expect_zone(d, 2, ZDEV_COND_FULL, zs(2) + ZS);
	ck_assert(holds(d, zs(2), ZS, 0));
	ck_assert_int_eq(zdev_zone_reset(d, 2), 0);
	/* conventional zones take no zone management */
	ck_assert_int_eq(zdev_zone_reset(d, 0), -EIO);
	ck_assert_int_eq(zdev_zone_finish(d, 0), -EIO);
	ck_assert_int_eq(zdev_zone_open(d, 0), -EIO);
	ck_assert_int_eq(zdev_zone_close(d, 0), -EIO);
	ck_assert_int_eq(zdev_zone_reset(d, 8), -EINVAL);
	zdev_close(d);
}
END_TEST

/* ---- faults ---------------------------------------------------------------------------------- */

START_TEST(t_zone_faults)
{
	struct zdev *d;

	mkdefault("faults.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), 2 * BLK, 1), 0);
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_READONLY, zs(1) + 5), 0);
	expect_zone(d, 1, ZDEV_COND_RDONLY, UINT64_MAX);
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	ck_assert(holds(d, zs(1) + 2 * BLK, BLK, 0));
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, BLK, 1), -EIO);
	ck_assert_int_eq(zdev_zone_reset(d, 1), -EIO);
	ck_assert_int_eq(zdev_zone_finish(d, 1), -EIO);
	ck_assert_int_eq(zdev_zone_open(d, 1), -EIO);
	ck_assert_int_eq(zdev_zone_close(d, 1), -EIO);
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_OFFLINE, zs(2)), 0);
	expect_zone(d, 2, ZDEV_COND_OFFLINE, UINT64_MAX);
	{
		uint8_t *b = zdev_buf_alloc(BLK);
		ck_assert_int_eq(zdev_read(d, b, BLK, zs(2)), -EIO);
		ck_assert_int_eq(zdev_read(d, b, BLK, zs(2) - BLK), 0);
		zdev_buf_free(b);
	}
	ck_assert_int_eq(wr(d, zs(2), BLK, 1), -EIO);
	ck_assert_int_eq(zdev_zone_reset(d, 2), -EIO);
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_OFFLINE, 0), -EINVAL); /* conventional */
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_OFFLINE, 8 * ZS), -EINVAL);
	zdev_close(d);
	/* persisted */
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_RDONLY, UINT64_MAX);
	expect_zone(d, 2, ZDEV_COND_OFFLINE, UINT64_MAX);
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	zdev_close(d);
}
END_TEST

START_TEST(t_eio_faults)
{
	struct zemu_stats st;
	struct zdev *d;
	uint8_t *b;

	mkdefault("eio.img");
	d = opn(img);
	b = zdev_buf_alloc(4 * BLK);
	ck_assert_int_eq(wr(d, zs(3), 4 * BLK, 1), 0);
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_EIO_READ, zs(3) + 2 * BLK), 0);
	ck_assert_int_eq(zdev_read(d, b, BLK, zs(3)), 0);          /* does not touch it */
	ck_assert_int_eq(zdev_read(d, b, 4 * BLK, zs(3)), -EIO);   /* fires */
	ck_assert_int_eq(zdev_read(d, b, 4 * BLK, zs(3)), 0);      /* once */
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_EIO_WRITE, zs(4)), 0);
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_int_eq(st.pending_faults, 1);
	ck_assert_int_eq(wr(d, zs(4), BLK, 2), -EIO);
	ck_assert_uint_eq(rep(d, 4).wp, zs(4)); /* nothing written */
	ck_assert_int_eq(wr(d, zs(4), BLK, 2), 0);
	ck_assert_int_eq(wr(d, 0, BLK, 3), 0);
	zdev_close(d);
	/* injected into a closed image, fired once, and the firing is remembered */
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_EIO_READ, BLK / 2), 0);
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_EIO_WRITE, zs(4) + BLK), 0);
	d = opn(img);
	ck_assert_int_eq(zdev_read(d, b, BLK, 0), -EIO);
	zdev_close(d);
	d = opn(img);
	ck_assert_int_eq(zdev_read(d, b, BLK, 0), 0);
	ck_assert_int_eq(wr(d, zs(4) + BLK, BLK, 2), -EIO);
	zdev_close(d);
	d = opn(img);
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_int_eq(st.pending_faults, 0);
	ck_assert_int_eq(wr(d, zs(4) + BLK, BLK, 2), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_EIO_READ, 8 * ZS), -EINVAL);
	zdev_buf_free(b);
}
END_TEST

/* ---- persistence and locking ----------------------------------------------------------------- */

START_TEST(t_persist)
{
	struct zemu_stats st;
	struct zdev *d;

	mkdefault("persist.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), 2 * BLK, 1), 0);
	ck_assert_int_eq(wr(d, BLK, BLK, 2), 0);
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_int_eq(st.unflushed, 2);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_int_eq(st.unflushed, 0);
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, BLK, 3), 0);   /* unflushed */
	ck_assert_int_eq(wr(d, zs(2), ZCAP, 4), 0);            /* FULL by writing */
	ck_assert_int_eq(wr(d, zs(3), BLK, 5), 0);
	ck_assert_int_eq(zdev_zone_finish(d, 3), 0);           /* FULL by finish */
	ck_assert_int_eq(zdev_zone_open(d, 4), 0);
	zdev_close(d);
	/* the process went away, the "device" did not lose power: all writes are there, open
	 * zones come back closed */
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 3 * BLK);
	expect_zone(d, 2, ZDEV_COND_FULL, zs(2) + ZS);
	expect_zone(d, 3, ZDEV_COND_FULL, zs(3) + ZS);
	expect_zone(d, 4, ZDEV_COND_EMPTY, zs(4));
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	ck_assert(holds(d, zs(1) + 2 * BLK, BLK, 3));
	ck_assert(holds(d, zs(2), ZCAP, 4));
	ck_assert(holds(d, zs(3), BLK, 5));
	ck_assert(holds(d, zs(3) + BLK, ZS - BLK, 0));
	ck_assert(holds(d, BLK, BLK, 2));
	ck_assert_int_eq(wr(d, zs(1) + 3 * BLK, BLK, 6), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	zdev_close(d);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 4 * BLK);
	zdev_close(d);
}
END_TEST

START_TEST(t_exclusive)
{
	struct zdev_open_opts ro = {.readonly = 1};
	struct zdev *d, *d2 = NULL, *r1, *r2;

	mkdefault("excl.img");
	d = opn(img);
	ck_assert_int_eq(zdev_open(img, NULL, &d2), -EBUSY);
	ck_assert_ptr_null(d2);
	ck_assert_int_eq(zdev_open(img, &ro, &d2), -EBUSY);
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_OFFLINE, zs(1)), -EBUSY);
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 0), -EBUSY);
	ck_assert_int_eq(zemu_create(img, &(struct zemu_create_opts){.size = 8 * ZS,
			 .zone_size = ZS}), -EBUSY);
	zdev_close(d);
	/* read-only opens share; they refuse writes with EROFS */
	ck_assert_int_eq(zdev_open(img, &ro, &r1), 0);
	ck_assert_int_eq(zdev_open(img, &ro, &r2), 0);
	ck_assert_int_eq(zdev_open(img, NULL, &d2), -EBUSY);
	ck_assert_int_eq(wr(r1, zs(1), BLK, 1), -EROFS);
	ck_assert_int_eq(zdev_zone_reset(r1, 1), -EROFS);
	zdev_close(r1);
	zdev_close(r2);
	d = opn(img);
	zdev_close(d);
}
END_TEST

/* ---- power cut -------------------------------------------------------------------------------- */

START_TEST(t_powercut_all)
{
	struct zemu_powercut_result res;
	struct zdev *d;

	mkdefault("pc_all.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), 2 * BLK, 1), 0);
	ck_assert_int_eq(wr(d, 0, BLK, 2), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, 2 * BLK, 3), 0);
	ck_assert_int_eq(wr(d, zs(2), BLK, 4), 0);
	ck_assert_int_eq(wr(d, 0, BLK, 5), 0);
	ck_assert_int_eq(wr(d, 2 * BLK, BLK, 6), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, -1, 0, 0, &res), 0);
	ck_assert_int_eq(res.unflushed, 4);
	ck_assert_int_eq(res.kept, 0);
	ck_assert_int_eq(res.dropped, 4);
	ck_assert_int_eq(res.torn, 0);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	expect_zone(d, 2, ZDEV_COND_EMPTY, zs(2));
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	ck_assert(holds(d, zs(1) + 2 * BLK, 2 * BLK, 0));
	ck_assert(holds(d, zs(2), BLK, 0));
	ck_assert(holds(d, 0, BLK, 2));          /* flushed, then overwritten: back */
	ck_assert(holds(d, 2 * BLK, BLK, 0));    /* never flushed: gone */
	/* the device works after the power cycle */
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, BLK, 7), 0);
	ck_assert(holds(d, zs(1) + 2 * BLK, BLK, 7));
	zdev_close(d);
	/* a second power cut has nothing left to drop beyond that write */
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 0), 0);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	zdev_close(d);
}
END_TEST

START_TEST(t_powercut_prefix)
{
	struct zemu_powercut_result res;
	struct zdev *d;

	mkdefault("pc_prefix.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, 0, BLK, 1), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1), BLK, 10), 0);          /* 0 kept */
	ck_assert_int_eq(wr(d, zs(2), BLK, 11), 0);          /* 1 kept */
	ck_assert_int_eq(wr(d, 0, BLK, 12), 0);              /* 2 kept */
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 13), 0);    /* 3 dropped */
	ck_assert_int_eq(wr(d, 0, BLK, 14), 0);              /* 4 dropped */
	ck_assert_int_eq(wr(d, zs(2) + BLK, BLK, 15), 0);    /* 5 dropped */
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, 3, 0, 0, &res), 0);
	ck_assert_int_eq(res.unflushed, 6);
	ck_assert_int_eq(res.kept, 3);
	ck_assert_int_eq(res.dropped, 3);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + BLK);
	ck_assert(holds(d, zs(1), BLK, 10));
	ck_assert(holds(d, zs(1) + BLK, BLK, 0));
	ck_assert(holds(d, zs(2), BLK, 11));
	ck_assert(holds(d, 0, BLK, 12));
	zdev_close(d);
	/* keeping more than there is keeps everything */
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 16), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut(img, 99, 0, 0), 1);
	d = opn(img);
	ck_assert(holds(d, zs(1) + BLK, BLK, 16));
	zdev_close(d);
}
END_TEST

START_TEST(t_powercut_torn)
{
	struct zemu_powercut_result res;
	struct zdev *d;

	mkdefault("pc_torn.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, 0, 4 * BLK, 1), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1), BLK, 2), 0);
	ck_assert_int_eq(wr(d, zs(1) + BLK, 4 * BLK, 3), 0);  /* torn: 2 of 4 blocks */
	ck_assert_int_eq(wr(d, zs(2), BLK, 4), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, 1, 0, 1, &res), 0);
	ck_assert_int_eq(res.kept, 1);
	ck_assert_int_eq(res.torn, 1);
	ck_assert_uint_eq(res.torn_bytes, 2 * BLK);
	ck_assert_uint_eq(res.torn_len, 4 * BLK);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 3 * BLK);
	expect_zone(d, 2, ZDEV_COND_EMPTY, zs(2));
	{
		uint8_t *b = zdev_buf_alloc(4 * BLK), *e = malloc(4 * BLK);
		pattern(e, 4 * BLK, 3);
		ck_assert_int_eq(zdev_read(d, b, 4 * BLK, zs(1) + BLK), 0);
		ck_assert(!memcmp(b, e, 2 * BLK));
		for (unsigned i = 2 * BLK; i < 4 * BLK; i++)
			ck_assert_uint_eq(b[i], 0);
		zdev_buf_free(b);
		free(e);
	}
	/* a torn conventional write: new leading half, old trailing half */
	ck_assert_int_eq(wr(d, 0, 4 * BLK, 5), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 1), 0);
	d = opn(img);
	{
		uint8_t *b = zdev_buf_alloc(4 * BLK), *e = malloc(4 * BLK);
		ck_assert_int_eq(zdev_read(d, b, 4 * BLK, 0), 0);
		pattern(e, 4 * BLK, 5);
		ck_assert(!memcmp(b, e, 2 * BLK));
		pattern(e, 4 * BLK, 1);
		ck_assert(!memcmp(b + 2 * BLK, e + 2 * BLK, 2 * BLK));
		zdev_buf_free(b);
		free(e);
	}
	zdev_close(d);
}
END_TEST

static void ten_writes(const char *name)
{
	struct zdev *d;

	tu_path(aux, sizeof(aux), name);
	{
		struct zemu_create_opts o = geo_opts();
		ck_assert_int_eq(zemu_create(aux, &o), 0);
	}
	d = opn(aux);
	for (uint32_t i = 0; i < 10; i++)
		ck_assert_int_eq(wr(d, zs(1) + i * BLK, BLK, 100 + i), 0);
	zdev_close(d);
}

START_TEST(t_powercut_seeded)
{
	long first[8];
	int distinct = 0;

	for (int s = 0; s < 8; s++) {
		struct zemu_powercut_result r1, r2;
		struct zdev *d;

		ten_writes("seed_a.img");
		ck_assert_int_eq(zemu_powercut_ex(aux, 0, 1000 + s, 0, &r1), 0);
		ck_assert_int_eq(r1.unflushed, 10);
		ck_assert(r1.kept >= 0 && r1.kept <= 10);
		ck_assert_int_eq(r1.kept + r1.dropped, 10);
		d = opn(aux);
		ck_assert_uint_eq(rep(d, 1).wp, zs(1) + r1.kept * BLK);
		if (r1.kept)
			ck_assert(holds(d, zs(1) + (r1.kept - 1) * BLK, BLK, 100 + r1.kept - 1));
		zdev_close(d);
		/* the same seed on the same history gives the same cut */
		ten_writes("seed_b.img");
		ck_assert_int_eq(zemu_powercut_ex(aux, 7, 1000 + s, 0, &r2), 0);
		ck_assert_int_eq(r2.kept, r1.kept);
		first[s] = r1.kept;
		for (int j = 0; j < s; j++)
			if (first[j] == first[s])
				goto seen;
		distinct++;
seen:;
	}
	ck_assert_int_ge(distinct, 2);
}
END_TEST

START_TEST(t_powercut_dev)
{
	struct zdev *d;

	mkdefault("pc_dev.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	for (uint32_t i = 1; i < 5; i++)
		ck_assert_int_eq(wr(d, zs(1) + i * BLK, BLK, 1 + i), 0);
	ck_assert_int_eq(zdev_zone_open(d, 3), 0);
	ck_assert_int_eq(zemu_powercut_dev(d, 2, 0, 0), 2);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 3 * BLK);
	expect_zone(d, 3, ZDEV_COND_EMPTY, zs(3));
	ck_assert(holds(d, zs(1) + 2 * BLK, BLK, 3));
	ck_assert(holds(d, zs(1) + 3 * BLK, 2 * BLK, 0));
	ck_assert_int_eq(wr(d, zs(1) + 4 * BLK, BLK, 9), -EIO);
	ck_assert_int_eq(wr(d, zs(1) + 3 * BLK, BLK, 9), 0);
	ck_assert(holds(d, zs(1) + 3 * BLK, BLK, 9));
	zdev_close(d);
}
END_TEST

START_TEST(t_journal_full)
{
	struct zemu_create_opts o = {.size = 4 * 256 * KB, .zone_size = 256 * KB,
				     .journal_slots = 8};
	struct zdev *d;

	mkimg("jfull.img", &o);
	d = opn(img);
	for (uint32_t i = 0; i < 20; i++)
		ck_assert_int_eq(wr(d, zs(0) + i * BLK, BLK, 50 + i), 0);
	zdev_close(d);
	/* the cache destaged by itself after 8 and after 16 writes */
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 0), 0);
	d = opn(img);
	ck_assert_uint_eq(rep(d, 0).wp, 16 * BLK);
	ck_assert(holds(d, 15 * BLK, BLK, 65));
	zdev_close(d);
}
END_TEST

/* ---- write log and replay ------------------------------------------------------------------- */

static void replay_to(long n, int torn)
{
	tu_path(aux, sizeof(aux), "replayed.img");
	ck_assert_int_eq(zemu_replay(img, lg, n, aux, torn), 0);
}

START_TEST(t_log_replay)
{
	struct zemu_create_opts o = geo_opts();
	struct zemu_stats st;
	struct zdev *d;
	struct stat sb;

	tu_path(lg, sizeof(lg), "ops.log");
	o.log_path = lg;
	mkimg("logged.img", &o);
	ck_assert_int_eq(zemu_log_count(lg), 0);
	d = opn(img);
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_str_eq(st.log_path, lg);
	ck_assert_int_eq(wr(d, zs(1), 2 * BLK, 1), 0);       /* 1 */
	ck_assert_int_eq(wr(d, 0, BLK, 2), 0);               /* 2 */
	ck_assert_int_eq(zdev_flush(d), 0);                  /* 3 */
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, 4 * BLK, 3), 0); /* 4 */
	ck_assert_int_eq(zdev_zone_open(d, 2), 0);           /* 5 */
	ck_assert_int_eq(wr(d, zs(2), BLK, 4), 0);           /* 6 */
	ck_assert_int_eq(zdev_zone_close(d, 2), 0);          /* 7 */
	ck_assert_int_eq(zdev_zone_finish(d, 2), 0);         /* 8 */
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0);          /* 9 */
	ck_assert_int_eq(wr(d, zs(1), BLK, 5), 0);           /* 10 */
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, BLK, 6), -EIO); /* failed: not logged */
	ck_assert_int_eq(wr(d, zs(3), BLK, 7), 0);           /* 11 */
	zdev_close(d);
	ck_assert_int_eq(zemu_log_count(lg), 11);

	replay_to(0, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	ck_assert(holds(d, 0, BLK, 0));
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_str_eq(st.log_path, ""); /* the replayed image is not logged */
	zdev_close(d);
	replay_to(2, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	ck_assert(holds(d, 0, BLK, 2));
	zdev_close(d);
	/* durable: a power cut takes nothing away */
	ck_assert_int_eq(zemu_powercut(aux, -1, 0, 0), 0);
	replay_to(4, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 6 * BLK);
	ck_assert(holds(d, zs(1) + 2 * BLK, 4 * BLK, 3));
	zdev_close(d);
	replay_to(4, 1);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 4 * BLK);
	ck_assert(holds(d, zs(1) + 4 * BLK, 2 * BLK, 0));
	zdev_close(d);
	replay_to(3, 1); /* a flush cannot be torn */
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	zdev_close(d);
	replay_to(8, 0);
	d = opn(aux);
	expect_zone(d, 2, ZDEV_COND_FULL, zs(2) + ZS);
	ck_assert(holds(d, zs(2), BLK, 4));
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 6 * BLK);
	zdev_close(d);
	replay_to(9, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	zdev_close(d);
	replay_to(11, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	ck_assert(holds(d, zs(1), BLK, 5));
	ck_assert(holds(d, zs(3), BLK, 7));
	zdev_close(d);
	tu_path(aux, sizeof(aux), "replayed.img");
	ck_assert_int_eq(zemu_replay(img, lg, 12, aux, 0), -EINVAL);
	ck_assert_int_eq(zemu_replay(img, lg, 1, img, 0), -EINVAL);

	/* a torn tail (the last write cut short) is not counted */
	{
		char tail[10];
		int fd = open(lg, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(fstat(fd, &sb), 0);
		ck_assert_int_eq(pread(fd, tail, 10, sb.st_size - 10), 10);
		ck_assert_int_eq(ftruncate(fd, sb.st_size - 10), 0);
		ck_assert_int_eq(zemu_log_count(lg), 10);
		ck_assert_int_eq(pwrite(fd, tail, 10, sb.st_size - 10), 10);
		ck_assert_int_eq(zemu_log_count(lg), 11);
		/* what a process killed while appending leaves: part of a record */
		ck_assert_int_eq(pwrite(fd, tail, 10, sb.st_size), 10);
		close(fd);
	}
	ck_assert_int_eq(zemu_log_count(lg), 11);
	d = opn(img); /* cuts the torn tail off and goes on */
	ck_assert_int_eq(wr(d, zs(3) + BLK, BLK, 8), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_log_count(lg), 12);
	replay_to(12, 0);
	d = opn(aux);
	expect_zone(d, 3, ZDEV_COND_CLOSED, zs(3) + 2 * BLK);
	ck_assert(holds(d, zs(3), BLK, 7));
	ck_assert(holds(d, zs(3) + BLK, BLK, 8));
	zdev_close(d);
}
END_TEST

START_TEST(t_log_on_used_image)
{
	struct zdev_open_opts oo = {0};
	struct zdev *d;
	char base[600];
	struct stat sb;

	mkdefault("used.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), 2 * BLK, 1), 0);
	ck_assert_int_eq(wr(d, BLK, BLK, 2), 0);
	zdev_close(d);
	tu_path(lg, sizeof(lg), "used.log");
	unlink(lg);
	oo.emu_log = lg;
	/* pending in the base: it fails the first try, which is not logged, then the retry
	 * must replay without meeting it again */
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_EIO_WRITE, zs(1) + 2 * BLK), 0);
	ck_assert_int_eq(zdev_open(img, &oo, &d), 0);
	snprintf(base, sizeof(base), "%s.base", lg);
	ck_assert_int_eq(stat(base, &sb), 0);
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, BLK, 3), -EIO);
	ck_assert_int_eq(wr(d, zs(1) + 2 * BLK, BLK, 3), 0);
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_log_count(lg), 2);
	replay_to(0, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	ck_assert(holds(d, zs(1), 2 * BLK, 1));
	ck_assert(holds(d, BLK, BLK, 2));
	zdev_close(d);
	replay_to(1, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 3 * BLK);
	ck_assert(holds(d, zs(1) + 2 * BLK, BLK, 3));
	zdev_close(d);
	replay_to(2, 0);
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	ck_assert(holds(d, BLK, BLK, 2));
	zdev_close(d);
	/* a log of another geometry is refused */
	{
		struct zemu_create_opts o = geo_opts();
		o.nr_conv = 2;
		tu_path(aux, sizeof(aux), "other.img");
		ck_assert_int_eq(zemu_create(aux, &o), 0);
		ck_assert_int_eq(zdev_open(aux, &oo, &d), -EINVAL);
		tu_path(base, sizeof(base), "replayed.img");
		ck_assert_int_eq(zemu_replay(aux, lg, 1, base, 0), -EINVAL);
	}
}
END_TEST

/* The image and a full replay of its log must agree zone by zone and byte by byte. */
static void same_devices(struct zdev *a, struct zdev *b)
{
	uint64_t zsz = zdev_geometry(a)->zone_size;
	uint8_t *x = zdev_buf_alloc(zsz), *y = zdev_buf_alloc(zsz);

	for (uint32_t z = 0; z < zdev_geometry(a)->nr_zones; z++) {
		struct zdev_zone za = rep(a, z), zb = rep(b, z);
		ck_assert_msg(za.cond == zb.cond && za.wp == zb.wp, "zone %u: %s/%llu vs %s/%llu",
			      z, zdev_cond_name(za.cond), (unsigned long long)za.wp,
			      zdev_cond_name(zb.cond), (unsigned long long)zb.wp);
		ck_assert_int_eq(zdev_read(a, x, zsz, za.start), 0);
		ck_assert_int_eq(zdev_read(b, y, zsz, zb.start), 0);
		ck_assert_msg(!memcmp(x, y, zsz), "zone %u data differs", z);
	}
	zdev_buf_free(x);
	zdev_buf_free(y);
}

/* Run OP on the logged image, then put back the image as it was before OP: the log now ends
 * with an operation the image never saw, as when the process is killed between logging an
 * operation and applying it. The next open must redo it. */
static void lose_last_op(void (*op)(struct zdev *))
{
	struct zdev *d;

	ck_assert_int_eq(tu_sh("cp --sparse=always %s %s.before", img, img), 0);
	d = opn(img);
	op(d);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("cp --sparse=always %s.before %s", img, img), 0);
}

static void op_seq_write(struct zdev *d) { ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 3), 0); }
static void op_conv_write(struct zdev *d) { ck_assert_int_eq(wr(d, 0, BLK, 4), 0); }
static void op_reset(struct zdev *d) { ck_assert_int_eq(zdev_zone_reset(d, 1), 0); }
static void op_finish(struct zdev *d) { ck_assert_int_eq(zdev_zone_finish(d, 2), 0); }

START_TEST(t_log_redo)
{
	struct zemu_create_opts o = geo_opts();
	struct zdev *d, *r;

	tu_path(lg, sizeof(lg), "redo.log");
	o.log_path = lg;
	mkimg("redo.img", &o);
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	ck_assert_int_eq(wr(d, 0, BLK, 2), 0);
	ck_assert_int_eq(wr(d, zs(2), BLK, 5), 0);
	zdev_close(d);
	lose_last_op(op_seq_write);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	ck_assert(holds(d, zs(1) + BLK, BLK, 3));
	zdev_close(d);
	lose_last_op(op_conv_write);
	d = opn(img);
	ck_assert(holds(d, 0, BLK, 4));
	zdev_close(d);
	lose_last_op(op_finish);
	d = opn(img);
	expect_zone(d, 2, ZDEV_COND_FULL, zs(2) + ZS);
	zdev_close(d);
	lose_last_op(op_reset);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_EMPTY, zs(1));
	ck_assert_int_eq(wr(d, zs(1), BLK, 6), 0);
	zdev_close(d);
	/* and the log replays to exactly the image */
	tu_path(aux, sizeof(aux), "redo-replayed.img");
	ck_assert_int_eq(zemu_log_count(lg), 8);
	ck_assert_int_eq(zemu_replay(img, lg, 8, aux, 0), 0);
	d = opn(img);
	r = opn(aux);
	same_devices(d, r);
	zdev_close(r);
	zdev_close(d);
}
END_TEST

/* ---- bad images ----------------------------------------------------------------------------- */

static void poke(const char *path, off_t off, uint8_t xor)
{
	int fd = open(path, O_RDWR);
	uint8_t c;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &c, 1, off), 1);
	c ^= xor;
	ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

START_TEST(t_corrupt)
{
	struct zdev *d = NULL;
	FILE *f;

	mkdefault("corrupt.img");
	poke(img, 20, 0x10); /* nr_zones */
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EUCLEAN);
	ck_assert_ptr_null(d);
	mkdefault("corrupt.img");
	poke(img, 4096 + 3 * 32 + 1, 0x01); /* zone 3's table entry */
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EUCLEAN);
	mkdefault("corrupt.img");
	ck_assert_int_eq(truncate(img, 4 * ZS), 0);
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EUCLEAN);
	mkdefault("corrupt.img");
	poke(img, 8, 0x07); /* version */
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EINVAL);
	/* not an image at all */
	tu_path(aux, sizeof(aux), "plain.txt");
	f = fopen(aux, "w");
	ck_assert_ptr_nonnull(f);
	fputs("hello, I am not a zoned device\n", f);
	fclose(f);
	ck_assert_int_eq(zdev_open(aux, NULL, &d), -ENODEV);
	tu_path(aux, sizeof(aux), "empty.bin");
	f = fopen(aux, "w");
	fclose(f);
	ck_assert_int_eq(zdev_open(aux, NULL, &d), -ENODEV);
	tu_path(aux, sizeof(aux), "adir");
	mkdir(aux, 0755);
	ck_assert_int_eq(zdev_open(aux, NULL, &d), -ENODEV);
	ck_assert_int_eq(zdev_open("/dev/null", NULL, &d), -ENODEV);
	ck_assert_ptr_null(d);
}
END_TEST

/* ---- killed in the middle -------------------------------------------------------------------- */

/* Kill tests: zones big enough that the child is still writing when it is killed. */
#define KZS (4ull << 20)
#define KPER (uint32_t)(KZS / BLK)

static uint64_t kblk(uint32_t i) { return KZS * (1 + i / KPER) + (i % KPER) * BLK; }

/* The child writes blocks (zones 1..7 in order, plus conventional blocks) and reports through
 * PIPE how many sequential blocks were flushed, after each flush returned. */
static void kill_child(const char *path, int pipefd)
{
	struct zdev *d;
	uint32_t n = 0;

	if (zdev_open(path, NULL, &d))
		_exit(3);
	for (;;) {
		if (n >= 7 * KPER)
			break;
		if (wr(d, kblk(n), BLK, 1000 + n))
			_exit(4);
		if (wr(d, (n % 16) * BLK, BLK, 5000 + n))
			_exit(5);
		n++;
		if (n % 5 == 0) {
			if (zdev_flush(d))
				_exit(6);
			if (write(pipefd, &n, sizeof(n)) != sizeof(n))
				_exit(7);
		}
	}
	pause();
	_exit(0);
}

/* Conventional block B was last written with version i (pattern 5000 + i, i = B mod 16)
 * before FLUSHED: it must hold that version or a newer one (flushed later than reported). */
static int conv_version_ok(struct zdev *d, uint32_t b, uint32_t flushed)
{
	uint32_t last = b + (flushed - 1 - b) / 16 * 16;

	for (uint32_t j = last; j < last + 16 * 8; j += 16)
		if (holds(d, b * BLK, BLK, 5000 + j))
			return 1;
	return 0;
}

START_TEST(t_kill)
{
	struct zemu_create_opts o = {.size = 8 * KZS, .zone_size = KZS, .nr_conv = 1};
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	srand(seed);
	for (int round = 0; round < 6; round++) {
		uint32_t flushed = 0, v;
		int p[2], st;
		struct zdev *d;
		pid_t pid;

		mkimg("kill.img", &o);
		ck_assert_int_eq(pipe(p), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			close(p[0]);
			kill_child(img, p[1]);
		}
		close(p[1]);
		usleep(1000 + (useconds_t)(rand() % 100000));
		kill(pid, SIGKILL);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSIGNALED(st), "child exited early: %d (seed %u)", st, seed);
		while (read(p[0], &v, sizeof(v)) == sizeof(v))
			flushed = v;
		close(p[0]);
		for (int pc = 0; pc < 2; pc++) {
			/* after the kill, then again after a power cut on top */
			int ret = zdev_open(img, NULL, &d);
			ck_assert_msg(ret == 0, "reopen after kill: %d (seed %u round %d)", ret, seed,
				      round);
			for (uint32_t i = 0; i < flushed; i++)
				ck_assert_msg(holds(d, kblk(i), BLK, 1000 + i),
					      "flushed block %u lost (of %u, seed %u)", i, flushed,
					      seed);
			for (uint32_t b = 0; b < 16 && b < flushed; b++)
				ck_assert_msg(conv_version_ok(d, b, flushed),
					      "conventional block %u lost its flushed version (seed %u)",
					      b, seed);
			if (flushed)
				ck_assert_uint_ge(rep(d, 1 + (flushed - 1) / KPER).wp,
						  kblk(flushed - 1) + BLK);
			zdev_close(d);
			if (!pc)
				ck_assert_int_ge(zemu_powercut(img, -1, 0, 0), 0);
		}
	}
}
END_TEST

START_TEST(t_kill_log)
{
	struct zemu_create_opts o = {.size = 8 * KZS, .zone_size = KZS, .nr_conv = 1};
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	srand(seed);
	tu_path(lg, sizeof(lg), "kill.log");
	o.log_path = lg;
	for (int round = 0; round < 4; round++) {
		struct zdev *d, *r;
		int p[2], st;
		pid_t pid;

		mkimg("killlog.img", &o);
		ck_assert_int_eq(pipe(p), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			close(p[0]);
			kill_child(img, p[1]);
		}
		close(p[1]);
		usleep(1000 + (useconds_t)(rand() % 60000));
		kill(pid, SIGKILL);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child died early: %d", st);
		close(p[0]);
		/* reopen (continuing the log), go on writing, then compare with the replay */
		d = opn(img);
		for (uint32_t z = 1; z < 8; z++) {
			struct zdev_zone zone = rep(d, z);
			if (zone.cond != ZDEV_COND_FULL)
				ck_assert_int_eq(wr(d, zone.wp, BLK, 77 + z), 0);
		}
		ck_assert_int_eq(wr(d, 0, BLK, 99), 0);
		zdev_close(d);
		tu_path(aux, sizeof(aux), "killlog-replayed.img");
		ck_assert_int_eq(zemu_replay(img, lg, zemu_log_count(lg), aux, 0), 0);
		d = opn(img);
		r = opn(aux);
		same_devices(d, r);
		zdev_close(r);
		zdev_close(d);
	}
}
END_TEST

/* ---- threads and O_DIRECT ------------------------------------------------------------------- */

struct thr_arg {
	struct zdev *d;
	uint32_t zone;
	int err;
};

static void *thr_write(void *p)
{
	struct thr_arg *a = p;
	uint8_t *b = zdev_buf_alloc(BLK);

	for (uint32_t i = 0; i < ZCAP / BLK && !a->err; i++) {
		pattern(b, BLK, a->zone * 100 + i);
		a->err = zdev_write(a->d, b, BLK, zs(a->zone) + i * BLK);
		if (!a->err)
			a->err = zdev_read(a->d, b, BLK, zs(a->zone));
		if (!a->err && i % 4 == 3)
			a->err = zdev_flush(a->d);
	}
	zdev_buf_free(b);
	return NULL;
}

START_TEST(t_threads)
{
	struct thr_arg a[6];
	pthread_t t[6];
	struct zdev *d;

	mkdefault("threads.img");
	d = opn(img);
	for (int i = 0; i < 6; i++) {
		a[i] = (struct thr_arg){.d = d, .zone = 1 + (uint32_t)i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, thr_write, &a[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(a[i].err, 0);
	}
	for (uint32_t z = 1; z <= 6; z++) {
		expect_zone(d, z, ZDEV_COND_FULL, zs(z) + ZS);
		for (uint32_t i = 0; i < ZCAP / BLK; i++)
			ck_assert(holds(d, zs(z) + i * BLK, BLK, z * 100 + i));
	}
	zdev_close(d);
}
END_TEST

START_TEST(t_direct)
{
	struct zemu_create_opts o = {.size = 8 * ZS, .zone_size = ZS, .lblock_size = 512,
				     .nr_conv = 1};
	struct zdev_open_opts oo = {.direct = 1};
	struct zdev *d;
	int ret;

	mkimg("direct.img", &o);
	ret = zdev_open(img, &oo, &d);
	if (ret == -EINVAL)
		return; /* this file system has no O_DIRECT */
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(wr(d, zs(1), 512, 1), 0);
	ck_assert_int_eq(wr(d, zs(1) + 512, 3 * 512, 2), 0);
	ck_assert_int_eq(wr(d, 1536, 1024, 3), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1) + 2048, 512, 4), 0);
	ck_assert_int_eq(wr(d, 1536, 512, 5), 0);
	ck_assert(holds(d, zs(1), 512, 1));
	ck_assert(holds(d, zs(1) + 512, 3 * 512, 2));
	ck_assert(holds(d, zs(1) + 2048, 512, 4));
	ck_assert(holds(d, zs(1) + 2560, 1024, 0));
	ck_assert_int_eq(zdev_zone_finish(d, 2), 0);
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_EIO_READ, zs(3)), 0);
	ck_assert_int_eq(zemu_powercut_dev(d, 0, 0, 0), 0);
	ck_assert(holds(d, zs(1) + 2048, 512, 0));
	ck_assert(holds(d, 1536, 1024, 3));
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2048);
	expect_zone(d, 2, ZDEV_COND_FULL, zs(2) + ZS);
	zdev_close(d);
	ck_assert_int_eq(zdev_open(img, &oo, &d), 0);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2048);
	ck_assert(holds(d, zs(1), 512, 1));
	zdev_close(d);
}
END_TEST

/* ---- the zlfs-emu command ------------------------------------------------------------------- */

static char bin[512];

static int file_has(const char *path, const char *needle)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}

START_TEST(t_cli)
{
	char out[512], rimg[512];
	struct zdev *d;

	tu_bin(bin, sizeof(bin), "zlfs-emu");
	tu_path(img, sizeof(img), "cli.img");
	tu_path(lg, sizeof(lg), "cli.log");
	tu_path(out, sizeof(out), "cli.out");
	tu_path(rimg, sizeof(rimg), "cli-replayed.img");
	ck_assert_int_eq(tu_sh("%s --version > %s", bin, out), 0);
	ck_assert(file_has(out, "zlfs-emu "));
	ck_assert_int_eq(tu_sh("%s --help > %s", bin, out), 0);
	ck_assert(file_has(out, "powercut IMAGE"));
	ck_assert_int_eq(tu_sh("%s 2>/dev/null", bin), 2);
	ck_assert_int_eq(tu_sh("%s frobnicate 2>/dev/null", bin), 2);
	ck_assert_int_eq(tu_sh("%s create %s 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s create %s --size 1Q --zone-size 64K 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s create %s --size 512K --zone-size 3 2>/dev/null", bin, img), 1);
	ck_assert_int_eq(tu_sh("%s report %s.none 2>/dev/null", bin, img), 1);
	ck_assert_int_eq(tu_sh("%s create %s --size 512K --zone-size 64K --zone-capacity 48K "
			       "--conventional 1 --max-open 3 --max-active 4 --log %s",
			       bin, img, lg), 0);
	ck_assert_int_eq(tu_sh("%s report %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "8 zones (1 conventional)"));
	ck_assert(file_has(out, "zone capacity 49152"));
	ck_assert(file_has(out, "max open 3, max active 4"));
	ck_assert(file_has(out, "     7       458752        65536        49152       458752  "
				"seq-write-required   empty"));
	ck_assert_int_eq(tu_sh("%s report %s --json > %s", bin, img, out), 0);
	ck_assert(file_has(out, "\"zone\": 7, \"start\": 458752"));

	/* inject: a bare number is a zone, a suffix makes it an offset */
	ck_assert_int_eq(tu_sh("%s inject %s offline 3 > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s readonly 256K > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s eio-read 8K > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s eio-write --offset 4096 > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s offline 9 2>/dev/null", bin, img), 1);
	ck_assert_int_eq(tu_sh("%s inject %s melt 1 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s inject %s offline 0 2>/dev/null", bin, img), 1);
	d = opn(img);
	expect_zone(d, 3, ZDEV_COND_OFFLINE, UINT64_MAX);
	expect_zone(d, 4, ZDEV_COND_RDONLY, UINT64_MAX);
	{
		uint8_t *b = zdev_buf_alloc(BLK);
		ck_assert_int_eq(zdev_read(d, b, BLK, 8192), -EIO);
		ck_assert_int_eq(zdev_write(d, b, BLK, 4096), -EIO);
		zdev_buf_free(b);
	}
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(wr(d, zs(2) + i * BLK, BLK, 20 + i), 0);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s report %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "offline"));
	ck_assert(file_has(out, "unflushed writes 3"));

	/* log-count, replay */
	ck_assert_int_eq(tu_sh("%s log-count %s > %s", bin, lg, out), 0);
	ck_assert(file_has(out, "3\n"));
	ck_assert_int_eq(tu_sh("%s replay %s %s 2 %s > /dev/null", bin, img, lg, rimg), 0);
	d = opn(rimg);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + 2 * BLK);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s replay %s %s 3 %s --torn > /dev/null", bin, img, lg, rimg), 0);
	d = opn(rimg);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + 3 * BLK); /* a one-block write keeps its block */
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s replay %s %s 99 %s 2>/dev/null", bin, img, lg, rimg), 1);
	ck_assert_int_eq(tu_sh("%s replay %s %s 2>/dev/null", bin, img, lg), 2);

	/* powercut */
	ck_assert_int_eq(tu_sh("%s powercut %s --keep-prefix 2 --seed 3 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s powercut %s --keep-prefix 1 > %s", bin, img, out), 0);
	ck_assert(file_has(out, "kept 1 of 3 unflushed writes, dropped 2"));
	d = opn(img);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + BLK);
	ck_assert(holds(d, zs(2), BLK, 20));
	ck_assert(holds(d, zs(2) + BLK, BLK, 0));
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s powercut %s --seed 42 --torn > %s", bin, img, out), 0);
	ck_assert(file_has(out, "of 0 unflushed writes"));
}
END_TEST

/* ---- timing model ------------------------------------------------------------------------ */

/* An image of 4 sequential 1 MiB zones with timing model T (zeros: none), opened. */
static struct zdev *timed(const char *name, uint32_t dies)
{
	struct zemu_create_opts o = {.size = 4 << 20, .zone_size = 1 << 20};

	/* 64 KiB units, 100 us per program, 1000 MB/s: 64 KiB cross the link in 65536 ns */
	o.timing = (struct zemu_timing){.dies = dies, .prog_unit = 64 << 10, .prog_ns = 100000,
					.link_mbs = 1000};
	if (!dies)
		memset(&o.timing, 0, sizeof(o.timing));
	mkimg(name, &o);
	return opn(img);
}

static struct zemu_stats tstats(struct zdev *d)
{
	struct zemu_stats st;

	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	return st;
}

START_TEST(t_timing_off)
{
	struct zdev *d = timed("timing-off.img", 0);
	struct zemu_stats st;

	ck_assert_int_eq(wr(d, 0, 256 * KB, 1), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	st = tstats(d);
	/* off by default: no clock, no counters, nothing held */
	ck_assert_uint_eq(st.timing.dies, 0);
	ck_assert_uint_eq(st.sim_ns, 0);
	ck_assert_uint_eq(st.programs + st.xfer_bytes + st.pad_programs, 0);
	ck_assert_int_eq(zemu_timing_reset(d), 0);
	zdev_close(d);
}
END_TEST

/* One die: transfers, then programs one after the other; a flush pads the held partial. */
START_TEST(t_timing_one_die)
{
	struct zdev *d = timed("timing-1.img", 1);
	uint8_t *a = zdev_buf_alloc(128 * KB), *b = zdev_buf_alloc(16 * KB);
	struct zemu_stats st;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(tstats(d).sim_ns, 0);
	ck_assert_int_eq(zdev_write(d, a, 128 * KB, 0), 0);
	st = tstats(d);
	/* 131072 ns on the link, then two 100 us programs on the one die */
	ck_assert_uint_eq(st.sim_ns, 131072 + 2 * 100000);
	ck_assert_uint_eq(st.programs, 2);
	ck_assert_uint_eq(st.xfer_bytes, 128 * KB);
	/* 16 KiB more: transferred, then held (the unit is incomplete), no program */
	ck_assert_int_eq(zdev_write(d, b, 16 * KB, 128 * KB), 0);
	st = tstats(d);
	ck_assert_uint_eq(st.programs, 2);
	ck_assert_uint_eq(st.sim_ns, 331072);
	ck_assert_uint_eq(st.link_busy_ns, 131072 + 16384);
	/* the flush backs the partial unit up, padded, after the die's last program */
	ck_assert_int_eq(zdev_flush(d), 0);
	st = tstats(d);
	ck_assert_uint_eq(st.pad_programs, 1);
	ck_assert_uint_eq(st.pad_bytes, 48 * KB);
	ck_assert_uint_eq(st.sim_ns, 431072);
	/* a second flush has nothing new to back up */
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_uint_eq(tstats(d).pad_programs, 1);
	/* finishing a zone with a partial unit programs it for good, padded */
	ck_assert_int_eq(zdev_write(d, b, 16 * KB, 1 << 20), 0);
	ck_assert_int_eq(zdev_zone_finish(d, 1), 0);
	ck_assert_uint_eq(tstats(d).pad_programs, 2);
	ck_assert_int_eq(zemu_timing_reset(d), 0);
	st = tstats(d);
	ck_assert_uint_eq(st.sim_ns + st.programs + st.xfer_bytes, 0);
	ck_assert_uint_eq(st.timing.dies, 1);
	zdev_buf_free(a);
	zdev_buf_free(b);
	zdev_close(d);
}
END_TEST

/* More dies: the units of a superpage program in parallel. */
START_TEST(t_timing_dies)
{
	uint64_t t[2];
	uint32_t dies[2] = {1, 4};

	for (int i = 0; i < 2; i++) {
		struct zdev *d = timed(i ? "timing-4.img" : "timing-1b.img", dies[i]);
		ck_assert_int_eq(wr(d, 2 << 20, 256 * KB, 3), 0);
		t[i] = tstats(d).sim_ns;
		ck_assert_uint_eq(tstats(d).die_busy_ns, 4 * 100000);
		zdev_close(d);
	}
	ck_assert_uint_eq(t[0], 262144 + 4 * 100000);
	ck_assert_uint_eq(t[1], 262144 + 100000);
}
END_TEST

/* Memory is in use until its data is programmed: a write from the same buffer waits for the
 * previous write's program, a write from another buffer does not. */
START_TEST(t_timing_buffer_reuse)
{
	for (int other = 0; other < 2; other++) {
		struct zdev *d = timed(other ? "timing-buf2.img" : "timing-buf1.img", 4);
		uint8_t *a = zdev_buf_alloc(64 * KB), *b = zdev_buf_alloc(64 * KB);
		struct zemu_stats st;

		ck_assert_int_eq(zdev_write(d, a, 64 * KB, 0), 0);       /* die 0: 65536..165536 */
		ck_assert_int_eq(zdev_write(d, other ? b : a, 64 * KB, 64 * KB), 0); /* die 1 */
		st = tstats(d);
		if (other) { /* link 65536..131072, program to 231072 */
			ck_assert_uint_eq(st.sim_ns, 231072);
			ck_assert_uint_eq(st.buf_wait_ns, 0);
		} else {     /* waits for a's program: link 165536..231072, program to 331072 */
			ck_assert_uint_eq(st.sim_ns, 331072);
			ck_assert_uint_eq(st.buf_wait_ns, 100000);
		}
		zdev_buf_free(a);
		zdev_buf_free(b);
		zdev_close(d);
	}
}
END_TEST

START_TEST(t_timing_config)
{
	struct zemu_timing t, def;
	struct zemu_create_opts o = geo_opts();
	struct zdev *d;
	const char *bad[] = {"", "dies=0", "dies=65", "unit=1000", "unit=64X", "prog=5",
			     "link=0", "bogus=1", "dies=", "dies=4,,"};

	zemu_timing_default(&def);
	ck_assert_uint_eq(def.dies, 4);
	ck_assert_uint_eq(def.prog_unit, 192 * KB);
	ck_assert_int_eq(zemu_timing_parse("ufs40", &t), 0);
	ck_assert_mem_eq(&t, &def, sizeof(t));
	ck_assert_int_eq(zemu_timing_parse("off", &t), 0);
	ck_assert_uint_eq(t.dies, 0);
	ck_assert_int_eq(zemu_timing_parse("dies=8,unit=96K,prog=560us,link=2300", &t), 0);
	ck_assert_uint_eq(t.dies, 8);
	ck_assert_uint_eq(t.prog_unit, 96 * KB);
	ck_assert_uint_eq(t.prog_ns, 560000);
	ck_assert_uint_eq(t.link_mbs, 2300);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(zemu_timing_parse(bad[i], &t) == -EINVAL, "accepted '%s'", bad[i]);
	/* create refuses an impossible model; set_timing changes a closed image's model */
	o.timing = (struct zemu_timing){.dies = 2, .prog_unit = 1000, .prog_ns = 1, .link_mbs = 1};
	tu_path(img, sizeof(img), "timing-cfg.img");
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	mkdefault("timing-cfg.img");
	ck_assert_int_eq(zemu_set_timing(img, &def), 0);
	d = opn(img);
	t = tstats(d).timing;
	ck_assert_mem_eq(&t, &def, sizeof(def));
	ck_assert_int_eq(wr(d, zs(1), BLK, 9), 0);
	ck_assert_uint_gt(tstats(d).sim_ns, 0);
	ck_assert_int_eq(zemu_set_timing(img, &def), -EBUSY); /* open elsewhere */
	zdev_close(d);
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(zemu_set_timing(img, &t), 0);
	d = opn(img);
	ck_assert_uint_eq(tstats(d).timing.dies, 0);
	ck_assert(holds(d, zs(1), BLK, 9)); /* the data is still there */
	zdev_close(d);
}
END_TEST

START_TEST(t_timing_cli)
{
	char out[512];

	tu_bin(bin, sizeof(bin), "zlfs-emu");
	tu_path(img, sizeof(img), "timing-cli.img");
	tu_path(out, sizeof(out), "timing-cli.out");
	ck_assert_int_eq(tu_sh("%s create %s --size 512K --zone-size 64K --timing ufs40", bin, img),
			 0);
	ck_assert_int_eq(tu_sh("%s timing %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "dies=4,unit=192K,prog=285000ns,link=4600"));
	ck_assert_int_eq(tu_sh("%s timing %s dies=2,prog=1ms", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s report %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "timing model: dies=2,unit=192K,prog=1000000ns,link=4600"));
	ck_assert_int_eq(tu_sh("%s report %s --json > %s", bin, img, out), 0);
	ck_assert(file_has(out, "\"timing\": {\"dies\": 2"));
	ck_assert_int_eq(tu_sh("%s timing %s off", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s timing %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "off"));
	ck_assert_int_eq(tu_sh("%s timing %s dies=99 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s create %s --size 512K --zone-size 64K --timing x 2>/dev/null",
			       bin, img), 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("emu");
	TCase *rules = tcase_create("rules"), *dur = tcase_create("durability");
	TCase *logc = tcase_create("log"), *misc = tcase_create("misc");
	TCase *timing = tcase_create("timing");

	tcase_add_test(rules, t_geometry);
	tcase_add_test(rules, t_create_rejects);
	tcase_add_test(rules, t_write_rules);
	tcase_add_test(rules, t_read_zeros);
	tcase_add_test(rules, t_open_limit);
	tcase_add_test(rules, t_active_limit);
	tcase_add_test(rules, t_transitions);
	tcase_add_test(rules, t_zone_faults);
	tcase_add_test(rules, t_eio_faults);
	tcase_add_test(dur, t_persist);
	tcase_add_test(dur, t_exclusive);
	tcase_add_test(dur, t_powercut_all);
	tcase_add_test(dur, t_powercut_prefix);
	tcase_add_test(dur, t_powercut_torn);
	tcase_add_test(dur, t_powercut_seeded);
	tcase_add_test(dur, t_powercut_dev);
	tcase_add_test(dur, t_journal_full);
	tcase_add_test(dur, t_kill);
	tcase_add_test(logc, t_log_replay);
	tcase_add_test(logc, t_log_on_used_image);
	tcase_add_test(logc, t_kill_log);
	tcase_add_test(logc, t_log_redo);
	tcase_add_test(misc, t_corrupt);
	tcase_add_test(misc, t_threads);
	tcase_add_test(misc, t_direct);
	tcase_add_test(misc, t_cli);
	tcase_add_test(timing, t_timing_off);
	tcase_add_test(timing, t_timing_one_die);
	tcase_add_test(timing, t_timing_dies);
	tcase_add_test(timing, t_timing_buffer_reuse);
	tcase_add_test(timing, t_timing_config);
	tcase_add_test(timing, t_timing_cli);
	tcase_set_timeout(dur, 120);
	tcase_set_timeout(logc, 120);
	suite_add_tcase(s, rules);
	suite_add_tcase(s, dur);
	suite_add_tcase(s, logc);
	suite_add_tcase(s, misc);
	suite_add_tcase(s, timing);
	return tu_run_suite(s);
}
