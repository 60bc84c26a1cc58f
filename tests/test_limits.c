/*
 * test_limits.c - the format's limits (format_check.c; docs/format.md, "Limits"): what mkfs
 * and the daemon write passes, and each field set just out of its range is refused with
 * -EUCLEAN and a reason that names it. Pure tests: no device is opened.
 */
#include "testutil.h"

#include "format.h"
#include "super.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char why[256];

/* A layout mkfs would choose for 64 zones of 4 MiB. */
static void good_sb(struct zlfs_sb_info *s)
{
	struct zdev_geometry g = {.lblock_size = 4096, .nr_zones = 64, .zone_size = 4 << 20,
				  .zone_capacity = 4 << 20, .capacity = 64ULL << 22};
	struct zdev_zone z[64];
	struct zlfs_mkfs_opts o = {0};

	memset(z, 0, sizeof(z));
	for (int i = 0; i < 64; i++) {
		z[i].start = (uint64_t)i << 22;
		z[i].len = z[i].capacity = 4 << 20;
		z[i].wp = z[i].start;
		z[i].type = ZDEV_ZONE_SEQ;
		z[i].cond = ZDEV_COND_EMPTY;
	}
	ck_assert_int_eq(zlfs_layout(&g, z, &o, s, why, sizeof(why)), 0);
}

#define REFUSED(call, field)                                                                    \
	do {                                                                                   \
		why[0] = 0;                                                                    \
		ck_assert_int_eq((call), -EUCLEAN);                                            \
		ck_assert_msg(strstr(why, field), "reason \"%s\" does not name %s", why, field); \
	} while (0)

START_TEST(t_sb_limits)
{
	struct zlfs_sb_info g, s;

	good_sb(&g);
	ck_assert_int_eq(zlfs_sb_check_layout(&g, why, sizeof(why)), 0);
#define SB(stmt, field)                                                                        \
	do {                                                                                   \
		s = g;                                                                         \
		stmt;                                                                          \
		REFUSED(zlfs_sb_check_layout(&s, why, sizeof(why)), field);                    \
	} while (0)
	SB(s.meta_zones = 0, "meta_zones = 0");
	SB(s.meta_zones = 1, "meta_zones = 1");
	SB(s.meta_zones = 3, "meta_zones = 3");
	SB(s.block_size = 512, "block_size");
	SB(s.dev_lblock_size = 3000, "dev_lblock_size");
	SB(s.zone_size = 4097, "zone_size");
	SB(s.zone_capacity = 64 * 1024, "zone_capacity");
	SB(s.seg_blocks = 100, "seg_blocks");
	SB(s.segs_per_zone += 1, "segs_per_zone");
	SB(s.nr_conv = 3, "nr_conv");
	SB(s.sb_zone[1] = 9, "sb_zone");
	SB(s.cp_zone[0] = 0, "cp_zone");
	SB(s.meta_zone_first += 1, "meta_zone_first");
	SB(s.main_zone_first -= 1, "main_zone_first");
	SB(s.main_zones += 1, "main_zones");
	SB(s.nr_logs = 5, "nr_logs");
	SB(s.ovp_percent = 60, "ovp_percent");
	SB(s.reserved_zones = s.main_zones, "reserved_zones");
	SB(s.root_ino = 2, "root_ino");
	SB(s.max_nid = 1, "max_nid");
	SB(s.max_nid = s.nat_blocks * ZLFS_NAT_PER_BLOCK + 1, "max_nid");
	SB(s.nat_blocks += 5, "nat_blocks");
	SB(s.sit_blocks += 1, "sit_blocks");
	SB((s.feat_incompat |= ZLFS_FEAT_INCOMPAT_ENCRYPT, s.enc_kdf = 7), "enc_kdf");
	SB((s.feat_incompat |= ZLFS_FEAT_INCOMPAT_ENCRYPT, s.enc_kdf = 2, s.scrypt_n = 1ULL << 40,
	    s.scrypt_r = 8, s.scrypt_p = 1), "scrypt_n");
	SB((s.feat_incompat |= ZLFS_FEAT_INCOMPAT_ENCRYPT, s.enc_kdf = 2, s.scrypt_n = 1 << 14,
	    s.scrypt_r = 1000, s.scrypt_p = 1), "scrypt_r");
#undef SB
}
END_TEST

