/*
 * zdev_emu.h - the file-backed zoned-device emulator: creating images and the fault-injection
 * and crash-testing controls that only an emulator has. Opening and using an image goes
 * through zdev.h like any device.
 *
 * Owns: the image format (header, persisted zone table, volatile-write journal, data area),
 * the zone state machine and limits, the durability model, the write log and its replay, the
 * simulated NAND timing model, and the conventional mode: a page-mapped FTL on the same NAND
 * model, for the NBD server (zlfs-emu serve-nbd) to give a kernel a conventional device.
 * May call: libc, pthreads, log.h, zdev.h. The full model, and the Linux error each rule
 * mirrors, are in docs/emulator.md.
 */
#ifndef ZLFS_ZDEV_EMU_H
#define ZLFS_ZDEV_EMU_H

#include "zdev.h"

#include <stdint.h>

/*
 * Optional timing model (docs/emulator.md, "Timing model"): zones striped over DIES flash
 * dies, data crossing a host link of LINK_MBS, programmed in PROG_UNIT units taking PROG_NS
 * each, read in READ_NS per unit, erased in ERASE_NS per BLOCK of a die. Time is simulated,
 * never slept: a virtual clock the model advances, read with zemu_dev_stats(). All zeros =
 * off (the default): no cost, no clock. Images made before reads and erases were modelled
 * hold zeros there: their reads and erases cost nothing, as they did.
 */
struct zemu_timing {
	uint32_t dies;      /* 1 .. ZEMU_TIMING_MAX_DIES; 0 = timing off */
	uint32_t prog_unit; /* bytes programmed at once on one die, multiple of 4096 */
	uint32_t prog_ns;   /* time one die is busy programming one unit */
	uint32_t link_mbs;  /* host link, MB/s (10^6 bytes per second) */
	uint32_t read_ns;   /* time one die is busy reading (part of) one unit; 0 = free */
	uint32_t erase_ns;  /* time one die is busy erasing one block; 0 = free */
	uint32_t block;     /* erase block of one die, bytes, a multiple of 4096; 0 = 16 MiB */
	uint32_t zone_dies; /* dies one zone's units go to in turn, 1 .. dies; 0 = all of them */
};
#define ZEMU_TIMING_MAX_DIES 64u

/* The documented default, resembling a mobile UFS 4.0 controller: 4 dies, 192 KiB units,
 * 285 us per program, 4600 MB/s link, 50 us reads, 3 ms erases of 16 MiB blocks (derivation
 * in docs/emulator.md). */
void zemu_timing_default(struct zemu_timing *t);
/* "off", "ufs40" (the default), or comma-separated overrides of the default such as
 * "dies=8,unit=96K,prog=560us,link=2300,read=60us,erase=5ms,block=8M,zone_dies=1" (times
 * take ns/us/ms, link MB/s). -EINVAL if bad. */
int zemu_timing_parse(const char *spec, struct zemu_timing *t);
/* Set (or, with dies = 0, turn off) the timing model of an image that is not open. */
int zemu_set_timing(const char *path, const struct zemu_timing *t);
/* Restart the virtual clock and the timing counters of an open device at zero (a benchmark
 * excludes its setup this way). -EINVAL when DEV is not emulated. */
int zemu_timing_reset(struct zdev *dev);

/*
 * The conventional mode (docs/emulator.md, "Conventional mode"): the whole image is one
 * conventional device (every zone conventional, no write pointers) behind a page-mapped FTL
 * on the image's NAND model: 4 KiB pages mapped one by one, the map cached in MAP_CACHE bytes
 * of "SRAM" (a miss reads a map page from NAND, an evicted dirty one is written back),
 * OP_PERMILLE of hidden over-provisioning, greedy device GC and TRIM. Only a model of
 * placement and time: the data itself is kept as in conventional zones, with the same
 * durability (flush, power cut).
 */
