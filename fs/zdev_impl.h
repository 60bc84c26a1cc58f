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
	int (*mgmt)(struct zdev *dev, enum zdev_mgmt_op op, uint32_t zone);
	int (*flush)(struct zdev *dev);
	void (*close)(struct zdev *dev);
};

/* Each backend embeds this as the first member of its own device structure. */
struct zdev {
	const struct zdev_ops *ops;
	struct zdev_geometry geo;
	struct zdev_info info;
	int readonly;
};

/* Backend entry points. *_probe: 1 if PATH is for this backend, 0 if not, -errno on error. */
int zdev_zbd_probe(const char *path);
int zdev_zbd_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out);
int zdev_emu_probe(const char *path);
int zdev_emu_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out);

#endif
