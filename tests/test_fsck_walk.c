/*
 * test_fsck_walk.c - the check's walk order at a size where it matters (fs/verify_walk.c):
 * thousands of inodes, more than the node cache holds, read ahead in runs and checked from
 * the buffers they were read into, directories' blocks read ahead into the directory cache.
 * The counts must be exact, and damage in the middle of a run - an inode whose checksum
 * fails, a wrong link count, a damaged directory block - must be found as the one-by-one
 * walk found it, and repaired.
 */
#include "fsck_testutil.h"
#include "zdev_emu.h"

#include <stdio.h>
#include <string.h>

#define DIRS 30
#define PER_DIR 200
#define BIG_BLOCKS 1100 /* past the inode's pointers: a direct node */

static void flip(uint8_t *b, void *arg) { b[*(uint32_t *)arg] ^= 0x10; }

START_TEST(t_walk_many_files)
{
	struct zemu_create_opts o = {.size = 256 << 20, .zone_size = 2 << 20};
	uint32_t dirs[DIRS], victim = 0, miscount = 0, dir_hit, byte = 600, addr;
	unsigned kind;
	struct zlfs_fs *fs;
	char name[32], s[160];

	tu_fresh_fs("walk.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	fs = mount_rw(img, 0);
	for (int d = 0; d < DIRS; d++) {
		snprintf(name, sizeof(name), "d%02d", d);
		dirs[d] = mk(fs, ZLFS_ROOT_INO, name, 1, 0);
		for (int f = 0; f < PER_DIR; f++) {
			uint32_t ino;

			snprintf(name, sizeof(name), "f%04d", f);
			ino = mk(fs, dirs[d], name, 0, f % 10 ? 0 : 6144);
			if (d == DIRS / 2 && f == PER_DIR / 2)
				victim = ino;
			if (d == DIRS - 3 && f == 7)
				miscount = ino;
		}
		ck_assert_int_eq(files_sync(fs), 0); /* changed nodes are bounded, as the daemon's */
	}
	mk(fs, dirs[0], "big", 0, (size_t)BIG_BLOCKS * ZLFS_BLOCK_SIZE);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	snprintf(s, sizeof(s), "%u inodes, %u directory entries", 1 + DIRS + DIRS * PER_DIR + 1,
		 DIRS + DIRS * PER_DIR + 1);
	ck_assert_msg(said(s), "expected \"%s\"", s);

	/* damage in the middle: an inode, a link count, a directory block */
	set_nlink(miscount, 3);
	fs = mount_rw(img, 1);
	addr = nat_addr_of(fs, victim);
	kind = nat_kind_of(fs, victim); /* a pack: its other inodes are damaged with it */
	files_unmount(fs);
	edit_block(addr, kind, flip, &byte, 0);
	dir_hit = dirs[DIRS - 1];
	edit_block(data_block_of(dir_hit, 0), ZLFS_KIND_DENTRY, flip, &byte, 0);
	ck_assert_int_eq(fsck("-n", img), 4);
	snprintf(s, sizeof(s), "inode %u is damaged: bad checksum", victim);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	snprintf(s, sizeof(s), "inode %u has link count 3, expected 1", miscount);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	snprintf(s, sizeof(s), "directory %u block 0 is damaged", dir_hit);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

int fsck_walk_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_walk_many_files;
	return n;
}