enum zemu_mode {
	ZEMU_MODE_ZONED = 0, /* host-managed zoned device (images of format version 1) */
	ZEMU_MODE_FTL = 1,   /* conventional device behind a page-mapped FTL (version 2) */
};

struct zemu_ftl {
	uint32_t op_permille; /* over-provisioning, per mille of the capacity; 0 = 70 (7%) */
	uint32_t rsvd;
	uint64_t map_cache;   /* bytes of map pages the controller caches; 0 = 1/128 of the map */
	uint64_t rsvd2[2];
};

struct zemu_create_opts {
	uint64_t size;          /* bytes; rounded down to whole zones */
	uint64_t zone_size;     /* bytes, multiple of lblock_size */
	uint64_t zone_capacity; /* bytes, 0 = zone_size */
	uint32_t lblock_size;   /* 512 or 4096; 0 = 4096 */
	uint32_t nr_conv;       /* leading conventional zones */
	uint32_t max_open;      /* 0 = no limit */
	uint32_t max_active;    /* 0 = no limit */
	const char *log_path;   /* record every operation to this write log, or NULL */
	uint32_t journal_slots; /* volatile-write journal records, 0 = 4096; a full journal
				 * destages the cache (an implicit flush) */
	struct zemu_timing timing; /* zeros: no timing model */
	enum zemu_mode mode;       /* ZEMU_MODE_FTL: a conventional device; needs a timing model
				    * (zeros get the default), 4096-byte blocks, no conventional
				    * zones asked for (all of them are) */
	struct zemu_ftl ftl;       /* the FTL's options (zeros: the defaults) */
};

/* Parse "op=7%,cache=512K" (either or both; op also in per mille, "op=70"): fills FTL (zeros
 * first). -EINVAL if bad. */
int zemu_ftl_parse(const char *spec, struct zemu_ftl *ftl);

/* Create (or overwrite) an image file; with a log_path, also (re)create that log, empty.
 * Returns 0 or -errno with a logged reason (-EINVAL bad geometry, -EBUSY image in use). */
int zemu_create(const char *path, const struct zemu_create_opts *opts);
/* Grow a zoned image (not open elsewhere, without a write log) to SIZE bytes, rounded down to
 * whole zones: empty sequential zones of its zone size and capacity after the ones it has, as
 * a namespace or partition made larger. Its journal is settled first (opened and flushed);
 * the grown image is written beside it and renamed into place. 0 or -errno, reason logged. */
int zemu_grow(const char *path, uint64_t size);

enum zemu_fault {
	ZEMU_FAULT_OFFLINE = 1,  /* zone goes offline: reads and writes fail */
	ZEMU_FAULT_READONLY,     /* zone becomes read-only: writes fail, reads work */
	ZEMU_FAULT_EIO_READ,     /* the next read touching the offset fails with EIO */
	ZEMU_FAULT_EIO_WRITE,    /* the next write touching the offset fails with EIO */
};

/* Inject a fault into an image that is not open (persisted in the image; -EBUSY while it is
 * open), or into an open emulated device (takes effect at once). OFF is a byte offset; zone
 * faults use its zone and refuse conventional zones (-EINVAL, as null_blk does). */
int zemu_inject(const char *path, enum zemu_fault fault, uint64_t off);
int zemu_inject_dev(struct zdev *dev, enum zemu_fault fault, uint64_t off);

/*
 * Simulate power loss on an image that is not open: drop the writes that were not flushed.
 * keep < 0 drops them all; keep >= 0 keeps the first KEEP unflushed writes in issue order;
 * when SEED is nonzero KEEP is ignored and the number kept is drawn from SEED. TORN keeps a
 * leading part of the first dropped write as well (a torn write): half its blocks (at least
 * one), or with a seed a random number of them. Dropped conventional-zone writes get the old
 * data back. Every write pointer ends where the surviving data ends; open zones become closed
 * (or empty); the result is durable. Prints nothing. A write log, if the image has one,
 * records the cut (replay cannot go past it). Returns the number of writes kept, or -errno.
 */
