/*
 * lock.c - ranked locks and their order checker (see lock.h).
 *
 * Owns: initialising the daemon's locks, and, in builds with ZLFS_LOCK_CHECK, a per-thread
 * list of the locks held, checked at every blocking acquisition: the new lock's rank must be
 * above every held rank, or equal to the highest with a larger key; taking a lock already
 * held is refused too (a self-deadlock, or a read lock taken twice, which deadlocks once a
 * writer waits). A violation prints both locks and aborts, so the test suite fails loudly.
 * A trylock cannot deadlock and is recorded without the check.
 * May call: libc, pthreads.
 */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>

void zlock_init(struct zlock *l, enum lock_rank rank, const char *name)
{
	pthread_mutex_init(&l->m, NULL);
	l->rank = (uint8_t)rank;
	l->name = name;
}

void zlock_destroy(struct zlock *l) { pthread_mutex_destroy(&l->m); }

void zrw_init(struct zrwlock *l, enum lock_rank rank, const char *name, int writer_first)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	if (writer_first)
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&l->l, &a);
	pthread_rwlockattr_destroy(&a);
	l->rank = (uint8_t)rank;
	l->name = name;
}

void zrw_destroy(struct zrwlock *l) { pthread_rwlock_destroy(&l->l); }

#define HELD_MAX 24

struct held {
	const void *lock;
	const char *name;
	unsigned rank;
	uint64_t key;
};

static __thread struct held held[HELD_MAX];
static __thread int nheld;

static void lockcheck_fail(const char *what, const char *name, unsigned rank, uint64_t key,
			   const struct held *h)
{
	fprintf(stderr, "zlfs lock order violation: taking %s (rank %u, key %llu) %s %s "
		"(rank %u, key %llu)\n", name, rank, (unsigned long long)key, what,
		h ? h->name : "-", h ? h->rank : 0, h ? (unsigned long long)h->key : 0ULL);
	abort();
}

static void lockcheck_push(const void *lock, const char *name, unsigned rank, uint64_t key)
{
	if (nheld == HELD_MAX)
		lockcheck_fail("with too many locks held, the last being", name, rank, key,
			       &held[nheld - 1]);
	held[nheld++] = (struct held){lock, name, rank, key};
}

void lockcheck_acquire(const void *lock, const char *name, unsigned rank, uint64_t key)
{
	for (int i = 0; i < nheld; i++) {
		const struct held *h = &held[i];

		if (h->lock == lock)
			lockcheck_fail("while already holding it as", name, rank, key, h);
		if (h->rank > rank || (h->rank == rank && h->key >= key))
			lockcheck_fail("while holding", name, rank, key, h);
	}
	lockcheck_push(lock, name, rank, key);
}

void lockcheck_acquired_try(const void *lock, const char *name, unsigned rank, uint64_t key)
{
	lockcheck_push(lock, name, rank, key);
}

void lockcheck_release(const void *lock)
{
	for (int i = nheld - 1; i >= 0; i--) {
		if (held[i].lock != lock)
			continue;
		for (; i + 1 < nheld; i++)
			held[i] = held[i + 1];
		nheld--;
		return;
	}
	fprintf(stderr, "zlfs lock order violation: releasing a lock this thread does not hold\n");
	abort();
}

int lockcheck_held(const void *lock)
{
	for (int i = 0; i < nheld; i++)
		if (held[i].lock == lock)
			return 1;
	return 0;
}

void lock_assert_held(const void *lock, const char *name, const char *func)
{
	if (lockcheck_held(lock))
		return;
	fprintf(stderr, "zlfs lock violation: %s needs %s held\n", func, name);
	abort();
}
