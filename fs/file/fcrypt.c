/*
 * fcrypt.c - per-file encryption policy in the file layer: which inodes are encrypted, their
 * keys, the disk form of names in encrypted directories, and encrypted symlink targets.
 *
 * Owns: inheritance (a new inode under an encrypted directory, or any new inode with
 * -o encrypt_all, is encrypted with a fresh random nonce), `zlfs-ctl encrypt DIR` (marks an
 * empty directory), the mount-time notice that encrypt_all leaves names in a plain root
 * plaintext, the per-file content key and per-directory name key derived from the
 * master key and the inode's nonce, and the three forms of a name: the user's, the disk's
 * (AES-256-CBC-CTS ciphertext, padded) and the locked view's (base64url of the ciphertext,
 * or a digest form for long ones). Keys are derived on use and wiped after; nothing here
 * keeps key material beyond one call.
 * May call: crypto/zcrypt.h, inode.c, node/log (core.h), log.h. Called by dmap.c, dir.c, files.c and
 * the FUSE operations.
 */
#include "files.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int fcrypt_is_encrypted(struct node_page *np)
{
	return !!(le32_get(inode_of(np)->flags) & ZLFS_IFLAG_ENCRYPT);
}

int fcrypt_need_key(const struct zlfs_fs *fs, struct node_page *np)
{
	return fcrypt_is_encrypted(np) && !fs->master ? -ENOKEY : 0;
}

static int fcrypt_mark(struct zlfs_fs *fs, struct node_page *np)
{
	struct zlfs_inode *in = inode_of(np);
	int ret = zlfs_random(in->nonce, sizeof(in->nonce));

	if (ret)
		return ret;
	in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_ENCRYPT);
	node_dirty(fs, np);
	return 0;
}

int fcrypt_inherit(struct zlfs_fs *fs, struct node_page *dir, struct node_page *np)
{
	if (!fcrypt_is_encrypted(dir) && !fs->encrypt_all)
		return 0;
	if (!fs->master)
		return -ENOKEY;
	return fcrypt_mark(fs, np);
}

int fcrypt_set_policy(struct zlfs_fs *fs, struct node_page *dir)
{
	struct zlfs_inode *in = inode_of(dir);

	if (!S_ISDIR(le32_get(in->mode)))
		return -ENOTDIR;
	if (fcrypt_is_encrypted(dir))
		return 0; /* asking twice is not an error, as with fscrypt */
	if (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_ENCRYPT))
		return -EOPNOTSUPP;
	if (!fs->master)
		return -ENOKEY;
	if (le32_get(in->dir_entries))
		return -ENOTEMPTY;
	return fcrypt_mark(fs, dir);
}

void fcrypt_mount_notice(struct zlfs_fs *fs, const char *path)
{
	struct node_page *root;

	if (!fs->encrypt_all || inode_get(fs, ZLFS_ROOT_INO, &root))
		return;
	if (!fcrypt_is_encrypted(root))
		zlog_warn("%s: -o encrypt_all: the root directory is not encrypted, so names in it "
			  "and in the other directories that are not encrypted stay plaintext on the "
			  "device (contents of new files are encrypted); an encrypted root comes from "
			  "mkfs.zlfs --encrypt without --plain-root", path);
	node_put(fs, root);
}

int fcrypt_same_policy(struct node_page *a, struct node_page *b)
{
	return fcrypt_is_encrypted(a) == fcrypt_is_encrypted(b);
}

int fcrypt_file_key(const struct zlfs_fs *fs, struct node_page *np, struct zcrypt_file_key *fk)
{
	if (!fs->master)
		return -ENOKEY;
	return zcrypt_file_key_derive(fs->master, inode_of(np)->nonce, fk);
}

static int name_key(const struct zlfs_fs *fs, struct node_page *np, struct zcrypt_name_key *nk)
{
	if (!fs->master)
		return -ENOKEY;
	return zcrypt_name_key_derive(fs->master, inode_of(np)->nonce, nk);
}

/* ---- names --------------------------------------------------------------------------- */

