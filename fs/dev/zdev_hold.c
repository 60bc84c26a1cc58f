/*
 * zdev_hold.c - who holds a device, and waiting for a zlfs daemon that is letting go of one.
 *
 * Owns: the marks a zlfs daemon puts on the device it holds, the look at
 * /proc/self/mountinfo for a zlfs mount of a device, and the wait that zdev_open does before
 * opening a device that a daemon still holds but no longer serves.
 * May call: libc, log.h.
 *
 * Why: the kernel's unmount of a FUSE mount returns as soon as the mount is gone; the daemon
 * then writes its last checkpoint and closes the device. A tool started right after the
 * unmount (fsck.zlfs, mkfs.zlfs, a new zlfs) found the device busy for about a second. The
 * device lock alone cannot tell that daemon from one that is mounted and serving, so:
 *
 *  - A daemon marks the device with open-file-description locks on a second descriptor of
 *    it (one byte at HELD_BASE + pid, and at STARTING_BASE + pid until its mount is visible).
 *    The kernel drops them when the daemon exits, however it exits: nothing goes stale. The
 *    marks are closed after the device itself, so "no mark" means the daemon has let go.
 *  - A tool that finds a daemon's mark looks for a zlfs mount of the device in its
 *    mountinfo: mounted, or still starting, it fails at once; otherwise the daemon is
 *    finishing an unmount (it has left the mount table but not yet the device) and the tool
 *    waits for the mark to go, saying so, up to its timeout.
 *
 * The locks are advisory byte-range locks far past any device's end (locks need not lie
 * inside a file); they conflict with nothing zlfs or the kernel does with the device.
 */
#include "zdev_impl.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HELD_BASE     0x7000000000000000LL
#define STARTING_BASE 0x7100000000000000LL
#define PID_SPAN      0x100000000LL /* every pid fits */
#define WAIT_POLL_MS  50

static int mark_set(int fd, long long base, pid_t pid, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = base + pid, .l_len = 1};

	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

/* The pid of a daemon holding a mark at BASE on FD's file, 0 if none, -errno on error. */
static long mark_find(int fd, long long base)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = base,
			   .l_len = PID_SPAN};

	if (fcntl(fd, F_OFD_GETLK, &fl))
		return -errno;
	return fl.l_type == F_UNLCK ? 0 : (long)(fl.l_start - base);
}

int hold_mark(struct zdev *dev, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		ret = -errno;
	else if (!(ret = mark_set(fd, HELD_BASE, getpid(), F_RDLCK)))
		ret = mark_set(fd, STARTING_BASE, getpid(), F_RDLCK);
	if (ret) {
		zlog_err("%s: cannot mark the device as held by this daemon: %s", path,
			 strerror(-ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	dev->mark_fd = fd;
	dev->mark_pid = getpid();
	return 0;
}

void hold_unmark(int mark_fd)
{
	if (mark_fd >= 0)
		close(mark_fd); /* drops every mark at once */
}

int zdev_mark_serving(struct zdev *dev)
{
	pid_t pid = getpid(), old = dev->mark_pid;
	int ret;

	if (dev->mark_fd < 0)
		return 0;
	/* a daemon that detached runs under a new pid: mark that one before dropping the old */
	ret = pid == old ? 0 : mark_set(dev->mark_fd, HELD_BASE, pid, F_RDLCK);
	if (!ret && pid != old)
		ret = mark_set(dev->mark_fd, HELD_BASE, old, F_UNLCK);
	if (!ret)
		ret = mark_set(dev->mark_fd, STARTING_BASE, old, F_UNLCK);
	if (ret)
		zlog_warn("%s: cannot update this daemon's mark: %s", dev->info.path,
			  strerror(-ret));
	else
		dev->mark_pid = pid;
	return ret;
}

/* mountinfo escapes blanks and backslashes as \ooo. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

static int same_device(const struct stat *a, const char *source)
{
	struct stat b;

	if (source[0] != '/' || stat(source, &b))
		return 0;
	if (S_ISBLK(a->st_mode))
		return S_ISBLK(b.st_mode) && a->st_rdev == b.st_rdev;
	return a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* Where PATH is mounted as zlfs in this mount namespace: 1 with DIR filled, 0 if nowhere. */
static int find_mount(const char *path, char *dir, size_t len)
{
	char line[3 * PATH_MAX], mnt[PATH_MAX], fstype[64], source[PATH_MAX];
	struct stat st;
	int found = 0;
	FILE *f;

	if (stat(path, &st) || !(f = fopen("/proc/self/mountinfo", "re")))
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");

		/* id parent maj:min root MOUNTPOINT options [optional...] - FSTYPE SOURCE ... */
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %4095s", fstype, source) != 2 || strcmp(fstype, "fuse.zlfs"))
			continue;
		unescape(source);
		if (same_device(&st, source)) {
			unescape(mnt);
			snprintf(dir, len, "%s", mnt);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

int zdev_mounted_at(const char *path, char *dir, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long pid;

	if (fd < 0)
		return 0;
	pid = mark_find(fd, HELD_BASE);
	close(fd);
	return pid > 0 && find_mount(path, dir, len);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* What holds PATH now: 0 no daemon (go on and open it), 1 a daemon that is letting go,
 * -EBUSY (said) a daemon that is mounted or still starting. */
static int hold_state(const char *path, long *pid)
{
	char dir[PATH_MAX];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long starting;

	if (fd < 0)
		return 0; /* the open proper will say why */
	*pid = mark_find(fd, HELD_BASE);
	starting = *pid > 0 ? mark_find(fd, STARTING_BASE) : 0;
	close(fd);
	if (*pid <= 0)
		return 0;
	if (find_mount(path, dir, sizeof(dir))) {
		zlog_err("%s is mounted on %s (zlfs daemon, pid %ld): unmount it first", path, dir,
			 *pid);
		return -EBUSY;
	}
	if (starting > 0) {
		zlog_err("%s is being mounted by a zlfs daemon (pid %ld)", path, starting);
		return -EBUSY;
	}
	return 1;
}

#define HOLD_QUIET_S 2.0 /* waits shorter than this are not announced */

int hold_wait(const char *path, unsigned secs)
{
	struct timespec poll = {0, WAIT_POLL_MS * 1000000L};
	double start = now_s();
	long pid = 0, said = 0;
	int st;

	while ((st = hold_state(path, &pid)) == 1) {
		if (now_s() - start >= secs) {
			zlog_err("%s is held by a zlfs daemon (pid %ld) that is not mounted here%s: "
				 "finishing an unmount, or mounted in another mount namespace", path,
				 pid, secs ? " after the wait" : "");
			return -EBUSY;
		}
		/* An unmount's last checkpoint takes well under a second: a wait that short is
		 * what a remount always meets, and says nothing; a longer one says so once. */
		if (said != pid && now_s() - start >= HOLD_QUIET_S) {
			zlog_warn("%s: waiting up to %u s for the zlfs daemon (pid %ld) to finish its "
				  "unmount", path, secs, pid);
			said = pid;
		}
		nanosleep(&poll, NULL);
	}
	if (!st && said)
		zlog_warn("%s: the daemon let go after %.1f s", path, now_s() - start);
	return st;
}
