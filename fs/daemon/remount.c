/*
 * remount.c - `mount -o remount,ro` and back, in place, and a second mount of a mounted
 * device (docs/design.md, "Remounting").
 *
 * Owns both sides of the switch. In the daemon: ZLFS_IOC_REMOUNT_READONLY (everything made
 * durable, then changes refused and nothing more written) and ZLFS_IOC_REMOUNT_READWRITE
 * (changes taken again, only when a remount made the filesystem read-only). In the program
 * that mount(8)'s helper starts with -o remount: the ioctl to the mounted daemon and the
 * kernel's own remount of the mount point, so that a remount never starts a second daemon;
 * and for a device a daemon already serves, a bind mount of its mount point.
 * May call: zdev.h (zdev_mounted_at), files.h (files_set_readonly), fuse_int.h, zlfs_ioctl.h, log.h, libc's mount(2).
 */
#define FUSE_USE_VERSION 314
#include "fuse_int.h"
#include "files.h"
#include "fuse_ops.h"
#include "log.h"
#include "zdev.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- in the daemon -------------------------------------------------------------------------- */

static int remount_readonly(struct zfuse *z)
{
	int ret;

	op_enter(z, 0);
	ret = files_set_readonly(z->fs);
	op_leave(z, 0);
	if (ret == -EROFS) /* already read-only, for whatever reason: nothing to do */
		return 0;
	if (!ret) {
		ATOMIC_SET(&z->remounted_ro, 1);
		zlog_info("remounted read-only");
	}
	return ret;
}

static int remount_readwrite(struct zfuse *z)
{
	if (!ATOMIC_GET(&z->fs->readonly))
		return 0;
	/* Read-only for another reason: the device was opened read-only (-o ro), or damage or a
	 * device error was found; only an unmount and a check lead back from those. */
	if (!__atomic_exchange_n(&z->remounted_ro, 0, __ATOMIC_ACQ_REL)) {
		zlog_info("a remount read-write refused: read-only since the mount, or since damage "
			  "was found");
		return -EROFS; /* the remount's own program says why to its user */
	}
	ATOMIC_SET(&z->fs->readonly, 0);
	zlog_info("remounted read-write");
	return 0;
}

void ioctl_remount(fuse_req_t req, unsigned int cmd)
{
	struct zfuse *z = zf(req);
	int ret;

	if (fuse_req_ctx(req)->uid) {
		fuse_reply_err(req, EPERM);
		return;
	}
	ret = cmd == ZLFS_IOC_REMOUNT_READONLY ? remount_readonly(z) : remount_readwrite(z);
	if (ret)
		reply_err(req, ret);
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

/* ---- in `zlfs -o remount` ---------------------------------------------------------------- */

/* The mount flags MOUNTPOINT has, which a remount must carry over (it replaces them all). */
static unsigned long mount_flags_kept(const char *mountpoint)
{
	static const struct {
		unsigned long st, ms;
	} map[] = {{ST_NOSUID, MS_NOSUID}, {ST_NODEV, MS_NODEV}, {ST_NOEXEC, MS_NOEXEC},
		   {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME},
		   {ST_RELATIME, MS_RELATIME}, {ST_SYNCHRONOUS, MS_SYNCHRONOUS}};
	unsigned long flags = 0;
	struct statvfs sv;

	if (statvfs(mountpoint, &sv))
		return MS_NOSUID | MS_NODEV; /* what every FUSE mount has */
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (sv.f_flag & map[i].st)
			flags |= map[i].ms;
	return flags;
}

static int daemon_switch(int fd, const char *mountpoint, int readonly)
{
	if (!ioctl(fd, readonly ? ZLFS_IOC_REMOUNT_READONLY : ZLFS_IOC_REMOUNT_READWRITE))
		return 0;
	if (!readonly && errno == EROFS)
		zlog_err("%s: cannot remount read-write: it was mounted read-only, or the daemon "
			 "found damage and stopped writing (see its log); unmount it, run fsck.zlfs "
			 "and mount it again", mountpoint);
	else
		zlog_err("%s: the zlfs daemon did not switch to read-%s: %s", mountpoint,
			 readonly ? "only" : "write", strerror(errno));
	return -1;
}

int remount_run(const char *mountpoint, int readonly)
{
	unsigned long flags = MS_REMOUNT | mount_flags_kept(mountpoint) | (readonly ? MS_RDONLY : 0);
	int fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0) {
		zlog_err("%s: %s", mountpoint, strerror(errno));
		return 1;
	}
	/* The daemon first when going read-only (it makes everything durable while writes are
	 * still allowed), the kernel first when going back. */
	ret = readonly ? daemon_switch(fd, mountpoint, 1) : 0;
	if (!ret && mount(NULL, mountpoint, NULL, flags, NULL)) {
		zlog_err("%s: cannot remount read-%s: %s%s", mountpoint, readonly ? "only" : "write",
			 strerror(errno),
			 errno == EBUSY ? " (files are open for writing)" :
			 errno == EPERM ? " (remounting takes root)" : "");
		if (readonly)
			daemon_switch(fd, mountpoint, 0);
		ret = -1;
	}
	if (!ret && !readonly && daemon_switch(fd, mountpoint, 0)) {
		mount(NULL, mountpoint, NULL, flags | MS_RDONLY, NULL); /* as it was */
		ret = -1;
	}
	close(fd);
	return ret ? 1 : 0;
}

/* ---- a second mount ------------------------------------------------------------------------
 * A kernel filesystem mounted twice shows the same filesystem at both places; a second daemon
 * on one device would corrupt it, so the second mount point becomes a bind mount of the first
 * (the same daemon, the same caches; with -o ro a read-only view). Its own FUSE options are
 * the first mount's. */
int mount_again(const char *device, const char *mountpoint, int readonly, int *status)
{
	char first[PATH_MAX];

	char *here;
	int same;

	if (!zdev_mounted_at(device, first, sizeof(first)))
		return 0;
	here = realpath(mountpoint, NULL);
	same = here && !strcmp(here, first);
	free(here);
	if (same) { /* as mount(8) says of a device mounted where it is asked to go */
		zlog_err("%s is already mounted on %s", device, first);
		*status = 1;
		return 1;
	}
	if (mount(first, mountpoint, NULL, MS_BIND, NULL)) {
		zlog_err("%s is mounted on %s; showing it on %s too (a bind mount) failed: %s%s",
			 device, first, mountpoint, strerror(errno),
			 errno == EPERM ? " (it takes root)" : "");
		*status = 1;
		return 1;
	}
	if (readonly &&
	    mount(NULL, mountpoint, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | mount_flags_kept(first),
		  NULL)) {
		zlog_err("%s: cannot make the second mount read-only: %s", mountpoint,
			 strerror(errno));
		umount(mountpoint);
		*status = 1;
		return 1;
	}
	*status = 0;
	return 1;
}
