/*
 * zdev_emu_timing.c - the optional timing model (docs/emulator.md, "Timing model"). Simulated,
 * never slept, so a result depends only on the sequence of operations, not on the machine.
 *
 * A write crosses the host link (one transfer at a time, in issue order); every program unit
 * of the zone it completes is then programmed on the unit's die, which is busy for prog_ns;
 * consecutive units of a zone go to consecutive dies, so a superpage of DIES units programs
 * in parallel. A unit the write leaves incomplete is held by the device until later writes
 * complete it. The caller's memory stands for the controller's buffer: it counts as in use
 * until the write's programs end, and a later write from the same memory cannot start its
 * transfer before then. That is where buffer policies differ: a buffer reused at once waits
 * for its own program, a pool of buffers used in turn does not.
 *
 * Reads (when read_ns is set): each unit a read touches that is programmed already is read on
 * its die (read_ns), as soon as the die is free, then the data crosses the link in issue
 * order. Erases keep a die busy for erase_ns per block. The same dies, link and clock serve
 * the conventional mode's FTL (zdev_emu_ftl.c), which places its pages itself and calls the
 * primitives here (busy, program, read, erase, transfer).
 * May call: libc, log.h, the image (header writes), the FTL (its flush and statistics).
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zemu_timing_default(struct zemu_timing *t)
{
	memset(t, 0, sizeof(*t));
	t->dies = 4;                 /* 768 KiB superpage / 192 KiB program unit */
	t->prog_unit = 192u << 10;   /* one die's program unit in the Zoned UFS study */
	t->prog_ns = 285000;         /* 4 dies x 192 KiB / 285 us = 2.76 GB/s: UFS 4.0 seq. write */
	t->link_mbs = 4600;          /* UFS 4.0 HS-G5 x2 lanes after encoding, ~4.6 GB/s */
	t->read_ns = 50000;          /* a TLC page read (tR), within the usual 40-60 us */
	t->erase_ns = 3000000;       /* a TLC block erase (tBERS), within the usual 3-5 ms */
	t->block = 16u << 20;        /* one die's erase block: 4 dies x 16 MiB = a 64 MiB zone */
}

uint32_t emu_tm_block(const struct zemu_timing *t) { return t->block ? t->block : 16u << 20; }

/* 0 when T is off or a usable model, -EINVAL with WHY set otherwise. */
int emu_timing_check(const struct zemu_timing *t, const char **why)
{
	if (!t->dies)
		return 0;
	*why = "dies must be 1..64, the unit a nonzero multiple of 4096, program time and link "
	       "rate nonzero, the block a multiple of 4096 and at least one unit, zone_dies at most "
	       "dies";
	if (t->dies > ZEMU_TIMING_MAX_DIES || !t->prog_unit || t->prog_unit % EMU_BLK ||
	    !t->prog_ns || !t->link_mbs || t->block % EMU_BLK ||
	    (t->block && t->block < t->prog_unit) || t->zone_dies > t->dies)
		return -EINVAL;
	return 0;
}

