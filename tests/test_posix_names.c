/*
 * test_posix_names.c - the namespace, through the mounted daemon: directories and their link
 * counts, rename in all its forms (over files, links and directories, NOREPLACE, EXCHANGE,
 * loops), hard links, symlinks up to PATH_MAX, special files, name lengths, 100k entries in one
 * directory, more directories than the daemon caches, and readdir cookies while entries come
 * and go. Part of test_posix (test_posix.c).
 */
#include "posix_testutil.h"
#include "format.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- directories ------------------------------------------------------------------------ */

START_TEST(t_dirs)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int seen = 0;

	OK(mkdir(P("d"), 0755));
	FAILS(mkdir(P("d"), 0755), EEXIST);
	st = lst(P("d"));
	ck_assert_int_eq(st.st_mode, S_IFDIR | 0755);
	ck_assert_int_eq(st.st_nlink, 2);
	OK(mkdir(P("d/s1"), 0700));
	OK(mkdir(P("d/s2"), 0755));
	ck_assert_int_eq(lst(P("d")).st_nlink, 4);
	put_file(P("d/f"), "x", 1, 0644);
	ck_assert_int_eq(lst(P("d")).st_nlink, 4);
	/* st_blocks counts the entries' block from the start: a checkpoint writing it must not
	 * change what the kernel may keep for a day */
	st = lst(P("d"));
	ck_assert_int_gt(st.st_blocks, 0);
	fs_sync();
	ck_assert_int_eq(lst(P("d")).st_blocks, st.st_blocks);
	FAILS(rmdir(P("d")), ENOTEMPTY);
	FAILS(rmdir(P("d/f")), ENOTDIR);
	FAILS(unlink(P("d/s1")), EISDIR);
	FAILS(rmdir(P("d/nope")), ENOENT);
	FAILS(unlink(P("d/nope")), ENOENT);
	FAILS(mkdir(P("d/f/x"), 0755), ENOTDIR);
	FAILS(mkdir(P("d/nope/x"), 0755), ENOENT);
	FAILS(rmdir(P("d/s2/.")), EINVAL);
	OK(rmdir(P("d/s1")));
	FAILS(lstat(P("d/s1"), &st), ENOENT);
	ck_assert_int_eq(lst(P("d")).st_nlink, 3);

	d = opendir(P("d"));
	ck_assert_ptr_nonnull(d);
	while ((e = rd_next(d))) {
		if (!strcmp(e->d_name, ".")) {
			ck_assert_int_eq(e->d_ino, lst(P("d")).st_ino);
			seen |= 1;
		} else if (!strcmp(e->d_name, "..")) {
			ck_assert_int_eq(e->d_ino, lst(g_mnt).st_ino);
			seen |= 2;
		} else if (!strcmp(e->d_name, "s2")) {
			ck_assert_int_eq(e->d_type, DT_DIR);
			ck_assert_int_eq(e->d_ino, lst(P("d/s2")).st_ino);
			seen |= 4;
		} else if (!strcmp(e->d_name, "f")) {
			ck_assert_int_eq(e->d_type, DT_REG);
			ck_assert_int_eq(e->d_ino, lst(P("d/f")).st_ino);
			seen |= 8;
		} else {
			ck_abort_msg("unexpected entry %s", e->d_name);
		}
	}
	closedir(d);
	ck_assert_int_eq(seen, 15);
	/* ".." of a subdirectory is its parent. */
	ck_assert_int_eq(lst(P("d/s2/..")).st_ino, lst(P("d")).st_ino);
	OK(unlink(P("d/f")));
	OK(rmdir(P("d/s2")));
	ck_assert_int_eq(lst(P("d")).st_nlink, 2);
	OK(rmdir(P("d")));
	FAILS(lstat(P("d"), &st), ENOENT);
	/* Kept for the persistence checks: a small tree. */
	OK(mkdir(P("keep"), 0750));
	OK(mkdir(P("keep/sub"), 0700));
	put_file(P("keep/sub/file"), "persist me", 10, 0640);
}
END_TEST

/* ---- rename --------------------------------------------------------------------------------- */

