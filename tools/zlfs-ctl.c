/*
 * zlfs-ctl.c - zlfs-ctl: talk to a mounted zlfs, and make key files.
 *
 *   zlfs-ctl stats MOUNTPOINT     the daemon's statistics as JSON
 *   zlfs-ctl sync MOUNTPOINT      write a checkpoint now
 *   zlfs-ctl genkey FILE          64 random bytes for -o keyfile=FILE, mode 0600
 *
 * Owns: the command line and the ioctl calls on the mount's root (zlfs_ioctl.h).
 * May call: libc, OpenSSL (to wipe key material), zlfs_ioctl.h.
 */
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#define KEY_BYTES 64

static int usage(FILE *f, int code)
{
	fprintf(f, "usage: zlfs-ctl stats MOUNTPOINT    statistics of a mounted zlfs, as JSON\n"
		   "       zlfs-ctl sync MOUNTPOINT     write a checkpoint now\n"
		   "       zlfs-ctl genkey FILE         write a new 64-byte key file (mode 0600)\n");
	return code;
}

static int open_mount(const char *mnt)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY);

	if (fd < 0)
		fprintf(stderr, "zlfs-ctl: %s: %s\n", mnt, strerror(errno));
	return fd;
}

static int ctl_call(const char *mnt, unsigned long cmd, void *arg)
{
	int fd = open_mount(mnt), ret;

	if (fd < 0)
		return 1;
	ret = ioctl(fd, cmd, arg);
	if (ret < 0)
		fprintf(stderr, "zlfs-ctl: %s: %s\n", mnt,
			errno == ENOTTY ? "not the root of a mounted zlfs" : strerror(errno));
	close(fd);
	return ret < 0 ? 1 : 0;
}

static int cmd_stats(const char *mnt)
{
	struct zlfs_ioc_stats *st = calloc(1, sizeof(*st));
	int ret = st ? ctl_call(mnt, ZLFS_IOC_STATS, st) : 1;

	if (!ret)
		fputs(st->json, stdout);
	free(st);
	return ret;
}

static int cmd_genkey(const char *path)
{
	unsigned char key[KEY_BYTES];
	int fd = -1, ok = 0;

	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key)) {
		fprintf(stderr, "zlfs-ctl: no randomness: %s\n", strerror(errno));
		return 1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0)
		ok = write(fd, key, sizeof(key)) == (ssize_t)sizeof(key) && !fsync(fd);
	OPENSSL_cleanse(key, sizeof(key));
	if (!ok) {
		fprintf(stderr, "zlfs-ctl: %s: %s%s\n", path, strerror(errno),
			errno == EEXIST ? " (refusing to overwrite a key)" : "");
		if (fd >= 0)
			unlink(path);
	}
	if (fd >= 0)
		close(fd);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return usage(stdout, 0);
	if (argc == 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("zlfs-ctl %s\n", ZLFS_VERSION);
		return 0;
	}
	if (argc != 3)
		return usage(stderr, 2);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argv[2]);
	if (!strcmp(argv[1], "sync"))
		return ctl_call(argv[2], ZLFS_IOC_SYNC, NULL);
	if (!strcmp(argv[1], "genkey"))
		return cmd_genkey(argv[2]);
	return usage(stderr, 2);
}
