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
 * May call: libc, log.h, the image (header writes).
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zemu_timing_default(struct zemu_timing *t)
{
	t->dies = 4;                 /* 768 KiB superpage / 192 KiB program unit */
	t->prog_unit = 192u << 10;   /* one die's program unit in the Zoned UFS study */
	t->prog_ns = 285000;         /* 4 dies x 192 KiB / 285 us = 2.76 GB/s: UFS 4.0 seq. write */
	t->link_mbs = 4600;          /* UFS 4.0 HS-G5 x2 lanes after encoding, ~4.6 GB/s */
}

/* 0 when T is off or a usable model, -EINVAL with WHY set otherwise. */
int emu_timing_check(const struct zemu_timing *t, const char **why)
{
	if (!t->dies)
		return 0;
	*why = "dies must be 1..64, the unit a nonzero multiple of 4096, program time and link "
	       "rate nonzero";
	if (t->dies > ZEMU_TIMING_MAX_DIES || !t->prog_unit || t->prog_unit % EMU_BLK ||
	    !t->prog_ns || !t->link_mbs)
		return -EINVAL;
	return 0;
}

/* One "key=value" of a timing spec. */
static int timing_parse_kv(const char *kv, struct zemu_timing *t)
{
	char *end;
	unsigned long long v;
	const char *eq = strchr(kv, '=');

	if (!eq || eq[1] < '0' || eq[1] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(eq + 1, &end, 10);
	if (errno || v > UINT32_MAX)
		return -EINVAL;
	if (!strncmp(kv, "dies=", 5) && !*end) {
		t->dies = (uint32_t)v;
	} else if (!strncmp(kv, "link=", 5) && !*end) {
		t->link_mbs = (uint32_t)v;
	} else if (!strncmp(kv, "unit=", 5)) {
		uint64_t m = !*end ? 1 : !strcmp(end, "K") || !strcmp(end, "k") ? 1024 :
			     !strcmp(end, "M") || !strcmp(end, "m") ? 1 << 20 : 0;
		if (!m || v * m > UINT32_MAX)
			return -EINVAL;
		t->prog_unit = (uint32_t)(v * m);
	} else if (!strncmp(kv, "prog=", 5)) {
		uint64_t m = !strcmp(end, "ns") ? 1 : !strcmp(end, "us") ? 1000 :
			     !strcmp(end, "ms") ? 1000000 : 0;
		if (!m || v * m > UINT32_MAX)
			return -EINVAL;
		t->prog_ns = (uint32_t)(v * m);
	} else {
		return -EINVAL;
	}
	return 0;
}

int zemu_timing_parse(const char *spec, struct zemu_timing *t)
{
	char buf[256], *kv, *comma;
	const char *why;
	int ret = 0;

	memset(t, 0, sizeof(*t));
	if (!strcmp(spec, "off"))
		return 0;
	zemu_timing_default(t);
	if (!strcmp(spec, "ufs40") || !strcmp(spec, "default"))
		return 0;
	if (!*spec || strlen(spec) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (kv = buf; kv && !ret; kv = comma ? comma + 1 : NULL) { /* an empty item is an error */
		comma = strchr(kv, ',');
		if (comma)
			*comma = 0;
		ret = timing_parse_kv(kv, t);
	}
	if (!ret && !t->dies)
		ret = -EINVAL; /* "dies=0" is not a model; "off" says so */
	return ret ? ret : emu_timing_check(t, &why);
}

static uint32_t tm_die(const struct emu_dev *d, uint32_t z, uint64_t unit)
{
	return (uint32_t)((z + unit) % d->tm.t.dies); /* zones start on different dies */
}

static uint64_t tm_xfer_ns(const struct emu_dev *d, uint64_t len)
{
	/* bytes / (MB/s) = microseconds; * 1000 for ns, rounded up */
	return (len * 1000 + d->tm.t.link_mbs - 1) / d->tm.t.link_mbs;
}

/* Program one unit on DIE once its data is there (READY) and the die is idle. */
static uint64_t tm_program(struct emu_dev *d, uint32_t die, uint64_t ready)
{
	struct emu_tm *m = &d->tm;
	uint64_t start = max_u64(ready, m->die_free[die]);

	m->die_free[die] = start + m->t.prog_ns;
	m->die_busy_ns += m->t.prog_ns;
	m->programs++;
	m->end = max_u64(m->end, m->die_free[die]);
	return m->die_free[die];
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
static void tm_buf_hold(struct emu_tm *m, const void *buf, size_t len, uint64_t done)
{
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

/* Program the units of zone Z that bytes [REL, REL+LEN) complete; returns when they end. */
static uint64_t tm_units(struct emu_dev *d, uint32_t z, uint64_t rel, uint64_t len,
			 uint64_t ready)
{
	uint64_t unit = d->tm.t.prog_unit, cap = zcap(d, z), done = ready, k;

	if (is_conv(d, z)) { /* random writes: every touched unit is (re)programmed */
		for (k = rel / unit; k * unit < rel + len; k++)
			done = max_u64(done, tm_program(d, tm_die(d, z, k), ready));
		return done;
	}
	for (k = rel / unit; k * unit < rel + len && min_u64((k + 1) * unit, cap) <= rel + len; k++)
		done = max_u64(done, tm_program(d, tm_die(d, z, k), ready));
	/* a unit left incomplete stays held; a later flush backs it up */
	d->tm.partial[z] = (rel + len) % unit && rel + len < cap;
	return done;
}

void emu_tm_write(struct emu_dev *d, uint32_t z, const void *buf, uint64_t len, uint64_t rel)
{
	struct emu_tm *m = &d->tm;
	uint64_t start, ready, xfer, done;

	if (!tm_on(d))
		return;
	start = max_u64(m->link_free, m->barrier);
	ready = tm_buf_ready(m, buf, len);
	if (ready > start) {
		m->buf_wait_ns += ready - start;
		start = ready;
	}
	xfer = tm_xfer_ns(d, len);
	m->link_free = start + xfer;
	m->link_busy_ns += xfer;
	m->xfer_bytes += len;
	done = tm_units(d, z, rel, len, m->link_free);
	m->end = max_u64(m->end, done);
	tm_buf_hold(m, buf, len, done);
}

/* A partial unit programmed with padding (a flush backing it up, or a finish). */
static void tm_pad(struct emu_dev *d, uint32_t z, uint64_t wp, uint64_t ready)
{
	uint64_t unit = d->tm.t.prog_unit;

	tm_program(d, tm_die(d, z, wp / unit), ready);
	d->tm.pad_programs++;
	d->tm.pad_bytes += unit - wp % unit;
}

/* A flush makes everything durable: each held partial unit not yet backed up is programmed
 * padded (the device keeps holding it, to program it whole once complete), then the flush
 * waits for every die. Later transfers start after it. */
void emu_tm_flush(struct emu_dev *d)
{
	struct emu_tm *m = &d->tm;
	uint64_t fin;

	if (!tm_on(d))
		return;
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		if (m->partial[z])
			tm_pad(d, z, d->zones[z].wp, m->link_free);
		m->partial[z] = 0;
	}
	fin = max_u64(max_u64(m->end, m->link_free), m->barrier);
	for (uint32_t i = 0; i < m->t.dies; i++)
		fin = max_u64(fin, m->die_free[i]);
	m->barrier = m->end = fin;
}

/* Finishing a zone programs its held partial unit, padded, for good. */
void emu_tm_finish(struct emu_dev *d, uint32_t z, uint64_t wp)
{
	if (!tm_on(d))
		return;
	if (wp % d->tm.t.prog_unit && wp < zcap(d, z))
		tm_pad(d, z, wp, d->tm.link_free);
	d->tm.partial[z] = 0;
}

void emu_tm_reset_zone(struct emu_dev *d, uint32_t z)
{
	if (tm_on(d))
		d->tm.partial[z] = 0;
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

	if (!tm_on(d))
		return;
	st->timing = m->t;
	st->sim_ns = max_u64(max_u64(m->end, m->link_free), m->barrier);
	for (uint32_t i = 0; i < m->t.dies; i++)
		st->sim_ns = max_u64(st->sim_ns, m->die_free[i]);
	st->xfer_bytes = m->xfer_bytes;
	st->link_busy_ns = m->link_busy_ns;
	st->programs = m->programs;
	st->pad_programs = m->pad_programs;
	st->pad_bytes = m->pad_bytes;
	st->die_busy_ns = m->die_busy_ns;
	st->buf_wait_ns = m->buf_wait_ns;
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
	d->hdr->timing = *t;
	ret = emu_hdr_write(d);
	if (!ret && fdatasync(d->fd))
		ret = -errno;
	emu_free(d);
	return ret;
}
