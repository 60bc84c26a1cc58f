/*
 * metacache.c - NAT and SIT pages: read on demand from the meta log, kept in bounded caches.
 *
 * Owns: the cached pages of both tables (host-form copies of whole NAT and SIT blocks), their
 * decoding from and encoding to the disk form, eviction, and the mount's one pass over the
 * SIT that sums each zone's valid blocks and their age. The tables themselves are never whole
 * in memory: a 4 TiB device has 400k NAT and 42k SIT blocks, and a mount touches few of them.
 * May call: format.h, zdev.h, log.h. Owns the read of one verified meta block (meta_block_read),
 * which the checkpoint uses too.
 * Called by node.c (NAT), segment.c and gc_policy.c (SIT), checkpoint.c (write-back), fsck.
 *
 * Locks (core.h): the NAT cache is under nat_lock and the SIT cache under seg_lock, the locks
 * that already own those tables; a miss reads the block with that lock held. The per-block
 * dirty flags (fs->nat_dirty, fs->sit_dirty) are the tables' and under the same locks; a
 * dirty page is never evicted, since only a checkpoint writes it. An entry pointer returned
 * here stays valid while its lock is held and fewer than MCACHE_KEEP other pages of the same
 * table have been asked for since: the newest pages are never evicted.
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Read meta block ADDR into BUF and check it is KIND with INDEX. Here, under both the caches
 * and the checkpoint that load and write the meta log, so that neither calls the other up. */
int meta_block_read(struct zlfs_fs *fs, uint32_t addr, void *buf, uint16_t kind, uint32_t index)
{
	int ret = zdev_read(fs->dev, buf, ZLFS_BLOCK_SIZE, (uint64_t)addr * ZLFS_BLOCK_SIZE);

	return meta_block_check(fs, addr, buf, kind, index, ret);
}

int meta_block_check(struct zlfs_fs *fs, uint32_t addr, const void *buf, uint16_t kind,
		     uint32_t index, int ret)
{
	if (!ret)
		ret = zlfs_blk_verify(buf, fs->sb.seed, kind);
	if (!ret && le32_get(((const struct zlfs_blkhdr *)buf)->index) != index)
		ret = -EUCLEAN;
	if (ret)
		zlog_err("%s block %u at address %u is unreadable or damaged (%s): run fsck.zlfs",
			 zlfs_kind_name(kind), index, addr, strerror(-ret));
	return ret;
}

#define MCACHE_KEEP 4            /* newest pages never evicted (entry pointers in use) */
#define MCACHE_EVICT_SCAN 64     /* pages looked at from the old end for a clean one */
#define MCACHE_MIN_PAGES 8       /* the smallest bound taken (tests use it to make pages move) */

struct mpage {
	struct mpage *hnext;         /* hash chain */
	struct mpage *newer, *older; /* use order */
	uint32_t blk;                /* block within its table */
	union {
		struct nat_ent nat[ZLFS_NAT_PER_BLOCK];
		struct seg_ent sit[ZLFS_SIT_PER_BLOCK];
	} u;
};

struct mcache {
	uint16_t kind;               /* ZLFS_KIND_NAT or ZLFS_KIND_SIT */
	uint32_t base;               /* logical meta block of the table's block 0 */
	uint32_t blocks;             /* blocks in the table */
	const uint8_t *dirty;        /* per block: to be written by the next checkpoint */
	struct mpage **bucket;
	uint32_t nbuckets, count, max;
	struct mpage *newest, *oldest;
	uint8_t *iobuf;              /* aligned, for misses, under the owner's lock */
	uint64_t hits, misses, evictions;
	int err;                     /* why the last miss failed (negative errno) */
};

static struct mpage **mc_slot(struct mcache *c, uint32_t blk)
{
	return &c->bucket[(blk * 2654435761u) % c->nbuckets];
}

static void mc_unlink(struct mcache *c, struct mpage *p)
{
	if (p->newer)
		p->newer->older = p->older;
	else
		c->newest = p->older;
	if (p->older)
		p->older->newer = p->newer;
	else
		c->oldest = p->newer;
}

