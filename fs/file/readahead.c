/*
 * readahead.c - the file layer's read-ahead: sequential reads reach the device as large
 * requests.
 *
 * Owns: a small table of read-ahead windows, one per file being read in sequence. The kernel
 * asks a FUSE filesystem for at most 128 KiB at a time, and a zoned device (or a file opened
 * O_DIRECT) does far better with 1 MiB reads than with eight of 128 KiB: when a read
 * continues where the previous read of the file ended, the blocks past it are read ahead,
 * the window doubling up to RA_MAX blocks, and kept here, decrypted, for the reads that
 * follow. A window keeps two extensions: when the reader reaches the newer one, the next is
 * read into the older one's place. The extension is read after the request that asked for
 * it has been answered (ra_ahead, read by data.c), so the device reads the next megabyte
 * while the kernel is served from this one; before, every ninth request waited for a whole
 * extension and the device sat idle while the other eight were served.
 * A window is valid only for the data generation it was read at (data.c bumps a file's
 * generation whenever its mapping or contents change, under the file's lock held
 * exclusively; readers hold it shared), so no write can be hidden by a window.
 * The kernel sends a file's read-ahead requests several at once, each on its own worker: a
 * request for blocks that another worker is reading ahead right now waits for that read
 * (RA_WAIT_MS at most) rather than reading them again, which had made a buffered sequential
 * read fetch 1.8 times the file from the device. The worker it waits for takes, after its
 * reply, the file's lock shared (a read takes no cp_lock) and nothing else the waiter holds:
 * the wait cannot close a cycle because a file's lock lets a reader in while other readers
 * hold it even with a writer queued (ilock.c makes it reader-first for this). The bound is
 * for a reader that never comes back (its device read failing slowly).
 * May call: lock.h, zdev.h (aligned buffers). Called by data.c, under the file's lock, and
 * (ra_cancel, for an extension never read) by fuse_files.c, without it.
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

/* One extension kept: blocks [start, start + n) in buf (RA_MAX blocks). */
struct ra_seg {
	uint64_t start;
	uint32_t n;
	uint8_t *buf;
};

struct ra_win {
	uint32_t ino;
	uint64_t gen;         /* the file's data generation its segments were read at */
	uint64_t hi;          /* the end of the highest blocks asked for in sequence */
	int stream;           /* the last request continued a stream */
	uint32_t epoch;       /* bumped when a stream starts over: older extensions are not kept */
	uint32_t size;        /* the window the next extension reads */
	struct ra_seg seg[2]; /* the extension being read from, and the one after it */
	uint64_t pend_start;  /* an extension being read now, into seg[pend_seg]: */
	uint32_t pend_n;      /* [pend_start, pend_start + pend_n); 0: none */
	uint64_t pend_gen;
	int pend_seg;
	uint64_t used;        /* for replacing the least recently used */
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
		for (int j = 0; j < 2; j++)
			zdev_buf_free(t->w[i].seg[j].buf);
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
	lru->seg[0].n = lru->seg[1].n = 0;
	lru->size = RA_MIN;
	lru->hi = UINT64_MAX;
	lru->stream = 0;
	return lru;
}

/* Whether [FIRST, FIRST+N) of generation GEN is being read ahead by another request. */
static int ra_pending_covers(const struct ra_win *w, uint64_t gen, uint64_t first, uint32_t n)
{
	return w->pend_n && w->pend_gen == gen && first >= w->pend_start &&
	       first + n <= w->pend_start + w->pend_n;
}

/* The segment holding all of [FIRST, FIRST+N), or NULL (the window's generation is checked
 * by the caller). */
