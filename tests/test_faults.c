/*
 * test_faults.c - a full device and a failing device, through the real daemon.
 *
 * Full: writing until the device is full gives the writer ENOSPC (never a hang or damage),
 * statfs says so, what was fsync'ed is intact after a remount, fsck is clean, and deleting
 * files gives the space back. Filled with small files and never synced, the device still has
 * room for the checkpoint that records them all.
 * Failing: a write error in a zone turns the filesystem read-only with the fsync that met it
 * failing, and everything fsync'ed before it survives a remount. Free zones the device
 * retires (offline, read-only) are left out and writing goes on elsewhere.
 */
#include "testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static char img[512], mnt[512], bin[512];

static void setup(const char *name, uint64_t size)
{
	struct zemu_create_opts o = {.size = size, .zone_size = 2 << 20};

	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
}

static int fsck_rc(void)
{
	return tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img);
}

/* Write pattern SEED to PATH until SIZE bytes or an error, then fsync when SYNC; returns
 * bytes written and the errno of the failure (0 if none) in *ERR. */
static size_t fill_file(const char *path, uint8_t seed, size_t size, int sync, int *err)
{
	static uint8_t buf[256 * 1024];
	size_t done = 0;
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	*err = fd < 0 ? errno : 0;
	if (fd < 0)
		return 0;
	memset(buf, seed, sizeof(buf));
	while (done < size) {
		ssize_t n = write(fd, buf, sizeof(buf) < size - done ? sizeof(buf) : size - done);

		if (n <= 0) {
			*err = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
	}
	if (!*err && sync && fsync(fd))
		*err = errno;
	close(fd);
	return done;
}

static int same_bytes(const char *path, uint8_t seed, size_t size)
{
	static uint8_t buf[256 * 1024];
	size_t done = 0;
	int fd = open(path, O_RDONLY), ok = fd >= 0;

	while (ok && done < size) {
		ssize_t n = read(fd, buf, sizeof(buf));

		ok = n > 0;
		for (ssize_t i = 0; ok && i < n; i++)
			ok = buf[i] == seed;
		done += n > 0 ? (size_t)n : 0;
	}
	if (fd >= 0)
		close(fd);
	return ok && done == size;
}

START_TEST(t_full_device)
{
	char keep[600], big[600];
	struct statvfs sv;
	size_t wrote, again;
	pid_t pid;
	int err;

	setup("full.img", 64 << 20);
	snprintf(keep, sizeof(keep), "%s/keep", mnt);
	snprintf(big, sizeof(big), "%s/big", mnt);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(fill_file(keep, 0x5a, 1 << 20, 1, &err), 1 << 20);
	ck_assert_int_eq(err, 0);
	wrote = fill_file(big, 0xa5, 1ULL << 30, 1, &err);
	ck_assert_int_eq(err, ENOSPC);
	ck_assert_uint_gt(wrote, 8 << 20);
	ck_assert_int_eq(statvfs(mnt, &sv), 0);
	ck_assert_uint_lt(sv.f_bfree, 64); /* nothing worth a zone left */
	printf("full device: wrote %zu MiB before ENOSPC, %lu blocks free\n", wrote >> 20,
	       (unsigned long)sv.f_bfree);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);

	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert(same_bytes(keep, 0x5a, 1 << 20));
	ck_assert_int_eq(unlink(big), 0);
	/* No timer, no sync: the space of the deleted file must come back on its own. */
	again = fill_file(big, 0x3c, wrote / 2, 1, &err);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(again, wrote / 2);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);
}
END_TEST

/* Direct 4 MiB writes into a device whose free zones are used up but whose zones are half
 * dead: each write that runs out of clean zones part way must be finished after collecting
 * (the kernel turns a short direct write into EIO), until the dead blocks are spent. Run 0
 * has 7 logs; runs 1 and 2 fold the GC logs into the users' warm data log (--logs 4, what a
 * device of fewer than 32 main zones gets by default): GC then finds that
 * log's zone filled by users at each pass, and with the node logs holding a zone of the
 * reserve it refused every victim for want of one more free zone than it needed (ENOSPC
 * with a zone's worth collectable, about 1 run in 6 before gc_nodes_need_zone). */
