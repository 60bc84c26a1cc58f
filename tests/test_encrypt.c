/*
 * test_encrypt.c - per-file encryption through the real daemon.
 *
 * What a user of an encrypted zlfs relies on: nothing recognisable of an encrypted file -
 * contents, name, symlink target - reaches the device, even after GC moves it; the right key
 * (file or passphrase) brings everything back, a wrong one is refused before anything is
 * written, and no key gives the documented locked view; POSIX operations inside encrypted
 * directories behave, and names cannot cross between encrypted and plain directories.
 */
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"
#include "zlfs_ioctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static char img[512], mnt[512], key[512], bin[512], p[4096], q[2048];

#define MARK "ZLFS-PLAINTEXT-MARKER-7f3a"
#define SECRET_NAME "TopSecretFileName-q9w8e7"
#define SECRET_LINK "SymlinkTargetSecret-k2j3h4"

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(seed * 151 + i * 11 + (i >> 10)); }

static const char *mp(const char *rel)
{
	snprintf(p, sizeof(p), "%s/%s", mnt, rel);
	return p;
}

/* A fresh encrypted image (key file) of SIZE bytes in ZONE-byte zones; PLAIN_ROOT: mkfs
 * --plain-root, whose root directory is not encrypted. */
static void fresh_encrypted(const char *name, uint64_t size, uint64_t zone, int plain_root)
{
	struct zemu_create_opts o = {.size = size, .zone_size = zone, .max_open = 10,
				     .max_active = 10};

	tu_path(img, sizeof(img), name);
	tu_path(mnt, sizeof(mnt), "mnt");
	tu_path(key, sizeof(key), "master.key");
	tu_sh("fusermount3 -uz %s 2>/dev/null", mnt);
	mkdir(mnt, 0755);
	unlink(img);
	unlink(key);
	ck_assert_int_eq(zemu_create(img, &o), 0);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	ck_assert_int_eq(tu_sh("%s -q --encrypt%s --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
			       plain_root ? " --plain-root" : "", key, img), 0);
}

/* Mount with the key (and -o EXTRA); the daemon's messages go to daemon_err. */
static char daemon_err[600];

static pid_t mount_key(const char *extra)
{
	char opts[1200];

	snprintf(opts, sizeof(opts), "cp_interval=0,keyfile=%s%s%s", key, extra ? "," : "",
		 extra ? extra : "");
	return tu_daemon_start_log(img, mnt, opts, tu_path(daemon_err, sizeof(daemon_err),
							   "daemon.err"));
}

static void put(const char *rel, uint32_t seed, size_t size, size_t at)
{
	uint8_t *b = malloc(size);
	int fd = open(mp(rel), O_CREAT | O_WRONLY, 0644);

	ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
	for (size_t i = 0; i < size; i++)
		b[i] = pat(seed, at + i);
	ck_assert_int_eq(pwrite(fd, b, size, (off_t)at), (ssize_t)size);
	ck_assert_int_eq(close(fd), 0);
	free(b);
}

/* REL holds SIZE bytes: pattern SEED except zeros in [HOLE_LO, HOLE_HI). */
static void expect(const char *rel, uint32_t seed, size_t size, size_t hole_lo, size_t hole_hi)
{
	uint8_t *b = malloc(size + 1);
	int fd = open(mp(rel), O_RDONLY);
	ssize_t n;

	ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
	n = read(fd, b, size + 1);
	close(fd);
	ck_assert_msg(n == (ssize_t)size, "%s: %zd bytes, expected %zu", rel, n, size);
	for (size_t i = 0; i < size; i++) {
		uint8_t want = i >= hole_lo && i < hole_hi ? 0 : pat(seed, i);

		if (b[i] != want)
			ck_abort_msg("%s: byte %zu is %u, expected %u", rel, i, b[i], want);
	}
	free(b);
}

