/*
 * npack.c - inode packs (PACKED_INODES): the node layer's side of storing small inodes
 * several to a block.
 *
 * Owns: reading an inode from its pack slot into the 4 KiB form the cache holds (the layers
 * above never see a pack), packing the dirty inodes that fit when node_flush_all writes them
 * (checkpoints, mkfs --root-dir, resize; fsync keeps writing whole blocks), read-ahead of the
 * slots of a pack read, and the validity of pack blocks: a pack stays valid in the SIT while
 * any slot is its nid's NAT address, so every death of a node's old copy comes here
 * (node_addr_dead) instead of going to seg_mark.
 * May call: node.c (nat_get, nat_set_slot, node_* cache helpers), segment.c (seg_append,
 * seg_mark, seg_read), super.c (zlfs_feature_incompat: the first spanning slot turns
 * SPAN_SLOTS on), format.h, lock.h, log.h.
 *
 * Live slots. The table maps a pack's address to a bitmap of its slots still named by the NAT:
 * filled when the pack is written, or on the first death of a slot of a pack written before
 * this mount (the pack read once and each slot's NAT entry asked). The bitmap form makes a
 * death idempotent: a slot whose NAT entry moved before the pack was read is cleared twice,
 * harmlessly. The death that clears the last bit marks the block dead, once: the entry stays
 * as a tombstone so a late death of a slot read as already gone does not mark it again, and
 * tombstones go at the next checkpoint (no death is in flight then: a death follows its NAT
 * change inside one cp_lock section). Locks: npack_lock (core.h, rank 65) over the table;
 * under it nat_lock and seg_lock may be taken, and the device read.
 */
#include "core.h"
#include "npack.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PACK_DEAD 0x8000u /* tombstone: the block was marked dead */

struct npack_ent {
	uint32_t addr; /* 0: empty */
	uint16_t live; /* bit i: slot i is its nid's current copy; or PACK_DEAD */
};

/* ---- the table of live slots (npack_lock) -------------------------------------------------- */

static struct npack_ent *pt_find(struct zlfs_fs *fs, uint32_t addr)
{
	struct npack_tab *t = &fs->npack;

	if (!t->cap)
		return NULL;
	for (uint32_t i = (addr * 2654435761u) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		if (t->e[i].addr == addr)
			return &t->e[i];
		if (!t->e[i].addr)
			return NULL;
	}
}

static int pt_insert(struct zlfs_fs *fs, uint32_t addr, uint16_t live);

static int pt_grow(struct zlfs_fs *fs)
{
	struct npack_tab *t = &fs->npack, old = *t;
	uint32_t cap = old.cap ? old.cap * 2 : 1024;

	t->e = calloc(cap, sizeof(*t->e));
	if (!t->e) {
		*t = old;
		return -ENOMEM;
	}
	t->cap = cap;
	t->n = 0;
	for (uint32_t i = 0; i < old.cap; i++)
		if (old.e[i].addr)
			(void)pt_insert(fs, old.e[i].addr, old.e[i].live);
	free(old.e);
	return 0;
}

static int pt_insert(struct zlfs_fs *fs, uint32_t addr, uint16_t live)
{
	struct npack_tab *t = &fs->npack;
	struct npack_ent *e = pt_find(fs, addr);
	int ret;

	if (!e && (t->n + 1) * 4 > t->cap * 3 && (ret = pt_grow(fs)))
		return ret;
	if (!e) {
		uint32_t i = (addr * 2654435761u) & (t->cap - 1);

		while (t->e[i].addr)
			i = (i + 1) & (t->cap - 1);
		e = &t->e[i];
		e->addr = addr;
		t->n++;
	}
	e->live = live;
	return 0;
}

/* The pack at ADDR read and its head checked into *OUT (the caller frees it): 0, or a
 * negative errno (-EUCLEAN: damaged). */
static int pack_read(struct zlfs_fs *fs, uint32_t addr, struct zlfs_inode_pack **out)
{
	struct zlfs_inode_pack *pk = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	int ret = pk ? seg_read(fs, addr, pk) : -ENOMEM;
	char why[200];

	if (!ret && (zlfs_blk_verify(pk, fs->sb.seed, ZLFS_KIND_IPACK) ||
		     zlfs_pack_check_head(&fs->sb, pk, why, sizeof(why))))
		ret = -EUCLEAN;
	if (ret)
		zdev_buf_free(pk);
	*out = ret ? NULL : pk;
	return ret;
}

