/*
 * xattr_node.c - where a file's extended attributes are stored: its xattr nodes.
 *
 * Owns: the chain of xattr nodes hanging off an inode's xattr_nid, the packed entries in
 * them (u8 name index, u8 name length, le16 value size, name, value, 4-byte aligned), the
 * value nodes of a value too big for an entry (XATTR_NODES feature), and freeing all of it.
 * On a filesystem without the feature there is one node of the older layout and no more:
 * what does not fit it is refused as before (ENOSPC, E2BIG).
 * May call: node.c (through core.h), log.h. Called by xattr.c (names and the VFS's rules)
 * and inode.c (a file's last release).
 *
 * The chain's nodes are numbered by place (ofs 0, 1, ...), so following it is checked like
 * a data tree: each node read must be an xattr node of this inode at the next place, and a
 * cycle or a foreign node is damage, never followed. An entry lives in the first node with
 * room; a node left empty takes the chain's last node's entries and the last node is freed,
 * so the places stay 0..n-1 and a removal dirties at most three nodes. A value node chain is
 * written whole before its entry points to it and freed after the entry stops pointing to
 * it, all within one change under cp_lock, so a checkpoint sees either value, never a mix.
 */
#include "files.h"
#include "xattr_int.h"
#include "log.h"

#include <errno.h>
#include <string.h>

static int chained(const struct zlfs_fs *fs)
{
	return !!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_XATTR_NODES);
}

uint32_t xent_size(uint32_t nlen, uint32_t vlen) { return (XHDR + nlen + vlen + 3) & ~3u; }

uint32_t xent_vlen(const uint8_t *e) { return (uint32_t)(e[2] | e[3] << 8); }

void xent_ext(const uint8_t *e, uint32_t *nid, uint32_t *size)
{
	le32 raw[2];

	memcpy(raw, e + XHDR + e[1], sizeof(raw));
	*nid = le32_get(raw[0]);
	*size = le32_get(raw[1]);
}

uint32_t xnode_space(const struct zlfs_fs *fs)
{
	return chained(fs) ? ZLFS_XATTR_NODE_SPACE
			   : (uint32_t)sizeof(((struct zlfs_xattr_block *)0)->data);
}

/* Fill X's view of the page NP (held by the caller). */
static void xview(struct zlfs_fs *fs, struct node_page *np, struct xnode *x)
{
	x->np = np;
	x->nid = np->nid;
	x->space = xnode_space(fs);
	if (chained(fs)) {
		struct zlfs_xattr_node *n = np->buf;

		x->data = n->data;
		x->used = &n->used;
		x->next = le32_get(n->next);
	} else {
		struct zlfs_xattr_block *b = np->buf;

		x->data = b->data;
		x->used = &b->used;
		x->next = 0;
	}
}

/* Bytes in use, up to the last whole entry: a damaged count or entry never leads a reader
 * past the block (the node check refuses such a block; fsck.zlfs reports it). */
uint32_t xused(const struct xnode *x)
{
	uint32_t used = le32_get(*x->used), off = 0;

	if (used > x->space)
		used = x->space;
	while (off + XHDR <= used) {
		uint32_t sz = xent_size(x->data[off + 1], xent_vlen(x->data + off));

		if (off + sz > used)
			break;
		off += sz;
	}
	return off;
}

int xnode_find(const struct xnode *x, uint8_t index, const char *suffix)
{
	uint32_t used = xused(x), off = 0;
	size_t sl = strlen(suffix);

	while (off + XHDR <= used) {
		const uint8_t *e = x->data + off;

		if ((e[0] & ~ZLFS_XATTR_EXTERNAL) == index && e[1] == sl &&
		    !memcmp(e + XHDR, suffix, sl))
			return (int)off;
		off += xent_size(e[1], xent_vlen(e));
	}
	return -1;
}

int xchain_get(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid, uint32_t pos,
	       struct xnode *x)
{
	struct node_page *np;
	int ret = node_get_as(fs, nid, inode->nid, ZLFS_KIND_XATTR,
			      chained(fs) ? pos : NODE_OFS_ANY, &np);

	if (ret)
		return ret;
	xview(fs, np, x);
	x->pos = pos;
	return 0;
}

