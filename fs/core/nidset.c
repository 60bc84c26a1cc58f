/*
 * nidset.c - small sets of node ids, for what changes between two checkpoints.
 *
 * Owns: an open-addressed hash set of nonzero nids. node.c keeps two (nids freed since the
 * last checkpoint, inodes whose fsync needs a checkpoint), which used to be bitmaps over every
 * nid: 32 MiB at 4 TiB, cleared at each checkpoint. These hold only what changed.
 * May call: nothing of zlfs. The caller's lock covers a set.
 *
 * A set that cannot grow (out of memory) answers "yes" for every nid until it is cleared:
 * both uses are safe that way (a freed nid is held back, an fsync takes a checkpoint).
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIDSET_MIN 256

static uint32_t nidset_hash(uint32_t nid, uint32_t cap) { return (nid * 2654435761u) & (cap - 1); }

static void nidset_put(uint32_t *slot, uint32_t cap, uint32_t nid)
{
	uint32_t i = nidset_hash(nid, cap);

	while (slot[i] && slot[i] != nid)
		i = (i + 1) & (cap - 1);
	slot[i] = nid;
}

static int nidset_grow(struct nidset *s)
{
	uint32_t cap = s->cap ? s->cap * 2 : NIDSET_MIN, i;
	uint32_t *slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++)
		if (s->slot[i])
			nidset_put(slot, cap, s->slot[i]);
	free(s->slot);
	s->slot = slot;
	s->cap = cap;
	return 0;
}

void nidset_add(struct nidset *s, uint32_t nid)
{
	if (s->overflow || nidset_has(s, nid))
		return;
	if ((s->count + 1) * 4 > s->cap * 3 && nidset_grow(s)) {
		s->overflow = 1;
		return;
	}
	nidset_put(s->slot, s->cap, nid);
	s->count++;
}

int nidset_has(const struct nidset *s, uint32_t nid)
{
	uint32_t i;

	if (s->overflow)
		return 1;
	if (!s->cap)
		return 0;
	for (i = nidset_hash(nid, s->cap); s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (s->slot[i] == nid)
			return 1;
	return 0;
}

/* Empty; a set grown large by a burst gives its memory back. */
void nidset_clear(struct nidset *s)
{
	if (s->cap > NIDSET_MIN * 16) {
		nidset_free(s);
		return;
	}
	if (s->slot)
		memset(s->slot, 0, s->cap * sizeof(*s->slot));
	s->count = 0;
	s->overflow = 0;
}

void nidset_free(struct nidset *s)
{
	free(s->slot);
	memset(s, 0, sizeof(*s));
}