/* Times NEEDLE occurs in the raw image. */
static long image_count(const char *needle)
{
	int fd = open(img, O_RDONLY);
	struct stat st;
	const uint8_t *m, *at;
	size_t len = strlen(needle), left;
	long n = 0;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(m != MAP_FAILED);
	for (at = m, left = (size_t)st.st_size; (at = memmem(at, left, needle, len)); n++) {
		at += len;
		left = (size_t)st.st_size - (size_t)(at - m);
	}
	munmap((void *)m, (size_t)st.st_size);
	close(fd);
	return n;
}

static unsigned enc_flags(const char *path)
{
	struct zlfs_ioc_encrypt e = {0};
	int fd = open(path, O_RDONLY);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(ioctl(fd, ZLFS_IOC_GET_ENCRYPT, &e), 0);
	close(fd);
	return e.flags;
}

static int set_encrypt(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY), ret;

	ck_assert_int_ge(fd, 0);
	ret = ioctl(fd, ZLFS_IOC_SET_ENCRYPT) ? -errno : 0;
	close(fd);
	return ret;
}

static int fsck_clean(void)
{
	return tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img) == 0;
}

/* Contents, a name and a symlink target in an encrypted directory never reach the device in
 * the clear; a remount with the key returns them; a plain file next to them stays plain (the
 * scan can find what is not encrypted, so it is not vacuous). */
START_TEST(t_nothing_plain_on_device)
{
	char mark[64 * 1024];
	pid_t pid;
	int fd;

	fresh_encrypted("secret.img", 128 << 20, 4 << 20, 1);
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(mkdir(mp("vault"), 0700), 0);
	ck_assert_int_eq(set_encrypt(mp("vault")), 0);
	ck_assert_uint_eq(enc_flags(mp("vault")), ZLFS_ENC_ENCRYPTED | ZLFS_ENC_KEY);
	ck_assert_uint_eq(enc_flags(mp(".")), ZLFS_ENC_KEY);
	for (size_t i = 0; i + sizeof(MARK) <= sizeof(mark); i += sizeof(MARK) - 1)
		memcpy(mark + i, MARK, sizeof(MARK) - 1);
	fd = open(mp("vault/" SECRET_NAME), O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 32; i++) /* 2 MiB of the marker */
		ck_assert_int_eq(write(fd, mark, sizeof(mark)), (ssize_t)sizeof(mark));
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(symlink(SECRET_LINK, mp("vault/link")), 0);
	ck_assert_int_eq(mkdir(mp("vault/sub"), 0755), 0);
	ck_assert_uint_eq(enc_flags(mp("vault/sub")) & ZLFS_ENC_ENCRYPTED, ZLFS_ENC_ENCRYPTED);
	put("vault/sub/deep", 3, 300000, 0);
	put("plain-" SECRET_NAME, 4, 5000, 0); /* the control: outside the vault */
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(image_count(MARK), 0);
	ck_assert_int_eq(image_count(SECRET_LINK), 0);
	ck_assert_int_gt(image_count("plain-" SECRET_NAME), 0);
	ck_assert_int_eq(image_count(SECRET_NAME) - image_count("plain-" SECRET_NAME), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(image_count(MARK), 0);
	ck_assert(fsck_clean());

	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	fd = open(mp("vault/" SECRET_NAME), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 32; i++) {
		char got[sizeof(mark)];

		ck_assert_int_eq(read(fd, got, sizeof(got)), (ssize_t)sizeof(got));
		ck_assert(!memcmp(got, mark, sizeof(mark)));
	}
	close(fd);
	ck_assert_int_eq(readlink(mp("vault/link"), q, sizeof(q)), (ssize_t)strlen(SECRET_LINK));
	ck_assert(!memcmp(q, SECRET_LINK, strlen(SECRET_LINK)));
	expect("vault/sub/deep", 3, 300000, 0, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
}
END_TEST

static int count_entries(const char *dir, const char *must_not_contain, int *found_plain)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		n++;
		if (must_not_contain && strstr(e->d_name, must_not_contain))
			*found_plain = 1;
	}
	closedir(d);
	return n;
}

/* DIR is encrypted and the key not loaded: each regular file it lists (by its encoded name)
 * refuses to open, and no name can be added. Returns the regular files tried. */