int xchain_next(struct zlfs_fs *fs, struct node_page *inode, struct xnode *x)
{
	uint32_t next = x->next, pos = x->pos + 1;

	node_put(fs, x->np);
	x->np = NULL;
	if (!next)
		return 0;
	return xchain_get(fs, inode, next, pos, x);
}

int xchain_lookup(struct zlfs_fs *fs, struct node_page *inode, uint8_t index,
		  const char *suffix, struct xnode *x)
{
	uint32_t nid = le32_get(inode_of(inode)->xattr_nid);
	int ret;

	if (!nid)
		return -ENODATA;
	for (ret = xchain_get(fs, inode, nid, 0, x); !ret && x->np;
	     ret = xchain_next(fs, inode, x)) {
		x->off = xnode_find(x, index, suffix);
		if (x->off >= 0)
			return 0;
	}
	return ret ? ret : -ENODATA;
}

/* The node at place POS of INODE's chain, held in X. */
static int xchain_at(struct zlfs_fs *fs, struct node_page *inode, uint32_t pos, struct xnode *x)
{
	int ret = xchain_get(fs, inode, le32_get(inode_of(inode)->xattr_nid), 0, x);

	while (!ret && x->pos < pos) {
		if (!x->next) {
			node_put(fs, x->np);
			return -EUCLEAN;
		}
		ret = xchain_next(fs, inode, x);
	}
	return ret;
}

/* ---- value nodes ------------------------------------------------------------------------- */

int xvalue_read(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid, uint32_t size,
		void *buf)
{
	uint32_t pos = 0, done = 0;

	while (nid && done < size) {
		struct zlfs_xattr_node *n;
		struct node_page *np;
		uint32_t used;
		int ret = node_get_as(fs, nid, inode->nid, ZLFS_KIND_XVALUE, pos, &np);

		if (ret)
			return ret;
		n = np->buf;
		used = le32_get(n->used);
		if (used > size - done) /* the node check bounds used by the node's space */
			used = size - done;
		memcpy((uint8_t *)buf + done, n->data, used);
		done += used;
		nid = le32_get(n->next);
		node_put(fs, np);
		pos++;
	}
	if (done != size || nid) {
		zlog_err("inode %u: an xattr value of %u bytes has %u in its value nodes%s: run "
			 "fsck.zlfs", inode->nid, size, done, nid ? " and more nodes" : "");
		return -EUCLEAN;
	}
	return 0;
}

void xvalue_free(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid)
{
	uint32_t pos = 0;

	while (nid) {
		struct node_page *np;
		uint32_t next;
		int ret = node_get_as(fs, nid, inode->nid, ZLFS_KIND_XVALUE, pos++, &np);

		if (ret) { /* damage, logged: what follows is fsck's to free as unreachable */
			zlog_warn("inode %u: xattr value node %u not freed (%s)", inode->nid, nid,
				  strerror(-ret));
			return;
		}
		next = le32_get(((struct zlfs_xattr_node *)np->buf)->next);
		node_put(fs, np);
		node_free(fs, nid);
		nid = next;
	}
}

int xvalue_write(struct zlfs_fs *fs, struct node_page *inode, const void *val, uint32_t size,
		 uint32_t *first)
{
	struct node_page *np[ZLFS_XVALUE_NODES_MAX];
	uint32_t nids[ZLFS_XVALUE_NODES_MAX], n, i, k;
	int ret = 0;

	n = (size + ZLFS_XATTR_NODE_SPACE - 1) / ZLFS_XATTR_NODE_SPACE;
	if (!n || n > ZLFS_XVALUE_NODES_MAX)
		return -E2BIG;
	for (i = 0; i < n && !ret; i++) {
		ret = node_alloc_nid(fs, inode->nid, &nids[i]);
		if (!ret && (ret = node_new(fs, nids[i], inode->nid, ZLFS_KIND_XVALUE, &np[i])))
			node_free(fs, nids[i]);
	}
	if (ret) { /* nodes 0..i-2 were made: none is reachable yet */
		for (k = 0; k + 1 < i; k++) {
			node_put(fs, np[k]);
			node_free(fs, nids[k]);
		}
		return ret;
	}
	for (i = 0; i < n; i++) {
		struct zlfs_xattr_node *x = np[i]->buf;
		uint32_t part = size - i * ZLFS_XATTR_NODE_SPACE;

		if (part > ZLFS_XATTR_NODE_SPACE)
			part = ZLFS_XATTR_NODE_SPACE;
		x->ofs = le32_put(i);
		x->used = le32_put(part);
		x->next = le32_put(i + 1 < n ? nids[i + 1] : 0);
		memcpy(x->data, (const uint8_t *)val + i * ZLFS_XATTR_NODE_SPACE, part);
		node_dirty(fs, np[i]);
		node_put(fs, np[i]);
	}
	*first = nids[0];
	return 0;
}

