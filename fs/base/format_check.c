/*
 * format_check.c - the legal range of every value decoded from a device (see format.h,
 * "Limits", and docs/format.md's table of the same name).
 *
 * Owns: the checks a block or record must pass before any layer uses what it holds - the
 * superblock's layout, a checkpoint head against that layout, NAT and SIT entries, map and
 * summary entries and node blocks by kind (names, in directory blocks and dentry marks:
 * format_names.c) - each answering 0 or -EUCLEAN
 * with one line naming the field, its value and the range it had to be in. A device is input
 * and may be hostile: a value that sizes a loop, indexes an array or shifts is refused here,
 * once, where it is decoded, so the code above may trust it.
 * May call: why.c (zlfs_why), dentry_inline.c (an inline directory's inode), xxHash, libc.
 * Pure functions of the superblock and the block: the daemon, fsck,
 * mkfs and the tests share them.
 */
#include "format_int.h"

#include <xxhash.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

uint32_t zlfs_cap_blocks(const struct zlfs_sb_info *s)
{
	return (uint32_t)(s->zone_capacity / ZLFS_BLOCK_SIZE);
}

/* ---- addresses ------------------------------------------------------------------------------ */

int zlfs_addr_is_main(const struct zlfs_sb_info *s, uint32_t addr)
{
	uint32_t zb = zlfs_zone_blocks(s), zone = addr / zb, in = addr % zb;

	return zone >= s->main_zone_first && zone < s->nr_zones &&
	       in < s->segs_per_zone * s->seg_blocks && in % s->seg_blocks != s->seg_blocks - 1;
}

int zlfs_addr_is_meta(const struct zlfs_sb_info *s, uint32_t addr)
{
	uint32_t zb = zlfs_zone_blocks(s), zone = addr / zb;

	return zone >= s->meta_zone_first && zone - s->meta_zone_first < s->meta_zones &&
	       addr % zb < zlfs_cap_blocks(s);
}

int zlfs_data_ptr_ok(const struct zlfs_sb_info *s, uint32_t addr)
{
	if (addr == ZLFS_ADDR_NULL || zlfs_addr_is_main(s, addr))
		return 1;
	if (addr == ZLFS_ADDR_COMPRESSED)
		return !!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_COMPRESS);
	return addr == ZLFS_ADDR_PREALLOC && (zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_FALLOC);
}

/* ---- superblock ------------------------------------------------------------------------------ */

/* What mkfs guarantees a checkpoint zone holds: two packs of the largest size it plans for. */
#define CP_ZONE_MIN_BLOCKS (2u * (2u + ZLFS_NR_LOG_TYPES + 16u))

static int sb_check_geometry(const struct zlfs_sb_info *s, char *why, size_t len)
{
	uint64_t zone_blocks = s->zone_size / ZLFS_BLOCK_SIZE;

	if (s->block_size != ZLFS_BLOCK_SIZE)
		return RANGE(why, len, "superblock block_size", s->block_size, ZLFS_BLOCK_SIZE,
			     ZLFS_BLOCK_SIZE);
	if (!s->dev_lblock_size || ZLFS_BLOCK_SIZE % s->dev_lblock_size)
		return bad(why, len, "superblock dev_lblock_size = %u does not divide %u",
			   s->dev_lblock_size, ZLFS_BLOCK_SIZE);
	if (!zone_blocks || s->zone_size % ZLFS_BLOCK_SIZE || zone_blocks > UINT32_MAX)
		return bad(why, len, "superblock zone_size = %llu is not a whole number of blocks "
			   "below 2^32", (unsigned long long)s->zone_size);
	if (s->zone_capacity > s->zone_size || zlfs_cap_blocks(s) < CP_ZONE_MIN_BLOCKS)
		return RANGE(why, len, "superblock zone_capacity", s->zone_capacity,
			     (uint64_t)CP_ZONE_MIN_BLOCKS * ZLFS_BLOCK_SIZE, s->zone_size);
	if (!is_pow2(s->seg_blocks) || s->seg_blocks < ZLFS_SEG_BLOCKS_MIN ||
	    s->seg_blocks > ZLFS_SEG_BLOCKS_MAX)
		return bad(why, len, "superblock seg_blocks = %u is not a power of two in [%u, %u]",
			   s->seg_blocks, ZLFS_SEG_BLOCKS_MIN, ZLFS_SEG_BLOCKS_MAX);
	if (s->segs_per_zone != zlfs_cap_blocks(s) / s->seg_blocks)
		return RANGE(why, len, "superblock segs_per_zone", s->segs_per_zone,
			     zlfs_cap_blocks(s) / s->seg_blocks, zlfs_cap_blocks(s) / s->seg_blocks);
	return 0;
}

/* The zones in the order mkfs lays them out: [SB0][SB1][CP0][CP1][META...][MAIN...]. */
static int sb_check_zones(const struct zlfs_sb_info *s, char *why, size_t len)
{
	uint64_t main_end = (uint64_t)s->main_zone_first + s->main_zones;
	uint32_t first = s->sb_zone[0];

	if (s->nr_conv > first)
		return RANGE(why, len, "superblock nr_conv", s->nr_conv, 0, first);
	if (s->sb_zone[1] != first + 1 || s->cp_zone[0] != first + 2 || s->cp_zone[1] != first + 3)
		return bad(why, len, "superblock zones sb_zone {%u, %u}, cp_zone {%u, %u} are not the "
			   "four zones from %u on", s->sb_zone[0], s->sb_zone[1], s->cp_zone[0],
			   s->cp_zone[1], first);
	if ((uint64_t)s->meta_zone_first != (uint64_t)first + 4)
		return RANGE(why, len, "superblock meta_zone_first", s->meta_zone_first,
			     (uint64_t)first + 4, (uint64_t)first + 4);
	if (s->meta_zones < 2 || s->meta_zones % 2)
		return bad(why, len, "superblock meta_zones = %u is not an even count of at least 2",
			   s->meta_zones);
	if ((uint64_t)s->main_zone_first != (uint64_t)s->meta_zone_first + s->meta_zones)
		return RANGE(why, len, "superblock main_zone_first", s->main_zone_first,
			     (uint64_t)s->meta_zone_first + s->meta_zones,
			     (uint64_t)s->meta_zone_first + s->meta_zones);
	if (!s->main_zones || main_end != s->nr_zones)
		return bad(why, len, "superblock main_zones = %u does not end the layout at nr_zones "
			   "= %u", s->main_zones, s->nr_zones);
	if (main_end * zlfs_zone_blocks(s) > ZLFS_MAX_BLOCKS)
		return bad(why, len, "superblock nr_zones = %u of %u blocks passes the 2^32-block "
			   "limit", s->nr_zones, zlfs_zone_blocks(s));
	return 0;
}