static uint32_t slot_owner(const struct zlfs_inode_pack *pk, uint32_t slot)
{
	return zlfs_pack_is_slot(pk, slot) ? le32_get(pk->slot[slot].nid) : 0;
}

/* The live slots of the pack at ADDR as the NAT says now (the pack read once), and in OWNER
 * (unless NULL) the nid slot SLOT holds. */
static int pack_live_from_nat(struct zlfs_fs *fs, uint32_t addr, uint32_t slot, uint16_t *live,
			      uint32_t *owner)
{
	struct zlfs_inode_pack *pk;
	int ret = pack_read(fs, addr, &pk);

	*live = 0;
	if (owner)
		*owner = 0;
	if (ret == -EUCLEAN)
		zlog_err("inode pack at block %u is damaged: run fsck.zlfs", addr);
	if (ret)
		return ret;
	if (owner)
		*owner = slot_owner(pk, slot);
	for (uint32_t i = 0; !ret && i < le32_get(pk->nr_slots); i++) {
		struct nat_ent e;

		if (!zlfs_pack_is_slot(pk, i))
			continue;
		ret = nat_get(fs, le32_get(pk->slot[i].nid), &e);
		if (!ret && e.blkaddr == addr && e.packed && e.slot == i)
			*live |= (uint16_t)(1u << i);
	}
	zdev_buf_free(pk);
	return ret;
}

int npack_slot_owner(struct zlfs_fs *fs, uint32_t addr, uint32_t slot, uint32_t *owner)
{
	struct zlfs_inode_pack *pk;
	int ret = pack_read(fs, addr, &pk);

	*owner = ret ? 0 : slot_owner(pk, slot);
	zdev_buf_free(pk);
	return ret;
}

void node_addr_dead(struct zlfs_fs *fs, uint32_t nid, const struct nat_ent *old)
{
	struct npack_ent *p;
	uint32_t owner;
	uint16_t live;
	int ret = 0, dead = 0;

	if (old->blkaddr == ZLFS_ADDR_NULL || old->blkaddr == ZLFS_ADDR_NEW)
		return;
	if (!old->packed) {
		seg_mark(fs, old->blkaddr, 0);
		return;
	}
	zlock_lock(&fs->npack_lock);
	p = pt_find(fs, old->blkaddr);
	if (!p) {
		/* The slot was live until its NAT entry moved, if it was NID's; one holding
		 * another inode (a crafted NAT naming a slot twice) is left as its owner's
		 * entry says. (A pack met before was read or written with its slots' nids
		 * checked, and the daemon frees only inodes it has read from their slots.) */
		ret = pack_live_from_nat(fs, old->blkaddr, old->slot, &live, &owner);
		if (!ret)
			ret = pt_insert(fs, old->blkaddr,
					owner == nid ? live | (uint16_t)(1u << old->slot) : live);
		p = ret || owner != nid ? NULL : pt_find(fs, old->blkaddr);
	}
	if (p && !(p->live & PACK_DEAD)) {
		p->live &= (uint16_t)~(1u << old->slot);
		if (!p->live) {
			p->live = PACK_DEAD;
			dead = 1;
		}
	}
	zlock_unlock(&fs->npack_lock);
	if (ret) /* kept valid: a block kept too long is space (fsck frees it), one lost is data */
		zlog_err("inode pack at block %u: its live slots unknown (%s); kept valid: run "
			 "fsck.zlfs", old->blkaddr, strerror(-ret));
	if (dead)
		seg_mark(fs, old->blkaddr, 0);
}

int npack_settle(struct zlfs_fs *fs, uint32_t addr)
{
	uint16_t live;
	int ret = 0, dead = 0;

	zlock_lock(&fs->npack_lock);
	if (!pt_find(fs, addr)) { /* a table entry is authoritative: its last death marks it */
		ret = pack_live_from_nat(fs, addr, 0, &live, NULL);
		dead = !ret && !live;
		if (!ret) /* a tombstone: a death between its NAT change and here marks nothing */
			ret = pt_insert(fs, addr, dead ? PACK_DEAD : live);
	}
	zlock_unlock(&fs->npack_lock);
	if (!ret && dead)
		seg_mark(fs, addr, 0);
	return ret;
}

