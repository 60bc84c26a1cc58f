/*
 * fuzz_mut.c - the mutations of fuzz_mut.h: scanning an image, choosing fields (their tables
 * are in fuzz_fields.c) and values that sit on the edges of what the device and the format
 * allow, setting a field by name, and resealing what was changed.
 * The emulator's structures come from its private header: forging them is the point here.
 * May call: format.h, zdev_emu_impl.h (structures and emu_crc32c only), libc.
 */
#include "fuzz_mut.h"
#include "zdev_emu_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLK ZLFS_BLOCK_SIZE

/* ---- reading and writing fields ------------------------------------------------------------ */

static uint64_t get_val(const uint8_t *p, unsigned size)
{
	uint64_t v = 0;

	memcpy(&v, p, size > 8 ? 8 : size); /* little-endian hosts only (zdev_emu_impl.h) */
	return v;
}

static void put_val(uint8_t *p, unsigned size, uint64_t v)
{
	memcpy(p, &v, size > 8 ? 8 : size);
}

static const uint64_t interesting[] = {
	0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 511, 512, 1023, 1024,
	4095, 4096, 4097, 65535, 65536, 1u << 20, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff,
	0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull};
#define NINTERESTING (sizeof(interesting) / sizeof(interesting[0]))

/* Values that sit on the edges of this device and this filesystem. */
static uint64_t derived(const struct fz_img *img, uint32_t k)
{
	const struct zlfs_sb_info *s = &img->sb;
	uint64_t zb = img->zone_size / BLK, v[] = {
		img->nr_zones, img->nr_zones - 1, img->nr_zones + 1, img->zone_size,
		img->zone_size / 2, img->zone_size * 2, img->zone_cap, img->zone_cap - BLK,
		img->zone_cap + BLK, zb, zb - 1, zb + 1, img->zone_cap / BLK,
		(uint64_t)img->nr_zones * zb, (uint64_t)img->nr_zones * zb - 1, s->max_nid,
		s->max_nid - 1, s->max_nid + 1, s->nat_blocks, s->sit_blocks,
		(uint64_t)s->nat_blocks + s->sit_blocks, s->main_zones, s->main_zone_first,
		s->meta_zones, s->meta_zone_first, s->seg_blocks, s->seg_blocks - 1,
		s->segs_per_zone, s->nr_logs, ZLFS_NR_LOG_TYPES, ZLFS_NR_LOG_TYPES + 1,
		ZLFS_INLINE_MAX, ZLFS_INLINE_MAX + 1, ZLFS_PAYLOAD, ZLFS_CP_MAP_MAX,
		ZLFS_CP_ORPHAN_BLOCKS_MAX + 1, ZLFS_REMAP_BLOCKS_MAX + 1, ZLFS_NAME_MAX + 1,
		ZLFS_DENTRY_SLOTS, ZLFS_SEG_BLOCKS_MAX, 64, 65, img->generation,
		img->generation + 1, img->jslots, img->file_len, img->data_off + BLK};

	return v[k % (sizeof(v) / sizeof(v[0]))];
}

/* A value for a field now holding CUR, chosen by V (24 bits of the input). */
static uint64_t pick_value(const struct fz_img *img, uint64_t cur, uint32_t v, uint32_t alt)
{
	uint32_t p = v & 0xfffff;

	switch (v >> 20 & 7) {
	case 0: return p % 4; /* counts and sizes: 0 and 1 are the usual edges */
	case 1: return interesting[p % NINTERESTING];
	case 2: return (p & 1) ? cur + (uint64_t)(int64_t)(int8_t)(p >> 1) : derived(img, p >> 1);
	case 3: return derived(img, p);
	case 4: return img->nmeta ? img->meta[p % img->nmeta] + (p >> 15 & 1) : p;
	case 5: return (p & 3) ? alt : cur << 1 | 1; /* the same field of another block */
	case 6: return (p & 64) ? cur ^ (1ull << (p % 64)) : cur >> 1;
	default: return p * 0x9e3779b9u;
	}
}