int zemu_powercut(const char *path, long keep, uint64_t seed, int torn);
/* The same on an open emulated device; the device stays usable afterwards, as after a
 * power cycle. */
int zemu_powercut_dev(struct zdev *dev, long keep, uint64_t seed, int torn);

/* What a power cut did, for zemu_powercut_ex and the zlfs-emu command. */
struct zemu_powercut_result {
	long unflushed;      /* writes that were in the volatile cache */
	long kept;           /* of them, kept whole (the first KEPT in issue order) */
	long dropped;        /* dropped whole (a torn write counts here, not in kept) */
	int torn;            /* 1 if the first dropped write left a leading part behind */
	uint64_t torn_bytes; /* bytes of that write that survived */
	uint64_t torn_len;   /* its full length */
};
int zemu_powercut_ex(const char *path, long keep, uint64_t seed, int torn,
		     struct zemu_powercut_result *res);
int zemu_powercut_dev_ex(struct zdev *dev, long keep, uint64_t seed, int torn,
			 struct zemu_powercut_result *res);

/* Number of operations (writes, flushes, zone management) recorded in a write log, not
 * counting aborted ones or a torn tail; -errno if LOG is not a write log. */
long zemu_log_count(const char *log_path);
/* The kind of each logged operation, one letter each, in order: W write, F flush, R reset,
 * X finish, O open, C close, T trim. Fills at most MAX letters; returns the number of operations. */
long zemu_log_kinds(const char *log_path, char *kinds, long max);
/* The same, and the zone of each operation in ZONES (UINT32_MAX for a flush); either array
 * may be NULL. */
long zemu_log_ops(const char *log_path, char *kinds, uint32_t *zones, long max);
/*
 * Rebuild OUT as the image was when LOG started, plus the first N operations recorded in LOG,
 * all of them durable. The starting image comes from the log itself: its header says whether
 * it was an empty device of the log's geometry or LOG.base (saved when the log was started on
 * an image that already held data). IMAGE, when not NULL, is the image the log was recorded
 * on; it is only checked to have the log's geometry and is never modified. N larger than the
 * log's operation count is -EINVAL. TORN tears the Nth operation if it is a write: only its
 * first half of blocks (at least one block) is kept. OUT is overwritten.
 */
int zemu_replay(const char *image, const char *log_path, long n, const char *out, int torn);
/* zemu_replay, and writes to LOSE_ZONE from operation LOSE_FROM (0-based) on are dropped, as
 * a device keeps of each zone only what reached its media in order: a power cut that took
 * that zone's unflushed writes and kept other zones'. No zone management of LOSE_ZONE may
 * follow (-EINVAL). */
int zemu_replay_lose(const char *image, const char *log_path, long n, const char *out,
		     int torn, uint32_t lose_zone, long lose_from);

/* Discard [OFF, OFF + LEN) of a conventional-mode device (NBD's TRIM): the range reads as
 * zeros from then on and the FTL unmaps it. Multiples of the block size. Like a reset, a trim
 * is not held in the volatile cache; a power cut that drops earlier writes to the range may
 * bring back what they overwrote (a device may forget a trim; the range is free space to the
 * filesystem). -EOPNOTSUPP on a zoned image, -EINVAL out of range or unaligned. */
int zemu_trim(struct zdev *dev, uint64_t off, uint64_t len);

/* Test hook: FN(CTX, FD, OFF, BUF, LEN) runs before every write of LEN bytes of BUF at byte OFF
 * of an image file FD, and before every fdatasync of it (BUF NULL), by every emulated device of
 * the process (hole punching and preallocation are not reported: they only touch data past a
 * write pointer). A test records the host I/O with it and rebuilds what a host crash at any
 * point could leave in the image. NULL turns it off; set it while no device is open. */
typedef void (*zemu_host_io_fn)(void *ctx, int fd, uint64_t off, const void *buf, size_t len);
void zemu_set_host_io_hook(zemu_host_io_fn fn, void *ctx);

