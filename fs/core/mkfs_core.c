/*
 * mkfs_core.c - choosing a layout for a device and writing a new, empty filesystem
 * (see super.h). mkfs.zlfs is a thin command line around it; the tests call it directly.
 *
 * Owns: the layout rules (which zone holds what, segment size, NAT/SIT sizes, GC reserve),
 * the geometry checks with their messages, recognising other filesystems, and the first
 * root directory (encrypted on an encrypted filesystem unless asked not to), metadata,
 * checkpoint and superblock.
 * May call: super.c, checkpoint.c, clock.c, format.h, zdev.h, log.h.
 *
 * Order of writes: everything else first, the superblock last, each step flushed. A mkfs cut
 * short leaves a device without a valid superblock, which no one mistakes for a filesystem.
 */
#include "super.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest pack mkfs guarantees room for: 16 orphan blocks (16k unlinked-but-open files). */
#define CP_PACK_MAX (2 + ZLFS_NR_LOG_TYPES + 16)
#define MIN_FREE_ZONES 1 /* at least one zone of room for user data beyond logs and reserve */

#define why_fail(why, len, ...) zlfs_why(-EINVAL, why, len, __VA_ARGS__)

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static uint32_t pow2_floor(uint64_t v)
{
	uint32_t p = 1;

	while ((uint64_t)p * 2 <= v && p < (1u << 30))
		p *= 2;
	return p;
}

/* Main zones below which the default layout has no warm data lanes (7 logs, not 10). */
#define LANES_MIN_MAIN_ZONES 64u
/* Main zones below which the default layout has 4 logs: every log but the warm data log keeps
 * an open zone whose unwritten rest no user data may take, and with 7 logs on 26 zones that
 * rest was a third of the device (RocksDB met ENOSPC at two thirds full; docs/benchmarks.md,
 * "RocksDB on a small image"). 4 logs keep half as many such zones open. */
#define SEVEN_LOGS_MIN_MAIN_ZONES 32u

/* Zones needed beside the logs: the GC reserve, from the overprovision percentage. */
uint32_t zlfs_layout_reserve(uint32_t main_zones, unsigned ovp, uint32_t nr_logs)
{
	uint32_t r = (uint32_t)div_up((uint64_t)main_zones * ovp, 100);

	return r < zlfs_gc_zones_needed(nr_logs) ? zlfs_gc_zones_needed(nr_logs) : r;
}

/* The largest layout whose logs, with the checkpoint and meta logs, fit the zone limits:
 * 10, then 7, 6, 4, 2 (the new logs fold into the old ones as the 4- and 2-log layouts
 * fold). */
static unsigned layout_logs_fit(const struct zdev_geometry *g)
{
	static const unsigned counts[] = {ZLFS_NR_LOG_TYPES, ZLFS_NR_LOG_TYPES_R2, 6, 4, 2};
	unsigned i, n;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		n = counts[i];
		if ((!g->max_open || n + 2 <= g->max_open) &&
		    (!g->max_active || n + 2 <= g->max_active))
			return n;
	}
	return 0;
}

static int layout_logs(const struct zdev_geometry *g, const struct zlfs_mkfs_opts *o,
		       struct zlfs_sb_info *s, char *why, size_t wl)
{
	unsigned fit = layout_logs_fit(g);

	if (o->nr_logs && !zlfs_nr_logs_valid(o->nr_logs, ZLFS_REVISION))
		return why_fail(why, wl, "--logs must be 2, 4, 6, %u or %u, not %u",
				ZLFS_NR_LOG_TYPES_R2, ZLFS_NR_LOG_TYPES, o->nr_logs);
	if (!fit)
		return why_fail(why, wl,
				"the device allows %u open and %u active zones; zlfs needs at "
				"least 4 (2 logs + checkpoint log + metadata log)",
				g->max_open, g->max_active);
	if (o->nr_logs > fit)
		return why_fail(why, wl,
				"the device allows %u open and %u active zones; %u logs + "
				"checkpoint log + metadata log need %u: use --logs %u",
				g->max_open, g->max_active, o->nr_logs, o->nr_logs + 2, fit);
	s->nr_logs = o->nr_logs ? o->nr_logs : fit;
	return 0;
}

/* Zones in use are sequential from FIRST to the end; conventional zones before it are not
 * used by revision 1 (they may be later, never required). */
