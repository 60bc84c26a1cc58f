/*
 * test_format.c - on-disk format: codec round trips, checksums, stale-UUID rejection,
 * revision and feature refusal, and the layout rules for good and bad geometries.
 * Pure tests: no device is opened.
 */
#include "testutil.h"

#include "format.h"
#include "super.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint8_t blk[ZLFS_BLOCK_SIZE] __attribute__((aligned(4096)));

/* A geometry of NR zones, NCONV of them conventional and first, all of capacity CAP. */
static struct zdev_zone *mk_zones(struct zdev_geometry *g, uint32_t nr, uint32_t nconv,
				  uint64_t zsize, uint64_t cap)
{
	struct zdev_zone *z = calloc(nr, sizeof(*z));
	uint32_t i;

	memset(g, 0, sizeof(*g));
	g->lblock_size = 4096;
	g->nr_zones = nr;
	g->nr_conv = nconv;
	g->zone_size = zsize;
	g->zone_capacity = cap;
	g->capacity = (uint64_t)nr * zsize;
	for (i = 0; i < nr; i++) {
		z[i].start = (uint64_t)i * zsize;
		z[i].len = zsize;
		z[i].capacity = i < nconv ? zsize : cap;
		z[i].wp = z[i].start;
		z[i].type = i < nconv ? ZDEV_ZONE_CONV : ZDEV_ZONE_SEQ;
		z[i].cond = i < nconv ? ZDEV_COND_NOT_WP : ZDEV_COND_EMPTY;
	}
	return z;
}

static void good_sb(struct zlfs_sb_info *s)
{
	struct zdev_geometry g;
	struct zdev_zone *z = mk_zones(&g, 64, 0, 4 << 20, 4 << 20);
	struct zlfs_mkfs_opts o = {0};
	char why[256];
	int i;

	ck_assert_int_eq(zlfs_layout(&g, z, &o, s, why, sizeof(why)), 0);
	for (i = 0; i < 16; i++)
		s->uuid[i] = (uint8_t)(i * 17 + 3);
	s->seed = zlfs_csum_seed(s->uuid);
	strcpy(s->label, "round-trip");
	s->sb_seq = 7;
	s->create_time = 1700000000;
	free(z);
}

START_TEST(t_sb_round_trip)
{
	struct zlfs_sb_info a, b;

	good_sb(&a);
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), 0);
	ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
	ck_assert_str_eq(b.label, "round-trip");
	ck_assert_uint_eq(b.sb_seq, 7);
	ck_assert_uint_eq(b.main_zone_first, a.main_zone_first);
}
END_TEST

START_TEST(t_sb_bitflip_every_region)
{
	struct zlfs_sb_info a, b;
	static const size_t offs[] = {0, 4, 30, 100, 200, 2000, 4000, 4090};
	size_t i;

	good_sb(&a);
	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		zlfs_sb_encode(&a, blk);
		blk[offs[i]] ^= 0x10;
		ck_assert_msg(zlfs_sb_decode(blk, &b) == -EUCLEAN, "flip at %zu accepted", offs[i]);
	}
}
END_TEST

START_TEST(t_sb_revision_and_features)
{
	struct zlfs_sb_info a, b;

	good_sb(&a);
	a.min_revision = ZLFS_REVISION + 1;
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), -EPROTONOSUPPORT);
	good_sb(&a);
	a.feat_incompat = 1u << 20;
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), -EPROTONOSUPPORT);
	good_sb(&a);
	a.feat_ro_compat = 1u << 20; /* decodes: mount decides on read-only */
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), 0);
	ck_assert_uint_eq(b.feat_ro_compat, 1u << 20);
}
END_TEST

START_TEST(t_sb_bad_layout_refused)
{
	struct zlfs_sb_info a, b;

	good_sb(&a);
	a.main_zones += 1; /* runs past the device */
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), -EUCLEAN);
	good_sb(&a);
	a.seg_blocks = 100; /* not a power of two */
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), -EUCLEAN);
	good_sb(&a);
	a.nat_blocks = 1; /* cannot hold max_nid entries */
	zlfs_sb_encode(&a, blk);
	ck_assert_int_eq(zlfs_sb_decode(blk, &b), -EUCLEAN);
}
END_TEST