/* The checkpoint mkfs writes: every log without a zone, the meta log at its start. */
static void good_cp(const struct zlfs_sb_info *s, struct zlfs_cp_info *c)
{
	uint32_t meta = s->nat_blocks + s->sit_blocks;

	memset(c, 0, sizeof(*c));
	c->version = 1;
	c->nr_logs = s->nr_logs;
	for (int t = 0; t < ZLFS_NR_LOG_TYPES; t++)
		c->logs[t].zone = ZLFS_ZONE_NONE;
	c->logs[ZLFS_LOG_WARM_NODE].zone = s->main_zone_first;
	c->logs[ZLFS_LOG_WARM_NODE].next_blk = 1;
	c->logs[ZLFS_LOG_WARM_NODE].nr_entries = 1;
	c->meta_zone = s->meta_zone_first;
	c->meta_next_blk = 3;
	c->nr_map = (meta + ZLFS_MAP_PER_BLOCK - 1) / ZLFS_MAP_PER_BLOCK;
	c->map_addr[0] = s->meta_zone_first * zlfs_zone_blocks(s) + 2;
	c->pack_blocks = 3;
	c->nr_summaries = 1;
	c->valid_nodes = c->valid_inodes = 1;
}

START_TEST(t_cp_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_cp_info *g = malloc(sizeof(*g)), *c = malloc(sizeof(*c));

	good_sb(&s);
	good_cp(&s, g);
	ck_assert_int_eq(zlfs_cp_check(&s, g, why, sizeof(why)), 0);
#define CP(stmt, field)                                                                        \
	do {                                                                                   \
		*c = *g;                                                                       \
		stmt;                                                                          \
		REFUSED(zlfs_cp_check(&s, c, why, sizeof(why)), field);                        \
	} while (0)
	CP(c->flags = 0x100, "flags");
	CP(c->nr_logs = 2, "nr_logs");
	CP(c->logs[ZLFS_LOG_WARM_NODE].zone = s.meta_zone_first, "log zone");
	CP(c->logs[ZLFS_LOG_WARM_NODE].zone = s.nr_zones, "log zone");
	CP(c->logs[ZLFS_LOG_WARM_NODE].next_blk = s.segs_per_zone * s.seg_blocks + 1, "next_blk");
	CP(c->logs[ZLFS_LOG_WARM_NODE].nr_entries = 600, "nr_entries");
	CP(c->logs[ZLFS_LOG_HOT_DATA].zone = s.main_zone_first, "both append");
	CP(c->nr_summaries = 2, "nr_summaries");
	CP(c->meta_zone = s.main_zone_first, "meta_zone");
	CP(c->meta_next_blk = zlfs_cap_blocks(&s) + 1, "meta_next_blk");
	CP(c->nr_map += 1, "nr_map");
	CP(c->map_addr[0] = s.main_zone_first * zlfs_zone_blocks(&s), "map_addr[0]");
	CP(c->prealloc_blocks = 1, "prealloc_blocks");
	CP(c->nr_remaps = 1, "nr_remaps");
	CP(c->nr_orphans = 5, "nr_orphans");
	CP(c->valid_inodes = 2, "valid_inodes");
	CP(c->pack_blocks = zlfs_cap_blocks(&s) + 1, "pack_blocks");
	/* a layout of fewer logs has no cold data log */
	s.nr_logs = 4;
	good_cp(&s, g);
	CP(c->logs[ZLFS_LOG_COLD_DATA].zone = s.main_zone_first + 3, "no such log");
#undef CP
	free(g);
	free(c);
}
END_TEST

