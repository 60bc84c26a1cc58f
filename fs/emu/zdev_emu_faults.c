/*
 * zdev_emu_faults.c - injected faults: one-shot EIO on a read or write touching an offset
 * (pending in the header, so they can be set on a closed image), and zones going offline or
 * read-only for good.
 * May call: the image (header and zone persistence), the zone rules, log.h.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

const char *zemu_fault_name(enum zemu_fault fault)
{
	switch (fault) {
	case ZEMU_FAULT_OFFLINE: return "offline";
	case ZEMU_FAULT_READONLY: return "readonly";
	case ZEMU_FAULT_EIO_READ: return "eio-read";
	case ZEMU_FAULT_EIO_WRITE: return "eio-write";
	}
	return "unknown";
}

/* Fire (and consume) a one-shot fault of KIND inside [off, off + len). A fired fault is
 * removed from the header at once, so it fires once even across reopening. */
int emu_fault_fire(struct emu_dev *d, uint32_t kind, uint64_t off, uint64_t len)
{
	for (int i = 0; i < EMU_MAX_FAULTS; i++) {
		struct emu_fault_slot *f = &d->hdr->faults[i];
		if (f->kind != kind || f->off < off || f->off - off >= len)
			continue;
		memset(f, 0, sizeof(*f));
		if (!d->zd.readonly) {
			int ret = emu_hdr_write(d);
			if (ret)
				zlog_err("%s: cannot record a fired fault: %s", d->zd.info.path,
					 strerror(-ret));
		}
		return -EIO;
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Fault injection.
 */

static int inject_zone(struct emu_dev *d, uint32_t z, uint8_t cond)
{
	if (is_conv(d, z)) {
		/* null_blk refuses too: conventional zones cannot change condition */
		zlog_err("%s: zone %u is conventional and cannot go %s", d->zd.info.path, z,
			 zdev_cond_name(cond));
		return -EINVAL;
	}
	if (d->zones[z].cond == cond)
		return 0;
	emu_set_cond(d, z, cond);
	return emu_zone_persist(d, z);
}

static int inject_eio(struct emu_dev *d, uint32_t kind, uint64_t off)
{
	for (int i = 0; i < EMU_MAX_FAULTS; i++) {
		struct emu_fault_slot *f = &d->hdr->faults[i];
		if (f->kind)
			continue;
		f->kind = kind;
		f->off = off;
		return emu_hdr_write(d);
	}
	zlog_err("%s: already %d pending faults", d->zd.info.path, EMU_MAX_FAULTS);
	return -ENOSPC;
}

int zemu_inject_dev(struct zdev *dev, enum zemu_fault fault, uint64_t off)
{
	struct emu_dev *d;
	int ret;

	if (!zdev_is_emu(dev) || off >= dev->geo.capacity)
		return -EINVAL;
	if (dev->readonly)
		return -EROFS;
	d = to_emu(dev);
	pthread_mutex_lock(&d->lock);
	switch (fault) {
	case ZEMU_FAULT_OFFLINE:
		ret = inject_zone(d, zdev_zone_of(dev, off), ZDEV_COND_OFFLINE);
		break;
	case ZEMU_FAULT_READONLY:
		ret = inject_zone(d, zdev_zone_of(dev, off), ZDEV_COND_RDONLY);
		break;
	case ZEMU_FAULT_EIO_READ:
	case ZEMU_FAULT_EIO_WRITE:
		ret = inject_eio(d, fault, off / dev->geo.lblock_size * dev->geo.lblock_size);
		break;
	default:
		ret = -EINVAL;
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int zemu_inject(const char *path, enum zemu_fault fault, uint64_t off)
{
	static const struct zdev_open_opts opts;
	struct emu_dev *d;
	int ret;

	ret = emu_open_internal(path, &opts, 1, &d);
	if (ret)
		return ret;
	ret = zemu_inject_dev(&d->zd, fault, off);
	emu_free(d);
	return ret;
}