/* ---- entries in the chain ---------------------------------------------------------------- */

void xnode_append(struct zlfs_fs *fs, struct xnode *x, const uint8_t *e, uint32_t size)
{
	uint32_t used = xused(x);

	memcpy(x->data + used, e, size);
	*x->used = le32_put(used + size);
	node_dirty(fs, x->np);
}

/* A new node at place POS of the chain, linked after LAST (held; NULL: the inode's first). */
static int xchain_grow(struct zlfs_fs *fs, struct node_page *inode, struct xnode *last,
		       uint32_t pos, struct xnode *x)
{
	struct node_page *np;
	uint32_t nid;
	int ret;

	if (pos >= (chained(fs) ? ZLFS_XATTR_NODES_MAX : 1))
		return -ENOSPC;
	ret = node_alloc_nid(fs, inode->nid, &nid);
	if (ret)
		return ret;
	ret = node_new(fs, nid, inode->nid, ZLFS_KIND_XATTR, &np);
	if (ret) {
		node_free(fs, nid);
		return ret;
	}
	xview(fs, np, x);
	x->pos = pos;
	if (chained(fs))
		((struct zlfs_xattr_node *)np->buf)->ofs = le32_put(pos);
	if (last) {
		((struct zlfs_xattr_node *)last->np->buf)->next = le32_put(nid);
		last->next = nid;
		node_dirty(fs, last->np);
	} else {
		inode_of(inode)->xattr_nid = le32_put(nid);
		node_dirty(fs, inode);
	}
	return 0;
}

int xchain_insert(struct zlfs_fs *fs, struct node_page *inode, const uint8_t *e, uint32_t size)
{
	uint32_t nid = le32_get(inode_of(inode)->xattr_nid);
	struct xnode x, fresh;
	int ret;

	if (!nid) {
		ret = xchain_grow(fs, inode, NULL, 0, &fresh);
	} else {
		ret = xchain_get(fs, inode, nid, 0, &x);
		while (!ret) {
			if (xused(&x) + size <= x.space) {
				xnode_append(fs, &x, e, size);
				node_put(fs, x.np);
				return 0;
			}
			if (!x.next)
				break;
			ret = xchain_next(fs, inode, &x);
		}
		if (ret)
			return ret;
		ret = xchain_grow(fs, inode, &x, x.pos + 1, &fresh);
		node_put(fs, x.np);
	}
	if (ret)
		return ret;
	xnode_append(fs, &fresh, e, size);
	node_put(fs, fresh.np);
	return 0;
}

void xnode_drop_entry(struct xnode *x)
{
	uint8_t *e = x->data + x->off;
	uint32_t used = xused(x), sz = xent_size(e[1], xent_vlen(e));

	memmove(e, e + sz, used - (uint32_t)x->off - sz);
	memset(x->data + used - sz, 0, sz);
	*x->used = le32_put(used - sz);
}

/* X's node (held, put here) is empty: it leaves the chain. The chain's last node moves its
 * entries into it and is freed, or X is the last and is freed itself. */
