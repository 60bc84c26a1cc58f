/*
 * dir_cache.c - the cache of directory blocks (see dir_int.h).
 *
 * Owns: directory blocks in memory - read and checked once (a block a device hands us is
 * input: format_check.c's limits), held while in use, dirty until dir_flush writes them
 * before a checkpoint, counted per directory while not yet on the device (st_blocks) - and
 * the table where the name indexes of large directories hang.
 * May call: dmap.c (block addresses, writes), inode.c, fcrypt.c (whether names are ciphertext),
 * node/log (core.h), format.h, log.h.
 *
 * Locks: the cache's chains, page refs, dirty flags and the index table are under its own
 * lock (a leaf); a block's contents belong to its directory's inode lock.
 */
#include "dir_int.h"
#include "dir_index.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dir_cache *dcache(struct zlfs_fs *fs)
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

struct dindex_ent **dindex_slot(struct dir_cache *dc, uint32_t ino)
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

void dindex_drop(struct dir_cache *dc, uint32_t ino)
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
void dpage_dirty(struct zlfs_fs *fs, struct dpage *p)
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

void dpage_put(struct zlfs_fs *fs, struct dpage *p)
{
	struct dir_cache *dc = fs->dcache;

	zlock_lock(&dc->lock);
	p->refs--;
	zlock_unlock(&dc->lock);
}

/* Block P->idx of DIR to the device: as a block, or (block 0) into DIR's inode when it may be
 * inline (dir_inline.c). An inline directory that got a block 0 too big for its inode, or a
 * second block, becomes a directory of blocks here. Under the directory's lock, exclusive. */
static int dpage_store(struct zlfs_fs *fs, struct node_page *dir, struct dpage *p)
{
	struct dir_cache *dc = fs->dcache;
	uint8_t saved[ZLFS_DENTRY_INLINE_SIZE];
	struct dpage *one;
	int ret = 0, was;

	if (p->idx == 0) {
		zlock_lock(&dc->lock);
		one = dcache_find(dc, dhash(dc, p->ino, 1), p->ino, 1);
		zlock_unlock(&dc->lock);
		/* only whether it is there counts: under the directory's lock no block 1 comes,
		 * and one evicted meanwhile was clean, so dinline_store finds it on the device */
		if (one)
			dpage_put(fs, one);
		ret = dinline_store(fs, dir, p->blk, one != NULL);
	}
	if (ret < 0)
		return ret;
	if (!ret) {
		was = dinline_is(dir);
		if (was)
			dinline_leave(fs, dir, saved);
		blk_seal(fs, p->blk);
		ret = data_put_block(fs, dir, p->idx, p->blk, ZLFS_LOG_HOT_DATA);
		if (ret && was)
			dinline_undo(fs, dir, saved);
	}
	if (ret >= 0) { /* written, as a block or into the inode */
		zlock_lock(&dc->lock);
		dpage_clean(fs, p);
		zlock_unlock(&dc->lock);
	}
	return ret < 0 ? ret : 0;
}

/* Under the directory's lock, held exclusively. A block past block 0 of an inline directory
 * needs block 0 out of the inode first: its pointer slots are where the entries are. */