static int layout_zones(const struct zdev_geometry *g, const struct zdev_zone *zones,
			uint32_t *first_seq, uint64_t *min_cap, char *why, size_t wl)
{
	uint32_t i;

	for (i = 0; i < g->nr_zones && zones[i].type != ZDEV_ZONE_SEQ; i++)
		;
	if (i == g->nr_zones)
		return why_fail(why, wl, "the device has no sequential zones");
	*first_seq = i;
	*min_cap = UINT64_MAX;
	for (; i < g->nr_zones; i++) {
		if (zones[i].type != ZDEV_ZONE_SEQ)
			return why_fail(why, wl,
					"zone %u is conventional but follows sequential zones: "
					"zlfs needs conventional zones (if any) first",
					i);
		if (zones[i].cond == ZDEV_COND_OFFLINE || zones[i].cond == ZDEV_COND_RDONLY)
			return why_fail(why, wl, "zone %u is %s: zlfs cannot use a device with "
					"offline or read-only zones yet", i, zdev_cond_name(zones[i].cond));
		if (zones[i].capacity < *min_cap)
			*min_cap = zones[i].capacity;
	}
	return 0;
}

/* NAT, SIT and meta-area size for MAIN zones; returns the meta zones they need. */
static uint32_t layout_meta(struct zlfs_sb_info *s, uint32_t main_zones, uint32_t cap_blocks)
{
	uint64_t usable = (uint64_t)main_zones * s->segs_per_zone * (s->seg_blocks - 1);
	uint64_t nids = usable / 8, meta, map, half;

	if (nids < 1024)
		nids = 1024;
	if (nids > ZLFS_MAX_NID_PACKED) /* below 2^28 in whole NAT blocks, with or without packs */
		nids = ZLFS_MAX_NID_PACKED;
	s->nat_blocks = (uint32_t)div_up(nids, ZLFS_NAT_PER_BLOCK);
	s->max_nid = s->nat_blocks * ZLFS_NAT_PER_BLOCK;
	s->sit_blocks = (uint32_t)div_up((uint64_t)main_zones * s->segs_per_zone, ZLFS_SIT_PER_BLOCK);
	meta = (uint64_t)s->nat_blocks + s->sit_blocks;
	map = div_up(meta, ZLFS_MAP_PER_BLOCK);
	/* Two halves, each able to hold every meta block twice: the meta log appends changed
	 * blocks to one half and, when it is full, rewrites all live blocks into the other. */
	half = div_up(2 * (meta + map), cap_blocks);
	return (uint32_t)(2 * half);
}

static int layout_size(const struct zdev_geometry *g, struct zlfs_sb_info *s, uint32_t first,
		       uint32_t cap_blocks, char *why, size_t wl)
{
	uint32_t seq = g->nr_zones - first, avail, meta = 2, main = 0, i, need;

	if (seq < 4 + 2)
		goto too_few;
	avail = seq - 4;
	for (i = 0; i < 4; i++) { /* meta size depends on main size: settle in a few rounds */
		main = avail > meta ? avail - meta : 0;
		meta = layout_meta(s, main ? main : 1, cap_blocks);
		if (meta < 2)
			meta = 2;
	}
	main = avail > meta ? avail - meta : 0;
	s->reserved_zones = zlfs_layout_reserve(main, s->ovp_percent, s->nr_logs);
	need = s->nr_logs + s->reserved_zones + MIN_FREE_ZONES;
	if (main < need)
		goto too_few;
	if ((uint64_t)s->nat_blocks + s->sit_blocks > (uint64_t)ZLFS_CP_MAP_MAX * ZLFS_MAP_PER_BLOCK)
		return why_fail(why, wl, "the device is too large for format revision %d",
				ZLFS_REVISION);
	s->meta_zone_first = first + 4;
	s->meta_zones = meta;
	s->main_zone_first = first + 4 + meta;
	s->main_zones = main;
	return 0;
too_few:
	return why_fail(why, wl,
			"device too small: %u sequential zones of %llu KiB; zlfs with %u logs "
			"needs 2 superblock + 2 checkpoint + %u metadata zones, then %u log, %u "
			"GC-reserve and %u free zones",
			seq, (unsigned long long)(g->zone_size >> 10), s->nr_logs, meta, s->nr_logs,
			zlfs_layout_reserve(main, s->ovp_percent, s->nr_logs), MIN_FREE_ZONES);
}

