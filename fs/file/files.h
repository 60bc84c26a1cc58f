/*
 * files.h - the file layer: inodes, file data, directories and xattrs on top of node/log.
 *
 * Owns: inode fields and times (inode.c), mapping file blocks to device blocks through the
 * node tree (data.c), hashed directories with stable readdir offsets and their block cache
 * (dir.c), extended attributes (xattr.c), per-file encryption policy, keys and names
 * (fcrypt.c).
 * May call: core.h (node/log layer), format.h, log.h. Called by the FUSE operations.
 *
 * Locks (core.h): a function that reads an inode expects its lock held shared, one that
 * changes it expects it exclusive and cp_lock shared; a directory's entries are under the
 * directory's lock. -EAGAIN from a change means only nids freed since the last checkpoint
 * are left: the caller drops its locks, checkpoints (files_sync) and tries once more.
 * Errors are negative errno values.
 */
#ifndef ZLFS_FILES_H
#define ZLFS_FILES_H

#include "core.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ---- inode.c ---------------------------------------------------------------------------- */
#define INODE_ATIME 1
#define INODE_MTIME 2
#define INODE_CTIME 4

static inline struct zlfs_inode *inode_of(struct node_page *np) { return np->buf; }

/* Get the inode page of INO (checked to be an inode). */
int inode_get(struct zlfs_fs *fs, uint32_t ino, struct node_page **np);
/* Create an inode of MODE owned by UID/GID under directory PARENT. */
int inode_new(struct zlfs_fs *fs, uint32_t mode, uint32_t uid, uint32_t gid, uint32_t rdev,
	      uint32_t parent, struct node_page **np);
void inode_fill_stat(const struct zlfs_fs *fs, struct node_page *np, struct stat *st);
/* Attributes of INO from the attribute cache, reading the inode only on a miss (then under
 * its lock, shared: the caller must not hold it). */
int inode_stat(struct zlfs_fs *fs, uint32_t ino, struct stat *st, uint32_t *generation);
void inode_touch(struct zlfs_fs *fs, struct node_page *np, int which);
/* chattr +i and +a (ZLFS_IFLAG_IMMUTABLE, _APPEND): -EPERM where they forbid a change, 0
 * elsewhere. The kernel enforces them only for its own filesystems, so every request that
 * changes a file, its attributes or a directory's names asks first, as the VFS would:
 * inode_frozen for what +i alone forbids (writing data, adding a name to a directory),
 * inode_pinned for what +a forbids too (removing or moving a name, a link to the file,
 * attributes, xattrs, truncation). */
static inline int inode_frozen(struct node_page *np)
{
	return le32_get(inode_of(np)->flags) & ZLFS_IFLAG_IMMUTABLE ? -EPERM : 0;
}
static inline int inode_pinned(struct node_page *np)
{
	return le32_get(inode_of(np)->flags) & (ZLFS_IFLAG_IMMUTABLE | ZLFS_IFLAG_APPEND) ? -EPERM
											   : 0;
}
/* Set NP's chattr flags to FLAGS (ZLFS_IFLAG_ATTR bits; the others are left), turning the
 * ATTR_FLAGS feature on the first time one is set. */
int inode_set_attr_flags(struct zlfs_fs *fs, struct node_page *np, uint32_t flags);
/* Release everything INO owns: data, nodes, xattrs, the inode itself. */
int inode_free(struct zlfs_fs *fs, uint32_t ino);
uint64_t inode_now_ns(void);

struct zcrypt_file_key;

/* ---- data.c ----------------------------------------------------------------------------- */
/* Where a block's pointer lives: the page holding it and the slot. */
struct dref {
	struct node_page *np;
	uint32_t slot;
	uint32_t end;   /* slots of NP that map the file: fewer in a compressed file (format.h) */
};
/* Find (or make, with CREATE) the pointer to file block IDX: -ENOENT when a node on the way
 * is missing (and not CREATE). REF->np is held: node_put it. */
int data_ref(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, int create,
	     struct dref *ref);
