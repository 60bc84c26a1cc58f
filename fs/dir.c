/*
 * dir.c - directories: hashed multi-level dentry blocks, stable readdir offsets, and a cache
 * of directory blocks.
 *
 * Owns: where a name goes in a directory and how it is found again. Level L of a directory
 * has 2^L buckets of two dentry blocks; a name hashes (XXH3, seeded per filesystem) to one
 * bucket per level; lookup probes one bucket in each level in use, so a directory of n entries
 * costs O(log n) block scans, not a linear scan. Entries never move once placed, so the
 * readdir offset of an entry (its block and slot) stays valid while others come and go.
 * Changed blocks stay in the cache until dir_flush writes them (before every checkpoint).
 * Names are stored in their disk form (fcrypt.c): ciphertext in encrypted directories.
 * May call: data.c, inode.c, fcrypt.c, dir_index.c, node/log (core.h), log.h.
 *
 * Locks: a directory's blocks and name index belong to the directory's inode lock (shared to
 * look up or list, exclusive to change); the cache's chains, page refs and dirty flags are
 * under its own lock. A page in use is held (refs) and never evicted; dirty pages wait for
 * the checkpoint, which writes them under each directory's lock.
 */
#include "dir_index.h"
#include "files.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define BUCKET_BLOCKS 2
#define MAX_DEPTH 22
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
};

static struct dir_cache *dcache(struct zlfs_fs *fs)
{
	struct dir_cache *dc = fs->dcache;

	if (dc)
		return dc;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return NULL;
	dc->nbuckets = 8192;
	dc->bucket = calloc(dc->nbuckets, sizeof(*dc->bucket));
	if (!dc->bucket) {
		free(dc);
		return NULL;
	}
	zlock_init(&dc->lock, LR_DCACHE, "dcache_lock");
	fs->dcache = dc;
	return dc;
}

int dir_cache_init(struct zlfs_fs *fs) { return dcache(fs) ? 0 : -ENOMEM; }

