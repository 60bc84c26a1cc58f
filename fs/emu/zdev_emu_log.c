/*
 * zdev_emu_log.c - the write log: every operation appended ahead of the image change it
 * describes, a log started on a used image saved as LOG.base, redoing the operation a killed
 * process left in doubt, counting the operations, and replaying a prefix of them into a new
 * image.
 * May call: the image, the zone rules, the journal, and zdev.h's public functions (replay
 * drives the new image through them).
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------
 * Write log.
 */

static uint32_t lrec_crc(struct emu_lrec *r, const void *data, size_t len)
{
	uint32_t saved = r->crc, crc;

	r->crc = 0;
	crc = emu_crc32c(0, r, sizeof(*r));
	r->crc = saved;
	return data ? emu_crc32c(crc, data, len) : crc;
}

static uint32_t lhdr_crc(struct emu_lhdr *h)
{
	uint32_t saved = h->crc, crc;

	h->crc = 0;
	crc = emu_crc32c(0, h, sizeof(*h));
	h->crc = saved;
	return crc;
}

static int write_all_iov(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		ssize_t n = writev(fd, iov, cnt);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Append one length-framed, checksummed record; a torn tail fails its CRC on reading.
 * *POS (optional) receives the record's offset in the log. */
int emu_log_append_at(struct emu_dev *d, enum log_type type, uint32_t zone, uint64_t off,
			 uint64_t len, const void *data, uint64_t *pos)
{
	struct emu_lrec r = {.magic = LOG_REC_MAGIC, .type = (uint8_t)type, .zone = zone,
			     .off = off, .len = data ? len : 0};
	struct iovec iov[2] = {{&r, sizeof(r)}, {(void *)data, data ? len : 0}};
	int ret;

	if (pos)
		*pos = d->log_size;
	if (d->log_fd < 0)
		return 0;
	r.crc = lrec_crc(&r, data, data ? len : 0);
	ret = write_all_iov(d->log_fd, iov, data ? 2 : 1);
	if (ret) {
		zlog_err("%s: write log append failed: %s", d->log_path, strerror(-ret));
		return ret;
	}
	d->log_size += sizeof(r) + r.len;
	return 0;
}

int emu_log_append(struct emu_dev *d, enum log_type type, uint32_t zone, uint64_t off,
		      uint64_t len, const void *data)
{
	return emu_log_append_at(d, type, zone, off, len, data, NULL);
}

/* The operation logged at POS failed after all: mark it void. Returns ERR. */
int emu_log_abort(struct emu_dev *d, uint64_t pos, int err)
{
	emu_log_append(d, LOG_ABORT, 0, pos, 0, NULL); /* failure already reported, ERR wins */
	return err;
}

static int log_hdr_check(struct emu_lhdr *h, const char *path)
{
	if (memcmp(h->magic, LOG_MAGIC, 8)) {
		zlog_err("%s: not a zlfs-emu write log", path);
		return -EINVAL;
	}
	if (h->crc != lhdr_crc(h) || h->version != LOG_VERSION ||
	    (h->base != LOG_BASE_EMPTY && h->base != LOG_BASE_FILE)) {
		zlog_err("%s: corrupt or unsupported write log header", path);
		return -EUCLEAN;
	}
	return 0;
}

static void log_hdr_fill(struct emu_lhdr *l, const struct emu_hdr *h, enum log_base base)
{
	memset(l, 0, sizeof(*l));
	memcpy(l->magic, LOG_MAGIC, 8);
	l->version = LOG_VERSION;
	l->base = base;
	l->lblock_size = h->lblock_size;
	l->nr_zones = h->nr_zones;
	l->nr_conv = h->nr_conv;
	l->max_open = h->max_open;
	l->max_active = h->max_active;
	l->mode = h->mode;
	l->zone_size = h->zone_size;
	l->zone_capacity = h->zone_capacity;
	l->crc = lhdr_crc(l);
}

static int log_geometry_matches(const struct emu_lhdr *l, const struct emu_hdr *h)
{
	return l->lblock_size == h->lblock_size && l->nr_zones == h->nr_zones &&
	       l->nr_conv == h->nr_conv && l->max_open == h->max_open &&
	       l->max_active == h->max_active && l->mode == h->mode && l->zone_size == h->zone_size &&
	       l->zone_capacity == h->zone_capacity;
}

/*
 * Walk the records of the open log FD (positioned nowhere in particular). Calls FN for each
 * intact record (payload in an aligned buffer for writes) and stops at the first torn or
 * corrupt one. *END receives the offset just past the last intact record.
 */
typedef int (*log_walk_fn)(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos);

static int log_walk(int fd, uint64_t *end, log_walk_fn fn, void *ctx)
{
	uint64_t pos = sizeof(struct emu_lhdr);
	struct stat st;
	int ret = 0;

	if (fstat(fd, &st))
		return -errno;
	for (;;) {
		struct emu_lrec r;
		void *payload = NULL;

		if (pos + sizeof(r) > (uint64_t)st.st_size)
			break;
		ret = emu_full_pread(fd, &r, sizeof(r), pos);
		if (ret)
			break;
		if (r.magic != LOG_REC_MAGIC || r.type < LOG_WRITE || r.type > LOG_TRIM ||
		    r.len > (uint64_t)st.st_size - pos - sizeof(r) ||
		    (r.type == LOG_TRIM ? r.len != 8 : r.type != LOG_WRITE && r.len))
			break;
		if (r.len) {
			payload = emu_blk_alloc(r.len);
			if (!payload) {
				ret = -ENOMEM;
				break;
			}
			ret = emu_full_pread(fd, payload, r.len, pos + sizeof(r));
		}
		if (ret || r.crc != lrec_crc(&r, payload, r.len)) {
			free(payload);
			break;
		}
		ret = fn ? fn(ctx, &r, payload, pos) : 0;
		free(payload);
		if (ret)
			break;
		pos += sizeof(r) + r.len;
	}
	*end = pos;
	return ret;
}

/* True when the image holds nothing a fresh image of its geometry would not: all sequential
 * zones empty and healthy, no pending faults, no allocated data in conventional zones. */
static int image_is_pristine(struct emu_dev *d)
{
	uint64_t conv_end = d->hdr->data_off + (uint64_t)d->hdr->nr_conv * d->hdr->zone_size;
	off_t pos;

	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++)
		if (d->zones[z].cond != ZDEV_COND_EMPTY || d->table[z].cond != ZDEV_COND_EMPTY)
			return 0;
	for (int i = 0; i < EMU_MAX_FAULTS; i++)
		if (d->hdr->faults[i].kind)
			return 0;
	if (!d->hdr->nr_conv)
		return 1;
	pos = lseek(d->fd, (off_t)d->hdr->data_off, SEEK_DATA);
	if (pos < 0)
		return errno == ENXIO;
	return (uint64_t)pos >= conv_end;
}

