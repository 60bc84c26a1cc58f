/*
 * zdev_emu_journal.c - the durability model: the volatile-write journal (one record per unflushed
 * write) with the undo area that keeps the old data of conventional-zone writes, writes to
 * both kinds of zone in the order that survives a kill, flush, rebuilding the state from the
 * journal at open, and the power cut that drops unflushed writes.
 * May call: the image, the zone rules, the write log and faults.
 */
#include "zdev_emu_impl.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * The volatile-write journal.
 */

static uint32_t jrec_crc(struct emu_jrec *r)
{
	uint32_t saved = r->crc, crc;

	r->crc = 0;
	crc = emu_crc32c(0, r, sizeof(*r));
	r->crc = saved;
	return crc;
}

/* A copy of the journal block holding SLOT, taken under lock with its ticket. */
struct jblk {
	uint8_t data[EMU_BLK] __attribute__((aligned(EMU_BLK)));
	uint32_t blk;
	uint64_t ticket;
};

static void jrnl_copy(struct emu_dev *d, uint32_t slot, struct jblk *c)
{
	c->blk = slot / (uint32_t)JREC_PER_BLK;
	memcpy(c->data, (uint8_t *)d->jrnl + (uint64_t)c->blk * EMU_BLK, EMU_BLK);
	c->ticket = ++d->jticket;
}

/* Write copy C once every earlier copy is written. Callable with or without lock: the turn
 * waits only on writers that hold no lock but jlock. A failed write fails the device for
 * good, since the records behind it can no longer reach the image in order. */
static int jrnl_write_copy(struct emu_dev *d, const struct jblk *c)
{
	int ret = -EIO;

	pthread_mutex_lock(&d->jlock);
	while (d->jdone + 1 != c->ticket)
		pthread_cond_wait(&d->jturn, &d->jlock);
	if (!__atomic_load_n(&d->jfailed, __ATOMIC_ACQUIRE))
		ret = emu_full_pwrite(d->jfd, c->data, EMU_BLK,
				      d->hdr->jrnl_off + (uint64_t)c->blk * EMU_BLK);
	if (ret)
		__atomic_store_n(&d->jfailed, 1, __ATOMIC_RELEASE);
	d->jdone = c->ticket;
	pthread_cond_broadcast(&d->jturn);
	pthread_mutex_unlock(&d->jlock);
	return ret;
}

int emu_jrnl_failed(struct emu_dev *d)
{
	return __atomic_load_n(&d->jfailed, __ATOMIC_ACQUIRE) ? -EIO : 0;
}

/* Record V at the next slot, in memory only (under lock), stamped with the generation. */
static void jrec_put(struct emu_dev *d, const struct emu_jrec *v)
{
	struct emu_jrec *r = &d->jrnl[d->jcount];

	*r = *v;
	r->gen = d->hdr->generation;
	r->crc = jrec_crc(r);
}

/* The record of a write at the next slot. DCRC: the checksum of the data written (sequential
 * zone) or of the old data saved at UNDO (conventional). */
static void jrec_fill(struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len, uint64_t undo,
		      uint32_t dcrc)
{
	struct emu_jrec v = {.off = off, .len = len, .undo_foff = undo, .zone = z,
			     .epoch = d->zones[z].epoch, .type = JREC_WRITE, .dcrc = dcrc};

	jrec_put(d, &v);
}

/* A flush marker at the next slot: the records before slot UPTO are flushed, those before
 * PROVEN on the host's disk for certain. */
static void jrec_fill_marker(struct emu_dev *d, uint32_t upto, uint32_t proven)
{
	struct emu_jrec v = {.off = upto, .len = proven, .zone = JREC_NO_ZONE, .type = JREC_FLUSH};

	jrec_put(d, &v);
}

/* One record, one block write, under lock: a killed process leaves the record either whole
 * or absent. */
static int jrnl_append(struct emu_dev *d, uint32_t z, uint64_t off, uint64_t len, uint64_t undo,
		       uint32_t dcrc)
{
	struct jblk c;
	int ret;

	jrec_fill(d, z, off, len, undo, dcrc);
	jrnl_copy(d, d->jcount, &c);
	ret = jrnl_write_copy(d, &c);
	if (ret) {
		memset(&d->jrnl[d->jcount], 0, sizeof(struct emu_jrec));
		return ret;
	}
	d->jcount++;
	return 0;
}

