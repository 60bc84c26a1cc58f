/*
 * test_fsck_device.c - the device disagrees with the checkpoint: a write pointer ahead (a
 * checkpoint mismatch, rolled forward), reset underneath valid blocks or moved partly back,
 * an offline zone (data or the meta log), and an fsync'ed write the device lost. A device
 * write-pointer error is exit 4 in every mode and nothing is written or reset. Part of
 * test_fsck (test_fsck.c).
 */
#include "fsck_testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <string.h>

/*
 * The device loses every block of zone ZONE from block KEEP on, although it acknowledged them
 * (and a flush made them durable): the write pointer goes back to KEEP, the blocks below stay.
 * The emulator has no command that moves a write pointer backwards (zlfs-emu's powercut drops
 * only writes no flush has acknowledged, replay rebuilds the whole device at an earlier
 * point), so this is done through the device interface: the zone's first KEEP blocks are read,
 * the zone is reset and those blocks are written back and flushed. The result is what such a
 * device shows afterwards: a CLOSED (or EMPTY) zone whose write pointer is KEEP and whose data
 * below it is unchanged.
 */
static void zone_truncate(uint32_t zone, uint32_t keep)
{
	struct zdev_open_opts oo = {0};
	struct zdev_zone z;
	struct zdev *dev;
	uint8_t *b = keep ? zdev_buf_alloc((size_t)keep * ZLFS_BLOCK_SIZE) : NULL;
	uint64_t start;

	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_report_one(dev, zone, &z), 0);
	start = z.start;
	ck_assert(z.cond == ZDEV_COND_FULL || z.wp >= start + (uint64_t)keep * ZLFS_BLOCK_SIZE);
	if (keep) {
		ck_assert_ptr_nonnull(b);
		ck_assert_int_eq(zdev_read(dev, b, (size_t)keep * ZLFS_BLOCK_SIZE, start), 0);
	}
	ck_assert_int_eq(zdev_zone_reset(dev, zone), 0);
	if (keep)
		ck_assert_int_eq(zdev_write(dev, b, (size_t)keep * ZLFS_BLOCK_SIZE, start), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_zone_close(dev, zone), 0);
	ck_assert_int_eq(zdev_report_one(dev, zone, &z), 0);
	ck_assert_uint_eq(z.wp, start + (uint64_t)keep * ZLFS_BLOCK_SIZE);
	zdev_close(dev);
	zdev_buf_free(b);
}

static uint32_t zone_blocks_of_img(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t zb = zlfs_zone_blocks(&fs->sb);

	files_unmount(fs);
	return zb;
}

START_TEST(t_wp_ahead_is_checkpoint_mismatch)
{
	struct snap a, b, c;
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t first;

	populate("ahead.img", NULL);
	first = main_first();
	crash_after_fsync(1);
	snapshot(&a);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(said("checkpoint-mismatch: "));
	ck_assert(said("checkpoint mismatch only"));
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(json_valid());
	ck_assert(said("\"class\": \"checkpoint-mismatch\""));
	ck_assert(!said("device-write-pointer-error\""));
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum); /* -n wrote nothing */
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("rolled forward"));
	snapshot(&c);
	no_zone_rewound(&a, &c, first);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(!said("checkpoint-mismatch"));
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_uint_eq(le64_get(inode_of(np)->size), F2_SIZE + 8192);
	node_put(fs, np);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* The zone holding f2's first block, from a read-only mount. */
static uint32_t zone_of_f2(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct node_page *np;
	uint32_t addr, zone;

	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, 0, &addr), 0);
	zone = addr / zlfs_zone_blocks(&fs->sb);
	node_put(fs, np);
	files_unmount(fs);
	return zone;
}

START_TEST(t_wp_behind_is_device_error)
{
	struct zdev_open_opts oo = {0};
	struct zdev *dev;
	uint32_t zone, first;

	populate("behind.img", NULL);
	first = main_first();
	zone = zone_of_f2();
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_zone_reset(dev, zone), 0); /* reset underneath valid blocks */
	zdev_close(dev);
	expect_device_error_everywhere(first);
}
END_TEST

START_TEST(t_offline_zone_is_device_error)
{
	uint32_t zone, first;

	populate("offline.img", NULL);
	first = main_first();
	zone = zone_of_f2();
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_OFFLINE, (uint64_t)zone * (2 << 20)), 0);
	expect_device_error_everywhere(first);
	ck_assert(said("offline"));
}
END_TEST

