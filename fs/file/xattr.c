/*
 * xattr.c - extended attributes: names, namespaces and the VFS's rules.
 *
 * Owns: the namespaces (user., trusted., security., and of system. the POSIX ACLs, whose
 * rules are acl.c's), their on-disk index, and the errors Linux filesystems return (ENODATA,
 * EEXIST, ERANGE, E2BIG, ENOSPC). Where entries are kept is xattr_node.c's. Other system.*
 * names are refused with EOPNOTSUPP; the daemon refuses the ACLs too when the kernel does
 * not enforce them (without FUSE_CAP_POSIX_ACL the kernel hands ACLs to us as plain xattrs,
 * and storing them without applying them to the mode made cp -a and tar believe the
 * permissions were set: files ended up 0600).
 * May call: xattr_node.c, node.c (through core.h), inode.c, log.h.
 */
#include "files.h"
#include "xattr_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

static const char *const prefixes[] = {NULL, "user.", "trusted.", "security.", "system."};
#define XINDEX_SYSTEM 4

int acl_name(const char *name)
{
	if (!strcmp(name, ACL_ACCESS_XATTR))
		return ACL_ACCESS;
	if (!strcmp(name, ACL_DEFAULT_XATTR))
		return ACL_DEFAULT;
	return 0;
}

/* Split NAME into a namespace index and the suffix stored on disk. Of system.*, only the
 * POSIX ACLs (acl.c; the daemon refuses them too when the kernel does not enforce them). */
static int xname_split(const char *name, uint8_t *index, const char **suffix)
{
	uint8_t i;

	if (acl_name(name)) {
		*index = XINDEX_SYSTEM;
		*suffix = name + strlen(prefixes[XINDEX_SYSTEM]);
		return 0;
	}
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

/* The stored entry's value: its size, and its bytes into VAL when SIZE holds them. */
static int xent_value(struct zlfs_fs *fs, struct node_page *inode, const uint8_t *e, void *val,
		      size_t size)
{
	uint32_t vlen = xent_vlen(e), vnid = 0;
	int ret;

	if ((zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_XATTR_NODES) && (e[0] & ZLFS_XATTR_EXTERNAL))
		xent_ext(e, &vnid, &vlen);
	if (size && size < vlen)
		return -ERANGE;
	if (!size)
		return (int)vlen;
	if (!vnid) {
		memcpy(val, e + XHDR + e[1], vlen);
		return (int)vlen;
	}
	ret = xvalue_read(fs, inode, vnid, vlen, val);
	return ret ? ret : (int)vlen;
}

int xattr_get(struct zlfs_fs *fs, struct node_page *inode, const char *name, void *val,
	      size_t size)
{
	const char *suffix;
	struct xnode x;
	uint8_t index;
	int ret = xname_split(name, &index, &suffix);

	if (ret)
		return ret == -EOPNOTSUPP ? xname_unknown(name) : ret;
	ret = xchain_lookup(fs, inode, index, suffix, &x);
	if (ret)
		return ret;
	ret = xent_value(fs, inode, x.data + x.off, val, size);
	node_put(fs, x.np);
	return ret;
}

/* Lay out the entry (INDEX, SUFFIX) = VAL in E: its value inline, or (VNID) in value nodes. */
static uint32_t xent_build(uint8_t *e, uint8_t index, const char *suffix, const void *val,
			   size_t size, uint32_t vnid)
{
	uint32_t nlen = (uint32_t)strlen(suffix), vlen = vnid ? ZLFS_XATTR_EXT_LEN : (uint32_t)size;
	uint32_t esize = xent_size(nlen, vlen);

	memset(e, 0, esize);
	e[0] = (uint8_t)(index | (vnid ? ZLFS_XATTR_EXTERNAL : 0));
	e[1] = (uint8_t)nlen;
	e[2] = (uint8_t)(vlen & 0xff);
	e[3] = (uint8_t)(vlen >> 8);
	memcpy(e + XHDR, suffix, nlen);
	if (vnid) {
		le32 raw[2] = {le32_put(vnid), le32_put((uint32_t)size)};

		memcpy(e + XHDR + nlen, raw, sizeof(raw));
	} else {
		memcpy(e + XHDR + nlen, val, size);
	}
	return esize;
}

/* Put the laid-out entry E (ESIZE bytes) in place of the entry at X->off (X held; put here)
 * when its node has room for it: 1 done, 0 no room (X still held). */
static int xreplace_in_place(struct zlfs_fs *fs, struct xnode *x, const uint8_t *e,
			     uint32_t esize)
{
	uint8_t *old = x->data + x->off;
	uint32_t used = xused(x), osize = xent_size(old[1], xent_vlen(old));

	if (used - osize + esize > x->space)
		return 0;
	xnode_drop_entry(x);
	xnode_append(fs, x, e, esize);
	node_put(fs, x->np);
	return 1;
}

/* Store the entry E (ESIZE bytes) for a name held at X (FOUND) or not held yet. The new
 * entry goes in before the old one leaves, so a failure (no room, no nid) changes nothing. */
static int xstore(struct zlfs_fs *fs, struct node_page *inode, struct xnode *x, int found,
		  const uint8_t *e, uint32_t esize)
{
	uint32_t ovnid = 0, ovsize;
	int ret;

	if (found && (zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_XATTR_NODES) &&
	    (x->data[x->off] & ZLFS_XATTR_EXTERNAL))
		xent_ext(x->data + x->off, &ovnid, &ovsize);
	if (found && xreplace_in_place(fs, x, e, esize)) {
		if (ovnid)
			xvalue_free(fs, inode, ovnid);
		return 0;
	}
	ret = xchain_insert(fs, inode, e, esize);
	if (!found)
		return ret;
	if (ret) {
		node_put(fs, x->np);
		return ret;
	}
	return xchain_remove(fs, inode, x);
}

int xattr_set(struct zlfs_fs *fs, struct node_page *inode, const char *name, const void *val,
	      size_t size, int flags)
{
	uint32_t esize, vnid = 0, space = xnode_space(fs), nlen;
	const char *suffix;
	struct xnode x;
	uint8_t index, *e;
	int ret = xname_split(name, &index, &suffix), found;

	if (ret)
		return ret;
	nlen = (uint32_t)strlen(suffix);
	if (index == XINDEX_SYSTEM && !(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_POSIX_ACL))
		return -EOPNOTSUPP; /* acl.c turns the feature on first */
	if (size > ZLFS_XATTR_VALUE_MAX ||
	    (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_XATTR_NODES) &&
	     xent_size(nlen, (uint32_t)size) > space))
		return -E2BIG;
	ret = xchain_lookup(fs, inode, index, suffix, &x);
	if (ret && ret != -ENODATA)
		return ret;
	found = !ret;
	if ((found && (flags & XATTR_CREATE)) || (!found && (flags & XATTR_REPLACE))) {
		if (found)
			node_put(fs, x.np);
		return found ? -EEXIST : -ENODATA;
	}
	e = malloc(space);
	ret = e ? 0 : -ENOMEM;
	if (!ret && xent_size(nlen, (uint32_t)size) > space) /* too big for any node */
		ret = xvalue_write(fs, inode, val, (uint32_t)size, &vnid);
	if (!ret) {
		esize = xent_build(e, index, suffix, val, size, vnid);
		ret = xstore(fs, inode, &x, found, e, esize);
		found = 0;
		if (ret && vnid)
			xvalue_free(fs, inode, vnid);
	}
	if (found)
		node_put(fs, x.np);
	free(e);
	if (!ret)
		inode_touch(fs, inode, INODE_CTIME);
	return ret;
}