static int sb_check_tables(const struct zlfs_sb_info *s, char *why, size_t len)
{
	uint64_t segs = (uint64_t)s->main_zones * s->segs_per_zone;
	uint64_t meta = (uint64_t)s->nat_blocks + s->sit_blocks;
	uint64_t map = (meta + ZLFS_MAP_PER_BLOCK - 1) / ZLFS_MAP_PER_BLOCK;
	uint64_t half = (uint64_t)s->meta_zones / 2 * zlfs_cap_blocks(s);
	/* with PACKED_INODES a nid must leave the NAT's slot bits free */
	uint32_t max_nid = zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_PACKED_INODES ? ZLFS_MAX_NID_PACKED
									       : ZLFS_MAX_NID;

	if (!zlfs_nr_logs_valid(s->nr_logs, s->revision < zlfs_reader_revision() ?
						   s->revision : zlfs_reader_revision()))
		return bad(why, len, "superblock nr_logs = %u is not a layout of revision %u",
			   s->nr_logs, s->revision);
	if (s->ovp_percent >= 50)
		return RANGE(why, len, "superblock ovp_percent", s->ovp_percent, 0, 49);
	if ((uint64_t)s->nr_logs + s->reserved_zones + 1 > s->main_zones)
		return RANGE(why, len, "superblock reserved_zones", s->reserved_zones, 0,
			     s->main_zones > s->nr_logs ? s->main_zones - s->nr_logs - 1 : 0);
	if (s->root_ino != ZLFS_ROOT_INO)
		return RANGE(why, len, "superblock root_ino", s->root_ino, ZLFS_ROOT_INO,
			     ZLFS_ROOT_INO);
	if (s->max_nid <= s->root_ino || s->max_nid > max_nid ||
	    (uint64_t)s->nat_blocks * ZLFS_NAT_PER_BLOCK < s->max_nid)
		return RANGE(why, len, "superblock max_nid", s->max_nid, s->root_ino + 1,
			     (uint64_t)s->nat_blocks * ZLFS_NAT_PER_BLOCK < max_nid ?
				     (uint64_t)s->nat_blocks * ZLFS_NAT_PER_BLOCK : max_nid);
	if ((uint64_t)s->nat_blocks > ((uint64_t)s->max_nid + ZLFS_NAT_PER_BLOCK - 1) /
					      ZLFS_NAT_PER_BLOCK)
		return RANGE(why, len, "superblock nat_blocks", s->nat_blocks, 1,
			     ((uint64_t)s->max_nid + ZLFS_NAT_PER_BLOCK - 1) / ZLFS_NAT_PER_BLOCK);
	if ((uint64_t)s->sit_blocks != (segs + ZLFS_SIT_PER_BLOCK - 1) / ZLFS_SIT_PER_BLOCK)
		return RANGE(why, len, "superblock sit_blocks", s->sit_blocks,
			     (segs + ZLFS_SIT_PER_BLOCK - 1) / ZLFS_SIT_PER_BLOCK,
			     (segs + ZLFS_SIT_PER_BLOCK - 1) / ZLFS_SIT_PER_BLOCK);
	if (map > ZLFS_CP_MAP_MAX)
		return bad(why, len, "superblock nat_blocks + sit_blocks = %llu need %llu map blocks, "
			   "more than %u", (unsigned long long)meta, (unsigned long long)map,
			   ZLFS_CP_MAP_MAX);
	/* Each half of the meta area holds every meta block twice (docs/format.md): a smaller one
	 * could not take a checkpoint after switching halves. */
	if (half < 2 * (meta + map))
		return bad(why, len, "superblock meta_zones = %u hold %llu blocks a half, fewer than "
			   "twice the %llu meta and map blocks", s->meta_zones,
			   (unsigned long long)half, (unsigned long long)(meta + map));
	return 0;
}

/* Encryption parameters are live only with the feature; scrypt's cost must stay within what
 * mkfs offers, or a crafted superblock would make a mount spend hours or gigabytes. */
static int sb_check_encryption(const struct zlfs_sb_info *s, char *why, size_t len)
{
	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_ENCRYPT))
		return 0;
	if (s->enc_kdf != 1 && s->enc_kdf != 2)
		return RANGE(why, len, "superblock enc_kdf", s->enc_kdf, 1, 2);
	if (s->enc_kdf != 2)
		return 0;
	if (!is_pow2(s->scrypt_n) || s->scrypt_n < 2 || s->scrypt_n > ZLFS_SCRYPT_N_MAX)
		return bad(why, len, "superblock scrypt_n = %llu is not a power of two in [2, %llu]",
			   (unsigned long long)s->scrypt_n, (unsigned long long)ZLFS_SCRYPT_N_MAX);
	if (!s->scrypt_r || !s->scrypt_p || s->scrypt_r > ZLFS_SCRYPT_RP_MAX ||
	    s->scrypt_p > ZLFS_SCRYPT_RP_MAX ||
	    s->scrypt_n * 128 * s->scrypt_r > ZLFS_SCRYPT_MEM_MAX)
		return bad(why, len, "superblock scrypt_r = %u, scrypt_p = %u: out of range [1, %u] "
			   "or more than %llu MiB with scrypt_n = %llu", s->scrypt_r, s->scrypt_p,
			   ZLFS_SCRYPT_RP_MAX, (unsigned long long)(ZLFS_SCRYPT_MEM_MAX >> 20),
			   (unsigned long long)s->scrypt_n);
	return 0;
}

