/*
 * zdev_emu.c - the file-backed zoned-device emulator (see zdev_emu.h and docs/emulator.md).
 *
 * Owns: the image format (header block, persisted zone table, volatile-write journal with its
 * undo area, data area), the host-managed zone state machine and its open/active limits, the
 * durability model (volatile cache, flush, power cut), fault injection, and the write log with
 * its replay.
 * May call: libc, pthreads, log.h, and zdev.h's public functions (replay drives an image
 * through them). Nothing else in fs/ calls into this file except through zdev.h/zdev_emu.h.
 *
 * Error codes mirror what Linux returns for the same mistake on a host-managed device
 * (drivers/block/null_blk/zoned.c, block/blk-core.c): the table is in docs/emulator.md.
 *
 * Robustness rule: the process may be killed between any two system calls. Every on-disk
 * update is ordered so that the image then still opens and keeps every flushed write:
 * data before its journal record (sequential zones), old data and record before the overwrite
 * (conventional zones), zone table before the generation bump that voids the journal.
 */
#include "zdev_emu.h"
#include "zdev_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the zlfs-emu image format is little-endian and stored in host order"
#endif

#define EMU_MAGIC "ZLFSEMU1"
#define EMU_FMT_VERSION 1u
#define EMU_BLK 4096u                /* unit of all metadata I/O; also the O_DIRECT alignment */
#define EMU_JSLOTS_DEFAULT 4096u
#define EMU_JSLOTS_MAX (1u << 20)
#define EMU_UNDO_MAX (16ull << 20)   /* old data of unflushed conventional-zone writes */
#define EMU_MAX_ZONES (1u << 22)
#define EMU_MAX_FAULTS 32
#define EMU_PATH_MAX 1024

#define LOG_MAGIC "ZLFSLOG1"
#define LOG_VERSION 1u
#define LOG_REC_MAGIC 0x52474c5au    /* "ZLGR" */

/* ------------------------------------------------------------------------------------------
 * On-disk structures (little-endian, host order).
 */

struct emu_fault_slot {
	uint32_t kind;      /* ZEMU_FAULT_EIO_READ / _WRITE, 0 = free slot */
	uint32_t rsvd;
	uint64_t off;       /* device byte offset that the next matching I/O must touch */
};

/* Block 0 of the image. The CRC covers the whole EMU_BLK block with crc = 0. */
struct emu_hdr {
	char magic[8];
	uint32_t version;
	uint32_t crc;
	uint32_t lblock_size;
	uint32_t nr_zones;
	uint32_t nr_conv;
	uint32_t max_open;
	uint32_t max_active;
	uint32_t jslots;
	uint64_t zone_size;
	uint64_t zone_capacity;
	uint64_t table_off;
	uint64_t jrnl_off;
	uint64_t undo_off;
	uint64_t undo_len;
	uint64_t data_off;
	uint64_t generation;  /* bumped by each flush and power cut: voids the journal */
	struct emu_fault_slot faults[EMU_MAX_FAULTS];
	char log_path[EMU_PATH_MAX];
	/* Timing model, all zero when off. Images made before it existed have zeros here (the
	 * rest of the block is zero and covered by the CRC), so they open unchanged. */
	struct zemu_timing timing;
};
_Static_assert(sizeof(struct emu_hdr) <= EMU_BLK, "header must fit one block");

/* One zone's durable state. Open conditions are never stored: power-on closes zones. */
struct emu_zent {
	uint64_t wp;        /* bytes from the zone start where durable data ends */
	uint32_t epoch;     /* bumped by each reset: journal records of older epochs are void */
	uint8_t cond;       /* NOT_WP, EMPTY, CLOSED, FULL, RDONLY or OFFLINE */
	uint8_t rsvd[3];
	uint64_t rsvd2;
	uint32_t rsvd3;
	uint32_t crc;
};
_Static_assert(sizeof(struct emu_zent) == 32, "zone entry size");
#define ZENT_PER_BLK (EMU_BLK / sizeof(struct emu_zent))

/* One write in the volatile cache: the journal is a prefix of records of the current
 * generation, in issue order. */
struct emu_jrec {
	uint64_t gen;
	uint64_t off;       /* device byte offset */
	uint64_t len;
	uint64_t undo_foff; /* conventional zone: image offset of the overwritten data, else 0 */
	uint32_t zone;
	uint32_t epoch;
	uint64_t rsvd[2];
	uint32_t rsvd2;
	uint32_t crc;
};
_Static_assert(sizeof(struct emu_jrec) == 64, "journal record size");
#define JREC_PER_BLK (EMU_BLK / sizeof(struct emu_jrec))

enum log_base { LOG_BASE_EMPTY = 1, LOG_BASE_FILE = 2 };

struct emu_lhdr {
	char magic[8];
	uint32_t version;
	uint32_t base;      /* enum log_base */
	uint32_t lblock_size;
	uint32_t nr_zones;
	uint32_t nr_conv;
	uint32_t max_open;
	uint32_t max_active;
	uint32_t rsvd;
	uint64_t zone_size;
	uint64_t zone_capacity;
	uint32_t rsvd2;
	uint32_t crc;
};
_Static_assert(sizeof(struct emu_lhdr) == 64, "log header size");

/*
 * Operations and markers; markers are not operations. The log is written ahead: an operation
 * is appended just before the image changes, and an ABORT marker (off = the log offset of the
 * operation) follows when it then fails. So a killed process leaves at most the last logged
 * operation in doubt, and the next logged open redoes it (every logged operation can be
 * redone safely). POWERON: the image was opened again (open zones closed). POWERCUT: the
 * volatile cache was dropped; replay cannot go past it.
 */
enum log_type {
	LOG_WRITE = 1, LOG_FLUSH, LOG_RESET, LOG_FINISH, LOG_OPEN, LOG_CLOSE,
	LOG_POWERON, LOG_POWERCUT, LOG_ABORT,
};

static int log_is_op(uint8_t type) { return type >= LOG_WRITE && type <= LOG_CLOSE; }

struct emu_lrec {
	uint32_t magic;
	uint8_t type;
	uint8_t rsvd[3];
	uint32_t zone;
	uint32_t crc;       /* over this record with crc = 0, then the payload */
	uint64_t off;
	uint64_t len;       /* payload bytes that follow (writes only) */
};
_Static_assert(sizeof(struct emu_lrec) == 32, "log record size");

/* ------------------------------------------------------------------------------------------
 * In-memory device.
 */

struct emu_zone {
	uint64_t wp;        /* bytes from the zone start where data ends; the write pointer
			     * except in FULL (finished), RDONLY and OFFLINE zones */
	uint32_t epoch;
	uint8_t cond;
};

/* A range of caller memory whose data is not yet programmed (see tm_buf_ready). */
struct tm_buf {
	uintptr_t lo, hi;
	uint64_t done;      /* virtual time its last write's programs end */
};
#define TM_BUFS 64

/* Timing model state; times are virtual nanoseconds since the open or the last reset. */
struct emu_tm {
	struct zemu_timing t;       /* t.dies == 0: off */
	uint64_t link_free;         /* the host link is busy until then */
	uint64_t barrier;           /* a flush completed then: later transfers start after it */
	uint64_t end;               /* latest completion so far */
	uint64_t die_free[ZEMU_TIMING_MAX_DIES];
	uint8_t *partial;           /* per zone: held partial unit not yet backed up by a flush */
	struct tm_buf bufs[TM_BUFS];
	uint32_t nbufs;
	uint64_t xfer_bytes, link_busy_ns, programs, pad_programs, pad_bytes, die_busy_ns;
	uint64_t buf_wait_ns;
};

struct emu_dev {
	struct zdev zd;             /* must stay first: zdev.c casts */
	pthread_mutex_t lock;       /* guards everything below and every image write */
	int fd;
	int direct;
	int nosync;                 /* replay: skip fdatasync until the final flush */
	struct emu_hdr *hdr;        /* EMU_BLK aligned */
	struct emu_zent *table;     /* durable zone table, mirrors the image */
	uint32_t table_blocks;
	struct emu_zone *zones;     /* current state */
	struct emu_jrec *jrnl;      /* mirrors the journal region */
	uint32_t jcount;            /* records of the current generation */
	uint64_t undo_used;
	uint32_t nr_imp, nr_exp, nr_closed;
	uint32_t imp_cursor;        /* round-robin start for implicit closes */
	int log_fd;                 /* -1 without a write log */
	uint64_t log_size;          /* where the next log record goes */
	char log_path[EMU_PATH_MAX];
	struct emu_tm tm;
};

static const struct zdev_ops emu_ops;

static struct emu_dev *to_emu(struct zdev *zd) { return (struct emu_dev *)zd; }

/* ------------------------------------------------------------------------------------------
 * Small helpers: CRC32C, alignment, whole-length I/O.
 */

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ ((c & 1) ? 0x82f63b78u : 0);
		crc32c_table[i] = c;
	}
}

static uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
	while (len--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static void *blk_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, EMU_BLK, round_up(len ? len : 1, EMU_BLK)))
		return NULL;
	memset(p, 0, round_up(len ? len : 1, EMU_BLK));
	return p;
}

/* Whole-length pread; bytes past the end of the file read as zeros (a sparse image). */
static int full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			memset(p, 0, len);
			return 0;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

static int full_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

static int is_blk_aligned(const void *buf, size_t len, uint64_t off)
{
	return !((uintptr_t)buf % EMU_BLK) && !(len % EMU_BLK) && !(off % EMU_BLK);
}

/* Image reads of any alignment: with O_DIRECT an unaligned range goes through an aligned
 * bounce buffer covering the enclosing blocks. */
static int img_read(struct emu_dev *d, void *buf, size_t len, uint64_t foff)
{
	uint64_t a, e;
	uint8_t *b;
	int ret;

	if (!d->direct || is_blk_aligned(buf, len, foff))
		return full_pread(d->fd, buf, len, foff);
	a = foff / EMU_BLK * EMU_BLK;
	e = round_up(foff + len, EMU_BLK);
	b = blk_alloc(e - a);
	if (!b)
		return -ENOMEM;
	ret = full_pread(d->fd, b, e - a, a);
	if (!ret)
		memcpy(buf, b + (foff - a), len);
	free(b);
	return ret;
}

/* Image writes of any alignment; with O_DIRECT an unaligned range is read-modify-written.
 * Callers hold d->lock, so no other write can slip between the read and the write. */
static int img_write(struct emu_dev *d, const void *buf, size_t len, uint64_t foff)
{
	uint64_t a, e;
	uint8_t *b;
	int ret;

	if (!d->direct || is_blk_aligned(buf, len, foff))
		return full_pwrite(d->fd, buf, len, foff);
	a = foff / EMU_BLK * EMU_BLK;
	e = round_up(foff + len, EMU_BLK);
	b = blk_alloc(e - a);
	if (!b)
		return -ENOMEM;
	ret = full_pread(d->fd, b, e - a, a);
	if (!ret) {
		memcpy(b + (foff - a), buf, len);
		ret = full_pwrite(d->fd, b, e - a, a);
	}
	free(b);
	return ret;
}

