/*
 * zdev_emu_impl.h - what the emulator's files share (private to fs/zdev_emu*.c).
 *
 * Owns: the image's on-disk structures (header block, zone table entry, journal record, write
 * log header and record), the in-memory device, and the functions one emulator file calls in
 * another. Nothing outside the emulator includes it: the rest of fs/ sees zdev.h and
 * zdev_emu.h only.
 *
 * Files and their concerns (each may call the ones it needs through this header):
 *   zdev_emu.c          the zdev_ops of an emulated device, opening, statistics
 *   zdev_emu_zones.c    zone conditions, open/active limits, reports, zone management
 *   zdev_emu_image.c    image format and validation, image I/O, create, copies
 *   zdev_emu_journal.c  the volatile-write journal with its undo area, flush, power cut
 *   zdev_emu_faults.c   one-shot and zone faults
 *   zdev_emu_log.c      the write log, redo after a kill, counting, replay
 *   zdev_emu_timing.c   the simulated NAND timing model
 *   zdev_emu_ftl.c      the conventional mode: a page-mapped FTL on the same NAND model
 *   zdev_emu_stats.c    the statistics as JSON
 *
 * Robustness rule, for every file: the process may be killed between any two system calls.
 * Every on-disk update is ordered so that the image then still opens and keeps every flushed
 * write: data before its journal record (sequential zones), old data and record before the
 * overwrite (conventional zones), zone table before the generation bump that voids the
 * journal. A crash of the host may also reorder or lose whatever was written since the last
 * fdatasync: a flush is one fdatasync behind a flush marker, and journal records carry their
 * data's checksum, checked at open where no marker proves them (docs/emulator.md).
 */
#ifndef ZLFS_ZDEV_EMU_IMPL_H
#define ZLFS_ZDEV_EMU_IMPL_H

#include "zdev_emu.h"
#include "zdev_impl.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the zlfs-emu image format is little-endian and stored in host order"
#endif

#define EMU_MAGIC "ZLFSEMU1"

/* This folder's backend for fs/dev's table (backends.c). */
extern const struct zdev_backend zdev_emu_backend;
/* Versions 3 and 4 are 1 and 2 with checked journal records and flush markers (a flush is one
 * host fdatasync); 1 and 2 still open, and a read-write open upgrades them. */
#define EMU_FMT_VERSION 3u           /* zoned images */
#define EMU_FMT_VERSION_FTL 4u       /* conventional-mode images (older emulators refuse them) */
#define EMU_FMT_VERSION_V1 1u        /* zoned, unchecked journal records */
#define EMU_FMT_VERSION_FTL_V2 2u    /* conventional mode, unchecked journal records */
static inline int emu_version_is_ftl(uint32_t v)
{
	return v == EMU_FMT_VERSION_FTL || v == EMU_FMT_VERSION_FTL_V2;
}
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
	 * rest of the block is zero and covered by the CRC), so they open unchanged; so do the
	 * read, erase and block fields added later. */
	struct zemu_timing timing;
	/* Version 2 (conventional mode) only, zero in version 1: the FTL's options and the
	 * region where its state is saved at a clean close, between the undo area and data. */
	uint32_t mode;      /* enum zemu_mode */
	uint32_t rsvd_mode;
	struct zemu_ftl ftl;
	uint64_t ftl_off;
	uint64_t ftl_len;
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

/* One write in the volatile cache, or a flush marker: the journal is a prefix of records of
 * the current generation, in issue order. A flush marker (type JREC_FLUSH) says that the
 * records before slot `off` are flushed, and that those before slot `len` (a flush whose
 * fdatasync had returned when the marker was made) are on the host's disk for certain. */
