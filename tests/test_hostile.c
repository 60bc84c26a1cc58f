/*
 * test_hostile.c - crafted images: one value of one block set out of the format's range and
 * the block resealed (a valid checksum, so the check of the value is what meets it), as a
 * hostile or badly broken device would present it (docs/fsck.md, "Threat model").
 *
 * Each case checks the promises: the library and the daemon refuse the value with EUCLEAN and
 * a message naming the field, never a crash (the ASan/UBSan build runs this); fsck.zlfs -n
 * reports it as damage (exit 4, the field named) and writes nothing; -y either repairs it
 * (exit 1; what was undamaged is intact; a second -n is clean) or refuses, writing nothing
 * (exit 4). A damaged name on a mounted filesystem fails alone while the rest works, and
 * damaged tables turn the filesystem read-only; unmount always ends the daemon. Inline data
 * (a small file's bytes in its inode) is among the values: its size past the area is refused;
 * so are the links of an xattr chain and a value node's fill (XATTR_NODES). An inode's count
 * of blocks is a summary, not a bound: fsck recounts it (-p), the daemon never frees by it.
 */
#include "fsck_testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- crafting ------------------------------------------------------------------------------ */

/* Name NP NAME in the root, close the library's mount; fsck must call it clean. */
static uint32_t name_in_root(struct zlfs_fs *fs, struct node_page *root, struct node_page *np,
			     const char *name, uint8_t type)
{
	uint32_t ino = np->nid;

	node_dirty(fs, np);
	ck_assert_int_eq(dir_add(fs, root, name, strlen(name), ino, type), 0);
	node_put(fs, np);
	node_put(fs, root);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	return ino;
}

/* An inline symlink /link -> "d/f1" made through the library, as the daemon makes one. */
static uint32_t add_symlink(void)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *root, *np;

	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFLNK | 0777, 0, 0, 0, ZLFS_ROOT_INO, &np), 0);
	memcpy(inode_of(np)->addr, "d/f1", 4);
	inode_of(np)->flags = le32_put(ZLFS_IFLAG_INLINE);
	inode_of(np)->inline_size = le32_put(4);
	inode_of(np)->size = le64_put(4);
	return name_in_root(fs, root, np, "link", DT_LNK);
}

/* A small regular file /small of 100 bytes kept in its inode (inline data), made through the
 * library as the daemon makes one. */
static uint32_t add_inline_file(void)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *root, *np;
	char bytes[100];

	memset(bytes, 'i', sizeof(bytes));
	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	ck_assert_int_eq(inode_new(fs, S_IFREG | 0644, 0, 0, 0, ZLFS_ROOT_INO, &np), 0);
	inline_start(fs, np);
	ck_assert(inline_is(np));
	ck_assert_int_eq(inline_try_write(fs, np, bytes, sizeof(bytes), 0), (int)sizeof(bytes));
	return name_in_root(fs, root, np, "small", DT_REG);
}

/* fsck -n reports FIELD as damage and writes nothing. */
static void reported(const char *field)
{
	struct snap a, b;

	snapshot_raw(&a);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert_msg(said(field) || said_err(field), "fsck -n did not name \"%s\"", field);
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
}

/* fsck -y cannot repair it: exit 4, nothing written. */
static void refused(void)
{
	struct snap a, b;

	snapshot_raw(&a);
	ck_assert_int_eq(fsck("-y", img), 4);
	snapshot_raw(&b);
	ck_assert_uint_eq(a.sum, b.sum);
}

/* fsck -y repairs it (exit 1), a second -n is clean, and both files are whole. */
static void repaired(void)
{
	struct zlfs_fs *fs;

	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}

/* A fresh image NAME with /link whose inode says it is 5000 bytes long, inline. */
static uint32_t damaged_symlink(const char *name)
{
	uint32_t ino;

	populate(name, NULL);
	ino = add_symlink();
	set_inode_field(ino, offsetof(struct zlfs_inode, size), 5000);
	return ino;
}

/* ---- the cases ------------------------------------------------------------------------------ */

/* An inline symlink whose size passes its inline area: readlink would copy past the node. The
 * inode is refused; -y drops it and its name; the files stay whole. */
START_TEST(t_symlink_size)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t ino;

	ino = damaged_symlink("symlink.img");
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino, &np), -EUCLEAN);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
	reported("inode size of an inline symlink");
	repaired();
}
END_TEST

