/*
 * test_revisions.c - format revisions and feature flags across readers, on images caught in
 * the states an upgrade meets: zones left open by a crash, zones closed by a power cut, a GC
 * pass cut in the middle, and media filled to ENOSPC.
 *
 * Revisions 1, 2 and 3 exist (2 added the frozen GC log, a layout of 7 logs; 3 the warm data
 * lanes, a layout of 10); the test plays the others. mkfs.zlfs --revision REV:MIN stamps an image as another revision's writer
 * would (with --logs 6 and 1:1, what revision 1's mkfs wrote); ZLFS_TEST_READER_REVISION
 * makes the daemon, fsck and this process read as another revision; stamp() rewrites
 * superblock records with feature bits no reader knows. Each state is built by the real
 * daemon on the emulator, then:
 *   - unknown incompat bits (in both records, or only in the newest one while the other half
 *     of the ping-pong still holds the old record): refused, the image untouched;
 *   - unknown ro_compat bits: mounted read-only, content intact, writes fail with EROFS, the
 *     image untouched;
 *   - this revision mounts a revision-1 image read-write (recovery included), leaves it
 *     revision 1, and the revision-1 reader still mounts it afterwards, fsck clean;
 *   - an image of a newer revision that this one may read (min_revision 3) mounts read-write
 *     here and is refused by revision-1 and revision-2 readers (it has 10 logs); one that
 *     needs the newer reader is refused here and mounts under the newer one;
 *   - unknown compat bits are ignored;
 *   - compress= is refused on a filesystem without the COMPRESS feature (and this code refuses
 *     the feature itself until it reads compressed clusters).
 */
#include "testutil.h"

#include "format.h"
#include "super.h"
#include "zdev.h"
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

#define MiB (1024ULL * 1024)
#define MAX_FILES 96
#define OLDER 1 /* revision 1: six logs at most */
#define NEWER (ZLFS_REVISION + 1) /* the revision the test pretends a newer zlfs has */
#define R2 2    /* revision 2: seven logs at most */
#define BIT_INCOMPAT (1u << 30)
#define BIT_RO_COMPAT (1u << 29)
#define BIT_COMPAT (1u << 28)

enum state { ST_OPEN, ST_CLOSED, ST_GC, ST_FULL };

/* What a file must hold: SEED/SIZE exactly, or - while IN_FLIGHT (written after its last
 * fsync) - its previous content, nothing, or a prefix of the new one. */
struct fexp {
	char name[32];
	uint32_t seed, old_seed;
	size_t size, old_size;
	int in_flight;
};

struct model {
	int n;
	struct fexp f[MAX_FILES];
};

static char img[512], mnt[512], bin[512], snap[512], errlog[512];

static uint8_t pat(uint32_t seed, size_t i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 9)); }

/* 0 (unset): read as this code's own revision. */
static void as_reader(unsigned rev)
{
	char v[16];

	if (!rev) {
		unsetenv("ZLFS_TEST_READER_REVISION");
		return;
	}
	snprintf(v, sizeof(v), "%u", rev);
	setenv("ZLFS_TEST_READER_REVISION", v, 1);
}

static struct fexp *model_file(struct model *m, const char *name)
{
	int i;

	for (i = 0; i < m->n; i++)
		if (!strcmp(m->f[i].name, name))
			return &m->f[i];
	ck_assert_int_lt(m->n, MAX_FILES);
	memset(&m->f[m->n], 0, sizeof(m->f[0]));
	snprintf(m->f[m->n].name, sizeof(m->f[0].name), "%s", name);
	return &m->f[m->n++];
}

/* Write NAME whole with SEED; 0 or -errno (ENOSPC is expected on full media). */
static int put(const char *name, uint32_t seed, size_t size, int do_fsync)
{
	char p[600];
	uint8_t *b = malloc(size ? size : 1);
	int fd, ret = 0;

	snprintf(p, sizeof(p), "%s/%s", mnt, name);
	for (size_t i = 0; i < size; i++)
		b[i] = pat(seed, i);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ret = fd < 0 ? -errno : 0;
	for (size_t done = 0; !ret && done < size;) { /* a short write is followed by its errno */
		ssize_t n = pwrite(fd, b + done, size - done, (off_t)done);

		ret = n > 0 ? 0 : n < 0 ? -errno : -EIO;
		done += n > 0 ? (size_t)n : 0;
	}
	if (!ret && do_fsync && fsync(fd))
		ret = -errno;
	if (fd >= 0 && close(fd) && !ret)
		ret = -errno;
	free(b);
	return ret;
}

