/*
 * dir.c - directories: hashed multi-level dentry blocks, stable readdir offsets; the blocks
 * themselves are held in dir_cache.c's cache.
 *
 * Owns: where a name goes in a directory and how it is found again. Level L of a directory
 * has 2^L buckets of two dentry blocks; a name hashes (XXH3, seeded per filesystem) to one
 * bucket per level; lookup probes one bucket in each level in use, so a directory of n entries
 * costs O(log n) block scans, not a linear scan. Entries never move once placed, so the
 * readdir offset of an entry (its block and slot) stays valid while others come and go.
 * Changed blocks stay in the cache until dir_flush writes them (before every checkpoint).
 * Names are stored in their disk form (fcrypt.c): ciphertext in encrypted directories.
 * May call: dir_cache.c (dir_int.h), dmap.c, inode.c, fcrypt.c, dir_index.c, node/log
 * (core.h), log.h.
 *
 * Locks: a directory's blocks and name index belong to the directory's inode lock (shared to
 * look up or list, exclusive to change); the cache's chains, page refs and dirty flags are
 * under its own lock. A page in use is held (refs) and never evicted; dirty pages wait for
 * the checkpoint, which writes them under each directory's lock.
 */
#include "dir_int.h"
#include "dir_index.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t name_hash(const struct zlfs_fs *fs, const char *name, size_t len)
{
	return zlfs_name_hash(&fs->sb, name, len);
}

/* Slot of FN in block B, or -1. */
static int block_find(const struct zlfs_dentry_block *b, uint32_t hash, const struct fname *fn)
{
	uint32_t s = 0;

	while (s < SLOTS) {
		uint16_t nl = le16_get(b->d[s].name_len);

		if (!bit_test(b->bitmap, s) || !nl) {
			s++;
			continue;
		}
		if (le32_get(b->d[s].hash) == hash && nl <= ZLFS_NAME_MAX &&
		    fname_match(fn, b->name[s], nl, hash))
			return (int)s;
		s += name_slots(nl);
	}
	return -1;
}

/* Run of N free slots in block B, or -1. */
static int block_room(const struct zlfs_dentry_block *b, uint32_t n)
{
	uint32_t s, run = 0;

	for (s = 0; s < SLOTS; s++) {
		if (!(s % 8) && b->bitmap[s / 8] == 0xff && s + 8 <= SLOTS) { /* a full byte */
			run = 0;
			s += 7;
			continue;
		}
		run = bit_test(b->bitmap, s) ? 0 : run + 1;
		if (run == n)
			return (int)(s + 1 - n);
	}
	return -1;
}

/* ---- name indexes of large directories ---------------------------------------------------- */

/* The index of DIR if it has one. */
static struct dindex *dindex_of(struct dir_cache *dc, uint32_t ino)
{
	struct dindex_ent *e;

	zlock_lock(&dc->lock);
	e = *dindex_slot(dc, ino);
	zlock_unlock(&dc->lock);
	return e ? e->ix : NULL;
}

/* Add every entry in block IDX of DIR to IX. */
static int dindex_add_block(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx,
			    struct dindex *ix)
{
	struct dpage *p;
	uint32_t s = 0;
	int ret = dpage_get(fs, dir, idx, 0, &p);

	if (ret)
		return ret == -ENOENT ? 0 : ret;
	while (!ret && s < SLOTS) {
		uint16_t nl = le16_get(p->blk->d[s].name_len);

		if (!bit_test(p->blk->bitmap, s) || !nl) {
			s++;
			continue;
		}
		ret = dix_insert(ix, le32_get(p->blk->d[s].hash), dix_loc(idx, s));
		s += name_slots(nl);
	}
	dpage_put(fs, p);
	return ret;
}

/* Publish IX as DIR's index, unless a concurrent lookup of DIR published one first. */
static struct dindex *dindex_publish(struct dir_cache *dc, uint32_t ino, struct dindex *ix,
				     struct dindex_ent *e)
{
	struct dindex_ent **pp;

	zlock_lock(&dc->lock);
	pp = dindex_slot(dc, ino);
	if (!*pp) {
		e->ino = ino;
		e->ix = ix;
		e->next = NULL;
		*pp = e;
		dc->ix_bytes += dix_bytes(ix);
		ix = NULL;
		e = NULL;
	}
	zlock_unlock(&dc->lock);
	dix_free(ix);
	free(e);
	return dindex_of(dc, ino);
}