START_TEST(t_table_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_sit_entry e;
	uint32_t zb, main0;

	good_sb(&s);
	zb = zlfs_zone_blocks(&s);
	main0 = s.main_zone_first * zb;
	ck_assert_int_eq(zlfs_nat_entry_check(&s, 5, main0 + 1, 5, why, sizeof(why)), 0);
	ck_assert_int_eq(zlfs_nat_entry_check(&s, s.max_nid + 9, 0, 0, why, sizeof(why)), 0);
	REFUSED(zlfs_nat_entry_check(&s, 5, s.meta_zone_first * zb, 5, why, sizeof(why)), "blkaddr");
	REFUSED(zlfs_nat_entry_check(&s, 5, main0 + s.seg_blocks - 1, 5, why, sizeof(why)),
		"blkaddr"); /* a summary slot */
	s.segs_per_zone--; /* as if the zone's capacity ended a segment earlier */
	REFUSED(zlfs_nat_entry_check(&s, 5, main0 + s.segs_per_zone * s.seg_blocks, 5, why,
				     sizeof(why)), "blkaddr"); /* past the zone's segments */
	s.segs_per_zone++;
	REFUSED(zlfs_nat_entry_check(&s, 5, main0 + 1, 0, why, sizeof(why)), "ino");
	REFUSED(zlfs_nat_entry_check(&s, s.max_nid, main0 + 1, 5, why, sizeof(why)), "nid");
	memset(&e, 0, sizeof(e));
	e.log = ZLFS_LOG_NONE;
	ck_assert_int_eq(zlfs_sit_entry_check(&s, 0, &e, why, sizeof(why)), 0);
	e.valid = le16_put((uint16_t)s.seg_blocks);
	REFUSED(zlfs_sit_entry_check(&s, 0, &e, why, sizeof(why)), "valid");
	e.valid = 0;
	e.log = 99;
	REFUSED(zlfs_sit_entry_check(&s, 0, &e, why, sizeof(why)), "log = 99");
	e.log = ZLFS_LOG_WARM_DATA;
	e.bitmap[(s.seg_blocks - 1) / 8] |= (uint8_t)(1u << ((s.seg_blocks - 1) % 8));
	REFUSED(zlfs_sit_entry_check(&s, 0, &e, why, sizeof(why)), "bitmap bit");
	ck_assert_int_eq(zlfs_sum_entry_check(&s, 5, ZLFS_SUM_NODE, why, sizeof(why)), 0);
	ck_assert_int_eq(zlfs_sum_entry_check(&s, 5, ZLFS_NODE_ADDRS - 1, why, sizeof(why)), 0);
	REFUSED(zlfs_sum_entry_check(&s, s.max_nid, 3, why, sizeof(why)), "nid");
	REFUSED(zlfs_sum_entry_check(&s, 5, ZLFS_NODE_ADDRS, why, sizeof(why)), "ofs");
}
END_TEST

static uint8_t nb[ZLFS_BLOCK_SIZE] __attribute__((aligned(4096)));

static struct zlfs_inode *fresh_inode(uint32_t nid, uint32_t mode)
{
	struct zlfs_inode *in = (void *)nb;

	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_INODE, nid, nid, 1);
	in->mode = le32_put(mode);
	in->parent_ino = le32_put(1);
	return in;
}

#define INODE(mode, stmt, field)                                                               \
	do {                                                                                   \
		in = fresh_inode(7, mode);                                                     \
		stmt;                                                                          \
		REFUSED(zlfs_node_check(&s, 7, nb, why, sizeof(why)), field);                  \
	} while (0)

/* An inline regular file (INLINE_DATA): bytes [0, size) in addr[], nothing mapped, the rest of
 * the area zero; each rule broken alone is refused by the field's name. */
static void inline_file_limits(const struct zlfs_sb_info *base)
{
	struct zlfs_sb_info s = *base;
	struct zlfs_inode *in;

	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_INLINE_DATA;
#define INLINE_FILE(stmt, field)                                                               \
	INODE(S_IFREG, (in->flags = le32_put(ZLFS_IFLAG_INLINE), in->size = le64_put(5),        \
			in->inline_size = le32_put(5), memset(in->addr, 'x', 5), stmt), field)
	in = fresh_inode(7, S_IFREG);
	in->flags = le32_put(ZLFS_IFLAG_INLINE);
	ck_assert_int_eq(zlfs_node_check(&s, 7, nb, why, sizeof(why)), 0); /* empty */
	in->size = le64_put(ZLFS_INLINE_MAX);
	in->inline_size = le32_put(ZLFS_INLINE_MAX);
	memset(in->addr, 'y', ZLFS_INLINE_MAX);
	ck_assert_int_eq(zlfs_node_check(&s, 7, nb, why, sizeof(why)), 0);
	INLINE_FILE((in->size = le64_put(ZLFS_INLINE_MAX + 1),
		     in->inline_size = le32_put(ZLFS_INLINE_MAX + 1)), "inline_size");
	INLINE_FILE(in->size = le64_put(6), "size of an inline file");
	INLINE_FILE(in->size = le64_put(1ull << 32 | 5), "size of an inline file");
	INLINE_FILE(in->blocks = le64_put(1), "blocks of an inline file");
	INLINE_FILE(in->nid[4] = le32_put(9), "nid[] of an inline file");
	INLINE_FILE(((uint8_t *)in->addr)[ZLFS_INLINE_MAX - 1] = 1, "byte 3907");
	INLINE_FILE(((uint8_t *)in->addr)[5] = 1, "byte 5");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_ENCRYPT;
	INLINE_FILE(in->flags = le32_put(ZLFS_IFLAG_INLINE | ZLFS_IFLAG_ENCRYPT), "encrypted");
#undef INLINE_FILE
}

