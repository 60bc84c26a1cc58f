/*
 * test_inline_dirs.c - inline directories (INLINE_DENTRIES): the codec of fs/base/
 * dentry_inline.c, and small directories kept in their inodes by the real daemon
 * (fs/file/dir_inline.c).
 *
 * The codec: round trips keep every used entry's slot, hash, inode, type and name; what does
 * not fit is refused with -E2BIG; crafted encodings (lengths past the area, slots past the
 * block or overlapping, name_len 0, trailing bytes) are refused with -EUCLEAN and a reason,
 * and random bytes never read or write out of bounds (the sanitizers watch).
 * Through the daemon, each test on a fresh image: many small directories take no data block;
 * a directory grown past the area becomes a block and shrunk is inline again; renames across
 * inline directories; readdir offsets stay valid while a directory changes form; an
 * encrypted filesystem's small directory; noinline_dentry leaves the feature off. Every
 * unmount is followed by fsck.zlfs -n, which must find the image clean.
 */
#include "testutil.h"

#include "files.h"
#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the codec ------------------------------------------------------------------------------ */

static void put_entry(struct zlfs_dentry_block *b, uint32_t s, const char *name, uint32_t ino)
{
	size_t nl = strlen(name);
	uint32_t n = (uint32_t)((nl + 7) / 8);

	for (uint32_t i = 0; i < n; i++)
		b->bitmap[(s + i) / 8] |= (uint8_t)(1u << ((s + i) % 8));
	memcpy(b->name[s], name, nl);
	b->d[s].name_len = le16_put((uint16_t)nl);
	b->d[s].hash = le32_put(0x9e3779b9u * (s + 1));
	b->d[s].ino = le32_put(ino);
	b->d[s].type = 4;
}

static int decode(const uint8_t *area, struct zlfs_dentry_block *b, char *why)
{
	why[0] = 0;
	return zlfs_dentry_inline_decode(area, b, why, 200);
}

START_TEST(t_codec_round_trip)
{
	static struct zlfs_dentry_block a, b;
	uint8_t area[ZLFS_DENTRY_INLINE_SIZE];
	char why[200];

	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(zlfs_dentry_inline_encode(&a, area), 0); /* empty: one zero byte */
	ck_assert_int_eq(decode(area, &b, why), 0);
	ck_assert(!memcmp(b.bitmap, a.bitmap, sizeof(a.bitmap)));
	put_entry(&a, 0, "copyright", 7);
	put_entry(&a, 5, "changelog.Debian.gz", 8); /* 3 slots */
	put_entry(&a, 200, "z", 9);                /* the last slot */
	ck_assert_int_eq(zlfs_dentry_inline_encode(&a, area), 0);
	memset(&b, 0xa5, sizeof(b));
	ck_assert_int_eq(decode(area, &b, why), 0);
	ck_assert(!memcmp(b.bitmap, a.bitmap, sizeof(a.bitmap)));
	ck_assert(!memcmp(b.d, a.d, sizeof(a.d)));
	ck_assert(!memcmp(b.name, a.name, sizeof(a.name)));
}
END_TEST

START_TEST(t_codec_too_big)
{
	static struct zlfs_dentry_block a;
	uint8_t area[ZLFS_DENTRY_INLINE_SIZE];
	char name[ZLFS_NAME_MAX + 1];

	memset(&a, 0, sizeof(a));
	memset(name, 'n', sizeof(name));
	name[ZLFS_DENTRY_INLINE_SIZE - 1 - 11] = 0; /* exactly fills the area */
	put_entry(&a, 0, name, 7);
	ck_assert_int_eq(zlfs_dentry_inline_encode(&a, area), 0);
	memset(&a, 0, sizeof(a));
	name[ZLFS_DENTRY_INLINE_SIZE - 1 - 11] = 'n';
	name[ZLFS_DENTRY_INLINE_SIZE - 11] = 0; /* one byte more */
	put_entry(&a, 0, name, 7);
	ck_assert_int_eq(zlfs_dentry_inline_encode(&a, area), -E2BIG);
	memset(&a, 0, sizeof(a));
	for (uint32_t s = 0; s < 11; s++) /* 11 entries of 12 bytes: 133 > 128 */
		put_entry(&a, s, "x", s + 2);
	ck_assert_int_eq(zlfs_dentry_inline_encode(&a, area), -E2BIG);
}
END_TEST