/* Write NAME and record it in M: durable when fsync'ed, in flight otherwise. */
static int put_model(struct model *m, const char *name, uint32_t seed, size_t size, int do_fsync)
{
	struct fexp *f = model_file(m, name);
	int ret;

	f->old_seed = f->seed;
	f->old_size = f->size;
	f->seed = seed;
	f->size = size;
	f->in_flight = 1;
	ret = put(name, seed, size, do_fsync);
	if (!ret && do_fsync)
		f->in_flight = 0;
	return ret;
}

static int content_is(const uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(seed, i))
			return 0;
	return 1;
}

/* NULL when NAME matches the model, else why not. */
static const char *check_file(const struct fexp *f, char *why, size_t wl)
{
	char p[600];
	struct stat st;
	uint8_t *b;
	ssize_t n = -1;
	int fd, ok;

	snprintf(p, sizeof(p), "%s/%s", mnt, f->name);
	if (stat(p, &st)) {
		snprintf(why, wl, "%s missing", f->name);
		return f->in_flight ? NULL : why;
	}
	b = malloc((size_t)st.st_size + 1);
	fd = open(p, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, b, (size_t)st.st_size + 1);
		close(fd);
	}
	ok = n == st.st_size &&
	     ((f->size == (size_t)n && content_is(b, (size_t)n, f->seed)) ||
	      (f->in_flight && (size_t)n <= f->size && content_is(b, (size_t)n, f->seed)) ||
	      (f->in_flight && f->old_size == (size_t)n && content_is(b, (size_t)n, f->old_seed)));
	free(b);
	snprintf(why, wl, "%s: %lld bytes that are not what it held (expected %zu, seed %u)",
		 f->name, (long long)st.st_size, f->size, f->seed);
	return ok ? NULL : why;
}

static void check_model(const struct model *m)
{
	char why[256];
	int i;

	for (i = 0; i < m->n; i++)
		ck_assert_msg(!check_file(&m->f[i], why, sizeof(why)), "%s", why);
}

/* ---- images and states ------------------------------------------------------------------ */

static void make_image(const char *mkfs_args, uint64_t size, const char *log)
{
	struct zemu_create_opts o = {.size = size, .zone_size = 2 * MiB, .max_open = 12,
				     .max_active = 12, .log_path = log};

	tu_path(img, sizeof(img), "rev.img");
	tu_path(mnt, sizeof(mnt), "mnt");
	tu_path(snap, sizeof(snap), "snap.img");
	tu_path(errlog, sizeof(errlog), "daemon.err");
	tu_sh("fusermount3 -uz %s 2>/dev/null", mnt);
	mkdir(mnt, 0755);
	unlink(img);
	if (log)
		unlink(log);
	ck_assert_int_eq(zemu_create(img, &o), 0);
	ck_assert_int_eq(tu_sh("%s -q %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"), mkfs_args, img),
			 0);
}

/* No clean unmount: the daemon dies, the kernel mount goes. */
static void crash_daemon(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	tu_sh("fusermount3 -uz %s 2>/dev/null", mnt);
}

/* Files made durable two ways (a checkpoint for new files, roll-forward for rewrites), one
 * left in flight, then the daemon is killed: zones stay open. CLOSED adds a power cut, which
 * drops what was never flushed and closes the open zones. */
static void build_open(struct model *m, int closed)
{
	pid_t pid = tu_daemon_start(img, mnt, "cp_interval=0");
	char name[32];
	int i;

	ck_assert_int_gt(pid, 0);
	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(put_model(m, name, 10 + (uint32_t)i, (size_t)(i * 300 + 5) * 1024, 1),
				 0);
	}
	ck_assert_int_eq(put_model(m, "f1", 30, 700 * 1024, 1), 0); /* rolled forward */
	ck_assert_int_eq(put_model(m, "f4", 31, 3000, 1), 0);
	ck_assert_int_eq(put_model(m, "late", 32, 900 * 1024, 0), 0); /* never fsync'ed */
	crash_daemon(pid);
	if (closed)
		ck_assert_int_ge(zemu_powercut(img, -1, 0, 0), 0);
}

