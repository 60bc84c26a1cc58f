/*
 * format.c - checksums, block headers, and the superblock and checkpoint-head codecs
 * (see format.h).
 *
 * Owns: turning host-side records into sealed 4 KiB blocks and back, and refusing any block
 * that does not validate. Decoders check everything a later layer would otherwise trust:
 * magic, checksum, revision, feature bits, and that the layout stays inside the device.
 * May call: format_check.c (the ranges and the names of kinds and revisions), why.c, xxHash,
 * libc.
 */
#include "format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t zlfs_csum_seed(const uint8_t uuid[16])
{
	uint64_t a, b;

	memcpy(&a, uuid, 8);
	memcpy(&b, uuid + 8, 8);
	return le64_get(a) ^ (le64_get(b) * 0x9e3779b97f4a7c15ULL);
}

void zlfs_blk_init(void *block, enum zlfs_blk_kind kind, uint32_t index, uint32_t ino,
		   uint64_t cp_ver)
{
	struct zlfs_blkhdr *h = block;

	h->magic = le32_put(ZLFS_MAGIC);
	h->kind = le16_put((uint16_t)kind);
	h->flags = 0;
	h->index = le32_put(index);
	h->ino = le32_put(ino);
	h->cp_ver = le64_put(cp_ver);
}

uint64_t zlfs_blk_csum(const void *block, uint64_t seed)
{
	return XXH3_64bits_withSeed(block, ZLFS_CSUM_OFF, seed);
}

/* The key binds the hash to the cluster's place and to its header's other fields, so the
 * header is covered as well as the data it describes (XXH64: 64 bits a step over up to
 * 252 KiB, where XXH3's speed on 4 KiB metadata blocks does not matter). */
uint64_t zlfs_cluster_hash(const struct zlfs_cluster_hdr *h, const void *data, uint64_t seed,
			   uint32_t ino, uint64_t index)
{
	struct {
		le64 index;
		le32 ino, zero;
		uint8_t hdr[8];
	} key = {le64_put(index), le32_put(ino), 0, {0}};

	static_assert(sizeof(key) == 24, "cluster hash key size");
	static_assert(offsetof(struct zlfs_cluster_hdr, hash) == 8, "header bytes the key holds");
	memcpy(key.hdr, h, sizeof(key.hdr));
	return XXH64(data, le32_get(h->clen), XXH64(&key, sizeof(key), seed));
}

void zlfs_blk_seal(void *block, uint64_t seed)
{
	le64 c = le64_put(zlfs_blk_csum(block, seed));

	memcpy((uint8_t *)block + ZLFS_CSUM_OFF, &c, sizeof(c));
}

int zlfs_blk_verify(const void *block, uint64_t seed, enum zlfs_blk_kind kind)
{
	const struct zlfs_blkhdr *h = block;
	le64 c;

	if (le32_get(h->magic) != ZLFS_MAGIC)
		return -EUCLEAN;
	memcpy(&c, (const uint8_t *)block + ZLFS_CSUM_OFF, sizeof(c));
	if (le64_get(c) != zlfs_blk_csum(block, seed))
		return -EUCLEAN;
	if (kind != ZLFS_KIND_MAX && le16_get(h->kind) != kind)
		return -EBADMSG;
	return 0;
}

/* ---- superblock --------------------------------------------------------------------------- */

