/*
 * tailbuf.c - partial blocks in memory: the block a write to a regular file ended inside is
 * kept in memory instead of being written anew by every write that adds a few bytes to it
 * (docs/design.md, "Partial blocks in memory"); for a compressed file, the whole cluster a
 * write at its end of file ended inside (docs/compression.md, "The last cluster in memory"),
 * since a cluster is stored whole.
 *
 * Owns: the table of held spans (at most one per file: the block a write ended inside, at
 * the end of file or within it, or a compressed file's last cluster), their bound in blocks,
 * the room each one is owed in the warm data log (seg_owe: a block, or the cluster's 2^n
 * blocks, its most when stored raw) from the moment it is held, and writing them out: when
 * the file's write fills the block or cluster or goes past it (data.c), at fsync and release,
 * before a checkpoint and at unmount (every held span), and once one is older than the age
 * the daemon gives (tail_flush_aged, from the checkpoint thread). A held span is plaintext; a
 * block is encrypted as it is written, as any block (dmap.c), a cluster compressed and
 * encrypted as any cluster (dcluster.c). An fsync keeps the block it wrote as a clean copy (what
 * the device holds), so that the next write into it, which a log written in frames that end
 * inside blocks makes at once (SQLite's WAL), needs no read of the device: the first write
 * makes it held again, and anything else that changes the file lets it go.
 * May call: dmap.c (data_write_held), dcluster.c (dclu_write_held), inode.c, icache (core.h),
 * node/log (core.h), log.h.
 *
 * Locks: the table's chains and count are under its own lock (tail_lock, a leaf, taken for
 * the table only). A held block is added, changed, written and dropped only under its
 * inode's lock, exclusive, and read under it shared: so a caller holding the inode's lock
 * may use the block's bytes after the table's lock is dropped.
 */
#include "files.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TAIL_BUCKETS 1024

struct tail {
	struct tail *next;  /* hash chain */
	uint32_t ino;
	int fresh;          /* the file had no block there: writing it adds one (st_blocks) */
	int clean;          /* what the device holds (an fsync wrote it): nothing owed */
	uint32_t nblk;      /* 1, or a compressed file's cluster of 2^n blocks */
	uint64_t dirty;     /* a cluster's blocks changed since it was held or written (bits) */
	uint64_t idx;       /* file block (a cluster's first) */
	uint64_t born_ns;   /* when it was first held (CLOCK_MONOTONIC) */
	uint8_t *buf;       /* NBLK blocks of plaintext */
};

struct tail_table {
	struct zlock lock;  /* bucket chains, count */
	struct tail *bucket[TAIL_BUCKETS];
	uint32_t count, max; /* blocks held (a cluster counts its 2^n), and their bound */
	uint32_t nclean;    /* atomic: blocks of clean copies among them (held_blocks: the rest) */
};

int tail_init(struct zlfs_fs *fs, uint32_t max_blocks)
{
	struct tail_table *t;

	if (!max_blocks)
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	zlock_init(&t->lock, LR_TAIL, "tail_lock");
	t->max = max_blocks;
	fs->tails = t;
	return 0;
}

