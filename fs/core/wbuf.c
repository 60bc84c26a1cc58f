/*
 * wbuf.c - the zone-aware write buffer between the logs and the device.
 *
 * Owns: one fixed memory budget for blocks on their way to open zones, the flusher threads
 * that write them (and drains, which write what they wait for themselves), and serving
 * reads of blocks not yet on the device.
 * May call: zdev.h, log.h. Called by segment.c (staging, reads) and checkpoint.c (flush).
 *
 * Two policies share the mechanism:
 *  - dynamic (default): the budget is cut into slots of one program unit (192 KiB); a log
 *    takes a free slot when it needs one, hands a full slot to the flusher and takes another,
 *    so intake goes on while earlier slots are written and busy logs get more of the memory.
 *  - static: one superpage buffer (768 KiB) per log, written only when full or flushed; the
 *    log waits while its buffer is being written (the ZMS-style baseline).
 * Order: each zone's slots are queued in the order they were filled. Several flushers write
 * at once (WBUF_FLUSHERS), each taking the oldest queued slot of a zone that has no write in
 * flight: writes to different zones proceed together, while every zone still receives its
 * writes one at a time, strictly at its write pointer. A flusher takes the zone's queued
 * slots that follow on as well, up to WBUF_RUN_BYTES, and writes them as one vectored write:
 * a zone is written at queue depth one, so each write's fixed cost (a command; on the
 * emulator a journal record too) would otherwise be paid per 192 KiB slot.
 */
#include "wbuf.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct wslot {
	struct wslot *next;  /* free list or flush queue */
	uint8_t *data;
	uint32_t zone;
	uint32_t start;      /* first block (within the zone) the slot holds */
	uint32_t nblocks;    /* staged */
	uint32_t written;    /* already on the device (a flushed partial slot) */
	int staging;         /* its log's append call is still copying: not to be written yet */
	int queued;          /* handed to the flushers */
	int inflight;        /* a flusher is writing it */
	uint64_t ticket;     /* order of queueing, for waits on what was queued before */
	int owner;           /* log index holding it as its open slot, -1 if none */
};

struct wbuf {
	struct zdev *dev;
	struct wbuf_opts o;
	uint32_t slot_blocks;
	uint32_t nslots;
	struct wslot *slots;
	struct wslot *free, *free_tail; /* FIFO: the slot released longest ago is reused first */
	struct wslot *qhead, *qtail;
	struct wslot *open[WBUF_MAX_LOGS];
	pthread_mutex_t lock;
	pthread_cond_t work;      /* flushers: a slot queued or its copy done, or stop */
	pthread_cond_t done;      /* appenders and drains: slots written and freed */
	pthread_t flusher[WBUF_FLUSHERS];
	int nflushers;
	pid_t flusher_pid;        /* process that started them: a daemon forks after mounting */
	uint64_t tickets;         /* slots queued so far */
	int stop;
	int error;                /* first write error (negative errno), sticky */
	uint32_t error_zone;
	uint64_t bytes_written;
	uint64_t waits;           /* times a writer had to wait for a slot */
};

static uint64_t zone_off(const struct wbuf *wb, uint32_t zone, uint32_t blk)
{
	return (uint64_t)zone * zdev_geometry(wb->dev)->zone_size +
	       (uint64_t)blk * WBUF_BLOCK;
}

/* Most bytes one device write takes: a megabyte, where a disk's sequential writes at queue
 * depth one are near their best (docs/benchmarks.md), and at most ZDEV_IOV_MAX slots. */
#define WBUF_RUN_BYTES (1u << 20)

/* Write the N slots of RUN, consecutive in one zone, as one device write. */
static int run_write(struct wbuf *wb, struct wslot *const *run, int n)
{
	struct iovec iov[ZDEV_IOV_MAX];
	uint64_t bytes = 0;
	int i, k = 0, ret;

	for (i = 0; i < n; i++) {
		uint32_t left = run[i]->nblocks - run[i]->written;

		if (!left)
			continue;
		iov[k].iov_base = run[i]->data + (size_t)run[i]->written * WBUF_BLOCK;
		iov[k++].iov_len = (size_t)left * WBUF_BLOCK;
		bytes += (uint64_t)left * WBUF_BLOCK;
	}
	if (!k)
		return 0;
	ret = zdev_writev(wb->dev, iov, k, zone_off(wb, run[0]->zone, run[0]->start +
								  run[0]->written));
	if (!ret) {
		for (i = 0; i < n; i++)
			run[i]->written = run[i]->nblocks;
		/* the flusher writes without the lock; stats read it with the lock held */
		__atomic_fetch_add(&wb->bytes_written, bytes, __ATOMIC_RELAXED);
	}
	return ret;
}