/* ---- the image ------------------------------------------------------------------------------- */

int fz_pread(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	if (n < 0)
		return -errno;
	if ((size_t)n < len)
		memset((uint8_t *)buf + n, 0, len - (size_t)n); /* past the end reads as zeros */
	return 0;
}

static void note_block(struct fz_img *img, uint32_t blk, const uint8_t *b)
{
	const struct zlfs_blkhdr *h = (const void *)b;
	unsigned k = le16_get(h->kind), bucket = k;

	if (img->nmeta >= FZ_MAX_META || zlfs_blk_verify(b, img->seed, ZLFS_KIND_MAX) ||
	    !k || k >= ZLFS_KIND_MAX)
		return;
	if (k == ZLFS_KIND_INODE) { /* one bucket per file type: symlinks are few but count */
		uint32_t mode = le32_get(((const struct zlfs_inode *)b)->mode) & 0170000;

		bucket = mode == 0040000 ? FZ_BUCKET_DIR : mode == 0120000 ? FZ_BUCKET_LNK : k;
	}
	img->meta[img->nmeta] = blk;
	img->kind[img->nmeta] = (uint8_t)k;
	img->bykind[bucket][img->nbykind[bucket]++] = img->nmeta++;
}

/* The newest superblock (by sb_seq) and checkpoint pack (by version) among the blocks. */
static void find_newest(struct fz_img *img, uint8_t *b)
{
	uint64_t best_seq = 0, best_ver = 0;

	for (uint32_t i = 0; i < img->nmeta; i++) {
		uint64_t off = img->data_off + (uint64_t)img->meta[i] * BLK;

		if ((img->kind[i] != ZLFS_KIND_SUPER && img->kind[i] != ZLFS_KIND_CP_HEAD) ||
		    fz_pread(img->fd, b, BLK, off))
			continue;
		if (img->kind[i] == ZLFS_KIND_SUPER) {
			struct zlfs_sb_info s;

			if (!zlfs_sb_decode(b, &s) && s.sb_seq >= best_seq) {
				best_seq = s.sb_seq;
				img->sb = s;
				img->sb_blk = img->meta[i];
			}
		} else {
			const struct zlfs_cp_head *h = (const void *)b;

			if (le64_get(h->version) >= best_ver) {
				best_ver = le64_get(h->version);
				img->pack_head = img->meta[i];
				img->pack_blocks = le32_get(h->pack_blocks);
			}
		}
	}
}

int fz_img_open(struct fz_img *img, const char *path)
{
	const struct emu_hdr *h = (const void *)img->hdr;
	uint8_t *b = malloc(BLK);
	uint64_t nblk;
	struct stat st;

	memset(img, 0, sizeof(*img));
	img->fd = open(path, O_RDWR);
	img->meta = calloc(FZ_MAX_META, sizeof(*img->meta));
	img->kind = calloc(FZ_MAX_META, 1);
	for (int k = 0; k < FZ_NBUCKETS; k++)
		img->bykind[k] = calloc(FZ_MAX_META, sizeof(uint32_t));
	if (img->fd < 0 || fstat(img->fd, &st) || !b || !img->meta || !img->kind ||
	    fz_pread(img->fd, img->hdr, BLK, 0) || memcmp(h->magic, EMU_MAGIC, 8)) {
		fprintf(stderr, "fuzz: %s: not a readable zlfs-emu image\n", path);
		free(b);
		return -EINVAL;
	}
	img->file_len = (uint64_t)st.st_size;
	img->data_off = h->data_off;
	img->table_off = h->table_off;
	img->jrnl_off = h->jrnl_off;
	img->nr_zones = h->nr_zones;
	img->jslots = h->jslots;
	img->zone_size = h->zone_size;
	img->zone_cap = h->zone_capacity;
	img->generation = h->generation;
	/* device block 0 is the first superblock record: its uuid gives the checksum seed */
	if (fz_pread(img->fd, b, BLK, img->data_off)) {
		free(b);
		return -EIO;
	}
	img->seed = zlfs_csum_seed(((const struct zlfs_super *)b)->uuid);
	nblk = (img->file_len - img->data_off) / BLK;
	for (uint64_t blk = 0; blk < nblk && blk < ZLFS_MAX_BLOCKS; blk++) {
		uint64_t off = img->data_off + blk * BLK;
		off_t d = lseek(img->fd, (off_t)off, SEEK_DATA);

		if (d < 0)
			break;
		if ((uint64_t)d >= off + BLK) { /* skip the hole */
			blk = ((uint64_t)d - img->data_off) / BLK - 1;
			continue;
		}
		if (!fz_pread(img->fd, b, BLK, off))
			note_block(img, (uint32_t)blk, b);
	}
	find_newest(img, b);
	free(b);
	return img->nmeta ? 0 : -ENOENT;
}

