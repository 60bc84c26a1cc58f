/*
 * core.h - the node/log layer: the log-structured core under the file layer.
 *
 * Owns: the mounted filesystem's state (struct zlfs_fs), the active logs and the zones they
 * append to (segment.c), segment usage (SIT), node ids and the node address table with the
 * node-block cache (node.c), NAT and SIT pages (metacache.c), the meta log and checkpoints
 * (checkpoint.c), mount and unmount (mount.c).
 * May call: super.h, format.h, zdev.h, lock.h, log.h. Called by the file layer (files.h).
 *
 * Lock ordering (docs/design.md, "Concurrency"). A thread takes locks only downward in this
 * list; lock.h's checker enforces it in the test build. Each lock has one job:
 *
 *   10 rename_lock    directory moves: the tree's shape (parent links), for the loop check
 *   15 gc_lock        one collector at a time; the victim, its cursor and read window
 *   20 cp_lock        rw, writer first. Shared by every request that changes anything and by
 *                     each GC step; exclusive by a checkpoint, so what it writes is frozen.
 *                     Read-only requests do not take it.
 *   30 inode (parent) rw, per inode (ilock.c): a directory's entries, dentry blocks and name
 *                     index, taken around lookups (shared) and changes (exclusive) of them
 *   40 inode (child)  rw, per inode: the inode's node page, node tree, data mapping, size,
 *                     xattrs. An inode lock is taken while holding another only for an entry
 *                     of a held directory, or by rename for its two parents (ancestor first,
 *                     under rename_lock) and its two children (by inode number).
 *   50 log[i].lock    one log's zone, append position and open segment summary; two logs
 *                     append at once, each zone still sees its writes in order
 *   60 ncache_lock    node cache: hash chains, page refs, dirty flags and list, pages being
 *                     read in. A page's contents belong to its inode's lock.
 *   65 npack_lock     PACKED_INODES: the table of inode packs' live slots (npack.c); under
 *                     it a pack may be read and the NAT asked about its slots
 *   70 nat_lock       the NAT's cached pages (a miss reads one under it) and dirty bits,
 *                     nid allocation, the free-nid list, the freed and nofast sets, node and
 *                     inode counts, the orphan list
 *   80 seg_lock       the SIT's cached pages (as the NAT's) and dirty bits, zone states and
 *                     per-zone sums, free/prefree/retired counts,
 *                     valid blocks, the GC victim's pin; logs publish their position here too
 *                     (written under log lock and seg_lock, read under either)
 *   90-95             leaves: directory cache, attribute cache, the inode lock table, the
 *                     kernel's lookup counts, checkpoint requests, GC telemetry
 *   96 sleep locks    a background thread's sleep and stop flag; gc_ahead: GC's window
 *                     read ahead (taken under gc_lock and cp_lock, free while it is read);
 *                     chk_ahead: fsck's runs read ahead (verify_ahead.c, taken alone)
 *   97 readahead_lock the read-ahead windows. A read may wait on its condition (200 ms at
 *                     most) for another read's extension of the same file, both holding
 *                     that file's lock shared; the reader waited for needs no lock the
 *                     waiter holds
 *   98 tail_lock      the table of partial blocks held in memory (tailbuf.c): its chains
 *                     and count; a held block's bytes belong to its inode's lock
 *   99 rcache_lock    the read cache of main-area blocks by address (rcache.c): its hash,
 *                     entries and bytes
 *  100 wbuf lock      the write buffer's slots and queues (wbuf.c)
 *  110                the device backend's own, and the page pool's (zdev.c, a leaf)
 *
 * Without a lock: counters and flags that are only summed or tested (atomics: dirty,
 * dirty_meta, seq, readonly, byte counts, owed blocks). Checkpoint state (cp, cp_pos, cp_ver,
 * the meta log) changes only under cp_lock exclusive; cp_ver may be read under it shared.
 */
#ifndef ZLFS_CORE_H
#define ZLFS_CORE_H

#include "cluster.h"
#include "format.h"
#include "lock.h"
#include "super.h"
#include "wbuf.h"
#include "zdev.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Host-side copies of NAT and SIT entries, cached a block at a time (metacache.c); the disk
 * forms are in format.h. */
struct nat_ent {
	uint32_t blkaddr;
	uint32_t ino;      /* the owner alone: the disk form's slot bits are in packed/slot */
	uint32_t version;
	uint8_t packed;    /* PACKED_INODES: the inode is slot SLOT of the pack at blkaddr */
	uint8_t slot;
};

/* E decoded from its disk form (zlfs_nat_entry_check passed): the slot bits out of ino. */
static inline void nat_ent_split(const struct zlfs_sb_info *sb, struct nat_ent *e)
{
	e->packed = e->slot = 0;
	/* a free entry names no slot, whatever its ino says (zlfs_nat_entry_check lets it be) */
	if ((sb->feat_incompat & ZLFS_FEAT_INCOMPAT_PACKED_INODES) &&
	    e->blkaddr != ZLFS_ADDR_NULL && e->ino >> ZLFS_NAT_SLOT_SHIFT) {
		e->packed = 1;
		e->slot = (uint8_t)((e->ino >> ZLFS_NAT_SLOT_SHIFT) - 1u);
		e->ino &= ZLFS_NAT_INO_MASK;
	}
}

/* The disk form of E's ino: the owner, with the slot bits of a packed inode. */
static inline uint32_t nat_ent_disk_ino(const struct nat_ent *e)
{
	return e->packed ? e->ino | (uint32_t)(e->slot + 1u) << ZLFS_NAT_SLOT_SHIFT : e->ino;
}

/* PACKED_INODES: the table of the slots of inode packs still live (npack.c), npack_lock. */
struct npack_tab {
	struct npack_ent *e; /* open addressing by block address */
	uint32_t cap, n;
};

struct seg_ent {
	uint16_t valid;
	uint8_t log;
	uint64_t mtime;
	uint8_t bitmap[ZLFS_SEG_BLOCKS_MAX / 8];
};

/* A type a caller may ask to append to beyond the on-disk ones: user data of files rewritten
 * often (data.c, "hot files"). It goes to the log HOT_DATA goes to, beside directory blocks,
 * but as user data it is refused the GC reserve. No block records it: a segment records the
 * active log it was written by. */
#define SEG_LOG_HOT_USER ((enum zlfs_log_type)ZLFS_NR_LOG_TYPES)
#define SEG_NR_REQ_TYPES (ZLFS_NR_LOG_TYPES + 1)

/* One active log: an open zone it appends to and the summary of its open segment. */
struct zlog_state {
	struct zlock lock;
	uint32_t zone;      /* ZLFS_ZONE_NONE until the first write */
	uint32_t next_blk;  /* within the zone */
	uint32_t nr_entries;
	struct zlfs_summary sum;
	uint8_t *sumbuf;    /* where the summary is sealed for writing */
	/* The zone came out of the GC reserve (nodes or GC took it with no free zone above
	 * it): user data sharing the log leaves its room alone until the reserve is whole
	 * again. Under seg_lock. */
	uint8_t reserve_paid;
};