/* Fill RUN with S and the queued slots of its zone that continue it, in zone order, up to
 * WBUF_RUN_BYTES: how many. Called with the lock held; S's zone has no write in flight. */
static int run_gather(struct wbuf *wb, struct wslot *s, struct wslot **run)
{
	uint32_t end = s->start + s->nblocks, max = WBUF_RUN_BYTES / (wb->slot_blocks * WBUF_BLOCK);
	int n = 1;

	run[0] = s;
	if (max > ZDEV_IOV_MAX)
		max = ZDEV_IOV_MAX;
	if (!max || wb->o.serial) /* slots of a megabyte or more: one at a time */
		max = 1;
	for (struct wslot *t = s->next; t && (uint32_t)n < max; t = t->next) {
		if (t->zone != s->zone)
			continue;
		if (t->written || t->staging || t->start != end)
			break; /* not the zone's next write, or still being staged: stop at it */
		run[n++] = t;
		end = t->start + t->nblocks;
	}
	return n;
}

/* Released slots go to the tail of the free list and are taken from its head: the memory
 * reused next is the memory released longest ago, as a controller would cycle its buffer
 * slots (and as the emulator's timing model, which holds memory until its data is
 * programmed, needs for a fair count; a LIFO list reuses the slot whose program is newest). */
static void slot_release(struct wbuf *wb, struct wslot *s)
{
	s->nblocks = s->written = 0;
	s->queued = 0;
	s->owner = -1;
	s->next = NULL;
	if (wb->o.policy == WBUF_STATIC)
		return; /* each log owns its buffer: there is no free list */
	if (wb->free_tail)
		wb->free_tail->next = s;
	else
		wb->free = s;
	wb->free_tail = s;
}

/* A slot of S's zone is ahead of S in the queue and not yet written: in flight, or still
 * being staged. */
static int zone_busy_before(const struct wbuf *wb, const struct wslot *s)
{
	for (const struct wslot *t = wb->qhead; t != s; t = t->next)
		if (t->zone == s->zone && (t->inflight || t->staging))
			return 1;
	return 0;
}

/* The oldest queued slot that is not being staged and whose zone has nothing in flight or
 * being staged ahead of it, or NULL. Slots of one zone are queued in zone order, so this is
 * always the next write that zone expects. Only slots queued by ticket UPTO, of ZONE unless
 * ALL, are looked at. */
static struct wslot *next_writable_of(struct wbuf *wb, int all, uint32_t zone, uint64_t upto)
{
	struct wslot *s;

	for (s = wb->qhead; s && s->ticket <= upto; s = s->next) {
		if (s->inflight || s->staging || (!all && s->zone != zone))
			continue;
		if (!zone_busy_before(wb, s))
			return s;
	}
	return NULL;
}

static struct wslot *next_writable(struct wbuf *wb)
{
	return next_writable_of(wb, 1, 0, UINT64_MAX);
}

static void dequeue(struct wbuf *wb, struct wslot *s)
{
	struct wslot **pp = &wb->qhead, *prev = NULL;

	while (*pp != s) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = s->next;
	if (wb->qtail == s)
		wb->qtail = prev;
}

/* Write S and the queued slots of its zone that follow on as one device write, then free
 * them. Called with the lock held, S writable (next_writable); drops it around the write. */
static void write_run_locked(struct wbuf *wb, struct wslot *s)
{
	struct wslot *run[ZDEV_IOV_MAX];
	int ret, n = run_gather(wb, s, run), i;

	for (i = 0; i < n; i++)
		run[i]->inflight = 1;
	ret = wb->error;
	pthread_mutex_unlock(&wb->lock);
	if (wb->o.test_hook)
		wb->o.test_hook(wb->o.test_hook_arg, WBUF_HOOK_WRITE);
	if (!ret) /* after a write error nothing more is written: it is sticky */
		ret = run_write(wb, run, n);
	pthread_mutex_lock(&wb->lock);
	if (ret && !wb->error) {
		wb->error = ret;
		wb->error_zone = s->zone;
	}
	for (i = 0; i < n; i++) {
		dequeue(wb, run[i]);
		run[i]->inflight = 0;
		slot_release(wb, run[i]);
	}
	pthread_cond_broadcast(&wb->done);
}