void zlfs_sb_encode(const struct zlfs_sb_info *s, void *block)
{
	struct zlfs_super *d = block;
	int i;

	memset(d, 0, sizeof(*d));
	zlfs_blk_init(d, ZLFS_KIND_SUPER, 0, 0, 0);
	d->revision = le16_put(s->revision);
	d->min_revision = le16_put(s->min_revision);
	d->feat_compat = le32_put(s->feat_compat);
	d->feat_ro_compat = le32_put(s->feat_ro_compat);
	d->feat_incompat = le32_put(s->feat_incompat);
	memcpy(d->uuid, s->uuid, sizeof(d->uuid));
	memcpy(d->label, s->label, strnlen(s->label, sizeof(d->label)));
	d->create_time = le64_put(s->create_time);
	d->sb_seq = le64_put(s->sb_seq);
	d->block_size = le32_put(s->block_size);
	d->dev_lblock_size = le32_put(s->dev_lblock_size);
	d->zone_size = le64_put(s->zone_size);
	d->zone_capacity = le64_put(s->zone_capacity);
	d->nr_zones = le32_put(s->nr_zones);
	d->nr_conv = le32_put(s->nr_conv);
	d->max_open = le32_put(s->max_open);
	d->max_active = le32_put(s->max_active);
	d->seg_blocks = le32_put(s->seg_blocks);
	d->segs_per_zone = le32_put(s->segs_per_zone);
	for (i = 0; i < 2; i++) {
		d->sb_zone[i] = le32_put(s->sb_zone[i]);
		d->cp_zone[i] = le32_put(s->cp_zone[i]);
	}
	d->meta_zone_first = le32_put(s->meta_zone_first);
	d->meta_zones = le32_put(s->meta_zones);
	d->main_zone_first = le32_put(s->main_zone_first);
	d->main_zones = le32_put(s->main_zones);
	d->nr_logs = le32_put(s->nr_logs);
	d->ovp_percent = le32_put(s->ovp_percent);
	d->reserved_zones = le32_put(s->reserved_zones);
	d->max_nid = le32_put(s->max_nid);
	d->nat_blocks = le32_put(s->nat_blocks);
	d->sit_blocks = le32_put(s->sit_blocks);
	d->root_ino = le32_put(s->root_ino);
	d->last_fsck_time = le64_put(s->last_fsck_time);
	d->enc_kdf = le32_put(s->enc_kdf);
	d->scrypt_r = le32_put(s->scrypt_r);
	d->scrypt_p = le32_put(s->scrypt_p);
	d->scrypt_n = le64_put(s->scrypt_n);
	memcpy(d->enc_salt, s->enc_salt, sizeof(d->enc_salt));
	memcpy(d->key_check, s->key_check, sizeof(d->key_check));
	d->compress_alg = (uint8_t)s->compress_alg;
	d->cluster_log = (uint8_t)s->cluster_log;
	zlfs_blk_seal(d, zlfs_csum_seed(s->uuid));
}

static void sb_decode_fields(const struct zlfs_super *d, struct zlfs_sb_info *s)
{
	int i;

	memset(s, 0, sizeof(*s));
	s->revision = le16_get(d->revision);
	s->min_revision = le16_get(d->min_revision);
	s->feat_compat = le32_get(d->feat_compat);
	s->feat_ro_compat = le32_get(d->feat_ro_compat);
	s->feat_incompat = le32_get(d->feat_incompat);
	memcpy(s->uuid, d->uuid, sizeof(s->uuid));
	memcpy(s->label, d->label, ZLFS_LABEL_MAX);
	s->label[ZLFS_LABEL_MAX] = '\0';
	s->create_time = le64_get(d->create_time);
	s->sb_seq = le64_get(d->sb_seq);
	s->block_size = le32_get(d->block_size);
	s->dev_lblock_size = le32_get(d->dev_lblock_size);
	s->zone_size = le64_get(d->zone_size);
	s->zone_capacity = le64_get(d->zone_capacity);
	s->nr_zones = le32_get(d->nr_zones);
	s->nr_conv = le32_get(d->nr_conv);
	s->max_open = le32_get(d->max_open);
	s->max_active = le32_get(d->max_active);
	s->seg_blocks = le32_get(d->seg_blocks);
	s->segs_per_zone = le32_get(d->segs_per_zone);
	for (i = 0; i < 2; i++) {
		s->sb_zone[i] = le32_get(d->sb_zone[i]);
		s->cp_zone[i] = le32_get(d->cp_zone[i]);
	}
	s->meta_zone_first = le32_get(d->meta_zone_first);
	s->meta_zones = le32_get(d->meta_zones);
	s->main_zone_first = le32_get(d->main_zone_first);
	s->main_zones = le32_get(d->main_zones);
	s->nr_logs = le32_get(d->nr_logs);
	s->ovp_percent = le32_get(d->ovp_percent);
	s->reserved_zones = le32_get(d->reserved_zones);
	s->max_nid = le32_get(d->max_nid);
	s->nat_blocks = le32_get(d->nat_blocks);
	s->sit_blocks = le32_get(d->sit_blocks);
	s->root_ino = le32_get(d->root_ino);
	s->last_fsck_time = le64_get(d->last_fsck_time);
	s->enc_kdf = le32_get(d->enc_kdf);
	s->scrypt_r = le32_get(d->scrypt_r);
	s->scrypt_p = le32_get(d->scrypt_p);
	s->scrypt_n = le64_get(d->scrypt_n);
	memcpy(s->enc_salt, d->enc_salt, sizeof(s->enc_salt));
	memcpy(s->key_check, d->key_check, sizeof(s->key_check));
	if (s->feat_incompat & ZLFS_FEAT_INCOMPAT_COMPRESS) { /* else bytes no reader looked at */
		s->compress_alg = d->compress_alg;
		s->cluster_log = d->cluster_log;
		s->compress_pad = le16_get(d->compress_pad);
	}
	s->seed = zlfs_csum_seed(s->uuid);
}