static int locked_dir_refuses(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	char path[4400];
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || lstat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		errno = 0;
		ck_assert_int_eq(open(path, O_RDONLY), -1);
		ck_assert_int_eq(errno, ENOKEY);
		n++;
	}
	closedir(d);
	snprintf(path, sizeof(path), "%s/new", dir);
	errno = 0;
	ck_assert_int_eq(open(path, O_CREAT | O_WRONLY, 0644), -1);
	ck_assert_int_eq(errno, ENOKEY);
	errno = 0;
	ck_assert_int_eq(mkdir(path, 0755), -1);
	ck_assert_int_eq(errno, ENOKEY);
	errno = 0;
	ck_assert_int_eq(symlink("x", path), -1);
	ck_assert_int_eq(errno, ENOKEY);
	return n;
}

/* Remove the first entry of DIR whose locked name is long (digest form) or short. */
static int remove_locked(const char *dir, int want_long)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	char path[4400];
	int ret = -1;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (strlen(e->d_name) > 100) != want_long)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ck_assert_msg(!lstat(path, &st), "stat %s: %s", e->d_name, strerror(errno));
		ck_assert(S_ISREG(st.st_mode));
		ret = unlink(path);
		break;
	}
	closedir(d);
	return ret;
}

/* Wrong key: refused, image untouched. No key: encrypted names listed encoded, contents
 * ENOKEY, no new names, plain parts work, and encoded names (short and long) can be removed. */
START_TEST(t_keys_and_locked_view)
{
	char longname[256], other[600], cmd[4096];
	int plain = 0;
	pid_t pid;

	fresh_encrypted("keys.img", 64 << 20, 4 << 20, 1);
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(mkdir(mp("vault"), 0755), 0);
	ck_assert_int_eq(set_encrypt(mp("vault")), 0);
	put("vault/" SECRET_NAME, 5, 20000, 0);
	memset(longname, 'L', 255);
	longname[255] = 0;
	snprintf(q, sizeof(q), "vault/%s", longname);
	put(q, 6, 100, 0);
	longname[0] = 'M'; /* a second long name: one of the two is removed while locked */
	snprintf(q, sizeof(q), "vault/%s", longname);
	put(q, 6, 100, 0);
	longname[0] = 'L';
	ck_assert_int_eq(mkdir(mp("plain"), 0755), 0);
	put("plain/f", 7, 9000, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);

	/* wrong key: refused and nothing written */
	tu_path(other, sizeof(other), "other.key");
	unlink(other);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), other), 0);
	snprintf(cmd, sizeof(cmd), "cksum < %s > %s.sum", img, img);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s -f -o keyfile=%s %s %s 2>&1 | grep -q 'wrong key'",
		 tu_bin(bin, sizeof(bin), "zlfs"), other, img, mnt);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	ck_assert(!tu_mounted(mnt));
	snprintf(cmd, sizeof(cmd), "cksum < %s | cmp -s - %s.sum", img, img);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);

	/* no key: the locked view */
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(enc_flags(mp("vault")), ZLFS_ENC_ENCRYPTED);
	ck_assert_int_eq(count_entries(mp("vault"), "TopSecret", &plain), 3);
	ck_assert_int_eq(plain, 0);
	ck_assert_int_eq(locked_dir_refuses(mp("vault")), 3);
	expect("plain/f", 7, 9000, 0, 0); /* unencrypted parts work normally */
	put("plain/g", 8, 4096, 0);
	expect("plain/g", 8, 4096, 0, 0);
	/* listed names can be looked up (long ones in the digest form) and removed: the short
	 * one and the first long one */
	ck_assert_int_eq(remove_locked(mp("vault"), 0), 0);
	ck_assert_int_eq(remove_locked(mp("vault"), 1), 0);
	ck_assert_int_eq(count_entries(mp("vault"), NULL, &plain), 1);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert(fsck_clean());

	/* the key again: the plaintext names */
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	snprintf(q, sizeof(q), "vault/%s", longname);
	if (access(mp(q), F_OK)) /* L was the one removed: M is left */
		longname[0] = 'M';
	snprintf(q, sizeof(q), "vault/%s", longname);
	expect(q, 6, 100, 0, 0);
	ck_assert_int_eq(access(mp("vault/" SECRET_NAME), F_OK), -1);
	ck_assert_int_eq(count_entries(mp("vault"), NULL, &plain), 1);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
}
END_TEST

