/*
 * test_xattr.c - extended attributes past one node (fs/file/xattr_node.c, the XATTR_NODES
 * feature), through the real daemon.
 *
 * Each test works on a fresh image through the mount, checks what it stored through the mount
 * before and after a remount, then unmounts and runs fsck (it must call the image clean):
 * 5,000 small attributes on one file (listxattr probed with size 0, then a buffer one byte
 * short for ERANGE, then the right one), removal of half of them and of all; values of
 * 64 KiB (XATTR_SIZE_MAX) kept in value nodes, replaced by small ones and back, with
 * XATTR_CREATE and XATTR_REPLACE; unlink gives back every block (statfs and the NAT's node
 * count as before); and an image without the feature (mkfs stamped as revision 3) keeps the
 * one-node limits it always had.
 */
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NSMALL 5000
#define VMAX 65536

static char img[512], mnt[512], bin[512];
static pid_t daemon_pid = -1;
static uint8_t val[VMAX + 1], got[VMAX + 1];

static const char *at(const char *name)
{
	static char p[4][600];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", mnt, name);
	return p[k];
}

static void fresh(const char *mkfs_args)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	tu_fresh_fs("xattr", &o, img, sizeof(img), mnt, sizeof(mnt));
	if (mkfs_args)
		ck_assert_int_eq(tu_sh("%s -q -f %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
				       mkfs_args, img), 0);
}

static void up(void)
{
	daemon_pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(daemon_pid, 0);
}

/* Unmount, and fsck must find nothing. */
static void down(void)
{
	ck_assert_int_eq(tu_daemon_stop(mnt, daemon_pid), 0);
	daemon_pid = -1;
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
}

