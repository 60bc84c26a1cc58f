/*
 * zdev_emu_zones.c - the host-managed zone state machine: conditions and their counts, the open
 * and active resources exactly as null_blk checks them, power-on closing of open zones,
 * zone reports, the checks a read or a sequential write must pass, and zone management
 * (open, close, finish, reset), each logged and, for finish and reset, made durable.
 * May call: the image (zone persistence), the write log, faults and the timing model.
 *
 * Error codes mirror what Linux returns for the same mistake on a host-managed device
 * (drivers/block/null_blk/zoned.c, block/blk-core.c): the table is in docs/emulator.md.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Zone condition accounting and the open/active resource rules (ZBC/ZNS, as null_blk).
 */

static uint32_t *cond_counter(struct emu_dev *d, uint8_t cond)
{
	switch (cond) {
	case ZDEV_COND_IMP_OPEN: return &d->nr_imp;
	case ZDEV_COND_EXP_OPEN: return &d->nr_exp;
	case ZDEV_COND_CLOSED: return &d->nr_closed;
	default: return NULL;
	}
}

void emu_set_cond(struct emu_dev *d, uint32_t z, uint8_t cond)
{
	uint32_t *c = cond_counter(d, d->zones[z].cond);

	if (c)
		(*c)--;
	d->zones[z].cond = cond;
	c = cond_counter(d, cond);
	if (c)
		(*c)++;
}

/* Closing an open zone: back to EMPTY when nothing was written, else CLOSED. */
static void close_zone(struct emu_dev *d, uint32_t z)
{
	emu_set_cond(d, z, d->zones[z].wp ? ZDEV_COND_CLOSED : ZDEV_COND_EMPTY);
}

static int res_check_active(const struct emu_dev *d)
{
	uint32_t max = d->hdr->max_active;

	if (!max || d->nr_imp + d->nr_exp + d->nr_closed < max)
		return 0;
	return -EOVERFLOW; /* BLK_STS_ZONE_ACTIVE_RESOURCE */
}

/* Close one implicitly open zone, round robin, to make room under the open limit. */
static void close_one_implicit(struct emu_dev *d)
{
	uint32_t nconv = d->hdr->nr_conv, nseq = d->hdr->nr_zones - nconv;

	for (uint32_t i = 0; i < nseq; i++) {
		uint32_t z = nconv + (d->imp_cursor + i) % nseq;
		if (d->zones[z].cond == ZDEV_COND_IMP_OPEN && !d->zones[z].busy) {
			close_zone(d, z);
			d->imp_cursor = (z - nconv + 1) % nseq;
			return;
		}
	}
}

/* As null_blk: at the open limit an implicitly open zone may be closed, but only while the
 * active limit leaves room; when every open zone is explicit the request fails. */
static int res_check_open(struct emu_dev *d)
{
	uint32_t max = d->hdr->max_open;

	if (!max || d->nr_imp + d->nr_exp < max)
		return 0;
	if (d->nr_imp && !res_check_active(d)) {
		close_one_implicit(d);
		return 0;
	}
	return -ETOOMANYREFS; /* BLK_STS_ZONE_OPEN_RESOURCE */
}

/* Resources for an EMPTY or CLOSED zone about to open (or be finished). */
static int res_acquire(struct emu_dev *d, uint32_t z)
{
	if (d->zones[z].cond == ZDEV_COND_EMPTY) {
		int ret = res_check_active(d);
		if (ret)
			return ret;
	}
	return res_check_open(d);
}

/* Power-on: every open zone comes back closed (or empty). */
void emu_power_cycle_zones(struct emu_dev *d)
{
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint8_t c = d->zones[z].cond;
		if (c == ZDEV_COND_IMP_OPEN || c == ZDEV_COND_EXP_OPEN)
			close_zone(d, z);
	}
}

/* ------------------------------------------------------------------------------------------
 * Reports, and the checks reads and sequential writes must pass.
 */

static uint64_t reported_wp(const struct emu_dev *d, uint32_t z)
{
	const struct emu_zone *zn = &d->zones[z];

	switch (zn->cond) {
	case ZDEV_COND_NOT_WP:
	case ZDEV_COND_FULL:
		/* as sd_zbc.c / nvme zns.c report it: the zone end */
		return zstart(d, z) + d->hdr->zone_size;
	case ZDEV_COND_RDONLY:
	case ZDEV_COND_OFFLINE:
		/* no valid write pointer: null_blk reports (sector_t)-1 */
		return UINT64_MAX;
	default:
		return zstart(d, z) + zn->wp;
	}
}