START_TEST(t_node_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_inode *in;
	struct zlfs_node *n = (void *)nb;
	struct zlfs_xattr_block *x = (void *)nb;
	uint32_t main0;

	good_sb(&s);
	main0 = s.main_zone_first * zlfs_zone_blocks(&s);
	in = fresh_inode(7, S_IFDIR | 0755);
	in->addr[3] = le32_put(main0 + 4);
	ck_assert_int_eq(zlfs_node_check(&s, 7, nb, why, sizeof(why)), 0);
	REFUSED(zlfs_node_check(&s, 8, nb, why, sizeof(why)), "index");
	INODE(0, (void)0, "mode");
	INODE(S_IFREG, in->flags = le32_put(1u << 9), "flags");
	INODE(S_IFREG, in->flags = le32_put(ZLFS_IFLAG_ENCRYPT), "encrypted");
	INODE(S_IFREG, in->flags = le32_put(ZLFS_IFLAG_APPEND), "chattr flags");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_ATTR_FLAGS;
	in = fresh_inode(7, S_IFDIR | 0755);
	in->flags = le32_put(ZLFS_IFLAG_ATTR);
	ck_assert_int_eq(zlfs_node_check(&s, 7, nb, why, sizeof(why)), 0);
	s.feat_incompat &= ~ZLFS_FEAT_INCOMPAT_ATTR_FLAGS;
	INODE(S_IFREG, in->size = le64_put(ZLFS_FILE_MAX_BYTES + 1), "inode size");
	INODE(S_IFREG, in->xattr_nid = le32_put(s.max_nid), "xattr_nid");
	INODE(S_IFREG, in->hdr.ino = le32_put(8), "header ino");
	INODE(S_IFDIR, in->dir_depth = le32_put(ZLFS_DIR_DEPTH_MAX + 1), "dir_depth");
	INODE(S_IFDIR, in->parent_ino = 0, "parent_ino");
	INODE(S_IFDIR, in->dir_entries = le32_put(ZLFS_DIR_ENTRIES_MAX + 1), "dir_entries");
	INODE(S_IFREG, in->flags = le32_put(ZLFS_IFLAG_INLINE), "INLINE_DATA feature");
	INODE(S_IFDIR, in->flags = le32_put(ZLFS_IFLAG_INLINE), "only symlinks");
	INODE(S_IFLNK, (in->flags = le32_put(ZLFS_IFLAG_INLINE),
			in->inline_size = le32_put(ZLFS_INLINE_MAX + 1)), "inline_size");
	INODE(S_IFLNK, (in->flags = le32_put(ZLFS_IFLAG_INLINE), in->inline_size = le32_put(4),
			in->size = le64_put(5000)), "inline symlink");
	INODE(S_IFREG, in->nid[2] = le32_put(s.max_nid), "nid[2]");
	INODE(S_IFREG, in->addr[9] = le32_put(s.meta_zone_first * zlfs_zone_blocks(&s)),
	      "addr[9]");
	INODE(S_IFREG, in->addr[9] = le32_put(ZLFS_ADDR_PREALLOC), "fallocate feature");
	inline_file_limits(&s);
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_FALLOC;
	in = fresh_inode(7, S_IFREG);
	in->addr[9] = le32_put(ZLFS_ADDR_PREALLOC);
	ck_assert_int_eq(zlfs_node_check(&s, 7, nb, why, sizeof(why)), 0);
	/* direct and indirect nodes: their place in the tree, and their pointers */
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_DNODE, 9, 7, 1);
	n->ofs = le32_put(2);
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	n->ofs = le32_put(3);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "direct node ofs");
	n->ofs = le32_put(1);
	n->ptr[1011] = le32_put(1);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "ptr[1011]");
	zlfs_blk_init(nb, ZLFS_KIND_INDNODE, 9, 7, 1);
	n->ptr[1011] = 0;
	n->ofs = le32_put(4);
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	n->ofs = le32_put(1);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "indirect node ofs");
	n->ofs = le32_put(4);
	n->ptr[7] = le32_put(s.max_nid);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "ptr[7]");
	n->hdr.ino = 0;
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "header ino");
	/* xattr nodes: packed entries that fill exactly what is used */
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_XATTR, 9, 7, 1);
	x->data[0] = 1, x->data[1] = 3, x->data[2] = 2; /* user.abc = 2 bytes: 12 bytes */
	x->used = le32_put(12);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "holds a NUL");
	memcpy(x->data + 4, "abc", 3);
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	x->used = le32_put(sizeof(x->data) + 4);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "used");
	x->used = le32_put(8);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "does not fit");
	x->used = le32_put(16);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "does not fit");
	zlfs_blk_init(nb, ZLFS_KIND_SIT, 9, 7, 1);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "not a node");
}
END_TEST