int xattr_list(struct zlfs_fs *fs, struct node_page *inode, char *list, size_t size)
{
	uint32_t nid = le32_get(inode_of(inode)->xattr_nid), off, used;
	size_t total = 0;
	struct xnode x;
	int ret;

	if (!nid)
		return 0;
	for (ret = xchain_get(fs, inode, nid, 0, &x); !ret && x.np;
	     ret = xchain_next(fs, inode, &x)) {
		used = xused(&x);
		for (off = 0; off + XHDR <= used; off += xent_size(x.data[off + 1],
								    xent_vlen(x.data + off))) {
			const uint8_t *e = x.data + off;
			uint8_t index = e[0] & ~ZLFS_XATTR_EXTERNAL;
			size_t pl = index && index <= XINDEX_SYSTEM ? strlen(prefixes[index]) : 0;
			size_t n = pl + e[1] + 1;

			if (!pl)
				continue;
			if (size && total + n <= size) {
				memcpy(list + total, prefixes[index], pl);
				memcpy(list + total + pl, e + XHDR, e[1]);
				list[total + n - 1] = 0;
			}
			total += n;
		}
	}
	if (ret)
		return ret;
	if (size && total > size)
		return -ERANGE;
	return total > INT32_MAX ? -E2BIG : (int)total;
}

int xattr_remove(struct zlfs_fs *fs, struct node_page *inode, const char *name)
{
	const char *suffix;
	struct xnode x;
	uint8_t index;
	int ret = xname_split(name, &index, &suffix);

	if (ret)
		return ret == -EOPNOTSUPP ? xname_unknown(name) : ret;
	ret = xchain_lookup(fs, inode, index, suffix, &x);
	if (ret)
		return ret;
	ret = xchain_remove(fs, inode, &x);
	if (!ret)
		inode_touch(fs, inode, INODE_CTIME);
	return ret;
}
