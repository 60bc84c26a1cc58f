/*
 * xattr_int.h - what xattr.c (names, the VFS's rules) and xattr_node.c (the nodes that store
 * them) share: a held xattr node of a file's chain and the operations on the chain.
 */
#ifndef ZLFS_XATTR_INT_H
#define ZLFS_XATTR_INT_H

#include "files.h"

#define XHDR 4 /* an entry's u8 index, u8 name length, le16 value size */

/* One xattr node of a chain, held: its page, entry area and place. */
struct xnode {
	struct node_page *np; /* NULL past the chain's end */
	uint8_t *data;
	le32 *used;
	uint32_t space;       /* bytes of the entry area */
	uint32_t nid, next;   /* next: 0 at the end (always, without XATTR_NODES) */
	uint32_t pos;         /* place in the chain */
	int off;              /* xchain_lookup: the entry's offset */
};

uint32_t xent_size(uint32_t nlen, uint32_t vlen);
uint32_t xent_vlen(const uint8_t *e);
/* An external entry's value nodes and value size. */
void xent_ext(const uint8_t *e, uint32_t *nid, uint32_t *size);
/* Bytes of an xattr node's entry area on this filesystem. */
uint32_t xnode_space(const struct zlfs_fs *fs);
/* Bytes of X in use, up to its last whole entry. */
uint32_t xused(const struct xnode *x);
/* Offset of the entry (INDEX, SUFFIX) in X, or -1. */
int xnode_find(const struct xnode *x, uint8_t index, const char *suffix);

/* Take the entry at X->off out of X's entry area (the caller dirties the page). */
void xnode_drop_entry(struct xnode *x);
/* Append the laid-out entry E of SIZE bytes to X's node, which has room, and dirty it. */
void xnode_append(struct zlfs_fs *fs, struct xnode *x, const uint8_t *e, uint32_t size);

/* The chain node NID at place POS of INODE's chain, held in X. */
int xchain_get(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid, uint32_t pos,
	       struct xnode *x);
/* Put X's node and hold the next one (X->np NULL at the end). */
int xchain_next(struct zlfs_fs *fs, struct node_page *inode, struct xnode *x);
/* The node holding (INDEX, SUFFIX), held in X with X->off, or -ENODATA (nothing held). */
int xchain_lookup(struct zlfs_fs *fs, struct node_page *inode, uint8_t index,
		  const char *suffix, struct xnode *x);
/* Put the laid-out entry E of SIZE bytes in the first node with room, or a new last node:
 * -ENOSPC past the chain's longest (one node without XATTR_NODES). */
int xchain_insert(struct zlfs_fs *fs, struct node_page *inode, const uint8_t *e, uint32_t size);
/* Remove the entry at X->off of X (held; put here), its value nodes, and X's node from the
 * chain if it is left empty. */
int xchain_remove(struct zlfs_fs *fs, struct node_page *inode, struct xnode *x);

/* SIZE bytes of value nodes starting at NID into BUF. */
int xvalue_read(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid, uint32_t size,
		void *buf);
/* New value nodes holding VAL, the first's nid in *FIRST; nothing allocated on failure. */
int xvalue_write(struct zlfs_fs *fs, struct node_page *inode, const void *val, uint32_t size,
		 uint32_t *first);
void xvalue_free(struct zlfs_fs *fs, struct node_page *inode, uint32_t nid);

#endif