START_TEST(t_rename)
{
	struct stat st, st2;
	char buf[8];
	int fd;

	OK(mkdir(P("r"), 0755));
	/* file over file: the old target loses its last name but stays readable while open */
	put_file(P("r/a"), "AAAA", 4, 0644);
	put_file(P("r/b"), "BBBB", 4, 0600);
	st = lst(P("r/a"));
	fd = xopen(P("r/b"), O_RDONLY, 0);
	OK(rename(P("r/a"), P("r/b")));
	FAILS(lstat(P("r/a"), &st2), ENOENT);
	st2 = lst(P("r/b"));
	ck_assert_int_eq(st2.st_ino, st.st_ino);
	ck_assert_int_eq(st2.st_mode, S_IFREG | 0644);
	expect_content(P("r/b"), "AAAA", 4);
	ck_assert_int_eq(fstat(fd, &st2), 0);
	ck_assert_int_eq(st2.st_nlink, 0);
	ck_assert_int_eq(pread(fd, buf, 8, 0), 4);
	ck_assert(!memcmp(buf, "BBBB", 4));
	close(fd);

	/* over one of two hard links: the other name keeps the inode */
	put_file(P("r/h"), "HHHH", 4, 0644);
	OK(link(P("r/h"), P("r/h2")));
	put_file(P("r/n"), "NNNN", 4, 0644);
	OK(rename(P("r/n"), P("r/h")));
	expect_content(P("r/h"), "NNNN", 4);
	expect_content(P("r/h2"), "HHHH", 4);
	ck_assert_int_eq(lst(P("r/h2")).st_nlink, 1);
	ck_assert_int_eq(lst(P("r/h")).st_nlink, 1);

	/* directory over an empty directory */
	OK(mkdir(P("r/d1"), 0755));
	OK(mkdir(P("r/d2"), 0700));
	put_file(P("r/d1/in"), "in", 2, 0644);
	ck_assert_int_eq(lst(P("r")).st_nlink, 4);
	OK(rename(P("r/d1"), P("r/d2")));
	FAILS(lstat(P("r/d1"), &st), ENOENT);
	ck_assert_int_eq(lst(P("r/d2")).st_mode, S_IFDIR | 0755);
	expect_content(P("r/d2/in"), "in", 2);
	ck_assert_int_eq(lst(P("r")).st_nlink, 3);

	/* into another directory, file and directory */
	OK(rename(P("r/b"), P("r/d2/b")));
	expect_content(P("r/d2/b"), "AAAA", 4);
	OK(mkdir(P("r/p1"), 0755));
	OK(mkdir(P("r/p2"), 0755));
	OK(mkdir(P("r/p1/moved"), 0755));
	OK(rename(P("r/p1/moved"), P("r/p2/moved")));
	ck_assert_int_eq(lst(P("r/p1")).st_nlink, 2);
	ck_assert_int_eq(lst(P("r/p2")).st_nlink, 3);
	ck_assert_int_eq(lst(P("r/p2/moved/..")).st_ino, lst(P("r/p2")).st_ino);
	{
		ino_t dot, dotdot;

		subdirs(P("r/p2/moved"), &dot, &dotdot);
		ck_assert_int_eq(dotdot, lst(P("r/p2")).st_ino); /* readdir's view, not the dcache's */
	}

	/* RENAME_NOREPLACE */
	put_file(P("r/x"), "x", 1, 0644);
	put_file(P("r/y"), "y", 1, 0644);
	FAILS(renameat2(AT_FDCWD, P("r/x"), AT_FDCWD, P("r/y"), RENAME_NOREPLACE), EEXIST);
	expect_content(P("r/x"), "x", 1);
	expect_content(P("r/y"), "y", 1);
	OK(renameat2(AT_FDCWD, P("r/x"), AT_FDCWD, P("r/z"), RENAME_NOREPLACE));
	expect_content(P("r/z"), "x", 1);

	/* RENAME_EXCHANGE: file<->file, then file<->directory across parents */
	OK(renameat2(AT_FDCWD, P("r/y"), AT_FDCWD, P("r/z"), RENAME_EXCHANGE));
	expect_content(P("r/z"), "y", 1);
	expect_content(P("r/y"), "x", 1);
	FAILS(renameat2(AT_FDCWD, P("r/y"), AT_FDCWD, P("r/none"), RENAME_EXCHANGE), ENOENT);
	FAILS(renameat2(AT_FDCWD, P("r/y"), AT_FDCWD, P("r/z"), RENAME_EXCHANGE | RENAME_NOREPLACE),
	      EINVAL);
	put_file(P("r/p1/f"), "file", 4, 0644);
	OK(mkdir(P("r/p2/dd"), 0755));
	put_file(P("r/p2/dd/child"), "child", 5, 0644);
	OK(renameat2(AT_FDCWD, P("r/p1/f"), AT_FDCWD, P("r/p2/dd"), RENAME_EXCHANGE));
	ck_assert(S_ISDIR(lst(P("r/p1/f")).st_mode));
	expect_content(P("r/p1/f/child"), "child", 5);
	expect_content(P("r/p2/dd"), "file", 4);
	ck_assert_int_eq(lst(P("r/p1")).st_nlink, 3);
	ck_assert_int_eq(lst(P("r/p2")).st_nlink, 3); /* "moved" is still there */
	ck_assert_int_eq(lst(P("r/p1/f/..")).st_ino, lst(P("r/p1")).st_ino);
	{
		ino_t dot, dotdot;

		subdirs(P("r/p1/f"), &dot, &dotdot);
		ck_assert_int_eq(dotdot, lst(P("r/p1")).st_ino);
	}

	/* loops and type mismatches */
	OK(mkdir(P("r/top"), 0755));
	OK(mkdir(P("r/top/sub"), 0755));
	FAILS(rename(P("r/top"), P("r/top/sub/x")), EINVAL);
	FAILS(rename(P("r/top"), P("r/top/x")), EINVAL);
	FAILS(renameat2(AT_FDCWD, P("r/top"), AT_FDCWD, P("r/top/sub"), RENAME_EXCHANGE), EINVAL);
	OK(mkdir(P("r/e"), 0755));
	FAILS(rename(P("r/e"), P("r/top")), ENOTEMPTY);
	FAILS(rename(P("r/y"), P("r/e")), EISDIR);
	FAILS(rename(P("r/e"), P("r/y")), ENOTDIR);
	FAILS(rename(P("r/none"), P("r/none2")), ENOENT);
	FAILS(rename(P("r/y"), P("r/%s", long_name('q', 256))), ENAMETOOLONG);
	/* renaming onto itself or onto another link of the same inode changes nothing */
	OK(rename(P("r/y"), P("r/y")));
	OK(link(P("r/y"), P("r/y2")));
	OK(rename(P("r/y"), P("r/y2")));
	ck_assert_int_eq(lst(P("r/y")).st_nlink, 2);
	ck_assert_int_eq(lst(P("r/y2")).st_ino, lst(P("r/y")).st_ino);
	OK(unlink(P("r/y2")));
	/* a directory over an empty one in another parent: both link counts */
	OK(mkdir(P("r/p1/victim"), 0755));
	ck_assert_int_eq(lst(P("r/p1")).st_nlink, 4);
	OK(rename(P("r/p2/moved"), P("r/p1/victim")));
	ck_assert_int_eq(lst(P("r/p1")).st_nlink, 4);
	ck_assert_int_eq(lst(P("r/p2")).st_nlink, 2);
	ck_assert_int_eq(lst(P("r/p1/victim/..")).st_ino, lst(P("r/p1")).st_ino);
}
END_TEST

