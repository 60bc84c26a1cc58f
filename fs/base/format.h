/*
 * format.h - the on-disk format of zlfs, every structure in one place.
 *
 * Owns: block layouts, constants, feature flags, the checksum rule, and the host <-> disk
 * conversion of the superblock and the checkpoint head. docs/format.md describes the same
 * layout zone by zone; the two must change together.
 * May call: xxHash, libc. Called by every layer that reads or writes metadata.
 *
 * Rules that hold for every structure here:
 *  - fields are fixed-width little-endian (le16/le32/le64, converted with the helpers below);
 *  - every metadata block is 4 KiB, starts with struct zlfs_blkhdr and ends with a 64-bit
 *    XXH3 checksum of the preceding 4088 bytes, seeded from the filesystem UUID so that blocks
 *    left on the device by an earlier filesystem never validate;
 *  - sizes are pinned by static assertions, so a change of layout fails the build.
 * User file data blocks are raw and carry no header.
 */
#ifndef ZLFS_FORMAT_H
#define ZLFS_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

typedef uint16_t le16;
typedef uint32_t le32;
typedef uint64_t le64;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline uint16_t le16_get(le16 v) { return v; }
static inline uint32_t le32_get(le32 v) { return v; }
static inline uint64_t le64_get(le64 v) { return v; }
#else
static inline uint16_t le16_get(le16 v) { return __builtin_bswap16(v); }
static inline uint32_t le32_get(le32 v) { return __builtin_bswap32(v); }
static inline uint64_t le64_get(le64 v) { return __builtin_bswap64(v); }
#include "format_pack.h"

#endif
static inline le16 le16_put(uint16_t v) { return le16_get(v); }
static inline le32 le32_put(uint32_t v) { return le32_get(v); }
static inline le64 le64_put(uint64_t v) { return le64_get(v); }

/* ---- constants ------------------------------------------------------------------------- */

#define ZLFS_MAGIC 0x53464c5aU /* "ZLFS" as bytes on disk */
#define ZLFS_REVISION 3        /* format revision written by this code */
#define ZLFS_MIN_REVISION 1    /* oldest revision this code reads */

#define ZLFS_BLOCK_SHIFT 12
#define ZLFS_BLOCK_SIZE (1u << ZLFS_BLOCK_SHIFT)
#define ZLFS_CSUM_OFF (ZLFS_BLOCK_SIZE - 8)
#define ZLFS_HDR_SIZE 32
#define ZLFS_PAYLOAD (ZLFS_CSUM_OFF - ZLFS_HDR_SIZE) /* 4056 bytes between header and checksum */

/* Block addresses are 32-bit block numbers from the start of the device (16 TiB limit, as in
 * F2FS). Address 0 lies in the first superblock zone and is never a data or node block, so it
 * means "no block" everywhere: a hole, an unused NAT entry, a meta block never written. */
#define ZLFS_ADDR_NULL 0u
/* The three top addresses are never blocks: a device may hold at most this many. (Until
 * ZLFS_ADDR_COMPRESSED the limit was 0xfffffffe, but no layout zlfs_sb_check_layout takes
 * had that many blocks: 0xfffffffe = 2 x (2^31 - 1), a prime, so it is no whole number of
 * zones of a layout of seven or more zones and at least CP_ZONE_MIN_BLOCKS blocks each.) */
#define ZLFS_MAX_BLOCKS 0xfffffffdULL
/* In memory only: a NAT entry whose node exists but was never written yet. */
#define ZLFS_ADDR_NEW 0xffffffffu
/* In a data pointer (with ZLFS_FEAT_INCOMPAT_PREALLOC): a block fallocate reserved and nothing
 * wrote yet. It reads as zeros, counts in the inode's blocks and in the checkpoint's
 * prealloc_blocks, and occupies no block on the device. */
#define ZLFS_ADDR_PREALLOC 0xfffffffeu
/* In a data pointer (with ZLFS_FEAT_INCOMPAT_COMPRESS, in a file flagged ZLFS_IFLAG_COMPRESS):
 * the first slot of a cluster stored compressed. The next k slots (1 <= k < 2^n) hold the k
 * blocks of its compressed form, the first opening with struct zlfs_cluster_hdr, and the
 * cluster's other slots are null. The marker is no block: it is never given to the SIT and
 * counts nowhere (docs/format.md, "Compressed clusters"). */
#define ZLFS_ADDR_COMPRESSED 0xfffffffdu

#define ZLFS_NID_NULL 0u
#define ZLFS_ROOT_INO 1u

#define ZLFS_NAME_MAX 255
#define ZLFS_LABEL_MAX 64

/* Segments: the unit of summary and usage accounting inside a zone. Power of two blocks; the
 * last block of each segment is its summary block, so a segment holds SEG_BLOCKS-1 blocks of
 * data or nodes. A zone holds capacity / segment-size segments; any tail is never written. */
#define ZLFS_SEG_BLOCKS_MAX 512u
#define ZLFS_SEG_BLOCKS_MIN 16u

/* ---- feature flags ----------------------------------------------------------------------- */
/* compat: an older reader may ignore it. ro_compat: an older reader may only mount read-only.
 * incompat: an older reader must refuse the filesystem. */
#define ZLFS_FEAT_COMPAT_SUPP 0u
#define ZLFS_FEAT_RO_COMPAT_SUPP 0u
#define ZLFS_FEAT_INCOMPAT_ENCRYPT (1u << 0) /* encryption fields in the superblock are live */
/* Data pointers may hold ZLFS_ADDR_PREALLOC and checkpoints remapped owners (set by the first
 * fallocate that reserves or moves blocks: older code would read those as bad pointers). */
#define ZLFS_FEAT_INCOMPAT_FALLOC (1u << 1)
/* fsync makes its data and nodes durable with one device flush and marks its inode
 * FSYNC_GROUP (set by mkfs: an older reader would roll a torn group forward). Checkpoints
 * keep their two flushes: a pack must be provably whole on its own, or a device that lost
 * acknowledged blocks would pass for a power cut and roll the filesystem back silently. */
#define ZLFS_FEAT_INCOMPAT_ONE_FLUSH (1u << 2)
/* A regular file flagged ZLFS_IFLAG_INLINE keeps its bytes [0, size) in the inode's address
 * area (set by mkfs: an older reader would take those bytes for block addresses). */
#define ZLFS_FEAT_INCOMPAT_INLINE_DATA (1u << 3)
/* A file's xattrs are a chain of xattr nodes (struct zlfs_xattr_node) and a value too big
 * for one of them lives in a chain of value nodes (set by mkfs: an older reader would see
 * only the first node's attributes and its fsck would free the rest as unreachable). */
#define ZLFS_FEAT_INCOMPAT_XATTR_NODES (1u << 4)
/* xattr entries of index 4 (ZLFS_XATTR_INDEX_ACL: system.posix_acl_access and _default) are
 * POSIX ACLs the kernel enforces (set by the first ACL stored: a reader without ACLs would
 * grant what they deny). */
