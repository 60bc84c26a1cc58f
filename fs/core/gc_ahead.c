/*
 * gc_ahead.c - the collector's next window, read while it moves the last one.
 *
 * Owns: one helper thread and one window's buffer. GC reads its victim GC_WINDOW blocks at a
 * time; read one after the other, those reads were about half of a collector's time, and
 * user writes waiting on foreground collection waited for them too (docs/benchmarks.md,
 * "What bounds the write rate during the overwrites"). So once GC has a window, it posts
 * the next one here, and the helper reads it while GC moves the blocks it has: two reads of
 * GC_WINDOW blocks in flight at most, never a larger one, so a user read waits behind no
 * more than before.
 * A window read ahead is good only for the victim it was read for: the victim is pinned, so
 * its blocks cannot change, and gc.c forgets the window (waiting for a read in flight)
 * whenever it takes or drops a victim, before the zone can be reset and written again.
 * May call: segment.c (seg_read_run), lock.h, zdev.h (aligned buffers). Called by gc.c,
 * with gc_lock held: one collector posts and takes at a time.
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>

enum { AHEAD_IDLE, AHEAD_ASKED, AHEAD_READING, AHEAD_DONE };

static void *ahead_main(void *arg)
{
	struct zlfs_fs *fs = arg;
	struct gc_ahead *a = &fs->gc.ahead;

	zlock_lock(&a->lock);
	for (;;) {
		uint32_t start, n;
		int ret;

		while (!a->stop && a->state != AHEAD_ASKED)
			zlock_wait(&a->cond, &a->lock);
		if (a->stop)
			break;
		a->state = AHEAD_READING;
		start = a->start;
		n = a->n;
		zlock_unlock(&a->lock);
		ret = seg_read_run(fs, start, n, a->buf);
		ATOMIC_ADD(&fs->gc.bytes_read, (uint64_t)n * ZLFS_BLOCK_SIZE);
		zlock_lock(&a->lock);
		a->ret = ret;
		a->state = AHEAD_DONE;
		pthread_cond_broadcast(&a->cond);
	}
	zlock_unlock(&a->lock);
	return NULL;
}

int gc_ahead_start(struct zlfs_fs *fs, size_t bytes)
{
	struct gc_ahead *a = &fs->gc.ahead;

	if (a->running)
		return 0;
	if (!a->buf && !(a->buf = zdev_buf_alloc(bytes)))
		return -ENOMEM;
	zlock_init(&a->lock, LR_SLEEP, "gc_ahead");
	pthread_cond_init(&a->cond, NULL);
	a->state = AHEAD_IDLE;
	a->stop = 0;
	if (pthread_create(&a->thread, NULL, ahead_main, fs)) {
		pthread_cond_destroy(&a->cond);
		zlock_destroy(&a->lock);
		return -EAGAIN;
	}
	a->running = 1;
	return 0;
}

void gc_ahead_stop(struct zlfs_fs *fs)
{
	struct gc_ahead *a = &fs->gc.ahead;

	if (a->running) {
		zlock_lock(&a->lock);
		a->stop = 1;
		pthread_cond_broadcast(&a->cond);
		zlock_unlock(&a->lock);
		pthread_join(a->thread, NULL);
		pthread_cond_destroy(&a->cond);
		zlock_destroy(&a->lock);
		a->running = 0;
	}
	zdev_buf_free(a->buf);
	a->buf = NULL;
}

/* Wait, the lock held, until no read is asked for or under way: the buffer is ours. */
static void ahead_settle(struct gc_ahead *a)
{
	while (a->state == AHEAD_ASKED || a->state == AHEAD_READING)
		zlock_wait(&a->cond, &a->lock);
}

void gc_ahead_post(struct zlfs_fs *fs, uint32_t start, uint32_t n)
{
	struct gc_ahead *a = &fs->gc.ahead;

	if (!a->running || !n)
		return;
	zlock_lock(&a->lock);
	ahead_settle(a);
	a->start = start;
	a->n = n;
	a->state = AHEAD_ASKED;
	pthread_cond_broadcast(&a->cond);
	zlock_unlock(&a->lock);
}

int gc_ahead_take(struct zlfs_fs *fs, uint32_t addr, struct gc_window *w)
{
	struct gc_ahead *a = &fs->gc.ahead;
	int got = 0;

	if (!a->running)
		return 0;
	zlock_lock(&a->lock);
	ahead_settle(a);
	if (a->state == AHEAD_DONE && !a->ret && addr >= a->start && addr < a->start + a->n) {
		uint8_t *b = w->buf;

		w->buf = a->buf; /* the two buffers change places: no copy */
		a->buf = b;
		w->start = a->start;
		w->n = a->n;
		got = 1;
	}
	a->state = AHEAD_IDLE;
	zlock_unlock(&a->lock);
	if (got)
		ATOMIC_ADD(&fs->gc.windows_ahead, 1);
	return got;
}

void gc_ahead_forget(struct zlfs_fs *fs)
{
	struct gc_ahead *a = &fs->gc.ahead;

	if (!a->running)
		return;
	zlock_lock(&a->lock);
	ahead_settle(a);
	a->state = AHEAD_IDLE;
	zlock_unlock(&a->lock);
}