void fz_img_close(struct fz_img *img)
{
	if (img->fd >= 0)
		close(img->fd);
	free(img->meta);
	free(img->kind);
	for (int k = 0; k < FZ_NBUCKETS; k++)
		free(img->bykind[k]);
	memset(img, 0, sizeof(*img));
	img->fd = -1;
}

/* ---- edits ----------------------------------------------------------------------------------- */

/* The working copy of the 4 KiB block at file offset FOFF; NULL when the edit is full. */
static uint8_t *edit_block(struct fz_img *img, struct fz_edit *e, uint64_t foff, int seal)
{
	int i;

	foff = foff / BLK * BLK;
	for (i = 0; i < e->n; i++)
		if (e->foff[i] == foff) {
			e->seal[i] &= (uint8_t)seal; /* one torn mutation leaves the block torn */
			return e->work[i];
		}
	if (e->n == FZ_MAX_TOUCH || foff + BLK > img->file_len)
		return NULL;
	e->orig[i] = malloc(BLK);
	e->work[i] = malloc(BLK);
	if (!e->orig[i] || !e->work[i] || fz_pread(img->fd, e->orig[i], BLK, foff)) {
		free(e->orig[i]);
		free(e->work[i]);
		return NULL;
	}
	memcpy(e->work[i], e->orig[i], BLK);
	e->foff[i] = foff;
	e->seal[i] = (uint8_t)seal;
	e->n++;
	return e->work[i];
}

static uint64_t dev_foff(const struct fz_img *img, uint32_t blk)
{
	return img->data_off + (uint64_t)blk * BLK;
}

/* Choose a field of the table of KIND and an element of it; returns its byte offset. */
static uint32_t choose_field(unsigned kind, uint32_t sel, const struct fz_field **out)
{
	const struct fz_field *f = fz_fields_of(kind);
	uint32_t n = fz_nfields(f), elem;

	f += sel % n;
	sel /= n;
	/* the first elements of an array are the ones in use: favour them */
	elem = (sel & 3) ? (sel >> 2) % (f->count < 8 ? f->count : 8) : (sel >> 2) % f->count;
	*out = f;
	return f->off + elem * f->stride;
}

/* Set a field of block B (KIND) chosen by SEL to a value chosen by V. */
static void set_field(struct fz_img *img, uint8_t *b, unsigned kind, uint32_t sel, uint32_t v,
		      const uint8_t *other, char *desc, size_t dl)
{
	const struct fz_field *f;
	uint32_t off = choose_field(kind, sel, &f);
	uint64_t cur = get_val(b + off, f->size), nv;
	char name[96];

	nv = pick_value(img, cur, v, (uint32_t)get_val((other ? other : b) + off, f->size));
	if (f->size < 8)
		nv &= (1ull << (8 * f->size)) - 1;
	put_val(b + off, f->size, nv);
	fz_field_name(kind, off, name, sizeof(name));
	if (desc)
		snprintf(desc, dl, "%s: %#llx -> %#llx", name, (unsigned long long)cur,
			 (unsigned long long)nv);
}