START_TEST(t_direct_writes_into_garbage)
{
	static uint8_t buf[64 * 1024];
	const char *given = getenv("ZLFS_TEST_MKFS_OPTS");
	char a[600], b[600], c[600], *keep = given ? strdup(given) : NULL;
	size_t total = 0, want;
	uint8_t *big;
	int fa, fb, fd, i;
	pid_t pid;

	if (_i || !given) /* run 0: 7 logs, which a 64 MiB image no longer gets by default */
		setenv("ZLFS_TEST_MKFS_OPTS", _i ? "--logs 4" : "--logs 7", 1);
	setup("garbage.img", 64 << 20);
	if (keep)
		setenv("ZLFS_TEST_MKFS_OPTS", keep, 1);
	else
		unsetenv("ZLFS_TEST_MKFS_OPTS");
	free(keep);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	snprintf(a, sizeof(a), "%s/a", mnt);
	snprintf(b, sizeof(b), "%s/b", mnt);
	snprintf(c, sizeof(c), "%s/c", mnt);
	fa = open(a, O_CREAT | O_WRONLY, 0644);
	fb = open(b, O_CREAT | O_WRONLY, 0644);
	ck_assert(fa >= 0 && fb >= 0);
	for (i = 0;; i++) { /* interleaved until full: every zone holds both */
		memset(buf, i, sizeof(buf));
		if (write(fa, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    write(fb, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			break;
	}
	ck_assert_int_gt(i, 100);
	close(fa);
	close(fb);
	ck_assert_int_eq(unlink(b), 0);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	big = aligned_alloc(4096, 4 << 20);
	memset(big, 0x77, 4 << 20);
	fd = open(c, O_CREAT | O_WRONLY | O_DIRECT, 0644);
	ck_assert_int_ge(fd, 0);
	want = (size_t)i * sizeof(buf) / 2; /* half of what b freed: the rest is moved data's */
	while (total < want) {
		ssize_t n = pwrite(fd, big, 4 << 20, (off_t)total);

		ck_assert_msg(n == 4 << 20, "direct write at %zu MiB: %zd (%s)", total >> 20, n,
			      n < 0 ? strerror(errno) : "short");
		total += (size_t)n;
	}
	close(fd);
	free(big);
	printf("direct writes into garbage: %zu MiB, %ld bytes moved by GC\n", total >> 20,
	       tu_ctl_stat(mnt, "bytes_migrated"));
	ck_assert_int_gt(tu_ctl_stat(mnt, "bytes_migrated"), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);
}
END_TEST

/* Small files, no sync, until ENOSPC: every one of them is there after a clean unmount. The
 * checkpoint at unmount must find room for their nodes and directory blocks; it did not
 * when user data could take the last free zones (the checkpoint failed with ENOSPC and the
 * remount found an empty filesystem). */
#define SMALL_SIZE 40000

static void small_path(char *p, size_t len, int i)
{
	snprintf(p, len, "%s/d%02d/f%04d", mnt, i / 200, i);
}

START_TEST(t_full_of_small_files)
{
	char p[600];
	struct statvfs sv;
	size_t last = 0;
	pid_t pid;
	int i, n, err = 0;

	setup("small.img", 64 << 20);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	for (n = 0; !err; n++) {
		snprintf(p, sizeof(p), "%s/d%02d", mnt, n / 200);
		if (n % 200 == 0 && mkdir(p, 0755))
			err = errno;
		small_path(p, sizeof(p), n);
		if (!err)
			last = fill_file(p, (uint8_t)(n * 7 + 1), SMALL_SIZE, 0, &err);
	}
	n--; /* the file (or directory) the device had no room for */
	ck_assert_int_eq(err, ENOSPC);
	ck_assert_int_eq(statvfs(mnt, &sv), 0);
	printf("full of small files: %d files of %d bytes, ENOSPC in the next (%zu bytes of it "
	       "written), %lu blocks free\n", n, SMALL_SIZE, last, (unsigned long)sv.f_bfree);
	ck_assert_int_gt(n, 850); /* 34 MB of files: the reserve and nodes take the rest */
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);

	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	for (i = 0; i < n; i++) {
		small_path(p, sizeof(p), i);
		ck_assert_msg(same_bytes(p, (uint8_t)(i * 7 + 1), SMALL_SIZE), "%s lost", p);
	}
	small_path(p, sizeof(p), n);
	ck_assert(access(p, F_OK) || same_bytes(p, (uint8_t)(n * 7 + 1), last));
	/* the room kept for changed blocks is all given back once they are written */
	for (i = 0; i < n; i += 50) {
		small_path(p, sizeof(p), i);
		ck_assert_int_eq(unlink(p), 0);
	}
	ck_assert_int_gt(tu_ctl_stat(mnt, "owed_to_checkpoint"), 0);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "owed_to_checkpoint"), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);
}
END_TEST