/* A new log: on an image that holds data, first make its state durable and save it as
 * LOG.base, so that replay can start from it. */
static int log_begin(struct emu_dev *d, const char *image, const char *log, int fd)
{
	enum log_base base = image_is_pristine(d) ? LOG_BASE_EMPTY : LOG_BASE_FILE;
	struct emu_lhdr lh;
	char basepath[EMU_PATH_MAX + 8];
	int ret;

	if (base == LOG_BASE_FILE) {
		snprintf(basepath, sizeof(basepath), "%s.base", log);
		ret = emu_flush_locked(d);
		if (!ret)
			ret = emu_copy_sparse(image, basepath);
		if (!ret)
			ret = emu_image_clear_log_path(basepath);
		if (ret) {
			zlog_err("%s: cannot save the log's base image: %s", basepath, strerror(-ret));
			return ret;
		}
	}
	log_hdr_fill(&lh, d->hdr, base);
	ret = emu_full_pwrite(fd, &lh, sizeof(lh), 0);
	if (!ret && fdatasync(fd))
		ret = -errno;
	return ret;
}

/* The log's last record, kept while walking it: an operation there may be in doubt. */
struct log_tail {
	struct emu_lrec rec;
	void *payload;
};

static int keep_tail(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	struct log_tail *t = ctx;

	(void)pos;
	free(t->payload);
	t->payload = NULL;
	t->rec = *r;
	if (r->len) {
		t->payload = emu_blk_alloc(r->len);
		if (!t->payload)
			return -ENOMEM;
		memcpy(t->payload, payload, r->len);
	}
	return 0;
}

/*
 * The process that wrote the log may have been killed after logging its last operation and
 * before (or while) applying it. Apply it now unless it took effect; a write to a sequential
 * zone took effect exactly when the write pointer is past it. Called before the log is
 * attached, so nothing here is logged again. Never fails the open: a mismatch is reported.
 */
