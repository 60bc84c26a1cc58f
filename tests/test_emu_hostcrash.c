/*
 * test_emu_hostcrash.c - the emulator's flush against a crash of the host: a workload of
 * writes to both kinds of zone, flushes (one fdatasync each), a reset and a journal that fills
 * (a destage), cut at every write and fdatasync the emulator makes of its image. At each cut
 * the image is rebuilt as a host crash could leave it: every write since the last fdatasync
 * kept (the process killed), none kept (the host's cache lost), or each 4 KiB block at a
 * random one of its versions (the host's disk wrote them in any order, any subset). The
 * rebuilt image must open, keep every write whose flush returned, hold in each sequential
 * zone exactly the data of whole writes up to its write pointer (no write half there), and
 * after a power cut keep exactly the flushed writes. Also: a version 1 image (records without
 * checksums) opens and is upgraded.
 * May call: emu_testutil.h, zdev_emu_impl.h (the journal record and emu_crc32c, to make a
 * version 1 image), libc.
 */
#include "emu_testutil.h"
#include "zdev_emu_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the host's writes since its last fdatasync, and the crash image -------------------- */

#define HC_MAXW 512

struct hc_write {
	uint64_t off;
	size_t len;
	uint8_t *old, *new;
};

/* Which version of each block written since the last fdatasync the crash leaves: the newest
 * (the process killed), the oldest (the host's cache lost), the newest for the writes of odd
 * (even) number since the sync and the oldest for the others (two writes reordered), or a
 * random one of each block's versions. */
enum hc_mode { HC_KILL, HC_LOSE_ALL, HC_KEEP_ODD, HC_KEEP_EVEN, HC_RANDOM };

static struct {
	long step, crash_at;
	int crashed, nw, ops_done, ops_at_crash;
	int direct;         /* the image opened with O_DIRECT (its journal through a second fd) */
	int rfd;            /* a buffered fd of the image, for the hook's reads (+1: 0 is none) */
	enum hc_mode mode;
	uint64_t rng;
	struct hc_write w[HC_MAXW];
	char crash_img[512];
} hc;

static uint64_t hc_rand(void)
{
	hc.rng ^= hc.rng << 13;
	hc.rng ^= hc.rng >> 7;
	hc.rng ^= hc.rng << 17;
	return hc.rng;
}

static void hc_forget(void)
{
	for (int i = 0; i < hc.nw; i++) {
		free(hc.w[i].old);
		free(hc.w[i].new);
	}
	hc.nw = 0;
}

/* Block B (image offset) as write K of those touching it left it (K 0: as before all). */
static void hc_block_version(uint64_t b, int k, uint8_t *out)
{
	int seen = 0;

	for (int i = 0; i < hc.nw; i++) {
		const struct hc_write *w = &hc.w[i];

		if (b < w->off || b >= w->off + w->len)
			continue;
		if (!seen++) /* as it was before the first */
			memcpy(out, w->old + (b - w->off), BLK);
		if (seen == k)
			memcpy(out, w->new + (b - w->off), BLK);
	}
}

static int hc_versions(uint64_t b)
{
	int n = 0;

	for (int i = 0; i < hc.nw; i++)
		n += b >= hc.w[i].off && b < hc.w[i].off + hc.w[i].len;
	return n;
}

/* The image as the host could leave it now: a copy of the file, then each block written since
 * the last fdatasync at the version the mode picks. */