static void mc_push_newest(struct mcache *c, struct mpage *p)
{
	p->newer = NULL;
	p->older = c->newest;
	if (c->newest)
		c->newest->newer = p;
	c->newest = p;
	if (!c->oldest)
		c->oldest = p;
}

static void mc_drop(struct mcache *c, struct mpage *p)
{
	struct mpage **pp = mc_slot(c, p->blk);

	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	mc_unlink(c, p);
	c->count--;
}

static struct mpage *mc_find(struct mcache *c, uint32_t blk)
{
	struct mpage *p;

	for (p = *mc_slot(c, blk); p; p = p->hnext)
		if (p->blk == blk)
			return p;
	return NULL;
}

/* A clean page from the old end to reuse, or NULL when the pages looked at are all dirty
 * (the cache then grows past its bound until a checkpoint cleans them: mcache_trim). A dirty
 * page met on the way is moved to the new end, so the next search does not meet it again. */
static struct mpage *mc_evict(struct mcache *c)
{
	uint32_t i;

	for (i = 0; c->oldest && i < MCACHE_EVICT_SCAN && i + MCACHE_KEEP < c->count; i++) {
		struct mpage *p = c->oldest;

		if (c->dirty[p->blk]) {
			mc_unlink(c, p);
			mc_push_newest(c, p);
			continue;
		}
		mc_drop(c, p);
		c->evictions++;
		return p;
	}
	return NULL;
}

/* NAT block BLK: every entry names a main-area block and an inode of this filesystem. */
static int nat_decode(const struct zlfs_fs *fs, struct mpage *p, uint32_t blk,
		      const struct zlfs_nat_block *nb)
{
	char why[160];

	for (uint32_t i = 0; i < ZLFS_NAT_PER_BLOCK; i++) {
		struct nat_ent *e = &p->u.nat[i];

		e->blkaddr = le32_get(nb->e[i].blkaddr);
		e->ino = le32_get(nb->e[i].ino);
		e->version = le32_get(nb->e[i].version);
		if (zlfs_nat_entry_check(&fs->sb, blk * ZLFS_NAT_PER_BLOCK + i, e->blkaddr, e->ino,
					 why, sizeof(why))) {
			zlog_err("NAT block %u is damaged: %s", blk, why);
			return -EUCLEAN;
		}
		nat_ent_split(&fs->sb, e);
	}
	return 0;
}

static int sit_decode(const struct zlfs_fs *fs, struct mpage *p, uint32_t blk,
		      const struct zlfs_sit_block *sb)
{
	char why[160];

	for (uint32_t i = 0; i < ZLFS_SIT_PER_BLOCK; i++) {
		struct seg_ent *se = &p->u.sit[i];

		if (zlfs_sit_entry_check(&fs->sb, blk * ZLFS_SIT_PER_BLOCK + i, &sb->e[i], why,
					 sizeof(why))) {
			zlog_err("SIT block %u is damaged: %s", blk, why);
			return -EUCLEAN;
		}
		se->valid = le16_get(sb->e[i].valid);
		se->log = sb->e[i].log;
		se->mtime = le64_get(sb->e[i].mtime);
		memcpy(se->bitmap, sb->e[i].bitmap, sizeof(se->bitmap));
	}
	return 0;
}

/* Block BLK's contents: as last written, or the all-free form of a block never written. */
static int mc_fill(struct zlfs_fs *fs, struct mcache *c, struct mpage *p, uint32_t blk)
{
	uint32_t addr = fs->meta_addr[c->base + blk], i;
	int ret;

	memset(&p->u, 0, sizeof(p->u));
	if (addr == ZLFS_ADDR_NULL) {
		if (c->kind == ZLFS_KIND_SIT)
			for (i = 0; i < ZLFS_SIT_PER_BLOCK; i++)
				p->u.sit[i].log = ZLFS_LOG_NONE;
		return 0;
	}
	ret = meta_block_read(fs, addr, c->iobuf, c->kind, c->base + blk);
	if (ret)
		return ret;
	if (c->kind == ZLFS_KIND_NAT)
		return nat_decode(fs, p, blk, (const void *)c->iobuf);
	return sit_decode(fs, p, blk, (const void *)c->iobuf);
}

static int c_err(const struct mcache *c) { return c->err ? c->err : -EIO; }

