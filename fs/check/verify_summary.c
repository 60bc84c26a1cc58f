/*
 * verify_summary.c - each data block the tree walk references against its segment summary
 * entry: the owner GC will follow to re-point it (docs/format.md, "segment summary"). The
 * entry comes from the remap list (a block fallocate moved), from the open segment's summary
 * a log carries (the checkpoint's copy, rolled forward), or from the segment's summary block,
 * read once into a small cache (a file's blocks lie mostly in a few segments). A summary
 * that cannot be read is not reported here (GC reports it when it needs it); one that names
 * another slot than the tree's is an error, repaired by moving the block (gc_relocate): the
 * new copy's entry is right, the old one then describes a dead block.
 * May call: verify_int.h, core.h.
 */
#include "verify_int.h"

#include <errno.h>
#include <stdlib.h>

#define SUM_CACHE 64u /* summary blocks kept: 256 KiB */

struct sum_cache {
	uint32_t segno[SUM_CACHE]; /* UINT32_MAX: empty */
	int err[SUM_CACHE];        /* the read's error, kept so as not to read again */
	struct zlfs_summary *sum;  /* SUM_CACHE blocks */
};

void sum_cache_free(struct chk *c)
{
	if (c->sums)
		zdev_buf_free(c->sums->sum);
	free(c->sums);
	c->sums = NULL;
}

static struct sum_cache *sum_cache(struct chk *c)
{
	if (!c->sums) {
		c->sums = calloc(1, sizeof(*c->sums));
		if (!c->sums)
			return NULL;
		c->sums->sum = zdev_buf_alloc((size_t)SUM_CACHE * sizeof(struct zlfs_summary));
		if (!c->sums->sum) {
			free(c->sums);
			c->sums = NULL;
			return NULL;
		}
		for (uint32_t i = 0; i < SUM_CACHE; i++)
			c->sums->segno[i] = UINT32_MAX;
	}
	return c->sums;
}

/* The summary entry of main-area block ADDR: 0, or -ENOENT when it has none yet (past the
 * entries of an open segment) or its summary cannot be read. */
static int sum_entry(struct chk *c, uint32_t addr, uint32_t *nid, uint16_t *ofs)
{
	const struct zlfs_sb_info *sb = &c->fs->sb;
	uint32_t zb = zlfs_zone_blocks(sb), zone = addr / zb, in = addr % zb;
	uint32_t seg = in / sb->seg_blocks, b = in % sb->seg_blocks, segno, i;
	struct sum_cache *sc;
	struct zlfs_summary *sum;
	int ret;

	if (seg >= sb->segs_per_zone || b + 1 == sb->seg_blocks)
		return -ENOENT; /* past the zone's segments, or a summary slot */
	ret = log_open_entry(c->fs, addr, nid, ofs);
	if (ret)
		return ret < 0 ? ret : 0;
	sc = sum_cache(c);
	if (!sc)
		return -ENOENT;
	segno = (zone - sb->main_zone_first) * sb->segs_per_zone + seg;
	i = segno % SUM_CACHE;
	sum = &sc->sum[i];
	if (sc->segno[i] != segno) {
		sc->segno[i] = segno;
		sc->err[i] = seg_read(c->fs, addr - b + sb->seg_blocks - 1, sum);
		if (!sc->err[i])
			sc->err[i] = zlfs_blk_verify(sum, sb->seed, ZLFS_KIND_SUMMARY);
		if (!sc->err[i] && le32_get(sum->hdr.index) != segno)
			sc->err[i] = -EUCLEAN;
	}
	if (sc->err[i])
		return -ENOENT;
	*nid = le32_get(sum->nid[b]);
	*ofs = le16_get(sum->ofs[b]);
	return 0;
}

void check_summary(struct chk *c, uint32_t addr, uint32_t ino, uint32_t nid, uint16_t ofs)
{
	uint32_t snid = 0;
	uint16_t sofs = 0;

	if (!seg_is_valid(c->fs, addr)) /* referenced but free: check_sit reports it */
		return;
	if (!remap_find(c->fs, addr, &snid, &sofs) && sum_entry(c, addr, &snid, &sofs))
		return;
	if (snid == nid && sofs == ofs)
		return;
	finding(c, ZLFS_FIND_ERROR, "inode %u: data block %u: its segment summary names node %u "
		"slot %u, but the tree gives it to node %u slot %u", ino, addr, snid, sofs, nid,
		ofs);
	propose(c, ZLFS_FIX_SUMMARY_MOVE, addr, nid, NULL, 0);
}
