/*
 * test_emu_rules.c - Check tests of the emulator (fs/zdev_emu*.c): the zone rules and their
 * error codes: geometry, writes and reads, the open and active limits, zone transitions, zone
 * and EIO faults.
 * May call: zdev.h, zdev_emu.h, emu_testutil.h, libc.
 */
#include "emu_testutil.h"

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

void emu_rules_tests(Suite *s)
{
	TCase *tc = tcase_create("rules");

	tcase_add_test(tc, t_geometry);
	tcase_add_test(tc, t_create_rejects);
	tcase_add_test(tc, t_write_rules);
	tcase_add_test(tc, t_read_zeros);
	tcase_add_test(tc, t_open_limit);
	tcase_add_test(tc, t_active_limit);
	tcase_add_test(tc, t_transitions);
	tcase_add_test(tc, t_zone_faults);
	tcase_add_test(tc, t_eio_faults);
	suite_add_tcase(s, tc);
}