int zlfs_sb_decode(const void *block, struct zlfs_sb_info *s)
{
	const struct zlfs_super *d = block;
	int ret;

	if (le32_get(d->hdr.magic) != ZLFS_MAGIC)
		return -EUCLEAN;
	ret = zlfs_blk_verify(block, zlfs_csum_seed(d->uuid), ZLFS_KIND_SUPER);
	if (ret)
		return -EUCLEAN;
	sb_decode_fields(d, s); /* filled even when refused below: the caller explains why */
	if (zlfs_sb_compat(s, zlfs_reader_revision(), NULL, 0) < 0)
		return -EPROTONOSUPPORT;
	return zlfs_sb_check_layout(s, NULL, 0);
}

/* ---- revisions and features ------------------------------------------------------------ */

/* "0x40000001 (bits 0, 30)": the bits themselves, as docs/format.md numbers them. */
static void feat_bits(uint32_t mask, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "0x%x (bit", mask);
	const char *sep = mask & (mask - 1) ? "s " : " ";
	int b;

	for (b = 0; b < 32 && n < len; b++) {
		if (!(mask & (1u << b)))
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%d", sep, b);
		sep = ", ";
	}
	if (n < len)
		snprintf(buf + n, len - n, ")");
}

int zlfs_sb_compat(const struct zlfs_sb_info *s, unsigned reader, char *why, size_t len)
{
	uint32_t incompat = s->feat_incompat & ~ZLFS_FEAT_INCOMPAT_SUPP;
	uint32_t ro = s->feat_ro_compat & ~ZLFS_FEAT_RO_COMPAT_SUPP;
	char bits[160];

	if (why && len)
		why[0] = '\0';
	if (s->min_revision > reader)
		return zlfs_why(-EPROTONOSUPPORT, why, len,
				"format revision %u needs a reader of revision %u or later, and "
				"this zlfs reads revision %u: upgrade zlfs", s->revision,
				s->min_revision, reader);
	if (s->revision < ZLFS_MIN_REVISION)
		return zlfs_why(-EPROTONOSUPPORT, why, len,
				"format revision %u is older than the oldest this zlfs reads "
				"(%u): read it with an older zlfs and copy the data off",
				s->revision, ZLFS_MIN_REVISION);
	if (incompat) {
		feat_bits(incompat, bits, sizeof(bits));
		return zlfs_why(-EPROTONOSUPPORT, why, len,
				"unknown incompatible features %s: this zlfs (revision %u) cannot "
				"read the filesystem safely; upgrade zlfs", bits, reader);
	}
	if (ro) {
		feat_bits(ro, bits, sizeof(bits));
		return zlfs_why(1, why, len,
				"unknown read-only-compatible features %s: this zlfs (revision "
				"%u) may only read the filesystem; upgrade zlfs to write to it",
				bits, reader);
	}
	return 0; /* unknown compat bits: safe to ignore, by definition */
}

/* ---- checkpoint head and tail ------------------------------------------------------------ */

void zlfs_cp_head_encode(const struct zlfs_cp_info *c, uint64_t seed, void *block)
{
	struct zlfs_cp_head *d = block;
	uint32_t i;

	memset(d, 0, sizeof(*d));
	zlfs_blk_init(d, ZLFS_KIND_CP_HEAD, 0, 0, c->version);
	d->version = le64_put(c->version);
	d->time_ns = le64_put(c->time_ns);
	d->flags = le32_put(c->flags);
	d->pack_blocks = le32_put(c->pack_blocks);
	d->nr_logs = le32_put(c->nr_logs);
	d->nr_summaries = le32_put(c->nr_summaries);
	d->nr_orphan_blocks = le32_put(c->nr_orphan_blocks);
	d->nr_orphans = le32_put(c->nr_orphans);
	d->meta_zone = le32_put(c->meta_zone);
	d->meta_next_blk = le32_put(c->meta_next_blk);
	d->nr_map = le32_put(c->nr_map);
	d->next_free_nid = le32_put(c->next_free_nid);
	for (i = 0; i < ZLFS_NR_LOG_TYPES && (i < ZLFS_NR_LOG_TYPES_R1 || c->nr_logs > i); i++) {
		struct zlfs_cp_log *l = i < ZLFS_NR_LOG_TYPES_R1 ? &d->logs[i] :
								  &d->logs_r2[i - ZLFS_NR_LOG_TYPES_R1];

		l->zone = le32_put(c->logs[i].zone);
		l->next_blk = le32_put(c->logs[i].next_blk);
		l->nr_entries = le32_put(c->logs[i].nr_entries);
	}
	d->valid_blocks = le64_put(c->valid_blocks);
	d->valid_nodes = le64_put(c->valid_nodes);
	d->valid_inodes = le64_put(c->valid_inodes);
	d->user_bytes = le64_put(c->user_bytes);
	d->dev_bytes = le64_put(c->dev_bytes);
	d->gc_bytes = le64_put(c->gc_bytes);
	d->seq = le64_put(c->seq);
	d->prealloc_blocks = le64_put(c->prealloc_blocks);
	d->nr_remap_blocks = le32_put(c->nr_remap_blocks);
	d->nr_remaps = le32_put(c->nr_remaps);
	for (i = 0; i < c->nr_map && i < ZLFS_CP_MAP_MAX; i++)
		d->map_addr[i] = le32_put(c->map_addr[i]);
	zlfs_blk_seal(d, seed);
}

