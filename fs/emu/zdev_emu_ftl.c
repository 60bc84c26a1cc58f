/*
 * zdev_emu_ftl.c - the conventional mode's FTL: a page-mapped flash translation layer on the
 * image's NAND model (docs/emulator.md, "Conventional mode").
 *
 * Owns: where each 4 KiB logical page lives on the simulated NAND (the map and its reverse),
 * superblocks (one erase block of every die) filled by a host stream and a GC stream, the
 * greedy device GC and its erases, the map cache in "SRAM" (a miss reads a map page, an
 * evicted dirty one is written back), TRIM, the padding a flush costs, and saving all this
 * at a clean close so that the next open finds the same placement.
 * May call: the timing model's primitives (dies, programs, reads, erases, the link), the
 * image I/O helpers, log.h.
 *
 * It is a model only: the data itself lives in the image's data area at its logical offset,
 * made durable by the journal as in conventional zones. So nothing here can lose data; what
 * it decides is what the device's work costs in simulated time and in NAND operations.
 * Everything is deterministic: the same requests give the same placement and the same time.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FTL_PAGE 4096u
#define FTL_NONE UINT32_MAX
#define FTL_MAP_ENTRIES (FTL_PAGE / 4u) /* 4-byte entries per map page: 4 MiB of addresses */
#define FTL_OP_DEFAULT 70u              /* per mille */
#define FTL_CACHE_SHARE 128u            /* default cache: 1/128 of the map (see the docs) */
#define FTL_GC_RESERVE 2u               /* free superblocks the host never takes: GC's */
#define FTL_MIN_SPARE 4u                /* superblocks beyond the capacity, whatever the OP */
#define FTL_STATE_MAGIC "ZLFSFTL1"

enum { SB_FREE, SB_OPEN, SB_FULL };
enum { MAP_CACHED = 1, MAP_DIRTY = 2, MAP_ON_NAND = 4 };

/* An open superblock being filled in page order. */
struct ftl_stream {
	uint32_t sb;          /* FTL_NONE: none open */
	uint32_t next;        /* next page in it */
	uint64_t unit_ready;  /* when the data of the unit being filled is all there */
	uint8_t held;         /* that unit is incomplete and changed since the last flush */
	uint8_t kind;         /* enum tm_kind of its programs */
};

struct emu_ftl {
	uint32_t ppu, ppsb, nsb;   /* pages per unit, per superblock; superblocks */
	uint32_t npages;           /* logical pages */
	uint32_t *l2p, *p2l;       /* logical -> physical page and back; FTL_NONE: none */
	uint32_t *valid, *erase_count;
	uint8_t *state;
	uint32_t *freeq, fq_head, nfree; /* free superblocks, oldest freed first */
	struct ftl_stream host, gc;
	uint64_t mapped;
	/* the map cache: an LRU list of map pages, most recent at the head */
	uint32_t nmap, cache_cap, cache_len;
	uint32_t *prev, *next, mru, lru;
	uint8_t *mflags;
	uint32_t map_pending;      /* evicted dirty map pages waiting for a full unit */
	uint32_t map_die;          /* where the next map unit goes (round robin) */
	uint8_t map_held;          /* pending map pages changed since the last flush */
	int broken;                /* no free superblock left (cannot happen; reported once) */
};

/* Saved in the first block of the state region, after the arrays: valid only if the last
 * open closed cleanly (an open clears it, so a killed process leaves it clear). */
struct ftl_state_hdr {
	char magic[8];
	uint32_t valid;
	uint32_t crc;
	uint32_t npages, nsb, ppsb, host_sb, host_next, gc_sb, gc_next, rsvd;
};

/* ---- geometry ------------------------------------------------------------------------------ */

struct ftl_geo {
	uint32_t ppu, ppsb, nsb, npages, nmap, cache_cap;
};