/* The index of a large directory, built from its blocks on first use; NULL for a small
 * directory, or when it cannot be built or the indexes' memory is spent (lookups then scan,
 * as they always may). The directory is locked, shared at least. */
static struct dindex *dindex_get(struct zlfs_fs *fs, struct node_page *dir)
{
	struct dir_cache *dc = dcache(fs);
	uint32_t depth = le32_get(inode_of(dir)->dir_depth), blk;
	struct dindex_ent *e;
	struct dindex *ix;
	size_t used;
	int ret = 0;

	if (!dc || depth < DINDEX_MIN_DEPTH)
		return NULL;
	if ((ix = dindex_of(dc, dir->nid)))
		return ix;
	zlock_lock(&dc->lock);
	used = dc->ix_bytes;
	zlock_unlock(&dc->lock);
	if (used > DINDEX_MAX_BYTES)
		return NULL;
	ix = dix_new(le32_get(inode_of(dir)->dir_entries));
	e = malloc(sizeof(*e));
	for (blk = 0; ix && e && !ret && blk < level_first_block(depth); blk++)
		ret = dindex_add_block(fs, dir, blk, ix);
	if (!ix || !e || ret) {
		dix_free(ix);
		free(e);
		return NULL;
	}
	return dindex_publish(dc, dir->nid, ix, e);
}

/* Keep DIR's index in step with an entry added (ADD) or removed at LOC. The directory is
 * locked exclusively, so no lookup reads the index meanwhile. */
static void dindex_note(struct zlfs_fs *fs, struct node_page *dir, int add, uint32_t hash,
			uint32_t loc)
{
	struct dir_cache *dc = fs->dcache;
	struct dindex *ix = dc ? dindex_of(dc, dir->nid) : NULL;
	size_t before;
	int ret = 0;

	if (!ix)
		return;
	before = dix_bytes(ix);
	if (!add)
		dix_remove(ix, hash, loc);
	else
		ret = dix_insert(ix, hash, loc);
	zlock_lock(&dc->lock);
	if (ret)
		dindex_drop(dc, dir->nid); /* a stale index would hide names: none is better */
	else
		dc->ix_bytes = dc->ix_bytes - before + dix_bytes(ix);
	zlock_unlock(&dc->lock);
}

/* Find FN (hash HASH) through IX: the page (held) and slot, or -ENOENT. */
static int dindex_find(struct zlfs_fs *fs, struct node_page *dir, struct dindex *ix,
		       uint32_t hash, const struct fname *fn, struct dpage **page, int *slot)
{
	uint32_t pos = 0, loc;
	int ret;

	while (dix_next(ix, hash, &pos, &loc)) {
		const struct zlfs_dentry_block *b;
		uint32_t s = dix_loc_slot(loc);
		uint16_t nl;

		ret = dpage_get(fs, dir, dix_loc_blk(loc), 0, page);
		if (ret)
			return ret == -ENOENT ? -EUCLEAN : ret;
		b = (*page)->blk;
		nl = le16_get(b->d[s].name_len);
		if (bit_test(b->bitmap, s) && nl && nl <= ZLFS_NAME_MAX &&
		    le32_get(b->d[s].hash) == hash && fname_match(fn, b->name[s], nl, hash)) {
			*slot = (int)s;
			return 0;
		}
		dpage_put(fs, *page);
	}
	return -ENOENT;
}

struct dloc {
	struct dpage *page;
	int slot;
};

static int dir_find_disk(struct zlfs_fs *fs, struct node_page *dir, const struct fname *fn,
			 struct dloc *loc)
{
	uint32_t hash, depth = le32_get(inode_of(dir)->dir_depth), l, i;
	struct dindex *ix;
	int ret;

	hash = fn->digest ? fn->hash : name_hash(fs, (const char *)fn->disk, fn->len);
	ix = dindex_get(fs, dir);
	if (ix)
		return dindex_find(fs, dir, ix, hash, fn, &loc->page, &loc->slot);
	for (l = 0; l < depth; l++) {
		uint32_t bucket = hash & ((1u << l) - 1);

		for (i = 0; i < BUCKET_BLOCKS; i++) {
			uint32_t idx = level_first_block(l) + bucket * BUCKET_BLOCKS + i;

			ret = dpage_get(fs, dir, idx, 0, &loc->page);
			if (ret == -ENOENT)
				continue;
			if (ret)
				return ret;
			loc->slot = block_find(loc->page->blk, hash, fn);
			if (loc->slot >= 0)
				return 0;
			dpage_put(fs, loc->page);
		}
	}
	return -ENOENT;
}

