/*
 * test_inline.c - inline data (fs/inline.c): small regular files keep their bytes in their
 * inode, through the real daemon.
 *
 * Each test works on a fresh image through the mount, then unmounts, runs fsck (it must call
 * the image clean) and opens the image with the library to read the inodes themselves: a file
 * of at most ZLFS_INLINE_MAX bytes that was never larger is inline with no block, a larger
 * one (or one converted) is not. Contents are compared through the mount before and after a
 * remount. The boundary is crossed by appends (3,907 -> 3,909 bytes), truncates and
 * fallocate; holes, punches, O_TRUNC, rename over and unlink of inline files; st_blocks
 * (8 for a non-empty inline file); and an image without the INLINE_DATA feature (mkfs
 * stamped as revision 3) keeps every file in blocks.
 */
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXI ZLFS_INLINE_MAX
#define NSMALL 300

static char img[512], mnt[512], bin[512];
static pid_t daemon_pid = -1;

static uint8_t pat(unsigned seed, size_t i) { return (uint8_t)(seed * 131 + i * 7 + 1); }

static const char *at(const char *name)
{
	static char p[8][600];
	static int k;

	k = (k + 1) % 8;
	snprintf(p[k], sizeof(p[k]), "%s/%s", mnt, name);
	return p[k];
}

static void fresh(const char *mkfs_args)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	tu_fresh_fs("inline", &o, img, sizeof(img), mnt, sizeof(mnt));
	if (mkfs_args)
		ck_assert_int_eq(tu_sh("%s -q -f %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
				       mkfs_args, img), 0);
}

static void up(void)
{
	daemon_pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(daemon_pid, 0);
}

/* Unmount, and fsck must find nothing. */
static void down(void)
{
	ck_assert_int_eq(tu_daemon_stop(mnt, daemon_pid), 0);
	daemon_pid = -1;
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
}

/* Write LEN bytes of SEED's pattern at OFF of NAME (made if missing). */
static void put(const char *name, unsigned seed, size_t off, size_t len, int flags)
{
	static uint8_t buf[64 << 10];
	int fd = open(at(name), O_WRONLY | O_CREAT | flags, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_le(len, sizeof(buf));
	for (size_t i = 0; i < len; i++)
		buf[i] = pat(seed, off + i);
	ck_assert_int_eq(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

/* What a file should hold: its size and, per byte, a pattern seed (0: a zero byte). */
struct model {
	char name[32];
	size_t size;
	unsigned seed[16384];
};

static void model_put(struct model *m, unsigned seed, size_t off, size_t len)
{
	for (size_t i = off; i < off + len; i++)
		m->seed[i] = seed;
	if (off + len > m->size)
		m->size = off + len;
}

static void model_size(struct model *m, size_t size)
{
	for (size_t i = size; i < m->size; i++)
		m->seed[i] = 0;
	m->size = size;
}

static void model_zero(struct model *m, size_t off, size_t len)
{
	for (size_t i = off; i < off + len && i < m->size; i++)
		m->seed[i] = 0;
}

static void model_new(struct model *m, const char *name)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
}

static void write_m(struct model *m, unsigned seed, size_t off, size_t len)
{
	put(m->name, seed, off, len, 0);
	model_put(m, seed, off, len);
}

/* The file reads as its model, through the mount. */
static void check(const struct model *m)
{
	static uint8_t buf[sizeof(m->seed) / sizeof(m->seed[0]) + 1];
	struct stat st;
	int fd = open(at(m->name), O_RDONLY);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf));
	ck_assert_int_eq(fstat(fd, &st), 0);
	close(fd);
	ck_assert_msg(n == (ssize_t)m->size && st.st_size == (off_t)m->size,
		      "%s: read %zd bytes, st_size %lld, model %zu", m->name, n,
		      (long long)st.st_size, m->size);
	for (size_t i = 0; i < m->size; i++)
		ck_assert_msg(buf[i] == (m->seed[i] ? pat(m->seed[i], i) : 0),
			      "%s: byte %zu is %u, model %u", m->name, i, buf[i],
			      m->seed[i] ? pat(m->seed[i], i) : 0);
}

static long st_blocks_of(const char *name)
{
	struct stat st;

	ck_assert_int_eq(stat(at(name), &st), 0);
	return (long)st.st_blocks;
}

/* ---- the inodes themselves, read with the library once the daemon is gone ---------------- */

static struct zlfs_fs *lib_fs;

static void lib_open(void)
{
	struct zlfs_mount_opts mo = {.readonly = 1};

	ck_assert_int_eq(files_mount(img, &mo, &lib_fs), 0);
}

static void lib_close(void)
{
	ck_assert_int_eq(files_unmount(lib_fs), 0);
	lib_fs = NULL;
}