enum jrec_type {
	JREC_LEGACY = 0,    /* a write of a version 1/2 image: no data checksum */
	JREC_WRITE = 1,     /* a write; dcrc is checked at open unless a marker proves it */
	JREC_FLUSH = 2,     /* a flush marker */
};
#define JREC_NO_ZONE UINT32_MAX  /* a marker's zone */
struct emu_jrec {
	uint64_t gen;
	uint64_t off;       /* device byte offset; a marker: the flushed slots */
	uint64_t len;       /* a marker: the proven slots */
	uint64_t undo_foff; /* conventional zone: image offset of the overwritten data, else 0 */
	uint32_t zone;
	uint32_t epoch;
	uint32_t type;      /* enum jrec_type */
	uint32_t dcrc;      /* CRC32C of the data written (sequential zone) or of the old data
			     * saved at undo_foff (conventional zone) */
	uint64_t rsvd;
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
	uint32_t mode;      /* enum zemu_mode of the image (0 in logs older than the FTL) */
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
 * volatile cache was dropped; replay cannot go past it. TRIM (conventional mode, numbered
 * after the markers because it came later) is an operation.
 */
enum log_type {
	LOG_WRITE = 1, LOG_FLUSH, LOG_RESET, LOG_FINISH, LOG_OPEN, LOG_CLOSE,
	LOG_POWERON, LOG_POWERCUT, LOG_ABORT, LOG_TRIM,
};

static inline int log_is_op(uint8_t type)
{
	return (type >= LOG_WRITE && type <= LOG_CLOSE) || type == LOG_TRIM;
}

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
	uint8_t busy;       /* a write's transfer is under way with the lock dropped */
};

/* A range of caller memory whose data is not yet programmed (see tm_buf_ready). */
struct tm_buf {
	uintptr_t lo, hi;
	uint64_t done;      /* virtual time its last write's programs end */
};
#define TM_BUFS 64

/* Counters of the model and of the host's requests, restarted with the clock (the names
 * are those of struct zemu_stats). */
struct emu_counters {
	uint64_t xfer_bytes, link_busy_ns, programs, pad_programs, pad_bytes, die_busy_ns;
	uint64_t buf_wait_ns;
	uint64_t host_reads, host_read_bytes, host_writes, host_write_bytes;
	uint64_t host_trims, host_trim_bytes, host_flushes;
	uint64_t data_programs, gc_programs, map_programs;
	uint64_t nand_reads, data_reads, map_reads, gc_reads, erases, read_service_ns;
	uint64_t map_lookups, map_misses, map_writebacks;
	uint64_t gc_pages, gc_victims;
};

/* What a program or a read on a die is for (which counter it goes to). */
enum tm_kind { TM_DATA, TM_GC, TM_MAP, TM_PAD };

/* An idle interval of a die that a later read may still use (see emu_tm_nand_read). */
struct tm_gap {
	uint64_t start, end;
};
#define TM_GAPS 16          /* per die: the oldest is forgotten first */

/* Timing model state; times are virtual nanoseconds since the open or the last reset. */
struct emu_tm {
	struct zemu_timing t;       /* t.dies == 0: off */
	uint64_t link_free;         /* the host link is busy until then */
	uint64_t barrier;           /* a flush completed then: later transfers start after it */
	uint64_t end;               /* latest completion so far */
	uint64_t die_free[ZEMU_TIMING_MAX_DIES];
	struct tm_gap gaps[ZEMU_TIMING_MAX_DIES][TM_GAPS];
	uint8_t ngaps[ZEMU_TIMING_MAX_DIES];
	uint8_t *partial;           /* per zone: held partial unit not yet backed up by a flush */
	struct tm_buf bufs[TM_BUFS];
	uint32_t nbufs;
	struct emu_counters c;
};

/* One host read being timed: its NAND reads, then its transfer (see emu_tm_read_*). */
struct tm_read {
	uint64_t ready;             /* the earliest a NAND read of it may start */
	uint64_t done;              /* the last of its NAND reads ends */
	uint64_t map_ns;            /* service time of its map reads (misses) */
	uint32_t on_die[ZEMU_TIMING_MAX_DIES];
};

struct emu_ftl;