#define ZLFS_FEAT_INCOMPAT_POSIX_ACL (1u << 5)
/* Regular files flagged ZLFS_IFLAG_COMPRESS are cut into clusters of 2^n blocks, and a
 * cluster may be stored compressed: ZLFS_ADDR_COMPRESSED in its first slot, its compressed
 * form in the next k (struct zlfs_cluster_hdr; docs/compression.md). An older reader would
 * take the marker for an address and the compressed blocks for the file's bytes. Set by
 * mkfs --compress; the superblock's compress_alg and cluster_log are then the defaults. */
#define ZLFS_FEAT_INCOMPAT_COMPRESS (1u << 6)
/* fsync of a regular file whose name no checkpoint has written yet puts a dentry mark
 * (struct zlfs_dentry_mark) in its fsync group, and recovery links that name into its
 * directory (set by mkfs: an older reader would find the group one copy short and drop an
 * fsync'ed file, or roll it forward with no name). */
#define ZLFS_FEAT_INCOMPAT_DENTRY_MARK (1u << 7)
/* Inodes may carry chattr's flags (ZLFS_IFLAG_ATTR: immutable, append-only, nodump, noatime).
 * Set by the first chattr that sets one: an older reader would call such an inode damaged,
 * and one that skipped the bits would let an immutable file be changed. */
#define ZLFS_FEAT_INCOMPAT_ATTR_FLAGS (1u << 8)
/* The inodes of small files may be stored several to a block (struct zlfs_inode_pack), the
 * NAT entry naming the slot in the top bits of its ino (ZLFS_NAT_SLOT_SHIFT), and node ids
 * stay below ZLFS_MAX_NID_PACKED. An older reader would take the slot bits for an inode
 * number and a pack for a damaged node (docs/design.md, "Packed inodes"). */
#define ZLFS_FEAT_INCOMPAT_PACKED_INODES (1u << 9)
/* A directory flagged ZLFS_IFLAG_INLINE_DENTRY keeps the entries of its one dentry block in
 * its inode's address area (zlfs_dentry_inline_encode) and has no data block. Set by the
 * first directory stored so: an older reader would take the entries for block addresses. */
#define ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES (1u << 10)
/* An inode pack's slot may span several positions (struct zlfs_inode_pack's span bits), so
 * an inode with up to 3,600 bytes in its address area (inline data, block addresses) is
 * packed. Set by the first checkpoint that writes one: an older reader would take the
 * continuation bytes for slots. */
#define ZLFS_FEAT_INCOMPAT_SPAN_SLOTS (1u << 11)
#define ZLFS_FEAT_INCOMPAT_SUPP                                                                 \
	(ZLFS_FEAT_INCOMPAT_ENCRYPT | ZLFS_FEAT_INCOMPAT_FALLOC | ZLFS_FEAT_INCOMPAT_ONE_FLUSH |   \
	 ZLFS_FEAT_INCOMPAT_INLINE_DATA | ZLFS_FEAT_INCOMPAT_XATTR_NODES |                    \
	 ZLFS_FEAT_INCOMPAT_POSIX_ACL | ZLFS_FEAT_INCOMPAT_COMPRESS |                          \
	 ZLFS_FEAT_INCOMPAT_DENTRY_MARK | ZLFS_FEAT_INCOMPAT_ATTR_FLAGS |                      \
	 ZLFS_FEAT_INCOMPAT_PACKED_INODES | ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES |                \
	 ZLFS_FEAT_INCOMPAT_SPAN_SLOTS)

/* The revision this code reads as: ZLFS_REVISION, or $ZLFS_TEST_READER_REVISION (1..65535) so
 * a test can play an older or a newer reader against one image. Only tests set it. */
unsigned zlfs_reader_revision(void);

struct zlfs_sb_info;
/* May a reader of revision READER use the filesystem SBI describes? 0: read-write (unknown
 * compat bits are ignored), 1: read-only only (unknown ro_compat bits), -EPROTONOSUPPORT: not
 * at all (min_revision above READER, revision below ZLFS_MIN_REVISION, unknown incompat bits).
 * WHY (may be NULL) gets one line naming the revisions or bits and what to do. zlfs_sb_decode
 * refuses what this refuses for zlfs_reader_revision(), after filling SBI, so a caller can
 * still say why. */
int zlfs_sb_compat(const struct zlfs_sb_info *sbi, unsigned reader, char *why, size_t len);

/* ---- log types ----------------------------------------------------------------------------
 * Each active log appends to its own open zone. With 2 logs only WARM_NODE and WARM_DATA are
 * active (everything maps to them); with 4, HOT/WARM of each kind (COLD and FROZEN fold into
 * WARM); with 6, all but FROZEN (it folds into COLD); with 7 (revision 2), the first seven;
 * with 10 (revision 3), all of them.
 * Garbage collection moves data it moves for the first time to COLD and data it moved before
 * to FROZEN, so data that keeps surviving collects in zones of its own. WARM_DATA_1..3 are
 * lanes of the warm data log: user data of files written at the same time goes to different
 * zones, which a zoned device writes in parallel while each zone takes one write at a time.
 * With fewer logs they fold into WARM_DATA. */
enum zlfs_log_type {
	ZLFS_LOG_HOT_NODE = 0,
	ZLFS_LOG_WARM_NODE,
	ZLFS_LOG_COLD_NODE,
	ZLFS_LOG_HOT_DATA,
	ZLFS_LOG_WARM_DATA,
	ZLFS_LOG_COLD_DATA,   /* data moved by GC from a user log: moved once */
	ZLFS_LOG_FROZEN_DATA, /* revision 2: data moved by GC from a GC log: moved more often */
	ZLFS_LOG_WARM_DATA_1, /* revision 3: lanes of the warm data log */
	ZLFS_LOG_WARM_DATA_2,
	ZLFS_LOG_WARM_DATA_3,
	ZLFS_NR_LOG_TYPES
};
#define ZLFS_NR_LOG_TYPES_R1 6u /* log types revision 1 knows: the checkpoint head's first table */
#define ZLFS_NR_LOG_TYPES_R2 7u /* log types revision 2 knows */
#define ZLFS_DATA_LANES 4u      /* WARM_DATA and its lanes */
#define ZLFS_LOG_NONE 0xffu

/* Log counts a layout may have: 2, 4 and 6 since revision 1, 7 since revision 2, 10 since
 * revision 3. */
int zlfs_nr_logs_valid(uint32_t nr_logs, unsigned revision);
/* The oldest reader revision that understands a layout of NR_LOGS logs. */
unsigned zlfs_logs_min_revision(uint32_t nr_logs);

/* ---- common block header ------------------------------------------------------------------- */