int zlfs_layout(const struct zdev_geometry *g, const struct zdev_zone *zones,
		const struct zlfs_mkfs_opts *o, struct zlfs_sb_info *s, char *why, size_t wl)
{
	uint32_t first = 0, cap_blocks;
	uint64_t min_cap = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	if (!g->lblock_size || g->lblock_size > ZLFS_BLOCK_SIZE || ZLFS_BLOCK_SIZE % g->lblock_size)
		return why_fail(why, wl, "logical block size %u is not supported: it must divide "
				"the 4096-byte filesystem block", g->lblock_size);
	if (g->zone_size % ZLFS_BLOCK_SIZE)
		return why_fail(why, wl, "zone size %llu is not a multiple of the 4096-byte block",
				(unsigned long long)g->zone_size);
	if (g->capacity / ZLFS_BLOCK_SIZE > ZLFS_MAX_BLOCKS)
		return why_fail(why, wl, "devices over 16 TiB are not supported by format "
				"revision %d", ZLFS_REVISION);
	ret = layout_zones(g, zones, &first, &min_cap, why, wl);
	if (ret)
		return ret;
	cap_blocks = (uint32_t)(min_cap / ZLFS_BLOCK_SIZE);
	if (cap_blocks < 2 * CP_PACK_MAX || cap_blocks < ZLFS_SEG_BLOCKS_MIN)
		return why_fail(why, wl, "zone capacity %llu KiB is too small: zlfs needs at least "
				"%u KiB", (unsigned long long)(min_cap >> 10),
				2 * CP_PACK_MAX * ZLFS_BLOCK_SIZE / 1024);
	ret = layout_logs(g, o, s, why, wl);
	if (ret)
		return ret;
	s->seg_blocks = pow2_floor(cap_blocks);
	if (s->seg_blocks > ZLFS_SEG_BLOCKS_MAX)
		s->seg_blocks = ZLFS_SEG_BLOCKS_MAX;
	s->segs_per_zone = cap_blocks / s->seg_blocks;
	s->ovp_percent = o->ovp_percent ? o->ovp_percent : ZLFS_DEFAULT_OVP;
	if (s->ovp_percent >= 50)
		return why_fail(why, wl, "overprovision %u%% is too large (at most 49%%)",
				s->ovp_percent);
	ret = layout_size(g, s, first, cap_blocks, why, wl);
	/* The warm data lanes keep three more zones open, whose dead blocks no collection can
	 * reach until they fill: on a small device that is a share of the room GC works in, and
	 * it gets the 7-log layout of revision 2, unless the user asked for 10. */
	if (!o->nr_logs && s->nr_logs == ZLFS_NR_LOG_TYPES &&
	    (ret || s->main_zones < LANES_MIN_MAIN_ZONES)) {
		s->nr_logs = ZLFS_NR_LOG_TYPES_R2;
		ret = layout_size(g, s, first, cap_blocks, why, wl);
	}
	/* A device of few zones, or too few for 7 logs' zones, gets 4 logs, unless the user
	 * asked for more. */
	if (!o->nr_logs && s->nr_logs > 4 && (ret || s->main_zones < SEVEN_LOGS_MIN_MAIN_ZONES)) {
		s->nr_logs = 4;
		ret = layout_size(g, s, first, cap_blocks, why, wl);
	}
	if (ret)
		return ret;
	s->revision = ZLFS_REVISION;
	s->min_revision = (uint16_t)zlfs_logs_min_revision(s->nr_logs);
	s->block_size = ZLFS_BLOCK_SIZE;
	s->dev_lblock_size = g->lblock_size;
	s->zone_size = g->zone_size;
	s->zone_capacity = (uint64_t)cap_blocks * ZLFS_BLOCK_SIZE;
	s->nr_zones = g->nr_zones;
	s->nr_conv = g->nr_conv;
	s->max_open = g->max_open;
	s->max_active = g->max_active;
	s->sb_zone[0] = first;
	s->sb_zone[1] = first + 1;
	s->cp_zone[0] = first + 2;
	s->cp_zone[1] = first + 3;
	s->root_ino = ZLFS_ROOT_INO;
	return 0;
}

/* ---- other filesystems ------------------------------------------------------------------- */

struct fs_sig {
	const char *name;
	uint32_t off;
	const char *magic;
	uint32_t len;
};

static const struct fs_sig fs_sigs[] = {
	{"ext2/ext3/ext4", 1080, "\x53\xef", 2},
	{"f2fs", 1024, "\x10\x20\xf5\xf2", 4},
	{"xfs", 0, "XFSB", 4},
	{"btrfs", 65536 + 64, "_BHRfS_M", 8},
	{"swap", 4086, "SWAPSPACE2", 10},
};

