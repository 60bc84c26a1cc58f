/*
 * zdev_emu.c - the file-backed zoned-device emulator (see zdev_emu.h and docs/emulator.md):
 * the zdev_ops of an emulated device (read, write, zone management, flush, close), opening an
 * image (validation, the zone table, the journal, the timing model, the write log), probing
 * a path, and the emulator-only statistics. The other concerns live beside it, listed in
 * zdev_emu_impl.h.
 * May call: libc, pthreads, log.h, the other zdev_emu*.c files through zdev_emu_impl.h.
 * Nothing else in fs/ calls into the emulator except through zdev.h/zdev_emu.h.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct zdev_ops emu_ops;

static uint64_t pages_of(uint64_t len) { return (len + 4095) / 4096; }

/* A read as the model sees it: counted, and timed on the zones' units or through the FTL. */
static void read_model(struct emu_dev *d, uint64_t off, uint64_t len)
{
	struct tm_read r;

	d->tm.c.host_reads++;
	d->tm.c.host_read_bytes += len;
	if (d->ftl) {
		emu_ftl_read(d, off, len);
		return;
	}
	d->tm.c.map_lookups += pages_of(len); /* the zone map is resident: every lookup hits */
	if (!emu_tm_reads(d))
		return;
	emu_tm_read_begin(d, &r);
	for (uint64_t pos = off; pos < off + len;) {
		uint32_t z = (uint32_t)(pos / d->hdr->zone_size);
		uint64_t n = min_u64(off + len, zstart(d, z) + d->hdr->zone_size) - pos;

		emu_tm_read_zone(d, &r, z, pos - zstart(d, z), emu_valid_len(d, z, pos, n));
		pos += n;
	}
	emu_tm_read_end(d, &r, len);
}

/* Reads take the lock only to look at zone state, not across the data transfer. */
static int emu_read(struct zdev *zd, void *buf, size_t len, uint64_t off)
{
	struct emu_dev *d = to_emu(zd);
	uint64_t pos = off, end = off + len;
	uint8_t *p = buf;
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = emu_read_check(d, off, len);
	if (!ret)
		read_model(d, off, len);
	pthread_mutex_unlock(&d->lock);
	while (!ret && pos < end) {
		uint32_t z = (uint32_t)(pos / d->hdr->zone_size);
		uint64_t n = min_u64(end, zstart(d, z) + d->hdr->zone_size) - pos, v;

		pthread_mutex_lock(&d->lock);
		v = emu_valid_len(d, z, pos, n);
		pthread_mutex_unlock(&d->lock);
		if (v)
			ret = emu_img_read(d, p + (pos - off), v, d->hdr->data_off + pos);
		memset(p + (pos - off) + v, 0, n - v);
		pos += n;
	}
	return ret;
}

int emu_write_locked(struct emu_dev *d, const void *buf, size_t len, uint64_t off)
{
	uint32_t z = (uint32_t)(off / d->hdr->zone_size);
	int ret = is_conv(d, z) ? emu_write_conv(d, buf, len, off) : emu_write_seq(d, z, buf, len, off);

	if (ret)
		return ret;
	if (d->ftl)
		emu_ftl_write(d, buf, off, len);
	else
		emu_tm_write(d, z, buf, len, off - zstart(d, z));
	return 0;
}

/* A write to a sequential zone drops the lock for its transfer, and its N pieces are one
 * write (one transfer, one journal record), as a device takes one command. The others hold
 * the lock across: a conventional write saves old data first, the FTL model maps pages as it
 * goes, and with a write log the log must list writes in the order they reach the image
 * (test_crash rebuilds devices from it); there pieces are written one by one. */
