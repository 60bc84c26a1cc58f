/*
 * readahead.c - the file layer's read-ahead: sequential reads reach the device as large
 * requests.
 *
 * Owns: a small table of read-ahead windows, one per file being read in sequence. The kernel
 * asks a FUSE filesystem for at most 128 KiB at a time, and a zoned device (or a file opened
 * O_DIRECT) does far better with 1 MiB reads than with eight of 128 KiB: when a read
 * continues where the previous read of the file ended, the read is extended past what was
 * asked, the window doubling up to RA_MAX blocks, and the blocks beyond the request are kept
 * here, decrypted, for the reads that follow.
 * A window is valid only for the data generation it was read at (data.c bumps a file's
 * generation whenever its mapping or contents change, under the file's lock held
 * exclusively; readers hold it shared), so no write can be hidden by a window.
 * The kernel sends a file's read-ahead requests several at once, each on its own worker: a
 * request for blocks that another worker is reading ahead right now waits for that read
 * (RA_WAIT_MS at most) rather than reading them again, which had made a buffered sequential
 * read fetch 1.8 times the file from the device. The reader it waits for holds the same locks
 * shared and needs no lock the waiter holds, so the wait cannot close a cycle; the bound is
 * for a reader that never comes back (its device read failing slowly).
 * May call: lock.h, zdev.h (aligned buffers). Called by data.c, under the file's lock.
 */
#include "files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RA_SLOTS 8        /* files read ahead at once */
#define RA_MIN 32u        /* blocks of the first extension (128 KiB) */
#define RA_MAX 256u       /* blocks at most (1 MiB) */
#define RA_WAIT_MS 200    /* the longest a request waits for another's read-ahead */

struct ra_win {
	uint32_t ino;
	uint64_t gen;         /* the file's data generation when read */
	uint64_t next;        /* the block a sequential read would start at */
	uint64_t start;       /* blocks kept: [start, start + n) */
	uint32_t n, size;     /* kept, and the window the next extension reads */
	uint64_t pend_start;  /* an extension being read now: [pend_start, pend_start + pend_n) */
	uint32_t pend_n;      /* 0: none */
	uint64_t pend_gen;
	uint64_t used;        /* for replacing the least recently used */
	uint8_t *buf;         /* RA_MAX blocks */
};

struct ra_table {
	struct zlock lock;
	pthread_cond_t done;  /* an extension was kept or given up */
	struct ra_win w[RA_SLOTS];
	uint64_t tick;
};

int ra_init(struct zlfs_fs *fs)
{
	struct ra_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	zlock_init(&t->lock, LR_RA, "readahead_lock");
	pthread_cond_init(&t->done, NULL);
	fs->ra = t;
	return 0;
}

void ra_destroy(struct zlfs_fs *fs)
{
	struct ra_table *t = fs->ra;

	if (!t)
		return;
	for (int i = 0; i < RA_SLOTS; i++)
		zdev_buf_free(t->w[i].buf);
	pthread_cond_destroy(&t->done);
	zlock_destroy(&t->lock);
	free(t);
	fs->ra = NULL;
}

/* The window of INO, or (MAKE) the least recently used one taken over. A window being read
 * into stays its file's until its reader ends the extension; with every window so, none. */
static struct ra_win *ra_find(struct ra_table *t, uint32_t ino, int make)
{
	struct ra_win *lru = NULL;

	for (int i = 0; i < RA_SLOTS; i++) {
		struct ra_win *w = &t->w[i];

		if (w->ino == ino && w->used)
			return w;
		if (!w->pend_n && (!lru || w->used < lru->used))
			lru = w;
	}
	if (!make || !lru)
		return NULL;
	lru->ino = ino;
	lru->n = 0;
	lru->size = RA_MIN;
	lru->next = UINT64_MAX;
	return lru;
}

/* Whether [FIRST, FIRST+N) of generation GEN is being read ahead by another request. */
static int ra_pending_covers(const struct ra_win *w, uint64_t gen, uint64_t first, uint32_t n)
{
	return w->pend_n && w->pend_gen == gen && first >= w->pend_start &&
	       first + n <= w->pend_start + w->pend_n;
}

