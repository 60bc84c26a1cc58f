/*
 * zdev_emu_grow.c - growing an image (a namespace resized, a partition grown): zlfs-emu grow
 * and resize.zlfs's first step.
 *
 * Owns: settling an image (a checkpoint, so its zone table alone says what each zone holds),
 * writing the grown image beside it and renaming it into place, whole or not at all.
 * May call: the image (header layout, table entries, copies), the journal's checkpoint.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Power the image on and checkpoint it: its journal's writes land in the zone table and the
 * journal is void, so the table alone says what each zone holds. */
static int grow_settle(const char *path)
{
	struct zdev_open_opts o = {0};
	struct zdev *dev;
	int ret = zemu_open(path, &o, &dev);

	if (ret)
		return ret;
	/* A checkpoint, not a host flush: a flush leaves the zone table to the journal's flush
	 * markers, and the copy below takes the table, not the journal. */
	pthread_mutex_lock(&to_emu(dev)->lock);
	ret = emu_flush_locked(to_emu(dev));
	pthread_mutex_unlock(&to_emu(dev)->lock);
	zdev_close(dev);
	return ret;
}

/* The grown image into DFD: header H (already laid out for its new zone count), the old table
 * T with empty zones after it, the old zones' data where the new layout puts it. */
static int grow_write(int sfd, const struct emu_hdr *old, int dfd, struct emu_hdr *h,
		      const struct emu_zent *t)
{
	uint64_t tbytes = emu_table_bytes(h->nr_zones);
	struct emu_zent *nt = emu_blk_alloc(tbytes);
	int ret = 0;

	if (!nt)
		return -ENOMEM;
	memcpy(nt, t, (size_t)old->nr_zones * sizeof(*t));
	for (uint32_t z = old->nr_zones; z < h->nr_zones; z++)
		emu_zent_set(&nt[z], 0, 0, ZDEV_COND_EMPTY);
	if (ftruncate(dfd, (off_t)(h->data_off + (uint64_t)h->nr_zones * h->zone_size)))
		ret = -errno;
	for (uint32_t z = 0; !ret && z < old->nr_zones; z++) {
		uint64_t len = z < old->nr_conv ? old->zone_size : t[z].wp;

		if (len)
			ret = emu_copy_range(sfd, old->data_off + (uint64_t)z * old->zone_size, dfd,
					 h->data_off + (uint64_t)z * h->zone_size, len);
	}
	if (!ret && old->undo_len)
		ret = emu_copy_range(sfd, old->undo_off, dfd, h->undo_off, old->undo_len);
	if (!ret)
		ret = emu_img_seal(dfd, h, nt, tbytes);
	free(nt);
	return ret;
}

static int grow_check(const char *path, const struct emu_hdr *h, uint64_t size)
{
	uint64_t nz = size / h->zone_size;

	if (h->mode == ZEMU_MODE_FTL) {
		zlog_err("%s: a conventional-mode image does not grow", path);
		return -EINVAL;
	}
	if (h->log_path[0]) {
		zlog_err("%s: an image with a write log does not grow (the log records its "
			 "geometry)", path);
		return -EINVAL;
	}
	if (nz <= h->nr_zones || nz > EMU_MAX_ZONES) {
		zlog_err("%s: %llu bytes are %llu zones of %llu bytes; the image has %u, and grows "
			 "to at most %u", path, (unsigned long long)size, (unsigned long long)nz,
			 (unsigned long long)h->zone_size, h->nr_zones, EMU_MAX_ZONES);
		return -EINVAL;
	}
	return 0;
}

/* The image's header into OLD (validated) and its open fd into *FD. */
static int grow_read_header(const char *path, struct emu_hdr *old, int *fd)
{
	struct stat st;
	int ret = emu_open_fd(path, 0, 0, fd);

	if (!ret)
		ret = fstat(*fd, &st) ? -errno : emu_full_pread(*fd, old, EMU_BLK, 0);
	if (!ret)
		ret = emu_hdr_validate(old, path, (uint64_t)st.st_size);
	return ret;
}

int zemu_grow(const char *path, uint64_t size)
{
	struct emu_hdr *h = emu_blk_alloc(2 * EMU_BLK), *old = (void *)((uint8_t *)h + EMU_BLK);
	char tmp[PATH_MAX];
	struct emu_zent *t = NULL;
	int sfd = -1, dfd = -1, ret = h ? 0 : -ENOMEM;

	if (!ret && (size_t)snprintf(tmp, sizeof(tmp), "%s.grow", path) >= sizeof(tmp))
		ret = -ENAMETOOLONG;
	if (!ret)
		ret = grow_read_header(path, old, &sfd);
	if (!ret)
		ret = grow_check(path, old, size);
	if (sfd >= 0)
		close(sfd);
	sfd = -1;
	if (!ret)
		ret = grow_settle(path);
	if (!ret) /* again: the settling flush moved the generation on */
		ret = grow_read_header(path, old, &sfd);
	if (!ret && !(t = emu_blk_alloc(emu_table_bytes(old->nr_zones))))
		ret = -ENOMEM;
	if (!ret)
		ret = emu_full_pread(sfd, t, emu_table_bytes(old->nr_zones), old->table_off);
	if (!ret) {
		memcpy(h, old, EMU_BLK);
		h->nr_zones = (uint32_t)(size / old->zone_size);
		emu_hdr_layout(h);
		dfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ret = dfd < 0 ? -errno : grow_write(sfd, old, dfd, h, t);
	}
	/* the grown image replaces the old one whole, or not at all */
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (dfd >= 0) {
		close(dfd);
		if (ret)
			unlink(tmp);
	}
	if (sfd >= 0)
		close(sfd);
	if (ret && ret != -EINVAL)
		zlog_err("%s: cannot grow the image: %s", path, strerror(-ret));
	free(t);
	free(h);
	return ret;
}