static struct tail **tail_slot(struct tail_table *t, uint32_t ino)
{
	struct tail **pp = &t->bucket[ino % TAIL_BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

/* INO's held block, or NULL; the caller holds INO's lock, so it stays until released. */
static struct tail *tail_get(struct zlfs_fs *fs, uint32_t ino)
{
	struct tail_table *t = fs->tails;
	struct tail *e;

	/* INO's entry was counted under INO's lock, which the caller holds now: a count of 0
	 * means none, and a read or write of a file spares the table's lock */
	if (!t || (!ATOMIC_GET(&fs->held_blocks) && !ATOMIC_GET(&t->nclean)))
		return NULL;
	zlock_lock(&t->lock);
	e = *tail_slot(t, ino);
	zlock_unlock(&t->lock);
	return e;
}

static void tail_free(struct tail *e)
{
	if (e->nblk > 1)
		zdev_buf_free(e->buf);
	else
		zdev_page_free(e->buf);
	free(e);
}

/* Take INO's entry out of the table; OWED: its room is still owed, and is given back (a
 * clean copy owes none). */
static void tail_remove(struct zlfs_fs *fs, uint32_t ino, int owed)
{
	struct tail_table *t = fs->tails;
	struct tail **pp, *e;

	zlock_lock(&t->lock);
	pp = tail_slot(t, ino);
	e = *pp;
	if (e) {
		*pp = e->next;
		t->count -= e->nblk;
	}
	zlock_unlock(&t->lock);
	if (!e)
		return;
	if (e->clean) {
		ATOMIC_ADD(&t->nclean, -e->nblk);
	} else {
		if (owed)
			seg_owe(fs, ZLFS_LOG_WARM_DATA, -(int)e->nblk);
		ATOMIC_ADD(&fs->held_blocks, -e->nblk);
	}
	tail_free(e);
}

/* E becomes a clean copy, or held again: the flags under the table's lock, which
 * tail_probe reads them under without the file's. The counters move with them, the one that
 * grows first, so that a lock-free look at both never sees the copy in neither. */
static void tail_mark(struct zlfs_fs *fs, struct tail *e, int clean)
{
	struct tail_table *t = fs->tails;

	zlock_lock(&t->lock);
	e->clean = clean;
	e->fresh = 0; /* once written, the file has a block there */
	if (clean)
		e->dirty = 0;
	if (!clean)
		e->born_ns = mono_ns();
	zlock_unlock(&t->lock);
	if (clean) {
		ATOMIC_ADD(&t->nclean, e->nblk);
		ATOMIC_ADD(&fs->held_blocks, -e->nblk);
	} else {
		ATOMIC_ADD(&fs->held_blocks, e->nblk);
		ATOMIC_ADD(&t->nclean, -e->nblk);
	}
}

void tail_forget_clean(struct zlfs_fs *fs, uint32_t ino)
{
	struct tail *e = tail_get(fs, ino);

	if (e && e->clean)
		tail_remove(fs, ino, 0);
}

/* A clean copy is held again for a write into it: its room is asked and owed as tail_hold
 * does. 0, or -ENOSPC with the copy let go (the write goes to the device as without it). */
int tail_redirty(struct zlfs_fs *fs, uint32_t ino)
{
	struct tail *e = tail_get(fs, ino);

	if (!e || !e->clean)
		return 0;
	if (seg_free_blocks(fs) < e->nblk) {
		tail_remove(fs, ino, 0);
		return -ENOSPC;
	}
	seg_owe(fs, ZLFS_LOG_WARM_DATA, (int)e->nblk);
	tail_mark(fs, e, 0);
	return 0;
}

void tail_touch(struct zlfs_fs *fs, uint32_t ino, uint64_t from, uint64_t to)
{
	struct tail *e = tail_get(fs, ino);

	for (uint64_t i = from; e && i < to; i++)
		if (i >= e->idx && i - e->idx < e->nblk)
			e->dirty |= 1ull << (i - e->idx);
}

uint8_t *tail_block(struct zlfs_fs *fs, uint32_t ino, uint64_t *idx, uint32_t *n)
{
	struct tail *e = tail_get(fs, ino);

	if (e)
		*idx = e->idx;
	if (e && n)
		*n = e->nblk;
	return e ? e->buf : NULL;
}

/* Room for the blocks a span may take (what statfs would call free) is asked before it is
 * held, and owed from then on: a held span is never refused room when it is written,
 * whatever was written meanwhile (data_write_held and dclu_write_held fall back on the GC
 * reserve should a race take it). */
uint8_t *tail_hold(struct zlfs_fs *fs, uint32_t ino, uint64_t idx, uint32_t nblk, int fresh)
{
	struct tail_table *t = fs->tails;
	struct tail *e, **pp;
	int full;

	tail_forget_clean(fs, ino); /* a clean copy of another span of INO gives way */
	if (!t || ATOMIC_GET(&fs->held_blocks) + nblk > t->max || seg_free_blocks(fs) < nblk)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e || !(e->buf = nblk > 1 ? zdev_buf_alloc((size_t)nblk * ZLFS_BLOCK_SIZE)
				       : zdev_page_alloc())) {
		free(e);
		return NULL; /* written through instead, as without the table */
	}
	e->ino = ino;
	e->idx = idx;
	e->nblk = nblk;
	e->fresh = fresh;
	e->born_ns = mono_ns();
	zlock_lock(&t->lock);
	pp = tail_slot(t, ino);
	/* one per file: the caller wrote out any earlier one */
	full = t->count + nblk > t->max || *pp;
	if (!full) {
		*pp = e;
		t->count += nblk;
	}
	zlock_unlock(&t->lock);
	if (full) {
		tail_free(e);
		return NULL;
	}
	seg_owe(fs, ZLFS_LOG_WARM_DATA, (int)nblk);
	ATOMIC_ADD(&fs->held_blocks, nblk);
	return e->buf;
}

void tail_drop(struct zlfs_fs *fs, uint32_t ino)
{
	if (fs->tails)
		tail_remove(fs, ino, 1);
}

/* Write INODE's held span out; KEEP: keep it as a clean copy (an fsync's), else let it go. */
static int tail_write_keep(struct zlfs_fs *fs, struct node_page *inode, int keep)
{
	struct tail *e = tail_get(fs, inode->nid);
	int ret;

	if (!e || e->clean) {
		if (e && !keep)
			tail_remove(fs, inode->nid, 0);
		return 0;
	}
	/* the write below spends the room set aside */
	seg_owe(fs, ZLFS_LOG_WARM_DATA, -(int)e->nblk);
	ret = e->nblk > 1 ? dclu_write_held(fs, inode, e->idx, e->buf, e->dirty)
			  : data_write_held(fs, inode, e->idx, e->buf);
	if (ret) { /* still held, still owed: a later write-out tries again */
		seg_owe(fs, ZLFS_LOG_WARM_DATA, (int)e->nblk);
		return ret;
	}
	/* The attribute cache first: a stat that no longer finds the block held must find it
	 * counted in the file's blocks (inode_stat). */
	iattr_update(fs, inode);
	if (!keep) {
		tail_remove(fs, inode->nid, 0);
		return 0;
	}
	tail_mark(fs, e, 1);
	return 0;
}

int tail_write(struct zlfs_fs *fs, struct node_page *inode)
{
	return tail_write_keep(fs, inode, 0);
}

int tail_sync(struct zlfs_fs *fs, struct node_page *inode)
{
	return tail_write_keep(fs, inode, 1);
}

/* Whether INO has a block held (1 + whether writing it adds a block to the file, so 2 for a
 * fresh one), read under the table's lock alone: the caller may hold no inode lock. */
static int tail_probe(struct zlfs_fs *fs, uint32_t ino)
{
	struct tail_table *t = fs->tails;
	struct tail *e;
	int n;

	if (!t || (!ATOMIC_GET(&fs->held_blocks) && !ATOMIC_GET(&t->nclean)))
		return 0; /* the common case of stat: no lock taken */
	zlock_lock(&t->lock);
	e = *tail_slot(t, ino);
	n = e ? 1 + (e->fresh && !e->clean) : 0;
	zlock_unlock(&t->lock);
	return n;
}

int tail_held(struct zlfs_fs *fs, uint32_t ino) { return tail_probe(fs, ino) > 0; }

uint32_t tail_pending_blocks(struct zlfs_fs *fs, uint32_t ino)
{
	return tail_probe(fs, ino) == 2;
}

/* The inodes with a block held since BEFORE_NS or earlier (UINT64_MAX: all): *N of them in
 * *OUT (free it). */
static int tail_inodes(struct tail_table *t, uint64_t before_ns, uint32_t **out, uint32_t *n)
{
	uint32_t *v, k = 0, b;
	struct tail *e;

	zlock_lock(&t->lock);
	v = malloc((t->count + 1) * sizeof(*v));
	for (b = 0; v && b < TAIL_BUCKETS; b++)
		for (e = t->bucket[b]; e; e = e->next)
			if (e->born_ns <= before_ns)
				v[k++] = e->ino;
	zlock_unlock(&t->lock);
	*out = v;
	*n = k;
	return v ? 0 : -ENOMEM;
}

/* Write INO's held block, if it still has one held since BEFORE_NS, under INO's lock. */
static int tail_write_ino(struct zlfs_fs *fs, uint32_t ino, uint64_t before_ns)
{
	struct ilock *il = ilock_take(fs, ino, 1, LR_ICHILD, ino);
	struct node_page *np;
	struct tail *e;
	int ret = il ? 0 : -ENOMEM;

	e = il ? tail_get(fs, ino) : NULL;
	if (e && e->born_ns <= before_ns) {
		ret = inode_get(fs, ino, &np);
		if (!ret) {
			ret = tail_write(fs, np);
			node_put(fs, np);
		}
	}
	ilock_drop(fs, il);
	return ret;
}

/* Before a checkpoint, under cp_lock exclusive: nothing else changes a file meanwhile, but
 * readers may be mapping its blocks, so each file is locked while its block goes. */
int tail_flush_all(struct zlfs_fs *fs)
{
	uint32_t *v, n, i;
	int ret = fs->tails ? tail_inodes(fs->tails, UINT64_MAX, &v, &n) : 0;

	if (!fs->tails || ret)
		return ret;
	for (i = 0; i < n; i++) { /* every file's is tried; the first error is the answer */
		int r = tail_write_ino(fs, v[i], UINT64_MAX);

		ret = ret ? ret : r;
	}
	free(v);
	return ret;
}

/* A request's way in: cp_lock shared, then the file's lock. An error leaves the block held
 * for the checkpoint to try again, which reports it. */
void tail_flush_aged(struct zlfs_fs *fs, uint64_t age_ns)
{
	uint64_t now = mono_ns(), before = now > age_ns ? now - age_ns : 0;
	uint32_t *v, n, i;
	int ret;

	if (!fs->tails || (!ATOMIC_GET(&fs->held_blocks) && !ATOMIC_GET(&fs->tails->nclean)) ||
	    tail_inodes(fs->tails, before, &v, &n))
		return;
	for (i = 0; i < n && !ATOMIC_GET(&fs->readonly); i++) {
		zrw_rdlock(&fs->cp_lock);
		ret = tail_write_ino(fs, v[i], before);
		zrw_unlock(&fs->cp_lock);
		if (ret)
			zlog_warn("partial block of inode %u not written yet: %s", v[i], strerror(-ret));
	}
	free(v);
}

void tail_destroy(struct zlfs_fs *fs)
{
	struct tail_table *t = fs->tails;

	if (!t)
		return;
	if (ATOMIC_GET(&fs->held_blocks)) /* a read-only filesystem, or a failed write-out */
		zlog_warn("%u partial blocks held in memory were not written: the bytes appended "
			  "to those files since their last fsync are lost",
			  ATOMIC_GET(&fs->held_blocks));
	for (uint32_t b = 0; b < TAIL_BUCKETS; b++)
		while (t->bucket[b])
			tail_remove(fs, t->bucket[b]->ino, 1);
	zlock_destroy(&t->lock);
	free(t);
	fs->tails = NULL;
}