/* The number after the '=' of "key=value" KV, *END what follows it. */
int emu_spec_number(const char *kv, unsigned long long *v, char **end)
{
	const char *eq = strchr(kv, '=');

	if (!eq || eq[1] < '0' || eq[1] > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(eq + 1, end, 10);
	return errno ? -EINVAL : 0;
}

/* V with the unit END: sizes take K and M (or none), times ns, us and ms. */
int emu_spec_scaled(unsigned long long v, const char *end, int is_time, uint64_t *out)
{
	uint64_t m;

	if (is_time)
		m = !strcmp(end, "ns") ? 1 : !strcmp(end, "us") ? 1000 :
		    !strcmp(end, "ms") ? 1000000 : 0;
	else
		m = !*end ? 1 : !strcmp(end, "K") || !strcmp(end, "k") ? 1024 :
		    !strcmp(end, "M") || !strcmp(end, "m") ? 1 << 20 : 0;
	if (!m || v > UINT64_MAX / m)
		return -EINVAL;
	*out = v * m;
	return 0;
}

/* Hand each comma-separated item of SPEC to FN; an empty item is an error. */
int emu_spec_each(const char *spec, int (*fn)(const char *kv, void *ctx), void *ctx)
{
	char buf[256], *kv, *comma;
	int ret = 0;

	if (!*spec || strlen(spec) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (kv = buf; kv && !ret; kv = comma ? comma + 1 : NULL) {
		comma = strchr(kv, ',');
		if (comma)
			*comma = 0;
		ret = fn(kv, ctx);
	}
	return ret;
}

/* One "key=value" of a timing spec. */
static int timing_parse_kv(const char *kv, void *ctx)
{
	static const struct { const char *key; size_t off; int is_time; } keys[] = {
		{"unit=", offsetof(struct zemu_timing, prog_unit), 0},
		{"block=", offsetof(struct zemu_timing, block), 0},
		{"prog=", offsetof(struct zemu_timing, prog_ns), 1},
		{"read=", offsetof(struct zemu_timing, read_ns), 1},
		{"erase=", offsetof(struct zemu_timing, erase_ns), 1},
	};
	struct zemu_timing *t = ctx;
	unsigned long long v;
	uint64_t scaled;
	char *end;

	if (emu_spec_number(kv, &v, &end) || v > UINT32_MAX)
		return -EINVAL;
	if (!strncmp(kv, "dies=", 5) && !*end) {
		t->dies = (uint32_t)v;
		return 0;
	}
	if (!strncmp(kv, "zone_dies=", 10) && !*end) {
		t->zone_dies = (uint32_t)v;
		return 0;
	}
	if (!strncmp(kv, "link=", 5) && !*end) {
		t->link_mbs = (uint32_t)v;
		return 0;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strncmp(kv, keys[i].key, strlen(keys[i].key)))
			continue;
		if (emu_spec_scaled(v, end, keys[i].is_time, &scaled) || scaled > UINT32_MAX)
			return -EINVAL;
		*(uint32_t *)((char *)t + keys[i].off) = (uint32_t)scaled;
		return 0;
	}
	return -EINVAL;
}

int zemu_timing_parse(const char *spec, struct zemu_timing *t)
{
	const char *why;
	int ret;

	memset(t, 0, sizeof(*t));
	if (!strcmp(spec, "off"))
		return 0;
	zemu_timing_default(t);
	if (!strcmp(spec, "ufs40") || !strcmp(spec, "default"))
		return 0;
	if (!strncmp(spec, "ufs40,", 6)) /* "ufs40,block=4M": overrides said as such */
		spec += 6;
	ret = emu_spec_each(spec, timing_parse_kv, t);
	if (!ret && !t->dies)
		ret = -EINVAL; /* "dies=0" is not a model; "off" says so */
	return ret ? ret : emu_timing_check(t, &why);
}

uint32_t emu_tm_die(const struct emu_dev *d, uint32_t base, uint64_t unit)
{
	return (uint32_t)((base + unit) % d->tm.t.dies); /* zones start on different dies */
}

/* Dies a zone's units go to: all of them (a zone striped over the device, as in the Zoned UFS
 * study), or ZONE_DIES of them, as on ZNS drives whose zones are smaller than a stripe:
 * there one zone written alone cannot use the whole device, and writes to zones on other
 * dies proceed beside it. */
static uint32_t tm_zone_dies(const struct emu_tm *m)
{
	return m->t.zone_dies ? m->t.zone_dies : m->t.dies;
}

static uint32_t tm_zone_die(const struct emu_dev *d, uint32_t z, uint64_t unit)
{
	uint32_t k = d->tm.t.zone_dies;

	if (!k)
		return emu_tm_die(d, z, unit);
	return (uint32_t)(((uint64_t)z * k + unit % k) % d->tm.t.dies);
}

static uint64_t tm_xfer_ns(const struct emu_dev *d, uint64_t len)
{
	/* bytes / (MB/s) = microseconds; * 1000 for ns, rounded up */
	return (len * 1000 + d->tm.t.link_mbs - 1) / d->tm.t.link_mbs;
}

uint64_t emu_tm_now(const struct emu_dev *d) { return max_u64(d->tm.link_free, d->tm.barrier); }

/* Remember that DIE idles in [START, END), at place AT of its gaps (kept in time order);
 * when the list is full the oldest gap goes. */
static void gap_insert(struct emu_tm *m, uint32_t die, uint32_t at, uint64_t start, uint64_t end)
{
	struct tm_gap *g = m->gaps[die];
	uint32_t n = m->ngaps[die];

	if (end <= start)
		return;
	if (n == TM_GAPS) {
		if (!at)
			return; /* older than all it keeps */
		memmove(g, g + 1, (n - 1) * sizeof(*g));
		n--;
		at--;
	}
	memmove(g + at + 1, g + at, (n - at) * sizeof(*g));
	g[at] = (struct tm_gap){start, end};
	m->ngaps[die] = (uint8_t)(n + 1);
}

/* Keep DIE busy for NS from READY, or from when it is idle if that is later. */
uint64_t emu_tm_busy(struct emu_dev *d, uint32_t die, uint64_t ready, uint64_t ns)
{
	struct emu_tm *m = &d->tm;
	uint64_t start = max_u64(ready, m->die_free[die]);

	gap_insert(m, die, m->ngaps[die], m->die_free[die], start);
	m->die_free[die] = start + ns;
	m->c.die_busy_ns += ns;
	m->end = max_u64(m->end, m->die_free[die]);
	return m->die_free[die];
}

/* A read may also go into an earlier idle gap of its die that fits it, after READY, as a
 * device with a queue takes a later read before the die would otherwise idle. Without this
 * a read that waits for its map read (a miss) would leave its die idle meanwhile, and every
 * later request behind it. Returns when the read ends, 0 if no gap fits. */
static uint64_t gap_take(struct emu_dev *d, uint32_t die, uint64_t ready, uint64_t ns)
{
	struct emu_tm *m = &d->tm;
	struct tm_gap *g = m->gaps[die];

	for (uint32_t i = 0; i < m->ngaps[die]; i++) {
		uint64_t gs = g[i].start, ge = g[i].end, s = max_u64(gs, ready);

		if (s + ns > ge)
			continue;
		memmove(g + i, g + i + 1, (m->ngaps[die] - i - 1) * sizeof(*g));
		m->ngaps[die]--;
		gap_insert(m, die, i, s + ns, ge); /* what is left after the read, */
		gap_insert(m, die, i, gs, s);      /* and before it */
		m->c.die_busy_ns += ns;
		m->end = max_u64(m->end, s + ns);
		return s + ns;
	}
	return 0;
}

/* Program one unit on DIE once its data is there (READY) and the die is idle. */
uint64_t emu_tm_program(struct emu_dev *d, uint32_t die, uint64_t ready, enum tm_kind kind)
{
	struct emu_counters *c = &d->tm.c;

	c->programs++;
	c->data_programs += kind == TM_DATA;
	c->gc_programs += kind == TM_GC;
	c->map_programs += kind == TM_MAP;
	c->pad_programs += kind == TM_PAD;
	return emu_tm_busy(d, die, ready, d->tm.t.prog_ns);
}

/* A partial unit programmed with padding (a flush backing it up, or a finish); FILLED bytes
 * of it hold data. */
void emu_tm_pad(struct emu_dev *d, uint32_t die, uint64_t ready, uint64_t filled)
{
	emu_tm_program(d, die, ready, TM_PAD);
	d->tm.c.pad_bytes += d->tm.t.prog_unit - filled % d->tm.t.prog_unit;
}

/* One unit read on DIE, from READY on: in an idle gap it fits, else when the die is free. */
uint64_t emu_tm_nand_read(struct emu_dev *d, uint32_t die, uint64_t ready, enum tm_kind kind)
{
	struct emu_counters *c = &d->tm.c;
	uint64_t done = gap_take(d, die, ready, d->tm.t.read_ns);

	c->nand_reads++;
	c->data_reads += kind == TM_DATA;
	c->gc_reads += kind == TM_GC;
	c->map_reads += kind == TM_MAP;
	return done ? done : emu_tm_busy(d, die, ready, d->tm.t.read_ns);
}

void emu_tm_erase(struct emu_dev *d, uint32_t die, uint64_t ready)
{
	d->tm.c.erases++;
	emu_tm_busy(d, die, ready, d->tm.t.erase_ns);
}

/* Whether reads are timed: a model without read_ns (an image made before reads were
 * modelled) keeps them free, link included. */
int emu_tm_reads(const struct emu_dev *d) { return tm_on(d) && d->tm.t.read_ns; }

/* A host read's NAND reads may start once the last flush is over (the device has no clock of
 * the host's: requests are taken to be issued as soon as the device can take them). */
void emu_tm_read_begin(struct emu_dev *d, struct tm_read *r)
{
	memset(r, 0, sizeof(*r));
	r->ready = r->done = d->tm.barrier;
}

/* A map page read for this request (a miss): its data reads wait for it. */
void emu_tm_read_map(struct emu_dev *d, struct tm_read *r, uint32_t die)
{
	uint64_t done = emu_tm_nand_read(d, die, d->tm.barrier, TM_MAP);

	r->ready = max_u64(r->ready, done);
	r->done = max_u64(r->done, done);
	r->map_ns = d->tm.t.read_ns;
}

void emu_tm_read_unit(struct emu_dev *d, struct tm_read *r, uint32_t die)
{
	r->done = max_u64(r->done, emu_tm_nand_read(d, die, r->ready, TM_DATA));
	r->on_die[die]++;
}

/* The data crosses the link once all of it is read. The service time is what the request
 * would take alone: map reads, then the most reads any one die does, then the transfer. */
void emu_tm_read_end(struct emu_dev *d, struct tm_read *r, uint64_t len)
{
	struct emu_tm *m = &d->tm;
	uint64_t xfer = tm_xfer_ns(d, len), most = 0;

	m->link_free = max_u64(m->link_free, r->done) + xfer;
	m->c.link_busy_ns += xfer;
	m->c.xfer_bytes += len;
	m->end = max_u64(m->end, m->link_free);
	for (uint32_t i = 0; i < m->t.dies; i++)
		most = max_u64(most, r->on_die[i]);
	m->c.read_service_ns += r->map_ns + most * m->t.read_ns + xfer;
}

/* When the memory [BUF, BUF+LEN) is free: the latest end of the programs of earlier writes
 * from overlapping memory. Those entries are dropped; the caller records the new one. */
static uint64_t tm_buf_ready(struct emu_tm *m, const void *buf, size_t len)
{
	uintptr_t lo = (uintptr_t)buf, hi = lo + len;
	uint64_t ready = 0;

	for (uint32_t i = 0; i < m->nbufs;) {
		struct tm_buf *b = &m->bufs[i];
		if (b->lo < hi && lo < b->hi) {
			ready = max_u64(ready, b->done);
			*b = m->bufs[--m->nbufs];
		} else {
			i++;
		}
	}
	return ready;
}

/* Remember that [BUF, BUF+LEN) is in use until DONE; when the table is full the entry that
 * frees earliest goes (the weakest constraint). */
void emu_tm_buf_hold(struct emu_dev *d, const void *buf, size_t len, uint64_t done)
{
	struct emu_tm *m = &d->tm;
	struct tm_buf *b = &m->bufs[0];

	if (m->nbufs < TM_BUFS) {
		b = &m->bufs[m->nbufs++];
	} else {
		for (uint32_t i = 1; i < TM_BUFS; i++)
			if (m->bufs[i].done < b->done)
				b = &m->bufs[i];
	}
	b->lo = (uintptr_t)buf;
	b->hi = b->lo + len;
	b->done = done;
}

/* A write's transfer over the link, in issue order, once its memory is free: returns when
 * its data has arrived. */
uint64_t emu_tm_transfer_in(struct emu_dev *d, const void *buf, uint64_t len)
{
	struct emu_tm *m = &d->tm;
	uint64_t start = max_u64(m->link_free, m->barrier), ready = tm_buf_ready(m, buf, len);
	uint64_t xfer = tm_xfer_ns(d, len);

	if (ready > start) {
		m->c.buf_wait_ns += ready - start;
		start = ready;
	}
	m->link_free = start + xfer;
	m->c.link_busy_ns += xfer;
	m->c.xfer_bytes += len;
	return m->link_free;
}

/* Program the units of zone Z that bytes [REL, REL+LEN) complete; returns when they end. */
static uint64_t tm_units(struct emu_dev *d, uint32_t z, uint64_t rel, uint64_t len,
			 uint64_t ready)
{
	uint64_t unit = d->tm.t.prog_unit, cap = zcap(d, z), done = ready, k;

	if (is_conv(d, z)) { /* random writes: every touched unit is (re)programmed */
		for (k = rel / unit; k * unit < rel + len; k++)
			done = max_u64(done, emu_tm_program(d, tm_zone_die(d, z, k), ready, TM_DATA));
		return done;
	}
	for (k = rel / unit; k * unit < rel + len && min_u64((k + 1) * unit, cap) <= rel + len; k++)
		done = max_u64(done, emu_tm_program(d, tm_zone_die(d, z, k), ready, TM_DATA));
	/* a unit left incomplete stays held; a later flush backs it up */
	d->tm.partial[z] = (rel + len) % unit && rel + len < cap;
	return done;
}

void emu_tm_write(struct emu_dev *d, uint32_t z, const void *buf, uint64_t len, uint64_t rel)
{
	uint64_t done;

	if (!tm_on(d))
		return;
	done = tm_units(d, z, rel, len, emu_tm_transfer_in(d, buf, len));
	d->tm.end = max_u64(d->tm.end, done);
	emu_tm_buf_hold(d, buf, len, done);
}

/* Bytes [REL, REL+LEN) of zone Z, all holding data, are read: every programmed unit they
 * touch is read on its die; a unit still incomplete is in the controller's buffer. */
void emu_tm_read_zone(struct emu_dev *d, struct tm_read *r, uint32_t z, uint64_t rel,
		      uint64_t len)
{
	uint64_t unit = d->tm.t.prog_unit, wp = d->zones[z].wp, cap = zcap(d, z);

	for (uint64_t k = rel / unit; len && k * unit < rel + len; k++)
		if (is_conv(d, z) || min_u64((k + 1) * unit, cap) <= wp)
			emu_tm_read_unit(d, r, tm_zone_die(d, z, k));
}

/* A flush makes everything durable: each held partial unit not yet backed up is programmed
 * padded (the device keeps holding it, to program it whole once complete), then the flush
 * waits for every die. Later transfers start after it. */
void emu_tm_flush(struct emu_dev *d)
{
	struct emu_tm *m = &d->tm;
	uint64_t fin, unit;

	if (!tm_on(d))
		return;
	unit = m->t.prog_unit;
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint64_t wp = d->zones[z].wp;

		if (m->partial[z])
			emu_tm_pad(d, tm_zone_die(d, z, wp / unit), m->link_free, wp);
		m->partial[z] = 0;
	}
	if (d->ftl)
		emu_ftl_flush(d);
	fin = max_u64(max_u64(m->end, m->link_free), m->barrier);
	for (uint32_t i = 0; i < m->t.dies; i++)
		fin = max_u64(fin, m->die_free[i]);
	m->barrier = m->end = fin;
}

