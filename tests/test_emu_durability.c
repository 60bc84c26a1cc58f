/*
 * test_emu_durability.c - Check tests of the emulator (fs/zdev_emu*.c): durability:
 * persistence across opens, exclusive opens, power cuts (all, a prefix, torn, seeded, on an
 * open device, with O_DIRECT and zones allocated at their first write), a full journal, a
 * process killed while writing.
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

/* ---- O_DIRECT: a zone's space allocated at its first write ---------------------------------
 * With O_DIRECT the emulator allocates a zone's image blocks before its first write
 * (emu_img_prealloc) and a reset punches them out. Neither may change what a power cut keeps:
 * flushed writes stay, unflushed ones go, and the allocated but unwritten rest reads as
 * zeros. */

static uint64_t img_bytes_allocated(void)
{
	struct stat st;

	ck_assert_int_eq(stat(img, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

START_TEST(t_powercut_direct)
{
	struct zemu_powercut_result res;
	struct zdev *d;
	uint64_t before;

	mkdefault("pc_direct.img");
	d = opn_direct(img);
	if (!d)
		return; /* this file system has no O_DIRECT */
	before = img_bytes_allocated();
	ck_assert_int_eq(wr(d, zs(1), BLK, 1), 0);
	/* one block written, the zone's whole capacity allocated */
	ck_assert_uint_ge(img_bytes_allocated(), before + ZCAP);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 2), 0);
	ck_assert_int_eq(wr(d, zs(2), 2 * BLK, 3), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, -1, 0, 0, &res), 0);
	ck_assert_int_eq(res.dropped, 2);
	d = opn_direct(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	expect_zone(d, 2, ZDEV_COND_EMPTY, zs(2));
	ck_assert(holds(d, zs(1), BLK, 1));
	ck_assert(holds(d, zs(1) + BLK, BLK, 0));
	ck_assert(holds(d, zs(2), 2 * BLK, 0));
	/* a reset gives the space back; the next first write allocates it again */
	before = img_bytes_allocated();
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0);
	ck_assert_uint_le(img_bytes_allocated() + ZCAP, before);
	ck_assert_int_eq(wr(d, zs(1), BLK, 4), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1) + BLK, BLK, 5), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, 0, 0, 0, &res), 0);
	ck_assert_int_eq(res.dropped, 1);
	d = opn_direct(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	ck_assert(holds(d, zs(1), BLK, 4));
	ck_assert(holds(d, zs(1) + BLK, ZCAP - BLK, 0));
	zdev_close(d);
}
END_TEST

/* ---- a power cut beside writes in flight --------------------------------------------------
 * Writes to sequential zones run their transfers with the device lock dropped, several zones
 * at once (emu_write_seq_unlocked). A power cut while they run must find each write either not
 * started or recorded: every zone then holds its own data up to its write pointer, and keeps
 * at least what was flushed before the cut. */

#define PW_THREADS 4
#define PW_LEN (64 * KB)
#define PW_PER (uint32_t)(KZS / PW_LEN)

struct pw_writer {
	struct zdev *d;
	uint32_t zone;
	uint32_t written, flushed; /* atomics: writes done, and of them known durable */
	int stop, err;
};

static void *pw_main(void *arg)
{
	struct pw_writer *w = arg;
	void *b = zdev_buf_alloc(PW_LEN);
	int ret;

	for (uint32_t i = 0; b && i < PW_PER && !__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE); i++) {
		pattern(b, PW_LEN, w->zone << 16 | i);
		ret = zdev_write(w->d, b, PW_LEN, zs(0) + w->zone * KZS + i * PW_LEN);
		__atomic_store_n(&w->err, ret, __ATOMIC_RELEASE);
		if (ret)
			break; /* the cut took back what was not flushed: this one is past the pointer */
		__atomic_store_n(&w->written, i + 1, __ATOMIC_RELEASE);
		if (i % 4 == 3 && !zdev_flush(w->d))
			__atomic_store_n(&w->flushed, i + 1, __ATOMIC_RELEASE);
	}
	zdev_buf_free(b);
	return NULL;
}

/* Each writer's zone holds its own writes, whole, up to the write pointer, and at least the
 * DURABLE ones. */
static void pw_check(struct zdev *d, const struct pw_writer *w, const uint32_t *durable)
{
	for (int t = 0; t < PW_THREADS; t++) {
		uint64_t start = zs(0) + w[t].zone * KZS, wp = rep(d, w[t].zone).wp;

		ck_assert_msg((wp - start) % PW_LEN == 0, "zone %u: wp %llu between writes",
			      w[t].zone, (unsigned long long)wp);
		ck_assert_msg((wp - start) / PW_LEN >= durable[t], "zone %u: %llu writes left, %u "
			      "were flushed", w[t].zone, (unsigned long long)((wp - start) / PW_LEN),
			      durable[t]);
		for (uint32_t i = 0; i < (wp - start) / PW_LEN; i++)
			ck_assert_msg(holds(d, start + i * PW_LEN, PW_LEN, w[t].zone << 16 | i),
				      "zone %u: write %u is not its data", w[t].zone, i);
	}
}