static int emu_sync(struct emu_dev *d)
{
	if (d->nosync)
		return 0;
	if (fdatasync(d->fd))
		return -errno;
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Header, layout and zone table.
 */

static uint32_t hdr_crc(struct emu_hdr *h)
{
	uint32_t saved = h->crc, crc;

	h->crc = 0;
	crc = crc32c(0, h, EMU_BLK);
	h->crc = saved;
	return crc;
}

static uint64_t table_bytes(uint32_t nr_zones)
{
	return round_up((uint64_t)nr_zones * sizeof(struct emu_zent), EMU_BLK);
}

/* Fill the region offsets of H from its geometry. */
static void hdr_layout(struct emu_hdr *h)
{
	uint64_t undo = 0;

	if (h->nr_conv) {
		undo = min_u64((uint64_t)h->nr_conv * h->zone_size, EMU_UNDO_MAX);
		undo = undo / EMU_BLK * EMU_BLK;
	}
	h->table_off = EMU_BLK;
	h->jrnl_off = h->table_off + table_bytes(h->nr_zones);
	h->undo_off = h->jrnl_off + round_up((uint64_t)h->jslots * sizeof(struct emu_jrec), EMU_BLK);
	h->undo_len = undo;
	h->data_off = h->undo_off + undo;
}

static int hdr_write(struct emu_dev *d)
{
	d->hdr->crc = hdr_crc(d->hdr);
	return full_pwrite(d->fd, d->hdr, EMU_BLK, 0);
}

static uint32_t zent_crc(struct emu_zent *e)
{
	uint32_t saved = e->crc, crc;

	e->crc = 0;
	crc = crc32c(0, e, sizeof(*e));
	e->crc = saved;
	return crc;
}

static void zent_set(struct emu_zent *e, uint64_t wp, uint32_t epoch, uint8_t cond)
{
	memset(e, 0, sizeof(*e));
	e->wp = wp;
	e->epoch = epoch;
	e->cond = cond;
	e->crc = zent_crc(e);
}

static int table_write_block(struct emu_dev *d, uint32_t blk)
{
	return full_pwrite(d->fd, (uint8_t *)d->table + (uint64_t)blk * EMU_BLK, EMU_BLK,
			   d->hdr->table_off + (uint64_t)blk * EMU_BLK);
}

static int is_conv(const struct emu_dev *d, uint32_t z) { return z < d->hdr->nr_conv; }
static uint64_t zstart(const struct emu_dev *d, uint32_t z) { return (uint64_t)z * d->hdr->zone_size; }

static uint64_t zcap(const struct emu_dev *d, uint32_t z)
{
	return is_conv(d, z) ? d->hdr->zone_size : d->hdr->zone_capacity;
}

/* The condition stored for a zone: open states are volatile and come back closed. */
static uint8_t durable_cond(const struct emu_zone *zn)
{
	switch (zn->cond) {
	case ZDEV_COND_NOT_WP:
	case ZDEV_COND_FULL:
	case ZDEV_COND_RDONLY:
	case ZDEV_COND_OFFLINE:
		return zn->cond;
	default:
		return zn->wp ? ZDEV_COND_CLOSED : ZDEV_COND_EMPTY;
	}
}

/* Store zone Z's current state in the in-memory table; returns 1 if it changed. */
static int table_update(struct emu_dev *d, uint32_t z)
{
	struct emu_zent *e = &d->table[z];
	struct emu_zone *zn = &d->zones[z];
	uint8_t cond = durable_cond(zn);

	if (e->wp == zn->wp && e->epoch == zn->epoch && e->cond == cond)
		return 0;
	zent_set(e, zn->wp, zn->epoch, cond);
	return 1;
}

/* Make zone Z's current state durable at once (reset, finish, fault injection): its data
 * first, then its table block. */
static int zone_persist(struct emu_dev *d, uint32_t z)
{
	int ret = emu_sync(d);

	if (ret)
		return ret;
	table_update(d, z);
	ret = table_write_block(d, (uint32_t)(z / ZENT_PER_BLK));
	if (ret)
		return ret;
	return emu_sync(d);
}

/* ------------------------------------------------------------------------------------------
 * Zone condition accounting and the open/active resource rules (ZBC/ZNS, as null_blk).
 */

static uint32_t *cond_counter(struct emu_dev *d, uint8_t cond)
{
	switch (cond) {
	case ZDEV_COND_IMP_OPEN: return &d->nr_imp;
	case ZDEV_COND_EXP_OPEN: return &d->nr_exp;
	case ZDEV_COND_CLOSED: return &d->nr_closed;
	default: return NULL;
	}
}

static void set_cond(struct emu_dev *d, uint32_t z, uint8_t cond)
{
	uint32_t *c = cond_counter(d, d->zones[z].cond);

	if (c)
		(*c)--;
	d->zones[z].cond = cond;
	c = cond_counter(d, cond);
	if (c)
		(*c)++;
}

/* Closing an open zone: back to EMPTY when nothing was written, else CLOSED. */
static void close_zone(struct emu_dev *d, uint32_t z)
{
	set_cond(d, z, d->zones[z].wp ? ZDEV_COND_CLOSED : ZDEV_COND_EMPTY);
}

static int res_check_active(const struct emu_dev *d)
{
	uint32_t max = d->hdr->max_active;

	if (!max || d->nr_imp + d->nr_exp + d->nr_closed < max)
		return 0;
	return -EOVERFLOW; /* BLK_STS_ZONE_ACTIVE_RESOURCE */
}

/* Close one implicitly open zone, round robin, to make room under the open limit. */
static void close_one_implicit(struct emu_dev *d)
{
	uint32_t nconv = d->hdr->nr_conv, nseq = d->hdr->nr_zones - nconv;

	for (uint32_t i = 0; i < nseq; i++) {
		uint32_t z = nconv + (d->imp_cursor + i) % nseq;
		if (d->zones[z].cond == ZDEV_COND_IMP_OPEN) {
			close_zone(d, z);
			d->imp_cursor = (z - nconv + 1) % nseq;
			return;
		}
	}
}

/* As null_blk: at the open limit an implicitly open zone may be closed, but only while the
 * active limit leaves room; when every open zone is explicit the request fails. */
static int res_check_open(struct emu_dev *d)
{
	uint32_t max = d->hdr->max_open;

	if (!max || d->nr_imp + d->nr_exp < max)
		return 0;
	if (d->nr_imp && !res_check_active(d)) {
		close_one_implicit(d);
		return 0;
	}
	return -ETOOMANYREFS; /* BLK_STS_ZONE_OPEN_RESOURCE */
}

/* Resources for an EMPTY or CLOSED zone about to open (or be finished). */
static int res_acquire(struct emu_dev *d, uint32_t z)
{
	if (d->zones[z].cond == ZDEV_COND_EMPTY) {
		int ret = res_check_active(d);
		if (ret)
			return ret;
	}
	return res_check_open(d);
}

/* Power-on: every open zone comes back closed (or empty). */
static void power_cycle_zones(struct emu_dev *d)
{
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint8_t c = d->zones[z].cond;
		if (c == ZDEV_COND_IMP_OPEN || c == ZDEV_COND_EXP_OPEN)
			close_zone(d, z);
	}
}

/* ------------------------------------------------------------------------------------------
 * The volatile-write journal.
 */

static uint32_t jrec_crc(struct emu_jrec *r)
{
	uint32_t saved = r->crc, crc;

	r->crc = 0;
	crc = crc32c(0, r, sizeof(*r));
	r->crc = saved;
	return crc;
}

static int jrnl_write_block(struct emu_dev *d, uint32_t slot)
{
	uint32_t blk = slot / (uint32_t)JREC_PER_BLK;

	return full_pwrite(d->fd, (uint8_t *)d->jrnl + (uint64_t)blk * EMU_BLK, EMU_BLK,
			   d->hdr->jrnl_off + (uint64_t)blk * EMU_BLK);
}

/* One record, one block write: a killed process leaves the record either whole or absent. */
static int jrnl_append(struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len, uint64_t undo)
{
	struct emu_jrec *r = &d->jrnl[d->jcount];
	int ret;

	memset(r, 0, sizeof(*r));
	r->gen = d->hdr->generation;
	r->off = off;
	r->len = len;
	r->undo_foff = undo;
	r->zone = z;
	r->epoch = d->zones[z].epoch;
	r->crc = jrec_crc(r);
	ret = jrnl_write_block(d, d->jcount);
	if (ret) {
		memset(r, 0, sizeof(*r));
		return ret;
	}
	d->jcount++;
	return 0;
}

static void jrnl_clear(struct emu_dev *d)
{
	memset(d->jrnl, 0, (size_t)d->jcount * sizeof(struct emu_jrec));
	d->jcount = 0;
	d->undo_used = 0;
}

/* Everything in the cache becomes durable: data synced, zone table written, then the
 * generation bump (one block) voids the journal, then synced again. */
static int flush_locked(struct emu_dev *d)
{
	uint8_t *dirty;
	int ret, changed = 0;

	ret = emu_sync(d);
	if (ret)
		return ret;
	dirty = calloc(d->table_blocks, 1);
	if (!dirty)
		return -ENOMEM;
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		if (table_update(d, z)) {
			dirty[z / ZENT_PER_BLK] = 1;
			changed = 1;
		}
	}
	for (uint32_t b = 0; !ret && b < d->table_blocks; b++)
		if (dirty[b])
			ret = table_write_block(d, b);
	free(dirty);
	if (ret || (!changed && !d->jcount))
		return ret;
	d->hdr->generation++;
	ret = hdr_write(d);
	if (ret) {
		d->hdr->generation--;
		return ret;
	}
	jrnl_clear(d);
	return emu_sync(d);
}

/* ------------------------------------------------------------------------------------------
 * Write log.
 */

static uint32_t lrec_crc(struct emu_lrec *r, const void *data, size_t len)
{
	uint32_t saved = r->crc, crc;

	r->crc = 0;
	crc = crc32c(0, r, sizeof(*r));
	r->crc = saved;
	return data ? crc32c(crc, data, len) : crc;
}

static uint32_t lhdr_crc(struct emu_lhdr *h)
{
	uint32_t saved = h->crc, crc;

	h->crc = 0;
	crc = crc32c(0, h, sizeof(*h));
	h->crc = saved;
	return crc;
}

