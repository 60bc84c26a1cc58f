/*
 * test_wbuf.c - the write buffer (wbuf.c) on the zoned-device fixture of test_zdev.c: runs
 * of a zone's slots as one write, the static policy's buffers, copies with the buffer's lock
 * dropped, and a destroy with slots still queued.
 * May call: wbuf.h, zdev.h, zdev_emu.h (to count the emulator's writes), zdev_test.h.
 */
#include "testutil.h"
#include "wbuf.h"
#include "zdev_emu.h"
#include "zdev_test.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The write buffer writes the slots of a zone that follow on as one device write, at most a
 * megabyte: ten 64 KiB slots staged in one call (a call's slots are held back until it
 * returns) reach the emulator as 10 / 16 rounded up = 1 write, twenty as 2, and the zone
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

static __thread int drainer_thread; /* set on the thread of a drain (op 1 below) */

/* A test hook that holds the NTH call at WHERE (WBUF_HOOK_COPY or _WRITE) until released,
 * or every call when NTH is 0; counting only the calls of drains' threads (HOLD_DRAINS) or
 * only the others' (HOLD_FLUSHERS) when THREADS says so. */
struct hold {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int where, nth, threads, calls, holding, release;
};

#define HOLD_ANY 0
#define HOLD_DRAINS 1
#define HOLD_FLUSHERS 2
#define HOLD_INIT_BY(where, nth, threads) \
	{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, where, nth, threads, 0, 0, 0}
#define HOLD_INIT(where, nth) HOLD_INIT_BY(where, nth, HOLD_ANY)

static void hold_nth(void *arg, int where)
{
	struct hold *h = arg;

	if (where != h->where || (h->threads == HOLD_DRAINS && !drainer_thread) ||
	    (h->threads == HOLD_FLUSHERS && drainer_thread))
		return;
	pthread_mutex_lock(&h->lock);
	if (++h->calls == h->nth || !h->nth) {
		h->holding = 1;
		pthread_cond_broadcast(&h->cond);
		while (!h->release)
			pthread_cond_wait(&h->cond, &h->lock);
	}
	pthread_mutex_unlock(&h->lock);
}