/* The old byte-level mutations of a block: set, flip, 32-bit values, deltas, zeroed ranges. */
static void mutate_bytes(struct fz_img *img, uint8_t *b, uint32_t off, uint32_t v)
{
	uint8_t val = (uint8_t)v;
	uint32_t o4 = (off & ~3u) % (ZLFS_CSUM_OFF - 4);

	off %= ZLFS_CSUM_OFF;
	switch (v >> 8 & 7) {
	case 0: b[off] = val; break;
	case 1: b[off] ^= (uint8_t)(1u << (val & 7)); break;
	case 2: put_val(b + o4, 4, interesting[val % NINTERESTING]); break;
	case 3: put_val(b + o4, 4, get_val(b + o4, 4) + (uint64_t)(int64_t)(int8_t)val); break;
	case 4: memset(b + (off & ~63u) % (ZLFS_CSUM_OFF - 64), 0, 64); break;
	case 5: put_val(b + o4, 4, derived(img, val)); break;
	case 6: put_val(b + o4, 4, img->meta[val % img->nmeta]); break;
	default: put_val(b + o4, 4, img->meta[val % img->nmeta] + 1); break;
	}
}

/* A metadata block chosen by SEL: low bits pick the bucket (a kind, or a type of inode),
 * the rest one block of it. */
static int pick_meta(const struct fz_img *img, uint32_t sel)
{
	unsigned k = 1 + sel % (FZ_NBUCKETS - 1);

	for (unsigned t = 0; t < FZ_NBUCKETS && !img->nbykind[k]; t++)
		k = 1 + k % (FZ_NBUCKETS - 1);
	if (!img->nbykind[k])
		return -1;
	return (int)img->bykind[k][(sel / (FZ_NBUCKETS - 1)) % img->nbykind[k]];
}

/* Another block of KIND (any bucket of it): where a field's value may be taken from. */
static uint8_t *other_of_kind(struct fz_img *img, unsigned kind, uint32_t sel, uint8_t *buf)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < img->nmeta; i++)
		n += img->kind[i] == kind;
	for (uint32_t i = 0, k = n ? sel % n : 0; n && i < img->nmeta; i++)
		if (img->kind[i] == kind && !k--)
			return fz_pread(img->fd, buf, BLK, dev_foff(img, img->meta[i])) ? NULL : buf;
	return NULL;
}

enum fz_opcode {
	OP_META_FIELD, OP_META_BYTES, OP_META_RAW, OP_PACK, OP_SUPER, OP_EMU_HDR, OP_ZENT,
	OP_JREC, OP_FILE_RAW, OP_COPY_BLOCK, OP_NCODES
};

static void op_meta(struct fz_img *img, struct fz_edit *e, int code, uint32_t sel,
		    uint32_t off, uint32_t v, char *desc, size_t dl)
{
	int i = pick_meta(img, sel);
	uint8_t *b, other[BLK];

	if (i < 0 || !(b = edit_block(img, e, dev_foff(img, img->meta[i]), code != OP_META_RAW)))
		return;
	if (code == OP_META_FIELD) {
		set_field(img, b, img->kind[i], off, v,
			  other_of_kind(img, img->kind[i], v >> 4, other), desc, dl);
	} else {
		mutate_bytes(img, b, off, v);
		if (desc)
			snprintf(desc, dl, "%s bytes at %u (op %u)", zlfs_kind_name(img->kind[i]),
				 off % ZLFS_CSUM_OFF, v >> 8 & 7);
	}
	if (desc) {
		size_t l = strlen(desc);

		snprintf(desc + l, dl - l, " in block %u%s", img->meta[i],
			 code == OP_META_RAW ? ", torn" : "");
	}
}

/* A block of the newest pack (head or payload; the tail is rewritten at commit). */
static void op_pack(struct fz_img *img, struct fz_edit *e, uint32_t sel, uint32_t off,
		    uint32_t v, char *desc, size_t dl)
{
	uint32_t n = img->pack_blocks > 1 ? img->pack_blocks - 1 : 1;
	uint32_t k = (sel & 1) ? 0 : (sel >> 1) % n, blk = img->pack_head + k;
	uint8_t *b;
	unsigned kind;

	if (!img->pack_head || !(b = edit_block(img, e, dev_foff(img, blk), 1)))
		return;
	e->pack = 1;
	kind = le16_get(((struct zlfs_blkhdr *)b)->kind);
	set_field(img, b, kind < ZLFS_KIND_MAX ? kind : 0, off, v, NULL, desc, dl);
	if (desc) {
		size_t l = strlen(desc);

		snprintf(desc + l, dl - l, " in pack block %u (head %u), pack resealed", blk,
			 img->pack_head);
	}
}