struct emu_dev {
	struct zdev zd;             /* must stay first: zdev.c casts */
	pthread_mutex_t lock;       /* guards everything below; held across image writes except
				     * a sequential zone's data transfer (emu_write_seq_unlocked) */
	pthread_cond_t idle;        /* a transfer ended: busy zones, inflight, jreserved changed */
	uint32_t inflight;          /* transfers under way with the lock dropped */
	uint32_t jreserved;         /* journal slots they will take when they end */
	int fd;
	int jfd;                    /* the journal's blocks: fd, or with O_DIRECT a buffered fd of
				     * the same image (a record is the emulator's bookkeeping, no
				     * device I/O: it waits for no disk, and a kill keeps it in the
				     * host's page cache; the flush's fdatasync makes it durable with
				     * the data) */
	int direct;
	int nosync;                 /* replay: skip fdatasync until the final flush */
	struct emu_hdr *hdr;        /* EMU_BLK aligned */
	struct emu_zent *table;     /* durable zone table, mirrors the image */
	uint32_t table_blocks;
	struct emu_zone *zones;     /* current state */
	struct emu_jrec *jrnl;      /* mirrors the journal region */
	uint32_t jcount;            /* records of the current generation */
	/* Journal blocks reach the image in the order their copies were taken, one ticket per
	 * copy, so the image holds a prefix of the journal's history however many writers there
	 * are, while the block writes of the sequential path run without lock. Order: lock,
	 * then jlock (a leaf). */
	pthread_mutex_t jlock;
	pthread_cond_t jturn;       /* jdone moved */
	uint64_t jticket;           /* the last ticket handed out (under lock) */
	uint64_t jdone;             /* the last ticket whose block was written (under jlock) */
	int jfailed;                /* a journal block write failed: later writes and flushes
				     * fail with EIO (atomic) */
	uint64_t jclears;           /* times the journal was voided (a new generation) */
	uint32_t jflushed;          /* records before this slot are flushed (a marker's sync ended) */
	uint32_t jproven;           /* a marker in the image says the records before it are */
	int jmarked;                /* this open wrote a flush marker */
	uint8_t *tdirty;            /* per table block: the memory copy is ahead of the image */
	int flushing;               /* a host flush runs with the lock dropped (emu_flush_host) */
	uint64_t image_syncs;       /* fdatasyncs of the image (atomic: some run without lock) */
	uint64_t undo_used;
	uint32_t nr_imp, nr_exp, nr_closed;
	uint32_t imp_cursor;        /* round-robin start for implicit closes */
	int log_fd;                 /* -1 without a write log */
	uint64_t log_size;          /* where the next log record goes */
	char log_path[EMU_PATH_MAX];
	struct emu_tm tm;
	struct emu_ftl *ftl;        /* conventional mode's FTL model, NULL in zoned mode */
};

static inline struct emu_dev *to_emu(struct zdev *zd) { return (struct emu_dev *)zd; }

static inline uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static inline int is_conv(const struct emu_dev *d, uint32_t z) { return z < d->hdr->nr_conv; }
static inline uint64_t zstart(const struct emu_dev *d, uint32_t z) { return (uint64_t)z * d->hdr->zone_size; }

static inline uint64_t zcap(const struct emu_dev *d, uint32_t z)
{
	return is_conv(d, z) ? d->hdr->zone_size : d->hdr->zone_capacity;
}

static inline uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline int tm_on(const struct emu_dev *d) { return d->tm.t.dies != 0; }
static inline int is_ftl(const struct emu_dev *d) { return d->hdr->mode == ZEMU_MODE_FTL; }


