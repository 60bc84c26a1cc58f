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
	return ref->end - ref->slot;
}

/* Whole blocks are written in runs of up to WRITE_RUN that share one owner node: mapped,
 * appended and re-pointed with one hold of the node and one acquisition of each lock. */
#define WRITE_RUN 64u

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
/* One cluster of a run data_put_clusters stores: COMPRESSED, its K stored blocks (the
 * marker in the cluster's first slot); else raw, block i in slot i but those whose bit is set
 * in HOLES, left holes (all zeros), K the blocks it stores. */
struct dclu_put {
	uint32_t k;
	uint32_t compressed;
	uint64_t holes;
};
/* Store the N clusters of CL from cluster CIDX of a compressed file on, their stored blocks
 * packed one cluster after another in BUF (ciphertext for an encrypted file): as many as lie
 * in the node that maps CIDX (WRITE_RUN slots at most), appended in one run and re-pointed in
 * one node update; their old blocks and reservations go. How many clusters were stored, or a
 * negative errno when none was (then none is). OWED: a cluster held in memory, whose room was
 * set aside: should a race have taken it, the hot data log, which may use the GC reserve,
 * takes the cluster (as data_write_held). */
int data_put_clusters(struct zlfs_fs *fs, struct node_page *inode, uint64_t cidx,
		      const uint8_t *buf, const struct dclu_put *cl, uint32_t n, int owed);

/* ---- dcluster.c: compressed files (ZLFS_IFLAG_COMPRESS) --------------------------------- */
/* Cluster FIRST >> LOG of inode INO, stored compressed: ADDR its 2^LOG slots (the marker,
 * then the k blocks), decrypted with KEY if set, decompressed into DST (2^LOG blocks). -EIO,
 * logged, for a cluster that does not verify. */
int dclu_unpack(struct zlfs_fs *fs, uint32_t ino, uint32_t log,
		const struct zcrypt_file_key *key, uint64_t first, const uint32_t *addr,
		uint8_t *dst);
/* The k stored blocks of that cluster (ADDR its slots, the marker first), or -EIO, logged,
 * when its slots are not a marker, k blocks and nulls. */
int dclu_stored(uint32_t ino, uint64_t first, uint32_t log, const uint32_t *addr);
/* Its K stored blocks already read into STORED (decrypted there in place with KEY if set),
 * decompressed into DST; -EIO, logged, when it does not verify. */
int dclu_decode(struct zlfs_fs *fs, uint32_t ino, uint32_t log,
		const struct zcrypt_file_key *key, uint64_t first, uint32_t k, uint8_t *stored,
		uint8_t *dst);
/* Cluster CIDX in plaintext into PLAIN (2^n blocks; NULL: not read): how many device blocks
 * it holds (the k of a compressed one, a raw one's blocks; 0: none), or a negative errno. */
int dclu_read(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
	      uint64_t cidx, uint8_t *plain);
/* Whether cluster CIDX is stored compressed. */
int dclu_is_compressed(struct zlfs_fs *fs, struct node_page *inode, uint64_t cidx, int *yes);
/* Write bytes [OFF, END) of a compressed file from SRC, cluster by cluster; *POS says how far
 * it got, also when it fails. */
int dclu_write(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
	       const uint8_t *src, uint64_t off, uint64_t end, uint64_t *pos);
/* A punch of [*OFF, *END) in a file of size FSIZE: a compressed cluster it covers in part is
 * rewritten with the range zeroed, and the range shrinks to leave it out; what is left is
 * raw clusters' blocks and whole clusters, data.c's to punch as in any file. */
int dclu_punch_ends(struct zlfs_fs *fs, struct node_page *inode, uint64_t *off, uint64_t *end,
		    uint64_t fsize);
/* A truncate from size OLD to SIZE: the first block to drop into *FROM, past a compressed
 * cluster the new end lies in, which is rewritten zeroed past it. 1 when it was (no block to
 * zero is left), 0 when the new end lies in a raw cluster, or a negative errno. */
int dclu_cut(struct zlfs_fs *fs, struct node_page *inode, uint64_t size, uint64_t old,
	     uint64_t *from);

#endif