/* A passphrase from a file descriptor; a wrong one refused; a key for a plain filesystem
 * refused with a clear message. */
START_TEST(t_passphrase)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 4 << 20};
	char cmd[4096], pass[600];
	pid_t pid;

	tu_path(img, sizeof(img), "pass.img");
	tu_path(mnt, sizeof(mnt), "mnt");
	tu_path(pass, sizeof(pass), "pass.txt");
	tu_sh("fusermount3 -uz %s 2>/dev/null", mnt);
	mkdir(mnt, 0755);
	unlink(img);
	ck_assert_int_eq(zemu_create(img, &o), 0);
	ck_assert_int_eq(tu_sh("printf 'correct horse battery\\n' > %s", pass), 0);
	snprintf(cmd, sizeof(cmd), "%s -q --encrypt --passphrase-fd 3 --scrypt-n 1024 %s 3<%s",
		 tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img, pass);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s -o passphrase_fd=3,cp_interval=0 %s %s 3<%s",
		 tu_bin(bin, sizeof(bin), "zlfs"), img, mnt, pass);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	ck_assert(tu_mounted(mnt));
	ck_assert_int_eq(mkdir(mp("v"), 0755), 0);
	ck_assert_int_eq(set_encrypt(mp("v")), 0);
	put("v/f", 9, 12345, 0);
	ck_assert_int_eq(tu_sh("fusermount3 -u %s", mnt), 0);
	for (int i = 0; i < 50 && tu_mounted(mnt); i++)
		usleep(100000);
	sleep(1); /* the daemon writes its clean checkpoint after the unmount */

	snprintf(cmd, sizeof(cmd), "printf 'wrong horse\\n' | %s -f -o passphrase_fd=0 %s %s 2>&1 "
		 "| grep -q 'wrong key'", tu_bin(bin, sizeof(bin), "zlfs"), img, mnt);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s -o passphrase_fd=3,cp_interval=0 %s %s 3<%s",
		 tu_bin(bin, sizeof(bin), "zlfs"), img, mnt, pass);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	expect("v/f", 9, 12345, 0, 0);
	ck_assert_int_eq(tu_sh("fusermount3 -u %s", mnt), 0);
	sleep(1);

	/* a key offered to a filesystem made without encryption */
	tu_fresh_fs("plain.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	tu_path(key, sizeof(key), "plain.key");
	unlink(key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	snprintf(cmd, sizeof(cmd), "%s -f -o keyfile=%s %s %s 2>&1 | grep -q 'without encryption'",
		 tu_bin(bin, sizeof(bin), "zlfs"), key, img, mnt);
	ck_assert_int_eq(tu_sh("%s", cmd), 0);
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(set_encrypt(mnt), -EOPNOTSUPP);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
}
END_TEST

/* xattrs of an encrypted file past one xattr node: 300 small ones and a 64 KiB value
 * (XATTR_NODES), set (SET) or read back. They are stored as given (not encrypted, as fscrypt
 * leaves them). */
static void xattrs_of(const char *rel, int set)
{
	static char v[65536], got[65536];
	char nm[32];

	for (int i = 0; i < 300; i++) {
		snprintf(nm, sizeof(nm), "user.e%03d", i);
		snprintf(v, sizeof(v), "value %d of %s", i, rel);
		if (set)
			ck_assert_int_eq(setxattr(mp(rel), nm, v, strlen(v), XATTR_CREATE), 0);
		ck_assert_int_eq(getxattr(mp(rel), nm, got, sizeof(got)), (ssize_t)strlen(v));
		ck_assert(!memcmp(got, v, strlen(v)));
	}
	for (size_t i = 0; i < sizeof(v); i++)
		v[i] = (char)(i * 13 + 5);
	if (set)
		ck_assert_int_eq(setxattr(mp(rel), "user.big", v, sizeof(v), 0), 0);
	ck_assert_int_eq(getxattr(mp(rel), "user.big", got, sizeof(got)), (ssize_t)sizeof(v));
	ck_assert(!memcmp(got, v, sizeof(v)));
}

/* Truncate, holes, appends, overwrites, renames and links inside encrypted directories;
 * EXDEV between encrypted and plain; the policy's refusals; -o encrypt_all; xattrs. */
START_TEST(t_posix_inside)
{
	struct stat st;
	pid_t pid;
	int fd;

	fresh_encrypted("posix.img", 128 << 20, 4 << 20, 1);
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(mkdir(mp("v"), 0755), 0);
	ck_assert_int_eq(mkdir(mp("plain"), 0755), 0);
	put("plain/x", 1, 10, 0);
	ck_assert_int_eq(set_encrypt(mp("plain")), -ENOTEMPTY);
	ck_assert_int_eq(set_encrypt(mp("v")), 0);
	ck_assert_int_eq(set_encrypt(mp("v")), 0); /* twice is fine */

	/* a hole between two written ranges, then an append, then a middle overwrite */
	put("v/sparse", 10, 5000, 0);
	put("v/sparse", 10, 7000, 3 << 20);
	expect("v/sparse", 10, (3 << 20) + 7000, 5000, 3 << 20);
	ck_assert_int_eq(stat(mp("v/sparse"), &st), 0);
	ck_assert_int_lt(st.st_blocks * 512, 1 << 20); /* the hole is not allocated */
	put("v/f", 11, 100000, 0);
	put("v/f", 11, 33333, 100000); /* append */
	put("v/f", 11, 777, 50001);    /* unaligned overwrite in the middle, same pattern */
	expect("v/f", 11, 133333, 0, 0);
	ck_assert_int_eq(truncate(mp("v/f"), 70001), 0); /* partial last block */
	expect("v/f", 11, 70001, 0, 0);
	ck_assert_int_eq(truncate(mp("v/f"), 90000), 0); /* grows with zeros */
	expect("v/f", 11, 90000, 70001, 90000);
	ck_assert_int_eq(truncate(mp("v/f"), 70001), 0);
	fd = open(mp("v/f"), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10000, 20000), 0);
	close(fd);
	expect("v/f", 11, 70001, 10000, 30000); /* the punched range reads as zeros */
	xattrs_of("v/f", 1);

	/* rename and link inside */
	ck_assert_int_eq(mkdir(mp("v/d"), 0755), 0);
	ck_assert_int_eq(rename(mp("v/sparse"), strcpy(q, mp("v/d/moved"))), 0);
	expect("v/d/moved", 10, (3 << 20) + 7000, 5000, 3 << 20);
	put("v/over", 12, 4000, 0);
	ck_assert_int_eq(rename(mp("v/over"), strcpy(q, mp("v/d/moved"))), 0); /* replace */
	expect("v/d/moved", 12, 4000, 0, 0);
	ck_assert_int_eq(link(mp("v/d/moved"), strcpy(q, mp("v/hard"))), 0);
	expect("v/hard", 12, 4000, 0, 0);
	ck_assert_int_eq(stat(mp("v/hard"), &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);

	/* nothing crosses between encrypted and plain directories */
	errno = 0;
	ck_assert_int_eq(rename(mp("plain/x"), strcpy(q, mp("v/x"))), -1);
	ck_assert_int_eq(errno, EXDEV);
	errno = 0;
	ck_assert_int_eq(rename(mp("v/hard"), strcpy(q, mp("plain/hard"))), -1);
	ck_assert_int_eq(errno, EXDEV);
	errno = 0;
	ck_assert_int_eq(link(mp("plain/x"), strcpy(q, mp("v/x"))), -1);
	ck_assert_int_eq(errno, EXDEV);
	errno = 0;
	ck_assert_int_eq(rename(mp("v/d"), strcpy(q, mp("plain/d"))), -1);
	ck_assert_int_eq(errno, EXDEV);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert(fsck_clean());

	/* after a remount everything is as it was; -o encrypt_all says what it cannot hide */
	pid = mount_key("encrypt_all");
	ck_assert_int_gt(pid, 0);
	ck_assert(tu_file_has(daemon_err, "stay plaintext"));
	expect("v/d/moved", 12, 4000, 0, 0);
	expect("v/f", 11, 70001, 10000, 30000);
	xattrs_of("v/f", 0);
	put("top", 13, 8192, 0); /* -o encrypt_all: a new file in the plain root is encrypted */
	ck_assert_uint_eq(enc_flags(mp("top")), ZLFS_ENC_ENCRYPTED | ZLFS_ENC_KEY);
	ck_assert_int_eq(mkdir(mp("newdir"), 0755), 0);
	ck_assert_uint_eq(enc_flags(mp("newdir")), ZLFS_ENC_ENCRYPTED | ZLFS_ENC_KEY);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	errno = 0;
	ck_assert_int_eq(open(mp("top"), O_RDONLY), -1);
	ck_assert_int_eq(errno, ENOKEY);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert(fsck_clean());
}
END_TEST

#define NFILES 40

/* REL holds SIZE bytes of MARKER repeated. */
static void put_marker(const char *rel, const char *marker, size_t size)
{
	char *b = malloc(size);
	int fd = open(mp(rel), O_CREAT | O_WRONLY | O_TRUNC, 0644);

	for (size_t i = 0; i < size; i++)
		b[i] = marker[i % strlen(marker)];
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b, size), (ssize_t)size);
	ck_assert_int_eq(close(fd), 0);
	free(b);
}

