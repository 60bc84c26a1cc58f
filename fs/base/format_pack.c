/*
 * format_pack.c - inode packs (PACKED_INODES): a slot's conversion to and from the 4 KiB
 * inode it stands for, and the checks a pack read from a device must pass.
 *
 * Owns: zlfs_pack_positions and zlfs_pack_fill (which inodes fit a slot, spanning or not, and
 * how), zlfs_pack_expand (the inverse), zlfs_pack_span and zlfs_pack_check (format_pack.h;
 * docs/format.md, "Inode packs").
 * May call: format_check.c's zlfs_node_check (each slot is checked as the inode it expands
 * to), libc. Pure functions of the superblock and the block.
 */
#include "format_int.h"

#include <string.h>

/* The fields a slot and an inode share, in one list so that fill and expand cannot drift. */
#define PACK_FIELDS(X)                                                                         \
	X(generation) X(mode) X(uid) X(gid) X(nlink) X(flags) X(xattr_nid) X(parent_ino)         \
	X(rdev) X(dir_depth) X(inline_size) X(dir_entries) X(compress_alg) X(cluster_log)        \
	X(compress_pad) X(size) X(blocks) X(atime_ns) X(mtime_ns) X(ctime_ns) X(crtime_ns)

/* The bytes of IN's address area up to its last nonzero one: 8 bytes at a time from the end
 * (the daemon asks at every change of a dirty inode: node_owe_again). */
static uint32_t area_used(const struct zlfs_inode *in)
{
	const uint8_t *b = (const uint8_t *)in->addr;
	uint32_t n = ZLFS_INODE_ADDRS * 4;
	uint64_t w;

	for (; n >= 8; n -= 8) {
		memcpy(&w, b + n - 8, sizeof(w));
		if (w)
			break;
	}
	while (n && !b[n - 1])
		n--;
	return n;
}

uint32_t zlfs_pack_positions(const void *inode)
{
	const struct zlfs_inode *in = inode;
	uint32_t i, used;

	if (le32_get(in->ofs) || le32_get(in->reserved)) /* fsync_nodes: a marker's, never packed */
		return 0;
	for (i = 0; i < ZLFS_INODE_NIDS; i++)
		if (in->nid[i])
			return 0;
	used = area_used(in);
	if (used <= ZLFS_PACK_ADDRS * 4)
		return 1;
	if (used > ZLFS_PACK_SPAN_MAX)
		return 0;
	return 1 + (used - ZLFS_PACK_ADDRS * 4 + ZLFS_PACK_SPAN_BYTES - 1) / ZLFS_PACK_SPAN_BYTES;
}

uint32_t zlfs_pack_span(const void *pack, uint32_t pos)
{
	const struct zlfs_inode_pack *pk = pack;
	uint32_t n = le32_get(pk->nr_slots), span = le32_get(pk->span), k = 1;

	while (pos + k < n && pos + k < ZLFS_PACK_SLOTS && ((span >> (pos + k)) & 1u))
		k++;
	return k;
}

int zlfs_pack_fill(void *pack, uint32_t pos, const void *inode, int span)
{
	struct zlfs_inode_pack *pk = pack;
	struct zlfs_pack_slot *p = &pk->slot[pos];
	const struct zlfs_inode *in = inode;
	uint32_t k = le16_get(in->hdr.kind) == ZLFS_KIND_INODE ? zlfs_pack_positions(in) : 0;
	const uint8_t *area = (const uint8_t *)in->addr;

	if (!k || (k > 1 && !span) || pos >= ZLFS_PACK_SLOTS || k > ZLFS_PACK_SLOTS - pos)
		return -E2BIG;
	memset(p, 0, k * sizeof(*p));
	p->nid = in->hdr.index;
#define X(f) p->f = in->f;
	PACK_FIELDS(X)
#undef X
	memcpy(p->nonce, in->nonce, sizeof(p->nonce));
	memcpy(p->addr, area, sizeof(p->addr));
	for (uint32_t j = 1; j < k; j++) { /* the rest of the area, raw, in the next positions */
		uint32_t from = ZLFS_PACK_ADDRS * 4 + (j - 1) * ZLFS_PACK_SPAN_BYTES;

		memcpy(&pk->slot[pos + j], area + from, ZLFS_PACK_SPAN_BYTES);
		pk->span = le32_put(le32_get(pk->span) | 1u << (pos + j));
	}
	return (int)k;
}