enum zlfs_blk_kind {
	ZLFS_KIND_SUPER = 1,
	ZLFS_KIND_CP_HEAD,
	ZLFS_KIND_CP_SUMMARY, /* an open segment's summary, carried in a checkpoint pack */
	ZLFS_KIND_CP_ORPHAN,
	ZLFS_KIND_CP_TAIL,
	ZLFS_KIND_NAT,        /* meta log */
	ZLFS_KIND_SIT,        /* meta log */
	ZLFS_KIND_MAP,        /* meta log: addresses of NAT and SIT blocks */
	ZLFS_KIND_SUMMARY,    /* last block of a full segment in the main area */
	ZLFS_KIND_INODE,      /* node blocks: */
	ZLFS_KIND_DNODE,
	ZLFS_KIND_INDNODE,
	ZLFS_KIND_XATTR,
	ZLFS_KIND_DENTRY,     /* directory data block */
	ZLFS_KIND_CP_REMAP,   /* owners of data blocks whose segment summary is stale */
	ZLFS_KIND_XVALUE,     /* node block (XATTR_NODES): part of one xattr's value */
	ZLFS_KIND_DMARK,      /* node log (DENTRY_MARK): a new file's name, in its fsync group */
	ZLFS_KIND_IPACK,      /* node log (PACKED_INODES): several small inodes in one block */
	ZLFS_KIND_MAX
};

/* Node block flags (struct zlfs_blkhdr.flags). */
#define ZLFS_NODE_FSYNC (1u << 0)  /* written by fsync: roll forward after a crash */
/* With FSYNC, on an inode (DENTRY_MARK feature): the block before it in its group is a
 * struct zlfs_dentry_mark naming the file, which recovery links into its directory. */
#define ZLFS_NODE_DENTRY (1u << 1)
/* With FSYNC, on an inode (ONE_FLUSH feature): the fsync wrote its data, its nodes and this
 * inode with one device flush after them all, so the marker alone does not prove the rest is
 * there. fsync_nodes counts the node copies of the inode written before it since its previous
 * marker; recovery takes the group only when all of them are found and every data block they
 * point to lies below its zone's write pointer (docs/design.md, "fsync without a checkpoint"). */
#define ZLFS_NODE_FSYNC_GROUP (1u << 2)

struct zlfs_blkhdr {
	le32 magic;   /* ZLFS_MAGIC */
	le16 kind;    /* enum zlfs_blk_kind */
	le16 flags;
	le32 index;   /* nid for node blocks, logical meta block for NAT/SIT/MAP, else 0 */
	le32 ino;     /* owning inode for node and dentry blocks, else 0 */
	le64 cp_ver;  /* checkpoint version the block was written under (roll-forward) */
	le64 seq;     /* filesystem-wide write sequence: orders copies of one node after a crash */
};
static_assert(sizeof(struct zlfs_blkhdr) == ZLFS_HDR_SIZE, "block header size");

/* ---- superblock -------------------------------------------------------------------------- */

#define ZLFS_SALT_SIZE 32
#define ZLFS_KEYCHECK_SIZE 32

struct zlfs_super {
	struct zlfs_blkhdr hdr;
	le16 revision;
	le16 min_revision;  /* oldest revision that may read this filesystem */
	le32 feat_compat;
	le32 feat_ro_compat;
	le32 feat_incompat;
	uint8_t uuid[16];
	char label[ZLFS_LABEL_MAX];
	le64 create_time;   /* seconds since the epoch */
	le64 sb_seq;        /* newest valid record in either superblock zone wins */
	/* device geometry seen by mkfs */
	le32 block_size;
	le32 dev_lblock_size;
	le64 zone_size;     /* bytes */
	le64 zone_capacity; /* bytes, smallest sequential zone capacity */
	le32 nr_zones;
	le32 nr_conv;
	le32 max_open;
	le32 max_active;
	/* layout */
	le32 seg_blocks;
	le32 segs_per_zone;
	le32 sb_zone[2];
	le32 cp_zone[2];
	le32 meta_zone_first;
	le32 meta_zones;
	le32 main_zone_first;
	le32 main_zones;
	le32 nr_logs;
	le32 ovp_percent;
	le32 reserved_zones; /* main-area zones held back so GC can always progress */
	le32 max_nid;
	le32 nat_blocks;
	le32 sit_blocks;
	le32 root_ino;
	le32 pad0;
	/* consistency-scan record, written by fsck.zlfs after a clean check */
	le64 last_fsck_time;
	/* encryption (live with ZLFS_FEAT_INCOMPAT_ENCRYPT) */
	le32 enc_kdf;        /* 0 none, 1 key file, 2 scrypt passphrase */
	le32 scrypt_r;
	le32 scrypt_p;
	le32 pad1;
	le64 scrypt_n;
	uint8_t enc_salt[ZLFS_SALT_SIZE];
	uint8_t key_check[ZLFS_KEYCHECK_SIZE];
	/* with ZLFS_FEAT_INCOMPAT_COMPRESS (else 0): what a mount without compress= gives new
	 * regular files (0: nothing, they stay plain) and the cluster size they get */
	uint8_t compress_alg; /* 0 or enum zlfs_cluster_alg */
	uint8_t cluster_log;  /* ZLFS_CLUSTER_LOG_MIN..MAX */
	le16 compress_pad;    /* 0 */
	uint8_t reserved[3732];
	le64 csum;
};
static_assert(sizeof(struct zlfs_super) == ZLFS_BLOCK_SIZE, "superblock size");

/* ---- checkpoint pack ----------------------------------------------------------------------
 * A pack is HEAD, its payload blocks (open-segment summaries, orphan lists) and TAIL, written
 * back to back in the checkpoint log. It is valid only when every block checksums, all carry
 * the same cp_ver, and TAIL records HEAD's checksum: a torn pack is never taken. */

#define ZLFS_CP_CLEAN (1u << 0)      /* written by unmount: no recovery work on next mount */
#define ZLFS_CP_ORPHANS (1u << 1)    /* orphan blocks follow the summaries */
#define ZLFS_CP_FSCK (1u << 2)       /* an error was seen: run fsck.zlfs */

#define ZLFS_ZONE_NONE 0xffffffffu

struct zlfs_cp_log {
	le32 zone;       /* open zone of this log, ZLFS_ZONE_NONE if it has none yet */
	le32 next_blk;   /* next block to write, counted from the zone start */
	le32 nr_entries; /* summary entries of the open segment (0: no summary block) */
	le32 reserved;
};

#define ZLFS_CP_MAP_MAX 900u      /* map blocks addressed by one checkpoint */
#define ZLFS_CP_ORPHAN_BLOCKS_MAX 256u /* a pack must also fit in its zone */

