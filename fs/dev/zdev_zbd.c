/*
 * zdev_zbd.c - the kernel zoned block device backend (see zdev.h, zdev_impl.h).
 *
 * Owns: opening a zoned block device exclusively with O_DIRECT, its geometry and identity
 * (sysfs model/vendor/firmware), zone reports, I/O and zone management on it.
 * May call: libzbd, libc, log.h. Holds no mutable state besides the file descriptor, so
 * any number of threads may use one device at once (the kernel orders what needs ordering).
 */
#include "zdev_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <libzbd/zbd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct zbd_dev {
	struct zdev base; /* must stay first: zdev_impl.h */
	int fd;
};

static struct zbd_dev *to_zbd(struct zdev *dev) { return (struct zbd_dev *)dev; }

static int zbd_dev_probe(const char *path)
{
	struct stat st;

	/* Only block devices are ours; anything else (a missing path included) is left to the
	 * emulator's probe, which reports it. libzbd says 1 only for host-managed/aware. */
	if (stat(path, &st) || !S_ISBLK(st.st_mode))
		return 0;
	return zbd_device_is_zoned(path) == 1;
}

/* --- identity: sysfs strings ------------------------------------------------------------- */

/* Read the first line of a sysfs attribute into BUF without trailing blanks; empty if absent. */
static void read_attr(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	size_t n;
	FILE *f;

	buf[0] = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
}

/*
 * SCSI/ATA disks have device/model, vendor, rev; an NVMe namespace's device/ is its
 * controller, with model and firmware_rev; null_blk has no device/ at all (strings stay empty).
 */
static void fill_identity(struct zdev_info *info, const char *path)
{
	char *real = realpath(path, NULL);
	char dir[PATH_MAX];

	if (!real)
		return;
	snprintf(dir, sizeof(dir), "/sys/block/%s/device", basename(real));
	free(real);
	read_attr(dir, "model", info->model, sizeof(info->model));
	read_attr(dir, "vendor", info->vendor, sizeof(info->vendor));
	read_attr(dir, "rev", info->firmware, sizeof(info->firmware));
	if (!info->firmware[0])
		read_attr(dir, "firmware_rev", info->firmware, sizeof(info->firmware));
}

/* --- open, geometry ---------------------------------------------------------------------- */

