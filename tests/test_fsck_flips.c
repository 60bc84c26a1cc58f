/*
 * test_fsck_flips.c - single bit flips, the checksum not resealed, in the newest superblock
 * record, the newest checkpoint pack (head and tail), a NAT block, an inode block and a
 * dentry block: each gets the class and exit code docs/fsck.md gives it, and what no mode may
 * repair is left as it was. Part of test_fsck (test_fsck.c).
 */
#include "fsck_testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- damaging one block ------------------------------------------------------------------
 * One bit of a block flipped in the image file (edit_block, fsck_testutil.c), the checksum not
 * resealed, and nothing else changed: not a write pointer, not a zone. */

static void flip_bit4(uint8_t *b, void *arg)
{
	b[*(const uint32_t *)arg] ^= 0x10;
}

/* Flip bit 4 of byte BYTE of device block ADDR, which must verify as a block of KIND. */
static void flip_block(uint32_t addr, unsigned kind, uint32_t byte)
{
	ck_assert(byte < ZLFS_BLOCK_SIZE);
	edit_block(addr, kind, flip_bit4, &byte, 0);
}

/* A bit flip in the newest superblock record. Its checksum fails, so it is no record at all:
 * the other zone's record, one update older, is the newest that verifies and is used - the
 * state a power cut during a superblock update leaves (docs/format.md), which is not damage:
 * -n is clean (0), writes nothing, and shows the older record (no scan time yet). A writing
 * run's superblock update goes to the zone not holding the record in use, the damaged one, so
 * -y (nothing to repair: 0) rewrites it, and both zones verify again. */
START_TEST(t_sb_newest_flipped)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sb, sb2;
	struct zlfs_fs *fs;
	struct zdev *dev;
	struct snap a, b;
	int newest, zone;

	populate("sbflip.img", NULL);
	ck_assert_int_eq(fsck("-p", img), 0); /* a newer record: sb_seq + 1 and the scan time */
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb, &newest), 0);
	zdev_close(dev);
	ck_assert_uint_gt(sb.last_fsck_time, 0);
	flip_block(sb.sb_zone[newest] * zlfs_zone_blocks(&sb), ZLFS_KIND_SUPER, 200);
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb2, &zone), 0);
	zdev_close(dev);
	ck_assert_int_eq(zone, !newest); /* the older record */
	ck_assert_uint_eq(sb2.sb_seq + 1, sb.sb_seq);
	ck_assert_uint_eq(sb2.last_fsck_time, 0);
	snapshot_raw(&a);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 0, 0);
	ck_assert(said("\"findings\": [\n  ],"));
	ck_assert(said("\"last_consistency_scan\": 0,"));
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(said("clean"));
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
	ck_assert_int_eq(fsck("-y --json", img), 0);
	ck_assert(said("\"scan_recorded\": true"));
	ck_assert(said("\"exit_code\": 0"));
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb2, &zone), 0);
	zdev_close(dev);
	ck_assert_int_eq(zone, newest); /* the damaged zone holds the new record */
	ck_assert_uint_eq(sb2.sb_seq, sb.sb_seq);
	ck_assert_uint_gt(sb2.last_fsck_time, 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 0);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	ck_assert_int_eq(files_unmount(fs), 0);
}
END_TEST

/* A bit flip in the newest checkpoint pack, its head or its tail: the pack does not count and
 * the previous one is used. What was written after it (here /f3, never fsync'ed) lies past
 * the previous checkpoint's log positions: a checkpoint mismatch, clean under -n (0); -y rolls
 * forward past the damaged pack (into the other checkpoint zone) and exits 1; -n is then
 * clean, everything the previous checkpoint made durable is intact, /f3 is gone. */
START_TEST(t_cp_newest_flipped)
{
	for (int tail = 0; tail < 2; tail++) {
		struct node_page *root;
		struct zlfs_fs *fs;
		struct snap a, b;
		uint64_t old_ver, new_ver;
		uint32_t addr, ino, first;
		char s[64];

		populate(tail ? "cptail.img" : "cphead.img", NULL);
		first = main_first();
		fs = mount_rw(img, 0);
		old_ver = fs->cp.version;
		mk(fs, ZLFS_ROOT_INO, "f3", 0, 3 * 4096);
		ck_assert_int_eq(files_unmount(fs), 0); /* the newest pack */
		fs = mount_rw(img, 1);
		new_ver = fs->cp.version;
		ck_assert_uint_gt(new_ver, old_ver);
		addr = fs->sb.cp_zone[fs->cp_pos.slot] * zlfs_zone_blocks(&fs->sb) +
		       fs->cp_pos.blk + (tail ? fs->cp.pack_blocks - 1 : 0);
		files_unmount(fs);
		flip_block(addr, tail ? ZLFS_KIND_CP_TAIL : ZLFS_KIND_CP_HEAD, 100);
		fs = mount_rw(img, 1);
		ck_assert_uint_eq(fs->cp.version, old_ver); /* the previous pack */
		files_unmount(fs);
		snapshot(&a);
		ck_assert_int_eq(fsck("-n --json", img), 0);
		json_counts(0, 1, 0);
		ck_assert(said("\"class\": \"checkpoint-mismatch\""));
		snprintf(s, sizeof(s), "\"checkpoint_version\": %llu,",
			 (unsigned long long)old_ver);
		ck_assert_msg(said(s), "expected %s", s);
		snapshot(&b);
		ck_assert_uint_eq(a.sum, b.sum);
		ck_assert_int_eq(fsck("-y --json", img), 1);
		ck_assert(json_valid());
		ck_assert(said("rolled forward"));
		ck_assert(said("\"exit_code\": 1"));
		snapshot(&b);
		no_zone_rewound(&a, &b, first);
		ck_assert_int_eq(fsck("-n --json", img), 0);
		json_counts(0, 0, 0);
		fs = mount_rw(img, 1);
		ck_assert_uint_gt(fs->cp.version, old_ver);
		ck_assert(same_data(fs, ino_f1, F1_SIZE));
		ck_assert(same_data(fs, ino_f2, F2_SIZE));
		ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
		ck_assert_int_eq(dir_lookup(fs, root, "f3", 2, &ino, NULL), -ENOENT);
		node_put(fs, root);
		files_unmount(fs);
	}
}
END_TEST