/* Finishing a zone programs its held partial unit, padded, for good. */
void emu_tm_finish(struct emu_dev *d, uint32_t z, uint64_t wp)
{
	uint64_t unit = d->tm.t.prog_unit;

	if (!tm_on(d))
		return;
	if (wp % unit && wp < zcap(d, z))
		emu_tm_pad(d, tm_zone_die(d, z, wp / unit), d->tm.link_free, wp);
	d->tm.partial[z] = 0;
}

/* A reset drops the held unit and erases what the zone's WRITTEN bytes occupied: on each die
 * its units there, in blocks. */
void emu_tm_reset_zone(struct emu_dev *d, uint32_t z, uint64_t written)
{
	struct emu_tm *m = &d->tm;
	uint64_t unit, units, block;

	if (!tm_on(d))
		return;
	m->partial[z] = 0;
	if (!m->t.erase_ns || !written)
		return;
	unit = m->t.prog_unit;
	units = (written + unit - 1) / unit;
	block = emu_tm_block(&m->t);
	for (uint32_t i = 0, k = tm_zone_dies(m); i < k && i < units; i++) {
		uint64_t on_die = (units - i + k - 1) / k; /* units i, i+k, ... */
		uint64_t blocks = (on_die * unit + block - 1) / block;

		while (blocks--)
			emu_tm_erase(d, tm_zone_die(d, z, i), emu_tm_now(d));
	}
}

