/*
 * test_hostile_meta.c - crafted images of the black-box fuzzer's findings whose damage lies
 * between two pieces of metadata that each check on their own (tests/fuzz-findings):
 *
 * - a segment summary entry naming another slot than the tree's pointer (finding 20): fsck
 *   reports it, -p moves the block (the new copy's entry is right), and the daemon's GC, for
 *   which the summary is a hint and the owner's pointer the truth, moves it without turning
 *   the filesystem read-only.
 */
#include "fsck_testutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define BIG_SIZE (3u << 20) /* more than a zone: its first zone is sealed with its summaries */

struct set16 {
	size_t off;
	uint16_t val;
};

static void put16(uint8_t *b, void *arg)
{
	const struct set16 *s = arg;
	le16 v = le16_put(s->val);

	memcpy(b + s->off, &v, 2);
}

/* A fresh image with /big, of which a block lies in a sealed segment (none of the logs
 * writes its zone, its summary block is written): that block's address; its inode in *INO,
 * its zone in *ZONE. */
static uint32_t big_sealed(const char *name, uint32_t *ino, uint32_t *zone)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t addr = 0, zb, seg_blocks, nid;
	uint16_t ofs;
	uint64_t idx;

	populate(name, NULL);
	fs = mount_rw(img, 0);
	*ino = mk(fs, ZLFS_ROOT_INO, "big", 0, BIG_SIZE);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	zb = zlfs_zone_blocks(&fs->sb);
	seg_blocks = fs->sb.seg_blocks;
	ck_assert_int_eq(inode_get(fs, *ino, &np), 0);
	for (idx = 0; idx < BIG_SIZE / ZLFS_BLOCK_SIZE; idx++) {
		int open = 0;

		ck_assert_int_eq(data_addr(fs, np, idx, &addr), 0);
		for (uint32_t t = 0; t < ZLFS_NR_LOG_TYPES; t++)
			open |= fs->logs[t].zone == addr / zb;
		if (!open && (addr % zb) % seg_blocks < seg_blocks / 2)
			break;
	}
	ck_assert_uint_lt(idx, BIG_SIZE / ZLFS_BLOCK_SIZE);
	ck_assert(!remap_find(fs, addr, &nid, &ofs));
	node_put(fs, np);
	files_unmount(fs);
	*zone = addr / zb;
	return addr;
}

static uint16_t sum_ofs_read;

static void get16(uint8_t *b, void *arg)
{
	const struct set16 *s = arg;
	le16 v;

	memcpy(&v, b + s->off, 2);
	sum_ofs_read = le16_get(v);
}

/* The slot ADDR's summary entry names moved on by 3, resealed: only a comparison with the
 * tree can tell. */
static void misname(uint32_t addr)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t zb = zlfs_zone_blocks(&fs->sb), seg_blocks = fs->sb.seg_blocks;
	uint32_t b = (addr % zb) % seg_blocks, sum = addr - b + seg_blocks - 1;
	struct set16 s = {offsetof(struct zlfs_summary, ofs) + 2u * b, 0};

	files_unmount(fs);
	edit_block(sum, ZLFS_KIND_SUMMARY, get16, &s, 0);
	s.val = (uint16_t)(sum_ofs_read + 3);
	edit_block(sum, ZLFS_KIND_SUMMARY, put16, &s, 1);
}

/* fsck -n names the block, what the summary says and what the tree says; -p (nothing is
 * lost: the block moves) repairs it and a second -n is clean; every file is whole. */
START_TEST(t_summary_ofs_fsck)
{
	struct zlfs_fs *fs;
	uint32_t ino, zone, addr = big_sealed("sumofs.img", &ino, &zone);
	char why[160];

	misname(addr);
	snprintf(why, sizeof(why), "data block %u: its segment summary names node", addr);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert_msg(said(why) || said_err(why), "fsck -n did not name block %u", addr);
	ck_assert(said("but the tree gives it to node") || said_err("but the tree gives it"));
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino, BIG_SIZE));
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* The finding itself: GC of the zone meets the entry, moves the block as the tree's slot's
 * (the filesystem stays writable), the zone empties, and fsck then finds nothing: the old
 * entry describes a dead block. */
START_TEST(t_summary_ofs_gc)
{
	struct zlfs_fs *fs;
	uint32_t ino, zone, addr = big_sealed("sumofsgc.img", &ino, &zone);

	misname(addr);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(gc_migrate_zone(fs, zone), 0);
	ck_assert(!fs->readonly);
	ck_assert(!seg_is_valid(fs, addr));
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_FREE);
	ck_assert(same_data(fs, ino, BIG_SIZE));
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino, BIG_SIZE));
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_meta");
	TCase *tc = tcase_create("hostile_meta");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_summary_ofs_fsck);
	tcase_add_test(tc, t_summary_ofs_gc);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
