/*
 * orphan.c - the orphan set: inodes with no name left that are still open, to be freed when
 * the kernel lets them go or, after a crash, at the next mount.
 *
 * Owns: the set (a bitmap over nids, made on first use) and its count. The checkpoint writes
 * it into the pack and loads it back (checkpoint.c); the file and FUSE layers add, drop and
 * walk it; fsck checks it.
 * May call: lock.h (nat_lock), nothing else: it sits under the checkpoint and mount.
 *
 * The set is under nat_lock: it is a set of nids, and it changes with them.
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>

static int orphans_alloc(struct zlfs_fs *fs)
{
	if (!fs->orphans)
		fs->orphans = calloc(fs->sb.max_nid / 8 + 1, 1);
	return fs->orphans ? 0 : -ENOMEM;
}

int orphan_add(struct zlfs_fs *fs, uint32_t ino)
{
	int ret;

	if (ino >= fs->sb.max_nid)
		return -EUCLEAN;
	zlock_lock(&fs->nat_lock);
	ret = orphans_alloc(fs);
	if (!ret && !(fs->orphans[ino / 8] & (1u << (ino % 8)))) {
		fs->orphans[ino / 8] |= (uint8_t)(1u << (ino % 8));
		fs->nr_orphans++;
		ATOMIC_SET(&fs->dirty, 1);
	}
	zlock_unlock(&fs->nat_lock);
	return ret;
}

void orphan_del(struct zlfs_fs *fs, uint32_t ino)
{
	zlock_lock(&fs->nat_lock);
	if (fs->orphans && ino < fs->sb.max_nid && (fs->orphans[ino / 8] & (1u << (ino % 8)))) {
		fs->orphans[ino / 8] &= (uint8_t)~(1u << (ino % 8));
		fs->nr_orphans--;
		ATOMIC_SET(&fs->dirty, 1);
	}
	zlock_unlock(&fs->nat_lock);
}

int orphan_is(struct zlfs_fs *fs, uint32_t ino)
{
	int ret;

	zlock_lock(&fs->nat_lock);
	ret = fs->orphans && ino < fs->sb.max_nid && (fs->orphans[ino / 8] & (1u << (ino % 8)));
	zlock_unlock(&fs->nat_lock);
	return ret;
}

uint32_t orphan_count(struct zlfs_fs *fs)
{
	uint32_t n;

	zlock_lock(&fs->nat_lock);
	n = fs->nr_orphans;
	zlock_unlock(&fs->nat_lock);
	return n;
}

uint32_t orphan_next(struct zlfs_fs *fs, uint32_t after)
{
	uint32_t i, found = 0;

	zlock_lock(&fs->nat_lock);
	for (i = after + 1; fs->orphans && fs->nr_orphans && i < fs->sb.max_nid; i++) {
		if (!fs->orphans[i / 8]) { /* skip empty bytes */
			i |= 7;
			continue;
		}
		if (fs->orphans[i / 8] & (1u << (i % 8))) {
			found = i;
			break;
		}
	}
	zlock_unlock(&fs->nat_lock);
	return found;
}