START_TEST(t_stale_uuid_rejected)
{
	uint8_t u1[16] = {1, 2, 3}, u2[16] = {1, 2, 4};
	struct zlfs_node *n = (void *)blk;

	memset(blk, 0, sizeof(blk));
	zlfs_blk_init(n, ZLFS_KIND_DNODE, 42, 7, 3);
	n->ptr[5] = le32_put(1234);
	zlfs_blk_seal(n, zlfs_csum_seed(u1));
	ck_assert_int_eq(zlfs_blk_verify(n, zlfs_csum_seed(u1), ZLFS_KIND_DNODE), 0);
	ck_assert_int_eq(zlfs_blk_verify(n, zlfs_csum_seed(u2), ZLFS_KIND_DNODE), -EUCLEAN);
	ck_assert_int_eq(zlfs_blk_verify(n, zlfs_csum_seed(u1), ZLFS_KIND_INODE), -EBADMSG);
	ck_assert_int_eq(zlfs_blk_verify(n, zlfs_csum_seed(u1), ZLFS_KIND_MAX), 0);
	ck_assert_uint_ne(zlfs_csum_seed(u1), zlfs_csum_seed(u2));
}
END_TEST

START_TEST(t_cp_round_trip_and_tail)
{
	struct zlfs_cp_info *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	uint64_t seed = 0x1234567890abcdefULL, hc;
	static uint8_t tail[ZLFS_BLOCK_SIZE] __attribute__((aligned(4096)));
	uint32_t i;

	a->version = 99;
	a->time_ns = 123456789;
	a->flags = ZLFS_CP_CLEAN;
	a->nr_logs = ZLFS_NR_LOG_TYPES;
	a->nr_summaries = 2;
	a->nr_orphan_blocks = 1;
	a->nr_orphans = 3;
	a->pack_blocks = 2 + 2 + 1;
	a->nr_map = ZLFS_CP_MAP_MAX;
	for (i = 0; i < ZLFS_CP_MAP_MAX; i++)
		a->map_addr[i] = i * 3 + 1;
	for (i = 0; i < ZLFS_NR_LOG_TYPES; i++) {
		a->logs[i].zone = 10 + i;
		a->logs[i].next_blk = 100 * i;
		a->logs[i].nr_entries = i;
	}
	a->valid_blocks = 1ULL << 40;
	a->gc_bytes = 77;
	zlfs_cp_head_encode(a, seed, blk);
	ck_assert_int_eq(zlfs_cp_head_decode(blk, seed, b), 0);
	ck_assert_int_eq(memcmp(a, b, sizeof(*a)), 0);
	/* A layout of revision 1's six logs writes the pack revision 1 defines: the second log
	 * table stays zero, and the logs it does not have decode as none. */
	a->nr_logs = 6;
	zlfs_cp_head_encode(a, seed, blk);
	for (i = 0; i < sizeof(((struct zlfs_cp_head *)blk)->logs_r2); i++)
		ck_assert_uint_eq(((uint8_t *)((struct zlfs_cp_head *)blk)->logs_r2)[i], 0);
	ck_assert_int_eq(zlfs_cp_head_decode(blk, seed, b), 0);
	for (i = ZLFS_NR_LOG_TYPES_R1; i < ZLFS_NR_LOG_TYPES; i++)
		ck_assert_uint_eq(b->logs[i].zone, ZLFS_ZONE_NONE);
	ck_assert_uint_eq(b->logs[ZLFS_NR_LOG_TYPES_R1 - 1].zone, 10 + ZLFS_NR_LOG_TYPES_R1 - 1);
	a->nr_logs = ZLFS_NR_LOG_TYPES;
	zlfs_cp_head_encode(a, seed, blk);
	hc = zlfs_blk_csum(blk, seed);
	zlfs_cp_tail_encode(99, hc, seed, tail);
	ck_assert_int_eq(zlfs_cp_tail_check(tail, seed, 99, hc), 0);
	ck_assert_int_eq(zlfs_cp_tail_check(tail, seed, 98, hc), -EUCLEAN);
	ck_assert_int_eq(zlfs_cp_tail_check(tail, seed, 99, hc + 1), -EUCLEAN);
	blk[1000] ^= 1;
	ck_assert_int_eq(zlfs_cp_head_decode(blk, seed, b), -EUCLEAN);
	a->pack_blocks = 3; /* disagrees with its payload counts */
	zlfs_cp_head_encode(a, seed, blk);
	ck_assert_int_eq(zlfs_cp_head_decode(blk, seed, b), -EUCLEAN);
	free(a);
	free(b);
}
END_TEST

