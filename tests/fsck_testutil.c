/*
 * fsck_testutil.c - see fsck_testutil.h: running fsck.zlfs and reading its report, images with
 * a known tree, snapshots of the device, and the damage more than one file makes.
 */
#include "fsck_testutil.h"

#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char img[512], mnt[512], bin[512], out[512];

const char *fsck_bin(void) { return tu_bin(bin, sizeof(bin), "fsck.zlfs"); }

int fsck(const char *flags, const char *image)
{
	char err[600];

	tu_path(out, sizeof(out), "fsck.out");
	return tu_sh("%s %s %s > %s 2> %s", fsck_bin(), flags, image, out,
		     tu_path(err, sizeof(err), "fsck.err"));
}

/* Whether the standard output (or error) of the last fsck() contains S. */
int said(const char *s) { return tu_file_has(out, s); }

int said_err(const char *s)
{
	char err[600];

	return tu_file_has(tu_path(err, sizeof(err), "fsck.err"), s);
}

/* The master key the library mounts with (an encrypted image made by populate_encrypted), or
 * unset. */
static struct zlfs_key_source key_src;
char keyfile[512];

/* Whether the library stores small directories inline (dir_inline.c): off for the images of
 * populate() and its kin, whose tests damage /d's dentry block; on for populate_inline(). */
static int inline_dirs;

static struct zlfs_mount_opts mount_opts(int ro)
{
	return (struct zlfs_mount_opts){.readonly = ro, .key = key_src.keyfile ? &key_src : NULL,
					.noinline_dentry = !inline_dirs};
}

struct zlfs_fs *mount_rw(const char *image, int ro)
{
	struct zlfs_mount_opts mo = mount_opts(ro);
	struct zlfs_fs *fs = NULL;

	ck_assert_int_eq(files_mount(image, &mo, &fs), 0);
	return fs;
}

uint8_t pat(uint32_t ino, size_t i) { return (uint8_t)(ino * 31 + i * 7); }

/* A file or directory NAME under PARENT, SIZE bytes of a pattern; its inode number. */
uint32_t mk(struct zlfs_fs *fs, uint32_t parent, const char *name, int dir, size_t size)
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

int same_data(struct zlfs_fs *fs, uint32_t ino, size_t size)
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

uint32_t ino_d, ino_f1, ino_f2;

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
void populate(const char *name, const char *log)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20, .log_path = log};

	inline_dirs = 0;
	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	populate_tree();
}

void populate_inline(const char *name)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	inline_dirs = 1;
	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	populate_tree();
}

/* The same with a block for every inode (mkfs --no-packed-inodes): damage to one inode's
 * block is damage to that inode alone. */
void populate_whole(const char *name)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	inline_dirs = 0;
	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(tu_sh("%s -q -f --no-packed-inodes %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img), 0);
	populate_tree();
}

/* The same on a filesystem without the ONE_FLUSH feature (stamped as a mkfs of revision 3
 * before it made one flush per fsync): an fsync flushes its data before its nodes. */
void populate_two_flush(const char *name)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	inline_dirs = 0;
	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(tu_sh("%s -q -f --revision 3:2 --features 0:0:0 %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), img), 0);
	populate_tree();
}

/* The same made by mkfs.zlfs --encrypt (an encrypted root), the library mounting with the
 * key from then on; fsck runs without it unless given with_key(). */
void populate_encrypted(const char *name)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};

	inline_dirs = 0;
	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	tu_path(keyfile, sizeof(keyfile), "fsck.key");
	unlink(keyfile);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), keyfile), 0);
	ck_assert_int_eq(tu_sh("%s -q -f --encrypt --keyfile %s %s",
			       tu_bin(bin, sizeof(bin), "mkfs.zlfs"), keyfile, img), 0);
	key_src.keyfile = keyfile;
	populate_tree();
}

void set_nlink(uint32_t ino, uint32_t n)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *np;

	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	inode_of(np)->nlink = le32_put(n);
	node_dirty(fs, np);
	node_put(fs, np);
	ck_assert_int_eq(files_unmount(fs), 0);
}

void snapshot_raw(struct snap *s)
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

void snapshot(struct snap *s)
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
void no_zone_rewound(const struct snap *a, const struct snap *b, uint32_t first_main)
{
	for (uint32_t i = first_main; i < 32; i++)
		if (a->valid[i])
			ck_assert_msg(b->wp[i] >= a->wp[i] || b->cond[i] == ZDEV_COND_FULL,
				      "zone %u was reset or rewound by fsck", i);
}

uint32_t main_first(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t z = fs->sb.main_zone_first;

	files_unmount(fs);
	return z;
}

uint64_t sb_scan_time(void)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sb;
	struct zdev *dev;

	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zlfs_sb_read(dev, &sb, NULL), 0);
	zdev_close(dev);
	return sb.last_fsck_time;
}

int json_valid(void)
{
	return tu_sh("python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s", out) == 0;
}

unsigned nat_kind_of(struct zlfs_fs *fs, uint32_t nid)
{
	struct nat_ent e;

	ck_assert_int_eq(nat_get(fs, nid, &e), 0);
	return e.packed ? ZLFS_KIND_IPACK : ZLFS_KIND_INODE;
}