void npack_ckpt_done(struct zlfs_fs *fs)
{
	struct npack_tab *t = &fs->npack, old;

	zlock_lock(&fs->npack_lock);
	old = *t;
	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < old.cap; i++)
		if (old.e[i].addr && !(old.e[i].live & PACK_DEAD))
			(void)pt_insert(fs, old.e[i].addr, old.e[i].live); /* lost: read again */
	zlock_unlock(&fs->npack_lock);
	free(old.e);
}

void npack_destroy(struct zlfs_fs *fs)
{
	free(fs->npack.e);
	memset(&fs->npack, 0, sizeof(fs->npack));
}

/* ---- reading ------------------------------------------------------------------------------- */

int npack_slot(struct zlfs_fs *fs, uint32_t nid, uint32_t slot, const void *blk, void *out,
	       char *why, size_t len)
{
	const struct zlfs_inode_pack *pk = blk;
	int ret = zlfs_blk_verify(blk, fs->sb.seed, ZLFS_KIND_IPACK);

	if (ret)
		return zlfs_why(-EUCLEAN, why, len, "%s", ret == -EUCLEAN ? "bad checksum or magic"
									: "not an inode pack");
	if (zlfs_pack_check_head(&fs->sb, blk, why, len))
		return -EUCLEAN;
	if (!zlfs_pack_is_slot(pk, slot) || le32_get(pk->slot[slot].nid) != nid)
		return zlfs_why(-EUCLEAN, why, len, "its slot %u holds nid %u%s", slot,
				slot_owner(pk, slot), slot < le32_get(pk->nr_slots) &&
				!zlfs_pack_is_slot(pk, slot) ? " (a spanning slot's continuation)" : "");
	zlfs_pack_expand(blk, slot, out);
	zlfs_blk_seal(out, fs->sb.seed); /* checks above the node layer see a whole inode */
	return 0;
}

int npack_expand(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot,
		 const void *blk, void *out)
{
	char why[200];

	if (!npack_slot(fs, nid, slot, blk, out, why, sizeof(why)))
		return 0;
	zlog_err("inode %u in the pack at block %u is damaged (%s): run fsck.zlfs", nid, addr, why);
	return -EUCLEAN;
}