/* ---- hard links, symlinks, special files ------------------------------------------------- */

static void check_symlink(const char *path, size_t len)
{
	char *t = malloc(len + 1), got[PATH_MAX + 16];
	size_t i;
	ssize_t n;

	for (i = 0; i < len; i++) /* components of 100 'a'..'z' separated by '/' */
		t[i] = i % 101 == 100 ? '/' : (char)('a' + i % 26);
	t[len] = 0;
	OK(symlink(t, path));
	ck_assert_int_eq(lst(path).st_size, (off_t)len);
	ck_assert(S_ISLNK(lst(path).st_mode));
	n = readlink(path, got, sizeof(got));
	ck_assert_int_eq(n, (ssize_t)len);
	ck_assert(!memcmp(got, t, len));
	/* a short buffer is filled, not overrun */
	memset(got, '#', 16);
	ck_assert_int_eq(readlink(path, got, 10), len < 10 ? (ssize_t)len : 10);
	ck_assert(!memcmp(got, t, len < 10 ? len : 10));
	ck_assert_int_eq(got[10], '#');
	free(t);
}

START_TEST(t_links)
{
	struct stat st;
	char buf[64];
	int fd;

	OK(mkdir(P("l"), 0755));
	OK(mkdir(P("l/other"), 0755));
	put_file(P("l/f"), "linked", 6, 0644);
	OK(link(P("l/f"), P("l/f2")));
	OK(link(P("l/f"), P("l/other/f3")));
	st = lst(P("l/f"));
	ck_assert_int_eq(st.st_nlink, 3);
	ck_assert_int_eq(lst(P("l/f2")).st_ino, st.st_ino);
	ck_assert_int_eq(lst(P("l/other/f3")).st_ino, st.st_ino);
	FAILS(link(P("l/f"), P("l/f2")), EEXIST);
	FAILS(link(P("l/other"), P("l/dirlink")), EPERM);
	FAILS(link(P("l/none"), P("l/x")), ENOENT);
	FAILS(link(P("l/f"), P("l/%s", long_name('k', 256))), ENAMETOOLONG);
	OK(unlink(P("l/f")));
	ck_assert_int_eq(lst(P("l/f2")).st_nlink, 2);
	expect_content(P("l/other/f3"), "linked", 6);
	OK(link(P("l/f2"), P("l/f")));
	ck_assert_int_eq(lst(P("l/f")).st_nlink, 3);

	/* symlinks: short (inline), around the inline limit, 4000 bytes, the maximum */
	OK(symlink("f2", P("l/rel")));
	ck_assert_int_eq(readlink(P("l/rel"), buf, sizeof(buf)), 2);
	expect_content(P("l/rel"), "linked", 6);
	ck_assert_int_eq(lst(P("l/rel")).st_mode, S_IFLNK | 0777);
	OK(symlink("does/not/exist", P("l/dangling")));
	FAILS(open(P("l/dangling"), O_RDONLY), ENOENT);
	FAILS(symlink("x", P("l/rel")), EEXIST);
	FAILS(readlink(P("l/f"), buf, sizeof(buf)), EINVAL);
	check_symlink(P("l/s1"), 1);
	check_symlink(P("l/s_inline"), ZLFS_INLINE_MAX);
	check_symlink(P("l/s_inline1"), ZLFS_INLINE_MAX + 1);
	check_symlink(P("l/s4000"), 4000);
	check_symlink(P("l/s4095"), PATH_MAX - 1);
	{
		char *t = malloc(PATH_MAX + 1);

		memset(t, 'x', PATH_MAX);
		t[PATH_MAX] = 0;
		FAILS(symlink(t, P("l/s4096")), ENAMETOOLONG);
		free(t);
	}
	FAILS(symlink("x", P("l/%s", long_name('s', 256))), ENAMETOOLONG);

	/* loops */
	OK(symlink("loop2", P("l/loop1")));
	OK(symlink("loop1", P("l/loop2")));
	OK(symlink("self", P("l/self")));
	FAILS(open(P("l/loop1"), O_RDONLY), ELOOP);
	FAILS(open(P("l/self"), O_RDONLY), ELOOP);
	FAILS(open(P("l/loop1/x"), O_RDONLY), ELOOP);
	FAILS(open(P("l/rel"), O_RDONLY | O_NOFOLLOW), ELOOP);
	/* lchown changes the link itself */
	OK(lchown(P("l/rel"), 321, 654));
	ck_assert_int_eq(lst(P("l/rel")).st_uid, 321);
	ck_assert_int_eq(lst(P("l/f2")).st_uid, 0);

	/* special files */
	OK(mkfifo(P("l/fifo"), 0640));
	ck_assert_int_eq(lst(P("l/fifo")).st_mode, S_IFIFO | 0640);
	fd = open(P("l/fifo"), O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(fd, 0);
	{
		int w = xopen(P("l/fifo"), O_WRONLY | O_NONBLOCK, 0);

		ck_assert_int_eq(write(w, "pipe", 4), 4);
		ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
		ck_assert(!memcmp(buf, "pipe", 4));
		close(w);
	}
	close(fd);
	OK(mknod(P("l/sock"), S_IFSOCK | 0600, 0));
	ck_assert_int_eq(lst(P("l/sock")).st_mode, S_IFSOCK | 0600);
	OK(mknod(P("l/chr"), S_IFCHR | 0620, makedev(1, 3)));
	st = lst(P("l/chr"));
	ck_assert_int_eq(st.st_mode, S_IFCHR | 0620);
	ck_assert_int_eq(major(st.st_rdev), 1);
	ck_assert_int_eq(minor(st.st_rdev), 3);
	OK(mknod(P("l/blk"), S_IFBLK | 0660, makedev(259, 65539)));
	st = lst(P("l/blk"));
	ck_assert_int_eq(st.st_mode, S_IFBLK | 0660);
	ck_assert_int_eq(st.st_rdev, makedev(259, 65539));
	OK(mknod(P("l/reg"), S_IFREG | 0604, 0));
	ck_assert_int_eq(lst(P("l/reg")).st_mode, S_IFREG | 0604);
	FAILS(mknod(P("l/reg"), S_IFREG | 0604, 0), EEXIST);
	/* a real socket bound in the filesystem */
	{
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		int s = socket(AF_UNIX, SOCK_DGRAM, 0), c = socket(AF_UNIX, SOCK_DGRAM, 0);

		if (strlen(P("l/bound")) < sizeof(a.sun_path)) {
			strcpy(a.sun_path, P("l/bound"));
			OK(bind(s, (struct sockaddr *)&a, sizeof(a)));
			ck_assert(S_ISSOCK(lst(P("l/bound")).st_mode));
			OK(sendto(c, "dgram", 5, 0, (struct sockaddr *)&a, sizeof(a)));
			ck_assert_int_eq(recv(s, buf, sizeof(buf), 0), 5);
			OK(unlink(P("l/bound")));
		} else {
			fprintf(stderr, "note: mount path too long for a bound socket test\n");
		}
		close(s);
		close(c);
	}
}
END_TEST

/* ---- name length ----------------------------------------------------------------------------- */

START_TEST(t_names)
{
	char *n255 = long_name('m', 255), *n256 = long_name('m', 256), name[300];
	struct dirent *e;
	struct stat st;
	unsigned char seen[256] = {0};
	DIR *d;
	int fd, len;

	OK(mkdir(P("n"), 0755));
	fd = xopen(P("n/%s", n255), O_CREAT | O_EXCL | O_WRONLY, 0644);
	close(fd);
	ck_assert_int_eq(lst(P("n/%s", n255)).st_size, 0);
	FAILS(open(P("n/%s", n256), O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	FAILS(lstat(P("n/%s", n256), &st), ENAMETOOLONG);
	FAILS(mkdir(P("n/%s", n256), 0755), ENAMETOOLONG);
	FAILS(mknod(P("n/%s", n256), S_IFIFO | 0644, 0), ENAMETOOLONG);
	FAILS(rename(P("n/%s", n255), P("n/%s", n256)), ENAMETOOLONG);
	OK(unlink(P("n/%s", n255)));
	OK(mkdir(P("n/%s", n255), 0755));
	OK(rmdir(P("n/%s", n255)));

	/* every length 1..255 in one directory (names take 1..32 dentry slots) plus odd bytes */
	OK(mkdir(P("n/all"), 0755));
	for (len = 1; len <= 255; len++) {
		memset(name, 'a' + len % 26, (size_t)len);
		name[0] = (char)('A' + len % 26);
		name[len - 1] = (char)(0x80 + len % 100); /* not UTF-8: names are bytes */
		name[len] = 0;
		if (len == 1)
			name[0] = 'Z';
		put_file(P("n/all/%s", name), &len, sizeof(len), 0644);
	}
	OK(mkdir(P("n/all/with space\tand\nnewline"), 0755));
	d = opendir(P("n/all"));
	ck_assert_ptr_nonnull(d);
	while ((e = rd_next(d))) {
		size_t l = strlen(e->d_name);

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!strcmp(e->d_name, "with space\tand\nnewline")) {
			seen[0]++;
			continue;
		}
		ck_assert_int_ge(l, 1);
		ck_assert_int_le(l, 255);
		seen[l]++;
		{
			int v = 0;
			int f = xopen(P("n/all/%s", e->d_name), O_RDONLY, 0);

			ck_assert_int_eq(read(f, &v, sizeof(v)), sizeof(v));
			ck_assert_int_eq(v, (int)l);
			close(f);
		}
	}
	closedir(d);
	for (len = 0; len <= 255; len++)
		ck_assert_msg(seen[len] == 1, "name of length %d seen %d times", len, seen[len]);
	/* remove every other one; the rest must still be found by name */
	for (len = 2; len <= 255; len += 2) {
		memset(name, 'a' + len % 26, (size_t)len);
		name[0] = (char)('A' + len % 26);
		name[len - 1] = (char)(0x80 + len % 100);
		name[len] = 0;
		OK(unlink(P("n/all/%s", name)));
	}
	for (len = 1; len <= 255; len += 2) {
		memset(name, 'a' + len % 26, (size_t)len);
		name[0] = (char)('A' + len % 26);
		name[len - 1] = (char)(0x80 + len % 100);
		name[len] = 0;
		if (len == 1)
			name[0] = 'Z';
		ck_assert_int_eq(lst(P("n/all/%s", name)).st_size, sizeof(int));
	}
}
END_TEST

/* ---- 100k entries in one directory --------------------------------------------------------- */

#define MANY 100000

/* Readdir the directory and require exactly MANY distinct f<number> names. */
static void many_readdir(const char *dir)
{
	uint8_t *seen = calloc(MANY, 1);
	struct dirent *e;
	DIR *d = opendir(dir);
	long count = 0, dups = 0, bad = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = rd_next(d))) {
		char *end;
		long i;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		i = e->d_name[0] == 'f' ? strtol(e->d_name + 1, &end, 10) : -1;
		if (i < 0 || i >= MANY || *end) {
			bad++;
			continue;
		}
		dups += seen[i]++ > 0;
		count++;
	}
	closedir(d);
	free(seen);
	ck_assert_int_eq(bad, 0);
	ck_assert_int_eq(dups, 0);
	ck_assert_int_eq(count, MANY);
}