/* The pointer at SLOT of node or inode NP (a data address, or a child nid). */
le32 *node_slot(struct node_page *np, uint32_t slot);
/* The file's data changed: read-ahead windows of it no longer hold. Whoever changes a
 * pointer through node_slot calls it. */
void data_changed(struct zlfs_fs *fs, struct node_page *inode);
/* The node offset ("ofs", format.h) of child I of the node at offset OFS; of an inode (OFS 0),
 * I counts its five node ids. */
uint32_t data_child_ofs(uint32_t ofs, uint32_t i);
/* Block address of file block IDX (ZLFS_ADDR_NULL for a hole, reserved ones included). */
int data_addr(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, uint32_t *addr);
/* Append BUF as file block IDX to log TYPE and point the file at it. */
int data_put_block(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx, const void *buf,
		   enum zlfs_log_type type);
int data_read(struct zlfs_fs *fs, struct node_page *inode, void *buf, size_t size, uint64_t off);
/* Blocks read ahead, past a request (readahead.c hands them out; data.c reads them). */
struct ra_ahead {
	uint64_t first;   /* file block */
	uint32_t n;       /* 0: none */
	uint8_t *buf;     /* where they go: n blocks of the window's, read into outside its lock */
	uint32_t epoch;   /* of the window's stream: kept only if no other stream began since */
};
/* A read in two halves: plan (map the blocks, take the key), do (device I/O and decryption),
 * then free; the file's lock is held shared throughout, so the blocks mapped stay valid and
 * their zones cannot be reset. The bytes are at buf + skip, len of them (0 at or past the
 * end of file). A plan may come with blocks to read ahead (AHEAD.n > 0): the caller reads
 * them with data_read_ahead once it has replied, under the file's lock taken again. */
struct data_rplan {
	uint32_t nblocks;
	int from_ra;                     /* served by read-ahead: nothing to read */
	uint32_t ino;
	uint32_t *addr;   /* per block; ZLFS_ADDR_NULL for a hole */
	uint8_t *buf;     /* nblocks aligned blocks */
	size_t skip, len;
	uint64_t first;                /* file block of buf[0] */
	uint32_t clog;                 /* compressed file: log2 of its clusters' blocks, else 0 */
	struct zcrypt_file_key *key;   /* encrypted file: decrypt after reading (wiped on free) */
	struct ra_ahead ahead;
};
int data_read_plan(struct zlfs_fs *fs, struct node_page *inode, size_t size, uint64_t off,
		   struct data_rplan *p);
int data_read_do(struct zlfs_fs *fs, struct data_rplan *p);
void data_read_free(struct data_rplan *p);
/* Read A's blocks (up to the end of file) into its window and keep them there, or give the
 * extension up on any error; either way A is over (A->n = 0) and its waiters wake. */
void data_read_ahead(struct zlfs_fs *fs, struct node_page *inode, struct ra_ahead *a);
int data_write(struct zlfs_fs *fs, struct node_page *inode, const void *buf, size_t size,
	       uint64_t off);
/* Inode INO was closed: the warm data lane it wrote to is free for other files. */
void data_lane_release(struct zlfs_fs *fs, uint32_t ino);
/* A new inode NP named NAME in DIR, empty: a regular file flagged ZLFS_IFLAG_COMPRESS when the
 * mount compresses, DIR has the flag or NAME is in compress_extension=, unless NAME is in
 * nocompress_extension=; a directory flagged when DIR is (dcluster.c). */
void dclu_start(struct zlfs_fs *fs, struct node_page *dir, struct node_page *np,
		const char *name);
/* chattr +c / -c: a regular file compressed (ON) or not, from its next byte, only while it is
 * empty (-EINVAL otherwise, as F2FS); a directory's flag, which its new files and directories
 * inherit, at any time. -EOPNOTSUPP for +c without the COMPRESS feature or on another type. */
int dclu_set(struct zlfs_fs *fs, struct node_page *np, int on);
/* Whether NP has the COMPRESS flag (a file: compressed; a directory: passes it on). */
int dclu_flagged(const struct node_page *np);
/* fsck: the compressed cluster of file blocks FIRST... of INODE, at slots ADDR (the marker and
 * its k blocks), decrypts (with the key) and decompresses to what its header's hash says. */
