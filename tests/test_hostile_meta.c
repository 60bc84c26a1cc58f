/*
 * test_hostile_meta.c - crafted images of the black-box fuzzer's findings whose damage lies
 * between two pieces of metadata that each check on their own (tests/fuzz-findings):
 *
 * - a segment summary entry naming another slot than the tree's pointer (finding 20): fsck
 *   reports it, -p moves the block (the new copy's entry is right), and the daemon's GC, for
 *   which the summary is a hint and the owner's pointer the truth, moves it without turning
 *   the filesystem read-only.
 * - an encrypted directory's nonce damaged (finding 19): its names decrypt, with the key, to
 *   garbage; those that are no name a user could give (a '/', a NUL) are listed in their
 *   no-key form, which lookup also takes, fsck with the key reports them, and -y moves their
 *   inodes to /lost+found with their data.
 */
#include "fsck_testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define BIG_SIZE (3u << 20) /* more than a zone: its first zone is sealed with its summaries */

struct set16 {
	size_t off;
	uint16_t val;
};

static void put16(uint8_t *b, void *arg)
{
	const struct set16 *s = arg;
	le16 v = le16_put(s->val);

	memcpy(b + s->off, &v, 2);
}

/* A fresh image with /big, of which a block lies in a sealed segment (none of the logs
 * writes its zone, its summary block is written): that block's address; its inode in *INO,
 * its zone in *ZONE. */
static uint32_t big_sealed(const char *name, uint32_t *ino, uint32_t *zone)
{
	struct zlfs_fs *fs;
	struct node_page *np;
	uint32_t addr = 0, zb, seg_blocks, nid;
	uint16_t ofs;
	uint64_t idx;

	populate(name, NULL);
	fs = mount_rw(img, 0);
	*ino = mk(fs, ZLFS_ROOT_INO, "big", 0, BIG_SIZE);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	zb = zlfs_zone_blocks(&fs->sb);
	seg_blocks = fs->sb.seg_blocks;
	ck_assert_int_eq(inode_get(fs, *ino, &np), 0);
	for (idx = 0; idx < BIG_SIZE / ZLFS_BLOCK_SIZE; idx++) {
		int open = 0;

		ck_assert_int_eq(data_addr(fs, np, idx, &addr), 0);
		for (uint32_t t = 0; t < ZLFS_NR_LOG_TYPES; t++)
			open |= fs->logs[t].zone == addr / zb;
		if (!open && (addr % zb) % seg_blocks < seg_blocks / 2)
			break;
	}
	ck_assert_uint_lt(idx, BIG_SIZE / ZLFS_BLOCK_SIZE);
	ck_assert(!remap_find(fs, addr, &nid, &ofs));
	node_put(fs, np);
	files_unmount(fs);
	*zone = addr / zb;
	return addr;
}

static uint16_t sum_ofs_read;

static void get16(uint8_t *b, void *arg)
{
	const struct set16 *s = arg;
	le16 v;

	memcpy(&v, b + s->off, 2);
	sum_ofs_read = le16_get(v);
}

/* The slot ADDR's summary entry names moved on by 3, resealed: only a comparison with the
 * tree can tell. */
static void misname(uint32_t addr)
{
	struct zlfs_fs *fs = mount_rw(img, 1);
	uint32_t zb = zlfs_zone_blocks(&fs->sb), seg_blocks = fs->sb.seg_blocks;
	uint32_t b = (addr % zb) % seg_blocks, sum = addr - b + seg_blocks - 1;
	struct set16 s = {offsetof(struct zlfs_summary, ofs) + 2u * b, 0};

	files_unmount(fs);
	edit_block(sum, ZLFS_KIND_SUMMARY, get16, &s, 0);
	s.val = (uint16_t)(sum_ofs_read + 3);
	edit_block(sum, ZLFS_KIND_SUMMARY, put16, &s, 1);
}

/* fsck -n names the block, what the summary says and what the tree says; -p (nothing is
 * lost: the block moves) repairs it and a second -n is clean; every file is whole. */
START_TEST(t_summary_ofs_fsck)
{
	struct zlfs_fs *fs;
	uint32_t ino, zone, addr = big_sealed("sumofs.img", &ino, &zone);
	char why[160];

	misname(addr);
	snprintf(why, sizeof(why), "data block %u: its segment summary names node", addr);
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert_msg(said(why) || said_err(why), "fsck -n did not name block %u", addr);
	ck_assert(said("but the tree gives it to node") || said_err("but the tree gives it"));
	ck_assert_int_eq(fsck("-p", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino, BIG_SIZE));
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	ck_assert(same_data(fs, ino_f2, F2_SIZE));
	files_unmount(fs);
}
END_TEST

