/*
 * background.c - the daemon's background worker: garbage collection by phase.
 *
 * Owns: running collection in the background and standing aside for users. Phases and how
 * much a pass collects are gc_policy.c's (gc_phase_update; gc_phase_work, what a phase held
 * past its exit does; gc_bg_more): no-GC above the high watermark; normal below it - one
 * zone per pass, only after the filesystem has been idle for idle_ms; boosted below the
 * paced target - up to the target, even while users are active; foreground - the same,
 * greedy while free zones are at the foreground level. In the boosted and foreground phases
 * a step moves what pacing asks (gc_step_budget: what users wrote meanwhile costs), and the
 * pass stands aside when nothing is owed, while users read, and for bulk writes while the
 * free zones allow it.
 * A step (STEP_BLOCKS in the normal phase) holds gc_lock and cp_lock shared, and each
 * file's lock only while one of its blocks is re-pointed, so users are not held off (see
 * gc.c). Emptied zones become free with the checkpoint that follows a pass.
 * May call: files.h (files_sync), core.h (gc), lock.h, log.h. Part of the FUSE layer.
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
	struct zlock lock;    /* the sleep and the stop flag */
	pthread_cond_t cond;
	int stop;
	uint64_t prefree_cp_ns; /* the last checkpoint written only to free emptied zones */
};

/* A checkpoint for emptied zones at most this often: deletes in a boosted phase would
 * otherwise ask for one every nap. */
#define PREFREE_CP_MS 200

static int users_waiting(struct zlfs_fs *fs)
{
	return __atomic_load_n(&fs->users_active, __ATOMIC_RELAXED) > 0;
}

/* How long to sleep before looking again, by phase. */
static unsigned nap_ms(enum gc_phase p)
{
	return p == GC_NONE ? 1000 : p == GC_NORMAL ? 200 : 20;
}

static int bg_stopping(struct bg *b)
{
	int stop;

	zlock_lock(&b->lock);
	stop = b->stop;
	zlock_unlock(&b->lock);
	return stop;
}

/* Below the target with zones that only wait for a checkpoint to be free. */
static int prefree_would_do(const struct bg *b, enum gc_phase phase, uint64_t now)
{
	return phase >= GC_BOOSTED && seg_prefree_zones(b->fs) &&
	       now - b->prefree_cp_ns >= PREFREE_CP_MS * 1000000ULL;
}

/* One pass, with gc_lock held. */
static void bg_pass(struct bg *b, enum gc_phase phase)
{
	struct zlfs_fs *fs = b->fs;
	uint64_t zones0 = ATOMIC_GET(&fs->gc_zones), t0;
	int ret = 0;

	ATOMIC_ADD(&fs->gc.wakes, 1);
	while (!bg_stopping(b) && !ATOMIC_GET(&fs->readonly) &&
	       gc_bg_more(fs, phase, (unsigned)(ATOMIC_GET(&fs->gc_zones) - zones0))) {
		uint64_t s0 = mono_ns(), d;
		uint32_t budget;

		gc_pace_owe(fs, phase);
		budget = phase == GC_NORMAL
				 ? STEP_BLOCKS
				 : gc_step_budget(fs, users_waiting(fs), gc_users_io(fs));
		if (!budget)
			break; /* nothing owed: the users' turn */
		ret = gc_step(fs, gc_urgent(fs) ? GC_PICK_FOREGROUND : GC_PICK_BACKGROUND, budget);
		if (ret > 0)
			gc_pace_moved(fs, (uint32_t)ret);
		d = mono_ns() - s0; /* busy and overlap counted per step: overlap <= busy */
		ATOMIC_ADD(&fs->gc.busy_ns, d);
		if (users_waiting(fs))
			ATOMIC_ADD(&fs->gc.overlap_ns, d);
		if (ret < 0)
			break;
		if (phase == GC_NORMAL && users_waiting(fs))
			break; /* normal GC is for idle time only */
	}
	t0 = mono_ns();
	/* The emptied zones become free with a checkpoint; so do zones deletes emptied, which
	 * may be all a boosted phase needs (with cp_interval=0 nothing else would write one),
	 * and all a victim that cannot be finished yet waits for. */
	if (!ATOMIC_GET(&fs->readonly) &&
	    (ATOMIC_GET(&fs->gc_zones) > zones0 || prefree_would_do(b, phase, t0) ||
	     (ret == -ENOSPC && seg_prefree_zones(fs)))) {
		b->prefree_cp_ns = t0;
		files_sync(fs);
	}
	ATOMIC_ADD(&fs->gc.busy_ns, mono_ns() - t0);
	/* -ENOSPC: no victim can be finished with the zones free now (gc_can_finish says why at
	 * debug level); the next checkpoint or a delete changes that, and a write that finds no
	 * room reports the whole state. */
	if (ret == -ENOSPC)
		zlog_debug("background GC stopped this pass: no victim it can finish yet");
	else if (ret < 0 && ret != -ENOENT)
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

	for (;;) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)nap_ms(p) * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		zlock_lock(&b->lock);
		if (!b->stop)
			zlock_timedwait(&b->cond, &b->lock, &ts);
		zlock_unlock(&b->lock);
		if (bg_stopping(b))
			break;
		if (ATOMIC_GET(&fs->readonly))
			continue;
		gc_pace_sample(fs);
		p = gc_phase_work(fs, gc_phase_update(fs));
		zlock_lock(&fs->gc_lock);
		gc_pace_owe(fs, p);
		if (p == GC_BOOSTED || p == GC_FOREGROUND || (p == GC_NORMAL && idle_enough(fs)))
			bg_pass(b, p);
		zlock_unlock(&fs->gc_lock);
	}
	return NULL;
}

int bg_start(struct zlfs_fs *fs, struct bg **out)
{
	struct bg *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->fs = fs;
	zlock_init(&b->lock, LR_SLEEP, "bg_sleep");
	pthread_cond_init(&b->cond, NULL);
	if (pthread_create(&b->thread, NULL, bg_main, b)) {
		pthread_cond_destroy(&b->cond);
		zlock_destroy(&b->lock);
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
	zlock_lock(&b->lock);
	b->stop = 1;
	pthread_cond_signal(&b->cond);
	zlock_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	pthread_cond_destroy(&b->cond);
	zlock_destroy(&b->lock);
	free(b);
}
