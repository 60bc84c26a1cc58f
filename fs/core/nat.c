/*
 * nat.c - node ids and the node address table (NAT) as the node layer uses it.
 *
 * Owns: reading and changing NAT entries (nid -> block address, owner, and with
 * PACKED_INODES the pack slot), allocating and freeing nids (the free-nid list, the sets of
 * nids freed or made since the last checkpoint). The table's pages are metacache.c's.
 * May call: metacache.c (nat_ent_locked and the page state), nidset.c, format.h, lock.h.
 *
 * Locks (core.h): everything here is under nat_lock.
 */
#include "core.h"

#include <errno.h>
#include <string.h>

#define FREE_NIDS_SCAN 64        /* NAT blocks one refill looks at, at most */

static int nat_store_locked(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t ino,
			    int packed, uint32_t slot)
{
	struct nat_ent *e = nat_ent_locked(fs, nid);

	if (!e)
		return mcache_error(fs, 0);
	e->blkaddr = addr;
	e->ino = ino;
	e->packed = (uint8_t)packed;
	e->slot = (uint8_t)slot;
	if (!fs->nat_dirty[nid / ZLFS_NAT_PER_BLOCK]) {
		fs->nat_dirty[nid / ZLFS_NAT_PER_BLOCK] = 1;
		__atomic_add_fetch(&fs->dirty_meta, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&fs->dirty, 1, __ATOMIC_RELAXED);
	return 0;
}

int nat_set_locked(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t ino)
{
	return nat_store_locked(fs, nid, addr, ino, 0, 0);
}

int nat_set_packed(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nat_store_locked(fs, nid, addr, nid, 1, slot);
	zlock_unlock(&fs->nat_lock);
	return ret;
}

int nat_set(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t ino)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nat_set_locked(fs, nid, addr, ino);
	zlock_unlock(&fs->nat_lock);
	return ret;
}

/* NID's NAT entry into E. CACHED_ONLY: only from a page already cached, -ENOENT if it is
 * not (no device read: read-ahead under ncache_lock keeps only nodes it can check). */
static int nat_copy(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e, int cached_only)
{
	const struct nat_ent *p = NULL;
	int ret = -ENOENT;

	memset(e, 0, sizeof(*e));
	if (nid >= fs->sb.max_nid)
		return 0;
	zlock_lock(&fs->nat_lock);
	if (!cached_only || nat_block_cached_locked(fs, nid / ZLFS_NAT_PER_BLOCK)) {
		p = nat_ent_locked(fs, nid);
		ret = p ? 0 : mcache_error(fs, 0);
	}
	if (p)
		*e = *p;
	zlock_unlock(&fs->nat_lock);
	return ret;
}

int nat_get(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e) { return nat_copy(fs, nid, e, 0); }

int nat_peek(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e)
{
	return nat_copy(fs, nid, e, 1);
}

/* Collect free nids from nid_hint to the end of its NAT block, and move the hint past them.
 * A block never written is free throughout and is not read; one that was is read once (then
 * cached). Nids freed since the last checkpoint are held back. -EIO when the block cannot be
 * read. */
static int nid_collect(struct zlfs_fs *fs, uint32_t *held)
{
	uint32_t nid = fs->nid_hint, b = nid / ZLFS_NAT_PER_BLOCK, end = (b + 1) * ZLFS_NAT_PER_BLOCK;
	int unwritten = nat_block_unused_locked(fs, b);

	if (end > fs->sb.max_nid)
		end = fs->sb.max_nid;
	for (; nid < end && fs->nr_free_nids < FREE_NIDS_MAX; nid++) {
		const struct nat_ent *e;

		if (nid == ZLFS_NID_NULL)
			continue;
		if (!unwritten) {
			if (!(e = nat_ent_locked(fs, nid)))
				return mcache_error(fs, 0);
			if (e->blkaddr != ZLFS_ADDR_NULL)
				continue;
		}
		if (nidset_has(&fs->nid_freed, nid)) {
			(*held)++;
			continue;
		}
		fs->free_nids[fs->nr_free_nids++] = nid;
	}
	fs->nid_hint = nid < fs->sb.max_nid ? nid : 0;
	return 0;
}

/* Refill the free list from the NAT where the last refill stopped: FREE_NIDS_SCAN blocks, or
 * on until one free nid is found. New inodes' nids, and so their NAT pages, stay close. The
 * list is reversed, since nids are taken from its end. -ENOSPC when the whole table was
 * looked at and nothing is free, -EAGAIN when only nids freed since the last checkpoint are. */
static int nid_refill(struct zlfs_fs *fs)
{
	uint32_t blocks = fs->sb.nat_blocks + 1, held = 0, i, t;
	int ret;

	for (i = 0; i < blocks && (i < FREE_NIDS_SCAN || !fs->nr_free_nids) &&
		    fs->nr_free_nids < FREE_NIDS_MAX; i++)
		if ((ret = nid_collect(fs, &held)))
			return ret;
	for (i = 0; i < fs->nr_free_nids / 2; i++) {
		t = fs->free_nids[i];
		fs->free_nids[i] = fs->free_nids[fs->nr_free_nids - 1 - i];
		fs->free_nids[fs->nr_free_nids - 1 - i] = t;
	}
	return fs->nr_free_nids ? 0 : held ? -EAGAIN : -ENOSPC;
}

/* A listed nid that is no longer free (recovery or fsck gave it an owner) is skipped. */
static int nid_take(struct zlfs_fs *fs, uint32_t *nid)
{
	int ret;

	for (;;) {
		const struct nat_ent *e;

		if (!fs->nr_free_nids && (ret = nid_refill(fs)))
			return ret;
		*nid = fs->free_nids[--fs->nr_free_nids];
		if (!(e = nat_ent_locked(fs, *nid)))
			return mcache_error(fs, 0);
		if (e->blkaddr == ZLFS_ADDR_NULL && !nidset_has(&fs->nid_freed, *nid))
			return 0;
	}
}

uint32_t nid_resume_point(struct zlfs_fs *fs)
{
	uint32_t nid;

	zlock_lock(&fs->nat_lock);
	nid = fs->nr_free_nids ? fs->free_nids[fs->nr_free_nids - 1] : fs->nid_hint;
	zlock_unlock(&fs->nat_lock);
	return nid;
}

int node_alloc_nid(struct zlfs_fs *fs, uint32_t ino, uint32_t *nid)
{
	uint32_t cand;
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nid_take(fs, &cand);
	if (!ret)
		ret = nat_set_locked(fs, cand, ZLFS_ADDR_NEW, ino ? ino : cand);
	if (!ret) {
		/* its name is durable only by a checkpoint, or (DENTRY_MARK) a dentry mark */
		if (!ino)
			nidset_add(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_DENTRY_MARK ? &fs->fresh
										      : &fs->nofast,
				   cand);
		fs->valid_nodes++;
		if (!ino)
			fs->valid_inodes++;
		*nid = cand;
	}
	zlock_unlock(&fs->nat_lock);
	return ret;
}

int node_is_fresh(struct zlfs_fs *fs, uint32_t ino)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nidset_has(&fs->fresh, ino) || nidset_has(&fs->nofast, ino);
	zlock_unlock(&fs->nat_lock);
	return ret;
}

int node_is_new(struct zlfs_fs *fs, uint32_t ino)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = nidset_has(&fs->fresh, ino);
	zlock_unlock(&fs->nat_lock);
	return ret;
}

