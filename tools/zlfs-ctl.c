/*
 * zlfs-ctl.c - zlfs-ctl: talk to a mounted zlfs, and make key files.
 *
 *   zlfs-ctl stats MOUNTPOINT     the daemon's statistics as JSON
 *   zlfs-ctl sync MOUNTPOINT      write a checkpoint now
 *   zlfs-ctl gc MOUNTPOINT [N]    collect up to N zones now (default 1), then checkpoint
 *   zlfs-ctl genkey FILE          64 random bytes for -o keyfile=FILE, mode 0600
 *   zlfs-ctl encrypt DIR          make an empty directory encrypted
 *   zlfs-ctl encryption PATH      say whether PATH is encrypted and the key loaded
 *   zlfs-ctl compress-info FILE   FILE's size, stored blocks, cluster size and algorithm
 *   zlfs-ctl collapse FILE OFF LEN, zlfs-ctl insert FILE OFF LEN
 *                                 fallocate's COLLAPSE_RANGE and INSERT_RANGE, which the
 *                                 kernel's FUSE module does not pass on
 *
 * Owns: the command line and the ioctl calls on the mount's root and on directories
 * (zlfs_ioctl.h).
 * May call: libc, crypto/zcrypt.h (key files), zlfs_ioctl.h.
 */
#include "zcrypt.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static int usage(FILE *f, int code)
{
	fprintf(f, "usage: zlfs-ctl stats MOUNTPOINT    statistics of a mounted zlfs, as JSON\n"
		   "       zlfs-ctl sync MOUNTPOINT     write a checkpoint now\n"
		   "       zlfs-ctl gc MOUNTPOINT [N]   collect up to N zones now (default 1), emptiest\n"
		   "                                    first, and write the checkpoint that frees them\n"
		   "       zlfs-ctl genkey FILE         write a new 64-byte key file (mode 0600)\n"
		   "       zlfs-ctl encrypt DIR         make an empty directory encrypted: everything\n"
		   "                                    created below it is encrypted\n"
		   "       zlfs-ctl encryption PATH     is PATH encrypted, is the key loaded\n"
		   "       zlfs-ctl compress-info FILE  FILE's size, the blocks its data takes on the\n"
		   "                                    device, its cluster size and algorithm\n"
		   "       zlfs-ctl collapse FILE OFF LEN  remove [OFF, OFF+LEN) from FILE, moving\n"
		   "                                    what follows down (multiples of 4096)\n"
		   "       zlfs-ctl insert FILE OFF LEN    insert a hole of LEN bytes at OFF, moving\n"
		   "                                    what follows up (multiples of 4096)\n");
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
	int ret = zcrypt_keyfile_generate(path);

	if (ret)
		fprintf(stderr, "zlfs-ctl: %s: %s%s\n", path, strerror(-ret),
			ret == -EEXIST ? " (refusing to overwrite a key)" : "");
	return ret ? 1 : 0;
}