struct zlfs_cp_head {
	struct zlfs_blkhdr hdr;
	le64 version;
	le64 time_ns;
	le32 flags;
	le32 pack_blocks;     /* HEAD + payload + TAIL */
	le32 nr_logs;
	le32 nr_summaries;    /* CP_SUMMARY blocks, in log-type order of logs with entries */
	le32 nr_orphan_blocks;
	le32 nr_orphans;
	le32 meta_zone;       /* meta log position */
	le32 meta_next_blk;
	le32 nr_map;          /* map blocks in use */
	le32 next_free_nid;   /* allocation hint */
	struct zlfs_cp_log logs[ZLFS_NR_LOG_TYPES_R1];
	le64 valid_blocks;    /* main-area blocks referenced by this checkpoint */
	le64 valid_nodes;
	le64 valid_inodes;
	le64 user_bytes;      /* telemetry carried across mounts */
	le64 dev_bytes;
	le64 gc_bytes;
	le64 seq;             /* last block sequence number used */
	le64 prealloc_blocks; /* data pointers holding ZLFS_ADDR_PREALLOC, all files together */
	/* revisions 2 and 3: the open logs of types ZLFS_NR_LOG_TYPES_R1 and up, entry i for type
	 * ZLFS_NR_LOG_TYPES_R1 + i; written only for the logs the superblock has (zero in every
	 * other entry). Revision 2 used the first entry and kept the other three reserved. */
	struct zlfs_cp_log logs_r2[ZLFS_NR_LOG_TYPES - ZLFS_NR_LOG_TYPES_R1];
	le32 map_addr[ZLFS_CP_MAP_MAX];
	le32 nr_remap_blocks; /* CP_REMAP blocks, after the orphan blocks */
	le32 nr_remaps;
	le32 pad[42];
	le64 csum;
};
static_assert(sizeof(struct zlfs_cp_head) == ZLFS_BLOCK_SIZE, "checkpoint head size");

struct zlfs_cp_tail {
	struct zlfs_blkhdr hdr;
	le64 version;
	le64 head_csum;
	uint8_t reserved[ZLFS_PAYLOAD - 16];
	le64 csum;
};
static_assert(sizeof(struct zlfs_cp_tail) == ZLFS_BLOCK_SIZE, "checkpoint tail size");

#define ZLFS_ORPHANS_PER_BLOCK (ZLFS_PAYLOAD / 4)
struct zlfs_cp_orphan {
	struct zlfs_blkhdr hdr;
	le32 ino[ZLFS_ORPHANS_PER_BLOCK];
	le64 csum;
};
static_assert(sizeof(struct zlfs_cp_orphan) == ZLFS_BLOCK_SIZE, "orphan block size");

/* Data blocks that fallocate moved to another file position (COLLAPSE_RANGE, INSERT_RANGE)
 * keep their segment summary, which names the old owner: these entries name the new one,
 * and garbage collection looks here first. An entry goes when its block dies or moves. */
#define ZLFS_REMAP_BLOCKS_MAX 64u
struct zlfs_remap_entry {
	le32 addr;
	le32 nid;   /* owner node */
	le16 ofs;   /* slot in it */
	le16 pad;
};
#define ZLFS_REMAPS_PER_BLOCK (ZLFS_PAYLOAD / 12)
struct zlfs_cp_remap {
	struct zlfs_blkhdr hdr;
	struct zlfs_remap_entry e[ZLFS_REMAPS_PER_BLOCK]; /* fills the payload exactly */
	le64 csum;
};
static_assert(sizeof(struct zlfs_remap_entry) == 12, "remap entry size");
static_assert(sizeof(struct zlfs_cp_remap) == ZLFS_BLOCK_SIZE, "remap block size");

/* ---- segment summary ---------------------------------------------------------------------
 * Entry i describes block i of the segment: a data block names its owner node and the slot in
 * it; a node block names itself with ofs ZLFS_SUM_NODE. GC follows these to re-point parents.
 * The same layout is a segment's last block (KIND_SUMMARY, hdr.index = segment number) and a
 * checkpoint's copy of an open segment's summary (KIND_CP_SUMMARY, hdr.index = log type). */
#define ZLFS_SUM_ENTRIES (ZLFS_SEG_BLOCKS_MAX - 1)
#define ZLFS_SUM_NODE 0xffffu
/* PACKED_INODES: the entry of an inode pack, with nid 0 (the pack names its slots' nids). */
#define ZLFS_SUM_PACK 0xfffeu
struct zlfs_summary {
	struct zlfs_blkhdr hdr;
	le32 nid[ZLFS_SUM_ENTRIES];
	le16 ofs[ZLFS_SUM_ENTRIES];
	uint8_t reserved[ZLFS_PAYLOAD - ZLFS_SUM_ENTRIES * 6];
	le64 csum;
};
static_assert(sizeof(struct zlfs_summary) == ZLFS_BLOCK_SIZE, "summary block size");

/* ---- meta log: NAT, SIT, MAP ---------------------------------------------------------------
 * Logical meta blocks are numbered NAT first, then SIT: [0, nat_blocks) then
 * [nat_blocks, nat_blocks + sit_blocks). A MAP block holds the device address of 1016 of them;
 * the checkpoint holds the addresses of the MAP blocks. A meta block never written has address
 * ZLFS_ADDR_NULL and reads as all-zero entries. Meta blocks are only ever appended. */

struct zlfs_nat_entry {
	le32 blkaddr; /* node block address, ZLFS_ADDR_NULL when the nid is free */
	le32 ino;     /* inode the node belongs to */
	le32 version; /* bumped when the nid is freed, so stale node copies are told apart */
};
#define ZLFS_NAT_PER_BLOCK (ZLFS_PAYLOAD / 12)
/* PACKED_INODES: an inode stored in slot k of the pack at blkaddr has ino = nid | (k + 1) <<
 * ZLFS_NAT_SLOT_SHIFT; top bits 0 mean a whole block, as without the feature (nids stay below
 * ZLFS_MAX_NID_PACKED < 2^28, so the bits are free). Only inodes are packed: the low bits of
 * a slotted entry equal its nid. metacache.c splits the two at the NAT block boundary. */
#define ZLFS_NAT_SLOT_SHIFT 28
#define ZLFS_NAT_INO_MASK ((1u << ZLFS_NAT_SLOT_SHIFT) - 1u)
struct zlfs_nat_block {
	struct zlfs_blkhdr hdr;
	struct zlfs_nat_entry e[ZLFS_NAT_PER_BLOCK]; /* fills the payload exactly */
	le64 csum;
};
static_assert(sizeof(struct zlfs_nat_block) == ZLFS_BLOCK_SIZE, "NAT block size");