int data_cluster_check(struct zlfs_fs *fs, struct node_page *inode, uint64_t first,
		       const uint32_t *addr);
/* The blocks INODE's pointers hold, as its count `blocks` keeps them (each block and each
 * reservation; no compressed cluster's marker), read from its tree into *N: fsck's repair of
 * a count, and the daemon's when dropping found the count short. */
int data_count_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t *n);
/* Drop file blocks [FROM, TO) (and the nodes that only mapped those). The pointers decide
 * what goes, not the inode's count of blocks. */
int data_drop_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from, uint64_t to);
/* The most blocks a file's tree addresses. */
uint64_t data_max_blocks(void);
/* log2 of the blocks of a cluster of a compressed file, 0 for any other file. */
uint32_t data_cluster_log(const struct node_page *inode);
/* The first file block that slot 0 of the direct node at node offset OFS maps, in a file of
 * clusters of 2^LOG blocks (0: not compressed); UINT64_MAX if OFS is no direct node's. */
uint64_t data_dnode_base(uint32_t ofs, uint32_t log);
/* Drop file blocks from block FROM on (and the nodes that only mapped those). */
int data_truncate_blocks(struct zlfs_fs *fs, struct node_page *inode, uint64_t from);
/* Set the size; a size not above the old one frees the blocks past it (reservations too), and
 * shrinking zeroes the tail of the last block. */
int data_set_size(struct zlfs_fs *fs, struct node_page *inode, uint64_t size);
/* Free the blocks wholly inside [off, off+len), past the end of file too, and zero the partial
 * ends that lie inside the file. */
int data_punch(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len);

/* Write plaintext block PLAIN as file block IDX (encrypted on the way for an encrypted file):
 * a partial block held in memory (tailbuf.c), whose room was owed while it was held. */
int data_write_held(struct zlfs_fs *fs, struct node_page *inode, uint64_t idx,
		    const uint8_t *plain);
/* Store the cluster of a compressed file whose first block is FIRST from its plaintext PLAIN
 * (2^n blocks, left as it is), compressed when that saves a block, else raw (dcluster.c): a
 * cluster held in memory (tailbuf.c), whose room was owed while it was held. Raw on the device
 * and still raw, only its blocks whose bit is set in DIRTY (changed in memory) are written. */
int dclu_write_held(struct zlfs_fs *fs, struct node_page *inode, uint64_t first,
		    const uint8_t *plain, uint64_t dirty);

/* ---- tailbuf.c ---------------------------------------------------------------------------
 * Partial blocks in memory (docs/design.md): the block a write to a regular file ended inside
 * (at its end of file or within it), or for a compressed file the cluster a write at its end
 * of file ended inside, may be kept in memory, one span per file, until the file's writes
 * fill it or go past it, the file is fsync'ed or released, a checkpoint or unmount, or it has
 * been held for the daemon's age limit. Its bytes belong to the file's inode lock. */
/* Hold up to MAX_BLOCKS blocks (0: none; without a call nothing is held). */
int tail_init(struct zlfs_fs *fs, uint32_t max_blocks);
/* Drop whatever is still held (unmount, after tail_flush_all). */
void tail_destroy(struct zlfs_fs *fs);
/* The bytes of INO's held span, its first file block in *IDX and its blocks in *N (if N: 1,
 * or a compressed file's cluster), or NULL (INO locked, shared). */
uint8_t *tail_block(struct zlfs_fs *fs, uint32_t ino, uint64_t *idx, uint32_t *n);
/* A new held span of INO (none held yet), NBLK blocks from file block IDX (1, or a compressed
 * file's cluster; FRESH: the file has no block there): its bytes, for the caller to fill, or
 * NULL when the bound or the free space says to write through. */
uint8_t *tail_hold(struct zlfs_fs *fs, uint32_t ino, uint64_t idx, uint32_t nblk, int fresh);
/* File blocks [FROM, TO) of INO's held span were changed (INO locked exclusively): a cluster
 * that does not compress writes those alone (dclu_write_held). */