static int cmd_encrypt(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY), ret;

	if (fd < 0) {
		fprintf(stderr, "zlfs-ctl: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	ret = ioctl(fd, ZLFS_IOC_SET_ENCRYPT);
	if (ret < 0)
		fprintf(stderr, "zlfs-ctl: %s: %s\n", dir,
			errno == ENOTEMPTY ? "the directory is not empty"
			: errno == ENOKEY ? "the filesystem is mounted without its key"
			: errno == EOPNOTSUPP ? "the filesystem was made without --encrypt"
			: errno == ENOTTY ? "not a directory of a mounted zlfs"
			: strerror(errno));
	close(fd);
	return ret < 0 ? 1 : 0;
}

static int cmd_encryption(const char *path)
{
	struct zlfs_ioc_encrypt e = {0};
	int fd = open(path, O_RDONLY), ret;

	if (fd < 0) {
		fprintf(stderr, "zlfs-ctl: %s: %s\n", path,
			errno == ENOKEY ? "encrypted, and the key is not loaded" : strerror(errno));
		return 1;
	}
	ret = ioctl(fd, ZLFS_IOC_GET_ENCRYPT, &e);
	close(fd);
	if (ret < 0) {
		fprintf(stderr, "zlfs-ctl: %s: %s\n", path,
			errno == ENOTTY ? "not on a mounted zlfs" : strerror(errno));
		return 1;
	}
	printf("%s: %s, key %s\n", path, e.flags & ZLFS_ENC_ENCRYPTED ? "encrypted" : "not encrypted",
	       e.flags & ZLFS_ENC_KEY ? "loaded" : "not loaded");
	return 0;
}

/* One line: the path, then key=value pairs (a script can split it). */
static int cmd_compress_info(const char *path)
{
	static const char *const algs[] = {"none", "lz4", "zstd"};
	struct zlfs_ioc_compress_info ci = {0};
	int fd = open(path, O_RDONLY | O_NONBLOCK), ret;

	if (fd < 0) {
		fprintf(stderr, "zlfs-ctl: %s: %s\n", path, strerror(errno));
		return 1;
	}
	ret = ioctl(fd, ZLFS_IOC_COMPRESS_INFO, &ci);
	close(fd);
	if (ret < 0) {
		fprintf(stderr, "zlfs-ctl: %s: %s\n", path,
			errno == ENOTTY ? "not on a mounted zlfs" : strerror(errno));
		return 1;
	}
	printf("%s: size=%llu stored_blocks=%llu stored_bytes=%llu ratio=%.4f compressed=%s "
	       "cluster_blocks=%u alg=%s\n", path, ci.size, ci.stored_blocks, ci.stored_blocks * 4096,
	       ci.size ? (double)(ci.stored_blocks * 4096) / (double)ci.size : 0.0,
	       ci.flags & ZLFS_CINFO_COMPRESSED ? "yes" : "no", ci.cluster_blocks,
	       ci.alg < sizeof(algs) / sizeof(algs[0]) ? algs[ci.alg] : "unknown");
	return 0;
}

/* FILE is synced first: the kernel's dirty pages would land at their old offsets. */
static int cmd_shift(const char *path, const char *off, const char *len, unsigned long cmd)
{
	struct zlfs_ioc_range r;
	struct stat st;
	char *e1, *e2;
	int fd, ret;

	r.off = strtoull(off, &e1, 0);
	r.len = strtoull(len, &e2, 0);
	if (*e1 || *e2 || e1 == off || e2 == len) {
		fprintf(stderr, "zlfs-ctl: OFF and LEN are byte counts\n");
		return 2;
	}
	fd = open(path, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "zlfs-ctl: %s: %s\n", path, strerror(errno));
		return 1;
	}
	ret = fsync(fd);
	if (!ret)
		ret = ioctl(fd, cmd, &r);
	if (!ret) /* the kernel takes the new size at its next look at the attributes */
		ret = fstat(fd, &st);
	if (ret < 0)
		fprintf(stderr, "zlfs-ctl: %s: %s\n", path,
			errno == ENOTTY ? "not on a mounted zlfs" : strerror(errno));
	close(fd);
	return ret < 0 ? 1 : 0;
}

static int cmd_gc(const char *mnt, const char *n)
{
	struct zlfs_ioc_gc g = {.zones = 1};
	char *end;
	int ret;

	if (n) {
		unsigned long v = strtoul(n, &end, 10);

		if (*n == '-' || *end || !v || v > 1000000) {
			fprintf(stderr, "zlfs-ctl: gc: N is a number of zones, 1 to 1000000\n");
			return 2;
		}
		g.zones = (unsigned)v;
	}
	ret = ctl_call(mnt, ZLFS_IOC_GC, &g);
	if (!ret)
		printf("%u zone%s emptied\n", g.zones, g.zones == 1 ? "" : "s");
	return ret;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return usage(stdout, 0);
	if (argc == 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("zlfs-ctl %s\n", ZLFS_VERSION);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "collapse"))
		return cmd_shift(argv[2], argv[3], argv[4], ZLFS_IOC_COLLAPSE_RANGE);
	if (argc == 5 && !strcmp(argv[1], "insert"))
		return cmd_shift(argv[2], argv[3], argv[4], ZLFS_IOC_INSERT_RANGE);
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "gc"))
		return cmd_gc(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc != 3)
		return usage(stderr, 2);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argv[2]);
	if (!strcmp(argv[1], "sync"))
		return ctl_call(argv[2], ZLFS_IOC_SYNC, NULL);
	if (!strcmp(argv[1], "genkey"))
		return cmd_genkey(argv[2]);
	if (!strcmp(argv[1], "encrypt"))
		return cmd_encrypt(argv[2]);
	if (!strcmp(argv[1], "encryption"))
		return cmd_encryption(argv[2]);
	if (!strcmp(argv[1], "compress-info"))
		return cmd_compress_info(argv[2]);
	return usage(stderr, 2);
}