static int emu_writev(struct zdev *zd, const struct iovec *iov, int n, uint64_t off)
{
	struct emu_dev *d = to_emu(zd);
	uint32_t z = (uint32_t)(off / d->hdr->zone_size);
	size_t len = 0;
	int ret, i;

	for (i = 0; i < n; i++)
		len += iov[i].iov_len;
	pthread_mutex_lock(&d->lock);
	ret = emu_jrnl_failed(d);
	if (!ret && !is_conv(d, z) && !d->ftl && d->log_fd < 0) {
		ret = emu_write_seq_unlocked(d, z, iov, n, len, off);
	} else if (!ret && n > 1) {
		pthread_mutex_unlock(&d->lock);
		for (i = 0; !ret && i < n; off += iov[i++].iov_len)
			ret = emu_writev(zd, &iov[i], 1, off);
		return ret;
	} else if (!ret) {
		ret = emu_write_locked(d, iov->iov_base, len, off);
	}
	if (!ret) {
		d->tm.c.host_writes++;
		d->tm.c.host_write_bytes += len;
		if (!d->ftl)
			d->tm.c.map_lookups += pages_of(len);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int emu_write(struct zdev *zd, const void *buf, size_t len, uint64_t off)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};

	return emu_writev(zd, &v, 1, off);
}

/* The range's data goes (a hole where the file system can punch one, zeros elsewhere) and
 * the FTL unmaps it. Logged ahead like every operation. */
int emu_trim_locked(struct emu_dev *d, uint64_t off, uint64_t len)
{
	uint64_t foff = d->hdr->data_off + off, lpos;
	void *zeros;
	int ret;

	ret = emu_log_append_at(d, LOG_TRIM, (uint32_t)(off / d->hdr->zone_size), off, 8, &len,
				&lpos);
	if (ret)
		return ret;
	if (fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)foff, (off_t)len)) {
		zeros = emu_blk_alloc(len);
		ret = zeros ? emu_img_write(d, zeros, len, foff) : -ENOMEM;
		free(zeros);
		if (ret)
			return emu_log_abort(d, lpos, ret);
	}
	if (d->ftl)
		emu_ftl_trim(d, off, len);
	d->tm.c.host_trims++;
	d->tm.c.host_trim_bytes += len;
	return 0;
}

int zemu_trim(struct zdev *dev, uint64_t off, uint64_t len)
{
	struct emu_dev *d;
	int ret;

	if (!zdev_is_emu(dev))
		return -EINVAL;
	d = to_emu(dev);
	if (!is_ftl(d))
		return -EOPNOTSUPP;
	if (dev->readonly)
		return -EROFS;
	if (off % dev->geo.lblock_size || len % dev->geo.lblock_size || off > dev->geo.capacity ||
	    len > dev->geo.capacity - off)
		return -EINVAL;
	if (!len)
		return 0;
	pthread_mutex_lock(&d->lock);
	ret = emu_trim_locked(d, off, len);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int emu_flush(struct zdev *zd)
{
	struct emu_dev *d = to_emu(zd);
	int ret;

	pthread_mutex_lock(&d->lock);
	d->tm.c.host_flushes++;
	ret = emu_jrnl_failed(d);
	if (!ret)
		ret = emu_flush_host(d);
	if (!ret)
		emu_tm_flush(d); /* the host's flush; the journal's own destaging is not one */
	if (!ret)
		ret = emu_log_append(d, LOG_FLUSH, 0, 0, 0, NULL);
	/* what is durable in the image is durable in the log too */
	if (!ret && d->log_fd >= 0 && fdatasync(d->log_fd))
		ret = -errno;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Closed with nothing unflushed, the journal region holds only records of generations a
 * flush voided, in whatever order the writers' threads took their slots. They are dropped
 * (a hole reads as zeros), so an image closed clean is a function of what its zones hold:
 * mkfs.zlfs --timestamp makes the same file twice. Only after a flush of this open (one that
 * wrote nothing, a refused mount, leaves every byte as it was), and only a tidy-up: on a
 * file system without hole punching the stale records stay, as void as before. */
static void emu_jrnl_forget(struct emu_dev *d)
{
	if (d->fd < 0 || !d->jclears || d->jcount || emu_jrnl_failed(d))
		return; /* an open that voided nothing leaves the file as it found it */
	(void)fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)d->hdr->jrnl_off,
			(off_t)round_up((uint64_t)d->hdr->jslots * sizeof(struct emu_jrec), EMU_BLK));
}