/* Churn until the daemon is in the normal GC phase, then stay idle so the background
 * collector runs: it is the only writer then, so a cut in the middle of what was logged
 * while idle is a cut in the middle of a GC pass. The state is that cut, torn. */
static void build_gc(struct model *m, const char *log)
{
	pid_t pid = tu_daemon_start(img, mnt, "cp_interval=0,gc_idle_ms=100");
	long before, after, gc0, gc1;
	char name[32], out[512];
	unsigned rnd = 4242;
	int i, r;

	ck_assert_int_gt(pid, 0);
	for (i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "g%02d", i);
		ck_assert_int_eq(put_model(m, name, 200 + (uint32_t)i, 1200 * 1024, 1), 0);
	}
	for (r = 0; r < 24; r++) { /* rewrites leave the old zones partly dead */
		rnd = rnd * 1103515245 + 12345;
		snprintf(name, sizeof(name), "g%02d", (int)((rnd >> 8) % 16));
		ck_assert_int_eq(put_model(m, name, 300 + (uint32_t)r, 600 * 1024, 1), 0);
	}
	gc0 = tu_ctl_stat(mnt, "zones_reclaimed");
	before = zemu_log_count(log);
	sleep(3);
	after = zemu_log_count(log);
	gc1 = tu_ctl_stat(mnt, "zones_reclaimed");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_msg(gc1 > gc0 && after > before + 4, "no GC pass while idle (%ld -> %ld zones, "
		      "%ld -> %ld operations)", gc0, gc1, before, after);
	tu_path(out, sizeof(out), "gc-cut.img");
	unlink(out);
	ck_assert_int_eq(zemu_replay(img, log, before + (after - before) / 2, out, 1), 0);
	ck_assert_int_eq(rename(out, img), 0);
}

/* Fill with fsync'ed files until the filesystem says ENOSPC, then crash. */
static void build_full(struct model *m)
{
	pid_t pid = tu_daemon_start(img, mnt, "cp_interval=0");
	char name[32];
	int i, ret = 0;

	ck_assert_int_gt(pid, 0);
	for (i = 0; i < MAX_FILES - 1 && !ret; i++) {
		snprintf(name, sizeof(name), "n%02d", i);
		ret = put_model(m, name, 400 + (uint32_t)i, 1024 * 1024, 1);
	}
	ck_assert_int_eq(ret, -ENOSPC);
	crash_daemon(pid);
}

/* A fresh image stamped by MKFS_ARGS, brought into STATE by a daemon reading as WRITER. */
static void build(enum state st, const char *mkfs_args, unsigned writer, struct model *m)
{
	char log[512];

	memset(m, 0, sizeof(*m));
	tu_path(log, sizeof(log), "rev.log");
	make_image(mkfs_args, st == ST_FULL ? 48 * MiB : 64 * MiB, st == ST_GC ? log : NULL);
	as_reader(writer);
	if (st == ST_OPEN || st == ST_CLOSED)
		build_open(m, st == ST_CLOSED);
	else if (st == ST_GC)
		build_gc(m, log);
	else
		build_full(m);
	as_reader(0);
}

/* ---- superblock stamps -------------------------------------------------------------------- */

/* Index (0/1) of the superblock zone holding the highest sb_seq, checksum valid or not. */
static int newest_zone(struct zdev *dev, uint64_t *seq)
{
	uint8_t *b = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	int first = zlfs_first_seq_zone(dev), i, best = 0;
	uint64_t s;

	*seq = 0;
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(zdev_read(dev, b, ZLFS_BLOCK_SIZE,
					   (uint64_t)(first + i) * zdev_geometry(dev)->zone_size), 0);
		s = le64_get(((struct zlfs_super *)b)->sb_seq);
		if (s > *seq) {
			*seq = s;
			best = i;
		}
	}
	zdev_buf_free(b);
	return best;
}

/* Write BASE with these features as the newest record; with BOTH, into both zones, as an
 * upgrade that finished would; without, the other zone keeps its older record. */