static int ftl_geo(const struct emu_hdr *h, struct ftl_geo *g)
{
	const struct zemu_timing *t = &h->timing;
	uint64_t pages = (uint64_t)h->nr_zones * h->zone_size / FTL_PAGE, op, nsb, cache;

	if (!t->dies || !t->prog_unit || pages >= FTL_NONE)
		return -EINVAL;
	g->ppu = t->prog_unit / FTL_PAGE;
	g->ppsb = (uint32_t)((uint64_t)t->dies * emu_tm_block(t) / t->prog_unit) * g->ppu;
	g->npages = (uint32_t)pages;
	op = h->ftl.op_permille ? h->ftl.op_permille : FTL_OP_DEFAULT;
	nsb = (pages * (1000 + op) / 1000 + g->ppsb - 1) / g->ppsb;
	nsb = max_u64(nsb, (pages + g->ppsb - 1) / g->ppsb + FTL_MIN_SPARE);
	if (!g->ppsb || nsb * g->ppsb >= FTL_NONE)
		return -EINVAL;
	g->nsb = (uint32_t)nsb;
	g->nmap = (uint32_t)((pages + FTL_MAP_ENTRIES - 1) / FTL_MAP_ENTRIES);
	cache = h->ftl.map_cache ? h->ftl.map_cache / FTL_PAGE :
				   (g->nmap + FTL_CACHE_SHARE - 1) / FTL_CACHE_SHARE;
	g->cache_cap = (uint32_t)min_u64(max_u64(cache, 1), g->nmap);
	return 0;
}

uint64_t emu_ftl_state_bytes(const struct emu_hdr *h)
{
	struct ftl_geo g;

	if (ftl_geo(h, &g))
		return 0;
	return EMU_BLK + round_up((uint64_t)g.npages * 4, EMU_BLK) +
	       round_up((uint64_t)g.nsb * 4, EMU_BLK);
}

int emu_ftl_geometry_check(const struct emu_hdr *h, const char **why)
{
	struct ftl_geo g;

	*why = "the conventional mode needs 4096-byte blocks, a timing model, every zone "
	       "conventional, fewer than 2^32 pages, and an over-provisioning below 100%";
	if (h->lblock_size != FTL_PAGE || !h->timing.dies || h->nr_conv != h->nr_zones ||
	    h->ftl.op_permille >= 1000 || h->ftl.map_cache % FTL_PAGE || ftl_geo(h, &g))
		return -EINVAL;
	return 0;
}

static uint32_t sb_of(const struct emu_ftl *f, uint32_t ppn) { return ppn / f->ppsb; }
static uint32_t unit_in_sb(const struct emu_ftl *f, uint32_t ppn) { return ppn % f->ppsb / f->ppu; }

static uint32_t die_of(const struct emu_dev *d, uint32_t ppn)
{
	return emu_tm_die(d, sb_of(d->ftl, ppn), unit_in_sb(d->ftl, ppn));
}

/* ---- the map cache ------------------------------------------------------------------------- */

static void lru_unlink(struct emu_ftl *f, uint32_t mp)
{
	if (f->prev[mp] != FTL_NONE)
		f->next[f->prev[mp]] = f->next[mp];
	else
		f->mru = f->next[mp];
	if (f->next[mp] != FTL_NONE)
		f->prev[f->next[mp]] = f->prev[mp];
	else
		f->lru = f->prev[mp];
}

static void lru_push(struct emu_ftl *f, uint32_t mp)
{
	f->prev[mp] = FTL_NONE;
	f->next[mp] = f->mru;
	if (f->mru != FTL_NONE)
		f->prev[f->mru] = mp;
	else
		f->lru = mp;
	f->mru = mp;
}

/* A dirty map page leaves the cache: it is written to the map area, whole units at a time
 * (the map area's own garbage collection is not modelled). */
static void map_writeback(struct emu_dev *d)
{
	struct emu_ftl *f = d->ftl;

	d->tm.c.map_writebacks++;
	f->map_held = 1;
	if (++f->map_pending < f->ppu)
		return;
	emu_tm_program(d, f->map_die++ % d->tm.t.dies, emu_tm_now(d), TM_MAP);
	f->map_pending = 0;
	f->map_held = 0;
}

