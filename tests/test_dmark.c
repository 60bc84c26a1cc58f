/*
 * test_dmark.c - what fsync costs for names made since the last checkpoint (dentry marks,
 * fs/file/dmark.c), through the real daemon, counted in device flushes (zlfs-ctl stats'
 * host_flushes) and checkpoints (checkpoint_version).
 *
 * A new file's fsync is one flush and no checkpoint; its directory's fsync then none; SQLite's
 * rollback commit (journal made, fsync'ed twice, directory fsync'ed, database fsync'ed,
 * journal unlinked) three flushes; each case a mark cannot say takes a checkpoint: a directory
 * fsync after an unlink, a renamed or linked file, a file in a new directory, a directory whose
 * attributes changed. A filesystem stamped without the feature (as an older mkfs) takes a
 * checkpoint for a new file. The power cuts are test_crash's 'dentry' workload, and here a
 * file the checkpoint has, renamed, moved or relinked away from the name a new fsync'ed file
 * then takes: after a power cut it is still there. A read error while the marks are linked at
 * mount loses none: that mount fails, writing nothing, and the next one links them. A name
 * change dmark.c has no memory to record makes the directory's fsync take a checkpoint (the
 * binary is linked with --wrap=calloc for it). A crafted device whose log names one new file
 * twice (two marks) gets it back under the newest name only.
 */
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char img[512], mnt[512], bin[512];

static void mount_fresh(const char *mkfs_opts)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	tu_fresh_fs("dmark.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	if (mkfs_opts)
		ck_assert_int_eq(tu_sh("%s -q -f %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
				       mkfs_opts, img), 0);
}

/* REL under the mount; two at a time (rename, link). */
static const char *at(const char *rel)
{
	static char p[2][700];
	static int k;

	k ^= 1;
	snprintf(p[k], sizeof(p[k]), "%s/%s", mnt, rel);
	return p[k];
}

static void put(const char *rel, size_t n, int sync)
{
	char b[6000];
	int fd = open(at(rel), O_CREAT | O_WRONLY, 0644);

	ck_assert_int_ge(fd, 0);
	memset(b, 'a' + (int)(n % 26), sizeof(b));
	ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
	if (sync)
		ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* A fresh mount (cp_interval=0, nogc) with directory "d" and file NAME of 5,000 bytes in its
 * checkpoint; returns the daemon. */
static pid_t mount_with_checkpointed(const char *name)
{
	pid_t pid;

	mount_fresh(NULL);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	put(name, 5000, 0);
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
	return pid;
}

static void fsync_rel(const char *rel)
{
	int fd = open(at(rel), O_RDONLY);

	ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* Flushes and checkpoints since the last call. */
static void cost(long *flushes, long *cps)
{
	static long f0, c0;
	long f = tu_ctl_stat(mnt, "host_flushes"), c = tu_ctl_stat(mnt, "checkpoint_version");

	ck_assert_int_ge(f, 0);
	ck_assert_int_ge(c, 0);
	*flushes = f - f0;
	*cps = c - c0;
	f0 = f;
	c0 = c;
}

#define EXPECT(what, nf, nc)                                                                   \
	do {                                                                                   \
		long f_, c_;                                                                   \
		cost(&f_, &c_);                                                                \
		ck_assert_msg(f_ == (nf) && c_ == (nc), "%s: %ld flushes and %ld checkpoints, " \
			      "expected %d and %d", what, f_, c_, nf, nc);                       \
	} while (0)

START_TEST(t_marks_save_checkpoints)
{
	pid_t pid;
	long f, c;

	pid = mount_with_checkpointed("db");
	cost(&f, &c);

	put("new", 5000, 1);
	EXPECT("a new file's fsync", 1, 0);
	fsync_rel(".");
	EXPECT("its directory's fsync", 0, 0);
	put("d/x", 100, 1);
	fsync_rel("d");
	EXPECT("a new file in a subdirectory and the subdirectory's fsync", 1, 0);
	for (int i = 0; i < 3; i++) { /* SQLite's rollback commit */
		put("db-journal", 3000, 1);
		put("db-journal", 512, 1);
		fsync_rel(".");
		put("db", 4096, 1);
		ck_assert_int_eq(unlink(at("db-journal")), 0);
		EXPECT("a rollback commit", 3, 0);
	}
	fsync_rel(".");
	EXPECT("a directory fsync after an unlink", 2, 1);

	put("r", 100, 1);
	ck_assert_int_eq(rename(at("r"), at("r2")), 0);
	EXPECT("a new file's fsync", 1, 0);
	fsync_rel("r2");
	EXPECT("a renamed new file's fsync", 2, 1);
	put("l", 100, 0);
	ck_assert_int_eq(link(at("l"), at("l2")), 0);
	fsync_rel("l");
	EXPECT("a linked new file's fsync", 2, 1);
	ck_assert_int_eq(mkdir(at("nd"), 0755), 0);
	put("nd/f", 100, 1);
	EXPECT("a file in a new directory", 2, 1);
	put("d/y", 100, 1);
	ck_assert_int_eq(chmod(at("d"), 0700), 0);
	EXPECT("a new file's fsync", 1, 0);
	fsync_rel("d");
	EXPECT("the fsync of a directory chmod'ed", 2, 1);
	tu_daemon_stop(mnt, pid);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img),
			 0);
}
END_TEST