START_TEST(t_powercut_parallel)
{
	struct zemu_create_opts o = {.size = 8 * KZS, .zone_size = KZS, .zone_capacity = KZS,
				     .lblock_size = BLK, .nr_conv = 1};
	struct pw_writer w[PW_THREADS];
	uint32_t durable[PW_THREADS];
	pthread_t th[PW_THREADS];
	struct zdev *d;
	int t, ready;

	tu_path(img, sizeof(img), "pc_parallel.img");
	ck_assert_int_eq(zemu_create(img, &o), 0);
	d = opn(img);
	for (t = 0; t < PW_THREADS; t++) {
		w[t] = (struct pw_writer){.d = d, .zone = 1 + (uint32_t)t};
		ck_assert_int_eq(pthread_create(&th[t], NULL, pw_main, &w[t]), 0);
	}
	do { /* cut in the middle: every writer has flushed something and goes on */
		usleep(200);
		for (ready = 1, t = 0; t < PW_THREADS; t++)
			ready &= __atomic_load_n(&w[t].flushed, __ATOMIC_ACQUIRE) >= 8 ||
				 __atomic_load_n(&w[t].written, __ATOMIC_ACQUIRE) == PW_PER ||
				 __atomic_load_n(&w[t].err, __ATOMIC_ACQUIRE);
	} while (!ready);
	for (t = 0; t < PW_THREADS; t++)
		durable[t] = __atomic_load_n(&w[t].flushed, __ATOMIC_ACQUIRE);
	ck_assert_int_ge(zemu_powercut_dev(d, 0, 0, 0), 0);
	for (t = 0; t < PW_THREADS; t++)
		__atomic_store_n(&w[t].stop, 1, __ATOMIC_RELEASE);
	for (t = 0; t < PW_THREADS; t++)
		pthread_join(th[t], NULL);
	pw_check(d, w, durable);
	zdev_close(d);
	d = opn(img); /* the cut's result is durable */
	pw_check(d, w, durable);
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


START_TEST(t_kill)
{
	struct zemu_create_opts o = {.size = 8 * KZS, .zone_size = KZS, .nr_conv = 1};
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	srand(seed);
	for (int round = 0; round < 6; round++) {
		uint32_t flushed = 0, v;
		struct zdev *d;
		int fd;

		mkimg("kill.img", &o);
		fd = kill_after(kill_child, img, 1000 + (useconds_t)(rand() % 100000));
		while (read(fd, &v, sizeof(v)) == sizeof(v))
			flushed = v;
		close(fd);
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

/* ---- a kill beside writes in flight --------------------------------------------------------
 * Their journal blocks reach the image with the device lock dropped, in the order their
 * records were made (emu_write_seq_unlocked). A write that completed has its record in the
 * image, flushed or not, so a kill at any instant keeps every completed write. The child's
 * writers report each completed write through a pipe; one of them flushes now and then, and
 * the writes the other threads complete during its data sync stay in the journal. */

struct kw_writer {
	struct zdev *d;
	uint32_t zone;
	int fd;
};

static void *kw_main(void *arg)
{
	struct kw_writer *w = arg;
	void *b = zdev_buf_alloc(PW_LEN);

	for (uint32_t i = 0; b && i < PW_PER; i++) {
		uint32_t msg = w->zone << 16 | (i + 1);

		pattern(b, PW_LEN, w->zone << 16 | i);
		if (zdev_write(w->d, b, PW_LEN, zs(0) + w->zone * KZS + i * PW_LEN))
			_exit(4);
		if (write(w->fd, &msg, sizeof(msg)) != sizeof(msg)) /* atomic: under PIPE_BUF */
			_exit(5);
		if (w->zone == 1 && i % 8 == 7 && zdev_flush(w->d)) /* flushes beside the others */
			_exit(7);
	}
	pause();
	return NULL;
}

static int kw_direct; /* odd rounds open the image with O_DIRECT, where the host has it */

static void kw_child(const char *path, int fd)
{
	struct zdev_open_opts oo = {.direct = kw_direct};
	struct kw_writer w[PW_THREADS];
	pthread_t th[PW_THREADS];
	struct zdev *d;
	int ret = zdev_open(path, &oo, &d);

	if (ret == -EINVAL && kw_direct)
		ret = zdev_open(path, NULL, &d);
	if (ret)
		_exit(3);
	for (int t = 0; t < PW_THREADS; t++) {
		w[t] = (struct kw_writer){.d = d, .zone = 1 + (uint32_t)t, .fd = fd};
		if (pthread_create(&th[t], NULL, kw_main, &w[t]))
			_exit(6);
	}
	pause();
	_exit(0);
}

START_TEST(t_kill_parallel)
{
	/* 16 journal slots: the journal fills and flushes by itself (a new generation) while
	 * journal blocks are on their way */
	struct zemu_create_opts o = {.size = 8 * KZS, .zone_size = KZS, .zone_capacity = KZS,
				     .lblock_size = BLK, .nr_conv = 1, .journal_slots = 16};
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	srand(seed);
	for (int round = 0; round < 6; round++) {
		struct pw_writer w[PW_THREADS];
		uint32_t done[PW_THREADS] = {0}, msg;
		struct zdev *d;
		int fd;

		tu_path(img, sizeof(img), "kill_parallel.img");
		ck_assert_int_eq(zemu_create(img, &o), 0);
		kw_direct = round % 2;
		fd = kill_after(kw_child, img, 500 + (useconds_t)(rand() % 20000));
		while (read(fd, &msg, sizeof(msg)) == sizeof(msg))
			if ((msg >> 16) >= 1 && (msg >> 16) <= PW_THREADS)
				done[(msg >> 16) - 1] = msg & 0xffff;
		close(fd);
		for (int t = 0; t < PW_THREADS; t++)
			w[t] = (struct pw_writer){.zone = 1 + (uint32_t)t};
		d = opn(img);
		pw_check(d, w, done); /* every completed write, each zone's own data */
		zdev_close(d);
	}
}
END_TEST

/* A vectored write is one write to the volatile cache: a power cut drops it whole (or keeps
 * it whole), never one of its pieces alone. */
#define MIB (1024 * KB)

/* A large zone's reset punches its space out in pieces (EMU_PUNCH_PIECE, 4 MiB, so that a
 * read of the image waits behind no whole-zone punch): all of them, not only the first. */
START_TEST(t_reset_punches_large_zone)
{
	struct zemu_create_opts o = {.size = 4 * 16 * MIB, .zone_size = 16 * MIB,
				     .zone_capacity = 10 * MIB, .lblock_size = BLK};
	uint64_t before, after;
	struct zdev *d;

	tu_path(img, sizeof(img), "punch_large.img");
	ck_assert_int_eq(zemu_create(img, &o), 0);
	d = opn_direct(img);
	if (!d)
		return; /* this file system has no O_DIRECT */
	before = img_bytes_allocated();
	ck_assert_int_eq(wr(d, 16 * MIB, BLK, 1), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	after = img_bytes_allocated();
	ck_assert_uint_ge(after, before + 10 * MIB);
	ck_assert_int_eq(zdev_zone_reset(d, 1), 0);
	/* the reset's own record may allocate a block of the image: all but 2 MiB of the zone's
	 * 10 MiB must be back (the first piece alone would give back 4) */
	ck_assert_uint_le(img_bytes_allocated() + 8 * MIB, after);
	ck_assert(holds(d, 16 * MIB, BLK, 0));
	zdev_close(d);
}
END_TEST

START_TEST(t_powercut_writev)
{
	struct zemu_powercut_result res;
	uint8_t *b = zdev_buf_alloc(4 * BLK);
	struct iovec iov[3] = {{b, BLK}, {b + BLK, 2 * BLK}, {b + 3 * BLK, BLK}};
	struct zdev *d;

	ck_assert_ptr_nonnull(b);
	pattern(b, 4 * BLK, 8);
	mkdefault("pc_writev.img");
	d = opn(img);
	ck_assert_int_eq(wr(d, zs(1), BLK, 7), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(zdev_writev(d, iov, 3, zs(1) + BLK), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, -1, 0, 0, &res), 0);
	ck_assert_int_eq(res.unflushed, 1);
	ck_assert_int_eq(res.dropped, 1);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + BLK);
	ck_assert(holds(d, zs(1), BLK, 7));
	ck_assert_int_eq(zdev_writev(d, iov, 3, zs(1) + BLK), 0);
	zdev_close(d);
	ck_assert_int_eq(zemu_powercut_ex(img, 1, 0, 0, &res), 0); /* keep the first: all of it */
	ck_assert_int_eq(res.kept, 1);
	d = opn(img);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 5 * BLK);
	ck_assert(holds(d, zs(1) + BLK, 4 * BLK, 8));
	zdev_close(d);
	zdev_buf_free(b);
}
END_TEST

void emu_durability_tests(Suite *s)
{
	TCase *tc = tcase_create("durability");

	tcase_add_test(tc, t_persist);
	tcase_add_test(tc, t_exclusive);
	tcase_add_test(tc, t_powercut_all);
	tcase_add_test(tc, t_powercut_prefix);
	tcase_add_test(tc, t_powercut_torn);
	tcase_add_test(tc, t_powercut_seeded);
	tcase_add_test(tc, t_powercut_dev);
	tcase_add_test(tc, t_powercut_direct);
	tcase_add_test(tc, t_powercut_writev);
	tcase_add_test(tc, t_reset_punches_large_zone);
	tcase_add_test(tc, t_powercut_parallel);
	tcase_add_test(tc, t_journal_full);
	tcase_add_test(tc, t_kill);
	tcase_add_test(tc, t_kill_parallel);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
}
