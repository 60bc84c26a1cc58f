/*
 * test_ftl.c - Check tests of the emulator's conventional mode (fs/emu/zdev_emu_ftl.c): creating
 * one, the page map, map-cache misses and their cost, device GC and its WAF, over-provisioning,
 * TRIM, power cuts, and the FTL state kept across opens or rebuilt after a kill.
 * May call: zdev.h, zdev_emu.h, emu_testutil.h, libc.
 */
#include "emu_testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A small NAND: 2 dies, 16 KiB units (4 pages), 64 KiB blocks, so a superblock is 128 KiB
 * (32 pages). 100 us programs, 50 us reads, 1 ms erases, a 4000 MB/s link. */
#define UNIT (16 * KB)
#define PPSB 32u
#define READ_NS 50000u

static struct zemu_create_opts ftl_opts(uint64_t size)
{
	struct zemu_create_opts o = {.size = size, .zone_size = 1 << 20, .mode = ZEMU_MODE_FTL};

	o.timing = (struct zemu_timing){.dies = 2, .prog_unit = UNIT, .prog_ns = 100000,
					.link_mbs = 4000, .read_ns = READ_NS, .erase_ns = 1000000,
					.block = 64 * KB};
	return o;
}

static struct zdev *ftl_image(const char *name, const struct zemu_create_opts *o)
{
	mkimg(name, o);
	return opn(img);
}

static struct zemu_stats st(struct zdev *d)
{
	struct zemu_stats s;

	ck_assert_int_eq(zemu_dev_stats(d, &s), 0);
	return s;
}

static void wr_ok(struct zdev *d, uint64_t off, size_t len, uint32_t seed)
{
	ck_assert_int_eq(wr(d, off, len, seed), 0);
}

START_TEST(t_ftl_create)
{
	struct zemu_create_opts o = ftl_opts(8 << 20);
	struct zdev_zone z;
	struct zemu_stats s;
	struct zdev *d;

	d = ftl_image("ftl-create.img", &o);
	ck_assert_uint_eq(zdev_geometry(d)->nr_conv, zdev_geometry(d)->nr_zones);
	ck_assert_uint_eq(zdev_geometry(d)->capacity, 8 << 20);
	ck_assert_int_eq(zdev_report_one(d, 3, &z), 0);
	ck_assert_int_eq(z.type, ZDEV_ZONE_CONV);
	ck_assert_int_eq(zdev_zone_reset(d, 3), -EIO); /* no zones to manage */
	s = st(d);
	ck_assert_int_eq(s.mode, ZEMU_MODE_FTL);
	ck_assert_uint_eq(s.format_version, 4);
	ck_assert_uint_eq(s.ftl_pages_per_superblock, PPSB);
	/* 2048 pages + 7% = 2191.4 pages, 69 superblocks of 32; 4 spares would give only 68 */
	ck_assert_uint_eq(s.ftl.op_permille, 70);
	ck_assert_uint_eq(s.ftl_superblocks, 69);
	ck_assert_uint_eq(s.ftl_op_bytes, (69 * PPSB - 2048) * 4096ull);
	ck_assert_uint_eq(s.map_pages, 2);
	ck_assert_uint_eq(s.map_cache_pages, 1); /* 1/128 of the map, at least one page */
	ck_assert_uint_eq(s.ftl_free_superblocks, 69);
	zdev_close(d);
	/* what the conventional mode refuses */
	o.nr_conv = 2;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = ftl_opts(8 << 20);
	o.lblock_size = 512;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = ftl_opts(8 << 20);
	o.max_open = 4;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	o = ftl_opts(8 << 20);
	o.ftl.op_permille = 1000;
	ck_assert_int_eq(zemu_create(img, &o), -EINVAL);
	/* its model is part of its layout: it stays */
	o = ftl_opts(8 << 20);
	d = ftl_image("ftl-settiming.img", &o);
	zdev_close(d);
	o.timing.prog_ns = 200000;
	ck_assert_int_eq(zemu_set_timing(img, &o.timing), -EINVAL);
	d = opn(img);
	ck_assert_uint_eq(st(d).timing.prog_ns, 100000);
	zdev_close(d);
	/* no timing model given: the default one */
	o = ftl_opts(256 << 20);
	memset(&o.timing, 0, sizeof(o.timing));
	o.zone_size = 64 << 20;
	d = ftl_image("ftl-default.img", &o);
	s = st(d);
	ck_assert_uint_eq(s.timing.dies, 4);
	ck_assert_uint_eq(s.timing.read_ns, 50000);
	zdev_close(d);
}
END_TEST