static struct ra_seg *ra_covering(struct ra_win *w, uint64_t first, uint32_t n)
{
	for (int i = 0; i < 2; i++) {
		struct ra_seg *s = &w->seg[i];

		if (s->n && first >= s->start && first + n <= s->start + s->n)
			return s;
	}
	return NULL;
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

/* Hand the caller the extension from START on, read into the segment that does not hold
 * NEWEST (the one being read from, or NULL when both are empty): that segment is emptied
 * now, so no request reads it while it is filled, and nobody else writes it while the
 * extension is pending. */
static void ra_ahead_begin(struct ra_win *w, uint64_t gen, uint64_t start,
			   const struct ra_seg *newest, struct ra_ahead *a)
{
	int k = newest == &w->seg[0];
	struct ra_seg *s = &w->seg[k];

	if (!s->buf && !(s->buf = zdev_buf_alloc((size_t)RA_MAX * ZLFS_BLOCK_SIZE)))
		return;
	s->n = 0;
	a->first = w->pend_start = start;
	a->n = w->pend_n = w->size;
	a->buf = s->buf;
	a->epoch = w->epoch;
	w->pend_gen = gen;
	w->pend_seg = k;
	w->size = w->size * 2 > RA_MAX ? RA_MAX : w->size * 2;
}

/* The newest of the window's segments that hold anything, or NULL. */
static const struct ra_seg *ra_newest(const struct ra_win *w)
{
	const struct ra_seg *a = &w->seg[0], *b = &w->seg[1];

	if (!a->n || !b->n)
		return a->n ? a : b->n ? b : NULL;
	return a->start > b->start ? a : b;
}

/* Whether a request at FIRST continues W's stream: it starts where the highest blocks asked
 * so far end, or, once a stream is under way, near there (the kernel sends a file's
 * read-ahead as several requests at once, which reach us in any order). Random reads start
 * no stream: two of them rarely follow each other exactly. */
static int ra_in_stream(const struct ra_win *w, uint64_t first)
{
	uint64_t d = first > w->hi ? first - w->hi : w->hi - first;

	return w->hi != UINT64_MAX && (!d || (w->stream && d <= 2 * RA_MAX));
}

/* Start the next extension if the stream has reached the newest one kept (or none is):
 * it begins past everything asked so far, so it never reads what a request in flight reads
 * itself, and it is read while the newest is read from, so the device is not idle between
 * them. */
static void ra_ahead_maybe(struct ra_win *w, uint64_t gen, struct ra_ahead *a)
{
	const struct ra_seg *newest = ra_newest(w);
	uint64_t start = w->hi;

	if (w->pend_n || (newest && w->hi <= newest->start))
		return;
	if (newest && newest->start + newest->n > start)
		start = newest->start + newest->n;
	ra_ahead_begin(w, gen, start, newest, a);
}

uint32_t ra_lookup(struct zlfs_fs *fs, uint32_t ino, uint64_t gen, uint64_t first, uint32_t n,
		   uint8_t *buf, struct ra_ahead *a)
{
	struct ra_table *t = fs->ra;
	struct ra_seg *s;
	struct ra_win *w;
	uint32_t got = 0;
	int stream;

	memset(a, 0, sizeof(*a));
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
	if (w->gen != gen) { /* what the window holds is of an older generation */
		w->gen = gen;
		w->seg[0].n = w->seg[1].n = 0;
	}
	if ((s = ra_covering(w, first, n))) {
		memcpy(buf, s->buf + (size_t)(first - s->start) * ZLFS_BLOCK_SIZE,
		       (size_t)n * ZLFS_BLOCK_SIZE);
		got = n;
	}
	stream = got || ra_in_stream(w, first);
	w->stream = stream;
	if (!stream) { /* a jump: start a stream here, at the smallest extension; what the
			* old stream read ahead, kept or in flight, would only hold this one off */
		w->size = RA_MIN;
		w->hi = first + n;
		w->seg[0].n = w->seg[1].n = 0;
		w->epoch++;
	} else if (first + n > w->hi) {
		w->hi = first + n;
	}
	/* a large request (an O_DIRECT read of 1 MiB or more) is already the size a device
	 * wants, and such reads arrive several at once and out of order */
	if (stream && n < RA_MAX / 2)
		ra_ahead_maybe(w, gen, a);
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

void ra_keep(struct zlfs_fs *fs, uint32_t ino, uint64_t gen, const struct ra_ahead *a,
	     uint32_t n)
{
	struct ra_table *t = fs->ra;
	struct ra_win *w;

	zlock_lock(&t->lock);
	w = ra_find(t, ino, 0); /* the extension's own: not taken over while it is read */
	if (w && w->pend_n && w->pend_start == a->first && w->epoch == a->epoch) {
		struct ra_seg *s = &w->seg[w->pend_seg];

		if (w->gen != gen) { /* the file changed after the extension was asked for */
			w->gen = gen;
			w->seg[!w->pend_seg].n = 0;
		}
		s->start = a->first;
		s->n = n; /* data_read_ahead reads at most a->n */
		w->used = ++t->tick;
	}
	ra_pending_end(t, ino, a->first);
	zlock_unlock(&t->lock);
}

void ra_cancel(struct zlfs_fs *fs, uint32_t ino, struct ra_ahead *a)
{
	struct ra_table *t = fs->ra;

	if (!t || !a->n)
		return;
	zlock_lock(&t->lock);
	ra_pending_end(t, ino, a->first);
	zlock_unlock(&t->lock);
	a->n = 0; /* its buffer may be handed to the next extension now */
}