static void mc_insert(struct mcache *c, struct mpage *p, uint32_t blk)
{
	p->blk = blk;
	p->hnext = *mc_slot(c, blk);
	*mc_slot(c, blk) = p;
	mc_push_newest(c, p);
	c->count++;
}

static struct mpage *mc_get(struct zlfs_fs *fs, struct mcache *c, uint32_t blk)
{
	struct mpage *p = mc_find(c, blk);
	int ret;

	if (p) {
		c->hits++;
		if (c->newest != p) {
			mc_unlink(c, p);
			mc_push_newest(c, p);
		}
		return p;
	}
	c->misses++;
	p = c->count >= c->max ? mc_evict(c) : NULL;
	if (!p && !(p = malloc(sizeof(*p)))) {
		ret = -ENOMEM;
	} else {
		ret = mc_fill(fs, c, p, blk);
		if (!ret) {
			mc_insert(c, p, blk);
			return p;
		}
		free(p);
	}
	/* The table cannot be trusted past this point: nothing more may be written. */
	c->err = ret;
	zlog_err("%s block %u cannot be brought in (%s); filesystem switched to read-only",
		 zlfs_kind_name(c->kind), blk, strerror(-ret));
	ATOMIC_SET(&fs->readonly, 1);
	return NULL;
}

struct nat_ent *nat_ent_locked(struct zlfs_fs *fs, uint32_t nid)
{
	struct mpage *p = mc_get(fs, fs->nat_cache, nid / ZLFS_NAT_PER_BLOCK);

	return p ? &p->u.nat[nid % ZLFS_NAT_PER_BLOCK] : NULL;
}

struct seg_ent *sit_ent_locked(struct zlfs_fs *fs, uint32_t segno)
{
	struct mpage *p = mc_get(fs, fs->sit_cache, segno / ZLFS_SIT_PER_BLOCK);

	return p ? &p->u.sit[segno % ZLFS_SIT_PER_BLOCK] : NULL;
}

int mcache_error(struct zlfs_fs *fs, int sit) { return c_err(sit ? fs->sit_cache : fs->nat_cache); }

int nat_block_cached_locked(struct zlfs_fs *fs, uint32_t b)
{
	return mc_find(fs->nat_cache, b) != NULL;
}

int nat_block_unused_locked(struct zlfs_fs *fs, uint32_t b)
{
	return fs->meta_addr[b] == ZLFS_ADDR_NULL && !mc_find(fs->nat_cache, b);
}

/* ---- write-back --------------------------------------------------------------------------- */

static int mcache_encode_nat(struct zlfs_fs *fs, uint32_t b, struct zlfs_nat_block *nb)
{
	struct mpage *p = mc_get(fs, fs->nat_cache, b);
	uint32_t i;

	if (!p)
		return c_err(fs->nat_cache);
	for (i = 0; i < ZLFS_NAT_PER_BLOCK; i++) {
		nb->e[i].blkaddr = le32_put(p->u.nat[i].blkaddr);
		nb->e[i].ino = le32_put(nat_ent_disk_ino(&p->u.nat[i]));
		nb->e[i].version = le32_put(p->u.nat[i].version);
	}
	return 0;
}

static int mcache_encode_sit(struct zlfs_fs *fs, uint32_t b, struct zlfs_sit_block *sb)
{
	struct mpage *p = mc_get(fs, fs->sit_cache, b);
	uint32_t i, segs = zlfs_main_segments(&fs->sb);

	if (!p)
		return c_err(fs->sit_cache);
	for (i = 0; i < ZLFS_SIT_PER_BLOCK; i++) {
		const struct seg_ent *se = &p->u.sit[i];

		if (b * ZLFS_SIT_PER_BLOCK + i >= segs) {
			sb->e[i].log = ZLFS_LOG_NONE;
			continue;
		}
		sb->e[i].valid = le16_put(se->valid);
		sb->e[i].log = se->log;
		sb->e[i].mtime = le64_put(se->mtime);
		memcpy(sb->e[i].bitmap, se->bitmap, sizeof(se->bitmap));
	}
	return 0;
}

/* Drop clean pages until the cache is within its bound again (after a checkpoint). */
static void mc_trim(struct mcache *c)
{
	struct mpage *p;

	while (c->count > c->max && (p = mc_evict(c))) {
		free(p);
	}
}