/* XATTR_NODES: xattr nodes of a chain and value nodes, their place, link, fill and the
 * external entries pointing to value nodes. */
START_TEST(t_xattr_node_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_xattr_node *x = (void *)nb;
	le32 ext[2];

	good_sb(&s);
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_XVALUE, 9, 7, 1);
	x->used = le32_put(100);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "XATTR_NODES feature");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_XATTR_NODES;
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	x->ofs = le32_put(ZLFS_XVALUE_NODES_MAX);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr value node ofs");
	x->ofs = le32_put(ZLFS_XVALUE_NODES_MAX - 1);
	x->next = le32_put(10); /* not full, yet not the last */
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr value node used");
	x->used = le32_put(ZLFS_XATTR_NODE_SPACE);
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	x->used = le32_put(0);
	x->next = 0;
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr value node used");
	x->used = le32_put(1);
	x->next = le32_put(s.max_nid);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr value node next");
	x->next = 0;
	x->reserved = le32_put(1);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "reserved");
	/* a chain node with an inline entry and an external one */
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_XATTR, 9, 7, 1);
	x->data[0] = 1, x->data[1] = 3, x->data[2] = 2; /* user.abc = 2 bytes: 12 bytes */
	memcpy(x->data + 4, "abc", 3);
	x->data[12] = 1 | ZLFS_XATTR_EXTERNAL, x->data[13] = 1, x->data[14] = 8; /* 16 bytes */
	x->data[16] = 'z';
	ext[0] = le32_put(11), ext[1] = le32_put(ZLFS_XATTR_VALUE_MAX);
	memcpy(x->data + 17, ext, sizeof(ext));
	x->used = le32_put(28);
	x->ofs = le32_put(3);
	x->next = le32_put(12);
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	x->ofs = le32_put(ZLFS_XATTR_NODES_MAX);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr node ofs");
	x->ofs = 0;
	x->next = le32_put(s.max_nid);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr node next");
	x->next = 0;
	x->used = le32_put(ZLFS_XATTR_NODE_SPACE + 4);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr node used");
	x->used = le32_put(28);
	ext[1] = le32_put(ZLFS_XATTR_VALUE_MAX + 1);
	memcpy(x->data + 17, ext, sizeof(ext));
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr entry value size");
	ext[0] = 0, ext[1] = le32_put(1);
	memcpy(x->data + 17, ext, sizeof(ext));
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "xattr entry value nid");
	x->data[14] = 4, x->used = le32_put(24); /* external, but 4 value bytes */
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "external value");
	x->data[12] = 4 | ZLFS_XATTR_EXTERNAL;
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "does not fit");
	/* index 4 (system.: POSIX ACLs) only with the POSIX_ACL feature */
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_XATTR, 9, 7, 1);
	x->data[0] = ZLFS_XATTR_INDEX_ACL, x->data[1] = 1, x->data[4] = 'a';
	x->used = le32_put(8);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "does not fit");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_POSIX_ACL;
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	x->data[0] = ZLFS_XATTR_INDEX_ACL + 1;
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "does not fit");
	s.feat_incompat &= ~ZLFS_FEAT_INCOMPAT_POSIX_ACL;
	/* the older layout knows no external flag */
	s.feat_incompat &= ~ZLFS_FEAT_INCOMPAT_XATTR_NODES;
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_XATTR, 9, 7, 1);
	((struct zlfs_xattr_block *)nb)->data[0] = 1 | ZLFS_XATTR_EXTERNAL;
	((struct zlfs_xattr_block *)nb)->data[1] = 1;
	((struct zlfs_xattr_block *)nb)->data[4] = 'a';
	((struct zlfs_xattr_block *)nb)->used = le32_put(8);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "does not fit");
}
END_TEST

START_TEST(t_dentry_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_dentry_block *b = (void *)nb;

	good_sb(&s);
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_DENTRY, 0, 7, 1);
	b->bitmap[0] = 0x07; /* a 20-byte name in slots 0-2 */
	memcpy(b->name[0], "twenty-bytes-of-name", 20);
	b->d[0].name_len = le16_put(20);
	b->d[0].ino = le32_put(9);
	b->d[0].type = 8;
	b->d[0].hash = le32_put(zlfs_name_hash(&s, b->name[0], 20) ^ 1);
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "hash");
	b->d[0].hash = le32_put(zlfs_name_hash(&s, b->name[0], 20));
	ck_assert_int_eq(zlfs_dentry_check(&s, nb, why, sizeof(why)), 0);
	b->bitmap[0] = 0x05;
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "slot 1 is free");
	b->bitmap[0] = 0x07;
	b->d[0].ino = le32_put(s.max_nid);
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "ino");
	b->d[0].ino = le32_put(9);
	b->d[0].type = 3;
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "type");
	b->d[0].type = 8;
	b->d[0].name_len = le16_put(256);
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "name_len");
	b->d[0].name_len = le16_put(20);
	b->bitmap[201 / 8] |= 1u << (201 % 8);
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "bitmap bit 201");
	b->bitmap[201 / 8] = 0;
	b->bitmap[200 / 8] |= 1u << (200 % 8);
	b->d[200].name_len = le16_put(9); /* two slots from the last one */
	b->d[200].ino = le32_put(9);
	b->d[200].type = 8;
	REFUSED(zlfs_dentry_check(&s, nb, why, sizeof(why)), "past the block");
}
END_TEST