static void hc_crash(int fd)
{
	fd = hc.rfd ? hc.rfd - 1 : fd; /* an O_DIRECT fd takes no unaligned buffers */

	struct stat st;
	uint8_t *buf, blk[BLK];
	int out;

	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	for (int i = 0; i < hc.nw; i++) {
		for (uint64_t b = hc.w[i].off; b < hc.w[i].off + hc.w[i].len; b += BLK) {
			int n = hc_versions(b), k;

			if (hc.mode == HC_RANDOM)
				k = (int)(hc_rand() % (uint64_t)(n + 1));
			else if (hc.mode == HC_KEEP_ODD || hc.mode == HC_KEEP_EVEN)
				k = i % 2 == (hc.mode == HC_KEEP_ODD) ? n : 0;
			else
				k = hc.mode == HC_KILL ? n : 0;
			hc_block_version(b, k, blk);
			memcpy(buf + b, blk, BLK);
		}
	}
	out = open(hc.crash_img, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(out, 0);
	ck_assert_int_eq(pwrite(out, buf, (size_t)st.st_size, 0), st.st_size);
	close(out);
	free(buf);
}

static void hc_hook(void *ctx, int fd, uint64_t off, const void *data, size_t len)
{
	struct hc_write *w;

	(void)ctx;
	if (hc.crashed)
		return;
	if (++hc.step == hc.crash_at) {
		hc_crash(fd);
		hc.crashed = 1;
		hc.ops_at_crash = hc.ops_done;
		return;
	}
	if (!data) { /* an fdatasync: all of it is on the host's disk once it returns */
		hc_forget();
		return;
	}
	ck_assert_int_eq(off % BLK, 0);
	ck_assert_int_eq(len % BLK, 0);
	ck_assert_int_lt(hc.nw, HC_MAXW);
	w = &hc.w[hc.nw++];
	w->off = off;
	w->len = len;
	w->old = malloc(len);
	w->new = malloc(len);
	ck_assert(w->old && w->new);
	ck_assert_int_eq(pread(hc.rfd ? hc.rfd - 1 : fd, w->old, len, (off_t)off),
			 (ssize_t)len); /* sparse: zeros */
	memcpy(w->new, data, len);
}

/* ---- the workload and its model --------------------------------------------------------- */

struct op {
	char kind;          /* W sequential write, C conventional block, F flush, R reset, Q close */
	uint32_t zone, blocks, seed;
};

#define W(z, n, s) {'W', z, n, s}
#define C(b, s) {'C', 0, b, s} /* blocks: the conventional block written */
static const struct op ops[] = {
	W(1, 1, 10), W(1, 2, 20), C(0, 30), C(1, 31), {'F', 0, 0, 0},
	W(2, 1, 40), W(1, 1, 50), C(0, 32), {'F', 0, 0, 0}, {'F', 0, 0, 0},
	W(3, 2, 60), {'R', 2, 0, 0}, W(2, 1, 70), C(2, 33), {'F', 0, 0, 0},
	W(1, 2, 80), W(4, 1, 90), W(5, 1, 91), W(6, 1, 92), W(4, 1, 93), W(5, 1, 94),
	W(6, 1, 95), W(4, 1, 96), W(5, 1, 97), C(1, 34), W(6, 1, 98), W(4, 2, 99),
	W(5, 1, 101), W(6, 1, 102), {'F', 0, 0, 0}, W(7, 1, 110), C(1, 35), W(3, 1, 120),
	{'Q', 0, 0, 0},
};
#define NOPS (int)(sizeof(ops) / sizeof(ops[0]))
#define HC_JSLOTS 24 /* the burst fills it: a destage in the middle */

static uint64_t gen_after[NOPS];

static void blocks_pattern(uint8_t *buf, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		pattern(buf + (size_t)i * BLK, BLK, seed + i);
}

static void run_op(struct zdev *d, const struct op *o)
{
	uint8_t *b = zdev_buf_alloc(2 * BLK);
	struct zdev_zone z;

	ck_assert_ptr_nonnull(b);
	switch (o->kind) {
	case 'W':
		blocks_pattern(b, o->blocks, o->seed);
		ck_assert_int_eq(zdev_report_one(d, o->zone, &z), 0);
		ck_assert_int_eq(zdev_write(d, b, (size_t)o->blocks * BLK, z.wp), 0);
		break;
	case 'C':
		pattern(b, BLK, o->seed);
		ck_assert_int_eq(zdev_write(d, b, BLK, (uint64_t)o->blocks * BLK), 0);
		break;
	case 'F':
		ck_assert_int_eq(zdev_flush(d), 0);
		break;
	case 'R':
		ck_assert_int_eq(zdev_zone_reset(d, o->zone), 0);
		break;
	}
	zdev_buf_free(b);
}

static void run_workload(void)
{
	struct zemu_create_opts o = geo_opts();
	struct zemu_stats st;
	struct zdev *d;

	o.journal_slots = HC_JSLOTS;
	mkimg("hostcrash.img", &o);
	hc.rfd = open(img, O_RDONLY) + 1;
	ck_assert_int_gt(hc.rfd, 0);
	zemu_set_host_io_hook(hc_hook, NULL);
	d = hc.direct ? opn_direct(img) : opn(img);
	for (int i = 0; i < NOPS; i++) {
		if (ops[i].kind == 'Q') {
			zdev_close(d);
			d = NULL;
		} else {
			run_op(d, &ops[i]);
			ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
			gen_after[i] = st.generation;
		}
		hc.ops_done = i + 1;
	}
	zemu_set_host_io_hook(NULL, NULL);
	close(hc.rfd - 1);
	hc.rfd = 0;
	gen_after[NOPS - 1] = gen_after[NOPS - 2];
}

/* The last flush that returned before op D started (-1: none). */
static int acked_flush(int D)
{
	int ack = -1;

	for (int i = 0; i < D; i++)
		if (ops[i].kind == 'F')
			ack = i;
	return ack;
}

/* Zone Z's data [0, WP) must be whole writes of its history, at least the flushed ones. The
 * history starts after the last reset done (op D, in flight, may be a reset: AFTER_D picks
 * whether it happened). EXACT: the wp must be the flushed writes' end. */
static int zone_ok(struct zdev *d, uint32_t z, int D, int after_d, int exact, char *why,
		   size_t wl)
{
	int ack = acked_flush(D), nh = 0, floor = 0, from = 0, match = -1;
	uint64_t ends[NOPS + 1], wp;
	struct zdev_zone zn = rep(d, z);
	uint8_t *b = zdev_buf_alloc(BLK);

	for (int i = 0; i < D + (D < NOPS && after_d); i++)
		if (ops[i].kind == 'R' && ops[i].zone == z)
			from = i + 1;
	ends[0] = 0;
	for (int i = from; i <= D && i < NOPS; i++) {
		if (ops[i].kind != 'W' || ops[i].zone != z)
			continue;
		ends[nh + 1] = ends[nh] + ops[i].blocks;
		nh++;
		floor += i < ack;
	}
	wp = (zn.wp - zn.start) / BLK;
	for (int j = exact ? floor : 0; j <= (exact ? floor : nh); j++)
		if (ends[j] == wp)
			match = j;
	snprintf(why, wl, "zone %u: wp %llu blocks, %d writes, %d flushed, exact %d", z,
		 (unsigned long long)wp, nh, floor, exact);
	if (match < floor)
		goto out;
	/* every block up to the wp holds its write's data */
	for (int i = from, blk = 0; i <= D && i < NOPS && blk < (int)wp; i++) {
		if (ops[i].kind != 'W' || ops[i].zone != z)
			continue;
		for (uint32_t k = 0; k < ops[i].blocks && blk < (int)wp; k++, blk++) {
			ck_assert_int_eq(zdev_read(d, b, BLK, zn.start + (uint64_t)blk * BLK), 0);
			if (!buf_holds(b, BLK, ops[i].seed + k)) {
				snprintf(why, wl, "zone %u block %d: not write %d's data", z, blk, i);
				match = -1;
				goto out;
			}
		}
	}
out:
	zdev_buf_free(b);
	return match >= floor;
}

/* Conventional block B: the version the last flush covered, or (unless EXACT) a later one. */
static int conv_ok(struct zdev *d, uint32_t blk, int D, int exact)
{
	int ack = acked_flush(D), ok = 0;
	uint8_t *b = zdev_buf_alloc(BLK);
	uint32_t flushed = 0;

	ck_assert_int_eq(zdev_read(d, b, BLK, (uint64_t)blk * BLK), 0);
	for (int i = 0; i <= D && i < NOPS; i++) {
		if (ops[i].kind != 'C' || ops[i].blocks != blk)
			continue;
		if (i < ack)
			flushed = ops[i].seed;
		else if (!exact && buf_holds(b, BLK, ops[i].seed))
			ok = 1;
	}
	ok |= buf_holds(b, BLK, flushed);
	zdev_buf_free(b);
	return ok;
}

static void check_all(struct zdev *d, int D, int exact, const char *when, long step)
{
	char why[160];

	for (uint32_t z = 1; z < 8; z++) {
		int in_reset = D < NOPS && ops[D].kind == 'R' && ops[D].zone == z;

		ck_assert_msg(zone_ok(d, z, D, 0, exact, why, sizeof(why)) ||
			      (in_reset && zone_ok(d, z, D, 1, exact, why, sizeof(why))),
			      "%s, cut at step %ld (op %d), mode %d: %s", when, step, D, hc.mode, why);
	}
	for (uint32_t b = 0; b < 3; b++)
		ck_assert_msg(conv_ok(d, b, D, exact && (hc.mode == HC_KILL || hc.mode == HC_LOSE_ALL)),
			      "%s, cut at step %ld (op %d), mode %d: conventional block %u", when,
			      step, D, hc.mode, b);
}

/* Cut the workload at STEP in MODE, then check the crash image, and again after a power cut. */
static void cut_and_check(long step, enum hc_mode mode, uint64_t seed, int direct)
{
	struct zdev *d;
	int D, ack, exact;

	hc_forget();
	memset(&hc, 0, sizeof(hc));
	hc.direct = direct;
	hc.crash_at = step;
	hc.mode = mode;
	hc.rng = seed * 0x9e3779b97f4a7c15ull + 1;
	tu_path(hc.crash_img, sizeof(hc.crash_img), "hostcrash-cut.img");
	run_workload();
	hc_forget();
	ck_assert_msg(hc.crashed, "step %ld is past the workload", step);
	D = hc.ops_at_crash;
	ack = acked_flush(D);
	/* exact unless a flush was under way or the journal was destaged since the last one */
	exact = (D == NOPS || ops[D].kind != 'F') &&
		gen_after[D < NOPS ? D : NOPS - 1] == (ack < 0 ? 1 : gen_after[ack]);
	d = opn(hc.crash_img);
	check_all(d, D, 0, "after the crash", step);
	ck_assert_int_ge(zemu_powercut_dev(d, -1, 0, 0), 0);
	zdev_close(d);
	d = opn(hc.crash_img);
	check_all(d, D, exact, "after a power cut", step);
	zdev_close(d);
}

static void hostcrash_every_step(int direct)
{
	long steps;

	/* count the steps of the whole workload */
	memset(&hc, 0, sizeof(hc));
	hc.crash_at = -1;
	hc.direct = direct;
	run_workload();
	steps = hc.step;
	hc_forget();
	ck_assert_int_gt(steps, 40);
	for (long s = 1; s <= steps; s++) {
		for (enum hc_mode m = HC_KILL; m < HC_RANDOM; m++)
			cut_and_check(s, m, 0, direct);
		for (uint64_t seed = 1; seed <= 3; seed++)
			cut_and_check(s, HC_RANDOM, seed * 1000 + (uint64_t)s, direct);
	}
}

START_TEST(t_hostcrash_every_step)
{
	hostcrash_every_step(0);
}
END_TEST

/* With O_DIRECT the data goes straight to the host's disk and the journal through its page
 * cache (a second, buffered fd): the same cuts, the same answers. */
START_TEST(t_hostcrash_every_step_direct)
{
	hostcrash_every_step(1);
}
END_TEST

/* A flush is one fdatasync of the image; a flush with nothing new is none. */
START_TEST(t_flush_one_sync)
{
	struct zemu_stats st;
	struct zdev *d;
	uint64_t syncs;
	long before;

	mkdefault("onesync.img");
	memset(&hc, 0, sizeof(hc));
	hc.crash_at = -1;
	d = opn(img);
	zemu_set_host_io_hook(hc_hook, NULL);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(wr(d, zs(1) + (uint64_t)i * BLK, BLK, 1 + (uint32_t)i), 0);
		ck_assert_int_eq(wr(d, (uint64_t)i * BLK, BLK, 9 + (uint32_t)i), 0);
		before = hc.step;
		ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
		syncs = st.image_syncs;
		ck_assert_int_eq(zdev_flush(d), 0);
		/* the marker's journal block, then the one fdatasync */
		ck_assert_int_eq(hc.step - before, 2);
		ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
		ck_assert_uint_eq(st.image_syncs, syncs + 1);
		ck_assert_int_eq(hc.nw, 0);
		before = hc.step;
		ck_assert_int_eq(zdev_flush(d), 0);
		ck_assert_int_eq(hc.step, before);
	}
	zemu_set_host_io_hook(NULL, NULL);
	hc_forget();
	zdev_close(d);
	d = opn(img);
	ck_assert_int_eq(zemu_powercut_dev(d, -1, 0, 0), 0); /* nothing unflushed */
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 5 * BLK);
	for (int i = 0; i < 5; i++) {
		ck_assert(holds(d, zs(1) + (uint64_t)i * BLK, BLK, 1 + (uint32_t)i));
		ck_assert(holds(d, (uint64_t)i * BLK, BLK, 9 + (uint32_t)i));
	}
	zdev_close(d);
}
END_TEST