static void jrnl_clear(struct emu_dev *d)
{
	memset(d->jrnl, 0, (size_t)d->jcount * sizeof(struct emu_jrec));
	d->jcount = 0;
	d->jflushed = 0;
	d->jproven = 0;
	d->undo_used = 0;
	d->jclears++;
}

/* The records before slot UPTO are flushed: their zones' table entries move up, in memory
 * (the image's flush markers say the same until a checkpoint writes the table). */
static void jrnl_mark_flushed(struct emu_dev *d, uint32_t upto)
{
	for (uint32_t i = d->jflushed; i < upto && i < d->jcount; i++) {
		const struct emu_jrec *r = &d->jrnl[i];

		if (r->type != JREC_FLUSH && !is_conv(d, r->zone))
			emu_table_advance(d, r->zone, r->epoch,
					  r->off + r->len - zstart(d, r->zone));
	}
	if (upto > d->jflushed)
		d->jflushed = upto;
}

/* Per zone, where the records from slot FROM on start (UINT64_MAX: none of the zone's current
 * epoch): what a data sync taken before they were made cannot have covered. */
static uint64_t *late_starts(struct emu_dev *d, uint32_t from)
{
	uint64_t *at = malloc((size_t)d->hdr->nr_zones * sizeof(*at));

	if (!at)
		return NULL;
	memset(at, 0xff, (size_t)d->hdr->nr_zones * sizeof(*at));
	for (uint32_t i = from; i < d->jcount; i++) {
		const struct emu_jrec *r = &d->jrnl[i];
		uint64_t rel = r->off - zstart(d, r->zone);

		if (r->type != JREC_FLUSH && !is_conv(d, r->zone) && r->epoch == d->zones[r->zone].epoch && rel < at[r->zone])
			at[r->zone] = rel;
	}
	return at;
}

/* After a data sync that covered the journal's records before slot FROM (all of them: FROM ==
 * jcount): the zone table written as far as it covered, then, if it covered the whole
 * journal, synced, and the generation bump (one block) that voids it. Records from FROM on
 * stay, and the table entries before them say the rest is durable. The table's sync comes
 * before the bump: the host may write its blocks in any order, and a bump that reached its
 * disk before the table would void records the image then holds nowhere else. */
static int flush_commit(struct emu_dev *d, uint32_t from)
{
	uint64_t *late = from < d->jcount ? late_starts(d, from) : NULL;
	uint8_t *dirty = calloc(d->table_blocks, 1);
	int ret = 0, changed = 0;

	if (!dirty || (from < d->jcount && !late)) {
		free(dirty);
		free(late);
		return -ENOMEM;
	}
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		if (late && late[z] != UINT64_MAX ? emu_table_cover(d, z, late[z]) :
						    emu_table_update(d, z)) {
			dirty[z / ZENT_PER_BLK] = 1;
			changed = 1;
		}
	}
	for (uint32_t b = 0; !ret && b < d->table_blocks; b++) {
		changed |= d->tdirty[b]; /* moved up by flush markers since the last checkpoint */
		if (dirty[b] || d->tdirty[b])
			ret = emu_table_write_block(d, b);
	}
	free(dirty);
	free(late);
	if (ret || from < d->jcount || (!changed && !d->jcount)) {
		if (!ret && from > d->jflushed) /* durable by the table, whatever markers say */
			d->jflushed = from;
		return ret;
	}
	if (changed)
		ret = emu_sync(d);
	if (ret)
		return ret;
	d->hdr->generation++;
	ret = emu_hdr_write(d);
	if (ret) {
		d->hdr->generation--;
		return ret;
	}
	jrnl_clear(d);
	return 0;
}

/* A checkpoint: everything in the cache becomes durable, data synced, zone table written and
 * synced, then the generation bump voids the journal, then synced again. The host's flush costs one
 * fdatasync instead (emu_flush_host); this is for a full journal, a power cut's result, a
 * write log's base and the end of a replay. */
int emu_flush_locked(struct emu_dev *d)
{
	int ret = emu_sync(d);

	if (!ret)
		ret = flush_commit(d, d->jcount);
	if (!ret)
		ret = emu_sync(d);
	return ret;
}

static int conv_records_before(const struct emu_dev *d, uint32_t n)
{
	for (uint32_t i = d->jflushed; i < n; i++)
		if (d->jrnl[i].type != JREC_FLUSH && is_conv(d, d->jrnl[i].zone))
			return 1;
	return 0;
}