static int write_all_iov(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		ssize_t n = writev(fd, iov, cnt);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Append one length-framed, checksummed record; a torn tail fails its CRC on reading.
 * *POS (optional) receives the record's offset in the log. */
static int log_append_at(struct emu_dev *d, enum log_type type, uint32_t zone, uint64_t off,
			 uint64_t len, const void *data, uint64_t *pos)
{
	struct emu_lrec r = {.magic = LOG_REC_MAGIC, .type = (uint8_t)type, .zone = zone,
			     .off = off, .len = data ? len : 0};
	struct iovec iov[2] = {{&r, sizeof(r)}, {(void *)data, data ? len : 0}};
	int ret;

	if (pos)
		*pos = d->log_size;
	if (d->log_fd < 0)
		return 0;
	r.crc = lrec_crc(&r, data, data ? len : 0);
	ret = write_all_iov(d->log_fd, iov, data ? 2 : 1);
	if (ret) {
		zlog_err("%s: write log append failed: %s", d->log_path, strerror(-ret));
		return ret;
	}
	d->log_size += sizeof(r) + r.len;
	return 0;
}

static int log_append(struct emu_dev *d, enum log_type type, uint32_t zone, uint64_t off,
		      uint64_t len, const void *data)
{
	return log_append_at(d, type, zone, off, len, data, NULL);
}

/* The operation logged at POS failed after all: mark it void. Returns ERR. */
static int log_abort(struct emu_dev *d, uint64_t pos, int err)
{
	log_append(d, LOG_ABORT, 0, pos, 0, NULL); /* failure already reported, ERR wins */
	return err;
}

static int log_hdr_check(struct emu_lhdr *h, const char *path)
{
	if (memcmp(h->magic, LOG_MAGIC, 8)) {
		zlog_err("%s: not a zlfs-emu write log", path);
		return -EINVAL;
	}
	if (h->crc != lhdr_crc(h) || h->version != LOG_VERSION ||
	    (h->base != LOG_BASE_EMPTY && h->base != LOG_BASE_FILE)) {
		zlog_err("%s: corrupt or unsupported write log header", path);
		return -EUCLEAN;
	}
	return 0;
}

static void log_hdr_fill(struct emu_lhdr *l, const struct emu_hdr *h, enum log_base base)
{
	memset(l, 0, sizeof(*l));
	memcpy(l->magic, LOG_MAGIC, 8);
	l->version = LOG_VERSION;
	l->base = base;
	l->lblock_size = h->lblock_size;
	l->nr_zones = h->nr_zones;
	l->nr_conv = h->nr_conv;
	l->max_open = h->max_open;
	l->max_active = h->max_active;
	l->zone_size = h->zone_size;
	l->zone_capacity = h->zone_capacity;
	l->crc = lhdr_crc(l);
}

static int log_geometry_matches(const struct emu_lhdr *l, const struct emu_hdr *h)
{
	return l->lblock_size == h->lblock_size && l->nr_zones == h->nr_zones &&
	       l->nr_conv == h->nr_conv && l->max_open == h->max_open &&
	       l->max_active == h->max_active && l->zone_size == h->zone_size &&
	       l->zone_capacity == h->zone_capacity;
}

/*
 * Walk the records of the open log FD (positioned nowhere in particular). Calls FN for each
 * intact record (payload in an aligned buffer for writes) and stops at the first torn or
 * corrupt one. *END receives the offset just past the last intact record.
 */
typedef int (*log_walk_fn)(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos);

static int log_walk(int fd, uint64_t *end, log_walk_fn fn, void *ctx)
{
	uint64_t pos = sizeof(struct emu_lhdr);
	struct stat st;
	int ret = 0;

	if (fstat(fd, &st))
		return -errno;
	for (;;) {
		struct emu_lrec r;
		void *payload = NULL;

		if (pos + sizeof(r) > (uint64_t)st.st_size)
			break;
		ret = full_pread(fd, &r, sizeof(r), pos);
		if (ret)
			break;
		if (r.magic != LOG_REC_MAGIC || r.type < LOG_WRITE || r.type > LOG_ABORT ||
		    r.len > (uint64_t)st.st_size - pos - sizeof(r) || (r.type != LOG_WRITE && r.len))
			break;
		if (r.len) {
			payload = blk_alloc(r.len);
			if (!payload) {
				ret = -ENOMEM;
				break;
			}
			ret = full_pread(fd, payload, r.len, pos + sizeof(r));
		}
		if (ret || r.crc != lrec_crc(&r, payload, r.len)) {
			free(payload);
			break;
		}
		ret = fn ? fn(ctx, &r, payload, pos) : 0;
		free(payload);
		if (ret)
			break;
		pos += sizeof(r) + r.len;
	}
	*end = pos;
	return ret;
}

static int copy_sparse(const char *src, const char *dst);
static int image_clear_log_path(const char *path);

/* True when the image holds nothing a fresh image of its geometry would not: all sequential
 * zones empty and healthy, no pending faults, no allocated data in conventional zones. */
static int image_is_pristine(struct emu_dev *d)
{
	uint64_t conv_end = d->hdr->data_off + (uint64_t)d->hdr->nr_conv * d->hdr->zone_size;
	off_t pos;

	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++)
		if (d->zones[z].cond != ZDEV_COND_EMPTY || d->table[z].cond != ZDEV_COND_EMPTY)
			return 0;
	for (int i = 0; i < EMU_MAX_FAULTS; i++)
		if (d->hdr->faults[i].kind)
			return 0;
	if (!d->hdr->nr_conv)
		return 1;
	pos = lseek(d->fd, (off_t)d->hdr->data_off, SEEK_DATA);
	if (pos < 0)
		return errno == ENXIO;
	return (uint64_t)pos >= conv_end;
}

/* A new log: on an image that holds data, first make its state durable and save it as
 * LOG.base, so that replay can start from it. */
static int log_begin(struct emu_dev *d, const char *image, const char *log, int fd)
{
	enum log_base base = image_is_pristine(d) ? LOG_BASE_EMPTY : LOG_BASE_FILE;
	struct emu_lhdr lh;
	char basepath[EMU_PATH_MAX + 8];
	int ret;

	if (base == LOG_BASE_FILE) {
		snprintf(basepath, sizeof(basepath), "%s.base", log);
		ret = flush_locked(d);
		if (!ret)
			ret = copy_sparse(image, basepath);
		if (!ret)
			ret = image_clear_log_path(basepath);
		if (ret) {
			zlog_err("%s: cannot save the log's base image: %s", basepath, strerror(-ret));
			return ret;
		}
	}
	log_hdr_fill(&lh, d->hdr, base);
	ret = full_pwrite(fd, &lh, sizeof(lh), 0);
	if (!ret && fdatasync(fd))
		ret = -errno;
	return ret;
}

static int write_locked(struct emu_dev *d, const void *buf, size_t len, uint64_t off);
static int mgmt_reset(struct emu_dev *d, uint32_t z);
static int mgmt_finish(struct emu_dev *d, uint32_t z);

/* The log's last record, kept while walking it: an operation there may be in doubt. */
struct log_tail {
	struct emu_lrec rec;
	void *payload;
};

static int keep_tail(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	struct log_tail *t = ctx;

	(void)pos;
	free(t->payload);
	t->payload = NULL;
	t->rec = *r;
	if (r->len) {
		t->payload = blk_alloc(r->len);
		if (!t->payload)
			return -ENOMEM;
		memcpy(t->payload, payload, r->len);
	}
	return 0;
}

/*
 * The process that wrote the log may have been killed after logging its last operation and
 * before (or while) applying it. Apply it now unless it took effect; a write to a sequential
 * zone took effect exactly when the write pointer is past it. Called before the log is
 * attached, so nothing here is logged again. Never fails the open: a mismatch is reported.
 */
static void log_redo(struct emu_dev *d, const char *log, const struct log_tail *t)
{
	const struct emu_lrec *r = &t->rec;
	uint32_t z = r->zone;
	int ret = 0;

	if (!log_is_op(r->type) || z >= d->hdr->nr_zones)
		return;
	if (r->type == LOG_WRITE && !is_conv(d, z)) {
		uint64_t rel = r->off - zstart(d, z), wp = d->zones[z].wp;
		if (wp >= rel + r->len)
			return;
		ret = wp == rel ? write_locked(d, t->payload, r->len, r->off) : -ESPIPE;
	} else if (r->type == LOG_WRITE) {
		ret = write_locked(d, t->payload, r->len, r->off);
	} else if (r->type == LOG_RESET) {
		ret = mgmt_reset(d, z);
	} else if (r->type == LOG_FINISH) {
		ret = mgmt_finish(d, z);
	}
	if (ret)
		zlog_warn("%s: the image does not match the log's last operation (%s); replays past "
			  "it may fail", log, strerror(-ret));
	power_cycle_zones(d);
}

/* Continue an existing log: cut a torn tail and redo an operation left in doubt. */
static int log_continue(struct emu_dev *d, const char *log, int fd)
{
	struct log_tail tail = {0};
	struct emu_lhdr lh;
	struct stat st;
	uint64_t end = 0; /* log_size stays defined when the walk fails */
	int ret;

	ret = full_pread(fd, &lh, sizeof(lh), 0);
	if (ret)
		return ret;
	ret = log_hdr_check(&lh, log);
	if (ret)
		return ret;
	if (!log_geometry_matches(&lh, d->hdr)) {
		zlog_err("%s: write log was recorded on an image of another geometry", log);
		return -EINVAL;
	}
	ret = log_walk(fd, &end, keep_tail, &tail);
	if (!ret && fstat(fd, &st))
		ret = -errno;
	if (!ret && (uint64_t)st.st_size != end) {
		zlog_warn("%s: dropping a torn tail of %llu bytes", log,
			  (unsigned long long)((uint64_t)st.st_size - end));
		if (ftruncate(fd, (off_t)end))
			ret = -errno;
	}
	if (!ret)
		log_redo(d, log, &tail);
	free(tail.payload);
	d->log_size = end;
	return ret;
}