/* Compression's defaults (read only with the feature): an algorithm or none, and a cluster
 * size a file may have. */
static int sb_check_compress(const struct zlfs_sb_info *s, char *why, size_t len)
{
	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_COMPRESS))
		return 0;
	if (s->compress_alg >= ZLFS_CLUSTER_ALG_MAX)
		return RANGE(why, len, "superblock compress_alg", s->compress_alg, 0,
			     ZLFS_CLUSTER_ALG_MAX - 1);
	if (s->cluster_log < ZLFS_CLUSTER_LOG_MIN || s->cluster_log > ZLFS_CLUSTER_LOG_MAX)
		return RANGE(why, len, "superblock cluster_log", s->cluster_log, ZLFS_CLUSTER_LOG_MIN,
			     ZLFS_CLUSTER_LOG_MAX);
	if (s->compress_pad)
		return RANGE(why, len, "superblock compress_pad", s->compress_pad, 0, 0);
	return 0;
}

int zlfs_sb_check_layout(const struct zlfs_sb_info *s, char *why, size_t len)
{
	int ret = sb_check_geometry(s, why, len);

	if (!ret)
		ret = sb_check_zones(s, why, len);
	if (!ret)
		ret = sb_check_tables(s, why, len);
	if (!ret)
		ret = sb_check_encryption(s, why, len);
	if (!ret)
		ret = sb_check_compress(s, why, len);
	return ret;
}

/* ---- checkpoint head -------------------------------------------------------------------------- */

int zlfs_log_active(uint32_t nr_logs, uint32_t type)
{
	if (type >= ZLFS_NR_LOG_TYPES)
		return 0;
	if (nr_logs >= ZLFS_NR_LOG_TYPES)
		return 1;
	if (nr_logs == ZLFS_NR_LOG_TYPES_R2)
		return type < ZLFS_NR_LOG_TYPES_R2;
	if (nr_logs == 6)
		return type < ZLFS_NR_LOG_TYPES_R1;
	if (nr_logs == 4)
		return type == ZLFS_LOG_HOT_NODE || type == ZLFS_LOG_WARM_NODE ||
		       type == ZLFS_LOG_HOT_DATA || type == ZLFS_LOG_WARM_DATA;
	return type == ZLFS_LOG_WARM_NODE || type == ZLFS_LOG_WARM_DATA;
}

static int cp_check_log(const struct zlfs_sb_info *s, const struct zlfs_cp_info *c, uint32_t t,
			char *why, size_t len)
{
	uint32_t zone = c->logs[t].zone, blocks = s->segs_per_zone * s->seg_blocks, u;

	if (zone == ZLFS_ZONE_NONE)
		return 0;
	if (!zlfs_log_active(s->nr_logs, t))
		return bad(why, len, "checkpoint log %u has zone %u, but a layout of %u logs has no "
			   "such log", t, zone, s->nr_logs);
	if (zone < s->main_zone_first || zone >= s->nr_zones)
		return RANGE(why, len, "checkpoint log zone", zone, s->main_zone_first,
			     s->nr_zones - 1);
	if (c->logs[t].next_blk > blocks)
		return RANGE(why, len, "checkpoint log next_blk", c->logs[t].next_blk, 0, blocks);
	/* A count of the open segment's summary entries that nothing indexes by: bounded only
	 * by the summary (images written before the mount trimmed it may carry a stale one). */
	if (c->logs[t].nr_entries > ZLFS_SUM_ENTRIES)
		return RANGE(why, len, "checkpoint log nr_entries", c->logs[t].nr_entries, 0,
			     ZLFS_SUM_ENTRIES);
	for (u = 0; u < t; u++)
		if (c->logs[u].zone == zone)
			return bad(why, len, "checkpoint logs %u and %u both append to zone %u", u, t,
				   zone);
	return 0;
}

static int cp_check_counts(const struct zlfs_sb_info *s, const struct zlfs_cp_info *c,
			   char *why, size_t len)
{
	uint64_t blocks = (uint64_t)s->main_zones * s->segs_per_zone * (s->seg_blocks - 1);
	int falloc = !!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_FALLOC);

	if (c->valid_nodes > s->max_nid || c->valid_inodes > c->valid_nodes)
		return bad(why, len, "checkpoint valid_inodes = %llu, valid_nodes = %llu: more than "
			   "max_nid = %u or more inodes than nodes",
			   (unsigned long long)c->valid_inodes, (unsigned long long)c->valid_nodes,
			   s->max_nid);
	if (c->prealloc_blocks > (falloc ? blocks : 0))
		return RANGE(why, len, "checkpoint prealloc_blocks", c->prealloc_blocks, 0,
			     falloc ? blocks : 0);
	if (c->nr_remaps && !falloc)
		return RANGE(why, len, "checkpoint nr_remaps", c->nr_remaps, 0, 0);
	if (c->nr_orphan_blocks !=
	    (c->nr_orphans + ZLFS_ORPHANS_PER_BLOCK - 1) / ZLFS_ORPHANS_PER_BLOCK)
		return bad(why, len, "checkpoint nr_orphans = %u does not fill nr_orphan_blocks = %u",
			   c->nr_orphans, c->nr_orphan_blocks);
	if (c->nr_remap_blocks != (c->nr_remaps + ZLFS_REMAPS_PER_BLOCK - 1) / ZLFS_REMAPS_PER_BLOCK)
		return bad(why, len, "checkpoint nr_remaps = %u does not fill nr_remap_blocks = %u",
			   c->nr_remaps, c->nr_remap_blocks);
	return 0;
}

