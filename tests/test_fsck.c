/*
 * test_fsck.c - fsck.zlfs modes, exit codes and reports on damaged emulated images.
 *
 * Images are populated and damaged through the library (no FUSE), then the real fsck.zlfs
 * binary runs on them: -n writes nothing (image bytes and write pointers compared), -p
 * repairs link counts and rolls a checkpoint mismatch forward, -y also fills /lost+found and
 * drops dangling entries, a device write-pointer error stays exit 4 in every mode with its
 * class in the text and the JSON, no zone holding valid blocks is ever reset, a clean
 * writing run records the scan time (shown by zlfs-ctl stats), and a power cut anywhere in a
 * repair leaves an image that mounts and checks clean after another run. Single bit flips
 * (checksum not resealed) in the newest superblock record, the newest checkpoint pack, a NAT
 * block, an inode and a dentry block, a write pointer moved partly back, and an fsync'ed write
 * the device lost each get the classification and exit code docs/fsck.md gives them. On an
 * encrypted root (mkfs --encrypt) every repair but naming an inode in the encrypted
 * /lost+found works without the key; that one is left, writing nothing, until fsck has it.
 */
#include "testutil.h"

#include "verify.h"
#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char img[512], mnt[512], bin[512], out[512];

static const char *fsck_bin(void) { return tu_bin(bin, sizeof(bin), "fsck.zlfs"); }

static int fsck(const char *flags, const char *image)
{
	char err[600];

	tu_path(out, sizeof(out), "fsck.out");
	return tu_sh("%s %s %s > %s 2> %s", fsck_bin(), flags, image, out,
		     tu_path(err, sizeof(err), "fsck.err"));
}

/* Whether the standard output (or error) of the last fsck() contains S. */
static int said(const char *s) { return tu_file_has(out, s); }

static int said_err(const char *s)
{
	char err[600];

	return tu_file_has(tu_path(err, sizeof(err), "fsck.err"), s);
}

/* The master key the library mounts with (an encrypted image made by populate_encrypted), or
 * unset. */
static struct zlfs_key_source key_src;
static char keyfile[512];

static struct zlfs_mount_opts mount_opts(int ro)
{
	return (struct zlfs_mount_opts){.readonly = ro, .key = key_src.keyfile ? &key_src : NULL};
}

static struct zlfs_fs *mount_rw(const char *image, int ro)
{
	struct zlfs_mount_opts mo = mount_opts(ro);
	struct zlfs_fs *fs = NULL;

	ck_assert_int_eq(files_mount(image, &mo, &fs), 0);
	return fs;
}

static uint8_t pat(uint32_t ino, size_t i) { return (uint8_t)(ino * 31 + i * 7); }

/* A file or directory NAME under PARENT, SIZE bytes of a pattern; its inode number. */
static uint32_t mk(struct zlfs_fs *fs, uint32_t parent, const char *name, int dir, size_t size)
{
	struct node_page *p, *np;
	uint32_t mode = dir ? S_IFDIR | 0755 : S_IFREG | 0644, ino;
	uint8_t *b;

	ck_assert_int_eq(inode_get(fs, parent, &p), 0);
	ck_assert_int_eq(inode_new(fs, mode, 0, 0, 0, parent, &np), 0);
	ck_assert_int_eq(fcrypt_inherit(fs, p, np), 0);
	ino = np->nid;
	ck_assert_int_eq(dir_add(fs, p, name, strlen(name), ino, dir ? DT_DIR : DT_REG), 0);
	if (dir) {
		inode_of(p)->nlink = le32_put(le32_get(inode_of(p)->nlink) + 1);
		node_dirty(fs, p);
	}
	b = malloc(size + 1);
	for (size_t i = 0; i < size; i++)
		b[i] = pat(ino, i);
	if (size)
		ck_assert_int_eq(data_write(fs, np, b, size, 0), (int)size);
	free(b);
	node_put(fs, np);
	node_put(fs, p);
	return ino;
}

static int same_data(struct zlfs_fs *fs, uint32_t ino, size_t size)
{
	struct node_page *np;
	uint8_t *b = malloc(size + 1);
	int ok = !inode_get(fs, ino, &np);

	if (ok) {
		ok = data_read(fs, np, b, size, 0) == (int)size;
		for (size_t i = 0; ok && i < size; i++)
			ok = b[i] == pat(ino, i);
		node_put(fs, np);
	}
	free(b);
	return ok;
}

static uint32_t ino_d, ino_f1, ino_f2;
#define F1_SIZE (20 * 1024 + 5)
#define F2_SIZE (1024 * 1024)

static void populate_tree(void)
{
	struct zlfs_fs *fs = mount_rw(img, 0);

	ino_d = mk(fs, ZLFS_ROOT_INO, "d", 1, 0);
	ino_f1 = mk(fs, ino_d, "f1", 0, F1_SIZE);
	ino_f2 = mk(fs, ZLFS_ROOT_INO, "f2", 0, F2_SIZE);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}

/* A fresh image NAME (write log LOG, or none) with /d, /d/f1 and /f2. */
static void populate(const char *name, const char *log)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20, .log_path = log};

	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	populate_tree();
}

/* The same made by mkfs.zlfs --encrypt (an encrypted root), the library mounting with the
 * key from then on; fsck runs without it unless given with_key(). */
