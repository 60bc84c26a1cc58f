/*
 * test_posix_persist.c - what survives, through the mounted daemon: the whole tree across clean
 * remounts (a manifest before and after), a read-only mount, real tools (cp -a, tar, git clone)
 * compared with their sources, a final remount that checks everything the earlier tests left,
 * fsync'ed data across a daemon kill, a clean unmount, and a full filesystem: ENOSPC, then
 * room again after deleting; file handles that outlive the kernel's caches. Part of test_posix
 * (test_posix.c).
 */
#include "posix_testutil.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static char g_src[PATH_MAX]; /* snapshot of a source tree, for cp/tar/git */

/* zlfs -o remount,ro|rw DEVICE MOUNTPOINT, as mount(8)'s helper runs it: its exit status. */
static int remount_in_place(int readonly)
{
	char bin[PATH_MAX];

	return tu_sh("'%s' -o remount,%s '%s' '%s' 2>/dev/null", tu_bin(bin, sizeof(bin), "zlfs"),
		     readonly ? "ro" : "rw", g_img, g_mnt);
}

/* ---- persistence: everything above survives a clean remount --------------------------- */

static struct mf *g_before;

START_TEST(t_remount)
{
	struct mf *after;
	double t0 = now_s();

	g_before = manifest(g_mnt, MF_ALL);
	ck_assert_int_eq(g_before->bad_dirs, 0);
	ck_assert_uint_gt(g_before->n, 150);
	remount();
	printf("remount: %.2f s for %zu entries\n", now_s() - t0, g_before->n);
	after = manifest(g_mnt, MF_ALL);
	ck_assert_msg(mf_diff(g_before, after, "remount") == 0, "the tree changed across a remount");
	ck_assert_int_eq(after->bad_dirs, 0);
	mf_free(after);
	/* spot checks with explicit values */
	expect_content(P("keep/sub/file"), "persist me", 10);
	ck_assert_int_eq(lst(P("keep/sub/file")).st_mode, S_IFREG | 0640);
	ck_assert_int_eq(lst(P("l/s4000")).st_size, 4000);
	ck_assert_int_eq(lst(P("at/f")).st_mtim.tv_sec, 3);
	ck_assert_int_eq(lst(P("at/f")).st_mtim.tv_nsec, 4);
	ck_assert_int_eq(lst(P("l/f")).st_nlink, 3);
	ck_assert_int_eq(lst(P("sg/sub")).st_mode, S_IFDIR | 02755);
	ck_assert_int_eq(lst(P("l/blk")).st_rdev, makedev(259, 65539));
	{
		char v[16];

		ck_assert_int_eq(getxattr(P("x/f"), "trusted.t", v, sizeof(v)), 7);
		ck_assert(!memcmp(v, "trusted", 7));
	}
}
END_TEST

/* ---- read-only mount ---------------------------------------------------------------------- */