void tail_touch(struct zlfs_fs *fs, uint32_t ino, uint64_t from, uint64_t to);
/* Forget INO's held block (its bytes are no longer the file's). */
void tail_drop(struct zlfs_fs *fs, uint32_t ino);
/* Write INODE's held block out, if it has one, and let it go (INODE locked exclusively,
 * cp_lock shared). */
int tail_write(struct zlfs_fs *fs, struct node_page *inode);
/* As tail_write, but the block stays as a clean copy (fsync): a later write into it needs no
 * device read. tail_block finds it; tail_redirty holds it again before a write changes it. */
int tail_sync(struct zlfs_fs *fs, struct node_page *inode);
/* Before a write into INO's held block: 0, or -ENOSPC when a clean copy could not be held
 * again for want of room (it is let go). */
int tail_redirty(struct zlfs_fs *fs, uint32_t ino);
/* Let INO's clean copy go, if it has one (a change made on the device, not through it). */
void tail_forget_clean(struct zlfs_fs *fs, uint32_t ino);
/* Whether INO has a block held; needs no lock (a hint for a caller that takes INO's next). */
int tail_held(struct zlfs_fs *fs, uint32_t ino);
/* 1 when INO's held block will add a block to the file when written (st_blocks counts it). */
uint32_t tail_pending_blocks(struct zlfs_fs *fs, uint32_t ino);
/* Write every held block: before a checkpoint, under cp_lock exclusive. */
int tail_flush_all(struct zlfs_fs *fs);
/* Write the blocks held for AGE_NS or longer (the caller holds no lock). */
void tail_flush_aged(struct zlfs_fs *fs, uint64_t age_ns);
/* ---- inline.c --------------------------------------------------------------------------- */
/* A regular file whose bytes live in its inode (INLINE_DATA feature). Inline here, since the
 * block map (dmap.c), below inline.c, refuses to map such a file. */
static inline int inline_is(struct node_page *np)
{
	const struct zlfs_inode *in = inode_of(np);

	return S_ISREG(le32_get(in->mode)) && (le32_get(in->flags) & ZLFS_IFLAG_INLINE);
}
/* A new regular file starts inline when the filesystem has the feature and it is not
 * encrypted. */
void inline_start(struct zlfs_fs *fs, struct node_page *np);
/* Make an inline file an ordinary one: its bytes become data block 0. */
int inline_convert(struct zlfs_fs *fs, struct node_page *np);
/* data_read_plan of an inline file. */
int inline_read_plan(struct zlfs_fs *fs, struct node_page *np, size_t size, uint64_t off,
		     struct data_rplan *p);
/* A write: the bytes written in the inode, or 0 when the file is not inline (or no longer:
 * converted because the write would not fit) and the write goes to blocks. */
int inline_try_write(struct zlfs_fs *fs, struct node_page *np, const void *buf, size_t size,
		     uint64_t off);
/* A new size: 1 when set in the inode, 0 when the caller sets it (not inline, or converted). */
int inline_resize(struct zlfs_fs *fs, struct node_page *np, uint64_t size);
/* data_punch of an inline file: the range reads as zeros. */
int inline_punch(struct zlfs_fs *fs, struct node_page *np, uint64_t off, uint64_t len);
/* Before fallocate MODE: converts an inline file for the modes that work on blocks (a punch
 * is done in place, a mode refused leaves it as it is). */
int inline_before_fallocate(struct zlfs_fs *fs, struct node_page *np, int mode);
/* ---- symlink.c ---------------------------------------------------------------------------- */
/* A new symlink's TARGET: in the inode when it fits (ciphertext in an encrypted one), else
 * as file data. */
int symlink_store(struct zlfs_fs *fs, struct node_page *np, const char *target);
/* The target of symlink NP into BUF (PATH_MAX + 1 bytes), NUL-terminated. */
int symlink_load(struct zlfs_fs *fs, struct node_page *np, char *buf);