void zlfs_pack_expand(const void *pack, uint32_t pos, void *out)
{
	const struct zlfs_inode_pack *pk = pack;
	const struct zlfs_pack_slot *p = &pk->slot[pos];
	struct zlfs_inode *in = out;
	uint32_t k = zlfs_pack_span(pack, pos);

	memset(in, 0, sizeof(*in));
	in->hdr = pk->hdr;
	in->hdr.kind = le16_put(ZLFS_KIND_INODE);
	in->hdr.flags = 0;
	in->hdr.index = p->nid;
	in->hdr.ino = p->nid;
#define X(f) in->f = p->f;
	PACK_FIELDS(X)
#undef X
	memcpy(in->nonce, p->nonce, sizeof(p->nonce));
	memcpy(in->addr, p->addr, sizeof(p->addr));
	for (uint32_t j = 1; j < k; j++)
		memcpy((uint8_t *)in->addr + ZLFS_PACK_ADDRS * 4 + (j - 1) * ZLFS_PACK_SPAN_BYTES,
		       &pk->slot[pos + j], ZLFS_PACK_SPAN_BYTES);
}

static int all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* Slot I of PK, in use, as the inode it expands to. */
static int pack_slot_inode_check(const struct zlfs_sb_info *s, const struct zlfs_inode_pack *pk,
				 uint32_t i, char *why, size_t len)
{
	uint32_t nid = le32_get(pk->slot[i].nid);
	struct zlfs_inode in;
	char inner[160];

	zlfs_pack_expand(pk, i, &in);
	if (zlfs_node_check(s, nid, &in, inner, sizeof(inner)))
		return bad(why, len, "inode pack slot %u (inode %u): %s", i, nid, inner);
	return 0;
}

int zlfs_pack_check(const struct zlfs_sb_info *s, const void *blk, char *why, size_t len)
{
	const struct zlfs_inode_pack *pk = blk;

	if (zlfs_pack_check_head(s, blk, why, len))
		return -EUCLEAN;
	for (uint32_t i = 0; i < le32_get(pk->nr_slots); i++)
		if (zlfs_pack_is_slot(pk, i) && pack_slot_inode_check(s, pk, i, why, len))
			return -EUCLEAN;
	return 0;
}

/* The span bits of PK against its position count, and each span's last position. */
static int pack_check_spans(const struct zlfs_sb_info *s, const struct zlfs_inode_pack *pk,
			    uint32_t n, char *why, size_t len)
{
	uint32_t span = le32_get(pk->span), i, k;

	if (!span)
		return 0;
	if (!(zlfs_incompat(s) & ZLFS_FEAT_INCOMPAT_SPAN_SLOTS))
		return bad(why, len, "inode pack: span = 0x%x on a filesystem without SPAN_SLOTS",
			   span);
	if ((span & 1u) || (span >> n))
		return bad(why, len, "inode pack: span = 0x%x marks position 0 or one past nr_slots "
			   "= %u as a continuation", span, n);
	for (i = 0; i < n; i += k) {
		k = zlfs_pack_span(pk, i);
		if (k > 1 && all_zero(&pk->slot[i + k - 1], sizeof(pk->slot[0])))
			return bad(why, len, "inode pack slot %u spans %u positions, the last all zero "
				   "(a span is the fewest positions that hold its bytes)", i, k);
	}
	return 0;
}

int zlfs_pack_check_head(const struct zlfs_sb_info *s, const void *blk, char *why, size_t len)
{
	const struct zlfs_inode_pack *pk = blk;
	uint32_t n = le32_get(pk->nr_slots), i, prev = 0;

	if (!(s->feat_incompat & ZLFS_FEAT_INCOMPAT_PACKED_INODES))
		return bad(why, len, "inode pack on a filesystem without PACKED_INODES");
	if (le16_get(pk->hdr.kind) != ZLFS_KIND_IPACK || pk->hdr.flags || pk->hdr.index ||
	    pk->hdr.ino)
		return bad(why, len, "inode pack header: kind %u, flags 0x%x, index %u, ino %u "
			   "(a pack is kind %u with the other three 0)", le16_get(pk->hdr.kind),
			   le16_get(pk->hdr.flags), le32_get(pk->hdr.index), le32_get(pk->hdr.ino),
			   ZLFS_KIND_IPACK);
	if (n < 1 || n > ZLFS_PACK_SLOTS)
		return RANGE(why, len, "inode pack nr_slots", n, 1, ZLFS_PACK_SLOTS);
	if (!all_zero(pk->pad, sizeof(pk->pad)))
		return bad(why, len, "inode pack: reserved bytes are not zero");
	if (pack_check_spans(s, pk, n, why, len))
		return -EUCLEAN;
	for (i = 0; i < n; i += zlfs_pack_span(pk, i)) {
		uint32_t nid = le32_get(pk->slot[i].nid);

		if (nid == ZLFS_NID_NULL || nid >= s->max_nid || nid <= prev)
			return bad(why, len, "inode pack slot %u: nid %u (slots hold nids in [1, %u), "
				   "ascending, after %u)", i, nid, s->max_nid, prev);
		prev = nid;
	}
	for (; i < ZLFS_PACK_SLOTS; i++)
		if (!all_zero(&pk->slot[i], sizeof(pk->slot[i])))
			return bad(why, len, "inode pack slot %u is past nr_slots = %u but not zero", i,
				   n);
	return 0;
}