/* Attach the write log LOG to the device opened from IMAGE, starting it or continuing it. */
static int log_start(struct emu_dev *d, const char *image, const char *log)
{
	struct stat st;
	int fd, ret;

	if (strlen(log) >= sizeof(d->log_path)) {
		zlog_err("%s: write log path too long", log);
		return -ENAMETOOLONG;
	}
	fd = open(log, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: cannot open write log: %s", log, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
	} else if (st.st_size == 0) {
		ret = log_begin(d, image, log, fd);
		d->log_size = sizeof(struct emu_lhdr);
	} else {
		ret = log_continue(d, log, fd);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	d->log_fd = fd;
	snprintf(d->log_path, sizeof(d->log_path), "%s", log);
	if (st.st_size)
		ret = log_append(d, LOG_POWERON, 0, 0, 0, NULL);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Faults.
 */

const char *zemu_fault_name(enum zemu_fault fault)
{
	switch (fault) {
	case ZEMU_FAULT_OFFLINE: return "offline";
	case ZEMU_FAULT_READONLY: return "readonly";
	case ZEMU_FAULT_EIO_READ: return "eio-read";
	case ZEMU_FAULT_EIO_WRITE: return "eio-write";
	}
	return "unknown";
}

/* Fire (and consume) a one-shot fault of KIND inside [off, off + len). A fired fault is
 * removed from the header at once, so it fires once even across reopening. */
static int fault_fire(struct emu_dev *d, uint32_t kind, uint64_t off, uint64_t len)
{
	for (int i = 0; i < EMU_MAX_FAULTS; i++) {
		struct emu_fault_slot *f = &d->hdr->faults[i];
		if (f->kind != kind || f->off < off || f->off - off >= len)
			continue;
		memset(f, 0, sizeof(*f));
		if (!d->zd.readonly) {
			int ret = hdr_write(d);
			if (ret)
				zlog_err("%s: cannot record a fired fault: %s", d->zd.info.path,
					 strerror(-ret));
		}
		return -EIO;
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Timing model (docs/emulator.md, "Timing model"). Simulated, never slept, so a result
 * depends only on the sequence of operations, not on the machine.
 *
 * A write crosses the host link (one transfer at a time, in issue order); every program unit
 * of the zone it completes is then programmed on the unit's die, which is busy for prog_ns;
 * consecutive units of a zone go to consecutive dies, so a superpage of DIES units programs
 * in parallel. A unit the write leaves incomplete is held by the device until later writes
 * complete it. The caller's memory stands for the controller's buffer: it counts as in use
 * until the write's programs end, and a later write from the same memory cannot start its
 * transfer before then. That is where buffer policies differ: a buffer reused at once waits
 * for its own program, a pool of buffers used in turn does not.
 */

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int tm_on(const struct emu_dev *d) { return d->tm.t.dies != 0; }

void zemu_timing_default(struct zemu_timing *t)
{
	t->dies = 4;                 /* 768 KiB superpage / 192 KiB program unit */
	t->prog_unit = 192u << 10;   /* one die's program unit in the Zoned UFS study */
	t->prog_ns = 285000;         /* 4 dies x 192 KiB / 285 us = 2.76 GB/s: UFS 4.0 seq. write */
	t->link_mbs = 4600;          /* UFS 4.0 HS-G5 x2 lanes after encoding, ~4.6 GB/s */
}

/* 0 when T is off or a usable model, -EINVAL with WHY set otherwise. */
static int timing_check(const struct zemu_timing *t, const char **why)
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
	return ret ? ret : timing_check(t, &why);
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

static void tm_write(struct emu_dev *d, uint32_t z, const void *buf, uint64_t len, uint64_t rel)
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
static void tm_flush(struct emu_dev *d)
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
static void tm_finish(struct emu_dev *d, uint32_t z, uint64_t wp)
{
	if (!tm_on(d))
		return;
	if (wp % d->tm.t.prog_unit && wp < zcap(d, z))
		tm_pad(d, z, wp, d->tm.link_free);
	d->tm.partial[z] = 0;
}

static void tm_reset_zone(struct emu_dev *d, uint32_t z)
{
	if (tm_on(d))
		d->tm.partial[z] = 0;
}

static int tm_init(struct emu_dev *d)
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

static void tm_stats(const struct emu_dev *d, struct zemu_stats *st)
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

/* ------------------------------------------------------------------------------------------
 * Device operations.
 */

static uint64_t reported_wp(const struct emu_dev *d, uint32_t z)
{
	const struct emu_zone *zn = &d->zones[z];

	switch (zn->cond) {
	case ZDEV_COND_NOT_WP:
	case ZDEV_COND_FULL:
		/* as sd_zbc.c / nvme zns.c report it: the zone end */
		return zstart(d, z) + d->hdr->zone_size;
	case ZDEV_COND_RDONLY:
	case ZDEV_COND_OFFLINE:
		/* no valid write pointer: null_blk reports (sector_t)-1 */
		return UINT64_MAX;
	default:
		return zstart(d, z) + zn->wp;
	}
}

static int emu_report(struct zdev *zd, uint32_t first, uint32_t count, struct zdev_zone *zones)
{
	struct emu_dev *d = to_emu(zd);

	pthread_mutex_lock(&d->lock);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t z = first + i;
		struct zdev_zone *o = &zones[i];

		o->start = zstart(d, z);
		o->len = d->hdr->zone_size;
		o->capacity = zcap(d, z);
		o->wp = reported_wp(d, z);
		o->type = is_conv(d, z) ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
		o->cond = d->zones[z].cond;
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* How many bytes of [off, off + len), inside zone Z, hold data: the rest reads as zeros. */
static uint64_t valid_len(const struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len)
{
	uint64_t end = zstart(d, z) + d->zones[z].wp;

	if (is_conv(d, z))
		return len;
	if (off >= end)
		return 0;
	return min_u64(len, end - off);
}

static int read_check(struct emu_dev *d, uint64_t off, uint64_t len)
{
	uint32_t zlast = (uint32_t)((off + len - 1) / d->hdr->zone_size);

	for (uint32_t z = (uint32_t)(off / d->hdr->zone_size); z <= zlast; z++)
		if (d->zones[z].cond == ZDEV_COND_OFFLINE)
			return -EIO;
	return fault_fire(d, ZEMU_FAULT_EIO_READ, off, len);
}

/* Reads take the lock only to look at zone state, not across the data transfer. */
static int emu_read(struct zdev *zd, void *buf, size_t len, uint64_t off)
{
	struct emu_dev *d = to_emu(zd);
	uint64_t pos = off, end = off + len;
	uint8_t *p = buf;
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = read_check(d, off, len);
	pthread_mutex_unlock(&d->lock);
	while (!ret && pos < end) {
		uint32_t z = (uint32_t)(pos / d->hdr->zone_size);
		uint64_t n = min_u64(end, zstart(d, z) + d->hdr->zone_size) - pos, v;

		pthread_mutex_lock(&d->lock);
		v = valid_len(d, z, pos, n);
		pthread_mutex_unlock(&d->lock);
		if (v)
			ret = img_read(d, p + (pos - off), v, d->hdr->data_off + pos);
		memset(p + (pos - off) + v, 0, n - v);
		pos += n;
	}
	return ret;
}

static int jrnl_make_room(struct emu_dev *d, uint64_t undo_len)
{
	if (d->jcount < d->hdr->jslots && d->undo_used + undo_len <= d->hdr->undo_len)
		return 0;
	/* a full cache destages: the device flushes on its own */
	return flush_locked(d);
}

/* Conventional zones: any offset, but the old data is saved first so a power cut can bring
 * it back. A write larger than the whole undo area is written through and made durable. */
static int write_conv(struct emu_dev *d, const void *buf, size_t len, uint64_t off)
{
	uint64_t foff = d->hdr->data_off + off, ulen = round_up(len, EMU_BLK), undo, lpos;
	uint32_t z = (uint32_t)(off / d->hdr->zone_size);
	void *old;
	int ret;

	if ((off + len - 1) / d->hdr->zone_size >= d->hdr->nr_conv)
		return -EIO; /* runs into a sequential zone, not at its write pointer */
	ret = fault_fire(d, ZEMU_FAULT_EIO_WRITE, off, len);
	if (ret)
		return ret;
	if (ulen > d->hdr->undo_len) {
		ret = flush_locked(d);
		if (!ret)
			ret = log_append_at(d, LOG_WRITE, z, off, len, buf, &lpos);
		if (!ret)
			ret = img_write(d, buf, len, foff);
		if (!ret)
			ret = emu_sync(d);
		return ret ? log_abort(d, lpos, ret) : 0;
	}
	ret = jrnl_make_room(d, ulen);
	if (!ret)
		ret = log_append_at(d, LOG_WRITE, z, off, len, buf, &lpos);
	if (ret)
		return ret;
	old = blk_alloc(len);
	if (!old)
		return log_abort(d, lpos, -ENOMEM);
	undo = d->hdr->undo_off + d->undo_used;
	ret = img_read(d, old, len, foff);
	if (!ret)
		ret = img_write(d, old, len, undo);
	free(old);
	if (!ret)
		ret = jrnl_append(d, z, off, len, undo);
	if (ret)
		return log_abort(d, lpos, ret);
	d->undo_used += ulen;
	ret = img_write(d, buf, len, foff);
	return ret ? log_abort(d, lpos, ret) : 0;
}

/* The checks a host-managed device makes before a write to a sequential zone. */
static int seq_write_check(struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len)
{
	struct emu_zone *zn = &d->zones[z];

	if (zn->cond == ZDEV_COND_FULL || zn->cond == ZDEV_COND_RDONLY ||
	    zn->cond == ZDEV_COND_OFFLINE)
		return -EIO;
	if (off != zstart(d, z) + zn->wp)
		return -EIO;
	if (zn->wp + len > zcap(d, z))
		return -EIO;
	if (zn->cond == ZDEV_COND_EMPTY || zn->cond == ZDEV_COND_CLOSED) {
		int ret = res_acquire(d, z);
		if (ret)
			return ret;
		set_cond(d, z, ZDEV_COND_IMP_OPEN);
	}
	return 0;
}

/* Data first, record second: a process killed in between loses only this unfinished write. */
static int write_seq(struct emu_dev *d, uint32_t z, const void *buf, size_t len, uint64_t off)
{
	struct emu_zone *zn = &d->zones[z];
	uint64_t lpos;
	int ret;

	ret = seq_write_check(d, z, off, len);
	if (!ret)
		ret = fault_fire(d, ZEMU_FAULT_EIO_WRITE, off, len);
	if (!ret)
		ret = jrnl_make_room(d, 0);
	if (!ret)
		ret = log_append_at(d, LOG_WRITE, z, off, len, buf, &lpos);
	if (ret)
		return ret;
	ret = img_write(d, buf, len, d->hdr->data_off + off);
	if (!ret)
		ret = jrnl_append(d, z, off, len, 0);
	if (ret)
		return log_abort(d, lpos, ret);
	zn->wp += len;
	if (zn->wp == zcap(d, z))
		set_cond(d, z, ZDEV_COND_FULL);
	return 0;
}

static int write_locked(struct emu_dev *d, const void *buf, size_t len, uint64_t off)
{
	uint32_t z = (uint32_t)(off / d->hdr->zone_size);
	int ret = is_conv(d, z) ? write_conv(d, buf, len, off) : write_seq(d, z, buf, len, off);

	if (!ret)
		tm_write(d, z, buf, len, off - zstart(d, z));
	return ret;
}

/* Writes hold the lock across the transfer: the journal must list them in wp order. */
static int emu_write(struct zdev *zd, const void *buf, size_t len, uint64_t off)
{
	struct emu_dev *d = to_emu(zd);
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = write_locked(d, buf, len, off);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int mgmt_open(struct emu_dev *d, uint32_t z)
{
	int ret;

	switch (d->zones[z].cond) {
	case ZDEV_COND_EXP_OPEN:
		return 0;
	case ZDEV_COND_EMPTY:
	case ZDEV_COND_CLOSED:
		ret = res_acquire(d, z);
		if (ret)
			return ret;
		break;
	case ZDEV_COND_IMP_OPEN:
		break;
	default:
		return -EIO;
	}
	set_cond(d, z, ZDEV_COND_EXP_OPEN);
	return 0;
}

static int mgmt_close(struct emu_dev *d, uint32_t z)
{
	switch (d->zones[z].cond) {
	case ZDEV_COND_CLOSED:
		return 0;
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
		close_zone(d, z);
		return 0;
	default:
		return -EIO;
	}
}

/* Log, then change zone Z to COND durably; a reset also empties it into a new epoch. */
static int mgmt_commit(struct emu_dev *d, uint32_t z, enum log_type type, uint8_t cond)
{
	uint64_t lpos;
	int ret;

	ret = log_append_at(d, type, z, zstart(d, z), 0, NULL, &lpos);
	if (ret)
		return ret;
	set_cond(d, z, cond);
	if (type == LOG_RESET) {
		d->zones[z].wp = 0;
		d->zones[z].epoch++;
	}
	ret = zone_persist(d, z);
	return ret ? log_abort(d, lpos, ret) : 0;
}

/* Finish is durable at once, together with the zone's data written so far. */
static int mgmt_finish(struct emu_dev *d, uint32_t z)
{
	int ret;

	switch (d->zones[z].cond) {
	case ZDEV_COND_FULL:
		return 0;
	case ZDEV_COND_EMPTY:
	case ZDEV_COND_CLOSED:
		/* a finish passes through open: null_blk checks resources here too */
		ret = res_acquire(d, z);
		if (ret)
			return ret;
		break;
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
		break;
	default:
		return -EIO;
	}
	ret = mgmt_commit(d, z, LOG_FINISH, ZDEV_COND_FULL);
	if (!ret)
		tm_finish(d, z, d->zones[z].wp);
	return ret;
}

/* Reset is durable at once; the new epoch voids the zone's records still in the journal. */
static int mgmt_reset(struct emu_dev *d, uint32_t z)
{
	int ret;

	switch (d->zones[z].cond) {
	case ZDEV_COND_EMPTY:
		return 0;
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
	case ZDEV_COND_CLOSED:
	case ZDEV_COND_FULL:
		break;
	default:
		return -EIO;
	}
	ret = mgmt_commit(d, z, LOG_RESET, ZDEV_COND_EMPTY);
	if (ret)
		return ret;
	tm_reset_zone(d, z);
	/* Give the space back. Only an optimisation: reads past the write pointer return
	 * zeros whatever the file holds, so a file system without hole punching is fine. */
	(void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)(d->hdr->data_off + zstart(d, z)), (off_t)d->hdr->zone_size);
	return 0;
}

/* Open and close change only volatile state, so they are logged after the fact. */
static int mgmt_locked(struct emu_dev *d, enum zdev_mgmt_op op, uint32_t z)
{
	uint8_t cond = d->zones[z].cond;
	int ret;

	/* null_blk: conventional, read-only and offline zones refuse management with EIO */
	if (is_conv(d, z) || cond == ZDEV_COND_RDONLY || cond == ZDEV_COND_OFFLINE)
		return -EIO;
	switch (op) {
	case ZDEV_MGMT_RESET: return mgmt_reset(d, z);
	case ZDEV_MGMT_FINISH: return mgmt_finish(d, z);
	case ZDEV_MGMT_OPEN: ret = mgmt_open(d, z); break;
	case ZDEV_MGMT_CLOSE: ret = mgmt_close(d, z); break;
	default: return -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	return log_append(d, op == ZDEV_MGMT_OPEN ? LOG_OPEN : LOG_CLOSE, z, zstart(d, z), 0, NULL);
}

static int emu_mgmt(struct zdev *zd, enum zdev_mgmt_op op, uint32_t zone)
{
	struct emu_dev *d = to_emu(zd);
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = mgmt_locked(d, op, zone);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int emu_flush(struct zdev *zd)
{
	struct emu_dev *d = to_emu(zd);
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = flush_locked(d);
	if (!ret)
		tm_flush(d); /* the host's flush; the journal's own destaging is not one */
	if (!ret)
		ret = log_append(d, LOG_FLUSH, 0, 0, 0, NULL);
	/* what is durable in the image is durable in the log too */
	if (!ret && d->log_fd >= 0 && fdatasync(d->log_fd))
		ret = -errno;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static void emu_free(struct emu_dev *d)
{
	if (d->fd >= 0)
		close(d->fd); /* also drops the flock */
	if (d->log_fd >= 0)
		close(d->log_fd);
	free(d->hdr);
	free(d->table);
	free(d->zones);
	free(d->jrnl);
	free(d->tm.partial);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* Closing does not flush: unflushed writes stay in the "cache" (the journal), where a later
 * power cut can still drop them. */
static void emu_close(struct zdev *zd)
{
	emu_free(to_emu(zd));
}

static const struct zdev_ops emu_ops = {
	.report = emu_report,
	.read = emu_read,
	.write = emu_write,
	.mgmt = emu_mgmt,
	.flush = emu_flush,
	.close = emu_close,
};

int zdev_is_emu(const struct zdev *dev) { return dev && dev->ops == &emu_ops; }

/* ------------------------------------------------------------------------------------------
 * Opening: validate header and table, rebuild the state from the journal.
 */

static int bad_image(const char *path, int err, const char *why)
{
	zlog_err("%s: corrupt zlfs-emu image: %s", path, why);
	return err;
}

static int hdr_validate(struct emu_hdr *h, const char *path, uint64_t file_size)
{
	struct emu_hdr expect;
	const char *why;

	if (memcmp(h->magic, EMU_MAGIC, 8))
		return bad_image(path, -EINVAL, "bad magic");
	if (h->version != EMU_FMT_VERSION) {
		zlog_err("%s: zlfs-emu image format version %u is not supported (this is %u)", path,
			 h->version, EMU_FMT_VERSION);
		return -EINVAL;
	}
	if (h->crc != hdr_crc(h))
		return bad_image(path, -EUCLEAN, "header checksum mismatch");
	if ((h->lblock_size != 512 && h->lblock_size != 4096) || !h->zone_size ||
	    h->zone_size % h->lblock_size || !h->zone_capacity ||
	    h->zone_capacity > h->zone_size || h->zone_capacity % h->lblock_size)
		return bad_image(path, -EUCLEAN, "impossible block or zone size");
	if (!h->nr_zones || h->nr_zones > EMU_MAX_ZONES || h->nr_conv >= h->nr_zones ||
	    h->zone_size > UINT64_MAX / 2 / h->nr_zones)
		return bad_image(path, -EUCLEAN, "impossible zone count");
	if (h->max_open && h->max_active && h->max_open > h->max_active)
		return bad_image(path, -EUCLEAN, "open limit above active limit");
	if (!h->jslots || h->jslots > EMU_JSLOTS_MAX)
		return bad_image(path, -EUCLEAN, "impossible journal size");
	expect = *h;
	hdr_layout(&expect);
	if (expect.table_off != h->table_off || expect.jrnl_off != h->jrnl_off ||
	    expect.undo_off != h->undo_off || expect.undo_len != h->undo_len ||
	    expect.data_off != h->data_off)
		return bad_image(path, -EUCLEAN, "region offsets do not match the geometry");
	if (!h->generation || !memchr(h->log_path, 0, sizeof(h->log_path)))
		return bad_image(path, -EUCLEAN, "bad generation or log path");
	if (timing_check(&h->timing, &why))
		return bad_image(path, -EUCLEAN, "impossible timing model");
	for (int i = 0; i < EMU_MAX_FAULTS; i++) {
		struct emu_fault_slot *f = &h->faults[i];
		if (f->kind && ((f->kind != ZEMU_FAULT_EIO_READ && f->kind != ZEMU_FAULT_EIO_WRITE) ||
				f->off >= (uint64_t)h->nr_zones * h->zone_size))
			return bad_image(path, -EUCLEAN, "bad fault entry");
	}
	if (file_size < h->data_off + (uint64_t)h->nr_zones * h->zone_size)
		return bad_image(path, -EUCLEAN, "image file is shorter than its geometry");
	return 0;
}

static int table_load(struct emu_dev *d, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	int ret;

	ret = full_pread(d->fd, d->table, (size_t)d->table_blocks * EMU_BLK, h->table_off);
	if (ret)
		return ret;
	for (uint32_t z = 0; z < h->nr_zones; z++) {
		struct emu_zent *e = &d->table[z];
		struct emu_zone *zn = &d->zones[z];
		int conv = z < h->nr_conv;

		if (e->crc != zent_crc(e))
			return bad_image(path, -EUCLEAN, "zone table checksum mismatch");
		if (conv ? e->cond != ZDEV_COND_NOT_WP :
			   (e->wp > h->zone_capacity || e->wp % h->lblock_size ||
			    (e->cond != ZDEV_COND_EMPTY && e->cond != ZDEV_COND_CLOSED &&
			     e->cond != ZDEV_COND_FULL && e->cond != ZDEV_COND_RDONLY &&
			     e->cond != ZDEV_COND_OFFLINE)))
			return bad_image(path, -EUCLEAN, "impossible zone table entry");
		zn->wp = conv ? 0 : e->wp;
		zn->epoch = e->epoch;
		zn->cond = e->cond;
	}
	return 0;
}

/* Replay the journal's current-generation prefix onto the durable zone state. */
static int jrnl_load(struct emu_dev *d, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	uint64_t cap = (uint64_t)h->nr_zones * h->zone_size;
	int ret;

	ret = full_pread(d->fd, d->jrnl, (size_t)h->jslots * sizeof(struct emu_jrec), h->jrnl_off);
	if (ret)
		return ret;
	for (d->jcount = 0; d->jcount < h->jslots; d->jcount++) {
		struct emu_jrec *r = &d->jrnl[d->jcount];
		struct emu_zone *zn;
		uint64_t rel;

		if (r->gen != h->generation || r->crc != jrec_crc(r))
			break;
		if (r->zone >= h->nr_zones || r->off > cap || r->len > cap - r->off ||
		    r->off / h->zone_size != r->zone)
			return bad_image(path, -EUCLEAN, "journal record out of range");
		if (r->undo_foff) {
			if (r->undo_foff < h->undo_off ||
			    r->undo_foff + round_up(r->len, EMU_BLK) > h->undo_off + h->undo_len)
				return bad_image(path, -EUCLEAN, "journal undo record out of range");
			d->undo_used = r->undo_foff + round_up(r->len, EMU_BLK) - h->undo_off;
		}
		zn = &d->zones[r->zone];
		if (r->zone < h->nr_conv || r->epoch != zn->epoch || zn->cond == ZDEV_COND_FULL ||
		    zn->cond == ZDEV_COND_RDONLY || zn->cond == ZDEV_COND_OFFLINE)
			continue; /* void, or already durable in the zone table */
		rel = r->off - zstart(d, r->zone);
		if (rel + r->len <= zn->wp)
			continue;
		if (rel != zn->wp || rel + r->len > h->zone_capacity)
			return bad_image(path, -EUCLEAN, "journal record not at the write pointer");
		zn->wp += r->len;
	}
	/* slots past the prefix are stale: forget them so block rewrites clear them */
	memset(d->jrnl + d->jcount, 0, (size_t)(h->jslots - d->jcount) * sizeof(struct emu_jrec));
	return 0;
}

/* Power-on conditions from the durable state: open zones come back closed. */
static void derive_conds(struct emu_dev *d)
{
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		struct emu_zone *zn = &d->zones[z];
		uint8_t c = zn->cond;

		if (c != ZDEV_COND_FULL && c != ZDEV_COND_RDONLY && c != ZDEV_COND_OFFLINE)
			c = !zn->wp ? ZDEV_COND_EMPTY :
			    zn->wp == d->hdr->zone_capacity ? ZDEV_COND_FULL : ZDEV_COND_CLOSED;
		zn->cond = ZDEV_COND_EMPTY;
		set_cond(d, z, c);
	}
}

static void fill_public(struct emu_dev *d, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	struct zdev_geometry *g = &d->zd.geo;
	struct zdev_info *in = &d->zd.info;

	d->zd.ops = &emu_ops;
	g->lblock_size = h->lblock_size;
	g->nr_zones = h->nr_zones;
	g->nr_conv = h->nr_conv;
	g->max_open = h->max_open;
	g->max_active = h->max_active;
	g->zone_size = h->zone_size;
	g->zone_capacity = h->zone_capacity;
	g->capacity = (uint64_t)h->nr_zones * h->zone_size;
	in->kind = ZDEV_KIND_EMU;
	snprintf(in->path, sizeof(in->path), "%s", path);
	snprintf(in->model, sizeof(in->model), "zlfs-emu");
	snprintf(in->vendor, sizeof(in->vendor), "zlfs");
	snprintf(in->firmware, sizeof(in->firmware), "%s fmt%u", ZLFS_VERSION, EMU_FMT_VERSION);
}

static int emu_lock_fd(int fd, int readonly, const char *path)
{
	int err;

	if (!flock(fd, (readonly ? LOCK_SH : LOCK_EX) | LOCK_NB))
		return 0;
	err = errno;
	if (err == EWOULDBLOCK)
		return -EBUSY; /* the caller says so: zdev_open knows more about who holds it */
	zlog_err("%s: cannot lock: %s", path, strerror(err));
	return -err;
}

static int emu_open_fd(const char *path, int readonly, int direct, int *fdp)
{
	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | (direct ? O_DIRECT : 0);
	int fd = open(path, flags), ret;
	struct stat st;

	if (fd < 0) {
		ret = -errno;
		if (direct && errno == EINVAL)
			zlog_err("%s: the file system under the image does not support O_DIRECT", path);
		else
			zlog_err("%s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		zlog_err("%s: not a regular file", path);
		return -ENODEV;
	}
	ret = emu_lock_fd(fd, readonly, path);
	if (ret) {
		close(fd);
		return ret;
	}
	*fdp = fd;
	return 0;
}

static int emu_alloc_state(struct emu_dev *d)
{
	const struct emu_hdr *h = d->hdr;

	d->table_blocks = (uint32_t)(table_bytes(h->nr_zones) / EMU_BLK);
	d->table = blk_alloc((size_t)d->table_blocks * EMU_BLK);
	d->zones = calloc(h->nr_zones, sizeof(*d->zones));
	d->jrnl = blk_alloc((size_t)h->jslots * sizeof(struct emu_jrec));
	return d->table && d->zones && d->jrnl ? 0 : -ENOMEM;
}

static int emu_load(struct emu_dev *d, const char *path)
{
	struct stat st;
	int ret;

	if (fstat(d->fd, &st))
		return -errno;
	ret = full_pread(d->fd, d->hdr, EMU_BLK, 0);
	if (ret)
		return ret;
	ret = hdr_validate(d->hdr, path, (uint64_t)st.st_size);
	if (!ret)
		ret = emu_alloc_state(d);
	if (!ret)
		ret = table_load(d, path);
	if (!ret)
		ret = jrnl_load(d, path);
	if (!ret)
		ret = tm_init(d);
	if (ret)
		return ret;
	derive_conds(d);
	fill_public(d, path);
	return 0;
}

/* NOLOG: internal opens (inject, power cut, replay) never touch the write log. They say
 * when the image is busy; zdev_open says it for the others. */
static int emu_open_internal(const char *path, const struct zdev_open_opts *opts, int nolog,
			     struct emu_dev **out)
{
	struct emu_dev *d = calloc(1, sizeof(*d));
	const char *log;
	int ret;

	if (!d)
		return -ENOMEM;
	d->fd = -1;
	d->log_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	d->hdr = blk_alloc(EMU_BLK);
	if (!d->hdr) {
		emu_free(d);
		return -ENOMEM;
	}
	d->direct = opts->direct;
	d->zd.readonly = opts->readonly;
	ret = emu_open_fd(path, opts->readonly, opts->direct, &d->fd);
	if (ret == -EBUSY && nolog)
		zlog_err("%s is in use (mounted or open elsewhere)", path);
	if (!ret)
		ret = emu_load(d, path);
	log = opts->emu_log ? opts->emu_log : d->hdr->log_path;
	if (!ret && !nolog && !opts->readonly && log[0])
		ret = log_start(d, path, log);
	if (ret) {
		emu_free(d);
		return ret;
	}
	*out = d;
	return 0;
}

int zdev_emu_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out)
{
	static const struct zdev_open_opts defaults;
	struct emu_dev *d;
	int ret;

	*out = NULL;
	ret = emu_open_internal(path, opts ? opts : &defaults, 0, &d);
	if (!ret)
		*out = &d->zd;
	return ret;
}

int zdev_emu_probe(const char *path)
{
	char magic[8];
	struct stat st;
	int fd, ret;

	if (stat(path, &st)) {
		ret = -errno;
		zlog_err("%s: %s", path, strerror(errno));
		return ret;
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: %s", path, strerror(errno));
		return ret;
	}
	ret = full_pread(fd, magic, sizeof(magic), 0);
	close(fd);
	if (ret)
		return 0; /* unreadable as an image: not ours */
	return !memcmp(magic, EMU_MAGIC, sizeof(magic));
}

int zemu_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out)
{
	int ret;

	*out = NULL;
	ret = zdev_emu_probe(path);
	if (ret < 0)
		return ret;
	if (!ret) {
		zlog_err("%s: not a zlfs-emu image (create one with zlfs-emu create)", path);
		return -ENODEV;
	}
	ret = zdev_emu_open(path, opts, out);
	if (ret == -EBUSY)
		zlog_err("%s is in use (mounted or open elsewhere)", path);
	if (!ret)
		(*out)->mark_fd = -1;
	return ret;
}

int zemu_read_geometry(const char *path, struct zdev_geometry *geo)
{
	struct emu_dev d;
	struct stat st;
	int ret;

	memset(&d, 0, sizeof(d));
	d.hdr = blk_alloc(EMU_BLK);
	if (!d.hdr)
		return -ENOMEM;
	d.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d.fd < 0 || fstat(d.fd, &st)) {
		ret = -errno;
		zlog_err("%s: %s", path, strerror(errno));
	} else {
		ret = full_pread(d.fd, d.hdr, EMU_BLK, 0);
		if (!ret && memcmp(d.hdr->magic, EMU_MAGIC, 8)) {
			zlog_err("%s: not a zlfs-emu image", path);
			ret = -ENODEV;
		} else if (!ret) {
			ret = hdr_validate(d.hdr, path, (uint64_t)st.st_size);
		}
		if (!ret) {
			fill_public(&d, path);
			*geo = d.zd.geo;
		}
	}
	if (d.fd >= 0)
		close(d.fd);
	free(d.hdr);
	return ret;
}

static int jrec_unflushed(const struct emu_dev *d, const struct emu_jrec *r);

int zemu_dev_stats(struct zdev *dev, struct zemu_stats *st)
{
	struct emu_dev *d;

	if (!zdev_is_emu(dev))
		return -EINVAL;
	d = to_emu(dev);
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&d->lock);
	st->format_version = d->hdr->version;
	st->generation = d->hdr->generation;
	st->journal_slots = d->hdr->jslots;
	for (uint32_t i = 0; i < d->jcount; i++)
		st->unflushed += jrec_unflushed(d, &d->jrnl[i]);
	for (int i = 0; i < EMU_MAX_FAULTS; i++)
		st->pending_faults += d->hdr->faults[i].kind != 0;
	if (d->log_fd >= 0)
		snprintf(st->log_path, sizeof(st->log_path), "%s", d->log_path);
	tm_stats(d, st);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Creating images.
 */

static int create_check(const char *path, const struct zemu_create_opts *o, struct emu_hdr *h)
{
	uint32_t lbs = o->lblock_size ? o->lblock_size : 4096;
	uint64_t cap = o->zone_capacity ? o->zone_capacity : o->zone_size, nz;
	const char *why;

#define CREATE_FAIL(...) do { zlog_err(__VA_ARGS__); return -EINVAL; } while (0)
	if (lbs != 512 && lbs != 4096)
		CREATE_FAIL("%s: block size must be 512 or 4096", path);
	if (!o->zone_size || o->zone_size % lbs)
		CREATE_FAIL("%s: zone size must be a nonzero multiple of the block size (%u)", path, lbs);
	if (cap > o->zone_size || cap % lbs)
		CREATE_FAIL("%s: zone capacity must be a multiple of the block size, at most the zone size",
			    path);
	nz = o->size / o->zone_size;
	if (!nz || nz > EMU_MAX_ZONES)
		CREATE_FAIL("%s: size must hold between 1 and %u zones", path, EMU_MAX_ZONES);
	if (o->nr_conv >= nz)
		CREATE_FAIL("%s: %u conventional zones leave no sequential zone of %llu", path,
			    o->nr_conv, (unsigned long long)nz);
	if (o->max_open && o->max_active && o->max_open > o->max_active)
		CREATE_FAIL("%s: max-open (%u) must not exceed max-active (%u)", path, o->max_open,
			    o->max_active);
	if (o->journal_slots > EMU_JSLOTS_MAX)
		CREATE_FAIL("%s: at most %u journal slots", path, EMU_JSLOTS_MAX);
	if (o->log_path && strlen(o->log_path) >= EMU_PATH_MAX - 1)
		CREATE_FAIL("%s: log path too long", path);
	if (timing_check(&o->timing, &why))
		CREATE_FAIL("%s: timing model: %s", path, why);
#undef CREATE_FAIL
	memcpy(h->magic, EMU_MAGIC, 8);
	h->version = EMU_FMT_VERSION;
	h->lblock_size = lbs;
	h->nr_zones = (uint32_t)nz;
	h->nr_conv = o->nr_conv;
	h->max_open = o->max_open;
	h->max_active = o->max_active;
	h->jslots = o->journal_slots ? o->journal_slots : EMU_JSLOTS_DEFAULT;
	h->zone_size = o->zone_size;
	h->zone_capacity = cap;
	h->generation = 1;
	h->timing = o->timing;
	hdr_layout(h);
	return 0;
}

/* A relative log path is stored absolute: the image may be opened from another directory. */
static int abs_log_path(const char *log, char *out, size_t len)
{
	char cwd[PATH_MAX];

	if (log[0] == '/') {
		snprintf(out, len, "%s", log);
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	if ((size_t)snprintf(out, len, "%s/%s", cwd, log) >= len)
		return -ENAMETOOLONG;
	return 0;
}

static int log_create_empty(const char *log, const struct emu_hdr *h)
{
	struct emu_lhdr lh;
	int fd, ret;

	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: cannot create write log: %s", log, strerror(errno));
		return ret;
	}
	log_hdr_fill(&lh, h, LOG_BASE_EMPTY);
	ret = full_pwrite(fd, &lh, sizeof(lh), 0);
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

/* Table first, header last: an interrupted create leaves a file without the magic. */
static int create_write(int fd, struct emu_hdr *h)
{
	uint64_t tbytes = table_bytes(h->nr_zones);
	struct emu_zent *t = blk_alloc(tbytes);
	int ret;

	if (!t)
		return -ENOMEM;
	for (uint32_t z = 0; z < h->nr_zones; z++)
		zent_set(&t[z], 0, 0, z < h->nr_conv ? ZDEV_COND_NOT_WP : ZDEV_COND_EMPTY);
	ret = ftruncate(fd, 0) ? -errno : 0;
	if (!ret)
		ret = ftruncate(fd, (off_t)(h->data_off + (uint64_t)h->nr_zones * h->zone_size)) ?
			      -errno : 0;
	if (!ret)
		ret = full_pwrite(fd, t, tbytes, h->table_off);
	free(t);
	if (!ret) {
		h->crc = hdr_crc(h);
		ret = full_pwrite(fd, h, EMU_BLK, 0);
	}
	if (!ret && fsync(fd))
		ret = -errno;
	return ret;
}

int zemu_create(const char *path, const struct zemu_create_opts *opts)
{
	struct emu_hdr *h = blk_alloc(EMU_BLK);
	struct stat st;
	int fd = -1, ret;

	if (!h)
		return -ENOMEM;
	ret = create_check(path, opts, h);
	if (!ret && opts->log_path)
		ret = abs_log_path(opts->log_path, h->log_path, sizeof(h->log_path));
	if (!ret) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			ret = -errno;
			zlog_err("%s: %s", path, strerror(errno));
		} else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			zlog_err("%s: an emulator image must be a regular file", path);
			ret = -EINVAL;
		} else {
			ret = emu_lock_fd(fd, 0, path);
			if (ret == -EBUSY)
				zlog_err("%s is in use (mounted or open elsewhere)", path);
		}
	}
	if (!ret)
		ret = create_write(fd, h);
	if (!ret && h->log_path[0])
		ret = log_create_empty(h->log_path, h);
	if (ret && ret != -EBUSY && ret != -EINVAL)
		zlog_err("%s: cannot create image: %s", path, strerror(-ret));
	if (fd >= 0)
		close(fd);
	free(h);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Fault injection.
 */

static int inject_zone(struct emu_dev *d, uint32_t z, uint8_t cond)
{
	if (is_conv(d, z)) {
		/* null_blk refuses too: conventional zones cannot change condition */
		zlog_err("%s: zone %u is conventional and cannot go %s", d->zd.info.path, z,
			 zdev_cond_name(cond));
		return -EINVAL;
	}
	if (d->zones[z].cond == cond)
		return 0;
	set_cond(d, z, cond);
	return zone_persist(d, z);
}

static int inject_eio(struct emu_dev *d, uint32_t kind, uint64_t off)
{
	for (int i = 0; i < EMU_MAX_FAULTS; i++) {
		struct emu_fault_slot *f = &d->hdr->faults[i];
		if (f->kind)
			continue;
		f->kind = kind;
		f->off = off;
		return hdr_write(d);
	}
	zlog_err("%s: already %d pending faults", d->zd.info.path, EMU_MAX_FAULTS);
	return -ENOSPC;
}

int zemu_inject_dev(struct zdev *dev, enum zemu_fault fault, uint64_t off)
{
	struct emu_dev *d;
	int ret;

	if (!zdev_is_emu(dev) || off >= dev->geo.capacity)
		return -EINVAL;
	if (dev->readonly)
		return -EROFS;
	d = to_emu(dev);
	pthread_mutex_lock(&d->lock);
	switch (fault) {
	case ZEMU_FAULT_OFFLINE:
		ret = inject_zone(d, zdev_zone_of(dev, off), ZDEV_COND_OFFLINE);
		break;
	case ZEMU_FAULT_READONLY:
		ret = inject_zone(d, zdev_zone_of(dev, off), ZDEV_COND_RDONLY);
		break;
	case ZEMU_FAULT_EIO_READ:
	case ZEMU_FAULT_EIO_WRITE:
		ret = inject_eio(d, fault, off / dev->geo.lblock_size * dev->geo.lblock_size);
		break;
	default:
		ret = -EINVAL;
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Only the header changes: the model is read at every open. */
int zemu_set_timing(const char *path, const struct zemu_timing *t)
{
	static const struct zdev_open_opts rw;
	struct emu_dev *d;
	const char *why;
	int ret;

	if (timing_check(t, &why)) {
		zlog_err("%s: timing model: %s", path, why);
		return -EINVAL;
	}
	ret = emu_open_internal(path, &rw, 1, &d);
	if (ret)
		return ret;
	d->hdr->timing = *t;
	ret = hdr_write(d);
	if (!ret && fdatasync(d->fd))
		ret = -errno;
	emu_free(d);
	return ret;
}

int zemu_inject(const char *path, enum zemu_fault fault, uint64_t off)
{
	static const struct zdev_open_opts opts;
	struct emu_dev *d;
	int ret;

	ret = emu_open_internal(path, &opts, 1, &d);
	if (ret)
		return ret;
	ret = zemu_inject_dev(&d->zd, fault, off);
	emu_free(d);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Power cut.
 */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Is journal record R a write still in the cache (not voided, not already durable)? */
static int jrec_unflushed(const struct emu_dev *d, const struct emu_jrec *r)
{
	const struct emu_zent *e = &d->table[r->zone];

	if (is_conv(d, r->zone))
		return 1;
	if (r->epoch != e->epoch || e->cond == ZDEV_COND_FULL || e->cond == ZDEV_COND_RDONLY ||
	    e->cond == ZDEV_COND_OFFLINE)
		return 0;
	return r->off + r->len - zstart(d, r->zone) > e->wp;
}

/* Bring back the old data under a dropped conventional write, from byte SKIP of it on. */
static int undo_conv(struct emu_dev *d, const struct emu_jrec *r, uint64_t skip)
{
	uint64_t n = r->len - skip;
	void *buf = blk_alloc(n);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = img_read(d, buf, n, r->undo_foff + skip);
	if (!ret)
		ret = img_write(d, buf, n, d->hdr->data_off + r->off + skip);
	free(buf);
	return ret;
}

/* Leading part of a torn write: half its blocks (at least one), or with a seed a random
 * number of blocks in [1, blocks - 1]. */
static uint64_t torn_bytes(const struct emu_dev *d, uint64_t len, uint64_t *rng, int seeded)
{
	uint64_t lbs = d->hdr->lblock_size, blocks = len / lbs, keep;

	if (seeded && blocks > 1)
		keep = 1 + splitmix64(rng) % (blocks - 1);
	else
		keep = blocks / 2 ? blocks / 2 : 1;
	return keep * lbs;
}

/* Drop the unflushed writes LIST[k..n) (the torn one partially), newest first so that
 * conventional blocks written twice come back to their oldest dropped content. */
static int powercut_apply(struct emu_dev *d, const uint32_t *list, long n, long k,
			  struct zemu_powercut_result *res)
{
	int ret = 0;

	for (long i = n - 1; !ret && i >= k; i--) {
		const struct emu_jrec *r = &d->jrnl[list[i]];
		uint64_t keep = (i == k && res->torn) ? res->torn_bytes : 0;

		if (is_conv(d, r->zone))
			ret = undo_conv(d, r, keep);
	}
	if (ret)
		return ret;
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint8_t c = d->table[z].cond;
		if (c == ZDEV_COND_EMPTY || c == ZDEV_COND_CLOSED)
			d->zones[z].wp = d->table[z].wp;
	}
	for (long i = 0; i < k + res->torn && i < n; i++) {
		const struct emu_jrec *r = &d->jrnl[list[i]];
		uint64_t len = i < k ? r->len : res->torn_bytes;

		if (!is_conv(d, r->zone))
			d->zones[r->zone].wp = r->off + len - zstart(d, r->zone);
	}
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint8_t c = d->table[z].cond;
		if (c == ZDEV_COND_EMPTY || c == ZDEV_COND_CLOSED)
			set_cond(d, z, !d->zones[z].wp ? ZDEV_COND_EMPTY :
				 d->zones[z].wp == d->hdr->zone_capacity ? ZDEV_COND_FULL :
				 ZDEV_COND_CLOSED);
	}
	power_cycle_zones(d);
	/* the surviving state is the new durable state */
	return flush_locked(d);
}

static int powercut_locked(struct emu_dev *d, long keep, uint64_t seed, int torn,
			   struct zemu_powercut_result *res)
{
	uint32_t *list = malloc(((size_t)d->jcount + 1) * sizeof(*list));
	uint64_t rng = seed;
	long n = 0, k;
	int ret;

	if (!list)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->jcount; i++)
		if (jrec_unflushed(d, &d->jrnl[i]))
			list[n++] = i;
	if (seed)
		k = (long)(splitmix64(&rng) % (uint64_t)(n + 1));
	else
		k = keep < 0 ? 0 : keep > n ? n : keep;
	memset(res, 0, sizeof(*res));
	res->unflushed = n;
	res->kept = k;
	res->dropped = n - k;
	if (torn && k < n) {
		res->torn = 1;
		res->torn_len = d->jrnl[list[k]].len;
		res->torn_bytes = torn_bytes(d, res->torn_len, &rng, seed != 0);
	}
	ret = powercut_apply(d, list, n, k, res);
	free(list);
	if (!ret)
		ret = log_append(d, LOG_POWERCUT, 0, 0, 0, NULL);
	return ret;
}

int zemu_powercut_dev_ex(struct zdev *dev, long keep, uint64_t seed, int torn,
			 struct zemu_powercut_result *res)
{
	struct zemu_powercut_result tmp;
	struct emu_dev *d;
	int ret;

	if (!zdev_is_emu(dev))
		return -EINVAL;
	if (dev->readonly)
		return -EROFS;
	d = to_emu(dev);
	pthread_mutex_lock(&d->lock);
	ret = powercut_locked(d, keep, seed, torn, res ? res : &tmp);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int zemu_powercut_dev(struct zdev *dev, long keep, uint64_t seed, int torn)
{
	struct zemu_powercut_result res;
	int ret = zemu_powercut_dev_ex(dev, keep, seed, torn, &res);

	return ret ? ret : (int)res.kept;
}

int zemu_powercut_ex(const char *path, long keep, uint64_t seed, int torn,
		     struct zemu_powercut_result *res)
{
	static const struct zdev_open_opts opts;
	struct emu_dev *d;
	int ret;

	/* opened with the image's write log, if any, so the log records the power cut */
	ret = emu_open_internal(path, &opts, 0, &d);
	if (ret == -EBUSY)
		zlog_err("%s is in use (mounted or open elsewhere)", path);
	if (ret)
		return ret;
	ret = zemu_powercut_dev_ex(&d->zd, keep, seed, torn, res);
	emu_free(d);
	return ret;
}

int zemu_powercut(const char *path, long keep, uint64_t seed, int torn)
{
	struct zemu_powercut_result res;
	int ret = zemu_powercut_ex(path, keep, seed, torn, &res);

	return ret ? ret : (int)res.kept;
}

/* ------------------------------------------------------------------------------------------
 * Copying images (LOG.base, replay output).
 */

static int copy_range(int sfd, int dfd, uint64_t off, uint64_t len)
{
	static const size_t chunk = 1u << 20;
	uint8_t *buf = NULL;
	int ret = 0;

	while (len) {
		loff_t in = (loff_t)off, outp = (loff_t)off;
		ssize_t n = buf ? -1 : copy_file_range(sfd, &in, dfd, &outp, len, 0);

		if (n < 0 && !buf) {
			if (errno == EINTR)
				continue;
			/* not supported across these files: fall back to plain copying */
			buf = malloc(chunk);
			if (!buf)
				return -ENOMEM;
			continue;
		}
		if (buf) {
			n = (ssize_t)min_u64(len, chunk);
			ret = full_pread(sfd, buf, (size_t)n, off);
			if (!ret)
				ret = full_pwrite(dfd, buf, (size_t)n, off);
			if (ret)
				break;
		} else if (n == 0) {
			ret = -EIO;
			break;
		}
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	return ret;
}

/* Copy SRC to DST keeping holes; written to a temporary name and renamed into place. */
static int copy_sparse(const char *src, const char *dst)
{
	char tmp[EMU_PATH_MAX + 16];
	struct stat st;
	int sfd, dfd, ret = 0;
	off_t pos = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	sfd = open(src, O_RDONLY | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	dfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (dfd < 0 || fstat(sfd, &st) || ftruncate(dfd, st.st_size))
		ret = -errno;
	while (!ret && pos < st.st_size) {
		off_t data = lseek(sfd, pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			data = pos; /* no SEEK_DATA here: copy everything */
			hole = st.st_size;
		} else {
			hole = lseek(sfd, data, SEEK_HOLE);
			if (hole < 0)
				hole = st.st_size;
		}
		ret = copy_range(sfd, dfd, (uint64_t)data, (uint64_t)(hole - data));
		pos = hole;
	}
	if (!ret && fsync(dfd))
		ret = -errno;
	if (dfd >= 0)
		close(dfd);
	close(sfd);
	if (!ret && rename(tmp, dst))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* A copied image must not go on appending to the original's write log, nor fire the
 * original's pending one-shot faults (the operation that met one was aborted, so replaying
 * the log would otherwise trip on it where the original did not). */
static int image_clear_log_path(const char *path)
{
	struct emu_hdr *h = blk_alloc(EMU_BLK);
	int fd, ret;

	if (!h)
		return -ENOMEM;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		free(h);
		return ret;
	}
	ret = full_pread(fd, h, EMU_BLK, 0);
	if (!ret && memcmp(h->magic, EMU_MAGIC, 8))
		ret = -EINVAL;
	if (!ret) {
		memset(h->log_path, 0, sizeof(h->log_path));
		memset(h->faults, 0, sizeof(h->faults));
		h->crc = hdr_crc(h);
		ret = full_pwrite(fd, h, EMU_BLK, 0);
		if (!ret && fsync(fd))
			ret = -errno;
	}
	close(fd);
	free(h);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Write log: counting and replay.
 */

static int log_open_checked(const char *log, struct emu_lhdr *lh)
{
	int fd = open(log, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: %s", log, strerror(errno));
		return ret;
	}
	ret = full_pread(fd, lh, sizeof(*lh), 0);
	if (!ret)
		ret = log_hdr_check(lh, log);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* Operations minus the aborted ones: each ABORT voids exactly one operation. */
static int count_op(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	(void)payload;
	(void)pos;
	if (log_is_op(r->type))
		(*(long *)ctx)++;
	else if (r->type == LOG_ABORT)
		(*(long *)ctx)--;
	return 0;
}

long zemu_log_count(const char *log_path)
{
	struct emu_lhdr lh;
	uint64_t end;
	long count = 0;
	int fd, ret;

	fd = log_open_checked(log_path, &lh);
	if (fd < 0)
		return fd;
	ret = log_walk(fd, &end, count_op, &count);
	close(fd);
	return ret ? ret : count;
}

struct kinds_ctx {
	char *kinds;
	long n, max;
};

static int kind_op(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	static const char letters[] = "?WFRXOC";
	struct kinds_ctx *k = ctx;

	(void)payload;
	(void)pos;
	if (log_is_op(r->type)) {
		if (k->n < k->max)
			k->kinds[k->n] = letters[r->type];
		k->n++;
	} else if (r->type == LOG_ABORT && k->n > 0) {
		k->n--;
	}
	return 0;
}

long zemu_log_kinds(const char *log_path, char *kinds, long max)
{
	struct kinds_ctx k = {kinds, 0, max};
	struct emu_lhdr lh;
	uint64_t end;
	int fd, ret;

	fd = log_open_checked(log_path, &lh);
	if (fd < 0)
		return fd;
	ret = log_walk(fd, &end, kind_op, &k);
	close(fd);
	return ret ? ret : k.n;
}

struct replay_ctx {
	struct zdev *dev;
	long n, done;
	int torn;
	uint64_t *aborted;    /* log offsets of aborted operations, ascending */
	size_t nr_aborted, cap_aborted, next_aborted;
};

static int collect_abort(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	struct replay_ctx *c = ctx;

	(void)payload;
	(void)pos;
	if (r->type != LOG_ABORT)
		return 0;
	if (c->nr_aborted == c->cap_aborted) {
		size_t cap = c->cap_aborted ? 2 * c->cap_aborted : 16;
		uint64_t *a = realloc(c->aborted, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		c->aborted = a;
		c->cap_aborted = cap;
	}
	c->aborted[c->nr_aborted++] = r->off;
	return 0;
}

static int is_aborted(struct replay_ctx *c, uint64_t pos)
{
	while (c->next_aborted < c->nr_aborted && c->aborted[c->next_aborted] < pos)
		c->next_aborted++;
	return c->next_aborted < c->nr_aborted && c->aborted[c->next_aborted] == pos;
}

/* Stops the walk with 1 once N operations have been applied. */
static int replay_op(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	struct replay_ctx *c = ctx;
	uint64_t len = r->len;
	uint32_t z = r->zone;
	int ret = 0;

	if (c->done == c->n)
		return 1;
	if (log_is_op(r->type) && is_aborted(c, pos))
		return 0;
	switch (r->type) {
	case LOG_POWERON:
		power_cycle_zones(to_emu(c->dev));
		return 0;
	case LOG_POWERCUT:
		zlog_err("write log holds a power cut before operation %ld: cannot replay past it",
			 c->done + 1);
		return -EOPNOTSUPP;
	case LOG_WRITE:
		if (c->torn && c->done + 1 == c->n)
			len = torn_bytes(to_emu(c->dev), len, NULL, 0);
		ret = zdev_write(c->dev, payload, len, r->off);
		break;
	case LOG_FLUSH: break; /* everything is made durable at the end */
	case LOG_ABORT: return 0;
	case LOG_RESET: ret = zdev_zone_reset(c->dev, z); break;
	case LOG_FINISH: ret = zdev_zone_finish(c->dev, z); break;
	case LOG_OPEN: ret = zdev_zone_open(c->dev, z); break;
	case LOG_CLOSE: ret = zdev_zone_close(c->dev, z); break;
	}
	if (ret) {
		zlog_err("write log operation %ld (type %u, zone %u) fails on replay: %s; "
			 "the log does not belong to this base image", c->done + 1, r->type, z,
			 strerror(-ret));
		return ret;
	}
	c->done++;
	return 0;
}

static int replay_base(const char *log, const struct emu_lhdr *lh, const char *out)
{
	char base[EMU_PATH_MAX + 8];
	struct zemu_create_opts co = {
		.lblock_size = lh->lblock_size, .zone_size = lh->zone_size,
		.zone_capacity = lh->zone_capacity, .nr_conv = lh->nr_conv,
		.max_open = lh->max_open, .max_active = lh->max_active,
		.size = (uint64_t)lh->nr_zones * lh->zone_size,
	};
	int ret;

	if (lh->base == LOG_BASE_EMPTY) {
		unlink(out); /* a fresh file, not a rewrite of one someone may have open */
		return zemu_create(out, &co);
	}
	snprintf(base, sizeof(base), "%s.base", log);
	ret = copy_sparse(base, out);
	if (ret)
		zlog_err("%s: cannot copy the log's base image: %s", base, strerror(-ret));
	return ret ? ret : image_clear_log_path(out);
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int replay_check(const char *image, const char *log, const struct emu_lhdr *lh,
			const char *out)
{
	struct zdev_geometry g;
	int ret;

	if ((image && same_file(image, out)) || same_file(log, out)) {
		zlog_err("%s: replay output must be a new file, not the image or the log", out);
		return -EINVAL;
	}
	if (!image)
		return 0;
	ret = zemu_read_geometry(image, &g);
	if (ret)
		return ret;
	if (g.lblock_size != lh->lblock_size || g.nr_zones != lh->nr_zones ||
	    g.nr_conv != lh->nr_conv || g.zone_size != lh->zone_size ||
	    g.zone_capacity != lh->zone_capacity) {
		zlog_err("%s: write log %s was recorded on an image of another geometry", image, log);
		return -EINVAL;
	}
	return 0;
}

static int replay_run(int fd, const char *out, long n, int torn)
{
	static const struct zdev_open_opts opts;
	struct replay_ctx c = {.n = n, .torn = torn};
	struct emu_dev *d;
	uint64_t end;
	int ret;

	ret = emu_open_internal(out, &opts, 1, &d);
	if (ret)
		return ret;
	d->nosync = 1;
	c.dev = &d->zd;
	ret = log_walk(fd, &end, collect_abort, &c);
	if (!ret)
		ret = log_walk(fd, &end, replay_op, &c);
	if (ret == 1)
		ret = 0;
	if (!ret && c.done < n) {
		zlog_err("write log has only %ld operations, %ld asked for", c.done, n);
		ret = -EINVAL;
	}
	d->nosync = 0;
	if (!ret) {
		pthread_mutex_lock(&d->lock);
		ret = flush_locked(d);
		pthread_mutex_unlock(&d->lock);
	}
	free(c.aborted);
	emu_free(d);
	return ret;
}

int zemu_replay(const char *image, const char *log_path, long n, const char *out, int torn)
{
	struct emu_lhdr lh;
	long count;
	int fd, ret;

	if (n < 0)
		return -EINVAL;
	count = zemu_log_count(log_path);
	if (count < 0)
		return (int)count;
	if (n > count) {
		zlog_err("%s: write log has only %ld operations, %ld asked for", log_path, count, n);
		return -EINVAL;
	}
	fd = log_open_checked(log_path, &lh);
	if (fd < 0)
		return fd;
	ret = replay_check(image, log_path, &lh, out);
	if (!ret) {
		/* from here on OUT is ours: a half-built one is removed, never left behind */
		ret = replay_base(log_path, &lh, out);
		if (!ret)
			ret = replay_run(fd, out, n, torn);
		if (ret)
			unlink(out);
	}
	close(fd);
	return ret;
}