static void expect_marker(const char *rel, const char *marker, size_t size)
{
	char *b = malloc(size + 1);
	int fd = open(mp(rel), O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, b, size + 1), (ssize_t)size);
	close(fd);
	for (size_t i = 0; i < size; i++)
		if (b[i] != marker[i % strlen(marker)])
			ck_abort_msg("%s: byte %zu differs", rel, i);
	free(b);
}

/* GC migrates encrypted blocks as they are: contents survive, nothing turns plain. */
START_TEST(t_gc_moves_ciphertext)
{
	uint32_t seeds[NFILES];
	unsigned rnd = 777;
	char rel[64];
	pid_t pid;
	int i, r;

	fresh_encrypted("gc.img", 96 << 20, 2 << 20, 0);
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	/* mkfs encrypted the root: the whole tree, names at the top included */
	ck_assert_uint_eq(enc_flags(mnt), ZLFS_ENC_ENCRYPTED | ZLFS_ENC_KEY);
	put_marker("marker", MARK, 1 << 20); /* old data: GC will have to move it */
	for (i = 0; i < NFILES; i++) {
		snprintf(rel, sizeof(rel), "encrypted-name-%02d", i);
		seeds[i] = (uint32_t)i + 1;
		put(rel, seeds[i], 800 * 1024, 0);
	}
	for (r = 0; r < 300; r++) {
		rnd = rnd * 1103515245 + 12345;
		i = (int)((rnd >> 8) % NFILES);
		snprintf(rel, sizeof(rel), "encrypted-name-%02d", i);
		seeds[i] = (uint32_t)r + 100;
		put(rel, seeds[i], 800 * 1024, 0);
	}
	ck_assert_int_gt(tu_ctl_stat(mnt, "zones_reclaimed"), 0);
	ck_assert_int_gt(tu_ctl_stat(mnt, "bytes_migrated"), 0);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(image_count(MARK), 0);
	expect_marker("marker", MARK, 1 << 20);
	for (i = 0; i < NFILES; i++) {
		snprintf(rel, sizeof(rel), "encrypted-name-%02d", i);
		expect(rel, seeds[i], 800 * 1024, 0, 0);
	}
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert(fsck_clean());
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	for (i = 0; i < NFILES; i++) {
		snprintf(rel, sizeof(rel), "encrypted-name-%02d", i);
		expect(rel, seeds[i], 800 * 1024, 0, 0);
	}
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(image_count("encrypted-name-"), 0); /* names in the root too */
}
END_TEST