static void populate_encrypted(const char *name)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	tu_path(keyfile, sizeof(keyfile), "fsck.key");
	unlink(keyfile);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), keyfile), 0);
	ck_assert_int_eq(tu_sh("%s -q -f --encrypt --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), keyfile, img), 0);
	key_src.keyfile = keyfile;
	populate_tree();
}

static void set_nlink(uint32_t ino, uint32_t n)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *np;

	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	inode_of(np)->nlink = le32_put(n);
	node_dirty(fs, np);
	node_put(fs, np);
	ck_assert_int_eq(files_unmount(fs), 0);
}

/* Write pointers of every zone, and a checksum of the image file. */
struct snap {
	uint64_t wp[64];
	uint8_t cond[64];
	uint32_t valid[64];   /* valid blocks per zone, as the checkpoint has them */
	unsigned long sum;
};

static void snapshot_raw(struct snap *s)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zdev_zone z[64];
	struct zdev *dev;
	FILE *f = fopen(img, "rb");
	static unsigned long buf[1 << 14];
	size_t n, i;

	memset(s, 0, sizeof(*s));
	ck_assert_ptr_nonnull(f);
	while ((n = fread(buf, sizeof(buf[0]), 1 << 14, f)) > 0)
		for (i = 0; i < n; i++)
			s->sum = s->sum * 131 + buf[i];
	fclose(f);
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_report(dev, 0, 32, z), 0);
	for (i = 0; i < 32; i++) {
		s->wp[i] = z[i].wp;
		s->cond[i] = z[i].cond;
	}
	zdev_close(dev);
}

static void snapshot(struct snap *s)
{
	struct zlfs_fs *fs;
	uint32_t i;

	snapshot_raw(s);
	fs = mount_rw(img, 1);
	for (i = 0; i < fs->sb.main_zones && fs->sb.main_zone_first + i < 64; i++)
		s->valid[fs->sb.main_zone_first + i] = fs->zone_valid[i];
	files_unmount(fs);
}

/* No zone holding valid blocks went back: its write pointer did not move backwards. */
static void no_zone_rewound(const struct snap *a, const struct snap *b, uint32_t first_main)
{
	for (uint32_t i = first_main; i < 32; i++)
		if (a->valid[i])
			ck_assert_msg(b->wp[i] >= a->wp[i] || b->cond[i] == ZDEV_COND_FULL,
				      "zone %u was reset or rewound by fsck", i);
}

static uint32_t main_first(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t z = fs->sb.main_zone_first;

	files_unmount(fs);
	return z;
}

static uint64_t sb_scan_time(void)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sb;
	struct zdev *dev;

	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb, NULL), 0);
	zdev_close(dev);
	return sb.last_fsck_time;
}

static int json_valid(void)
{
	return tu_sh("python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s", out) == 0;
}

/* ---- damaging one block ------------------------------------------------------------------
 * The image file maps device byte 0 at the start of the emulator's data area
 * (docs/emulator.md, "Image format"). As tests/fuzz_image.c does, its offset is found by
 * looking for the bytes of the first superblock record in the file; the block is then read
 * both through the device and from the file (they must agree), one bit is flipped in the file
 * without resealing the checksum, and nothing else changes: not a write pointer, not a zone. */

/* Flip bit 4 of byte BYTE of device block ADDR, which must verify as a block of KIND. */
static void flip_block(uint32_t addr, unsigned kind, uint32_t byte)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sb;
	struct zdev *dev;
	uint8_t *dv = zdev_buf_alloc(ZLFS_BLOCK_SIZE), *sbb = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	static uint8_t f[ZLFS_BLOCK_SIZE];
	int64_t off0 = -1;
	FILE *fp;

	ck_assert(dv && sbb && byte < ZLFS_BLOCK_SIZE);
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb, NULL), 0);
	ck_assert_int_eq(zdev_read(dev, sbb, ZLFS_BLOCK_SIZE,
				   (uint64_t)sb.sb_zone[0] * sb.zone_size), 0);
	ck_assert_int_eq(zdev_read(dev, dv, ZLFS_BLOCK_SIZE, (uint64_t)addr * ZLFS_BLOCK_SIZE), 0);
	zdev_close(dev);
	ck_assert_msg(!zlfs_blk_verify(dv, sb.seed, kind), "block %u is not a %s block", addr,
		      zlfs_kind_name(kind));
	fp = fopen(img, "r+b");
	ck_assert_ptr_nonnull(fp);
	for (int64_t pos = 0; off0 < 0 && fread(f, 1, sizeof(f), fp) == sizeof(f);
	     pos += ZLFS_BLOCK_SIZE)
		if (!memcmp(f, sbb, ZLFS_BLOCK_SIZE))
			off0 = pos - (int64_t)(sb.sb_zone[0] * sb.zone_size);
	ck_assert_int_ge(off0, 0);
	ck_assert_int_eq(fseeko(fp, off0 + (off_t)addr * ZLFS_BLOCK_SIZE, SEEK_SET), 0);
	ck_assert_int_eq(fread(f, 1, sizeof(f), fp), sizeof(f));
	ck_assert(!memcmp(f, dv, ZLFS_BLOCK_SIZE)); /* the file offset is the device block */
	f[byte] ^= 0x10;
	ck_assert_int_eq(fseeko(fp, off0 + (off_t)addr * ZLFS_BLOCK_SIZE, SEEK_SET), 0);
	ck_assert_int_eq(fwrite(f, 1, sizeof(f), fp), sizeof(f));
	ck_assert_int_eq(fclose(fp), 0);
	zdev_buf_free(dv);
	zdev_buf_free(sbb);
}

