/*
 * dump.h - what zlfs-dump's files share: one writer for its text and JSON reports
 * (dump_out.c), and the report of each thing it inspects (dump.c: superblock, checkpoint,
 * zones, blocks; dump_inode.c: inodes and their trees).
 */
#ifndef ZLFS_DUMP_H
#define ZLFS_DUMP_H

#include "files.h"

#include <stdint.h>

/* ---- dump_out.c: nested objects and lists, as JSON or as indented "key: value" lines ---- */
#define OUT_DEPTH_MAX 16
struct out {
	int json;
	int depth;
	int items[OUT_DEPTH_MAX]; /* members written at each level: JSON commas */
	int list[OUT_DEPTH_MAX];  /* the level is a list: members have no key */
};
/* Open an object (KEY NULL inside a list) or a list; close either. */
void out_obj(struct out *o, const char *key);
void out_list(struct out *o, const char *key);
void out_end(struct out *o);
void out_u(struct out *o, const char *key, uint64_t v);
void out_i(struct out *o, const char *key, int64_t v);
void out_s(struct out *o, const char *key, const char *s);
void out_b(struct out *o, const char *key, int v);
/* Printed in octal (text) or as a number (JSON): a file mode. */
void out_mode(struct out *o, const char *key, uint32_t mode);
/* Bytes as hexadecimal digits, in both forms. */
void out_hex(struct out *o, const char *key, const uint8_t *p, size_t n);

/* ---- dump.c -------------------------------------------------------------------------- */
const char *dump_log_name(unsigned log);
/* Where block ADDR lies, as members of the current object: zone, area, and in the main area
 * its segment and that segment's log (its temperature). */
void dump_where(struct out *o, struct zlfs_fs *fs, uint32_t addr);

/* ---- dump_inode.c --------------------------------------------------------------------- */
/* Inode INO: every field, its NAT entry, its node tree and its data blocks as extents. */
int dump_inode(struct out *o, struct zlfs_fs *fs, uint32_t ino);
/* The inode PATH names, looked up from the root ("/a/b"). */
int dump_path(struct out *o, struct zlfs_fs *fs, const char *path);

#endif
