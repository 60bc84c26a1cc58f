/*
 * remap.c - owners of data blocks whose segment summary no longer names them.
 *
 * Owns: the table of (block address -> owner node and slot) for data blocks that fallocate's
 * COLLAPSE_RANGE and INSERT_RANGE moved to another position in their file without copying
 * them. A segment summary is written once, at the end of a segment in a sequential zone, so
 * it cannot follow such a move; garbage collection asks here before it trusts a summary.
 * An entry goes when its block dies or is moved by GC (seg_mark), so the table holds only
 * moved blocks still in place. Every checkpoint carries the whole table (ZLFS_KIND_CP_REMAP
 * blocks in the pack), so a remount or a crash finds the table that matches its tree.
 * May call: libc, lock.h. Called by segment.c, gc.c, checkpoint.c and the file layer
 * (falloc.c). The table is seg_lock's (core.h): seg_mark drops entries under it, so every
 * other entry point takes it.
 *
 * Open addressing with linear probing in a power-of-two table, at most half full; deletion
 * shifts the following entries back, so there are no tombstones.
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>

#define REMAP_MAX (ZLFS_REMAP_BLOCKS_MAX * ZLFS_REMAPS_PER_BLOCK)
#define REMAP_SLOTS 65536u /* > 2 x REMAP_MAX */

struct remap_ent {
	uint32_t addr; /* 0: empty */
	uint32_t nid;
	uint16_t ofs;
};

struct remap {
	struct remap_ent e[REMAP_SLOTS];
	uint32_t n;
};

static_assert(REMAP_SLOTS >= 2 * REMAP_MAX, "the remap table stays at most half full");

static uint32_t home(uint32_t addr) { return (addr * 2654435761u) & (REMAP_SLOTS - 1); }

static struct remap_ent *lookup(const struct remap *t, uint32_t addr)
{
	uint32_t i = home(addr);

	while (t->e[i].addr) {
		if (t->e[i].addr == addr)
			return (struct remap_ent *)&t->e[i];
		i = (i + 1) & (REMAP_SLOTS - 1);
	}
	return NULL;
}

static uint32_t count_locked(const struct zlfs_fs *fs) { return fs->remap ? fs->remap->n : 0; }

uint32_t remap_room(struct zlfs_fs *fs)
{
	uint32_t n;

	zlock_lock(&fs->seg_lock);
	n = REMAP_MAX - count_locked(fs);
	zlock_unlock(&fs->seg_lock);
	return n;
}

uint32_t remap_count(struct zlfs_fs *fs)
{
	uint32_t n;

	zlock_lock(&fs->seg_lock);
	n = count_locked(fs);
	zlock_unlock(&fs->seg_lock);
	return n;
}

static int set_locked(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs)
{
	struct remap_ent *e;
	uint32_t i;

	if (!fs->remap && !(fs->remap = calloc(1, sizeof(*fs->remap))))
		return -ENOMEM;
	e = lookup(fs->remap, addr);
	if (!e) {
		if (fs->remap->n >= REMAP_MAX)
			return -ENOSPC;
		for (i = home(addr); fs->remap->e[i].addr; i = (i + 1) & (REMAP_SLOTS - 1))
			;
		e = &fs->remap->e[i];
		e->addr = addr;
		fs->remap->n++;
	}
	e->nid = nid;
	e->ofs = ofs;
	ATOMIC_SET(&fs->dirty, 1);
	return 0;
}

int remap_set(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs)
{
	int ret;

	zlock_lock(&fs->seg_lock);
	ret = set_locked(fs, addr, nid, ofs);
	zlock_unlock(&fs->seg_lock);
	return ret;
}

int remap_find(struct zlfs_fs *fs, uint32_t addr, uint32_t *nid, uint16_t *ofs)
{
	const struct remap_ent *e;

	zlock_lock(&fs->seg_lock);
	e = fs->remap && fs->remap->n ? lookup(fs->remap, addr) : NULL;
	if (e) {
		*nid = e->nid;
		*ofs = e->ofs;
	}
	zlock_unlock(&fs->seg_lock);
	return !!e;
}

void remap_drop_locked(struct zlfs_fs *fs, uint32_t addr)
{
	struct remap *t = fs->remap;
	struct remap_ent *e = t && t->n ? lookup(t, addr) : NULL;
	uint32_t hole, i;

	if (!e)
		return;
	hole = (uint32_t)(e - t->e);
	t->e[hole].addr = 0;
	t->n--;
	ATOMIC_SET(&fs->dirty, 1);
	/* shift back every following entry that may sit in the hole (its home is not between
	 * the hole and itself, cyclically) */
	for (i = (hole + 1) & (REMAP_SLOTS - 1); t->e[i].addr; i = (i + 1) & (REMAP_SLOTS - 1)) {
		uint32_t h = home(t->e[i].addr);

		if ((i > hole && (h <= hole || h > i)) || (i < hole && h <= hole && h > i)) {
			t->e[hole] = t->e[i];
			t->e[i].addr = 0;
			hole = i;
		}
	}
}

uint32_t remap_export(struct zlfs_fs *fs, struct zlfs_remap_entry *out, uint32_t max)
{
	uint32_t i, n = 0;

	zlock_lock(&fs->seg_lock);
	for (i = 0; fs->remap && i < REMAP_SLOTS && n < max; i++) {
		const struct remap_ent *e = &fs->remap->e[i];

		if (!e->addr)
			continue;
		out[n].addr = le32_put(e->addr);
		out[n].nid = le32_put(e->nid);
		out[n].ofs = le16_put(e->ofs);
		out[n].pad = 0;
		n++;
	}
	zlock_unlock(&fs->seg_lock);
	return n;
}

void remap_destroy(struct zlfs_fs *fs)
{
	free(fs->remap);
	fs->remap = NULL;
}
