/*
 * format_names.c - the legal range of the names a device holds: directory blocks and the
 * dentry marks fsync writes (see format.h, "Limits", and docs/format.md's table); the part of
 * format_check.c about names, apart so that neither passes the length a file may have.
 *
 * Owns: the hash a name is placed by, and the checks of a dentry block and of a dentry mark,
 * each answering 0 or -EUCLEAN with one line naming the field, its value and its range.
 * May call: why.c (zlfs_why), xxHash, libc.
 */
#include "format_int.h"

#include <xxhash.h>
#include <errno.h>
#include <string.h>

/* ---- directory blocks ----------------------------------------------------------------------- */

uint32_t zlfs_name_hash(const struct zlfs_sb_info *s, const void *name, size_t len)
{
	return (uint32_t)XXH3_64bits_withSeed(name, len, s->seed);
}

static int dt_ok(uint8_t t)
{
	return t == 1 || t == 2 || t == 4 || t == 6 || t == 8 || t == 10 || t == 12; /* DT_* */
}

static int slot_taken(const struct zlfs_dentry_block *b, uint32_t s)
{
	return !!(b->bitmap[s / 8] & (1u << (s % 8)));
}

int zlfs_dentry_check(const struct zlfs_sb_info *s, const void *blk, char *why, size_t len)
{
	const struct zlfs_dentry_block *b = blk;
	uint32_t slot = 0, i;

	for (i = ZLFS_DENTRY_SLOTS; i < sizeof(b->bitmap) * 8; i++)
		if (slot_taken(b, i))
			return bad(why, len, "dentry bitmap bit %u is past the %u slots", i,
				   ZLFS_DENTRY_SLOTS);
	while (slot < ZLFS_DENTRY_SLOTS) {
		const struct zlfs_dentry *d = &b->d[slot];
		uint32_t nl = le16_get(d->name_len), n = (nl + ZLFS_DENTRY_SLOT_LEN - 1) /
							   ZLFS_DENTRY_SLOT_LEN;

		if (!slot_taken(b, slot) || !nl) {
			slot++;
			continue;
		}
		if (nl > ZLFS_NAME_MAX)
			return RANGE(why, len, "dentry name_len", nl, 1, ZLFS_NAME_MAX);
		if (slot + n > ZLFS_DENTRY_SLOTS)
			return bad(why, len, "dentry at slot %u: name_len = %u needs %u slots, past the "
				   "block's %u", slot, nl, n, ZLFS_DENTRY_SLOTS);
		for (i = 1; i < n; i++)
			if (!slot_taken(b, slot + i))
				return bad(why, len, "dentry at slot %u: its name's slot %u is free in "
					   "the bitmap", slot, slot + i);
		if (!le32_get(d->ino) || le32_get(d->ino) >= s->max_nid)
			return bad(why, len, "dentry at slot %u: ino = %u, out of range [1, %u]", slot,
				   le32_get(d->ino), s->max_nid - 1);
		if (!dt_ok(d->type))
			return bad(why, len, "dentry at slot %u: type = %u is no DT_* file type", slot,
				   d->type);
		/* a lookup hashes the name it is given: an entry under another hash is found by
		 * readdir and by no lookup, so it could never be opened or removed */
		if (le32_get(d->hash) != zlfs_name_hash(s, b->name[slot], nl))
			return bad(why, len, "dentry at slot %u: hash = 0x%08x is not its name's", slot,
				   le32_get(d->hash));
		slot += n;
	}
	return 0;
}

/* ---- dentry marks --------------------------------------------------------------------------- */

int zlfs_dmark_check(const struct zlfs_sb_info *s, const void *blk, char *why, size_t len)
{
	const struct zlfs_dentry_mark *m = blk;
	uint32_t ino = le32_get(m->hdr.ino), parent = le32_get(m->parent_ino);
	uint32_t nl = le16_get(m->name_len), i;

	if (!(s->feat_incompat & ZLFS_FEAT_INCOMPAT_DENTRY_MARK))
		return bad(why, len, "dentry mark on a filesystem without the DENTRY_MARK feature");
	if (!ino || ino >= s->max_nid || le32_get(m->hdr.index) != ino)
		return bad(why, len, "dentry mark: index %u, ino %u (one inode in [1, %u])",
			   le32_get(m->hdr.index), ino, s->max_nid - 1);
	if (!parent || parent >= s->max_nid || parent == ino)
		return RANGE(why, len, "dentry mark parent_ino", parent, 1, s->max_nid - 1);
	if (!nl || nl > ZLFS_NAME_MAX)
		return RANGE(why, len, "dentry mark name_len", nl, 1, ZLFS_NAME_MAX);
	if (m->type != 8 || m->reserved)
		return bad(why, len, "dentry mark: type %u, reserved %u (DT_REG and 0)", m->type,
			   m->reserved);
	if ((nl == 1 && m->name[0] == '.') || (nl == 2 && !memcmp(m->name, "..", 2)))
		return bad(why, len, "dentry mark: the name is a dot entry");
	for (i = 0; i < sizeof(m->name); i++)
		if (i < nl ? !m->name[i] || m->name[i] == '/' : !!m->name[i])
			return bad(why, len, "dentry mark: name byte %u is 0x%02x", i, m->name[i]);
	for (i = 0; i < sizeof(m->pad); i++)
		if (m->pad[i])
			return bad(why, len, "dentry mark: padding byte %u is not zero", i);
	return 0;
}
