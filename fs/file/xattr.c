/*
 * xattr.c - extended attributes, kept in one xattr node per inode.
 *
 * Owns: the packed entry list of struct zlfs_xattr_block (u8 name index, u8 name length,
 * le16 value size, name, value, 4-byte aligned), the namespaces (user., trusted., security.)
 * and the errors Linux filesystems return for them. system.* (POSIX ACLs) is refused with
 * EOPNOTSUPP like a filesystem mounted without ACL support: without FUSE_CAP_POSIX_ACL the
 * kernel hands ACLs to us as plain xattrs, and storing them without applying them to the mode
 * made cp -a and tar believe the permissions were set (files ended up 0600).
 * May call: node.c (through core.h), inode.c, log.h.
 */
#include "files.h"

#include <errno.h>
#include <string.h>
#include <sys/xattr.h>

#define XHDR 4
#define XSPACE ((uint32_t)sizeof(((struct zlfs_xattr_block *)0)->data))

static const char *const prefixes[] = {NULL, "user.", "trusted.", "security.", "system."};
#define XINDEX_SYSTEM 4

/* Split NAME into a namespace index and the suffix stored on disk. */
static int xname_split(const char *name, uint8_t *index, const char **suffix)
{
	uint8_t i;

	for (i = 1; i < XINDEX_SYSTEM; i++) {
		size_t pl = strlen(prefixes[i]);

		if (!strncmp(name, prefixes[i], pl)) {
			*index = i;
			*suffix = name + pl;
			if (!**suffix)
				return -EINVAL;
			return strlen(*suffix) > 255 ? -ERANGE : 0;
		}
	}
	return -EOPNOTSUPP;
}

/* Reading or removing a name of no namespace we store: there is no such attribute, but
 * system.* (ACLs) is not supported at all, as on a filesystem without ACL support. */
static int xname_unknown(const char *name)
{
	return strncmp(name, prefixes[XINDEX_SYSTEM], strlen(prefixes[XINDEX_SYSTEM])) ? -ENODATA
										      : -EOPNOTSUPP;
}

static uint32_t xent_size(uint32_t nlen, uint32_t vlen) { return (XHDR + nlen + vlen + 3) & ~3u; }

/* Bytes in use, up to the last whole entry: a damaged count or entry never leads a reader
 * past the block (fsck.zlfs reports the damage). */
static uint32_t xused(const struct zlfs_xattr_block *x)
{
	uint32_t used = le32_get(x->used), off = 0;

	if (used > XSPACE)
		used = XSPACE;
	while (off + XHDR <= used) {
		const uint8_t *e = x->data + off;
		uint32_t sz = xent_size(e[1], (uint32_t)(e[2] | e[3] << 8));

		if (off + sz > used)
			break;
		off += sz;
	}
	return off;
}

/* Offset of the entry (INDEX, SUFFIX) in X, or -1. */
static int xfind(const struct zlfs_xattr_block *x, uint8_t index, const char *suffix)
{
	uint32_t used = xused(x), off = 0;
	size_t sl = strlen(suffix);

	while (off + XHDR <= used) {
		const uint8_t *e = x->data + off;
		uint16_t vlen = (uint16_t)(e[2] | e[3] << 8);

		if (e[0] == index && e[1] == sl && !memcmp(e + XHDR, suffix, sl))
			return (int)off;
		off += xent_size(e[1], vlen);
	}
	return -1;
}

static int xnode_get(struct zlfs_fs *fs, struct node_page *inode, int create,
		     struct node_page **out)
{
	struct zlfs_inode *in = inode_of(inode);
	uint32_t nid = le32_get(in->xattr_nid);
	int ret;

	if (nid)
		return node_get_as(fs, nid, inode->nid, ZLFS_KIND_XATTR, NODE_OFS_ANY, out);
	if (!create)
		return -ENODATA;
	ret = node_alloc_nid(fs, inode->nid, &nid);
	if (ret)
		return ret;
	ret = node_new(fs, nid, inode->nid, ZLFS_KIND_XATTR, out);
	if (ret) {
		node_free(fs, nid);
		return ret;
	}
	in->xattr_nid = le32_put(nid);
	node_dirty(fs, inode);
	return 0;
}

