/*
 * test_emu_log.c - Check tests of the emulator (fs/zdev_emu*.c): the write log and replay:
 * every prefix replayed, a log started on a used image, a process killed while logging,
 * redoing the last operation.
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


START_TEST(t_kill_log)
{
	struct zemu_create_opts o = {.size = 8 * KZS, .zone_size = KZS, .nr_conv = 1};
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	srand(seed);
	tu_path(lg, sizeof(lg), "kill.log");
	o.log_path = lg;
	for (int round = 0; round < 4; round++) {
		struct zdev *d, *r;

		mkimg("killlog.img", &o);
		close(kill_after(kill_child, img, 1000 + (useconds_t)(rand() % 60000)));
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

void emu_log_tests(Suite *s)
{
	TCase *tc = tcase_create("log");

	tcase_add_test(tc, t_log_replay);
	tcase_add_test(tc, t_log_on_used_image);
	tcase_add_test(tc, t_kill_log);
	tcase_add_test(tc, t_log_redo);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
}