/* One entry's head at POS of AREA. */
static uint32_t head(uint8_t *area, uint32_t pos, uint8_t slot, uint8_t nl)
{
	area[pos] = slot;
	area[pos + 1] = nl;
	area[pos + 2] = 8;
	area[pos + 3] = 1; /* hash */
	area[pos + 7] = 2; /* ino */
	memset(area + pos + 11, 'a', nl);
	return pos + 11 + nl;
}

static void refused(const uint8_t *area, const char *what)
{
	static struct zlfs_dentry_block b;
	char why[200];

	ck_assert_int_eq(decode(area, &b, why), -EUCLEAN);
	ck_assert_msg(strstr(why, what), "refused for \"%s\", not \"%s\"", why, what);
}

START_TEST(t_codec_crafted)
{
	uint8_t area[ZLFS_DENTRY_INLINE_SIZE];
	uint32_t p;

	memset(area, 0, sizeof(area)); /* a name past the area */
	area[0] = 1;
	head(area, 1, 0, 10);
	area[2] = 200;
	refused(area, "runs past the 128-byte area");
	memset(area, 0, sizeof(area)); /* a head past the area */
	area[0] = 2;
	p = head(area, 1, 0, 110);
	ck_assert_uint_gt(p + 11, sizeof(area));
	refused(area, "head runs past");
	memset(area, 0, sizeof(area)); /* slot past the block */
	area[0] = 1;
	head(area, 1, ZLFS_DENTRY_SLOTS, 1);
	refused(area, "runs past slot 200");
	memset(area, 0, sizeof(area)); /* a name running past the last slot */
	area[0] = 1;
	head(area, 1, 200, 9);
	refused(area, "runs past slot 200");
	memset(area, 0, sizeof(area)); /* name_len 0 */
	area[0] = 1;
	head(area, 1, 3, 0);
	refused(area, "name_len = 0");
	memset(area, 0, sizeof(area)); /* overlapping slots: 0-1 then 1 */
	area[0] = 2;
	head(area, head(area, 1, 0, 16), 1, 1);
	refused(area, "overlaps");
	memset(area, 0, sizeof(area)); /* descending slots */
	area[0] = 2;
	head(area, head(area, 1, 9, 1), 3, 1);
	refused(area, "overlaps");
	memset(area, 0, sizeof(area)); /* a byte after the last entry */
	area[0] = 1;
	area[head(area, 1, 0, 4) + 3] = 7;
	refused(area, "is not zero");
	memset(area, 0, sizeof(area)); /* count past what is there */
	area[0] = 255;
	refused(area, "name_len = 0");
}
END_TEST

/* Random areas: never out of bounds, and what decodes encodes back to the same bytes (the
 * encoding is canonical: one area per set of entries). */
START_TEST(t_codec_random)
{
	static struct zlfs_dentry_block b;
	uint8_t area[ZLFS_DENTRY_INLINE_SIZE], again[ZLFS_DENTRY_INLINE_SIZE];
	char why[200];
	unsigned ok = 0;

	srandom(7);
	for (int i = 0; i < 200000; i++) {
		uint32_t n = 1 + (uint32_t)random() % 4, p = 1;

		memset(area, 0, sizeof(area));
		area[0] = (uint8_t)n;
		for (uint32_t k = 0; k < n && p + 11 < sizeof(area); k++) {
			uint8_t nl = (uint8_t)(random() % 40);

			if (p + 11 + nl > sizeof(area))
				nl = (uint8_t)(sizeof(area) - p - 11);
			p = head(area, p, (uint8_t)(k * 5 + random() % 8), nl);
		}
		if (random() % 4 == 0)
			area[random() % sizeof(area)] = (uint8_t)random();
		if (decode(area, &b, why))
			continue;
		ok++;
		ck_assert_int_eq(zlfs_dentry_inline_encode(&b, again), 0);
		ck_assert(!memcmp(area, again, sizeof(area)));
	}
	ck_assert_uint_gt(ok, 1000);
}
END_TEST

/* ---- through the daemon --------------------------------------------------------------------- */

static char img[512], mnt[512], bin[512], key[512];
static pid_t daemon_pid = -1;
static char opts[1024];