/* ---- readahead.c ------------------------------------------------------------------------ */
int ra_init(struct zlfs_fs *fs);
void ra_destroy(struct zlfs_fs *fs);
/* Blocks [FIRST, FIRST+N) of INO at data generation GEN: copied to BUF from a window (returns
 * N), or 0. Either way *A may be blocks to read ahead (A->n > 0: the request is in sequence
 * and no other extension of the file is in flight); each such A ends in ra_keep or, if it
 * is not read after all, ra_cancel, since other requests for those blocks wait for it. */
uint32_t ra_lookup(struct zlfs_fs *fs, uint32_t ino, uint64_t gen, uint64_t first, uint32_t n,
		   uint8_t *buf, struct ra_ahead *a);
/* A's first N blocks (plaintext, read at generation GEN) are in A->buf: keep them. */
void ra_keep(struct zlfs_fs *fs, uint32_t ino, uint64_t gen, const struct ra_ahead *a,
	     uint32_t n);
/* A will not be read: its waiters wake, and A->n = 0. */
void ra_cancel(struct zlfs_fs *fs, uint32_t ino, struct ra_ahead *a);
/* ---- falloc.c --------------------------------------------------------------------------- */
/* fallocate mode 0 and KEEP_SIZE: reserve the holes of [OFF, OFF+LEN) (statfs counts them as
 * used; writing them spends the reservation); without KEEP_SIZE the size grows to the end. */
int falloc_reserve(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len,
		   int keep_size);
/* ZERO_RANGE: the range reads as zeros; its whole blocks are freed and reserved. */
int falloc_zero(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len,
		int keep_size);
/* COLLAPSE_RANGE, INSERT_RANGE (block-aligned): the blocks after OFF move by LEN. */
int falloc_collapse(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len);
int falloc_insert(struct zlfs_fs *fs, struct node_page *inode, uint64_t off, uint64_t len);

/* ---- dir.c ------------------------------------------------------------------------------ */
/* readdir offsets: 0 start, 1 after ".", 2 after "..", then 3 + slot position + 1. */
typedef int (*dir_fill_fn)(void *arg, const char *name, size_t len, uint32_t ino,
			   uint8_t type, uint64_t next_off);
int dir_lookup(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
	       uint32_t *ino, uint8_t *type);
int dir_add(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
	    uint32_t ino, uint8_t type);
int dir_remove(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len);
/* Point an existing entry NAME at INO/TYPE. */
int dir_retarget(struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		 uint32_t ino, uint8_t type);
int dir_iterate(struct zlfs_fs *fs, struct node_page *dir, uint64_t off, dir_fill_fn fill,
		void *arg);
/* For the consistency check: every entry of DIR from the start, a damaged block told to BAD
 * (its index and why it was refused; BAD's nonzero return stops the walk) and skipped. A name
 * that does not decrypt with the key loaded (FNAME_NOKEY) comes to FILL in its no-key form,
 * with DIR_TYPE_NOKEY or'ed into its type. */
#define DIR_TYPE_NOKEY 0x80
typedef int (*dir_bad_fn)(void *arg, uint32_t blk, const char *why);
int dir_iterate_check(struct zlfs_fs *fs, struct node_page *dir, dir_fill_fn fill,
		      dir_bad_fn bad, void *arg);
/* Write cached directory blocks that changed; called before a checkpoint. */
int dir_flush(struct zlfs_fs *fs);
/* The directory cache, made at mount before any request can race to make it. */
int dir_cache_init(struct zlfs_fs *fs);
void dir_cache_drop(struct zlfs_fs *fs, uint32_t ino);
/* Block IDX of directory DIR as read into BLK (from the address DIR's pointer gives): kept as
 * a clean page if it checks and is not cached (a reader that reads directories' blocks in
 * runs, fsck). -EUCLEAN for a damaged block, which is not kept: reading it reports it. */
int dir_cache_keep(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx, const void *blk);
/* fsck's repair: block IDX of DIR dropped with the names it held (of an inline directory,
 * block 0 is its inode's entries: they go and the directory stays). Nothing of it is cached. */
int dir_drop_block(struct zlfs_fs *fs, struct node_page *dir, uint32_t idx);
/* Blocks made in the cache for INO and not yet written, to add to its st_blocks. */
uint32_t dir_pending_blocks(struct zlfs_fs *fs, uint32_t ino);
void dir_cache_destroy(struct zlfs_fs *fs);