/* Data goes where it was written, unwritten pages read zeros without a NAND read, a unit is
 * programmed once it is complete and a flush pads the one still being filled. */
START_TEST(t_ftl_mapping)
{
	struct zemu_create_opts o = ftl_opts(8 << 20);
	struct zdev *d = ftl_image("ftl-map.img", &o);
	struct zemu_stats s;

	wr_ok(d, 0, UNIT, 1);            /* one full unit */
	wr_ok(d, 5 << 20, BLK, 2);       /* one page of the next unit */
	s = st(d);
	ck_assert_uint_eq(s.ftl_mapped_pages, 5);
	ck_assert_uint_eq(s.data_programs, 1);
	ck_assert_uint_eq(s.host_writes, 2);
	ck_assert_uint_eq(s.host_write_bytes, UNIT + BLK);
	ck_assert(holds(d, 0, UNIT, 1));
	ck_assert(holds(d, 5 << 20, BLK, 2));
	ck_assert(holds(d, 1 << 20, BLK, 0)); /* never written */
	s = st(d);
	/* the unit on NAND is read once; the held page is in the buffer; zeros cost nothing */
	ck_assert_uint_eq(s.data_reads, 1);
	ck_assert_uint_eq(s.host_reads, 3);
	wr_ok(d, 0, BLK, 3); /* an overwrite moves the page, the count stays */
	ck_assert_uint_eq(st(d).ftl_mapped_pages, 5);
	ck_assert_int_eq(zdev_flush(d), 0);
	s = st(d);
	/* the host stream's unit (2 of 4 pages) and the map unit: map pages 0 and 1 were both
	 * evicted dirty once (one page of cache for two) */
	ck_assert_uint_eq(s.pad_programs, 2);
	ck_assert_uint_eq(s.pad_bytes, 4 * BLK);
	ck_assert_uint_eq(s.map_writebacks, 2);
	ck_assert_uint_eq(s.host_flushes, 1);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_uint_eq(st(d).pad_programs, 2); /* nothing changed since */
	ck_assert(holds(d, 0, BLK, 3));
	zdev_close(d);
}
END_TEST

/* One map page of cache (4 MiB of addresses) on an 8 MiB device: a read in the other half
 * misses, reads the map page from NAND and takes one read time longer; a hit does not. */
START_TEST(t_ftl_cache_miss)
{
	struct zemu_create_opts o = ftl_opts(8 << 20);
	struct zemu_stats a, b;
	struct zdev *d = ftl_image("ftl-miss.img", &o);
	uint8_t *buf = zdev_buf_alloc(BLK);

	for (uint64_t off = 0; off < (8 << 20); off += 1 << 20)
		wr_ok(d, off, 1 << 20, (uint32_t)(off >> 20) + 10);
	a = st(d);
	ck_assert_uint_eq(a.map_writebacks, 1);    /* map page 0, dirty, made room for page 1 */
	ck_assert_uint_eq(a.map_misses, 2);        /* the first touch of each map page */
	ck_assert_uint_eq(a.map_reads, 0);         /* neither was on NAND yet */
	ck_assert_int_eq(zemu_timing_reset(d), 0);
	ck_assert_int_eq(zdev_read(d, buf, BLK, 6 << 20), 0); /* map page 1: cached, a hit */
	a = st(d);
	ck_assert_uint_eq(a.map_misses, 0);
	ck_assert_uint_eq(a.map_lookups, 1);
	ck_assert_int_eq(zdev_read(d, buf, BLK, 1 << 20), 0); /* map page 0: a miss */
	b = st(d);
	ck_assert_uint_eq(b.map_misses, 1);
	ck_assert_uint_eq(b.map_reads, 1);
	ck_assert_uint_eq(b.map_writebacks, 1);    /* page 1 was dirty: written back */
	/* service time: the miss costs exactly one more read */
	ck_assert_uint_eq(b.read_service_ns - a.read_service_ns, a.read_service_ns + READ_NS);
	ck_assert_int_eq(zdev_read(d, buf, BLK, (1 << 20) + BLK), 0); /* now a hit */
	ck_assert_uint_eq(st(d).map_misses, 1);
	zdev_buf_free(buf);
	zdev_close(d);
}
END_TEST