struct zlfs_sit_entry {
	le16 valid;     /* valid blocks in the segment */
	uint8_t log;    /* log type that wrote it, ZLFS_LOG_NONE when free */
	uint8_t flags;
	le32 reserved;
	le64 mtime;     /* seconds since the epoch of the last change: GC age */
	uint8_t bitmap[ZLFS_SEG_BLOCKS_MAX / 8];
};
static_assert(sizeof(struct zlfs_sit_entry) == 80, "SIT entry size");
#define ZLFS_SIT_PER_BLOCK (ZLFS_PAYLOAD / 80)
struct zlfs_sit_block {
	struct zlfs_blkhdr hdr;
	struct zlfs_sit_entry e[ZLFS_SIT_PER_BLOCK];
	uint8_t reserved[ZLFS_PAYLOAD - ZLFS_SIT_PER_BLOCK * 80];
	le64 csum;
};
static_assert(sizeof(struct zlfs_sit_block) == ZLFS_BLOCK_SIZE, "SIT block size");

#define ZLFS_MAP_PER_BLOCK (ZLFS_PAYLOAD / 4)
struct zlfs_map_block {
	struct zlfs_blkhdr hdr;
	le32 addr[ZLFS_MAP_PER_BLOCK];
	le64 csum;
};
static_assert(sizeof(struct zlfs_map_block) == ZLFS_BLOCK_SIZE, "map block size");

/* ---- node blocks ----------------------------------------------------------------------------
 * Every node has a nid; the NAT maps nid -> block address, so moving a node rewrites only its
 * NAT entry, never its parent. hdr.index = nid, hdr.ino = owning inode. "ofs" numbers the node
 * within its file's tree (0 = inode) so GC and roll-forward can place it. */

#define ZLFS_INODE_NIDS 5 /* direct, direct, indirect, indirect, double indirect */
#define ZLFS_INODE_ADDRS 977
#define ZLFS_NODE_ADDRS 1012 /* pointers in a direct or indirect node */

/* Inode flags. */
#define ZLFS_IFLAG_INLINE (1u << 0)    /* data lives in the inode's address area */
#define ZLFS_IFLAG_ENCRYPT (1u << 1)   /* contents and names are encrypted */
#define ZLFS_IFLAG_ORPHAN (1u << 2)    /* unlinked while open */
/* COMPRESS feature: a regular file cut into clusters of 2^cluster_log blocks, each stored
 * raw or compressed (ZLFS_ADDR_COMPRESSED); compress_alg is the algorithm its new clusters
 * get (each cluster's header names its own). Set only while the file has no block. */
#define ZLFS_IFLAG_COMPRESS (1u << 3)
/* ATTR_FLAGS feature: chattr's +i, +a, +d and +A. The daemon enforces the first two (the
 * kernel does so only for its own filesystems); the others are kept for the tools that ask. */
#define ZLFS_IFLAG_IMMUTABLE (1u << 4) /* no change to the file, its names or attributes */
#define ZLFS_IFLAG_APPEND (1u << 5)    /* data only appended; no name removed or added */
#define ZLFS_IFLAG_NODUMP (1u << 6)    /* dump(8) skips it */
#define ZLFS_IFLAG_NOATIME (1u << 7)   /* no access time kept */
#define ZLFS_IFLAG_ATTR                                                                  \
	(ZLFS_IFLAG_IMMUTABLE | ZLFS_IFLAG_APPEND | ZLFS_IFLAG_NODUMP | ZLFS_IFLAG_NOATIME)
/* INLINE_DENTRIES feature, on a directory only: its dentry block 0 is stored encoded in the
 * first ZLFS_DENTRY_INLINE_SIZE bytes of addr[] (the rest of addr[] and nid[] are zero); it
 * has no data block at all. Not ZLFS_IFLAG_INLINE: a directory may carry COMPRESS (what its
 * new files inherit), which INLINE excludes, and INLINE's rules (inline_size, size) are a
 * file's bytes, not entries. */
#define ZLFS_IFLAG_INLINE_DENTRY (1u << 8)
/* The inode's address area holds bytes, not block addresses: nothing there is a block. */
static inline int zlfs_iflags_area_inline(uint32_t flags)
{
	return !!(flags & (ZLFS_IFLAG_INLINE | ZLFS_IFLAG_INLINE_DENTRY));
}

struct zlfs_inode {
	struct zlfs_blkhdr hdr;
	le32 ofs;           /* always 0 */
	le32 mode;
	le32 uid;
	le32 gid;
	le32 nlink;
	le32 flags;
	le32 generation;
	le32 xattr_nid;
	le32 parent_ino;    /* directories: ".." (dot entries are not stored) */
	le32 rdev;
	le32 dir_depth;     /* directories: hash levels in use */
	le32 inline_size;
	le64 size;
	le64 blocks;        /* 4 KiB blocks allocated to data */
	le64 atime_ns;      /* nanoseconds since the epoch */
	le64 mtime_ns;
	le64 ctime_ns;
	le64 crtime_ns;
	uint8_t nonce[16];  /* per-file encryption nonce */
	le32 nid[ZLFS_INODE_NIDS];
	le32 dir_entries;   /* directories: entries stored (not counting . and ..) */
	le32 fsync_nodes;   /* on a FSYNC_GROUP marker: its group's other node copies */
	/* with ZLFS_IFLAG_COMPRESS (else 0): what was reserved[0] before the COMPRESS feature */
	uint8_t compress_alg; /* enum zlfs_cluster_alg for the file's new clusters */
	uint8_t cluster_log;  /* log2 of the blocks of a cluster: ZLFS_CLUSTER_LOG_MIN..MAX */
	le16 compress_pad;    /* 0 */
	le32 reserved;
	le32 addr[ZLFS_INODE_ADDRS];
	le64 csum;
};
static_assert(sizeof(struct zlfs_inode) == ZLFS_BLOCK_SIZE, "inode block size");
#define ZLFS_INLINE_MAX (ZLFS_INODE_ADDRS * 4)

struct zlfs_node {
	struct zlfs_blkhdr hdr;
	le32 ofs;
	le32 reserved;
	le32 ptr[ZLFS_NODE_ADDRS]; /* data addresses (DNODE) or child nids (INDNODE) */
	le64 csum;
};
static_assert(sizeof(struct zlfs_node) == ZLFS_BLOCK_SIZE, "node block size");

/* ---- inode packs (PACKED_INODES): format_pack.h, included at the end --------------------- */
#define ZLFS_PACK_SLOTS 15u /* positions of a pack; slot + 1 fits the NAT's 4 bits */
#define ZLFS_PACK_ADDRS 32u /* the address words a slot keeps */

/* xattr node: entries packed from data[0], each 4-byte aligned:
 * u8 name_index, u8 name_len, le16 value_size, name, value. */
struct zlfs_xattr_block {
	struct zlfs_blkhdr hdr;
	le32 ofs;
	le32 used;
	uint8_t data[ZLFS_PAYLOAD - 8];
	le64 csum;
};
static_assert(sizeof(struct zlfs_xattr_block) == ZLFS_BLOCK_SIZE, "xattr block size");

