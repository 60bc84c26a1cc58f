/*
 * super.h - the metadata at the checkpoint boundary: layout, superblock and checkpoint
 * records on the device, and making a new filesystem.
 *
 * Owns: choosing a layout for a device (zlfs_layout), writing and finding superblock records
 * (super.c), writing and finding checkpoint packs (checkpoint.c), mkfs (mkfs_core.c).
 * May call: format.h, zdev.h, log.h.
 */
#ifndef ZLFS_SUPER_H
#define ZLFS_SUPER_H

#include "format.h"
#include "zdev.h"

#include <stddef.h>

/* Free zones a GC pass needs in hand: one for moved data, one for re-pointed nodes, and one
 * for the checkpoint after it that frees the victim; one more where moved data goes to two
 * logs (more than ZLFS_NR_LOG_TYPES_R1 logs). mkfs reserves at least this many. */
#define ZLFS_GC_ZONES_NEEDED 3
static inline uint32_t zlfs_gc_zones_needed(uint32_t nr_logs)
{
	return ZLFS_GC_ZONES_NEEDED + (nr_logs > ZLFS_NR_LOG_TYPES_R1);
}

/* Encryption fields mkfs records (the key itself is never stored: only its check value). */
struct zlfs_mkfs_enc {
	uint32_t kdf;          /* 1 key file, 2 scrypt passphrase */
	uint64_t scrypt_n;
	uint32_t scrypt_r, scrypt_p;
	uint8_t salt[ZLFS_SALT_SIZE];
	uint8_t key_check[ZLFS_KEYCHECK_SIZE];
};

struct zlfs_mkfs_opts {
	const char *label;     /* NULL: empty */
	const uint8_t *uuid;   /* 16 bytes, or NULL: a random one (zlfs_random) */
	const struct zlfs_mkfs_enc *enc; /* NULL: no encryption */
	int plain_root;        /* with ENC: leave the root directory unencrypted (fscrypt's
				* layout); by default it is encrypted and everything inherits */
	unsigned ovp_percent;  /* 0: default */
	unsigned nr_logs;      /* 2, 4, 6, 7, 10; 0: the most the zone limits and size allow */
	int packed_inodes;     /* set the PACKED_INODES feature (docs/design.md, "Packed inodes") */
	int compress;          /* set the COMPRESS feature (docs/compression.md) */
	unsigned compress_alg; /* with it: new files' algorithm when a mount names none (0: plain) */
	unsigned cluster_log;  /* with it: ZLFS_CLUSTER_LOG_MIN..MAX; 0: the minimum */
	int quiet;
	/* called while zones are reset: done of total */
	void (*progress)(uint32_t done, uint32_t total, void *arg);
	void *progress_arg;
};

#define ZLFS_DEFAULT_OVP 5

/* Choose the layout for a device with this geometry and these zones. On a geometry zlfs
 * cannot use, returns -EINVAL and writes the reason (one line) to WHY. */
int zlfs_layout(const struct zdev_geometry *geo, const struct zdev_zone *zones,
		const struct zlfs_mkfs_opts *opts, struct zlfs_sb_info *sbi, char *why,
		size_t whylen);

/* Zones held back for GC in a main area of MAIN_ZONES: OVP percent, never fewer than a GC pass
 * needs with NR_LOGS logs (mkfs's rule; resize applies it to the new main area). */
uint32_t zlfs_layout_reserve(uint32_t main_zones, unsigned ovp, uint32_t nr_logs);

/* ---- resize_core.c: growing a filesystem onto more zones, offline ------------------------ */
struct zlfs_resize_opts {
	uint32_t nr_zones;     /* the zones the filesystem will span; 0: all the device has */
	int dry_run;           /* check and report, write nothing */
};
struct zlfs_resize_result {
	uint32_t old_zones, new_zones, old_main, new_main;
	uint32_t largest;      /* refused as too large (-EFBIG): the most zones that fit */
	int done;              /* the new superblock is written */
	char why[256];         /* why it was refused or failed */
};
/* Grow the cleanly unmounted filesystem on DEV onto O->nr_zones zones: the main area takes the
 * new zones, with mkfs's rules for the SIT and the GC reserve. One superblock record switches
 * from the old layout to the new, so a power cut leaves one or the other (resize_core.c).
 * 0 (nothing to do when the size is already that), or a negative errno with R->why. */