static void log_redo(struct emu_dev *d, const char *log, const struct log_tail *t)
{
	const struct emu_lrec *r = &t->rec;
	uint32_t z = r->zone;
	int ret = 0;

	if (!log_is_op(r->type) || z >= d->hdr->nr_zones)
		return;
	pthread_mutex_lock(&d->lock); /* no other user yet, but a reset drops it for its sync */
	if (r->type == LOG_WRITE && !is_conv(d, z)) {
		uint64_t rel = r->off - zstart(d, z), wp = d->zones[z].wp;
		if (wp < rel + r->len) /* else it reached the image */
			ret = wp == rel ? emu_write_locked(d, t->payload, r->len, r->off) : -ESPIPE;
	} else if (r->type == LOG_WRITE) {
		ret = emu_write_locked(d, t->payload, r->len, r->off);
	} else if (r->type == LOG_RESET) {
		ret = emu_mgmt_reset(d, z);
	} else if (r->type == LOG_FINISH) {
		ret = emu_mgmt_finish(d, z);
	} else if (r->type == LOG_TRIM) {
		ret = emu_trim_locked(d, r->off, *(const uint64_t *)t->payload);
	}
	pthread_mutex_unlock(&d->lock);
	if (ret)
		zlog_warn("%s: the image does not match the log's last operation (%s); replays past "
			  "it may fail", log, strerror(-ret));
	emu_power_cycle_zones(d);
}

/* Continue an existing log: cut a torn tail and redo an operation left in doubt. */
static int log_continue(struct emu_dev *d, const char *log, int fd)
{
	struct log_tail tail = {0};
	struct emu_lhdr lh;
	struct stat st;
	uint64_t end = 0; /* log_size stays defined when the walk fails */
	int ret;

	ret = emu_full_pread(fd, &lh, sizeof(lh), 0);
	if (ret)
		return ret;
	ret = log_hdr_check(&lh, log);
	if (ret)
		return ret;
	if (!log_geometry_matches(&lh, d->hdr)) {
		zlog_err("%s: write log was recorded on an image of another geometry", log);
		return -EINVAL;
	}
	ret = log_walk(fd, &end, keep_tail, &tail);
	if (!ret && fstat(fd, &st))
		ret = -errno;
	if (!ret && (uint64_t)st.st_size != end) {
		zlog_warn("%s: dropping a torn tail of %llu bytes", log,
			  (unsigned long long)((uint64_t)st.st_size - end));
		if (ftruncate(fd, (off_t)end))
			ret = -errno;
	}
	if (!ret)
		log_redo(d, log, &tail);
	free(tail.payload);
	d->log_size = end;
	return ret;
}

