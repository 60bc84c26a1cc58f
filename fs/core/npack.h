/*
 * npack.h - the checkpoint's side of inode packs (npack.c), for node.c: which dirty inodes
 * go into which pack, what they owe meanwhile, and the write of a pack. Part of core, not
 * its public face (core.h has what the other folders call: reading slots, deaths, GC).
 */
#ifndef ZLFS_NPACK_H
#define ZLFS_NPACK_H

#include "core.h"

/* Write the inodes IN[0, N) (4 KiB forms, taking at most ZLFS_PACK_SLOTS positions, each
 * fitting: npack_positions) as one pack to log LOG, their NAT entries re-pointed and their
 * old copies dead. The first spanning slot turns SPAN_SLOTS on (the superblock first). */
int npack_write(struct zlfs_fs *fs, const void *const *in, uint32_t n, enum zlfs_log_type log);
/* The positions INODE (4 KiB form) takes in a pack: 1, more for a spanning slot (where
 * SPAN_SLOTS is on or may be turned on), or 0: written whole (or no PACKED_INODES). */
uint32_t npack_positions(const struct zlfs_fs *fs, const void *inode);
/* INODE's share of a pack in the room its checkpoint keeps (node.c's node_owe): 0 when it
 * is written whole, its positions, and for a span of k positions 2k - 1: a pack is closed
 * with fewer than k positions unused only by a span of k, so the units of the inodes packed
 * are at least ZLFS_PACK_SLOTS times the packs written but the last. */
uint32_t npack_units(const struct zlfs_fs *fs, const void *inode);
/* A dirty inode a checkpoint packs (node.c's node_flush_packs). */
struct npack_item {
	struct node_page *np; /* held */
	uint32_t order;       /* its place in the dirty list */
	uint8_t type;         /* its node log */
	uint8_t k;            /* its positions (npack_positions) */
	uint8_t taken;        /* in a pack already (npack_group) */
};
/* IT[0, N) by node log, then in dirty-list order. */
void npack_sort(struct npack_item *it, uint32_t n);
/* The items of the next pack of the sorted IT[0, N) into GRP: their count, 0 when none is
 * left. *FIRST is the first item not taken (0 at the start). A pack takes, from it on, each
 * item of its log that still fits, and closes when full or after NPACK_LOOKAHEAD items that
 * did not fit: a pack closed with w positions unused leaves its first item not taken, of
 * more than w positions, to start the next (npack_units' bound). */
uint32_t npack_group(struct npack_item *it, uint32_t n, uint32_t *first,
		     struct npack_item **grp);
/* The blocks owed for UNITS units of pack shares. */
static inline uint32_t npack_blocks(uint32_t units)
{
	return (units + ZLFS_PACK_SLOTS - 1) / ZLFS_PACK_SLOTS;
}
#endif