int zlfs_cp_check(const struct zlfs_sb_info *s, const struct zlfs_cp_info *c, char *why,
		  size_t len)
{
	uint64_t meta = (uint64_t)s->nat_blocks + s->sit_blocks;
	uint32_t t, i, nsum = 0;
	int ret;

	if (c->flags & ~(ZLFS_CP_CLEAN | ZLFS_CP_ORPHANS | ZLFS_CP_FSCK))
		return bad(why, len, "checkpoint flags = 0x%x has unknown bits", c->flags);
	if (c->nr_logs != s->nr_logs)
		return RANGE(why, len, "checkpoint nr_logs", c->nr_logs, s->nr_logs, s->nr_logs);
	for (t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		ret = cp_check_log(s, c, t, why, len);
		if (ret)
			return ret;
		nsum += c->logs[t].zone != ZLFS_ZONE_NONE && c->logs[t].next_blk % s->seg_blocks;
	}
	if (c->nr_summaries > nsum)
		return RANGE(why, len, "checkpoint nr_summaries", c->nr_summaries, 0, nsum);
	if (c->meta_zone < s->meta_zone_first || c->meta_zone - s->meta_zone_first >= s->meta_zones)
		return RANGE(why, len, "checkpoint meta_zone", c->meta_zone, s->meta_zone_first,
			     s->meta_zone_first + s->meta_zones - 1);
	if (c->meta_next_blk > zlfs_cap_blocks(s))
		return RANGE(why, len, "checkpoint meta_next_blk", c->meta_next_blk, 0,
			     zlfs_cap_blocks(s));
	if (c->nr_map != (meta + ZLFS_MAP_PER_BLOCK - 1) / ZLFS_MAP_PER_BLOCK)
		return RANGE(why, len, "checkpoint nr_map", c->nr_map,
			     (meta + ZLFS_MAP_PER_BLOCK - 1) / ZLFS_MAP_PER_BLOCK,
			     (meta + ZLFS_MAP_PER_BLOCK - 1) / ZLFS_MAP_PER_BLOCK);
	for (i = 0; i < c->nr_map; i++)
		if (c->map_addr[i] != ZLFS_ADDR_NULL && !zlfs_addr_is_meta(s, c->map_addr[i]))
			return bad(why, len, "checkpoint map_addr[%u] = %u is not a block of the meta "
				   "area", i, c->map_addr[i]);
	if (c->pack_blocks > zlfs_cap_blocks(s))
		return RANGE(why, len, "checkpoint pack_blocks", c->pack_blocks, 2,
			     zlfs_cap_blocks(s));
	return cp_check_counts(s, c, why, len);
}

/* ---- table entries ------------------------------------------------------------------------------ */

int zlfs_nat_entry_check(const struct zlfs_sb_info *s, uint32_t nid, uint32_t addr, uint32_t ino,
			 char *why, size_t len)
{
	if (addr == ZLFS_ADDR_NULL)
		return 0;
	if (nid == ZLFS_NID_NULL || nid >= s->max_nid)
		return bad(why, len, "NAT entry of nid %u (outside [1, %u)) holds block %u", nid,
			   s->max_nid, addr);
	if (!zlfs_addr_is_main(s, addr))
		return bad(why, len, "NAT entry of nid %u: blkaddr = %u is not a block of the main "
			   "area", nid, addr);
	if ((zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_PACKED_INODES) && ino >> ZLFS_NAT_SLOT_SHIFT) {
		uint32_t slot1 = ino >> ZLFS_NAT_SLOT_SHIFT;

		if (slot1 > ZLFS_PACK_SLOTS || (ino & ZLFS_NAT_INO_MASK) != nid)
			return bad(why, len, "NAT entry of nid %u: ino = 0x%x names slot %u of an "
				   "inode pack (slots 0-%u, of inodes only: low bits = the nid)", nid,
				   ino, slot1 - 1, ZLFS_PACK_SLOTS - 1);
		ino &= ZLFS_NAT_INO_MASK;
	}
	if (ino == ZLFS_NID_NULL || ino >= s->max_nid)
		return RANGE(why, len, "NAT entry ino", ino, 1, s->max_nid - 1);
	return 0;
}

int zlfs_sit_entry_check(const struct zlfs_sb_info *s, uint32_t segno, const struct zlfs_sit_entry *e,
			 char *why, size_t len)
{
	uint64_t segs = (uint64_t)s->main_zones * s->segs_per_zone;
	uint32_t valid = le16_get(e->valid), b;

	if (segno >= segs) /* past the last segment: written as free, read as free */
		return 0;
	if (valid > s->seg_blocks - 1)
		return RANGE(why, len, "SIT entry valid", valid, 0, s->seg_blocks - 1);
	if (e->log >= ZLFS_NR_LOG_TYPES && e->log != ZLFS_LOG_NONE)
		return bad(why, len, "SIT entry of segment %u: log = %u is no log type", segno,
			   e->log);
	/* Bits past the segment's data blocks would be counted by no one and freed by no one. */
	for (b = s->seg_blocks - 1; b < ZLFS_SEG_BLOCKS_MAX; b++)
		if (e->bitmap[b / 8] & (1u << (b % 8)))
			return bad(why, len, "SIT entry of segment %u: bitmap bit %u is past the "
				   "segment's %u data blocks", segno, b, s->seg_blocks - 1);
	return 0;
}

int zlfs_sum_entry_check(const struct zlfs_sb_info *s, uint32_t nid, uint16_t ofs, char *why,
			 size_t len)
{
	if (nid >= s->max_nid)
		return RANGE(why, len, "summary entry nid", nid, 0, s->max_nid - 1);
	if (ofs == ZLFS_SUM_PACK && nid == ZLFS_NID_NULL &&
	    (zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_PACKED_INODES))
		return 0;
	if (ofs != ZLFS_SUM_NODE && ofs >= ZLFS_NODE_ADDRS)
		return bad(why, len, "summary entry ofs = %u is neither a slot below %u nor 0x%x", ofs,
			   ZLFS_NODE_ADDRS, ZLFS_SUM_NODE);
	return 0;
}

/* ---- node blocks ------------------------------------------------------------------------------ */

#define NA ((uint64_t)ZLFS_NODE_ADDRS)

/* Node offsets (data.c's tree): 0 the inode, 1-2 its direct nodes, 3-4 its indirect nodes,
 * then the indirect nodes' direct children, the double-indirect node, its indirect children
 * and theirs. */