/* Look up LPN's entry (changing it if DIRTY). A miss evicts the least recently used map page
 * and reads LPN's from NAND, if NAND holds one (a range never mapped has none), on the die
 * of its number; for a host read R, its data reads wait for that. */
static void map_touch(struct emu_dev *d, uint32_t lpn, int dirty, struct tm_read *r)
{
	struct emu_ftl *f = d->ftl;
	uint32_t mp = lpn / FTL_MAP_ENTRIES;

	d->tm.c.map_lookups++;
	if (f->mflags[mp] & MAP_CACHED) {
		lru_unlink(f, mp);
	} else {
		d->tm.c.map_misses++;
		if (f->cache_len == f->cache_cap) {
			uint32_t old = f->lru;

			lru_unlink(f, old);
			if (f->mflags[old] & MAP_DIRTY)
				map_writeback(d);
			f->mflags[old] = MAP_ON_NAND;
			f->cache_len--;
		}
		if ((f->mflags[mp] & MAP_ON_NAND) && emu_tm_reads(d)) {
			uint32_t die = mp % d->tm.t.dies;

			if (r)
				emu_tm_read_map(d, r, die);
			else
				emu_tm_nand_read(d, die, emu_tm_now(d), TM_MAP);
		}
		f->mflags[mp] |= MAP_CACHED;
		f->cache_len++;
	}
	lru_push(f, mp);
	if (dirty)
		f->mflags[mp] |= MAP_DIRTY;
}

/* ---- placement, GC ------------------------------------------------------------------------- */

static void unmap(struct emu_ftl *f, uint32_t lpn)
{
	uint32_t old = f->l2p[lpn];

	if (old == FTL_NONE)
		return;
	f->p2l[old] = FTL_NONE;
	f->valid[sb_of(f, old)]--;
	f->l2p[lpn] = FTL_NONE;
	f->mapped--;
}

/* The full superblock with the fewest valid pages (the lowest number on a tie), if moving
 * it wins anything. */
static uint32_t gc_victim(const struct emu_ftl *f)
{
	uint32_t best = FTL_NONE;

	for (uint32_t sb = 0; sb < f->nsb; sb++)
		if (f->state[sb] == SB_FULL && (best == FTL_NONE || f->valid[sb] < f->valid[best]))
			best = sb;
	return best != FTL_NONE && f->valid[best] < f->ppsb ? best : FTL_NONE;
}

static uint64_t stream_put(struct emu_dev *d, struct ftl_stream *s, uint32_t lpn, uint64_t ready);

static void sb_free(struct emu_ftl *f, uint32_t sb)
{
	f->state[sb] = SB_FREE;
	f->erase_count[sb]++;
	f->freeq[(f->fq_head + f->nfree++) % f->nsb] = sb;
}

/* Greedy GC of one superblock: read each unit holding valid pages, write those pages to the
 * GC stream (their entries change in the map), erase the superblock's block on every die. */
static int gc_one(struct emu_dev *d)
{
	struct emu_ftl *f = d->ftl;
	uint32_t victim = gc_victim(f), last = FTL_NONE;
	uint64_t base, rd = 0;

	if (victim == FTL_NONE)
		return -ENOSPC;
	base = (uint64_t)victim * f->ppsb;
	for (uint32_t i = 0; i < f->ppsb && f->valid[victim]; i++) {
		uint32_t lpn = f->p2l[base + i];

		if (lpn == FTL_NONE)
			continue;
		if (i / f->ppu != last) {
			last = i / f->ppu;
			rd = emu_tm_nand_read(d, emu_tm_die(d, victim, last), emu_tm_now(d), TM_GC);
		}
		map_touch(d, lpn, 1, NULL);
		stream_put(d, &f->gc, lpn, rd);
		d->tm.c.gc_pages++;
	}
	for (uint32_t i = 0; i < d->tm.t.dies; i++)
		if (d->tm.t.erase_ns)
			emu_tm_erase(d, emu_tm_die(d, victim, i), emu_tm_now(d));
		else
			d->tm.c.erases++;
	sb_free(f, victim);
	d->tm.c.gc_victims++;
	return 0;
}

