/*
 * ilock.c - the inode locks: one read-write lock per inode in use, made on demand.
 *
 * Owns: the table of inode locks (inode number -> lock and the count of its holders and
 * waiters). A lock lives while anyone holds or waits for it, so the table is bounded by the
 * requests in flight, not by the inodes on the device; then it goes to a short free list,
 * sparing an allocation per request. Under ThreadSanitizer it is freed instead: a lock
 * object that stood for one inode must never stand for another, or TSan's lock-order graph
 * would be about memory rather than inodes (the order itself is checked by lock.h). The
 * table's own lock is held only to find or release an entry, never while waiting.
 * May call: lock.h. Called by the FUSE layer, the file layer and GC (core.h).
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>

#define ILOCK_BUCKETS 4096

struct ilock {
	struct ilock *next;   /* hash chain, or the free list */
	uint32_t ino;
	uint32_t users;       /* holders and waiters */
	struct zrwlock rw;
};

#if defined(__SANITIZE_THREAD__)
#define ILOCK_FREE_MAX 0
#else
#define ILOCK_FREE_MAX 64
#endif

struct ilock_table {
	struct zlock lock;
	struct ilock *bucket[ILOCK_BUCKETS];
	struct ilock *free;
	uint32_t nfree;
};

int ilock_init(struct zlfs_fs *fs)
{
	fs->ilocks = calloc(1, sizeof(*fs->ilocks));
	if (!fs->ilocks)
		return -ENOMEM;
	zlock_init(&fs->ilocks->lock, LR_ITABLE, "ilock_table");
	return 0;
}

static void ilock_free_chain(struct ilock *l)
{
	while (l) {
		struct ilock *next = l->next;

		zrw_destroy(&l->rw);
		free(l);
		l = next;
	}
}

void ilock_destroy(struct zlfs_fs *fs)
{
	struct ilock_table *t = fs->ilocks;

	if (!t)
		return;
	for (uint32_t b = 0; b < ILOCK_BUCKETS; b++)
		ilock_free_chain(t->bucket[b]);
	ilock_free_chain(t->free);
	zlock_destroy(&t->lock);
	free(t);
	fs->ilocks = NULL;
}

/* The entry of INO with one more user, made if needed; NULL when out of memory. */
static struct ilock *ilock_ref(struct ilock_table *t, uint32_t ino)
{
	struct ilock **pp = &t->bucket[ino % ILOCK_BUCKETS], *l;

	zlock_lock(&t->lock);
	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	l = *pp;
	if (!l && t->free) {
		l = t->free;
		t->free = l->next;
		t->nfree--;
	} else if (!l && (l = calloc(1, sizeof(*l)))) {
		/* reader-first (0): a read that waits for another's read-ahead holds the lock
		 * shared, and that other must get it shared again behind a queued writer */
		zrw_init(&l->rw, LR_ICHILD, "inode", 0);
	}
	if (l && !*pp) {
		l->ino = ino;
		l->users = 0;
		l->next = NULL;
		*pp = l;
	}
	if (l)
		l->users++;
	zlock_unlock(&t->lock);
	return l;
}

struct ilock *ilock_take(struct zlfs_fs *fs, uint32_t ino, int excl, unsigned rank, uint64_t key)
{
	struct ilock *l = ilock_ref(fs->ilocks, ino);

	if (!l)
		return NULL;
	if (excl)
		zrw_wrlock_at(&l->rw, rank, key);
	else
		zrw_rdlock_at(&l->rw, rank, key);
	return l;
}

void ilock_drop(struct zlfs_fs *fs, struct ilock *l)
{
	struct ilock_table *t = fs->ilocks;
	struct ilock **pp;

	if (!l)
		return;
	zrw_unlock(&l->rw);
	zlock_lock(&t->lock);
	if (--l->users == 0) {
		for (pp = &t->bucket[l->ino % ILOCK_BUCKETS]; *pp != l; pp = &(*pp)->next)
			;
		*pp = l->next;
		if ((int)t->nfree < ILOCK_FREE_MAX) {
			l->next = t->free;
			t->free = l;
			t->nfree++;
			l = NULL;
		}
	} else {
		l = NULL;
	}
	zlock_unlock(&t->lock);
	if (l) {
		zrw_destroy(&l->rw);
		free(l);
	}
}