/* The device's own destaging of a full journal: a checkpoint with the lock dropped across both
 * fdatasyncs, so that reads and writes go on while the host file system syncs. The records made during the first sync may have
 * missed it: the table stops short of them and they stay in the journal, still unflushed,
 * for a later flush (or the journal's own when it fills). A journal voided meanwhile (a
 * flush or power cut of another path) leaves no record the sync surely covered. Covered
 * conventional-zone records cannot stay behind (a power cut would undo them), so then the
 * whole flush runs under the lock. With a write log it always does: the log lists
 * operations in the order they reach the image. One host flush at a time. */
static int destage_host(struct emu_dev *d)
{
	uint64_t clears;
	uint32_t from;
	int ret;

	if (d->log_fd >= 0 || d->ftl)
		return emu_flush_locked(d);
	while (d->flushing)
		pthread_cond_wait(&d->idle, &d->lock);
	d->flushing = 1;
	from = d->jcount;
	clears = d->jclears;
	pthread_mutex_unlock(&d->lock);
	ret = emu_sync(d);
	pthread_mutex_lock(&d->lock);
	if (d->jclears != clears)
		from = 0;
	if (!ret)
		ret = emu_jrnl_failed(d); /* it may have failed during the sync */
	if (!ret && from < d->jcount && conv_records_before(d, from)) {
		ret = emu_flush_locked(d);
	} else if (!ret) {
		ret = flush_commit(d, from);
		if (!ret) {
			pthread_mutex_unlock(&d->lock);
			ret = emu_sync(d);
			pthread_mutex_lock(&d->lock);
		}
	}
	d->flushing = 0;
	pthread_cond_broadcast(&d->idle);
	return ret;
}

/* A version 1 or 2 image becomes version 3 or 4 before its first new record: its journal's
 * unchecked records stay valid, and the records and markers written from now on are the new
 * kind, which an older emulator must not read as its own. Not at open: an open that writes
 * nothing (a refused mount) leaves the image as it was. */
static int jrnl_upgrade(struct emu_dev *d)
{
	uint32_t *v = &d->hdr->version;

	if (*v != EMU_FMT_VERSION_V1 && *v != EMU_FMT_VERSION_FTL_V2)
		return 0;
	*v = *v == EMU_FMT_VERSION_V1 ? EMU_FMT_VERSION : EMU_FMT_VERSION_FTL;
	return emu_hdr_write(d);
}

/* Are there writes after the last flush's marker? */
static int jrnl_unflushed_writes(const struct emu_dev *d)
{
	for (uint32_t i = d->jflushed; i < d->jcount; i++)
		if (d->jrnl[i].type != JREC_FLUSH)
			return 1;
	return 0;
}

/* The host's flush: one fdatasync. A flush marker (the records before it are flushed) goes
 * into the journal behind the records of every write completed so far, then one fdatasync
 * makes the data, the records and the marker durable together. A host crash during that
 * sync may keep the marker and lose some data under it: each record carries its data's
 * checksum, and the open ends the journal at the first record whose data fails it, unless a
 * later marker (made after this sync returned) proves it. The lock is dropped across the
 * marker's block write and the sync, as in a destage, except with a write log or the FTL
 * mode; writes made meanwhile are recorded after the marker and stay unflushed. A journal
 * with no slot left for the marker is destaged instead. One host flush at a time. */
int emu_flush_host(struct emu_dev *d)
{
	int unlocked = d->log_fd < 0 && !d->ftl, ret;
	uint32_t upto, proven;
	uint64_t clears;
	struct jblk c;

	while (d->flushing)
		pthread_cond_wait(&d->idle, &d->lock);
	if (!jrnl_unflushed_writes(d))
		return 0; /* every completed write is flushed already */
	if (d->jcount + d->jreserved + 1 > d->hdr->jslots)
		return destage_host(d);
	ret = jrnl_upgrade(d);
	if (ret)
		return ret;
	upto = d->jcount;
	proven = d->jflushed;
	jrec_fill_marker(d, upto, proven);
	jrnl_copy(d, d->jcount++, &c);
	d->flushing = 1;
	clears = d->jclears;
	if (unlocked)
		pthread_mutex_unlock(&d->lock);
	ret = jrnl_write_copy(d, &c);
	if (!ret)
		ret = emu_sync(d);
	if (unlocked)
		pthread_mutex_lock(&d->lock);
	if (!ret)
		ret = emu_jrnl_failed(d);
	d->jmarked = 1;
	if (!ret && d->jclears == clears) { /* else a checkpoint made it all durable */
		jrnl_mark_flushed(d, upto);
		if (proven > d->jproven)
			d->jproven = proven;
	}
	d->flushing = 0;
	pthread_cond_broadcast(&d->idle);
	return ret;
}