static int ofs_is_dnode(uint64_t o)
{
	return o == 1 || o == 2 || (o >= 5 && o < 5 + 2 * NA) ||
	       (o >= 6 + 3 * NA && o < 6 + 3 * NA + NA * NA);
}

static int ofs_is_indnode(uint64_t o)
{
	return o == 3 || o == 4 || o == 5 + 2 * NA || (o >= 6 + 2 * NA && o < 6 + 3 * NA);
}

static int nid_ok(const struct zlfs_sb_info *s, uint32_t nid)
{
	return nid == ZLFS_NID_NULL || nid < s->max_nid;
}

static int mode_ok(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO:
	case S_IFSOCK:
		return 1;
	}
	return 0;
}

static const char *special_addr_hint(uint32_t addr)
{
	if (addr == ZLFS_ADDR_PREALLOC)
		return " (a reservation, but the fallocate feature is off)";
	if (addr == ZLFS_ADDR_COMPRESSED)
		return " (a compressed cluster's marker, but the compression feature is off)";
	return "";
}

static int data_ptrs_check(const struct zlfs_sb_info *s, const le32 *p, uint32_t n,
			   const char *what, char *why, size_t len)
{
	for (uint32_t i = 0; i < n; i++) /* most are null: no call for those */
		if (p[i] && !zlfs_data_ptr_ok(s, le32_get(p[i])))
			return bad(why, len, "%s[%u] = %u is not a data block of the main area%s", what,
				   i, le32_get(p[i]), special_addr_hint(le32_get(p[i])));
	return 0;
}

/* ---- compressed clusters ------------------------------------------------------------------- */

/* One cluster's 2^LOG slots: raw, or the marker, k >= 1 blocks and nulls. */
static int cluster_check(const struct zlfs_sb_info *s, uint32_t log, const le32 *c,
			 uint32_t first, const char *what, char *why, size_t len)
{
	uint32_t n = 1u << log, i = 1;

	if (le32_get(c[0]) != ZLFS_ADDR_COMPRESSED) {
		for (; i < n; i++)
			if (le32_get(c[i]) == ZLFS_ADDR_COMPRESSED)
				return bad(why, len, "%s[%u]: a compressed cluster's marker in slot %u of "
					   "its cluster (only the first may hold it)", what, first + i, i);
		return 0;
	}
	while (i < n && zlfs_addr_is_main(s, le32_get(c[i])))
		i++;
	if (i == 1)
		return bad(why, len, "%s[%u]: a compressed cluster with no stored block", what,
			   first);
	for (; i < n; i++)
		if (c[i])
			return bad(why, len, "%s[%u] = %u: a compressed cluster's slots after its "
				   "stored blocks must be null", what, first + i, le32_get(c[i]));
	return 0;
}

int zlfs_cluster_slots_check(const struct zlfs_sb_info *s, uint32_t log, const le32 *slots,
			     uint32_t n, const char *what, char *why, size_t len)
{
	uint32_t i;
	int ret;

	if (log < ZLFS_CLUSTER_LOG_MIN || log > ZLFS_CLUSTER_LOG_MAX || n % (1u << log))
		return bad(why, len, "%s: %u slots are no whole number of clusters of 2^%u blocks",
			   what, n, log);
	for (i = 0; i < n; i += 1u << log) {
		ret = cluster_check(s, log, slots + i, i, what, why, len);
		if (ret)
			return ret;
	}
	return 0;
}

int zlfs_cluster_hdr_check(const struct zlfs_cluster_hdr *h, uint32_t log, uint32_t k, char *why,
			   size_t len)
{
	uint32_t clen = le32_get(h->clen);

	if (le16_get(h->magic) != ZLFS_CLUSTER_MAGIC)
		return bad(why, len, "cluster header magic = 0x%04x, expected 0x%04x",
			   le16_get(h->magic), ZLFS_CLUSTER_MAGIC);
	if (!h->alg || h->alg >= ZLFS_CLUSTER_ALG_MAX)
		return RANGE(why, len, "cluster header alg", h->alg, 1, ZLFS_CLUSTER_ALG_MAX - 1);
	if (log < ZLFS_CLUSTER_LOG_MIN || log > ZLFS_CLUSTER_LOG_MAX || h->log != log)
		return RANGE(why, len, "cluster header log", h->log, log, log);
	if (!k || k >= 1u << log)
		return RANGE(why, len, "cluster stored blocks", k, 1, (1u << log) - 1);
	/* the writer stores the fewest blocks that hold the data: any other k is damage */
	if (!clen || clen > ZLFS_CLUSTER_CLEN_MAX(k) ||
	    (k > 1 && clen <= ZLFS_CLUSTER_CLEN_MAX(k - 1)))
		return RANGE(why, len, "cluster header clen", clen,
			     k > 1 ? ZLFS_CLUSTER_CLEN_MAX(k - 1) + 1 : 1, ZLFS_CLUSTER_CLEN_MAX(k));
	return 0;
}

/* The first byte of P[I, N) that is not zero, or N. Eight bytes a step: fsck checks every
 * inode, and an empty file's is 3,908 zero bytes (a byte loop was half of fsck's time). */
static uint32_t first_nonzero(const uint8_t *p, uint32_t i, uint32_t n)
{
	uint64_t w[4];

	while (i + sizeof(w) <= n && (memcpy(w, p + i, sizeof(w)), !(w[0] | w[1] | w[2] | w[3])))
		i += sizeof(w);
	while (i < n && !p[i])
		i++;
	return i;
}

/* An inline regular file (INLINE_DATA feature): bytes [0, size) in addr[], nothing else
 * mapped, and the rest of the area zero, so that growing it in place reads zeros. */
