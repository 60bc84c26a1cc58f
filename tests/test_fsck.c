/*
 * test_fsck.c - fsck.zlfs modes, exit codes and reports on damaged emulated images.
 *
 * Images are populated and damaged through the library (no FUSE), then the real fsck.zlfs
 * binary runs on them: -n writes nothing (image bytes and write pointers compared), -p
 * repairs link counts and rolls a checkpoint mismatch forward, -y also fills /lost+found and
 * drops dangling entries, a device write-pointer error stays exit 4 in every mode with its
 * class in the text and the JSON, no zone holding valid blocks is ever reset, a clean
 * writing run records the scan time (shown by zlfs-ctl stats), and a power cut anywhere in a
 * repair leaves an image that mounts and checks clean after another run. Single bit flips
 * (checksum not resealed) in the newest superblock record, the newest checkpoint pack, a NAT
 * block, an inode and a dentry block, a write pointer moved partly back, and an fsync'ed write
 * the device lost each get the classification and exit code docs/fsck.md gives them. On an
 * encrypted root (mkfs --encrypt) every repair but naming an inode in the encrypted
 * /lost+found works without the key; that one is left, writing nothing, until fsck has it.
 *
 * The tests live by concern in test_fsck_modes.c (modes, exit codes, repairs, a power cut in
 * a repair), test_fsck_device.c (write pointers and zones that disagree with the checkpoint,
 * a lost fsync'ed write), test_fsck_flips.c (single bit flips in metadata blocks) and
 * test_fsck_encrypt.c (an encrypted root), test_fsck_walk.c (the walk at thousands of
 * inodes) and test_fsck_packed.c (inode packs: a damaged slot, a damaged pack, GC of a zone
 * of packs, zlfs-dump); what they share is in fsck_testutil.h. This file
 * puts them in order.
 */
#include "fsck_testutil.h"

#include <stdlib.h>

static struct tu_tests g_tests;

static const char *const fsck_order[] = {
	"t_clean_and_usage", "t_not_zlfs", "t_link_count", "t_lost_found", "t_leak_preen",
	"t_dangling_entry", "t_wp_ahead_is_checkpoint_mismatch", "t_wp_behind_is_device_error",
	"t_offline_zone_is_device_error", "t_offline_meta_zone", "t_sb_newest_flipped",
	"t_cp_newest_flipped", "t_nat_flipped", "t_inode_flipped", "t_dentry_flipped",
	"t_wp_behind_partial", "t_lost_fsynced_write", "t_powercut_during_repair",
	"t_stats_show_scan", "t_encrypted_root", "t_walk_many_files", "t_packed_slot_damaged",
	"t_packed_pack_flipped", "t_packed_gc_zone", "t_packed_dump", "t_packed_read_enomem",
	"t_packed_nat_fail_first", "t_packed_nat_fail_third", "t_packed_gc_owed",
	"t_packed_gc_unknown_slots", "t_packed_ckpt_enomem", "t_packed_stray_nat",
	"t_packed_fsync_nearfull", "t_span_groups", "t_span_files",
	"t_span_unlink_gc", "t_span_hostile", NULL,
};

int main(void)
{
	Suite *s = suite_create("fsck");
	TCase *tc = tcase_create("fsck");

	tu_collect(&g_tests, fsck_modes_tests);
	tu_collect(&g_tests, fsck_device_tests);
	tu_collect(&g_tests, fsck_flips_tests);
	tu_collect(&g_tests, fsck_encrypt_tests);
	tu_collect(&g_tests, fsck_walk_tests);
	tu_collect(&g_tests, fsck_packed_tests);
	tcase_set_timeout(tc, 600);
	tu_add_tests(&g_tests, tc, fsck_order);
	if (tu_unplaced(&g_tests))
		return EXIT_FAILURE;
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