/* With ZLFS_FEAT_INCOMPAT_XATTR_NODES, an xattr node (KIND_XATTR) and a value node
 * (KIND_XVALUE) have this layout instead. The inode's xattr_nid starts a chain of xattr
 * nodes linked by next, ofs = 0, 1, 2... their places in it; each holds packed entries as
 * above, which never straddle two nodes. An entry whose index has ZLFS_XATTR_EXTERNAL keeps
 * no value of its own: its 8 value bytes are {le32 nid, le32 size} of a chain of value nodes
 * (ofs 0, 1, ... again) holding the value's bytes in order, every node but the last full.
 * A value is stored so when its entry would not fit an empty xattr node. */
struct zlfs_xattr_node {
	struct zlfs_blkhdr hdr;
	le32 ofs;      /* place in its chain */
	le32 used;     /* bytes of data in use */
	le32 next;     /* the chain's next node, 0 at its end */
	le32 reserved; /* 0 */
	uint8_t data[ZLFS_PAYLOAD - 16];
	le64 csum;
};
static_assert(sizeof(struct zlfs_xattr_node) == ZLFS_BLOCK_SIZE, "xattr chain node size");
/* With ZLFS_FEAT_INCOMPAT_DENTRY_MARK: written by the first fsync of a regular file made
 * since the last checkpoint into the warm node log, just before its marker (flags FSYNC |
 * FSYNC_GROUP | DENTRY), counted in its fsync_nodes; its later fsyncs write none (recovery
 * keeps every copy up to the last whole marker). It says that the file's one name is NAME in
 * directory PARENT_INO, which the last checkpoint had. No NAT entry points to it and it is
 * never valid in the SIT (summary owner: the inode, which never points to it), so GC and
 * fsck pass it as a dead block; it is read only by recovery, before the next checkpoint
 * writes the name into the directory's blocks. */
struct zlfs_dentry_mark {
	struct zlfs_blkhdr hdr;  /* kind DMARK, index = ino = the file's inode */
	le32 parent_ino;         /* the directory: 1..max_nid-1 */
	le32 generation;         /* the inode's generation: the mark names that inode's life */
	le16 name_len;           /* 1..ZLFS_NAME_MAX */
	uint8_t type;            /* DT_REG (8) */
	uint8_t reserved;        /* 0 */
	uint8_t name[ZLFS_NAME_MAX + 1]; /* the name's bytes (no '/', no NUL), zero after them */
	uint8_t pad[ZLFS_PAYLOAD - 12 - (ZLFS_NAME_MAX + 1)]; /* 0 */
	le64 csum;
};
static_assert(sizeof(struct zlfs_dentry_mark) == ZLFS_BLOCK_SIZE, "dentry mark size");

#define ZLFS_XATTR_NODE_SPACE ((uint32_t)(ZLFS_PAYLOAD - 16)) /* 4040 bytes */
#define ZLFS_XATTR_EXTERNAL 0x80u /* in an entry's index: the value is in value nodes */
#define ZLFS_XATTR_EXT_LEN 8u     /* the value bytes of such an entry: le32 nid, le32 size */
#define ZLFS_XATTR_VALUE_MAX 65536u /* XATTR_SIZE_MAX, the VFS's largest value */
/* Value nodes of the largest value, and xattr nodes of one file's chain (4 MiB of entries,
 * some 200,000 small attributes). */
#define ZLFS_XVALUE_NODES_MAX                                                                  \
	((ZLFS_XATTR_VALUE_MAX + ZLFS_XATTR_NODE_SPACE - 1) / ZLFS_XATTR_NODE_SPACE)
#define ZLFS_XATTR_NODES_MAX 1024u

/* ---- compressed clusters (COMPRESS feature) --------------------------------------------------
 * A compressed file's block index i lies in cluster i >> cluster_log, which one direct node
 * (or the inode) holds whole: only the first zlfs_cluster_slots() of a node's slots map the
 * file, the rest stay null. A cluster stored compressed has ZLFS_ADDR_COMPRESSED in its first
 * slot and its k stored blocks in the next k; block 0 of them opens with this header, the
 * compressed bytes follow it across the k blocks, and the last block is zero past them. Data
 * blocks carry no block header or checksum: this header is the cluster's own, and with the
 * file's ENCRYPT flag it is ciphertext like the rest of each block (decrypted first). */
enum zlfs_cluster_alg {
	ZLFS_CLUSTER_LZ4 = 1,
	ZLFS_CLUSTER_ZSTD = 2,
	ZLFS_CLUSTER_ALG_MAX
};
#define ZLFS_CLUSTER_MAGIC 0x435au /* "ZC" as bytes on disk */
#define ZLFS_CLUSTER_LOG_MIN 2u    /* 4 blocks, 16 KiB (mkfs's default, as F2FS's) */
#define ZLFS_CLUSTER_LOG_MAX 6u    /* 64 blocks, 256 KiB */
#define ZLFS_CLUSTER_HDR_SIZE 16u
struct zlfs_cluster_hdr {
	le16 magic;    /* ZLFS_CLUSTER_MAGIC */
	uint8_t alg;   /* enum zlfs_cluster_alg */
	uint8_t log;   /* log2 of the cluster's blocks: the inode's cluster_log */
	le32 clen;     /* bytes of compressed data after the header */
	/* XXH64 of those bytes, seeded with XXH64 of {le64 cluster index, le32 ino, le32 0,
	 * header bytes 0-7} under the filesystem's checksum seed (zlfs_cluster_hash): a cluster
	 * copied to another file or place, or a header changed, does not verify. */
	le64 hash;
} __attribute__((packed));
static_assert(sizeof(struct zlfs_cluster_hdr) == ZLFS_CLUSTER_HDR_SIZE, "cluster header size");
/* Compressed bytes k stored blocks hold at most. */
#define ZLFS_CLUSTER_CLEN_MAX(k) ((uint32_t)(k) * ZLFS_BLOCK_SIZE - ZLFS_CLUSTER_HDR_SIZE)

/* Slots of a node of SLOTS pointers that map a compressed file of clusters of 2^LOG blocks:
 * whole clusters only (976 of the inode's 977 and all 1012 of a direct node's for LOG 2). */
static inline uint32_t zlfs_cluster_slots(uint32_t slots, uint32_t log)
{
	return slots & ~((1u << log) - 1u);
}

/* ---- directory blocks -------------------------------------------------------------------------
 * A directory's data blocks are dentry blocks. A name of length L takes ceil(L/8) consecutive
 * slots; the dentry sits in the first. Bit i of the bitmap is set when slot i is taken. */
