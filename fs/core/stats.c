/*
 * stats.c - the filesystem's numbers as JSON, for zlfs-ctl stats and -o verbose unmounts.
 *
 * Owns: what is reported and under which names: storage mode and device identity, format
 * revision and features, kernel build, zones (free, in use, held for GC), bytes written by
 * users and to the device and the write amplification they give, checkpoint and write-buffer
 * counters. Figures that need garbage collection (bytes migrated, phases) come with it.
 * On an emulated device, the emulator's own counters and simulated device time go along
 * ("device_model", zdev_emu.h), so that a benchmark can take device-time figures from them.
 * May call: core.h, wbuf.h, zdev.h, zdev_emu.h (statistics only).
 */
#include "core.h"
#include "zdev_emu.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/utsname.h>

struct jbuf {
	char *p;
	size_t len, used;
};

static void jprintf(struct jbuf *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jprintf(struct jbuf *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->used >= j->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->p + j->used, j->len - j->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		j->used += (size_t)n;
}

/* Device strings come from sysfs: keep only what is safe inside a JSON string. */
static void jstr(struct jbuf *j, const char *key, const char *val, int last)
{
	jprintf(j, "  \"%s\": \"", key);
	for (; *val; val++)
		if (*val >= 0x20 && *val != '"' && *val != '\\')
			jprintf(j, "%c", *val);
	jprintf(j, "\"%s\n", last ? "" : ",");
}

static void stats_device(struct zlfs_fs *fs, struct jbuf *j)
{
	const struct zdev_info *di = zdev_info(fs->dev);
	struct utsname u;

	jstr(j, "storage_mode", di->kind == ZDEV_KIND_EMU ? "emulated" : "zoned-block-device", 0);
	jstr(j, "device", di->path, 0);
	jstr(j, "model", di->model, 0);
	jstr(j, "vendor", di->vendor, 0);
	jstr(j, "firmware", di->firmware, 0);
	if (!uname(&u)) {
		char kernel[600];

		snprintf(kernel, sizeof(kernel), "%s %s", u.release, u.version);
		jstr(j, "kernel", kernel, 0);
	}
	jprintf(j, "  \"format_revision\": %u,\n  \"feature_compat\": %u,\n"
		   "  \"feature_ro_compat\": %u,\n  \"feature_incompat\": %u,\n",
		fs->sb.revision, fs->sb.feat_compat, fs->sb.feat_ro_compat, zlfs_incompat(&fs->sb));
	jprintf(j, "  \"last_consistency_scan\": %llu,\n  \"free_zone_reserve\": %u,\n",
		(unsigned long long)fs->sb.last_fsck_time, seg_reserve(fs));
}

void zlfs_counts(struct zlfs_fs *fs, uint64_t *nodes, uint64_t *retired_zones)
{
	zlock_lock(&fs->nat_lock);
	*nodes = fs->valid_nodes;
	zlock_unlock(&fs->nat_lock);
	zlock_lock(&fs->seg_lock);
	*retired_zones = fs->retired_zones;
	zlock_unlock(&fs->seg_lock);
}

static void stats_rcache(struct zlfs_fs *fs, struct jbuf *j)
{
	struct rcache_stats r;

	rcache_stats(fs, &r);
	jprintf(j, "  \"read_cache\": {\"blocks\": %llu, \"hits\": %llu, \"misses\": %llu, "
		   "\"fills\": %llu},\n", (unsigned long long)r.blocks, (unsigned long long)r.hits,
		(unsigned long long)r.misses, (unsigned long long)r.fills);
}

static void stats_space(struct zlfs_fs *fs, struct jbuf *j)
{
	uint32_t mz, used = 0, open = 0, dirty = 0, free_zones, retired;
	uint64_t valid_blocks, nodes, inodes;

	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++) {
		used += fs->zone_state[mz] == ZONE_USED;
		open += fs->zone_state[mz] == ZONE_OPEN;
		dirty += fs->zone_state[mz] == ZONE_USED && fs->zone_valid[mz] < seg_usable_per_zone(fs);
	}
	free_zones = fs->free_zones;
	retired = fs->retired_zones;
	valid_blocks = fs->valid_blocks;
	zlock_unlock(&fs->seg_lock);
	zlock_lock(&fs->nat_lock);
	nodes = fs->valid_nodes;
	inodes = fs->valid_inodes;
	zlock_unlock(&fs->nat_lock);
	jprintf(j, "  \"zones\": {\"main\": %u, \"free\": %u, \"open\": %u, \"in_use\": %u, "
		   "\"dirty\": %u, \"prefree\": %u, \"reserved_for_gc\": %u, \"retired\": %u},\n",
		fs->sb.main_zones, free_zones, open, used, dirty, seg_prefree_zones(fs),
		seg_reserve(fs), retired);
	jprintf(j, "  \"blocks\": {\"valid\": %llu, \"free_for_data\": %llu, "
		   "\"owed_to_checkpoint\": %llu, \"reserved_by_fallocate\": %llu, "
		   "\"moved_by_fallocate\": %u, \"partial_held_in_memory\": %u},\n",
		(unsigned long long)valid_blocks, (unsigned long long)seg_free_blocks(fs),
		(unsigned long long)seg_owed_blocks(fs), (unsigned long long)seg_prealloc(fs),
		remap_count(fs), ATOMIC_GET(&fs->held_blocks));
	jprintf(j, "  \"nodes\": {\"valid\": %llu, \"inodes\": %llu, \"max\": %u},\n",
		(unsigned long long)nodes, (unsigned long long)inodes, fs->sb.max_nid);
	stats_rcache(fs, j);
}