static void touch(const char *name)
{
	int fd = open(at(name), O_WRONLY | O_CREAT, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(close(fd), 0);
}

/* The value of attribute I of size LEN: bytes that differ per attribute and per place. */
static void fill(uint8_t *buf, unsigned i, size_t len)
{
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(i * 131 + k * 7 + 1);
}

static void small_name(char *nm, size_t len, unsigned i) { snprintf(nm, len, "user.k%05u", i); }

static size_t small_len(unsigned i) { return 1 + i % 24; }

/* Attribute I of the small set is there with its value (PRESENT) or missing. */
static void check_small(const char *file, unsigned i, int present)
{
	char nm[32];
	ssize_t n;

	small_name(nm, sizeof(nm), i);
	n = getxattr(at(file), nm, got, sizeof(got));
	if (!present) {
		ck_assert_msg(n == -1 && errno == ENODATA, "%s: %zd (%s), expected ENODATA", nm, n,
			      strerror(errno));
		return;
	}
	fill(val, i, small_len(i));
	ck_assert_msg(n == (ssize_t)small_len(i), "%s: %zd bytes (%s)", nm, n, strerror(errno));
	ck_assert_msg(!memcmp(got, val, (size_t)n), "%s: value differs", nm);
}

/* listxattr: size 0 gives the length, one byte short is ERANGE, the right size lists the
 * names; EXPECT of them, each of the small set with I % STEP == 0 when STEP, all distinct. */
static void check_list(const char *file, unsigned expect, unsigned step)
{
	ssize_t need = listxattr(at(file), NULL, 0), n, off;
	char *list;
	unsigned count = 0;

	ck_assert_int_ge(need, 0);
	list = malloc((size_t)need + 1);
	ck_assert_ptr_nonnull(list);
	if (need) {
		errno = 0;
		ck_assert_int_eq(listxattr(at(file), list, (size_t)need - 1), -1);
		ck_assert_int_eq(errno, ERANGE);
	}
	n = listxattr(at(file), list, (size_t)need);
	ck_assert_int_eq(n, need);
	for (off = 0; off < n; off += (ssize_t)strlen(list + off) + 1) {
		unsigned i;

		ck_assert_int_eq(sscanf(list + off, "user.k%05u", &i), 1);
		ck_assert_msg(!step || i % step == 0, "listed %s", list + off);
		count++;
	}
	ck_assert_uint_eq(count, expect);
	free(list);
}

/* 5,000 small attributes on one file (one node held 158), half removed, the rest replaced,
 * all removed: each state read back through the mount and after a remount. */
START_TEST(t_thousands)
{
	char nm[32];
	unsigned i;

	fresh(NULL);
	up();
	touch("many");
	for (i = 0; i < NSMALL; i++) {
		small_name(nm, sizeof(nm), i);
		fill(val, i, small_len(i));
		ck_assert_msg(!setxattr(at("many"), nm, val, small_len(i), XATTR_CREATE),
			      "setxattr %s: %s", nm, strerror(errno));
	}
	for (i = 0; i < NSMALL; i += 7)
		check_small("many", i, 1);
	check_list("many", NSMALL, 0);
	errno = 0;
	ck_assert_int_eq(setxattr(at("many"), "user.k00017", "x", 1, XATTR_CREATE), -1);
	ck_assert_int_eq(errno, EEXIST);
	down();
	up();
	for (i = 0; i < NSMALL; i++)
		check_small("many", i, 1);
	for (i = 1; i < NSMALL; i += 2) {
		small_name(nm, sizeof(nm), i);
		ck_assert_msg(!removexattr(at("many"), nm), "removexattr %s: %s", nm,
			      strerror(errno));
	}
	for (i = 0; i < NSMALL; i++)
		check_small("many", i, i % 2 == 0);
	check_list("many", NSMALL / 2, 2);
	down();
	up();
	check_list("many", NSMALL / 2, 2);
	for (i = 0; i < NSMALL; i += 97)
		check_small("many", i, i % 2 == 0);
	for (i = 0; i < NSMALL; i += 2) {
		small_name(nm, sizeof(nm), i);
		ck_assert_int_eq(removexattr(at("many"), nm), 0);
	}
	check_list("many", 0, 0);
	ck_assert_int_eq(setxattr(at("many"), "user.k00001", "again", 5, XATTR_CREATE), 0);
	down();
}
END_TEST

/* Value I of a big attribute: LEN bytes of its pattern. */
static void set_big(const char *file, const char *nm, unsigned i, size_t len, int flags)
{
	fill(val, i, len);
	ck_assert_msg(!setxattr(at(file), nm, val, len, flags), "setxattr %s (%zu bytes): %s", nm,
		      len, strerror(errno));
}

static void check_big(const char *file, const char *nm, unsigned i, size_t len)
{
	ssize_t n = getxattr(at(file), nm, NULL, 0);

	ck_assert_msg(n == (ssize_t)len, "%s: size %zd, expected %zu", nm, n, len);
	if (len) {
		errno = 0;
		ck_assert_int_eq(getxattr(at(file), nm, got, len - 1), -1);
		ck_assert_int_eq(errno, ERANGE);
	}
	n = getxattr(at(file), nm, got, sizeof(got));
	ck_assert_int_eq(n, (ssize_t)len);
	fill(val, i, len);
	ck_assert_msg(!memcmp(got, val, len), "%s: value differs", nm);
}

/* Values of 64 KiB (the VFS's largest) and sizes around a node's room, replaced big by
 * small and small by big, XATTR_CREATE and XATTR_REPLACE on them, after a remount too. */
START_TEST(t_big_values)
{
	static const size_t sizes[] = {4020, 4040, 4041, 8080, 8081, 30000, VMAX - 1, VMAX};
	char nm[32];
	unsigned i;

	fresh(NULL);
	up();
	touch("big");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(nm, sizeof(nm), "user.big%u", i);
		set_big("big", nm, i, sizes[i], XATTR_CREATE);
	}
	errno = 0;
	ck_assert_int_eq(setxattr(at("big"), "user.huge", val, VMAX + 1, 0), -1);
	ck_assert_int_eq(errno, E2BIG);
	set_big("big", "user.small", 99, 10, 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(nm, sizeof(nm), "user.big%u", i);
		check_big("big", nm, i, sizes[i]);
	}
	errno = 0;
	ck_assert_int_eq(setxattr(at("big"), "user.big7", val, 5, XATTR_CREATE), -1);
	ck_assert_int_eq(errno, EEXIST);
	errno = 0;
	ck_assert_int_eq(setxattr(at("big"), "user.none", val, VMAX, XATTR_REPLACE), -1);
	ck_assert_int_eq(errno, ENODATA);
	set_big("big", "user.big7", 17, 3, XATTR_REPLACE);     /* big -> small */
	set_big("big", "user.small", 18, VMAX, XATTR_REPLACE); /* small -> big */
	set_big("big", "user.big6", 19, VMAX, XATTR_REPLACE);  /* big -> big */
	set_big("big", "user.big0", 20, 0, XATTR_REPLACE);     /* to empty */
	check_big("big", "user.big7", 17, 3);
	check_big("big", "user.small", 18, VMAX);
	check_big("big", "user.big6", 19, VMAX);
	check_big("big", "user.big0", 20, 0);
	down();
	up();
	check_big("big", "user.big7", 17, 3);
	check_big("big", "user.small", 18, VMAX);
	check_big("big", "user.big6", 19, VMAX);
	check_big("big", "user.big5", 5, sizes[5]);
	ck_assert_int_eq(removexattr(at("big"), "user.big6"), 0);
	errno = 0;
	ck_assert_int_eq(getxattr(at("big"), "user.big6", got, sizeof(got)), -1);
	ck_assert_int_eq(errno, ENODATA);
	check_big("big", "user.small", 18, VMAX);
	/* the same on a directory */
	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	set_big("d", "trusted.dir", 21, VMAX, 0);
	check_big("d", "trusted.dir", 21, VMAX);
	down();
}
END_TEST

