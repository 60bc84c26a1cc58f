/*
 * zdev.h - the zoned-device interface.
 *
 * Owns: the one small set of operations every layer above uses to reach a zoned device, and
 * the choice of backend when a path is opened (a kernel zoned block device goes to libzbd, a
 * file carrying the emulator's header goes to the emulator, anything else is refused).
 * May call: the two backends (zdev_zbd.c, zdev_emu.c) and log.h. Nothing in fs/ above this
 * layer touches a file descriptor of the device.
 *
 * Units are bytes, as libzbd uses them. Every offset and length must be a multiple of the
 * device's logical block size, and every buffer must be aligned to ZDEV_BUF_ALIGN (use
 * zdev_buf_alloc) because the libzbd backend does O_DIRECT I/O. Functions return 0 or a
 * negative errno; on a failed write the caller must re-read the zone's write pointer with
 * zdev_report before writing to that zone again, since a partial write may have moved it.
 */
#ifndef ZLFS_ZDEV_H
#define ZLFS_ZDEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define ZDEV_BUF_ALIGN 4096u

enum zdev_zone_type {
	ZDEV_ZONE_CONV = 1, /* conventional: random writes, no write pointer */
	ZDEV_ZONE_SEQ = 2,  /* sequential write required */
};

/* Zone conditions, numbered as the ZBC/ZNS zone state machine names them. */
enum zdev_zone_cond {
	ZDEV_COND_NOT_WP = 0, /* conventional zone */
	ZDEV_COND_EMPTY,
	ZDEV_COND_IMP_OPEN,
	ZDEV_COND_EXP_OPEN,
	ZDEV_COND_CLOSED,
	ZDEV_COND_FULL,
	ZDEV_COND_RDONLY,
	ZDEV_COND_OFFLINE,
};

enum zdev_kind {
	ZDEV_KIND_EMU = 1, /* file-backed emulator image */
	ZDEV_KIND_ZBD = 2, /* kernel zoned block device through libzbd */
};

struct zdev_geometry {
	uint32_t lblock_size;   /* logical block size: read/write granularity */
	uint32_t nr_zones;
	uint32_t nr_conv;       /* conventional zones among them */
	uint32_t max_open;      /* open zone limit, 0 = no limit */
	uint32_t max_active;    /* active (open + closed) zone limit, 0 = no limit */
	uint64_t zone_size;     /* bytes between zone starts */
	uint64_t zone_capacity; /* smallest writable capacity of any sequential zone */
	uint64_t capacity;      /* nr_zones * zone_size */
};

struct zdev_zone {
	uint64_t start;
	uint64_t len;
	uint64_t capacity; /* writable bytes from start; <= len (ZNS zone capacity) */
	uint64_t wp;       /* absolute byte offset of the write pointer */
	uint8_t type;      /* enum zdev_zone_type */
	uint8_t cond;      /* enum zdev_zone_cond */
};

/* What a device is, for reports and fleet telemetry. Strings are NUL-terminated, maybe empty. */
struct zdev_info {
	enum zdev_kind kind;
	char path[256];
	char model[64];
	char vendor[64];
	char firmware[64];
};

/* What the tools wait by default for a daemon finishing its unmount: its last checkpoint
 * takes well under a second on an idle device, seconds with much unwritten data. */
#define ZDEV_WAIT_DEFAULT 30

struct zdev_open_opts {
	int readonly;          /* refuse writes and zone management with EROFS */
	int direct;            /* emulator: use O_DIRECT on the image (zbd always does) */
	const char *emu_log;   /* emulator: append every write and flush to this log, or NULL */
	int daemon;            /* a zlfs daemon: mark the device so that tools can tell, while it
				  holds it, whether it is starting, serving or finishing (zdev_hold.c) */
	unsigned wait_secs;    /* held by a zlfs daemon that is finishing its unmount: wait up to
				  this long for it (saying so) instead of failing with -EBUSY */
	int shared;            /* with readonly: open a device another program may hold (a
				  mounted daemon) without claiming it: no lock on an image, no
				  O_EXCL on a block device, no wait. What it reads is what the
				  holder has written so far, not what it holds in memory */
};