/* An inline file whose size (or inline_size with it) passes its inode's area, or whose size
 * differs from the bytes stored: a read would copy past the node. The inode is refused
 * naming the field; -y drops it and its name; the other files stay whole. */
START_TEST(t_inline_file_size)
{
	static const struct {
		size_t off;
		uint32_t val;
		const char *field;
	} bad[] = {
		{offsetof(struct zlfs_inode, size), 5000, "inode size of an inline file"},
		{offsetof(struct zlfs_inode, inline_size), 5000, "inode inline_size"},
		{offsetof(struct zlfs_inode, blocks), 1, "inode blocks of an inline file"},
		/* past the size, within the 128 bytes a packed inode keeps */
		{offsetof(struct zlfs_inode, addr) + 110, 7, "byte 110 of an inline file"},
	};
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t ino;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		populate("inline.img", NULL);
		ino = add_inline_file();
		set_inode_field(ino, bad[i].off, bad[i].val);
		fs = mount_rw(img, 1);
		ck_assert_int_eq(inode_get(fs, ino, &np), -EUCLEAN);
		ck_assert(same_data(fs, ino_f1, F1_SIZE));
		files_unmount(fs);
		reported(bad[i].field);
		repaired();
	}
}
END_TEST

/* A directory whose hash depth would shift past 31 bits. */
START_TEST(t_dir_depth)
{
	struct zlfs_fs *fs;

	populate("depth.img", NULL);
	set_inode_field(ino_d, offsetof(struct zlfs_inode, dir_depth), 40);
	reported("inode dir_depth = 40");
	repaired();
	fs = mount_expect_lost_found(ino_f1, F1_SIZE); /* its only file, named nowhere now */
	files_unmount(fs);
}
END_TEST

static void long_name_at_end(uint8_t *b, void *arg)
{
	struct zlfs_dentry_block *d = (void *)b;

	(void)arg;
	d->bitmap[200 / 8] |= 1u << (200 % 8);
	d->d[200].name_len = le16_put(255); /* 32 slots from the last one */
	d->d[200].ino = le32_put(ZLFS_ROOT_INO);
	d->d[200].type = 4;
}

/* A name that runs past the end of its directory block. */
START_TEST(t_dentry_overrun)
{
	struct zlfs_fs *fs;

	populate("dentry.img", NULL);
	edit_block(data_block_of(ino_d, 0), ZLFS_KIND_DENTRY, long_name_at_end, NULL, 1);
	reported("name_len = 255 needs 32 slots");
	repaired();
	fs = mount_expect_lost_found(ino_f1, F1_SIZE);
	files_unmount(fs);
}
END_TEST

/* ---- inline directories: /d keeps its one entry (f1) in its inode ---------------------------
 * Its area opens {count 1, slot 0, name_len 2, type DT_REG}, the le32 at addr[0]; each case
 * puts other bytes there (or at addr[31], past the entry). The library's lookup and listing
 * refuse the directory (-EUCLEAN), the daemon's too and lives on, fsck -n names the
 * reason and -y drops the entries: f1 goes to lost+found with its data. */
static const struct {
	uint32_t word, val;
	const char *why;
} bad_inline[] = {
	{0, 1u | 0u << 8 | 200u << 16 | 8u << 24, "runs past the 128-byte area"},
	{0, 1u | 201u << 8 | 2u << 16 | 8u << 24, "runs past slot 200"},
	{0, 2u | 0u << 8 | 2u << 16 | 8u << 24, "inline dentry name_len = 0"},
	{31, 0x01000000u, "byte 127 past the 1 entries is not zero"},
};

static void inline_dir_refused(void)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct node_page *d;
	uint32_t ino;

	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	ck_assert(le32_get(inode_of(d)->flags) & ZLFS_IFLAG_INLINE_DENTRY);
	ck_assert_int_eq(dir_lookup(fs, d, "f1", 2, &ino, NULL), -EUCLEAN);
	node_put(fs, d);
	files_unmount(fs);
}

START_TEST(t_inline_dir_crafted)
{
	struct zlfs_fs *fs;
	char name[32];

	snprintf(name, sizeof(name), "idir%d.img", _i);
	populate_inline(name);
	set_inode_field(ino_d, offsetof(struct zlfs_inode, addr) + 4 * bad_inline[_i].word,
			bad_inline[_i].val);
	inline_dir_refused();
	reported(bad_inline[_i].why);
	ck_assert(said("block 0 is damaged"));
	repaired();
	fs = mount_expect_lost_found(ino_f1, F1_SIZE);
	files_unmount(fs);
}
END_TEST