/* Reads that miss wait for their map page; the dies meanwhile take other requests' reads
 * (reads go into idle gaps), so 2 reads per request on 2 dies take about one read time per
 * request, not two. */
START_TEST(t_ftl_miss_overlap)
{
	struct zemu_create_opts o = ftl_opts(8 << 20);
	struct zdev *d = ftl_image("ftl-overlap.img", &o);
	uint8_t *buf = zdev_buf_alloc(BLK);
	struct zemu_stats s;

	for (uint64_t off = 0; off < (8 << 20); off += 1 << 20)
		wr_ok(d, off, 1 << 20, 1);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(zemu_timing_reset(d), 0);
	for (uint32_t i = 0; i < 20; i++) /* alternately in the two map pages: every read misses */
		ck_assert_int_eq(zdev_read(d, buf, BLK, (i % 2 * 1024 + i / 2 * 37) * (uint64_t)BLK),
				 0);
	s = st(d);
	ck_assert_uint_eq(s.map_misses, 20);
	ck_assert_uint_eq(s.nand_reads, 40);
	ck_assert_uint_le(s.sim_ns, 20 * READ_NS * 12 / 10);
	zdev_buf_free(buf);
	zdev_close(d);
}
END_TEST

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return *x >> 33;
}

/* Random page overwrites of a full device: GC, with its reads, moves and erases; WAF and the
 * pages moved fall with more over-provisioning; the data stays what was written last. */
static struct zemu_stats churn(const char *name, uint32_t op_permille, uint32_t *last)
{
	struct zemu_create_opts o = ftl_opts(4 << 20);
	struct zemu_stats s;
	struct zdev *d;
	uint64_t x = 42;
	uint32_t pages = (4 << 20) / BLK;

	o.ftl.op_permille = op_permille;
	d = ftl_image(name, &o);
	for (uint32_t p = 0; p < pages; p += 256)
		wr_ok(d, (uint64_t)p * BLK, 256 * BLK, p);
	for (uint32_t p = 0; p < pages; p++)
		last[p] = p / 256 * 256;
	for (int i = 0; i < 6 * (int)pages; i++) {
		uint32_t p = (uint32_t)(lcg(&x) % pages);

		wr_ok(d, (uint64_t)p * BLK, BLK, 100000 + (uint32_t)i);
		last[p] = 100000 + (uint32_t)i;
	}
	s = st(d);
	for (uint32_t p = 0; p < pages; p++) {
		if (last[p] < 100000)
			ck_assert(holds(d, (uint64_t)p * BLK, BLK, 0) == 0);
		else
			ck_assert_msg(holds(d, (uint64_t)p * BLK, BLK, last[p]), "page %u", p);
	}
	zdev_close(d);
	return s;
}

START_TEST(t_ftl_gc)
{
	uint32_t *last = calloc(1024, sizeof(*last));
	struct zemu_stats lo = churn("ftl-gc7.img", 70, last), hi = churn("ftl-gc28.img", 280, last);
	double waf_lo = (double)lo.programs * UNIT / (double)lo.host_write_bytes;
	double waf_hi = (double)hi.programs * UNIT / (double)hi.host_write_bytes;

	ck_assert_uint_gt(lo.gc_victims, 0);
	ck_assert_uint_gt(lo.gc_pages, 0);
	ck_assert_uint_eq(lo.erases, lo.gc_victims * 2); /* one block on each of 2 dies */
	ck_assert_uint_gt(lo.gc_reads, 0);
	/* moved pages fill GC units: all programmed but the one being filled */
	ck_assert_uint_le(lo.gc_programs * (UNIT / BLK), lo.gc_pages);
	ck_assert_uint_lt(lo.gc_pages, (lo.gc_programs + 1) * (UNIT / BLK));
	ck_assert_msg(waf_lo > 1.5, "WAF %.2f with 7%% OP", waf_lo);
	ck_assert_msg(waf_hi < waf_lo, "WAF %.2f with 28%% OP, %.2f with 7%%", waf_hi, waf_lo);
	ck_assert_uint_lt(hi.gc_pages, lo.gc_pages);
	ck_assert_uint_ge(lo.ftl_free_superblocks, 2); /* the reserve GC keeps */
	free(last);
}
END_TEST

/* Greedy picks the emptiest superblock: rewriting the device in order leaves whole
 * superblocks invalid, and GC then moves nothing. */