/* Closing, only after a flush of this open (an open that wrote nothing leaves the image as it
 * was): with nothing unflushed, a checkpoint; else a marker that proves the last flush's
 * records, if none does yet, so that the next open need not read their data back to check
 * it (not synced: without it the open checks). */
void emu_jrnl_close(struct emu_dev *d)
{
	pthread_mutex_lock(&d->lock);
	/* Nothing unflushed: a checkpoint writes the zone table and voids the journal (which
	 * emu_free then punches out), so the image closed is a function of what its zones hold,
	 * not of when the journal last filled: mkfs.zlfs --timestamp makes the same file twice.
	 * Flushed writes are durable either way; unflushed ones stay in the journal, volatile. */
	if (d->jmarked && !emu_jrnl_failed(d) && !d->jreserved && !jrnl_unflushed_writes(d)) {
		(void)emu_flush_locked(d); /* a failure leaves the journal as the next open reads it */
	} else if (d->jmarked && d->jflushed > d->jproven && !emu_jrnl_failed(d) &&
	    d->jcount + d->jreserved < d->hdr->jslots) {
		struct jblk c;

		jrec_fill_marker(d, d->jflushed, d->jflushed);
		jrnl_copy(d, d->jcount++, &c);
		d->jproven = d->jflushed;
		(void)jrnl_write_copy(d, &c); /* a failure only costs the next open some reads */
	}
	pthread_mutex_unlock(&d->lock);
}

/* Room for one more journal record (and UNDO_LEN of old data), counting the slots that
 * transfers under way have reserved (emu_write_seq_unlocked), whichever path writes. May drop
 * the lock. A flush that leaves records made during its sync frees nothing, but no new write
 * starts meanwhile, so once the transfers under way have ended one clears the journal. */
static int jrnl_make_room(struct emu_dev *d, uint64_t undo_len)
{
	int ret = jrnl_upgrade(d);

	while (!ret && (d->jcount + d->jreserved >= d->hdr->jslots ||
			d->undo_used + undo_len > d->hdr->undo_len)) {
		if (d->jcount) /* a full cache destages: the device flushes on its own, with the
				* lock dropped across its syncs as a host flush (the caller has
				* started nothing yet, and checks its zone again) */
			ret = destage_host(d);
		else if (d->jreserved) /* only reserved slots are left: those transfers end first */
			pthread_cond_wait(&d->idle, &d->lock);
		else
			break;
	}
	return ret;
}

/* Conventional zones: any offset, but the old data is saved first so a power cut can bring
 * it back. A write larger than the whole undo area is written through and made durable. */
int emu_write_conv(struct emu_dev *d, const void *buf, size_t len, uint64_t off)
{
	uint64_t foff = d->hdr->data_off + off, ulen = round_up(len, EMU_BLK), undo, lpos;
	uint32_t z = (uint32_t)(off / d->hdr->zone_size);
	void *old;
	int ret;

	if ((off + len - 1) / d->hdr->zone_size >= d->hdr->nr_conv)
		return -EIO; /* runs into a sequential zone, not at its write pointer */
	ret = emu_fault_fire(d, ZEMU_FAULT_EIO_WRITE, off, len);
	if (ret)
		return ret;
	if (ulen > d->hdr->undo_len) {
		ret = emu_flush_locked(d);
		if (!ret)
			ret = emu_log_append_at(d, LOG_WRITE, z, off, len, buf, &lpos);
		if (!ret)
			ret = emu_img_write(d, buf, len, foff);
		if (!ret)
			ret = emu_sync(d);
		return ret ? emu_log_abort(d, lpos, ret) : 0;
	}
	ret = jrnl_make_room(d, ulen);
	if (!ret)
		ret = emu_log_append_at(d, LOG_WRITE, z, off, len, buf, &lpos);
	if (ret)
		return ret;
	old = emu_blk_alloc(len);
	if (!old)
		return emu_log_abort(d, lpos, -ENOMEM);
	undo = d->hdr->undo_off + d->undo_used;
	ret = emu_img_read(d, old, len, foff);
	if (!ret)
		ret = emu_img_write(d, old, len, undo);
	if (!ret)
		ret = jrnl_append(d, z, off, len, undo, emu_crc32c(0, old, len));
	free(old);
	if (ret)
		return emu_log_abort(d, lpos, ret);
	d->undo_used += ulen;
	ret = emu_img_write(d, buf, len, foff);
	return ret ? emu_log_abort(d, lpos, ret) : 0;
}

