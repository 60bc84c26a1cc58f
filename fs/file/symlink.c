/*
 * symlink.c - symlink targets: kept in the inode when they fit (the inline area, ciphertext in
 * an encrypted inode), else as file data.
 *
 * Owns: where a target lives and its encrypted form. Used by the FUSE symlink and readlink
 * and by mkfs.zlfs --root-dir. Above data.c and data_read.c, which it calls for a long target.
 * May call: data.c, data_read.c, fcrypt.c, node.c (through core.h).
 */
#include "files.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

/* A target that fits is kept in the inode: as ciphertext (CBC-CTS, inline_size its padded
 * length) for an encrypted inode. Longer ones are file data, encrypted like any. */
int symlink_store(struct zlfs_fs *fs, struct node_page *np, const char *target)
{
	struct zlfs_inode *in = inode_of(np);
	size_t len = strlen(target), stored = len;
	int ret;

	if (len > ZLFS_INLINE_MAX) {
		ret = data_write(fs, np, target, len, 0);
		return ret < 0 ? ret : 0;
	}
	if (fcrypt_is_encrypted(np)) {
		ret = fcrypt_symlink_encrypt(fs, np, target, len, (uint8_t *)in->addr);
		if (ret < 0)
			return ret;
		stored = (size_t)ret;
	} else {
		memcpy(in->addr, target, len);
	}
	in->flags = le32_put(le32_get(in->flags) | ZLFS_IFLAG_INLINE);
	in->inline_size = le32_put((uint32_t)stored);
	in->size = le64_put(len);
	node_dirty(fs, np);
	return 0;
}

int symlink_load(struct zlfs_fs *fs, struct node_page *np, char *buf)
{
	struct zlfs_inode *in = inode_of(np);
	uint64_t len = le64_get(in->size);
	uint32_t stored = le32_get(in->inline_size);
	int ret;

	if (!S_ISLNK(le32_get(in->mode)) || len > PATH_MAX)
		return -EINVAL;
	if (!(le32_get(in->flags) & ZLFS_IFLAG_INLINE)) {
		ret = data_read(fs, np, buf, len, 0);
		buf[ret < 0 ? 0 : len] = 0;
		return ret < 0 ? ret : 0;
	}
	if (!fcrypt_is_encrypted(np)) {
		memcpy(buf, in->addr, len);
		buf[len] = 0;
		return 0;
	}
	if (stored > ZLFS_INLINE_MAX)
		return -EUCLEAN;
	ret = fcrypt_symlink_decrypt(fs, np, (const uint8_t *)in->addr, stored, buf);
	return ret < 0 ? ret : 0;
}