/*
 * The device loses every block of zone ZONE from block KEEP on, although it acknowledged them
 * (and a flush made them durable): the write pointer goes back to KEEP, the blocks below stay.
 * The emulator has no command that moves a write pointer backwards (zlfs-emu's powercut drops
 * only writes no flush has acknowledged, replay rebuilds the whole device at an earlier
 * point), so this is done through the device interface: the zone's first KEEP blocks are read,
 * the zone is reset and those blocks are written back and flushed. The result is what such a
 * device shows afterwards: a CLOSED (or EMPTY) zone whose write pointer is KEEP and whose data
 * below it is unchanged.
 */
static void zone_truncate(uint32_t zone, uint32_t keep)
{
	struct zdev_open_opts oo = {0};
	struct zdev_zone z;
	struct zdev *dev;
	uint8_t *b = keep ? zdev_buf_alloc((size_t)keep * ZLFS_BLOCK_SIZE) : NULL;
	uint64_t start;

	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_report_one(dev, zone, &z), 0);
	start = z.start;
	ck_assert(z.cond == ZDEV_COND_FULL || z.wp >= start + (uint64_t)keep * ZLFS_BLOCK_SIZE);
	if (keep) {
		ck_assert_ptr_nonnull(b);
		ck_assert_int_eq(zdev_read(dev, b, (size_t)keep * ZLFS_BLOCK_SIZE, start), 0);
	}
	ck_assert_int_eq(zdev_zone_reset(dev, zone), 0);
	if (keep)
		ck_assert_int_eq(zdev_write(dev, b, (size_t)keep * ZLFS_BLOCK_SIZE, start), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	ck_assert_int_eq(zdev_zone_close(dev, zone), 0);
	ck_assert_int_eq(zdev_report_one(dev, zone, &z), 0);
	ck_assert_uint_eq(z.wp, start + (uint64_t)keep * ZLFS_BLOCK_SIZE);
	zdev_close(dev);
	zdev_buf_free(b);
}

/* Device block of data block IDX of inode INO (after roll-forward, read-only). */
static uint32_t data_block_of(uint32_t ino, uint64_t idx)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct node_page *np;
	uint32_t addr;

	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, idx, &addr), 0);
	ck_assert_uint_ne(addr, 0);
	node_put(fs, np);
	files_unmount(fs);
	return addr;
}

static uint32_t zone_blocks_of_img(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t zb = zlfs_zone_blocks(&fs->sb);

	files_unmount(fs);
	return zb;
}

/* The counts of the read-only check in the last --json report: ERRORS errors (-1: some),
 * checkpoint mismatches (MISMATCHES: 0 none, else some) and DEVICE device errors. */
static void json_counts(long errors, long mismatches, long device)
{
	char s[64];

	ck_assert(json_valid());
	if (errors < 0) {
		ck_assert(!said("\"errors\": 0,"));
	} else {
		snprintf(s, sizeof(s), "\"errors\": %ld,", errors);
		ck_assert_msg(said(s), "expected %s", s);
	}
	snprintf(s, sizeof(s), "\"device_errors\": %ld,", device);
	ck_assert_msg(said(s), "expected %s", s);
	if (!mismatches)
		ck_assert(said("\"checkpoint_mismatches\": 0,"));
	else
		ck_assert(!said("\"checkpoint_mismatches\": 0,"));
}

START_TEST(t_clean_and_usage)
{
	struct snap a, b;
	char missing[600];

	populate("clean.img", NULL);
	snapshot(&a);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(json_valid());
	ck_assert(said("\"scan_recorded\": false"));
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum); /* -n wrote nothing */
	ck_assert_int_eq(sb_scan_time(), 0);
	ck_assert_int_eq(fsck("-n -C", img), 0);
	ck_assert(said_err("pass 5/5 (usage): 100%"));
	ck_assert_int_eq(fsck("-n -y", img), 16);
	ck_assert_int_eq(tu_sh("%s >/dev/null 2>&1", fsck_bin()), 16);
	ck_assert_int_eq(fsck("-n --bogus", img), 16);
	ck_assert_int_eq(fsck("-n", tu_path(missing, sizeof(missing), "no-such.img")), 8);
	ck_assert_int_eq(fsck("-n --json", missing), 8);
	ck_assert(json_valid());
	/* a clean writing run records the scan time; repeated, the superblock ping-pongs */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(fsck(i == 1 ? "-y" : "-p", img), 0);
		ck_assert(said("clean scan recorded"));
		ck_assert_uint_gt(sb_scan_time(), 1600000000);
	}
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(said("\"last_consistency_scan\": 1"));
	ck_assert(said("\"storage_mode\": \"emulated\""));
	ck_assert(said("\"format_revision\": "));
	ck_assert(said("\"feature_incompat\": "));
	ck_assert(said("\"free_zone_reserve\": "));
	ck_assert(said("\"kernel\": "));
	ck_assert(said("\"firmware\": "));
	ck_assert(said("\"vendor\": "));
	ck_assert(said("\"model\": "));
}
END_TEST

START_TEST(t_not_zlfs)
{
	struct zemu_create_opts o = {.size = 16 << 20, .zone_size = 2 << 20};

	tu_path(img, sizeof(img), "empty.img");
	unlink(img);
	ck_assert_int_eq(zemu_create(img, &o), 0);
	ck_assert_int_eq(fsck("-n", img), 8);
	ck_assert_int_eq(fsck("-y", img), 8);
}
END_TEST

