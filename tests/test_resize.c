/*
 * test_resize.c - growing a filesystem offline (zlfs_resize, resize.zlfs) and growing an
 * emulated image (zemu_grow, zlfs-emu grow).
 *
 * The power-cut test records the resize's writes in the emulator's write log and rebuilds the
 * device at every one of them, whole and torn: each must hold the old size or the new one,
 * fsck clean, every file's bytes intact, and a second resize must finish the job. After the
 * resize the new zones must take data: a file larger than the old filesystem's room goes in.
 */
#include "testutil.h"

#include "files.h"
#include "super.h"
#include "zdev.h"
#include "zdev_emu.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024u * 1024u)
#define OLD_ZONES 24u
#define NEW_ZONES 40u
#define NFILES 6

static const size_t sizes[NFILES] = {0, 100, 3908, 20000, 300000, 1500000};
static uint32_t inos[NFILES];

static uint8_t pat(uint32_t n, size_t i) { return (uint8_t)(n * 57 + i * 13 + (i >> 9)); }

static void make_image(const char *path, uint32_t zones)
{
	struct zemu_create_opts o = {.size = (uint64_t)zones * MiB, .zone_size = MiB,
				     .max_open = 14, .max_active = 14};
	struct zdev_open_opts oo = {0};
	struct zlfs_mkfs_opts mo = {.quiet = 1};
	struct zlfs_sb_info sbi;
	struct zdev *dev;

	unlink(path);
	ck_assert_int_eq(zemu_create(path, &o), 0);
	ck_assert_int_eq(zdev_open(path, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_mkfs(dev, &mo, &sbi), 0);
	zdev_close(dev);
}

/* Files of the sizes above in /d, through the file layer; unmounted cleanly. */
static void populate(const char *path)
{
	struct zlfs_mount_opts mo = {0};
	struct node_page *root, *d, *np;
	struct zlfs_fs *fs;
	uint8_t *buf = malloc(sizes[NFILES - 1]);
	uint32_t dino;
	char name[16];

	ck_assert_int_eq(files_mount(path, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFDIR | 0755, 0, 0, 0, ZLFS_ROOT_INO, &d), 0);
	dino = d->nid;
	ck_assert_int_eq(dir_add(fs, root, "d", 1, dino, DT_DIR), 0);
	inode_of(root)->nlink = le32_put(le32_get(inode_of(root)->nlink) + 1);
	node_dirty(fs, root);
	for (int n = 0; n < NFILES; n++) {
		ck_assert_int_eq(inode_new(fs, S_IFREG | 0644, 0, 0, 0, dino, &np), 0);
		inline_start(fs, np);
		inos[n] = np->nid;
		snprintf(name, sizeof(name), "f%d", n);
		ck_assert_int_eq(dir_add(fs, d, name, strlen(name), np->nid, DT_REG), 0);
		for (size_t i = 0; i < sizes[n]; i++)
			buf[i] = pat((uint32_t)n, i);
		if (sizes[n] && !inline_try_write(fs, np, buf, sizes[n], 0))
			ck_assert_int_eq(data_write(fs, np, buf, sizes[n], 0), (int)sizes[n]);
		node_put(fs, np);
	}
	node_put(fs, d);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
	free(buf);
}

/* Every file's bytes, read back through a read-only mount; the main area's zone count. */
static uint32_t check_files(const char *path, const char *when)
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	uint8_t *buf = malloc(sizes[NFILES - 1] + 1);
	struct node_page *np;
	struct zlfs_fs *fs;
	uint32_t main_zones;

	ck_assert_msg(files_mount(path, &mo, &fs) == 0, "%s: no mount", when);
	for (int n = 0; n < NFILES; n++) {
		ck_assert_int_eq(inode_get(fs, inos[n], &np), 0);
		ck_assert_msg(le64_get(inode_of(np)->size) == sizes[n], "%s: f%d's size", when, n);
		ck_assert_int_eq(data_read(fs, np, buf, sizes[n], 0), (int)sizes[n]);
		size_t i = 0; /* one assertion per file: check records every one it meets */

		while (i < sizes[n] && buf[i] == pat((uint32_t)n, i))
			i++;
		ck_assert_msg(i == sizes[n], "%s: f%d differs at byte %zu", when, n, i);
		node_put(fs, np);
	}
	main_zones = fs->sb.main_zones;
	ck_assert_int_eq(files_unmount(fs), 0);
	free(buf);
	return main_zones;
}