static struct zlfs_fs *lib_fs;

/* The checkpoint's counts of nodes and of valid blocks (nodes and data), read with the
 * library from the unmounted image. */
static void lib_counts(uint64_t *nodes, uint64_t *blocks)
{
	struct zlfs_mount_opts mo = {.readonly = 1};

	ck_assert_int_eq(files_mount(img, &mo, &lib_fs), 0);
	*nodes = lib_fs->valid_nodes;
	*blocks = lib_fs->valid_blocks;
	ck_assert_int_eq(files_unmount(lib_fs), 0);
	lib_fs = NULL;
}

static uint64_t free_blocks(void)
{
	struct statvfs st;

	sync();
	ck_assert_int_eq(statvfs(mnt, &st), 0);
	return st.f_bfree;
}

/* Unlinking a file with thousands of attributes and big values gives back every node and
 * block: the NAT's node count and the SIT's valid blocks are what they were before it. */
START_TEST(t_unlink_frees)
{
	uint64_t nodes0, nodes1, blocks0, blocks1, free0, free_full, free1;
	char nm[32];
	unsigned i;

	fresh(NULL);
	up();
	touch("keep");
	free0 = free_blocks();
	down();
	lib_counts(&nodes0, &blocks0);
	up();
	touch("gone");
	for (i = 0; i < 2000; i++) {
		small_name(nm, sizeof(nm), i);
		fill(val, i, small_len(i));
		ck_assert_int_eq(setxattr(at("gone"), nm, val, small_len(i), 0), 0);
	}
	for (i = 0; i < 4; i++) {
		snprintf(nm, sizeof(nm), "user.big%u", i);
		set_big("gone", nm, i, VMAX, 0);
	}
	free_full = free_blocks();
	down();
	lib_counts(&nodes1, &blocks1);
	ck_assert_uint_gt(nodes1, nodes0 + 4 * ZLFS_XVALUE_NODES_MAX + 5);
	ck_assert_uint_gt(blocks1, blocks0 + 4 * ZLFS_XVALUE_NODES_MAX + 5);
	up();
	ck_assert_int_eq(unlink(at("gone")), 0);
	free1 = free_blocks();
	down();
	lib_counts(&nodes1, &blocks1);
	ck_assert_uint_eq(nodes1, nodes0);
	ck_assert_uint_eq(blocks1, blocks0);
	/* statfs does not show it: the freed blocks are all nodes, dead in the node log's open
	 * zone, which counts as free only once the log fills it (docs/design.md, "Free
	 * space: what df promises"); it must not show less than with the file, though. */
	ck_assert_uint_ge(free1, free_full);
	ck_assert_uint_le(free1, free0);
}
END_TEST