/* Zones a device retires while free (offline, or read-only first) leave the free pool: writes
 * go on in other zones, statfs shrinks, and nothing is lost. They used to stop every write
 * (the zone could not be reset) and then the checkpoint at unmount, losing what was written. */
START_TEST(t_retired_free_zones)
{
	static const char *faults[] = {"offline 12", "offline 13", "readonly 14", "offline 20"};
	char big[600];
	pid_t pid;
	int err;

	setup("retired.img", 64 << 20);
	snprintf(big, sizeof(big), "%s/big", mnt);
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		ck_assert_int_eq(tu_sh("%s inject %s %s >/dev/null", tu_bin(bin, sizeof(bin), "zlfs-emu"),
				       img, faults[i]), 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(tu_ctl_stat(mnt, "retired"), 4);
	ck_assert_uint_eq(fill_file(big, 0x6b, 20 << 20, 1, &err), 20 << 20);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);

	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert(same_bytes(big, 0x6b, 20 << 20));
	ck_assert_int_eq(tu_ctl_stat(mnt, "retired"), 4);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);
}
END_TEST


START_TEST(t_write_error_goes_read_only)
{
	char a[600], b[600], c[600];
	pid_t pid;
	int err, fd;

	setup("eio.img", 64 << 20);
	snprintf(a, sizeof(a), "%s/a", mnt);
	snprintf(b, sizeof(b), "%s/b", mnt);
	snprintf(c, sizeof(c), "%s/c", mnt);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(fill_file(a, 0x11, 3 << 20, 1, &err), 3 << 20);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	/* Fail every next write to the zones the data log will take next. */
	for (int z = 0; z < 32; z++)
		tu_sh("%s inject %s eio-write %d >/dev/null 2>&1", tu_bin(bin, sizeof(bin), "zlfs-emu"),
		      img, z);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	fill_file(b, 0x22, 4 << 20, 1, &err);
	ck_assert_msg(err == EIO || err == EROFS, "the fsync that met the error said %s",
		      strerror(err));
	fd = open(c, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_eq(fd, -1);
	ck_assert_int_eq(errno, EROFS);
	ck_assert(same_bytes(a, 0x11, 3 << 20)); /* reads go on */
	tu_daemon_stop(mnt, pid);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert(same_bytes(a, 0x11, 3 << 20));
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);
}
END_TEST

/* zlfs-ctl: stats JSON from a live mount, a checkpoint on demand, key files. */
START_TEST(t_ctl)
{
	char f[600], key[600], out[600], cmd[1600];
	struct stat st;
	pid_t pid;
	int err;
	FILE *p;
	char line[256];
	long uw = -1;

	setup("ctl.img", 64 << 20);
	snprintf(f, sizeof(f), "%s/f", mnt);
	tu_path(key, sizeof(key), "k.key");
	tu_path(out, sizeof(out), "stats.json");
	unlink(key);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(fill_file(f, 1, 3 << 20, 1, &err), 3 << 20);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(tu_sh("%s stats %s > %s", bin, mnt, out), 0);
	ck_assert_int_ne(tu_sh("%s stats /proc 2>/dev/null", bin), 0);
	snprintf(cmd, sizeof(cmd), "%s", out);
	p = fopen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p))
		sscanf(line, " \"bytes_written_by_users\": %ld", &uw);
	fclose(p);
	ck_assert_int_eq(uw, 3 << 20);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s genkey %s", bin, key), 0);
	ck_assert_int_eq(stat(key, &st), 0);
	ck_assert_int_eq(st.st_size, 64);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_ne(tu_sh("%s genkey %s 2>/dev/null", bin, key), 0);
}
END_TEST

