/*
 * test_crash.c - power cuts in the write path and the checkpoint, through the real daemon.
 *
 * A workload runs on a mounted image whose emulator records a write log. After every fsync
 * that returns, the test notes how many device operations were logged: from that point on,
 * what the fsync covered must survive any power cut. The device is then rebuilt as it was at
 * every flush boundary and at sampled writes in between (whole and torn), mounted again
 * (recovery), compared with what was made durable, and checked with fsck.zlfs.
 *
 * The workloads are in test_crash_workloads.c (compressed files' in test_crash_compress.c,
 * inode packs' in test_crash_packed.c),
 * the check of one crash point in test_crash_check.c, the model and the operations they share
 * in crash_testutil.h. This file records a workload and chooses its crash points; each
 * workload is a case of its own (CK_RUN_CASE=<name> runs one).
 */
#include "crash_testutil.h"

#include "zdev_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- enumeration -------------------------------------------------------------------------- */

/* A workload and how its crash points are chosen. Adding one is one entry here. */
struct workload_def {
	const char *name;
	uint64_t size;    /* image bytes */
	void (*run)(void);
	long max;         /* sampled crash points in the quick run */
	int every_flush;  /* also every flush boundary and the write before each (torn) */
	int encrypt;      /* mkfs --encrypt, mounted with its key */
	const char *opts; /* mount options besides cp_interval=0 */
	const char *mkfs; /* mkfs.zlfs options, for a layout the image's size would not get */
};

static const struct workload_def workloads[] = {
	{"files", 256ULL << 20, workload, 30, 1},
	/* No background GC, whose share depends on timing: the workload collects at fixed
	 * points (zlfs-ctl gc), so the case moves data a second time on every machine. */
	{"gc", 64ULL << 20, workload_gc, 30, 0, 0, "nogc", "--logs 7"}, /* the frozen log */
	{"overwrite", 64ULL << 20, workload_overwrite, 8, 0},
	{"unlink-open", 64ULL << 20, workload_unlink_open, 8, 0},
	{"dirs", 64ULL << 20, workload_dirs, 8, 1},
	/* its files are mostly inline (no data block each): fewer writes, sampled more densely */
	{"small", 64ULL << 20, workload_small, 12, 0},
	{"checkpoint", 64ULL << 20, workload_checkpoint, 4, 1},
	{"full", 64ULL << 20, workload_full, 6, 0},
	/* foreground GC taking zones of the reserve for the users' warm log */
	{"reserve", 64ULL << 20, workload_reserve, 12, 0, 0, NULL, "--logs 4"},
	{"encrypted", 256ULL << 20, workload_encrypted, 20, 0, 1},
	{"threads", 64ULL << 20, workload_threads, 20, 0},
	/* the same four writers with the warm data lanes: their files in four open zones */
	{"lanes", 64ULL << 20, workload_threads, 12, 0, 0, NULL, "--logs 10"},
	{"falloc", 64ULL << 20, workload_falloc, 12, 0},
	/* preallocate, write part, punch the rest past the end of file: every flush boundary */
	{"punch", 64ULL << 20, workload_punch, 12, 1},
	{"hot", 64ULL << 20, workload_hot, 16, 0},
	{"fsync", 64ULL << 20, workload_fsync, 10, 1},
	/* small appends held in memory between fsyncs: every flush boundary */
	{"tail", 64ULL << 20, workload_tail, 10, 1},
	/* small files in their inodes, converted past the area: every flush boundary */
	{"inline", 64ULL << 20, workload_inline, 10, 1},
	/* xattrs over several nodes and value nodes, grown and shrunk: every flush boundary */
	{"xattr", 64ULL << 20, workload_xattr, 10, 1},
	/* compressed clusters rewritten whole, truncated and punched: every flush boundary */
	{"compressed", 64ULL << 20, workload_compressed, 10, 1, 0, "compress=lz4", "--compress"},
	/* new names made durable by dentry marks, SQLite's journal: every flush boundary */
	{"dentry", 64ULL << 20, workload_dentry, 12, 1},
	/* small directories in their inodes, grown to a block and shrunk back: every flush */
	{"idirs", 64ULL << 20, workload_idirs, 12, 1},
	/* inode packs: small files packed, a zone of packs collected by GC, its inodes
	 * fsync'ed and unlinked after; the checkpoints that pack and GC every operation */
	{"packed", 64ULL << 20, workload_packed, 30, 0, 0, "nogc", "--packed-inodes"},
	/* spanning pack slots: the checkpoint that turns SPAN_SLOTS on and one that packs them
	 * again after growing, shrinking, fsyncs and unlinks: every operation of both, every
	 * flush boundary */
	{"span", 64ULL << 20, workload_span, 20, 1, 0, "nogc", "--packed-inodes"},
};

