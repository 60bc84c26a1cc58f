/*
 * rcache.c - main-area blocks read or written a moment ago, by device address, as the device
 * holds them (ciphertext for an encrypted file, which is decrypted above as any block read).
 *
 * Owns: a fixed budget of blocks (the daemon's read_cache_blocks), a hash of their
 * addresses and CLOCK replacement. Filled by short writes of user data as they are staged,
 * looked in by single-block reads and short runs (segment.c). Why: the host's page cache keeps whatever an ext4 under
 * a passthrough wrote or read, and zlfs on a device has nothing of the kind below the
 * kernel's FUSE cache, which never marks a page up to date when it was sent only in part.
 * So the blocks a program writes in pieces across block boundaries (SQLite's WAL frames of
 * 4,120 bytes) were read back from the device twice: once by the daemon, to hold the next
 * partial block (tailbuf.c), and again by SQLite's checkpoint, through FUSE.
 *
 * Why it cannot go stale: a block of a sequential zone never changes until the zone is
 * reset, and a zone of the main area is reset only when a log takes it from the free pool
 * (seg_take_zone), which first forgets every block of the zone here. A free zone holds no
 * valid block, so no read is on its way there meanwhile (reads go to valid blocks under
 * their owner's lock; GC pins its victim).
 *
 * May call: lock.h, libc. Called by segment.c (reads, short writes of user data, resets)
 * and stats.c.
 *
 * Locks: rcache_lock, a leaf (rank 99): a lookup, a fill or a forget, with a 4 KiB copy at
 * most under it.
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rc_ent {
	uint32_t addr;
	uint32_t next;      /* hash chain: entry index + 1, 0 ends it */
	uint8_t used;
	uint8_t ref;        /* CLOCK: touched since the hand last passed */
};

struct rcache {
	struct zlock lock;
	uint32_t n, nbuckets, hand;
	uint32_t *bucket;   /* entry index + 1, 0: empty */
	struct rc_ent *e;
	uint8_t *data;      /* n blocks */
	uint64_t hits, misses, fills;
};

int rcache_init(struct zlfs_fs *fs, uint32_t blocks)
{
	struct rcache *c;

	if (!blocks)
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n = blocks;
	for (c->nbuckets = 1; c->nbuckets < blocks; c->nbuckets <<= 1)
		;
	c->bucket = calloc(c->nbuckets, sizeof(*c->bucket));
	c->e = calloc(blocks, sizeof(*c->e));
	c->data = malloc((size_t)blocks * ZLFS_BLOCK_SIZE); /* touched as it fills */
	if (!c->bucket || !c->e || !c->data) {
		free(c->bucket);
		free(c->e);
		free(c->data);
		free(c);
		return -ENOMEM;
	}
	zlock_init(&c->lock, LR_RCACHE, "rcache_lock");
	fs->rcache = c;
	return 0;
}

void rcache_destroy(struct zlfs_fs *fs)
{
	struct rcache *c = fs->rcache;

	if (!c)
		return;
	zlock_destroy(&c->lock);
	free(c->bucket);
	free(c->e);
	free(c->data);
	free(c);
	fs->rcache = NULL;
}

static uint32_t *chain_of(struct rcache *c, uint32_t addr)
{
	return &c->bucket[(addr * 2654435761u) & (c->nbuckets - 1)];
}

static struct rc_ent *find(struct rcache *c, uint32_t addr)
{
	for (uint32_t i = *chain_of(c, addr); i; i = c->e[i - 1].next)
		if (c->e[i - 1].addr == addr)
			return &c->e[i - 1];
	return NULL;
}

static uint8_t *data_of(struct rcache *c, const struct rc_ent *e)
{
	return c->data + (size_t)(e - c->e) * ZLFS_BLOCK_SIZE;
}

static void unlink_ent(struct rcache *c, struct rc_ent *e)
{
	uint32_t *pp = chain_of(c, e->addr), me = (uint32_t)(e - c->e) + 1;

	while (*pp != me)
		pp = &c->e[*pp - 1].next;
	*pp = e->next;
	e->used = 0;
}

/* The entry the next block takes: a free one, or the first the hand finds untouched. */
static struct rc_ent *victim(struct rcache *c)
{
	for (;;) {
		struct rc_ent *e = &c->e[c->hand];

		c->hand = c->hand + 1 == c->n ? 0 : c->hand + 1;
		if (!e->used)
			return e;
		if (!e->ref) {
			unlink_ent(c, e);
			return e;
		}
		e->ref = 0;
	}
}

int rcache_get(struct zlfs_fs *fs, uint32_t addr, void *buf)
{
	struct rcache *c = fs->rcache;
	struct rc_ent *e;

	if (!c)
		return 0;
	zlock_lock(&c->lock);
	e = find(c, addr);
	if (e) {
		memcpy(buf, data_of(c, e), ZLFS_BLOCK_SIZE);
		e->ref = 1;
		c->hits++;
	} else {
		c->misses++;
	}
	zlock_unlock(&c->lock);
	return !!e;
}

void rcache_put(struct zlfs_fs *fs, uint32_t addr, const void *buf)
{
	struct rcache *c = fs->rcache;
	struct rc_ent *e;

	if (!c)
		return;
	zlock_lock(&c->lock);
	e = find(c, addr);
	if (!e) {
		uint32_t *head = chain_of(c, addr);

		e = victim(c);
		e->addr = addr;
		e->used = 1;
		e->next = *head;
		*head = (uint32_t)(e - c->e) + 1;
	}
	memcpy(data_of(c, e), buf, ZLFS_BLOCK_SIZE);
	e->ref = 1;
	c->fills++;
	zlock_unlock(&c->lock);
}

void rcache_forget(struct zlfs_fs *fs, uint32_t first, uint32_t n)
{
	struct rcache *c = fs->rcache;

	if (!c)
		return;
	zlock_lock(&c->lock);
	for (uint32_t i = 0; i < c->n; i++)
		if (c->e[i].used && c->e[i].addr - first < n)
			unlink_ent(c, &c->e[i]);
	zlock_unlock(&c->lock);
}

void rcache_stats(struct zlfs_fs *fs, struct rcache_stats *st)
{
	struct rcache *c = fs->rcache;

	memset(st, 0, sizeof(*st));
	if (!c)
		return;
	zlock_lock(&c->lock);
	st->blocks = c->n;
	st->hits = c->hits;
	st->misses = c->misses;
	st->fills = c->fills;
	zlock_unlock(&c->lock);
}
