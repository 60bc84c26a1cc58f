/*
 * dir_int.h - what the files of the directory code share (not a layer's header: only dir.c,
 * dir_cache.c, dir_inline.c and dmark.c include it). dir_cache.c owns the cache of directory
 * blocks and where the name indexes hang; dir_inline.c, block 0 kept in the inode; dir.c owns
 * names in those blocks.
 */
#ifndef ZLFS_DIR_INT_H
#define ZLFS_DIR_INT_H

#include "files.h"

#define BUCKET_BLOCKS 2
#define DCACHE_MAX 4096 /* directory blocks kept (16 MiB) */
#define SLOTS ZLFS_DENTRY_SLOTS
/* Directories with this many levels get a name index (dir_index.h): below it a lookup scans
 * at most four blocks, and the index would cost more to build than it saves. */
#define DINDEX_MIN_DEPTH 3
#define DINDEX_BUCKETS 1024
#define DINDEX_MAX_BYTES (32u << 20) /* all indexes together; past it the others are dropped */

struct dpage {
	struct dpage *next;
	uint32_t ino;
	uint32_t idx;
	int dirty;
	int refs;
	int fresh; /* made for a hole: counted in dir_pending_blocks until written */
	struct zlfs_dentry_block *blk;
};

#define DPEND_BUCKETS 256

/* Blocks a directory has in the cache but not yet on the device, by ino. */
struct dpend {
	struct dpend *next;
	uint32_t ino;
	uint32_t n;
};

struct dindex_ent {
	struct dindex_ent *next;
	uint32_t ino;
	struct dindex *ix;
};

struct dir_cache {
	struct zlock lock;
	struct dpage **bucket;
	uint32_t nbuckets;
	uint32_t count;
	struct dindex_ent *ixb[DINDEX_BUCKETS]; /* name indexes of large directories, by ino */
	size_t ix_bytes;
	struct dpend *pend[DPEND_BUCKETS];
	struct dmtab *dm;         /* dmark.c: name changes since the last checkpoint */
};


/* dmark.c: NAME (disk form) in DIR went from inode OLD of type OTYPE to NEW of type NTYPE
 * (0: none); dir.c tells every change. */
void dmark_note(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		uint32_t old, uint8_t otype, uint32_t new, uint8_t ntype);

/* dir_inline.c: block 0 of a directory kept in its inode (INLINE_DENTRIES). */
/* DIR is flagged ZLFS_IFLAG_INLINE_DENTRY: block 0 is in its inode, no other block exists. */
int dinline_is(struct node_page *dir);
/* Block 0 of inline DIR into B (a fresh dentry block's header): 0 or -EUCLEAN with WHY. */
int dinline_read(struct zlfs_fs *fs, struct node_page *dir, struct zlfs_dentry_block *b,
		 char *why, size_t len);
/* B as block 0 of DIR stored in its inode, when DIR may and B fits (any block 0 it had is
 * released): 1 when done, 0 when it must be a block, or a negative errno. BLOCK1: the cache
 * holds block 1 of DIR (made or read). */
int dinline_store(struct zlfs_fs *fs, struct node_page *dir, const struct zlfs_dentry_block *b,
		  int block1);
/* Inline DIR becomes a directory of blocks (its block 0 is about to be written): its area
 * into SAVED and cleared, the flag off; dinline_undo puts both back if the write fails. */
void dinline_leave(struct zlfs_fs *fs, struct node_page *dir,
		   uint8_t saved[ZLFS_DENTRY_INLINE_SIZE]);
void dinline_undo(struct zlfs_fs *fs, struct node_page *dir,
		  const uint8_t saved[ZLFS_DENTRY_INLINE_SIZE]);

/* The directory cache of FS, made on first use; NULL when out of memory. */
struct dir_cache *dcache(struct zlfs_fs *fs);
/* Where DIR's name index hangs (under the cache's lock). */
struct dindex_ent **dindex_slot(struct dir_cache *dc, uint32_t ino);
void dindex_drop(struct dir_cache *dc, uint32_t ino);
/* Block IDX of DIR, held: from the cache, or read and checked (the reason for refusing it in
 * WHY), or made for a hole when CREATE. -ENOENT: a hole and not CREATE. */
int dpage_get_why(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, int create,
		  struct dpage **out, char *why, size_t whylen);
int dpage_get(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, int create,
	      struct dpage **out);
void dpage_put(struct zlfs_fs *fs, struct dpage *p);
/* P changed: it is written by the next dir_flush. */
void dpage_dirty(struct zlfs_fs *fs, struct dpage *p);

static inline uint32_t name_slots(size_t len)
{
	return (uint32_t)((len + ZLFS_DENTRY_SLOT_LEN - 1) / ZLFS_DENTRY_SLOT_LEN);
}

static inline uint32_t level_first_block(uint32_t level)
{
	return BUCKET_BLOCKS * ((1u << level) - 1);
}

static inline int bit_test(const uint8_t *map, uint32_t i) { return map[i / 8] & (1u << (i % 8)); }
static inline void bit_set(uint8_t *map, uint32_t i) { map[i / 8] |= (uint8_t)(1u << (i % 8)); }
static inline void bit_clear(uint8_t *map, uint32_t i) { map[i / 8] &= (uint8_t)~(1u << (i % 8)); }

#endif
