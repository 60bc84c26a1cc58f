/*
 * test_fsck_modes.c - fsck.zlfs's modes and exit codes on a clean image, on one that is not
 * zlfs, and the repairs: link counts (-p), /lost+found and dangling entries (-y), a leaked
 * block (-p); a power cut at every step of a repair; the scan time a clean writing run
 * records, shown by zlfs-ctl stats. Part of test_fsck (test_fsck.c).
 */
#include "fsck_testutil.h"

#include "zdev_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(t_clean_and_usage)
{
	struct snap a, b;
	char missing[600];

	populate("clean.img", NULL);
	snapshot(&a);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(json_valid());
	ck_assert(said("\"scan_recorded\": false"));
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum); /* -n wrote nothing */
	ck_assert_int_eq(sb_scan_time(), 0);
	ck_assert_int_eq(fsck("-n -C", img), 0);
	ck_assert(said_err("pass 5/5 (usage): 100%"));
	ck_assert_int_eq(fsck("-n -y", img), 16);
	ck_assert_int_eq(tu_sh("%s >/dev/null 2>&1", fsck_bin()), 16);
	ck_assert_int_eq(fsck("-n --bogus", img), 16);
	ck_assert_int_eq(fsck("-n", tu_path(missing, sizeof(missing), "no-such.img")), 8);
	ck_assert_int_eq(fsck("-n --json", missing), 8);
	ck_assert(json_valid());
	/* a clean writing run records the scan time; repeated, the superblock ping-pongs */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(fsck(i == 1 ? "-y" : "-p", img), 0);
		ck_assert(said("clean scan recorded"));
		ck_assert_uint_gt(sb_scan_time(), 1600000000);
	}
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(said("\"last_consistency_scan\": 1"));
	ck_assert(said("\"storage_mode\": \"emulated\""));
	ck_assert(said("\"format_revision\": "));
	ck_assert(said("\"feature_incompat\": "));
	ck_assert(said("\"free_zone_reserve\": "));
	ck_assert(said("\"kernel\": "));
	ck_assert(said("\"firmware\": "));
	ck_assert(said("\"vendor\": "));
	ck_assert(said("\"model\": "));
}
END_TEST

START_TEST(t_not_zlfs)
{
	struct zemu_create_opts o = {.size = 16 << 20, .zone_size = 2 << 20};

	tu_path(img, sizeof(img), "empty.img");
	unlink(img);
	ck_assert_int_eq(zemu_create(img, &o), 0);
	ck_assert_int_eq(fsck("-n", img), 8);
	ck_assert_int_eq(fsck("-y", img), 8);
}
END_TEST

START_TEST(t_link_count)
{
	struct snap a, b;
	struct zlfs_fs *fs;

	populate("nlink.img", NULL);
	set_nlink(ino_f2, 5);
	snapshot(&a);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("link count 5, expected 1"));
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum);
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("link count set to 1"));
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert_uint_gt(sb_scan_time(), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* A file whose name is gone but whose inode is not: -p leaves it (4), -y moves it. */
START_TEST(t_lost_found)
{
	struct snap a, b;
	struct node_page *d;
	struct zlfs_fs *fs;

	populate("lost.img", NULL);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	ck_assert_int_eq(dir_remove(fs, d, "f1", 2), 0);
	node_put(fs, d);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	ck_assert(json_valid());
	ck_assert(said("no directory names it"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert(said("run fsck.zlfs -y"));
	ck_assert_int_eq(sb_scan_time(), 0); /* not clean: no scan recorded */
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 1);
	snapshot(&b);
	no_zone_rewound(&a, &b, main_first());
	ck_assert(json_valid());
	ck_assert(said("lost+found"));
	ck_assert(said("\"exit_code\": 1"));
	ck_assert_int_eq(fsck("-n", img), 0);
	files_unmount(mount_expect_lost_found(ino_f1, F1_SIZE));
}
END_TEST

/* A block nothing references but the SIT calls valid (a leak): -p frees it. */
START_TEST(t_leak_preen)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t old;
	uint8_t b[4096];

	populate("leak.img", NULL);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, 0, &old), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = pat(ino_f2, i);
	ck_assert_int_eq(data_write(fs, np, b, sizeof(b), 0), (int)sizeof(b)); /* moves block 0 */
	node_put(fs, np);
	ck_assert_int_eq(files_sync(fs), 0);
	seg_mark(fs, old, 1); /* the old copy stays "valid": leaked */
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("is valid in the SIT but not referenced"));
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("unreferenced, freed"));
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