START_TEST(t_many)
{
	char name[32];
	struct stat st;
	double t0, t;
	int dfd, i;
	ino_t *inos = malloc(MANY * sizeof(*inos));

	OK(mkdir(P("many"), 0755));
	dfd = xopen(P("many"), O_RDONLY | O_DIRECTORY, 0);
	t0 = now_s();
	for (i = 0; i < MANY; i++) {
		int fd;

		snprintf(name, sizeof(name), "f%d", i);
		fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
		ck_assert_msg(fd >= 0, "create %s: %s", name, ename(errno));
		close(fd);
		if (i == MANY / 2) /* a checkpoint in the middle flushes the dentry cache */
			ck_assert_int_eq(fsync(dfd), 0);
	}
	t = now_s() - t0;
	printf("100k: create %.2f s (%.0f/s)\n", t, MANY / t);
	st = lst(P("many"));
	ck_assert_int_eq(st.st_nlink, 2);
	t0 = now_s();
	for (i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_msg(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, "stat %s: %s", name,
			      ename(errno));
		ck_assert_int_eq(st.st_mode, S_IFREG | 0644);
		inos[i] = st.st_ino;
	}
	t = now_s() - t0;
	printf("100k: stat %.2f s (%.0f/s)\n", t, MANY / t);
	t0 = now_s();
	many_readdir(P("many"));
	printf("100k: readdir %.2f s\n", now_s() - t0);
	close(dfd);

	/* again from the disk: remount, then cold lookups and readdir */
	t0 = now_s();
	remount();
	printf("100k: remount %.2f s\n", now_s() - t0);
	dfd = xopen(P("many"), O_RDONLY | O_DIRECTORY, 0);
	t0 = now_s();
	many_readdir(P("many"));
	printf("100k: readdir after remount %.2f s\n", now_s() - t0);
	t0 = now_s();
	for (i = 0; i < MANY; i += 7) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_msg(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, "stat %s: %s", name,
			      ename(errno));
		ck_assert_int_eq(st.st_ino, inos[i]);
	}
	FAILS(fstatat(dfd, "f100000", &st, 0), ENOENT);
	printf("100k: stat of every 7th after remount %.2f s\n", now_s() - t0);
	t0 = now_s();
	for (i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_msg(unlinkat(dfd, name, 0) == 0, "unlink %s: %s", name, ename(errno));
	}
	t = now_s() - t0;
	printf("100k: unlink %.2f s (%.0f/s)\n", t, MANY / t);
	close(dfd);
	{
		DIR *d = opendir(P("many"));
		struct dirent *e;
		int n = 0;

		ck_assert_ptr_nonnull(d);
		while ((e = rd_next(d)))
			n++;
		closedir(d);
		ck_assert_int_eq(n, 2);
	}
	OK(rmdir(P("many")));
	fflush(stdout);
	free(inos);
}
END_TEST