void emu_free(struct emu_dev *d)
{
	/* a caller closes with no write in flight, but a journal block may still be on its way */
	pthread_mutex_lock(&d->jlock);
	while (d->jdone != d->jticket)
		pthread_cond_wait(&d->jturn, &d->jlock);
	pthread_mutex_unlock(&d->jlock);
	emu_ftl_close(d); /* saves its state first, while the image is open */
	emu_jrnl_forget(d);
	if (d->jfd >= 0 && d->jfd != d->fd)
		close(d->jfd);
	if (d->fd >= 0)
		close(d->fd); /* also drops the flock */
	if (d->log_fd >= 0)
		close(d->log_fd);
	free(d->hdr);
	free(d->table);
	free(d->tdirty);
	free(d->zones);
	free(d->jrnl);
	free(d->tm.partial);
	pthread_cond_destroy(&d->jturn);
	pthread_mutex_destroy(&d->jlock);
	pthread_cond_destroy(&d->idle);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* Closing does not flush: unflushed writes stay in the "cache" (the journal), where a later
 * power cut can still drop them. */
static void emu_close(struct zdev *zd)
{
	emu_jrnl_close(to_emu(zd));
	emu_free(to_emu(zd));
}

/* The image's page cache reads ahead for a buffered image; the FTL model maps pages
 * elsewhere, and O_DIRECT bypasses the cache. */
static void emu_prefetch(struct zdev *zd, uint64_t off, uint64_t len)
{
	struct emu_dev *d = to_emu(zd);

	if (!d->direct && !d->ftl)
		(void)posix_fadvise(d->fd, (off_t)(d->hdr->data_off + off), (off_t)len,
				    POSIX_FADV_WILLNEED);
}

static const struct zdev_ops emu_ops = {
	.report = emu_report,
	.read = emu_read,
	.prefetch = emu_prefetch,
	.write = emu_write,
	.writev = emu_writev,
	.mgmt = emu_mgmt,
	.flush = emu_flush,
	.close = emu_close,
};

int zdev_is_emu(const struct zdev *dev) { return dev && dev->ops == &emu_ops; }


void emu_fill_public(struct emu_dev *d, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	struct zdev_geometry *g = &d->zd.geo;
	struct zdev_info *in = &d->zd.info;

	d->zd.ops = &emu_ops;
	g->lblock_size = h->lblock_size;
	g->nr_zones = h->nr_zones;
	g->nr_conv = h->nr_conv;
	g->max_open = h->max_open;
	g->max_active = h->max_active;
	g->zone_size = h->zone_size;
	g->zone_capacity = h->zone_capacity;
	g->capacity = (uint64_t)h->nr_zones * h->zone_size;
	in->kind = ZDEV_KIND_EMU;
	snprintf(in->path, sizeof(in->path), "%s", path);
	snprintf(in->model, sizeof(in->model), "zlfs-emu");
	snprintf(in->vendor, sizeof(in->vendor), "zlfs");
	snprintf(in->firmware, sizeof(in->firmware), "%s fmt%u", ZLFS_VERSION, EMU_FMT_VERSION);
}

static int emu_alloc_state(struct emu_dev *d)
{
	const struct emu_hdr *h = d->hdr;

	d->table_blocks = (uint32_t)(emu_table_bytes(h->nr_zones) / EMU_BLK);
	d->table = emu_blk_alloc((size_t)d->table_blocks * EMU_BLK);
	d->tdirty = calloc(d->table_blocks, 1);
	d->zones = calloc(h->nr_zones, sizeof(*d->zones));
	d->jrnl = emu_blk_alloc((size_t)h->jslots * sizeof(struct emu_jrec));
	return d->table && d->tdirty && d->zones && d->jrnl ? 0 : -ENOMEM;
}

static int emu_load(struct emu_dev *d, const char *path)
{
	struct stat st;
	int ret;

	if (fstat(d->fd, &st))
		return -errno;
	ret = emu_full_pread(d->fd, d->hdr, EMU_BLK, 0);
	if (ret)
		return ret;
	ret = emu_hdr_validate(d->hdr, path, (uint64_t)st.st_size);
	if (!ret)
		ret = emu_alloc_state(d);
	if (!ret)
		ret = emu_table_load(d, path);
	if (!ret)
		ret = emu_jrnl_load(d, path);
	if (!ret)
		ret = emu_tm_init(d);
	if (ret)
		return ret;
	emu_derive_conds(d);
	emu_fill_public(d, path);
	return emu_ftl_open(d);
}

/* NOLOG: internal opens (inject, power cut, replay) never touch the write log. They say
 * when the image is busy; zdev_open says it for the others. */
int emu_open_internal(const char *path, const struct zdev_open_opts *opts, int nolog,
			     struct emu_dev **out)
{
	struct emu_dev *d = calloc(1, sizeof(*d));
	const char *log;
	int ret;

	if (!d)
		return -ENOMEM;
	d->fd = -1;
	d->jfd = -1;
	d->log_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->idle, NULL);
	pthread_mutex_init(&d->jlock, NULL);
	pthread_cond_init(&d->jturn, NULL);
	d->hdr = emu_blk_alloc(EMU_BLK);
	if (!d->hdr) {
		emu_free(d);
		return -ENOMEM;
	}
	d->direct = opts->direct;
	d->zd.readonly = opts->readonly;
	ret = emu_open_fd(path, opts->readonly && opts->shared ? -1 : opts->readonly, opts->direct,
			  &d->fd);
	if (ret == -EBUSY && nolog)
		zlog_err("%s is in use (mounted or open elsewhere)", path);
	if (!ret)
		ret = emu_open_jfd(d, path, opts->readonly);
	if (!ret)
		ret = emu_load(d, path);
	log = opts->emu_log ? opts->emu_log : d->hdr->log_path;
	if (!ret && !nolog && !opts->readonly && log[0])
		ret = emu_log_start(d, path, log);
	if (ret) {
		emu_free(d);
		return ret;
	}
	*out = d;
	return 0;
}

