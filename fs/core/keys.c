/*
 * keys.c - the master key of a mounted encrypted filesystem.
 *
 * Owns: turning a key file or a passphrase into the master key (scrypt with the salt and cost
 * the superblock records), refusing a key that does not match the superblock's key check value
 * before the mount writes anything, and wiping the key at unmount. The key lives in one
 * locked page (mlock, best effort) so it is not written to swap.
 * May call: crypto/zcrypt.h, format.h, log.h. Called by mount.c.
 */
#include "core.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int key_alloc(struct zcrypt_master **out)
{
	struct zcrypt_master *m = aligned_alloc(4096, 4096);

	if (!m)
		return -ENOMEM;
	(void)mlock(m, 4096); /* without the privilege it stays swappable: not fatal */
	*out = m;
	return 0;
}

static void key_free(struct zcrypt_master *m)
{
	if (!m)
		return;
	zcrypt_wipe(m, sizeof(*m));
	munlock(m, 4096);
	free(m);
}

static int key_derive(const struct zlfs_sb_info *sb, const struct zlfs_key_source *src,
		      struct zcrypt_master *m, const char *path)
{
	int ret;

	if (src->keyfile) {
		ret = zcrypt_keyfile_load(src->keyfile, m);
		if (ret == -EINVAL)
			zlog_err("%s: key file %s is not a zlfs key (64 bytes; make one with "
				 "zlfs-ctl genkey)", path, src->keyfile);
		else if (ret)
			zlog_err("%s: cannot read key file %s: %s", path, src->keyfile, strerror(-ret));
		return ret;
	}
	if (sb->enc_kdf != 2) {
		zlog_err("%s: this filesystem was made with a key file, not a passphrase: use "
			 "-o keyfile=PATH", path);
		return -EINVAL;
	}
	ret = zcrypt_passphrase_derive(src->passphrase, strlen(src->passphrase), sb->enc_salt,
				       sb->scrypt_n, sb->scrypt_r, sb->scrypt_p, m);
	if (ret)
		zlog_err("%s: cannot derive the key from the passphrase: %s", path, strerror(-ret));
	return ret;
}

int key_load(struct zlfs_fs *fs, const struct zlfs_key_source *src, const char *path)
{
	struct zcrypt_master *m;
	int ret;

	fs->encrypt_all = src && src->encrypt_all;
	if (!src || (!src->keyfile && !src->passphrase)) {
		if (fs->encrypt_all) {
			zlog_err("%s: -o encrypt_all needs a key (-o keyfile=PATH or -o passphrase)",
				 path);
			return -EINVAL;
		}
		return 0;
	}
	if (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_ENCRYPT)) {
		zlog_err("%s: a key was given but the filesystem was made without encryption "
			 "(mkfs.zlfs --encrypt)", path);
		return -EINVAL;
	}
	ret = key_alloc(&m);
	if (ret)
		return ret;
	ret = key_derive(&fs->sb, src, m, path);
	if (!ret) {
		ret = zcrypt_keycheck_verify(m, fs->sb.key_check);
		if (ret == -EKEYREJECTED)
			zlog_err("%s: wrong key: it does not match the key this filesystem was made "
				 "with; nothing was written", path);
	}
	if (ret) {
		key_free(m);
		return ret;
	}
	fs->master = m;
	return 0;
}

void key_drop(struct zlfs_fs *fs)
{
	key_free(fs->master);
	fs->master = NULL;
}