/* A mount after a clean unmount has nothing to recover: mounting and unmounting again
 * writes nothing at all to the device. */
START_TEST(t_clean_remount_writes_nothing)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};
	char f[600], log[600];
	long before, after;
	pid_t pid;
	int err;

	tu_path(log, sizeof(log), "clean.log");
	o.log_path = log;
	tu_fresh_fs("clean.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	snprintf(f, sizeof(f), "%s/f", mnt);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(fill_file(f, 7, 5 << 20, 1, &err), 5 << 20);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	before = zemu_log_count(log);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert(same_bytes(f, 7, 5 << 20));
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	after = zemu_log_count(log);
	ck_assert_int_gt(before, 10);
	ck_assert_int_eq(after, before);
}
END_TEST

/* A node id freed after a checkpoint must not go to another file before the next one:
 * roll-forward would meet two owners of one nid. Cut power right after an fsync that
 * needed a new node while another file had freed one. */
START_TEST(t_nid_not_reused_before_checkpoint)
{
	char a[600], b[600], f[600];
	struct stat st;
	long max_nid;
	pid_t pid;
	int err, i, fd;

	setup("nid.img", 64 << 20);
	snprintf(a, sizeof(a), "%s/a", mnt);
	snprintf(b, sizeof(b), "%s/b", mnt);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(fill_file(b, 0x42, 5 << 20, 1, &err), 5 << 20); /* past the inode: a node */
	ck_assert_uint_eq(fill_file(a, 0x24, 1 << 20, 1, &err), 1 << 20);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(stat(b, &st), 0);
	ck_assert_int_eq(st.st_ino, 2); /* root 1, b 2, b's direct node 3, a 4 */
	max_nid = tu_ctl_stat(mnt, "max");
	ck_assert_int_gt(max_nid, 100);
	ck_assert_int_eq(truncate(b, 1 << 20), 0); /* frees b's direct node, nid 3 */
	/* Walk the nid allocator to its last nid: the next one it looks at is 1, 2, then 3. */
	for (i = 0; i < 20000; i++) {
		struct stat ts;

		snprintf(f, sizeof(f), "%s/t%d", mnt, i);
		fd = open(f, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(fstat(fd, &ts), 0);
		close(fd);
		ck_assert_int_eq(unlink(f), 0);
		if ((long)ts.st_ino == max_nid - 1)
			break;
	}
	ck_assert_int_lt(i, 20000);
	fd = open(a, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	{
		static uint8_t buf[1 << 20];

		memset(buf, 0x24, sizeof(buf));
		for (i = 0; i < 4; i++) /* a grows past its inode: a new direct node */
			ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	}
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	kill(pid, SIGKILL); /* no unmount, no checkpoint */
	waitpid(pid, NULL, 0);
	tu_sh("fusermount3 -uz %s", mnt);
	ck_assert_int_eq(tu_sh("%s powercut %s >/dev/null", tu_bin(bin, sizeof(bin), "zlfs-emu"), img), 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert(same_bytes(a, 0x24, 5 << 20));
	ck_assert(same_bytes(b, 0x42, 5 << 20) || same_bytes(b, 0x42, 1 << 20));
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck_rc(), 0);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("faults");
	tc = tcase_create("faults");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_full_device);
	tcase_add_test(tc, t_full_of_small_files);
	tcase_add_loop_test(tc, t_direct_writes_into_garbage, 0, 3);
	tcase_add_test(tc, t_retired_free_zones);
	tcase_add_test(tc, t_write_error_goes_read_only);
	tcase_add_test(tc, t_ctl);
	tcase_add_test(tc, t_clean_remount_writes_nothing);
	tcase_add_test(tc, t_nid_not_reused_before_checkpoint);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