int node_read_current(struct zlfs_fs *fs, uint32_t nid, const struct nat_ent *e, void *buf)
{
	uint8_t *pk = e->packed ? zdev_buf_alloc(ZLFS_BLOCK_SIZE) : NULL;
	int ret = e->packed && !pk ? -ENOMEM : seg_read(fs, e->blkaddr, pk ? pk : buf);

	if (!ret && pk)
		ret = npack_expand(fs, nid, e->blkaddr, e->slot, pk, buf);
	zdev_buf_free(pk);
	return ret;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Spanning slots may be written: SPAN_SLOTS is on, or may be turned on (only on this
 * revision's images: one of an older mkfs keeps the features it has, as INLINE_DENTRIES). */
static int npack_span_ok(const struct zlfs_fs *fs)
{
	return (zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_SPAN_SLOTS) ||
	       fs->sb.revision == ZLFS_REVISION;
}

uint32_t npack_positions(const struct zlfs_fs *fs, const void *inode)
{
	const struct zlfs_blkhdr *h = inode;
	uint32_t k = le16_get(h->kind) == ZLFS_KIND_INODE &&
				     (zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_PACKED_INODES) ?
			     zlfs_pack_positions(inode) : 0;

	return k > 1 && !npack_span_ok(fs) ? 0 : k;
}

uint32_t npack_units(const struct zlfs_fs *fs, const void *inode)
{
	uint32_t k = npack_positions(fs, inode);

	return k > 1 ? 2 * k - 1 : k;
}

static int by_log_order(const void *a, const void *b)
{
	const struct npack_item *x = a, *y = b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

void npack_sort(struct npack_item *it, uint32_t n)
{
	if (n)
		qsort(it, n, sizeof(*it), by_log_order);
}

#define NPACK_LOOKAHEAD 64u /* items of a pack's log looked at past the first that does not fit */

uint32_t npack_group(struct npack_item *it, uint32_t n, uint32_t *first,
		     struct npack_item **grp)
{
	uint32_t i = *first, j, k = 0, pos = 0, missed = 0;

	for (; i < n && it[i].taken; i++)
		;
	*first = i;
	for (j = i; j < n && it[j].type == it[i].type && pos < ZLFS_PACK_SLOTS &&
		    missed <= NPACK_LOOKAHEAD; j++) {
		if (it[j].taken)
			continue;
		if (pos + it[j].k > ZLFS_PACK_SLOTS) {
			missed++;
			continue;
		}
		it[j].taken = 1;
		grp[k++] = &it[j];
		pos += it[j].k;
	}
	return k;
}

static int by_slot_nid(const void *a, const void *b)
{
	uint32_t x = le32_get((*(const struct zlfs_inode *const *)a)->hdr.index);
	uint32_t y = le32_get((*(const struct zlfs_inode *const *)b)->hdr.index);

	return x < y ? -1 : x > y;
}

/* Point the NAT entries of the N inodes V at their slots AT of the pack just written at ADDR,
 * and record as live the slots whose entry was set: a slot no entry names is dead from the
 * start, and a pack none of whose slots is named is a dead block. Each slot's old copy dies
 * after its NAT entry names the slot (a pack of older slots read meanwhile counts this one
 * gone). Under cp_lock exclusive (the checkpoint): no death of these slots can come before
 * the table has the pack. A pack left out of the table (no memory) is read again at its
 * first death (node_addr_dead). */
static int pack_name_slots(struct zlfs_fs *fs, const void *const *v, const uint32_t *at,
			   uint32_t n, uint32_t addr)
{
	uint16_t named = 0;
	int ret = 0;

	LOCK_ASSERT_HELD(&fs->cp_lock);
	for (uint32_t i = 0; !ret && i < n; i++) {
		uint32_t nid = le32_get(((const struct zlfs_blkhdr *)v[i])->index);
		struct nat_ent old;

		ret = nat_get(fs, nid, &old);
		if (!ret)
			ret = nat_set_packed(fs, nid, addr, at[i]);
		if (!ret) {
			named |= (uint16_t)(1u << at[i]);
			node_addr_dead(fs, nid, &old);
		}
	}
	if (!named) {
		seg_mark(fs, addr, 0);
		return ret;
	}
	zlock_lock(&fs->npack_lock);
	(void)pt_insert(fs, addr, named);
	zlock_unlock(&fs->npack_lock);
	return ret;
}

int npack_write(struct zlfs_fs *fs, const void *const *in, uint32_t n, enum zlfs_log_type log)
{
	struct zlfs_inode_pack *pk = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	const void *v[ZLFS_PACK_SLOTS];
	uint32_t addr, i, pos = 0, at[ZLFS_PACK_SLOTS];
	int ret = pk ? 0 : -ENOMEM, k;

	if (n < 1 || n > ZLFS_PACK_SLOTS)
		ret = -EINVAL;
	memcpy(v, in, (ret ? 0 : n) * sizeof(*v));
	qsort(v, ret ? 0 : n, sizeof(*v), by_slot_nid); /* slots hold ascending nids */
	if (!ret) {
		memset(pk, 0, ZLFS_BLOCK_SIZE);
		zlfs_blk_init(pk, ZLFS_KIND_IPACK, 0, 0, fs->cp_ver);
	}
	for (i = 0; !ret && i < n; i++) {
		uint32_t w = npack_positions(fs, v[i]);

		/* the superblock says so before any pack holds a spanning slot */
		if (w > 1 && !(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_SPAN_SLOTS))
			ret = zlfs_feature_incompat(fs, ZLFS_FEAT_INCOMPAT_SPAN_SLOTS);
		k = ret ? ret : w ? zlfs_pack_fill(pk, pos, v[i], w > 1) : -E2BIG;
		ret = k < 0 ? k : 0;
		at[i] = pos;
		pos += ret ? 0 : (uint32_t)k;
	}
	if (!ret) {
		pk->nr_slots = le32_put(pos);
		blk_seal(fs, pk);
		ret = seg_append(fs, log, pk, ZLFS_NID_NULL, ZLFS_SUM_PACK, &addr);
	}
	if (!ret)
		ret = pack_name_slots(fs, v, at, n, addr);
	zdev_buf_free(pk);
	return ret;
}