static void stamp(const struct zlfs_sb_info *base, uint32_t compat, uint32_t ro, uint32_t inc,
		  int both)
{
	struct zlfs_sb_info s = *base;
	struct zdev *dev = NULL;
	uint64_t seq;
	int newest, i;

	ck_assert_int_eq(zdev_open(img, NULL, &dev), 0);
	newest = newest_zone(dev, &seq);
	s.feat_compat = compat;
	s.feat_ro_compat = ro;
	s.feat_incompat = inc;
	for (i = 0; i < 1 + both; i++) {
		s.sb_seq = ++seq;
		ck_assert_int_eq(zlfs_sb_write(dev, &s, newest), 0);
		newest = !newest;
	}
	zdev_close(dev);
}

static void read_sb(unsigned reader, struct zlfs_sb_info *s)
{
	struct zdev *dev = NULL;

	as_reader(reader);
	ck_assert_int_eq(zdev_open(img, NULL, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, s, NULL), 0);
	zdev_close(dev);
	as_reader(0);
}

/* ---- what each reader does ---------------------------------------------------------------- */

static void snapshot(void) { ck_assert_int_eq(tu_sh("cp %s %s", img, snap), 0); }

static void assert_untouched(const char *what)
{
	ck_assert_msg(!tu_sh("cmp -s %s %s", img, snap), "%s: the image was written to", what);
}

/* READER refuses to mount (with -o OPTS unless NULL), says so naming NEEDLE, and writes
 * nothing. */
static void expect_refused_opts(unsigned reader, const char *opts, const char *needle)
{
	int rc;

	snapshot();
	as_reader(reader);
	rc = tu_sh("timeout 60 %s -f %s%s %s %s 2>%s >/dev/null", tu_bin(bin, sizeof(bin), "zlfs"),
		   opts ? "-o " : "", opts ? opts : "", img, mnt, errlog);
	as_reader(0);
	tu_sh("fusermount3 -uz %s 2>/dev/null", mnt);
	ck_assert_msg(rc != 0 && rc != 124, "reader %u mounted (exit %d)", reader, rc);
	ck_assert_msg(!tu_sh("grep -q '%s' %s", needle, errlog), "no \"%s\" in the refusal", needle);
	assert_untouched("a refused mount");
}

static void expect_refused(unsigned reader, const char *needle)
{
	expect_refused_opts(reader, NULL, needle);
}

/* READER mounts read-only: content intact, every kind of write refused with EROFS, nothing
 * written - not even recovery's or the unmount's checkpoint. */
static void expect_readonly(unsigned reader, const struct model *m)
{
	char p[600];
	pid_t pid;
	int fd;

	snapshot();
	as_reader(reader);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	as_reader(0);
	ck_assert_int_gt(pid, 0);
	check_model(m);
	snprintf(p, sizeof(p), "%s/new-file", mnt);
	errno = 0;
	ck_assert_int_lt(open(p, O_CREAT | O_WRONLY, 0644), 0);
	ck_assert_int_eq(errno, EROFS);
	snprintf(p, sizeof(p), "%s/%s", mnt, m->f[0].name);
	fd = open(p, O_WRONLY);
	ck_assert_msg(fd < 0 && errno == EROFS, "opened %s for writing", p);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	assert_untouched("a read-only mount");
}

/* Add a durable file; on full media, first delete files as a user would to make room. */
static int put_room(struct model *m, const char *name, uint32_t seed)
{
	char p[600];
	int ret, fd;

	while ((ret = put_model(m, name, seed, 50 * 1024, 1)) == -ENOSPC && m->n > 1) {
		snprintf(p, sizeof(p), "%s/%s", mnt, m->f[0].name);
		ck_assert_int_eq(unlink(p), 0);
		fd = open(mnt, O_RDONLY | O_DIRECTORY);
		ck_assert_int_eq(fsync(fd), 0); /* a checkpoint: the space is free after it */
		close(fd);
		memmove(&m->f[0], &m->f[1], sizeof(m->f[0]) * (size_t)--m->n);
	}
	return ret;
}

/* READER mounts read-write (recovering what the state left), finds the content, adds a file
 * made durable, unmounts cleanly; fsck.zlfs reading as READER is clean. */