START_TEST(t_link_count)
{
	struct snap a, b;
	struct zlfs_fs *fs;

	populate("nlink.img", NULL);
	set_nlink(ino_f2, 5);
	snapshot(&a);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("link count 5, expected 1"));
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum);
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("link count set to 1"));
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert_uint_gt(sb_scan_time(), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* Mount IMG read-only and check that INO, SIZE bytes of its pattern, sits in /lost+found as
 * "#INO", and that /lost+found is encrypted exactly when the root is; returns the mounted
 * filesystem for more checks (files_unmount it). */
static struct zlfs_fs *mount_expect_lost_found(uint32_t ino, size_t size)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct node_page *root, *lf;
	uint32_t lfino, got;
	char name[32];

	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(dir_lookup(fs, root, "lost+found", 10, &lfino, NULL), 0);
	ck_assert_int_eq(inode_get(fs, lfino, &lf), 0);
	ck_assert_int_eq(fcrypt_is_encrypted(lf), fcrypt_is_encrypted(root));
	snprintf(name, sizeof(name), "#%u", ino);
	ck_assert_int_eq(dir_lookup(fs, lf, name, strlen(name), &got, NULL), 0);
	ck_assert_uint_eq(got, ino);
	ck_assert(same_data(fs, ino, size));
	node_put(fs, lf);
	node_put(fs, root);
	return fs;
}

/* A file whose name is gone but whose inode is not: -p leaves it (4), -y moves it. */
START_TEST(t_lost_found)
{
	struct snap a, b;
	struct node_page *d;
	struct zlfs_fs *fs;

	populate("lost.img", NULL);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	ck_assert_int_eq(dir_remove(fs, d, "f1", 2), 0);
	node_put(fs, d);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	ck_assert(json_valid());
	ck_assert(said("no directory names it"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert(said("run fsck.zlfs -y"));
	ck_assert_int_eq(sb_scan_time(), 0); /* not clean: no scan recorded */
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 1);
	snapshot(&b);
	no_zone_rewound(&a, &b, main_first());
	ck_assert(json_valid());
	ck_assert(said("lost+found"));
	ck_assert(said("\"exit_code\": 1"));
	ck_assert_int_eq(fsck("-n", img), 0);
	files_unmount(mount_expect_lost_found(ino_f1, F1_SIZE));
}
END_TEST

/* A block nothing references but the SIT calls valid (a leak): -p frees it. */
START_TEST(t_leak_preen)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t old;
	uint8_t b[4096];

	populate("leak.img", NULL);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, 0, &old), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = pat(ino_f2, i);
	ck_assert_int_eq(data_write(fs, np, b, sizeof(b), 0), (int)sizeof(b)); /* moves block 0 */
	node_put(fs, np);
	ck_assert_int_eq(files_sync(fs), 0);
	seg_mark(fs, old, 1); /* the old copy stays "valid": leaked */
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("is valid in the SIT but not referenced"));
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("unreferenced, freed"));
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* An entry "ghost" in the root to an inode that does not exist. */
static void add_ghost(void)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *root;

	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(dir_add(fs, root, "ghost", 5, fs->sb.max_nid - 3, DT_REG), 0);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
}

START_TEST(t_dangling_entry)
{
	populate("dangle.img", NULL);
	add_ghost();
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("\"ghost\" points to inode"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert(said("removed"));
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* A file fsync'ed after the last checkpoint, then the process dies: the write pointer of
 * the node log is ahead of the checkpoint. */
static void crash_after_fsync(int cut)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		struct zlfs_mount_opts mo = {0};
		struct node_page *np;
		struct zlfs_fs *fs;
		uint8_t b[8192];

		if (files_mount(img, &mo, &fs) || inode_get(fs, ino_f2, &np))
			_exit(1);
		memset(b, 0xee, sizeof(b));
		if (data_write(fs, np, b, sizeof(b), F2_SIZE) != (int)sizeof(b))
			_exit(2);
		node_put(fs, np);
		_exit(files_fsync(fs, ino_f2) ? 3 : 0); /* no unmount, no checkpoint */
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	if (cut) /* nothing unflushed should be left; a write log cannot replay past a cut */
		ck_assert_int_ge(zemu_powercut(img, -1, 0, 0), 0);
}

START_TEST(t_wp_ahead_is_checkpoint_mismatch)
{
	struct snap a, b, c;
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t first;

	populate("ahead.img", NULL);
	first = main_first();
	crash_after_fsync(1);
	snapshot(&a);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(said("checkpoint-mismatch: "));
	ck_assert(said("checkpoint mismatch only"));
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(json_valid());
	ck_assert(said("\"class\": \"checkpoint-mismatch\""));
	ck_assert(!said("device-write-pointer-error\""));
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum); /* -n wrote nothing */
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("rolled forward"));
	snapshot(&c);
	no_zone_rewound(&a, &c, first);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(!said("checkpoint-mismatch"));
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_uint_eq(le64_get(inode_of(np)->size), F2_SIZE + 8192);
	node_put(fs, np);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* The zone holding f2's first block, from a read-only mount. */
static uint32_t zone_of_f2(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct node_page *np;
	uint32_t addr, zone;

	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, 0, &addr), 0);
	zone = addr / zlfs_zone_blocks(&fs->sb);
	node_put(fs, np);
	files_unmount(fs);
	return zone;
}

static void expect_device_error_everywhere(uint32_t first)
{
	static const char *const modes[] = {"-n", "-p", "-y", "-n --json", "-y --json"};
	struct snap a, b;

	snapshot(&a);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(fsck(modes[i], img), 4);
		ck_assert(said(strstr(modes[i], "json") ? "\"class\": \"device-write-pointer-error\""
							: "device-write-pointer-error: zone"));
		ck_assert(!said("repaired:") && !said("\"action\""));
		if (strstr(modes[i], "json"))
			ck_assert(json_valid());
		snapshot(&b);
		ck_assert_uint_eq(a.sum, b.sum); /* no mode writes on a device error */
		no_zone_rewound(&a, &b, first);
	}
	ck_assert_int_eq(sb_scan_time(), 0);
}