/* An image formatted with encryption and a key file next to it; mounts pass the key. */
static void encrypted_fs(const char *file, const struct zemu_create_opts *o)
{
	char key[512];

	tu_fresh_fs(file, o, img, sizeof(img), mnt, sizeof(mnt));
	tu_path(key, sizeof(key), "crash.key");
	unlink(key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	ck_assert_int_eq(tu_sh("%s -q -f --encrypt --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), key, img), 0);
	snprintf(mount_opts, sizeof(mount_opts), "cp_interval=0,keyfile=%s", key);
}

static void model_reset(void)
{
	nstages = 0;
	nhist = 0;
	nfocus = 0;
	memset(&cur, 0, sizeof(cur));
}

/* Bytes GC moved to the frozen log (data it had moved before) and user bytes sent to the hot
 * data log while the workload was recorded: crash points inside those writes are among the
 * ones tried. */
static long frozen_bytes, hot_bytes, moved_hot_bytes;

/* Run the workload on a fresh logged image; returns the zones GC reclaimed meanwhile. */
static long record(const struct workload_def *w, long *first)
{
	struct zemu_create_opts o = {.size = w->size, .zone_size = 2 << 20, .max_open = 12,
				     .max_active = 12};
	char file[64];
	long gc_zones;
	pid_t pid;

	model_reset();
	snprintf(file, sizeof(file), "%s.log", w->name);
	tu_path(logpath, sizeof(logpath), file);
	tu_path(out, sizeof(out), "crash-out.img");
	unlink(out);
	o.log_path = logpath;
	snprintf(file, sizeof(file), "%s.img", w->name);
	snprintf(mount_opts, sizeof(mount_opts), "cp_interval=0%s%s", w->opts ? "," : "",
		 w->opts ? w->opts : "");
	want_encrypted_root = w->encrypt;
	if (w->encrypt)
		encrypted_fs(file, &o);
	else
		tu_fresh_fs(file, &o, img, sizeof(img), mnt, sizeof(mnt));
	if (w->mkfs)
		ck_assert_int_eq(tu_sh("%s -q -f %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
				       w->mkfs, img), 0);
	*first = zemu_log_count(logpath); /* before this the device holds no filesystem yet */
	pid = daemon_start(img);
	ck_assert_int_gt(pid, 0);
	w->run();
	if (w->mkfs && strstr(w->mkfs, "--logs 10")) /* the lanes: four writers, each with its
						       * file open, took zones of their own */
		ck_assert_int_ge(tu_ctl_stat(mnt, "open"), 6);
	gc_zones = tu_ctl_stat(mnt, "zones_reclaimed");
	frozen_bytes = tu_ctl_stat(mnt, "frozen");
	hot_bytes = tu_ctl_stat(mnt, "hot_user_bytes_this_mount");
	moved_hot_bytes = tu_ctl_stat(mnt, "hot"); /* gc.bytes_moved_to */
	ck_assert_int_eq(daemon_stop(pid), 0);
	return gc_zones;
}

/* Just before the flush that follows operation N, the writes since the previous flush are in
 * the volatile cache, and a device keeps of each zone a prefix of them, whatever it keeps of
 * the others: fsync's one flush must survive losing any one zone's share (its data, or the
 * node log's copies and marker). Each zone that took only writes since that flush is lost in
 * turn. The number of points tried; failures are counted in *FAILED. */
static long try_zone_losses(const struct workload_def *w, const char *kinds,
			    const uint32_t *zones, long n, long total, long *failed)
{
	char why[512];
	long from = n, tried = 0, j;

	while (from > 0 && kinds[from - 1] != 'F')
		from--;
	for (j = from; j < n; j++) {
		long k;
		int clean = kinds[j] == 'W';

		for (k = from; clean && k < j; k++) /* each zone once */
			clean = zones[k] != zones[j];
		for (k = from; clean && k < n; k++)
			clean = zones[k] != zones[j] || kinds[k] == 'W';
		if (!clean)
			continue;
		lose_zone = zones[j];
		lose_from = from;
		tried++;
		if (try_point(n, 0, why, sizeof(why))) {
			(*failed)++;
			printf("%s: crash point %ld/%ld, zone %u's last %ld operations lost: %s\n",
			       w->name, n, total, zones[j], n - from, why);
		}
	}
	lose_zone = UINT32_MAX;
	return tried;
}

/* Try crash points of workload W: with every_flush, every flush boundary and the write just
 * before each flush, torn (a checkpoint pack, the last slot of an fsync), and there the loss
 * of each zone's unflushed writes alone; every operation in a focus range, whole and torn; a
 * sample of about MAX other writes (whole and torn); the end. With ZLFS_CRASH_ALL=1, every
 * operation, whole and torn. */
static long enumerate(const struct workload_def *w)
{
	char why[512], *kinds;
	uint32_t *zones;
	long total, n, tried = 0, failed = 0, points = 0, first, step, gc_zones;
	int all = getenv("ZLFS_CRASH_ALL") && atoi(getenv("ZLFS_CRASH_ALL"));
	int torn;

	gc_zones = record(w, &first);
	total = zemu_log_count(logpath);
	kinds = malloc((size_t)total + 1);
	zones = malloc(((size_t)total + 1) * sizeof(*zones));
	ck_assert_int_eq(zemu_log_ops(logpath, kinds, zones, total), total);
	for (n = first; n <= total; n++)
		points += kinds[n - 1] == 'W' || (!w->every_flush && kinds[n - 1] == 'F');
	step = all || points <= w->max ? 1 : points / w->max + 1;
	for (n = first, points = 0; n <= total; n++) {
		int wr = kinds[n - 1] == 'W', f = kinds[n - 1] == 'F', foc = in_focus(n);
		int before_flush = w->every_flush && wr && n < total && kinds[n] == 'F';
		int sampled = (wr || (f && !w->every_flush)) && (points++ % step == 0);

		if (!(f && w->every_flush) && !before_flush && !sampled && !foc && n != total)
			continue;
		for (torn = before_flush && !sampled && !foc; torn <= wr; torn++) {
			tried++;
			if (try_point(n, torn, why, sizeof(why))) {
				failed++;
				printf("%s: crash point %ld/%ld%s: %s\n", w->name, n, total,
				       torn ? " (torn)" : "", why);
			}
		}
		if (before_flush)
			tried += try_zone_losses(w, kinds, zones, n, total, &failed);
	}
	printf("%s: crash points tried: %ld, failed: %ld (%ld logged operations, %d durable "
	       "stages, %ld zones reclaimed by GC, %ld bytes moved to the frozen log, %ld user "
	       "bytes to the hot log, %ld moved back to it)\n", w->name, tried, failed, total,
	       nstages, gc_zones, frozen_bytes, hot_bytes, moved_hot_bytes);
	fflush(stdout);
	free(kinds);
	free(zones);
	ck_assert_int_gt(tried, 10);
	ck_assert_int_eq(failed, 0);
	return gc_zones;
}

START_TEST(t_crash)
{
	long gc = enumerate(&workloads[_i]);

	if (!strcmp(workloads[_i].name, "gc")) {
		ck_assert_int_gt(gc, 0); /* GC did run */
		ck_assert_int_gt(frozen_bytes, 0); /* and moved data a second time */
	}
	if (!strcmp(workloads[_i].name, "hot"))
		ck_assert_int_gt(hot_bytes, 0); /* the rewritten files did turn hot */
}
END_TEST

/* ZLFS_CRASH_SET="a,b,...": only those workloads (ctest runs the suite as a few such sets side
 * by side). */
static int in_set(const char *name)
{
	const char *set = getenv("ZLFS_CRASH_SET"), *p;
	size_t n = strlen(name);

	if (!set || !*set)
		return 1;
	for (p = set; (p = strstr(p, name)); p += n)
		if ((p == set || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

int main(void)
{
	Suite *s;
	TCase *tc;
	int i, n = (int)(sizeof(workloads) / sizeof(workloads[0]));

	if (tu_fuse_missing())
		return 77;
	s = suite_create("crash");
	for (i = 0; i < n; i++) { /* CK_RUN_CASE=<workload name> runs one of them */
		if (!in_set(workloads[i].name))
			continue;
		tc = tcase_create(workloads[i].name);
		tcase_set_timeout(tc, 1800);
		tcase_add_loop_test(tc, t_crash, i, i + 1);
		suite_add_tcase(s, tc);
	}
	return tu_run_suite(s);
}