/* A stream takes the oldest free superblock; the host's first lets GC refill the reserve
 * (foreground GC: the device has no idle time to do it earlier). */
static void stream_open(struct emu_dev *d, struct ftl_stream *s)
{
	struct emu_ftl *f = d->ftl;

	if (s == &f->host)
		while (f->nfree <= FTL_GC_RESERVE && !gc_one(d))
			;
	if (!f->nfree) {
		if (!f->broken)
			zlog_err("%s: FTL model: no free superblock left; placement stops",
				 d->zd.info.path);
		f->broken = 1;
		return;
	}
	s->sb = f->freeq[f->fq_head];
	f->fq_head = (f->fq_head + 1) % f->nsb;
	f->nfree--;
	f->state[s->sb] = SB_OPEN;
	s->next = 0;
	s->unit_ready = 0;
	s->held = 0;
}

/* Place LPN's new copy in stream S, its data there at READY. Returns when the
 * unit it completes is programmed, or 0 while that unit is still being filled. */
static uint64_t stream_put(struct emu_dev *d, struct ftl_stream *s, uint32_t lpn, uint64_t ready)
{
	struct emu_ftl *f = d->ftl;
	uint64_t done = 0;
	uint32_t ppn;

	if (s->sb == FTL_NONE)
		stream_open(d, s);
	if (f->broken)
		return 0;
	ppn = s->sb * f->ppsb + s->next++;
	unmap(f, lpn);
	f->l2p[lpn] = ppn;
	f->p2l[ppn] = lpn;
	f->valid[s->sb]++;
	f->mapped++;
	s->unit_ready = max_u64(s->unit_ready, ready);
	s->held = s->next % f->ppu != 0;
	if (!s->held) {
		done = emu_tm_program(d, emu_tm_die(d, s->sb, s->next / f->ppu - 1), s->unit_ready,
				      (enum tm_kind)s->kind);
		s->unit_ready = 0;
	}
	if (s->next == f->ppsb) {
		f->state[s->sb] = SB_FULL;
		s->sb = FTL_NONE;
	}
	return done;
}

/* Is PPN in a unit a stream is still filling (so in the controller's buffer, not on NAND)? */
static int in_buffer(const struct emu_ftl *f, uint32_t ppn)
{
	const struct ftl_stream *ss[] = {&f->host, &f->gc};

	for (int i = 0; i < 2; i++)
		if (ss[i]->sb == sb_of(f, ppn) && ss[i]->next % f->ppu &&
		    unit_in_sb(f, ppn) == ss[i]->next / f->ppu)
			return 1;
	return 0;
}

/* ---- requests ------------------------------------------------------------------------------ */

void emu_ftl_write(struct emu_dev *d, const void *buf, uint64_t off, uint64_t len)
{
	struct emu_ftl *f = d->ftl;
	uint64_t arrived = emu_tm_transfer_in(d, buf, len), done = arrived;

	for (uint64_t p = off / FTL_PAGE; p < (off + len) / FTL_PAGE; p++) {
		map_touch(d, (uint32_t)p, 1, NULL);
		done = max_u64(done, stream_put(d, &f->host, (uint32_t)p, arrived));
	}
	d->tm.end = max_u64(d->tm.end, done);
	emu_tm_buf_hold(d, buf, len, done);
}

/* Every map page first (their reads may run in parallel), then one read per unit holding the
 * data, consecutive pages of one unit sharing it; unmapped pages read as zeros for free. */