START_TEST(t_wp_behind_is_device_error)
{
	struct zdev_open_opts oo = {0};
	struct zdev *dev;
	uint32_t zone, first;

	populate("behind.img", NULL);
	first = main_first();
	zone = zone_of_f2();
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_zone_reset(dev, zone), 0); /* reset underneath valid blocks */
	zdev_close(dev);
	expect_device_error_everywhere(first);
}
END_TEST

START_TEST(t_offline_zone_is_device_error)
{
	uint32_t zone, first;

	populate("offline.img", NULL);
	first = main_first();
	zone = zone_of_f2();
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_OFFLINE, (uint64_t)zone * (2 << 20)), 0);
	expect_device_error_everywhere(first);
	ck_assert(said("offline"));
}
END_TEST

/* The meta log's zone goes offline: the mount fails, and the report says why. */
START_TEST(t_offline_meta_zone)
{
	struct zlfs_fs *fs;
	uint32_t zone;
	struct snap a, b;

	populate("offmeta.img", NULL);
	fs = mount_rw(img, 1);
	zone = fs->meta_zone;
	files_unmount(fs);
	ck_assert_int_eq(zemu_inject(img, ZEMU_FAULT_OFFLINE, (uint64_t)zone * (2 << 20)), 0);
	snapshot_raw(&a);
	ck_assert_int_eq(fsck("-y", img), 4);
	ck_assert(said("device-write-pointer-error: zone"));
	ck_assert(said("is offline"));
	ck_assert_int_eq(fsck("-n --json", img), 4);
	ck_assert(json_valid());
	ck_assert(said("\"class\": \"device-write-pointer-error\""));
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
}
END_TEST

/* A bit flip in the newest superblock record. Its checksum fails, so it is no record at all:
 * the other zone's record, one update older, is the newest that verifies and is used - the
 * state a power cut during a superblock update leaves (docs/format.md), which is not damage:
 * -n is clean (0), writes nothing, and shows the older record (no scan time yet). A writing
 * run's superblock update goes to the zone not holding the record in use, the damaged one, so
 * -y (nothing to repair: 0) rewrites it, and both zones verify again. */
START_TEST(t_sb_newest_flipped)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sb, sb2;
	struct zlfs_fs *fs;
	struct zdev *dev;
	struct snap a, b;
	int newest, zone;

	populate("sbflip.img", NULL);
	ck_assert_int_eq(fsck("-p", img), 0); /* a newer record: sb_seq + 1 and the scan time */
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb, &newest), 0);
	zdev_close(dev);
	ck_assert_uint_gt(sb.last_fsck_time, 0);
	flip_block(sb.sb_zone[newest] * zlfs_zone_blocks(&sb), ZLFS_KIND_SUPER, 200);
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb2, &zone), 0);
	zdev_close(dev);
	ck_assert_int_eq(zone, !newest); /* the older record */
	ck_assert_uint_eq(sb2.sb_seq + 1, sb.sb_seq);
	ck_assert_uint_eq(sb2.last_fsck_time, 0);
	snapshot_raw(&a);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 0, 0);
	ck_assert(said("\"findings\": [\n  ],"));
	ck_assert(said("\"last_consistency_scan\": 0,"));
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(said("clean"));
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
	ck_assert_int_eq(fsck("-y --json", img), 0);
	ck_assert(said("\"scan_recorded\": true"));
	ck_assert(said("\"exit_code\": 0"));
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb2, &zone), 0);
	zdev_close(dev);
	ck_assert_int_eq(zone, newest); /* the damaged zone holds the new record */
	ck_assert_uint_eq(sb2.sb_seq, sb.sb_seq);
	ck_assert_uint_gt(sb2.last_fsck_time, 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 0);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	ck_assert_int_eq(files_unmount(fs), 0);
}
END_TEST

/* A bit flip in the newest checkpoint pack, its head or its tail: the pack does not count and
 * the previous one is used. What was written after it (here /f3, never fsync'ed) lies past
 * the previous checkpoint's log positions: a checkpoint mismatch, clean under -n (0); -y rolls
 * forward past the damaged pack (into the other checkpoint zone) and exits 1; -n is then
 * clean, everything the previous checkpoint made durable is intact, /f3 is gone. */
