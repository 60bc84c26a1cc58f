/*
 * icache.c - the attribute cache: what stat needs of an inode, kept for many more inodes
 * than there are node pages, so stat of a large tree reads no node.
 *
 * Owns: the table of cached attributes and its bound, refreshed from an inode's page by
 * whoever changed the page (under that inode's lock) and read by stat without any inode
 * lock: an entry is copied in and out whole under the cache's own lock.
 * May call: lock.h, format.h. Called by node.c and the file layer
 * (files.c's stat).
 */
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#define ICACHE_MAX (256u * 1024) /* inodes whose attributes are kept (about 24 MiB) */
#define ICACHE_BUCKETS 65536

struct iattr_ent {
	struct iattr_ent *next;
	uint32_t ino;
	struct iattr a;
};

struct iattr_cache {
	struct zlock lock;
	struct iattr_ent *bucket[ICACHE_BUCKETS];
	uint32_t count;
};

static struct iattr_ent **iattr_slot(struct iattr_cache *c, uint32_t ino)
{
	struct iattr_ent **pp = &c->bucket[ino % ICACHE_BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

void iattr_of_inode(const struct zlfs_inode *in, struct iattr *a)
{
	*a = (struct iattr){le32_get(in->mode),	  le32_get(in->nlink),	 le32_get(in->uid),
			    le32_get(in->gid),	  le32_get(in->rdev),	 le32_get(in->generation),
			    le64_get(in->size),	  le64_get(in->blocks),	 le64_get(in->atime_ns),
			    le64_get(in->mtime_ns), le64_get(in->ctime_ns), le32_get(in->xattr_nid) != 0};
	/* A non-empty inline file (inline.c) counts one block, as on F2FS: tools that take a file
	 * with no blocks for all hole (tar --sparse, cp) would read nothing of it. */
	if (S_ISREG(a->mode) && (le32_get(in->flags) & ZLFS_IFLAG_INLINE) && a->size)
		a->blocks = 1;
	/* An inline directory (dir_inline.c) counts the block it would have: its st_blocks then
	 * never changes when a checkpoint moves block 0 into the inode or out of it, and the
	 * kernel, which keeps attributes for long, never sees a stale count. */
	if (S_ISDIR(a->mode) && (le32_get(in->flags) & ZLFS_IFLAG_INLINE_DENTRY))
		a->blocks = 1;
}

void iattr_update(struct zlfs_fs *fs, struct node_page *np)
{
	const struct zlfs_inode *in = np->buf;
	struct iattr_cache *c = fs->icache;
	struct iattr_ent **pp, *e;
	struct iattr a;

	if (!c || le16_get(in->hdr.kind) != ZLFS_KIND_INODE)
		return;
	iattr_of_inode(in, &a); /* read the page outside the cache's lock */
	zlock_lock(&c->lock);
	pp = iattr_slot(c, np->nid);
	e = *pp;
	if (!e && c->count < ICACHE_MAX && (e = calloc(1, sizeof(*e)))) {
		e->ino = np->nid;
		*pp = e;
		c->count++;
	}
	if (e)
		e->a = a;
	zlock_unlock(&c->lock);
}

void iattr_drop(struct zlfs_fs *fs, uint32_t ino)
{
	struct iattr_cache *c = fs->icache;
	struct iattr_ent **pp, *e;

	if (!c)
		return;
	zlock_lock(&c->lock);
	pp = iattr_slot(c, ino);
	e = *pp;
	if (e) {
		*pp = e->next;
		free(e);
		c->count--;
	}
	zlock_unlock(&c->lock);
}

int iattr_get(struct zlfs_fs *fs, uint32_t ino, struct iattr *a)
{
	struct iattr_cache *c = fs->icache;
	struct iattr_ent *e;
	int ret = -ENOENT;

	if (!c)
		return ret;
	zlock_lock(&c->lock);
	e = *iattr_slot(c, ino);
	if (e) {
		*a = e->a;
		ret = 0;
	}
	zlock_unlock(&c->lock);
	return ret;
}

int icache_init(struct zlfs_fs *fs)
{
	fs->icache = calloc(1, sizeof(*fs->icache));
	if (!fs->icache)
		return -ENOMEM;
	zlock_init(&fs->icache->lock, LR_ICACHE, "icache_lock");
	return 0;
}

void icache_destroy(struct zlfs_fs *fs)
{
	struct iattr_cache *c = fs->icache;

	if (!c)
		return;
	for (uint32_t b = 0; b < ICACHE_BUCKETS; b++)
		while (c->bucket[b]) {
			struct iattr_ent *e = c->bucket[b];

			c->bucket[b] = e->next;
			free(e);
		}
	zlock_destroy(&c->lock);
	free(c);
	fs->icache = NULL;
}