struct zdev;

/*
 * Open PATH with the backend that fits it. On failure a one-line reason has been logged
 * (log.h) and a negative errno is returned: -ENODEV for a path that is neither a zoned block
 * device nor an emulator image, -EBUSY for a device held exclusively (mounted or in use; a
 * zlfs daemon that is finishing its unmount is waited for, up to opts->wait_secs).
 * Defined with the table of backends at the top of the device layers (fs/emu/backends.c):
 * nothing in fs/dev calls it.
 */
int zdev_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out);
void zdev_close(struct zdev *dev);
/* 1 when a zlfs daemon holds PATH and serves it mounted on DIR (this mount namespace). */
int zdev_mounted_at(const char *path, char *dir, size_t len);
/* A daemon (opts->daemon) whose mount is visible: it is serving now, and tools that find the
 * device busy fail at once. Call it after detaching, so the mark carries the daemon's pid. */
int zdev_mark_serving(struct zdev *dev);

const struct zdev_geometry *zdev_geometry(const struct zdev *dev);
const struct zdev_info *zdev_info(const struct zdev *dev);

/* Report zones [first, first + count) into ZONES. */
int zdev_report(struct zdev *dev, uint32_t first, uint32_t count, struct zdev_zone *zones);
int zdev_report_one(struct zdev *dev, uint32_t zone, struct zdev_zone *out);

/* Whole-length read or write, or a negative errno. A write to a sequential zone must start
 * at its write pointer and stay within its capacity. */
int zdev_read(struct zdev *dev, void *buf, size_t len, uint64_t off);
/* A hint: [off, off + len) will be read soon. A backend that reads through the host's page
 * cache (a buffered emulator image) starts reading it in the background; others ignore it. */
void zdev_prefetch(struct zdev *dev, uint64_t off, uint64_t len);
int zdev_write(struct zdev *dev, const void *buf, size_t len, uint64_t off);
/* The N pieces (at most ZDEV_IOV_MAX) of IOV written one after the other from OFF, each
 * under zdev_write's rules: one device write where the backend has it (one command, one
 * record of the write pointer), else piece by piece. On failure any prefix may have been
 * written, as for zdev_write. */
#define ZDEV_IOV_MAX 16
int zdev_writev(struct zdev *dev, const struct iovec *iov, int n, uint64_t off);

int zdev_zone_reset(struct zdev *dev, uint32_t zone);
int zdev_zone_finish(struct zdev *dev, uint32_t zone);
int zdev_zone_open(struct zdev *dev, uint32_t zone);
int zdev_zone_close(struct zdev *dev, uint32_t zone);

/* Make every completed write durable (the device's volatile cache is written back). */
int zdev_flush(struct zdev *dev);

/* Buffers aligned for any backend's I/O; zdev_buf_alloc returns NULL when out of memory. */
void *zdev_buf_alloc(size_t len);
void zdev_buf_free(void *buf);
/* One aligned block (ZDEV_BUF_ALIGN bytes) for a cache page, from a pool; its contents are
 * undefined. zdev_page_free takes only what zdev_page_alloc gave. */
void *zdev_page_alloc(void);
void zdev_page_free(void *page);

/* Reads that reached the device (zdev_read calls) since it was opened, counted by size:
 * bucket 0 is < 4 KiB, bucket k = 1..7 is [2^(k+1), 2^(k+2)) KiB (4-8 KiB ... 256-512 KiB),
 * the last is >= 512 KiB. Relaxed atomic counters: cheap, and a snapshot is only roughly
 * consistent while reads are in flight. zdev_rsize_name gives a bucket's JSON-safe name. */
#define ZDEV_RSIZE_BUCKETS 9
void zdev_read_sizes(const struct zdev *dev, uint64_t counts[ZDEV_RSIZE_BUCKETS]);
const char *zdev_rsize_name(int bucket);

const char *zdev_cond_name(int cond);
const char *zdev_type_name(int type);
uint32_t zdev_zone_of(const struct zdev *dev, uint64_t off);

#endif