/* The meta log's zone goes offline: the mount fails, and the report says why. */
START_TEST(t_offline_meta_zone)
{
	struct zlfs_fs *fs;
	uint32_t zone;
	struct snap a, b;

	populate("offmeta.img", NULL);
	fs = mount_rw(img, 1);
	zone = fs->meta_zone;
	files_unmount(fs);
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_OFFLINE, (uint64_t)zone * (2 << 20)), 0);
	snapshot_raw(&a);
	ck_assert_int_eq(fsck("-y", img), 4);
	ck_assert(said("device-write-pointer-error: zone"));
	ck_assert(said("is offline"));
	ck_assert_int_eq(fsck("-n --json", img), 4);
	ck_assert(json_valid());
	ck_assert(said("\"class\": \"device-write-pointer-error\""));
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
}
END_TEST

/* The write pointer of a zone holding checkpointed data goes back part of the way (not a
 * reset: the zone keeps its first blocks and stays CLOSED): a device write-pointer error in
 * every mode, nothing written; what lies below the write pointer still reads. */
START_TEST(t_wp_behind_partial)
{
	uint32_t zb, addr, first;
	struct zlfs_fs *fs;

	populate("behind2.img", NULL);
	first = main_first();
	zb = zone_blocks_of_img();
	addr = data_block_of(ino_f2, F2_SIZE / 4096 - 1); /* f2's last block and what follows */
	ck_assert_uint_gt(addr % zb, 0);
	zone_truncate(addr / zb, addr % zb);
	expect_device_error_everywhere(first);
	ck_assert(said("is behind the checkpoint's block"));
	ck_assert(!said("reset underneath"));
	fs = mount_rw(img, 1); /* -o ro still works to copy what is readable */
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
}
END_TEST

/* -y rolls forward to the last checkpoint's view of f2: the fsync is lost, nothing else. */
static void fsync_lost_quietly(void)
{
	struct node_page *np;
	struct zlfs_fs *fs;

	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 1, 0);
	ck_assert(said("\"class\": \"checkpoint-mismatch\""));
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 0, 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_uint_eq(le64_get(inode_of(np)->size), F2_SIZE);
	node_put(fs, np);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}

/*
 * An fsync'ed write acknowledged (flushed), then lost by the device. A power cut cannot do
 * this (it drops only unflushed writes), so zone_truncate() moves the zone's write pointer
 * back below the fsync'ed blocks, keeping what lies before them.
 * - The data blocks are lost, the fsync'ed node survives. With two flushes per fsync (a
 *   filesystem without ONE_FLUSH) the data was durable before the node was written, so
 *   the node needing blocks past the data zone's write pointer proves the device lost them:
 *   a device write-pointer error, exit 4 in every mode, nothing written or reset. With one
 *   flush the same state is what a power cut before that flush leaves (docs/fsck.md): the
 *   group is not whole, recovery keeps the previous state, a checkpoint mismatch.
 * - The node block is lost (the data survives): nothing on the device records the fsync any
 *   more, so no check can tell it from writes never fsync'ed: a checkpoint mismatch (exit 0
 *   under -n), -y rolls forward to the last checkpoint's view of the file.
 */
START_TEST(t_lost_fsynced_write)
{
	struct zlfs_fs *fs;
	uint32_t zb, addr, first;

	populate_two_flush("lostdata.img");
	first = main_first();
	zb = zone_blocks_of_img();
	crash_after_fsync(1);
	addr = data_block_of(ino_f2, F2_SIZE / 4096); /* the first fsync'ed data block */
	zone_truncate(addr / zb, addr % zb);
	expect_device_error_everywhere(first);
	ck_assert(said("is behind the checkpoint's block"));
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);

	populate("lostgroup.img", NULL); /* one flush per fsync */
	crash_after_fsync(1);
	addr = data_block_of(ino_f2, F2_SIZE / 4096);
	zone_truncate(addr / zb, addr % zb);
	fsync_lost_quietly();

	populate("lostnode.img", NULL);
	crash_after_fsync(1);
	fs = mount_rw(img, 1);
	addr = nat_addr_of(fs, ino_f2); /* the fsync'ed inode, as roll-forward found it */
	files_unmount(fs);
	zone_truncate(addr / zb, addr % zb);
	fsync_lost_quietly();
}
END_TEST

int fsck_device_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_wp_ahead_is_checkpoint_mismatch;
	t[n++] = t_wp_behind_is_device_error;
	t[n++] = t_offline_zone_is_device_error;
	t[n++] = t_offline_meta_zone;
	t[n++] = t_wp_behind_partial;
	t[n++] = t_lost_fsynced_write;
	return n;
}
