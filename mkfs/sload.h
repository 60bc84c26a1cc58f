/*
 * sload.h - filling a new filesystem from a directory of the host (sload.c), for
 * mkfs.zlfs --root-dir.
 */
#ifndef ZLFS_SLOAD_H
#define ZLFS_SLOAD_H

#include <stdint.h>

struct zlfs_fs;

struct sload_opts {
	const char *root;       /* the host directory whose tree the filesystem gets */
	int fixed_time;         /* every inode's times are TIME_NS, not the host's */
	int64_t time_ns;
};

struct sload_stats {
	uint64_t dirs, files, symlinks, specials, hardlinks, xattrs, bytes;
};

/* Copy O->root's tree into the mounted, empty filesystem FS (root included: its mode,
 * owner, times and xattrs), in sorted name order. Errors are logged with the host path and
 * returned as a negative errno; FS is then left to the caller to unmount. */
int sload_tree(struct zlfs_fs *fs, const struct sload_opts *o, struct sload_stats *st);

#endif