/* An fsync of a file with nothing unwritten costs nothing: a file the checkpoint has, a new
 * file fsync'ed once already, an old one after its fsync. A change of its attributes alone
 * (chmod) is one flush again. After a power cut each fsync'ed state is there. */
static void power_cut(pid_t pid);
static int holds(const char *rel, size_t n);

START_TEST(t_clean_fsync_costs_nothing)
{
	struct stat st;
	pid_t pid;
	long f, c;

	pid = mount_with_checkpointed("db");
	cost(&f, &c);
	fsync_rel("db");
	EXPECT("the fsync of a file the checkpoint has", 0, 0);
	put("new", 5000, 1);
	EXPECT("a new file's fsync", 1, 0);
	fsync_rel("new");
	fsync_rel("new");
	EXPECT("the new file's fsync again", 0, 0);
	ck_assert_int_eq(chmod(at("db"), 0600), 0);
	fsync_rel("db");
	EXPECT("the fsync of a file chmod'ed", 1, 0);
	fsync_rel("db");
	EXPECT("the chmod'ed file's fsync again", 0, 0);
	power_cut(pid);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(holds("new", 5000), "the fsync'ed new file is not whole");
	ck_assert_int_eq(stat(at("db"), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_msg(holds("db", 5000), "the checkpointed file changed");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img),
			 0);
}
END_TEST

/* As an older mkfs made it (ONE_FLUSH only): no mark, the new file's fsync is a checkpoint. */
START_TEST(t_without_the_feature)
{
	pid_t pid;
	long f, c;

	mount_fresh("--features 0:0:4");
	/* noinline_dentry: the first inline directory's superblock write (INLINE_DENTRIES turned
	 * on, once per filesystem) is a flush this count is not about */
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc,noinline_dentry");
	ck_assert_int_gt(pid, 0);
	cost(&f, &c);
	put("new", 5000, 1);
	EXPECT("a new file's fsync without DENTRY_MARK", 2, 1);
	fsync_rel(".");
	EXPECT("its directory's fsync", 0, 0);
	tu_daemon_stop(mnt, pid);
}
END_TEST

/* Kill the daemon and cut the emulated device's power: only what was flushed is left. */
static void power_cut(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	tu_sh("fusermount3 -uz %s", mnt);
	ck_assert_int_eq(tu_sh("%s powercut %s >/dev/null", tu_bin(bin, sizeof(bin), "zlfs-emu"),
			       img), 0);
}

/* REL holds exactly N bytes of put's pattern for N. */
static int holds(const char *rel, size_t n)
{
	char b[6001];
	int fd = open(at(rel), O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, b, sizeof(b)) : -1;

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < got; i++)
		if (b[i] != 'a' + (int)(n % 26))
			return 0;
	return got == (ssize_t)n;
}

/* A file the checkpoint has under name "a" is given another name MOVE says ("b" by rename,
 * "d/b" by rename into a subdirectory, or "b" by link and unlink), and a new file made "a"
 * and fsync'ed; then power fails. Recovery links the new file's mark, "a"; the older file
 * must not go with the name it lost: its new name was not made durable, so it is either
 * where the checkpoint had it (impossible here: "a" is the new file's) or at its new name.
 * A mark may not say such a name (the older file's move is in no mark), so the new file's
 * fsync takes a checkpoint. */