/* Energy per reclaimed GiB from the per-byte model: what GC read and wrote, over what it
 * freed, all of this mount (bytes_migrated is the lifetime count, zones_reclaimed this
 * mount's). Lifetime: TBW = capacity x P/E cycles / WAF. */
static void stats_gc(struct zlfs_fs *fs, struct jbuf *j)
{
	const struct gc_state *g = &fs->gc;
	uint64_t gc_zones = ATOMIC_GET(&fs->gc_zones), gc_bytes = ATOMIC_GET(&fs->gc_bytes);
	uint64_t busy = ATOMIC_GET(&g->busy_ns), user = ATOMIC_GET(&fs->user_bytes);
	double freed_gib = (double)gc_zones * seg_usable_per_zone(fs) * ZLFS_BLOCK_SIZE /
			   (1024.0 * 1024 * 1024);
	double joules = ((double)ATOMIC_GET(&g->bytes_read) * g->o.read_nj_per_byte +
			 (double)(gc_bytes - fs->gc_bytes_at_mount) * g->o.write_nj_per_byte) *
			1e-9;
	double waf = user ? (double)ATOMIC_GET(&fs->dev_bytes) / (double)user : 1.0;
	double cap = (double)fs->sb.main_zones * seg_usable_per_zone(fs) * ZLFS_BLOCK_SIZE;
	uint32_t i, n, fg = gc_fg_level(fs), target = gc_target_free(fs); /* before stats_lock */

	zlock_lock(&fs->stats_lock);
	n = g->nlog < GC_LOG_MAX ? g->nlog : GC_LOG_MAX;
	jprintf(j, "  \"gc\": {\"phase\": \"%s\", \"bytes_migrated\": %llu, "
		   "\"zones_reclaimed\": %llu, \"wakes\": %llu, \"busy_ms\": %.1f, "
		   "\"overlap_with_users\": %.3f, \"energy_j_per_reclaimed_gib\": %.1f,\n"
		   "    \"watermarks_pct\": {\"high\": %u, \"low\": %u}, \"valid_thresh_pct\": %u,\n"
		   "    \"foreground_level_zones\": %u, \"target_free_zones\": %u, "
		   "\"pace_zones_per_s\": %.2f,\n"
		   "    \"bytes_moved_to\": {\"cold\": %llu, \"frozen\": %llu, \"hot\": %llu}, "
		   "\"bytes_read\": %llu, \"windows_read_ahead\": %llu, \"read_yields\": %llu,\n"
		   "    \"bulk_yields\": %llu, \"phase_changes\": %u, \"transitions\": [",
		gc_phase_name(g->phase), (unsigned long long)gc_bytes, (unsigned long long)gc_zones,
		(unsigned long long)ATOMIC_GET(&g->wakes), busy / 1e6,
		busy ? (double)ATOMIC_GET(&g->overlap_ns) / (double)busy : 0.0,
		freed_gib > 0 ? joules / freed_gib : 0.0, g->o.high_pct, g->o.low_pct,
		g->o.valid_thresh_pct, fg, target, ATOMIC_GET(&g->pace_mzps) / 1000.0,
		(unsigned long long)ATOMIC_GET(&g->moved_blocks[0]) * ZLFS_BLOCK_SIZE,
		(unsigned long long)ATOMIC_GET(&g->moved_blocks[1]) * ZLFS_BLOCK_SIZE,
		(unsigned long long)ATOMIC_GET(&g->moved_blocks[2]) * ZLFS_BLOCK_SIZE,
		(unsigned long long)ATOMIC_GET(&g->bytes_read),
		(unsigned long long)ATOMIC_GET(&g->windows_ahead),
		(unsigned long long)ATOMIC_GET(&g->read_yields),
		(unsigned long long)ATOMIC_GET(&g->bulk_yields), g->nlog);
	for (i = 0; i < n; i++) {
		uint32_t k = (g->nlog - n + i) % GC_LOG_MAX;

		jprintf(j, "%s{\"time_ns\": %llu, \"from\": \"%s\", \"to\": \"%s\", "
			   "\"free_zones\": %u}", i ? ", " : "", (unsigned long long)g->log[k].time_ns,
			gc_phase_name(g->log[k].from), gc_phase_name(g->log[k].to), g->log[k].free_zones);
	}
	zlock_unlock(&fs->stats_lock);
	jprintf(j, "]},\n  \"lifetime\": {\"pe_cycles\": %u, \"tbw_bytes\": %.0f},\n",
		g->o.pe_cycles, cap * g->o.pe_cycles / (waf > 0 ? waf : 1.0));
}

