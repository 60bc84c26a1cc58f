/*
 * verify_ahead.c - the check's node reads, done ahead by helper threads.
 *
 * Owns: a list of runs (consecutive blocks of one zone, at most AHEAD_RUN_MAX) that the check
 * will visit in that order, AHEAD_THREADS helper threads that read them in that order into a
 * ring of AHEAD_BUFS buffers, several reads in flight, and the hand-over: the check takes run
 * I once it is read (the nodes other than inodes go to the node cache, node_keep_run), checks
 * its inodes from the buffer and gives it back, while the helpers read the runs after. A
 * filesystem's nodes lie in a few zones in the order they were written, so the check of a
 * large tree reads its nodes in large sequential reads, the device busy while the check works
 * (docs/fsck.md, "Speed").
 * The check only reads, and the blocks of its runs are the current copies of nodes as the
 * NAT says when the run is planned; a node found changed when kept is simply not kept.
 * May call: verify_int.h, core.h (seg_read_run, node_keep_run), zdev.h, lock.h.
 * The ring's lock ranks with the background threads' sleep locks (LR_SLEEP): nothing else is
 * held while it is taken, by the check or the helper.
 */
#include "verify_int.h"

#include <errno.h>
#include <stdlib.h>

/* Reads in flight: one 1 MiB read at a time leaves a device idle between them (200,000 files
 * on this machine's virtio disk, medians of 7 interleaved runs: 1.17 s with 2 helpers, 0.92 s
 * with 4, 0.82 s with 6, 0.81 s with 8); twice as many buffers, so that the helpers read on
 * while the check works through the runs already read. */
#define AHEAD_THREADS 6
#define AHEAD_BUFS (2 * AHEAD_THREADS)
#define AHEAD_HINT 8

struct chk_ahead {
	struct zlfs_fs *fs;
	struct zlock lock;
	pthread_cond_t cond;
	pthread_t thread[AHEAD_THREADS];
	int nthreads;
	const struct chk_run *runs;
	uint32_t nruns;
	uint32_t claimed;    /* runs a helper has taken to read */
	uint32_t given_back; /* runs whose buffer the check gave back */
	uint32_t hinted;     /* runs the device was told of */
	int stop;
	uint32_t in[AHEAD_BUFS]; /* 1 + the run read into each buffer, 0: none yet */
	int ret[AHEAD_BUFS];
	uint8_t *buf[AHEAD_BUFS];
};

/* The device may read the runs up to AHEAD_HINT past I meanwhile, several at once where it
 * reads through a cache (zdev_prefetch): read one after the other, a buffered image's page
 * cache fills at half the rate. Runs [*FROM, *TO) are to be told, taken with the lock held. */
static void hint_range(struct chk_ahead *a, uint32_t i, uint32_t *from, uint32_t *to)
{
	*from = a->hinted;
	while (a->hinted < a->nruns && a->hinted <= i + AHEAD_HINT)
		a->hinted++;
	*to = a->hinted;
}

static void hint(struct chk_ahead *a, uint32_t from, uint32_t to)
{
	for (; from < to; from++)
		zdev_prefetch(a->fs->dev, (uint64_t)a->runs[from].addr * ZLFS_BLOCK_SIZE,
			      (uint64_t)a->runs[from].n * ZLFS_BLOCK_SIZE);
}

static void *ahead_main(void *arg)
{
	struct chk_ahead *a = arg;

	zlock_lock(&a->lock);
	while (!a->stop && a->claimed < a->nruns) {
		uint32_t i = a->claimed, slot = i % AHEAD_BUFS, from, to;
		int ret;

		if (i - a->given_back >= AHEAD_BUFS) { /* every buffer is full or in use */
			zlock_wait(&a->cond, &a->lock);
			continue;
		}
		a->claimed++;
		hint_range(a, i, &from, &to);
		zlock_unlock(&a->lock);
		hint(a, from, to);
		ret = a->runs[i].n ? seg_read_run(a->fs, a->runs[i].addr, a->runs[i].n,
						   a->buf[slot]) : 0;
		zlock_lock(&a->lock);
		a->ret[slot] = ret;
		a->in[slot] = i + 1;
		pthread_cond_broadcast(&a->cond);
	}
	zlock_unlock(&a->lock);
	return NULL;
}

static void ahead_free(struct chk_ahead *a)
{
	for (int i = 0; i < AHEAD_BUFS; i++)
		zdev_buf_free(a->buf[i]);
	free(a);
}

int chk_ahead_start(struct zlfs_fs *fs, const struct chk_run *runs, uint32_t nruns,
		    struct chk_ahead **out)
{
	struct chk_ahead *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->fs = fs;
	a->runs = runs;
	a->nruns = nruns;
	for (int i = 0; i < AHEAD_BUFS; i++)
		if (!(a->buf[i] = zdev_buf_alloc((size_t)AHEAD_RUN_MAX * ZLFS_BLOCK_SIZE))) {
			ahead_free(a);
			return -ENOMEM;
		}
	zlock_init(&a->lock, LR_SLEEP, "chk_ahead");
	pthread_cond_init(&a->cond, NULL);
	while (a->nthreads < AHEAD_THREADS &&
	       !pthread_create(&a->thread[a->nthreads], NULL, ahead_main, a))
		a->nthreads++;
	if (!a->nthreads) {
		pthread_cond_destroy(&a->cond);
		zlock_destroy(&a->lock);
		ahead_free(a);
		return -EAGAIN;
	}
	*out = a;
	return 0;
}

int chk_ahead_take(struct chk_ahead *a, uint32_t i, const uint8_t **buf)
{
	uint32_t slot = i % AHEAD_BUFS;
	int ret;

	zlock_lock(&a->lock);
	while (a->in[slot] != i + 1)
		zlock_wait(&a->cond, &a->lock);
	ret = a->ret[slot];
	zlock_unlock(&a->lock);
	*buf = ret ? NULL : a->buf[slot];
	if (!ret) /* a run that could not be read: its nodes are read one by one */
		node_keep_run(a->fs, a->runs[i].addr, a->runs[i].n, a->buf[slot], 0);
	return ret;
}

void chk_ahead_give_back(struct chk_ahead *a, uint32_t i)
{
	zlock_lock(&a->lock);
	a->given_back = i + 1;
	pthread_cond_broadcast(&a->cond);
	zlock_unlock(&a->lock);
}

void chk_ahead_stop(struct chk_ahead *a)
{
	if (!a)
		return;
	zlock_lock(&a->lock);
	a->stop = 1;
	pthread_cond_broadcast(&a->cond);
	zlock_unlock(&a->lock);
	for (int i = 0; i < a->nthreads; i++)
		pthread_join(a->thread[i], NULL);
	pthread_cond_destroy(&a->cond);
	zlock_destroy(&a->lock);
	ahead_free(a);
}
