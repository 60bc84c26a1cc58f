/*
 * lock.h - ranked locks (lock.c). Every lock of the daemon has one job and a rank; the ranks
 * and what each lock guards are listed at the top of core.h. A thread may take a lock only
 * if its rank is above every rank it already holds; locks of one rank may be held together
 * only when the rank is keyed (inode locks, by inode number) and they are taken in rising key
 * order. Built with ZLFS_LOCK_CHECK (the test build), every acquisition is checked and a
 * violation aborts with both locks named; otherwise these are plain pthread calls.
 * Part of the node/log layer; used by every layer above it.
 */
#ifndef ZLFS_LOCK_H
#define ZLFS_LOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

enum lock_rank {
	LR_RENAME = 10,  /* rename_lock: directory moves and their loop check */
	LR_GC = 15,      /* gc_lock: one collector at a time */
	LR_CP = 20,      /* cp_lock: shared by changes, exclusive by a checkpoint */
	LR_IPARENT = 30, /* an inode lock taken for a directory's entries (keyed) */
	LR_ICHILD = 40,  /* an inode lock taken for the inode itself (keyed) */
	LR_LOG = 50,     /* one log's append position and open segment (keyed by log) */
	LR_NCACHE = 60,  /* node cache: hash, refs, dirty list, read-in-progress pages */
	LR_NPACK = 65,   /* inode packs' live slots (PACKED_INODES) */
	LR_NAT = 70,     /* NAT entries, nid allocation, orphans */
	LR_SEG = 80,     /* SIT, zone states, free space */
	LR_DCACHE = 90,  /* directory block cache and name indexes */
	LR_ICACHE = 91,  /* attribute cache */
	LR_ITABLE = 92,  /* the table of inode locks */
	LR_IREF = 93,    /* the kernel's lookup counts (FUSE layer) */
	LR_CKREQ = 94,   /* checkpoint requests to the checkpoint thread (FUSE layer) */
	LR_STATS = 95,   /* GC telemetry and phase log */
	LR_SLEEP = 96,   /* a background thread's sleep and stop flag */
	LR_RA = 97,      /* read-ahead windows */
	LR_TAIL = 98,    /* the table of partial blocks held in memory (a leaf) */
	LR_RCACHE = 99,  /* the read cache of main-area blocks by address (a leaf) */
	LR_WBUF = 100,   /* the write buffer's slots and queues */
	LR_DEV = 110,    /* inside a device backend */
};

struct zlock {
	pthread_mutex_t m;
	const char *name;
	uint8_t rank;
};

struct zrwlock {
	pthread_rwlock_t l;
	const char *name;
	uint8_t rank;
};

void zlock_init(struct zlock *l, enum lock_rank rank, const char *name);
void zlock_destroy(struct zlock *l);
/* WRITER_FIRST: a waiting writer holds off new readers (the checkpoint lock, so a checkpoint
 * is not starved by a stream of changes). Such a lock must never be taken twice for reading
 * by one thread: the checker refuses that too. */
void zrw_init(struct zrwlock *l, enum lock_rank rank, const char *name, int writer_first);
void zrw_destroy(struct zrwlock *l);

/* The checker (lock.c), called by the wrappers below when built with ZLFS_LOCK_CHECK. */
void lockcheck_acquire(const void *lock, const char *name, unsigned rank, uint64_t key);
void lockcheck_acquired_try(const void *lock, const char *name, unsigned rank, uint64_t key);
void lockcheck_release(const void *lock);
int lockcheck_held(const void *lock);

#ifdef ZLFS_LOCK_CHECK
#define LOCKCHECK_ACQ(l, r, k) lockcheck_acquire((l), (l)->name, (r), (k))
#define LOCKCHECK_TRY(l, r, k) lockcheck_acquired_try((l), (l)->name, (r), (k))
#define LOCKCHECK_REL(l) lockcheck_release(l)
#define LOCK_ASSERT_HELD(l) lock_assert_held((l), (l)->name, __func__)
void lock_assert_held(const void *lock, const char *name, const char *func);
#else
#define LOCKCHECK_ACQ(l, r, k) ((void)(l), (void)(r), (void)(k))
#define LOCKCHECK_TRY(l, r, k) ((void)(l), (void)(r), (void)(k))
#define LOCKCHECK_REL(l) ((void)(l))
#define LOCK_ASSERT_HELD(l) ((void)(l))
#endif

static inline void zlock_lock_at(struct zlock *l, uint64_t key)
{
	LOCKCHECK_ACQ(l, l->rank, key);
	pthread_mutex_lock(&l->m);
}
static inline void zlock_lock(struct zlock *l) { zlock_lock_at(l, 0); }
static inline int zlock_trylock(struct zlock *l)
{
	if (pthread_mutex_trylock(&l->m))
		return 0;
	LOCKCHECK_TRY(l, l->rank, 0);
	return 1;
}
static inline void zlock_unlock(struct zlock *l)
{
	LOCKCHECK_REL(l);
	pthread_mutex_unlock(&l->m);
}
/* Condition waits keep the lock's place in the held order: it is taken back on wake-up. */
static inline void zlock_wait(pthread_cond_t *c, struct zlock *l) { pthread_cond_wait(c, &l->m); }
static inline int zlock_timedwait(pthread_cond_t *c, struct zlock *l, const struct timespec *ts)
{
	return pthread_cond_timedwait(c, &l->m, ts);
}

/* Read and write locks; the _at forms give the rank and key of this acquisition (an inode
 * lock is a parent's or a child's by how it is taken, not by what it is). */
static inline void zrw_rdlock_at(struct zrwlock *l, unsigned rank, uint64_t key)
{
	LOCKCHECK_ACQ(l, rank, key);
	pthread_rwlock_rdlock(&l->l);
}
static inline void zrw_wrlock_at(struct zrwlock *l, unsigned rank, uint64_t key)
{
	LOCKCHECK_ACQ(l, rank, key);
	pthread_rwlock_wrlock(&l->l);
}
static inline int zrw_trywrlock_at(struct zrwlock *l, unsigned rank, uint64_t key)
{
	if (pthread_rwlock_trywrlock(&l->l))
		return 0;
	LOCKCHECK_TRY(l, rank, key);
	return 1;
}
static inline void zrw_rdlock(struct zrwlock *l) { zrw_rdlock_at(l, l->rank, 0); }
static inline void zrw_wrlock(struct zrwlock *l) { zrw_wrlock_at(l, l->rank, 0); }
static inline void zrw_unlock(struct zrwlock *l)
{
	LOCKCHECK_REL(l);
	pthread_rwlock_unlock(&l->l);
}

#endif
