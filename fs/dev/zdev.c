/*
 * zdev.c - backend dispatch and the helpers shared by both backends (see zdev.h).
 *
 * Owns: choosing a backend for a path from a table it is given (fs/emu/backends.c has the
 * table, so that nothing here names a backend above it), waiting for a daemon letting go of
 * a device (through zdev_hold.c), argument checks common to every backend, aligned buffers,
 * names of zone types and conditions, the read-size histogram of each device.
 * May call: the backends through struct zdev_backend and struct zdev_ops, zdev_hold.c, log.h.
 */
#include "zdev_impl.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Whole transfers: the kernel may split a large O_DIRECT one, and a signal may cut one short. */
int zdev_pread_all(int fd, void *buf, size_t len, uint64_t off, int eof_zeros)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			if (!eof_zeros)
				return -EIO;
			memset(p, 0, len);
			return 0;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int zdev_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};

	return zdev_pwritev_all(fd, &v, 1, off);
}

int zdev_pwritev_all(int fd, const struct iovec *iov, int n, uint64_t off)
{
	struct iovec v[ZDEV_IOV_MAX], *p = v;

	if (n < 0 || n > ZDEV_IOV_MAX)
		return -EINVAL;
	memcpy(v, iov, (size_t)n * sizeof(*v));
	while (n) {
		ssize_t k = pwritev(fd, p, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		off += (uint64_t)k;
		for (; n && (size_t)k >= p->iov_len; n--) /* pieces written whole */
			k -= (ssize_t)(p++)->iov_len;
		if (n) { /* a short write ended inside this piece */
			p->iov_base = (uint8_t *)p->iov_base + k;
			p->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* Read-size histograms (zdev_read_sizes), one per open device. Kept here, keyed by the
 * device, so the backends need not know about them: a few slots, scanned on each read. */
#define RSIZE_DEVS 16
static struct {
	_Atomic(const struct zdev *) dev;
	_Atomic uint64_t n[ZDEV_RSIZE_BUCKETS];
} rsize[RSIZE_DEVS];

static void rsize_attach(const struct zdev *dev)
{
	int i, b;

	for (i = 0; i < RSIZE_DEVS; i++) {
		const struct zdev *none = NULL;

		if (atomic_compare_exchange_strong(&rsize[i].dev, &none, dev)) {
			/* nobody reads DEV before zdev_open returns it */
			for (b = 0; b < ZDEV_RSIZE_BUCKETS; b++)
				atomic_store(&rsize[i].n[b], 0);
			return;
		}
	}
}

static void rsize_detach(const struct zdev *dev)
{
	int i;

	for (i = 0; i < RSIZE_DEVS; i++) {
		const struct zdev *d = dev;

		atomic_compare_exchange_strong(&rsize[i].dev, &d, NULL);
	}
}

/* < 4 KiB; then [4, 8) KiB, [8, 16) KiB, ... [256, 512) KiB; then >= 512 KiB */
static int rsize_bucket(size_t len)
{
	int b = 1;

	if (len < 4096)
		return 0;
	for (len /= 8192; len && b < ZDEV_RSIZE_BUCKETS - 1; len /= 2)
		b++;
	return b;
}

static void rsize_count(const struct zdev *dev, size_t len)
{
	int i;

	for (i = 0; i < RSIZE_DEVS; i++)
		if (atomic_load_explicit(&rsize[i].dev, memory_order_relaxed) == dev) {
			atomic_fetch_add_explicit(&rsize[i].n[rsize_bucket(len)], 1, memory_order_relaxed);
			return;
		}
}

void zdev_read_sizes(const struct zdev *dev, uint64_t counts[ZDEV_RSIZE_BUCKETS])
{
	int i, b;

	for (b = 0; b < ZDEV_RSIZE_BUCKETS; b++)
		counts[b] = 0;
	for (i = 0; i < RSIZE_DEVS; i++)
		if (atomic_load(&rsize[i].dev) == dev)
			for (b = 0; b < ZDEV_RSIZE_BUCKETS; b++)
				counts[b] = atomic_load_explicit(&rsize[i].n[b], memory_order_relaxed);
}

const char *zdev_rsize_name(int bucket)
{
	static const char *const names[ZDEV_RSIZE_BUCKETS] = {
		"lt_4k", "4k_8k", "8k_16k", "16k_32k", "32k_64k", "64k_128k", "128k_256k",
		"256k_512k", "ge_512k"};

	return bucket >= 0 && bucket < ZDEV_RSIZE_BUCKETS ? names[bucket] : "unknown";
}

static int open_backend(const struct zdev_backend *const *b, const char *path,
			const struct zdev_open_opts *opts, struct zdev **out)
{
	int ret = 0;

	for (; *b && !ret; b++)
		if ((ret = (*b)->probe(path)) > 0)
			return (*b)->open(path, opts, out);
	if (ret < 0)
		return ret;
	zlog_err("%s: not a zoned block device or zlfs-emu image: create one with zlfs-emu create", path);
	return -ENODEV;
}

int zdev_open_from(const struct zdev_backend *const *backends, const char *path,
		   const struct zdev_open_opts *opts, struct zdev **out)
{
	static const struct zdev_open_opts defaults;
	int ret;

	if (!opts)
		opts = &defaults;
	*out = NULL;
	ret = open_backend(backends, path, opts, out);
	if (ret == -EBUSY) {
		ret = hold_wait(path, opts->wait_secs);
		if (!ret && (ret = open_backend(backends, path, opts, out)) == -EBUSY)
			zlog_err("%s is in use (mounted or open by another program)", path);
	}
	if (ret)
		return ret;
	(*out)->mark_fd = -1;
	if (opts->daemon && (ret = hold_mark(*out, path))) {
		zdev_close(*out);
		*out = NULL;
		return ret;
	}
	rsize_attach(*out);
	return 0;
}

void zdev_close(struct zdev *dev)
{
	int mark_fd;

	if (dev) {
		mark_fd = dev->mark_fd;
		rsize_detach(dev);
		dev->ops->close(dev);
		hold_unmark(mark_fd); /* after the device: "no mark" means it is free */
	}
}

const struct zdev_geometry *zdev_geometry(const struct zdev *dev) { return &dev->geo; }
const struct zdev_info *zdev_info(const struct zdev *dev) { return &dev->info; }

uint32_t zdev_zone_of(const struct zdev *dev, uint64_t off)
{
	return (uint32_t)(off / dev->geo.zone_size);
}

int zdev_report(struct zdev *dev, uint32_t first, uint32_t count, struct zdev_zone *zones)
{
	if (first > dev->geo.nr_zones || count > dev->geo.nr_zones - first)
		return -EINVAL;
	return dev->ops->report(dev, first, count, zones);
}

int zdev_report_one(struct zdev *dev, uint32_t zone, struct zdev_zone *out)
{
	return zdev_report(dev, zone, 1, out);
}

static int zdev_check_io(const struct zdev *dev, const void *buf, size_t len, uint64_t off)
{
	uint64_t lbs = dev->geo.lblock_size;

	if (((uintptr_t)buf % ZDEV_BUF_ALIGN) || len % lbs || off % lbs)
		return -EINVAL;
	if (off > dev->geo.capacity || len > dev->geo.capacity - off)
		return -EINVAL;
	return 0;
}

int zdev_read(struct zdev *dev, void *buf, size_t len, uint64_t off)
{
	int ret = zdev_check_io(dev, buf, len, off);

	if (ret || !len)
		return ret;
	rsize_count(dev, len);
	return dev->ops->read(dev, buf, len, off);
}

void zdev_prefetch(struct zdev *dev, uint64_t off, uint64_t len)
{
	if (dev->ops->prefetch && off < dev->geo.capacity && len <= dev->geo.capacity - off)
		dev->ops->prefetch(dev, off, len);
}

int zdev_write(struct zdev *dev, const void *buf, size_t len, uint64_t off)
{
	int ret = zdev_check_io(dev, buf, len, off);

	if (ret || !len)
		return ret;
	if (dev->readonly)
		return -EROFS;
	return dev->ops->write(dev, buf, len, off);
}

int zdev_writev(struct zdev *dev, const struct iovec *iov, int n, uint64_t off)
{
	uint64_t at = off;
	int ret = n < 0 || n > ZDEV_IOV_MAX ? -EINVAL : 0;

	for (int i = 0; !ret && i < n; at += iov[i++].iov_len)
		ret = zdev_check_io(dev, iov[i].iov_base, iov[i].iov_len, at);
	if (ret || at == off)
		return ret;
	if (dev->readonly)
		return -EROFS;
	if (n > 1 && dev->ops->writev)
		return dev->ops->writev(dev, iov, n, off);
	for (int i = 0; !ret && i < n; off += iov[i++].iov_len)
		ret = iov[i].iov_len ? dev->ops->write(dev, iov[i].iov_base, iov[i].iov_len, off) : 0;
	return ret;
}

static int zdev_mgmt(struct zdev *dev, enum zdev_mgmt_op op, uint32_t zone)
{
	if (zone >= dev->geo.nr_zones)
		return -EINVAL;
	if (dev->readonly)
		return -EROFS;
	return dev->ops->mgmt(dev, op, zone);
}

int zdev_zone_reset(struct zdev *dev, uint32_t zone) { return zdev_mgmt(dev, ZDEV_MGMT_RESET, zone); }
int zdev_zone_finish(struct zdev *dev, uint32_t zone) { return zdev_mgmt(dev, ZDEV_MGMT_FINISH, zone); }
int zdev_zone_open(struct zdev *dev, uint32_t zone) { return zdev_mgmt(dev, ZDEV_MGMT_OPEN, zone); }
int zdev_zone_close(struct zdev *dev, uint32_t zone) { return zdev_mgmt(dev, ZDEV_MGMT_CLOSE, zone); }

int zdev_flush(struct zdev *dev)
{
	if (dev->readonly)
		return 0;
	return dev->ops->flush(dev);
}

void *zdev_buf_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, ZDEV_BUF_ALIGN, len ? len : ZDEV_BUF_ALIGN))
		return NULL;
	return p;
}

void zdev_buf_free(void *buf) { free(buf); }

/* ---- one-block pages ----------------------------------------------------------------------
 * The caches hold thousands of aligned 4 KiB pages. From posix_memalign each costs about twice
 * its size once caches turn over (the alignment slack fragments the heap, in every thread's
 * arena), so they come from chunks mapped for them instead, and freed pages wait on a list.
 * Past POOL_WARM free pages, a freed page's memory goes back to the kernel (it stays mapped,
 * and is zero when next used): a burst of dirty pages does not leave the daemon big. Under
 * AddressSanitizer pages are plain allocations, so that use after free is still caught. The
 * pool's lock is a leaf below every other. POOL_WARM holds what one shrink of the node cache
 * gives back (half of node.c's NCACHE_MAX): a reader that turns the cache over (fsck reads
 * every node once) would otherwise give a thousand pages back and fault them in again, a
 * madvise call and a page fault per page. */
#define POOL_CHUNK_PAGES 64
#define POOL_WARM 2048

#if defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang before 2025 does not say __SANITIZE_ADDRESS__ */
#define ZDEV_POOL_OFF 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ZDEV_POOL_OFF)
void *zdev_page_alloc(void) { return zdev_buf_alloc(ZDEV_BUF_ALIGN); }
void zdev_page_free(void *page) { zdev_buf_free(page); }
#else
struct pool_page {
	struct pool_page *next;
};

static struct {
	pthread_mutex_t lock;
	struct pool_page *warm;  /* linked through the pages */
	uint32_t nwarm;
	void **cold;             /* given back to the kernel: not touched, so kept apart */
	size_t ncold, cap;
} pool = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, NULL, 0, 0};