void emu_ftl_read(struct emu_dev *d, uint64_t off, uint64_t len)
{
	struct emu_ftl *f = d->ftl;
	uint64_t first = off / FTL_PAGE, end = (off + len + FTL_PAGE - 1) / FTL_PAGE;
	uint32_t last = FTL_NONE;
	struct tm_read r;

	emu_tm_read_begin(d, &r);
	for (uint64_t p = first; p < end; p++)
		map_touch(d, (uint32_t)p, 0, &r);
	if (!emu_tm_reads(d))
		return;
	for (uint64_t p = first; p < end; p++) {
		uint32_t ppn = f->l2p[p];

		if (ppn == FTL_NONE || ppn / f->ppu == last || in_buffer(f, ppn))
			continue;
		last = ppn / f->ppu;
		emu_tm_read_unit(d, &r, die_of(d, ppn));
	}
	emu_tm_read_end(d, &r, len);
}

/* Unmapping costs only the map: pages already unmapped need no lookup. */
void emu_ftl_trim(struct emu_dev *d, uint64_t off, uint64_t len)
{
	struct emu_ftl *f = d->ftl;

	for (uint64_t p = off / FTL_PAGE; p < (off + len) / FTL_PAGE; p++) {
		if (f->l2p[p] == FTL_NONE)
			continue;
		map_touch(d, (uint32_t)p, 1, NULL);
		unmap(f, (uint32_t)p);
	}
}

/* A flush backs up every unit still being filled (and pending map pages) with one padded
 * program each, as zoned mode's flush does; the units stay held, to be programmed whole. */
void emu_ftl_flush(struct emu_dev *d)
{
	struct emu_ftl *f = d->ftl;
	struct ftl_stream *ss[] = {&f->host, &f->gc};

	for (int i = 0; i < 2; i++) {
		struct ftl_stream *s = ss[i];

		if (s->held && s->sb != FTL_NONE)
			emu_tm_pad(d, emu_tm_die(d, s->sb, s->next / f->ppu), d->tm.link_free,
				   (uint64_t)(s->next % f->ppu) * FTL_PAGE);
		s->held = 0;
	}
	if (f->map_held && f->map_pending)
		emu_tm_pad(d, f->map_die % d->tm.t.dies, d->tm.link_free,
			   (uint64_t)f->map_pending * FTL_PAGE);
	f->map_held = 0;
}

void emu_ftl_stats(const struct emu_dev *d, struct zemu_stats *st)
{
	const struct emu_ftl *f = d->ftl;

	st->ftl = d->hdr->ftl;
	if (!st->ftl.op_permille)
		st->ftl.op_permille = FTL_OP_DEFAULT;
	st->ftl.map_cache = (uint64_t)f->cache_cap * FTL_PAGE;
	st->ftl_superblocks = f->nsb;
	st->ftl_free_superblocks = f->nfree;
	st->ftl_pages_per_superblock = f->ppsb;
	st->ftl_op_bytes = ((uint64_t)f->nsb * f->ppsb - f->npages) * FTL_PAGE;
	st->ftl_mapped_pages = f->mapped;
	st->map_cache_pages = f->cache_cap;
	st->map_pages = f->nmap;
}

/* ---- state: saved at a clean close, rebuilt otherwise -------------------------------------- */

static uint64_t l2p_off(const struct emu_dev *d) { return d->hdr->ftl_off + EMU_BLK; }

static uint64_t erase_off(const struct emu_dev *d)
{
	return l2p_off(d) + round_up((uint64_t)d->ftl->npages * 4, EMU_BLK);
}

static uint32_t state_crc(struct ftl_state_hdr *s)
{
	uint32_t saved = s->crc, crc;

	s->crc = 0;
	crc = emu_crc32c(0, s, sizeof(*s));
	s->crc = saved;
	return crc;
}

static int state_write_hdr(struct emu_dev *d, int valid)
{
	struct emu_ftl *f = d->ftl;
	struct ftl_state_hdr *s = emu_blk_alloc(EMU_BLK);
	int ret;

	if (!s)
		return -ENOMEM;
	memcpy(s->magic, FTL_STATE_MAGIC, 8);
	s->valid = (uint32_t)valid;
	s->npages = f->npages;
	s->nsb = f->nsb;
	s->ppsb = f->ppsb;
	s->host_sb = f->host.sb;
	s->host_next = f->host.next;
	s->gc_sb = f->gc.sb;
	s->gc_next = f->gc.next;
	s->crc = state_crc(s);
	ret = emu_full_pwrite(d->fd, s, EMU_BLK, d->hdr->ftl_off);
	free(s);
	return ret;
}

