/*
 * wbuf.h - the zone-aware write buffer (wbuf.c): blocks staged for open zones in slots drawn
 * from one memory budget, written in zone order by a flusher thread.
 * Part of the node/log layer; below it only the device.
 */
#ifndef ZLFS_WBUF_H
#define ZLFS_WBUF_H

#include "zdev.h"

#include <pthread.h>
#include <stdint.h>

#define WBUF_BLOCK 4096u
#define WBUF_MAX_LOGS 12 /* logs that stage blocks: the ten main-area logs, with room to spare */
#define WBUF_FLUSHERS 4 /* device writes in flight at once, to different zones */

enum wbuf_policy {
	WBUF_DYNAMIC = 0, /* slots of one program unit, taken by whichever log writes */
	WBUF_STATIC,      /* one superpage buffer per log, written only when full or flushed */
};

struct wbuf_opts {
	enum wbuf_policy policy;
	uint64_t budget;    /* dynamic: total bytes of slots (default 4 MiB) */
	uint64_t slot_size; /* dynamic: bytes per slot (default 192 KiB, one program unit) */
	uint64_t superpage; /* static: bytes per log buffer (default 768 KiB) */
	uint32_t nlogs;     /* static: logs 0 .. nlogs - 1 stage blocks, one buffer each
			     * (0: WBUF_MAX_LOGS) */
	int serial;         /* one flusher writing one slot per device write: the device sees
			     * the same writes in the same sizes whatever the threads' timing
			     * (mkfs.zlfs --timestamp: an emulated image's journal and flushes
			     * then repeat exactly) */
	/* Tests: called with the buffer's lock dropped before each copy into a slot
	 * (WBUF_HOOK_COPY, by the appender) and before each device write (WBUF_HOOK_WRITE, by
	 * a flusher), so a test can hold either in the middle. */
	void (*test_hook)(void *arg, int where);
	void *test_hook_arg;
};

#define WBUF_HOOK_COPY 0
#define WBUF_HOOK_WRITE 1

#define WBUF_DEFAULT_BUDGET (4u << 20)
#define WBUF_DEFAULT_SLOT (192u << 10)
#define WBUF_DEFAULT_SUPERPAGE (768u << 10)

struct wbuf_stats {
	uint64_t bytes_written;
	uint64_t waits;
	uint32_t nslots;
	uint64_t slot_bytes;
};

struct wbuf;

int wbuf_init(struct zdev *dev, const struct wbuf_opts *o, struct wbuf **out);
void wbuf_destroy(struct wbuf *wb);
/* Write what is staged and stop the flusher threads, so that none waits on the buffer's
 * condition variables across a fork(): a child would find them counted as waiters that no
 * thread of its own is, and destroying them would wait for ever. The next write starts
 * flushers again in whichever process makes it. */
void wbuf_park(struct wbuf *wb);
/* Stage one block for LOG at block BLK of ZONE, which must follow the log's previous block.
 * May wait for a free slot; fails with the flusher's sticky error after a write error. */
int wbuf_add(struct wbuf *wb, int log, uint32_t zone, uint32_t blk, const void *buf);
/* The same for N consecutive blocks. The copy runs with the buffer's lock dropped; the
 * caller holds LOG's own lock, so one thread at a time appends to a log. */
int wbuf_add_n(struct wbuf *wb, int log, uint32_t zone, uint32_t blk, const void *buf,
	       uint32_t n);
/* 1 and the block copied to BUF when it is still staged, 0 when it is on the device. */
int wbuf_read(struct wbuf *wb, uint32_t zone, uint32_t blk, void *buf);
/* Copy the blocks of [BLK, BLK+N) of ZONE that are still staged into BUF, setting GOT[i]
 * for each; returns how many. A block not found is on the device. */
int wbuf_read_run(struct wbuf *wb, uint32_t zone, uint32_t blk, uint32_t n, void *buf,
		  uint8_t *got);
/* Write everything staged (for one zone, or all) and wait for it. */
int wbuf_flush_zone(struct wbuf *wb, uint32_t zone);
int wbuf_flush_all(struct wbuf *wb);
/* The first write error and its zone, or 0. */
int wbuf_error(struct wbuf *wb, uint32_t *zone);
void wbuf_stats(struct wbuf *wb, struct wbuf_stats *st);

#endif