void mcache_trim(struct zlfs_fs *fs)
{
	zlock_lock(&fs->nat_lock);
	mc_trim(fs->nat_cache);
	zlock_unlock(&fs->nat_lock);
	zlock_lock(&fs->seg_lock);
	mc_trim(fs->sit_cache);
	zlock_unlock(&fs->seg_lock);
}

int mcache_copy_or_encode(struct zlfs_fs *fs, uint32_t b, int sit, void *buf)
{
	struct mcache *c = sit ? fs->sit_cache : fs->nat_cache;
	uint32_t addr = fs->meta_addr[c->base + b];

	if (!mc_find(c, b) && addr != ZLFS_ADDR_NULL) {
		int ret = meta_block_read(fs, addr, c->iobuf, c->kind, c->base + b);

		if (ret)
			return ret;
		memcpy(buf, c->iobuf, ZLFS_BLOCK_SIZE);
		return 0;
	}
	return sit ? mcache_encode_sit(fs, b, buf) : mcache_encode_nat(fs, b, buf);
}


/* ---- mount --------------------------------------------------------------------------------- */

/* Each zone's valid blocks and the sum of its segments' mtime x valid, from one pass over the
 * SIT blocks ever written; the pages read stay cached while there is room. Single-threaded. */
int sit_scan(struct zlfs_fs *fs)
{
	struct mcache *c = fs->sit_cache;
	uint32_t b, i, segs = zlfs_main_segments(&fs->sb);

	for (b = 0; b < c->blocks; b++) { /* the sums start at zero (ckpt_alloc) */
		struct mpage *p;

		if (fs->meta_addr[c->base + b] == ZLFS_ADDR_NULL)
			continue;
		p = mc_get(fs, c, b);
		if (!p)
			return c_err(c);
		for (i = 0; i < ZLFS_SIT_PER_BLOCK && b * ZLFS_SIT_PER_BLOCK + i < segs; i++) {
			uint32_t mz = (b * ZLFS_SIT_PER_BLOCK + i) / fs->sb.segs_per_zone;

			fs->zone_valid[mz] += p->u.sit[i].valid;
			fs->zone_born[mz] += p->u.sit[i].mtime * p->u.sit[i].valid;
		}
	}
	return 0;
}

/* Logical meta block B (NAT then SIT) as read into BLK: checked and decoded, into a new
 * cached page while its cache has room (the check that follows asks for every block), else
 * into SCRATCH. */
static int verify_one(struct zlfs_fs *fs, uint32_t b, const uint8_t *blk, struct mpage *scratch)
{
	int sit = b >= fs->sb.nat_blocks;
	struct mcache *c = sit ? fs->sit_cache : fs->nat_cache;
	struct zlock *lock = sit ? &fs->seg_lock : &fs->nat_lock;
	uint32_t tb = b - c->base;
	struct mpage *p;
	int ret = meta_block_check(fs, fs->meta_addr[b], blk, sit ? ZLFS_KIND_SIT : ZLFS_KIND_NAT,
				  b, 0);

	if (ret)
		return ret;
	zlock_lock(lock);
	p = c->count < c->max && !mc_find(c, tb) ? malloc(sizeof(*p)) : NULL;
	ret = sit ? sit_decode(fs, p ? p : scratch, tb, (const void *)blk)
		  : nat_decode(fs, p ? p : scratch, tb, (const void *)blk);
	if (p && !ret)
		mc_insert(c, p, tb);
	else
		free(p);
	zlock_unlock(lock);
	return ret;
}

/* Every NAT and SIT block the checkpoint references reads, checksums and decodes. The meta log
 * appends them in table order, so they are read in runs of consecutive addresses. */