/* NAME's entry. With the key, a name not found as the encryption of NAME may be the no-key
 * form readdir showed for a name that does not decrypt (fname_to_user): found by it too. */
static int dir_find(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		    struct dloc *loc)
{
	struct fname fn;
	int ret = fname_to_disk(fs, dir, name, len, 0, &fn);

	if (!ret)
		ret = dir_find_disk(fs, dir, &fn, loc);
	if (ret == -ENOENT && fs->master && fcrypt_is_encrypted(dir) &&
	    !fname_nokey_to_disk(name, len, &fn))
		ret = dir_find_disk(fs, dir, &fn, loc);
	return ret;
}

int dir_lookup(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
	       uint32_t *ino, uint8_t *type)
{
	struct dloc loc;
	int ret = dir_find(fs, dir, name, len, &loc);

	if (ret)
		return ret;
	*ino = le32_get(loc.page->blk->d[loc.slot].ino);
	if (type)
		*type = loc.page->blk->d[loc.slot].type;
	dpage_put(fs, loc.page);
	return 0;
}

static void slot_fill(struct zlfs_dentry_block *b, int slot, uint32_t hash, const char *name,
		      size_t len, uint32_t ino, uint8_t type)
{
	uint32_t i, n = name_slots(len);

	for (i = 0; i < n; i++)
		bit_set(b->bitmap, (uint32_t)slot + i);
	memset(b->name[slot], 0, (size_t)n * ZLFS_DENTRY_SLOT_LEN);
	memcpy(b->name[slot], name, len);
	b->d[slot].hash = le32_put(hash);
	b->d[slot].ino = le32_put(ino);
	b->d[slot].name_len = le16_put((uint16_t)len);
	b->d[slot].type = type;
}

int dir_add(struct zlfs_fs *fs, struct node_page *dir, const char *uname, size_t ulen,
	    uint32_t ino, uint8_t type)
{
	struct zlfs_inode *in = inode_of(dir);
	uint32_t hash, depth = le32_get(in->dir_depth), l, i;
	struct dpage *p;
	struct fname fn;
	int ret = fname_to_disk(fs, dir, uname, ulen, 1, &fn), slot;
	const char *name = (const char *)fn.disk;
	size_t len = fn.len;

	if (ret)
		return ret;
	hash = name_hash(fs, name, len);
	for (l = 0; l <= depth && l < ZLFS_DIR_DEPTH_MAX; l++) {
		uint32_t bucket = hash & ((1u << l) - 1);

		for (i = 0; i < BUCKET_BLOCKS; i++) {
			ret = dpage_get(fs, dir, level_first_block(l) + bucket * BUCKET_BLOCKS + i, 1, &p);
			if (ret)
				return ret;
			slot = block_room(p->blk, name_slots(len));
			if (slot < 0) {
				dpage_put(fs, p);
				continue;
			}
			slot_fill(p->blk, slot, hash, name, len, ino, type);
			dpage_dirty(fs, p);
			dindex_note(fs, dir, 1, hash, dix_loc(p->idx, (uint32_t)slot));
			if (l == depth) {
				in->dir_depth = le32_put(depth + 1);
				in->size = le64_put((uint64_t)level_first_block(depth + 1) *
						    ZLFS_BLOCK_SIZE);
			}
			in->dir_entries = le32_put(le32_get(in->dir_entries) + 1);
			node_dirty(fs, dir);
			dpage_put(fs, p);
			dmark_note(fs, dir, name, len, 0, 0, ino, type);
			return 0;
		}
	}
	return -ENOSPC;
}

int dir_remove(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len)
{
	struct zlfs_inode *in = inode_of(dir);
	struct dloc loc;
	uint32_t i, n;
	int ret = dir_find(fs, dir, name, len, &loc);

	if (ret)
		return ret;
	dindex_note(fs, dir, 0, le32_get(loc.page->blk->d[loc.slot].hash),
		    dix_loc(loc.page->idx, (uint32_t)loc.slot));
	dmark_note(fs, dir, (const char *)loc.page->blk->name[loc.slot],
		   le16_get(loc.page->blk->d[loc.slot].name_len),
		   le32_get(loc.page->blk->d[loc.slot].ino), loc.page->blk->d[loc.slot].type, 0, 0);
	n = name_slots(le16_get(loc.page->blk->d[loc.slot].name_len));
	for (i = 0; i < n; i++)
		bit_clear(loc.page->blk->bitmap, (uint32_t)loc.slot + i);
	memset(&loc.page->blk->d[loc.slot], 0, sizeof(loc.page->blk->d[0]));
	dpage_dirty(fs, loc.page);
	dpage_put(fs, loc.page);
	if (le32_get(in->dir_entries)) /* a damaged count must not wrap */
		in->dir_entries = le32_put(le32_get(in->dir_entries) - 1);
	node_dirty(fs, dir);
	return 0;
}