START_TEST(t_cp_newest_flipped)
{
	for (int tail = 0; tail < 2; tail++) {
		struct node_page *root;
		struct zlfs_fs *fs;
		struct snap a, b;
		uint64_t old_ver, new_ver;
		uint32_t addr, ino, first;
		char s[64];

		populate(tail ? "cptail.img" : "cphead.img", NULL);
		first = main_first();
		fs = mount_rw(img, 0);
		old_ver = fs->cp.version;
		mk(fs, ZLFS_ROOT_INO, "f3", 0, 3 * 4096);
		ck_assert_int_eq(files_unmount(fs), 0); /* the newest pack */
		fs = mount_rw(img, 1);
		new_ver = fs->cp.version;
		ck_assert_uint_gt(new_ver, old_ver);
		addr = fs->sb.cp_zone[fs->cp_pos.slot] * zlfs_zone_blocks(&fs->sb) +
		       fs->cp_pos.blk + (tail ? fs->cp.pack_blocks - 1 : 0);
		files_unmount(fs);
		flip_block(addr, tail ? ZLFS_KIND_CP_TAIL : ZLFS_KIND_CP_HEAD, 100);
		fs = mount_rw(img, 1);
		ck_assert_uint_eq(fs->cp.version, old_ver); /* the previous pack */
		files_unmount(fs);
		snapshot(&a);
		ck_assert_int_eq(fsck("-n --json", img), 0);
		json_counts(0, 1, 0);
		ck_assert(said("\"class\": \"checkpoint-mismatch\""));
		snprintf(s, sizeof(s), "\"checkpoint_version\": %llu,",
			 (unsigned long long)old_ver);
		ck_assert_msg(said(s), "expected %s", s);
		snapshot(&b);
		ck_assert_uint_eq(a.sum, b.sum);
		ck_assert_int_eq(fsck("-y --json", img), 1);
		ck_assert(json_valid());
		ck_assert(said("rolled forward"));
		ck_assert(said("\"exit_code\": 1"));
		snapshot(&b);
		no_zone_rewound(&a, &b, first);
		ck_assert_int_eq(fsck("-n --json", img), 0);
		json_counts(0, 0, 0);
		fs = mount_rw(img, 1);
		ck_assert_uint_gt(fs->cp.version, old_ver);
		ck_assert(same_data(fs, ino_f1, F1_SIZE));
		ck_assert(same_data(fs, ino_f2, F2_SIZE));
		ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
		ck_assert_int_eq(dir_lookup(fs, root, "f3", 2, &ino, NULL), -ENOENT);
		node_put(fs, root);
		files_unmount(fs);
	}
}
END_TEST

/* A bit flip in a NAT block of the meta log: the checkpoint's metadata cannot be loaded, so
 * nothing can be checked or repaired (docs/fsck.md: an unusable superblock/checkpoint is exit
 * 4 in every mode, no repair attempted). It is a metadata error, not a device error, and no
 * mode writes anything. */
START_TEST(t_nat_flipped)
{
	static const char *const modes[] = {"-n --json", "-p", "-y --json", "-n"};
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct zlfs_fs *fs;
	struct snap a, b;
	uint32_t addr;

	populate("natflip.img", NULL);
	fs = mount_rw(img, 1);
	addr = fs->meta_addr[ino_f1 / ZLFS_NAT_PER_BLOCK];
	files_unmount(fs);
	flip_block(addr, ZLFS_KIND_NAT, 300);
	ck_assert_int_eq(files_mount(img, &mo, &fs), -EUCLEAN);
	snapshot_raw(&a);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(fsck(modes[i], img), 4);
		ck_assert(said("cannot be used"));
		ck_assert(!said("repaired") && !said("\"action\""));
		if (strstr(modes[i], "json")) {
			json_counts(1, 0, 0);
			ck_assert(said("\"class\": \"error\""));
			ck_assert(said("\"exit_code\": 4"));
		}
	}
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
}
END_TEST

/* A bit flip in a file's inode block. -n: the inode is unreadable (4); its data blocks, valid
 * in the SIT, look unreferenced but are not freed while any node is unreadable. -y: an
 * unreadable node is "left (exit 4)" in docs/fsck.md - nothing is dropped or moved, nothing
 * else is lost, and a second -n still exits 4 with the same finding. */
START_TEST(t_inode_flipped)
{
	struct node_page *np;
	struct zlfs_fs *fs;
	struct snap a, b;
	uint32_t addr, first;
	char s[80];

	populate("inoflip.img", NULL);
	first = main_first();
	fs = mount_rw(img, 1);
	addr = fs->nat[ino_f1].blkaddr;
	files_unmount(fs);
	flip_block(addr, ZLFS_KIND_INODE, 500);
	snprintf(s, sizeof(s), "inode %u unreadable", ino_f1);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	json_counts(-1, 0, 0);
	ck_assert(said("\"class\": \"error\""));
	ck_assert(said(s));
	ck_assert(said("is valid in the SIT but not referenced"));
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 4);
	ck_assert(json_valid());
	ck_assert(!said("\"action\"")); /* nothing freed on an incomplete picture */
	ck_assert(said("\"scan_recorded\": false"));
	ck_assert(said("\"exit_code\": 4"));
	snapshot(&b);
	no_zone_rewound(&a, &b, first);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said(s));
	ck_assert_int_eq(sb_scan_time(), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_f1, &np), -EUCLEAN);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* A bit flip in a directory's dentry block (/d, which alone names f1). -n: the directory is
 * unreadable, f1 is named by no directory (4). -y: f1 goes to /lost+found/#INO with its data;
 * the damaged block itself is not repaired, so the run and a second -n still exit 4, with only
 * the unreadable directory left. */
START_TEST(t_dentry_flipped)
{
	struct zlfs_fs *fs;
	struct snap a, b;
	uint32_t addr, first;
	char s[80], name[32];

	populate("dentflip.img", NULL);
	first = main_first();
	addr = data_block_of(ino_d, 0);
	flip_block(addr, ZLFS_KIND_DENTRY, 1000);
	snprintf(s, sizeof(s), "directory %u unreadable", ino_d);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	json_counts(-1, 0, 0);
	ck_assert(said("\"class\": \"error\""));
	ck_assert(said(s));
	ck_assert(said("no directory names it"));
	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert(said("run fsck.zlfs -y"));
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 4);
	ck_assert(json_valid());
	snprintf(name, sizeof(name), "inode %u moved to /lost+found/#%u", ino_f1, ino_f1);
	ck_assert(said(name));
	ck_assert(said("\"exit_code\": 4"));
	snapshot(&b);
	no_zone_rewound(&a, &b, first);
	ck_assert_int_eq(fsck("-n --json", img), 4);
	json_counts(1, 0, 0);
	ck_assert(said(s));
	ck_assert(!said("no directory names it"));
	fs = mount_expect_lost_found(ino_f1, F1_SIZE);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* The write pointer of a zone holding checkpointed data goes back part of the way (not a
 * reset: the zone keeps its first blocks and stays CLOSED): a device write-pointer error in
 * every mode, nothing written; what lies below the write pointer still reads. */