START_TEST(t_readonly)
{
	struct statvfs s;
	int fd;

	daemon_stop();
	daemon_start_opts(",ro");
	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	ck_assert(s.f_flag & ST_RDONLY);
	expect_content(P("keep/sub/file"), "persist me", 10);
	FAILS(open(P("keep/new"), O_CREAT | O_WRONLY, 0644), EROFS);
	FAILS(open(P("keep/sub/file"), O_WRONLY), EROFS);
	FAILS(mkdir(P("keep/d"), 0755), EROFS);
	FAILS(unlink(P("keep/sub/file")), EROFS);
	FAILS(rename(P("keep/sub/file"), P("keep/x")), EROFS);
	FAILS(chmod(P("keep/sub/file"), 0600), EROFS);
	FAILS(setxattr(P("keep/sub/file"), "user.x", "x", 1, 0), EROFS);
	FAILS(truncate(P("keep/sub/file"), 0), EROFS);
	fd = xopen(P("keep"), O_RDONLY | O_DIRECTORY, 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	/* a mount made read-only does not become read-write by a remount (the device was opened
	 * read-only): the kernel's mount flips, the daemon refuses, and the flip is undone */
	ck_assert_int_ne(remount_in_place(0), 0);
	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	ck_assert(s.f_flag & ST_RDONLY);
	remount();
	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	ck_assert(!(s.f_flag & ST_RDONLY));
}
END_TEST

/* mount -o remount,ro and back, in place, without a second daemon (issue 35, item 3): what
 * mount(8)'s helper runs. */
START_TEST(t_remount_ro)
{
	struct statvfs s;
	int fd;

	put_file(P("rro"), "before", 6, 0644);
	fd = xopen(P("rro"), O_WRONLY, 0); /* a file open for writing: the kernel says EBUSY */
	ck_assert_int_ne(remount_in_place(1), 0);
	write_all(fd, "still", 5, 0);  /* and the daemon took its read-only switch back */
	close(fd);
	ck_assert_int_eq(remount_in_place(1), 0);
	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	ck_assert(s.f_flag & ST_RDONLY);
	FAILS(open(P("rro2"), O_CREAT | O_WRONLY, 0644), EROFS);
	expect_content(P("rro"), "stille", 6);
	ck_assert_int_eq(remount_in_place(0), 0);
	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	ck_assert(!(s.f_flag & ST_RDONLY));
	put_file(P("rro2"), "after", 5, 0644);
	expect_content(P("rro2"), "after", 5);
	OK(unlink(P("rro2")));
	OK(unlink(P("rro")));
}
END_TEST

/* The device mounted a second time shows the same filesystem (issue 35, item 4): a bind mount
 * of the first, not a second daemon; -o ro makes that view read-only. */
START_TEST(t_second_mount)
{
	char bin[PATH_MAX], second[PATH_MAX], p[PATH_MAX + 16];
	struct statvfs s;

	tu_path(second, sizeof(second), "second");
	ck_assert_int_eq(tu_sh("mkdir -p '%s'", second), 0);
	tu_bin(bin, sizeof(bin), "zlfs");
	put_file(P("sm"), "first", 5, 0644);
	ck_assert_int_eq(tu_sh("'%s' '%s' '%s'", bin, g_img, second), 0);
	snprintf(p, sizeof(p), "%s/sm", second);
	expect_content(p, "first", 5);
	snprintf(p, sizeof(p), "%s/sm2", second);
	put_file(p, "second", 6, 0644);
	expect_content(P("sm2"), "second", 6);
	/* two mounts of one filesystem: rename(2) between them is EXDEV, as on a kernel one */
	FAILS(rename(P("sm"), p), EXDEV);
	ck_assert_int_eq(umount(second), 0);
	ck_assert_int_eq(tu_sh("'%s' -o ro '%s' '%s'", bin, g_img, second), 0);
	ck_assert_int_eq(statvfs(second, &s), 0);
	ck_assert(s.f_flag & ST_RDONLY);
	FAILS(open(p, O_WRONLY), EROFS);
	ck_assert_int_eq(statvfs(g_mnt, &s), 0);
	ck_assert(!(s.f_flag & ST_RDONLY));
	ck_assert_int_eq(umount(second), 0);
	OK(unlink(P("sm")));
	OK(unlink(P("sm2")));
}
END_TEST

/* ---- real tools: cp -a, tar, git clone, compared with their sources --------------------- */

static char g_gitsrc[PATH_MAX], g_tar[PATH_MAX];

/* A private snapshot of real sources (others may edit the originals meanwhile), plus the
 * things source trees rarely have: links, odd modes, an xattr, a fifo, empty files. */
static void make_sources(void)
{
	uint8_t *buf = malloc(1 << 20);

	tu_path(g_src, sizeof(g_src), "src");
	tu_path(g_gitsrc, sizeof(g_gitsrc), "gitsrc");
	tu_path(g_tar, sizeof(g_tar), "src.tar");
	ck_assert_int_eq(tu_sh("rm -rf '%s' '%s' '%s' && mkdir -p '%s/main'", g_src, g_gitsrc,
			       g_tar, g_src), 0);
	ck_assert_int_eq(tu_sh("cd /work/main && cp -a fs mkfs tests docs tools cmake "
			       "CMakeLists.txt README.md '%s/main/' 2>/dev/null; "
			       "cp -a /usr/include/linux '%s/linux'", g_src, g_src), 0);
	ck_assert_int_eq(tu_sh("cd '%s' && ln -s main/fs link_to_fs && ln -s /nonexistent/x dangling"
			       " && ln main/docs/format.md hard_format.md && mkdir -p empty/deeper"
			       " && : > empty_file && printf x > odd && chmod 0751 odd"
			       " && chmod 0700 empty", g_src), 0);
	pat_fill(buf, 1 << 20, 1, 0);
	{
		char p[PATH_MAX + 16];
		int fd;

		snprintf(p, sizeof(p), "%s/random.bin", g_src);
		fd = xopen(p, O_CREAT | O_WRONLY, 0644);
		write_all(fd, buf, 1 << 20, 0);
		close(fd);
		if (setxattr(p, "user.note", "snapshot", 8, 0))
			fprintf(stderr, "note: scratch filesystem has no user xattrs (%s)\n",
				ename(errno));
	}
	free(buf);
	ck_assert_int_eq(tu_sh("cp -a '%s' '%s' && cd '%s' && git init -q && git add -A && "
			       "git -c user.name=zlfs -c user.email=zlfs@test commit -qm snapshot",
			       g_src, g_gitsrc, g_gitsrc), 0);
	ck_assert_int_eq(tu_sh("mkfifo '%s/fifo' && touch -h -d '2001-02-03 04:05:06.123456789' "
			       "'%s/fifo' '%s/link_to_fs'", g_src, g_src, g_src), 0);
	ck_assert_int_eq(tu_sh("tar --format=posix --xattrs --xattrs-include='*' -C '%s/..' "
			       "-cf '%s' src", g_src, g_tar), 0);
}

static void compare_trees(const char *what, const char *src, const char *copy)
{
	struct mf *a = manifest(src, MF_COPY), *b = manifest(copy, MF_COPY);

	ck_assert_uint_gt(a->n, 500);
	ck_assert_msg(mf_diff(a, b, what) == 0, "%s: the copy differs from its source", what);
	ck_assert_int_eq(b->bad_dirs, 0);
	mf_free(a);
	mf_free(b);
	ck_assert_msg(tu_sh(TMO "diff -r --no-dereference -x fifo -x .git '%s' '%s' >&2", src,
			    copy) == 0,
		      "%s: diff -r found differences", what);
}

static void check_tools(void)
{
	compare_trees("cp -a", g_src, P("cpa"));
	compare_trees("tar -x", g_src, P("tarx/src"));
	/* git keeps no empty directories */
	ck_assert_int_eq(tu_sh(TMO "diff -r --no-dereference -x .git -x empty '%s' '%s' >&2",
			       g_gitsrc, P("clone")), 0);
	ck_assert_int_eq(tu_sh("cd '%s' && " TMO "git fsck --full --no-progress >&2 && "
			       "test -z \"$(" TMO "git status --porcelain)\" && "
			       "test \"$(git rev-parse HEAD)\" = \"$(git -C '%s' rev-parse HEAD)\"",
			       P("clone"), g_gitsrc), 0);
}

START_TEST(t_tools)
{
	double t0 = now_s();

	make_sources();
	printf("tools: snapshot %.2f s\n", now_s() - t0);
	t0 = now_s();
	ck_assert_int_eq(tu_sh(TMO "cp -a '%s' '%s'", g_src, P("cpa")), 0);
	printf("tools: cp -a %.2f s\n", now_s() - t0);
	t0 = now_s();
	OK(mkdir(P("tarx"), 0755));
	ck_assert_int_eq(tu_sh(TMO "tar --xattrs --xattrs-include='*' -xpf '%s' -C '%s'", g_tar,
			       P("tarx")), 0);
	printf("tools: tar -x %.2f s\n", now_s() - t0);
	t0 = now_s();
	ck_assert_int_eq(tu_sh(TMO "git clone -q --no-hardlinks '%s' '%s'", g_gitsrc, P("clone")), 0);
	printf("tools: git clone %.2f s\n", now_s() - t0);
	t0 = now_s();
	check_tools();
	printf("tools: compare %.2f s\n", now_s() - t0);
	fflush(stdout);
}
END_TEST

/* ---- everything again after a final remount ---------------------------------------------- */

/* Every line of OLD (but the root's, whose times moved) is still in NEW. */
static void mf_subset(const struct mf *old, const struct mf *cur)
{
	size_t i, missing = 0;

	for (i = 0; i < old->n; i++) {
		if (old->lines[i][0] == '/' && old->lines[i][1] == '|')
			continue;
		if (!bsearch(&old->lines[i], cur->lines, cur->n, sizeof(char *), cmp_str) &&
		    missing++ < 12)
			fprintf(stderr, "changed since the first remount: %s\n", old->lines[i]);
	}
	ck_assert_msg(missing == 0, "%zu entries changed since the first remount", missing);
}

START_TEST(t_final)
{
	struct mf *a = manifest(g_mnt, MF_ALL), *b;

	remount();
	b = manifest(g_mnt, MF_ALL);
	ck_assert_msg(mf_diff(a, b, "final remount") == 0, "the tree changed across a remount");
	ck_assert_int_eq(b->bad_dirs, 0);
	ck_assert_ptr_nonnull(g_before);
	mf_subset(g_before, b);
	mf_free(a);
	mf_free(b);
	sparse_verify();
	ck_assert_ptr_nonnull(g_threads);
	threads_verify(g_threads);
	check_tools();
}
END_TEST

/* ---- fsync survives a daemon kill -------------------------------------------------------- */

START_TEST(t_fsync_kill)
{
	uint8_t *buf = malloc(5 << 20);
	struct mf *a, *b;
	struct statvfs s0, s1;
	int fd, st, ofd;

	pat_fill(buf, 5 << 20, 77, 0);
	OK(mkdir(P("fk"), 0755));
	/* an inode unlinked while open when the daemon dies: freed by the next mount */
	fs_sync();
	s0 = vfs();
	ofd = xopen(P("fk/orphan"), O_CREAT | O_RDWR, 0644);
	write_all(ofd, buf, 4 << 20, 0);
	OK(unlink(P("fk/orphan")));
	fd = xopen(P("fk/synced"), O_CREAT | O_WRONLY, 0640);
	write_all(fd, buf, 5 << 20, 0);
	OK(fsetxattr(fd, "user.k", "kill", 4, 0));
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	/* fsync on a directory makes new names in it durable too */
	OK(mkdir(P("fk/sub"), 0700));
	put_file(P("fk/sub/e"), "", 0, 0600);
	fd = xopen(P("fk/sub"), O_RDONLY | O_DIRECTORY, 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	a = manifest(g_mnt, MF_ALL);
	ck_assert_uint_lt(vfs().f_ffree, s0.f_ffree - 1); /* the orphan and its nodes */
	kill(g_pid, SIGKILL);
	ck_assert_int_eq(waitpid(g_pid, &st, 0), g_pid);
	g_pid = -1;
	close(ofd);
	if (tu_sh("fusermount3 -u '%s' 2>/dev/null", g_mnt))
		ck_assert_int_eq(tu_sh("fusermount3 -uz '%s'", g_mnt), 0);
	daemon_start();
	expect_content(P("fk/synced"), buf, 5 << 20);
	b = manifest(g_mnt, MF_ALL);
	ck_assert_msg(mf_diff(a, b, "kill after fsync") == 0, "fsync'd state lost by a kill");
	expect_content(P("fk/sub/e"), "", 0);
	/* the orphan's inode and nodes are free again; fk/synced holds its inode, its xattr
	 * node and one direct node (5 MiB = 979 blocks in the inode + 301); fk/sub and fk/sub/e
	 * one inode each */
	s1 = vfs();
	ck_assert_uint_eq(s1.f_ffree, s0.f_ffree - 5);
	ck_assert_int_eq(tu_sh("grep -q 'freed 1 inodes unlinked while open' '%s'", g_log), 0);
	mf_free(a);
	mf_free(b);
	free(buf);
}
END_TEST

/* The last test of the big image. */
START_TEST(t_unmount)
{
	stop_and_check_log();
}
END_TEST

/* ---- a full filesystem: ENOSPC, then room again after deleting ------------------------- */

#define FULL_CHUNK (1u << 20)

static int full_write(const char *path, uint64_t seed)
{
	uint8_t *buf = malloc(FULL_CHUNK);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644), err = 0;
	ssize_t n;

	if (fd < 0 && errno == ENOSPC) { /* new files stop once only the GC reserve is left */
		free(buf);
		return ENOSPC;
	}
	ck_assert_int_ge(fd, 0);
	pat_fill(buf, FULL_CHUNK, seed, 0);
	n = pwrite(fd, buf, FULL_CHUNK, 0);
	if (n != (ssize_t)FULL_CHUNK)
		err = n < 0 ? errno : ENOSPC; /* a short write means the space ran out */
	if (close(fd) && !err)
		err = errno;
	free(buf);
	return err;
}

START_TEST(t_enospc)
{
	char path[PATH_MAX];
	struct statvfs s0, s1, s2;
	int n, i, err = 0, fd;
	uint8_t *want = malloc(FULL_CHUNK);

	s0 = vfs();
	OK(mkdir(P("full"), 0755));
	for (n = 0; n < 100000; n++) {
		snprintf(path, sizeof(path), "%s/full/f%d", g_mnt, n);
		if ((err = full_write(path, (uint64_t)n)))
			break;
		if (n % 16 == 15) {
			fd = xopen(P("full"), O_RDONLY | O_DIRECTORY, 0);
			err = fsync(fd) ? errno : 0;
			close(fd);
			if (err)
				break;
		}
	}
	printf("enospc: %d MiB written before %s (%llu blocks were free)\n", n, ename(err),
	       (unsigned long long)s0.f_bfree);
	ck_assert_msg(err == ENOSPC, "a full filesystem reported %s, not ENOSPC", ename(err));
	ck_assert_int_ge(n, (int)(s0.f_bfree * BLK / FULL_CHUNK) * 8 / 10);
	s1 = vfs();
	/* Not exact: statfs also counts what is left in the open zones of the other logs,
	 * which file data cannot use. */
	printf("enospc: statfs says %llu blocks free at ENOSPC\n",
	       (unsigned long long)s1.f_bavail);
	ck_assert_uint_lt(s1.f_bavail, 6 * ZONE_USABLE);
	/* the filesystem still works: reads, metadata, a checkpoint */
	for (i = 0; i < n; i += 7) {
		pat_fill(want, FULL_CHUNK, (uint64_t)i, 0);
		snprintf(path, sizeof(path), "full/f%d", i);
		expect_content(P("%s", path), want, FULL_CHUNK);
	}
	/* delete the first three quarters: the zones they filled come back after a checkpoint
	 * (only whole zones: there is no garbage collection to compact partly used ones) */
	for (i = 0; i <= n * 3 / 4; i++)
		OK(unlink(P("full/f%d", i)));
	fs_sync();
	fs_sync();
	s2 = vfs();
	printf("enospc: %llu blocks free after deleting three quarters\n",
	       (unsigned long long)s2.f_bfree);
	ck_assert_uint_ge(s2.f_bfree + 3 * ZONE_USABLE,
			  s1.f_bfree + (uint64_t)(n * 3 / 4) * (FULL_CHUNK / BLK));
	for (i = 0; i < n / 2; i++) {
		snprintf(path, sizeof(path), "%s/full/g%d", g_mnt, i);
		ck_assert_int_eq(full_write(path, 1000000 + (uint64_t)i), 0);
	}
	remount();
	for (i = n * 3 / 4 + 1; i < n; i++) {
		pat_fill(want, FULL_CHUNK, (uint64_t)i, 0);
		expect_content(P("full/f%d", i), want, FULL_CHUNK);
	}
	for (i = 0; i < n / 2; i++) {
		pat_fill(want, FULL_CHUNK, 1000000 + (uint64_t)i, 0);
		expect_content(P("full/g%d", i), want, FULL_CHUNK);
	}
	free(want);
	stop_and_check_log();
}
END_TEST

/* ---- file handles: open_by_handle_at after the kernel dropped its inodes ----------------
 * What NFS export and backup tools use (issue 35, item 5): a handle names the inode by number
 * and generation, and must open it after the kernel's caches let it go; a freed inode's handle
 * is stale. */
static void drop_inode_caches(void)
{
	int fd = xopen("/proc/sys/vm/drop_caches", O_WRONLY, 0);

	sync();
	ck_assert_int_eq(write(fd, "2", 1), 1); /* dentries and inodes: FUSE forgets them */
	close(fd);
}

static struct file_handle *handle_of(const char *path)
{
	struct file_handle *h = calloc(1, sizeof(*h) + MAX_HANDLE_SZ);
	int mount_id;

	ck_assert(h);
	h->handle_bytes = MAX_HANDLE_SZ;
	ck_assert_msg(!name_to_handle_at(AT_FDCWD, path, h, &mount_id, 0), "name_to_handle_at %s: %s",
		      path, ename(errno));
	return h;
}

START_TEST(t_handles)
{
	struct file_handle *fh, *dh, *gone;
	int mfd, fd;
	char buf[16] = {0};

	OK(mkdir(P("fh"), 0755));
	put_file(P("fh/file"), "handle", 6, 0644);
	put_file(P("fh/gone"), "gone", 4, 0644);
	fh = handle_of(P("fh/file"));
	dh = handle_of(P("fh"));
	gone = handle_of(P("fh/gone"));
	OK(unlink(P("fh/gone")));
	mfd = xopen(g_mnt, O_RDONLY | O_DIRECTORY, 0);
	drop_inode_caches();
	fd = open_by_handle_at(mfd, fh, O_RDONLY);
	ck_assert_msg(fd >= 0, "open_by_handle_at of a file: %s", ename(errno));
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 6);
	ck_assert(!memcmp(buf, "handle", 6));
	close(fd);
	drop_inode_caches();
	fd = open_by_handle_at(mfd, dh, O_RDONLY | O_DIRECTORY); /* and its parent, by ".." */
	ck_assert_msg(fd >= 0, "open_by_handle_at of a directory: %s", ename(errno));
	ck_assert(faccessat(fd, "file", R_OK, 0) == 0);
	close(fd);
	errno = 0;
	ck_assert_msg(open_by_handle_at(mfd, gone, O_RDONLY) == -1 && errno == ESTALE,
		      "a freed inode's handle: %s", ename(errno));
	close(mfd);
	free(fh);
	free(dh);
	free(gone);
}
END_TEST