static int ra_covers(const struct ra_win *w, uint64_t gen, uint64_t first, uint32_t n)
{
	return w->gen == gen && w->n && first >= w->start && first + n <= w->start + w->n;
}

/* Wait, the table's lock held, for the extension that covers the request; 0 once it is kept
 * or given up, -ETIMEDOUT past RA_WAIT_MS. The window may have been taken over meanwhile:
 * the caller looks it up again. */
static int ra_wait(struct ra_table *t, uint32_t ino, uint64_t gen, uint64_t first, uint32_t n)
{
	struct timespec until;
	struct ra_win *w;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += RA_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	while ((w = ra_find(t, ino, 0)) && ra_pending_covers(w, gen, first, n))
		if (zlock_timedwait(&t->done, &t->lock, &until))
			return -ETIMEDOUT;
	return 0;
}

uint32_t ra_lookup(struct zlfs_fs *fs, uint32_t ino, uint64_t gen, uint64_t first, uint32_t n,
		   uint8_t *buf, uint32_t *extra)
{
	struct ra_table *t = fs->ra;
	struct ra_win *w;
	uint32_t got = 0;

	*extra = 0;
	if (!t)
		return 0;
	zlock_lock(&t->lock);
	w = ra_find(t, ino, 1);
	if (w && ra_pending_covers(w, gen, first, n) && !ra_wait(t, ino, gen, first, n))
		w = ra_find(t, ino, 1);
	if (!w) {
		zlock_unlock(&t->lock);
		return 0;
	}
	w->used = ++t->tick;
	if (ra_covers(w, gen, first, n)) {
		memcpy(buf, w->buf + (size_t)(first - w->start) * ZLFS_BLOCK_SIZE,
		       (size_t)n * ZLFS_BLOCK_SIZE);
		got = n;
	} else if (first == w->next && n < RA_MAX / 2) {
		/* in sequence: read past the request (a large request, an O_DIRECT read of 1 MiB
		 * or more, is already the size a device wants, and such reads arrive several at
		 * once and out of order). One extension in flight per window: a request past
		 * it reads what it asked for. */
		if (!w->pend_n) {
			*extra = w->size;
			w->pend_start = first + n;
			w->pend_n = w->size;
			w->pend_gen = gen;
			w->size = w->size * 2 > RA_MAX ? RA_MAX : w->size * 2;
		}
	} else {
		w->size = RA_MIN;
	}
	w->next = first + n;
	if (w->gen != gen) {
		w->gen = gen;
		w->n = 0;
	}
	zlock_unlock(&t->lock);
	return got;
}

/* The extension at START of INO's window is over (kept or not): wake who waits for it. */
static void ra_pending_end(struct ra_table *t, uint32_t ino, uint64_t start)
{
	struct ra_win *w = ra_find(t, ino, 0);

	if (w && w->pend_n && w->pend_start == start) {
		w->pend_n = 0;
		pthread_cond_broadcast(&t->done);
	}
}

void ra_keep(struct zlfs_fs *fs, uint32_t ino, uint64_t gen, uint64_t first, uint32_t n,
	     const uint8_t *buf)
{
	struct ra_table *t = fs->ra;
	struct ra_win *w;

	if (!t)
		return;
	n = n > RA_MAX ? RA_MAX : n;
	zlock_lock(&t->lock);
	w = ra_find(t, ino, 0); /* the extension's own: not taken over while it is read */
	if (w && !w->buf)
		w->buf = zdev_buf_alloc((size_t)RA_MAX * ZLFS_BLOCK_SIZE);
	if (w && w->buf) {
		memcpy(w->buf, buf, (size_t)n * ZLFS_BLOCK_SIZE);
		w->gen = gen;
		w->start = first;
		w->n = n;
		w->used = ++t->tick;
	}
	ra_pending_end(t, ino, first);
	zlock_unlock(&t->lock);
}

void ra_cancel(struct zlfs_fs *fs, uint32_t ino, uint64_t first)
{
	struct ra_table *t = fs->ra;

	if (!t)
		return;
	zlock_lock(&t->lock);
	ra_pending_end(t, ino, first);
	zlock_unlock(&t->lock);
}