START_TEST(t_wp_behind_partial)
{
	uint32_t zb, addr, first;
	struct zlfs_fs *fs;

	populate("behind2.img", NULL);
	first = main_first();
	zb = zone_blocks_of_img();
	addr = data_block_of(ino_f2, F2_SIZE / 4096 - 1); /* f2's last block and what follows */
	ck_assert_uint_gt(addr % zb, 0);
	zone_truncate(addr / zb, addr % zb);
	expect_device_error_everywhere(first);
	ck_assert(said("is behind the checkpoint's block"));
	ck_assert(!said("reset underneath"));
	fs = mount_rw(img, 1); /* -o ro still works to copy what is readable */
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
}
END_TEST

/*
 * An fsync'ed write acknowledged (flushed), then lost by the device. A power cut cannot do
 * this (it drops only unflushed writes), so zone_truncate() moves the zone's write pointer
 * back below the fsync'ed blocks, keeping what lies before them.
 * - The data blocks are lost, the fsync'ed node survives: roll-forward recovers the node,
 *   which needs blocks past the data zone's write pointer: a device write-pointer error, exit
 *   4 in every mode, nothing written or reset.
 * - The node block is lost (the data survives): nothing on the device records the fsync any
 *   more, so no check can tell it from writes never fsync'ed: a checkpoint mismatch (exit 0
 *   under -n), -y rolls forward to the last checkpoint's view of the file.
 */
START_TEST(t_lost_fsynced_write)
{
	struct node_page *np;
	struct zlfs_fs *fs;
	uint32_t zb, addr, first;

	populate("lostdata.img", NULL);
	first = main_first();
	zb = zone_blocks_of_img();
	crash_after_fsync(1);
	addr = data_block_of(ino_f2, F2_SIZE / 4096); /* the first fsync'ed data block */
	zone_truncate(addr / zb, addr % zb);
	expect_device_error_everywhere(first);
	ck_assert(said("is behind the checkpoint's block"));
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);

	populate("lostnode.img", NULL);
	crash_after_fsync(1);
	fs = mount_rw(img, 1);
	addr = fs->nat[ino_f2].blkaddr; /* the fsync'ed inode, as roll-forward found it */
	files_unmount(fs);
	zone_truncate(addr / zb, addr % zb);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 1, 0);
	ck_assert(said("\"class\": \"checkpoint-mismatch\""));
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert_int_eq(fsck("-n --json", img), 0);
	json_counts(0, 0, 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_f2, &np), 0);
	ck_assert_uint_eq(le64_get(inode_of(np)->size), F2_SIZE); /* the fsync is lost */
	node_put(fs, np);
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* A power cut at every step of a repair (-y: roll-forward, link count, lost+found): the image
 * mounts, and another fsck -y leaves it clean with the files intact. */
START_TEST(t_powercut_during_repair)
{
	char log[600], cut[600], kinds[8192];
	struct node_page *d;
	struct zlfs_fs *fs;
	long n0, n1, n, tried = 0;
	int torn;

	tu_path(log, sizeof(log), "repair.log");
	tu_path(cut, sizeof(cut), "cut.img");
	populate("repair.img", log);
	set_nlink(ino_f2, 3);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	ck_assert_int_eq(dir_remove(fs, d, "f1", 2), 0);
	node_put(fs, d);
	ck_assert_int_eq(files_unmount(fs), 0);
	crash_after_fsync(0);
	n0 = zemu_log_count(log);
	ck_assert_int_eq(fsck("-y", img), 1);
	n1 = zemu_log_count(log);
	ck_assert_int_gt(n1, n0);
	ck_assert_int_lt(n1, (long)sizeof(kinds));
	ck_assert_int_eq(zemu_log_kinds(log, kinds, n1), n1);
	for (n = n0; n <= n1; n++) {
		for (torn = 0; torn <= (kinds[n - 1] == 'W'); torn++) {
			int rc;

			unlink(cut);
			ck_assert_int_eq(zemu_replay(img, log, n, cut, torn), 0);
			rc = fsck("-n", cut);
			ck_assert_msg(rc == 0 || rc == 4, "cut at %ld%s: fsck -n exits %d", n,
				      torn ? " (torn)" : "", rc);
			ck_assert_msg(!said("device-write-pointer-error"), "cut at %ld: device error", n);
			rc = fsck("-y", cut);
			ck_assert_msg(rc == 0 || rc == 1, "cut at %ld%s: fsck -y exits %d", n,
				      torn ? " (torn)" : "", rc);
			ck_assert_int_eq(fsck("-n", cut), 0);
			fs = mount_rw(cut, 0);
			ck_assert(same_data(fs, ino_f2, F2_SIZE));
			ck_assert(same_data(fs, ino_f1, F1_SIZE));
			ck_assert_int_eq(files_unmount(fs), 0);
			tried++;
		}
	}
	printf("power cuts during fsck -y: %ld points over %ld operations\n", tried, n1 - n0);
	ck_assert_int_gt(tried, 5);
}
END_TEST