/* An image of format version 1: its journal records carry no data checksum (type 0) and no
 * marker. It opens with its unflushed writes still unflushed, an open that writes nothing leaves
 * it as it is, and the first new record upgrades it to version 3. */
START_TEST(t_version1_image)
{
	struct emu_hdr *h = emu_blk_alloc(EMU_BLK);
	struct emu_jrec r;
	struct zemu_stats st;
	struct zdev *d;
	int fd, n = 0;

	mkdefault("v1.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(2), 2 * BLK, 7), 0);
	ck_assert_int_eq(wr(d, BLK, BLK, 8), 0);
	zdev_close(d);
	fd = open(img, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, h, EMU_BLK, 0), EMU_BLK);
	for (uint64_t off = h->jrnl_off;; off += sizeof(r), n++) {
		ck_assert_int_eq(pread(fd, &r, sizeof(r), (off_t)off), sizeof(r));
		if (r.gen != h->generation)
			break;
		ck_assert_int_eq(r.type, JREC_WRITE);
		r.type = JREC_LEGACY;
		r.dcrc = 0;
		r.crc = 0;
		r.crc = emu_crc32c(0, &r, sizeof(r));
		ck_assert_int_eq(pwrite(fd, &r, sizeof(r), (off_t)off), sizeof(r));
	}
	ck_assert_int_eq(n, 2);
	h->version = 1;
	h->crc = 0;
	h->crc = emu_crc32c(0, h, EMU_BLK);
	ck_assert_int_eq(pwrite(fd, h, EMU_BLK, 0), EMU_BLK);
	close(fd);
	free(h);
	tu_path(aux, sizeof(aux), "v1-copy.img");
	ck_assert_int_eq(tu_sh("cp %s %s", img, aux), 0);
	d = opn(img);
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_uint_eq(st.format_version, 1);
	ck_assert_int_eq(st.unflushed, 2);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("cmp -s %s %s", img, aux), 0); /* nothing written */
	d = opn(img);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + 2 * BLK);
	ck_assert(holds(d, BLK, BLK, 8));
	ck_assert_int_eq(zdev_flush(d), 0); /* its marker is the first new record */
	ck_assert_int_eq(zemu_dev_stats(d, &st), 0);
	ck_assert_uint_eq(st.format_version, 3);
	ck_assert_int_eq(wr(d, zs(2) + 2 * BLK, BLK, 9), 0);
	ck_assert_int_eq(zemu_powercut_dev(d, -1, 0, 0), 0); /* keeps the flushed two */
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + 2 * BLK);
	ck_assert(holds(d, zs(2), 2 * BLK, 7));
	ck_assert(holds(d, BLK, BLK, 8));
	zdev_close(d);
}
END_TEST