/* The same damage met by the daemon: listing and looking up in /d fail with EUCLEAN, what a
 * damaged dentry block gives; the rest of the filesystem serves on. */
START_TEST(t_inline_dir_daemon)
{
	char path[600];
	struct dirent *e;
	DIR *dir;
	pid_t pid;

	if (tu_fuse_missing())
		return;
	populate_inline("idird.img");
	set_inode_field(ino_d, offsetof(struct zlfs_inode, addr), bad_inline[0].val);
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	snprintf(path, sizeof(path), "%s/d", mnt);
	dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	errno = 0;
	while ((e = readdir(dir)) && e->d_name[0] == '.')
		;
	ck_assert_ptr_null(e);
	ck_assert_int_eq(errno, EUCLEAN);
	closedir(dir);
	snprintf(path, sizeof(path), "%s/d/f1", mnt);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(errno, EUCLEAN);
	snprintf(path, sizeof(path), "%s/f2", mnt);
	ck_assert_int_eq(access(path, F_OK), 0);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	reported(bad_inline[0].why);
}
END_TEST

/* ---- an inode's count of blocks against its pointers ---------------------------------------
 * The fuzz finding: /d, a directory of one dentry block, says `blocks` 0. fsck -n called it
 * clean, and the mount that made /d inline (dir_inline.c) dropped its block 0 by a walk that
 * trusted the count: the pointer went, the block stayed valid in the SIT (a leak). Now fsck
 * names the inode and both counts, -p/-y set the count from the pointers, and the daemon
 * frees what the pointers hold whatever the count says. /f2's count 7 of its 256 blocks is
 * the other way round (too many would be freed were the count trusted: never). */
static const struct {
	int file;	/* 0: /d, 1: /f2 */
	uint32_t stored, counted;
} bad_count[] = {
	{0, 0, 1},
	{1, 7, F2_SIZE / ZLFS_BLOCK_SIZE},
};

static uint32_t count_damaged(int i, const char *name, char *why, size_t len)
{
	uint32_t ino;

	populate(name, NULL);
	ino = bad_count[i].file ? ino_f2 : ino_d;
	set_inode_field(ino, offsetof(struct zlfs_inode, blocks), bad_count[i].stored);
	snprintf(why, len, "inode %u: blocks = %u, but its pointers hold %u", ino,
		 bad_count[i].stored, bad_count[i].counted);
	return ino;
}

static uint64_t blocks_of(struct zlfs_fs *fs, uint32_t ino)
{
	struct node_page *np;
	uint64_t n;

	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	n = le64_get(inode_of(np)->blocks);
	node_put(fs, np);
	return n;
}

/* fsck -n reports the count; -p (a safe repair: nothing is lost) and -y set it from the
 * pointers. */
START_TEST(t_blocks_count_fsck)
{
	struct zlfs_fs *fs;
	char why[128];
	uint32_t ino = count_damaged(_i, "count.img", why, sizeof(why));

	reported(why);
	ck_assert_int_eq(fsck(_i ? "-y" : "-p", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert_uint_eq(blocks_of(fs, ino), bad_count[_i].counted);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* The finding itself: a read-write mount that stores small directories inline (the daemon's
 * default) converts /d and writes; nothing leaks and fsck -n finds nothing: /d's count is
 * right again (0, inline). /f2 is truncated to one block: its blocks go whatever its count
 * says, and the count is taken from what is left. */
START_TEST(t_blocks_count_mount)
{
	struct zlfs_mount_opts mo = {0};
	struct zlfs_fs *fs = NULL;
	struct node_page *np;
	char why[128];
	uint32_t ino = count_damaged(_i, "countm.img", why, sizeof(why));

	ck_assert_int_eq(files_mount(img, &mo, &fs), 0);
	mk(fs, ino_d, "g", 0, 10);
	if (ino == ino_f2) {
		ck_assert_int_eq(inode_get(fs, ino, &np), 0);
		ck_assert_int_eq(data_set_size(fs, np, ZLFS_BLOCK_SIZE), 0);
		node_put(fs, np);
	}
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	ck_assert(!said("not referenced"));
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, ino == ino_f2 ? ZLFS_BLOCK_SIZE : F2_SIZE));
	ck_assert_uint_eq(blocks_of(fs, ino_d), 0); /* inline now */
	ck_assert_uint_eq(blocks_of(fs, ino_f2), ino == ino_f2 ? 1 : F2_SIZE / ZLFS_BLOCK_SIZE);
	files_unmount(fs);
}
END_TEST

/* An xattr pointer to another file's inode: following it would read (and a setxattr write)
 * that inode as an xattr node. */
START_TEST(t_foreign_node)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	char v[8];

	populate("foreign.img", NULL);
	set_inode_field(ino_f1, offsetof(struct zlfs_inode, xattr_nid),
		  ino_f2);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, ino_f1, &np), 0);
	ck_assert_int_eq(xattr_get(fs, np, "user.x", v, sizeof(v)), -EUCLEAN);
	node_put(fs, np);
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
	reported("belongs");
	repaired();
}
END_TEST

