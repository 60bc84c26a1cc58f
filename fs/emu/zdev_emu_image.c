/*
 * zdev_emu_image.c - the image as a file: the header block and the layout of its regions, the
 * persisted zone table, whole-length and O_DIRECT-safe I/O on the image, validating a header
 * when an image is opened, creating images, and sparse copies of images (LOG.base, replay
 * output). CRC32C for every checksum of the format.
 * May call: libc, log.h, and the timing model's check of a header's model.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------
 * Small helpers: CRC32C, alignment, whole-length I/O.
 */

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static int crc32c_hw;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ ((c & 1) ? 0x82f63b78u : 0);
		crc32c_table[i] = c;
	}
#if defined(__x86_64__)
	crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
/* SSE4.2's crc32 instruction, eight bytes at a time: every journal record carries the CRC of
 * its write's data, so every byte written is summed (a table takes ~3 cycles a byte). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
							       size_t len)
{
	uint64_t c = crc;

	for (; len && ((uintptr_t)p & 7); len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; len; len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t emu_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (crc32c_hw)
		return ~crc32c_sse42(crc, p, len);
#endif
	while (len--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint32_t emu_crc32c_iov(const struct iovec *iov, int n)
{
	uint32_t crc = 0;

	for (int i = 0; i < n; i++)
		crc = emu_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	return crc;
}

void *emu_blk_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, EMU_BLK, round_up(len ? len : 1, EMU_BLK)))
		return NULL;
	memset(p, 0, round_up(len ? len : 1, EMU_BLK));
	return p;
}

static int is_blk_aligned(const void *buf, size_t len, uint64_t off)
{
	return !((uintptr_t)buf % EMU_BLK) && !(len % EMU_BLK) && !(off % EMU_BLK);
}

/* With O_DIRECT, a range off block boundaries goes through an aligned buffer over the blocks
 * around it: read into RBUF, or patched with WBUF and written back. No other write can slip
 * between the read and the write: zones are whole blocks, and one zone sees one write at a
 * time (under d->lock, or as the zone's one transfer). */
static int img_bounce(struct emu_dev *d, void *rbuf, const void *wbuf, size_t len, uint64_t foff)
{
	uint64_t a = foff / EMU_BLK * EMU_BLK, e = round_up(foff + len, EMU_BLK);
	uint8_t *b = emu_blk_alloc(e - a);
	int ret;

	if (!b)
		return -ENOMEM;
	ret = emu_full_pread(d->fd, b, e - a, a);
	if (!ret && rbuf)
		memcpy(rbuf, b + (foff - a), len);
	if (!ret && wbuf) {
		memcpy(b + (foff - a), wbuf, len);
		ret = emu_full_pwrite(d->fd, b, e - a, a);
	}
	free(b);
	return ret;
}

static zemu_host_io_fn host_io_fn;
static void *host_io_ctx;

void zemu_set_host_io_hook(zemu_host_io_fn fn, void *ctx)
{
	host_io_ctx = ctx;
	__atomic_store_n(&host_io_fn, fn, __ATOMIC_RELEASE);
}

void emu_host_io(int fd, uint64_t off, const void *buf, size_t len)
{
	zemu_host_io_fn fn = __atomic_load_n(&host_io_fn, __ATOMIC_ACQUIRE);

	if (fn)
		fn(host_io_ctx, fd, off, buf, len);
}

/* Image reads and writes of any alignment. */
int emu_img_read(struct emu_dev *d, void *buf, size_t len, uint64_t foff)
{
	if (!d->direct || is_blk_aligned(buf, len, foff))
		return emu_full_pread(d->fd, buf, len, foff);
	return img_bounce(d, buf, NULL, len, foff);
}

int emu_img_write(struct emu_dev *d, const void *buf, size_t len, uint64_t foff)
{
	if (!d->direct || is_blk_aligned(buf, len, foff))
		return emu_full_pwrite(d->fd, buf, len, foff);
	return img_bounce(d, NULL, buf, len, foff);
}

/* The pieces one after the other from FOFF: one pwritev when the image takes them as they are
 * (buffered, or every piece aligned for O_DIRECT), else piece by piece. */
