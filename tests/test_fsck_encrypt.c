/*
 * test_fsck_encrypt.c - fsck.zlfs on an encrypted root (mkfs --encrypt): every repair but
 * naming an inode in the encrypted /lost+found works without the key; that one is left,
 * writing nothing, until fsck has it; a wrong key is refused. Part of test_fsck (test_fsck.c).
 */
#include "fsck_testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int fsck_encrypt_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_encrypted_root;
	return n;
}