/* ---- many directories: more directory blocks than the daemon caches ------------------- */

#define MDIRS 5000

static void manydirs_verify(void)
{
	char want[16];
	int i;

	ck_assert_int_eq(lst(P("md")).st_nlink, 2 + MDIRS);
	for (i = 0; i < MDIRS; i += 1) {
		int n = snprintf(want, sizeof(want), "%d", i);

		expect_content(P("md/d%d/f", i), want, (size_t)n);
		ck_assert_int_eq(lst(P("md/d%d", i)).st_nlink, 2);
	}
}

START_TEST(t_manydirs)
{
	struct statvfs s0;
	double t0 = now_s();
	char buf[16];
	int i;

	fs_sync();
	s0 = vfs();
	OK(mkdir(P("md"), 0755));
	for (i = 0; i < MDIRS; i++) {
		int n = snprintf(buf, sizeof(buf), "%d", i);

		OK(mkdir(P("md/d%d", i), 0755));
		put_file(P("md/d%d/f", i), buf, (size_t)n, 0644);
	}
	printf("dirs: %d directories with a file each: %.2f s\n", MDIRS, now_s() - t0);
	manydirs_verify();
	remount();
	manydirs_verify();
	t0 = now_s();
	ck_assert_int_eq(tu_sh(TMO "rm -rf '%s'", P("md")), 0);
	printf("dirs: rm -rf %.2f s\n", now_s() - t0);
	{
		struct stat st;

		FAILS(lstat(P("md"), &st), ENOENT);
	}
	t0 = now_s();
	while (vfs().f_ffree != s0.f_ffree && now_s() - t0 < 10) {
		sleep_ms(50);
		fs_sync();
	}
	ck_assert_uint_eq(vfs().f_ffree, s0.f_ffree);
}
END_TEST