int emu_img_writev(struct emu_dev *d, const struct iovec *iov, int n, uint64_t foff)
{
	int i, ret = 0, aligned = 1;
	uint64_t at = foff;

	for (i = 0; d->direct && i < n; at += iov[i++].iov_len)
		aligned = aligned && is_blk_aligned(iov[i].iov_base, iov[i].iov_len, at);
	if (aligned && n <= ZDEV_IOV_MAX) {
		for (i = 0, at = foff; i < n; at += iov[i++].iov_len)
			emu_host_io(d->fd, at, iov[i].iov_base, iov[i].iov_len);
		return zdev_pwritev_all(d->fd, iov, n, foff);
	}
	for (i = 0; !ret && i < n; foff += iov[i++].iov_len)
		ret = emu_img_write(d, iov[i].iov_base, iov[i].iov_len, foff);
	return ret;
}

/* Allocate a zone's blocks in the image before its first write, with O_DIRECT only. A direct
 * write into blocks the host file system has not allocated makes ext4 take the image's inode
 * lock exclusively for the whole transfer, so reads of every zone wait behind it; into
 * allocated (unwritten) blocks it takes the lock shared, as for an overwrite. Best effort: a
 * file system without fallocate, or one out of space, only loses the concurrency, and the
 * write itself reports any error. A reset gives the space back. */
void emu_img_prealloc(struct emu_dev *d, uint32_t z)
{
	if (d->direct)
		(void)fallocate(d->fd, 0, (off_t)(d->hdr->data_off + zstart(d, z)),
				(off_t)zcap(d, z));
}