int dir_retarget(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		 uint32_t ino, uint8_t type)
{
	struct dloc loc;
	int ret = dir_find(fs, dir, name, len, &loc);

	if (ret)
		return ret;
	dmark_note(fs, dir, (const char *)loc.page->blk->name[loc.slot],
		   le16_get(loc.page->blk->d[loc.slot].name_len),
		   le32_get(loc.page->blk->d[loc.slot].ino), loc.page->blk->d[loc.slot].type, ino,
		   type);
	loc.page->blk->d[loc.slot].ino = le32_put(ino);
	loc.page->blk->d[loc.slot].type = type;
	dpage_dirty(fs, loc.page);
	dpage_put(fs, loc.page);
	return 0;
}

/* dir_iterate, and with BAD (not NULL) the check's walk: a damaged block is told to BAD and
 * skipped. */
static int dir_walk(struct zlfs_fs *fs, struct node_page *dir, uint64_t off, dir_fill_fn fill,
		    dir_bad_fn bad, void *arg)
{
	uint32_t depth = le32_get(inode_of(dir)->dir_depth);
	uint64_t pos = off < 3 ? 0 : off - 3, nblocks = level_first_block(depth);
	uint32_t blk, s;
	struct dpage *p;
	char name[ZLFS_NAME_MAX + 1], why[200];
	size_t ulen;
	uint8_t type;
	int ret = 0, stop = 0;

	if (off == 0 && fill(arg, ".", 1, dir->nid, DT_DIR, 1))
		return 0;
	if (off <= 1 && fill(arg, "..", 2, le32_get(inode_of(dir)->parent_ino), DT_DIR, 2))
		return 0;
	for (blk = (uint32_t)(pos / SLOTS); !ret && !stop && blk < nblocks; blk++) {
		ret = dpage_get_why(fs, dir, blk, 0, &p, why, sizeof(why));
		if (ret == -EUCLEAN && bad) {
			ret = bad(arg, blk, why);
			if (ret)
				return ret;
			continue;
		}
		if (ret == -ENOENT) {
			ret = 0;
			continue;
		}
		if (ret)
			return ret;
		for (s = blk == pos / SLOTS ? (uint32_t)(pos % SLOTS) : 0; !ret && !stop && s < SLOTS;
		     s++) {
			const struct zlfs_dentry *d = &p->blk->d[s];
			uint16_t nl = le16_get(d->name_len);

			if (!bit_test(p->blk->bitmap, s) || !nl)
				continue;
			if (nl > ZLFS_NAME_MAX || s + name_slots(nl) > SLOTS) {
				/* callers copy the name into a NAME_MAX buffer: never trust it */
				zlog_err("directory %u block %u slot %u: bad name length %u: run "
					 "fsck.zlfs", dir->nid, blk, s, nl);
				ret = -EUCLEAN;
				break;
			}
			ret = fname_to_user(fs, dir, p->blk->name[s], nl, le32_get(d->hash), name,
					    &ulen);
			type = d->type;
			if (ret == FNAME_NOKEY) {
				ret = 0;
				type |= bad ? DIR_TYPE_NOKEY : 0;
			}
			if (!ret)
				stop = fill(arg, name, ulen, le32_get(d->ino), type,
					    3 + (uint64_t)blk * SLOTS + s + 1);
		}
		dpage_put(fs, p);
	}
	return ret;
}

int dir_iterate(struct zlfs_fs *fs, struct node_page *dir, uint64_t off, dir_fill_fn fill,
		void *arg)
{
	return dir_walk(fs, dir, off, fill, NULL, arg);
}

int dir_iterate_check(struct zlfs_fs *fs, struct node_page *dir, dir_fill_fn fill,
		      dir_bad_fn bad, void *arg)
{
	return dir_walk(fs, dir, 0, fill, bad, arg);
}