/* ---- the root directory ------------------------------------------------------------------
 * What mkfs.zlfs --encrypt makes: the root itself encrypted, so the names at the top, the
 * contents of files there (mounted with the key alone, without encrypt_all) and /lost+found
 * with everything fsck puts in it are never plaintext on the device. The same steps on a
 * --plain-root filesystem are the control: there the scan finds every one of them. */

#define ROOT_NAME "RootFileName-a8s7d6"
#define ROOT_DIR "RootDirName-z1x2c3"
#define SUB_NAME "SubFileName-v5b6n7"
#define ROOT_LINK "RootLinkTarget-p0o9i8"
#define ROOT_MARK "ROOT-CONTENT-MARK-55aa"
#define LOST_NAME "LostFileName-m3n4b5"
#define LOST_MARK "LOST-CONTENT-MARK-77bb"
#define LF_NAME "InLostFound-q1w2e3"
#define LF_MARK "LF-CONTENT-MARK-99cc"

static const char *const root_needles[] = {ROOT_NAME, ROOT_DIR, SUB_NAME, ROOT_LINK, ROOT_MARK,
					   LOST_NAME, LOST_MARK, "lost+found", LF_NAME, LF_MARK};
#define NNEEDLES (sizeof(root_needles) / sizeof(root_needles[0]))

