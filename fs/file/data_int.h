/*
 * data_int.h - what the files of the file layer's data share (dmap.c, data.c, data_read.c): a
 * file's content key as a request holds it, the slots a node maps, and the block-level
 * reads and appends of dmap.c that data.c builds writes of any size from.
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

/* Whole blocks are written in runs of up to WRITE_RUN that share one owner node: mapped,
 * appended and re-pointed with one hold of the node and one acquisition of each lock. */
#define WRITE_RUN 64u

/* The file changed: read-ahead windows of it no longer hold. */
void data_changed(struct zlfs_fs *fs, struct node_page *inode);
/* Take a warm data lane for the file's write request (docs/design.md, "Warm data lanes"). */
void data_lane_enter(struct zlfs_fs *fs, struct node_page *inode);
/* The raw slot of block IDX: a device address, ZLFS_ADDR_PREALLOC or null (a hole). */
int data_slot_raw(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint32_t *raw);
/* File block IDX, at ADDR (ZLFS_ADDR_NULL: a hole, zeros), in plaintext. */
int data_read_addr(struct zlfs_fs *fs, const struct dkey *dk, uint64_t idx, uint32_t addr,
		   uint8_t *buf);
/* File block IDX in plaintext (zeros for a hole). */
int data_read_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		    uint64_t idx, uint8_t *buf);
/* Append plaintext block BUF as file block IDX; BUF is scratch (encrypted in place). */
int data_write_block(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		     uint64_t idx, uint8_t *buf);
/* Write up to N whole blocks of SRC as file blocks IDX... (encrypted into SCRATCH, WRITE_RUN
 * blocks, for an encrypted file): how many were written, or a negative errno when none was. */
int data_write_run(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		   uint64_t idx, uint32_t n, const uint8_t *src, uint8_t *scratch);

#endif