/* ---- xattr.c ---------------------------------------------------------------------------- */
int xattr_get(struct zlfs_fs *fs, struct node_page *inode, const char *name, void *val,
	      size_t size);
int xattr_set(struct zlfs_fs *fs, struct node_page *inode, const char *name, const void *val,
	      size_t size, int flags);
int xattr_list(struct zlfs_fs *fs, struct node_page *inode, char *list, size_t size);
int xattr_remove(struct zlfs_fs *fs, struct node_page *inode, const char *name);
/* The names POSIX ACLs are kept under (acl.c), and which of them NAME is: ACL_ACCESS,
 * ACL_DEFAULT, else 0. xattr.c's, since it stores them, and acl.c sits above it. */
#define ACL_ACCESS 1
#define ACL_DEFAULT 2
#define ACL_ACCESS_XATTR "system.posix_acl_access"
#define ACL_DEFAULT_XATTR "system.posix_acl_default"
int acl_name(const char *name);
/* ---- acl.c ------------------------------------------------------------------------------ */
/* An ACL in its xattr form: 0, -EINVAL (malformed, out of order) or -E2BIG. */
int acl_check(const void *v, size_t size);
/* Set NP's ACL WHICH to V (no entries: remove it). The access ACL sets the mode's permission
 * bits and is not stored when the mode says it all; KILL_SGID drops S_ISGID (a caller
 * outside the file's group and not root). A default ACL only on a directory (EACCES). */
int acl_set(struct zlfs_fs *fs, struct node_page *np, int which, const void *v, size_t size,
	    int kill_sgid);
/* After a chmod of NP: its access ACL's owner, mask (or owning group) and other follow. */
int acl_chmod(struct zlfs_fs *fs, struct node_page *np);
/* NP was just made in DIR (both locked) with the mode the caller asked: DIR's default ACL
 * masks that mode, becomes NP's access ACL and, for a directory, its default ACL; without
 * one, UMASK applies. */
int acl_inherit(struct zlfs_fs *fs, struct node_page *dir, struct node_page *np,
		uint32_t umask);

/* Free INODE's xattr nodes and value nodes (its last release; xattr_node.c). */
void xattr_free_all(struct zlfs_fs *fs, struct node_page *inode);
/* fsck's repair of a link out of the xattr node NP (held) that leads to damage: SLOT
 * UINT32_MAX cuts the chain after NP, else SLOT is the byte offset of an entry whose value
 * nodes are damaged, and the entry goes. *OLD: the nid the link held. -EINVAL if there is
 * no such link. */
int xattr_node_cut(struct zlfs_fs *fs, struct node_page *np, uint32_t slot, uint32_t *old);

/* ---- fcrypt.c --------------------------------------------------------------------------- */

/* A name as a directory stores it: the user's bytes in a plain directory, ciphertext in an
 * encrypted one. A locked view's long names come back as a digest to match against. */
struct fname {
	uint8_t disk[ZLFS_NAME_MAX + 1];
	size_t len;
	int digest;     /* disk holds a 92-byte prefix and a SHA-256 of the stored name */
	uint32_t hash;  /* with digest: the stored dentry hash */
};

int fcrypt_is_encrypted(struct node_page *np);
/* -ENOKEY when NP is encrypted and the filesystem is mounted without its key. */
int fcrypt_need_key(const struct zlfs_fs *fs, struct node_page *np);
/* Make NP (new, under DIR) encrypted if DIR is or -o encrypt_all is set. */
int fcrypt_inherit(struct zlfs_fs *fs, struct node_page *dir, struct node_page *np);
/* Mark an empty directory encrypted (zlfs-ctl encrypt). */
int fcrypt_set_policy(struct zlfs_fs *fs, struct node_page *dir);
/* At mount: with -o encrypt_all on a filesystem whose root is not encrypted, say that names
 * in directories that are not encrypted stay plaintext. */