int emu_sync(struct emu_dev *d)
{
	if (d->nosync)
		return 0;
	emu_host_io(d->fd, 0, NULL, 0);
	__atomic_fetch_add(&d->image_syncs, 1, __ATOMIC_RELAXED);
	if (fdatasync(d->fd))
		return -errno;
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * Header, layout and zone table.
 */

uint32_t emu_hdr_crc(struct emu_hdr *h)
{
	uint32_t saved = h->crc, crc;

	h->crc = 0;
	crc = emu_crc32c(0, h, EMU_BLK);
	h->crc = saved;
	return crc;
}

uint64_t emu_table_bytes(uint32_t nr_zones)
{
	return round_up((uint64_t)nr_zones * sizeof(struct emu_zent), EMU_BLK);
}

/* Fill the region offsets of H from its geometry. */
void emu_hdr_layout(struct emu_hdr *h)
{
	uint64_t undo = 0;

	if (h->nr_conv) {
		undo = min_u64((uint64_t)h->nr_conv * h->zone_size, EMU_UNDO_MAX);
		undo = undo / EMU_BLK * EMU_BLK;
	}
	h->table_off = EMU_BLK;
	h->jrnl_off = h->table_off + emu_table_bytes(h->nr_zones);
	h->undo_off = h->jrnl_off + round_up((uint64_t)h->jslots * sizeof(struct emu_jrec), EMU_BLK);
	h->undo_len = undo;
	h->ftl_off = h->ftl_len = 0;
	if (h->mode == ZEMU_MODE_FTL) {
		h->ftl_off = h->undo_off + undo;
		h->ftl_len = emu_ftl_state_bytes(h);
	}
	h->data_off = h->undo_off + undo + h->ftl_len;
}

int emu_hdr_write(struct emu_dev *d)
{
	d->hdr->crc = emu_hdr_crc(d->hdr);
	return emu_full_pwrite(d->fd, d->hdr, EMU_BLK, 0);
}

static uint32_t zent_crc(struct emu_zent *e)
{
	uint32_t saved = e->crc, crc;

	e->crc = 0;
	crc = emu_crc32c(0, e, sizeof(*e));
	e->crc = saved;
	return crc;
}

void emu_zent_set(struct emu_zent *e, uint64_t wp, uint32_t epoch, uint8_t cond)
{
	memset(e, 0, sizeof(*e));
	e->wp = wp;
	e->epoch = epoch;
	e->cond = cond;
	e->crc = zent_crc(e);
}

int emu_table_write_block(struct emu_dev *d, uint32_t blk)
{
	d->tdirty[blk] = 0;
	return emu_full_pwrite(d->fd, (uint8_t *)d->table + (uint64_t)blk * EMU_BLK, EMU_BLK,
			   d->hdr->table_off + (uint64_t)blk * EMU_BLK);
}

/* The condition stored for a zone: open states are volatile and come back closed. */
static uint8_t durable_cond(const struct emu_zone *zn)
{
	switch (zn->cond) {
	case ZDEV_COND_NOT_WP:
	case ZDEV_COND_FULL:
	case ZDEV_COND_RDONLY:
	case ZDEV_COND_OFFLINE:
		return zn->cond;
	default:
		return zn->wp ? ZDEV_COND_CLOSED : ZDEV_COND_EMPTY;
	}
}

/* Store zone Z's current state in the in-memory table; returns 1 if it changed. */
int emu_table_update(struct emu_dev *d, uint32_t z)
{
	struct emu_zent *e = &d->table[z];
	struct emu_zone *zn = &d->zones[z];
	uint8_t cond = durable_cond(zn);

	if (e->wp == zn->wp && e->epoch == zn->epoch && e->cond == cond)
		return 0;
	emu_zent_set(e, zn->wp, zn->epoch, cond);
	return 1;
}

/* Store zone Z as durable up to WP, short of its wp: a flush whose data sync may have missed
 * the writes past WP. Returns 1 if the table changed; the table never moves back. */
int emu_table_cover(struct emu_dev *d, uint32_t z, uint64_t wp)
{
	struct emu_zent *e = &d->table[z];
	const struct emu_zone *zn = &d->zones[z];

	if (e->epoch == zn->epoch && (e->cond == ZDEV_COND_FULL || e->cond == ZDEV_COND_RDONLY ||
				      e->cond == ZDEV_COND_OFFLINE || e->wp >= wp))
		return 0;
	emu_zent_set(e, wp, zn->epoch, wp ? ZDEV_COND_CLOSED : ZDEV_COND_EMPTY);
	return 1;
}

/* Zone Z is durable up to END, short of its wp, by a flush's fdatasync, for the writes of
 * EPOCH: in memory only, the table block marked for the next checkpoint (the flushed journal
 * records say the same in the image meanwhile). A zone reset since, finished or failed is not
 * moved; the table never moves back. */
void emu_table_advance(struct emu_dev *d, uint32_t z, uint32_t epoch, uint64_t end)
{
	struct emu_zent *e = &d->table[z];

	if (e->epoch != epoch || e->cond == ZDEV_COND_FULL || e->cond == ZDEV_COND_RDONLY ||
	    e->cond == ZDEV_COND_OFFLINE || e->wp >= end)
		return;
	emu_zent_set(e, end, epoch, end == d->hdr->zone_capacity ? ZDEV_COND_FULL : ZDEV_COND_CLOSED);
	d->tdirty[z / ZENT_PER_BLK] = 1;
}

/* Make zone Z's current state durable at once (reset, finish, fault injection): its data
 * first, then its table block. */
int emu_zone_persist(struct emu_dev *d, uint32_t z)
{
	int ret = emu_sync(d);

	if (ret)
		return ret;
	emu_table_update(d, z);
	ret = emu_table_write_block(d, (uint32_t)(z / ZENT_PER_BLK));
	if (ret)
		return ret;
	return emu_sync(d);
}
/* ------------------------------------------------------------------------------------------
 * Opening: validate header and table, rebuild the state from the journal.
 */

int emu_bad_image(const char *path, int err, const char *why)
{
	zlog_err("%s: corrupt zlfs-emu image: %s", path, why);
	return err;
}

int emu_hdr_validate(struct emu_hdr *h, const char *path, uint64_t file_size)
{
	struct emu_hdr expect;
	const char *why;

	if (memcmp(h->magic, EMU_MAGIC, 8))
		return emu_bad_image(path, -EINVAL, "bad magic");
	if (h->version != EMU_FMT_VERSION && h->version != EMU_FMT_VERSION_FTL &&
	    h->version != EMU_FMT_VERSION_V1 && h->version != EMU_FMT_VERSION_FTL_V2) {
		zlog_err("%s: zlfs-emu image format version %u is not supported (this emulator "
			 "opens versions 1 to 4)", path, h->version);
		return -EINVAL;
	}
	if (h->crc != emu_hdr_crc(h))
		return emu_bad_image(path, -EUCLEAN, "header checksum mismatch");
	if (h->mode != (emu_version_is_ftl(h->version) ? ZEMU_MODE_FTL : ZEMU_MODE_ZONED))
		return emu_bad_image(path, -EUCLEAN, "mode does not match the format version");
	if ((h->lblock_size != 512 && h->lblock_size != 4096) || !h->zone_size ||
	    h->zone_size % h->lblock_size || !h->zone_capacity ||
	    h->zone_capacity > h->zone_size || h->zone_capacity % h->lblock_size)
		return emu_bad_image(path, -EUCLEAN, "impossible block or zone size");
	if (!h->nr_zones || h->nr_zones > EMU_MAX_ZONES ||
	    (h->mode == ZEMU_MODE_ZONED && h->nr_conv >= h->nr_zones) ||
	    h->nr_conv > h->nr_zones || h->zone_size > UINT64_MAX / 2 / h->nr_zones)
		return emu_bad_image(path, -EUCLEAN, "impossible zone count");
	if (emu_timing_check(&h->timing, &why))
		return emu_bad_image(path, -EUCLEAN, "impossible timing model");
	if (h->mode == ZEMU_MODE_FTL && emu_ftl_geometry_check(h, &why))
		return emu_bad_image(path, -EUCLEAN, why);
	if (h->max_open && h->max_active && h->max_open > h->max_active)
		return emu_bad_image(path, -EUCLEAN, "open limit above active limit");
	if (!h->jslots || h->jslots > EMU_JSLOTS_MAX)
		return emu_bad_image(path, -EUCLEAN, "impossible journal size");
	expect = *h;
	emu_hdr_layout(&expect);
	if (expect.table_off != h->table_off || expect.jrnl_off != h->jrnl_off ||
	    expect.undo_off != h->undo_off || expect.undo_len != h->undo_len ||
	    expect.ftl_off != h->ftl_off || expect.ftl_len != h->ftl_len ||
	    expect.data_off != h->data_off)
		return emu_bad_image(path, -EUCLEAN, "region offsets do not match the geometry");
	if (!h->generation || !memchr(h->log_path, 0, sizeof(h->log_path)))
		return emu_bad_image(path, -EUCLEAN, "bad generation or log path");
	for (int i = 0; i < EMU_MAX_FAULTS; i++) {
		struct emu_fault_slot *f = &h->faults[i];
		if (f->kind && ((f->kind != ZEMU_FAULT_EIO_READ && f->kind != ZEMU_FAULT_EIO_WRITE) ||
				f->off >= (uint64_t)h->nr_zones * h->zone_size))
			return emu_bad_image(path, -EUCLEAN, "bad fault entry");
	}
	if (file_size < h->data_off + (uint64_t)h->nr_zones * h->zone_size)
		return emu_bad_image(path, -EUCLEAN, "image file is shorter than its geometry");
	return 0;
}

int emu_table_load(struct emu_dev *d, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	int ret;

	ret = emu_full_pread(d->fd, d->table, (size_t)d->table_blocks * EMU_BLK, h->table_off);
	if (ret)
		return ret;
	for (uint32_t z = 0; z < h->nr_zones; z++) {
		struct emu_zent *e = &d->table[z];
		struct emu_zone *zn = &d->zones[z];
		int conv = z < h->nr_conv;

		if (e->crc != zent_crc(e))
			return emu_bad_image(path, -EUCLEAN, "zone table checksum mismatch");
		if (conv ? e->cond != ZDEV_COND_NOT_WP :
			   (e->wp > h->zone_capacity || e->wp % h->lblock_size ||
			    (e->cond != ZDEV_COND_EMPTY && e->cond != ZDEV_COND_CLOSED &&
			     e->cond != ZDEV_COND_FULL && e->cond != ZDEV_COND_RDONLY &&
			     e->cond != ZDEV_COND_OFFLINE)))
			return emu_bad_image(path, -EUCLEAN, "impossible zone table entry");
		zn->wp = conv ? 0 : e->wp;
		zn->epoch = e->epoch;
		zn->cond = e->cond;
	}
	return 0;
}

static int emu_lock_fd(int fd, int readonly, const char *path)
{
	int err;

	if (!flock(fd, (readonly ? LOCK_SH : LOCK_EX) | LOCK_NB))
		return 0;
	err = errno;
	if (err == EWOULDBLOCK)
		return -EBUSY; /* the caller says so: zdev_open knows more about who holds it */
	zlog_err("%s: cannot lock: %s", path, strerror(err));
	return -err;
}

/* READONLY -1: read-only without the shared lock (zdev_open_opts.shared). */
int emu_open_fd(const char *path, int readonly, int direct, int *fdp)
{
	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | (direct ? O_DIRECT : 0);
	int fd = open(path, flags), ret;
	struct stat st;

	if (fd < 0) {
		ret = -errno;
		if (direct && errno == EINVAL)
			zlog_err("%s: the file system under the image does not support O_DIRECT", path);
		else
			zlog_err("%s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		zlog_err("%s: not a regular file", path);
		return -ENODEV;
	}
	ret = readonly < 0 ? 0 : emu_lock_fd(fd, readonly, path);
	if (ret) {
		close(fd);
		return ret;
	}
	*fdp = fd;
	return 0;
}

/* The journal's fd: the image's own, or with O_DIRECT a second, buffered one (struct
 * emu_dev, jfd), checked to be the same file (the path may have been replaced between the
 * opens). Not locked: the first fd's lock covers the image. */
int emu_open_jfd(struct emu_dev *d, const char *path, int readonly)
{
	struct stat a, b;
	int fd;

	if (!d->direct) {
		d->jfd = d->fd;
		return 0;
	}
	fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &b) || fstat(d->fd, &a) || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino) {
		int ret = fd < 0 ? -errno : -EBUSY;

		zlog_err("%s: cannot open the image a second time for its journal%s", path,
			 fd < 0 ? "" : ": the path now names another file");
		if (fd >= 0)
			close(fd);
		return ret;
	}
	d->jfd = fd;
	return 0;
}