static void op_super(struct fz_img *img, struct fz_edit *e, uint32_t off, uint32_t v,
		     char *desc, size_t dl)
{
	uint8_t *b = img->sb_blk || img->nbykind[ZLFS_KIND_SUPER]
			     ? edit_block(img, e, dev_foff(img, img->sb_blk), 1) : NULL;

	if (b)
		set_field(img, b, ZLFS_KIND_SUPER, off, v, NULL, desc, dl);
}

static uint32_t emu_crc_of(uint8_t *p, size_t len, size_t crc_off)
{
	uint32_t saved, crc;

	memcpy(&saved, p + crc_off, 4);
	memset(p + crc_off, 0, 4);
	crc = emu_crc32c(0, p, len);
	memcpy(p + crc_off, &saved, 4);
	return crc;
}

static void op_emu(struct fz_img *img, struct fz_edit *e, int code, uint32_t sel, uint32_t off,
		   uint32_t v, char *desc, size_t dl)
{
	int torn = (v >> 23) & 1 && (sel & 7) == 0; /* rarely: leave the CRC stale */
	uint8_t *b;

	if (code == OP_EMU_HDR) {
		if (!(b = edit_block(img, e, 0, 0)))
			return;
		set_field(img, b, 0, off, v & 0x7fffff, NULL, desc, dl);
		if (!torn) {
			uint32_t c = emu_crc_of(b, EMU_BLK, offsetof(struct emu_hdr, crc));

			memcpy(b + offsetof(struct emu_hdr, crc), &c, 4);
		}
	} else {
		/* zone entries: the first zones (superblock, checkpoint, meta) most often */
		uint32_t z = (sel & 1 ? sel >> 1 : sel >> 1 & 7) % img->nr_zones;
		uint64_t at = img->table_off + (uint64_t)z * sizeof(struct emu_zent);
		uint8_t *ent;

		if (!(b = edit_block(img, e, at, 0)))
			return;
		ent = b + at % BLK;
		set_field(img, ent, ZLFS_KIND_MAX, off, v & 0x7fffff, NULL, desc, dl);
		if ((off % 3) == 2 && (v & 0x700000)) { /* cond: mostly one the device may report */
			static const uint8_t conds[] = {ZDEV_COND_EMPTY, ZDEV_COND_CLOSED,
							ZDEV_COND_FULL, ZDEV_COND_RDONLY,
							ZDEV_COND_OFFLINE};

			ent[offsetof(struct emu_zent, cond)] = conds[v % 5];
			if (desc)
				snprintf(desc, dl, "emu_zent.cond: -> %u", conds[v % 5]);
		}
		if (!torn) {
			uint32_t c = emu_crc_of(ent, sizeof(struct emu_zent),
						offsetof(struct emu_zent, crc));

			memcpy(ent + offsetof(struct emu_zent, crc), &c, 4);
		}
		if (desc) {
			size_t l = strlen(desc);

			snprintf(desc + l, dl - l, " of zone %u", z);
		}
	}
	e->emu_meta = 1;
	if (torn && desc) {
		size_t l = strlen(desc);

		snprintf(desc + l, dl - l, ", crc left stale");
	}
}

