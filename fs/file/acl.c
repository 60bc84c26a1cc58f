/*
 * acl.c - POSIX ACLs kept as the system.posix_acl_access and system.posix_acl_default
 * xattrs, for a kernel that enforces them (FUSE_CAP_POSIX_ACL).
 *
 * Owns: the xattr form of an ACL (le32 version 2, then {le16 tag, le16 perm, le32 id}
 * entries in the kernel's order) and what the kernel leaves to the filesystem when it
 * enforces ACLs: keeping the mode's permission bits in step with the access ACL (owner,
 * mask or owning group, other), changing the ACL on chmod, and giving a new inode the
 * default ACL of its directory (or, without one, the caller's umask, which the kernel then
 * does not apply). The first ACL stored turns the POSIX_ACL incompat feature on: a reader
 * without ACLs would grant what an ACL denies.
 * May call: xattr.c, inode.c, super.c (zlfs_feature_incompat, through core.h), log.h.
 */
#include "files.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define ACL_VERSION 2u
#define ACL_HDR 4u
#define ACL_ENTRY 8u
#define ACL_MAX_BYTES 4096u /* the kernel reads an ACL with one page */

enum { T_USER_OBJ = 0x01, T_USER = 0x02, T_GROUP_OBJ = 0x04, T_GROUP = 0x08, T_MASK = 0x10,
       T_OTHER = 0x20 };

static uint16_t ent_u16(const uint8_t *a, uint32_t i, uint32_t at)
{
	const uint8_t *p = a + ACL_HDR + i * ACL_ENTRY + at;

	return (uint16_t)(p[0] | p[1] << 8);
}

static uint16_t ent_tag(const uint8_t *a, uint32_t i) { return ent_u16(a, i, 0); }
static uint16_t ent_perm(const uint8_t *a, uint32_t i) { return ent_u16(a, i, 2); }

static void ent_set_perm(uint8_t *a, uint32_t i, uint16_t perm)
{
	a[ACL_HDR + i * 8 + 2] = (uint8_t)(perm & 0xff);
	a[ACL_HDR + i * 8 + 3] = (uint8_t)(perm >> 8);
}

static uint32_t ent_id(const uint8_t *a, uint32_t i)
{
	le32 id;

	memcpy(&id, a + ACL_HDR + i * 8 + 4, sizeof(id));
	return le32_get(id);
}

/* The tags in the order an ACL lists them: one owner, named users by id, one owning group,
 * named groups by id, at most one mask (required with named entries), one other. */
int acl_check(const void *v, size_t size)
{
	static const uint16_t order[] = {T_USER_OBJ, T_USER, T_GROUP_OBJ, T_GROUP, T_MASK,
					 T_OTHER};
	const uint8_t *a = v;
	uint32_t n, i, k = 0, named = 0, seen = 0, last_id = 0;
	le32 ver;

	if (size > ACL_MAX_BYTES)
		return -E2BIG;
	if (size < ACL_HDR || (size - ACL_HDR) % ACL_ENTRY)
		return -EINVAL;
	memcpy(&ver, a, sizeof(ver));
	n = (uint32_t)(size - ACL_HDR) / ACL_ENTRY;
	if (le32_get(ver) != ACL_VERSION || n < 3)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		uint16_t tag = ent_tag(a, i);

		while (k < 6 && order[k] != tag)
			k++;
		if (k == 6 || ent_perm(a, i) > 7)
			return -EINVAL;
		if (tag == T_USER || tag == T_GROUP) {
			if ((seen & tag) && ent_id(a, i) <= last_id)
				return -EINVAL;
			last_id = ent_id(a, i);
			named = 1;
		} else if (seen & tag) {
			return -EINVAL; /* a second owner, owning group, mask or other */
		}
		seen |= tag;
	}
	if (!(seen & T_USER_OBJ) || !(seen & T_GROUP_OBJ) || !(seen & T_OTHER) ||
	    (named && !(seen & T_MASK)))
		return -EINVAL;
	return 0;
}

/* Whether an ACL of N entries (checked) says no more than the mode does. */
static int acl_minimal(uint32_t n) { return n == 3; }

/* The permission bits of the mode an ACL gives: owner, mask (or owning group), other. */
static uint32_t acl_mode_bits(const uint8_t *a, uint32_t n)
{
	uint32_t u = 0, g = 0, o = 0, i;
	int mask = 0;

	for (i = 0; i < n; i++) {
		switch (ent_tag(a, i)) {
		case T_USER_OBJ: u = ent_perm(a, i); break;
		case T_GROUP_OBJ: if (!mask) g = ent_perm(a, i); break;
		case T_MASK: g = ent_perm(a, i); mask = 1; break;
		case T_OTHER: o = ent_perm(a, i); break;
		}
	}
	return u << 6 | g << 3 | o;
}

/* Set the owner, mask (or owning group) and other entries of A to MODE's bits, each ANDed
 * with what it held when AND (a default ACL given to a new inode), and return the mode bits
 * the ACL then gives. */
