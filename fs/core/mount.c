/*
 * mount.c - bringing a filesystem up from its device and taking it down again.
 *
 * Owns: the mount-time checks (format revision, features, exclusive open), reconciling each
 * log's position in the checkpoint with its zone's write pointer, and the clean unmount.
 * May call: checkpoint.c, orphan.c, segment.c, node.c, keys.c, super.h, zdev.h, log.h.
 *
 * Write pointers: a log continues at max(checkpoint position, device write pointer) - blocks
 * the device holds beyond the checkpoint are never overwritten and never rewound over; they
 * are simply not referenced. A write pointer *behind* the checkpoint means the device lost
 * acknowledged data: that is a device error, and a read-write mount is refused.
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Revision and features: refuse what this reader cannot use, force read-only what it may only
 * read, and say which revision or bits are the reason and what to do. */
static int mount_check_compat(struct zlfs_fs *fs, const char *path, int *readonly)
{
	char why[320];
	int c = zlfs_sb_compat(&fs->sb, zlfs_reader_revision(), why, sizeof(why));

	if (c < 0) {
		zlog_err("%s: %s", path, why);
		return -EPROTONOSUPPORT;
	}
	if (c > 0 && !*readonly) {
		zlog_warn("%s: %s: mounting read-only", path, why);
		*readonly = 1;
	}
	return 0;
}

static int mount_check_sb(struct zlfs_fs *fs, const char *path, int *readonly)
{
	int ret = zlfs_sb_read(fs->dev, &fs->sb, &fs->sb_zone);

	if (ret == -ENOENT)
		zlog_err("%s: no zlfs filesystem found (run mkfs.zlfs first)", path);
	else if (ret && ret != -EPROTONOSUPPORT)
		zlog_err("%s: superblock damaged: run fsck.zlfs", path);
	if (ret && ret != -EPROTONOSUPPORT)
		return ret;
	return mount_check_compat(fs, path, readonly); /* the newest record, usable or not */
}

/* compress= asks for compressed files, which only a filesystem with the COMPRESS feature may
 * hold: refused before anything is written, so the image stays as it was. Without the option
 * new files get what mkfs --compress chose (docs/compression.md). */
static int mount_check_compress(struct zlfs_fs *fs, const char *path,
				const struct zlfs_mount_opts *o)
{
	fs->compress_alg = o->compress_given ? o->compress_alg : fs->sb.compress_alg;
	fs->compress_level = o->compress_given ? o->compress_level : 0;
	snprintf(fs->compress_ext, sizeof(fs->compress_ext), "%s",
		 o->compress_ext ? o->compress_ext : "");
	snprintf(fs->nocompress_ext, sizeof(fs->nocompress_ext), "%s",
		 o->nocompress_ext ? o->nocompress_ext : "");
	if (fs->compress_ext[0] && !(fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_COMPRESS)) {
		zlog_err("%s: compress_extension= was given, but the filesystem has no COMPRESS "
			 "feature (mkfs.zlfs --compress makes one)", path);
		return -EINVAL;
	}
	if (!fs->compress_alg || (fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_COMPRESS))
		return 0;
	zlog_err("%s: compress=%s was asked for, but the filesystem has no COMPRESS feature "
		 "(mkfs.zlfs --compress makes one): mount without it, or with compress=none", path,
		 o->compress_alg == ZLFS_CLUSTER_LZ4 ? "lz4" : "zstd");
	return -EINVAL;
}

/* Forced read-only by the superblock: reopen the device read-only, so that nothing - recovery,
 * the unmount checkpoint - can write to a filesystem this code does not fully understand. */
static int mount_reopen_ro(struct zlfs_fs *fs, const char *path, const struct zlfs_mount_opts *o)
{
	struct zdev_open_opts d = {.readonly = 1, .direct = o->direct, .daemon = o->daemon};

	zdev_close(fs->dev);
	fs->dev = NULL;
	return zdev_open(path, &d, &fs->dev);
}

/* Summary entries past POS in the open segment describe nothing the checkpoint knows. */
static void log_trim_summary(struct zlfs_fs *fs, struct zlog_state *l, uint32_t cp_blk)
{
	uint32_t seg = fs->sb.seg_blocks, i;

	if (l->next_blk / seg != cp_blk / seg) {
		memset(&l->sum, 0, sizeof(l->sum));
		l->nr_entries = 0;
		return;
	}
	for (i = cp_blk % seg; i < seg - 1; i++) {
		l->sum.nid[i] = 0;
		l->sum.ofs[i] = 0;
	}
	if (l->nr_entries > cp_blk % seg)
		l->nr_entries = cp_blk % seg;
}