/* Derived state from the map: reverse map, valid counts, superblock states, free queue, and
 * which map pages NAND holds. Fails if two pages claim one place (a damaged state). */
static int derive(struct emu_ftl *f)
{
	for (uint32_t p = 0; p < f->npages; p++) {
		uint32_t ppn = f->l2p[p];

		if (ppn == FTL_NONE)
			continue;
		if (ppn >= f->nsb * f->ppsb || f->p2l[ppn] != FTL_NONE)
			return -EUCLEAN;
		f->p2l[ppn] = p;
		f->valid[sb_of(f, ppn)]++;
		f->state[sb_of(f, ppn)] = SB_FULL;
		f->mflags[p / FTL_MAP_ENTRIES] = MAP_ON_NAND;
		f->mapped++;
	}
	for (int i = 0; i < 2; i++) {
		struct ftl_stream *s = i ? &f->gc : &f->host;

		if (s->sb != FTL_NONE && (s->sb >= f->nsb || s->next >= f->ppsb))
			return -EUCLEAN;
		if (s->sb != FTL_NONE)
			f->state[s->sb] = SB_OPEN;
	}
	for (uint32_t sb = 0; sb < f->nsb; sb++)
		if (f->state[sb] == SB_FREE)
			f->freeq[f->nfree++] = sb;
	return 0;
}

static int state_load(struct emu_dev *d)
{
	struct emu_ftl *f = d->ftl;
	struct ftl_state_hdr *s = emu_blk_alloc(EMU_BLK);
	int ret;

	if (!s)
		return -ENOMEM;
	ret = emu_full_pread(d->fd, s, EMU_BLK, d->hdr->ftl_off);
	if (!ret && (memcmp(s->magic, FTL_STATE_MAGIC, 8) || s->crc != state_crc(s) || !s->valid ||
		     s->npages != f->npages || s->nsb != f->nsb || s->ppsb != f->ppsb))
		ret = -ENOENT;
	if (!ret) {
		f->host.sb = s->host_sb;
		f->host.next = s->host_next;
		f->gc.sb = s->gc_sb;
		f->gc.next = s->gc_next;
		ret = emu_full_pread(d->fd, f->l2p, (size_t)f->npages * 4, l2p_off(d));
	}
	if (!ret)
		ret = emu_full_pread(d->fd, f->erase_count, (size_t)f->nsb * 4, erase_off(d));
	free(s);
	return ret ? ret : derive(f);
}

/* No saved state (a new image, a killed process, a power cut from another process): every
 * page the data area holds counts as mapped, placed in logical order from superblock 0, as
 * if written once, sequentially. */
