/*
 * test_emu_timing.c - Check tests of the emulator (fs/zdev_emu*.c): the timing model: off, one
 * die, several dies, buffer reuse, its configuration and its command.
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
			     "link=0", "bogus=1", "dies=", "dies=4,,", "read=5", "block=1000",
			     "block=64K"};

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
	ck_assert_int_eq(zemu_timing_parse("read=60us,erase=5ms,block=8M", &t), 0);
	ck_assert_uint_eq(t.read_ns, 60000);
	ck_assert_uint_eq(t.erase_ns, 5000000);
	ck_assert_uint_eq(t.block, 8 << 20);
	ck_assert_uint_eq(def.read_ns, 50000);
	ck_assert_uint_eq(def.block, 16 << 20);
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

/* Reads cost a read time per programmed unit on its die, then the link; a unit still held
 * is read from the buffer; an image whose model has no read time reads for free. A reset
 * erases the blocks the zone's data took on each die. */
START_TEST(t_timing_reads_erases)
{
	struct zemu_create_opts o = {.size = 4 << 20, .zone_size = 1 << 20};
	uint8_t *b = zdev_buf_alloc(128 * KB);
	struct zemu_stats st;
	struct zdev *d;

	o.timing = (struct zemu_timing){.dies = 2, .prog_unit = 64 << 10, .prog_ns = 100000,
					.link_mbs = 1000, .read_ns = 50000, .erase_ns = 1000000,
					.block = 256 << 10};
	mkimg("timing-reads.img", &o);
	d = opn(img);
	ck_assert_int_eq(wr(d, 0, 96 * KB, 1), 0); /* unit 0 programmed, unit 1 held */
	ck_assert_int_eq(wr(d, (1 << 20), 1 << 20, 2), 0); /* a full zone: 8 units on each die */
	ck_assert_int_eq(zemu_timing_reset(d), 0);
	ck_assert_int_eq(zdev_read(d, b, BLK, 0), 0);
	st = tstats(d);
	ck_assert_uint_eq(st.nand_reads, 1);
	ck_assert_uint_eq(st.sim_ns, 50000 + 4096);     /* the read, then 4 KiB over the link */
	ck_assert_uint_eq(st.read_service_ns, 50000 + 4096);
	ck_assert_int_eq(zdev_read(d, b, BLK, (64 * KB)), 0); /* the held unit */
	st = tstats(d);
	ck_assert_uint_eq(st.nand_reads, 1);
	ck_assert_uint_eq(st.sim_ns, 50000 + 2 * 4096);
	ck_assert_int_eq(zdev_read(d, b, 128 * KB, (1 << 20)), 0); /* two units, two dies */
	st = tstats(d);
	ck_assert_uint_eq(st.nand_reads, 3);
	ck_assert_uint_eq(st.host_reads, 3);
	ck_assert_uint_eq(st.map_misses, 0); /* the zone map stays resident */
	ck_assert_uint_eq(st.map_lookups, 1 + 1 + 32);
	ck_assert_int_eq(zdev_zone_reset(d, 0), 0); /* 96 KiB: one block on each die */
	ck_assert_uint_eq(tstats(d).erases, 2);
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0); /* 512 KiB on each die: two blocks each */
	ck_assert_uint_eq(tstats(d).erases, 6);
	ck_assert_int_eq(zdev_zone_reset(d, 2), 0); /* empty: nothing to erase */
	ck_assert_uint_eq(tstats(d).erases, 6);
	zdev_close(d);
	/* a model without read and erase times (an image made before they existed) */
	o.timing.read_ns = o.timing.erase_ns = 0;
	mkimg("timing-noreads.img", &o);
	d = opn(img);
	ck_assert_int_eq(wr(d, 0, 64 * KB, 1), 0);
	ck_assert_int_eq(zemu_timing_reset(d), 0);
	ck_assert_int_eq(zdev_read(d, b, BLK, 0), 0);
	ck_assert_int_eq(zdev_zone_reset(d, 0), 0);
	st = tstats(d);
	ck_assert_uint_eq(st.sim_ns, 0);
	ck_assert_uint_eq(st.nand_reads + st.xfer_bytes, 0);
	zdev_buf_free(b);
	zdev_close(d);
}
END_TEST

void emu_timing_tests(Suite *s)
{
	TCase *tc = tcase_create("timing");

	tcase_add_test(tc, t_timing_off);
	tcase_add_test(tc, t_timing_one_die);
	tcase_add_test(tc, t_timing_dies);
	tcase_add_test(tc, t_timing_buffer_reuse);
	tcase_add_test(tc, t_timing_config);
	tcase_add_test(tc, t_timing_cli);
	tcase_add_test(tc, t_timing_reads_erases);
	suite_add_tcase(s, tc);
}