/* NAME in the root: whether it is inline, its inline_size and blocks. */
static void lib_inode(const char *name, int *is_inline, uint32_t *isize, uint64_t *blocks)
{
	struct node_page *root, *np;
	uint32_t ino;

	ck_assert_int_eq(inode_get(lib_fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(dir_lookup(lib_fs, root, name, strlen(name), &ino, NULL), 0);
	node_put(lib_fs, root);
	ck_assert_int_eq(inode_get(lib_fs, ino, &np), 0);
	*is_inline = !!(le32_get(inode_of(np)->flags) & ZLFS_IFLAG_INLINE);
	*isize = le32_get(inode_of(np)->inline_size);
	*blocks = le64_get(inode_of(np)->blocks);
	node_put(lib_fs, np);
}

static void expect_inline(const char *name, size_t size)
{
	uint64_t blocks;
	uint32_t isize;
	int in;

	lib_inode(name, &in, &isize, &blocks);
	ck_assert_msg(in && isize == size && blocks == 0,
		      "%s: inline %d, inline_size %u, blocks %llu; expected inline, %zu bytes", name,
		      in, isize, (unsigned long long)blocks, size);
}

static void expect_blocks(const char *name, uint64_t want)
{
	uint64_t blocks;
	uint32_t isize;
	int in;

	lib_inode(name, &in, &isize, &blocks);
	ck_assert_msg(!in && isize == 0 && blocks == want,
		      "%s: inline %d, inline_size %u, blocks %llu; expected %llu blocks", name,
		      in, isize, (unsigned long long)blocks, (unsigned long long)want);
}

/* Done with the library's view: mount again, every model reads back, unmount (fsck clean). */
static void remount_check(struct model *a, struct model *b, struct model *c, struct model *d)
{
	struct model *all[] = {a, b, c, d};

	lib_close();
	up();
	for (int i = 0; i < 4; i++)
		if (all[i])
			check(all[i]);
	down();
}

/* ---- tests -------------------------------------------------------------------------------- */

static struct model ms[NSMALL];

/* Sizes around the boundary and spread below it. */
static size_t small_size(int i)
{
	static const size_t edge[] = {0, 1, 2, MAXI - 1, MAXI, MAXI + 1, 4095, 4096, 4097, 100};

	return i < (int)(sizeof(edge) / sizeof(edge[0])) ? edge[i] : (size_t)(i * 37 % 3400);
}

START_TEST(t_many_small_files)
{
	long data0, data1;
	int i;

	fresh(NULL);
	up();
	data0 = tu_ctl_stat(mnt, "data_logs");
	for (i = 0; i < NSMALL; i++) {
		memset(&ms[i], 0, sizeof(ms[i]));
		snprintf(ms[i].name, sizeof(ms[i].name), "s%03d", i);
		if (small_size(i))
			write_m(&ms[i], (unsigned)i + 1, 0, small_size(i));
		else
			put(ms[i].name, 1, 0, 0, 0);
		ck_assert_int_eq(st_blocks_of(ms[i].name),
				 small_size(i) == 0 ? 0 : small_size(i) <= MAXI ? 8
				 : (long)((small_size(i) + 4095) / 4096 * 8));
	}
	sync();
	data1 = tu_ctl_stat(mnt, "data_logs");
	/* 4 files are larger than the area: 5 data blocks; the rest take none. The root's
	 * dentry blocks (2 of them, written at each directory flush) go to a data log too: 16
	 * blocks allow for them, where 296 small files in blocks would take 292 more. */
	ck_assert_msg(data0 >= 0 && data1 - data0 <= 21 * 4096,
		      "data logs took %ld bytes for %d small files", data1 - data0, NSMALL);
	for (i = 0; i < NSMALL; i++)
		check(&ms[i]);
	down();
	up();
	for (i = 0; i < NSMALL; i++)
		check(&ms[i]);
	down();
	lib_open();
	for (i = 0; i < NSMALL; i++)
		if (small_size(i) <= MAXI)
			expect_inline(ms[i].name, small_size(i));
		else
			expect_blocks(ms[i].name, (small_size(i) + 4095) / 4096);
	lib_close();
}
END_TEST

START_TEST(t_boundary)
{
	static struct model a, b, c;

	fresh(NULL);
	up();
	model_new(&a, "append");
	write_m(&a, 3, 0, MAXI - 1);
	check(&a);
	write_m(&a, 4, MAXI - 1, 2); /* 3,907 -> 3,909 bytes: converted */
	check(&a);
	ck_assert_int_eq(st_blocks_of(a.name), 8);
	write_m(&a, 5, 4000, 3000);  /* and on as any file */
	check(&a);
	model_new(&b, "exact");
	write_m(&b, 6, 0, MAXI - 1);
	write_m(&b, 7, MAXI - 1, 1); /* to the byte: stays */
	check(&b);
	model_new(&c, "hole");
	write_m(&c, 8, 3000, 10);    /* a hole before: zeros */
	check(&c);
	write_m(&c, 9, 100, 5);
	check(&c);
	down();
	lib_open();
	expect_blocks(a.name, 2);
	expect_inline(b.name, MAXI);
	expect_inline(c.name, 3010);
	remount_check(&a, &b, &c, NULL);
}
END_TEST

static void truncate_m(struct model *m, size_t size)
{
	ck_assert_int_eq(truncate(at(m->name), (off_t)size), 0);
	model_size(m, size);
	check(m);
}

START_TEST(t_truncate)
{
	static struct model a, b, c;
	int fd;

	fresh(NULL);
	up();
	model_new(&a, "down_up");
	write_m(&a, 11, 0, 3000);
	truncate_m(&a, 1000);   /* the cut bytes must not come back ... */
	truncate_m(&a, MAXI);   /* ... when it grows again */
	write_m(&a, 12, 2000, 10);
	truncate_m(&a, 0);
	truncate_m(&a, 2500);
	model_new(&b, "past");
	write_m(&b, 13, 0, 2000);
	truncate_m(&b, MAXI + 1); /* converted by a truncate */
	write_m(&b, 14, 3000, 50);
	truncate_m(&b, 100);      /* stays in blocks */
	model_new(&c, "otrunc");
	write_m(&c, 15, 0, 3300);
	fd = open(at(c.name), O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	model_size(&c, 0);
	check(&c);
	write_m(&c, 16, 0, 20);
	check(&c);
	ck_assert_int_eq(st_blocks_of(c.name), 8);
	down();
	lib_open();
	expect_inline(a.name, 2500);
	expect_blocks(b.name, 1);
	expect_inline(c.name, 20);
	remount_check(&a, &b, &c, NULL);
}
END_TEST

static void falloc_m(struct model *m, int mode, size_t off, size_t len)
{
	int fd = open(at(m->name), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_msg(fallocate(fd, mode, (off_t)off, (off_t)len) == 0, "%s: fallocate: %s",
		      m->name, strerror(errno));
	close(fd);
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		model_zero(m, off, len);
	if (!(mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE) && off + len > m->size)
		model_size(m, off + len);
	check(m);
}

START_TEST(t_fallocate)
{
	static struct model a, b, c, d;

	fresh(NULL);
	up();
	model_new(&a, "punch");
	write_m(&a, 21, 0, 3500);
	falloc_m(&a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 200);  /* in place */
	falloc_m(&a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 3400, 9000); /* past the end */
	model_new(&b, "reserve");
	write_m(&b, 22, 0, 1000);
	falloc_m(&b, 0, 0, 2000);  /* any other mode converts first */
	write_m(&b, 23, 1500, 100);
	model_new(&c, "keep");
	write_m(&c, 24, 0, 10);
	falloc_m(&c, FALLOC_FL_KEEP_SIZE, 0, 65536);
	model_new(&d, "zero");
	write_m(&d, 25, 0, 3000);
	falloc_m(&d, FALLOC_FL_ZERO_RANGE, 10, 20);
	down();
	lib_open();
	expect_inline(a.name, 3500);
	expect_blocks(b.name, 1);
	expect_blocks(c.name, 16);
	expect_blocks(d.name, 1);
	remount_check(&a, &b, &c, &d);
}
END_TEST

/* Rename over an inline file, and unlink of inline files: the survivor keeps its bytes in its
 * inode, fsck finds nothing left behind. */
START_TEST(t_rename_unlink)
{
	static struct model a;
	int i;

	fresh(NULL);
	up();
	model_new(&a, "new");
	write_m(&a, 31, 0, 1234);
	put("old", 32, 0, 2345, 0);
	ck_assert_int_eq(rename(at("new"), at("old")), 0);
	strcpy(a.name, "old");
	check(&a);
	for (i = 0; i < 50; i++) {
		char n[16];

		snprintf(n, sizeof(n), "gone%d", i);
		put(n, (unsigned)i, 0, (size_t)(i * 71 % MAXI) + 1, 0);
		ck_assert_int_eq(unlink(at(n)), 0);
	}
	down();
	lib_open();
	expect_inline("old", 1234);
	remount_check(&a, NULL, NULL, NULL);
}
END_TEST

/* A filesystem without the feature (mkfs stamped as revision 3, before inline data): new
 * small files go to blocks as they always did, and read back. */
START_TEST(t_old_feature_image)
{
	static struct model a;

	fresh("--revision 3:2 --features 0:0:0");
	up();
	model_new(&a, "small");
	write_m(&a, 41, 0, 100);
	write_m(&a, 42, 100, 100);
	truncate_m(&a, 50);
	down();
	lib_open();
	ck_assert_uint_eq(lib_fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_INLINE_DATA, 0);
	expect_blocks(a.name, 1);
	remount_check(&a, NULL, NULL, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inline");
	TCase *tc = tcase_create("inline");

	if (tu_fuse_missing())
		return 77;
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_many_small_files);
	tcase_add_test(tc, t_boundary);
	tcase_add_test(tc, t_truncate);
	tcase_add_test(tc, t_fallocate);
	tcase_add_test(tc, t_rename_unlink);
	tcase_add_test(tc, t_old_feature_image);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