/* A bit flip in a NAT block of the meta log. The mount reads NAT pages on demand, so it
 * succeeds, and the first lookup of a node in that block fails as damaged and turns the
 * filesystem read-only. fsck reads every NAT and SIT block first: the checkpoint's metadata
 * cannot be used, so nothing can be checked or repaired (docs/fsck.md: an unusable
 * superblock/checkpoint is exit 4 in every mode, no repair attempted). It is a metadata error,
 * not a device error, and no mode writes anything. */
START_TEST(t_nat_flipped)
{
	static const char *const modes[] = {"-n --json", "-p", "-y --json", "-n"};
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct node_page *np;
	struct zlfs_fs *fs;
	struct snap a, b;
	uint32_t addr;

	populate("natflip.img", NULL);
	fs = mount_rw(img, 1);
	addr = fs->meta_addr[ino_f1 / ZLFS_NAT_PER_BLOCK];
	files_unmount(fs);
	flip_block(addr, ZLFS_KIND_NAT, 300);
	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, ino_f1, &np), -EUCLEAN);
	files_unmount(fs);
	snapshot_raw(&a);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(fsck(modes[i], img), 4);
		ck_assert(said("cannot be used"));
		ck_assert(!said("repaired") && !said("\"action\""));
		if (strstr(modes[i], "json")) {
			json_counts(1, 0, 0);
			ck_assert(said("\"class\": \"error\""));
			ck_assert(said("\"exit_code\": 4"));
		}
	}
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
}
END_TEST

/* A bit flip in a file's inode block. -n: the inode is damaged (4), its data blocks, valid in
 * the SIT, look unreferenced but are not freed while any node is damaged. -p may lose nothing,
 * so it leaves it (4). -y drops the inode as e2fsck clears one (1): its name, then its blocks
 * go in the rounds that follow; nothing else is lost, and a second -n is clean. */
START_TEST(t_inode_flipped)
{
	struct zlfs_fs *fs;
	struct snap a, b;
	uint32_t addr, first, ino;
	struct node_page *d;
	char s[80];

	populate_whole("inoflip.img"); /* a pack's flip: t_packed_pack_flipped */
	first = main_first();
	fs = mount_rw(img, 1);
	addr = nat_addr_of(fs, ino_f1);
	files_unmount(fs);
	flip_block(addr, ZLFS_KIND_INODE, 500);
	snprintf(s, sizeof(s), "inode %u is damaged: bad checksum", ino_f1);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	json_counts(-1, 0, 0);
	ck_assert(said("\"class\": \"error\""));
	ck_assert(said(s));
	ck_assert(said("is valid in the SIT but not referenced"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert(said(s));
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 1);
	ck_assert(json_valid());
	snprintf(s, sizeof(s), "inode %u: damaged, dropped", ino_f1);
	ck_assert(said(s));
	ck_assert(said("\"scan_recorded\": true"));
	snapshot(&b);
	no_zone_rewound(&a, &b, first);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	ck_assert_int_eq(dir_lookup(fs, d, "f1", 2, &ino, NULL), -ENOENT);
	node_put(fs, d);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* A bit flip in a directory's dentry block (/d, which alone names f1). -n: the block is
 * damaged, f1 is named by no directory (4). -y drops the block and f1 goes to
 * /lost+found/#INO with its data (1); a second -n is clean. */
START_TEST(t_dentry_flipped)
{
	struct zlfs_fs *fs;
	struct snap a, b;
	uint32_t addr, first;
	char s[80], name[48];

	populate("dentflip.img", NULL);
	first = main_first();
	addr = data_block_of(ino_d, 0);
	flip_block(addr, ZLFS_KIND_DENTRY, 1000);
	snprintf(s, sizeof(s), "directory %u block 0 is damaged", ino_d);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	json_counts(-1, 0, 0);
	ck_assert(said("\"class\": \"error\""));
	ck_assert(said(s));
	ck_assert(said("no directory names it"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert(said("run fsck.zlfs -y"));
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 1);
	ck_assert(json_valid());
	snprintf(name, sizeof(name), "directory %u: damaged block 0 dropped", ino_d);
	ck_assert(said(name));
	snprintf(name, sizeof(name), "inode %u moved to /lost+found/#%u", ino_f1, ino_f1);
	ck_assert(said(name));
	ck_assert(said("\"exit_code\": 1"));
	snapshot(&b);
	no_zone_rewound(&a, &b, first);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 0, 0);
	fs = mount_expect_lost_found(ino_f1, F1_SIZE);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

int fsck_flips_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_sb_newest_flipped;
	t[n++] = t_cp_newest_flipped;
	t[n++] = t_nat_flipped;
	t[n++] = t_inode_flipped;
	t[n++] = t_dentry_flipped;
	return n;
}
