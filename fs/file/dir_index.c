/*
 * dir_index.c - the name index of large directories (see dir_index.h).
 *
 * Owns: an open-addressing hash table of (name hash, location) pairs with linear probing and
 * backward-shift deletion, so removals leave no tombstones and probe runs stay short however
 * many names come and go. Kept at most half full.
 * May call: libc only. Called by dir.c, under the directory's lock.
 */
#include "dir_index.h"

#include <errno.h>
#include <stdlib.h>

struct dindex {
	uint32_t bits;   /* the table has 1 << bits slots */
	uint32_t used;
	uint64_t *slot;  /* 0: empty; else hash << 32 | (loc + 1) */
};

static uint32_t dix_home(const struct dindex *ix, uint32_t hash)
{
	/* the stored hash is XXH3's low bits: mix before taking the high ones */
	return (uint32_t)(((uint64_t)hash * 0x9E3779B97F4A7C15ULL) >> (64 - ix->bits));
}

static uint32_t dix_mask(const struct dindex *ix) { return (1u << ix->bits) - 1; }

static void dix_put(struct dindex *ix, uint64_t v)
{
	uint32_t i = dix_home(ix, (uint32_t)(v >> 32)), mask = dix_mask(ix);

	while (ix->slot[i])
		i = (i + 1) & mask;
	ix->slot[i] = v;
	ix->used++;
}

static int dix_alloc(struct dindex *ix, uint32_t bits)
{
	ix->bits = bits;
	ix->used = 0;
	ix->slot = calloc((size_t)1 << bits, sizeof(*ix->slot));
	return ix->slot ? 0 : -ENOMEM;
}

struct dindex *dix_new(uint32_t names)
{
	struct dindex *ix = malloc(sizeof(*ix));
	uint32_t bits = 6;

	/* NAMES comes from the inode: a hint, sized for at most a million names up front (the
	 * table grows as names are inserted), so a damaged count cannot ask for gigabytes. */
	while (bits < 21 && (1ULL << bits) < (uint64_t)names * 2)
		bits++;
	if (ix && dix_alloc(ix, bits)) {
		free(ix);
		ix = NULL;
	}
	return ix;
}

void dix_free(struct dindex *ix)
{
	if (!ix)
		return;
	free(ix->slot);
	free(ix);
}

size_t dix_bytes(const struct dindex *ix)
{
	return sizeof(*ix) + ((size_t)1 << ix->bits) * sizeof(*ix->slot);
}

static int dix_grow(struct dindex *ix)
{
	struct dindex old = *ix;
	uint32_t i;

	if (dix_alloc(ix, old.bits + 1)) {
		*ix = old;
		return -ENOMEM;
	}
	for (i = 0; i <= dix_mask(&old); i++)
		if (old.slot[i])
			dix_put(ix, old.slot[i]);
	free(old.slot);
	return 0;
}

int dix_insert(struct dindex *ix, uint32_t hash, uint32_t loc)
{
	if ((ix->used + 1) * 2 > (1u << ix->bits) && dix_grow(ix))
		return -ENOMEM;
	dix_put(ix, (uint64_t)hash << 32 | ((uint64_t)loc + 1));
	return 0;
}

/* Close the gap at I: pull back every later entry of the run that may live at or before I. */
static void dix_shift_back(struct dindex *ix, uint32_t i)
{
	uint32_t mask = dix_mask(ix), j = i;

	for (;;) {
		uint32_t home;

		j = (j + 1) & mask;
		if (!ix->slot[j])
			break;
		home = dix_home(ix, (uint32_t)(ix->slot[j] >> 32));
		/* the entry at j may move to i only if its home is not in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			ix->slot[i] = ix->slot[j];
			i = j;
		}
	}
	ix->slot[i] = 0;
}

void dix_remove(struct dindex *ix, uint32_t hash, uint32_t loc)
{
	uint64_t v = (uint64_t)hash << 32 | ((uint64_t)loc + 1);
	uint32_t i = dix_home(ix, hash), mask = dix_mask(ix);

	for (; ix->slot[i]; i = (i + 1) & mask) {
		if (ix->slot[i] == v) {
			dix_shift_back(ix, i);
			ix->used--;
			return;
		}
	}
}

int dix_next(const struct dindex *ix, uint32_t hash, uint32_t *pos, uint32_t *loc)
{
	uint32_t mask = dix_mask(ix);

	for (; *pos <= mask; (*pos)++) {
		uint64_t v = ix->slot[(dix_home(ix, hash) + *pos) & mask];

		if (!v)
			return 0;
		if ((uint32_t)(v >> 32) == hash) {
			*loc = (uint32_t)v - 1;
			(*pos)++;
			return 1;
		}
	}
	return 0;
}