/* zlfs-ctl stats shows the scan time fsck recorded. */
START_TEST(t_stats_show_scan)
{
	uint64_t t;
	long shown;
	pid_t pid;

	if (tu_fuse_missing())
		return;
	populate("stats.img", NULL);
	ck_assert_int_eq(fsck("-p", img), 0);
	t = sb_scan_time();
	ck_assert_uint_gt(t, 0);
	pid = tu_daemon_start(img, mnt, "cp_interval=0");
	ck_assert_int_gt(pid, 0);
	shown = tu_ctl_stat(mnt, "last_consistency_scan");
	ck_assert_int_gt(tu_ctl_stat(mnt, "free_zone_reserve"), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(shown, (long)t);
}
END_TEST

/* ---- an encrypted root ------------------------------------------------------------------- */

/* FLAGS followed by the key option: the fsck arguments of a run with the key. */
static const char *with_key(const char *flags)
{
	static char args[700];

	snprintf(args, sizeof(args), "%s --keyfile %s", flags, keyfile);
	return args;
}

/* Entry NAME of directory DIR goes, its inode stays (mounted with the key). */
static void drop_name(uint32_t dir, const char *name)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *d;

	ck_assert_int_eq(inode_get(fs, dir, &d), 0);
	ck_assert_int_eq(dir_remove(fs, d, name, strlen(name)), 0);
	node_put(fs, d);
	ck_assert_int_eq(files_unmount(fs), 0);
}

/* Inode INO named nowhere: -p and -y without the key leave it and write nothing, saying the
 * key is needed; -y with the key moves it to the encrypted /lost+found. */
static void reconnect_needs_key(uint32_t ino, size_t size)
{
	struct snap a, b;

	ck_assert_int_eq(fsck("-p", img), 4);
	ck_assert(said("run fsck.zlfs -y (with the key: the root directory is encrypted)"));
	snapshot(&a);
	ck_assert_int_eq(fsck("-y --json", img), 4);
	snapshot(&b);
	ck_assert_uint_eq(a.sum, b.sum); /* nothing written, nothing lost */
	ck_assert(json_valid());
	ck_assert(said("\"action\": \"needs-key\""));
	ck_assert(said("\"needs_key\": 1,"));
	ck_assert_int_eq(fsck("-y", img), 4);
	ck_assert(said("names in it need the key"));
	ck_assert_int_eq(fsck(with_key("-y"), img), 1);
	ck_assert(said("moved to /lost+found"));
	ck_assert_int_eq(fsck("-n", img), 0);
	files_unmount(mount_expect_lost_found(ino, size));
}

START_TEST(t_encrypted_root)
{
	char other[512], args[700];
	struct node_page *root, *np;
	struct zlfs_fs *fs;

	populate_encrypted("encroot.img");
	ck_assert_int_eq(fsck("-n --json", img), 0);
	ck_assert(said("\"root_encrypted\": true"));
	ck_assert(said("\"key_loaded\": false"));
	ck_assert_int_eq(fsck(with_key("-n --json"), img), 0);
	ck_assert(said("\"key_loaded\": true"));

	/* repairs that add no name need no key: a link count, an entry to a missing inode (found
	 * again by its encoded name) */
	set_nlink(ino_f2, 4);
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert(said("link count set to 1"));
	add_ghost();
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert(said("removed"));
	ck_assert_int_eq(fsck("-n", img), 0);

	/* naming a lost inode needs the key: first /lost+found is made, then it is reused */
	drop_name(ino_d, "f1");
	reconnect_needs_key(ino_f1, F1_SIZE);
	drop_name(ZLFS_ROOT_INO, "f2");
	reconnect_needs_key(ino_f2, F2_SIZE);

	/* a key that is not this filesystem's: refused, nothing checked */
	tu_path(other, sizeof(other), "other.key");
	unlink(other);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), other), 0);
	snprintf(args, sizeof(args), "-y --keyfile %s", other);
	ck_assert_int_eq(fsck(args, img), 8);
	ck_assert(said_err("wrong key"));

	/* an inode that is not encrypted under an encrypted directory: zlfs never makes one */
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFREG | 0644, 0, 0, 0, ZLFS_ROOT_INO, &np), 0);
	ck_assert_int_eq(dir_add(fs, root, "plain", 5, np->nid, DT_REG), 0);
	node_put(fs, np);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert(said("is named in an encrypted directory but is not encrypted"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fsck");
	TCase *tc = tcase_create("fsck");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, t_clean_and_usage);
	tcase_add_test(tc, t_not_zlfs);
	tcase_add_test(tc, t_link_count);
	tcase_add_test(tc, t_lost_found);
	tcase_add_test(tc, t_leak_preen);
	tcase_add_test(tc, t_dangling_entry);
	tcase_add_test(tc, t_wp_ahead_is_checkpoint_mismatch);
	tcase_add_test(tc, t_wp_behind_is_device_error);
	tcase_add_test(tc, t_offline_zone_is_device_error);
	tcase_add_test(tc, t_offline_meta_zone);
	tcase_add_test(tc, t_sb_newest_flipped);
	tcase_add_test(tc, t_cp_newest_flipped);
	tcase_add_test(tc, t_nat_flipped);
	tcase_add_test(tc, t_inode_flipped);
	tcase_add_test(tc, t_dentry_flipped);
	tcase_add_test(tc, t_wp_behind_partial);
	tcase_add_test(tc, t_lost_fsynced_write);
	tcase_add_test(tc, t_powercut_during_repair);
	tcase_add_test(tc, t_stats_show_scan);
	tcase_add_test(tc, t_encrypted_root);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
