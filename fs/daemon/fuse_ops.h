/*
 * fuse_ops.h - the FUSE operations table and its per-mount state (fuse_ops.c), used by the
 * daemon's main().
 */
#ifndef ZLFS_FUSE_OPS_H
#define ZLFS_FUSE_OPS_H

#include "core.h"

struct fuse_lowlevel_ops;
struct fuse_session;

struct zlfs_ops_opts {
	int direct_io;        /* bypass the kernel page cache for file data */
	int writeback_cache;  /* let the kernel cache writes (fsync stays correct) */
	unsigned cp_interval; /* seconds between checkpoints while dirty; 0 = only on sync */
	int background_gc;    /* run the background GC worker (phases) */
	int verbose;          /* log the statistics (zlfs-ctl stats) at unmount */
	double entry_timeout; /* seconds the kernel may keep names, found or not */
	double attr_timeout;  /* seconds the kernel may keep attributes */
	unsigned tail_blocks; /* partial blocks held in memory at most (tailbuf.c); 0: none */
	unsigned tail_secs;   /* how long one is held at most, about (the checkpoint thread) */
	unsigned read_cache_blocks; /* blocks read or written a moment ago (rcache.c); 0: none */
	int noinline_data;    /* new small files do not start in their inodes (inline.c) */
};

/* 4 MiB of partial blocks; each written within about 5 seconds (docs/design.md). */
#define ZFUSE_TAIL_BLOCKS 1024u
#define ZFUSE_TAIL_SECS 5u
/* 16 MiB of blocks short writes put on the device, for reading them back (docs/design.md,
 * "The read cache"). */
#define ZFUSE_READ_CACHE_BLOCKS 4096u

/* zlfs is the only writer of its device: every change reaches the kernel's caches through
 * the request that made it, so names and attributes may be kept for long. */
#define ZFUSE_DEFAULT_TIMEOUT 86400.0

struct zfuse;

const struct fuse_lowlevel_ops *zlfs_fuse_ops(void);
struct zfuse *zfuse_new(struct zlfs_fs *fs, const struct zlfs_ops_opts *o);
/* Start the checkpoint timer; SE is the session, for notifications to the kernel. */
int zfuse_start(struct zfuse *z, struct fuse_session *se);
/* Stop, write a clean checkpoint, release the filesystem. */
int zfuse_destroy(struct zfuse *z);
/* `zlfs -o remount[,ro] DEVICE MOUNTPOINT` (mount(8)'s helper): switch the mounted daemon and
 * the kernel's mount between read-write and read-only in place (remount.c). Exit status. */
int remount_run(const char *mountpoint, int readonly);
/* DEVICE already served by a zlfs daemon: make MOUNTPOINT a bind mount of its mount point
 * (read-only with READONLY), *STATUS the exit status, and return 1; 0 when DEVICE is not
 * mounted (the caller mounts it). */
int mount_again(const char *device, const char *mountpoint, int readonly, int *status);

#endif