/* A host crash that wrote a later journal block but lost an earlier one: the journal ends at
 * the hole, and the records of the current generation past it are cleared in the image, so
 * that the journal written over the hole later does not join up with them. Here they would
 * line up exactly: zone 6's blocks 4..9, whose old data is still in the image. */
START_TEST(t_stale_records_cleared)
{
	struct emu_hdr *h = emu_blk_alloc(EMU_BLK);
	uint8_t zero[sizeof(struct emu_jrec)] = {0};
	struct zdev *d;
	int fd, n = 0;

	mkdefault("stale.img");
	d = opn(img);
	for (uint32_t z = 1; z <= 6; z++) /* 72 records: slots 64..71 in the second block */
		for (uint32_t b = 0; b < 12; b++)
			ck_assert_int_eq(wr(d, zs(z) + b * BLK, BLK, 100 * z + b), 0);
	zdev_close(d);
	fd = open(img, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, h, EMU_BLK, 0), EMU_BLK);
	ck_assert_int_eq(pwrite(fd, zero, sizeof(zero), (off_t)(h->jrnl_off + 10 * sizeof(zero))),
			 sizeof(zero)); /* slot 10 never reached the disk */
	close(fd);
	free(h);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 10 * BLK);
	expect_zone(d, 6, ZDEV_COND_EMPTY, zs(6));
	for (uint32_t z = 1; z <= 6; z++) /* 54 records: slots 10..63 */
		for (uint32_t b = z == 1 ? 10 : 0; b < (z == 6 ? 4u : 12u); b++, n++)
			ck_assert_int_eq(wr(d, zs(z) + b * BLK, BLK, 1000 * z + b), 0);
	ck_assert_int_eq(n, 54);
	zdev_close(d);
	d = opn(img);
	expect_zone(d, 6, ZDEV_COND_CLOSED, zs(6) + 4 * BLK);
	ck_assert(holds(d, zs(6) + 3 * BLK, BLK, 6003));
	zdev_close(d);
}
END_TEST