int xattr_get(struct zlfs_fs *fs, struct node_page *inode, const char *name, void *val,
	      size_t size)
{
	struct node_page *xp;
	const char *suffix;
	uint8_t index;
	int ret = xname_split(name, &index, &suffix), off;

	if (ret)
		return ret == -EOPNOTSUPP ? xname_unknown(name) : ret;
	ret = xnode_get(fs, inode, 0, &xp);
	if (ret)
		return ret;
	off = xfind(xp->buf, index, suffix);
	if (off < 0) {
		ret = -ENODATA;
	} else {
		const uint8_t *e = ((struct zlfs_xattr_block *)xp->buf)->data + off;
		uint16_t vlen = (uint16_t)(e[2] | e[3] << 8);

		if (size && size < vlen)
			ret = -ERANGE;
		else
			ret = vlen;
		if (size >= vlen)
			memcpy(val, e + XHDR + e[1], vlen);
	}
	node_put(fs, xp);
	return ret;
}

static void xremove_at(struct zlfs_xattr_block *x, uint32_t off)
{
	uint8_t *e = x->data + off;
	uint32_t used = xused(x), sz = xent_size(e[1], (uint32_t)(e[2] | e[3] << 8));

	memmove(e, e + sz, used - off - sz);
	memset(x->data + used - sz, 0, sz);
	x->used = le32_put(used - sz);
}

int xattr_set(struct zlfs_fs *fs, struct node_page *inode, const char *name, const void *val,
	      size_t size, int flags)
{
	struct zlfs_xattr_block *x;
	struct node_page *xp;
	const char *suffix;
	uint8_t index, *e;
	uint32_t need, used;
	int ret = xname_split(name, &index, &suffix), off;

	if (ret)
		return ret;
	need = xent_size((uint32_t)strlen(suffix), (uint32_t)size);
	if (size > 0xffff || need > XSPACE)
		return -E2BIG;
	ret = xnode_get(fs, inode, !(flags & XATTR_REPLACE), &xp);
	if (ret)
		return ret;
	x = xp->buf;
	off = xfind(x, index, suffix);
	if ((off >= 0 && (flags & XATTR_CREATE)) || (off < 0 && (flags & XATTR_REPLACE))) {
		node_put(fs, xp);
		return off >= 0 ? -EEXIST : -ENODATA;
	}
	used = xused(x);
	if (used - (off >= 0 ? xent_size(x->data[off + 1], (uint32_t)(x->data[off + 2] |
						  x->data[off + 3] << 8)) : 0) + need > XSPACE) {
		node_put(fs, xp);
		return -ENOSPC;
	}
	if (off >= 0)
		xremove_at(x, (uint32_t)off);
	used = xused(x);
	e = x->data + used;
	e[0] = index;
	e[1] = (uint8_t)strlen(suffix);
	e[2] = (uint8_t)(size & 0xff);
	e[3] = (uint8_t)(size >> 8);
	memcpy(e + XHDR, suffix, e[1]);
	memcpy(e + XHDR + e[1], val, size);
	x->used = le32_put(used + need);
	node_dirty(fs, xp);
	node_put(fs, xp);
	inode_touch(fs, inode, INODE_CTIME);
	return 0;
}

int xattr_list(struct zlfs_fs *fs, struct node_page *inode, char *list, size_t size)
{
	const struct zlfs_xattr_block *x;
	struct node_page *xp;
	uint32_t off = 0, used;
	size_t total = 0;
	int ret = xnode_get(fs, inode, 0, &xp);

	if (ret)
		return ret == -ENODATA ? 0 : ret;
	x = xp->buf;
	used = xused(x);
	while (off + XHDR <= used) {
		const uint8_t *e = x->data + off;
		size_t pl = e[0] && e[0] < XINDEX_SYSTEM ? strlen(prefixes[e[0]]) : 0;
		size_t n = pl + e[1] + 1;

		if (pl) {
			if (size && total + n <= size) {
				memcpy(list + total, prefixes[e[0]], pl);
				memcpy(list + total + pl, e + XHDR, e[1]);
				list[total + n - 1] = 0;
			}
			total += n;
		}
		off += xent_size(e[1], (uint32_t)(e[2] | e[3] << 8));
	}
	node_put(fs, xp);
	if (size && total > size)
		return -ERANGE;
	return (int)total;
}

int xattr_remove(struct zlfs_fs *fs, struct node_page *inode, const char *name)
{
	struct node_page *xp;
	const char *suffix;
	uint8_t index;
	int ret = xname_split(name, &index, &suffix), off;

	if (ret)
		return ret == -EOPNOTSUPP ? xname_unknown(name) : ret;
	ret = xnode_get(fs, inode, 0, &xp);
	if (ret)
		return ret;
	off = xfind(xp->buf, index, suffix);
	if (off >= 0) {
		xremove_at(xp->buf, (uint32_t)off);
		node_dirty(fs, xp);
		inode_touch(fs, inode, INODE_CTIME);
	}
	node_put(fs, xp);
	return off >= 0 ? 0 : -ENODATA;
}
