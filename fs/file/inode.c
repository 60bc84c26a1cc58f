/*
 * inode.c - inodes: reading one, making one, its generation and its times.
 *
 * Owns: the fields of struct zlfs_inode as the rest of the file layer sees them. The bottom
 * of the file layer: stat, release and sync, which reach the layer's caches, are files.c's.
 * May call: node.c and mount.c's feature switch (through core.h), log.h.
 */
#include "files.h"
#include "log.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

uint64_t inode_now_ns(void) { return zlfs_now_ns(); }

/* Generation numbers tell a reused inode number from its earlier life (NFS-style handles):
 * they must differ, not be secret. A per-thread xorshift seeded once from getrandom spares
 * a system call on every create. */
static uint32_t inode_generation(uint64_t now)
{
	static __thread uint64_t state;
	uint32_t pinned;

	if (zlfs_clock_pinned()) /* an image made to be reproducible: the pinned stream */
		return zlfs_random(&pinned, sizeof(pinned)) ? (uint32_t)now : pinned;
	if (!state && (getrandom(&state, sizeof(state), GRND_NONBLOCK) != sizeof(state) || !state))
		state = now | 1;
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return (uint32_t)(state >> 32);
}

int inode_get(struct zlfs_fs *fs, uint32_t ino, struct node_page **np)
{
	int ret = node_get(fs, ino, np);

	if (ret)
		return ret == -ENOENT ? -ESTALE : ret;
	if (le16_get(inode_of(*np)->hdr.kind) != ZLFS_KIND_INODE) {
		node_put(fs, *np);
		zlog_err("node %u is not an inode: run fsck.zlfs", ino);
		return -EUCLEAN;
	}
	node_set_hot(fs, *np, S_ISDIR(le32_get(inode_of(*np)->mode)));
	return 0;
}

int inode_new(struct zlfs_fs *fs, uint32_t mode, uint32_t uid, uint32_t gid, uint32_t rdev,
	      uint32_t parent, struct node_page **out)
{
	struct zlfs_inode *in;
	uint64_t now = inode_now_ns();
	uint32_t ino, gen;
	int ret = seg_room_for_user(fs) ? node_alloc_nid(fs, 0, &ino) : -ENOSPC;

	if (ret)
		return ret;
	ret = node_new(fs, ino, ino, ZLFS_KIND_INODE, out);
	if (ret) {
		node_free(fs, ino);
		return ret;
	}
	in = inode_of(*out);
	gen = inode_generation(now);
	in->mode = le32_put(mode);
	in->uid = le32_put(uid);
	in->gid = le32_put(gid);
	in->rdev = le32_put(rdev);
	in->nlink = le32_put(S_ISDIR(mode) ? 2 : 1);
	in->parent_ino = le32_put(parent);
	in->generation = le32_put(gen);
	in->atime_ns = in->mtime_ns = in->ctime_ns = in->crtime_ns = le64_put(now);
	node_set_hot(fs, *out, S_ISDIR(mode));
	return 0;
}

void inode_touch(struct zlfs_fs *fs, struct node_page *np, int which)
{
	struct zlfs_inode *in = inode_of(np);
	le64 now = le64_put(inode_now_ns());

	if (which & INODE_ATIME)
		in->atime_ns = now;
	if (which & INODE_MTIME)
		in->mtime_ns = now;
	if (which & INODE_CTIME)
		in->ctime_ns = now;
	node_dirty(fs, np);
}

int inode_set_attr_flags(struct zlfs_fs *fs, struct node_page *np, uint32_t flags)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t old = le32_get(in->flags);
	int ret = 0;

	flags &= ZLFS_IFLAG_ATTR;
	if ((old & ZLFS_IFLAG_ATTR) == flags)
		return 0;
	if (flags) /* before the inode says it: an older reader must refuse the filesystem */
		ret = zlfs_feature_incompat(fs, ZLFS_FEAT_INCOMPAT_ATTR_FLAGS);
	if (ret)
		return ret;
	in->flags = le32_put((old & ~ZLFS_IFLAG_ATTR) | flags);
	inode_touch(fs, np, INODE_CTIME);
	return 0;
}