/* Attach the write log LOG to the device opened from IMAGE, starting it or continuing it. */
int emu_log_start(struct emu_dev *d, const char *image, const char *log)
{
	struct stat st;
	int fd, ret;

	if (strlen(log) >= sizeof(d->log_path)) {
		zlog_err("%s: write log path too long", log);
		return -ENAMETOOLONG;
	}
	fd = open(log, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: cannot open write log: %s", log, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
	} else if (st.st_size == 0) {
		ret = log_begin(d, image, log, fd);
		d->log_size = sizeof(struct emu_lhdr);
	} else {
		ret = log_continue(d, log, fd);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	d->log_fd = fd;
	snprintf(d->log_path, sizeof(d->log_path), "%s", log);
	if (st.st_size)
		ret = emu_log_append(d, LOG_POWERON, 0, 0, 0, NULL);
	return ret;
}

int emu_log_create_empty(const char *log, const struct emu_hdr *h)
{
	struct emu_lhdr lh;
	int fd, ret;

	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: cannot create write log: %s", log, strerror(errno));
		return ret;
	}
	log_hdr_fill(&lh, h, LOG_BASE_EMPTY);
	ret = emu_full_pwrite(fd, &lh, sizeof(lh), 0);
	if (!ret && fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

/* ------------------------------------------------------------------------------------------
 * Write log: counting and replay.
 */

static int log_open_checked(const char *log, struct emu_lhdr *lh)
{
	int fd = open(log, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0) {
		ret = -errno;
		zlog_err("%s: %s", log, strerror(errno));
		return ret;
	}
	ret = emu_full_pread(fd, lh, sizeof(*lh), 0);
	if (!ret)
		ret = log_hdr_check(lh, log);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* Operations minus the aborted ones: each ABORT voids exactly one operation. */
static int count_op(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	(void)payload;
	(void)pos;
	if (log_is_op(r->type))
		(*(long *)ctx)++;
	else if (r->type == LOG_ABORT)
		(*(long *)ctx)--;
	return 0;
}

long zemu_log_count(const char *log_path)
{
	struct emu_lhdr lh;
	uint64_t end;
	long count = 0;
	int fd, ret;

	fd = log_open_checked(log_path, &lh);
	if (fd < 0)
		return fd;
	ret = log_walk(fd, &end, count_op, &count);
	close(fd);
	return ret ? ret : count;
}

struct kinds_ctx {
	char *kinds;
	uint32_t *zones;
	long n, max;
};

static int kind_op(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	static const char letters[] = "?WFRXOC???T";
	struct kinds_ctx *k = ctx;

	(void)payload;
	(void)pos;
	if (log_is_op(r->type)) {
		if (k->n < k->max && k->kinds)
			k->kinds[k->n] = letters[r->type];
		if (k->n < k->max && k->zones)
			k->zones[k->n] = r->type == LOG_FLUSH ? UINT32_MAX : r->zone;
		k->n++;
	} else if (r->type == LOG_ABORT && k->n > 0) {
		k->n--;
	}
	return 0;
}

long zemu_log_kinds(const char *log_path, char *kinds, long max)
{
	return zemu_log_ops(log_path, kinds, NULL, max);
}

long zemu_log_ops(const char *log_path, char *kinds, uint32_t *zones, long max)
{
	struct kinds_ctx k = {kinds, zones, 0, max};
	struct emu_lhdr lh;
	uint64_t end;
	int fd, ret;

	fd = log_open_checked(log_path, &lh);
	if (fd < 0)
		return fd;
	ret = log_walk(fd, &end, kind_op, &k);
	close(fd);
	return ret ? ret : k.n;
}

struct replay_ctx {
	struct zdev *dev;
	long n, done;
	int torn;
	uint32_t lose_zone;   /* writes to it from operation LOSE_FROM on are dropped */
	long lose_from;
	uint64_t *aborted;    /* log offsets of aborted operations, ascending */
	size_t nr_aborted, cap_aborted, next_aborted;
};

static int collect_abort(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	struct replay_ctx *c = ctx;

	(void)payload;
	(void)pos;
	if (r->type != LOG_ABORT)
		return 0;
	if (c->nr_aborted == c->cap_aborted) {
		size_t cap = c->cap_aborted ? 2 * c->cap_aborted : 16;
		uint64_t *a = realloc(c->aborted, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		c->aborted = a;
		c->cap_aborted = cap;
	}
	c->aborted[c->nr_aborted++] = r->off;
	return 0;
}

static int is_aborted(struct replay_ctx *c, uint64_t pos)
{
	while (c->next_aborted < c->nr_aborted && c->aborted[c->next_aborted] < pos)
		c->next_aborted++;
	return c->next_aborted < c->nr_aborted && c->aborted[c->next_aborted] == pos;
}

/* Stops the walk with 1 once N operations have been applied. */
static int replay_op(void *ctx, const struct emu_lrec *r, void *payload, uint64_t pos)
{
	struct replay_ctx *c = ctx;
	uint64_t len = r->len;
	uint32_t z = r->zone;
	int ret = 0;

	if (c->done == c->n)
		return 1;
	if (log_is_op(r->type) && is_aborted(c, pos))
		return 0;
	if (log_is_op(r->type) && r->type != LOG_FLUSH && z == c->lose_zone &&
	    c->done >= c->lose_from) {
		if (r->type != LOG_WRITE) {
			zlog_err("write log operation %ld manages zone %u after the writes to drop "
				 "from it: a device keeps no such state", c->done + 1, z);
			return -EINVAL;
		}
		c->done++; /* lost with the volatile cache, with every later write to the zone */
		return 0;
	}
	switch (r->type) {
	case LOG_POWERON:
		emu_power_cycle_zones(to_emu(c->dev));
		return 0;
	case LOG_POWERCUT:
		zlog_err("write log holds a power cut before operation %ld: cannot replay past it",
			 c->done + 1);
		return -EOPNOTSUPP;
	case LOG_WRITE:
		if (c->torn && c->done + 1 == c->n)
			len = emu_torn_bytes(to_emu(c->dev), len, NULL, 0);
		ret = zdev_write(c->dev, payload, len, r->off);
		break;
	case LOG_FLUSH: break; /* everything is made durable at the end */
	case LOG_ABORT: return 0;
	case LOG_RESET: ret = zdev_zone_reset(c->dev, z); break;
	case LOG_FINISH: ret = zdev_zone_finish(c->dev, z); break;
	case LOG_OPEN: ret = zdev_zone_open(c->dev, z); break;
	case LOG_CLOSE: ret = zdev_zone_close(c->dev, z); break;
	case LOG_TRIM: ret = zemu_trim(c->dev, r->off, *(const uint64_t *)payload); break;
	}
	if (ret) {
		zlog_err("write log operation %ld (type %u, zone %u) fails on replay: %s; "
			 "the log does not belong to this base image", c->done + 1, r->type, z,
			 strerror(-ret));
		return ret;
	}
	c->done++;
	return 0;
}

static int replay_base(const char *log, const struct emu_lhdr *lh, const char *out)
{
	char base[EMU_PATH_MAX + 8];
	struct zemu_create_opts co = {
		.lblock_size = lh->lblock_size, .zone_size = lh->zone_size,
		.zone_capacity = lh->zone_capacity, .nr_conv = lh->mode ? 0 : lh->nr_conv,
		.max_open = lh->max_open, .max_active = lh->max_active,
		.size = (uint64_t)lh->nr_zones * lh->zone_size, .mode = (enum zemu_mode)lh->mode,
	};
	int ret;

	if (lh->base == LOG_BASE_EMPTY) {
		unlink(out); /* a fresh file, not a rewrite of one someone may have open */
		return zemu_create(out, &co);
	}
	snprintf(base, sizeof(base), "%s.base", log);
	ret = emu_copy_sparse(base, out);
	if (ret)
		zlog_err("%s: cannot copy the log's base image: %s", base, strerror(-ret));
	return ret ? ret : emu_image_clear_log_path(out);
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int replay_check(const char *image, const char *log, const struct emu_lhdr *lh,
			const char *out)
{
	struct zdev_geometry g;
	int ret;

	if ((image && same_file(image, out)) || same_file(log, out)) {
		zlog_err("%s: replay output must be a new file, not the image or the log", out);
		return -EINVAL;
	}
	if (!image)
		return 0;
	ret = zemu_read_geometry(image, &g);
	if (ret)
		return ret;
	if (g.lblock_size != lh->lblock_size || g.nr_zones != lh->nr_zones ||
	    g.nr_conv != lh->nr_conv || g.zone_size != lh->zone_size ||
	    g.zone_capacity != lh->zone_capacity) {
		zlog_err("%s: write log %s was recorded on an image of another geometry", image, log);
		return -EINVAL;
	}
	return 0;
}

static int replay_run(int fd, const char *out, long n, int torn, uint32_t lose_zone,
		      long lose_from)
{
	static const struct zdev_open_opts opts;
	struct replay_ctx c = {.n = n, .torn = torn, .lose_zone = lose_zone,
			       .lose_from = lose_from};
	struct emu_dev *d;
	uint64_t end;
	int ret;

	ret = emu_open_internal(out, &opts, 1, &d);
	if (ret)
		return ret;
	d->nosync = 1;
	c.dev = &d->zd;
	ret = log_walk(fd, &end, collect_abort, &c);
	if (!ret)
		ret = log_walk(fd, &end, replay_op, &c);
	if (ret == 1)
		ret = 0;
	if (!ret && c.done < n) {
		zlog_err("write log has only %ld operations, %ld asked for", c.done, n);
		ret = -EINVAL;
	}
	d->nosync = 0;
	if (!ret) {
		pthread_mutex_lock(&d->lock);
		ret = emu_flush_locked(d);
		pthread_mutex_unlock(&d->lock);
	}
	free(c.aborted);
	emu_free(d);
	return ret;
}

int zemu_replay(const char *image, const char *log_path, long n, const char *out, int torn)
{
	return zemu_replay_lose(image, log_path, n, out, torn, UINT32_MAX, 0);
}

int zemu_replay_lose(const char *image, const char *log_path, long n, const char *out,
		     int torn, uint32_t lose_zone, long lose_from)
{
	struct emu_lhdr lh;
	long count;
	int fd, ret;

	if (n < 0)
		return -EINVAL;
	count = zemu_log_count(log_path);
	if (count < 0)
		return (int)count;
	if (n > count) {
		zlog_err("%s: write log has only %ld operations, %ld asked for", log_path, count, n);
		return -EINVAL;
	}
	fd = log_open_checked(log_path, &lh);
	if (fd < 0)
		return fd;
	ret = replay_check(image, log_path, &lh, out);
	if (!ret) {
		/* from here on OUT is ours: a half-built one is removed, never left behind */
		ret = replay_base(log_path, &lh, out);
		if (!ret)
			ret = replay_run(fd, out, n, torn, lose_zone, lose_from);
		if (ret)
			unlink(out);
	}
	close(fd);
	return ret;
}
