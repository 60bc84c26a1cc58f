/*
 * test_gc_race.c - garbage collection against what changes a block's owner while GC waits for
 * the owner's lock, in the library (no daemon), so the interleaving is chosen, not hoped for.
 *
 * GC reads a victim's summary, which names each block's node as it was written, and locks
 * that node's file before it moves the block. A collapse (fallocate COLLAPSE_RANGE) that runs
 * meanwhile moves the block into another node of the same file (remap.c records it) and, as
 * the file shrank, frees the node the summary names. GC then finds that node gone while the
 * block lives: before 2026-12-06 it called that damaged metadata and switched the filesystem
 * to read-only (test_fsx met it about once in 20 runs with background GC). Here the test
 * holds the file's lock, lets GC block on it, collapses, and lets go: GC must move the block
 * to its new owner, the file must read back as collapsed, and fsck must be clean.
 */
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS ZLFS_BLOCK_SIZE
#define NBLK 1100u    /* past the inode's 977 slots: the last 123 in its first direct node */
#define CUT 200u      /* blocks collapsed at the start: the file then fits in its inode */

static char img[512], mnt[512], bin[512];

static uint8_t pat(size_t i) { return (uint8_t)(i * 7 + i / BS * 13 + 1); }

struct gc_run {
	struct zlfs_fs *fs;
	uint32_t zone;
	int ret;
};

static void *gc_thread(void *arg)
{
	struct gc_run *r = arg;

	r->ret = gc_migrate_zone(r->fs, r->zone);
	return NULL;
}

static uint32_t new_file(struct zlfs_fs *fs, const uint8_t *data)
{
	struct node_page *root, *np;
	uint32_t ino;

	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFREG | 0644, 0, 0, 0, ZLFS_ROOT_INO, &np), 0);
	ino = np->nid;
	ck_assert_int_eq(dir_add(fs, root, "f", 1, ino, DT_REG), 0);
	ck_assert_int_eq(data_write(fs, np, data, (size_t)NBLK * BS, 0), (int)(NBLK * BS));
	/* the first 977 blocks again, elsewhere: in the zone of block 977, the first valid
	 * block GC meets is then one the direct node owns */
	ck_assert_int_eq(data_write(fs, np, data, (size_t)ZLFS_INODE_ADDRS * BS, 0),
			 (int)(ZLFS_INODE_ADDRS * BS));
	node_put(fs, np);
	node_put(fs, root);
	return ino;
}

START_TEST(t_collapse_while_gc_waits)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};
	struct zlfs_mount_opts mo = {0};
	uint8_t *want = malloc((size_t)NBLK * BS), *got = malloc((size_t)NBLK * BS);
	struct gc_run r = {0};
	struct node_page *np;
	struct zlfs_fs *fs;
	struct ilock *il;
	pthread_t t;
	uint32_t ino, addr;

	for (size_t i = 0; i < (size_t)NBLK * BS; i++)
		want[i] = pat(i);
	tu_fresh_fs("gcrace.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	ino = new_file(fs, want);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, ZLFS_INODE_ADDRS, &addr), 0);
	node_put(fs, np);
	r.fs = fs;
	r.zone = addr / zlfs_zone_blocks(&fs->sb);
	ck_assert_int_eq(seg_zone_state(fs, r.zone), ZONE_USED);

	/* as a FUSE request holds it: cp_lock shared, then the file's lock */
	zrw_rdlock(&fs->cp_lock);
	il = ilock_take(fs, ino, 1, LR_ICHILD, ino);
	ck_assert_ptr_nonnull(il);
	ck_assert_int_eq(pthread_create(&t, NULL, gc_thread, &r), 0);
	usleep(300 * 1000); /* GC reads the summary and waits for the lock */
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	ck_assert_int_eq(falloc_collapse(fs, np, 0, (uint64_t)CUT * BS), 0);
	node_put(fs, np);
	ilock_drop(fs, il);
	zrw_unlock(&fs->cp_lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(r.ret == 0, "GC beside the collapse: %s", strerror(-r.ret));
	ck_assert_int_eq(fs->readonly, 0);
	ck_assert_int_gt(ATOMIC_GET(&fs->gc_bytes), 0);

	memmove(want, want + (size_t)CUT * BS, (size_t)(NBLK - CUT) * BS);
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	ck_assert_int_eq(data_read(fs, np, got, (size_t)NBLK * BS, 0), (int)((NBLK - CUT) * BS));
	node_put(fs, np);
	ck_assert(memcmp(want, got, (size_t)(NBLK - CUT) * BS) == 0);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
	free(want);
	free(got);
}
END_TEST

/* ---- the reserve kept for GC in a log users share ---------------------------------------- */

#define CHUNK (64u << 10)

/* Overwrite file NP of SIZE bytes CHUNK by CHUNK from *POS on, round and round, until the
 * filesystem has no room for user data: the bytes written. */
static uint64_t overwrite(struct zlfs_fs *fs, struct node_page *np, uint64_t *pos, uint64_t size,
			  const uint8_t *b)
{
	uint64_t done = 0;
	int n;

	while ((n = data_write(fs, np, b, CHUNK, *pos)) > 0) {
		*pos = (*pos + CHUNK) % size;
		done += (uint64_t)n;
	}
	ck_assert_msg(n == -ENOSPC, "write: %s", strerror(-n));
	return done;
}

static struct node_page *new_named(struct zlfs_fs *fs, const char *name)
{
	struct node_page *root, *np;

	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFREG | 0644, 0, 0, 0, ZLFS_ROOT_INO, &np), 0);
	ck_assert_int_eq(dir_add(fs, root, name, strlen(name), np->nid, DT_REG), 0);
	node_put(fs, root);
	return np;
}