static int dpage_write(struct zlfs_fs *fs, struct dpage *p)
{
	struct node_page *dir;
	struct dpage *zero;
	int ret = inode_get(fs, p->ino, &dir);

	if (ret)
		return ret;
	if (p->idx && dinline_is(dir)) {
		ret = dpage_get(fs, dir, 0, 0, &zero);
		if (!ret) {
			ret = dpage_store(fs, dir, zero);
			dpage_put(fs, zero);
		}
	}
	if (!ret)
		ret = dpage_store(fs, dir, p);
	node_put(fs, dir);
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
/* A directory block as read: checksum, owner, place, and every entry (format_check.c).
 * Continuation slots of a name carry no entry of their own: readdir walks slot by slot. */
/* The hash bucket block IDX serves: names whose hash has BUCKET in its low LEVEL bits. */
static void block_bucket(uint32_t idx, uint32_t *level, uint32_t *bucket)
{
	uint32_t l = 0;

	while (l < 31 && level_first_block(l + 1) <= idx)
		l++;
	*level = l;
	*bucket = (idx - level_first_block(l)) / BUCKET_BLOCKS;
}

/* One entry of block IDX: where a lookup will look for it, and, in a plain directory, a name
 * a user could have given (no NUL, no '/', not a dot entry: those are never stored). */
static int dentry_entry_check(const struct zlfs_dentry_block *b, uint32_t s, uint32_t idx,
			      uint32_t dir_ino, int plain, char *why, size_t len)
{
	uint32_t l, bucket, nl = le16_get(b->d[s].name_len);
	const uint8_t *name = b->name[s];

	for (uint32_t i = 1; i < name_slots(nl); i++)
		if (b->d[s + i].name_len) {
			snprintf(why, len, "slot %u inside the name at slot %u holds an entry", s + i, s);
			return -EUCLEAN;
		}
	block_bucket(idx, &l, &bucket);
	if ((le32_get(b->d[s].hash) & ((1u << l) - 1)) != bucket) {
		snprintf(why, len, "dentry at slot %u: hash 0x%08x belongs in another block than %u "
			 "(level %u, bucket %u)", s, le32_get(b->d[s].hash), idx, l, bucket);
		return -EUCLEAN;
	}
	/* A directory never names itself, and no directory names the root: following either
	 * would take a lock the walk already holds (an entry's inode is locked under its
	 * directory's lock). */
	if (le32_get(b->d[s].ino) == dir_ino || le32_get(b->d[s].ino) == ZLFS_ROOT_INO) {
		snprintf(why, len, "dentry at slot %u names inode %u, %s", s, le32_get(b->d[s].ino),
			 le32_get(b->d[s].ino) == dir_ino ? "its own directory" : "the root");
		return -EUCLEAN;
	}
	if (plain && (memchr(name, 0, nl) || memchr(name, '/', nl) ||
		      (nl <= 2 && name[0] == '.' && (nl == 1 || name[1] == '.')))) {
		snprintf(why, len, "dentry at slot %u: the name holds a NUL or '/' or is a dot entry",
			 s);
		return -EUCLEAN;
	}
	return 0;
}

/* Every entry of block IDX of DIR (format_check.c's limits, then where lookups look for it).
 * Continuation slots of a name carry no entry of their own: readdir walks slot by slot. */
static int dentry_entries_check(struct zlfs_fs *fs, const struct zlfs_dentry_block *b,
				struct node_page *dir, uint32_t idx, char *why, size_t len)
{
	uint32_t s, n;
	int ret = zlfs_dentry_check(&fs->sb, b, why, len);

	for (s = 0; !ret && s < SLOTS; s += n) {
		int taken = bit_test(b->bitmap, s) && b->d[s].name_len;

		n = taken ? name_slots(le16_get(b->d[s].name_len)) : 1;
		if (taken)
			ret = dentry_entry_check(b, s, idx, dir->nid, !fcrypt_is_encrypted(dir), why,
						 len);
	}
	return ret;
}

/* A directory block as read: checksum, owner, place, and every entry. */
static int dentry_block_check(struct zlfs_fs *fs, const struct zlfs_dentry_block *b,
			      struct node_page *dir, uint32_t idx, char *why, size_t len)
{
	int ret = zlfs_blk_verify(b, fs->sb.seed, ZLFS_KIND_DENTRY);

	if (ret) {
		snprintf(why, len, "%s", ret == -EUCLEAN ? "bad checksum or magic" : "not a dentry block");
		return -EUCLEAN;
	}
	if (le32_get(b->hdr.ino) != dir->nid || le32_get(b->hdr.index) != idx) {
		snprintf(why, len, "header names inode %u block %u", le32_get(b->hdr.ino),
			 le32_get(b->hdr.index));
		return -EUCLEAN;
	}
	return dentry_entries_check(fs, b, dir, idx, why, len);
}

/* Block IDX of DIR into P: read from ADDR, decoded from an inline directory's inode (block 0;
 * INL), or made for a hole (ADDR null). */
static int dpage_fill(struct zlfs_fs *fs, struct node_page *dir, struct dpage *p, uint32_t addr,
		      int inl, char *why, size_t whylen)
{
	int ret;

	if (inl && p->idx == 0) {
		ret = dinline_read(fs, dir, p->blk, why, whylen);
		return ret ? ret : dentry_entries_check(fs, p->blk, dir, 0, why, whylen);
	}
	if (addr == ZLFS_ADDR_NULL) {
		memset(p->blk, 0, ZLFS_BLOCK_SIZE);
		zlfs_blk_init(p->blk, ZLFS_KIND_DENTRY, p->idx, dir->nid, fs->cp_ver);
		p->fresh = 1;
		dpage_dirty(fs, p);
		return 0;
	}
	ret = seg_read(fs, addr, p->blk);
	return ret ? ret : dentry_block_check(fs, p->blk, dir, p->idx, why, whylen);
}

/* Block IDX of DIR, held: from the cache, or read and checked (the reason for refusing it in
 * WHY), or made for a hole when CREATE. -ENOENT: a hole. */
int dpage_get_why(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, int create,
			 struct dpage **out, char *why, size_t whylen)
{
	struct dir_cache *dc = dcache(fs);
	struct dpage *p;
	uint32_t addr = ZLFS_ADDR_NULL, h;
	int ret, inl;

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
	/* an inline directory's pointer slots hold its entries: it has block 0 and no other */
	inl = dinline_is(dir);
	ret = inl ? 0 : data_addr(fs, dir, idx, &addr);
	if (ret)
		return ret;
	if (addr == ZLFS_ADDR_NULL && !create && !(inl && idx == 0))
		return -ENOENT;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->blk = zdev_page_alloc())) {
		free(p);
		return -ENOMEM;
	}
	p->ino = dir->nid;
	p->idx = idx;
	ret = dpage_fill(fs, dir, p, addr, inl, why, whylen);
	if (ret) {
		zlog_err("directory %u block %u%s is damaged (%s): run fsck.zlfs", dir->nid, idx,
			 inl ? " (inline)" : "", ret == -EUCLEAN ? why : strerror(-ret));
		dpage_free(fs, p);
		return ret == -EBADMSG ? -EUCLEAN : ret;
	}
	return dcache_insert(fs, dc, h, p, out);
}

int dir_cache_keep(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, const void *blk)
{
	struct dir_cache *dc = dcache(fs);
	struct dpage *p = dc ? calloc(1, sizeof(*p)) : NULL, *got;
	char why[8];

	if (!p || !(p->blk = zdev_page_alloc())) {
		free(p);
		return -ENOMEM;
	}
	p->ino = dir->nid;
	p->idx = idx;
	memcpy(p->blk, blk, ZLFS_BLOCK_SIZE);
	if (dentry_block_check(fs, p->blk, dir, idx, why, sizeof(why))) {
		dpage_free(fs, p);
		return -EUCLEAN;
	}
	dcache_insert(fs, dc, dhash(dc, dir->nid, idx), p, &got);
	dpage_put(fs, got);
	return 0;
}

int dpage_get(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, int create,
		     struct dpage **out)
{
	char why[200];

	return dpage_get_why(fs, dir, idx, create, out, why, sizeof(why));
}