static int state_rebuild(struct emu_dev *d)
{
	struct emu_ftl *f = d->ftl;
	uint64_t base = d->hdr->data_off, end = base + (uint64_t)f->npages * FTL_PAGE, pos = base;

	memset(f->l2p, 0xff, (size_t)f->npages * 4);
	f->host.sb = f->gc.sb = FTL_NONE;
	while (pos < end) {
		off_t data = lseek(d->fd, (off_t)pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		hole = data < 0 ? (off_t)end : lseek(d->fd, data, SEEK_HOLE);
		if (data < 0)
			data = (off_t)pos; /* no SEEK_DATA here: everything counts */
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		for (uint64_t p = ((uint64_t)data - base) / FTL_PAGE;
		     p < ((uint64_t)hole - base + FTL_PAGE - 1) / FTL_PAGE; p++) {
			uint32_t ppn = (uint32_t)f->mapped;

			f->l2p[p] = ppn;
			f->mapped++;
		}
		pos = (uint64_t)hole;
	}
	if (f->mapped % f->ppsb) { /* the last superblock is the host's open one */
		f->host.sb = (uint32_t)(f->mapped / f->ppsb);
		f->host.next = (uint32_t)(f->mapped % f->ppsb);
	}
	f->mapped = 0;
	memset(f->p2l, 0xff, (size_t)f->nsb * f->ppsb * 4);
	return derive(f);
}

static int ftl_alloc(struct emu_dev *d, const struct ftl_geo *g)
{
	struct emu_ftl *f = calloc(1, sizeof(*f));
	uint64_t phys = (uint64_t)g->nsb * g->ppsb;

	d->ftl = f;
	if (!f)
		return -ENOMEM;
	f->ppu = g->ppu;
	f->ppsb = g->ppsb;
	f->nsb = g->nsb;
	f->npages = g->npages;
	f->nmap = g->nmap;
	f->cache_cap = g->cache_cap;
	f->l2p = emu_blk_alloc((size_t)g->npages * 4);
	f->p2l = malloc(phys * 4);
	f->valid = calloc(g->nsb, 4);
	f->erase_count = emu_blk_alloc((size_t)g->nsb * 4);
	f->state = calloc(g->nsb, 1);
	f->freeq = calloc(g->nsb, 4);
	f->prev = malloc((size_t)g->nmap * 4);
	f->next = malloc((size_t)g->nmap * 4);
	f->mflags = calloc(g->nmap, 1);
	if (!f->l2p || !f->p2l || !f->valid || !f->erase_count || !f->state || !f->freeq ||
	    !f->prev || !f->next || !f->mflags)
		return -ENOMEM;
	memset(f->p2l, 0xff, phys * 4);
	f->mru = f->lru = FTL_NONE;
	f->host.kind = TM_DATA;
	f->gc.kind = TM_GC;
	return 0;
}

static void ftl_free(struct emu_ftl *f)
{
	if (!f)
		return;
	free(f->l2p);
	free(f->p2l);
	free(f->valid);
	free(f->erase_count);
	free(f->state);
	free(f->freeq);
	free(f->prev);
	free(f->next);
	free(f->mflags);
	free(f);
}

/* A read-write open clears the saved state's mark first: a process killed from here on
 * leaves no state that could be taken for this session's. */
int emu_ftl_open(struct emu_dev *d)
{
	struct ftl_geo g;
	int ret;

	if (!is_ftl(d))
		return 0;
	ret = ftl_geo(d->hdr, &g);
	if (!ret)
		ret = ftl_alloc(d, &g);
	if (!ret && state_load(d)) {
		struct emu_ftl *f = d->ftl;

		memset(f->valid, 0, (size_t)f->nsb * 4);
		memset(f->state, 0, f->nsb);
		memset(f->mflags, 0, f->nmap);
		memset(f->erase_count, 0, (size_t)f->nsb * 4);
		f->nfree = f->fq_head = 0;
		f->mapped = 0;
		ret = state_rebuild(d);
	}
	if (!ret && !d->zd.readonly)
		ret = state_write_hdr(d, 0);
	if (ret) {
		ftl_free(d->ftl);
		d->ftl = NULL;
	}
	return ret;
}

/* Arrays first, then the header that makes them count. */
void emu_ftl_close(struct emu_dev *d)
{
	struct emu_ftl *f = d->ftl;
	int ret = 0;

	if (!f)
		return;
	if (!d->zd.readonly && d->fd >= 0) {
		ret = emu_full_pwrite(d->fd, f->l2p, round_up((uint64_t)f->npages * 4, EMU_BLK),
				      l2p_off(d));
		if (!ret)
			ret = emu_full_pwrite(d->fd, f->erase_count,
					      round_up((uint64_t)f->nsb * 4, EMU_BLK), erase_off(d));
		if (!ret && !f->broken)
			ret = state_write_hdr(d, 1);
		if (ret)
			zlog_warn("%s: cannot save the FTL's state (%s): the next open rebuilds it",
				  d->zd.info.path, strerror(-ret));
	}
	ftl_free(f);
	d->ftl = NULL;
}
