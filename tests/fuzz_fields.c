/*
 * fuzz_fields.c - the field tables of every structure a device holds (zlfs blocks from
 * format.h, the emulator's header and zone table entry), naming a byte of a block by its
 * field, and explaining how two images differ, field by field (fuzz_mutate explain).
 * The emulator's structures come from its private header, as in fuzz_mut.c.
 * May call: fuzz_mut.h, format.h, zdev_emu_impl.h (structures only), libc.
 */
#include "fuzz_mut.h"
#include "zdev_emu_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BLK ZLFS_BLOCK_SIZE

/* ---- field tables ------------------------------------------------------------------------ */


#define F(T, m) {#m, offsetof(T, m), sizeof(((T *)0)->m), 1, 0}
#define FA(T, m, n, st) {#m, offsetof(T, m), sizeof(((T *)0)->m[0]), n, st}
#define FS(T, a, m, n) {#a "." #m, offsetof(T, a[0].m), sizeof(((T *)0)->a[0].m), n, \
			 sizeof(((T *)0)->a[0])}
#define END {NULL, 0, 0, 0, 0}

static const struct fz_field f_hdr[] = {
	F(struct zlfs_blkhdr, magic), F(struct zlfs_blkhdr, kind), F(struct zlfs_blkhdr, flags),
	F(struct zlfs_blkhdr, index), F(struct zlfs_blkhdr, ino), F(struct zlfs_blkhdr, cp_ver),
	F(struct zlfs_blkhdr, seq), END};

static const struct fz_field f_super[] = {
	F(struct zlfs_super, revision), F(struct zlfs_super, min_revision),
	F(struct zlfs_super, feat_compat), F(struct zlfs_super, feat_ro_compat),
	F(struct zlfs_super, feat_incompat), F(struct zlfs_super, sb_seq),
	F(struct zlfs_super, block_size), F(struct zlfs_super, dev_lblock_size),
	F(struct zlfs_super, zone_size), F(struct zlfs_super, zone_capacity),
	F(struct zlfs_super, nr_zones), F(struct zlfs_super, nr_conv),
	F(struct zlfs_super, max_open), F(struct zlfs_super, max_active),
	F(struct zlfs_super, seg_blocks), F(struct zlfs_super, segs_per_zone),
	FA(struct zlfs_super, sb_zone, 2, 4), FA(struct zlfs_super, cp_zone, 2, 4),
	F(struct zlfs_super, meta_zone_first), F(struct zlfs_super, meta_zones),
	F(struct zlfs_super, main_zone_first), F(struct zlfs_super, main_zones),
	F(struct zlfs_super, nr_logs), F(struct zlfs_super, ovp_percent),
	F(struct zlfs_super, reserved_zones), F(struct zlfs_super, max_nid),
	F(struct zlfs_super, nat_blocks), F(struct zlfs_super, sit_blocks),
	F(struct zlfs_super, root_ino), F(struct zlfs_super, enc_kdf),
	F(struct zlfs_super, scrypt_r), F(struct zlfs_super, scrypt_p),
	F(struct zlfs_super, scrypt_n), END};

static const struct fz_field f_cp_head[] = {
	F(struct zlfs_cp_head, version), F(struct zlfs_cp_head, flags),
	F(struct zlfs_cp_head, pack_blocks), F(struct zlfs_cp_head, nr_logs),
	F(struct zlfs_cp_head, nr_summaries), F(struct zlfs_cp_head, nr_orphan_blocks),
	F(struct zlfs_cp_head, nr_orphans), F(struct zlfs_cp_head, meta_zone),
	F(struct zlfs_cp_head, meta_next_blk), F(struct zlfs_cp_head, nr_map),
	F(struct zlfs_cp_head, next_free_nid),
	FS(struct zlfs_cp_head, logs, zone, ZLFS_NR_LOG_TYPES_R1),
	FS(struct zlfs_cp_head, logs, next_blk, ZLFS_NR_LOG_TYPES_R1),
	FS(struct zlfs_cp_head, logs, nr_entries, ZLFS_NR_LOG_TYPES_R1),
	F(struct zlfs_cp_head, valid_blocks), F(struct zlfs_cp_head, valid_nodes),
	F(struct zlfs_cp_head, valid_inodes), F(struct zlfs_cp_head, seq),
	F(struct zlfs_cp_head, prealloc_blocks),
	FS(struct zlfs_cp_head, logs_r2, zone, ZLFS_NR_LOG_TYPES - ZLFS_NR_LOG_TYPES_R1),
	FS(struct zlfs_cp_head, logs_r2, next_blk, ZLFS_NR_LOG_TYPES - ZLFS_NR_LOG_TYPES_R1),
	FS(struct zlfs_cp_head, logs_r2, nr_entries, ZLFS_NR_LOG_TYPES - ZLFS_NR_LOG_TYPES_R1),
	FA(struct zlfs_cp_head, map_addr, ZLFS_CP_MAP_MAX, 4),
	F(struct zlfs_cp_head, nr_remap_blocks), F(struct zlfs_cp_head, nr_remaps), END};