void fcrypt_mount_notice(struct zlfs_fs *fs, const char *path);
/* 1 when a name may move between directories A and B (rename, link): same encryption. */
int fcrypt_same_policy(struct node_page *a, struct node_page *b);
int fcrypt_file_key(const struct zlfs_fs *fs, struct node_page *np, struct zcrypt_file_key *fk);
/* User name -> disk name. CREATE: the name is to be added (needs the key if encrypted). */
int fname_to_disk(const struct zlfs_fs *fs, struct node_page *dir, const char *name, size_t len,
		  int create, struct fname *fn);
int fname_match(const struct fname *fn, const uint8_t *disk, size_t len, uint32_t hash);
/* A directory's no-key form of a name (base64url, or '_' and a digest) -> the disk name it
 * stands for: -ENOENT when NAME is no such form. */
int fname_nokey_to_disk(const char *name, size_t len, struct fname *fn);
/* Disk name -> the name shown to users; OUT holds ZLFS_NAME_MAX + 1 bytes. 0, or FNAME_NOKEY
 * when the key is loaded but the name does not decrypt to one a user could give (a damaged
 * nonce or name): it is shown in its no-key form then, which lookup also takes (dir.c), so
 * the entry stays listable, reachable and renamable, and never reaches the kernel with a '/'
 * or a NUL. */
#define FNAME_NOKEY 1
int fname_to_user(const struct zlfs_fs *fs, struct node_page *dir, const uint8_t *disk,
		  size_t len, uint32_t hash, char *out, size_t *out_len);
/* Symlink targets of encrypted inodes: ciphertext length, or the plaintext length (OUT holds
 * LEN + 1 bytes; without the key the locked form, up to 255 bytes). */
int fcrypt_symlink_encrypt(const struct zlfs_fs *fs, struct node_page *np, const char *target,
			   size_t len, uint8_t *out);
int fcrypt_symlink_decrypt(const struct zlfs_fs *fs, struct node_page *np, const uint8_t *ct,
			   size_t len, char *out);

/* ---- whole-filesystem ------------------------------------------------------------------ */
/* Mount and free the inodes left unlinked-but-open by the previous session. */
int files_mount(const char *path, const struct zlfs_mount_opts *o, struct zlfs_fs **out);
/* Make INO's data and nodes durable: without a checkpoint when roll-forward can recover
 * them, with one otherwise (directories, new inodes, freed nodes). Takes its own locks: the
 * caller holds none. */
int files_fsync(struct zlfs_fs *fs, uint32_t ino);

/* ---- dmark.c: names made durable by fsync without a checkpoint (DENTRY_MARK) ------------ */
/* Whether regular file NP (locked) may fsync with a dentry mark: made since the last
 * checkpoint, its one name unchanged, in a directory the checkpoint had. Fills DM (the name
 * copied to BUF, ZLFS_NAME_MAX + 1 bytes). */
int dmark_for_fsync(struct zlfs_fs *fs, struct node_page *np, struct node_dmark *dm, char *buf);
/* INO's fsync wrote its dentry mark and flushed. */
void dmark_durable(struct zlfs_fs *fs, uint32_t ino);
/* Whether every name change in directory DIR since the last checkpoint is one recovery makes
 * from durable dentry marks: then its fsync has nothing to write. */
int dmark_dir_covered(struct zlfs_fs *fs, uint32_t dir);
/* Directory DIR changed in a way no dentry mark says (its attributes): its next fsync takes a
 * checkpoint. */
void dmark_taint(struct zlfs_fs *fs, uint32_t dir);
/* The records, at unmount. */
void dmark_destroy(struct zlfs_fs *fs);
/* Make everything durable: changed directory blocks, then a checkpoint, under cp_lock
 * exclusive (the caller holds no lock). */
int files_sync(struct zlfs_fs *fs);
/* Make everything durable, then refuse changes from here on (a remount read-only); -EROFS when
 * already read-only. Nothing changed is left only in memory: the sync and the switch happen
 * under cp_lock exclusive, which every change holds shared. */
int files_set_readonly(struct zlfs_fs *fs);
/* Flush, write a clean checkpoint and release the filesystem. */
int files_unmount(struct zlfs_fs *fs);

#endif