/* Data first, record second: a process killed in between loses only this unfinished write. */
int emu_write_seq(struct emu_dev *d, uint32_t z, const void *buf, size_t len, uint64_t off)
{
	struct emu_zone *zn = &d->zones[z];
	uint64_t lpos;
	int ret;

	ret = emu_seq_write_check(d, z, off, len);
	if (!ret)
		ret = emu_fault_fire(d, ZEMU_FAULT_EIO_WRITE, off, len);
	if (!ret)
		ret = jrnl_make_room(d, 0);
	if (!ret)
		ret = emu_log_append_at(d, LOG_WRITE, z, off, len, buf, &lpos);
	if (ret)
		return ret;
	if (!zn->wp)
		emu_img_prealloc(d, z);
	ret = emu_img_write(d, buf, len, d->hdr->data_off + off);
	if (!ret)
		ret = jrnl_append(d, z, off, len, 0, emu_crc32c(0, buf, len));
	if (ret)
		return emu_log_abort(d, lpos, ret);
	zn->wp += len;
	if (zn->wp == zcap(d, z))
		emu_set_cond(d, z, ZDEV_COND_FULL);
	return 0;
}

/* A transfer to zone Z (UINT32_MAX: to any zone) under way ends first: zone management and
 * power cuts see each write either not started or recorded. Called with the lock held. */
void emu_wait_idle(struct emu_dev *d, uint32_t z)
{
	while (z == UINT32_MAX ? d->inflight : d->zones[z].busy)
		pthread_cond_wait(&d->idle, &d->lock);
}

/* As emu_write_seq, but the data transfer runs with the lock dropped, so that writes to other
 * zones and reads go on beside it, as a device serves several queues. One transfer per zone at
 * a time keeps each zone's journal records in write-pointer order; a journal slot is reserved
 * before the transfer. The N pieces of IOV (LEN bytes in all) are one write: one transfer,
 * one record. Called with the lock held; returns with it held. */
int emu_write_seq_unlocked(struct emu_dev *d, uint32_t z, const struct iovec *iov, int n,
			   size_t len, uint64_t off)
{
	struct jblk c;
	struct emu_zone *zn = &d->zones[z];
	int ret = 0, first;
	uint32_t dcrc = 0;

	do { /* making room may wait with the lock dropped, and the zone be held meanwhile */
		emu_wait_idle(d, z);
		ret = emu_jrnl_failed(d); /* it may have failed while this write waited */
		if (!ret)
			ret = jrnl_make_room(d, 0);
	} while (!ret && zn->busy);
	if (!ret)
		ret = emu_seq_write_check(d, z, off, len);
	if (!ret)
		ret = emu_fault_fire(d, ZEMU_FAULT_EIO_WRITE, off, len);
	if (ret)
		return ret;
	first = !zn->wp;
	zn->busy = 1;
	d->inflight++;
	d->jreserved++;
	pthread_mutex_unlock(&d->lock);
	if (first)
		emu_img_prealloc(d, z);
	ret = emu_img_writev(d, iov, n, d->hdr->data_off + off);
	if (!ret)
		dcrc = emu_crc32c_iov(iov, n);
	pthread_mutex_lock(&d->lock);
	zn->busy = 0;
	d->inflight--;
	d->jreserved--;
	pthread_cond_broadcast(&d->idle);
	if (!ret && (zn->cond == ZDEV_COND_RDONLY || zn->cond == ZDEV_COND_OFFLINE))
		ret = -EIO; /* the zone failed during the transfer (an injected fault) */
	if (ret)
		return ret;
	/* The write counts in memory at once (a flush from now on covers it) and completes
	 * when its record is in the image, written with the lock dropped. */
	jrec_fill(d, z, off, len, 0, dcrc);
	jrnl_copy(d, d->jcount++, &c);
	zn->wp += len;
	if (zn->wp == zcap(d, z))
		emu_set_cond(d, z, ZDEV_COND_FULL);
	for (uint64_t rel = off - zstart(d, z); n; rel += iov->iov_len, iov++, n--)
		emu_tm_write(d, z, iov->iov_base, iov->iov_len, rel); /* in step with the wp */
	pthread_mutex_unlock(&d->lock);
	ret = jrnl_write_copy(d, &c);
	pthread_mutex_lock(&d->lock);
	return ret;
}