enum zone_state {
	ZONE_FREE = 0,  /* no valid block as of the last durable checkpoint: may be reset */
	ZONE_OPEN,      /* a log appends to it */
	ZONE_USED,      /* holds or held blocks since the last durable checkpoint */
	ZONE_RETIRED,   /* free, but offline or read-only on the device: never taken */
};

struct node_page;
struct iattr_cache;
struct zcrypt_master;

enum gc_phase { GC_NONE = 0, GC_NORMAL, GC_BOOSTED, GC_FOREGROUND };

/* Garbage-collection policy (docs/design.md) and its counters. */
struct gc_opts {
	unsigned high_pct;     /* free zones (% of main) below which normal GC runs; 60 */
	unsigned low_pct;      /* 0: boosted below the paced target (gc_target_free); else
				* below this many % free, cleaning ahead */
	unsigned valid_thresh_pct; /* background GC takes only zones less valid than this; 90 */
	unsigned idle_ms;      /* normal GC waits for this much user idleness; 500 */
	unsigned boost_zones;  /* zones a boosted pass empties; 4 */
	unsigned pe_cycles;    /* program/erase rating for the lifetime estimate; 3000 */
	double read_nj_per_byte, write_nj_per_byte; /* energy model */
};

#define GC_LOG_MAX 32
struct gc_state {
	struct gc_opts o;
	enum gc_phase phase;
	struct {
		uint64_t time_ns;
		uint8_t from, to;
		uint32_t free_zones;
	} log[GC_LOG_MAX];
	uint32_t nlog;              /* transitions so far; the last GC_LOG_MAX are kept */
	uint64_t calm_since_ns;     /* atomic: since when the level has called for a lower
				     * phase than this one, 0 while it does not (gc_policy.c) */
	uint32_t victim, cursor;    /* zone being emptied by background steps, next block */
	int has_victim;
	struct zlfs_summary *sum;   /* summary of segment sum_segno, read once per segment */
	uint32_t sum_segno;
	struct gc_window {          /* blocks of the victim read ahead (gc.c) */
		uint32_t start, n;
		uint8_t *buf;
	} win;
	struct gc_ahead {           /* the next window, read by a helper meanwhile (gc_ahead.c) */
		struct zlock lock;      /* state, start, n, ret; buf while not being read */
		pthread_cond_t cond;
		pthread_t thread;
		int running, stop, state, ret;
		uint32_t start, n;
		uint8_t *buf;
	} ahead;
	uint64_t windows_ahead;     /* atomic: windows GC found read ahead */
	uint64_t read_yields;       /* atomic: paced steps put off for users' reads */
	uint64_t bulk_yields;       /* atomic: paced steps put off for users' bulk writes */
	uint64_t wakes, busy_ns, overlap_ns, bytes_read;
	uint64_t moved_blocks[3];   /* atomic: data blocks moved to the cold, frozen, hot log */
	int fold_hot;               /* gc_lock: the victim's hot data goes to the cold log, for
				     * want of free zones for a third GC log (gc_can_finish) */
	/* pacing (gc_policy.c): the pace, sampled by the worker, published for requests */
	double pace_zps;            /* zones user data takes per second, smoothed */
	uint32_t pace_mzps;         /* atomic: the same in thousandths */
	uint64_t pace_t_ns, pace_zones; /* the last sample */
	double pace_debt;           /* gc_lock: blocks GC owes for what users wrote while behind */
	uint64_t pace_user_blocks;  /* gc_lock: user blocks counted into the debt so far */
	uint64_t paid_user_bytes;   /* gc_lock: user bytes when a writer last paid foreground GC */
};

/* The attributes stat needs, kept for many more inodes than there are node pages. */
struct iattr {
	uint32_t mode, nlink, uid, gid, rdev, generation;
	uint64_t size, blocks, atime_ns, mtime_ns, ctime_ns;
	uint32_t xattrs; /* the inode has an xattr chain (xattr_nid): else every name is ENODATA */
};

/* Counters and flags that are read without their writers' locks. */
#define ATOMIC_GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ATOMIC_SET(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ATOMIC_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)

/* CLOCK_MONOTONIC in nanoseconds: when users last came and went, and the GC's pacing. */
static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct ilock_table;
struct ra_table;
struct tail_table;
struct remap;
struct mcache;

/* A set of nids (nidset.c); its owner's lock covers it. */
struct nidset {
	uint32_t *slot;
	uint32_t cap, count;
	int overflow;               /* could not grow: holds every nid until cleared */
};

struct zlfs_fs {
	struct zlock rename_lock, gc_lock;
	struct zrwlock cp_lock;
	struct zlock ncache_lock, nat_lock, seg_lock, stats_lock;
	struct zlock npack_lock;    /* the live slots of inode packs (npack.c) */
	struct npack_tab npack;
	pthread_cond_t ncache_cond; /* a page finished reading in */
	struct ilock_table *ilocks;
	struct zdev *dev;
	struct zlfs_sb_info sb;
	int sb_zone;
	int readonly;               /* atomic: set once, on the first write error */

	/* checkpoint: changed under cp_lock exclusive */
	struct zlfs_cp_info cp;     /* the last durable checkpoint */
	struct zlfs_cp_pos cp_pos;
	uint64_t cp_ver;            /* version the next checkpoint will carry */
	uint64_t seq;               /* atomic: last block sequence number given out */
	int dirty;                  /* atomic: anything changed since the last checkpoint */
	uint32_t dirty_meta;        /* atomic: NAT and SIT blocks changed since the last one */

	/* NAT: nat_lock */
	struct mcache *nat_cache;   /* NAT pages (metacache.c) */
	uint8_t *nat_dirty;         /* per NAT block: to be written by the next checkpoint */
	uint32_t nid_hint;          /* where the next scan for free nids starts */
	uint32_t *free_nids;        /* nids known free, taken from the end (node.c) */
	uint32_t nr_free_nids;
	struct nidset nofast;       /* inodes that need a checkpoint to fsync (lost a node, or
				     * new without DENTRY_MARK) until the next checkpoint */
	struct nidset fresh;        /* inodes made since the last checkpoint: their name is
				     * durable only by a checkpoint or a dentry mark */
	struct nidset nid_freed;    /* freed since the last checkpoint, so not reused:
				     * roll-forward must never meet two owners of one nid */
	uint64_t valid_nodes, valid_inodes;
	struct rec_dmark *rec_dmarks; /* mount only: recovery's dentry marks (recovery.c), */
	uint32_t nr_rec_dmarks;       /* taken and freed by the file layer's mount */