static void renamed_occupant(int move)
{
	const char *b = move == 1 ? "d/b" : "b";
	pid_t pid;

	pid = mount_with_checkpointed("a");
	if (move == 2) {
		ck_assert_int_eq(link(at("a"), at(b)), 0);
		ck_assert_int_eq(unlink(at("a")), 0);
	} else {
		ck_assert_int_eq(rename(at("a"), at(b)), 0);
	}
	put("a", 100, 1);
	power_cut(pid);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(holds("a", 100), "the fsync'ed new file 'a' is not whole");
	ck_assert_msg(holds(b, 5000), "the older file, moved to '%s' before the power cut, is "
		      "lost (%s)", b, strerror(errno));
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img),
			 0);
}

START_TEST(t_renamed_occupant_survives) { renamed_occupant(0); }
END_TEST

START_TEST(t_moved_occupant_survives) { renamed_occupant(1); }
END_TEST

START_TEST(t_relinked_occupant_survives) { renamed_occupant(2); }
END_TEST

/* The block address of the inode REL names on the (unmounted) image. */
static long inode_addr(const char *rel)
{
	char cmd[1600], line[256];
	long addr = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s %s -p /%s", tu_bin(bin, sizeof(bin), "zlfs-dump"), img,
		 rel);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while (addr < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, "    addr: ", 10)) /* the inode's own, before its nodes' */
			addr = atol(line + 10);
	pclose(f);
	ck_assert_int_gt(addr, 0);
	return addr;
}

/* A new file in a subdirectory fsync'ed (its name in a mark), then power fails, and the first
 * read of the subdirectory's inode at the next mount fails once (EIO). That mount must either
 * link the name or fail without writing: a mount that goes on without it writes a checkpoint
 * in which the fsync'ed file has no name, and the mark is forgotten. The next mount (the
 * device reads again) has the file. */
START_TEST(t_read_error_loses_no_mark)
{
	pid_t pid = mount_with_checkpointed("a");

	put("d/new", 5000, 1);
	power_cut(pid);
	ck_assert_int_eq(tu_sh("%s inject %s eio-read %ld --offset >/dev/null",
			       tu_bin(bin, sizeof(bin), "zlfs-emu"), img, inode_addr("d") * 4096),
			 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	if (pid > 0) {
		ck_assert_msg(holds("d/new", 5000), "mounted past the read error without the "
			      "fsync'ed file d/new");
		ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	}
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(holds("d/new", 5000), "the fsync'ed file d/new is lost");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img),
			 0);
}
END_TEST

/* ---- a crafted device: two marks name one inode ---------------------------------------- */

/* Append to the image, at the write pointer of the zone whose last two blocks are NAME's
 * mark and its inode (the fsync group the daemon wrote), a second group: the mark naming
 * NAME2 in the same directory, then the inode again, both with newer sequence numbers and
 * valid checksums, as a device crafted to name one file twice would. */
static void append_second_mark(const char *name, const char *name2)
{
	struct zdev_open_opts oo = {0};
	struct zdev *dev;
	struct zdev_zone z[64];
	uint8_t *b = zdev_buf_alloc(3 * ZLFS_BLOCK_SIZE), *mark = b, *ino = b + ZLFS_BLOCK_SIZE;
	struct zlfs_dentry_mark *m = (struct zlfs_dentry_mark *)mark;
	struct zlfs_blkhdr *hm = &m->hdr, *hi = (struct zlfs_blkhdr *)ino;
	uint64_t seed;
	uint32_t i, nz;
	int found = 0;

	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_read(dev, b, ZLFS_BLOCK_SIZE, 0), 0);
	seed = zlfs_csum_seed(((struct zlfs_super *)b)->uuid);
	ck_assert_int_eq(zlfs_blk_verify(b, seed, ZLFS_KIND_SUPER), 0);
	nz = zdev_geometry(dev)->nr_zones;
	ck_assert_uint_le(nz, 64);
	ck_assert_int_eq(zdev_report(dev, 0, nz, z), 0);
	for (i = 0; i < nz && !found; i++) {
		if (z[i].wp < z[i].start + 2 * ZLFS_BLOCK_SIZE)
			continue;
		ck_assert_int_eq(zdev_read(dev, b, 2 * ZLFS_BLOCK_SIZE,
					   z[i].wp - 2 * ZLFS_BLOCK_SIZE), 0);
		found = !zlfs_blk_verify(mark, seed, ZLFS_KIND_DMARK) &&
			!zlfs_blk_verify(ino, seed, ZLFS_KIND_INODE) &&
			le16_get(m->name_len) == strlen(name) &&
			!memcmp(m->name, name, strlen(name));
	}
	ck_assert_msg(found, "no zone ends with the mark of '%s' and its inode", name);
	memset(m->name, 0, sizeof(m->name));
	memcpy(m->name, name2, strlen(name2));
	m->name_len = le16_put((uint16_t)strlen(name2));
	hm->seq = le64_put(le64_get(hi->seq) + 1);
	hi->seq = le64_put(le64_get(hi->seq) + 2);
	zlfs_blk_seal(mark, seed);
	zlfs_blk_seal(ino, seed);
	ck_assert_int_eq(zdev_write(dev, b, 2 * ZLFS_BLOCK_SIZE, z[i - 1].wp), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	zdev_close(dev);
	zdev_buf_free(b);
}