/* Compressed files (COMPRESS feature): the inode's flag and fields, the marker only with the
 * feature and only in a compressed file's cluster-first slot, each cluster's shape, and the
 * header's ranges; a filesystem with the feature is still refused by this build's mount. */
static void compress_inode_limits(const struct zlfs_sb_info *base, uint32_t b0)
{
	struct zlfs_sb_info s = *base;
	struct zlfs_inode *in;

#define CFILE(stmt, field)                                                                     \
	INODE(S_IFREG, (in->flags = le32_put(ZLFS_IFLAG_COMPRESS), in->compress_alg = 1,         \
			in->cluster_log = 2, stmt), field)
	CFILE((void)0, "COMPRESS feature"); /* the flag alone, without the feature */
	INODE(S_IFREG, in->cluster_log = 2, "without the COMPRESS flag"); /* feature off too */
	INODE(S_IFREG, in->addr[4] = le32_put(ZLFS_ADDR_COMPRESSED), "compression feature is off");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_COMPRESS;
	in = fresh_inode(7, S_IFREG);
	in->flags = le32_put(ZLFS_IFLAG_COMPRESS);
	in->compress_alg = ZLFS_CLUSTER_ZSTD;
	in->cluster_log = ZLFS_CLUSTER_LOG_MAX;
	in->addr[0] = le32_put(ZLFS_ADDR_COMPRESSED); /* cluster 0: 2 stored blocks */
	in->addr[1] = le32_put(b0);
	in->addr[2] = le32_put(b0 + 1);
	in->addr[64] = le32_put(b0 + 2);             /* cluster 1: raw, one block written */
	in->addr[959] = le32_put(b0 + 3);            /* the last whole cluster's last slot */
	ck_assert_msg(zlfs_node_check(&s, 7, nb, why, sizeof(why)) == 0, "%s", why);
	INODE(S_IFREG, in->cluster_log = 2, "without the COMPRESS flag");
	INODE(S_IFREG, in->addr[4] = le32_put(ZLFS_ADDR_COMPRESSED), "without the COMPRESS flag");
	CFILE(in->compress_alg = 0, "compress_alg");
	CFILE(in->compress_alg = ZLFS_CLUSTER_ALG_MAX, "compress_alg");
	CFILE(in->cluster_log = 1, "cluster_log");
	CFILE(in->cluster_log = 7, "cluster_log");
	CFILE(in->compress_pad = le16_put(1), "compress_pad");
	CFILE(in->flags |= le32_put(ZLFS_IFLAG_INLINE), "with INLINE");
	INODE(S_IFLNK, (in->flags = le32_put(ZLFS_IFLAG_COMPRESS), in->compress_alg = 1,
			in->cluster_log = 2), "mode 0120000");
#define CDIR(stmt, field)                                                                      \
	INODE(S_IFDIR, (in->flags = le32_put(ZLFS_IFLAG_COMPRESS), in->compress_alg = 1,         \
			in->cluster_log = 2, stmt), field)
	in = fresh_inode(7, S_IFDIR); /* a directory's flag: what its new files inherit */
	in->flags = le32_put(ZLFS_IFLAG_COMPRESS);
	in->compress_alg = ZLFS_CLUSTER_LZ4;
	in->cluster_log = 2;
	in->addr[5] = le32_put(b0); /* its blocks mapped as any directory's, slot by slot */
	ck_assert_msg(zlfs_node_check(&s, 7, nb, why, sizeof(why)) == 0, "%s", why);
	CDIR(in->compress_alg = 0, "compress_alg");
	CDIR(in->cluster_log = 7, "cluster_log");
	CDIR(in->addr[4] = le32_put(ZLFS_ADDR_COMPRESSED), "marker");
	CFILE(in->addr[976] = le32_put(b0), "addr[976]"); /* 977 slots: 976 in whole clusters */
	CFILE(in->addr[5] = le32_put(ZLFS_ADDR_COMPRESSED), "slot 1 of its cluster");
	CFILE(in->addr[4] = le32_put(ZLFS_ADDR_COMPRESSED), "no stored block");
	CFILE((in->addr[4] = le32_put(ZLFS_ADDR_COMPRESSED), in->addr[5] = le32_put(b0),
	       in->addr[7] = le32_put(b0 + 2)), "addr[7]");
	CFILE((in->addr[4] = le32_put(ZLFS_ADDR_COMPRESSED), in->addr[5] = le32_put(b0),
	       in->addr[6] = le32_put(ZLFS_ADDR_PREALLOC)), "addr[6]");
	in = fresh_inode(7, S_IFREG); /* a compressed file's inode: all four stored is k = 3 */
	in->flags = le32_put(ZLFS_IFLAG_COMPRESS);
	in->compress_alg = ZLFS_CLUSTER_LZ4;
	in->cluster_log = 2;
	for (uint32_t i = 0; i < 4; i++)
		in->addr[972 + i] = le32_put(i ? b0 + i : ZLFS_ADDR_COMPRESSED);
	ck_assert_int_eq(zlfs_node_check(&s, 7, nb, why, sizeof(why)), 0);
#undef CFILE
}