#define VERIFY_RUN 64u
int mcache_verify_all(struct zlfs_fs *fs)
{
	uint32_t zb = zlfs_zone_blocks(&fs->sb), b = 0, n, i;
	struct mpage *scratch = malloc(sizeof(*scratch));
	uint8_t *buf = zdev_buf_alloc((size_t)VERIFY_RUN * ZLFS_BLOCK_SIZE);
	int ret = scratch && buf ? 0 : -ENOMEM;

	while (!ret && b < fs->nr_meta) {
		uint32_t addr = fs->meta_addr[b];

		if (addr == ZLFS_ADDR_NULL) {
			b++;
			continue;
		}
		for (n = 1; b + n < fs->nr_meta && n < VERIFY_RUN && fs->meta_addr[b + n] == addr + n &&
			    (addr + n) / zb == addr / zb; n++)
			;
		ret = zdev_read(fs->dev, buf, (size_t)n * ZLFS_BLOCK_SIZE,
				(uint64_t)addr * ZLFS_BLOCK_SIZE);
		if (ret) /* said as meta_block_read says it */
			ret = meta_block_check(fs, addr, buf, b >= fs->sb.nat_blocks ? ZLFS_KIND_SIT
										 : ZLFS_KIND_NAT, b, ret);
		for (i = 0; !ret && i < n; i++)
			ret = verify_one(fs, b + i, buf + (size_t)i * ZLFS_BLOCK_SIZE, scratch);
		b += n;
	}
	free(scratch);
	zdev_buf_free(buf);
	return ret;
}

/* ---- setup ---------------------------------------------------------------------------------- */

static struct mcache *mc_new(uint16_t kind, uint32_t base, uint32_t blocks, const uint8_t *dirty,
			     size_t budget)
{
	struct mcache *c = calloc(1, sizeof(*c));
	uint32_t max = (uint32_t)(budget / sizeof(struct mpage));

	if (!c)
		return NULL;
	c->kind = kind;
	c->base = base;
	c->blocks = blocks;
	c->dirty = dirty;
	c->max = max < MCACHE_MIN_PAGES ? MCACHE_MIN_PAGES : max;
	for (c->nbuckets = 64; c->nbuckets < c->max && c->nbuckets < blocks; c->nbuckets *= 2)
		;
	c->bucket = calloc(c->nbuckets, sizeof(*c->bucket));
	c->iobuf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!c->bucket || !c->iobuf) {
		free(c->bucket);
		zdev_buf_free(c->iobuf);
		free(c);
		return NULL;
	}
	return c;
}

static void mc_free(struct mcache *c)
{
	struct mpage *p, *older;

	if (!c)
		return;
	for (p = c->newest; p; p = older) {
		older = p->older;
		free(p);
	}
	free(c->bucket);
	zdev_buf_free(c->iobuf);
	free(c);
}

int mcache_init(struct zlfs_fs *fs, size_t budget)
{
	const struct zlfs_sb_info *s = &fs->sb;

	if (!budget)
		budget = MCACHE_DEFAULT_BUDGET;
	/* Half each: a NAT page covers 338 nodes, a SIT page 50 segments (100 MiB of 2 MiB
	 * segments), so at the default 16 MiB a side the NAT of a million files and the SIT of
	 * 800 GiB of written zones stay in memory. */
	fs->nat_cache = mc_new(ZLFS_KIND_NAT, 0, s->nat_blocks, fs->nat_dirty, budget / 2);
	fs->sit_cache = mc_new(ZLFS_KIND_SIT, s->nat_blocks, s->sit_blocks, fs->sit_dirty,
			       budget / 2);
	return fs->nat_cache && fs->sit_cache ? 0 : -ENOMEM;
}

void mcache_destroy(struct zlfs_fs *fs)
{
	mc_free(fs->nat_cache);
	mc_free(fs->sit_cache);
	fs->nat_cache = fs->sit_cache = NULL;
}

void mcache_stats(struct zlfs_fs *fs, struct mcache_stats *st)
{
	const struct mcache *c[2] = {fs->nat_cache, fs->sit_cache};

	memset(st, 0, sizeof(*st));
	for (int i = 0; i < 2; i++) {
		struct zlock *l = i ? &fs->seg_lock : &fs->nat_lock;

		if (!c[i])
			continue;
		zlock_lock(l);
		st->pages[i] = c[i]->count;
		st->max_pages[i] = c[i]->max;
		st->hits[i] = c[i]->hits;
		st->misses[i] = c[i]->misses;
		st->evictions[i] = c[i]->evictions;
		zlock_unlock(l);
	}
	st->page_bytes = sizeof(struct mpage);
}
