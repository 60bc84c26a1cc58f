/*
 * request.c - what every FUSE request of the daemon shares: entering and leaving the
 * filesystem, retrying after ENOSPC, the kernel's lookup counts, and the replies built from
 * an inode.
 *
 * Owns: the per-inode lookup counts (struct iref) and the orphans they keep alive, taking
 * and leaving the filesystem around each request (with the foreground GC and the checkpoints
 * due on the way out), and the small helpers of every operation (names, entries, errors).
 * The operations themselves (fuse_ops.c, fuse_names.c, fuse_files.c, remount.c) call down
 * to this file; it calls none of them.
 * May call: fuse_int.h, background.h, files.h, core.h (checkpoints, free space), log.h.
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "files.h"
#include "log.h"
#include "background.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a writer out of room waits for frees under way (forgets_wait). */
#define FORGET_WAIT_MS 10000
/* The pause before a writer is told ENOSPC for good (op_retry). */
#define ENOSPC_PAUSE_US 20000
/* Rounds of foreground GC for one writer out of room (gc_foreground). */
#define GC_FG_ROUNDS 8

/* ---- lookup counts and orphans -------------------------------------------------------------
 * The counts are under iref_lock, a leaf: it is held for the table only, never while freeing.
 * Freeing an orphan is decided under its inode's lock (exclusive), which both unlink and
 * forget take, so one of them always sees the other's part done. */