int zlfs_resize(struct zdev *dev, const struct zlfs_resize_opts *o, struct zlfs_resize_result *r);

/* Make a new, empty filesystem on DEV: reset every zone, write the root directory (encrypted,
 * with a fresh nonce, when ENC is set and PLAIN_ROOT is not), the first metadata, checkpoint
 * and superblock. SBI receives what was written. Reasons for failure
 * are logged. */
int zlfs_mkfs(struct zdev *dev, const struct zlfs_mkfs_opts *opts, struct zlfs_sb_info *sbi);

/* ---- clock.c: the time and random bytes stamped into what is written -------------------- */
/* Stand the clock still at TIME_NS and draw random bytes from a stream seeded with SEED, for
 * the rest of the process: the same input then makes the same image (mkfs.zlfs --timestamp). */
void zlfs_pin_clock(uint64_t time_ns, uint64_t seed);
int zlfs_clock_pinned(void);
/* CLOCK_REALTIME (or the pinned time), in nanoseconds and in seconds. */
uint64_t zlfs_now_ns(void);
uint64_t zlfs_now_s(void);
/* LEN random bytes (getrandom, or the pinned stream): 0 or a negative errno. */
int zlfs_random(void *buf, size_t len);

/* Name of a filesystem other than zlfs recognised on DEV, or NULL. */
const char *zlfs_foreign_fs(struct zdev *dev);

/* Index of the first sequential zone, or -ENODEV. Superblock zones are always the first two
 * sequential zones, so a reader can find them before it has a superblock. */
int zlfs_first_seq_zone(struct zdev *dev);

/* Find the newest valid superblock record: 0, -ENOENT when there is none (not zlfs), or the
 * decoder's error (-EUCLEAN, -EPROTONOSUPPORT) for the newest record found damaged or too
 * new. ZONE_OUT (may be NULL) receives the index (0/1) of the zone holding it. */
int zlfs_sb_read(struct zdev *dev, struct zlfs_sb_info *sbi, int *zone_out);
/* The superblock against the device it was read from: zone size and count, the layout's
 * zones sequential and large enough. 0, or -EUCLEAN with the reason in WHY (zlfs_sb_read
 * runs it). */
int zlfs_sb_check_device(struct zdev *dev, const struct zlfs_sb_info *sbi, char *why, size_t len);
/* Write SBI (with sb_seq bumped by the caller) into the superblock zone that does not hold
 * the newest record: reset it, append, flush, finish. */
int zlfs_sb_write(struct zdev *dev, const struct zlfs_sb_info *sbi, int newest_zone);

/* Where a checkpoint pack lives. */
struct zlfs_cp_pos {
	int slot;          /* 0/1: which checkpoint zone */
	uint32_t blk;      /* first block of the pack within that zone */
};

/*
 * Write a checkpoint pack at block BLK of checkpoint zone SLOT (which must be that zone's
 * write pointer): head, NSUM summary blocks (already filled and sealed by the caller, or
 * sealed here: this function sets their headers), orphan blocks, remap blocks (cpi->nr_remaps
 * entries of REMAPS), tail. Does not flush.
 */
int ckpt_write_pack(struct zdev *dev, const struct zlfs_sb_info *sbi, struct zlfs_cp_info *cpi,
		    int slot, uint32_t blk, struct zlfs_summary *sums, const uint8_t *sum_logs,
		    uint32_t nsum, const uint32_t *orphans, const struct zlfs_remap_entry *remaps);
/* Find the newest valid checkpoint pack in the two checkpoint zones. */
int ckpt_read_newest(struct zdev *dev, const struct zlfs_sb_info *sbi, struct zlfs_cp_info *cpi,
		     struct zlfs_cp_pos *pos);

#endif