/* Forge a journal record of the current generation: a write the volatile cache "holds". */
static void op_jrec(struct fz_img *img, struct fz_edit *e, uint32_t sel, uint32_t off,
		    uint32_t v, char *desc, size_t dl)
{
	uint32_t slot = (v & 8) ? 0 : sel % 4, z = (sel >> 2) % img->nr_zones;
	uint64_t at = img->jrnl_off + (uint64_t)slot * sizeof(struct emu_jrec), zwp;
	struct emu_jrec r = {0};
	struct emu_zent ze;
	uint8_t *b;

	/* mostly slot 0: the journal is the prefix of records of the current generation */
	if (fz_pread(img->fd, &ze, sizeof(ze), img->table_off + (uint64_t)z * sizeof(ze)) ||
	    !(b = edit_block(img, e, at, 0)))
		return;
	zwp = (v & 1) ? ze.wp : (uint64_t)(off % 64) * BLK;
	r.gen = (v & 2) ? img->generation : pick_value(img, img->generation, v >> 2, 0);
	r.zone = (v & 4) ? z : (uint32_t)pick_value(img, z, v >> 3, 0);
	r.off = (uint64_t)z * img->zone_size + zwp;
	r.len = (uint64_t)(1 + (off >> 6) % 64) * BLK;
	r.epoch = ze.epoch;
	memcpy(b + at % BLK, &r, sizeof(r));
	put_val(b + at % BLK + offsetof(struct emu_jrec, crc), 4,
		emu_crc_of(b + at % BLK, sizeof(r), offsetof(struct emu_jrec, crc)));
	e->emu_meta = 1;
	if (desc)
		snprintf(desc, dl, "emu_jrec[%u]: gen %llu zone %u off %#llx len %llu", slot,
			 (unsigned long long)r.gen, r.zone, (unsigned long long)r.off,
			 (unsigned long long)r.len);
}

/* Raw bytes anywhere: the header, the zone table, the journal, or the device's blocks. */
static void op_file_raw(struct fz_img *img, struct fz_edit *e, uint32_t sel, uint32_t off,
			uint32_t v, char *desc, size_t dl)
{
	uint64_t at;
	uint8_t *b;

	switch (sel & 3) {
	case 0: at = off % BLK; break;
	case 1: at = img->table_off + off % (img->nr_zones * sizeof(struct emu_zent)); break;
	case 2: at = img->meta[(sel >> 2) % img->nmeta]; at = dev_foff(img, (uint32_t)at) + off % BLK;
		break;
	default: at = ((uint64_t)(sel >> 2) << 16 | off) % img->file_len; break;
	}
	if (!(b = edit_block(img, e, at, 0)))
		return;
	if (v & 0x800)
		b[at % BLK] ^= (uint8_t)(1u << (v & 7));
	else
		b[at % BLK] = (uint8_t)v;
	if (at < img->data_off)
		e->emu_meta = 1;
	if (desc)
		snprintf(desc, dl, "raw byte at file offset %#llx", (unsigned long long)at);
}

/* One metadata block copied over another of the same kind (a stale or foreign copy). */
static void op_copy(struct fz_img *img, struct fz_edit *e, uint32_t sel, uint32_t off,
		    char *desc, size_t dl)
{
	int i = pick_meta(img, sel), j;
	uint8_t *b;

	if (i < 0)
		return;
	j = pick_meta(img, sel + (off << 16)); /* a block of the same bucket, most often */
	if (j < 0 || i == j || img->kind[i] != img->kind[j] ||
	    !(b = edit_block(img, e, dev_foff(img, img->meta[j]), 1)) ||
	    fz_pread(img->fd, b, BLK, dev_foff(img, img->meta[i])))
		return;
	if (desc)
		snprintf(desc, dl, "%s block %u copied over block %u", zlfs_kind_name(img->kind[i]),
			 img->meta[i], img->meta[j]);
}

