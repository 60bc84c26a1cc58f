/*
 * dir_index.h - an in-memory index of a large directory's names (dir_index.c), used only by
 * dir.c.
 *
 * A directory's blocks answer "is NAME here?" by scanning two blocks in every hash level; in
 * a directory of 100k names that is 18 block scans for each lookup, and a create looks a name
 * up (twice) before adding it. The index maps each entry's stored 32-bit name hash to where
 * the entry is (block, slot), so a lookup costs one probe and a negative lookup touches no
 * block. It holds locations, never pointers into cached blocks, so the block cache may evict
 * freely. Entries with equal hashes are all kept; the caller checks the name.
 */
#ifndef ZLFS_DIR_INDEX_H
#define ZLFS_DIR_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct dindex;

/* A location packs a directory block and a slot: (blk << 8) | slot. */
static inline uint32_t dix_loc(uint32_t blk, uint32_t slot) { return blk << 8 | slot; }
static inline uint32_t dix_loc_blk(uint32_t loc) { return loc >> 8; }
static inline uint32_t dix_loc_slot(uint32_t loc) { return loc & 0xff; }

/* An empty index sized for about NAMES names, or NULL when out of memory. */
struct dindex *dix_new(uint32_t names);
void dix_free(struct dindex *ix);
/* Bytes the index holds (for the cache's memory bound). */
size_t dix_bytes(const struct dindex *ix);
/* 0, or -ENOMEM when the index could not grow (the caller then drops it). */
int dix_insert(struct dindex *ix, uint32_t hash, uint32_t loc);
void dix_remove(struct dindex *ix, uint32_t hash, uint32_t loc);
/* Walk the locations stored under HASH: set *POS to 0 first; each call gives the next one
 * in *LOC and returns 1, or returns 0 when there are no more. */
int dix_next(const struct dindex *ix, uint32_t hash, uint32_t *pos, uint32_t *loc);

#endif