int fname_nokey_to_disk(const char *name, size_t len, struct fname *fn)
{
	int digest = 0, n = zcrypt_nokey_decode(name, len, fn->disk, &digest, &fn->hash);

	if (n < 0)
		return -ENOENT; /* no stored name encodes to this */
	fn->len = (size_t)n;
	fn->digest = digest;
	return 0;
}

int fname_to_disk(const struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		  int create, struct fname *fn)
{
	struct zcrypt_name_key nk;
	int ret;

	memset(fn, 0, sizeof(*fn));
	if (!len || len > ZLFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!fcrypt_is_encrypted(dir)) {
		memcpy(fn->disk, name, len);
		fn->len = len;
		return 0;
	}
	if (!fs->master)
		return create ? -ENOKEY : fname_nokey_to_disk(name, len, fn);
	ret = name_key(fs, dir, &nk);
	if (!ret)
		ret = zcrypt_name_encrypt(&nk, name, len, ZLFS_NAME_MAX, fn->disk);
	zcrypt_wipe(&nk, sizeof(nk));
	if (ret < 0)
		return ret;
	fn->len = (size_t)ret;
	return 0;
}

int fname_match(const struct fname *fn, const uint8_t *disk, size_t len, uint32_t hash)
{
	if (fn->digest)
		return hash == fn->hash && zcrypt_nokey_digest_match(disk, len, fn->disk);
	return len == fn->len && !memcmp(disk, fn->disk, len);
}

int fname_to_user(const struct zlfs_fs *fs, struct node_page *dir, const uint8_t *disk,
		  size_t len, uint32_t hash, char *out, size_t *out_len)
{
	struct zcrypt_name_key nk;
	char plain[ZLFS_NAME_MAX + 1];
	int ret;

	if (!fcrypt_is_encrypted(dir)) {
		memcpy(out, disk, len);
		*out_len = len;
		return 0;
	}
	if (fs->master && !(ret = name_key(fs, dir, &nk))) {
		ret = zcrypt_name_decrypt(&nk, disk, len, plain);
		zcrypt_wipe(&nk, sizeof(nk));
		/* a name no user could give (a '/', a dot entry) is what a damaged nonce or name
		 * decrypts to, and the kernel refuses a '/' in a listing (the whole readdir EIO) */
		if (ret > 0 && !memchr(plain, '/', (size_t)ret) &&
		    !(ret == 1 && plain[0] == '.') &&
		    !(ret == 2 && plain[0] == '.' && plain[1] == '.')) {
			memcpy(out, plain, (size_t)ret);
			*out_len = (size_t)ret;
			return 0;
		}
		zcrypt_wipe(plain, sizeof(plain));
		zlog_err("directory %u: a name does not decrypt to a valid name: listed in its "
			 "no-key form; run fsck.zlfs", dir->nid);
		ret = zcrypt_nokey_encode(disk, len, hash, out);
		if (ret < 0)
			return ret;
		*out_len = (size_t)ret;
		return FNAME_NOKEY;
	}
	ret = zcrypt_nokey_encode(disk, len, hash, out);
	if (ret < 0)
		return ret;
	*out_len = (size_t)ret;
	return 0;
}

/* ---- symlink targets ------------------------------------------------------------------ */

int fcrypt_symlink_encrypt(const struct zlfs_fs *fs, struct node_page *np, const char *target,
			   size_t len, uint8_t *out)
{
	struct zcrypt_name_key nk;
	int ret = name_key(fs, np, &nk);

	if (!ret)
		ret = zcrypt_name_encrypt(&nk, target, len, ZLFS_INLINE_MAX, out);
	zcrypt_wipe(&nk, sizeof(nk));
	return ret;
}

int fcrypt_symlink_decrypt(const struct zlfs_fs *fs, struct node_page *np, const uint8_t *ct,
			   size_t len, char *out)
{
	struct zcrypt_name_key nk;
	int ret;

	if (!fs->master)
		return zcrypt_nokey_encode(ct, len, 0, out);
	ret = name_key(fs, np, &nk);
	if (!ret)
		ret = zcrypt_name_decrypt(&nk, ct, len, out);
	zcrypt_wipe(&nk, sizeof(nk));
	return ret;
}