static const char *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *at(const char *fmt, ...)
{
	static char p[8][1024];
	static int k;
	char rel[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	k = (k + 1) % 8;
	snprintf(p[k], sizeof(p[k]), "%s/%s", mnt, rel);
	return p[k];
}

static void fresh(const char *mkfs_args, const char *mount_opts)
{
	struct zemu_create_opts o = {.size = 128 << 20, .zone_size = 4 << 20};

	tu_fresh_fs("idirs", &o, img, sizeof(img), mnt, sizeof(mnt));
	if (mkfs_args)
		ck_assert_int_eq(tu_sh("%s -q -f %s %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
				       mkfs_args, img), 0);
	snprintf(opts, sizeof(opts), "%s", mount_opts ? mount_opts : "");
	key[0] = 0;
}

static void up(void)
{
	daemon_pid = tu_daemon_start(img, mnt, opts[0] ? opts : NULL);
	ck_assert_int_gt(daemon_pid, 0);
}

static void down(void)
{
	ck_assert_int_eq(tu_daemon_stop(mnt, daemon_pid), 0);
	daemon_pid = -1;
	ck_assert_int_eq(tu_sh("%s -n %s%s %s", tu_bin(bin, sizeof(bin), "fsck.zlfs"),
			       key[0] ? "--keyfile " : "", key, img), 0);
}

static void sync_fs(void)
{
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
}

static void touch(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY, 0644);

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, path, 3), 3);
	ck_assert_int_eq(close(fd), 0);
}

/* The names in DIR (dot entries left out), each once, must be N with prefix-free checks left
 * to the caller: the count. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
	errno = 0;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	ck_assert_int_eq(errno, 0);
	closedir(d);
	return n;
}

/* Directory PATH (from the root) read with the library: whether it is inline, its blocks. */
static void lib_dir(const char *path, int *inl, uint64_t *blocks)
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t ino = ZLFS_ROOT_INO;
	char buf[256], *save, *c;

	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	snprintf(buf, sizeof(buf), "%s", path);
	for (c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		ck_assert_int_eq(inode_get(fs, ino, &np), 0);
		ck_assert_int_eq(dir_lookup(fs, np, c, strlen(c), &ino, NULL), 0);
		node_put(fs, np);
	}
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	*inl = !!(le32_get(inode_of(np)->flags) & ZLFS_IFLAG_INLINE_DENTRY);
	*blocks = le64_get(inode_of(np)->blocks);
	node_put(fs, np);
	ck_assert_int_eq(files_unmount(fs), 0);
}

static void expect_form(const char *path, int want_inline, uint64_t want_blocks)
{
	uint64_t blocks;
	int inl;

	lib_dir(path, &inl, &blocks);
	ck_assert_msg(inl == want_inline && blocks == want_blocks,
		      "%s: inline %d, %llu blocks; expected inline %d, %llu blocks", path, inl,
		      (unsigned long long)blocks, want_inline, (unsigned long long)want_blocks);
}

static uint32_t feat_incompat(void)
{
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct zlfs_fs *fs;
	uint32_t f;

	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	f = fs->sb.feat_incompat;
	ck_assert_int_eq(files_unmount(fs), 0);
	return f;
}

#define NDIRS 300

/* /usr/share/doc's shape: directories of 1 to 4 files. Their dentry blocks would take a data
 * block each; inline, the data logs get the files' bytes only (inline data: none). */
START_TEST(t_many_small_dirs)
{
	long data0, data1;
	struct stat st;

	fresh(NULL, NULL);
	up();
	data0 = tu_ctl_stat(mnt, "data_logs");
	for (int i = 0; i < NDIRS; i++) {
		ck_assert_int_eq(mkdir(at("pkg-%d", i), 0755), 0);
		touch(at("pkg-%d/copyright", i));
		if (i % 2)
			touch(at("pkg-%d/changelog.Debian.gz", i));
		if (i % 5 == 0)
			touch(at("pkg-%d/NEWS.gz", i));
	}
	sync_fs();
	data1 = tu_ctl_stat(mnt, "data_logs");
	/* the root's blocks (300 names) and their rewrites: a few; one per directory: 300 */
	ck_assert_msg(data1 - data0 <= 16 * 4096, "data logs took %ld bytes for %d directories",
		      data1 - data0, NDIRS);
	for (int i = 0; i < NDIRS; i++) {
		ck_assert_int_eq(count_entries(at("pkg-%d", i)), 1 + i % 2 + (i % 5 == 0));
		ck_assert_int_eq(stat(at("pkg-%d/copyright", i), &st), 0);
		ck_assert_int_eq(stat(at("pkg-%d/changelog.Debian.gz", i), &st), i % 2 ? 0 : -1);
		ck_assert_int_eq(st.st_size, 3);
	}
	ck_assert_int_eq(stat(at("pkg-7"), &st), 0);
	ck_assert_int_eq(st.st_blocks, 8); /* the block it would have: as before the flush */
	down();
	ck_assert(feat_incompat() & ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES);
	expect_form("pkg-7", 1, 0);
	expect_form("", 0, 2); /* the root: 300 names do not fit */
	up();
	for (int i = 0; i < NDIRS; i += 7)
		ck_assert_int_eq(count_entries(at("pkg-%d", i)), 1 + i % 2 + (i % 5 == 0));
	ck_assert_int_eq(stat(at("pkg-7"), &st), 0);
	ck_assert_int_eq(st.st_blocks, 8);
	down();
}
END_TEST

