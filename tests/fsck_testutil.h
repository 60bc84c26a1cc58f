/*
 * fsck_testutil.h - what the files of test_fsck share: running fsck.zlfs and reading its text
 * and JSON report, images populated through the library (no FUSE) with /d, /d/f1 and /f2,
 * snapshots of the device (write pointers, valid blocks, a checksum of the image), and damage
 * more than one file makes: a lost name, a dangling entry, an fsync'ed write after the last
 * checkpoint, a device error that every mode must report.
 *
 * The tests are in test_fsck_*.c by concern; test_fsck.c orders them.
 */
#ifndef ZLFS_FSCK_TESTUTIL_H
#define ZLFS_FSCK_TESTUTIL_H

#include "testutil.h"

#include "verify.h"

#include <stddef.h>
#include <stdint.h>

/* The image, its mount point, a binary's path, fsck's standard output. */
extern char img[512], mnt[512], bin[512], out[512];
/* The key file of an image made by populate_encrypted. */
extern char keyfile[512];

/* ---- fsck.zlfs and its report ------------------------------------------------------------ */

const char *fsck_bin(void);
/* Run fsck.zlfs FLAGS IMAGE; its exit status. */
int fsck(const char *flags, const char *image);
int said(const char *s);
int said_err(const char *s);
int json_valid(void);
void json_counts(long errors, long mismatches, long device);

/* ---- images with a known tree --------------------------------------------------------- */

extern uint32_t ino_d, ino_f1, ino_f2;
#define F1_SIZE (20 * 1024 + 5)
#define F2_SIZE (1024 * 1024)

struct zlfs_fs *mount_rw(const char *image, int ro);
uint8_t pat(uint32_t ino, size_t i);
uint32_t mk(struct zlfs_fs *fs, uint32_t parent, const char *name, int dir, size_t size);
int same_data(struct zlfs_fs *fs, uint32_t ino, size_t size);
void populate(const char *name, const char *log);
/* populate with the library storing small directories inline: /d and the root keep their
 * entries in their inodes (dir_inline.c). */
void populate_inline(const char *name);
void populate_encrypted(const char *name);
/* populate with mkfs --no-packed-inodes: every inode in a block of its own. */
void populate_whole(const char *name);
void populate_two_flush(const char *name);
void set_nlink(uint32_t ino, uint32_t n);
struct zlfs_fs *mount_expect_lost_found(uint32_t ino, size_t size);
void add_ghost(void);
void crash_after_fsync(int cut);

/* ---- the device ------------------------------------------------------------------------ */

/* Write pointers of every zone, and a checksum of the image file. */
struct snap {
	uint64_t wp[64];
	uint8_t cond[64];
	uint32_t valid[64];   /* valid blocks per zone, as the checkpoint has them */
	unsigned long sum;
};

void snapshot_raw(struct snap *s);
void snapshot(struct snap *s);
void no_zone_rewound(const struct snap *a, const struct snap *b, uint32_t first_main);
uint32_t main_first(void);
uint64_t sb_scan_time(void);
uint32_t data_block_of(uint32_t ino, uint64_t idx);
/* The block the mounted FS's NAT gives node NID (the test fails if it cannot be read). */
/* The kind of block inode NID is in: ZLFS_KIND_INODE, or ZLFS_KIND_IPACK for a packed one. */
unsigned nat_kind_of(struct zlfs_fs *fs, uint32_t nid);
uint32_t nat_addr_of(struct zlfs_fs *fs, uint32_t nid);
void expect_device_error_everywhere(uint32_t first);
/* Edit device block ADDR of the image in place: it must verify as a block of KIND; EDIT
 * changes its bytes; RESEAL gives it a valid checksum again (so the check of its values is
 * what meets the damage). */
void edit_block(uint32_t addr, unsigned kind, void (*edit)(uint8_t *b, void *arg), void *arg,
		int reseal);

/* ---- the tests, by file; test_fsck.c puts them in order ------------------------------- */

/* Each appends its tests to T and returns how many. */
int fsck_modes_tests(const TTest **t);
int fsck_device_tests(const TTest **t);
int fsck_flips_tests(const TTest **t);
int fsck_encrypt_tests(const TTest **t);
int fsck_hostile_tests(const TTest **t);
int fsck_walk_tests(const TTest **t);
int fsck_packed_tests(const TTest **t);

/* ---- crafted values, resealed (test_hostile*.c) ----------------------------------------- */

struct set32 {
	size_t off;
	uint32_t val;
};
/* edit_block's edit: the le32 of ARG (a struct set32) put in place. */
void put32(uint8_t *b, void *arg);
/* Set the le32 at byte OFF of device block ADDR (of KIND) to VAL, resealed. */
void set_field(uint32_t addr, unsigned kind, size_t off, uint32_t val);
/* The device block holding node NID. */
uint32_t node_addr(uint32_t nid);
/* Set the le32 at byte OFF of inode INO's 4 KiB form to VAL, resealed: in its block, or in
 * its slot of an inode pack. */
void set_inode_field(uint32_t ino, size_t off, uint32_t val);

#endif
