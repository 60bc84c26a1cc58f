/*
 * fuzz_mut.h - damaging a zlfs-emu image the way a hostile device could (fuzz_mut.c), shared
 * by the libFuzzer target (fuzz_image.c) and the black-box mutator (fuzz_mutate.c).
 *
 * An image is scanned once (struct fz_img): the emulator's header and zone table, and every
 * 4 KiB block of the device whose zlfs header and checksum verify, by kind; the newest
 * superblock and the newest checkpoint pack. A mutation is an 8-byte record (struct fz_op):
 * which structure, which field or byte, which value. Most are resealed so they pass the
 * checksum and reach the checks behind it (zlfs blocks with zlfs_blk_seal, checkpoint packs
 * whole: payload, head, and a tail naming the new head's checksum; the emulator's header,
 * zone entries and journal records with their CRC32C); some are left torn.
 * Edits are made on copies of the blocks they touch (struct fz_edit) and written to the image
 * file by fz_edit_commit; fz_edit_undo puts the original bytes back.
 */
#ifndef ZLFS_FUZZ_MUT_H
#define ZLFS_FUZZ_MUT_H

#include "format.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FZ_MAX_META 16384
#define FZ_MAX_TOUCH 64
#define FZ_OP_SIZE 8
/* buckets of blocks a mutation picks from: the zlfs kinds, and inodes split by type */
#define FZ_BUCKET_DIR ZLFS_KIND_MAX
#define FZ_BUCKET_LNK (ZLFS_KIND_MAX + 1)
#define FZ_NBUCKETS (ZLFS_KIND_MAX + 2)

struct fz_img {
	int fd;
	uint64_t file_len;
	uint8_t hdr[4096];          /* the emulator's header block, as found */
	uint64_t data_off;          /* image file offset of device byte 0 */
	uint64_t table_off, jrnl_off;
	uint32_t nr_zones, jslots;
	uint64_t zone_size, zone_cap, generation;
	uint64_t seed;              /* zlfs checksum seed (from the superblock's uuid) */
	struct zlfs_sb_info sb;     /* the newest superblock, decoded */
	uint32_t sb_blk;            /* device block of the newest superblock record */
	uint32_t pack_head, pack_blocks; /* the newest checkpoint pack */
	uint32_t *meta;             /* device blocks that verify, ascending */
	uint8_t *kind;              /* their kinds */
	uint32_t nmeta;
	uint32_t *bykind[FZ_NBUCKETS]; /* indexes into meta[], per bucket */
	uint32_t nbykind[FZ_NBUCKETS];
};

/* Blocks an input touched: file offsets, originals, and the working copies. */
struct fz_edit {
	uint64_t foff[FZ_MAX_TOUCH];
	uint8_t *orig[FZ_MAX_TOUCH];
	uint8_t *work[FZ_MAX_TOUCH];
	uint8_t seal[FZ_MAX_TOUCH]; /* 1: reseal as a zlfs block at commit */
	int n;
	int pack;                   /* a checkpoint pack was edited: reseal it whole */
	int emu_meta;               /* the emulator's header, table or journal was edited */
};

/* Scan the image at PATH (opened read-write). 0, or -errno with a line on stderr. */
int fz_img_open(struct fz_img *img, const char *path);
void fz_img_close(struct fz_img *img);

/* Apply one 8-byte mutation. DESC (may be NULL) gets a line saying what was changed. */
void fz_apply(struct fz_img *img, struct fz_edit *e, const uint8_t op[FZ_OP_SIZE], char *desc,
	      size_t desclen);
/* Set field FIELD[IDX] of a structure to VAL by name: KIND is emu_hdr, emu_zent (WHERE: the
 * zone), super or cp_head (WHERE 0: the newest), or a block kind (inode, dentry, nat, ...)
 * at device block WHERE. 0, or -EINVAL / -ENOENT for an unknown kind or field. */
int fz_set(struct fz_img *img, struct fz_edit *e, const char *kind, const char *field,
	   uint32_t idx, uint64_t val, uint32_t where);
/* Reseal what needs it and write the edited blocks to the image file. */
int fz_edit_commit(struct fz_img *img, struct fz_edit *e);
/* Write the original bytes back and forget the edit. */
int fz_edit_undo(struct fz_img *img, struct fz_edit *e);
/* Forget the edit (its blocks stay as written). */
void fz_edit_free(struct fz_edit *e);

/* fuzz_fields.c: a field of a structure's table; arrays are COUNT elements STRIDE apart. */
struct fz_field {
	const char *name;
	uint16_t off, size;     /* bytes */
	uint16_t count, stride;
};
/* The table of KIND (zlfs kinds; 0 for the emulator's header, ZLFS_KIND_MAX for a zone table
 * entry; any other: the block header's), ending with a NULL name. */
const struct fz_field *fz_fields_of(unsigned kind);
uint32_t fz_nfields(const struct fz_field *f);
/* The field NAME of KIND (or of the block header), or NULL. */
const struct fz_field *fz_field_find(unsigned kind, const char *name);
/* pread of the whole length; bytes past the end of the file read as zeros. */
int fz_pread(int fd, void *buf, size_t len, uint64_t off);

/* Name the structure and the field at byte OFF of a block of KIND (zlfs kinds; 0 for the
 * emulator's header, ZLFS_KIND_MAX for a zone table entry). */
void fz_field_name(unsigned kind, uint32_t off, char *buf, size_t len);

/* Describe, one line each, how the file B differs from A: region, block, structure, fields. */
int fz_explain(const char *a, const char *b, FILE *out);

/* Deterministic generator of op records (xorshift64): for sweeps and the black-box mode. */
void fz_gen_op(uint64_t *state, uint8_t op[FZ_OP_SIZE], int raw_ok);

#endif