static void hold_wait(struct hold *h)
{
	pthread_mutex_lock(&h->lock);
	while (!h->holding)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

static void hold_release(struct hold *h)
{
	pthread_mutex_lock(&h->lock);
	h->release = 1;
	pthread_cond_broadcast(&h->cond);
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

	drainer_thread = c->op == 1;
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

/* A log's copy into the write buffer runs with the buffer's lock dropped. Held in the middle
 * of a three-slot append (a hook in its second copy), the buffer still serves a read of the
 * slot already copied, another log's zone is staged and flushed, and nothing of the held
 * call is written: its slots go out after it, in order, so a drain of its zone waits for
 * the copy and then finds every block on the device. */
START_TEST(t_wbuf_copy_outside_lock)
{
	struct hold h = HOLD_INIT(WBUF_HOOK_COPY, 2);
	struct wbuf_opts o = {.policy = WBUF_DYNAMIC, .budget = 32 * 64 * 1024,
			      .slot_size = 64 * 1024, .test_hook = hold_nth,
			      .test_hook_arg = &h};
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
	hold_wait(&h);

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
	hold_release(&h);
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

/* A power cut in the middle of a copy loses nothing that was flushed and writes nothing of
 * the call being copied: a slot flushed to the device before, then a three-slot call held in
 * its second copy (its first slot full and queued) when the emulator loses power. The zone
 * then ends where the flushed slot ends, with its data; released, the call's slots follow it
 * and the zone holds all four. */
START_TEST(t_wbuf_powercut_in_copy)
{
	struct hold h = HOLD_INIT(WBUF_HOOK_COPY, 3);
	struct wbuf_opts o = {.policy = WBUF_DYNAMIC, .budget = 32 * 64 * 1024,
			      .slot_size = 64 * 1024, .test_hook = hold_nth,
			      .test_hook_arg = &h};
	uint32_t z = need_seq_zone(9), per = 64 * 1024 / WBUF_BLOCK;
	uint64_t start = zone_info(z).start, slot = (uint64_t)per * WBUF_BLOCK;
	struct wbuf_call add;
	struct wbuf *wb;
	uint8_t *buf;
	pthread_t t;

	if (geo->lblock_size != WBUF_BLOCK || !zdev_is_emu(dev))
		return; /* the cut is the emulator's */
	reset_zone(z);
	ck_assert_int_eq(wbuf_init(dev, &o, &wb), 0);
	buf = pattern(4 * slot, start, 71);
	ck_assert_int_eq(wbuf_add_n(wb, 0, z, 0, buf, per), 0); /* the hook's first copy */
	ck_assert_int_eq(wbuf_flush_zone(wb, z), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	add = (struct wbuf_call){wb, 0, 0, z, per, 3 * per, buf + slot};
	wbuf_call_within(&add, &t, 0);
	hold_wait(&h); /* the call's second copy: its first slot is full and queued */
	usleep(50 * 1000);
	ck_assert_uint_eq(zone_info(z).wp, start + slot); /* nothing of the call written yet */
	ck_assert_int_ge(zemu_powercut_dev(dev, -1, 0, 0), 0);
	ck_assert_uint_eq(zone_info(z).wp, start + slot);
	check_pattern(start, slot, 71);
	hold_release(&h);
	pthread_join(t, NULL);
	ck_assert_int_eq(add.ret, 0);
	ck_assert_int_eq(wbuf_flush_zone(wb, z), 0);
	wbuf_destroy(wb);
	ck_assert_uint_eq(zone_info(z).wp, start + 4 * slot);
	check_pattern(start, 4 * slot, 71);
	zdev_buf_free(buf);
	reset_zone(z);
}
END_TEST

/* A dynamic buffer of 64 KiB slots whose hook is H, for a test on zone Z (reset first). */
static struct wbuf *held_buffer(struct hold *h, uint32_t z)
{
	struct wbuf_opts o = {.policy = WBUF_DYNAMIC, .budget = 32 * 64 * 1024,
			      .slot_size = 64 * 1024, .test_hook = hold_nth, .test_hook_arg = h};
	struct wbuf *wb;

	reset_zone(z);
	ck_assert_int_eq(wbuf_init(dev, &o, &wb), 0);
	return wb;
}

/* The end of such a test: the buffer gone, zone Z holding BUF's LEN bytes of SEED. */
static void held_done(struct wbuf *wb, uint32_t z, uint8_t *buf, size_t len, int seed)
{
	wbuf_destroy(wb);
	check_pattern(zone_info(z).start, len, seed);
	zdev_buf_free(buf);
	reset_zone(z);
}

/* An fsync's drain writes its few staged blocks itself instead of waking a flusher and
 * sleeping until it is done (two hand-offs between threads per zone, each a wake-up the
 * scheduler may delay on a busy machine): with every flusher's write held, a drain of a
 * zone's partly filled slot still returns, and the zone holds the blocks. */
START_TEST(t_wbuf_drain_writes_itself)
{
	struct hold h = HOLD_INIT_BY(WBUF_HOOK_WRITE, 0, HOLD_FLUSHERS);
	uint32_t z = need_seq_zone(10);
	uint64_t start = zone_info(z).start;
	struct wbuf_call flush;
	struct wbuf *wb;
	uint8_t *buf;
	pthread_t t;
	int late;

	if (geo->lblock_size != WBUF_BLOCK)
		return;
	wb = held_buffer(&h, z);
	buf = pattern(3 * (size_t)WBUF_BLOCK, start, 81);
	ck_assert_int_eq(wbuf_add_n(wb, 0, z, 0, buf, 3), 0); /* a partial slot: not queued */
	flush = (struct wbuf_call){wb, 1, 0, z};
	late = wbuf_call_within(&flush, &t, 1);
	hold_release(&h); /* a flusher held by a drain that waited for it can finish now */
	if (late)
		pthread_join(t, NULL);
	ck_assert_msg(!late, "the drain waited for a flusher to write its blocks");
	ck_assert_int_eq(flush.ret, 0);
	ck_assert_int_eq(h.calls, 0);
	ck_assert_uint_eq(zone_info(z).wp, start + 3ull * WBUF_BLOCK);
	held_done(wb, z, buf, 3 * (size_t)WBUF_BLOCK, 81);
}
END_TEST

/* A full slot queued while a drain writes the zone's slot before it wakes a flusher that
 * finds the zone busy and sleeps again; the drain, once its write is done, hands the queue
 * back to the flushers, so the slot is written without any further call. */
START_TEST(t_wbuf_drain_hands_back)
{
	struct hold h = HOLD_INIT_BY(WBUF_HOOK_WRITE, 1, HOLD_DRAINS);
	uint32_t z = need_seq_zone(11), per = 64 * 1024 / WBUF_BLOCK;
	uint64_t start = zone_info(z).start, want = start + (3ull + per) * WBUF_BLOCK;
	struct wbuf_call flush;
	struct wbuf *wb;
	uint8_t *buf;
	pthread_t t;
	int i;

	if (geo->lblock_size != WBUF_BLOCK)
		return;
	wb = held_buffer(&h, z);
	buf = pattern((3 + (size_t)per) * WBUF_BLOCK, start, 91);
	ck_assert_int_eq(wbuf_add_n(wb, 0, z, 0, buf, 3), 0); /* a partial slot */
	flush = (struct wbuf_call){wb, 1, 0, z};
	wbuf_call_within(&flush, &t, 0);
	hold_wait(&h); /* the drain is writing the three blocks */
	/* a full slot after them: queued at once, its zone busy with the drain's write */
	ck_assert_int_eq(wbuf_add_n(wb, 0, z, 3, buf + 3 * (size_t)WBUF_BLOCK, per), 0);
	usleep(100 * 1000); /* the flusher woken for it looks, finds the zone busy, sleeps */
	hold_release(&h);
	pthread_join(t, NULL);
	ck_assert_int_eq(flush.ret, 0);
	for (i = 0; i < 1000 && zone_info(z).wp != want; i++)
		usleep(10 * 1000);
	ck_assert_msg(zone_info(z).wp == want, "the slot queued behind the drain's write stayed queued");
	held_done(wb, z, buf, (3 + (size_t)per) * WBUF_BLOCK, 91);
}
END_TEST

/* Destroying the buffer with slots still queued writes them and returns. One flusher holds
 * the zone's first slot in flight (a hook in its write) while the second waits behind it, so
 * the other flushers, woken by the destroy, find nothing to write and sleep again: the
 * flusher that empties the queue must wake them (they wait on a condition of their own). */
static void *destroy_main(void *arg)
{
	wbuf_destroy(arg);
	return NULL;
}

START_TEST(t_wbuf_destroy_queued)
{
	struct hold h = HOLD_INIT(WBUF_HOOK_WRITE, 1);
	struct wbuf_opts o = {.policy = WBUF_DYNAMIC, .budget = 32 * 64 * 1024,
			      .slot_size = 64 * 1024, .test_hook = hold_nth,
			      .test_hook_arg = &h};
	uint32_t z = need_seq_zone(8), per = 64 * 1024 / WBUF_BLOCK;
	uint64_t start = zone_info(z).start;
	struct timespec ts;
	struct wbuf *wb;
	uint8_t *buf;
	pthread_t t;

	if (geo->lblock_size != WBUF_BLOCK)
		return;
	reset_zone(z);
	ck_assert_int_eq(wbuf_init(dev, &o, &wb), 0);
	buf = pattern(2 * (size_t)per * WBUF_BLOCK, start, 61);
	ck_assert_int_eq(wbuf_add_n(wb, 0, z, 0, buf, per), 0);
	hold_wait(&h);
	ck_assert_int_eq(wbuf_add_n(wb, 0, z, per, buf + (size_t)per * WBUF_BLOCK, per), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, destroy_main, wb), 0);
	usleep(100 * 1000); /* the destroy wakes the idle flushers, which find nothing to write */
	hold_release(&h);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	ck_assert_msg(!pthread_timedjoin_np(t, NULL, &ts), "wbuf_destroy hung with slots queued");
	ck_assert_uint_eq(zone_info(z).wp, start + 2ull * per * WBUF_BLOCK);
	check_pattern(start, 2 * (size_t)per * WBUF_BLOCK, 61);
	zdev_buf_free(buf);
	reset_zone(z);
}
END_TEST

void wbuf_tests(TCase *tc)
{
	tcase_add_test(tc, t_wbuf_runs);
	tcase_add_test(tc, t_wbuf_static_logs);
	tcase_add_test(tc, t_wbuf_copy_outside_lock);
	tcase_add_test(tc, t_wbuf_destroy_queued);
	tcase_add_test(tc, t_wbuf_drain_writes_itself);
	tcase_add_test(tc, t_wbuf_drain_hands_back);
	tcase_add_test(tc, t_wbuf_powercut_in_copy);
}