int zemu_read_geometry(const char *path, struct zdev_geometry *geo)
{
	struct emu_dev d;
	struct stat st;
	int ret;

	memset(&d, 0, sizeof(d));
	d.hdr = emu_blk_alloc(EMU_BLK);
	if (!d.hdr)
		return -ENOMEM;
	d.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d.fd < 0 || fstat(d.fd, &st)) {
		ret = -errno;
		zlog_err("%s: %s", path, strerror(errno));
	} else {
		ret = emu_full_pread(d.fd, d.hdr, EMU_BLK, 0);
		if (!ret && memcmp(d.hdr->magic, EMU_MAGIC, 8)) {
			zlog_err("%s: not a zlfs-emu image", path);
			ret = -ENODEV;
		} else if (!ret) {
			ret = emu_hdr_validate(d.hdr, path, (uint64_t)st.st_size);
		}
		if (!ret) {
			emu_fill_public(&d, path);
			*geo = d.zd.geo;
		}
	}
	if (d.fd >= 0)
		close(d.fd);
	free(d.hdr);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Creating images.
 */

/* The conventional mode: every zone conventional, 4 KiB pages, a NAND model (the default one
 * if none was given), no zone limits. Fills what it decides into H. */
static int create_ftl(const char *path, const struct zemu_create_opts *o, struct emu_hdr *h)
{
	const char *why;

	if (o->nr_conv || o->max_open || o->max_active || (o->lblock_size && o->lblock_size != 4096) ||
	    (o->zone_capacity && o->zone_capacity != o->zone_size)) {
		zlog_err("%s: the conventional mode takes no conventional-zone count, zone limits or "
			 "zone capacity, and 4096-byte blocks only", path);
		return -EINVAL;
	}
	h->version = EMU_FMT_VERSION_FTL;
	h->mode = ZEMU_MODE_FTL;
	h->nr_conv = h->nr_zones;
	h->ftl = o->ftl;
	if (!h->timing.dies)
		zemu_timing_default(&h->timing);
	if (emu_ftl_geometry_check(h, &why)) {
		zlog_err("%s: %s", path, why);
		return -EINVAL;
	}
	return 0;
}

