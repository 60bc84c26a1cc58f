/*
 * fuzz_fuse.h - the daemon's FUSE operations driven without a kernel (fuzz_fuse.c): the
 * libfuse calls they make (fuse_reply_*, fuse_add_direntry*, fuse_req_*) are provided here and
 * capture the reply, so the fuzz target runs exactly the code a user's ls, cat, readlink,
 * getfattr, write, rename and rm reach in the daemon.
 */
#ifndef ZLFS_FUZZ_FUSE_H
#define ZLFS_FUZZ_FUSE_H

struct zlfs_fs;

/* Walk the mounted filesystem FS through the FUSE operations: list every directory (readdir
 * and readdirplus), look up every name, stat, readlink, list and read xattrs, open and read
 * files. With WRITE (a read-write mount) also create, write and fsync, rename, unlink, mkdir,
 * set xattrs, truncate, then collect garbage and checkpoint. SCRIPT picks which existing
 * names the changes hit. Ends with the daemon's unmount (zfuse_destroy): FS is released.
 * Returns what the unmount returned. */
int fz_fuse_walk(struct zlfs_fs *fs, int write, const unsigned char *script, unsigned len);

/* Build a tree through the operations: a directory of NFILES files of growing sizes, a
 * subdirectory, a sparse file reaching indirect and double-indirect nodes with a hard link and
 * an xattr node, an inline and a long symlink. Ends with the unmount. */
int fz_fuse_populate(struct zlfs_fs *fs, unsigned nfiles);
/* Leave work for the next mount and return without unmounting (the caller then dies): an
 * orphan (created, held open, unlinked) in a checkpoint, then files fsync'ed after it. */
void fz_fuse_crash_work(struct zlfs_fs *fs);

#endif
