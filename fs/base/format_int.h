/*
 * format_int.h - what format_check.c and format_names.c share: a refusal naming the field.
 * Owns nothing on disk; private to fs/base.
 */
#ifndef ZLFS_FORMAT_INT_H
#define ZLFS_FORMAT_INT_H

#include "format.h"

#include <errno.h>

#define bad(why, len, ...) zlfs_why(-EUCLEAN, why, len, __VA_ARGS__)

#define RANGE(why, len, name, v, lo, hi)                                                       \
	bad(why, len, "%s = %llu, out of range [%llu, %llu]", name, (unsigned long long)(v),     \
	    (unsigned long long)(lo), (unsigned long long)(hi))

/* The fields of an inode flagged ZLFS_IFLAG_INLINE_DENTRY (dentry_inline.c). */
int zlfs_inode_check_inline_dentry(const struct zlfs_sb_info *s, const struct zlfs_inode *in,
				   char *why, size_t len);

#endif