int emu_report(struct zdev *zd, uint32_t first, uint32_t count, struct zdev_zone *zones)
{
	struct emu_dev *d = to_emu(zd);

	pthread_mutex_lock(&d->lock);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t z = first + i;
		struct zdev_zone *o = &zones[i];

		o->start = zstart(d, z);
		o->len = d->hdr->zone_size;
		o->capacity = zcap(d, z);
		o->wp = reported_wp(d, z);
		o->type = is_conv(d, z) ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
		o->cond = d->zones[z].cond;
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* How many bytes of [off, off + len), inside zone Z, hold data: the rest reads as zeros. */
uint64_t emu_valid_len(const struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len)
{
	uint64_t end = zstart(d, z) + d->zones[z].wp;

	if (is_conv(d, z))
		return len;
	if (off >= end)
		return 0;
	return min_u64(len, end - off);
}

int emu_read_check(struct emu_dev *d, uint64_t off, uint64_t len)
{
	uint32_t zlast = (uint32_t)((off + len - 1) / d->hdr->zone_size);

	for (uint32_t z = (uint32_t)(off / d->hdr->zone_size); z <= zlast; z++)
		if (d->zones[z].cond == ZDEV_COND_OFFLINE)
			return -EIO;
	return emu_fault_fire(d, ZEMU_FAULT_EIO_READ, off, len);
}

/* The checks a host-managed device makes before a write to a sequential zone. */
int emu_seq_write_check(struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len)
{
	struct emu_zone *zn = &d->zones[z];

	if (zn->cond == ZDEV_COND_FULL || zn->cond == ZDEV_COND_RDONLY ||
	    zn->cond == ZDEV_COND_OFFLINE)
		return -EIO;
	if (off != zstart(d, z) + zn->wp)
		return -EIO;
	if (zn->wp + len > zcap(d, z))
		return -EIO;
	if (zn->cond == ZDEV_COND_EMPTY || zn->cond == ZDEV_COND_CLOSED) {
		int ret = res_acquire(d, z);
		if (ret)
			return ret;
		emu_set_cond(d, z, ZDEV_COND_IMP_OPEN);
	}
	return 0;
}

/* A zone about to open, or to be finished (which passes through open: null_blk checks the
 * resources there too): an EMPTY or CLOSED one takes its resources, an open one has them,
 * the others refuse. */
static int res_for_open(struct emu_dev *d, uint32_t z)
{
	switch (d->zones[z].cond) {
	case ZDEV_COND_EMPTY:
	case ZDEV_COND_CLOSED:
		return res_acquire(d, z);
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
		return 0;
	default:
		return -EIO;
	}
}

static int mgmt_open(struct emu_dev *d, uint32_t z)
{
	int ret = d->zones[z].cond == ZDEV_COND_EXP_OPEN ? 0 : res_for_open(d, z);

	if (!ret)
		emu_set_cond(d, z, ZDEV_COND_EXP_OPEN);
	return ret;
}

static int mgmt_close(struct emu_dev *d, uint32_t z)
{
	switch (d->zones[z].cond) {
	case ZDEV_COND_CLOSED:
		return 0;
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
		close_zone(d, z);
		return 0;
	default:
		return -EIO;
	}
}

/* Zone Z held while the lock is dropped around a slow host call: no write to it starts, and
 * zone management and power cuts wait (emu_wait_idle), while reads and the other zones' writes
 * go on. Called with the lock held; returns with it held. */
static void zone_hold(struct emu_dev *d, uint32_t z)
{
	d->zones[z].busy = 1;
	d->inflight++;
	pthread_mutex_unlock(&d->lock);
}

static void zone_release(struct emu_dev *d, uint32_t z)
{
	pthread_mutex_lock(&d->lock);
	d->zones[z].busy = 0;
	d->inflight--;
	pthread_cond_broadcast(&d->idle);
}

/* Zone Z's new state made durable, as emu_zone_persist (a finish's data first, then the table
 * block, then fdatasync), but with each fdatasync outside the lock, Z held. With a write log
 * all of it stays under the lock: the log lists operations in the order they reach the image,
 * and a kill may leave only the last one unfinished. */
static int zone_persist(struct emu_dev *d, uint32_t z, int data_first)
{
	int ret = 0;

	if (d->log_fd >= 0)
		return emu_zone_persist(d, z);
	if (data_first) {
		zone_hold(d, z);
		ret = emu_sync(d);
		zone_release(d, z);
	}
	if (!ret) {
		emu_table_update(d, z);
		ret = emu_table_write_block(d, (uint32_t)(z / ZENT_PER_BLK));
	}
	if (!ret) {
		zone_hold(d, z);
		ret = emu_sync(d);
		zone_release(d, z);
	}
	return ret;
}

/* A punch's piece. ext4 holds the image's inode lock exclusively for a whole punch, and every
 * direct read of the image, of any zone, waits behind it: one 64 MiB punch took 12-23 ms on
 * this project's machines and stalled every read meanwhile (the p99.9 of reads beside a
 * writer). In 4 MiB pieces each takes about 1.4 ms, for about the same total. */
#define EMU_PUNCH_PIECE (4ull << 20)

/* Give a reset zone's space back. Only an optimisation: reads past the write pointer return
 * zeros whatever the file holds, so a file system without hole punching is fine. Zone Z is
 * held meanwhile, so no write to it can land before the punch. */
static void zone_punch(struct emu_dev *d, uint32_t z)
{
	uint64_t start = d->hdr->data_off + zstart(d, z), size = d->hdr->zone_size, n;
	int held = d->log_fd < 0;

	if (held)
		zone_hold(d, z);
	for (uint64_t off = 0; off < size; off += n) {
		n = size - off < EMU_PUNCH_PIECE ? size - off : EMU_PUNCH_PIECE;
		if (fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)(start + off), (off_t)n))
			break; /* no hole punching here: the blocks stay, read as zeros anyway */
	}
	if (held)
		zone_release(d, z);
}