START_TEST(t_ftl_gc_greedy)
{
	struct zemu_create_opts o = ftl_opts(4 << 20);
	struct zdev *d = ftl_image("ftl-greedy.img", &o);
	struct zemu_stats s;

	for (int round = 0; round < 4; round++)
		for (uint64_t off = 0; off < (4 << 20); off += 256 * BLK)
			wr_ok(d, off, 256 * BLK, (uint32_t)round);
	s = st(d);
	ck_assert_uint_gt(s.gc_victims, 0);
	ck_assert_uint_eq(s.gc_pages, 0);
	ck_assert_uint_eq(s.gc_programs, 0);
	zdev_close(d);
}
END_TEST

START_TEST(t_ftl_op)
{
	struct zemu_create_opts o = ftl_opts(16 << 20);
	struct zemu_stats s;
	struct zdev *d;

	o.ftl.op_permille = 280; /* 4096 pages * 1.28 = 5242.9: 164 superblocks */
	d = ftl_image("ftl-op.img", &o);
	s = st(d);
	ck_assert_uint_eq(s.ftl_superblocks, 164);
	ck_assert_uint_eq(s.ftl_op_bytes, (164ull * PPSB - 4096) * BLK);
	ck_assert_uint_eq(s.ftl.op_permille, 280);
	zdev_close(d);
	ck_assert_int_eq(zemu_ftl_parse("op=7%,cache=64K", &o.ftl), 0);
	ck_assert_uint_eq(o.ftl.op_permille, 70);
	ck_assert_uint_eq(o.ftl.map_cache, 64 * KB);
	ck_assert_int_eq(zemu_ftl_parse("op=125", &o.ftl), 0);
	ck_assert_uint_eq(o.ftl.op_permille, 125);
	ck_assert_int_eq(zemu_ftl_parse("op=100%", &o.ftl), -EINVAL);
	ck_assert_int_eq(zemu_ftl_parse("cache=1000", &o.ftl), -EINVAL);
	ck_assert_int_eq(zemu_ftl_parse("bogus=1", &o.ftl), -EINVAL);
	ck_assert_int_eq(zemu_ftl_parse("op=7%,", &o.ftl), -EINVAL);
}
END_TEST

START_TEST(t_ftl_trim)
{
	struct zemu_create_opts o = ftl_opts(4 << 20), zo = geo_opts();
	struct zdev *d = ftl_image("ftl-trim.img", &o), *z;
	struct zemu_stats s;

	for (uint64_t off = 0; off < (4 << 20); off += 256 * BLK)
		wr_ok(d, off, 256 * BLK, 7);
	ck_assert_int_eq(zemu_trim(d, 1 << 20, 1 << 20), 0);
	s = st(d);
	ck_assert_uint_eq(s.ftl_mapped_pages, 768);
	ck_assert_uint_eq(s.host_trims, 1);
	ck_assert_uint_eq(s.host_trim_bytes, 1 << 20);
	ck_assert(holds(d, 1 << 20, 1 << 20, 0));
	ck_assert(holds(d, 0, 256 * BLK, 7));
	s = st(d);
	ck_assert_int_eq(zemu_trim(d, 1 << 20, 1 << 20), 0); /* again: nothing to unmap */
	ck_assert_uint_eq(st(d).map_lookups, s.map_lookups);
	ck_assert_int_eq(zemu_trim(d, 100, BLK), -EINVAL);
	ck_assert_int_eq(zemu_trim(d, 4 << 20, BLK), -EINVAL);
	/* the trimmed pages are garbage: rewriting the rest in order moves nothing in GC */
	for (int round = 0; round < 4; round++)
		for (uint64_t off = 2 << 20; off < (4 << 20); off += 256 * BLK)
			wr_ok(d, off, 256 * BLK, 8);
	s = st(d);
	ck_assert_uint_gt(s.gc_victims, 0);
	ck_assert_uint_eq(s.gc_pages, 0);
	zdev_close(d);
	mkimg("ftl-trim-zoned.img", &zo);
	z = opn(img);
	ck_assert_int_eq(zemu_trim(z, 0, BLK), -EOPNOTSUPP);
	zdev_close(z);
}
END_TEST

/* A power cut means what it means in zoned mode: flushed writes survive, unflushed ones may
 * go (and the data they overwrote comes back); the device works on afterwards. */
