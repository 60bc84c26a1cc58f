/*
 * zlfs_ioctl.h - the control interface between zlfs-ctl and a mounted daemon: ioctls on the
 * mount's root directory (FUSE passes them through with FUSE_CAP_IOCTL_DIR).
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

#endif