static int get_flags(const char *path)
{
	int fd = xopen(path, O_RDONLY, 0), flags = -1;

	OK(ioctl(fd, FS_IOC_GETFLAGS, &flags));
	close(fd);
	return flags;
}

static int set_flags(const char *path, int flags)
{
	int fd = xopen(path, O_RDONLY, 0), ret = ioctl(fd, FS_IOC_SETFLAGS, &flags), e = errno;

	close(fd);
	errno = e;
	return ret;
}

/* chattr +i on a file: nothing about it changes, through a descriptor opened before either;
 * and the flags outlive a remount. */
static void chattr_immutable_file(void)
{
	struct timespec now2[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
	int wfd = xopen(P("ci"), O_RDWR, 0);

	OK(set_flags(P("ci"), FS_IMMUTABLE_FL | FS_NODUMP_FL));
	ck_assert_int_eq(get_flags(P("ci")), FS_IMMUTABLE_FL | FS_NODUMP_FL);
	FAILS(pwrite(wfd, "X", 1, 0), EPERM); /* opened before +i: refused as on ext4 */
	close(wfd);
	FAILS(open(P("ci"), O_WRONLY), EPERM);
	FAILS(open(P("ci"), O_WRONLY | O_APPEND), EPERM);
	FAILS(truncate(P("ci"), 0), EPERM);
	FAILS(unlink(P("ci")), EPERM);
	FAILS(rename(P("ci"), P("ci2")), EPERM);
	FAILS(link(P("ci"), P("ci3")), EPERM);
	FAILS(chmod(P("ci"), 0600), EPERM);
	FAILS(utimensat(AT_FDCWD, P("ci"), now2, 0), EPERM);
	FAILS(setxattr(P("ci"), "user.x", "1", 1, 0), EPERM);
	FAILS(set_flags(P("ci"), FS_IMMUTABLE_FL), EPERM); /* +d cannot go while +i stays */
	remount();
	ck_assert_int_eq(get_flags(P("ci")), FS_IMMUTABLE_FL | FS_NODUMP_FL);
	FAILS(unlink(P("ci")), EPERM);
	expect_content(P("ci"), "data", 4);
	OK(set_flags(P("ci"), 0));
}

/* chattr +a on a file: appends only; the times may move to now, nothing else changes. */
static void chattr_append_file(void)
{
	struct timespec now2[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}}, old[2] = {{1, 0}, {1, 0}};
	int fd;

	OK(set_flags(P("ci"), FS_APPEND_FL | FS_NOATIME_FL));
	FAILS(open(P("ci"), O_WRONLY), EPERM);
	FAILS(open(P("ci"), O_WRONLY | O_APPEND | O_TRUNC), EPERM);
	fd = xopen(P("ci"), O_WRONLY | O_APPEND, 0);
	ck_assert_int_eq(write(fd, "more", 4), 4);
	FAILS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4), EPERM);
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8192)); /* reserving room adds nothing */
	close(fd);
	expect_content(P("ci"), "datamore", 8);
	FAILS(truncate(P("ci"), 4), EPERM);
	FAILS(unlink(P("ci")), EPERM);
	FAILS(rename(P("ci"), P("ci2")), EPERM);
	FAILS(utimensat(AT_FDCWD, P("ci"), old, 0), EPERM);
	OK(utimensat(AT_FDCWD, P("ci"), now2, 0)); /* touch */
	FAILS(removexattr(P("ci"), "user.none"), EPERM);
	OK(set_flags(P("ci"), 0));
}