START_TEST(t_ftl_powercut)
{
	struct zemu_create_opts o = ftl_opts(4 << 20);
	struct zdev *d = ftl_image("ftl-cut.img", &o);
	struct zemu_powercut_result res;

	wr_ok(d, 0, 64 * BLK, 1);
	ck_assert_int_eq(zdev_flush(d), 0);
	wr_ok(d, 0, 16 * BLK, 2);           /* overwrites part of the flushed data */
	wr_ok(d, 2 << 20, 16 * BLK, 3);     /* new */
	ck_assert_int_eq(zemu_powercut_dev_ex(d, -1, 0, 0, &res), 0);
	ck_assert_int_eq(res.unflushed, 2);
	ck_assert(holds(d, 0, 64 * BLK, 1));
	ck_assert(holds(d, 2 << 20, 16 * BLK, 0));
	wr_ok(d, 2 << 20, 16 * BLK, 4);     /* the device goes on */
	ck_assert_int_eq(zdev_flush(d), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 0), 0); /* nothing unflushed */
	d = opn(img);
	ck_assert(holds(d, 0, 64 * BLK, 1));
	ck_assert(holds(d, 2 << 20, 16 * BLK, 4));
	zdev_close(d);
}
END_TEST

/* The placement survives a clean close; a killed process leaves the FTL to rebuild it from
 * the data the image holds. */
START_TEST(t_ftl_state)
{
	struct zemu_create_opts o = ftl_opts(4 << 20);
	struct zdev *d = ftl_image("ftl-state.img", &o);
	struct zemu_stats a, b;
	uint64_t x = 7;
	pid_t pid;
	int status;

	for (uint64_t off = 0; off < (4 << 20); off += 256 * BLK)
		wr_ok(d, off, 256 * BLK, 5);
	for (int i = 0; i < 3000; i++)
		wr_ok(d, lcg(&x) % 1024 * BLK, BLK, 6);
	ck_assert_int_eq(zemu_trim(d, 0, 64 * BLK), 0);
	a = st(d);
	zdev_close(d);
	d = opn(img);
	b = st(d);
	ck_assert_uint_eq(b.ftl_mapped_pages, a.ftl_mapped_pages);
	ck_assert_uint_eq(b.ftl_free_superblocks, a.ftl_free_superblocks);
	zdev_close(d);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) { /* writes and dies without closing */
		struct zdev *c;

		if (zdev_open(img, NULL, &c) || wr(c, 0, BLK, 9) || zdev_flush(c))
			_exit(2);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	d = opn(img);
	b = st(d);
	/* rebuilt: every page the data area holds is mapped, laid out afresh */
	ck_assert_uint_eq(b.ftl_mapped_pages, 1024 - 64 + 1);
	ck_assert(holds(d, 0, BLK, 9));
	ck_assert(holds(d, BLK, BLK, 0));
	zdev_close(d);
}
END_TEST

/* Trims are logged and replayed like writes. */
START_TEST(t_ftl_log)
{
	struct zemu_create_opts o = ftl_opts(4 << 20);
	char kinds[16], out[512];
	struct zdev *d;

	tu_path(lg, sizeof(lg), "ftl.log");
	unlink(lg);
	o.log_path = lg;
	d = ftl_image("ftl-log.img", &o);
	wr_ok(d, 0, 8 * BLK, 1);
	ck_assert_int_eq(zemu_trim(d, 0, 4 * BLK), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_log_kinds(lg, kinds, sizeof(kinds)), 3);
	ck_assert_int_eq(memcmp(kinds, "WTF", 3), 0);
	tu_path(out, sizeof(out), "ftl-replay.img");
	ck_assert_int_eq(zemu_replay(img, lg, 2, out, 0), 0);
	d = opn(out);
	ck_assert(holds(d, 0, 4 * BLK, 0));
	zdev_close(d);
	ck_assert_int_eq(zemu_replay(img, lg, 1, out, 0), 0);
	d = opn(out);
	ck_assert(holds(d, 0, 4 * BLK, 0) == 0);
	zdev_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ftl");
	TCase *tc = tcase_create("ftl");

	tcase_add_test(tc, t_ftl_create);
	tcase_add_test(tc, t_ftl_mapping);
	tcase_add_test(tc, t_ftl_cache_miss);
	tcase_add_test(tc, t_ftl_miss_overlap);
	tcase_add_test(tc, t_ftl_gc);
	tcase_add_test(tc, t_ftl_gc_greedy);
	tcase_add_test(tc, t_ftl_op);
	tcase_add_test(tc, t_ftl_trim);
	tcase_add_test(tc, t_ftl_powercut);
	tcase_add_test(tc, t_ftl_state);
	tcase_add_test(tc, t_ftl_log);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