START_TEST(t_layout_good)
{
	struct zdev_geometry g;
	struct zdev_zone *z = mk_zones(&g, 256, 4, 4 << 20, 3 << 20);
	struct zlfs_mkfs_opts o = {0};
	struct zlfs_sb_info s;
	char why[256];

	ck_assert_int_eq(zlfs_layout(&g, z, &o, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.sb_zone[0], 4); /* conventional zones are skipped */
	ck_assert_uint_eq(s.cp_zone[1], 7);
	ck_assert_uint_eq(s.meta_zone_first, 8);
	ck_assert_uint_eq(s.main_zone_first + s.main_zones, 256);
	ck_assert_uint_eq(s.seg_blocks, 512);
	ck_assert_uint_eq(s.segs_per_zone, 1); /* 3 MiB capacity holds one 2 MiB segment */
	ck_assert_uint_eq(s.nr_logs, ZLFS_NR_LOG_TYPES); /* no zone limits, 244 main zones: all */
	ck_assert_uint_eq(s.min_revision, 3);            /* which revision 2 cannot read */
	ck_assert_uint_ge((uint64_t)s.nat_blocks * ZLFS_NAT_PER_BLOCK, s.max_nid);
	ck_assert_uint_ge((uint64_t)s.sit_blocks * ZLFS_SIT_PER_BLOCK, s.main_zones);
	ck_assert_uint_ge(s.reserved_zones, 2);
	free(z);
}
END_TEST

START_TEST(t_layout_small_zone_segments)
{
	struct zdev_geometry g;
	struct zdev_zone *z = mk_zones(&g, 64, 0, 1 << 20, 1 << 20);
	struct zlfs_mkfs_opts o = {0};
	struct zlfs_sb_info s;
	char why[256];

	ck_assert_int_eq(zlfs_layout(&g, z, &o, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.seg_blocks, 256);
	ck_assert_uint_eq(s.segs_per_zone, 1);
	free(z);
}
END_TEST

static void expect_refusal(struct zdev_geometry *g, struct zdev_zone *z,
			   const struct zlfs_mkfs_opts *o, const char *needle)
{
	struct zlfs_sb_info s;
	char why[256] = "";

	ck_assert_int_eq(zlfs_layout(g, z, o, &s, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, needle), "reason \"%s\" lacks \"%s\"", why, needle);
}

START_TEST(t_layout_refusals)
{
	struct zdev_geometry g;
	struct zlfs_mkfs_opts o = {0};
	struct zdev_zone *z = mk_zones(&g, 64, 0, 4 << 20, 4 << 20);

	g.zone_size = (4 << 20) + 512;
	expect_refusal(&g, z, &o, "not a multiple");
	g.zone_size = 4 << 20;
	g.lblock_size = 8192;
	expect_refusal(&g, z, &o, "logical block size");
	g.lblock_size = 4096;
	g.nr_zones = 8;
	expect_refusal(&g, z, &o, "too small");
	g.nr_zones = 64;
	g.max_active = 3;
	expect_refusal(&g, z, &o, "active zones");
	g.max_active = 6;
	o.nr_logs = 6;
	expect_refusal(&g, z, &o, "--logs 4");
	o.nr_logs = 5;
	expect_refusal(&g, z, &o, "2, 4, 6, 7 or 10");
	o.nr_logs = 0;
	g.max_active = 0;
	z[20].type = ZDEV_ZONE_CONV;
	expect_refusal(&g, z, &o, "conventional");
	z[20].type = ZDEV_ZONE_SEQ;
	z[30].cond = ZDEV_COND_OFFLINE;
	expect_refusal(&g, z, &o, "offline");
	z[30].cond = ZDEV_COND_EMPTY;
	z[10].capacity = 64 * 1024;
	expect_refusal(&g, z, &o, "capacity");
	free(z);
	z = mk_zones(&g, 64, 64, 4 << 20, 4 << 20);
	expect_refusal(&g, z, &o, "no sequential zones");
	free(z);
}
END_TEST

START_TEST(t_layout_logs_follow_limits)
{
	struct zdev_geometry g;
	struct zdev_zone *z = mk_zones(&g, 64, 0, 4 << 20, 4 << 20);
	struct zlfs_mkfs_opts o = {0};
	struct zlfs_sb_info s;
	char why[256];

	g.max_open = 9; /* 7 logs + checkpoint log + meta log */
	g.max_active = 9;
	ck_assert_int_eq(zlfs_layout(&g, z, &o, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.nr_logs, 7);
	ck_assert_uint_eq(s.min_revision, 2);
	ck_assert_uint_ge(s.reserved_zones, 4); /* a pass needs a zone for each GC log */
	g.max_open = 8; /* one short: the frozen log folds into the cold one, as revision 1 */
	ck_assert_int_eq(zlfs_layout(&g, z, &o, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.nr_logs, 6);
	ck_assert_uint_eq(s.min_revision, 1);
	g.max_open = 6;
	g.max_active = 8;
	ck_assert_int_eq(zlfs_layout(&g, z, &o, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.nr_logs, 4);
	g.max_open = 4;
	ck_assert_int_eq(zlfs_layout(&g, z, &o, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.nr_logs, 2);
	free(z);
}
END_TEST


/* ---- inode packs (PACKED_INODES) ------------------------------------------------------ */

static struct zlfs_inode pk_in[ZLFS_PACK_SLOTS];
static uint8_t pk_out[ZLFS_BLOCK_SIZE] __attribute__((aligned(8)));

/* A small regular file's inode NID with every field a slot keeps set to something. */
static void small_inode(struct zlfs_inode *in, uint32_t nid)
{
	memset(in, 0, sizeof(*in));
	zlfs_blk_init(in, ZLFS_KIND_INODE, nid, nid, 9);
	in->mode = le32_put(0100644);
	in->uid = le32_put(1000 + nid);
	in->gid = le32_put(100);
	in->nlink = le32_put(1);
	in->generation = le32_put(nid * 7);
	in->size = le64_put(3 * ZLFS_BLOCK_SIZE);
	in->blocks = le64_put(3);
	in->atime_ns = le64_put(1);
	in->mtime_ns = le64_put(2);
	in->ctime_ns = le64_put(3);
	in->crtime_ns = le64_put(4);
	memset(in->nonce, (int)nid, sizeof(in->nonce));
	in->dir_entries = 0;
}

/* A pack of N slots of the inodes NIDS, sealed under S's seed. */
static void build_pack(const struct zlfs_sb_info *s, uint32_t n, const uint32_t *nids)
{
	struct zlfs_inode_pack *pk = (void *)blk;

	memset(blk, 0, sizeof(blk));
	zlfs_blk_init(pk, ZLFS_KIND_IPACK, 0, 0, 9);
	pk->nr_slots = le32_put(n);
	for (uint32_t i = 0; i < n; i++) {
		small_inode(&pk_in[i], nids[i]);
		ck_assert_int_eq(zlfs_pack_fill(pk, i, &pk_in[i], 0), 1);
	}
	zlfs_blk_seal(pk, s->seed);
}

static void packed_sb(struct zlfs_sb_info *s)
{
	good_sb(s);
	s->feat_incompat |= ZLFS_FEAT_INCOMPAT_PACKED_INODES;
}

/* Fill then expand gives back the same 4 KiB inode, header from the pack; what does not fit a
 * slot is refused. */
START_TEST(t_pack_round_trip)
{
	struct zlfs_sb_info s;
	uint32_t nids[ZLFS_PACK_SLOTS];
	char why[256];

	packed_sb(&s);
	for (uint32_t i = 0; i < ZLFS_PACK_SLOTS; i++)
		nids[i] = 5 + 3 * i;
	build_pack(&s, ZLFS_PACK_SLOTS, nids);
	pk_in[3].addr[31] = le32_put(zlfs_zone_start_blk(&s, s.main_zone_first) + 1); /* the
										      * last word a slot keeps */
	ck_assert_int_eq(zlfs_pack_fill(blk, 3, &pk_in[3], 0), 1);
	zlfs_blk_seal(blk, s.seed);
	ck_assert_msg(!zlfs_pack_check(&s, blk, why, sizeof(why)), "%s", why);
	for (uint32_t i = 0; i < ZLFS_PACK_SLOTS; i++) {
		zlfs_pack_expand(blk, i, pk_out);
		ck_assert_int_eq(memcmp(pk_out, &pk_in[i], ZLFS_CSUM_OFF), 0);
	}
	pk_in[0].addr[ZLFS_PACK_ADDRS] = le32_put(77); /* past the slot's words */
	ck_assert_int_eq(zlfs_pack_fill(blk, 0, &pk_in[0], 0), -E2BIG); /* no spanning */
	small_inode(&pk_in[0], 5);
	pk_in[0].nid[0] = le32_put(8); /* an index node */
	ck_assert_int_eq(zlfs_pack_fill(blk, 0, &pk_in[0], 1), -E2BIG);
	small_inode(&pk_in[0], 5);
	pk_in[0].hdr.kind = le16_put(ZLFS_KIND_DNODE);
	ck_assert_int_eq(zlfs_pack_fill(blk, 0, &pk_in[0], 1), -E2BIG);
	small_inode(&pk_in[0], 5);
	ck_assert_int_eq(zlfs_pack_fill(blk, ZLFS_PACK_SLOTS, &pk_in[0], 1), -E2BIG);
}
END_TEST

/* Crafted packs: each field out of its range is refused by zlfs_pack_check. */
START_TEST(t_pack_check_refuses)
{
	struct zlfs_sb_info s;
	struct zlfs_inode_pack *pk = (void *)blk;
	const uint32_t nids[3] = {4, 9, 12};
	char why[256];

	packed_sb(&s);
	build_pack(&s, 3, nids);
	ck_assert_int_eq(zlfs_pack_check(&s, blk, why, sizeof(why)), 0);
#define REFUSED(edit)                                                                          \
	do {                                                                                   \
		build_pack(&s, 3, nids);                                                       \
		edit;                                                                          \
		ck_assert_int_eq(zlfs_pack_check(&s, blk, why, sizeof(why)), -EUCLEAN);        \
	} while (0)
	REFUSED(pk->nr_slots = le32_put(0));
	REFUSED(pk->nr_slots = le32_put(ZLFS_PACK_SLOTS + 1));
	REFUSED(pk->nr_slots = le32_put(4)); /* slot 3 is empty: nid 0 */
	REFUSED(pk->nr_slots = le32_put(2)); /* slot 2 past nr_slots but not zero */
	REFUSED(pk->slot[1].nid = le32_put(4)); /* not ascending: twice the same nid */
	REFUSED(pk->slot[2].nid = le32_put(s.max_nid));
	REFUSED(pk->slot[0].nid = 0);
	REFUSED(pk->hdr.flags = le16_put(ZLFS_NODE_FSYNC)); /* a pack is never rolled forward */
	REFUSED(pk->hdr.index = le32_put(4));
	REFUSED(pk->hdr.ino = le32_put(4));
	REFUSED(pk->span = le32_put(1)); /* spans without SPAN_SLOTS */
	REFUSED(pk->pad[100] = 1);
	REFUSED(pk->slot[1].mode = le32_put(0170000)); /* the slot's inode: no file type */
	REFUSED(pk->slot[2].xattr_nid = le32_put(s.max_nid));
	REFUSED(s.feat_incompat &= ~ZLFS_FEAT_INCOMPAT_PACKED_INODES);
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_PACKED_INODES;
	build_pack(&s, 3, nids);
	ck_assert_int_eq(zlfs_pack_check_head(&s, blk, why, sizeof(why)), 0);
	pk->slot[1].mode = le32_put(0170000); /* the head check leaves the inode to its reader */
	ck_assert_int_eq(zlfs_pack_check_head(&s, blk, why, sizeof(why)), 0);
#undef REFUSED
}
END_TEST

/* Inode NID of a regular file with LEN inline bytes, the last one nonzero. */
static void inline_inode(struct zlfs_inode *in, uint32_t nid, uint32_t len)
{
	small_inode(in, nid);
	in->flags = le32_put(ZLFS_IFLAG_INLINE);
	in->size = le64_put(len);
	in->inline_size = le32_put(len);
	in->blocks = 0;
	for (uint32_t i = 0; i < len; i++)
		((uint8_t *)in->addr)[i] = (uint8_t)(i * 7 + nid + 1) | 1;
}

/* SPAN_SLOTS: a pack of inline files of 129, 1000, 1100 bytes between small inodes: each
 * slot takes 1 + ceil((len - 128) / 248) positions, checks, and expands to the inode it was
 * made from; 2,000 bytes take 9 positions, 3,600 all 15, and 3,601 fit no pack. */
START_TEST(t_pack_span_round_trip)
{
	static const uint32_t len[] = {0, 129, 0, 1000, 1100, 0};
	struct zlfs_inode_pack *pk = (void *)blk;
	struct zlfs_sb_info s;
	uint32_t pos = 0, at[6], i;
	char why[256];

	packed_sb(&s);
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_SPAN_SLOTS | ZLFS_FEAT_INCOMPAT_INLINE_DATA;
	memset(blk, 0, sizeof(blk));
	zlfs_blk_init(pk, ZLFS_KIND_IPACK, 0, 0, 9);
	for (i = 0; i < 6; i++) {
		int k;

		if (len[i])
			inline_inode(&pk_in[i], 10 + i, len[i]);
		else
			small_inode(&pk_in[i], 10 + i);
		ck_assert_uint_eq(zlfs_pack_positions(&pk_in[i]),
				  len[i] ? 1 + (len[i] - 128 + 247) / 248 : 1);
		ck_assert_int_eq(zlfs_pack_fill(blk, pos, &pk_in[i], 0),
				 len[i] ? -E2BIG : 1); /* a span only when allowed */
		k = zlfs_pack_fill(blk, pos, &pk_in[i], 1);
		ck_assert_int_eq(k, (int)zlfs_pack_positions(&pk_in[i]));
		at[i] = pos;
		pos += (uint32_t)k;
	}
	ck_assert_uint_eq(pos, 1 + 2 + 1 + 5 + 5 + 1); /* a full pack */
	pk->nr_slots = le32_put(pos);
	zlfs_blk_seal(pk, s.seed);
	ck_assert_msg(!zlfs_pack_check(&s, blk, why, sizeof(why)), "%s", why);
	for (i = 0; i < 6; i++) {
		ck_assert(zlfs_pack_is_slot(blk, at[i]));
		for (uint32_t j = at[i] + 1; j < at[i] + zlfs_pack_span(blk, at[i]); j++)
			ck_assert(!zlfs_pack_is_slot(blk, j));
		zlfs_pack_expand(blk, at[i], pk_out);
		ck_assert_int_eq(memcmp(pk_out, &pk_in[i], ZLFS_CSUM_OFF), 0);
	}
	ck_assert(!zlfs_pack_is_slot(blk, pos)); /* past nr_slots */
	s.feat_incompat &= ~ZLFS_FEAT_INCOMPAT_SPAN_SLOTS; /* an older image: spans refused */
	ck_assert_int_eq(zlfs_pack_check(&s, blk, why, sizeof(why)), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(why, "SPAN_SLOTS"));
	inline_inode(&pk_in[0], 10, 2000);
	ck_assert_uint_eq(zlfs_pack_positions(&pk_in[0]), 9);
	inline_inode(&pk_in[0], 10, ZLFS_PACK_SPAN_MAX);
	ck_assert_uint_eq(zlfs_pack_positions(&pk_in[0]), ZLFS_PACK_SLOTS);
	ck_assert_int_eq(zlfs_pack_fill(blk, 1, &pk_in[0], 1), -E2BIG); /* no room after 1 */
	ck_assert_int_eq(zlfs_pack_fill(blk, 0, &pk_in[0], 1), (int)ZLFS_PACK_SLOTS);
	inline_inode(&pk_in[0], 10, ZLFS_PACK_SPAN_MAX + 1);
	ck_assert_uint_eq(zlfs_pack_positions(&pk_in[0]), 0);
	inline_inode(&pk_in[0], 10, 1000); /* zero past byte 128: one position, as before */
	memset((uint8_t *)pk_in[0].addr + 128, 0, 1000 - 128);
	ck_assert_uint_eq(zlfs_pack_positions(&pk_in[0]), 1);
}
END_TEST

/* Crafted spans: each is refused with its reason. */
START_TEST(t_pack_span_refuses)
{
	struct zlfs_inode_pack *pk = (void *)blk;
	struct zlfs_sb_info s;
	char why[256];

	packed_sb(&s);
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_SPAN_SLOTS | ZLFS_FEAT_INCOMPAT_INLINE_DATA;
#define SPAN_PACK()                                                                            \
	do {                                                                                   \
		memset(blk, 0, sizeof(blk));                                                   \
		zlfs_blk_init(pk, ZLFS_KIND_IPACK, 0, 0, 9);                                   \
		small_inode(&pk_in[0], 4);                                                     \
		inline_inode(&pk_in[1], 9, 600); /* 3 positions: 1-3 */                       \
		small_inode(&pk_in[2], 12);                                                    \
		ck_assert_int_eq(zlfs_pack_fill(blk, 0, &pk_in[0], 1), 1);                     \
		ck_assert_int_eq(zlfs_pack_fill(blk, 1, &pk_in[1], 1), 3);                     \
		ck_assert_int_eq(zlfs_pack_fill(blk, 4, &pk_in[2], 1), 1);                     \
		pk->nr_slots = le32_put(5);                                                    \
	} while (0)
#define SPAN_REFUSED(edit, says)                                                               \
	do {                                                                                   \
		SPAN_PACK();                                                                   \
		edit;                                                                          \
		ck_assert_int_eq(zlfs_pack_check(&s, blk, why, sizeof(why)), -EUCLEAN);        \
		ck_assert_msg(strstr(why, says), "%s", why);                                   \
	} while (0)
	SPAN_PACK();
	ck_assert_msg(!zlfs_pack_check(&s, blk, why, sizeof(why)), "%s", why);
	ck_assert_uint_eq(zlfs_pack_span(blk, 1), 3);
	SPAN_REFUSED(pk->span = le32_put(le32_get(pk->span) | 1u), "position 0");
	SPAN_REFUSED(pk->span = le32_put(le32_get(pk->span) | 1u << 5), "past nr_slots");
	SPAN_REFUSED(pk->nr_slots = le32_put(3), "past nr_slots"); /* the span runs past it */
	SPAN_REFUSED(memset(&pk->slot[3], 0, sizeof(pk->slot[3])), "the last all zero");
	/* the small inode after the span taken for its last position: the inline file's bytes
	 * past its size are not zero */
	SPAN_REFUSED(pk->span = le32_put(le32_get(pk->span) | 1u << 4), "not zero");
	SPAN_REFUSED(pk->span = le32_put(le32_get(pk->span) & ~(1u << 3)), "nid");
	SPAN_REFUSED(s.feat_incompat &= ~ZLFS_FEAT_INCOMPAT_SPAN_SLOTS, "without SPAN_SLOTS");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_SPAN_SLOTS;
#undef SPAN_REFUSED
#undef SPAN_PACK
}
END_TEST

/* NAT entries naming slots: only with the feature, only slots 0-14, only of an inode; the
 * superblock's max_nid stays below the slot bits; a pack's summary entry only with it. */
START_TEST(t_pack_nat_and_limits)
{
	struct zlfs_sb_info s, p;
	uint32_t addr, slot_bits = 3u << ZLFS_NAT_SLOT_SHIFT;
	char why[256];

	good_sb(&s);
	packed_sb(&p);
	addr = zlfs_zone_start_blk(&p, p.main_zone_first);
	ck_assert_int_eq(zlfs_nat_entry_check(&p, 7, addr, 7 | slot_bits, why, sizeof(why)), 0);
	ck_assert_int_eq(zlfs_nat_entry_check(&p, 7, addr, 7, why, sizeof(why)), 0);
	ck_assert_int_eq(zlfs_nat_entry_check(&s, 7, addr, 7 | slot_bits, why, sizeof(why)),
			 -EUCLEAN); /* no feature: an inode number out of range */
	ck_assert_int_eq(zlfs_nat_entry_check(&p, 7, addr, 8 | slot_bits, why, sizeof(why)),
			 -EUCLEAN); /* a node of inode 8 in a slot: only inodes are packed */
	ck_assert_int_eq(zlfs_nat_entry_check(&p, 7, addr, 7 | 0xfu << ZLFS_NAT_SLOT_SHIFT, why,
					      sizeof(why)), 0); /* slot 14, the last */
	ck_assert_int_eq(zlfs_nat_entry_check(&p, 0, addr, 0 | slot_bits, why, sizeof(why)),
			 -EUCLEAN); /* nid 0 */
	ck_assert_int_eq(zlfs_sum_entry_check(&p, 0, ZLFS_SUM_PACK, why, sizeof(why)), 0);
	ck_assert_int_eq(zlfs_sum_entry_check(&s, 0, ZLFS_SUM_PACK, why, sizeof(why)), -EUCLEAN);
	ck_assert_int_eq(zlfs_sum_entry_check(&p, 5, ZLFS_SUM_PACK, why, sizeof(why)), -EUCLEAN);
	ck_assert_uint_lt(ZLFS_MAX_NID_PACKED, 1u << ZLFS_NAT_SLOT_SHIFT);
	ck_assert_uint_ge(ZLFS_MAX_NID, 1u << ZLFS_NAT_SLOT_SHIFT);
	ck_assert_uint_eq(ZLFS_MAX_NID_PACKED % ZLFS_NAT_PER_BLOCK, 0);
	p.max_nid = ZLFS_MAX_NID; /* a layout without the feature may have it; with it, not */
	p.nat_blocks = ZLFS_MAX_NID / ZLFS_NAT_PER_BLOCK;
	s.max_nid = p.max_nid;
	s.nat_blocks = p.nat_blocks;
	ck_assert_int_eq(zlfs_sb_check_layout(&p, why, sizeof(why)), -EUCLEAN);
	ck_assert_msg(strstr(why, "max_nid"), "%s", why);
	if (zlfs_sb_check_layout(&s, why, sizeof(why))) /* only max_nid differs: any other */
		ck_assert_msg(!strstr(why, "max_nid"), "%s", why); /* refusal is the meta size's */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("format");
	TCase *tc = tcase_create("format");

	tcase_add_test(tc, t_sb_round_trip);
	tcase_add_test(tc, t_sb_bitflip_every_region);
	tcase_add_test(tc, t_sb_revision_and_features);
	tcase_add_test(tc, t_sb_bad_layout_refused);
	tcase_add_test(tc, t_stale_uuid_rejected);
	tcase_add_test(tc, t_cp_round_trip_and_tail);
	tcase_add_test(tc, t_layout_good);
	tcase_add_test(tc, t_layout_small_zone_segments);
	tcase_add_test(tc, t_layout_refusals);
	tcase_add_test(tc, t_layout_logs_follow_limits);
	tcase_add_test(tc, t_pack_round_trip);
	tcase_add_test(tc, t_pack_check_refuses);
	tcase_add_test(tc, t_pack_span_round_trip);
	tcase_add_test(tc, t_pack_span_refuses);
	tcase_add_test(tc, t_pack_nat_and_limits);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