/* Does the image hold what record R's checksum says: the data written (sequential zone), or
 * the old data saved in the undo area (conventional)? 1 yes, 0 no, or a negative errno. */
static int jrec_data_ok(struct emu_dev *d, const struct emu_jrec *r)
{
	uint64_t foff = r->undo_foff ? r->undo_foff : d->hdr->data_off + r->off, n;
	size_t chunk = (size_t)min_u64(r->len, 1u << 20);
	uint8_t *buf = emu_blk_alloc(chunk);
	uint32_t crc = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t done = 0; !ret && done < r->len; done += n) {
		n = min_u64(chunk, r->len - done);
		ret = emu_img_read(d, buf, n, foff + done);
		crc = emu_crc32c(crc, buf, n);
	}
	free(buf);
	return ret ? ret : crc == r->dcrc;
}

static int jrec_check_range(const struct emu_dev *d, const struct emu_jrec *r, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	uint64_t cap = (uint64_t)h->nr_zones * h->zone_size;

	if (r->zone >= h->nr_zones || r->off > cap || r->len > cap - r->off ||
	    r->off / h->zone_size != r->zone)
		return emu_bad_image(path, -EUCLEAN, "journal record out of range");
	if (r->undo_foff &&
	    (r->undo_foff < h->undo_off ||
	     r->undo_foff + round_up(r->len, EMU_BLK) > h->undo_off + h->undo_len))
		return emu_bad_image(path, -EUCLEAN, "journal undo record out of range");
	return 0;
}

/* Replay record R onto the zone state; CHECKED: its data is not proven by a marker, so it is
 * read back and summed. 1 replayed (or void), 0 its data is not in the image (the host
 * crashed before it got there: the journal ends here), or a negative errno. */
static int jrec_replay(struct emu_dev *d, const struct emu_jrec *r, int checked, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	struct emu_zone *zn = &d->zones[r->zone];
	uint64_t rel;
	int ret;

	if (r->undo_foff) { /* a conventional write: its old data must be there to undo it */
		ret = checked ? jrec_data_ok(d, r) : 1;
		if (ret == 1)
			d->undo_used = r->undo_foff + round_up(r->len, EMU_BLK) - h->undo_off;
		return ret;
	}
	if (r->zone < h->nr_conv || r->epoch != zn->epoch || zn->cond == ZDEV_COND_FULL ||
	    zn->cond == ZDEV_COND_RDONLY || zn->cond == ZDEV_COND_OFFLINE)
		return 1; /* void, or already durable in the zone table */
	rel = r->off - zstart(d, r->zone);
	if (rel + r->len <= zn->wp)
		return 1;
	if (rel != zn->wp || rel + r->len > h->zone_capacity)
		return emu_bad_image(path, -EUCLEAN, "journal record not at the write pointer");
	ret = checked ? jrec_data_ok(d, r) : 1;
	if (ret == 1)
		zn->wp += r->len;
	return ret;
}

/* The valid prefix of the journal as read: records of the current generation with their CRC,
 * up to the first that is not. Returns its length and the slots its markers prove. */
static int jrnl_prefix(struct emu_dev *d, const char *path, uint32_t *end, uint32_t *proven)
{
	const struct emu_hdr *h = d->hdr;
	uint32_t i;

	*proven = 0;
	for (i = 0; i < h->jslots; i++) {
		struct emu_jrec *r = &d->jrnl[i];

		if (r->gen != h->generation || r->crc != jrec_crc(r))
			break;
		if (r->type > JREC_FLUSH)
			return emu_bad_image(path, -EUCLEAN, "unknown journal record type");
		if (r->type == JREC_FLUSH && (r->off > i || r->len > r->off))
			return emu_bad_image(path, -EUCLEAN, "flush marker out of range");
		if (r->type == JREC_FLUSH && r->len > *proven)
			*proven = (uint32_t)r->len;
	}
	*end = i;
	return 0;
}

/* Records of the current generation past the journal's end (a host crash wrote a later
 * journal block but not an earlier one, or the end was cut at a record whose data is
 * missing) are cleared in the image, so that records written at those slots later can
 * never join up with them. Only after a host crash. */