static void remount(const char *path)
{
	struct zlfs_mount_opts mo = {0};
	struct zlfs_fs *fs;

	ck_assert_int_eq(files_mount(path, &mo, &fs), 0);
	ck_assert_int_eq(files_unmount(fs), 0);
}

static uint32_t sb_zones(const char *path)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sbi;
	struct zdev *dev;

	ck_assert_int_eq(zdev_open(path, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sbi, NULL), 0);
	zdev_close(dev);
	return sbi.nr_zones;
}

static int resize_to(const char *path, uint32_t zones, const char *log, struct zlfs_resize_result *r)
{
	struct zdev_open_opts oo = {.emu_log = log};
	struct zlfs_resize_opts o = {.nr_zones = zones};
	struct zdev *dev;
	int ret;

	ck_assert_int_eq(zdev_open(path, &oo, &dev), 0);
	ret = zlfs_resize(dev, &o, r);
	zdev_close(dev);
	return ret;
}

static int fsck_clean(const char *path)
{
	char fsck[512];

	return tu_sh("%s -n %s >/dev/null 2>&1", tu_bin(fsck, sizeof(fsck), "fsck.zlfs"), path);
}

/* The grown filesystem's new zones take data: a file larger than the old one's whole room. */
static void fill_past_old_size(const char *path)
{
	struct zlfs_mount_opts mo = {0};
	size_t len = (OLD_ZONES - 6 + 4) * MiB, chunk = MiB; /* more than the old main area */
	uint8_t *buf = malloc(chunk);
	struct node_page *root, *np;
	struct zlfs_fs *fs;
	uint32_t ino;

	memset(buf, 0x5a, chunk);
	ck_assert_int_eq(files_mount(path, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFREG | 0644, 0, 0, 0, ZLFS_ROOT_INO, &np), 0);
	ino = np->nid;
	ck_assert_int_eq(dir_add(fs, root, "big", 3, ino, DT_REG), 0);
	for (size_t off = 0, n; off < len; off += n) { /* a write may take part of a chunk */
		int ret = data_write(fs, np, buf, chunk, off);

		ck_assert_msg(ret > 0, "writing at %zu: %d", off, ret);
		n = (size_t)ret;
	}
	node_put(fs, np);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
	free(buf);
	ck_assert_int_eq(fsck_clean(path), 0);
	check_files(path, "after filling the new zones");
}