/* Write queued slots, each zone's in order. The lock is dropped around the device write. */
static void *flusher_main(void *arg)
{
	struct wbuf *wb = arg;
	struct wslot *s;

	pthread_mutex_lock(&wb->lock);
	for (;;) {
		while (!(s = next_writable(wb)) && !(wb->stop && !wb->qhead))
			pthread_cond_wait(&wb->work, &wb->lock);
		if (!s)
			break;
		write_run_locked(wb, s);
		if (wb->stop && !wb->qhead) /* the others sleep on work: let them see it empty */
			pthread_cond_broadcast(&wb->work);
	}
	pthread_mutex_unlock(&wb->lock);
	return NULL;
}

/* Threads do not survive fork(), and the daemon forks once mounted: start the flushers in
 * the process that first needs them. Called with wb->lock held. */
static int flusher_ensure(struct wbuf *wb)
{
	if (wb->flusher_pid == getpid())
		return 0;
	wb->nflushers = 0;
	for (int i = 0; i < (wb->o.serial ? 1 : WBUF_FLUSHERS); i++) {
		if (pthread_create(&wb->flusher[i], NULL, flusher_main, wb))
			break;
		wb->nflushers++;
	}
	if (!wb->nflushers) {
		wb->error = -EAGAIN;
		return -EAGAIN;
	}
	wb->flusher_pid = getpid();
	return 0;
}

/* Queue S; with WAKE, wake one flusher for it (each flusher, once its write is done, looks
 * for the next writable slot itself, so one per slot is enough: a broadcast woke them all
 * for each slot, to find one write between them). */
static void enqueue(struct wbuf *wb, struct wslot *s, int wake)
{
	flusher_ensure(wb);
	s->queued = 1;
	s->inflight = 0;
	s->ticket = ++wb->tickets;
	s->next = NULL;
	if (wb->qtail)
		wb->qtail->next = s;
	else
		wb->qhead = s;
	wb->qtail = s;
	if (wake && !s->staging)
		pthread_cond_signal(&wb->work);
}

int wbuf_init(struct zdev *dev, const struct wbuf_opts *o, struct wbuf **out)
{
	struct wbuf *wb = calloc(1, sizeof(*wb));
	uint32_t i;

	if (!wb)
		return -ENOMEM;
	wb->dev = dev;
	wb->o = *o;
	if (o->policy == WBUF_STATIC) {
		wb->slot_blocks = (uint32_t)(o->superpage / WBUF_BLOCK);
		wb->nslots = o->nlogs && o->nlogs <= WBUF_MAX_LOGS ? o->nlogs : WBUF_MAX_LOGS;
	} else {
		wb->slot_blocks = (uint32_t)(o->slot_size / WBUF_BLOCK);
		wb->nslots = (uint32_t)(o->budget / o->slot_size);
	}
	if (!wb->slot_blocks || wb->nslots < 2) {
		free(wb);
		return -EINVAL;
	}
	wb->slots = calloc(wb->nslots, sizeof(*wb->slots));
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->work, NULL);
	pthread_cond_init(&wb->done, NULL);
	for (i = 0; wb->slots && i < wb->nslots; i++) {
		wb->slots[i].data = zdev_buf_alloc((size_t)wb->slot_blocks * WBUF_BLOCK);
		if (!wb->slots[i].data)
			break;
		slot_release(wb, &wb->slots[i]);
	}
	if (!wb->slots || i < wb->nslots) {
		wb->nslots = i;
		wbuf_destroy(wb);
		return -ENOMEM;
	}
	*out = wb;
	return 0;
}

/* Stop this process's flushers once everything queued is written. */
static void flushers_stop(struct wbuf *wb)
{
	if (wb->flusher_pid != getpid())
		return;
	pthread_mutex_lock(&wb->lock);
	wb->stop = 1;
	pthread_cond_broadcast(&wb->work);
	pthread_mutex_unlock(&wb->lock);
	for (int i = 0; i < wb->nflushers; i++)
		pthread_join(wb->flusher[i], NULL);
	pthread_mutex_lock(&wb->lock);
	wb->stop = 0;
	wb->nflushers = 0;
	wb->flusher_pid = 0;
	pthread_mutex_unlock(&wb->lock);
}

void wbuf_park(struct wbuf *wb)
{
	if (wb)
		flushers_stop(wb);
}

void wbuf_destroy(struct wbuf *wb)
{
	uint32_t i;

	if (!wb)
		return;
	flushers_stop(wb);
	for (i = 0; wb->slots && i < wb->nslots; i++)
		zdev_buf_free(wb->slots[i].data);
	free(wb->slots);
	pthread_mutex_destroy(&wb->lock);
	pthread_cond_destroy(&wb->work);
	pthread_cond_destroy(&wb->done);
	free(wb);
}