/* This mount's compressed files: the plaintext their write path stored and what its stored
 * form took (a compressed cluster's k blocks, a raw cluster's blocks less its holes, a block
 * written alone as itself); "ratio" is after / before. A partial write into a compressed
 * cluster stores it whole again, so before can exceed what users wrote. */
static void stats_compression(struct zlfs_fs *fs, struct jbuf *j)
{
	uint64_t in = ATOMIC_GET(&fs->clu_bytes_in), out = ATOMIC_GET(&fs->clu_bytes_out);

	jprintf(j, "  \"compression\": {\"bytes_before\": %llu, \"bytes_after\": %llu, "
		   "\"ratio\": %.4f, \"clusters_compressed\": %llu, \"clusters_raw\": %llu, "
		   "\"blocks_written_alone\": %llu},\n",
		(unsigned long long)in, (unsigned long long)out, in ? (double)out / (double)in : 0.0,
		(unsigned long long)ATOMIC_GET(&fs->clu_compressed),
		(unsigned long long)ATOMIC_GET(&fs->clu_raw),
		(unsigned long long)ATOMIC_GET(&fs->clu_blocks_alone));
}

static void stats_io(struct zlfs_fs *fs, struct jbuf *j)
{
	struct wbuf_stats w = {0};
	uint64_t user = ATOMIC_GET(&fs->user_bytes), dev = ATOMIC_GET(&fs->dev_bytes);
	uint64_t node = ATOMIC_GET(&fs->dev_bytes_node);
	double waf = user ? (double)dev / (double)user : 0.0;

	if (fs->wb)
		wbuf_stats(fs->wb, &w);
	jprintf(j, "  \"bytes_written_by_users\": %llu,\n  \"bytes_written_to_device\": %llu,\n"
		   "  \"write_amplification\": %.3f,\n  \"hot_user_bytes_this_mount\": %llu,\n",
		(unsigned long long)user, (unsigned long long)dev, waf,
		(unsigned long long)ATOMIC_GET(&fs->hot_user_bytes));
	/* This mount's device writes by kind (the total above runs across mounts): data and
	 * node logs (GC's moves included, see "gc"), and the meta log with checkpoint packs. */
	jprintf(j, "  \"device_bytes_this_mount\": {\"data_logs\": %llu, \"node_logs\": %llu, "
		   "\"metadata\": %llu},\n",
		(unsigned long long)(ATOMIC_GET(&fs->dev_bytes_main) - node),
		(unsigned long long)node, (unsigned long long)ATOMIC_GET(&fs->dev_bytes_meta));
	stats_compression(fs, j);
	stats_gc(fs, j);
	zrw_rdlock(&fs->cp_lock); /* the version changes only under it, exclusive */
	jprintf(j, "  \"checkpoint_version\": %llu,\n", (unsigned long long)fs->cp.version);
	zrw_unlock(&fs->cp_lock);
	jprintf(j, "  \"read_only\": %s,\n", ATOMIC_GET(&fs->readonly) ? "true" : "false");
	jprintf(j, "  \"write_buffer\": {\"slots\": %u, \"slot_bytes\": %llu, "
		   "\"bytes_written\": %llu, \"waits_for_a_slot\": %llu}\n",
		w.nslots, (unsigned long long)w.slot_bytes, (unsigned long long)w.bytes_written,
		(unsigned long long)w.waits);
}