	/* SIT and zones: seg_lock */
	struct mcache *sit_cache;   /* SIT pages (metacache.c) */
	uint8_t *sit_dirty;         /* per SIT block: to be written by the next checkpoint */
	uint32_t *zone_valid;       /* per main zone */
	uint64_t *zone_born;        /* per main zone: sum of its segments' mtime x valid, so the
				     * age GC weighs needs no SIT page */
	uint8_t *zone_state;        /* per main zone, enum zone_state */
	uint8_t *zone_prefree;      /* per main zone: emptied since the last checkpoint */
	uint32_t free_zones;
	uint32_t retired_zones;
	uint64_t valid_blocks;
	uint32_t gc_pin;            /* GC's victim: not freed by a checkpoint while GC reads it */
	uint64_t data_zones_taken;  /* atomic: free zones the user data log took (this mount),
				     * the pace GC keeps up with */
	uint64_t prealloc_blocks;   /* data pointers reserved by fallocate (ZLFS_ADDR_PREALLOC):
				     * free space held for them, not counted as free; changed
				     * under seg_lock, read atomically by GC's levels */
	struct remap *remap;        /* owners of moved data blocks (remap.c), or NULL */

	/* meta log: cp_lock exclusive; meta_addr of a NAT (SIT) block also under nat_lock
	 * (seg_lock), since a cache miss reads it */
	uint32_t *meta_addr;        /* per logical meta block (NAT then SIT) */
	uint32_t *map_addr;         /* per map block */
	uint8_t *map_dirty;
	uint32_t nr_meta, nr_map;
	uint32_t meta_zone, meta_next;

	/* logs: each its own lock */
	struct zlog_state logs[ZLFS_NR_LOG_TYPES];
	uint8_t log_of[SEG_NR_REQ_TYPES]; /* requested type -> active type */
	uint32_t nr_lanes;          /* warm data logs user data is spread over: 1, or 4 */
	unsigned compress_alg;      /* new regular files are compressed with it (0: none) */
	int compress_level;         /* zstd's level, 0 its default */
	int noinline_dentry;        /* small directories keep a dentry block (dir_inline.c) */
	/* compress_extension=, nocompress_extension= (cluster.h's lists; "" for none): a new
	 * regular file whose name matches is compressed / is not (dcluster.c, dclu_start) */
	char compress_ext[CLUSTER_EXT_LIST], nocompress_ext[CLUSTER_EXT_LIST];
	struct {                    /* atomic: who writes to each lane (data.c) */
		uint32_t owner;     /* an inode's nid, 0: free */
		uint64_t last_ns;   /* its last write request (CLOCK_MONOTONIC_COARSE) */
	} lanes[ZLFS_DATA_LANES];

	/* node cache: ncache_lock */
	struct node_page **ncache;
	uint32_t ncache_buckets;
	uint32_t nr_cached, nr_dirty_nodes;
	struct node_page *dirty_head, *dirty_tail; /* written in this order: nodes dirtied
						    * together (a directory's new inodes) land
						    * together, and read back in one read-ahead */
	uint32_t owed_of[ZLFS_NR_LOG_TYPES]; /* atomic, by active log: changed blocks in memory
					      * (seg_owe) */
	uint32_t owing_share[ZLFS_NR_LOG_TYPES]; /* ncache_lock: dirty inodes the checkpoint
						  * packs, by log type (node_owe) */
	struct iattr_cache *icache; /* its own lock */
	uint32_t node_ra_next;      /* where a sequential run of node misses would go on */

	/* inodes unlinked while still open: carried in every checkpoint, freed at mount (nat_lock) */
	uint8_t *orphans;           /* bit per nid */
	uint32_t nr_orphans;

	/* telemetry: atomic counters; gc under gc_lock and stats_lock (gc.c) */
	uint64_t user_bytes, dev_bytes;
	uint64_t hot_user_bytes;     /* atomic: this mount's user data sent to the hot log */
	uint64_t dev_bytes_main, dev_bytes_node, dev_bytes_meta; /* this mount: main-area logs,
							  * node logs among them, meta log + packs */
	/* this mount's compressed files (dcluster.c, atomic): plaintext blocks the write path
	 * stored and the bytes their stored form took; clusters stored compressed and raw,
	 * blocks of raw clusters written alone */
	uint64_t clu_bytes_in, clu_bytes_out;
	uint64_t clu_compressed, clu_raw, clu_blocks_alone;
	uint64_t gc_bytes;          /* bytes migrated by garbage collection (lifetime) */
	uint64_t gc_bytes_at_mount; /* gc_bytes when this mount began */
	uint64_t gc_zones;          /* zones emptied by garbage collection (this mount) */
	struct gc_state gc;
	/* user activity, kept by the FUSE layer so background work can stand aside */
	int users_active;           /* requests inside the filesystem (atomic) */
	uint64_t last_user_ns;      /* when the last one left (CLOCK_MONOTONIC) */
	int users_reading;          /* atomic: reads inside */
	uint64_t last_read_ns;      /* atomic: when the last read left (CLOCK_MONOTONIC) */
	uint64_t last_bulk_read_ns; /* atomic: when the last of GC_BULK_BYTES or more left */
	int users_bulk_writing;     /* atomic: writes of GC_BULK_BYTES or more inside */
	uint64_t last_bulk_write_ns; /* atomic: when the last of those left */

	/* encryption: the master key, present only when it matched the superblock's check */
	struct zcrypt_master *master;
	int encrypt_all;

	struct wbuf *wb;            /* staged blocks for the main-area logs */
	struct rcache *rcache;      /* blocks read or written a moment ago (rcache.c), or NULL */
	uint8_t *iobuf;             /* one aligned block for metadata I/O: mount, and checkpoints
				     * under cp_lock exclusive */
	void *dcache;               /* the file layer's directory block cache (dir.c, own lock) */
	struct ra_table *ra;        /* the file layer's read-ahead windows (readahead.c) */
	struct tail_table *tails;   /* the file layer's partial blocks in memory (tailbuf.c), or
				     * NULL: none are held */
	uint32_t held_blocks;       /* atomic: how many (statistics) */
	uint64_t data_gen_seq;      /* atomic: the last data generation given out */
};

/* ---- mount.c ---------------------------------------------------------------------------- */
/* Where the master key of an encrypted filesystem comes from (docs/encryption.md). */
struct zlfs_key_source {
	const char *keyfile;        /* a 64-byte key file, or NULL */
	const char *passphrase;     /* NUL-terminated, or NULL; wiped by the caller */
	int encrypt_all;            /* encrypt every new file and directory */
};

struct zlfs_mount_opts {
	int readonly;
	int direct;
	const struct zlfs_key_source *key; /* NULL: mount without a key (locked view) */
	struct wbuf_opts wb;        /* zeros: the defaults (dynamic, 4 MiB, 192 KiB slots) */
	const struct gc_opts *gc;   /* NULL: gc_defaults() */
	int daemon;                 /* the zlfs daemon: mark the device for tools (zdev.h) */
	unsigned wait_secs;         /* wait this long for a daemon finishing its unmount */
	size_t meta_cache;          /* bytes for NAT and SIT pages (0: MCACHE_DEFAULT_BUDGET) */
	int shared;                 /* with readonly: the device may be held by a mounted daemon
				     * (zdev_open_opts.shared): zlfs-dump's view of it */
	int compress_given;         /* compress= was given: else the superblock's default */
	unsigned compress_alg;      /* compress=: 0 none, else enum zlfs_cluster_alg; refused
				     * without the COMPRESS feature (docs/compression.md) */
	int compress_level;         /* zstd's level, 0 its default */
	const char *compress_ext;   /* compress_extension=, checked (cluster_ext_check), or NULL */
	const char *nocompress_ext; /* nocompress_extension=, or NULL */
	int noinline_dentry;        /* no directory is stored inline from now (INLINE_DENTRIES
				     * turns on at the first that is; docs/format.md) */
};
int zlfs_mount(const char *path, const struct zlfs_mount_opts *o, struct zlfs_fs **out);
/* The daemon's mount is visible: tools that find the device busy now fail at once. */
void zlfs_serving(struct zlfs_fs *fs);
/* The daemon is about to fork into the background: no thread of the mount may be left
 * waiting on a lock or condition variable the child inherits (the write buffer's flushers,
 * which a recovering mount starts, are stopped; the child starts its own). */
