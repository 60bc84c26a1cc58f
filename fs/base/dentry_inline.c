/*
 * dentry_inline.c - inline directories (INLINE_DENTRIES feature): the encoding of a dentry
 * block's entries into the first ZLFS_DENTRY_INLINE_SIZE bytes of a directory inode's address
 * area (docs/format.md, "Inline directories").
 *
 * Owns: the encoding and its decoding back into a whole dentry block. Decoding reads a device
 * (hostile input): every count, slot and length is checked against the area and the block
 * before it is used, and anything but the one canonical encoding is refused. What the
 * decoded entries say (inode range, type, hash, names) is zlfs_dentry_check's, as for a block.
 * Also the inode check of an inline directory (format_check.c calls it): the rest of its
 * address area, its node ids and its block count are zero.
 * May call: why.c (zlfs_why), libc.
 */
#include "format_int.h"

#include <string.h>
#include <sys/stat.h>

/* One entry's head in the area: slot, name_len, type, le32 hash, le32 ino; its name follows. */
#define HEAD 11u

static uint32_t slots_of(uint32_t nl)
{
	return (nl + ZLFS_DENTRY_SLOT_LEN - 1) / ZLFS_DENTRY_SLOT_LEN;
}

static int taken(const struct zlfs_dentry_block *b, uint32_t s)
{
	return !!(b->bitmap[s / 8] & (1u << (s % 8)));
}

static void put32(uint8_t *p, uint32_t v)
{
	le32 x = le32_put(v);

	memcpy(p, &x, 4);
}

static uint32_t get32(const uint8_t *p)
{
	le32 x;

	memcpy(&x, p, 4);
	return le32_get(x);
}

int zlfs_dentry_inline_encode(const struct zlfs_dentry_block *b,
			      uint8_t out[ZLFS_DENTRY_INLINE_SIZE])
{
	uint32_t s = 0, pos = 1, count = 0;

	memset(out, 0, ZLFS_DENTRY_INLINE_SIZE);
	while (s < ZLFS_DENTRY_SLOTS) {
		uint32_t nl = le16_get(b->d[s].name_len);

		if (!taken(b, s) || !nl) {
			s++;
			continue;
		}
		/* what the encoding cannot say exactly stays a block */
		if (nl > ZLFS_NAME_MAX || s + slots_of(nl) > ZLFS_DENTRY_SLOTS ||
		    pos + HEAD + nl > ZLFS_DENTRY_INLINE_SIZE || count == 255)
			return -E2BIG;
		out[pos] = (uint8_t)s;
		out[pos + 1] = (uint8_t)nl;
		out[pos + 2] = b->d[s].type;
		put32(out + pos + 3, le32_get(b->d[s].hash));
		put32(out + pos + 7, le32_get(b->d[s].ino));
		memcpy(out + pos + HEAD, b->name[s], nl);
		pos += HEAD + nl;
		count++;
		s += slots_of(nl);
	}
	out[0] = (uint8_t)count;
	return 0;
}

/* One entry at POS of IN into B: its slots must be free and after NEXT (the first slot past
 * the previous entry's name). *POS and *NEXT move past it. */
static int decode_one(const uint8_t *in, uint32_t *pos, uint32_t *next,
		      struct zlfs_dentry_block *b, char *why, size_t len)
{
	uint32_t p = *pos, s, nl, i;

	if (p + HEAD > ZLFS_DENTRY_INLINE_SIZE)
		return bad(why, len, "inline dentry at byte %u: its head runs past the %u-byte area",
			   p, ZLFS_DENTRY_INLINE_SIZE);
	s = in[p];
	nl = in[p + 1];
	if (!nl)
		return RANGE(why, len, "inline dentry name_len", nl, 1, ZLFS_NAME_MAX);
	if (p + HEAD + nl > ZLFS_DENTRY_INLINE_SIZE)
		return bad(why, len, "inline dentry at byte %u: name_len = %u runs past the %u-byte "
			   "area", p, nl, ZLFS_DENTRY_INLINE_SIZE);
	if (s < *next || s + slots_of(nl) > ZLFS_DENTRY_SLOTS)
		return bad(why, len, "inline dentry at byte %u: slot %u (%u slots) overlaps the entry "
			   "before it or runs past slot %u", p, s, slots_of(nl),
			   ZLFS_DENTRY_SLOTS - 1);
	for (i = 0; i < slots_of(nl); i++)
		b->bitmap[(s + i) / 8] |= (uint8_t)(1u << ((s + i) % 8));
	b->d[s].name_len = le16_put((uint16_t)nl);
	b->d[s].type = in[p + 2];
	b->d[s].hash = le32_put(get32(in + p + 3));
	b->d[s].ino = le32_put(get32(in + p + 7));
	memcpy(b->name[s], in + p + HEAD, nl);
	*pos = p + HEAD + nl;
	*next = s + slots_of(nl);
	return 0;
}

int zlfs_dentry_inline_decode(const uint8_t in[ZLFS_DENTRY_INLINE_SIZE],
			      struct zlfs_dentry_block *b, char *why, size_t len)
{
	uint32_t count = in[0], pos = 1, next = 0, i;

	memset(b->bitmap, 0, sizeof(b->bitmap));
	memset(b->d, 0, sizeof(b->d));
	memset(b->name, 0, sizeof(b->name));
	for (i = 0; i < count; i++)
		if (decode_one(in, &pos, &next, b, why, len))
			return -EUCLEAN;
	for (i = pos; i < ZLFS_DENTRY_INLINE_SIZE; i++)
		if (in[i])
			return bad(why, len, "inline dentries: byte %u past the %u entries is not zero",
				   i, count);
	return 0;
}

int zlfs_inode_check_inline_dentry(const struct zlfs_sb_info *s, const struct zlfs_inode *in,
				   char *why, size_t len)
{
	const uint8_t *area = (const uint8_t *)in->addr;
	uint32_t i;

	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_INLINE_DENTRIES))
		return bad(why, len, "inode flags: inline dentries on a filesystem without the "
			   "INLINE_DENTRIES feature");
	if (!S_ISDIR(le32_get(in->mode)) || (le32_get(in->flags) & ZLFS_IFLAG_INLINE))
		return bad(why, len, "inode flags: inline dentries on a file of mode 0%o%s (only "
			   "directories have them)", le32_get(in->mode),
			   (le32_get(in->flags) & ZLFS_IFLAG_INLINE) ? " with INLINE" : "");
	/* block 0 is the one block: level 0 and nothing deeper (dir.c's levels) */
	if (le32_get(in->dir_depth) != 1)
		return RANGE(why, len, "inode dir_depth of an inline directory",
			     le32_get(in->dir_depth), 1, 1);
	if (le64_get(in->blocks))
		return RANGE(why, len, "inode blocks of an inline directory", le64_get(in->blocks),
			     0, 0);
	for (i = 0; i < ZLFS_INODE_NIDS; i++)
		if (le32_get(in->nid[i]))
			return RANGE(why, len, "inode nid[] of an inline directory",
				     le32_get(in->nid[i]), 0, 0);
	for (i = ZLFS_DENTRY_INLINE_SIZE; i < sizeof(in->addr); i++)
		if (area[i])
			return bad(why, len, "inode addr: byte %u of an inline directory is not zero "
				   "(only the first %u bytes hold entries)", i,
				   ZLFS_DENTRY_INLINE_SIZE);
	return 0;
}