static int inode_check_inline_file(const struct zlfs_sb_info *s, const struct zlfs_inode *in,
				   char *why, size_t len)
{
	uint32_t stored = le32_get(in->inline_size), i;
	uint64_t size = le64_get(in->size);
	const uint8_t *area = (const uint8_t *)in->addr;

	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_INLINE_DATA))
		return bad(why, len, "inode flags: inline data in a regular file on a filesystem "
			   "without the INLINE_DATA feature");
	if (le32_get(in->flags) & ZLFS_IFLAG_ENCRYPT)
		return bad(why, len, "inode flags: inline data in an encrypted file");
	if (stored > ZLFS_INLINE_MAX)
		return RANGE(why, len, "inode inline_size", stored, 0, ZLFS_INLINE_MAX);
	if (size != stored)
		return RANGE(why, len, "inode size of an inline file", size, stored, stored);
	if (le64_get(in->blocks))
		return RANGE(why, len, "inode blocks of an inline file", le64_get(in->blocks), 0, 0);
	for (i = 0; i < ZLFS_INODE_NIDS; i++)
		if (le32_get(in->nid[i]))
			return RANGE(why, len, "inode nid[] of an inline file", le32_get(in->nid[i]),
				     0, 0);
	i = first_nonzero(area, stored, ZLFS_INLINE_MAX);
	if (i < ZLFS_INLINE_MAX)
		return bad(why, len, "inode addr: byte %u of an inline file of %u bytes is "
			   "not zero (the area past the size must be)", i, stored);
	return 0;
}

static int inode_check_inline(const struct zlfs_sb_info *s, const struct zlfs_inode *in,
			      char *why, size_t len)
{
	uint32_t mode = le32_get(in->mode), stored = le32_get(in->inline_size);
	uint64_t size = le64_get(in->size);

	if (S_ISREG(mode))
		return inode_check_inline_file(s, in, why, len);
	if (!S_ISLNK(mode))
		return bad(why, len, "inode flags: inline data on a file of mode 0%o (only symlinks "
			   "and regular files keep data inline)", mode);
	if (stored > ZLFS_INLINE_MAX)
		return RANGE(why, len, "inode inline_size", stored, 0, ZLFS_INLINE_MAX);
	/* An encrypted target is stored padded: at least as long as the target. */
	if (size > stored || !size)
		return RANGE(why, len, "inode size of an inline symlink", size, 1, stored);
	return 0;
}

/* The COMPRESS flag and its fields: a regular file, not inline (compressed), or a directory
 * (what its new files inherit), on a filesystem with the feature, with a known algorithm and
 * cluster size; without the flag the fields are zero. */
static int inode_check_compress(const struct zlfs_sb_info *s, const struct zlfs_inode *in,
				char *why, size_t len)
{
	uint32_t flags = le32_get(in->flags), log = in->cluster_log;

	if (!(flags & ZLFS_IFLAG_COMPRESS)) {
		if (in->compress_alg || log || in->compress_pad)
			return bad(why, len, "inode compress_alg = %u, cluster_log = %u, compress_pad "
				   "= %u on a file without the COMPRESS flag (must be 0)",
				   in->compress_alg, log, le16_get(in->compress_pad));
		return 0;
	}
	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_COMPRESS))
		return bad(why, len, "inode flags: compressed on a filesystem without the COMPRESS "
			   "feature");
	if ((!S_ISREG(le32_get(in->mode)) && !S_ISDIR(le32_get(in->mode))) ||
	    (flags & ZLFS_IFLAG_INLINE))
		return bad(why, len, "inode flags: COMPRESS on a file of mode 0%o%s (only regular "
			   "files with blocks and directories have it)", le32_get(in->mode),
			   (flags & ZLFS_IFLAG_INLINE) ? " with INLINE" : "");
	if (!in->compress_alg || in->compress_alg >= ZLFS_CLUSTER_ALG_MAX)
		return RANGE(why, len, "inode compress_alg", in->compress_alg, 1,
			     ZLFS_CLUSTER_ALG_MAX - 1);
	if (log < ZLFS_CLUSTER_LOG_MIN || log > ZLFS_CLUSTER_LOG_MAX)
		return RANGE(why, len, "inode cluster_log", log, ZLFS_CLUSTER_LOG_MIN,
			     ZLFS_CLUSTER_LOG_MAX);
	if (le16_get(in->compress_pad))
		return RANGE(why, len, "inode compress_pad", le16_get(in->compress_pad), 0, 0);
	return 0;
}

/* The inode's own slots: whole clusters in a compressed file, the slots past them null; no
 * marker in any other file. (A direct node's are checked where its file is known: fsck.) */
static int inode_check_clusters(const struct zlfs_sb_info *s, const struct zlfs_inode *in,
				char *why, size_t len)
{
	uint32_t i, used = ZLFS_INODE_ADDRS;
	int compressed = (le32_get(in->flags) & ZLFS_IFLAG_COMPRESS) && S_ISREG(le32_get(in->mode));

	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_COMPRESS))
		return 0; /* data_ptrs_check refused the marker: no second pass over the slots */
	if (compressed) {
		used = zlfs_cluster_slots(ZLFS_INODE_ADDRS, in->cluster_log);
		if (zlfs_cluster_slots_check(s, in->cluster_log, in->addr, used, "inode addr", why,
					     len))
			return -EUCLEAN;
	}
	for (i = compressed ? used : 0; i < ZLFS_INODE_ADDRS; i++)
		if (in->addr[i] && (i >= used || le32_get(in->addr[i]) == ZLFS_ADDR_COMPRESSED))
			return bad(why, len, "inode addr[%u] = %u: %s", i, le32_get(in->addr[i]),
				   i >= used ? "past the whole clusters of a compressed file (must be "
					       "null)" : "a compressed cluster's marker in a file "
					       "without the COMPRESS flag");
	return 0;
}