#define ZLFS_DENTRY_SLOTS 201
#define ZLFS_DENTRY_SLOT_LEN 8
struct zlfs_dentry {
	le32 hash;
	le32 ino;
	le16 name_len;
	uint8_t type;  /* DT_* of the target */
	uint8_t reserved;
};
static_assert(sizeof(struct zlfs_dentry) == 12, "dentry size");
struct zlfs_dentry_block {
	struct zlfs_blkhdr hdr;
	uint8_t bitmap[32];
	struct zlfs_dentry d[ZLFS_DENTRY_SLOTS];
	uint8_t name[ZLFS_DENTRY_SLOTS][ZLFS_DENTRY_SLOT_LEN];
	uint8_t reserved[ZLFS_PAYLOAD - 32 - ZLFS_DENTRY_SLOTS * 20];
	le64 csum;
};
static_assert(sizeof(struct zlfs_dentry_block) == ZLFS_BLOCK_SIZE, "dentry block size");

/* ---- inline directories (INLINE_DENTRIES) ------------------------------------------------------
 * A directory flagged ZLFS_IFLAG_INLINE_DENTRY stores the used entries of its dentry block 0
 * in the first ZLFS_DENTRY_INLINE_SIZE bytes of its inode's addr[] (the part a pack slot
 * keeps), so that a small directory costs no data block: byte 0 is the number of entries,
 * then each entry, packed, in ascending slot order: u8 slot (its first slot in block 0), u8
 * name_len (1..255), u8 type, le32 hash, le32 ino, then name_len name bytes (disk form); the
 * bytes after the last entry are zero. The slot is kept so readdir offsets (block, slot) stay
 * valid across the change between inline and block (docs/format.md, "Inline directories"). */
#define ZLFS_DENTRY_INLINE_SIZE (ZLFS_PACK_ADDRS * 4u)
static_assert(ZLFS_DENTRY_INLINE_SIZE == 128, "inline dentry area");
/* The used entries of B into OUT: 0, or -E2BIG when they do not fit (OUT is then garbage). */
int zlfs_dentry_inline_encode(const struct zlfs_dentry_block *b,
			      uint8_t out[ZLFS_DENTRY_INLINE_SIZE]);
/* IN back into B's bitmap, entries and names (its header, reserved bytes and checksum are
 * left as they are): 0, or -EUCLEAN with WHY for anything but a canonical encoding (lengths
 * past the area, slots past the block or overlapping, name_len 0, bytes after the last entry).
 * The entries themselves are zlfs_dentry_check's to check. */
int zlfs_dentry_inline_decode(const uint8_t in[ZLFS_DENTRY_INLINE_SIZE],
			      struct zlfs_dentry_block *b, char *why, size_t len);

/* ---- checksums and block headers -------------------------------------------------------- */

/* Seed for every block checksum of the filesystem with this UUID. */
uint64_t zlfs_csum_seed(const uint8_t uuid[16]);
/* Fill the common header of a metadata block. */
void zlfs_blk_init(void *block, enum zlfs_blk_kind kind, uint32_t index, uint32_t ino,
		   uint64_t cp_ver);
/* Compute and store the checksum of a metadata block. */
void zlfs_blk_seal(void *block, uint64_t seed);
/* 0 if BLOCK checksums under SEED and is of KIND (ZLFS_KIND_MAX: any kind), else -EUCLEAN
 * (bad checksum, wrong magic) or -EBADMSG (good checksum, other kind). */
int zlfs_blk_verify(const void *block, uint64_t seed, enum zlfs_blk_kind kind);
uint64_t zlfs_blk_csum(const void *block, uint64_t seed);
/* The hash a compressed cluster's header H carries for its CLEN bytes at DATA, cluster INDEX
 * of inode INO, on the filesystem of checksum seed SEED (H's own hash field is not read). */
uint64_t zlfs_cluster_hash(const struct zlfs_cluster_hdr *h, const void *data, uint64_t seed,
			   uint32_t ino, uint64_t index);
const char *zlfs_kind_name(unsigned kind);

/* ---- host-side views of the superblock and checkpoint head ------------------------------ */

struct zlfs_sb_info {
	uint16_t revision, min_revision;
	uint32_t feat_compat, feat_ro_compat, feat_incompat;
	uint8_t uuid[16];
	char label[ZLFS_LABEL_MAX + 1];
	uint64_t create_time, sb_seq;
	uint32_t block_size, dev_lblock_size;
	uint64_t zone_size, zone_capacity;
	uint32_t nr_zones, nr_conv, max_open, max_active;
	uint32_t seg_blocks, segs_per_zone;
	uint32_t sb_zone[2], cp_zone[2];
	uint32_t meta_zone_first, meta_zones, main_zone_first, main_zones;
	uint32_t nr_logs, ovp_percent, reserved_zones;
	uint32_t max_nid, nat_blocks, sit_blocks, root_ino;
	uint64_t last_fsck_time;
	uint32_t enc_kdf, scrypt_r, scrypt_p;
	uint64_t scrypt_n;
	uint8_t enc_salt[ZLFS_SALT_SIZE];
	uint8_t key_check[ZLFS_KEYCHECK_SIZE];
	uint32_t compress_alg, cluster_log, compress_pad; /* COMPRESS only (else 0) */
	uint64_t seed; /* derived: checksum seed from uuid */
};

/* The incompatible features, read while a request may turn one on (zlfs_feature_incompat). */
static inline uint32_t zlfs_incompat(const struct zlfs_sb_info *s)
{
	return __atomic_load_n(&s->feat_incompat, __ATOMIC_RELAXED);
}

struct zlfs_cp_info {
	uint64_t version, time_ns, seq;
	uint32_t flags, pack_blocks, nr_logs, nr_summaries, nr_orphan_blocks, nr_orphans;
	uint32_t meta_zone, meta_next_blk, nr_map, next_free_nid;
	struct {
		uint32_t zone, next_blk, nr_entries;
	} logs[ZLFS_NR_LOG_TYPES];
	uint64_t valid_blocks, valid_nodes, valid_inodes;
	uint64_t user_bytes, dev_bytes, gc_bytes;
	uint64_t prealloc_blocks;
	uint32_t nr_remap_blocks, nr_remaps;
	uint32_t map_addr[ZLFS_CP_MAP_MAX];
};

/* Encode into a 4 KiB block, sealed with the checksum. */
void zlfs_sb_encode(const struct zlfs_sb_info *sbi, void *block);
/* Decode and validate (magic, checksum, revision, sizes, layout in range). 0 or -EUCLEAN for
 * a damaged record, -EPROTONOSUPPORT for a revision or incompat feature this code lacks. */
int zlfs_sb_decode(const void *block, struct zlfs_sb_info *sbi);
void zlfs_cp_head_encode(const struct zlfs_cp_info *cpi, uint64_t seed, void *block);
int zlfs_cp_head_decode(const void *block, uint64_t seed, struct zlfs_cp_info *cpi);
void zlfs_cp_tail_encode(uint64_t version, uint64_t head_csum, uint64_t seed, void *block);
/* 0 when TAIL closes the pack whose head has VERSION and HEAD_CSUM. */
int zlfs_cp_tail_check(const void *block, uint64_t seed, uint64_t version, uint64_t head_csum);