/* LOG's append call is done with its slots: those queued meanwhile (full, or by a drain) may
 * be written now. The slots a call fills go out after it, as one run where they follow on,
 * unless the call has to wait for a free slot. */
static void unstage(struct wbuf *wb, int log)
{
	int queued = 0;

	for (uint32_t i = 0; i < wb->nslots; i++) {
		struct wslot *s = &wb->slots[i];

		if (s->staging && s->owner == log) {
			s->staging = 0;
			queued |= s->queued;
		}
	}
	if (queued)
		pthread_cond_broadcast(&wb->work);
}

/* A slot for LOG: its open one if it continues at BLK of ZONE, else a free one. */
static struct wslot *slot_for(struct wbuf *wb, int log, uint32_t zone, uint32_t blk)
{
	struct wslot *s = wb->open[log];

	if (s && (s->zone != zone || s->start + s->nblocks != blk || s->nblocks == wb->slot_blocks)) {
		enqueue(wb, s, 1);
		wb->open[log] = s = NULL;
	}
	if (s)
		return s;
	/* Static policy: the log owns exactly one buffer and waits until it is written. */
	while (!wb->error && (wb->o.policy == WBUF_STATIC ? wb->slots[log].queued : !wb->free)) {
		unstage(wb, log); /* the slots this call filled are what frees one */
		wb->waits++;
		pthread_cond_wait(&wb->done, &wb->lock);
	}
	if (wb->error)
		return NULL;
	if (wb->o.policy == WBUF_STATIC) {
		s = &wb->slots[log];
	} else {
		s = wb->free;
		wb->free = s->next;
		if (!wb->free)
			wb->free_tail = NULL;
	}
	s->zone = zone;
	s->start = blk;
	s->nblocks = s->written = 0;
	s->owner = log;
	wb->open[log] = s;
	return s;
}

/* Copy K blocks into S after its staged ones, with the lock dropped: readers, the flushers
 * and other logs do not wait for the copy. Only S's log, under its own lock, appends to S;
 * until the blocks are counted in nblocks no reader knows their addresses, and while S is
 * staging no flusher writes it (a drain may queue it meanwhile). Called and returns with
 * the lock held. */
static void slot_copy_in(struct wbuf *wb, struct wslot *s, const uint8_t *src, uint32_t k)
{
	s->staging = 1;
	pthread_mutex_unlock(&wb->lock);
	if (wb->o.test_hook)
		wb->o.test_hook(wb->o.test_hook_arg, WBUF_HOOK_COPY);
	memcpy(s->data + (size_t)s->nblocks * WBUF_BLOCK, src, (size_t)k * WBUF_BLOCK);
	pthread_mutex_lock(&wb->lock);
	s->nblocks += k;
}

int wbuf_add_n(struct wbuf *wb, int log, uint32_t zone, uint32_t blk, const void *buf,
	       uint32_t n)
{
	const uint8_t *src = buf;
	struct wslot *s;
	int ret = 0;

	if (log < 0 || log >= WBUF_MAX_LOGS ||
	    (wb->o.policy == WBUF_STATIC && (uint32_t)log >= wb->nslots))
		return -EINVAL; /* a log the buffer was not made for */
	pthread_mutex_lock(&wb->lock);
	while (!ret && n) {
		uint32_t k;

		s = slot_for(wb, log, zone, blk);
		if (!s) {
			ret = wb->error ? wb->error : -EIO;
			break;
		}
		k = wb->slot_blocks - s->nblocks < n ? wb->slot_blocks - s->nblocks : n;
		slot_copy_in(wb, s, src, k);
		src += (size_t)k * WBUF_BLOCK;
		blk += k;
		n -= k;
		if (s->nblocks == wb->slot_blocks && !s->queued) { /* full: to the device next */
			enqueue(wb, s, 1);
			wb->open[log] = NULL;
		}
	}
	unstage(wb, log);
	pthread_mutex_unlock(&wb->lock);
	return ret;
}

int wbuf_add(struct wbuf *wb, int log, uint32_t zone, uint32_t blk, const void *buf)
{
	return wbuf_add_n(wb, log, zone, blk, buf, 1);
}

static int slot_holds(const struct wslot *s, uint32_t zone, uint32_t blk)
{
	return s->nblocks && s->zone == zone && blk >= s->start && blk < s->start + s->nblocks;
}