/* zdev_emu_image.c: the image format, I/O on it, creating and copying images */
uint32_t emu_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t emu_crc32c_iov(const struct iovec *iov, int n);
void *emu_blk_alloc(size_t len);
/* Bytes past the end of the image read as zeros (it is sparse). */
static inline int emu_full_pread(int fd, void *buf, size_t len, uint64_t off)
{
	return zdev_pread_all(fd, buf, len, off, 1);
}
void emu_host_io(int fd, uint64_t off, const void *buf, size_t len);
static inline int emu_full_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	emu_host_io(fd, off, buf, len);
	return zdev_pwrite_all(fd, buf, len, off);
}
int emu_img_read(struct emu_dev *d, void *buf, size_t len, uint64_t foff);
int emu_img_write(struct emu_dev *d, const void *buf, size_t len, uint64_t foff);
int emu_img_writev(struct emu_dev *d, const struct iovec *iov, int n, uint64_t foff);
void emu_img_prealloc(struct emu_dev *d, uint32_t z);
int emu_sync(struct emu_dev *d);
int emu_jrnl_failed(struct emu_dev *d);
uint64_t emu_table_bytes(uint32_t nr_zones);
int emu_hdr_write(struct emu_dev *d);
int emu_table_write_block(struct emu_dev *d, uint32_t blk);
int emu_table_cover(struct emu_dev *d, uint32_t z, uint64_t wp);
int emu_table_update(struct emu_dev *d, uint32_t z);
void emu_table_advance(struct emu_dev *d, uint32_t z, uint32_t epoch, uint64_t end);
int emu_zone_persist(struct emu_dev *d, uint32_t z);
int emu_bad_image(const char *path, int err, const char *why);
int emu_hdr_validate(struct emu_hdr *h, const char *path, uint64_t file_size);
int emu_table_load(struct emu_dev *d, const char *path);
int emu_open_fd(const char *path, int readonly, int direct, int *fdp);
int emu_open_jfd(struct emu_dev *d, const char *path, int readonly);
int emu_copy_sparse(const char *src, const char *dst);
/* The header's own checksum; its layout (table, journal, undo area, data) for its zone count
 * and journal; a zone table entry; LEN bytes copied between two files (zdev_emu_grow.c). */
uint32_t emu_hdr_crc(struct emu_hdr *h);
/* Write a new image's zone TABLE (TBYTES), then its header H with its checksum, then fsync:
 * the header last, so that an interrupted write leaves no image that opens. */
int emu_img_seal(int fd, struct emu_hdr *h, const void *table, uint64_t tbytes);
void emu_hdr_layout(struct emu_hdr *h);
void emu_zent_set(struct emu_zent *e, uint64_t wp, uint32_t epoch, uint8_t cond);
int emu_copy_range(int sfd, uint64_t soff, int dfd, uint64_t doff, uint64_t len);
int emu_image_clear_log_path(const char *path);

/* zdev_emu_zones.c: the zone state machine and its limits */
void emu_set_cond(struct emu_dev *d, uint32_t z, uint8_t cond);
void emu_power_cycle_zones(struct emu_dev *d);
int emu_report(struct zdev *zd, uint32_t first, uint32_t count, struct zdev_zone *zones);
uint64_t emu_valid_len(const struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len);
int emu_read_check(struct emu_dev *d, uint64_t off, uint64_t len);
int emu_seq_write_check(struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len);
int emu_mgmt_finish(struct emu_dev *d, uint32_t z);
int emu_mgmt_reset(struct emu_dev *d, uint32_t z);
int emu_mgmt(struct zdev *zd, enum zdev_mgmt_op op, uint32_t zone);
void emu_derive_conds(struct emu_dev *d);

/* zdev_emu_journal.c: the volatile cache, flush and power cut */
int emu_flush_locked(struct emu_dev *d);
int emu_flush_host(struct emu_dev *d);
void emu_jrnl_close(struct emu_dev *d);
int emu_write_conv(struct emu_dev *d, const void *buf, size_t len, uint64_t off);
int emu_write_seq(struct emu_dev *d, uint32_t z, const void *buf, size_t len, uint64_t off);
int emu_write_seq_unlocked(struct emu_dev *d, uint32_t z, const struct iovec *iov, int n,
			   size_t len, uint64_t off);
void emu_wait_idle(struct emu_dev *d, uint32_t z);
int emu_jrnl_load(struct emu_dev *d, const char *path);
int emu_jrec_unflushed(const struct emu_dev *d, uint32_t slot);

uint64_t emu_torn_bytes(const struct emu_dev *d, uint64_t len, uint64_t *rng, int seeded);

/* zdev_emu_faults.c: injected faults */
int emu_fault_fire(struct emu_dev *d, uint32_t kind, uint64_t off, uint64_t len);

/* zdev_emu_log.c: the write log and its replay */
int emu_log_append_at(struct emu_dev *d, enum log_type type, uint32_t zone, uint64_t off,
			 uint64_t len, const void *data, uint64_t *pos);