/* Two of the new zones hold old bytes (a device reused): the resize must reset them. */
static void stale_zones(const char *path)
{
	struct zdev_open_opts oo = {0};
	uint8_t *b = zdev_buf_alloc(4096);
	struct zdev *dev;

	memset(b, 0xee, 4096);
	ck_assert_int_eq(zdev_open(path, &oo, &dev), 0);
	ck_assert_int_eq(zdev_write(dev, b, 4096, (uint64_t)(OLD_ZONES + 3) * MiB), 0);
	ck_assert_int_eq(zdev_write(dev, b, 4096, (uint64_t)(NEW_ZONES - 1) * MiB), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	zdev_close(dev);
	zdev_buf_free(b);
}

START_TEST(t_resize_power_cut_everywhere)
{
	char img[512], log[512], out[512], again[512];
	struct zlfs_resize_result r;
	long total, n;
	int torn, olds = 0, news = 0;

	tu_path(img, sizeof(img), "pc.img");
	tu_path(log, sizeof(log), "pc.log");
	tu_path(out, sizeof(out), "pc-out.img");
	tu_path(again, sizeof(again), "pc-again.img");
	make_image(img, OLD_ZONES);
	populate(img);
	ck_assert_uint_eq(check_files(img, "before"), OLD_ZONES - 6);
	ck_assert_int_eq(zemu_grow(img, (uint64_t)NEW_ZONES * MiB), 0);
	ck_assert_uint_eq(sb_zones(img), OLD_ZONES); /* the device grew, the filesystem not yet */
	ck_assert_int_eq(fsck_clean(img), 0);
	stale_zones(img);
	unlink(log);
	ck_assert_int_eq(resize_to(img, 0, log, &r), 0);
	ck_assert_int_eq(r.done, 1);
	ck_assert_uint_eq(r.new_zones, NEW_ZONES);
	total = zemu_log_count(log);
	ck_assert_int_ge(total, 6); /* two resets, a flush; the superblock's reset, write, flush... */
	for (n = 0; n <= total; n++) {
		for (torn = 0; torn < 2; torn++) {
			char when[64];
			uint32_t zones, main_zones;

			snprintf(when, sizeof(when), "cut at %ld%s", n, torn ? " (torn)" : "");
			unlink(out);
			ck_assert_int_eq(zemu_replay(NULL, log, n, out, torn), 0);
			zones = sb_zones(out);
			ck_assert_msg(zones == OLD_ZONES || zones == NEW_ZONES, "%s: %u zones", when, zones);
			ck_assert_msg(n < total || torn || zones == NEW_ZONES, "%s: not grown", when);
			ck_assert_msg(fsck_clean(out) == 0, "%s: fsck.zlfs -n is not clean", when);
			main_zones = check_files(out, when);
			ck_assert_uint_eq(main_zones, zones - 6);
			zones == OLD_ZONES ? olds++ : news++;
			/* the user runs it again: it finishes */
			if (n % 4 == 0 || n == total) {
				unlink(again);
				ck_assert_int_eq(tu_sh("cp --sparse=always %s %s", out, again), 0);
				ck_assert_int_eq(resize_to(again, 0, NULL, &r), 0);
				ck_assert_uint_eq(sb_zones(again), NEW_ZONES);
				ck_assert_msg(fsck_clean(again) == 0, "%s, then again: fsck", when);
				check_files(again, when);
			}
		}
	}
	printf("power cuts in a resize of %u to %u zones: %ld writes, %d points at the old size, "
	       "%d at the new\n", OLD_ZONES, NEW_ZONES, total, olds, news);
	ck_assert_int_gt(olds, 0);
	ck_assert_int_gt(news, 0);
	fill_past_old_size(again);
}
END_TEST

START_TEST(t_resize_refusals)
{
	char img[512], cli[512], err[512];
	struct zlfs_resize_result r;
	pid_t pid;
	int st;

	tu_path(img, sizeof(img), "ref.img");
	tu_path(err, sizeof(err), "ref.err");
	make_image(img, OLD_ZONES);
	populate(img);
	/* the device has no more zones: already that size, nothing to do */
	ck_assert_int_eq(resize_to(img, 0, NULL, &r), 0);
	ck_assert_int_eq(r.done, 0);
	ck_assert_int_eq(zemu_grow(img, (uint64_t)NEW_ZONES * MiB), 0);
	ck_assert_int_eq(resize_to(img, NEW_ZONES + 1, NULL, &r), -EINVAL); /* past the device */
	ck_assert_ptr_nonnull(strstr(r.why, "the device has 40 zones"));
	ck_assert_int_eq(resize_to(img, OLD_ZONES - 1, NULL, &r), -EINVAL); /* a shrink */
	ck_assert_ptr_nonnull(strstr(r.why, "does not shrink"));
	/* a dry run writes nothing */
	ck_assert_int_eq(tu_sh("%s -n %s >%s 2>&1", tu_bin(cli, sizeof(cli), "resize.zlfs"), img, err), 0);
	ck_assert(tu_file_has(err, "would grow from 24 zones"));
	ck_assert_uint_eq(sb_zones(img), OLD_ZONES);
	/* not unmounted cleanly: a checkpoint, then the process dies without unmounting */
	pid = fork();
	if (!pid) {
		struct zlfs_mount_opts mo = {0};
		struct zlfs_fs *fs;

		_exit(files_mount(img, &mo, &fs) || (fs->dirty = 1, files_sync(fs)) ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	ck_assert_int_eq(resize_to(img, 0, NULL, &r), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(r.why, "not unmounted cleanly"));
	ck_assert_int_eq(tu_sh("%s %s >%s 2>&1", cli, img, err), 1);
	ck_assert(tu_file_has(err, "not unmounted cleanly"));
	remount(img); /* a mount and unmount: clean again */
	check_files(img, "after a refused resize");
	/* more than the metadata area (or the checkpoint's map blocks) can describe */
	ck_assert_int_eq(zemu_grow(img, 64ull << 30), 0);
	ck_assert_int_eq(resize_to(img, 0, NULL, &r), -EFBIG);
	ck_assert_uint_gt(r.largest, OLD_ZONES);
	ck_assert_uint_lt(r.largest, 65536);
	ck_assert_int_eq(tu_sh("%s %s >%s 2>&1", cli, img, err), 1);
	ck_assert(tu_file_has(err, "it can grow to"));
	ck_assert_int_eq(resize_to(img, r.largest, NULL, &r), 0);
	ck_assert_int_eq(r.done, 1);
	ck_assert_int_eq(fsck_clean(img), 0);
	ck_assert_uint_eq(check_files(img, "at the largest size"), r.new_zones - 6);
	unlink(img);
}
END_TEST

START_TEST(t_emu_grow)
{
	struct zemu_create_opts o = {.size = 8 * MiB, .zone_size = MiB, .log_path = NULL};
	struct zdev_open_opts oo = {0};
	char img[512], logged[512], log[512];
	uint8_t *a = zdev_buf_alloc(MiB), *b = zdev_buf_alloc(MiB);
	struct zdev_zone z;
	struct zdev *dev;

	tu_path(img, sizeof(img), "grow.img");
	unlink(img);
	ck_assert_int_eq(zemu_create(img, &o), 0);
	for (size_t i = 0; i < MiB; i++)
		a[i] = (uint8_t)(i * 7 + (i >> 12));
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_write(dev, a, 64 * 1024, 3 * MiB), 0); /* unflushed: in the journal */
	zdev_close(dev);
	ck_assert_int_eq(zemu_grow(img, 8 * MiB), -EINVAL);  /* not larger */
	ck_assert_int_eq(zemu_grow(img, 12 * MiB + 5), 0);   /* whole zones: 12 */
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_uint_eq(zdev_geometry(dev)->nr_zones, 12);
	ck_assert_int_eq(zdev_report_one(dev, 3, &z), 0);
	ck_assert_uint_eq(z.wp - z.start, 64 * 1024);
	ck_assert_int_eq(zdev_read(dev, b, 64 * 1024, 3 * MiB), 0);
	ck_assert_mem_eq(a, b, 64 * 1024);
	ck_assert_int_eq(zdev_report_one(dev, 11, &z), 0);
	ck_assert_int_eq(z.cond, ZDEV_COND_EMPTY);
	ck_assert_int_eq(zdev_write(dev, a, MiB, 11 * MiB), 0); /* a new zone takes writes */
	zdev_close(dev);
	/* an image with a write log keeps its geometry */
	tu_path(logged, sizeof(logged), "grow-logged.img");
	tu_path(log, sizeof(log), "grow-logged.log");
	unlink(log);
	o.log_path = log;
	ck_assert_int_eq(zemu_create(logged, &o), 0);
	ck_assert_int_eq(zemu_grow(logged, 16 * MiB), -EINVAL);
	zdev_buf_free(a);
	zdev_buf_free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("resize");
	TCase *tc = tcase_create("resize");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_emu_grow);
	tcase_add_test(tc, t_resize_refusals);
	tcase_add_test(tc, t_resize_power_cut_everywhere);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