void fz_apply(struct fz_img *img, struct fz_edit *e, const uint8_t op[FZ_OP_SIZE], char *desc,
	      size_t dl)
{
	uint32_t sel = (uint32_t)(op[1] | op[2] << 8), off = (uint32_t)(op[3] | op[4] << 8);
	uint32_t v = (uint32_t)(op[5] | op[6] << 8 | op[7] << 16);

	if (desc && dl)
		desc[0] = 0;
	if (!img->nmeta)
		return;
	switch (op[0] % OP_NCODES) {
	case OP_META_FIELD:
	case OP_META_BYTES:
	case OP_META_RAW: op_meta(img, e, op[0] % OP_NCODES, sel, off, v, desc, dl); break;
	case OP_PACK: op_pack(img, e, sel, off, v, desc, dl); break;
	case OP_SUPER: op_super(img, e, off, v, desc, dl); break;
	case OP_EMU_HDR:
	case OP_ZENT: op_emu(img, e, op[0] % OP_NCODES, sel, off, v, desc, dl); break;
	case OP_JREC: op_jrec(img, e, sel, off, v, desc, dl); break;
	case OP_FILE_RAW: op_file_raw(img, e, sel, off, v, desc, dl); break;
	default: op_copy(img, e, sel, off, desc, dl); break;
	}
}

/* ---- a named field, set by hand (fuzz_mutate set) ------------------------------------------ */

static const struct {
	const char *name;
	unsigned kind;
} kind_names[] = {
	{"emu_hdr", 0}, {"emu_zent", ZLFS_KIND_MAX}, {"super", ZLFS_KIND_SUPER},
	{"cp_head", ZLFS_KIND_CP_HEAD}, {"cp_tail", ZLFS_KIND_CP_TAIL},
	{"cp_summary", ZLFS_KIND_CP_SUMMARY}, {"orphan", ZLFS_KIND_CP_ORPHAN},
	{"remap", ZLFS_KIND_CP_REMAP}, {"nat", ZLFS_KIND_NAT}, {"sit", ZLFS_KIND_SIT},
	{"map", ZLFS_KIND_MAP}, {"summary", ZLFS_KIND_SUMMARY}, {"inode", ZLFS_KIND_INODE},
	{"dnode", ZLFS_KIND_DNODE}, {"indnode", ZLFS_KIND_INDNODE}, {"xattr", ZLFS_KIND_XATTR},
	{"xvalue", ZLFS_KIND_XVALUE}, {"dentry", ZLFS_KIND_DENTRY},
	{"dmark", ZLFS_KIND_DMARK}, {"pack", ZLFS_KIND_IPACK}};