/* On a directory, +i: no name added or removed; +a: names added, none removed. */
static void chattr_dirs(void)
{
	OK(set_flags(P("cid"), FS_IMMUTABLE_FL));
	FAILS(open(P("cid/new"), O_CREAT | O_WRONLY, 0644), EPERM);
	FAILS(mkdir(P("cid/sub"), 0755), EPERM);
	FAILS(unlink(P("cid/g")), EPERM);
	FAILS(rename(P("ci"), P("cid/moved")), EPERM);
	expect_content(P("cid/g"), "g", 1); /* its files' contents are not the directory's */
	OK(set_flags(P("cid"), FS_APPEND_FL));
	put_file(P("cid/new"), "n", 1, 0644);
	FAILS(unlink(P("cid/new")), EPERM);
	FAILS(rename(P("cid/g"), P("g_out")), EPERM);
	OK(rename(P("ci"), P("cid/moved")));
	OK(set_flags(P("cid"), 0));
	OK(unlink(P("cid/new")));
	OK(unlink(P("cid/moved")));
	OK(unlink(P("cid/g")));
	OK(rmdir(P("cid")));
}

/* chattr +i and +a through the daemon, which enforces them as the VFS does for a kernel
 * filesystem (FUSE's inodes carry no S_IMMUTABLE); +d and +A are kept; only root (the holder
 * of CAP_LINUX_IMMUTABLE) may set or clear +i and +a. */