uint32_t nat_addr_of(struct zlfs_fs *fs, uint32_t nid)
{
	struct nat_ent e;

	ck_assert_int_eq(nat_get(fs, nid, &e), 0);
	return e.blkaddr;
}

/* Device block of data block IDX of inode INO (after roll-forward, read-only). */
uint32_t data_block_of(uint32_t ino, uint64_t idx)
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

/* The counts of the read-only check in the last --json report: ERRORS errors (-1: some),
 * checkpoint mismatches (MISMATCHES: 0 none, else some) and DEVICE device errors. */
void json_counts(long errors, long mismatches, long device)
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

/* Mount IMG read-only and check that INO, SIZE bytes of its pattern, sits in /lost+found as
 * "#INO", and that /lost+found is encrypted exactly when the root is; returns the mounted
 * filesystem for more checks (files_unmount it). */
struct zlfs_fs *mount_expect_lost_found(uint32_t ino, size_t size)
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

/* An entry "ghost" in the root to an inode that does not exist. */
void add_ghost(void)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *root;

	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(dir_add(fs, root, "ghost", 5, fs->sb.max_nid - 3, DT_REG), 0);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
}

/* A file fsync'ed after the last checkpoint, then the process dies: the write pointer of
 * the node log is ahead of the checkpoint. */
void crash_after_fsync(int cut)
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

void expect_device_error_everywhere(uint32_t first)
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

/* ---- damaging one block ------------------------------------------------------------------
 * The image file maps device byte 0 at the start of the emulator's data area
 * (docs/emulator.md, "Image format"). As tests/fuzz_image.c does, its offset is found by
 * looking for the bytes of the first superblock record in the file; the block is then read
 * both through the device and from the file (they must agree), edited in the file, and
 * nothing else changes: not a write pointer, not a zone. */
void edit_block(uint32_t addr, unsigned kind, void (*edit)(uint8_t *b, void *arg), void *arg,
		int reseal)
{
	struct zdev_open_opts oo = {.readonly = 1};
	struct zlfs_sb_info sb;
	struct zdev *dev;
	uint8_t *dv = zdev_buf_alloc(ZLFS_BLOCK_SIZE), *sbb = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	static uint8_t f[ZLFS_BLOCK_SIZE];
	int64_t off0 = -1;
	FILE *fp;

	ck_assert(dv && sbb);
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
	edit(f, arg);
	if (reseal)
		zlfs_blk_seal(f, kind == ZLFS_KIND_SUPER ? zlfs_csum_seed(f + offsetof(struct zlfs_super,
										 uuid))
							 : sb.seed);
	ck_assert_int_eq(fseeko(fp, off0 + (off_t)addr * ZLFS_BLOCK_SIZE, SEEK_SET), 0);
	ck_assert_int_eq(fwrite(f, 1, sizeof(f), fp), sizeof(f));
	ck_assert_int_eq(fclose(fp), 0);
	zdev_buf_free(dv);
	zdev_buf_free(sbb);
}

/* ---- crafted values (test_hostile*.c) ---------------------------------------------------- */

void put32(uint8_t *b, void *arg)
{
	const struct set32 *s = arg;

	memcpy(b + s->off, &s->val, 4);
}

/* Set the le32 at byte OFF of device block ADDR (of KIND) to VAL, resealed. */
void set_field(uint32_t addr, unsigned kind, size_t off, uint32_t val)
{
	struct set32 s = {off, le32_put(val)};

	edit_block(addr, kind, put32, &s, 1);
}

/* The device block holding node NID. */
uint32_t node_addr(uint32_t nid)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t a = nat_addr_of(fs, nid);

	files_unmount(fs);
	return a;
}

struct slot_set {
	uint32_t slot;
	struct set32 f;
};

/* The le32 at byte OFF of the inode in slot SLOT, as its 4 KiB form has it, set: the slot
 * expanded, changed and filled again. The field must be one a slot keeps. */
static void put32_slot(uint8_t *b, void *arg)
{
	const struct slot_set *s = arg;
	static uint8_t in[ZLFS_BLOCK_SIZE], back[ZLFS_BLOCK_SIZE];

	zlfs_pack_expand(b, s->slot, in);
	put32(in, (void *)&s->f);
	/* the same positions again: a spanning slot (SPAN_SLOTS) keeps its span */
	ck_assert_int_eq(zlfs_pack_fill(b, s->slot, in, 1), (int)zlfs_pack_span(b, s->slot));
	zlfs_pack_expand(b, s->slot, back);
	ck_assert(!memcmp(back + s->f.off, &s->f.val, 4));
}

/* Set the le32 at byte OFF of inode INO's 4 KiB form to VAL, resealed: in its block, or in
 * its slot of an inode pack (mkfs packs small inodes by default). */
void set_inode_field(uint32_t ino, size_t off, uint32_t val)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct slot_set s = {.f = {off, le32_put(val)}};
	struct nat_ent e;

	ck_assert_int_eq(nat_get(fs, ino, &e), 0);
	files_unmount(fs);
	s.slot = e.slot;
	if (e.packed)
		edit_block(e.blkaddr, ZLFS_KIND_IPACK, put32_slot, &s, 1);
	else
		set_field(e.blkaddr, ZLFS_KIND_INODE, off, val);
}