const char *zlfs_foreign_fs(struct zdev *dev)
{
	const size_t len = 128 * 1024;
	const char *found = NULL;
	uint8_t *buf = zdev_buf_alloc(len);
	size_t i;

	if (!buf)
		return NULL;
	/* Unwritten blocks read as zeros; a read error just means nothing recognisable. */
	if (zdev_geometry(dev)->capacity >= len && !zdev_read(dev, buf, len, 0)) {
		for (i = 0; i < sizeof(fs_sigs) / sizeof(fs_sigs[0]) && !found; i++)
			if (!memcmp(buf + fs_sigs[i].off, fs_sigs[i].magic, fs_sigs[i].len))
				found = fs_sigs[i].name;
	}
	zdev_buf_free(buf);
	return found;
}

/* ---- writing the new filesystem ---------------------------------------------------------- */

struct mkfs_ctx {
	struct zdev *dev;
	struct zlfs_sb_info *sbi;
	uint8_t *blk;      /* one aligned block */
	uint64_t now_ns;
	uint32_t node_log; /* log that holds directory nodes */
	uint32_t root_addr;
	uint32_t meta_next;
	int encrypt_root;
};

static uint64_t zone_off(const struct zlfs_sb_info *s, uint32_t zone, uint32_t blk)
{
	return (uint64_t)zone * s->zone_size + (uint64_t)blk * ZLFS_BLOCK_SIZE;
}

static int mkfs_reset_zones(struct zdev *dev, const struct zlfs_mkfs_opts *o)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone z;
	uint32_t i;
	int ret;

	for (i = 0; i < g->nr_zones; i++) {
		ret = zdev_report_one(dev, i, &z);
		if (!ret && z.type == ZDEV_ZONE_SEQ && z.cond != ZDEV_COND_EMPTY)
			ret = zdev_zone_reset(dev, i);
		if (ret) {
			zlog_err("cannot reset zone %u: %s", i, strerror(-ret));
			return ret;
		}
		if (o->progress && (i % 64 == 63 || i + 1 == g->nr_zones))
			o->progress(i + 1, g->nr_zones, o->progress_arg);
	}
	return 0;
}

static int mkfs_write_root(struct mkfs_ctx *c)
{
	struct zlfs_sb_info *s = c->sbi;
	struct zlfs_inode *ino = (void *)c->blk;
	uint32_t gen;

	memset(ino, 0, sizeof(*ino));
	zlfs_blk_init(ino, ZLFS_KIND_INODE, ZLFS_ROOT_INO, ZLFS_ROOT_INO, 1);
	if (zlfs_random(&gen, sizeof(gen)))
		gen = (uint32_t)c->now_ns;
	ino->mode = le32_put(S_IFDIR | 0755);
	ino->uid = le32_put(getuid());
	ino->gid = le32_put(getgid());
	ino->nlink = le32_put(2);
	ino->generation = le32_put(gen);
	ino->parent_ino = le32_put(ZLFS_ROOT_INO);
	ino->atime_ns = ino->mtime_ns = ino->ctime_ns = ino->crtime_ns = le64_put(c->now_ns);
	/* As `zlfs-ctl encrypt` marks an empty directory: the flag and a nonce of its own. Written
	 * before the superblock, so no filesystem ever exists with a plain root by accident. */
	if (c->encrypt_root) {
		if (zlfs_random(ino->nonce, sizeof(ino->nonce))) {
			zlog_err("no random bytes for the root directory's nonce");
			return -EIO;
		}
		ino->flags = le32_put(ZLFS_IFLAG_ENCRYPT);
	}
	zlfs_blk_seal(ino, s->seed);
	c->root_addr = zlfs_zone_start_blk(s, s->main_zone_first);
	return zdev_write(c->dev, c->blk, ZLFS_BLOCK_SIZE, zone_off(s, s->main_zone_first, 0));
}

/* Append one sealed meta block (logical index IDX, or a map block) to the meta log. */
static int mkfs_meta_append(struct mkfs_ctx *c, uint32_t *addr_out)
{
	struct zlfs_sb_info *s = c->sbi;

	zlfs_blk_seal(c->blk, s->seed);
	*addr_out = zlfs_zone_start_blk(s, s->meta_zone_first) + c->meta_next;
	return zdev_write(c->dev, c->blk, ZLFS_BLOCK_SIZE,
			  zone_off(s, s->meta_zone_first, c->meta_next++));
}