/* Past the area (a long name) the directory is written as a block, its old area cleared;
 * shrunk, it is inline again and the block is freed; past block 0 (block 1, deeper levels)
 * it stays blocks. */
START_TEST(t_grow_shrink)
{
	char name[200];

	fresh(NULL, NULL);
	up();
	ck_assert_int_eq(mkdir(at("g"), 0755), 0);
	touch(at("g/a"));
	sync_fs();
	memset(name, 'L', 150);
	name[150] = 0;
	touch(at("g/%s", name));
	down();
	expect_form("g", 0, 1);
	up();
	ck_assert_int_eq(count_entries(at("g")), 2);
	ck_assert_int_eq(unlink(at("g/%s", name)), 0);
	down();
	expect_form("g", 1, 0);
	up();
	ck_assert_int_eq(count_entries(at("g")), 1);
	for (int i = 0; i < 120; i++) /* 3 slots each: block 0, 1 and level 1 */
		touch(at("g/a-rather-long-name-%03d", i));
	sync_fs();
	ck_assert_int_eq(count_entries(at("g")), 121);
	for (int i = 0; i < 120; i++)
		ck_assert_int_eq(unlink(at("g/a-rather-long-name-%03d", i)), 0);
	down();
	up();
	ck_assert_int_eq(count_entries(at("g")), 1);
	ck_assert_int_eq(access(at("g/a"), F_OK), 0);
	ck_assert_int_eq(rmdir(at("g")), -1);
	ck_assert_int_eq(unlink(at("g/a")), 0);
	ck_assert_int_eq(rmdir(at("g")), 0);
	down();
}
END_TEST