static int emu_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out)
{
	static const struct zdev_open_opts defaults;
	struct emu_dev *d;
	int ret;

	*out = NULL;
	ret = emu_open_internal(path, opts ? opts : &defaults, 0, &d);
	if (!ret)
		*out = &d->zd;
	return ret;
}

static int emu_probe(const char *path)
{
	char magic[8];
	struct stat st;
	int fd, ret;

	if (stat(path, &st)) {
		ret = -errno;
		zlog_err("%s: %s", path, strerror(errno));
		return ret;
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: %s", path, strerror(errno));
		return ret;
	}
	ret = emu_full_pread(fd, magic, sizeof(magic), 0);
	close(fd);
	if (ret)
		return 0; /* unreadable as an image: not ours */
	return !memcmp(magic, EMU_MAGIC, sizeof(magic));
}

const struct zdev_backend zdev_emu_backend = {
	.name = "zlfs-emu", .probe = emu_probe, .open = emu_open};

int zemu_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out)
{
	int ret;

	*out = NULL;
	ret = emu_probe(path);
	if (ret < 0)
		return ret;
	if (!ret) {
		zlog_err("%s: not a zlfs-emu image (create one with zlfs-emu create)", path);
		return -ENODEV;
	}
	ret = emu_open(path, opts, out);
	if (ret == -EBUSY)
		zlog_err("%s is in use (mounted or open elsewhere)", path);
	if (!ret)
		(*out)->mark_fd = -1;
	return ret;
}

int zemu_dev_stats(struct zdev *dev, struct zemu_stats *st)
{
	struct emu_dev *d;

	if (!zdev_is_emu(dev))
		return -EINVAL;
	d = to_emu(dev);
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&d->lock);
	st->format_version = d->hdr->version;
	st->generation = d->hdr->generation;
	st->journal_slots = d->hdr->jslots;
	for (uint32_t i = 0; i < d->jcount; i++)
		st->unflushed += emu_jrec_unflushed(d, i);
	for (int i = 0; i < EMU_MAX_FAULTS; i++)
		st->pending_faults += d->hdr->faults[i].kind != 0;
	if (d->log_fd >= 0)
		snprintf(st->log_path, sizeof(st->log_path), "%s", d->log_path);
	emu_tm_stats(d, st);
	pthread_mutex_unlock(&d->lock);
	zdev_read_sizes(dev, st->host_read_sizes);
	return 0;
}