/* DENTRY_MARK: a dentry mark recovery reads names one inode, a directory, a regular file's
 * type and a name a directory could hold, with nothing after it. */
START_TEST(t_dmark_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_dentry_mark *m = (void *)nb;

	good_sb(&s);
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_DMARK, 9, 9, 1);
	m->parent_ino = le32_put(1);
	m->name_len = le16_put(3);
	m->type = 8;
	memcpy(m->name, "abc", 3);
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "DENTRY_MARK feature");
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_DENTRY_MARK;
	ck_assert_int_eq(zlfs_dmark_check(&s, nb, why, sizeof(why)), 0);
	m->name_len = le16_put(ZLFS_NAME_MAX);
	memset(m->name, 'x', ZLFS_NAME_MAX);
	ck_assert_int_eq(zlfs_dmark_check(&s, nb, why, sizeof(why)), 0);
	m->name_len = le16_put(ZLFS_NAME_MAX + 1);
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "name_len");
	m->name_len = 0;
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "name_len");
	m->name_len = le16_put(2);
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "name byte 2"); /* bytes after it */
	memset(m->name + 2, 0, sizeof(m->name) - 2);
	ck_assert_int_eq(zlfs_dmark_check(&s, nb, why, sizeof(why)), 0);
	m->name[1] = '/';
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "name byte 1");
	m->name[1] = 0;
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "name byte 1");
	m->name[0] = m->name[1] = '.';
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "dot entry");
	m->name[1] = 'y';
	ck_assert_int_eq(zlfs_dmark_check(&s, nb, why, sizeof(why)), 0);
	m->parent_ino = le32_put(s.max_nid);
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "parent_ino");
	m->parent_ino = 0;
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "parent_ino");
	m->parent_ino = le32_put(9); /* itself */
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "parent_ino");
	m->parent_ino = le32_put(1);
	m->type = 4; /* DT_DIR */
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "type");
	m->type = 8;
	m->reserved = 1;
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "reserved");
	m->reserved = 0;
	m->pad[100] = 1;
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "padding");
	m->pad[100] = 0;
	zlfs_blk_init(nb, ZLFS_KIND_DMARK, 9, 10, 1); /* index and ino differ */
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "dentry mark: index");
	zlfs_blk_init(nb, ZLFS_KIND_DMARK, s.max_nid, s.max_nid, 1);
	REFUSED(zlfs_dmark_check(&s, nb, why, sizeof(why)), "dentry mark: index");
	zlfs_blk_init(nb, ZLFS_KIND_DMARK, 9, 9, 1);
	ck_assert_int_eq(zlfs_dmark_check(&s, nb, why, sizeof(why)), 0);
}
END_TEST