/* With 4 logs, data GC moves goes to the warm log that user data appends to. Once only the
 * reserve is left and GC takes a zone of it for that log, user data must not fill that zone:
 * GC would take the next one for the same victim, and the next, until no zone is left for
 * the checkpoint that frees the victims. (The churn of tools/bench-compress --quick wedged
 * so about once in 30 rounds before 2026-12-07: 1 free zone, GC needing 2, thousands of
 * dead blocks, every write ENOSPC.) Two files are written interleaved until no room is
 * left, one is cut to nothing (every zone half dead), and then users overwrite the other
 * while they can and GC collects, in turns: GC must always find the zones it needs, and
 * user data must find room again. */
START_TEST(t_users_leave_gc_its_reserve_zone)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};
	/* noinline_dentry: the root's dentry block opens the hot data log's zone, as on the
	 * layout this was measured on; inline, that log never opens and a zone stays held for it,
	 * so the device would never fill down to the reserve */
	struct zlfs_mount_opts mo = {.noinline_dentry = 1};
	uint8_t *b = malloc(CHUNK);
	uint64_t size = 0, pos = 0, written = 0;
	struct node_page *a, *c;
	struct zlfs_fs *fs;
	uint32_t zone;
	int turn, ret;

	memset(b, 0x5a, CHUNK);
	tu_fresh_fs("gcreserve.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(tu_sh("%s -q -f --logs 4 %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img),
			 0);
	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(fs->log_of[ZLFS_LOG_COLD_DATA], fs->log_of[ZLFS_LOG_WARM_DATA]);
	a = new_named(fs, "a");
	c = new_named(fs, "c");
	while (data_write(fs, a, b, CHUNK, size) > 0 && data_write(fs, c, b, CHUNK, size) > 0)
		size += CHUNK;
	ck_assert_int_eq(data_truncate_blocks(fs, c, 0), 0);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_uint_le(seg_free_zones(fs), seg_reserve(fs));

	/* GC takes a zone of the reserve for the warm log: users may not write into it */
	zlock_lock(&fs->seg_lock);
	zone = fs->logs[fs->log_of[ZLFS_LOG_WARM_DATA]].zone;
	zlock_unlock(&fs->seg_lock);
	ck_assert_int_ge(gc_reclaim(fs, seg_reserve(fs) + 1, GC_PICK_EMERGENCY, 1), 1);
	zlock_lock(&fs->seg_lock);
	ck_assert_uint_ne(fs->logs[fs->log_of[ZLFS_LOG_WARM_DATA]].zone, zone);
	ck_assert(fs->logs[fs->log_of[ZLFS_LOG_WARM_DATA]].reserve_paid);
	zlock_unlock(&fs->seg_lock);
	ck_assert_uint_lt(seg_free_zones(fs), seg_reserve(fs));
	ck_assert_msg(overwrite(fs, a, &pos, size, b) == 0,
		      "user data went into the zone GC took out of the reserve");

	for (turn = 0; turn < 40; turn++) {
		ret = gc_reclaim(fs, seg_reserve(fs) + 3, GC_PICK_EMERGENCY, 4);
		ck_assert_msg(ret >= 0, "turn %d: GC: %s with %u free zones and %llu blocks to "
			      "reclaim", turn, strerror(-ret), seg_free_zones(fs),
			      (unsigned long long)gc_reclaimable_blocks(fs));
		ck_assert_int_eq(files_sync(fs), 0);
		written += overwrite(fs, a, &pos, size, b);
	}
	ck_assert_uint_gt(written, 2 * size); /* GC kept giving users room */
	for (turn = 0; turn < 10 && seg_free_zones(fs) <= seg_reserve(fs); turn++) {
		ck_assert_int_ge(gc_reclaim(fs, seg_reserve(fs) + 3, GC_PICK_EMERGENCY, 4), 0);
		ck_assert_int_eq(files_sync(fs), 0);
	}
	ck_assert_msg(seg_free_zones(fs) > seg_reserve(fs), "%u zones free after GC, the reserve "
		      "is %u", seg_free_zones(fs), seg_reserve(fs));
	ck_assert_int_gt(overwrite(fs, a, &pos, size, b), 0);
	node_put(fs, a);
	node_put(fs, c);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(fs->readonly, 0);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img),
			 0);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gc_race");
	TCase *tc = tcase_create("gc_race");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_collapse_while_gc_waits);
	tcase_add_test(tc, t_users_leave_gc_its_reserve_zone);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