void zlfs_before_fork(struct zlfs_fs *fs);
/* Write a clean checkpoint (unless read-only) and release everything. */
int zlfs_unmount(struct zlfs_fs *fs);
/* A log's zone holds its write pointer WP_BLK past the segment the checkpoint left open at
 * CP_BLK, but not that segment's summary: a device that moved the write pointer itself (a
 * zone finished under the log). The segment's owners were only in the checkpoint pack, so GC
 * could never move its blocks: a device write-pointer error (mount and fsck). */
int log_summary_lost(struct zlfs_fs *fs, uint32_t zone, uint32_t cp_blk, uint32_t wp_blk);
/* The summary entry of main-area block ADDR when it lies in a segment a log still fills (the
 * checkpoint's copy, rolled forward): 1 with it in *NID / *OFS, -ENOENT past the entries
 * written, 0 when ADDR is in no open segment (its entry is in the segment's summary block). */
int log_open_entry(const struct zlfs_fs *fs, uint32_t addr, uint32_t *nid, uint16_t *ofs);

/* ---- orphan.c: inodes with no name, still open ------------------------------------------ */
int orphan_add(struct zlfs_fs *fs, uint32_t ino);
void orphan_del(struct zlfs_fs *fs, uint32_t ino);
int orphan_is(struct zlfs_fs *fs, uint32_t ino);
uint32_t orphan_count(struct zlfs_fs *fs);
/* The first orphan after AFTER (0 to start), or 0 when there is none. */
uint32_t orphan_next(struct zlfs_fs *fs, uint32_t after);

/* ---- ilock.c ---------------------------------------------------------------------------- */
struct ilock;
/* Lock inode INO, for reading or (EXCL) writing, as a directory's entries (LR_IPARENT) or as
 * the inode itself (LR_ICHILD); KEY orders locks taken together at one rank (see the lock
 * order above). NULL when out of memory. */
struct ilock *ilock_take(struct zlfs_fs *fs, uint32_t ino, int excl, unsigned rank, uint64_t key);
void ilock_drop(struct zlfs_fs *fs, struct ilock *l);
int ilock_init(struct zlfs_fs *fs);
void ilock_destroy(struct zlfs_fs *fs);

/* ---- remap.c ---------------------------------------------------------------------------- */
/* Block ADDR now belongs to slot OFS of node NID, whatever its segment summary says.
 * -ENOSPC when the table (what one checkpoint carries) is full. */
int remap_set(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs);
/* 1 and the owner when ADDR was moved, else 0. */
int remap_find(struct zlfs_fs *fs, uint32_t addr, uint32_t *nid, uint16_t *ofs);
/* With seg_lock held (seg_mark). */
void remap_drop_locked(struct zlfs_fs *fs, uint32_t addr);
uint32_t remap_room(struct zlfs_fs *fs);
uint32_t remap_count(struct zlfs_fs *fs);
uint32_t remap_export(struct zlfs_fs *fs, struct zlfs_remap_entry *out, uint32_t max);
void remap_destroy(struct zlfs_fs *fs);
/* Turn on an incompatible feature: the superblock is rewritten before anything that needs it
 * can reach the device (super.c). */
int zlfs_feature_incompat(struct zlfs_fs *fs, uint32_t bit);

/* ---- keys.c ----------------------------------------------------------------------------- */
/* Load the master key SRC names and check it against the superblock before anything is
 * written: -EKEYREJECTED for a wrong key, -EINVAL for a key given to a filesystem made without
 * encryption. SRC NULL (or naming no key) leaves the filesystem locked: fs->master NULL. */
int key_load(struct zlfs_fs *fs, const struct zlfs_key_source *src, const char *path);
void key_drop(struct zlfs_fs *fs);

/* ---- segment.c -------------------------------------------------------------------------- */
/* Append one block to log TYPE, owned by node NID at slot OFS (ZLFS_SUM_NODE for a node
 * block). Returns 0 and the block address in *ADDR, -ENOSPC when no zone is left. */
/* seg_append for data whose write time BORN (seconds) is carried over: GC moving a block. */
int seg_append_born(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t nid,
		    uint16_t ofs, uint64_t born, uint32_t *addr);
/* When the data of block ADDR was written, as its segment records it (the mean over the
 * segment's valid blocks), and the log that wrote the segment (ZLFS_LOG_NONE outside the
 * main area). */
void seg_origin(struct zlfs_fs *fs, uint32_t addr, uint64_t *born, uint8_t *log);
/* Valid blocks of main-area ZONE. */
uint32_t seg_zone_valid(struct zlfs_fs *fs, uint32_t zone);
/* Blocks left in the open zone of the log TYPE appends to (0 without one); seg_lock held. */
uint64_t seg_log_room_locked(const struct zlfs_fs *fs, enum zlfs_log_type type);
/* Blocks the changed blocks in memory owe the log TYPE appends to (its next checkpoint's). */
uint64_t seg_log_owed(const struct zlfs_fs *fs, enum zlfs_log_type type);
/* Lane I (0 .. nr_lanes - 1) of the warm data log: WARM_DATA, then WARM_DATA_1..3. */
static inline enum zlfs_log_type seg_lane_type(uint32_t i)
{
	return i ? (enum zlfs_log_type)(ZLFS_LOG_WARM_DATA_1 + i - 1) : ZLFS_LOG_WARM_DATA;
}
/* Whether TYPE is one of the warm data log's lanes (WARM_DATA itself included). */
static inline int seg_is_lane(enum zlfs_log_type type)
{
	return type == ZLFS_LOG_WARM_DATA ||
	       (type >= ZLFS_LOG_WARM_DATA_1 && type <= ZLFS_LOG_WARM_DATA_3);
}
/* At least the zones the logs owe to changed metadata beyond their open zones' room: each
 * log's owed blocks in whole zones, as if it had no room (no lock). */
uint32_t seg_owed_zones_bound(const struct zlfs_fs *fs);
int seg_append(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t nid,
	       uint16_t ofs, uint32_t *addr);
/* Append N consecutive blocks of BUF to log TYPE for slots OFS, OFS+1... of node NID (or all
 * ZLFS_SUM_NODE), their addresses to ADDR: one acquisition of each lock for the run. Returns
 * how many were appended (fewer only when user data runs out of room), or a negative errno
 * when none was. */