int zlfs_cp_head_decode(const void *block, uint64_t seed, struct zlfs_cp_info *c)
{
	const struct zlfs_cp_head *d = block;
	uint32_t i;
	int ret = zlfs_blk_verify(block, seed, ZLFS_KIND_CP_HEAD);

	if (ret)
		return ret;
	memset(c, 0, sizeof(*c));
	c->version = le64_get(d->version);
	c->time_ns = le64_get(d->time_ns);
	c->flags = le32_get(d->flags);
	c->pack_blocks = le32_get(d->pack_blocks);
	c->nr_logs = le32_get(d->nr_logs);
	c->nr_summaries = le32_get(d->nr_summaries);
	c->nr_orphan_blocks = le32_get(d->nr_orphan_blocks);
	c->nr_orphans = le32_get(d->nr_orphans);
	c->meta_zone = le32_get(d->meta_zone);
	c->meta_next_blk = le32_get(d->meta_next_blk);
	c->nr_map = le32_get(d->nr_map);
	c->next_free_nid = le32_get(d->next_free_nid);
	for (i = 0; i < ZLFS_NR_LOG_TYPES; i++) {
		const struct zlfs_cp_log *l = i < ZLFS_NR_LOG_TYPES_R1 ? &d->logs[i] :
									&d->logs_r2[i - ZLFS_NR_LOG_TYPES_R1];

		if (i >= ZLFS_NR_LOG_TYPES_R1 && c->nr_logs <= i) { /* a layout without this log */
			c->logs[i].zone = ZLFS_ZONE_NONE;
			continue;
		}
		c->logs[i].zone = le32_get(l->zone);
		c->logs[i].next_blk = le32_get(l->next_blk);
		c->logs[i].nr_entries = le32_get(l->nr_entries);
	}
	c->valid_blocks = le64_get(d->valid_blocks);
	c->valid_nodes = le64_get(d->valid_nodes);
	c->valid_inodes = le64_get(d->valid_inodes);
	c->user_bytes = le64_get(d->user_bytes);
	c->dev_bytes = le64_get(d->dev_bytes);
	c->gc_bytes = le64_get(d->gc_bytes);
	c->seq = le64_get(d->seq);
	c->prealloc_blocks = le64_get(d->prealloc_blocks);
	c->nr_remap_blocks = le32_get(d->nr_remap_blocks);
	c->nr_remaps = le32_get(d->nr_remaps);
	if (c->version != le64_get(d->hdr.cp_ver) || c->nr_map > ZLFS_CP_MAP_MAX ||
	    c->nr_orphan_blocks > ZLFS_CP_ORPHAN_BLOCKS_MAX ||
	    c->nr_summaries > ZLFS_NR_LOG_TYPES || c->nr_remap_blocks > ZLFS_REMAP_BLOCKS_MAX ||
	    c->nr_remaps > c->nr_remap_blocks * ZLFS_REMAPS_PER_BLOCK ||
	    c->pack_blocks != 2 + c->nr_summaries + c->nr_orphan_blocks + c->nr_remap_blocks)
		return -EUCLEAN;
	for (i = 0; i < c->nr_map; i++)
		c->map_addr[i] = le32_get(d->map_addr[i]);
	return 0;
}

void zlfs_cp_tail_encode(uint64_t version, uint64_t head_csum, uint64_t seed, void *block)
{
	struct zlfs_cp_tail *d = block;

	memset(d, 0, sizeof(*d));
	zlfs_blk_init(d, ZLFS_KIND_CP_TAIL, 0, 0, version);
	d->version = le64_put(version);
	d->head_csum = le64_put(head_csum);
	zlfs_blk_seal(d, seed);
}

int zlfs_cp_tail_check(const void *block, uint64_t seed, uint64_t version, uint64_t head_csum)
{
	const struct zlfs_cp_tail *d = block;
	int ret = zlfs_blk_verify(block, seed, ZLFS_KIND_CP_TAIL);

	if (ret)
		return ret;
	if (le64_get(d->version) != version || le64_get(d->head_csum) != head_csum)
		return -EUCLEAN;
	return 0;
}