static int create_check(const char *path, const struct zemu_create_opts *o, struct emu_hdr *h)
{
	uint32_t lbs = o->lblock_size ? o->lblock_size : 4096;
	uint64_t cap = o->zone_capacity ? o->zone_capacity : o->zone_size, nz;
	const char *why;

#define CREATE_FAIL(...) do { zlog_err(__VA_ARGS__); return -EINVAL; } while (0)
	if (lbs != 512 && lbs != 4096)
		CREATE_FAIL("%s: block size must be 512 or 4096", path);
	if (!o->zone_size || o->zone_size % lbs)
		CREATE_FAIL("%s: zone size must be a nonzero multiple of the block size (%u)", path, lbs);
	if (cap > o->zone_size || cap % lbs)
		CREATE_FAIL("%s: zone capacity must be a multiple of the block size, at most the zone size",
			    path);
	nz = o->size / o->zone_size;
	if (!nz || nz > EMU_MAX_ZONES)
		CREATE_FAIL("%s: size must hold between 1 and %u zones", path, EMU_MAX_ZONES);
	if (o->mode != ZEMU_MODE_ZONED && o->mode != ZEMU_MODE_FTL)
		CREATE_FAIL("%s: unknown mode %d", path, (int)o->mode);
	if (o->mode == ZEMU_MODE_ZONED && o->nr_conv >= nz)
		CREATE_FAIL("%s: %u conventional zones leave no sequential zone of %llu", path,
			    o->nr_conv, (unsigned long long)nz);
	if (o->max_open && o->max_active && o->max_open > o->max_active)
		CREATE_FAIL("%s: max-open (%u) must not exceed max-active (%u)", path, o->max_open,
			    o->max_active);
	if (o->journal_slots > EMU_JSLOTS_MAX)
		CREATE_FAIL("%s: at most %u journal slots", path, EMU_JSLOTS_MAX);
	if (o->log_path && strlen(o->log_path) >= EMU_PATH_MAX - 1)
		CREATE_FAIL("%s: log path too long", path);
	if (emu_timing_check(&o->timing, &why))
		CREATE_FAIL("%s: timing model: %s", path, why);
#undef CREATE_FAIL
	memcpy(h->magic, EMU_MAGIC, 8);
	h->version = EMU_FMT_VERSION;
	h->lblock_size = lbs;
	h->nr_zones = (uint32_t)nz;
	h->nr_conv = o->nr_conv;
	h->max_open = o->max_open;
	h->max_active = o->max_active;
	h->jslots = o->journal_slots ? o->journal_slots : EMU_JSLOTS_DEFAULT;
	h->zone_size = o->zone_size;
	h->zone_capacity = cap;
	h->generation = 1;
	h->timing = o->timing;
	if (o->mode == ZEMU_MODE_FTL && create_ftl(path, o, h))
		return -EINVAL;
	emu_hdr_layout(h);
	return 0;
}