static int jrnl_clear_stale(struct emu_dev *d, uint32_t end)
{
	const struct emu_hdr *h = d->hdr;
	int ret = 0, found = 0, wrote = 0;

	for (uint32_t i = end; i < h->jslots; i++) {
		struct emu_jrec *r = &d->jrnl[i];

		found |= r->gen == h->generation && r->crc == jrec_crc(r);
		memset(r, 0, sizeof(*r));
		if (found && ((i + 1) % JREC_PER_BLK == 0 || i + 1 == h->jslots)) {
			uint32_t b = i / (uint32_t)JREC_PER_BLK;

			if (!d->zd.readonly && !ret)
				ret = emu_full_pwrite(d->jfd, (uint8_t *)d->jrnl + (uint64_t)b * EMU_BLK,
						      EMU_BLK, h->jrnl_off + (uint64_t)b * EMU_BLK);
			wrote = 1;
			found = 0;
		}
	}
	if (!ret && !d->zd.readonly && wrote)
		ret = emu_sync(d);
	return ret;
}

/* Replay the journal's current-generation prefix onto the durable zone state: the records
 * before the last marker are flushed, the rest are writes still in the cache. A record that
 * no marker proves has its data summed; the first whose data is not in the image ends the
 * journal (what the host lost in a crash is what the device lost). */
int emu_jrnl_load(struct emu_dev *d, const char *path)
{
	const struct emu_hdr *h = d->hdr;
	uint32_t end = 0, proven = 0, upto = 0;
	int ret;

	ret = emu_full_pread(d->jfd, d->jrnl, (size_t)h->jslots * sizeof(struct emu_jrec), h->jrnl_off);
	if (!ret)
		ret = jrnl_prefix(d, path, &end, &proven);
	for (d->jcount = 0; !ret && d->jcount < end; d->jcount++) {
		const struct emu_jrec *r = &d->jrnl[d->jcount];

		if (r->type == JREC_FLUSH) {
			upto = (uint32_t)r->off > upto ? (uint32_t)r->off : upto;
			continue;
		}
		ret = jrec_check_range(d, r, path);
		if (!ret)
			ret = jrec_replay(d, r, r->type == JREC_WRITE && d->jcount >= proven, path);
		if (ret == 1)
			ret = 0;
		else if (!ret)
			break;
	}
	if (ret)
		return ret;
	d->jproven = proven < d->jcount ? proven : d->jcount;
	d->jflushed = 0;
	jrnl_mark_flushed(d, upto);
	/* slots past the prefix are stale: forget them so block rewrites clear them */
	return jrnl_clear_stale(d, d->jcount);
}

/* ------------------------------------------------------------------------------------------
 * Power cut.
 */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Is the journal record at SLOT a write still in the cache (not voided, not already durable,
 * not a marker)? */
int emu_jrec_unflushed(const struct emu_dev *d, uint32_t slot)
{
	const struct emu_jrec *r = &d->jrnl[slot];
	const struct emu_zent *e;

	if (r->type == JREC_FLUSH || slot < d->jflushed)
		return 0;
	if (is_conv(d, r->zone))
		return 1;
	e = &d->table[r->zone];
	if (r->epoch != e->epoch || e->cond == ZDEV_COND_FULL || e->cond == ZDEV_COND_RDONLY ||
	    e->cond == ZDEV_COND_OFFLINE)
		return 0;
	return r->off + r->len - zstart(d, r->zone) > e->wp;
}

/* Bring back the old data under a dropped conventional write, from byte SKIP of it on. */
static int undo_conv(struct emu_dev *d, const struct emu_jrec *r, uint64_t skip)
{
	uint64_t n = r->len - skip;
	void *buf = emu_blk_alloc(n);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = emu_img_read(d, buf, n, r->undo_foff + skip);
	if (!ret)
		ret = emu_img_write(d, buf, n, d->hdr->data_off + r->off + skip);
	free(buf);
	return ret;
}

/* Leading part of a torn write: half its blocks (at least one), or with a seed a random
 * number of blocks in [1, blocks - 1]. */
uint64_t emu_torn_bytes(const struct emu_dev *d, uint64_t len, uint64_t *rng, int seeded)
{
	uint64_t lbs = d->hdr->lblock_size, blocks = len / lbs, keep;

	if (seeded && blocks > 1)
		keep = 1 + splitmix64(rng) % (blocks - 1);
	else
		keep = blocks / 2 ? blocks / 2 : 1;
	return keep * lbs;
}

/* Drop the unflushed writes LIST[k..n) (the torn one partially), newest first so that
 * conventional blocks written twice come back to their oldest dropped content. */
static int powercut_apply(struct emu_dev *d, const uint32_t *list, long n, long k,
			  struct zemu_powercut_result *res)
{
	int ret = 0;