/* /d/f1 given a 64 KiB value and 300 small attributes through the library (three xattr
 * nodes): the nids of its first xattr node, of the second, and of the value's first value
 * node. fsck must call the image clean. */
static void add_xattrs(uint32_t *head, uint32_t *second, uint32_t *value)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *np, *xp;
	struct zlfs_xattr_node *x;
	static char v[65536];
	char nm[32];
	le32 raw;

	memset(v, 'v', sizeof(v));
	ck_assert_int_eq(inode_get(fs, ino_f1, &np), 0);
	ck_assert_int_eq(xattr_set(fs, np, "user.big", v, sizeof(v), 0), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(nm, sizeof(nm), "user.a%03d", i);
		ck_assert_int_eq(xattr_set(fs, np, nm, v, 20, 0), 0);
	}
	*head = le32_get(inode_of(np)->xattr_nid);
	ck_assert_int_eq(node_get(fs, *head, &xp), 0);
	x = xp->buf;
	*second = le32_get(x->next);
	ck_assert(x->data[0] & ZLFS_XATTR_EXTERNAL); /* user.big, the first entry */
	memcpy(&raw, x->data + 4 + x->data[1], sizeof(raw));
	*value = le32_get(raw);
	ck_assert_uint_ne(*second, 0);
	node_put(fs, xp);
	node_put(fs, np);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}

/* Attribute NAME of /d/f1 read with the library: its size or the error. */
static int f1_xattr(const char *name)
{
	static char v[65536];
	struct zlfs_fs *fs = mount_rw(img, 1);
	struct node_page *np;
	int ret;

	ck_assert_int_eq(inode_get(fs, ino_f1, &np), 0);
	ret = xattr_get(fs, np, name, v, sizeof(v));
	node_put(fs, np);
	files_unmount(fs);
	return ret;
}

/* The link from a file's first xattr node to the next points to another file's inode: the
 * attributes past it fail with EUCLEAN, those before it read; -y cuts the chain there. */
START_TEST(t_xattr_chain_foreign)
{
	uint32_t head, second, value;

	populate("xchain.img", NULL);
	add_xattrs(&head, &second, &value);
	set_field(node_addr(head), ZLFS_KIND_XATTR, offsetof(struct zlfs_xattr_node, next), ino_f2);
	ck_assert_int_eq(f1_xattr("user.a299"), -EUCLEAN);
	ck_assert_int_eq(f1_xattr("user.a000"), 20);
	ck_assert_int_eq(f1_xattr("user.big"), 65536);
	reported("belongs");
	repaired();
	ck_assert_int_eq(f1_xattr("user.a299"), -ENODATA);
	ck_assert_int_eq(f1_xattr("user.a000"), 20);
	ck_assert_int_eq(f1_xattr("user.big"), 65536);
}
END_TEST

/* A value node's used out of range: that value fails with EUCLEAN, every other attribute
 * reads; -y drops the attribute and frees its value nodes. */