int seg_append_n(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t n,
		 uint32_t nid, uint16_t ofs, uint32_t *addr);
/* seg_append_n for blocks that go to slots OFS[0], OFS[1]... of node NID, not consecutive
 * ones: a run of a compressed file's clusters, each's stored blocks after its marker. */
int seg_append_slots(struct zlfs_fs *fs, enum zlfs_log_type type, const void *buf, uint32_t n,
		     uint32_t nid, const uint16_t *ofs, uint32_t *addr);
/* Stamp a metadata block with the current checkpoint version and the next sequence number,
 * and seal its checksum: every metadata block written after mount goes through here. */
void blk_seal(struct zlfs_fs *fs, void *buf);
/* Mark a block valid or invalid in the SIT. ADDR 0 is ignored. */
void seg_mark(struct zlfs_fs *fs, uint32_t addr, int valid);
void seg_mark_n(struct zlfs_fs *fs, const uint32_t *addr, uint32_t n, int valid);
int seg_read(struct zlfs_fs *fs, uint32_t addr, void *buf);
/* Read N (at most 256) consecutive blocks of one zone from ADDR, staged ones included. The
 * caller keeps the blocks from being reset: their owners' locks, or GC's pin. */
int seg_read_run(struct zlfs_fs *fs, uint32_t addr, uint32_t n, void *buf);
/* Blocks from ADDR (at most MAX, at least 1) that one read may cover: up to the last valid
 * block of ADDR's segment, never its summary slot, so never past what was written. */
uint32_t seg_valid_span(struct zlfs_fs *fs, uint32_t addr, uint32_t max);
/* The first valid block at or after ADDR in ADDR's zone, or UINT32_MAX when none is left. */
uint32_t seg_next_valid(struct zlfs_fs *fs, uint32_t addr);
/* Zones emptied since the last checkpoint, waiting for the next one to become free. */
uint32_t seg_prefree_zones(struct zlfs_fs *fs);
/* Leave free zones the device reports offline or read-only (Z: the report of every zone,
 * from zone 0) out of the free pool. */
void seg_retire_bad_zones(struct zlfs_fs *fs, const struct zdev_zone *z);
/* Free zones user data leaves alone so GC can always run: the superblock's reserve, and
 * never fewer than a GC pass needs (images made when mkfs's minimum was 2 hold 3). */
uint32_t seg_reserve(const struct zlfs_fs *fs);
/* Blocks free for new data (what statfs reports): zones held for GC are not counted, nor
 * the room that changed nodes and directory blocks will take at the next checkpoint. */
uint64_t seg_free_blocks(struct zlfs_fs *fs);
/* The same with DEAD more blocks counted as free zones would be: the room once GC has turned
 * dead blocks back into free zones, reservations still subtracted (gc_free_blocks). */
uint64_t seg_free_blocks_plus(struct zlfs_fs *fs, uint64_t dead);
/* Blocks reserved by fallocate (ZLFS_ADDR_PREALLOC pointers), and a change of their count. */
uint64_t seg_prealloc(struct zlfs_fs *fs);
void seg_prealloc_add(struct zlfs_fs *fs, int64_t delta);
/* The zones the reservations take, rounded up (atomics only: GC's levels ask it). */
uint32_t seg_prealloc_zones(struct zlfs_fs *fs);
/* DELTA blocks changed in memory that will be appended to the log of TYPE. */
void seg_owe(struct zlfs_fs *fs, enum zlfs_log_type type, int delta);
/* Blocks changed in memory in all (0 right after a checkpoint). */
uint64_t seg_owed_blocks(const struct zlfs_fs *fs);
/* Whether a new file may still be created: names and inodes never eat into the reserve. */
int seg_room_for_user(struct zlfs_fs *fs);
int seg_init(struct zlfs_fs *fs);
/* After a checkpoint is durable: zones emptied before it become free, but for GC's pinned
 * victim. */
void seg_ckpt_done(struct zlfs_fs *fs);
/* Whether block ADDR is valid in the SIT. */
int seg_is_valid(struct zlfs_fs *fs, uint32_t addr);
uint32_t seg_free_zones(struct zlfs_fs *fs);
/* The state (enum zone_state) of main-area zone ZONE (a device zone number). */
int seg_zone_state(struct zlfs_fs *fs, uint32_t zone);
/* Pin ZONE (ZLFS_ZONE_NONE: none) as the zone GC is reading: it is not freed meanwhile. */
void seg_pin(struct zlfs_fs *fs, uint32_t zone);
uint32_t seg_usable_per_zone(const struct zlfs_fs *fs);

/* ---- rcache.c: main-area blocks read or written a moment ago ---------------------------- */
/* A cache of BLOCKS blocks (0: none; without a call there is none). */
int rcache_init(struct zlfs_fs *fs, uint32_t blocks);
void rcache_destroy(struct zlfs_fs *fs);
/* 1 with block ADDR's bytes in BUF, 0 when not cached. */
int rcache_get(struct zlfs_fs *fs, uint32_t addr, void *buf);
/* Block ADDR holds BUF on the device (staged for it). */
void rcache_put(struct zlfs_fs *fs, uint32_t addr, const void *buf);
/* Forget blocks [FIRST, FIRST+N): their zone is about to be reset. */
void rcache_forget(struct zlfs_fs *fs, uint32_t first, uint32_t n);
struct rcache_stats {
	uint64_t blocks, hits, misses, fills;
};
void rcache_stats(struct zlfs_fs *fs, struct rcache_stats *st);

/* ---- node.c ----------------------------------------------------------------------------- */
/* A cached node block. Everything but buf is the cache's (ncache_lock; dirty and hot may be
 * tested without it); buf belongs to the lock of the inode the node is part of. */
struct node_page {
	struct node_page *next;     /* hash chain */
	struct node_page *dnext, *dprev; /* the dirty list, in the order pages were dirtied */
	uint32_t nid;
	int dirty;
	int hot;                    /* belongs to a directory: written to the hot node log */
	int reading;                /* being read in: others wait on ncache_cond */
	uint8_t owed_type;          /* while dirty: the log type its room is kept in (seg_owe) */
	uint8_t owes_share;         /* while dirty: owes a share of a pack, not a block */
	int refs;
	uint64_t data_gen;          /* an inode's: changes whenever its data does (readahead.c) */
	uint64_t heat_at;           /* an inode's, under its lock: fs->user_bytes + 1 when its
				     * current write episode began (0: none seen; data.c) */
	uint8_t heat_hot;           /* that episode's data goes to the hot data log */
	uint8_t heat_rewrite;       /* blocks were dropped: the next write replaces data */
	uint8_t lane;               /* an inode's, under its lock: 1 + the warm data lane it
				     * last wrote to (0: none since it was read in; data.c) */
	void *buf;                  /* 4 KiB, aligned */
};