int log_open_entry(const struct zlfs_fs *fs, uint32_t addr, uint32_t *nid, uint16_t *ofs)
{
	const struct zlfs_sb_info *sb = &fs->sb;
	uint32_t zb = zlfs_zone_blocks(sb), zone = addr / zb, in = addr % zb;

	for (uint32_t t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		const struct zlog_state *l = &fs->logs[t];

		if (!zlfs_log_active(sb->nr_logs, t) || l->zone != zone ||
		    l->next_blk / sb->seg_blocks != in / sb->seg_blocks)
			continue;
		if (in % sb->seg_blocks >= l->nr_entries)
			return -ENOENT;
		*nid = le32_get(l->sum.nid[in % sb->seg_blocks]);
		*ofs = le16_get(l->sum.ofs[in % sb->seg_blocks]);
		return 1;
	}
	return 0;
}

int log_summary_lost(struct zlfs_fs *fs, uint32_t zone, uint32_t cp_blk, uint32_t wp_blk)
{
	uint32_t seg = fs->sb.seg_blocks, segno, addr;
	const struct zlfs_blkhdr *h = (const void *)fs->iobuf;

	if (!(cp_blk % seg) || wp_blk / seg <= cp_blk / seg)
		return 0; /* no segment left open, or the log is still in it */
	segno = (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + cp_blk / seg;
	addr = zlfs_zone_start_blk(&fs->sb, zone) + (cp_blk / seg + 1) * seg - 1;
	return zdev_read(fs->dev, fs->iobuf, ZLFS_BLOCK_SIZE, (uint64_t)addr * ZLFS_BLOCK_SIZE) ||
	       zlfs_blk_verify(fs->iobuf, fs->sb.seed, ZLFS_KIND_SUMMARY) ||
	       le32_get(h->index) != segno;
}

static int mount_reconcile_log(struct zlfs_fs *fs, uint32_t t, int readonly)
{
	struct zlog_state *l = &fs->logs[t];
	struct zdev_zone z;
	uint32_t wp_blk, cp_blk = l->next_blk;
	int ret;

	if (l->zone == ZLFS_ZONE_NONE)
		return 0;
	ret = zdev_report_one(fs->dev, l->zone, &z);
	if (ret)
		return ret;
	wp_blk = (uint32_t)((z.wp - z.start) / ZLFS_BLOCK_SIZE);
	if (z.cond == ZDEV_COND_FULL)
		wp_blk = fs->sb.segs_per_zone * fs->sb.seg_blocks;
	if (z.cond == ZDEV_COND_OFFLINE || z.cond == ZDEV_COND_RDONLY ||
	    (z.cond != ZDEV_COND_FULL && wp_blk < cp_blk)) {
		zlog_err("device write-pointer error: zone %u is %s with its write pointer at block "
			 "%u, but the checkpoint wrote up to block %u; run fsck.zlfs -n",
			 l->zone, zdev_cond_name(z.cond), wp_blk, cp_blk);
		return readonly ? 0 : -EIO;
	}
	if (log_summary_lost(fs, l->zone, cp_blk, wp_blk)) {
		zlog_err("device write-pointer error: zone %u is %s at block %u, past the segment "
			 "the checkpoint left open at block %u, but that segment's summary was never "
			 "written (the device moved the write pointer itself); run fsck.zlfs -n",
			 l->zone, zdev_cond_name(z.cond), wp_blk, cp_blk);
		return readonly ? 0 : -EIO;
	}
	if (wp_blk > cp_blk) { /* written after the checkpoint: skip it, never rewind */
		l->next_blk = wp_blk;
		log_trim_summary(fs, l, cp_blk);
		ATOMIC_SET(&fs->dirty, 1);
	}
	return 0;
}

/* The meta log continues at its zone's write pointer. One behind the checkpoint's next meta
 * block means the device lost what the checkpoint made durable before it was written (or
 * the field is damaged): the first meta write would fail there, so, as for a log, a
 * read-write mount is refused (fsck: a device write-pointer error). */
static int mount_meta_position(struct zlfs_fs *fs, int readonly)
{
	struct zdev_zone z;
	int ret = zdev_report_one(fs->dev, fs->meta_zone, &z);
	uint32_t wp_blk;

	if (ret)
		return ret;
	wp_blk = (uint32_t)((z.wp - z.start) / ZLFS_BLOCK_SIZE);
	if (z.cond == ZDEV_COND_FULL)
		wp_blk = (uint32_t)(fs->sb.zone_capacity / ZLFS_BLOCK_SIZE);
	if (wp_blk < fs->meta_next) {
		zlog_err("device write-pointer error: metadata zone %u's write pointer is at block %u, "
			 "behind the checkpoint's next metadata block %u; run fsck.zlfs -n",
			 fs->meta_zone, wp_blk, fs->meta_next);
		return readonly ? 0 : -EIO;
	}
	if (wp_blk > fs->meta_next) {
		fs->meta_next = wp_blk;
		ATOMIC_SET(&fs->dirty, 1);
	}
	return 0;
}

/* The checkpoint and meta zones must take writes: a read-write mount on a device that made
 * one offline or read-only would fail its first checkpoint. Refused, as a write pointer
 * behind the checkpoint is; a read-only mount goes on. */
static int mount_check_meta_zones(struct zlfs_fs *fs, int readonly)
{
	uint32_t z, last = fs->sb.meta_zone_first + fs->sb.meta_zones;
	struct zdev_zone r;
	int ret = 0;

	for (z = fs->sb.cp_zone[0]; !ret && z < last; z++) {
		ret = zdev_report_one(fs->dev, z, &r);
		if (!ret && (r.cond == ZDEV_COND_OFFLINE || r.cond == ZDEV_COND_RDONLY)) {
			zlog_err("device write-pointer error: %s zone %u is %s; run fsck.zlfs -n",
				 z < fs->sb.meta_zone_first ? "checkpoint" : "metadata", z,
				 zdev_cond_name(r.cond));
			ret = readonly ? 0 : -EIO;
		}
	}
	return ret;
}

static int mount_wbuf(struct zlfs_fs *fs, const struct zlfs_mount_opts *o)
{
	struct wbuf_opts w = o->wb;

	if (!w.budget)
		w.budget = WBUF_DEFAULT_BUDGET;
	if (!w.slot_size)
		w.slot_size = WBUF_DEFAULT_SLOT;
	if (!w.superpage)
		w.superpage = WBUF_DEFAULT_SUPERPAGE;
	/* The static policy's one buffer per log: as many as the layout has logs, not the
	 * most any layout has (a 7-log image would pay 9 MiB where it needs 5.25) */
	for (int t = 0; t <= (int)SEG_LOG_HOT_USER; t++)
		if (fs->log_of[t] + 1u > w.nlogs)
			w.nlogs = fs->log_of[t] + 1u;
	if (w.slot_size % ZLFS_BLOCK_SIZE || w.superpage % ZLFS_BLOCK_SIZE ||
	    w.budget < 2 * w.slot_size) {
		zlog_err("write buffer: slot and superpage sizes must be multiples of 4 KiB and the "
			 "budget at least two slots");
		return -EINVAL;
	}
	return wbuf_init(fs->dev, &w, &fs->wb);
}

static int mount_recover(struct zlfs_fs *fs)
{
	uint32_t n;
	int ret = recover_roll_forward(fs, &n);

	if (n)
		ATOMIC_SET(&fs->dirty, 1);
	if (!ret && n)
		zlog_info("recovered %u node blocks written by fsync after checkpoint %llu", n,
			  (unsigned long long)fs->cp.version);
	return ret;
}

static void fs_locks_init(struct zlfs_fs *fs)
{
	zlock_init(&fs->rename_lock, LR_RENAME, "rename_lock");
	zlock_init(&fs->gc_lock, LR_GC, "gc_lock");
	zrw_init(&fs->cp_lock, LR_CP, "cp_lock", 1);
	zlock_init(&fs->ncache_lock, LR_NCACHE, "ncache_lock");
	pthread_cond_init(&fs->ncache_cond, NULL);
	zlock_init(&fs->npack_lock, LR_NPACK, "npack_lock");
	zlock_init(&fs->nat_lock, LR_NAT, "nat_lock");
	zlock_init(&fs->seg_lock, LR_SEG, "seg_lock");
	zlock_init(&fs->stats_lock, LR_STATS, "stats_lock");
	for (int t = 0; t < ZLFS_NR_LOG_TYPES; t++)
		zlock_init(&fs->logs[t].lock, LR_LOG, "log_lock");
}

static void fs_locks_destroy(struct zlfs_fs *fs)
{
	zlock_destroy(&fs->rename_lock);
	zlock_destroy(&fs->gc_lock);
	zrw_destroy(&fs->cp_lock);
	zlock_destroy(&fs->ncache_lock);
	pthread_cond_destroy(&fs->ncache_cond);
	zlock_destroy(&fs->npack_lock);
	zlock_destroy(&fs->nat_lock);
	zlock_destroy(&fs->seg_lock);
	zlock_destroy(&fs->stats_lock);
	for (int t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		zlock_destroy(&fs->logs[t].lock);
		zdev_buf_free(fs->logs[t].sumbuf);
	}
}

static void fs_free(struct zlfs_fs *fs)
{
	remap_destroy(fs);
	gc_ahead_stop(fs);
	zdev_buf_free(fs->gc.sum);
	zdev_buf_free(fs->gc.win.buf);
	wbuf_destroy(fs->wb);
	rcache_destroy(fs);
	free(fs->orphans);
	free(fs->rec_dmarks);
	node_destroy(fs);
	ilock_destroy(fs);
	ckpt_free(fs);
	key_drop(fs);
	zdev_buf_free(fs->iobuf);
	zdev_close(fs->dev);
	fs_locks_destroy(fs);
	free(fs);
}

int zlfs_mount(const char *path, const struct zlfs_mount_opts *o, struct zlfs_fs **out)
{
	struct zdev_open_opts dopts = {.readonly = o->readonly, .direct = o->direct,
				       .daemon = o->daemon, .wait_secs = o->wait_secs,
				       .shared = o->readonly && o->shared};
	struct zlfs_fs *fs = calloc(1, sizeof(*fs));
	int ret, readonly = o->readonly;
	uint32_t t;

	if (!fs)
		return -ENOMEM;
	fs_locks_init(fs);
	gc_defaults(&fs->gc.o);
	fs->noinline_dentry = o->noinline_dentry;
	if (o->gc)
		fs->gc.o = *o->gc;
	fs->iobuf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	ret = fs->iobuf ? ilock_init(fs) : -ENOMEM;
	if (!ret)
		ret = zdev_open(path, &dopts, &fs->dev);
	if (!ret)
		ret = mount_check_sb(fs, path, &readonly);
	if (!ret)
		ret = mount_check_compress(fs, path, o);
	if (!ret && readonly && !o->readonly)
		ret = mount_reopen_ro(fs, path, o);
	if (!ret) /* a wrong key must be refused before recovery writes anything */
		ret = key_load(fs, o->key, path);
	if (!ret)
		ret = ckpt_load(fs, o->meta_cache);
	if (!ret)
		ret = node_init(fs);
	for (t = 0; !ret && t < ZLFS_NR_LOG_TYPES; t++)
		ret = mount_reconcile_log(fs, t, readonly);
	if (!ret)
		ret = mount_meta_position(fs, readonly);
	if (!ret)
		ret = mount_check_meta_zones(fs, readonly);
	fs->readonly = readonly;
	/* Zone states first: a zone recovery empties is prefree (the durable checkpoint still
	 * points into it), one it fills becomes used. */
	if (!ret)
		ret = seg_init(fs);
	if (!ret) /* a clean checkpoint says nothing of a later session that crashed: always look */
		ret = mount_recover(fs);
	if (!ret)
		ret = mount_wbuf(fs, o);
	if (ret) {
		fs_free(fs);
		return ret;
	}
	/* A NAT or SIT page that could not be read during recovery turned it read-only: keep it. */
	fs->readonly = readonly || ATOMIC_GET(&fs->readonly);
	*out = fs;
	return 0;
}

void zlfs_serving(struct zlfs_fs *fs)
{
	zdev_mark_serving(fs->dev); /* a failure is logged; it only makes tools wait longer */
}

void zlfs_before_fork(struct zlfs_fs *fs)
{
	wbuf_park(fs->wb);
}

int zlfs_unmount(struct zlfs_fs *fs)
{
	int ret = 0;

	/* Nothing changed since a clean checkpoint: the device is already as it should be. */
	zrw_wrlock(&fs->cp_lock);
	if (!fs->readonly && (fs->dirty || !(fs->cp.flags & ZLFS_CP_CLEAN)))
		ret = ckpt_write(fs, 1);
	zrw_unlock(&fs->cp_lock);
	fs_free(fs);
	return ret;
}