/* A relative log path is stored absolute: the image may be opened from another directory. */
static int abs_log_path(const char *log, char *out, size_t len)
{
	char cwd[PATH_MAX];

	if (log[0] == '/') {
		snprintf(out, len, "%s", log);
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	if ((size_t)snprintf(out, len, "%s/%s", cwd, log) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Table first, header last: an interrupted create leaves a file without the magic. */
static int create_write(int fd, struct emu_hdr *h)
{
	uint64_t tbytes = emu_table_bytes(h->nr_zones);
	struct emu_zent *t = emu_blk_alloc(tbytes);
	int ret;

	if (!t)
		return -ENOMEM;
	for (uint32_t z = 0; z < h->nr_zones; z++)
		emu_zent_set(&t[z], 0, 0, z < h->nr_conv ? ZDEV_COND_NOT_WP : ZDEV_COND_EMPTY);
	ret = ftruncate(fd, 0) ? -errno : 0;
	if (!ret)
		ret = ftruncate(fd, (off_t)(h->data_off + (uint64_t)h->nr_zones * h->zone_size)) ?
			      -errno : 0;
	if (!ret)
		ret = emu_img_seal(fd, h, t, tbytes);
	free(t);
	return ret;
}

int emu_img_seal(int fd, struct emu_hdr *h, const void *table, uint64_t tbytes)
{
	int ret = emu_full_pwrite(fd, table, tbytes, h->table_off);

	if (!ret) {
		h->crc = emu_hdr_crc(h);
		ret = emu_full_pwrite(fd, h, EMU_BLK, 0);
	}
	if (!ret && fsync(fd))
		ret = -errno;
	return ret;
}

int zemu_create(const char *path, const struct zemu_create_opts *opts)
{
	struct emu_hdr *h = emu_blk_alloc(EMU_BLK);
	struct stat st;
	int fd = -1, ret;

	if (!h)
		return -ENOMEM;
	ret = create_check(path, opts, h);
	if (!ret && opts->log_path)
		ret = abs_log_path(opts->log_path, h->log_path, sizeof(h->log_path));
	if (!ret) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			ret = -errno;
			zlog_err("%s: %s", path, strerror(errno));
		} else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			zlog_err("%s: an emulator image must be a regular file", path);
			ret = -EINVAL;
		} else {
			ret = emu_lock_fd(fd, 0, path);
			if (ret == -EBUSY)
				zlog_err("%s is in use (mounted or open elsewhere)", path);
		}
	}
	if (!ret)
		ret = create_write(fd, h);
	if (!ret && h->log_path[0])
		ret = emu_log_create_empty(h->log_path, h);
	if (ret && ret != -EBUSY && ret != -EINVAL)
		zlog_err("%s: cannot create image: %s", path, strerror(-ret));
	if (fd >= 0)
		close(fd);
	free(h);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Copying images (LOG.base, replay output).
 */

/* LEN bytes from SOFF of SFD to DOFF of DFD. */
int emu_copy_range(int sfd, uint64_t soff, int dfd, uint64_t doff, uint64_t len)
{
	static const size_t chunk = 1u << 20;
	uint8_t *buf = NULL;
	int ret = 0;

	while (len) {
		loff_t in = (loff_t)soff, outp = (loff_t)doff;
		ssize_t n = buf ? -1 : copy_file_range(sfd, &in, dfd, &outp, len, 0);

		if (n < 0 && !buf) {
			if (errno == EINTR)
				continue;
			/* not supported across these files: fall back to plain copying */
			buf = malloc(chunk);
			if (!buf)
				return -ENOMEM;
			continue;
		}
		if (buf) {
			n = (ssize_t)min_u64(len, chunk);
			ret = emu_full_pread(sfd, buf, (size_t)n, soff);
			if (!ret)
				ret = emu_full_pwrite(dfd, buf, (size_t)n, doff);
			if (ret)
				break;
		} else if (n == 0) {
			ret = -EIO;
			break;
		}
		soff += (uint64_t)n;
		doff += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	return ret;
}

/* Copy SRC to DST keeping holes; written to a temporary name and renamed into place. */
int emu_copy_sparse(const char *src, const char *dst)
{
	char tmp[EMU_PATH_MAX + 16];
	struct stat st;
	int sfd, dfd, ret = 0;
	off_t pos = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	sfd = open(src, O_RDONLY | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	dfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (dfd < 0 || fstat(sfd, &st) || ftruncate(dfd, st.st_size))
		ret = -errno;
	while (!ret && pos < st.st_size) {
		off_t data = lseek(sfd, pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			data = pos; /* no SEEK_DATA here: copy everything */
			hole = st.st_size;
		} else {
			hole = lseek(sfd, data, SEEK_HOLE);
			if (hole < 0)
				hole = st.st_size;
		}
		ret = emu_copy_range(sfd, (uint64_t)data, dfd, (uint64_t)data, (uint64_t)(hole - data));
		pos = hole;
	}
	if (!ret && fsync(dfd))
		ret = -errno;
	if (dfd >= 0)
		close(dfd);
	close(sfd);
	if (!ret && rename(tmp, dst))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* A copied image must not go on appending to the original's write log, nor fire the
 * original's pending one-shot faults (the operation that met one was aborted, so replaying
 * the log would otherwise trip on it where the original did not). */
int emu_image_clear_log_path(const char *path)
{
	struct emu_hdr *h = emu_blk_alloc(EMU_BLK);
	int fd, ret;

	if (!h)
		return -ENOMEM;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		free(h);
		return ret;
	}
	ret = emu_full_pread(fd, h, EMU_BLK, 0);
	if (!ret && memcmp(h->magic, EMU_MAGIC, 8))
		ret = -EINVAL;
	if (!ret) {
		memset(h->log_path, 0, sizeof(h->log_path));
		memset(h->faults, 0, sizeof(h->faults));
		h->crc = emu_hdr_crc(h);
		ret = emu_full_pwrite(fd, h, EMU_BLK, 0);
		if (!ret && fsync(fd))
			ret = -errno;
	}
	close(fd);
	free(h);
	return ret;
}