/* Mark a page as a directory's (hot) or not; a dirty page's owed room follows it. */
void node_set_hot(struct zlfs_fs *fs, struct node_page *np, int hot);
/* Allocate a free nid for inode INO (or a new inode when INO is 0: nid == ino). -EAGAIN when
 * the only free nids were freed since the last checkpoint (write one, then retry, holding
 * no lock a checkpoint needs). */
int node_alloc_nid(struct zlfs_fs *fs, uint32_t ino, uint32_t *nid);
/* Where a later mount's search for free nids should start: the lowest nid listed free. */
uint32_t nid_resume_point(struct zlfs_fs *fs);
/* Get the node page of NID (read and verified on a miss); put it back with node_put. The
 * caller holds the lock of the inode NID belongs to (shared at least). */
int node_get(struct zlfs_fs *fs, uint32_t nid, struct node_page **np);
/* Blocks [ADDR, ADDR + N) as read into BUF: keep each that is the current copy of a node not
 * cached yet (inodes only with INODES) as a clean page, after dropping clean pages past the
 * cache's bound. A reader that visits nodes in the order the log wrote them (fsck) reads
 * them in large runs. */
void node_keep_run(struct zlfs_fs *fs, uint32_t addr, uint32_t n, const void *buf, int inodes);
/* Whether NID's page is in the cache (then it may be newer than the device's copy). */
int node_cached(struct zlfs_fs *fs, uint32_t nid);
/* The first of the pointers P[I..N) that is not null, or N (most of a node's are null). */
uint32_t node_next_ptr(const le32 *p, uint32_t i, uint32_t n);
/* node_get for a pointer inside INO's tree: the node must be a KIND of inode INO at node
 * offset OFS (NODE_OFS_ANY: any), or it is damage (-EUCLEAN, logged): a pointer to another
 * file's node, or to a node of another level, must never be followed, let alone written. */
#define NODE_OFS_ANY UINT32_MAX
int node_get_as(struct zlfs_fs *fs, uint32_t nid, uint32_t ino, enum zlfs_blk_kind kind,
		uint32_t ofs, struct node_page **np);
/* The checks a node block read for NID must pass (checksum, then format_check.c's): 0, or
 * -EUCLEAN with the reason in WHY. */
int node_block_check(struct zlfs_fs *fs, uint32_t nid, const void *buf, char *why, size_t len);
/* Why NID's block on the device is refused (for fsck's report): its check's reason in WHY,
 * and 0 if it is in fact fine. */
int node_explain(struct zlfs_fs *fs, uint32_t nid, char *why, size_t len);
/* A fresh zeroed page for a newly allocated NID of KIND, dirty. */
int node_new(struct zlfs_fs *fs, uint32_t nid, uint32_t ino, enum zlfs_blk_kind kind,
	     struct node_page **np);
void node_put(struct zlfs_fs *fs, struct node_page *np);
/* Put back a page read without its inode's lock (a walk up parent links): refreshing its
 * attributes would read what the lock's holder may be changing. */
void node_put_unchanged(struct zlfs_fs *fs, struct node_page *np);
/* One more hold on a page already held. */
void node_ref(struct zlfs_fs *fs, struct node_page *np);
void node_dirty(struct zlfs_fs *fs, struct node_page *np);
/* Free NID: its block becomes invalid and the NAT entry empty. */
void node_free(struct zlfs_fs *fs, uint32_t nid);
/* node_free for a NID whose NAT entry names a pack slot holding another inode (a crafted or
 * damaged NAT, npack_slot_owner; fsck's repair): the entry is emptied and the slot, its
 * owner's, stays live. */
void node_free_stray(struct zlfs_fs *fs, uint32_t nid);
/* INO's next fsync writes a checkpoint: roll-forward could not redo what changed. */
void node_fsync_needs_checkpoint(struct zlfs_fs *fs, uint32_t ino);
/* Write every dirty node to its log. */
int node_flush_all(struct zlfs_fs *fs);
/* What the fsync of a file made since the last checkpoint says of its one name: NAME (LEN
 * bytes, its disk form) in directory PARENT, which the last checkpoint had (DENTRY_MARK). */
struct node_dmark {
	uint32_t parent;
	uint32_t generation;
	const char *name;
	uint16_t len;
	uint8_t on_device; /* an earlier fsync's mark says it: recovery keeps that one */
};
/* fsync without a checkpoint: write INO's dirty nodes marked for roll-forward and make them
 * and all staged data durable; for an inode made since the last checkpoint DM (else NULL)
 * is written as a dentry mark in the group, unless one is on the device already. -EAGAIN
 * when INO needs a checkpoint instead. */
int node_fsync(struct zlfs_fs *fs, uint32_t ino, const struct node_dmark *dm);
/* Whether INO was made since the last checkpoint (or needs one to fsync): a directory a
 * dentry mark may name must be neither. */
int node_is_fresh(struct zlfs_fs *fs, uint32_t ino);
/* Whether INO was made since the last checkpoint, with DENTRY_MARK (none of its names is in
 * that checkpoint); without the feature, 0. */
int node_is_new(struct zlfs_fs *fs, uint32_t ino);
/* A checkpoint is durable: new inodes and freed nids need no checkpoint any more. */
void node_ckpt_done(struct zlfs_fs *fs);
/* Drop clean pages when the cache is over its bound. */
void node_shrink(struct zlfs_fs *fs);
int node_init(struct zlfs_fs *fs);
void node_destroy(struct zlfs_fs *fs);
/* Re-point NID at ADDR (after writing or moving it): 0, or -EIO when its NAT page cannot be
 * read (the filesystem is then read-only). */
int nat_set(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t ino);
/* A copy of NID's NAT entry into E (zeros past the table): 0, or -EIO as nat_set. */
int nat_get(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e);
/* As nat_set for inode NID stored in slot SLOT of the pack at ADDR (npack.c). */
int nat_set_packed(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot);
#define FREE_NIDS_MAX 4096 /* free nids kept at hand (16 KiB; nat.c, sized by node_init) */
/* nat.c, for node.c: nat_set with nat_lock held; nat_get from a cached NAT page only
 * (-ENOENT when it is not cached: no device read). */
int nat_set_locked(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t ino);
int nat_peek(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e);

/* ---- npack.c: inode packs (PACKED_INODES) -------------------------------------------------- */
/* The copy of a node at OLD (its NAT entry before a write, free or move) died: a whole block
 * is marked dead in the SIT, a pack slot only when it was the pack's last live one. */
void node_addr_dead(struct zlfs_fs *fs, uint32_t nid, const struct nat_ent *old);
/* The nid the pack at ADDR holds in slot SLOT (0: none) into OWNER: 0, or a negative errno
 * (-EUCLEAN: the pack is damaged). */
int npack_slot_owner(struct zlfs_fs *fs, uint32_t addr, uint32_t slot, uint32_t *owner);
/* Slot SLOT of the pack BLK, checked (checksum, header, the slot holds NID), expanded into
 * inode NID's 4 KiB form at OUT and sealed (OUT must not be BLK): 0, or -EUCLEAN saying why
 * in WHY. The inode's own fields are the caller's to check (node_block_check). */