static int inode_check(const struct zlfs_sb_info *s, const struct zlfs_inode *in, uint32_t nid,
		       char *why, size_t len)
{
	uint32_t mode = le32_get(in->mode), flags = le32_get(in->flags), i;

	if (le32_get(in->hdr.ino) != nid || le32_get(in->ofs) != 0)
		return bad(why, len, "inode %u: header ino = %u, ofs = %u (an inode names itself at "
			   "offset 0)", nid, le32_get(in->hdr.ino), le32_get(in->ofs));
	if (!mode_ok(mode))
		return bad(why, len, "inode mode = 0%o is no file type", mode);
	if (flags & ~(ZLFS_IFLAG_INLINE | ZLFS_IFLAG_ENCRYPT | ZLFS_IFLAG_ORPHAN |
		      ZLFS_IFLAG_COMPRESS | ZLFS_IFLAG_ATTR | ZLFS_IFLAG_INLINE_DENTRY))
		return bad(why, len, "inode flags = 0x%x has unknown bits", flags);
	if ((flags & ZLFS_IFLAG_ATTR) && !(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_ATTR_FLAGS))
		return bad(why, len, "inode flags = 0x%x: chattr flags on a filesystem without "
			   "them", flags);
	if (inode_check_compress(s, in, why, len))
		return -EUCLEAN;
	if ((flags & ZLFS_IFLAG_ENCRYPT) && !(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_ENCRYPT))
		return bad(why, len, "inode flags: encrypted on a filesystem without encryption");
	if (le64_get(in->size) > ZLFS_FILE_MAX_BYTES)
		return RANGE(why, len, "inode size", le64_get(in->size), 0, ZLFS_FILE_MAX_BYTES);
	if (!nid_ok(s, le32_get(in->xattr_nid)))
		return RANGE(why, len, "inode xattr_nid", le32_get(in->xattr_nid), 0, s->max_nid - 1);
	if (S_ISDIR(mode) && le32_get(in->dir_depth) > ZLFS_DIR_DEPTH_MAX)
		return RANGE(why, len, "inode dir_depth", le32_get(in->dir_depth), 0,
			     ZLFS_DIR_DEPTH_MAX);
	if (S_ISDIR(mode) && (!le32_get(in->parent_ino) || !nid_ok(s, le32_get(in->parent_ino))))
		return RANGE(why, len, "inode parent_ino", le32_get(in->parent_ino), 1,
			     s->max_nid - 1);
	if (S_ISDIR(mode) && le32_get(in->dir_entries) > ZLFS_DIR_ENTRIES_MAX)
		return RANGE(why, len, "inode dir_entries", le32_get(in->dir_entries), 0,
			     ZLFS_DIR_ENTRIES_MAX);
	if (flags & ZLFS_IFLAG_INLINE_DENTRY) /* its entries: dir_cache.c, as a block's */
		return zlfs_inode_check_inline_dentry(s, in, why, len);
	if (flags & ZLFS_IFLAG_INLINE)
		return inode_check_inline(s, in, why, len);
	for (i = 0; i < ZLFS_INODE_NIDS; i++)
		if (!nid_ok(s, le32_get(in->nid[i])))
			return bad(why, len, "inode nid[%u] = %u, out of range [0, %u]", i,
				   le32_get(in->nid[i]), s->max_nid - 1);
	if (data_ptrs_check(s, in->addr, ZLFS_INODE_ADDRS, "inode addr", why, len))
		return -EUCLEAN;
	return inode_check_clusters(s, in, why, len);
}

/* An entry whose value lives in value nodes (XATTR_NODES): {le32 nid, le32 size}. */
static int xattr_external_check(const struct zlfs_sb_info *s, const uint8_t *v, uint32_t vlen,
				char *why, size_t len)
{
	le32 raw[2];
	uint32_t nid, size;

	if (vlen != ZLFS_XATTR_EXT_LEN)
		return RANGE(why, len, "xattr entry value_size of an external value", vlen,
			     ZLFS_XATTR_EXT_LEN, ZLFS_XATTR_EXT_LEN);
	memcpy(raw, v, sizeof(raw));
	nid = le32_get(raw[0]);
	size = le32_get(raw[1]);
	if (!nid || !nid_ok(s, nid))
		return RANGE(why, len, "xattr entry value nid", nid, 1, s->max_nid - 1);
	if (!size || size > ZLFS_XATTR_VALUE_MAX)
		return RANGE(why, len, "xattr entry value size", size, 1, ZLFS_XATTR_VALUE_MAX);
	return 0;
}

/* Packed entries {u8 index, u8 name_len, le16 value_size, name, value} in DATA, USED of SPACE
 * bytes, that fill exactly what is used. */
static int xattr_entries_check(const struct zlfs_sb_info *s, const uint8_t *data, uint32_t used,
			       uint32_t space, char *why, size_t len)
{
	int chain = !!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_XATTR_NODES);
	uint32_t off = 0;

	if (used > space)
		return RANGE(why, len, "xattr node used", used, 0, space);
	while (off + 4 <= used) {
		const uint8_t *e = data + off;
		uint32_t vlen = (uint32_t)(e[2] | e[3] << 8), size = (4u + e[1] + vlen + 3) & ~3u;
		uint32_t index = chain ? e[0] & ~ZLFS_XATTR_EXTERNAL : e[0];

		if (!index || !e[1] || off + size > used ||
		    index > ((zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_POSIX_ACL) ? ZLFS_XATTR_INDEX_ACL
										: ZLFS_XATTR_INDEX_MAX))
			return bad(why, len, "xattr node: the entry at byte %u (index %u, name_len %u, "
				   "value_size %u) does not fit the %u bytes used", off, e[0], e[1],
				   vlen, used);
		if (memchr(e + 4, 0, e[1])) /* no name given through the API holds one */
			return bad(why, len, "xattr node: the name of the entry at byte %u holds a NUL",
				   off);
		if (chain && (e[0] & ZLFS_XATTR_EXTERNAL) &&
		    xattr_external_check(s, e + 4 + e[1], vlen, why, len))
			return -EUCLEAN;
		off += size;
	}
	if (off != used)
		return bad(why, len, "xattr node: entries end at byte %u, used = %u", off, used);
	return 0;
}