/* ---- limits: the legal range of every value read from a device (format_check.c) -----------
 * A device is input and may be hostile. Each decoder calls the check for what it decoded before
 * anything else uses it; each check answers 0 or -EUCLEAN and, in WHY (may be NULL), one line
 * naming the field, its value and its range. docs/format.md, "Limits", lists them all. */

/* ERR, after FMT's message written into WHY (LEN bytes; WHY may be NULL): how every check,
 * decoder and layout rule that says why it refuses something answers. */
int zlfs_why(int err, char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define ZLFS_DIR_DEPTH_MAX 22u  /* hash levels of a directory (dir.c never grows past it) */
/* Entries a directory of the deepest layout can hold: 2 blocks per bucket, 2^L buckets in
 * level L, every slot a name. */
#define ZLFS_DIR_ENTRIES_MAX (2u * ((1u << ZLFS_DIR_DEPTH_MAX) - 1u) * ZLFS_DENTRY_SLOTS)
#define ZLFS_XATTR_INDEX_MAX 3u /* user, trusted, security */
#define ZLFS_XATTR_INDEX_ACL 4u /* system. (POSIX_ACL): posix_acl_access, posix_acl_default */
/* Node ids: mkfs gives one per 8 blocks, at most 2^28, rounded up to whole NAT blocks. */
#define ZLFS_MAX_NID (((1u << 28) / ZLFS_NAT_PER_BLOCK + 1u) * ZLFS_NAT_PER_BLOCK)
/* With PACKED_INODES one NAT block fewer: every nid is below 2^28, free of the slot bits. */
#define ZLFS_MAX_NID_PACKED (((1u << 28) / ZLFS_NAT_PER_BLOCK) * ZLFS_NAT_PER_BLOCK)
/* Blocks a file's tree addresses (data.c), and so its largest size in bytes. */
#define ZLFS_FILE_MAX_BLOCKS                                                                   \
	((uint64_t)ZLFS_INODE_ADDRS + 2ULL * ZLFS_NODE_ADDRS +                                 \
	 2ULL * ZLFS_NODE_ADDRS * ZLFS_NODE_ADDRS +                                            \
	 (uint64_t)ZLFS_NODE_ADDRS * ZLFS_NODE_ADDRS * ZLFS_NODE_ADDRS)
#define ZLFS_FILE_MAX_BYTES (ZLFS_FILE_MAX_BLOCKS * ZLFS_BLOCK_SIZE)
/* scrypt's cost, bounded so that a crafted superblock cannot make a mount take hours or
 * gigabytes: mkfs.zlfs's strongest choice is within it. */
#define ZLFS_SCRYPT_N_MAX (1ULL << 22)
#define ZLFS_SCRYPT_RP_MAX 64u
#define ZLFS_SCRYPT_MEM_MAX (1ULL << 30)

/* Blocks of a zone that may be written: zone_capacity in blocks. */
uint32_t zlfs_cap_blocks(const struct zlfs_sb_info *sbi);
/* ADDR is a block of a main-area segment that may hold data or a node (not a summary slot,
 * not past the zone's capacity). */
int zlfs_addr_is_main(const struct zlfs_sb_info *sbi, uint32_t addr);
/* ADDR is a block of the meta area below its zone's capacity. */
int zlfs_addr_is_meta(const struct zlfs_sb_info *sbi, uint32_t addr);
/* A data pointer: null, a main-area block, or a reservation (FALLOC feature). */
int zlfs_data_ptr_ok(const struct zlfs_sb_info *sbi, uint32_t addr);
/* The slots SLOTS[0, N) of a compressed file of clusters of 2^LOG blocks (N a multiple of
 * 2^LOG, the first slot a cluster's): each cluster raw (no marker) or ZLFS_ADDR_COMPRESSED,
 * k >= 1 main-area blocks and nulls after them. WHAT names the slots in WHY. */
int zlfs_cluster_slots_check(const struct zlfs_sb_info *sbi, uint32_t log, const le32 *slots,
			     uint32_t n, const char *what, char *why, size_t len);
/* A compressed cluster's header, read from the first of its K stored blocks, for a file of
 * clusters of 2^LOG blocks: magic, a known algorithm, LOG, k < 2^LOG and a length that needs
 * exactly K blocks. The hash is the codec's to check (cluster.c). */
int zlfs_cluster_hdr_check(const struct zlfs_cluster_hdr *h, uint32_t log, uint32_t k, char *why,
			   size_t len);
/* Log type TYPE has a log of its own in a layout of NR_LOGS (the others fold into it). */
int zlfs_log_active(uint32_t nr_logs, uint32_t type);
/* The superblock's layout against itself (zlfs_sb_decode runs it). */
int zlfs_sb_check_layout(const struct zlfs_sb_info *sbi, char *why, size_t len);
/* A checkpoint head against the layout. */
int zlfs_cp_check(const struct zlfs_sb_info *sbi, const struct zlfs_cp_info *cpi, char *why,
		  size_t len);
int zlfs_nat_entry_check(const struct zlfs_sb_info *sbi, uint32_t nid, uint32_t addr,
			 uint32_t ino, char *why, size_t len);
int zlfs_sit_entry_check(const struct zlfs_sb_info *sbi, uint32_t segno,
			 const struct zlfs_sit_entry *e, char *why, size_t len);
/* A segment summary entry (or a remap entry): the owner nid and its slot. */
int zlfs_sum_entry_check(const struct zlfs_sb_info *sbi, uint32_t nid, uint16_t ofs, char *why,
			 size_t len);
/* A node block read for NID, of any node kind: its header and every field its kind has. */
int zlfs_node_check(const struct zlfs_sb_info *sbi, uint32_t nid, const void *blk, char *why,
		    size_t len);
/* The hash a name (its disk form: ciphertext in an encrypted directory) is placed by. */
uint32_t zlfs_name_hash(const struct zlfs_sb_info *sbi, const void *name, size_t len);
/* A dentry mark (DENTRY_MARK) read by recovery: header, parent, type and name. */
int zlfs_dmark_check(const struct zlfs_sb_info *sbi, const void *blk, char *why, size_t len);
/* A directory block: bitmap, and every entry's name length, slots, inode, type and hash. */
int zlfs_dentry_check(const struct zlfs_sb_info *sbi, const void *blk, char *why, size_t len);

/* Geometry helpers shared by mkfs, the daemon and fsck. */
static inline uint32_t zlfs_zone_blocks(const struct zlfs_sb_info *sbi)
{
	return (uint32_t)(sbi->zone_size / ZLFS_BLOCK_SIZE);
}
static inline uint32_t zlfs_zone_start_blk(const struct zlfs_sb_info *sbi, uint32_t zone)
{
	return zone * zlfs_zone_blocks(sbi);
}
static inline uint32_t zlfs_main_segments(const struct zlfs_sb_info *sbi)
{
	return sbi->main_zones * sbi->segs_per_zone;
}

#include "format_pack.h"

#endif