int npack_slot(struct zlfs_fs *fs, uint32_t nid, uint32_t slot, const void *blk, void *out,
	       char *why, size_t len);
/* npack_slot for the pack read from ADDR, a damaged one logged. */
int npack_expand(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot,
		 const void *blk, void *out);
/* NID's current copy, whose NAT entry is E, into BUF in the 4 KiB form (not checked when it
 * is a whole block: node_block_check). */
int node_read_current(struct zlfs_fs *fs, uint32_t nid, const struct nat_ent *e, void *buf);
/* npack.h: packing dirty inodes at a checkpoint (node.c and npack.c only). */
/* GC met the valid pack at ADDR with no slot the NAT names (a slot's death could not work
 * out its live slots: node_addr_dead): work them out again, and mark it dead if none is. */
int npack_settle(struct zlfs_fs *fs, uint32_t addr);
/* A checkpoint is durable: drop the table's tombstones (cp_lock exclusive). */
void npack_ckpt_done(struct zlfs_fs *fs);
void npack_destroy(struct zlfs_fs *fs);

/* ---- metacache.c ----------------------------------------------------------------------- */
#define MCACHE_DEFAULT_BUDGET (32u << 20) /* NAT and SIT pages together */
/* Caches for the NAT and SIT pages, BUDGET bytes between them (0: the default). */
/* Read the meta block at ADDR into BUF (aligned) and verify it is block INDEX of KIND. */
int meta_block_read(struct zlfs_fs *fs, uint32_t addr, void *buf, uint16_t kind, uint32_t index);
/* The same for a block already read (RET: the read's result), logged when it fails. */
int meta_block_check(struct zlfs_fs *fs, uint32_t addr, const void *buf, uint16_t kind,
		     uint32_t index, int ret);
int mcache_init(struct zlfs_fs *fs, size_t budget);
void mcache_destroy(struct zlfs_fs *fs);
/* NID's entry in its cached NAT page, with nat_lock held; NULL when the page cannot be read
 * (logged, and the filesystem turned read-only). Valid while the lock is held and until
 * several other NAT pages have been asked for (metacache.c). */
struct nat_ent *nat_ent_locked(struct zlfs_fs *fs, uint32_t nid);
/* Segment SEGNO's entry in its cached SIT page, with seg_lock held; as nat_ent_locked. */
struct seg_ent *sit_ent_locked(struct zlfs_fs *fs, uint32_t segno);
/* Why the NAT's (SIT's, when SIT) last page could not be read: -EUCLEAN for a damaged block,
 * -EIO, -ENOMEM. The table's lock held. */
int mcache_error(struct zlfs_fs *fs, int sit);
/* Read and verify every NAT and SIT block the checkpoint references (fsck: a damaged one
 * makes the checkpoint unusable, as a mount that read them all used to find). */
int mcache_verify_all(struct zlfs_fs *fs);
/* NAT block B was never written and is not cached: every nid in it is free (nat_lock held). */
int nat_block_unused_locked(struct zlfs_fs *fs, uint32_t b);
/* NAT block B is cached (nat_lock held). */
int nat_block_cached_locked(struct zlfs_fs *fs, uint32_t b);
/* NAT (SIT, when SIT) block B for a checkpoint into BUF (zeroed; header left to the caller):
 * its cached page's entries, or, not cached, a copy of the block as last written. The
 * table's lock held. */
int mcache_copy_or_encode(struct zlfs_fs *fs, uint32_t b, int sit, void *buf);
/* Drop clean pages past the bounds (a checkpoint has just cleaned them). */
void mcache_trim(struct zlfs_fs *fs);
/* Mount: every zone's valid blocks and age sum (zone_valid, zone_born) from the SIT. */
int sit_scan(struct zlfs_fs *fs);
struct mcache_stats {
	uint32_t pages[2], max_pages[2]; /* [0] NAT, [1] SIT */
	uint64_t hits[2], misses[2], evictions[2];
	uint32_t page_bytes;
};
void mcache_stats(struct zlfs_fs *fs, struct mcache_stats *st);

/* ---- nidset.c --------------------------------------------------------------------------- */
void nidset_add(struct nidset *s, uint32_t nid);
int nidset_has(const struct nidset *s, uint32_t nid);
void nidset_clear(struct nidset *s);
void nidset_free(struct nidset *s);

/* ---- icache.c --------------------------------------------------------------------------- */
/* Attributes of inode INO without reading its node: 0, or -ENOENT when not cached. */
int iattr_get(struct zlfs_fs *fs, uint32_t ino, struct iattr *a);
/* Refresh the cached attributes from an inode page (held, its inode locked). */
void iattr_update(struct zlfs_fs *fs, struct node_page *np);
void iattr_drop(struct zlfs_fs *fs, uint32_t ino);
void iattr_of_inode(const struct zlfs_inode *in, struct iattr *a);
int icache_init(struct zlfs_fs *fs);
void icache_destroy(struct zlfs_fs *fs);

/* ---- gc_policy.c ------------------------------------------------------------------------ */
/* How a victim is chosen (docs/design.md, "Victims"):
 *  GC_PICK_BACKGROUND  cost-benefit with age, among the zones below the valid-ratio threshold
 *  GC_PICK_FOREGROUND  cost-benefit with age, among all zones worth collecting: at the
 *                      foreground level, where writers pay for it in installments
 *  GC_PICK_EMERGENCY   greedy (the most free space now): a write met ENOSPC, or an
 *                      administrator asked for zones now */
enum gc_pick { GC_PICK_BACKGROUND = 0, GC_PICK_FOREGROUND, GC_PICK_EMERGENCY };
/* The best victim as PICK says. -ENOENT when none is worth collecting. */
int gc_pick_victim(struct zlfs_fs *fs, enum gc_pick pick, uint32_t *zone);
/* Free zones at or below which writers pay for collection in the request path. */
uint32_t gc_fg_level(struct zlfs_fs *fs);
/* Free zones background GC keeps in hand: the foreground level plus the pacing margin. */
uint32_t gc_target_free(struct zlfs_fs *fs);
/* Measure the pace of writing (the background worker, now and then). */
void gc_pace_sample(struct zlfs_fs *fs);
/* Pacing of background GC, with gc_lock held: count what users wrote into what GC owes them
 * (in PHASE), ask how many blocks the next step may move (0: stand aside for waiting users,
 * or for the reads and bulk writes in USERS_IO (gc_users_io), now), and say how many it
 * moved. */
void gc_pace_owe(struct zlfs_fs *fs, enum gc_phase phase);
uint32_t gc_step_budget(struct zlfs_fs *fs, int users_wait, int users_io);
void gc_pace_moved(struct zlfs_fs *fs, uint32_t moved);
/* A user read or write of this many bytes or more is a bulk transfer: bandwidth, not a round
 * trip, is what its user waits for, and GC's device traffic takes from it. */
#define GC_BULK_BYTES (256u << 10)
/* What users are doing that background GC leaves the device to: GC_USERS_READING (a read in
 * flight, or ended within GC_READ_QUIET_MS, or a bulk one within GC_BULK_QUIET_MS),
 * GC_USERS_BULK_WRITING (a bulk write in flight or ended within GC_BULK_QUIET_MS). A stream
 * leaves gaps of a round trip between its requests. */