static uint32_t acl_apply_mode(uint8_t *a, uint32_t n, uint32_t mode, int and)
{
	uint32_t i, group_obj = n, has_mask = 0;

	for (i = 0; i < n; i++) {
		uint16_t tag = ent_tag(a, i), want;

		if (tag == T_GROUP_OBJ)
			group_obj = i;
		if (tag != T_USER_OBJ && tag != T_MASK && tag != T_OTHER)
			continue;
		want = (uint16_t)(tag == T_USER_OBJ ? mode >> 6 & 7 : tag == T_MASK ? mode >> 3 & 7
											 : mode & 7);
		has_mask |= tag == T_MASK;
		ent_set_perm(a, i, and ? ent_perm(a, i) & want : want);
	}
	if (!has_mask && group_obj < n) {
		uint16_t want = (uint16_t)(mode >> 3 & 7);

		ent_set_perm(a, group_obj, and ? ent_perm(a, group_obj) & want : want);
	}
	return acl_mode_bits(a, n);
}

static void set_mode_bits(struct zlfs_fs *fs, struct node_page *np, uint32_t bits, int kill_sgid)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t mode = (le32_get(in->mode) & ~0777u) | bits;

	if (kill_sgid)
		mode &= ~(uint32_t)S_ISGID;
	in->mode = le32_put(mode);
	node_dirty(fs, np);
}

/* Store an ACL attribute: the first turns the POSIX_ACL feature on. */
static int acl_store(struct zlfs_fs *fs, struct node_page *np, const char *name, const void *v,
		     size_t size)
{
	int ret = zlfs_feature_incompat(fs, ZLFS_FEAT_INCOMPAT_POSIX_ACL);

	return ret ? ret : xattr_set(fs, np, name, v, size, 0);
}

static int acl_drop(struct zlfs_fs *fs, struct node_page *np, const char *name)
{
	int ret = xattr_remove(fs, np, name);

	return ret == -ENODATA ? 0 : ret;
}

int acl_set(struct zlfs_fs *fs, struct node_page *np, int which, const void *v, size_t size,
	    int kill_sgid)
{
	uint32_t n;
	int ret;

	if (size <= ACL_HDR) /* no entries: the kernel's "remove" */
		return acl_drop(fs, np, which == ACL_ACCESS ? ACL_ACCESS_XATTR : ACL_DEFAULT_XATTR);
	ret = acl_check(v, size);
	if (ret)
		return ret;
	if (which == ACL_DEFAULT)
		return S_ISDIR(le32_get(inode_of(np)->mode)) ? acl_store(fs, np, ACL_DEFAULT_XATTR, v, size)
							    : -EACCES;
	n = (uint32_t)(size - ACL_HDR) / ACL_ENTRY;
	ret = acl_minimal(n) ? acl_drop(fs, np, ACL_ACCESS_XATTR) : acl_store(fs, np, ACL_ACCESS_XATTR, v,
									  size);
	if (!ret) {
		set_mode_bits(fs, np, acl_mode_bits(v, n), kill_sgid);
		inode_touch(fs, np, INODE_CTIME);
	}
	return ret;
}

int acl_chmod(struct zlfs_fs *fs, struct node_page *np)
{
	uint8_t *a = malloc(ACL_MAX_BYTES);
	int n = a ? xattr_get(fs, np, ACL_ACCESS_XATTR, a, ACL_MAX_BYTES) : -ENOMEM, ret = 0;

	if (n == -ENODATA)
		n = 0;
	if (n > 0 && acl_check(a, (size_t)n)) /* the mode changes; the kernel refuses the ACL */
		zlog_warn("inode %u: its access ACL is malformed: run fsck.zlfs", np->nid);
	else if (n > 0) {
		acl_apply_mode(a, ((uint32_t)n - ACL_HDR) / ACL_ENTRY, le32_get(inode_of(np)->mode), 0);
		ret = xattr_set(fs, np, ACL_ACCESS_XATTR, a, (size_t)n, XATTR_REPLACE);
	}
	free(a);
	return n < 0 ? n : ret;
}

int acl_inherit(struct zlfs_fs *fs, struct node_page *dir, struct node_page *np, uint32_t umask)
{
	uint32_t mode = le32_get(inode_of(np)->mode), n;
	uint8_t *a;
	int len, ret = 0;

	if (S_ISLNK(mode))
		return 0;
	a = malloc(ACL_MAX_BYTES);
	len = a ? xattr_get(fs, dir, ACL_DEFAULT_XATTR, a, ACL_MAX_BYTES) : -ENOMEM;
	if (len == -ENODATA || (len >= 0 && (size_t)len <= ACL_HDR)) { /* the umask applies */
		set_mode_bits(fs, np, mode & 0777 & ~umask, 0);
		free(a);
		return 0;
	}
	if (len >= 0)
		ret = acl_check(a, (size_t)len);
	if (len >= 0 && !ret && S_ISDIR(mode))
		ret = acl_store(fs, np, ACL_DEFAULT_XATTR, a, (size_t)len);
	if (len >= 0 && !ret) {
		n = ((uint32_t)len - ACL_HDR) / ACL_ENTRY;
		set_mode_bits(fs, np, acl_apply_mode(a, n, mode, 1), 0);
		if (!acl_minimal(n))
			ret = acl_store(fs, np, ACL_ACCESS_XATTR, a, (size_t)len);
	}
	free(a);
	return len < 0 ? len : ret;
}