static int open_device(const char *path, int readonly, int shared, struct zbd_info *zi)
{
	/* O_EXCL on a block device claims it: EBUSY when mounted or held by another opener.
	 * A shared read-only opener (zlfs-dump of a mounted device) claims nothing. */
	int flags = (readonly ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC |
		    (readonly && shared ? 0 : O_EXCL);
	int fd;

	errno = 0;
	fd = zbd_open(path, flags, NULL);
	if (fd >= 0) {
		if (zbd_get_info(fd, zi) == 0)
			return fd;
		zbd_close(fd);
		zlog_err("%s: cannot get the zoned device's information", path);
		return -EIO;
	}
	if (errno == EBUSY)
		return -EBUSY; /* zdev_open says who holds it */
	if (errno == EACCES || errno == EPERM) {
		zlog_err("%s: permission denied: opening a zoned block device needs root "
			 "(or write access to the device node)", path);
		return -errno;
	}
	if (!errno)
		errno = ENODEV;
	zlog_err("%s: cannot open zoned block device: %s", path, strerror(errno));
	return -errno;
}

static int zone_type(unsigned int t)
{
	return t == ZBD_ZONE_TYPE_CNV ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
}

static int zone_cond(unsigned int c)
{
	switch (c) {
	case ZBD_ZONE_COND_NOT_WP: return ZDEV_COND_NOT_WP;
	case ZBD_ZONE_COND_EMPTY: return ZDEV_COND_EMPTY;
	case ZBD_ZONE_COND_IMP_OPEN: return ZDEV_COND_IMP_OPEN;
	case ZBD_ZONE_COND_EXP_OPEN: return ZDEV_COND_EXP_OPEN;
	case ZBD_ZONE_COND_CLOSED: return ZDEV_COND_CLOSED;
	case ZBD_ZONE_COND_FULL: return ZDEV_COND_FULL;
	case ZBD_ZONE_COND_READONLY: return ZDEV_COND_RDONLY;
	default: return ZDEV_COND_OFFLINE;
	}
}

static void to_zdev_zone(const struct zbd_zone *z, struct zdev_zone *out)
{
	memset(out, 0, sizeof(*out)); /* no stale padding for callers that compare structs */
	out->start = z->start;
	out->len = z->len;
	out->capacity = z->capacity;
	out->wp = z->wp;
	out->type = (uint8_t)zone_type(z->type);
	out->cond = (uint8_t)zone_cond(z->cond);
	/* The kernel reports a conventional zone's wp as its end (or garbage): keep it defined. */
	if (out->type == ZDEV_ZONE_CONV)
		out->wp = out->start + out->len;
}

/* Count conventional zones and find the smallest sequential zone capacity in one report. */
static int scan_zones(int fd, struct zdev_geometry *geo)
{
	struct zbd_zone *zones = NULL;
	unsigned int n = 0, i;

	errno = 0;
	if (zbd_list_zones(fd, 0, (off_t)geo->capacity, ZBD_RO_ALL, &zones, &n) != 0)
		return errno ? -errno : -EIO;
	geo->nr_conv = 0;
	geo->zone_capacity = 0;
	for (i = 0; i < n; i++) {
		if (zones[i].type == ZBD_ZONE_TYPE_CNV)
			geo->nr_conv++;
		else if (!geo->zone_capacity || zones[i].capacity < geo->zone_capacity)
			geo->zone_capacity = zones[i].capacity;
	}
	free(zones);
	if (n != geo->nr_zones)
		return -EIO;
	if (!geo->zone_capacity) /* only conventional zones: say their size */
		geo->zone_capacity = geo->zone_size;
	return 0;
}

static int fill_geometry(struct zbd_dev *zd, const struct zbd_info *zi)
{
	struct zdev_geometry *geo = &zd->base.geo;
	int ret;

	uint64_t bytes = (uint64_t)zi->nr_sectors * 512;

	geo->lblock_size = zi->lblock_size;
	geo->zone_size = zi->zone_size;
	/* A smaller last ("runt") zone is left unused so that every zone has zone_size bytes. */
	geo->nr_zones = (uint32_t)(bytes / zi->zone_size);
	if (geo->nr_zones < zi->nr_zones)
		zlog_warn("%s: ignoring the smaller last zone", zd->base.info.path);
	geo->max_open = zi->max_nr_open_zones;
	geo->max_active = zi->max_nr_active_zones;
	geo->capacity = (uint64_t)geo->nr_zones * geo->zone_size;
	if (!geo->nr_zones) {
		zlog_err("%s: smaller than one zone", zd->base.info.path);
		return -EINVAL;
	}
	ret = scan_zones(zd->fd, geo);
	if (ret)
		zlog_err("%s: cannot report zones: %s", zd->base.info.path, strerror(-ret));
	return ret;
}

/* --- operations -------------------------------------------------------------------------- */

static int zbd_report(struct zdev *dev, uint32_t first, uint32_t count, struct zdev_zone *out)
{
	struct zbd_dev *zd = to_zbd(dev);
	uint64_t zsz = dev->geo.zone_size;
	struct zbd_zone *zones;
	unsigned int n = count, i;
	int ret = 0;

	if (!count)
		return 0;
	zones = calloc(count, sizeof(*zones));
	if (!zones)
		return -ENOMEM;
	errno = 0;
	if (zbd_report_zones(zd->fd, (off_t)(first * zsz), (off_t)(count * zsz), ZBD_RO_ALL,
			     zones, &n) != 0)
		ret = errno ? -errno : -EIO;
	else if (n != count)
		ret = -EIO;
	for (i = 0; !ret && i < n; i++)
		to_zdev_zone(&zones[i], &out[i]);
	free(zones);
	return ret;
}

static int zbd_read(struct zdev *dev, void *buf, size_t len, uint64_t off)
{
	return zdev_pread_all(to_zbd(dev)->fd, buf, len, off, 0);
}

static int zbd_write(struct zdev *dev, const void *buf, size_t len, uint64_t off)
{
	return zdev_pwrite_all(to_zbd(dev)->fd, buf, len, off);
}

/* One command for the pieces: the kernel builds one request of them where it can. */
static int zbd_writev(struct zdev *dev, const struct iovec *iov, int n, uint64_t off)
{
	return zdev_pwritev_all(to_zbd(dev)->fd, iov, n, off);
}

static int zbd_mgmt(struct zdev *dev, enum zdev_mgmt_op op, uint32_t zone)
{
	int fd = to_zbd(dev)->fd;
	off_t start = (off_t)(zone * dev->geo.zone_size);
	off_t len = (off_t)dev->geo.zone_size;
	int ret;

	errno = 0;
	switch (op) {
	case ZDEV_MGMT_RESET: ret = zbd_reset_zones(fd, start, len); break;
	case ZDEV_MGMT_FINISH: ret = zbd_finish_zones(fd, start, len); break;
	case ZDEV_MGMT_OPEN: ret = zbd_open_zones(fd, start, len); break;
	case ZDEV_MGMT_CLOSE: ret = zbd_close_zones(fd, start, len); break;
	default: return -EINVAL;
	}
	if (ret == 0)
		return 0;
	return errno > 0 ? -errno : -EIO;
}

static int zbd_flush(struct zdev *dev)
{
	/* fdatasync on a block device issues a cache flush to the device. */
	return fdatasync(to_zbd(dev)->fd) ? -errno : 0;
}

static void zbd_dev_close(struct zdev *dev)
{
	struct zbd_dev *zd = to_zbd(dev);

	zbd_close(zd->fd);
	free(zd);
}

static const struct zdev_ops zbd_ops = {
	.report = zbd_report,
	.read = zbd_read,
	.write = zbd_write,
	.writev = zbd_writev,
	.mgmt = zbd_mgmt,
	.flush = zbd_flush,
	.close = zbd_dev_close,
};

static int zbd_dev_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out)
{
	struct zbd_info zi;
	struct zbd_dev *zd;
	int ret;

	zd = calloc(1, sizeof(*zd));
	if (!zd)
		return -ENOMEM;
	zd->base.ops = &zbd_ops;
	zd->base.readonly = opts->readonly;
	zd->base.info.kind = ZDEV_KIND_ZBD;
	snprintf(zd->base.info.path, sizeof(zd->base.info.path), "%s", path);
	zd->fd = open_device(path, opts->readonly, opts->shared, &zi);
	if (zd->fd < 0) {
		ret = zd->fd;
		free(zd);
		return ret;
	}
	ret = fill_geometry(zd, &zi);
	if (ret) {
		zbd_dev_close(&zd->base);
		return ret;
	}
	fill_identity(&zd->base.info, path);
	*out = &zd->base;
	return 0;
}

const struct zdev_backend zdev_zbd_backend = {
	.name = "zbd", .probe = zbd_dev_probe, .open = zbd_dev_open};