START_TEST(t_xattr_value_used)
{
	uint32_t head, second, value;

	populate("xvalue.img", NULL);
	add_xattrs(&head, &second, &value);
	set_field(node_addr(value), ZLFS_KIND_XVALUE, offsetof(struct zlfs_xattr_node, used), 0);
	ck_assert_int_eq(f1_xattr("user.big"), -EUCLEAN);
	ck_assert_int_eq(f1_xattr("user.a299"), 20);
	reported("xattr value node used");
	repaired();
	ck_assert_int_eq(f1_xattr("user.big"), -ENODATA);
	ck_assert_int_eq(f1_xattr("user.a299"), 20);
	ck_assert_int_eq(f1_xattr("user.a000"), 20);
}
END_TEST

/* Superblock geometry: meta_zones 0 would divide by zero in the first checkpoint. Nothing can
 * be trusted, so no mode repairs it. */
START_TEST(t_sb_meta_zones)
{
	struct zlfs_sb_info sb;
	struct zlfs_fs *fs = NULL;
	struct zlfs_mount_opts mo = {.readonly = 1};
	int fs_sb_zone;

	populate("metazones.img", NULL);
	ck_assert_int_eq(fsck("-p", img), 0); /* a second record: both zones hold one */
	fs = mount_rw(img, 1);
	sb = fs->sb;
	fs_sb_zone = fs->sb_zone;
	files_unmount(fs);
	/* the older record first: once the newest is damaged, no record reads */
	set_field(sb.sb_zone[!fs_sb_zone] * zlfs_zone_blocks(&sb), ZLFS_KIND_SUPER,
		  offsetof(struct zlfs_super, meta_zones), 0);
	set_field(sb.sb_zone[fs_sb_zone] * zlfs_zone_blocks(&sb), ZLFS_KIND_SUPER,
		  offsetof(struct zlfs_super, meta_zones), 0);
	ck_assert_int_eq(files_mount(img, &mo, &fs), -EUCLEAN);
	reported("meta_zones = 0");
	refused();
}
END_TEST

/* A checkpoint pack resealed whole with its meta log position outside the meta area. */
START_TEST(t_cp_meta_zone)
{
	struct zlfs_fs *fs;
	struct zlfs_mount_opts mo = {.readonly = 1};
	uint32_t head, tail, zb;
	struct set32 s;

	populate("cpmeta.img", NULL);
	fs = mount_rw(img, 1);
	zb = zlfs_zone_blocks(&fs->sb);
	head = fs->sb.cp_zone[fs->cp_pos.slot] * zb + fs->cp_pos.blk;
	tail = head + fs->cp.pack_blocks - 1;
	s.val = le32_put(fs->sb.main_zone_first + 1);
	files_unmount(fs);
	s.off = offsetof(struct zlfs_cp_head, meta_zone);
	edit_block(head, ZLFS_KIND_CP_HEAD, put32, &s, 1);
	fs = NULL;
	{ /* the tail names the head's new checksum, so the pack is whole */
		struct zdev_open_opts oo = {.readonly = 1};
		struct zlfs_sb_info sb;
		struct zdev *dev;
		uint8_t *b = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
		uint64_t c;

		ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
		ck_assert_int_eq(zlfs_sb_read(dev, &sb, NULL), 0);
		ck_assert_int_eq(zdev_read(dev, b, ZLFS_BLOCK_SIZE, (uint64_t)head * ZLFS_BLOCK_SIZE), 0);
		c = le64_put(zlfs_blk_csum(b, sb.seed));
		zdev_close(dev);
		zdev_buf_free(b);
		s.off = offsetof(struct zlfs_cp_tail, head_csum);
		{
			struct set32 lo = {s.off, (uint32_t)c}, hi = {s.off + 4, (uint32_t)(c >> 32)};

			edit_block(tail, ZLFS_KIND_CP_TAIL, put32, &lo, 1);
			edit_block(tail, ZLFS_KIND_CP_TAIL, put32, &hi, 1);
		}
	}
	ck_assert_int_eq(files_mount(img, &mo, &fs), -EUCLEAN);
	reported("checkpoint meta_zone");
	refused();
}
END_TEST

/* A NAT entry pointing into the meta area. The mount reads NAT pages on demand: the first
 * use of that page finds it and the filesystem goes read-only; fsck reads them all first. */