START_TEST(t_dangling_entry)
{
	populate("dangle.img", NULL);
	add_ghost();
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("\"ghost\" points to inode"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert(said("removed"));
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* A power cut at every step of a repair (-y: roll-forward, link count, lost+found): the image
 * mounts, and another fsck -y leaves it clean with the files intact. */
START_TEST(t_powercut_during_repair)
{
	char log[600], cut[600], kinds[8192];
	struct node_page *d;
	struct zlfs_fs *fs;
	long n0, n1, n, tried = 0;
	int torn;

	tu_path(log, sizeof(log), "repair.log");
	tu_path(cut, sizeof(cut), "cut.img");
	populate("repair.img", log);
	set_nlink(ino_f2, 3);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	ck_assert_int_eq(dir_remove(fs, d, "f1", 2), 0);
	node_put(fs, d);
	ck_assert_int_eq(files_unmount(fs), 0);
	crash_after_fsync(0);
	n0 = zemu_log_count(log);
	ck_assert_int_eq(fsck("-y", img), 1);
	n1 = zemu_log_count(log);
	ck_assert_int_gt(n1, n0);
	ck_assert_int_lt(n1, (long)sizeof(kinds));
	ck_assert_int_eq(zemu_log_kinds(log, kinds, n1), n1);
	for (n = n0; n <= n1; n++) {
		for (torn = 0; torn <= (kinds[n - 1] == 'W'); torn++) {
			int rc;

			unlink(cut);
			ck_assert_int_eq(zemu_replay(img, log, n, cut, torn), 0);
			rc = fsck("-n", cut);
			ck_assert_msg(rc == 0 || rc == 4, "cut at %ld%s: fsck -n exits %d", n,
				      torn ? " (torn)" : "", rc);
			ck_assert_msg(!said("device-write-pointer-error"), "cut at %ld: device error", n);
			rc = fsck("-y", cut);
			ck_assert_msg(rc == 0 || rc == 1, "cut at %ld%s: fsck -y exits %d", n,
				      torn ? " (torn)" : "", rc);
			ck_assert_int_eq(fsck("-n", cut), 0);
			fs = mount_rw(cut, 0);
			ck_assert(same_data(fs, ino_f2, F2_SIZE));
			ck_assert(same_data(fs, ino_f1, F1_SIZE));
			ck_assert_int_eq(files_unmount(fs), 0);
			tried++;
		}
	}
	printf("power cuts during fsck -y: %ld points over %ld operations\n", tried, n1 - n0);
	ck_assert_int_gt(tried, 5);
}
END_TEST

/* zlfs-ctl stats shows the scan time fsck recorded. */
START_TEST(t_stats_show_scan)
{
	uint64_t t;
	long shown;
	pid_t pid;

	if (tu_fuse_missing())
		return;
	populate("stats.img", NULL);
	ck_assert_int_eq(fsck("-p", img), 0);
	t = sb_scan_time();
	ck_assert_uint_gt(t, 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	shown = tu_ctl_stat(mnt, "last_consistency_scan");
	ck_assert_int_gt(tu_ctl_stat(mnt, "free_zone_reserve"), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(shown, (long)t);
}
END_TEST

int fsck_modes_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_clean_and_usage;
	t[n++] = t_not_zlfs;
	t[n++] = t_link_count;
	t[n++] = t_lost_found;
	t[n++] = t_leak_preen;
	t[n++] = t_dangling_entry;
	t[n++] = t_powercut_during_repair;
	t[n++] = t_stats_show_scan;
	return n;
}