START_TEST(t_chattr)
{
	pid_t pid;
	int st;

	put_file(P("ci"), "data", 4, 0644);
	OK(mkdir(P("cid"), 0755));
	put_file(P("cid/g"), "g", 1, 0644);
	chattr_immutable_file();
	chattr_append_file();
	OK(chown(P("ci"), 65534, 65534));
	pid = fork();
	if (pid == 0) /* the owner, without the capability */
		_exit(setresuid(65534, 65534, 65534) ? 2 :
		      set_flags(P("ci"), FS_IMMUTABLE_FL) == -1 && errno == EPERM ? 0 : 1);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a user set +i: status %d", st);
	ck_assert_int_eq(get_flags(P("ci")), 0);
	chattr_dirs();
}
END_TEST

/* What zlfs refuses is refused as a kernel filesystem without the feature refuses it, and
 * leaves the file as it was (docs/design.md, "Kernel features through FUSE"): inode flags
 * zlfs does not keep (chattr +S, +j: EOPNOTSUPP; t_chattr has the kept ones, test_compress_fs
 * t_chattr +c), O_TMPFILE
 * (libfuse 3.14 has no tmpfile operation) and system.* xattrs other than the POSIX ACLs. */
START_TEST(t_unsupported)
{
	int fd, flags = 0;
	char buf[8] = {0};

	put_file(P("unsup"), "kept", 4, 0644);
	fd = xopen(P("unsup"), O_RDONLY, 0);
	errno = 0;
	flags = -1;
	ck_assert_msg(ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && flags == 0,
		      "FS_IOC_GETFLAGS: %s, flags 0x%x", ename(errno), flags);
	flags = FS_SYNC_FL | FS_JOURNAL_DATA_FL;
	errno = 0;
	ck_assert_msg(ioctl(fd, FS_IOC_SETFLAGS, &flags) == -1 && errno == EOPNOTSUPP,
		      "FS_IOC_SETFLAGS: %s", ename(errno));
	close(fd);
	errno = 0;
	ck_assert_msg(open(g_mnt, O_TMPFILE | O_RDWR, 0600) == -1 && errno == EOPNOTSUPP,
		      "O_TMPFILE: %s", ename(errno));
	errno = 0;
	ck_assert_msg(setxattr(P("unsup"), "system.zlfs_test", "x", 1, 0) == -1 &&
			      errno == EOPNOTSUPP,
		      "setxattr system.*: %s", ename(errno));
	fd = xopen(P("unsup"), O_RDWR, 0); /* not sync: the refused SETFLAGS changed nothing */
	ck_assert_int_eq(pwrite(fd, "KEPT", 4, 0), 4);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), 4);
	ck_assert(!memcmp(buf, "KEPT", 4));
	close(fd);
	OK(unlink(P("unsup")));
}
END_TEST

int posix_persist_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_remount;
	t[n++] = t_readonly;
	t[n++] = t_remount_ro;
	t[n++] = t_second_mount;
	t[n++] = t_tools;
	t[n++] = t_final;
	t[n++] = t_fsync_kill;
	t[n++] = t_unmount;
	t[n++] = t_enospc;
	t[n++] = t_handles;
	t[n++] = t_unsupported;
	t[n++] = t_chattr;
	return n;
}
