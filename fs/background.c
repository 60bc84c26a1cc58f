/*
 * background.c - the daemon's background worker: garbage collection by phase.
 *
 * Owns: when collection runs and how hard, and standing aside for users. Phases follow the
 * free zones (gc_phase_update): no-GC above the high watermark; normal below it - cost-
 * benefit, one zone per pass, only after the filesystem has been idle for idle_ms; boosted
 * below the low watermark - greedy, several zones per pass, even while users are active.
 * Either way it moves at most STEP_BLOCKS blocks per step and yields the lock whenever a user
 * request is waiting, so no user request waits behind a whole zone. Emptied zones become
 * free with the checkpoint that follows a pass.
 * May call: files.h (files_sync), core.h (gc), log.h. Part of the FUSE layer.
 */
#include "background.h"
#include "files.h"
#include "log.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#define STEP_BLOCKS 32

struct bg {
	struct zlfs_fs *fs;
	pthread_t thread;
	pthread_cond_t cond;
	int stop;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int users_waiting(struct zlfs_fs *fs)
{
	return __atomic_load_n(&fs->users_active, __ATOMIC_RELAXED) > 0;
}

/* How long to sleep before looking again, by phase. */
static unsigned nap_ms(enum gc_phase p)
{
	return p == GC_NONE ? 1000 : p == GC_NORMAL ? 200 : 20;
}

/* One pass, called with fs->lock held; returns with it held. */
static void bg_pass(struct bg *b, enum gc_phase phase)
{
	struct zlfs_fs *fs = b->fs;
	unsigned zones = phase == GC_NORMAL ? 1 : fs->gc.o.boost_zones, done = 0;
	uint64_t zones0 = fs->gc_zones, t0;
	int ret = 0;

	fs->gc.wakes++;
	while (!b->stop && !fs->readonly && done < zones) {
		uint64_t s0 = mono_ns(), d;

		ret = gc_step(fs, phase != GC_NORMAL, STEP_BLOCKS);
		d = mono_ns() - s0; /* busy and overlap counted per step: overlap <= busy */
		fs->gc.busy_ns += d;
		if (users_waiting(fs))
			fs->gc.overlap_ns += d;
		if (ret < 0)
			break;
		done += fs->gc_zones > zones0 + done;
		if (users_waiting(fs)) { /* users first: let them have the lock */
			pthread_mutex_unlock(&fs->lock);
			sched_yield();
			pthread_mutex_lock(&fs->lock);
			if (phase == GC_NORMAL)
				break;
		}
	}
	t0 = mono_ns();
	if (seg_prefree_zones(fs) && !fs->readonly)
		files_sync(fs); /* the emptied zones become free */
	fs->gc.busy_ns += mono_ns() - t0;
	if (ret < 0 && ret != -ENOENT)
		zlog_warn("background GC stopped this pass: %s", strerror(-ret));
}

static int idle_enough(const struct zlfs_fs *fs)
{
	uint64_t last = __atomic_load_n(&fs->last_user_ns, __ATOMIC_RELAXED);

	return !__atomic_load_n(&fs->users_active, __ATOMIC_RELAXED) &&
	       mono_ns() - last >= (uint64_t)fs->gc.o.idle_ms * 1000000ULL;
}

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	struct zlfs_fs *fs = b->fs;
	struct timespec ts;
	enum gc_phase p = GC_NONE;

	pthread_mutex_lock(&fs->lock);
	while (!b->stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)nap_ms(p) * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&b->cond, &fs->lock, &ts);
		if (b->stop || fs->readonly)
			continue;
		p = gc_phase_update(fs);
		if (p == GC_BOOSTED || p == GC_FOREGROUND || (p == GC_NORMAL && idle_enough(fs)))
			bg_pass(b, p);
	}
	pthread_mutex_unlock(&fs->lock);
	return NULL;
}

int bg_start(struct zlfs_fs *fs, struct bg **out)
{
	struct bg *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->fs = fs;
	pthread_cond_init(&b->cond, NULL);
	if (pthread_create(&b->thread, NULL, bg_main, b)) {
		pthread_cond_destroy(&b->cond);
		free(b);
		return -EAGAIN;
	}
	*out = b;
	return 0;
}

void bg_stop(struct bg *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->fs->lock);
	b->stop = 1;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->fs->lock);
	pthread_join(b->thread, NULL);
	pthread_cond_destroy(&b->cond);
	free(b);
}