static const struct fz_field f_cp_tail[] = {
	F(struct zlfs_cp_tail, version), F(struct zlfs_cp_tail, head_csum), END};

static const struct fz_field f_summary[] = {
	FA(struct zlfs_summary, nid, ZLFS_SUM_ENTRIES, 4),
	FA(struct zlfs_summary, ofs, ZLFS_SUM_ENTRIES, 2), END};

static const struct fz_field f_orphan[] = {
	FA(struct zlfs_cp_orphan, ino, ZLFS_ORPHANS_PER_BLOCK, 4), END};

static const struct fz_field f_remap[] = {
	FS(struct zlfs_cp_remap, e, addr, ZLFS_REMAPS_PER_BLOCK),
	FS(struct zlfs_cp_remap, e, nid, ZLFS_REMAPS_PER_BLOCK),
	FS(struct zlfs_cp_remap, e, ofs, ZLFS_REMAPS_PER_BLOCK), END};

static const struct fz_field f_nat[] = {
	FS(struct zlfs_nat_block, e, blkaddr, ZLFS_NAT_PER_BLOCK),
	FS(struct zlfs_nat_block, e, ino, ZLFS_NAT_PER_BLOCK),
	FS(struct zlfs_nat_block, e, version, ZLFS_NAT_PER_BLOCK), END};

static const struct fz_field f_sit[] = {
	FS(struct zlfs_sit_block, e, valid, ZLFS_SIT_PER_BLOCK),
	FS(struct zlfs_sit_block, e, log, ZLFS_SIT_PER_BLOCK),
	FS(struct zlfs_sit_block, e, flags, ZLFS_SIT_PER_BLOCK),
	FS(struct zlfs_sit_block, e, mtime, ZLFS_SIT_PER_BLOCK),
	FS(struct zlfs_sit_block, e, bitmap, ZLFS_SIT_PER_BLOCK), END};

static const struct fz_field f_map[] = {FA(struct zlfs_map_block, addr, ZLFS_MAP_PER_BLOCK, 4),
					 END};

static const struct fz_field f_inode[] = {
	F(struct zlfs_inode, ofs), F(struct zlfs_inode, mode), F(struct zlfs_inode, uid),
	F(struct zlfs_inode, nlink), F(struct zlfs_inode, flags), F(struct zlfs_inode, generation),
	F(struct zlfs_inode, xattr_nid), F(struct zlfs_inode, parent_ino),
	F(struct zlfs_inode, rdev), F(struct zlfs_inode, dir_depth),
	F(struct zlfs_inode, inline_size), F(struct zlfs_inode, size),
	F(struct zlfs_inode, blocks), FA(struct zlfs_inode, nonce, 16, 1),
	FA(struct zlfs_inode, nid, ZLFS_INODE_NIDS, 4), F(struct zlfs_inode, dir_entries),
	FA(struct zlfs_inode, addr, ZLFS_INODE_ADDRS, 4), END};

static const struct fz_field f_node[] = {F(struct zlfs_node, ofs),
					  FA(struct zlfs_node, ptr, ZLFS_NODE_ADDRS, 4), END};

static const struct fz_field f_xattr[] = {
	F(struct zlfs_xattr_block, ofs), F(struct zlfs_xattr_block, used),
	FA(struct zlfs_xattr_block, data, ZLFS_PAYLOAD - 8, 1), END};

static const struct fz_field f_xnode[] = { /* XATTR_NODES: a value node (and chain node) */
	F(struct zlfs_xattr_node, ofs), F(struct zlfs_xattr_node, used),
	F(struct zlfs_xattr_node, next), F(struct zlfs_xattr_node, reserved),
	FA(struct zlfs_xattr_node, data, ZLFS_XATTR_NODE_SPACE, 1), END};