int emu_log_append(struct emu_dev *d, enum log_type type, uint32_t zone, uint64_t off,
		      uint64_t len, const void *data);
int emu_log_abort(struct emu_dev *d, uint64_t pos, int err);
int emu_log_start(struct emu_dev *d, const char *image, const char *log);
int emu_log_create_empty(const char *log, const struct emu_hdr *h);

/* zdev_emu_timing.c: the timing model; the primitives the FTL shares with zoned mode */
int emu_timing_check(const struct zemu_timing *t, const char **why);
int emu_spec_number(const char *kv, unsigned long long *v, char **end);
int emu_spec_scaled(unsigned long long v, const char *end, int is_time, uint64_t *out);
int emu_spec_each(const char *spec, int (*fn)(const char *kv, void *ctx), void *ctx);
uint32_t emu_tm_block(const struct zemu_timing *t);
uint32_t emu_tm_die(const struct emu_dev *d, uint32_t base, uint64_t unit);
uint64_t emu_tm_now(const struct emu_dev *d);
uint64_t emu_tm_busy(struct emu_dev *d, uint32_t die, uint64_t ready, uint64_t ns);
uint64_t emu_tm_program(struct emu_dev *d, uint32_t die, uint64_t ready, enum tm_kind kind);
void emu_tm_pad(struct emu_dev *d, uint32_t die, uint64_t ready, uint64_t filled);
uint64_t emu_tm_nand_read(struct emu_dev *d, uint32_t die, uint64_t ready, enum tm_kind kind);
void emu_tm_erase(struct emu_dev *d, uint32_t die, uint64_t ready);
int emu_tm_reads(const struct emu_dev *d);
void emu_tm_read_begin(struct emu_dev *d, struct tm_read *r);
void emu_tm_read_map(struct emu_dev *d, struct tm_read *r, uint32_t die);
void emu_tm_read_unit(struct emu_dev *d, struct tm_read *r, uint32_t die);
void emu_tm_read_end(struct emu_dev *d, struct tm_read *r, uint64_t len);
void emu_tm_buf_hold(struct emu_dev *d, const void *buf, size_t len, uint64_t done);
uint64_t emu_tm_transfer_in(struct emu_dev *d, const void *buf, uint64_t len);
void emu_tm_write(struct emu_dev *d, uint32_t z, const void *buf, uint64_t len, uint64_t rel);
void emu_tm_read_zone(struct emu_dev *d, struct tm_read *r, uint32_t z, uint64_t rel,
		      uint64_t len);
void emu_tm_flush(struct emu_dev *d);
void emu_tm_finish(struct emu_dev *d, uint32_t z, uint64_t wp);
void emu_tm_reset_zone(struct emu_dev *d, uint32_t z, uint64_t written);
int emu_tm_init(struct emu_dev *d);
void emu_tm_stats(const struct emu_dev *d, struct zemu_stats *st);

/* zdev_emu_ftl.c: the conventional mode's FTL model (all calls with d->lock held) */
uint64_t emu_ftl_state_bytes(const struct emu_hdr *h);
int emu_ftl_geometry_check(const struct emu_hdr *h, const char **why);
int emu_ftl_open(struct emu_dev *d);
void emu_ftl_close(struct emu_dev *d);
void emu_ftl_write(struct emu_dev *d, const void *buf, uint64_t off, uint64_t len);
void emu_ftl_read(struct emu_dev *d, uint64_t off, uint64_t len);
void emu_ftl_trim(struct emu_dev *d, uint64_t off, uint64_t len);
void emu_ftl_flush(struct emu_dev *d);
void emu_ftl_stats(const struct emu_dev *d, struct zemu_stats *st);

/* zdev_emu.c: the device operations and opening */
int emu_write_locked(struct emu_dev *d, const void *buf, size_t len, uint64_t off);
int emu_trim_locked(struct emu_dev *d, uint64_t off, uint64_t len);
void emu_free(struct emu_dev *d);
void emu_fill_public(struct emu_dev *d, const char *path);
int emu_open_internal(const char *path, const struct zdev_open_opts *opts, int nolog,
			     struct emu_dev **out);

#endif