static struct iref **iref_slot(struct zfuse *z, uint32_t ino)
{
	struct iref **pp = &z->irefs[ino % z->nbuckets];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

void iref_get(struct zfuse *z, uint32_t ino)
{
	struct iref **pp;

	zlock_lock(&z->iref_lock);
	pp = iref_slot(z, ino);
	if (!*pp && (*pp = calloc(1, sizeof(**pp))))
		(*pp)->ino = ino;
	if (*pp) /* without an entry the inode is freed at unlink time: never leaked */
		(*pp)->nlookup++;
	zlock_unlock(&z->iref_lock);
}

/* The kernel invalidates its page cache before an O_DIRECT write but, for an asynchronous one
 * (AIO, io_uring), not after: a buffered reader that fetched the old bytes while the write
 * was in flight leaves them cached, and an open that keeps the cache keeps them (issue 35,
 * item 1). So once a file has had a direct write, every open of it drops the cache, as the
 * passthrough's opens always do: a mark cleared by the first open lost races against
 * readers opening meanwhile (1-3 stale reads in 500 writes). The mark lives with the lookup
 * count because the pages live with the kernel's inode: once it forgets it, both go. */
void iref_direct_written(struct zfuse *z, uint32_t ino)
{
	struct iref *r;

	zlock_lock(&z->iref_lock);
	r = *iref_slot(z, ino);
	if (r)
		r->direct_written = 1;
	zlock_unlock(&z->iref_lock);
}

int iref_direct_seen(struct zfuse *z, uint32_t ino)
{
	struct iref *r;
	int was = 0;

	zlock_lock(&z->iref_lock);
	r = *iref_slot(z, ino);
	if (r)
		was = r->direct_written;
	zlock_unlock(&z->iref_lock);
	return was;
}

static int iref_held(struct zfuse *z, uint32_t ino)
{
	int held;

	zlock_lock(&z->iref_lock);
	held = *iref_slot(z, ino) != NULL;
	zlock_unlock(&z->iref_lock);
	return held;
}

/* Drop N of INO's lookups: 1 when that was the last of them. */
static int iref_drop(struct zfuse *z, uint32_t ino, uint64_t n)
{
	struct iref **pp, *r;
	int last = 0;

	zlock_lock(&z->iref_lock);
	pp = iref_slot(z, ino);
	r = *pp;
	if (r) {
		r->nlookup = r->nlookup > n ? r->nlookup - n : 0;
		if (!r->nlookup) {
			*pp = r->next;
			free(r);
			last = 1;
		}
	}
	zlock_unlock(&z->iref_lock);
	return last;
}

void iref_undo(struct zfuse *z, uint32_t ino) { iref_drop(z, ino, 1); }

/* The last name of INO is gone (INO locked exclusively): free it now, or when the kernel
 * forgets it. The name is already removed, so a full orphan list must not fail the call:
 * the inode is still freed at forget, only a crash before that would leak it (until fsck). */
int inode_unlinked(struct zfuse *z, uint32_t ino)
{
	int ret = orphan_add(z->fs, ino);

	if (ret)
		zlog_warn("inode %u unlinked while open cannot be recorded (%s): a crash before "
			  "its last close leaks it until fsck", ino, strerror(-ret));
	if (iref_held(z, ino)) /* a forget from here on finds the orphan mark */
		return 0;
	orphan_del(z->fs, ino);
	return inode_free(z->fs, ino);
}

/* The kernel forgot N lookups of INO: an orphan (an inode whose last name went while the
 * kernel held it) can go once the last one is gone. No inode read for the others. */
void iref_forget(struct zfuse *z, uint32_t ino, uint64_t n)
{
	struct zlfs_fs *fs = z->fs;
	struct ilock *il;

	ATOMIC_ADD(&z->forgets_running, 1);
	if (iref_drop(z, ino, n) && orphan_is(fs, ino)) {
		op_enter(z, 1);
		il = ilock_take(fs, ino, 1, LR_ICHILD, ino);
		if (il && orphan_is(fs, ino) && !iref_held(z, ino)) {
			orphan_del(fs, ino);
			inode_free(fs, ino);
		}
		ilock_drop(fs, il);
		op_leave(z, 1);
	}
	ATOMIC_ADD(&z->forgets_running, -1);
}

/* The kernel sends the forget of a file deleted while it held it as soon as the unlink
 * returns, but another worker thread frees it: a writer that refills the room at once must
 * not be told ENOSPC while that free, the room it needs, is still under way. */
static void forgets_wait(struct zfuse *z)
{
	for (int ms = 0; ATOMIC_GET(&z->forgets_running) > 0 && ms < FORGET_WAIT_MS; ms++)
		usleep(1000);
}

/* ---- entering and leaving ------------------------------------------------------------------ */

/* Users are counted in and out so background GC can tell idle time. */
void op_enter(struct zfuse *z, int change)
{
	ATOMIC_ADD(&z->fs->users_active, 1);
	if (change)
		zrw_rdlock(&z->fs->cp_lock);
}

/* One round of gc_foreground: collect, then checkpoint so emptied zones become free. */
static int gc_foreground_round(struct zlfs_fs *fs)
{
	int ret = gc_reclaim(fs, gc_fg_level(fs) + 2, GC_PICK_EMERGENCY, 4), moved = ret > 0;

	/* Emptied zones (by GC or by deletes) only become free with a checkpoint, also when
	 * nothing is left to collect (-ENOENT) or too few zones are free to finish a victim
	 * (-ENOSPC): wholly dead zones are no victims, they are room. */
	if (ret > 0 || ((ret >= 0 || ret == -ENOENT || ret == -ENOSPC) && seg_prefree_zones(fs)))
		ret = files_sync(fs);
	return ret < 0 ? ret : moved;
}

/* Free zones down to the foreground level: empty the emptiest zones now, and checkpoint so
 * they become free. One collector at a time: others wait for it, then find the room. On a
 * device full of mostly valid zones a round can move victims into fresh zones of the GC logs
 * and free no more than it took: the next round fills those zones, so rounds go on while they
 * move something and users still have no room. */
int gc_foreground(struct zlfs_fs *fs)
{
	int ret, round = 0;

	zlock_lock(&fs->gc_lock);
	do
		ret = gc_foreground_round(fs);
	while (ret > 0 && ++round < GC_FG_ROUNDS && !seg_room_for_user(fs));
	zlock_unlock(&fs->gc_lock);
	return ret == -ENOENT ? -ENOSPC : ret < 0 ? ret : 0;
}

/* Ask the checkpoint thread for a checkpoint; write it here when the thread does not run
 * or when changes have run far ahead of it (the writer then waits, as it should). */
static void ckpt_request(struct zfuse *z)
{
	if (!z->cp_running || ckpt_overdue(z->fs)) {
		files_sync(z->fs); /* on failure the FS is read-only and says why */
		return;
	}
	zlock_lock(&z->cp_lock);
	z->cp_wanted = 1;
	pthread_cond_signal(&z->cp_cond);
	zlock_unlock(&z->cp_lock);
}

/* At the foreground level a request that follows a write pays an installment of GC work
 * before it returns (gc_fg_budget blocks of the victim), and the one that empties the victim
 * checkpoints so it becomes free: writers wait for a few MiB of moves each rather than one of
 * them for whole zones. While another collector runs, there is nothing to pay. A request that
 * meets ENOSPC still runs gc_foreground (op_retry). */
static void gc_installment(struct zlfs_fs *fs)
{
	uint64_t zones0, user = ATOMIC_GET(&fs->user_bytes);
	uint32_t left = gc_fg_budget(fs);
	int ret;

	if (!zlock_trylock(&fs->gc_lock))
		return;
	if (user == fs->gc.paid_user_bytes) { /* nothing written since the last installment */
		zlock_unlock(&fs->gc_lock);
		return;
	}
	fs->gc.paid_user_bytes = user;
	zones0 = ATOMIC_GET(&fs->gc_zones);
	for (;;) {
		ret = gc_step(fs, GC_PICK_FOREGROUND, left);
		if (ret <= 0 || (uint32_t)ret >= left || ATOMIC_GET(&fs->gc_zones) > zones0)
			break;
		left -= (uint32_t)ret;
	}
	if (ATOMIC_GET(&fs->gc_zones) > zones0)
		files_sync(fs); /* the emptied victim becomes free */
	zlock_unlock(&fs->gc_lock);
}

void op_leave(struct zfuse *z, int change)
{
	struct zlfs_fs *fs = z->fs;

	if (change)
		zrw_unlock(&fs->cp_lock);
	gc_phase_update(fs); /* transitions are logged when they happen, not when GC wakes */
	if (change && gc_urgent(fs))
		gc_installment(fs);
	if (change && ckpt_due(fs))
		ckpt_request(z);
	node_shrink(fs);
	ATOMIC_SET(&fs->last_user_ns, mono_ns());
	ATOMIC_ADD(&fs->users_active, -1);
}

/* Why a write was told ENOSPC (-o verbose): room that GC could not reach is a bug to find. */
static void enospc_report(struct zfuse *z, int gc_ret)
{
	struct zlfs_fs *fs = z->fs;

	/* Orphans hold the blocks of files deleted while the kernel still knew them: many of
	 * them here means the room is waiting on forgets, not on GC. */
	zlog_debug("ENOSPC: %u free zones (GC's count %u, reserve %u, prefree %u), %llu free "
		   "blocks, %llu reclaimable by GC, %llu reserved by fallocate, %u orphans, "
		   "%d forgets running, last GC pass: %s", ATOMIC_GET(&fs->free_zones),
		   gc_free_zones(fs), seg_reserve(fs), seg_prefree_zones(fs),
		   (unsigned long long)gc_free_blocks(fs),
		   (unsigned long long)gc_reclaimable_blocks(fs),
		   (unsigned long long)seg_prealloc(fs), orphan_count(fs),
		   ATOMIC_GET(&z->forgets_running), strerror(gc_ret < 0 ? -gc_ret : 0));
}

int op_retry(struct zfuse *z, int ret)
{
	int gc_ret = 0;

	/* The room may be in dead blocks, or in a file being freed. A forget the kernel has
	 * sent may not have reached a worker yet: one pause before ENOSPC is final, as ext4
	 * waits for a journal commit before it says so. */
	for (int pass = 0; ret == -ENOSPC && pass < 2; pass++) {
		if (pass)
			usleep(ENOSPC_PAUSE_US);
		forgets_wait(z);
		gc_ret = gc_foreground(z->fs);
		if (gc_ret >= 0)
			return 1;
		/* Nothing left to collect, but another writer's collection or a checkpoint may
		 * have made the room this request found missing: try it again, as the callers
		 * bound. */
		if (seg_room_for_user(z->fs))
			return 1;
	}
	if (ret == -ENOSPC) {
		enospc_report(z, gc_ret);
		return 0;
	}
	if (ret == -EAGAIN) /* nids freed since the last checkpoint come back with the next */
		return !files_sync(z->fs);
	return 0;
}

int reply_err(fuse_req_t req, int err) { return fuse_reply_err(req, err < 0 ? -err : err); }

int check_name(const char *name)
{
	return strlen(name) > ZLFS_NAME_MAX ? -ENAMETOOLONG : 0;
}

int writable(struct zfuse *z) { return ATOMIC_GET(&z->fs->readonly) ? -EROFS : 0; }

void fill_entry(struct zfuse *z, struct node_page *np, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	inode_fill_stat(z->fs, np, &e->attr);
	e->attr.st_ino = kino(np->nid);
	e->ino = kino(np->nid);
	e->generation = le32_get(inode_of(np)->generation);
	e->attr_timeout = z->opts.attr_timeout;
	e->entry_timeout = z->opts.entry_timeout;
	iref_get(z, np->nid);
}

/* An entry for INO from its cached attributes (no node read when they are cached). */
int fill_entry_ino(struct zfuse *z, uint32_t ino, struct fuse_entry_param *e)
{
	uint32_t gen;
	int ret;

	memset(e, 0, sizeof(*e));
	ret = inode_stat(z->fs, ino, &e->attr, &gen);
	if (ret)
		return ret;
	e->attr.st_ino = kino(ino);
	e->ino = kino(ino);
	e->generation = gen;
	e->attr_timeout = z->opts.attr_timeout;
	e->entry_timeout = z->opts.entry_timeout;
	iref_get(z, ino);
	return 0;
}

int get_dir(struct zfuse *z, fuse_ino_t ino, struct node_page **np)
{
	int ret = inode_get(z->fs, fino(ino), np);

	if (!ret && !S_ISDIR(le32_get(inode_of(*np)->mode))) {
		node_put(z->fs, *np);
		return -ENOTDIR;
	}
	return ret;
}