/* Zero when DEV is not an emulated device. */
int zdev_is_emu(const struct zdev *dev);

/* Open PATH as an emulator image (what zdev_open does for an image, without probing for a
 * kernel device first): -ENODEV with a message when PATH is not an image. */
int zemu_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out);

/* Read the geometry from an image's header without opening it as a device (no lock taken). */
int zemu_read_geometry(const char *path, struct zdev_geometry *geo);

/* Emulator-only facts about an open image, for reports and tests. */
struct zemu_stats {
	uint32_t format_version;
	uint64_t generation;      /* bumped by every checkpoint (a full journal, a power cut):
				   * journal records of older ones are void */
	long unflushed;           /* writes still in the volatile cache (a power cut may drop them) */
	long journal_slots;
	int pending_faults;       /* one-shot EIO faults not yet fired */
	char log_path[1024];      /* active write log, empty when none */
	/* timing model (all zero when it is off); times are simulated nanoseconds since the
	 * open or the last zemu_timing_reset() */
	struct zemu_timing timing;
	uint64_t sim_ns;          /* virtual clock: when everything issued so far is done */
	uint64_t xfer_bytes;      /* bytes moved over the host link (writes) */
	uint64_t link_busy_ns;    /* link time spent transferring */
	uint64_t programs;        /* program operations, padded ones included */
	uint64_t pad_programs;    /* partial units programmed with padding (flush, finish) */
	uint64_t pad_bytes;       /* padding those carried */
	uint64_t die_busy_ns;     /* sum over dies of program, read and erase time */
	uint64_t buf_wait_ns;     /* transfers delayed because their memory was still in use */
	/* What the host asked for (counted with or without a timing model), since the open or
	 * the last zemu_timing_reset(); host_read_sizes: zdev_read_sizes() of the device, since
	 * it was opened through zdev_open (zeros through zemu_open). */
	enum zemu_mode mode;
	uint64_t host_reads, host_read_bytes, host_writes, host_write_bytes;
	uint64_t host_trims, host_trim_bytes, host_flushes;
	uint64_t image_syncs;     /* fdatasyncs of the image file since the open (not restarted) */
	uint64_t host_read_sizes[ZDEV_RSIZE_BUCKETS];
	/* NAND work (timing model on): programs by kind (data, GC moves, map pages; pad_programs
	 * above), unit reads by kind, block erases, and the unloaded service time of the host's
	 * reads (map read, data reads, transfer: the queue-depth-1 latency the model gives) */
	uint64_t data_programs, gc_programs, map_programs;
	uint64_t nand_reads, data_reads, map_reads, gc_reads;
	uint64_t erases;
	uint64_t read_service_ns;
	/* The mapping: 4 KiB pages looked up (read, written, trimmed, moved by GC) and how many
	 * missed the cache (always 0 in zoned mode, whose zone map stays resident) */
	uint64_t map_lookups, map_misses, map_writebacks;
	/* FTL (conventional mode): pages moved by GC, victims collected */
	uint64_t gc_pages, gc_victims;
	/* FTL geometry and state now (not reset) */
	struct zemu_ftl ftl;
	uint32_t ftl_superblocks, ftl_free_superblocks, ftl_pages_per_superblock;
	uint64_t ftl_op_bytes;     /* physical bytes beyond the capacity (the real OP) */
	uint64_t ftl_mapped_pages;
	uint64_t map_cache_pages, map_pages;
};

/* The statistics as one JSON object ({"mode": ..., "sim_ns": ..., ...}, one line, no
 * newline), with derived figures: device_waf (NAND bytes programmed / host bytes written),
 * map_miss_rate, device utilisation. Returns the length, or -ENOSPC if LEN is too small. */
int zemu_stats_json(const struct zemu_stats *st, char *buf, size_t len);
int zemu_dev_stats(struct zdev *dev, struct zemu_stats *st);

const char *zemu_fault_name(enum zemu_fault fault);

#endif