static const struct fz_field f_dentry[] = {
	FA(struct zlfs_dentry_block, bitmap, 32, 1),
	FS(struct zlfs_dentry_block, d, hash, ZLFS_DENTRY_SLOTS),
	FS(struct zlfs_dentry_block, d, ino, ZLFS_DENTRY_SLOTS),
	FS(struct zlfs_dentry_block, d, name_len, ZLFS_DENTRY_SLOTS),
	FS(struct zlfs_dentry_block, d, type, ZLFS_DENTRY_SLOTS),
	{"name", offsetof(struct zlfs_dentry_block, name), 1,
	 ZLFS_DENTRY_SLOTS * ZLFS_DENTRY_SLOT_LEN, 1}, END};

static const struct fz_field f_dmark[] = { /* DENTRY_MARK: what recovery links */
	F(struct zlfs_dentry_mark, parent_ino), F(struct zlfs_dentry_mark, generation),
	F(struct zlfs_dentry_mark, name_len), F(struct zlfs_dentry_mark, type),
	F(struct zlfs_dentry_mark, reserved),
	FA(struct zlfs_dentry_mark, name, ZLFS_NAME_MAX + 1, 1),
	FA(struct zlfs_dentry_mark, pad, 16, 1), END};

static const struct fz_field f_pack[] = { /* PACKED_INODES: the slots, each an inode */
	F(struct zlfs_inode_pack, nr_slots), F(struct zlfs_inode_pack, span),
	FS(struct zlfs_inode_pack, slot, nid, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, mode, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, nlink, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, flags, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, xattr_nid, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, parent_ino, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, inline_size, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, size, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, blocks, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, dir_depth, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, dir_entries, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, cluster_log, ZLFS_PACK_SLOTS),
	FS(struct zlfs_inode_pack, slot, addr[0], ZLFS_PACK_SLOTS),
	FA(struct zlfs_inode_pack, pad, 16, 1), END};

/* The emulator's header (kind 0 here) and a zone table entry (ZLFS_KIND_MAX). */
static const struct fz_field f_emu_hdr[] = { /* the region offsets only rarely: they are
					     * checked against the geometry, one rule for all */
	F(struct emu_hdr, lblock_size), F(struct emu_hdr, nr_zones), F(struct emu_hdr, nr_conv),
	F(struct emu_hdr, crc), F(struct emu_hdr, max_open), F(struct emu_hdr, max_active), F(struct emu_hdr, jslots),
	F(struct emu_hdr, zone_size), F(struct emu_hdr, zone_capacity),
	F(struct emu_hdr, generation), FS(struct emu_hdr, faults, kind, EMU_MAX_FAULTS),
	FS(struct emu_hdr, faults, off, EMU_MAX_FAULTS), F(struct emu_hdr, timing.dies),
	F(struct emu_hdr, timing.prog_unit), F(struct emu_hdr, timing.block),
	F(struct emu_hdr, mode), F(struct emu_hdr, data_off), END};

static const struct fz_field f_zent[] = {F(struct emu_zent, wp), F(struct emu_zent, epoch),
					  F(struct emu_zent, cond), END};

const struct fz_field *fz_fields_of(unsigned kind)
{
	switch (kind) {
	case 0: return f_emu_hdr;
	case ZLFS_KIND_SUPER: return f_super;
	case ZLFS_KIND_CP_HEAD: return f_cp_head;
	case ZLFS_KIND_CP_TAIL: return f_cp_tail;
	case ZLFS_KIND_CP_SUMMARY:
	case ZLFS_KIND_SUMMARY: return f_summary;
	case ZLFS_KIND_CP_ORPHAN: return f_orphan;
	case ZLFS_KIND_CP_REMAP: return f_remap;
	case ZLFS_KIND_NAT: return f_nat;
	case ZLFS_KIND_SIT: return f_sit;
	case ZLFS_KIND_MAP: return f_map;
	case ZLFS_KIND_INODE: return f_inode;
	case ZLFS_KIND_DNODE:
	case ZLFS_KIND_INDNODE: return f_node;
	case ZLFS_KIND_XATTR: return f_xattr;
	case ZLFS_KIND_XVALUE: return f_xnode;
	case ZLFS_KIND_DENTRY: return f_dentry;
	case ZLFS_KIND_DMARK: return f_dmark;
	case ZLFS_KIND_IPACK: return f_pack;
	case ZLFS_KIND_MAX: return f_zent;
	default: return f_hdr;
	}
}

static const char *struct_name(unsigned kind)
{
	if (kind == 0)
		return "emu_hdr";
	if (kind == ZLFS_KIND_MAX)
		return "emu_zent";
	return zlfs_kind_name(kind);
}