static int mkfs_write_nat_sit(struct mkfs_ctx *c, uint32_t *nat_addr, uint32_t *sit_addr)
{
	struct zlfs_sb_info *s = c->sbi;
	struct zlfs_nat_block *nat = (void *)c->blk;
	struct zlfs_sit_block *sit = (void *)c->blk;
	int ret;

	memset(nat, 0, sizeof(*nat));
	zlfs_blk_init(nat, ZLFS_KIND_NAT, 0, 0, 1);
	nat->e[ZLFS_ROOT_INO].blkaddr = le32_put(c->root_addr);
	nat->e[ZLFS_ROOT_INO].ino = le32_put(ZLFS_ROOT_INO);
	ret = mkfs_meta_append(c, nat_addr);
	if (ret)
		return ret;
	memset(sit, 0, sizeof(*sit));
	zlfs_blk_init(sit, ZLFS_KIND_SIT, s->nat_blocks, 0, 1);
	sit->e[0].valid = le16_put(1);
	sit->e[0].log = (uint8_t)c->node_log;
	sit->e[0].mtime = le64_put(c->now_ns / 1000000000ULL);
	sit->e[0].bitmap[0] = 1;
	for (uint32_t i = 1; i < ZLFS_SIT_PER_BLOCK; i++)
		sit->e[i].log = ZLFS_LOG_NONE;
	return mkfs_meta_append(c, sit_addr);
}

/* Only map blocks that point somewhere are written; the rest stay null (all meta blocks they
 * would cover read as zeros). */
static int mkfs_write_meta(struct mkfs_ctx *c, struct zlfs_cp_info *cp)
{
	struct zlfs_sb_info *s = c->sbi;
	uint32_t nat_addr, sit_addr, sit_idx = s->nat_blocks, m;
	int ret = mkfs_write_nat_sit(c, &nat_addr, &sit_addr);

	if (ret)
		return ret;
	cp->nr_map = (uint32_t)div_up((uint64_t)s->nat_blocks + s->sit_blocks, ZLFS_MAP_PER_BLOCK);
	for (m = 0; m < cp->nr_map; m++) {
		struct zlfs_map_block *map = (void *)c->blk;
		uint32_t lo = m * ZLFS_MAP_PER_BLOCK;

		if (lo > 0 && (sit_idx < lo || sit_idx >= lo + ZLFS_MAP_PER_BLOCK))
			continue;
		memset(map, 0, sizeof(*map));
		zlfs_blk_init(map, ZLFS_KIND_MAP, m, 0, 1);
		if (m == 0)
			map->addr[0] = le32_put(nat_addr);
		if (sit_idx >= lo && sit_idx < lo + ZLFS_MAP_PER_BLOCK)
			map->addr[sit_idx - lo] = le32_put(sit_addr);
		ret = mkfs_meta_append(c, &cp->map_addr[m]);
		if (ret)
			return ret;
	}
	return 0;
}

static int mkfs_write_cp(struct mkfs_ctx *c, struct zlfs_cp_info *cp)
{
	struct zlfs_sb_info *s = c->sbi;
	struct zlfs_summary *sum = calloc(1, sizeof(*sum));
	uint8_t sum_log = (uint8_t)c->node_log;
	uint32_t i;
	int ret;

	if (!sum)
		return -ENOMEM;
	cp->version = 1;
	cp->time_ns = c->now_ns;
	cp->flags = ZLFS_CP_CLEAN;
	cp->nr_logs = s->nr_logs;
	cp->meta_zone = s->meta_zone_first;
	cp->meta_next_blk = c->meta_next;
	cp->next_free_nid = ZLFS_ROOT_INO + 1;
	for (i = 0; i < ZLFS_NR_LOG_TYPES; i++)
		cp->logs[i].zone = ZLFS_ZONE_NONE;
	cp->logs[c->node_log].zone = s->main_zone_first;
	cp->logs[c->node_log].next_blk = 1;
	cp->logs[c->node_log].nr_entries = 1;
	cp->valid_blocks = cp->valid_nodes = cp->valid_inodes = 1;
	sum->nid[0] = le32_put(ZLFS_ROOT_INO);
	sum->ofs[0] = le16_put(ZLFS_SUM_NODE);
	ret = ckpt_write_pack(c->dev, s, cp, 0, 0, sum, &sum_log, 1, NULL, NULL);
	free(sum);
	return ret;
}