int fz_set(struct fz_img *img, struct fz_edit *e, const char *kname, const char *field,
	   uint32_t idx, uint64_t val, uint32_t where)
{
	const struct fz_field *f = NULL;
	unsigned kind = ~0u;
	uint64_t foff;
	uint8_t *b;

	for (unsigned i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (!strcmp(kname, kind_names[i].name))
			kind = kind_names[i].kind;
	if (kind == ~0u)
		return -EINVAL;
	f = fz_field_find(kind, field);
	if (!f || idx >= f->count)
		return -ENOENT;
	if (kind == 0)
		foff = 0;
	else if (kind == ZLFS_KIND_MAX)
		foff = img->table_off + (uint64_t)where * sizeof(struct emu_zent);
	else if (kind == ZLFS_KIND_SUPER && !where)
		foff = dev_foff(img, img->sb_blk);
	else if (kind == ZLFS_KIND_CP_HEAD && !where)
		foff = dev_foff(img, img->pack_head);
	else
		foff = dev_foff(img, where);
	b = edit_block(img, e, foff, kind && kind != ZLFS_KIND_MAX);
	if (!b)
		return -EINVAL;
	if (kind == ZLFS_KIND_MAX)
		b += foff % BLK;
	put_val(b + f->off + idx * f->stride, f->size, val);
	if (kind == 0)
		put_val(b + offsetof(struct emu_hdr, crc), 4,
			emu_crc_of(b, EMU_BLK, offsetof(struct emu_hdr, crc)));
	else if (kind == ZLFS_KIND_MAX)
		put_val(b + offsetof(struct emu_zent, crc), 4,
			emu_crc_of(b, sizeof(struct emu_zent), offsetof(struct emu_zent, crc)));
	if (kind == ZLFS_KIND_CP_HEAD && foff == dev_foff(img, img->pack_head))
		e->pack = 1;
	if (!kind || kind == ZLFS_KIND_MAX)
		e->emu_meta = 1;
	return 0;
}

/* ---- commit and undo ---------------------------------------------------------------------- */

static int pwrite_blk(int fd, const uint8_t *b, uint64_t off)
{
	return pwrite(fd, b, BLK, (off_t)off) == (ssize_t)BLK ? 0 : -EIO;
}

/* The newest pack, resealed whole: payload blocks carry the head's version, the tail names
 * the head's new checksum and closes the pack where its (maybe changed) length says. */
static void reseal_pack(struct fz_img *img, struct fz_edit *e)
{
	uint8_t *head = edit_block(img, e, dev_foff(img, img->pack_head), 1), *tail;
	const struct zlfs_cp_head *h = (const void *)head;
	uint64_t ver, zstart, zend;
	uint32_t n, tail_blk;

	if (!head)
		return;
	ver = le64_get(h->version);
	n = le32_get(h->pack_blocks);
	zstart = img->pack_head / (img->zone_size / BLK) * (img->zone_size / BLK);
	zend = zstart + img->zone_cap / BLK;
	tail_blk = n >= 2 && img->pack_head + n - 1 < zend ? img->pack_head + n - 1
							    : img->pack_head + img->pack_blocks - 1;
	for (uint32_t b = img->pack_head + 1; b < tail_blk; b++) {
		uint8_t *p = NULL;

		for (int i = 0; i < e->n; i++)
			if (e->foff[i] == dev_foff(img, b))
				p = e->work[i];
		if (p) /* touched payload blocks carry the (maybe new) version */
			((struct zlfs_blkhdr *)p)->cp_ver = le64_put(ver);
	}
	for (int i = 0; i < e->n; i++)
		if (e->seal[i] && e->foff[i] >= img->data_off)
			zlfs_blk_seal(e->work[i], img->seed);
	tail = edit_block(img, e, dev_foff(img, tail_blk), 0);
	if (tail)
		zlfs_cp_tail_encode(ver, zlfs_blk_csum(head, img->seed), img->seed, tail);
}

int fz_edit_commit(struct fz_img *img, struct fz_edit *e)
{
	int ret = 0;

	if (e->pack)
		reseal_pack(img, e);
	for (int i = 0; i < e->n; i++) {
		if (e->seal[i] && e->foff[i] >= img->data_off)
			zlfs_blk_seal(e->work[i], img->seed);
		if (pwrite_blk(img->fd, e->work[i], e->foff[i]))
			ret = -EIO;
	}
	return ret;
}

void fz_edit_free(struct fz_edit *e)
{
	for (int i = 0; i < e->n; i++) {
		free(e->orig[i]);
		free(e->work[i]);
	}
	memset(e, 0, sizeof(*e));
}

int fz_edit_undo(struct fz_img *img, struct fz_edit *e)
{
	int ret = 0;

	for (int i = e->n - 1; i >= 0; i--)
		if (pwrite_blk(img->fd, e->orig[i], e->foff[i]))
			ret = -EIO;
	fz_edit_free(e);
	return ret;
}

/* ---- generated inputs ----------------------------------------------------------------------- */

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

void fz_gen_op(uint64_t *s, uint8_t op[FZ_OP_SIZE], int raw_ok)
{
	/* weights: fields of metadata and packs and the superblock most, the rest less */
	static const uint8_t codes[] = {
		OP_META_FIELD, OP_META_FIELD, OP_META_FIELD, OP_META_FIELD, OP_META_FIELD,
		OP_META_BYTES, OP_PACK, OP_PACK, OP_PACK, OP_SUPER, OP_SUPER, OP_SUPER, OP_EMU_HDR,
		OP_ZENT, OP_JREC, OP_COPY_BLOCK, OP_META_RAW, OP_FILE_RAW};
	uint64_t r = xorshift(s);
	unsigned n = sizeof(codes) - (raw_ok ? 0 : 2);

	op[0] = codes[r % n];
	r = xorshift(s);
	for (int i = 1; i < FZ_OP_SIZE; i++)
		op[i] = (uint8_t)(r >> (8 * i));
}