START_TEST(t_nat_entry)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t nat, slot, meta;

	populate("natent.img", NULL);
	fs = mount_rw(img, 1);
	nat = fs->meta_addr[ino_f1 / ZLFS_NAT_PER_BLOCK];
	slot = ino_f1 % ZLFS_NAT_PER_BLOCK;
	meta = fs->sb.meta_zone_first * zlfs_zone_blocks(&fs->sb);
	files_unmount(fs);
	set_field(nat, ZLFS_KIND_NAT, offsetof(struct zlfs_nat_block, e) +
		  slot * sizeof(struct zlfs_nat_entry), meta);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(inode_get(fs, ino_f1, &np), -EUCLEAN);
	ck_assert_int_eq(ATOMIC_GET(&fs->readonly), 1);
	files_unmount(fs);
	reported("blkaddr");
	refused();
}
END_TEST

/* A block past the checkpoint in a node log whose checksum fails, its sequence field at the
 * top of its range (torn, or crafted): roll-forward must not take that number as the
 * filesystem's sequence, or the next writes' numbers would wrap and order nothing. */
START_TEST(t_torn_block_sequence)
{
	struct zdev_open_opts oo = {0};
	struct zdev_zone z;
	struct zdev *dev;
	struct zlfs_fs *fs;
	uint8_t *blk = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct zlfs_blkhdr *h = (struct zlfs_blkhdr *)blk;
	uint32_t zone;

	populate("seq.img", NULL);
	fs = mount_rw(img, 1);
	zone = fs->logs[ZLFS_LOG_WARM_NODE].zone;
	files_unmount(fs);
	ck_assert_uint_ne(zone, ZLFS_ZONE_NONE);
	memset(blk, 0, ZLFS_BLOCK_SIZE);
	h->magic = le32_put(ZLFS_MAGIC);
	h->kind = le16_put(ZLFS_KIND_INODE);
	h->seq = le64_put(UINT64_MAX - 1); /* no checksum: the block does not verify */
	ck_assert_int_eq(zdev_open(img, &oo, &dev), 0);
	ck_assert_int_eq(zdev_report(dev, zone, 1, &z), 0);
	ck_assert_int_eq(zdev_write(dev, blk, ZLFS_BLOCK_SIZE, z.wp), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	zdev_close(dev);
	zdev_buf_free(blk);
	fs = mount_rw(img, 0);
	ck_assert_msg(fs->seq < (1ULL << 62), "the sequence is %llu after an unverified block",
		      (unsigned long long)fs->seq);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* The real daemon on an image with a damaged symlink: readlink fails with EUCLEAN, the rest of
 * the filesystem reads and writes, and unmount ends the daemon. */
START_TEST(t_daemon_damaged_name)
{
	char path[600], buf[64];
	pid_t pid;
	int fd;

	if (tu_fuse_missing())
		return;
	damaged_symlink("daemon.img");
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	snprintf(path, sizeof(path), "%s/link", mnt);
	errno = 0;
	ck_assert_int_lt(readlink(path, buf, sizeof(buf)), 0);
	ck_assert_int_eq(errno, EUCLEAN);
	snprintf(path, sizeof(path), "%s/d/f1", mnt);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), sizeof(buf));
	ck_assert_uint_eq((uint8_t)buf[9], pat(ino_f1, 9));
	close(fd);
	snprintf(path, sizeof(path), "%s/new", mnt);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello", 5), 5);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(kill(pid, 0), -1); /* gone */
	reported("inode size of an inline symlink");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("hostile");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_symlink_size);
	tcase_add_test(tc, t_inline_file_size);
	tcase_add_test(tc, t_dir_depth);
	tcase_add_test(tc, t_dentry_overrun);
	tcase_add_loop_test(tc, t_inline_dir_crafted, 0,
			    (int)(sizeof(bad_inline) / sizeof(bad_inline[0])));
	tcase_add_test(tc, t_inline_dir_daemon);
	tcase_add_loop_test(tc, t_blocks_count_fsck, 0,
			    (int)(sizeof(bad_count) / sizeof(bad_count[0])));
	tcase_add_loop_test(tc, t_blocks_count_mount, 0,
			    (int)(sizeof(bad_count) / sizeof(bad_count[0])));
	tcase_add_test(tc, t_foreign_node);
	tcase_add_test(tc, t_xattr_chain_foreign);
	tcase_add_test(tc, t_xattr_value_used);
	tcase_add_test(tc, t_sb_meta_zones);
	tcase_add_test(tc, t_cp_meta_zone);
	tcase_add_test(tc, t_nat_entry);
	tcase_add_test(tc, t_torn_block_sequence);
	tcase_add_test(tc, t_daemon_damaged_name);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