static struct dindex_ent **dindex_slot(struct dir_cache *dc, uint32_t ino)
{
	struct dindex_ent **pp = &dc->ixb[ino % DINDEX_BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static void dindex_unlink(struct dir_cache *dc, struct dindex_ent **pp)
{
	struct dindex_ent *e = *pp;

	*pp = e->next;
	dc->ix_bytes -= dix_bytes(e->ix);
	dix_free(e->ix);
	free(e);
}

static void dindex_drop(struct dir_cache *dc, uint32_t ino)
{
	struct dindex_ent **pp = dindex_slot(dc, ino);

	if (*pp)
		dindex_unlink(dc, pp);
}

static void dindex_drop_all(struct dir_cache *dc)
{
	for (uint32_t b = 0; b < DINDEX_BUCKETS; b++)
		while (dc->ixb[b])
			dindex_unlink(dc, &dc->ixb[b]);
}

static uint32_t dhash(const struct dir_cache *dc, uint32_t ino, uint32_t idx)
{
	return (ino * 2654435761u ^ idx * 40503u) % dc->nbuckets;
}

static uint32_t name_hash(const struct zlfs_fs *fs, const char *name, size_t len)
{
	return (uint32_t)XXH3_64bits_withSeed(name, len, fs->sb.seed);
}

static uint32_t name_slots(size_t len)
{
	return (uint32_t)((len + ZLFS_DENTRY_SLOT_LEN - 1) / ZLFS_DENTRY_SLOT_LEN);
}

static uint32_t level_first_block(uint32_t level)
{
	return BUCKET_BLOCKS * ((1u << level) - 1);
}

static int bit_test(const uint8_t *map, uint32_t i) { return map[i / 8] & (1u << (i % 8)); }
static void bit_set(uint8_t *map, uint32_t i) { map[i / 8] |= (uint8_t)(1u << (i % 8)); }
static void bit_clear(uint8_t *map, uint32_t i) { map[i / 8] &= (uint8_t)~(1u << (i % 8)); }

/* Under the cache's lock. A failed allocation only leaves st_blocks short until the write. */
static void dpend_add(struct dir_cache *dc, uint32_t ino, int d)
{
	struct dpend **pp = &dc->pend[ino % DPEND_BUCKETS], *e;

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	e = *pp;
	if (!e && d > 0 && (e = calloc(1, sizeof(*e)))) {
		e->ino = ino;
		*pp = e;
	}
	if (!e)
		return;
	e->n = d > 0 ? e->n + 1 : (e->n ? e->n - 1 : 0);
	if (!e->n) {
		*pp = e->next;
		free(e);
	}
}

/* A directory's blocks count from the moment they are made, as a file's count from its
 * write: the kernel keeps attributes for long and would never see the checkpoint's write
 * change st_blocks. The caller holds the directory's lock, as the flush does. */
uint32_t dir_pending_blocks(struct zlfs_fs *fs, uint32_t ino)
{
	struct dir_cache *dc = fs->dcache;
	struct dpend *e;
	uint32_t n = 0;

	if (!dc)
		return 0;
	zlock_lock(&dc->lock);
	for (e = dc->pend[ino % DPEND_BUCKETS]; e && !n; e = e->next)
		if (e->ino == ino)
			n = e->n;
	zlock_unlock(&dc->lock);
	return n;
}

/* A changed block owes room in the hot data log until it is written (seg_owe). The caller
 * holds the directory exclusively; the flag is the cache's, for eviction. */
static void dpage_dirty(struct zlfs_fs *fs, struct dpage *p)
{
	struct dir_cache *dc = fs->dcache;

	zlock_lock(&dc->lock);
	if (!p->dirty) {
		seg_owe(fs, ZLFS_LOG_HOT_DATA, 1);
		if (p->fresh)
			dpend_add(dc, p->ino, 1);
	}
	p->dirty = 1;
	zlock_unlock(&dc->lock);
}

/* Under the cache's lock. */
static void dpage_clean(struct zlfs_fs *fs, struct dpage *p)
{
	if (p->dirty) {
		seg_owe(fs, ZLFS_LOG_HOT_DATA, -1);
		if (p->fresh)
			dpend_add(fs->dcache, p->ino, -1);
	}
	p->dirty = 0;
	p->fresh = 0;
}

static void dpage_free(struct zlfs_fs *fs, struct dpage *p)
{
	dpage_clean(fs, p);
	zdev_page_free(p->blk);
	free(p);
}

static void dpage_put(struct zlfs_fs *fs, struct dpage *p)
{
	struct dir_cache *dc = fs->dcache;

	zlock_lock(&dc->lock);
	p->refs--;
	zlock_unlock(&dc->lock);
}

/* Under the directory's lock, held exclusively. */
static int dpage_write(struct zlfs_fs *fs, struct dpage *p)
{
	struct dir_cache *dc = fs->dcache;
	struct node_page *dir;
	int ret = inode_get(fs, p->ino, &dir);

	if (ret)
		return ret;
	blk_seal(fs, p->blk);
	ret = data_put_block(fs, dir, p->idx, p->blk, ZLFS_LOG_HOT_DATA);
	node_put(fs, dir);
	if (!ret) {
		zlock_lock(&dc->lock);
		dpage_clean(fs, p);
		zlock_unlock(&dc->lock);
	}
	return ret;
}

static int dpage_cmp(const void *a, const void *b)
{
	const struct dpage *x = *(struct dpage *const *)a, *y = *(struct dpage *const *)b;

	return x->ino != y->ino ? (x->ino < y->ino ? -1 : 1) : (x->idx > y->idx) - (x->idx < y->idx);
}

/* The dirty pages, held, by directory: *N of them in *OUT (free it). */
static int dirty_pages(struct dir_cache *dc, struct dpage ***out, uint32_t *n)
{
	struct dpage *p, **v;
	uint32_t b, k = 0, cap = 0;

	zlock_lock(&dc->lock);
	for (b = 0; b < dc->nbuckets; b++)
		for (p = dc->bucket[b]; p; p = p->next)
			cap += p->dirty;
	v = malloc((cap + 1) * sizeof(*v));
	for (b = 0; v && b < dc->nbuckets; b++)
		for (p = dc->bucket[b]; p; p = p->next)
			if (p->dirty) {
				p->refs++;
				v[k++] = p;
			}
	zlock_unlock(&dc->lock);
	if (!v)
		return -ENOMEM;
	qsort(v, k, sizeof(*v), dpage_cmp);
	*out = v;
	*n = k;
	return 0;
}

int dir_flush(struct zlfs_fs *fs)
{
	struct dir_cache *dc = fs->dcache;
	struct ilock *il = NULL;
	struct dpage **v;
	uint32_t i, n, locked = 0;
	int ret = dc ? dirty_pages(dc, &v, &n) : 0;

	if (!dc || ret)
		return ret;
	/* Under cp_lock exclusive nothing changes a directory, but lookups may be reading the
	 * node slots a write re-points: each directory is locked while its blocks go. */
	for (i = 0; i < n; i++) {
		if (!ret && (!il || locked != v[i]->ino)) {
			ilock_drop(fs, il);
			locked = v[i]->ino;
			il = ilock_take(fs, locked, 1, LR_ICHILD, locked);
			if (!il)
				ret = -ENOMEM;
		}
		if (!ret)
			ret = dpage_write(fs, v[i]);
		dpage_put(fs, v[i]);
	}
	ilock_drop(fs, il);
	free(v);
	return ret;
}

/* Keep the cache bounded: forget clean pages nobody holds. Dirty ones wait for the
 * checkpoint that ckpt_due asks for as they pile up. Under the cache's lock. */
static void dcache_shrink(struct zlfs_fs *fs, struct dir_cache *dc)
{
	struct dpage **pp, *p;
	uint32_t b;

	if (dc->count < DCACHE_MAX)
		return;
	for (b = 0; b < dc->nbuckets && dc->count >= DCACHE_MAX / 2; b++) {
		for (pp = &dc->bucket[b]; (p = *pp);) {
			if (p->dirty || p->refs) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			dpage_free(fs, p);
			dc->count--;
		}
	}
}

void dir_cache_drop(struct zlfs_fs *fs, uint32_t ino)
{
	struct dir_cache *dc = fs->dcache;
	struct dpage **pp, *p;
	uint32_t b;

	if (!dc)
		return;
	zlock_lock(&dc->lock);
	dindex_drop(dc, ino);
	for (b = 0; b < dc->nbuckets; b++) {
		for (pp = &dc->bucket[b]; (p = *pp);) {
			if (p->ino == ino) {
				*pp = p->next;
				dpage_free(fs, p);
				dc->count--;
			} else {
				pp = &p->next;
			}
		}
	}
	zlock_unlock(&dc->lock);
}

void dir_cache_destroy(struct zlfs_fs *fs)
{
	struct dir_cache *dc = fs->dcache;
	struct dpage *p;
	uint32_t b;

	if (!dc)
		return;
	dindex_drop_all(dc);
	for (b = 0; b < dc->nbuckets; b++)
		while ((p = dc->bucket[b])) {
			dc->bucket[b] = p->next;
			dpage_free(fs, p);
		}
	for (b = 0; b < DPEND_BUCKETS; b++)
		while (dc->pend[b]) {
			struct dpend *e = dc->pend[b];

			dc->pend[b] = e->next;
			free(e);
		}
	zlock_destroy(&dc->lock);
	free(dc->bucket);
	free(dc);
	fs->dcache = NULL;
}

/* The page of block IDX of INO in chain H, held; under the cache's lock. */
static struct dpage *dcache_find(struct dir_cache *dc, uint32_t h, uint32_t ino, uint32_t idx)
{
	struct dpage *p;

	for (p = dc->bucket[h]; p; p = p->next)
		if (p->ino == ino && p->idx == idx) {
			p->refs++;
			return p;
		}
	return NULL;
}

/* Add page P read in (or made) by this thread, held, unless another reader of the same
 * directory added the block meanwhile: then that page is the one. */
static int dcache_insert(struct zlfs_fs *fs, struct dir_cache *dc, uint32_t h, struct dpage *p,
			 struct dpage **out)
{
	struct dpage *had;

	zlock_lock(&dc->lock);
	had = dcache_find(dc, h, p->ino, p->idx);
	if (!had) {
		dcache_shrink(fs, dc);
		p->refs = 1;
		p->next = dc->bucket[h];
		dc->bucket[h] = p;
		dc->count++;
	}
	zlock_unlock(&dc->lock);
	if (had) /* a made (dirty) page cannot be raced: making needs the directory exclusively */
		dpage_free(fs, p);
	*out = had ? had : p;
	return 0;
}

/* Block IDX of directory DIR, read on a miss, held (dpage_put). With CREATE a hole becomes an empty block;
 * without it a hole is -ENOENT. */
static int dpage_get(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, int create,
		     struct dpage **out)
{
	struct dir_cache *dc = dcache(fs);
	struct dpage *p;
	uint32_t addr, h;
	int ret;

	if (!dc)
		return -ENOMEM;
	h = dhash(dc, dir->nid, idx);
	zlock_lock(&dc->lock);
	p = dcache_find(dc, h, dir->nid, idx);
	zlock_unlock(&dc->lock);
	if (p) {
		*out = p;
		return 0;
	}
	ret = data_addr(fs, dir, idx, &addr);
	if (ret)
		return ret;
	if (addr == ZLFS_ADDR_NULL && !create)
		return -ENOENT;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->blk = zdev_page_alloc())) {
		free(p);
		return -ENOMEM;
	}
	p->ino = dir->nid;
	p->idx = idx;
	if (addr == ZLFS_ADDR_NULL) {
		memset(p->blk, 0, ZLFS_BLOCK_SIZE);
		zlfs_blk_init(p->blk, ZLFS_KIND_DENTRY, idx, dir->nid, fs->cp_ver);
		p->fresh = 1;
		dpage_dirty(fs, p);
	} else {
		ret = seg_read(fs, addr, p->blk);
		if (!ret)
			ret = zlfs_blk_verify(p->blk, fs->sb.seed, ZLFS_KIND_DENTRY);
		if (!ret && le32_get(p->blk->hdr.ino) != dir->nid)
			ret = -EUCLEAN;
		if (ret) {
			zlog_err("directory %u block %u is damaged (%s): run fsck.zlfs", dir->nid,
				 idx, strerror(-ret));
			dpage_free(fs, p);
			return ret;
		}
	}
	return dcache_insert(fs, dc, h, p, out);
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

static int dir_find(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		    struct dloc *loc)
{
	uint32_t hash, depth = le32_get(inode_of(dir)->dir_depth), l, i;
	struct dindex *ix;
	struct fname fn;
	int ret = fname_to_disk(fs, dir, name, len, 0, &fn);

	if (ret)
		return ret;
	hash = fn.digest ? fn.hash : name_hash(fs, (const char *)fn.disk, fn.len);
	ix = dindex_get(fs, dir);
	if (ix)
		return dindex_find(fs, dir, ix, hash, &fn, &loc->page, &loc->slot);
	for (l = 0; l < depth; l++) {
		uint32_t bucket = hash & ((1u << l) - 1);

		for (i = 0; i < BUCKET_BLOCKS; i++) {
			uint32_t idx = level_first_block(l) + bucket * BUCKET_BLOCKS + i;

			ret = dpage_get(fs, dir, idx, 0, &loc->page);
			if (ret == -ENOENT)
				continue;
			if (ret)
				return ret;
			loc->slot = block_find(loc->page->blk, hash, &fn);
			if (loc->slot >= 0)
				return 0;
			dpage_put(fs, loc->page);
		}
	}
	return -ENOENT;
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
	for (l = 0; l <= depth && l < MAX_DEPTH; l++) {
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
	n = name_slots(le16_get(loc.page->blk->d[loc.slot].name_len));
	for (i = 0; i < n; i++)
		bit_clear(loc.page->blk->bitmap, (uint32_t)loc.slot + i);
	memset(&loc.page->blk->d[loc.slot], 0, sizeof(loc.page->blk->d[0]));
	dpage_dirty(fs, loc.page);
	dpage_put(fs, loc.page);
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
	loc.page->blk->d[loc.slot].ino = le32_put(ino);
	loc.page->blk->d[loc.slot].type = type;
	dpage_dirty(fs, loc.page);
	dpage_put(fs, loc.page);
	return 0;
}

int dir_iterate(struct zlfs_fs *fs, struct node_page *dir, uint64_t off, dir_fill_fn fill,
		void *arg)
{
	uint32_t depth = le32_get(inode_of(dir)->dir_depth);
	uint64_t pos = off < 3 ? 0 : off - 3, nblocks = level_first_block(depth);
	uint32_t blk, s;
	struct dpage *p;
	char name[ZLFS_NAME_MAX + 1];
	size_t ulen;
	int ret = 0, stop = 0;

	if (off == 0 && fill(arg, ".", 1, dir->nid, DT_DIR, 1))
		return 0;
	if (off <= 1 && fill(arg, "..", 2, le32_get(inode_of(dir)->parent_ino), DT_DIR, 2))
		return 0;
	for (blk = (uint32_t)(pos / SLOTS); !ret && !stop && blk < nblocks; blk++) {
		ret = dpage_get(fs, dir, blk, 0, &p);
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
			if (!ret)
				stop = fill(arg, name, ulen, le32_get(d->ino), d->type,
					    3 + (uint64_t)blk * SLOTS + s + 1);
		}
		dpage_put(fs, p);
	}
	return ret;
}
