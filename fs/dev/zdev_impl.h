/*
 * zdev_impl.h - what a device backend implements. Private to zdev.c and the backends.
 */
#ifndef ZLFS_ZDEV_IMPL_H
#define ZLFS_ZDEV_IMPL_H

#include "zdev.h"

enum zdev_mgmt_op { ZDEV_MGMT_RESET, ZDEV_MGMT_FINISH, ZDEV_MGMT_OPEN, ZDEV_MGMT_CLOSE };

struct zdev_ops {
	int (*report)(struct zdev *dev, uint32_t first, uint32_t count, struct zdev_zone *zones);
	int (*read)(struct zdev *dev, void *buf, size_t len, uint64_t off);
	int (*write)(struct zdev *dev, const void *buf, size_t len, uint64_t off);
	/* Optional: N >= 2 pieces, checked, as one write of their total length. */
	int (*writev)(struct zdev *dev, const struct iovec *iov, int n, uint64_t off);
	int (*mgmt)(struct zdev *dev, enum zdev_mgmt_op op, uint32_t zone);
	int (*flush)(struct zdev *dev);
	/* Optional: [off, off + len) will be read soon; start reading it into a cache. */
	void (*prefetch)(struct zdev *dev, uint64_t off, uint64_t len);
	void (*close)(struct zdev *dev);
};

/* pread/pwrite of the whole range, or -errno; reading past the end of the file gives zeros
 * with EOF_ZEROS (a sparse image), else -EIO. */
int zdev_pread_all(int fd, void *buf, size_t len, uint64_t off, int eof_zeros);
int zdev_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* pwritev of all N pieces (at most ZDEV_IOV_MAX), or -errno. */
int zdev_pwritev_all(int fd, const struct iovec *iov, int n, uint64_t off);

/* Each backend embeds this as the first member of its own device structure. */
struct zdev {
	const struct zdev_ops *ops;
	struct zdev_geometry geo;
	struct zdev_info info;
	int readonly;
	int mark_fd;   /* a daemon's marks (zdev_hold.c), or -1; set by zdev_open, not backends */
	int mark_pid;  /* the pid they carry */
};

/* A backend. PROBE: 1 if PATH is for this backend, 0 if not, -errno on error; OPEN: open it
 * (-EBUSY without a message when it is held: zdev_open says why). */
struct zdev_backend {
	const char *name;
	int (*probe)(const char *path);
	int (*open)(const char *path, const struct zdev_open_opts *opts, struct zdev **out);
};
/* The kernel's zoned block devices through libzbd (zdev_zbd.c). */
extern const struct zdev_backend zdev_zbd_backend;
/* zdev_open over BACKENDS (NULL-terminated, tried in order), so that this layer names no
 * backend above it: the table is fs/emu/backends.c's, at the top of the device layers. */
int zdev_open_from(const struct zdev_backend *const *backends, const char *path,
		   const struct zdev_open_opts *opts, struct zdev **out);

/* zdev_hold.c. The backends' opens return -EBUSY without a message: zdev_open says why. */
int hold_mark(struct zdev *dev, const char *path);
void hold_unmark(int mark_fd);
/* PATH was busy: 0 when no zlfs daemon holds it (any more: waited up to SECS for one that is
 * finishing its unmount), -EBUSY with a message when one is mounted, starting, or did not
 * let go in time. */
int hold_wait(const char *path, unsigned secs);

#endif
