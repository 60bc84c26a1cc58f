/*
 * format_pack.h - the on-disk format of inode packs (PACKED_INODES, SPAN_SLOTS): a part of
 * format.h, which includes it at its end (include format.h, not this file).
 *
 * Owns: struct zlfs_inode_pack and its slots, the rule of spanning slots, and the functions
 * of format_pack.c over them. docs/format.md, "Inode packs"; docs/design.md, "Packed inodes".
 */
#ifndef ZLFS_FORMAT_PACK_H
#define ZLFS_FORMAT_PACK_H

#ifndef ZLFS_FORMAT_H
#error "include format.h, not format_pack.h"
#endif

/* ---- inode packs (PACKED_INODES) -----------------------------------------------------------
 * The inode of a small file - no index node (nid[] all 0), nothing in its address area past
 * the first ZLFS_PACK_ADDRS words (32 addresses or 128 bytes of inline data), no fsync count -
 * may be stored as a slot of a pack block rather than as a block of its own. The slot keeps
 * every other field of struct zlfs_inode; the header fields come from the pack (kind INODE,
 * index = ino = the slot's nid, cp_ver and seq the pack's, flags 0) and the omitted ones are
 * zero, so expanding a slot gives back exactly the 4 KiB inode it was made from. A pack is
 * written only by a checkpoint (flags 0, never rolled forward); positions [0, nr_slots) are
 * used, the others all zero. Its segment summary entry is {0, SUM_PACK}. The SIT counts a
 * pack valid while the NAT entry of any of its slots' nids names it.
 *
 * SPAN_SLOTS: a slot may take k > 1 consecutive positions. Bit p of `span` says position p
 * continues the slot before it: it is not a slot but the next ZLFS_PACK_SPAN_BYTES bytes of
 * that slot's address area, raw (position h + j holds the inode's address-area bytes
 * [128 + 248 (j - 1), 128 + 248 j)), so an inode whose address area is zero past byte
 * ZLFS_PACK_SPAN_MAX (3,600: inline data up to that size, an inline directory, up to 900
 * block addresses) fits. The span is the fewest positions that hold every nonzero byte: its
 * last position is not all zero. Position 0 is a slot; the slots (positions not in `span`)
 * hold ascending nids; the NAT names a slot's first position, never a continuation. Without
 * the feature `span` is 0 (an older reader checks that it is, and the feature bit makes it
 * refuse the image anyway). */
/* ZLFS_PACK_SLOTS (15) and ZLFS_PACK_ADDRS (32) are format.h's: inline directories use them */
#define ZLFS_PACK_SPAN_BYTES 248u /* a continuation position: sizeof(struct zlfs_pack_slot) */
#define ZLFS_PACK_SPAN_MAX (ZLFS_PACK_ADDRS * 4u + (ZLFS_PACK_SLOTS - 1) * ZLFS_PACK_SPAN_BYTES)
struct zlfs_pack_slot {
	le32 nid;           /* the inode; 0: an unused slot (all zero) */
	le32 generation;
	le32 mode;
	le32 uid;
	le32 gid;
	le32 nlink;
	le32 flags;
	le32 xattr_nid;
	le32 parent_ino;
	le32 rdev;
	le32 dir_depth;
	le32 inline_size;
	le32 dir_entries;
	uint8_t compress_alg;
	uint8_t cluster_log;
	le16 compress_pad;
	le64 size;
	le64 blocks;
	le64 atime_ns;
	le64 mtime_ns;
	le64 ctime_ns;
	le64 crtime_ns;
	uint8_t nonce[16];
	le32 addr[ZLFS_PACK_ADDRS]; /* the inode's addr[0, 32): the rest is zero or spans */
};
static_assert(sizeof(struct zlfs_pack_slot) == ZLFS_PACK_SPAN_BYTES, "pack slot size");
static_assert(ZLFS_PACK_SPAN_MAX <= ZLFS_INODE_ADDRS * 4u, "a span fits the address area");
struct zlfs_inode_pack {
	struct zlfs_blkhdr hdr; /* kind IPACK, flags 0, index 0, ino 0 */
	le32 nr_slots;          /* positions used: 1..ZLFS_PACK_SLOTS */
	le32 span;              /* SPAN_SLOTS: bit p, position p continues a slot (else 0) */
	struct zlfs_pack_slot slot[ZLFS_PACK_SLOTS];
	uint8_t pad[ZLFS_PAYLOAD - 8 - ZLFS_PACK_SLOTS * sizeof(struct zlfs_pack_slot)]; /* 0 */
	le64 csum;
};
static_assert(sizeof(struct zlfs_inode_pack) == ZLFS_BLOCK_SIZE, "inode pack size");

/* An inode pack read from a node log: header, position count, spans, every slot's nid
 * (ascending, in range), unused positions and padding zero, and each slot as an inode
 * (zlfs_node_check's rules). Its checksum is the caller's (zlfs_blk_verify). */
int zlfs_pack_check(const struct zlfs_sb_info *sbi, const void *blk, char *why, size_t len);
/* zlfs_pack_check but for the slots' inode fields: for a reader that checks the one inode it
 * expands. The helpers below trust a pack that passed it. */
int zlfs_pack_check_head(const struct zlfs_sb_info *sbi, const void *blk, char *why, size_t len);
/* Position POS of the (checked) pack PACK is a slot: used and not a continuation. */
static inline int zlfs_pack_is_slot(const void *pack, uint32_t pos)
{
	const struct zlfs_inode_pack *pk = pack;

	return pos < le32_get(pk->nr_slots) && !((le32_get(pk->span) >> pos) & 1u);
}
/* The positions slot POS of the (checked) pack PACK takes: 1, or more when it spans. */
uint32_t zlfs_pack_span(const void *pack, uint32_t pos);
/* Slot POS of pack PACK expanded into the 4 KiB inode it stands for, at OUT (unsealed). */
void zlfs_pack_expand(const void *pack, uint32_t pos, void *out);
/* The positions inode IN (4 KiB) takes in a pack: 1 when it fits a slot (no index node, no
 * address word past ZLFS_PACK_ADDRS, no fsync count or reserved field in use), 2..15 when
 * only a spanning slot holds it (its address area zero past ZLFS_PACK_SPAN_MAX), 0 when it
 * stays a whole block. */
uint32_t zlfs_pack_positions(const void *in);
/* Inode IN (4 KiB, nid in its header) into the positions from POS of pack PACK, spanning
 * only when SPAN allows it (SPAN_SLOTS on): the positions taken, or -E2BIG when it does not
 * fit there. The caller sets nr_slots and seals the pack. */
int zlfs_pack_fill(void *pack, uint32_t pos, const void *in, int span);

#endif