/* Files and directories renamed from one inline directory to another, and over each other. */
START_TEST(t_rename_across)
{
	struct stat st;

	fresh(NULL, NULL);
	up();
	ck_assert_int_eq(mkdir(at("a"), 0755), 0);
	ck_assert_int_eq(mkdir(at("b"), 0755), 0);
	ck_assert_int_eq(mkdir(at("a/sub"), 0755), 0);
	touch(at("a/x"));
	touch(at("b/y"));
	sync_fs();
	ck_assert_int_eq(rename(at("a/x"), at("b/x2")), 0);
	ck_assert_int_eq(rename(at("a/sub"), at("b/sub")), 0);
	touch(at("a/z"));
	ck_assert_int_eq(rename(at("a/z"), at("b/y")), 0); /* over a name */
	down();
	expect_form("a", 1, 0);
	expect_form("b", 1, 0);
	up();
	ck_assert_int_eq(count_entries(at("a")), 0);
	ck_assert_int_eq(count_entries(at("b")), 3);
	ck_assert_int_eq(stat(at("b/sub"), &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);
	ck_assert_int_eq(stat(at("b"), &st), 0);
	ck_assert_int_eq(st.st_nlink, 3);
	ck_assert_int_eq(stat(at("a"), &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);
	down();
}
END_TEST

/* The name readdir gives after position POS of DIR (NULL at the end). */
static const char *name_after(DIR *d, long pos)
{
	struct dirent *e;

	seekdir(d, pos);
	do
		e = readdir(d);
	while (e && (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")));
	return e ? e->d_name : NULL;
}

/* telldir positions taken while a directory is inline still lead to the same entries once it
 * became a block (and back): an entry keeps its slot. */
START_TEST(t_offsets_stable)
{
	char first[3][ZLFS_NAME_MAX + 1], big[200];
	long pos[3];
	struct dirent *e;
	DIR *d;
	int n = 0;

	fresh(NULL, NULL);
	up();
	ck_assert_int_eq(mkdir(at("o"), 0755), 0);
	touch(at("o/f1"));
	touch(at("o/f2"));
	touch(at("o/f3"));
	sync_fs();
	d = opendir(at("o"));
	ck_assert_ptr_nonnull(d);
	while (n < 3 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		pos[n] = telldir(d);
		memcpy(first[n], e->d_name, strnlen(e->d_name, ZLFS_NAME_MAX));
		first[n][strnlen(e->d_name, ZLFS_NAME_MAX)] = 0;
		n++;
	}
	ck_assert_int_eq(n, 3);
	memset(big, 'B', 120);
	big[120] = 0;
	touch(at("o/%s", big)); /* no longer fits: a block at the next flush */
	for (int i = 0; i < 10; i++)
		touch(at("o/more-%d", i));
	sync_fs();
	ck_assert_str_eq(name_after(d, pos[0]), first[1]);
	ck_assert_str_eq(name_after(d, pos[1]), first[2]);
	closedir(d);
	down();
	expect_form("o", 0, 1);
	up();
	d = opendir(at("o"));
	ck_assert_str_eq(name_after(d, pos[0]), first[1]);
	ck_assert_int_eq(unlink(at("o/%s", big)), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(unlink(at("o/more-%d", i)), 0);
	sync_fs();
	ck_assert_str_eq(name_after(d, pos[0]), first[1]);
	ck_assert_str_eq(name_after(d, pos[1]), first[2]);
	closedir(d);
	down();
	expect_form("o", 1, 0);
}
END_TEST

/* An encrypted filesystem: names are ciphertext in the area, read back with the key. */
START_TEST(t_encrypted)
{
	fresh(NULL, NULL);
	tu_path(key, sizeof(key), "idirs.key");
	unlink(key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	ck_assert_int_eq(tu_sh("%s -q -f --encrypt --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), key, img), 0);
	snprintf(opts, sizeof(opts), "keyfile=%s", key);
	up();
	ck_assert_int_eq(mkdir(at("secret"), 0755), 0);
	touch(at("secret/copyright"));
	touch(at("secret/changelog"));
	down();
	up();
	ck_assert_int_eq(count_entries(at("secret")), 2);
	ck_assert_int_eq(access(at("secret/copyright"), F_OK), 0);
	ck_assert_int_eq(unlink(at("secret/changelog")), 0);
	touch(at("secret/new"));
	down();
	up();
	ck_assert_int_eq(count_entries(at("secret")), 2);
	ck_assert_int_eq(access(at("secret/new"), F_OK), 0);
	down();
}
END_TEST

/* noinline_dentry: every directory keeps a block and the feature stays off, so older zlfs
 * still reads the image; a later mount without it turns the feature on at its first. */
START_TEST(t_noinline_option)
{
	fresh(NULL, "noinline_dentry");
	up();
	ck_assert_int_eq(mkdir(at("n"), 0755), 0);
	touch(at("n/f"));
	down();
	ck_assert(!(feat_incompat() & ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES));
	expect_form("n", 0, 1);
	opts[0] = 0;
	up();
	touch(at("n/g"));
	down();
	ck_assert(feat_incompat() & ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES);
	expect_form("n", 1, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inline_dirs");
	TCase *codec = tcase_create("codec"), *tc = tcase_create("daemon");

	tcase_add_test(codec, t_codec_round_trip);
	tcase_add_test(codec, t_codec_too_big);
	tcase_add_test(codec, t_codec_crafted);
	tcase_add_test(codec, t_codec_random);
	suite_add_tcase(s, codec);
	if (!tu_fuse_missing()) {
		tcase_set_timeout(tc, 300);
		tcase_add_test(tc, t_many_small_dirs);
		tcase_add_test(tc, t_grow_shrink);
		tcase_add_test(tc, t_rename_across);
		tcase_add_test(tc, t_offsets_stable);
		tcase_add_test(tc, t_encrypted);
		tcase_add_test(tc, t_noinline_option);
		suite_add_tcase(s, tc);
	}
	return tu_run_suite(s);
}