/* The finding itself: GC of the zone meets the entry, moves the block as the tree's slot's
 * (the filesystem stays writable), the zone empties, and fsck then finds nothing: the old
 * entry describes a dead block. */
START_TEST(t_summary_ofs_gc)
{
	struct zlfs_fs *fs;
	uint32_t ino, zone, addr = big_sealed("sumofsgc.img", &ino, &zone);

	misname(addr);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(gc_migrate_zone(fs, zone), 0);
	ck_assert(!fs->readonly);
	ck_assert(!seg_is_valid(fs, addr));
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_FREE);
	ck_assert(same_data(fs, ino, BIG_SIZE));
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert(same_data(fs, ino, BIG_SIZE));
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
}
END_TEST

#define NNAMES 100 /* a damaged nonce makes ~12% of them no valid name: some, surely */

struct listing {
	char name[NNAMES + 8][ZLFS_NAME_MAX + 1];
	size_t len[NNAMES + 8];
	uint32_t ino[NNAMES + 8];
	uint32_t n;
};

static int list_fill(void *arg, const char *name, size_t len, uint32_t ino, uint8_t type,
		     uint64_t next)
{
	struct listing *l = arg;

	(void)type;
	(void)next;
	ck_assert_uint_gt(len, 0);
	ck_assert_uint_le(len, ZLFS_NAME_MAX);
	ck_assert_msg(!memchr(name, '/', len) && !memchr(name, '\0', len),
		      "a listed name holds a '/' or a NUL");
	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return 0;
	ck_assert_uint_lt(l->n, NNAMES + 8);
	memcpy(l->name[l->n], name, len);
	l->len[l->n] = len;
	l->ino[l->n++] = ino;
	return 0;
}

static const char *key_args(const char *flags)
{
	static char args[700];

	snprintf(args, sizeof(args), "%s --keyfile %s", flags, keyfile);
	return args;
}

/* /d of an encrypted image given NNAMES more files, then its nonce changed (resealed) until
 * fsck with the key reports a name; the files' inodes in INO. */
static void nonce_damaged(uint32_t *ino)
{
	struct zlfs_fs *fs;
	char name[32];
	int tries = 0;

	populate_encrypted("encnonce.img");
	fs = mount_rw(img, 0);
	for (int i = 0; i < NNAMES; i++) {
		snprintf(name, sizeof(name), "name-%03d", i);
		ino[i] = mk(fs, ino_d, name, 0, 100 + (size_t)i);
	}
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck(key_args("-n"), img), 0);
	do
		set_inode_field(ino_d, offsetof(struct zlfs_inode, nonce), 0x5a5a5a5au + tries);
	while (fsck(key_args("-n"), img) != 4 && ++tries < 4);
	ck_assert_msg(said("does not decrypt to a valid name") ||
		      said_err("does not decrypt to a valid name"),
		      "fsck -n with the key did not report a name of /d");
}

/* With the key, every entry of /d is listed (none with a '/' or a NUL, which the kernel would
 * refuse, failing the whole readdir) and each listed name is found again by lookup; fsck -y
 * moves the inodes whose names are no names to /lost+found, every file's data whole. */
START_TEST(t_enc_nonce_names)
{
	static struct listing l;
	struct zlfs_fs *fs;
	struct node_page *d;
	uint32_t ino[NNAMES], got;
	uint8_t type;

	nonce_damaged(ino);
	fs = mount_rw(img, 1);
	ck_assert_ptr_nonnull(fs->master);
	ck_assert_int_eq(inode_get(fs, ino_d, &d), 0);
	l.n = 0;
	ck_assert_int_eq(dir_iterate(fs, d, 0, list_fill, &l), 0);
	ck_assert_uint_eq(l.n, NNAMES + 1); /* and /d/f1 */
	for (uint32_t i = 0; i < l.n; i++) {
		ck_assert_msg(!dir_lookup(fs, d, l.name[i], l.len[i], &got, &type),
			      "listed name %u not found by lookup", i);
		ck_assert_uint_eq(got, l.ino[i]);
	}
	node_put(fs, d);
	files_unmount(fs);
	ck_assert_int_eq(fsck(key_args("-y"), img), 1);
	ck_assert_int_eq(fsck(key_args("-n"), img), 0);
	fs = mount_rw(img, 1);
	for (int i = 0; i < NNAMES; i++)
		ck_assert(same_data(fs, ino[i], 100 + (size_t)i));
	ck_assert(same_data(fs, ino_f1, F1_SIZE));
	files_unmount(fs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_meta");
	TCase *tc = tcase_create("hostile_meta");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_summary_ofs_fsck);
	tcase_add_test(tc, t_summary_ofs_gc);
	tcase_add_test(tc, t_enc_nonce_names);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
