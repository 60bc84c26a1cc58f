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

#endif
