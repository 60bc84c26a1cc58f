/*
 * zlfs_ioctl.h - the control interface between zlfs-ctl and a mounted daemon: ioctls on the
 * mount's root directory (FUSE passes them through with FUSE_CAP_IOCTL_DIR), on directories
 * and on files.
 */
#ifndef ZLFS_IOCTL_H
#define ZLFS_IOCTL_H

#include <linux/ioctl.h>

#define ZLFS_STATS_MAX 8192

struct zlfs_ioc_stats {
	char json[ZLFS_STATS_MAX]; /* NUL-terminated JSON object */
};

/* Write a checkpoint now (what sync(2) cannot ask a FUSE daemon for). */
#define ZLFS_IOC_SYNC _IO('Z', 1)
/* Current statistics as JSON. */
#define ZLFS_IOC_STATS _IOR('Z', 2, struct zlfs_ioc_stats)

/* On a directory: make it encrypted (it must be empty; the key must be loaded; the caller
 * must own it). Everything created below it inherits (docs/encryption.md). */
#define ZLFS_IOC_SET_ENCRYPT _IO('Z', 3)

#define ZLFS_ENC_ENCRYPTED (1u << 0) /* the inode's contents (and names, for a directory) */
#define ZLFS_ENC_KEY (1u << 1)       /* the filesystem is mounted with its key */
struct zlfs_ioc_encrypt {
	unsigned int flags;          /* ZLFS_ENC_* */
};
/* On any file or directory: its encryption state. */
#define ZLFS_IOC_GET_ENCRYPT _IOR('Z', 4, struct zlfs_ioc_encrypt)

/* On a regular file opened for writing: fallocate's COLLAPSE_RANGE and INSERT_RANGE, which
 * the kernel's FUSE module does not pass on (it passes only KEEP_SIZE, PUNCH_HOLE and
 * ZERO_RANGE). OFF and LEN are multiples of 4096; the rules are fallocate(2)'s. The daemon
 * drops the kernel's cached pages and attributes of the file. Dirty pages the kernel still
 * holds (a shared mapping, -o writeback_cache) are not moved: fsync first. The kernel takes
 * the file's new size at its next look at the attributes: stat the file after the call,
 * before touching it through a mapping (a fault past the old size is SIGBUS). */
struct zlfs_ioc_range {
	unsigned long long off, len;
};
#define ZLFS_IOC_COLLAPSE_RANGE _IOW('Z', 5, struct zlfs_ioc_range)
#define ZLFS_IOC_INSERT_RANGE _IOW('Z', 6, struct zlfs_ioc_range)

/* On the root: collect up to ZONES zones now, the emptiest first (as foreground GC does,
 * whatever the phase and the valid-ratio threshold; zones with less than an eighth dead are
 * never taken), then write the checkpoint that frees them. ZONES comes back as the number
 * emptied. Root or the mount's owner only. */
struct zlfs_ioc_gc {
	unsigned int zones;
};
#define ZLFS_IOC_GC _IOWR('Z', 7, struct zlfs_ioc_gc)

/* On the root, root only: `mount -o remount,ro` and back (zlfs -o remount, docs/design.md,
 * "Remounting"). READONLY makes everything durable and then refuses changes; READWRITE takes
 * changes again, unless the filesystem is read-only for another reason (mounted with -o ro,
 * or damage found): EROFS. */
#define ZLFS_IOC_REMOUNT_READONLY _IO('Z', 8)
#define ZLFS_IOC_REMOUNT_READWRITE _IO('Z', 9)

/* On any file: how its data is stored (zlfs-ctl compress-info). SIZE is the file's length in
 * bytes, STORED_BLOCKS the 4 KiB blocks its data takes on the device (st_blocks / 8: k per
 * compressed cluster, one per raw block, none for a hole or inline data). A compressed file
 * (ZLFS_CINFO_COMPRESSED) has CLUSTER_BLOCKS blocks to a cluster and ALG, 1 for LZ4 and 2 for
 * zstd (enum zlfs_cluster_alg); other files have 0 in both. */
#define ZLFS_CINFO_COMPRESSED (1u << 0)
struct zlfs_ioc_compress_info {
	unsigned long long size;
	unsigned long long stored_blocks;
	unsigned int cluster_blocks;
	unsigned int alg;
	unsigned int flags; /* ZLFS_CINFO_* */
	unsigned int pad;   /* 0 */
};
#define ZLFS_IOC_COMPRESS_INFO _IOR('Z', 10, struct zlfs_ioc_compress_info)

#endif