static void pool_put_warm(struct pool_page *p)
{
	p->next = pool.warm;
	pool.warm = p;
	pool.nwarm++;
}

static int pool_grow(void)
{
	uint8_t *c = mmap(NULL, (size_t)POOL_CHUNK_PAGES * ZDEV_BUF_ALIGN, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (c == MAP_FAILED)
		return -ENOMEM;
	for (uint32_t i = 0; i < POOL_CHUNK_PAGES; i++)
		pool_put_warm((void *)(c + (size_t)i * ZDEV_BUF_ALIGN));
	return 0;
}

void *zdev_page_alloc(void)
{
	void *p = NULL;

	pthread_mutex_lock(&pool.lock);
	if (!pool.warm && pool.ncold)
		p = pool.cold[--pool.ncold];
	else if (pool.warm || !pool_grow()) {
		struct pool_page *w = pool.warm;

		pool.warm = w->next;
		pool.nwarm--;
		p = w;
	}
	pthread_mutex_unlock(&pool.lock);
	return p;
}

/* Room for one more cold page, under the pool's lock. */
static int pool_cold_room(void)
{
	void **c;

	if (pool.ncold < pool.cap)
		return 1;
	c = realloc(pool.cold, (pool.cap ? pool.cap * 2 : 1024) * sizeof(*c));
	if (!c)
		return 0;
	pool.cold = c;
	pool.cap = pool.cap ? pool.cap * 2 : 1024;
	return 1;
}

void zdev_page_free(void *page)
{
	struct pool_page *p = page;
	int cold;

	if (!p)
		return;
	/* On kernels with pages larger than a block, madvise would take the neighbours too. */
	pthread_mutex_lock(&pool.lock);
	cold = pool.nwarm >= POOL_WARM && sysconf(_SC_PAGESIZE) == ZDEV_BUF_ALIGN;
	if (!cold)
		pool_put_warm(p);
	pthread_mutex_unlock(&pool.lock);
	if (!cold)
		return;
	madvise(p, ZDEV_BUF_ALIGN, MADV_DONTNEED); /* before anyone can take it again */
	pthread_mutex_lock(&pool.lock);
	if (pool_cold_room())
		pool.cold[pool.ncold++] = p;
	else
		pool_put_warm(p);
	pthread_mutex_unlock(&pool.lock);
}
#endif

const char *zdev_cond_name(int cond)
{
	static const char *const names[] = {"not-wp", "empty", "imp-open", "exp-open",
					    "closed", "full",  "read-only", "offline"};

	if (cond < 0 || cond > ZDEV_COND_OFFLINE)
		return "unknown";
	return names[cond];
}

const char *zdev_type_name(int type)
{
	if (type == ZDEV_ZONE_CONV)
		return "conventional";
	if (type == ZDEV_ZONE_SEQ)
		return "seq-write-required";
	return "unknown";
}