int emu_tm_init(struct emu_dev *d)
{
	memset(&d->tm, 0, sizeof(d->tm));
	d->tm.t = d->hdr->timing;
	if (!tm_on(d))
		return 0;
	d->tm.partial = calloc(d->hdr->nr_zones, 1);
	return d->tm.partial ? 0 : -ENOMEM;
}

int zemu_timing_reset(struct zdev *dev)
{
	struct emu_dev *d;
	uint8_t *partial;

	if (!zdev_is_emu(dev))
		return -EINVAL;
	d = to_emu(dev);
	pthread_mutex_lock(&d->lock);
	partial = d->tm.partial; /* held partial units stay held: the device still has them */
	memset(&d->tm, 0, sizeof(d->tm));
	d->tm.t = d->hdr->timing;
	d->tm.partial = partial;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void emu_tm_stats(const struct emu_dev *d, struct zemu_stats *st)
{
	const struct emu_tm *m = &d->tm;
	const struct emu_counters *c = &m->c;

	st->mode = (enum zemu_mode)d->hdr->mode;
	st->host_reads = c->host_reads;
	st->host_read_bytes = c->host_read_bytes;
	st->host_writes = c->host_writes;
	st->host_write_bytes = c->host_write_bytes;
	st->host_trims = c->host_trims;
	st->host_trim_bytes = c->host_trim_bytes;
	st->host_flushes = c->host_flushes;
	st->image_syncs = __atomic_load_n(&d->image_syncs, __ATOMIC_RELAXED);
	if (!tm_on(d))
		return;
	st->timing = m->t;
	st->sim_ns = max_u64(max_u64(m->end, m->link_free), m->barrier);
	for (uint32_t i = 0; i < m->t.dies; i++)
		st->sim_ns = max_u64(st->sim_ns, m->die_free[i]);
	st->xfer_bytes = c->xfer_bytes;
	st->link_busy_ns = c->link_busy_ns;
	st->programs = c->programs;
	st->pad_programs = c->pad_programs;
	st->pad_bytes = c->pad_bytes;
	st->die_busy_ns = c->die_busy_ns;
	st->buf_wait_ns = c->buf_wait_ns;
	st->data_programs = c->data_programs;
	st->gc_programs = c->gc_programs;
	st->map_programs = c->map_programs;
	st->nand_reads = c->nand_reads;
	st->data_reads = c->data_reads;
	st->map_reads = c->map_reads;
	st->gc_reads = c->gc_reads;
	st->erases = c->erases;
	st->read_service_ns = c->read_service_ns;
	st->map_lookups = c->map_lookups;
	st->map_misses = c->map_misses;
	st->map_writebacks = c->map_writebacks;
	st->gc_pages = c->gc_pages;
	st->gc_victims = c->gc_victims;
	if (d->ftl)
		emu_ftl_stats(d, st);
}

/* Only the header changes: the model is read at every open. */
int zemu_set_timing(const char *path, const struct zemu_timing *t)
{
	static const struct zdev_open_opts rw;
	struct emu_dev *d;
	const char *why;
	int ret;

	if (emu_timing_check(t, &why)) {
		zlog_err("%s: timing model: %s", path, why);
		return -EINVAL;
	}
	ret = emu_open_internal(path, &rw, 1, &d);
	if (ret)
		return ret;
	if (is_ftl(d)) { /* its superblocks, and so its layout, are cut from the model */
		zlog_err("%s: a conventional-mode image keeps the NAND model it was created with",
			 path);
		emu_free(d);
		return -EINVAL;
	}
	d->hdr->timing = *t;
	ret = emu_hdr_write(d);
	if (!ret && fdatasync(d->fd))
		ret = -errno;
	emu_free(d);
	return ret;
}