/* Log, then change zone Z to COND durably; a reset also empties it into a new epoch. */
static int mgmt_commit(struct emu_dev *d, uint32_t z, enum log_type type, uint8_t cond)
{
	uint64_t lpos;
	int ret;

	ret = emu_log_append_at(d, type, z, zstart(d, z), 0, NULL, &lpos);
	if (ret)
		return ret;
	emu_set_cond(d, z, cond);
	if (type == LOG_RESET) {
		d->zones[z].wp = 0;
		d->zones[z].epoch++;
	}
	ret = zone_persist(d, z, type == LOG_FINISH);
	return ret ? emu_log_abort(d, lpos, ret) : 0;
}

/* Finish is durable at once, together with the zone's data written so far. */
int emu_mgmt_finish(struct emu_dev *d, uint32_t z)
{
	int ret;

	if (d->zones[z].cond == ZDEV_COND_FULL)
		return 0;
	ret = res_for_open(d, z);
	if (ret)
		return ret;
	ret = mgmt_commit(d, z, LOG_FINISH, ZDEV_COND_FULL);
	if (!ret)
		emu_tm_finish(d, z, d->zones[z].wp);
	return ret;
}

/* Reset is durable at once; the new epoch voids the zone's records still in the journal. */
int emu_mgmt_reset(struct emu_dev *d, uint32_t z)
{
	uint64_t written = d->zones[z].wp;
	int ret;

	switch (d->zones[z].cond) {
	case ZDEV_COND_EMPTY:
		return 0;
	case ZDEV_COND_IMP_OPEN:
	case ZDEV_COND_EXP_OPEN:
	case ZDEV_COND_CLOSED:
	case ZDEV_COND_FULL:
		break;
	default:
		return -EIO;
	}
	ret = mgmt_commit(d, z, LOG_RESET, ZDEV_COND_EMPTY);
	if (ret)
		return ret;
	emu_tm_reset_zone(d, z, written);
	zone_punch(d, z);
	return 0;
}

/* Open and close change only volatile state, so they are logged after the fact. */
static int mgmt_locked(struct emu_dev *d, enum zdev_mgmt_op op, uint32_t z)
{
	uint8_t cond = d->zones[z].cond;
	int ret;

	/* null_blk: conventional, read-only and offline zones refuse management with EIO */
	if (is_conv(d, z) || cond == ZDEV_COND_RDONLY || cond == ZDEV_COND_OFFLINE)
		return -EIO;
	switch (op) {
	case ZDEV_MGMT_RESET: return emu_mgmt_reset(d, z);
	case ZDEV_MGMT_FINISH: return emu_mgmt_finish(d, z);
	case ZDEV_MGMT_OPEN: ret = mgmt_open(d, z); break;
	case ZDEV_MGMT_CLOSE: ret = mgmt_close(d, z); break;
	default: return -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	return emu_log_append(d, op == ZDEV_MGMT_OPEN ? LOG_OPEN : LOG_CLOSE, z, zstart(d, z), 0, NULL);
}

int emu_mgmt(struct zdev *zd, enum zdev_mgmt_op op, uint32_t zone)
{
	struct emu_dev *d = to_emu(zd);
	int ret;

	pthread_mutex_lock(&d->lock);
	emu_wait_idle(d, zone); /* zdev_zone_* checked the index */
	ret = mgmt_locked(d, op, zone);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Power-on conditions from the durable state: open zones come back closed. */
void emu_derive_conds(struct emu_dev *d)
{
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		struct emu_zone *zn = &d->zones[z];
		uint8_t c = zn->cond;

		if (c != ZDEV_COND_FULL && c != ZDEV_COND_RDONLY && c != ZDEV_COND_OFFLINE)
			c = !zn->wp ? ZDEV_COND_EMPTY :
			    zn->wp == d->hdr->zone_capacity ? ZDEV_COND_FULL : ZDEV_COND_CLOSED;
		zn->cond = ZDEV_COND_EMPTY;
		emu_set_cond(d, z, c);
	}
}