/* ---- readdir cookies stay valid while entries come and go ----------------------------- */

#define SD_N 600

static int sd_index(const char *name)
{
	return name[0] == 'e' ? atoi(name + 1) : -1;
}

START_TEST(t_seekdir)
{
	int seen[2 * SD_N] = {0}, deleted[2 * SD_N] = {0}, i, n = 0, first_after = -1;
	long pos;
	struct dirent *e;
	DIR *d;

	OK(mkdir(P("sd"), 0755));
	for (i = 0; i < SD_N; i++)
		put_file(P("sd/e%d", i), "", 0, 0644);
	d = opendir(P("sd"));
	ck_assert_ptr_nonnull(d);
	while (n < SD_N / 3 && (e = rd_next(d)))
		if ((i = sd_index(e->d_name)) >= 0)
			seen[i]++, n++;
	pos = telldir(d);
	/* remember what comes next, then reopen at the cookie: the same entry follows */
	e = rd_next(d);
	ck_assert_ptr_nonnull(e);
	first_after = sd_index(e->d_name);
	seekdir(d, pos);
	e = rd_next(d);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(sd_index(e->d_name), first_after);
	{
		DIR *d2 = opendir(P("sd"));

		seekdir(d2, pos);
		e = rd_next(d2);
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(sd_index(e->d_name), first_after);
		closedir(d2);
	}
	/* between telldir and seekdir: add entries, delete some read and some not yet read */
	for (i = SD_N; i < 2 * SD_N; i++)
		put_file(P("sd/e%d", i), "", 0, 0644);
	for (i = 0; i < SD_N; i += 3) {
		OK(unlink(P("sd/e%d", i)));
		deleted[i] = 1;
	}
	seekdir(d, pos);
	while ((e = rd_next(d))) {
		if ((i = sd_index(e->d_name)) < 0)
			continue;
		ck_assert_msg(!deleted[i], "deleted entry e%d returned after seekdir", i);
		seen[i]++;
	}
	closedir(d);
	for (i = 0; i < SD_N; i++) /* every survivor exactly once over both halves */
		ck_assert_msg(deleted[i] ? seen[i] <= 1 : seen[i] == 1, "entry e%d seen %d times", i,
			      seen[i]);
	for (i = SD_N; i < 2 * SD_N; i++)
		ck_assert_msg(seen[i] <= 1, "new entry e%d seen %d times", i, seen[i]);
	/* a fresh pass sees exactly the current entries */
	memset(seen, 0, sizeof(seen));
	d = opendir(P("sd"));
	while ((e = rd_next(d)))
		if ((i = sd_index(e->d_name)) >= 0)
			seen[i]++;
	closedir(d);
	for (i = 0; i < 2 * SD_N; i++)
		ck_assert_msg(seen[i] == !deleted[i], "e%d seen %d times in a fresh pass", i, seen[i]);
}
END_TEST

