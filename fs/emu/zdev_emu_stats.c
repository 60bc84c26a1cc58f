/*
 * zdev_emu_stats.c - the emulator's statistics as JSON (zlfs-emu report --json, the NBD
 * server's stats file, zlfs-ctl stats on an emulated device), and the FTL's option string.
 *
 * Owns: the names the statistics go by outside the emulator and the figures derived from
 * them (device WAF, map miss rate, die utilisation). One flat object, the counters under the
 * names of struct zemu_stats, so that a reader can subtract two snapshots key by key.
 * May call: libc, zdev.h (bucket names).
 */
#include "zdev_emu_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jout {
	char *p;
	size_t len, used;
};

static void jput(struct jout *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jput(struct jout *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(j->p + min_u64(j->used, j->len), j->used < j->len ? j->len - j->used : 0, fmt,
		      ap);
	va_end(ap);
	if (n > 0)
		j->used += (size_t)n;
}

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

int zemu_stats_json(const struct zemu_stats *st, char *buf, size_t len)
{
	const struct zemu_timing *t = &st->timing;
	struct jout j = {buf, len, 0};
	const struct {
		const char *name;
		uint64_t v;
	} n[] = {
		{"sim_ns", st->sim_ns}, {"host_reads", st->host_reads},
		{"host_read_bytes", st->host_read_bytes}, {"host_writes", st->host_writes},
		{"host_write_bytes", st->host_write_bytes}, {"host_trims", st->host_trims},
		{"host_trim_bytes", st->host_trim_bytes}, {"host_flushes", st->host_flushes},
		{"image_syncs", st->image_syncs},
		{"programs", st->programs}, {"data_programs", st->data_programs},
		{"gc_programs", st->gc_programs}, {"map_programs", st->map_programs},
		{"pad_programs", st->pad_programs}, {"pad_bytes", st->pad_bytes},
		{"nand_reads", st->nand_reads}, {"data_reads", st->data_reads},
		{"map_reads", st->map_reads}, {"gc_reads", st->gc_reads}, {"erases", st->erases},
		{"read_service_ns", st->read_service_ns}, {"map_lookups", st->map_lookups},
		{"map_misses", st->map_misses}, {"map_writebacks", st->map_writebacks},
		{"gc_pages", st->gc_pages}, {"gc_victims", st->gc_victims},
		{"xfer_bytes", st->xfer_bytes}, {"link_busy_ns", st->link_busy_ns},
		{"die_busy_ns", st->die_busy_ns}, {"buf_wait_ns", st->buf_wait_ns},
		{"nand_bytes_programmed", st->programs * t->prog_unit},
		{"ftl_superblocks", st->ftl_superblocks},
		{"ftl_free_superblocks", st->ftl_free_superblocks},
		{"ftl_pages_per_superblock", st->ftl_pages_per_superblock},
		{"ftl_op_bytes", st->ftl_op_bytes}, {"ftl_mapped_pages", st->ftl_mapped_pages},
		{"map_cache_pages", st->map_cache_pages}, {"map_pages", st->map_pages},
	};

	jput(&j, "{\"mode\": \"%s\", \"dies\": %u, \"prog_unit\": %u, \"prog_ns\": %u, "
		 "\"read_ns\": %u, \"erase_ns\": %u, \"block\": %u, \"link_mbs\": %u",
	     st->mode == ZEMU_MODE_FTL ? "conventional" : "zoned", t->dies, t->prog_unit,
	     t->prog_ns, t->read_ns, t->erase_ns, t->dies ? emu_tm_block(t) : 0, t->link_mbs);
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
		jput(&j, ", \"%s\": %" PRIu64, n[i].name, n[i].v);
	for (int b = 0; b < ZDEV_RSIZE_BUCKETS; b++)
		jput(&j, ", \"reads_%s\": %" PRIu64, zdev_rsize_name(b), st->host_read_sizes[b]);
	jput(&j, ", \"op_permille\": %u, \"device_waf\": %.4f, \"map_miss_rate\": %.4f, "
		 "\"die_utilisation\": %.4f}",
	     st->ftl.op_permille, ratio(st->programs * t->prog_unit, st->host_write_bytes),
	     ratio(st->map_misses, st->map_lookups),
	     t->dies ? ratio(st->die_busy_ns, (uint64_t)t->dies * st->sim_ns) : 0.0);
	return j.used < len ? (int)j.used : -ENOSPC;
}

/* One "key=value" of an FTL spec. */
static int ftl_parse_kv(const char *kv, void *ctx)
{
	struct zemu_ftl *f = ctx;
	unsigned long long v;
	uint64_t bytes;
	char *end;

	if (emu_spec_number(kv, &v, &end))
		return -EINVAL;
	if (!strncmp(kv, "op=", 3)) {
		if (*end == '%' && !end[1])
			v *= 10;
		else if (*end)
			return -EINVAL;
		if (v >= 1000)
			return -EINVAL;
		f->op_permille = (uint32_t)v;
		return 0;
	}
	if (!strncmp(kv, "cache=", 6) && !emu_spec_scaled(v, end, 0, &bytes) && bytes % 4096 == 0) {
		f->map_cache = bytes;
		return 0;
	}
	return -EINVAL;
}

int zemu_ftl_parse(const char *spec, struct zemu_ftl *ftl)
{
	memset(ftl, 0, sizeof(*ftl));
	if (!strcmp(spec, "default"))
		return 0;
	return emu_spec_each(spec, ftl_parse_kv, ftl);
}