int wbuf_read(struct wbuf *wb, uint32_t zone, uint32_t blk, void *buf)
{
	uint32_t i;
	int found = 0;

	pthread_mutex_lock(&wb->lock);
	for (i = 0; i < wb->nslots && !found; i++) {
		struct wslot *s = &wb->slots[i];

		if ((s->queued || s->owner >= 0) && slot_holds(s, zone, blk)) {
			memcpy(buf, s->data + (size_t)(blk - s->start) * WBUF_BLOCK, WBUF_BLOCK);
			found = 1;
		}
	}
	pthread_mutex_unlock(&wb->lock);
	return found;
}

int wbuf_read_run(struct wbuf *wb, uint32_t zone, uint32_t blk, uint32_t n, void *buf,
		  uint8_t *got)
{
	uint32_t i, b, found = 0;

	pthread_mutex_lock(&wb->lock);
	for (i = 0; i < wb->nslots; i++) {
		struct wslot *s = &wb->slots[i];

		if (!(s->queued || s->owner >= 0) || !s->nblocks || s->zone != zone)
			continue;
		for (b = 0; b < n; b++) {
			if (got[b] || !slot_holds(s, zone, blk + b))
				continue;
			memcpy((uint8_t *)buf + (size_t)b * WBUF_BLOCK,
			       s->data + (size_t)(blk + b - s->start) * WBUF_BLOCK, WBUF_BLOCK);
			got[b] = 1;
			found++;
		}
	}
	pthread_mutex_unlock(&wb->lock);
	return (int)found;
}

/* Whether a slot of ZONE (or any, with ALL) queued by ticket UPTO is still unwritten. */
static int pending(const struct wbuf *wb, int all, uint32_t zone, uint64_t upto)
{
	for (const struct wslot *s = wb->qhead; s; s = s->next)
		if (s->ticket <= upto && (all || s->zone == zone))
			return 1;
	return 0;
}

/* Queue every open slot (of ZONE, or all when ALL) and wait until what was queued by then is
 * written: writers staging more meanwhile do not hold the wait up. The drainer writes what
 * it can itself rather than sleep while flushers do it, and wakes one flusher for each slot
 * after the first: an fsync's drain is a block or two in the data log's zone and one in the
 * node log's, so the drainer writes the one while a flusher writes the other (on a zoned
 * device the two are truly side by side). A broadcast per slot woke all four flushers twice
 * and the drainer was woken back. In serial mode only the one flusher writes, as that mode
 * promises. */
static int wbuf_drain(struct wbuf *wb, int all, uint32_t zone)
{
	struct wslot *s;
	uint64_t upto;
	int log, ret, queued = 0;

	pthread_mutex_lock(&wb->lock);
	for (log = 0; log < WBUF_MAX_LOGS; log++) {
		s = wb->open[log];
		if (s && (all || s->zone == zone)) {
			enqueue(wb, s, wb->o.serial || queued++);
			wb->open[log] = NULL;
		}
	}
	upto = wb->tickets;
	while (!wb->error && pending(wb, all, zone, upto)) {
		s = wb->o.serial ? NULL : next_writable_of(wb, all, zone, upto);
		if (s)
			write_run_locked(wb, s);
		else
			pthread_cond_wait(&wb->done, &wb->lock);
	}
	/* A slot queued behind one this drain wrote found its zone busy, and the flusher woken
	 * for it went back to sleep: a flusher that finishes a write looks for the next one
	 * itself, a drain does not, so it hands the queue back. */
	if (next_writable(wb))
		pthread_cond_signal(&wb->work);
	ret = wb->error;
	pthread_mutex_unlock(&wb->lock);
	return ret;
}

int wbuf_flush_zone(struct wbuf *wb, uint32_t zone) { return wbuf_drain(wb, 0, zone); }
int wbuf_flush_all(struct wbuf *wb) { return wbuf_drain(wb, 1, 0); }

int wbuf_error(struct wbuf *wb, uint32_t *zone)
{
	int ret;

	pthread_mutex_lock(&wb->lock);
	ret = wb->error;
	if (zone)
		*zone = wb->error_zone;
	pthread_mutex_unlock(&wb->lock);
	return ret;
}

void wbuf_stats(struct wbuf *wb, struct wbuf_stats *st)
{
	pthread_mutex_lock(&wb->lock);
	st->bytes_written = __atomic_load_n(&wb->bytes_written, __ATOMIC_RELAXED);
	st->waits = wb->waits;
	st->nslots = wb->nslots;
	st->slot_bytes = (uint64_t)wb->slot_blocks * WBUF_BLOCK;
	pthread_mutex_unlock(&wb->lock);
}