/* RENAME_WHITEOUT leaves a character device 0:0 at the old name, as overlayfs's upper layer
 * needs (issue 35, item 8); then overlayfs itself with its upper layer here. */
START_TEST(t_rename_whiteout)
{
	char lower[] = "/tmp/zlfs-ovl-lower-XXXXXX", ovl[] = "/tmp/zlfs-ovl-XXXXXX", lf[300];
	struct stat st;

	OK(mkdir(P("wo"), 0755));
	put_file(P("wo/a"), "aaa", 3, 0644);
	put_file(P("wo/b"), "bbb", 3, 0644);
	OK(renameat2(AT_FDCWD, P("wo/a"), AT_FDCWD, P("wo/c"), RENAME_WHITEOUT));
	st = lst(P("wo/a"));
	ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
	expect_content(P("wo/c"), "aaa", 3);
	/* over an existing name, whose inode goes */
	OK(renameat2(AT_FDCWD, P("wo/c"), AT_FDCWD, P("wo/b"), RENAME_WHITEOUT));
	ck_assert(S_ISCHR(lst(P("wo/c")).st_mode));
	expect_content(P("wo/b"), "aaa", 3);
	/* NOREPLACE with an existing target changes nothing; EXCHANGE does not mix with it */
	FAILS(renameat2(AT_FDCWD, P("wo/b"), AT_FDCWD, P("wo/a"),
			RENAME_WHITEOUT | RENAME_NOREPLACE), EEXIST);
	expect_content(P("wo/b"), "aaa", 3);
	FAILS(renameat2(AT_FDCWD, P("wo/b"), AT_FDCWD, P("wo/a"),
			RENAME_WHITEOUT | RENAME_EXCHANGE), EINVAL);
	OK(unlink(P("wo/a")));
	OK(unlink(P("wo/c")));

	ck_assert(mkdtemp(lower) && mkdtemp(ovl));
	snprintf(lf, sizeof(lf), "%s/low", lower);
	put_file(lf, "low", 3, 0644);
	OK(mkdir(P("wo/up"), 0755));
	OK(mkdir(P("wo/work"), 0755));
	{
		char opts[3 * PATH_MAX];

		snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,", lower, P("wo/up"));
		snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts), "workdir=%s",
			 P("wo/work"));
		if (mount("overlay", ovl, "overlay", 0, opts)) {
			printf("t_rename_whiteout: no overlayfs here (%s): its part skipped\n",
			       ename(errno));
		} else {
			snprintf(lf, sizeof(lf), "%s/low", ovl);
			expect_content(lf, "low", 3);
			OK(unlink(lf)); /* a whiteout in the upper layer hides the lower file */
			ck_assert(lstat(lf, &st) == -1 && errno == ENOENT);
			ck_assert(S_ISCHR(lst(P("wo/up/low")).st_mode));
			OK(umount(ovl));
		}
	}
	snprintf(lf, sizeof(lf), "%s/low", lower);
	OK(unlink(lf));
	OK(rmdir(lower));
	OK(rmdir(ovl));
}
END_TEST

int posix_names_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_dirs;
	t[n++] = t_rename;
	t[n++] = t_rename_whiteout;
	t[n++] = t_links;
	t[n++] = t_names;
	t[n++] = t_many;
	t[n++] = t_manydirs;
	t[n++] = t_seekdir;
	return n;
}