static int xchain_unlink_empty(struct zlfs_fs *fs, struct node_page *inode, struct xnode *x)
{
	struct xnode last, prev;
	uint32_t gone;
	int ret;

	if (!x->next) { /* the last: its predecessor (or the inode) ends the chain */
		gone = x->nid;
		node_put(fs, x->np);
		if (!x->pos) {
			inode_of(inode)->xattr_nid = 0;
			node_dirty(fs, inode);
		} else {
			ret = xchain_at(fs, inode, x->pos - 1, &prev);
			if (ret)
				return ret;
			((struct zlfs_xattr_node *)prev.np->buf)->next = 0;
			node_dirty(fs, prev.np);
			node_put(fs, prev.np);
		}
		node_free(fs, gone);
		return 0;
	}
	ret = xchain_get(fs, inode, x->next, x->pos + 1, &last);
	prev = *x;
	node_ref(fs, prev.np);
	while (!ret && last.next) {
		node_put(fs, prev.np);
		prev = last;
		node_ref(fs, prev.np);
		ret = xchain_next(fs, inode, &last);
	}
	if (!ret) {
		memcpy(x->data, last.data, xused(&last));
		*x->used = le32_put(xused(&last));
		node_dirty(fs, x->np);
		((struct zlfs_xattr_node *)prev.np->buf)->next = 0;
		node_dirty(fs, prev.np);
		gone = last.nid;
		node_put(fs, last.np);
		node_free(fs, gone);
	}
	node_put(fs, prev.np);
	node_put(fs, x->np);
	return ret;
}

int xchain_remove(struct zlfs_fs *fs, struct node_page *inode, struct xnode *x)
{
	uint8_t *e = x->data + x->off;
	uint32_t used = xused(x), sz = xent_size(e[1], xent_vlen(e)), vnid = 0, vsize;

	if (chained(fs) && (e[0] & ZLFS_XATTR_EXTERNAL))
		xent_ext(e, &vnid, &vsize);
	if (chained(fs)) /* an insertion since X was read may have linked a node after it */
		x->next = le32_get(((struct zlfs_xattr_node *)x->np->buf)->next);
	xnode_drop_entry(x);
	node_dirty(fs, x->np);
	if (vnid)
		xvalue_free(fs, inode, vnid);
	if (used - sz || !chained(fs)) { /* an emptied node of the older layout stays */
		node_put(fs, x->np);
		return 0;
	}
	return xchain_unlink_empty(fs, inode, x);
}

void xattr_free_all(struct zlfs_fs *fs, struct node_page *inode)
{
	uint32_t nid = le32_get(inode_of(inode)->xattr_nid), off, used, gone;
	struct xnode x;
	int ret;

	if (!nid)
		return;
	if (!chained(fs)) { /* one node, no value nodes */
		node_free(fs, nid);
		return;
	}
	for (ret = xchain_get(fs, inode, nid, 0, &x); !ret && x.np;) {
		used = xused(&x);
		for (off = 0; off + XHDR <= used; off += xent_size(x.data[off + 1],
								    xent_vlen(x.data + off))) {
			uint32_t vnid, vsize;

			if (x.data[off] & ZLFS_XATTR_EXTERNAL) {
				xent_ext(x.data + off, &vnid, &vsize);
				xvalue_free(fs, inode, vnid);
			}
		}
		gone = x.nid;
		ret = xchain_next(fs, inode, &x);
		node_free(fs, gone);
	}
	if (ret) /* damage, logged: the rest is fsck's to free as unreachable */
		zlog_warn("inode %u: xattr nodes past a damaged one not freed (%s)", inode->nid,
			  strerror(-ret));
}

int xattr_node_cut(struct zlfs_fs *fs, struct node_page *np, uint32_t slot, uint32_t *old)
{
	struct zlfs_xattr_node *n = np->buf;
	uint32_t vsize, off;
	struct xnode x;

	if (!chained(fs))
		return -EINVAL;
	xview(fs, np, &x);
	if (slot == UINT32_MAX) {
		*old = le32_get(n->next);
		n->next = 0;
		node_dirty(fs, np);
		return 0;
	}
	for (off = 0; off + XHDR <= xused(&x) && off < slot;
	     off += xent_size(x.data[off + 1], xent_vlen(x.data + off)))
		;
	if (off != slot || off + XHDR > xused(&x) || !(x.data[off] & ZLFS_XATTR_EXTERNAL))
		return -EINVAL;
	xent_ext(x.data + off, old, &vsize);
	x.off = (int)off;
	xnode_drop_entry(&x);
	node_dirty(fs, np);
	return 0;
}