/* fsck.zlfs ARGS on the image, its output (both streams) to OUTF: its exit status. */
static int run_fsck(const char *args, const char *outf)
{
	return tu_sh("%s %s %s > %s 2>&1", tu_bin(bin, sizeof(bin), "fsck.zlfs"), args, img, outf);
}

/* NAME's entry in the root goes (through the library, with the key): its inode stays, named
 * by no directory, for fsck -y to move to /lost+found. Returns its inode number. */
static uint32_t lose_name(const char *name)
{
	struct zlfs_key_source ks = {.keyfile = key};
	struct zlfs_mount_opts mo = {.key = &ks};
	struct node_page *root;
	struct zlfs_fs *fs;
	uint32_t ino;

	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(dir_lookup(fs, root, name, strlen(name), &ino, NULL), 0);
	ck_assert_int_eq(dir_remove(fs, root, name, strlen(name)), 0);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
	return ino;
}

/* Names and contents at the root and in /lost+found after an fsck repair; FOUND gets how
 * often each of root_needles is in the raw image. */
static void root_scan(int plain_root, long found[NNEEDLES])
{
	unsigned enc = plain_root ? 0 : ZLFS_ENC_ENCRYPTED;
	char outf[600], arg[700], lost[64];
	uint32_t ino;
	pid_t pid;
	int rc;

	fresh_encrypted(plain_root ? "plainroot.img" : "encroot.img", 64 << 20, 4 << 20,
			plain_root);
	tu_path(outf, sizeof(outf), "fsck.out");
	pid = mount_key(NULL); /* the key alone: no encrypt_all */
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(enc_flags(mnt), enc | ZLFS_ENC_KEY);
	put_marker(ROOT_NAME, ROOT_MARK, 64 << 10);
	ck_assert_uint_eq(enc_flags(mp(ROOT_NAME)), enc | ZLFS_ENC_KEY);
	ck_assert_int_eq(mkdir(mp(ROOT_DIR), 0755), 0);
	put_marker(ROOT_DIR "/" SUB_NAME, ROOT_MARK, 8192);
	ck_assert_int_eq(symlink(ROOT_LINK, mp("link")), 0);
	put_marker(LOST_NAME, LOST_MARK, 64 << 10);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);

	ino = lose_name(LOST_NAME);
	rc = run_fsck("-y", outf);
	if (!plain_root) { /* no key: nothing can be named in the encrypted /lost+found */
		ck_assert_int_eq(rc, 4);
		ck_assert(tu_file_has(outf, "needs-key"));
		snprintf(arg, sizeof(arg), "-y --keyfile %s", key);
		rc = run_fsck(arg, outf);
	}
	ck_assert_int_eq(rc, 1);
	ck_assert(tu_file_has(outf, "moved to /lost+found"));
	ck_assert_int_eq(run_fsck("-n", outf), 0);

	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(enc_flags(mp("lost+found")), enc | ZLFS_ENC_KEY);
	snprintf(lost, sizeof(lost), "lost+found/#%u", ino);
	expect_marker(lost, LOST_MARK, 64 << 10);
	put_marker("lost+found/" LF_NAME, LF_MARK, 64 << 10);
	expect_marker(ROOT_DIR "/" SUB_NAME, ROOT_MARK, 8192);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert(fsck_clean());

	for (size_t i = 0; i < NNEEDLES; i++) {
		found[i] = image_count(root_needles[i]);
		printf("raw-image scan, %s root: \"%s\" found %ld times\n",
		       plain_root ? "plain (control)" : "encrypted", root_needles[i], found[i]);
	}
}