/* An image without the feature (mkfs stamped as revision 3, before it) keeps one xattr node
 * per file: a value that does not fit it is E2BIG, the attribute past its room ENOSPC, and
 * what fitted reads back; fsck calls it clean. */
START_TEST(t_old_feature_image)
{
	char nm[32];
	unsigned i;
	struct zlfs_mount_opts mo = {.readonly = 1};

	fresh("--revision 3:2 --features 0:0:0");
	up();
	touch("old");
	errno = 0;
	ck_assert_int_eq(setxattr(at("old"), "user.v", val, 5000, 0), -1);
	ck_assert_int_eq(errno, E2BIG);
	for (i = 0; i < NSMALL; i++) {
		small_name(nm, sizeof(nm), i);
		fill(val, i, 8);
		if (setxattr(at("old"), nm, val, 8, 0))
			break;
	}
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_uint_gt(i, 100);
	ck_assert_uint_lt(i, 300);
	down();
	ck_assert_int_eq(files_mount(img, &mo, &lib_fs), 0);
	ck_assert_uint_eq(lib_fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_XATTR_NODES, 0);
	ck_assert_int_eq(files_unmount(lib_fs), 0);
	lib_fs = NULL;
	up();
	check_list("old", i, 0);
	down();
}
END_TEST

/* security.capability, which the kernel asks for before every buffered write and the daemon
 * answers from the attribute cache when the file has no xattr: missing on a new file, on a
 * file with other xattrs, and again once removed; present, with its value, while set (the
 * kernel checks the value's layout: a revision 2 vfs_cap_data, 20 bytes). */
START_TEST(t_capability)
{
	static const uint8_t cap[20] = {0, 0, 0, 2, 0x20}; /* VFS_CAP_REVISION_2, CAP_KILL permitted */
	ssize_t n;

	fresh(NULL);
	up();
	touch("plain");
	touch("other");
	ck_assert_int_eq(setxattr(at("other"), "user.a", "x", 1, 0), 0);
	for (int round = 0; round < 2; round++) { /* the second after a remount: a fresh cache */
		errno = 0;
		ck_assert_int_eq(getxattr(at("plain"), "security.capability", got, sizeof(got)), -1);
		ck_assert_int_eq(errno, ENODATA);
		errno = 0;
		ck_assert_int_eq(getxattr(at("other"), "security.capability", got, sizeof(got)), -1);
		ck_assert_int_eq(errno, ENODATA);
		ck_assert_int_eq(setxattr(at("plain"), "security.capability", cap, sizeof(cap), 0), 0);
		n = getxattr(at("plain"), "security.capability", got, sizeof(got));
		ck_assert_int_eq(n, (ssize_t)sizeof(cap));
		ck_assert(!memcmp(got, cap, sizeof(cap)));
		ck_assert_int_eq(getxattr(at("plain"), "security.capability", NULL, 0), (ssize_t)sizeof(cap));
		ck_assert_int_eq(removexattr(at("plain"), "security.capability"), 0);
		errno = 0;
		ck_assert_int_eq(getxattr(at("plain"), "security.capability", got, sizeof(got)), -1);
		ck_assert_int_eq(errno, ENODATA);
		down();
		up();
	}
	down();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("xattr");
	TCase *tc = tcase_create("xattr");

	if (tu_fuse_missing())
		return 77;
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_thousands);
	tcase_add_test(tc, t_big_values);
	tcase_add_test(tc, t_unlink_frees);
	tcase_add_test(tc, t_old_feature_image);
	tcase_add_test(tc, t_capability);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