/* Reads that reached the device since it was opened (this mount), by size (zdev.h). */
static void stats_read_sizes(struct zlfs_fs *fs, struct jbuf *j)
{
	uint64_t n[ZDEV_RSIZE_BUCKETS];
	int b;

	zdev_read_sizes(fs->dev, n);
	jprintf(j, "  \"device_read_sizes\": {");
	for (b = 0; b < ZDEV_RSIZE_BUCKETS; b++)
		jprintf(j, "%s\"%s\": %llu", b ? ", " : "", zdev_rsize_name(b), (unsigned long long)n[b]);
	jprintf(j, "},\n");
}

static void stats_device_model(struct zlfs_fs *fs, struct jbuf *j)
{
	struct zemu_stats st;
	char line[4096];

	if (!zdev_is_emu(fs->dev) || zemu_dev_stats(fs->dev, &st) ||
	    zemu_stats_json(&st, line, sizeof(line)) < 0)
		return;
	jprintf(j, "  \"device_model\": %s,\n", line);
}

/* What the bounded caches hold: NAT and SIT pages (metacache.c) and node pages. */
static void stats_memory(struct zlfs_fs *fs, struct jbuf *j)
{
	struct mcache_stats m;
	static const char *const name[2] = {"nat", "sit"};

	mcache_stats(fs, &m);
	jprintf(j, "  \"memory\": {\"meta_page_bytes\": %u, \"node_pages\": %u", m.page_bytes,
		ATOMIC_GET(&fs->nr_cached));
	for (int i = 0; i < 2; i++)
		jprintf(j, ", \"%s_pages\": %u, \"%s_pages_max\": %u, \"%s_hits\": %llu, "
			   "\"%s_misses\": %llu, \"%s_evictions\": %llu", name[i], m.pages[i], name[i],
			m.max_pages[i], name[i], (unsigned long long)m.hits[i], name[i],
			(unsigned long long)m.misses[i], name[i], (unsigned long long)m.evictions[i]);
	jprintf(j, "},\n");
}

int zlfs_stats_json(struct zlfs_fs *fs, char *buf, size_t len)
{
	struct jbuf j = {buf, len, 0};

	jprintf(&j, "{\n");
	stats_device(fs, &j);
	stats_space(fs, &j);
	stats_memory(fs, &j);
	stats_read_sizes(fs, &j);
	stats_device_model(fs, &j);
	stats_io(fs, &j);
	jprintf(&j, "}\n");
	return j.used < len ? (int)j.used : -ENOSPC;
}