#define GC_USERS_READING 1
#define GC_USERS_BULK_WRITING 2
int gc_users_io(struct zlfs_fs *fs);
/* Blocks of GC work a writer pays at the foreground level before its request returns. */
uint32_t gc_fg_budget(const struct zlfs_fs *fs);
/* Whether a background pass in PHASE that emptied DONE zones should take another. */
int gc_bg_more(struct zlfs_fs *fs, enum gc_phase phase, unsigned done);
/* The log that data moved out of a segment written by log FROM goes to. */
enum zlfs_log_type gc_dest_log(const struct zlfs_fs *fs, uint8_t from);
/* 0, 1, 2: the cold, frozen, hot log, as gc.moved_blocks counts moves to DEST. */
unsigned gc_dest_index(enum zlfs_log_type dest);
/* Whether the free zones suffice to empty ZONE: one for each GC log its data would fill past
 * the room left in that log's zone, and two for the nodes and the checkpoint. */
int gc_can_finish(struct zlfs_fs *fs, uint32_t zone);
/* Dead blocks in the zones GC would take: space that collection gives back. */
uint64_t gc_reclaimable_blocks(struct zlfs_fs *fs);
/* Free space as statfs reports it and fallocate may promise it: free blocks and the dead
 * ones GC would reclaim, less what changed metadata owes and what fallocate reserved. */
uint64_t gc_free_blocks(struct zlfs_fs *fs);
/* Free zones as GC's levels count them: the free zones less those reservations take. */
uint32_t gc_free_zones(struct zlfs_fs *fs);
/* Free zones are down to the foreground level. */
int gc_urgent(struct zlfs_fs *fs);
void gc_defaults(struct gc_opts *o);
/* The phase the free space calls for now; a change is logged with its time. A phase is
 * entered as soon as the level calls for it and left only once the level has stayed past
 * its exit for GC_PHASE_HOLD_MS (gc_policy.c says why). gc_phase_update_at takes the time
 * (CLOCK_MONOTONIC ns) from its caller: tests drive the level and the clock. */
#define GC_PHASE_HOLD_MS 30000
enum gc_phase gc_phase_update(struct zlfs_fs *fs);
enum gc_phase gc_phase_update_at(struct zlfs_fs *fs, uint64_t now_ns);
/* What the background worker does in phase HELD: the phase the level calls for when that is
 * lower (a phase held past its exit), else HELD. */
enum gc_phase gc_phase_work(struct zlfs_fs *fs, enum gc_phase held);
const char *gc_phase_name(enum gc_phase p);

/* ---- gc.c ------------------------------------------------------------------------------- */
/* Move data block ADDR, which a slot of node NID points at (whatever the block's summary
 * entry says), to a new block whose summary entry names that slot: fsck's repair of a
 * summary entry that names another owner (a sealed summary is never rewritten in place).
 * -ENODATA when ADDR is not valid or no slot of NID points at it. */
int gc_relocate(struct zlfs_fs *fs, uint32_t addr, uint32_t nid);
/* Move every valid block out of ZONE (the caller holds gc_lock); the next checkpoint writes
 * its moved nodes and frees it. */
int gc_migrate_zone(struct zlfs_fs *fs, uint32_t zone);
/* Empty victims (a partly moved one first) until free zones net of reservations
 * (gc_free_zones) plus prefree zones reach WANT_FREE or MAX_ZONES were emptied: the number
 * emptied, or -ENOENT when no zone has anything to reclaim. The caller holds gc_lock (and no
 * cp_lock), and writes the checkpoint that makes the emptied zones free. */
int gc_reclaim(struct zlfs_fs *fs, uint32_t want_free, enum gc_pick pick, uint32_t max_zones);
/* Move up to BUDGET valid blocks out of the current victim (choosing one first, as
 * gc_pick_victim, if the free zones can finish it), with gc_lock held and cp_lock taken
 * shared for the step. Returns blocks moved, -ENOENT when no zone is worth collecting, or
 * -ENOSPC when the free zones could not finish one; a victim done is counted in gc_zones and
 * freed by the next checkpoint, which writes its moved nodes. */
int gc_step(struct zlfs_fs *fs, enum gc_pick pick, uint32_t budget);

/* ---- gc_ahead.c ------------------------------------------------------------------------- */
/* The helper that reads GC's next window (a buffer of BYTES); stopped at unmount. */
int gc_ahead_start(struct zlfs_fs *fs, size_t bytes);
void gc_ahead_stop(struct zlfs_fs *fs);
/* Read blocks [START, START+N) of the victim meanwhile (after any read still under way). */
void gc_ahead_post(struct zlfs_fs *fs, uint32_t start, uint32_t n);
/* Whether the window read ahead holds ADDR: then W's buffer and it change places (1). The
 * window read ahead is used up either way. */
int gc_ahead_take(struct zlfs_fs *fs, uint32_t addr, struct gc_window *w);
/* Drop what was read ahead, once no read is under way: the victim changes. */
void gc_ahead_forget(struct zlfs_fs *fs);

/* ---- stats.c ---------------------------------------------------------------------------- */
/* The filesystem's numbers as a JSON object: its length, or -ENOSPC if LEN is too small. */
int zlfs_stats_json(struct zlfs_fs *fs, char *buf, size_t len);
/* Valid nodes and retired zones, for statfs. */
void zlfs_counts(struct zlfs_fs *fs, uint64_t *nodes, uint64_t *retired_zones);

/* ---- recovery.c ------------------------------------------------------------------------- */
/* Roll fsync'ed nodes written after the checkpoint forward into NAT, SIT and summaries. The
 * dentry marks of the groups taken are left in fs->rec_dmarks, in write order, for the file
 * layer to link (their blocks valid until then, so no zone holding one is reset). */
int recover_roll_forward(struct zlfs_fs *fs, uint32_t *recovered);
/* A recovered dentry mark: inode INO's name NAME in directory PARENT (block ADDR). */
struct rec_dmark {
	uint64_t seq;
	uint32_t ino, parent, generation, addr;
	uint16_t len;
	char name[ZLFS_NAME_MAX + 1];
};

/* ---- ckpt.c ----------------------------------------------------------------------------- */
/* Load the newest checkpoint; BUDGET bytes for NAT and SIT pages (0: the default). */
int ckpt_load(struct zlfs_fs *fs, size_t budget);
void ckpt_free(struct zlfs_fs *fs);
/* Make everything durable: nodes, meta blocks, a new checkpoint pack. CLEAN marks unmount.
 * Called with cp_lock held exclusively (or alone: mount, fsck). */
int ckpt_write(struct zlfs_fs *fs, int clean);
/* Enough changed metadata has piled up that a checkpoint should be written now. */
int ckpt_due(const struct zlfs_fs *fs);
/* Twice that: changes have outrun the checkpoint thread, and the writer should wait. */
int ckpt_overdue(const struct zlfs_fs *fs);

#endif