	for (long i = n - 1; !ret && i >= k; i--) {
		const struct emu_jrec *r = &d->jrnl[list[i]];
		uint64_t keep = (i == k && res->torn) ? res->torn_bytes : 0;

		if (is_conv(d, r->zone))
			ret = undo_conv(d, r, keep);
	}
	if (ret)
		return ret;
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint8_t c = d->table[z].cond;
		if (c == ZDEV_COND_EMPTY || c == ZDEV_COND_CLOSED)
			d->zones[z].wp = d->table[z].wp;
	}
	for (long i = 0; i < k + res->torn && i < n; i++) {
		const struct emu_jrec *r = &d->jrnl[list[i]];
		uint64_t len = i < k ? r->len : res->torn_bytes;

		if (!is_conv(d, r->zone))
			d->zones[r->zone].wp = r->off + len - zstart(d, r->zone);
	}
	for (uint32_t z = d->hdr->nr_conv; z < d->hdr->nr_zones; z++) {
		uint8_t c = d->table[z].cond;
		if (c == ZDEV_COND_EMPTY || c == ZDEV_COND_CLOSED)
			emu_set_cond(d, z, !d->zones[z].wp ? ZDEV_COND_EMPTY :
				 d->zones[z].wp == d->hdr->zone_capacity ? ZDEV_COND_FULL :
				 ZDEV_COND_CLOSED);
	}
	emu_power_cycle_zones(d);
	/* the surviving state is the new durable state */
	return emu_flush_locked(d);
}

static int powercut_locked(struct emu_dev *d, long keep, uint64_t seed, int torn,
			   struct zemu_powercut_result *res)
{
	uint32_t *list = malloc(((size_t)d->jcount + 1) * sizeof(*list));
	uint64_t rng = seed;
	long n = 0, k;
	int ret;

	if (!list)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->jcount; i++)
		if (emu_jrec_unflushed(d, i))
			list[n++] = i;
	if (seed)
		k = (long)(splitmix64(&rng) % (uint64_t)(n + 1));
	else
		k = keep < 0 ? 0 : keep > n ? n : keep;
	memset(res, 0, sizeof(*res));
	res->unflushed = n;
	res->kept = k;
	res->dropped = n - k;
	if (torn && k < n) {
		res->torn = 1;
		res->torn_len = d->jrnl[list[k]].len;
		res->torn_bytes = emu_torn_bytes(d, res->torn_len, &rng, seed != 0);
	}
	ret = powercut_apply(d, list, n, k, res);
	free(list);
	if (!ret)
		ret = emu_log_append(d, LOG_POWERCUT, 0, 0, 0, NULL);
	return ret;
}

int zemu_powercut_dev_ex(struct zdev *dev, long keep, uint64_t seed, int torn,
			 struct zemu_powercut_result *res)
{
	struct zemu_powercut_result tmp;
	struct emu_dev *d;
	int ret;

	if (!zdev_is_emu(dev))
		return -EINVAL;
	if (dev->readonly)
		return -EROFS;
	d = to_emu(dev);
	pthread_mutex_lock(&d->lock);
	while (d->flushing) /* a flush under way completes before the power goes */
		pthread_cond_wait(&d->idle, &d->lock);
	emu_wait_idle(d, UINT32_MAX);
	ret = powercut_locked(d, keep, seed, torn, res ? res : &tmp);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int zemu_powercut_dev(struct zdev *dev, long keep, uint64_t seed, int torn)
{
	struct zemu_powercut_result res;
	int ret = zemu_powercut_dev_ex(dev, keep, seed, torn, &res);

	return ret ? ret : (int)res.kept;
}

int zemu_powercut_ex(const char *path, long keep, uint64_t seed, int torn,
		     struct zemu_powercut_result *res)
{
	static const struct zdev_open_opts opts;
	struct emu_dev *d;
	int ret;

	/* opened with the image's write log, if any, so the log records the power cut */
	ret = emu_open_internal(path, &opts, 0, &d);
	if (ret == -EBUSY)
		zlog_err("%s is in use (mounted or open elsewhere)", path);
	if (ret)
		return ret;
	ret = zemu_powercut_dev_ex(&d->zd, keep, seed, torn, res);
	emu_free(d);
	return ret;
}

int zemu_powercut(const char *path, long keep, uint64_t seed, int torn)
{
	struct zemu_powercut_result res;
	int ret = zemu_powercut_ex(path, keep, seed, torn, &res);

	return ret ? ret : (int)res.kept;
}