void fz_field_name(unsigned kind, uint32_t off, char *buf, size_t len)
{
	for (int pass = 0; pass < 2; pass++) {
		const struct fz_field *f = pass ? f_hdr : fz_fields_of(kind);

		if (pass && (kind == 0 || kind == ZLFS_KIND_MAX))
			break;
		for (; f->name; f++) {
			uint32_t span = f->count > 1 ? (uint32_t)(f->count - 1) * f->stride + f->size
						     : f->size;

			if (off < f->off || off >= f->off + span)
				continue;
			if (f->count > 1 && (off - f->off) % f->stride < f->size) {
				snprintf(buf, len, "%s.%s[%u]", struct_name(kind), f->name,
					 (off - f->off) / f->stride);
				return;
			}
			if (f->count <= 1) {
				snprintf(buf, len, "%s.%s", struct_name(kind), f->name);
				return;
			}
		}
	}
	if (kind && kind != ZLFS_KIND_MAX && off >= ZLFS_CSUM_OFF)
		snprintf(buf, len, "%s.csum", struct_name(kind));
	else
		snprintf(buf, len, "%s+%u", struct_name(kind), off);
}

uint32_t fz_nfields(const struct fz_field *f)
{
	uint32_t n = 0;

	while (f[n].name)
		n++;
	return n;
}

const struct fz_field *fz_field_find(unsigned kind, const char *name)
{
	const struct fz_field *f;

	for (f = fz_fields_of(kind); f->name; f++)
		if (!strcmp(f->name, name))
			return f;
	if (kind && kind != ZLFS_KIND_MAX)
		for (f = f_hdr; f->name; f++)
			if (!strcmp(f->name, name))
				return f;
	return NULL;
}

/* ---- explaining a difference ------------------------------------------------------------------ */

static void explain_block(const struct fz_img *img, uint64_t foff, const uint8_t *a,
			  const uint8_t *b, FILE *out)
{
	unsigned kind = 0;
	char name[96], last[96] = "";

	if (foff >= img->data_off) {
		kind = le16_get(((const struct zlfs_blkhdr *)a)->kind);
		if (!kind || kind >= ZLFS_KIND_MAX)
			kind = le16_get(((const struct zlfs_blkhdr *)b)->kind);
		fprintf(out, "device block %llu (zone %llu), %s:",
			(unsigned long long)((foff - img->data_off) / BLK),
			(unsigned long long)((foff - img->data_off) / img->zone_size),
			kind && kind < ZLFS_KIND_MAX ? zlfs_kind_name(kind) : "data/unknown");
	} else if (foff == 0) {
		fprintf(out, "emulator header:");
	} else if (foff < img->jrnl_off) {
		kind = ZLFS_KIND_MAX;
		fprintf(out, "emulator zone table block %llu:",
			(unsigned long long)((foff - img->table_off) / BLK));
	} else {
		fprintf(out, "emulator journal/undo at %#llx:", (unsigned long long)foff);
		kind = ~0u;
	}
	for (uint32_t o = 0; o < BLK; o++) {
		uint32_t rel = o;

		if (a[o] == b[o])
			continue;
		if (kind == ZLFS_KIND_MAX) {
			fprintf(out, " zone %llu", (unsigned long long)((foff - img->table_off + o) / 32));
			rel = o % 32;
		}
		if (kind == ~0u)
			snprintf(name, sizeof(name), "+%u", o);
		else if (foff >= img->data_off && (!kind || kind >= ZLFS_KIND_MAX))
			snprintf(name, sizeof(name), "+%u", o);
		else
			fz_field_name(kind, rel, name, sizeof(name));
		if (strcmp(name, last) || kind == ZLFS_KIND_MAX)
			fprintf(out, " %s", name);
		snprintf(last, sizeof(last), "%s", name);
	}
	fprintf(out, "\n");
}

int fz_explain(const char *pa, const char *pb, FILE *out)
{
	struct fz_img img;
	uint8_t a[BLK], b[BLK];
	int fb = open(pb, O_RDONLY), ret = fz_img_open(&img, pa), n = 0;

	if (ret || fb < 0) {
		if (fb >= 0)
			close(fb);
		fz_img_close(&img);
		return ret ? ret : -errno;
	}
	for (uint64_t off = 0; off < img.file_len; off += BLK) {
		if (fz_pread(img.fd, a, BLK, off) || fz_pread(fb, b, BLK, off))
			break;
		if (memcmp(a, b, BLK)) {
			explain_block(&img, off, a, b, out);
			n++;
		}
	}
	close(fb);
	fz_img_close(&img);
	return n;
}