START_TEST(t_compress_limits)
{
	struct zlfs_sb_info s;
	struct zlfs_node *n = (void *)nb;
	struct zlfs_cluster_hdr h = {.magic = le16_put(ZLFS_CLUSTER_MAGIC), .alg = 2, .log = 3};
	uint32_t b0;

	good_sb(&s);
	b0 = s.main_zone_first * zlfs_zone_blocks(&s);
	ck_assert(!zlfs_addr_is_main(&s, ZLFS_ADDR_COMPRESSED));
	ck_assert(!zlfs_data_ptr_ok(&s, ZLFS_ADDR_COMPRESSED));
	memset(nb, 0, sizeof(nb)); /* a direct node: the marker only with the feature */
	zlfs_blk_init(nb, ZLFS_KIND_DNODE, 9, 7, 1);
	n->ofs = le32_put(1);
	n->ptr[8] = le32_put(ZLFS_ADDR_COMPRESSED);
	REFUSED(zlfs_node_check(&s, 9, nb, why, sizeof(why)), "compression feature is off");
	compress_inode_limits(&s, b0);
	s.feat_incompat |= ZLFS_FEAT_INCOMPAT_COMPRESS;
	memset(nb, 0, sizeof(nb));
	zlfs_blk_init(nb, ZLFS_KIND_DNODE, 9, 7, 1);
	n->ofs = le32_put(1);
	n->ptr[8] = le32_put(ZLFS_ADDR_COMPRESSED);
	n->ptr[9] = le32_put(b0);
	ck_assert_int_eq(zlfs_node_check(&s, 9, nb, why, sizeof(why)), 0);
	ck_assert_int_eq(zlfs_cluster_slots_check(&s, 2, n->ptr, 1012, "ptr", why, sizeof(why)), 0);
	n->ptr[11] = le32_put(b0 + 1);
	REFUSED(zlfs_cluster_slots_check(&s, 2, n->ptr, 1012, "ptr", why, sizeof(why)), "ptr[11]");
	REFUSED(zlfs_cluster_slots_check(&s, 3, n->ptr, 1012, "ptr", why, sizeof(why)), "1012 slots");
	REFUSED(zlfs_cluster_slots_check(&s, 1, n->ptr, 1012, "ptr", why, sizeof(why)), "2^1");
	/* the header: a cluster of 8 blocks, k = 2 blocks hold 4081..8176 bytes */
	h.clen = le32_put(4081);
	ck_assert_int_eq(zlfs_cluster_hdr_check(&h, 3, 2, why, sizeof(why)), 0);
	h.clen = le32_put(8176);
	ck_assert_int_eq(zlfs_cluster_hdr_check(&h, 3, 2, why, sizeof(why)), 0);
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 1, why, sizeof(why)), "clen");
	h.clen = le32_put(8177);
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 2, why, sizeof(why)), "clen");
	h.clen = le32_put(4080);
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 2, why, sizeof(why)), "clen");
	h.clen = le32_put(5000);
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 8, why, sizeof(why)), "stored blocks");
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 0, why, sizeof(why)), "stored blocks");
	REFUSED(zlfs_cluster_hdr_check(&h, 2, 2, why, sizeof(why)), "header log");
	h.alg = 3;
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 2, why, sizeof(why)), "alg");
	h.alg = 1;
	h.magic = le16_put(0x435b);
	REFUSED(zlfs_cluster_hdr_check(&h, 3, 2, why, sizeof(why)), "magic");
	/* the feature is read now; its superblock defaults must be in range */
	ck_assert_int_eq(zlfs_sb_compat(&s, ZLFS_REVISION, why, sizeof(why)), 0);
	s.cluster_log = ZLFS_CLUSTER_LOG_MIN;
	ck_assert_int_eq(zlfs_sb_check_layout(&s, why, sizeof(why)), 0);
	s.compress_alg = ZLFS_CLUSTER_ZSTD;
	ck_assert_int_eq(zlfs_sb_check_layout(&s, why, sizeof(why)), 0);
	s.compress_alg = ZLFS_CLUSTER_ALG_MAX;
	REFUSED(zlfs_sb_check_layout(&s, why, sizeof(why)), "superblock compress_alg");
	s.compress_alg = 0;
	s.cluster_log = ZLFS_CLUSTER_LOG_MAX + 1;
	REFUSED(zlfs_sb_check_layout(&s, why, sizeof(why)), "superblock cluster_log");
	s.cluster_log = 0;
	REFUSED(zlfs_sb_check_layout(&s, why, sizeof(why)), "superblock cluster_log");
	s.cluster_log = ZLFS_CLUSTER_LOG_MAX;
	s.compress_pad = 1;
	REFUSED(zlfs_sb_check_layout(&s, why, sizeof(why)), "superblock compress_pad");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("limits");

	tcase_add_test(tc, t_sb_limits);
	tcase_add_test(tc, t_cp_limits);
	tcase_add_test(tc, t_table_limits);
	tcase_add_test(tc, t_node_limits);
	tcase_add_test(tc, t_xattr_node_limits);
	tcase_add_test(tc, t_dentry_limits);
	tcase_add_test(tc, t_compress_limits);
	tcase_add_test(tc, t_dmark_limits);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
