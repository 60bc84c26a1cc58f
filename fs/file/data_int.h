/*
 * data_int.h - what the files of the file layer's data share (data.c, data_read.c): a file's
 * content key as a request holds it, and the slots a node maps.
 */
#ifndef ZLFS_DATA_INT_H
#define ZLFS_DATA_INT_H

#include "files.h"
#include "zcrypt.h"

/* The content key of a file, taken once per request rather than once per block. */
struct dkey {
	int on;
	struct zcrypt_file_key k;
};

/* The key of an encrypted regular file or symlink (DK->on), else nothing to do. */
int dkey_get(struct zlfs_fs *fs, struct node_page *inode, struct dkey *dk);
void dkey_put(struct dkey *dk);

/* Pointer slots left in REF's node from REF's slot on. */
static inline uint32_t slots_left(const struct dref *ref)
{
	const struct zlfs_blkhdr *h = ref->np->buf;

	return (le16_get(h->kind) == ZLFS_KIND_INODE ? ZLFS_INODE_ADDRS : ZLFS_NODE_ADDRS) -
	       ref->slot;
}

#endif