/* An open that writes nothing leaves the image as it is (a refused mount must not write), even
 * where a marker proving the last flush is missing, as a killed process leaves it: the image
 * copied after two flushes, before the close adds that marker. */
START_TEST(t_idle_open_writes_nothing)
{
	char copy[512];
	struct zdev *d;

	mkdefault("idle.img");
	tu_path(aux, sizeof(aux), "idle-killed.img");
	tu_path(copy, sizeof(copy), "idle-copy.img");
	d = opn(img);
	for (uint32_t i = 0; i < 2; i++) {
		ck_assert_int_eq(wr(d, zs(1) + i * BLK, BLK, 40 + i), 0);
		ck_assert_int_eq(zdev_flush(d), 0);
	}
	ck_assert_int_eq(tu_sh("cp %s %s && cp %s %s", img, aux, img, copy), 0);
	zdev_close(d);
	ck_assert_int_ne(tu_sh("cmp -s %s %s", img, aux), 0); /* the close added its marker */
	d = opn(aux);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2 * BLK);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("cmp -s %s %s", aux, copy), 0);
}
END_TEST

void emu_hostcrash_tests(Suite *s)
{
	TCase *tc = tcase_create("hostcrash");

	tcase_add_test(tc, t_flush_one_sync);
	tcase_add_test(tc, t_version1_image);
	tcase_add_test(tc, t_stale_records_cleared);
	tcase_add_test(tc, t_idle_open_writes_nothing);
	tcase_add_test(tc, t_hostcrash_every_step);
	tcase_add_test(tc, t_hostcrash_every_step_direct);
	tcase_set_timeout(tc, 240);
	suite_add_tcase(s, tc);
}