/* One file of one link must not come back under two names: recovery links the newest mark
 * and leaves the other, and fsck finds nothing to say. */
START_TEST(t_two_marks_one_inode)
{
	struct stat st;
	pid_t pid = mount_with_checkpointed("a");

	put("d/new", 5000, 1);
	power_cut(pid);
	append_second_mark("new", "other");
	pid = tu_daemon_start(img, mnt, "cp_interval=0,nogc");
	ck_assert_int_gt(pid, 0);
	ck_assert_msg(holds("d/other", 5000), "the newest mark's name d/other is not the file");
	ck_assert_msg(lstat(at("d/new"), &st) && errno == ENOENT, "the file has the older "
		      "mark's name d/new too");
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(tu_sh("%s -n %s >/dev/null", tu_bin(bin, sizeof(bin), "fsck.zlfs"), img),
			 0);
}
END_TEST

/* ---- no memory for the records: this binary is linked with --wrap=calloc, and while
 * fail_calloc is set every calloc of the filesystem's code (in process) returns NULL ---- */

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

static int fail_calloc, failed_callocs;

void *__wrap_calloc(size_t n, size_t size)
{
	if (fail_calloc) {
		failed_callocs++;
		return NULL;
	}
	return __real_calloc(n, size);
}

/* A name the checkpoint has removed while no record of it can be made: the directory's fsync
 * must take a checkpoint (no record may say the directory is covered by durable marks). */
START_TEST(t_unrecorded_change_takes_a_checkpoint)
{
	struct zlfs_mount_opts mo = {0};
	struct node_page *root;
	struct zlfs_fs *fs;
	uint64_t version;
	uint32_t ino;
	uint8_t type;
	int ret;

	ck_assert_int_eq(tu_daemon_stop(mnt, mount_with_checkpointed("x")), 0);
	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	ck_assert_int_eq(inode_get(fs, 1, &root), 0);
	ck_assert_int_eq(dir_lookup(fs, root, "x", 1, &ino, &type), 0); /* its block in memory */
	fail_calloc = 1;
	ret = dir_remove(fs, root, "x", 1);
	fail_calloc = 0;
	node_put(fs, root);
	ck_assert_int_eq(ret, 0);
	ck_assert_int_gt(failed_callocs, 0); /* the record was tried, and could not be made */
	version = fs->cp.version;
	ck_assert_int_eq(files_fsync(fs, 1), 0);
	ck_assert_msg(fs->cp.version > version, "the directory's fsync wrote no checkpoint: the "
		      "removal of 'x', in no record, is not durable");
	ck_assert_int_eq(files_unmount(fs), 0);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	if (tu_fuse_missing())
		return 77;
	s = suite_create("dmark");
	tc = tcase_create("dmark");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_marks_save_checkpoints);
	tcase_add_test(tc, t_without_the_feature);
	tcase_add_test(tc, t_clean_fsync_costs_nothing);
	tcase_add_test(tc, t_renamed_occupant_survives);
	tcase_add_test(tc, t_moved_occupant_survives);
	tcase_add_test(tc, t_relinked_occupant_survives);
	tcase_add_test(tc, t_read_error_loses_no_mark);
	tcase_add_test(tc, t_two_marks_one_inode);
	tcase_add_test(tc, t_unrecorded_change_takes_a_checkpoint);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