static void mkfs_fill_identity(struct zlfs_sb_info *s, const struct zlfs_mkfs_opts *o,
			       uint64_t now_ns)
{
	if (o->uuid) { /* the user's, as given */
		memcpy(s->uuid, o->uuid, sizeof(s->uuid));
	} else {
		if (zlfs_random(s->uuid, sizeof(s->uuid))) {
			for (size_t i = 0; i < sizeof(s->uuid); i++)
				s->uuid[i] = (uint8_t)((now_ns >> (i % 8 * 8)) ^ (i * 37) ^
						       (uint64_t)getpid());
		}
		s->uuid[6] = (uint8_t)((s->uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
		s->uuid[8] = (uint8_t)((s->uuid[8] & 0x3f) | 0x80);
	}
	if (o->label)
		snprintf(s->label, sizeof(s->label), "%s", o->label);
	s->feat_incompat |= ZLFS_FEAT_INCOMPAT_ONE_FLUSH; /* one flush per fsync */
	s->feat_incompat |= ZLFS_FEAT_INCOMPAT_INLINE_DATA; /* small files in their inode */
	s->feat_incompat |= ZLFS_FEAT_INCOMPAT_XATTR_NODES; /* xattrs past one node */
	s->feat_incompat |= ZLFS_FEAT_INCOMPAT_DENTRY_MARK; /* a new file's fsync: no checkpoint */
	if (o->packed_inodes)
		s->feat_incompat |= ZLFS_FEAT_INCOMPAT_PACKED_INODES;
	if (o->compress) {
		s->feat_incompat |= ZLFS_FEAT_INCOMPAT_COMPRESS;
		s->compress_alg = o->compress_alg;
		s->cluster_log = o->cluster_log ? o->cluster_log : ZLFS_CLUSTER_LOG_MIN;
	}
	if (o->enc) {
		s->feat_incompat |= ZLFS_FEAT_INCOMPAT_ENCRYPT;
		s->enc_kdf = o->enc->kdf;
		s->scrypt_n = o->enc->scrypt_n;
		s->scrypt_r = o->enc->scrypt_r;
		s->scrypt_p = o->enc->scrypt_p;
		memcpy(s->enc_salt, o->enc->salt, sizeof(s->enc_salt));
		memcpy(s->key_check, o->enc->key_check, sizeof(s->key_check));
	}
	s->create_time = now_ns / 1000000000ULL;
	s->sb_seq = 1;
	s->seed = zlfs_csum_seed(s->uuid);
}

static int mkfs_layout_dev(struct zdev *dev, const struct zlfs_mkfs_opts *o,
			   struct zlfs_sb_info *sbi)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone *zones = calloc(g->nr_zones, sizeof(*zones));
	char why[256];
	int ret;

	if (!zones)
		return -ENOMEM;
	ret = zdev_report(dev, 0, g->nr_zones, zones);
	if (!ret) {
		ret = zlfs_layout(g, zones, o, sbi, why, sizeof(why));
		if (ret)
			zlog_err("%s", why);
	}
	free(zones);
	return ret;
}

int zlfs_mkfs(struct zdev *dev, const struct zlfs_mkfs_opts *o, struct zlfs_sb_info *sbi)
{
	struct mkfs_ctx c = {.dev = dev, .sbi = sbi, .encrypt_root = o->enc && !o->plain_root};
	struct zlfs_cp_info *cp = calloc(1, sizeof(*cp));
	int ret;

	if (!cp)
		return -ENOMEM;
	ret = mkfs_layout_dev(dev, o, sbi);
	if (ret)
		goto out;
	c.now_ns = zlfs_now_ns();
	c.node_log = sbi->nr_logs >= 4 ? ZLFS_LOG_HOT_NODE : ZLFS_LOG_WARM_NODE;
	mkfs_fill_identity(sbi, o, c.now_ns);
	c.blk = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	ret = c.blk ? mkfs_reset_zones(dev, o) : -ENOMEM;
	if (!ret)
		ret = mkfs_write_root(&c);
	if (!ret)
		ret = mkfs_write_meta(&c, cp);
	if (!ret)
		ret = mkfs_write_cp(&c, cp);
	if (!ret)
		ret = zdev_flush(dev);
	if (!ret)
		ret = zlfs_sb_write(dev, sbi, -1);
	if (ret)
		zlog_err("mkfs failed: %s", strerror(-ret));
out:
	zdev_buf_free(c.blk);
	free(cp);
	return ret;
}