static void expect_rw(unsigned reader, struct model *m, const char *newfile)
{
	pid_t pid;
	int rc;

	as_reader(reader);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	check_model(m);
	ck_assert_int_eq(put_room(m, newfile, 900 + (uint32_t)m->n), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	rc = tu_sh("%s -n %s >/dev/null 2>&1", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img);
	as_reader(0);
	ck_assert_msg(rc == 0, "fsck.zlfs (reader %u) exits %d", reader, rc);
}

/* ---- the cases ---------------------------------------------------------------------------- */

/* A revision-1 image in STATE, written by a revision-1 reader: feature bits it does not
 * know, then this revision, then the revision-1 reader again. */
static void case_old_image(enum state st)
{
	struct zlfs_sb_info base, after;
	struct model m;
	char args[64];

	snprintf(args, sizeof(args), "--logs 6 --revision %d:%d", OLDER, OLDER);
	build(st, args, OLDER, &m);
	read_sb(OLDER, &base);
	stamp(&base, 0, 0, BIT_INCOMPAT, 0); /* the other record still says nothing of it */
	expect_refused(OLDER, "0x40000000 (bit 30)");
	stamp(&base, 0, 0, BIT_INCOMPAT, 1);
	expect_refused(0, "unknown incompatible features");
	stamp(&base, 0, BIT_RO_COMPAT, 0, 1);
	expect_readonly(OLDER, &m);
	stamp(&base, 0, 0, 0, 1);
	expect_rw(0, &m, "by-newer");
	read_sb(OLDER, &after); /* this revision left the revision as it found it */
	ck_assert_uint_eq(after.revision, OLDER);
	ck_assert_uint_eq(after.min_revision, OLDER);
	ck_assert_uint_eq(after.nr_logs, 6);
	ck_assert_uint_eq(after.feat_incompat | after.feat_ro_compat | after.feat_compat, 0);
	expect_rw(OLDER, &m, "by-older");
	stamp(&after, BIT_COMPAT, 0, 0, 1);
	expect_rw(OLDER, &m, "with-compat");
}

/* Images of a newer revision in STATE, with this revision's 10 logs (the warm data lanes):
 * readable here but not by revisions 1 and 2, and readable only by the newer reader. */
static void case_new_image(enum state st)
{
	char args[64], need[64];
	struct model m;

	snprintf(args, sizeof(args), "--logs 10 --revision %d:%d", NEWER, ZLFS_REVISION);
	snprintf(need, sizeof(need), "needs a reader of revision %d", ZLFS_REVISION);
	build(st, args, NEWER, &m);
	expect_refused(OLDER, need);
	expect_refused(R2, need);
	expect_rw(0, &m, "by-older");
	expect_rw(NEWER, &m, "by-newer");

	snprintf(args, sizeof(args), "--logs 10 --revision %d:%d", NEWER, NEWER);
	snprintf(need, sizeof(need), "needs a reader of revision %d", NEWER);
	build(st, args, NEWER, &m);
	expect_refused(0, need);
	expect_rw(NEWER, &m, "by-newer");
}

START_TEST(t_open) { case_old_image(ST_OPEN); case_new_image(ST_OPEN); }
END_TEST
START_TEST(t_closed) { case_old_image(ST_CLOSED); case_new_image(ST_CLOSED); }
END_TEST
START_TEST(t_gc) { case_old_image(ST_GC); case_new_image(ST_GC); }
END_TEST
START_TEST(t_full) { case_old_image(ST_FULL); case_new_image(ST_FULL); }
END_TEST

/* The writer switch itself, and fsck's view of a record it cannot read. */
START_TEST(t_mkfs_switch)
{
	struct zlfs_sb_info s;
	struct model m = {0}, m6 = {0};
	char args[64];

	make_image("", 64 * MiB, NULL); /* a small device: 4 logs, which revision 1 reads */
	read_sb(0, &s);
	ck_assert_uint_eq(s.nr_logs, 4);
	ck_assert_uint_eq(s.min_revision, 1);
	make_image("", 96 * MiB, NULL); /* 7 logs, which revision 1 lacks */
	read_sb(0, &s);
	ck_assert_uint_eq(s.revision, ZLFS_REVISION);
	ck_assert_uint_eq(s.min_revision, 2);
	ck_assert_uint_eq(s.nr_logs, ZLFS_NR_LOG_TYPES_R2);
	expect_refused(OLDER, "needs a reader of revision 2");
	expect_rw(R2, &m6, "r2");
	make_image("--logs 10", 64 * MiB, NULL); /* the lanes: revision 3 */
	read_sb(0, &s);
	ck_assert_uint_eq(s.min_revision, 3);
	ck_assert_uint_eq(s.nr_logs, ZLFS_NR_LOG_TYPES);
	expect_refused(R2, "needs a reader of revision 3");
	ck_assert_int_ne(tu_sh("%s -q -f --logs 10 --revision 2:2 %s 2>/dev/null", /* no lanes in 2 */
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img), 0);
	memset(&m6, 0, sizeof(m6));
	make_image("--logs 6", 64 * MiB, NULL); /* 6 logs: revision 1 reads it */
	read_sb(OLDER, &s);
	ck_assert_uint_eq(s.revision, ZLFS_REVISION);
	ck_assert_uint_eq(s.min_revision, 1);
	expect_rw(OLDER, &m6, "y");
	ck_assert_int_ne(tu_sh("%s -q -f --logs 7 --revision 1:1 %s 2>/dev/null", /* 7 logs in 1 */
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img), 0);
	snprintf(args, sizeof(args), "--revision %d:%d --features 10000000:0:0", NEWER, NEWER);
	make_image(args, 64 * MiB, NULL);
	read_sb(NEWER, &s);
	ck_assert_uint_eq(s.revision, NEWER);
	ck_assert_uint_eq(s.min_revision, NEWER);
	ck_assert_uint_eq(s.feat_compat, BIT_COMPAT);
	ck_assert_uint_eq(s.sb_seq, 3); /* both records rewritten: none of revision 1 is left */
	expect_refused(0, "upgrade zlfs");
	ck_assert_int_ne(tu_sh("%s -n %s >/dev/null 2>&1", tu_bin(bin, sizeof(bin), "fsck.zlfs"),
			       img), 0);
	expect_rw(NEWER, &m, "x");
	ck_assert_int_ne(tu_sh("%s -q -f --revision 0 %s 2>/dev/null",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img), 0);
}
END_TEST

/* compress=: refused on a filesystem without the COMPRESS feature, a malformed value refused,
 * the image untouched each time; compress=none mounts. A filesystem stamped with the feature
 * but no cluster size in its superblock is refused as damaged; mkfs --compress's mounts. */
START_TEST(t_compress_option)
{
	pid_t pid;

	make_image("", 64 * MiB, NULL);
	expect_refused_opts(0, "compress=lz4", "compress=lz4 was asked for, but the filesystem "
			    "has no COMPRESS feature");
	expect_refused_opts(0, "compress=zstd:19", "compress=zstd was asked for");
	expect_refused_opts(0, "compress=zstd:23", "compress takes lz4, zstd");
	expect_refused_opts(0, "compress=gzip", "or none, not .gzip."); /* grep's . for the quotes */
	expect_refused_opts(0, "compress_extension=txt", "compress_extension= was given, but the "
			    "filesystem has no COMPRESS feature");
	expect_refused_opts(0, "compress_extension=a/b", "compress_extension takes suffixes");
	expect_refused_opts(0, "compress_extension=txt::log", "compress_extension takes suffixes");
	expect_refused_opts(0, "compress_extension=0123456789abcdef", "compress_extension takes");
	expect_refused_opts(0, "compress_extension=a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:q",
			    "at most 16");
	expect_refused_opts(0, "nocompress_extension=", "nocompress_extension takes suffixes");
	expect_refused_opts(0, "compress_extension=so:TXT,nocompress_extension=zip:txt",
			    "a suffix is in both");
	pid = tu_daemon_start(img, mnt, "compress=none");
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	make_image("--features 0:0:5c", 64 * MiB, NULL); /* ONE_FLUSH, INLINE, XATTR_NODES, COMPRESS */
	expect_refused(0, "superblock cluster_log = 0");
	make_image("--compress=zstd --cluster-blocks 8", 64 * MiB, NULL);
	pid = tu_daemon_start(img, mnt, "compress=lz4");
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
}
END_TEST

int main(void)
{
	const struct {
		const char *name;
		const TTest *test;
	} cases[] = {{"mkfs", t_mkfs_switch}, {"open", t_open}, {"closed", t_closed},
		     {"gc", t_gc},	       {"full", t_full}, {"compress", t_compress_option}};
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("revisions");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tc = tcase_create(cases[i].name); /* CK_RUN_CASE=gc runs one state */
		tcase_set_timeout(tc, 600);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return tu_run_suite(s);
}