START_TEST(t_encrypted_root_nothing_plain)
{
	long found[NNEEDLES];

	root_scan(0, found);
	for (size_t i = 0; i < NNEEDLES; i++)
		ck_assert_msg(!found[i], "\"%s\" is on the device in plaintext", root_needles[i]);
}
END_TEST

START_TEST(t_plain_root_control)
{
	long found[NNEEDLES];

	root_scan(1, found);
	for (size_t i = 0; i < NNEEDLES; i++)
		ck_assert_msg(found[i] > 0, "\"%s\" not found: the scan would miss plaintext",
			      root_needles[i]);
}
END_TEST

/* An encrypted root without the key: the locked view, as for any encrypted directory. */
START_TEST(t_locked_root)
{
	int plain = 0;
	pid_t pid;

	fresh_encrypted("lockedroot.img", 64 << 20, 4 << 20, 0);
	pid = mount_key(NULL);
	ck_assert_int_gt(pid, 0);
	put(ROOT_NAME, 21, 5000, 0);
	ck_assert_int_eq(mkdir(mp(ROOT_DIR), 0755), 0);
	put(ROOT_DIR "/f", 22, 3000, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);

	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	ck_assert_uint_eq(enc_flags(mnt), ZLFS_ENC_ENCRYPTED);
	ck_assert_int_eq(tu_sh("%s encryption %s | grep -q 'encrypted, key not loaded'",
			       tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	ck_assert_int_eq(count_entries(mnt, "Root", &plain), 2);
	ck_assert_int_eq(plain, 0);
	ck_assert_int_eq(locked_dir_refuses(mnt), 1);
	ck_assert_int_eq(remove_locked(mnt, 0), 0); /* the file, by its encoded name */
	ck_assert_int_eq(count_entries(mnt, NULL, &plain), 1);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert(fsck_clean());

	pid = mount_key("encrypt_all"); /* nothing to say: the root is encrypted */
	ck_assert_int_gt(pid, 0);
	ck_assert(!tu_file_has(daemon_err, "stay plaintext"));
	ck_assert(!tu_file_has(daemon_err, "encrypt_all"));
	ck_assert_int_eq(access(mp(ROOT_NAME), F_OK), -1);
	expect(ROOT_DIR "/f", 22, 3000, 0, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("encrypt");
	tc = tcase_create("encrypt");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_nothing_plain_on_device);
	tcase_add_test(tc, t_keys_and_locked_view);
	tcase_add_test(tc, t_passphrase);
	tcase_add_test(tc, t_posix_inside);
	tcase_add_test(tc, t_gc_moves_ciphertext);
	suite_add_tcase(s, tc);
	tc = tcase_create("root"); /* ctest test_encrypt_root (CK_RUN_CASE=root) */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_encrypted_root_nothing_plain);
	tcase_add_test(tc, t_plain_root_control);
	tcase_add_test(tc, t_locked_root);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
