/*
 * pt_nodes.h - zlfs-passthrough's inode table (pt_nodes.c): lookup counts and the names the
 * kernel knows each inode by, from which a path relative to the source directory is made.
 * Every function takes the table's lock itself; none makes a system call.
 */
#ifndef PT_NODES_H
#define PT_NODES_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdint.h>

/* The path of INO relative to the source directory ("." for the root), then "/NAME" if NAME,
 * into BUF (PATH_MAX bytes): 0, ESTALE (an unknown inode, or every name of it unlinked) or
 * ENAMETOOLONG. */
int pn_path(fuse_ino_t ino, const char *name, char *buf);

/* The kernel looked NAME up in PARENT and got INO: count it and learn the name. 0, ESTALE
 * (PARENT unknown) or ENOMEM (nothing counted). */
int pn_lookup(fuse_ino_t parent, const char *name, fuse_ino_t ino);

/* The kernel forgot NLOOKUP lookups of INO. */
void pn_forget(fuse_ino_t ino, uint64_t nlookup);

/* NAME in PARENT, which was INO, is gone (unlink, rmdir). */
void pn_unlinked(fuse_ino_t parent, const char *name, fuse_ino_t ino);

/* NAME in PARENT (INO) was renamed to NEWNAME in NEWPARENT, which was TARGET (0: nothing);
 * EXCHANGE: RENAME_EXCHANGE, TARGET now has the old name. */
void pn_renamed(fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		fuse_ino_t ino, fuse_ino_t target, int exchange);

#endif
