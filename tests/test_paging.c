/*
 * test_paging.c - NAT and SIT pages that come and go (metacache.c), through the real daemon.
 *
 * With meta_cache at its floor the daemon keeps 15 NAT and 15 SIT pages, on an image whose
 * tables are three times that: lookups past them read pages back from the meta log, dirty
 * pages wait for checkpoints, checkpoints switch meta halves (copying pages not in memory),
 * GC reads its victims' SIT pages. Then a kill -9 and a power cut: every fsync'ed file must
 * be whole, no deleted file back, and fsck clean. The cache's own counters must show pages
 * were evicted, or the test proves nothing and fails.
 */
#include "testutil.h"

#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NFILES 6000     /* 18 NAT blocks of nids at least */
#define NDIRS 6
#define SMALL (4096 + 100)
#define OPTS "cp_interval=0,meta_cache=128K"

static char img[512], mnt[512], bin[512];

static uint8_t pat(unsigned seed, size_t i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 12)); }

static void path_of(char *p, size_t len, int n)
{
	snprintf(p, len, "%s/d%d/f%d", mnt, n % NDIRS, n);
}

/* Write SIZE bytes of pattern SEED to PATH (truncating), fsync'ed when SYNC. */
static void put(const char *path, unsigned seed, size_t size, int sync)
{
	static uint8_t buf[1 << 20];
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	size_t done = 0;

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	while (done < size) {
		size_t k = size - done < sizeof(buf) ? size - done : sizeof(buf);

		for (size_t i = 0; i < k; i++)
			buf[i] = pat(seed, done + i);
		ck_assert_int_eq(write(fd, buf, k), (ssize_t)k);
		done += k;
	}
	if (sync)
		ck_assert_int_eq(fsync(fd), 0);
	ck_assert_int_eq(close(fd), 0);
}

static int same(const char *path, unsigned seed, size_t size)
{
	static uint8_t buf[1 << 20];
	int fd = open(path, O_RDONLY), ok = fd >= 0;
	size_t done = 0;

	while (ok && done < size) {
		ssize_t n = read(fd, buf, sizeof(buf));

		ok = n > 0;
		for (ssize_t i = 0; ok && i < n; i++)
			ok = buf[i] == pat(seed, done + (size_t)i);
		done += n > 0 ? (size_t)n : 0;
	}
	if (ok) /* and nothing past SIZE */
		ok = read(fd, buf, 1) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void ctl_sync(void)
{
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
}

/* Files, a checkpoint, a big file, deletions and rewrites spread over every NAT block, more
 * checkpoints; then GC's work (the big file replaced), and a last round of fsync'ed rewrites
 * that only roll-forward can bring back. */
static void workload(void)
{
	char p[700];
	int n;

	for (n = 0; n < NDIRS; n++) {
		snprintf(p, sizeof(p), "%s/d%d", mnt, n);
		ck_assert_int_eq(mkdir(p, 0755), 0);
	}
	for (n = 0; n < NFILES; n++) {
		path_of(p, sizeof(p), n);
		put(p, (unsigned)n, SMALL, 0);
	}
	ctl_sync();
	snprintf(p, sizeof(p), "%s/big", mnt);
	put(p, 7, 200u << 20, 1);
	for (n = 0; n < NFILES; n++) {
		path_of(p, sizeof(p), n);
		if (n % 3 == 0)
			ck_assert_int_eq(unlink(p), 0);
		else if (n % 3 == 1)
			put(p, (unsigned)n + 1, SMALL / 2, 0);
		if (n % 1000 == 999)
			ctl_sync();
	}
	snprintf(p, sizeof(p), "%s/big", mnt);
	ck_assert_int_eq(unlink(p), 0);
	ctl_sync();
	snprintf(p, sizeof(p), "%s/big2", mnt);
	put(p, 9, 240u << 20, 1);
	ctl_sync();
	/* A checkpoint has just cleaned every page: the caches are back within their bounds. */
	ck_assert_int_le(tu_ctl_stat(mnt, "nat_pages"), tu_ctl_stat(mnt, "nat_pages_max"));
	ck_assert_int_le(tu_ctl_stat(mnt, "sit_pages"), tu_ctl_stat(mnt, "sit_pages_max"));
	for (n = 2; n < NFILES; n += 3) {
		path_of(p, sizeof(p), n);
		put(p, (unsigned)n + 2, SMALL * 2, n % 2 == 0); /* odd ones may be lost */
	}
}

static void verify(void)
{
	char p[700];
	struct stat st;
	int n;

	for (n = 0; n < NFILES; n++) {
		path_of(p, sizeof(p), n);
		if (n % 3 == 0)
			ck_assert_msg(stat(p, &st) && errno == ENOENT, "deleted %s is back", p);
		else if (n % 3 == 1)
			ck_assert_msg(same(p, (unsigned)n + 1, SMALL / 2), "%s is not as rewritten", p);
		else if (n % 2 == 0)
			ck_assert_msg(same(p, (unsigned)n + 2, SMALL * 2), "fsync'ed %s is lost", p);
		else /* not fsync'ed: the old or the new content, whole */
			ck_assert_msg(same(p, (unsigned)n, SMALL) || same(p, (unsigned)n + 2, SMALL * 2),
				      "%s is neither its old nor its new content", p);
	}
	snprintf(p, sizeof(p), "%s/big", mnt);
	ck_assert(stat(p, &st) && errno == ENOENT);
	snprintf(p, sizeof(p), "%s/big2", mnt);
	ck_assert(same(p, 9, 240u << 20));
}

START_TEST(t_pages_evicted_then_power_cut)
{
	struct zemu_create_opts o = {.size = 512ull << 20, .zone_size = 256 << 10};
	long nat_ev, sit_ev, nat_miss;
	pid_t pid;

	tu_fresh_fs("paging.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	pid = tu_daemon_start(img, mnt, OPTS);
	ck_assert_int_gt(pid, 0);
	workload();
	nat_ev = tu_ctl_stat(mnt, "nat_evictions");
	sit_ev = tu_ctl_stat(mnt, "sit_evictions");
	nat_miss = tu_ctl_stat(mnt, "nat_misses");
	printf("paging: NAT %ld evictions, %ld misses; SIT %ld evictions; %ld NAT pages max\n",
	       nat_ev, nat_miss, sit_ev, tu_ctl_stat(mnt, "nat_pages_max"));
	ck_assert_int_gt(nat_ev, 0);
	ck_assert_int_gt(sit_ev, 0);
	ck_assert_int_le(tu_ctl_stat(mnt, "nat_pages_max"), 16);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	tu_sh("fusermount3 -u %s 2>/dev/null", mnt);
	ck_assert_int_ge(zemu_powercut(img, -1, 12345, 1), 0); /* unflushed writes lost, one torn */

	pid = tu_daemon_start(img, mnt, OPTS); /* recovery, with pages coming and going */
	ck_assert_int_gt(pid, 0);
	verify();
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img), 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0"); /* and the default cache sees the same */
	ck_assert_int_gt(pid, 0);
	verify();
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	unlink(img);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("paging");
	TCase *tc = tcase_create("paging");

	if (tu_fuse_missing())
		return 77;
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_pages_evicted_then_power_cut);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