/* An xattr node of a chain or a value node (XATTR_NODES): place, link and fill. */
static int xattr_node_check(const struct zlfs_sb_info *s, const struct zlfs_xattr_node *x,
			    char *why, size_t len)
{
	int value = le16_get(x->hdr.kind) == ZLFS_KIND_XVALUE;
	uint32_t ofs = le32_get(x->ofs), used = le32_get(x->used), next = le32_get(x->next);

	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_XATTR_NODES))
		return bad(why, len, "xattr value node on a filesystem without the XATTR_NODES "
			   "feature");
	if (ofs >= (value ? ZLFS_XVALUE_NODES_MAX : ZLFS_XATTR_NODES_MAX))
		return RANGE(why, len, value ? "xattr value node ofs" : "xattr node ofs", ofs, 0,
			     (value ? ZLFS_XVALUE_NODES_MAX : ZLFS_XATTR_NODES_MAX) - 1);
	if (!nid_ok(s, next))
		return RANGE(why, len, value ? "xattr value node next" : "xattr node next", next, 0,
			     s->max_nid - 1);
	if (le32_get(x->reserved))
		return RANGE(why, len, "xattr node reserved", le32_get(x->reserved), 0, 0);
	if (!value)
		return xattr_entries_check(s, x->data, used, ZLFS_XATTR_NODE_SPACE, why, len);
	if (!used || used > ZLFS_XATTR_NODE_SPACE || (next && used != ZLFS_XATTR_NODE_SPACE))
		return RANGE(why, len, "xattr value node used", used, next ? ZLFS_XATTR_NODE_SPACE : 1,
			     ZLFS_XATTR_NODE_SPACE);
	return 0;
}

static int xattr_check(const struct zlfs_sb_info *s, const void *blk, char *why, size_t len)
{
	const struct zlfs_xattr_block *x = blk;

	if (zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_XATTR_NODES)
		return xattr_node_check(s, blk, why, len);
	return xattr_entries_check(s, x->data, le32_get(x->used), sizeof(x->data), why, len);
}

int zlfs_node_check(const struct zlfs_sb_info *s, uint32_t nid, const void *blk, char *why,
		    size_t len)
{
	const struct zlfs_blkhdr *h = blk;
	const struct zlfs_node *n = blk;
	unsigned kind = le16_get(h->kind);
	uint32_t ino = le32_get(h->ino), ofs = le32_get(n->ofs), i;

	if (le32_get(h->index) != nid)
		return bad(why, len, "node header index = %u, expected nid %u", le32_get(h->index), nid);
	if (ino == ZLFS_NID_NULL || ino >= s->max_nid)
		return RANGE(why, len, "node header ino", ino, 1, s->max_nid - 1);
	switch (kind) {
	case ZLFS_KIND_INODE:
		return inode_check(s, blk, nid, why, len);
	case ZLFS_KIND_DNODE:
		if (!ofs_is_dnode(ofs))
			return bad(why, len, "direct node ofs = %u is no direct node's place", ofs);
		return data_ptrs_check(s, n->ptr, ZLFS_NODE_ADDRS, "direct node ptr", why, len);
	case ZLFS_KIND_INDNODE:
		if (!ofs_is_indnode(ofs))
			return bad(why, len, "indirect node ofs = %u is no indirect node's place", ofs);
		for (i = 0; i < ZLFS_NODE_ADDRS; i++)
			if (!nid_ok(s, le32_get(n->ptr[i])))
				return bad(why, len, "indirect node ptr[%u] = %u, out of range [0, %u]", i,
					   le32_get(n->ptr[i]), s->max_nid - 1);
		return 0;
	case ZLFS_KIND_XATTR:
		return xattr_check(s, blk, why, len);
	case ZLFS_KIND_XVALUE:
		return xattr_node_check(s, blk, why, len);
	}
	return bad(why, len, "block kind %u (%s) is not a node", kind, zlfs_kind_name(kind));
}

/* ---- the vocabulary the checks share with the codecs (format.c calls down to them) ------ */

const char *zlfs_kind_name(unsigned kind)
{
	static const char *const names[ZLFS_KIND_MAX] = {
		[ZLFS_KIND_SUPER] = "superblock",	[ZLFS_KIND_CP_HEAD] = "checkpoint head",
		[ZLFS_KIND_CP_SUMMARY] = "checkpoint summary", [ZLFS_KIND_CP_ORPHAN] = "orphan list",
		[ZLFS_KIND_CP_TAIL] = "checkpoint tail", [ZLFS_KIND_NAT] = "NAT",
		[ZLFS_KIND_SIT] = "SIT",		[ZLFS_KIND_MAP] = "meta map",
		[ZLFS_KIND_SUMMARY] = "segment summary", [ZLFS_KIND_INODE] = "inode",
		[ZLFS_KIND_DNODE] = "direct node",	[ZLFS_KIND_INDNODE] = "indirect node",
		[ZLFS_KIND_XATTR] = "xattr node",	[ZLFS_KIND_DENTRY] = "dentry block",
		[ZLFS_KIND_CP_REMAP] = "remap list",	[ZLFS_KIND_XVALUE] = "xattr value node",
		[ZLFS_KIND_DMARK] = "dentry mark",	[ZLFS_KIND_IPACK] = "inode pack",
	};

	if (kind >= ZLFS_KIND_MAX || !names[kind])
		return "unknown";
	return names[kind];
}

int zlfs_nr_logs_valid(uint32_t nr_logs, unsigned revision)
{
	return nr_logs == 2 || nr_logs == 4 || nr_logs == 6 ||
	       (nr_logs == ZLFS_NR_LOG_TYPES_R2 && revision >= 2) ||
	       (nr_logs == ZLFS_NR_LOG_TYPES && revision >= 3);
}

unsigned zlfs_logs_min_revision(uint32_t nr_logs)
{
	return nr_logs > ZLFS_NR_LOG_TYPES_R2 ? 3 : nr_logs > ZLFS_NR_LOG_TYPES_R1 ? 2 : 1;
}

unsigned zlfs_reader_revision(void)
{
	const char *e = getenv("ZLFS_TEST_READER_REVISION");
	char *end;
	unsigned long v;

	if (!e || !*e)
		return ZLFS_REVISION;
	v = strtoul(e, &end, 10);
	return *end || !v || v > 0xffff ? ZLFS_REVISION : (unsigned)v;
}
