/*
 * verify_walk.c - the order of the consistency check's walk, chosen so that the device is
 * read in large runs (docs/fsck.md, "Speed").
 *
 * Owns: the inodes reached and not yet visited; directories first, breadth first from the
 * root (they reach the rest), each level's directory blocks read ahead in runs into the
 * directory cache; then the other inodes in the order of their blocks on the device, read
 * ahead run by run by verify_ahead.c's helpers and checked from the buffer the run was read
 * into (the node log holds a filesystem's inodes in the order they were written). What is
 * checked of each inode and directory is verify.c's; this file only orders and reads ahead.
 * May call: verify_int.h, files.h (inodes, the directory cache), core.h.
 */
#include "verify_int.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Inode INO, reached: its tree, and its entries if it is a directory. */
static void visit_inode(struct chk *c, uint32_t ino, struct todo *t)
{
	struct node_page *np;

	if (!inode_usable(c, ino, &np))
		return;
	inode_seen(c, np);
	if (S_ISDIR(le32_get(inode_of(np)->mode)))
		check_dir(c, np, t);
	node_put(c->fs, np);
}

/* Inode INO, slot E->slot of the inode pack BLK read ahead, expanded into OUT and checked as
 * an inode: the pack's checksum and header once for all its slots (the walk meets them one
 * after another), the expansion never hashed. 0, or -1 to go the usual way. */
static int visit_pack_slot(struct chk *c, uint32_t ino, const struct nat_ent *e,
			   const uint8_t *blk, uint8_t *out)
{
	const struct zlfs_inode_pack *pk = (const void *)blk;
	char why[8]; /* unused: a slot that does not check is reported the usual way */

	if (c->pack_checked != e->blkaddr) {
		if (zlfs_blk_verify(blk, c->fs->sb.seed, ZLFS_KIND_IPACK) ||
		    zlfs_pack_check_head(&c->fs->sb, blk, why, sizeof(why)))
			return -1;
		c->pack_checked = e->blkaddr;
	}
	if (!zlfs_pack_is_slot(pk, e->slot) || le32_get(pk->slot[e->slot].nid) != ino)
		return -1;
	zlfs_pack_expand(blk, e->slot, out);
	return zlfs_node_check(&c->fs->sb, ino, out, why, sizeof(why)) ? -1 : 0;
}

/* Inode INO of a file, checked from BLK, its block as read ahead (the NAT's address; of an
 * inode pack, the slot the NAT names), without a trip through the node cache: 0, or -1 when
 * it must go the usual way (a cached page may be newer; a damaged block is reported there; a
 * directory's entries need its page). */
static int visit_file_block(struct chk *c, uint32_t ino, const uint8_t *blk)
{
	_Alignas(8) uint8_t slot[ZLFS_BLOCK_SIZE];
	struct node_page page = {.nid = ino, .buf = (void *)blk, .refs = 1};
	struct nat_ent e = chk_nat(c, ino);
	char why[8];

	if (!blk || node_cached(c->fs, ino))
		return -1;
	if (e.packed ? visit_pack_slot(c, ino, &e, blk, slot)
		     : node_block_check(c->fs, ino, blk, why, sizeof(why)))
		return -1;
	if (e.packed)
		page.buf = slot;
	if (le16_get(inode_of(&page)->hdr.kind) != ZLFS_KIND_INODE ||
	    S_ISDIR(le32_get(inode_of(&page)->mode)))
		return -1;
	inode_seen(c, &page);
	return 0;
}

static int addr_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Runs of the sorted BATCH (block address << 32 | anything): blocks in one zone within
 * AHEAD_RUN_MAX of the run's first, read from the first to the last of them (never past a
 * write pointer). The number of runs. */
static uint32_t plan_runs(struct chk *c, const uint64_t *batch, uint32_t n, struct chk_run *runs)
{
	uint32_t zb = zlfs_zone_blocks(&c->fs->sb), i = 0, nruns = 0;

	while (i < n) {
		uint32_t addr = (uint32_t)(batch[i] >> 32), j = i;
		struct chk_run *r = &runs[nruns++];

		if (in_main(c->fs, addr))
			while (j + 1 < n && (uint32_t)(batch[j + 1] >> 32) / zb == addr / zb &&
			       (uint32_t)(batch[j + 1] >> 32) - addr < AHEAD_RUN_MAX)
				j++;
		*r = (struct chk_run){addr, in_main(c->fs, addr) ? (uint32_t)(batch[j] >> 32) - addr + 1
								 : 0, i, j - i + 1};
		i = j + 1;
	}
	return nruns;
}

/* A directory block to read ahead: block IDX of directory DIR. */
struct dblk {
	uint32_t dir, idx;
};

/* The pointers of directory INO's inode to its first blocks, appended to KEYS and BLK from N:
 * the new N (N unchanged when INO cannot be read: the walk reports it). */
static uint32_t dir_blocks(struct chk *c, uint32_t ino, uint64_t *keys, struct dblk *blk,
			   uint32_t n)
{
	struct node_page *np;
	const struct zlfs_inode *in;

	if (inode_get(c->fs, ino, &np))
		return n;
	in = inode_of(np);
	if (S_ISDIR(le32_get(in->mode)) && !zlfs_iflags_area_inline(le32_get(in->flags)))
		for (uint32_t i = node_next_ptr(in->addr, 0, ZLFS_INODE_ADDRS); i < ZLFS_INODE_ADDRS;
		     i = node_next_ptr(in->addr, i + 1, ZLFS_INODE_ADDRS))
			if (in_main(c->fs, le32_get(in->addr[i]))) {
				keys[n] = (uint64_t)le32_get(in->addr[i]) << 32 | n;
				blk[n++] = (struct dblk){ino, i};
			}
	node_put(c->fs, np);
	return n;
}

/* Keep block E of a directory, as read into BUF, in the directory cache. */
static void dir_keep(struct chk *c, struct dblk e, const uint8_t *buf)
{
	struct node_page *np;

	if (!inode_get(c->fs, e.dir, &np)) {
		(void)dir_cache_keep(c->fs, np, e.idx, buf); /* a damaged one is read and reported */
		node_put(c->fs, np);
	}
}

/* Directories DIRS[FROM, TO): the blocks their inodes point to read in runs (verify_ahead.c)
 * and kept in the directory cache, so that walking their entries reads no block alone; past
 * an inode's own pointers a directory's blocks are read as the walk needs them. Returns the
 * end of the directories covered: at most DIR_AHEAD_BLOCKS blocks, to stay within the
 * cache's bound, but at least one directory. */
#define DIR_AHEAD_BLOCKS 1024u
static uint32_t dirs_ahead(struct chk *c, const uint32_t *dirs, uint32_t from, uint32_t to)
{
	uint64_t *keys = malloc((DIR_AHEAD_BLOCKS + ZLFS_INODE_ADDRS) * sizeof(*keys));
	struct dblk *blk = malloc((DIR_AHEAD_BLOCKS + ZLFS_INODE_ADDRS) * sizeof(*blk));
	struct chk_run *runs = malloc((DIR_AHEAD_BLOCKS + ZLFS_INODE_ADDRS) * sizeof(*runs));
	struct chk_ahead *a = NULL;
	uint32_t upto = from, n = 0, nruns, k, j = 0;
	const uint8_t *buf;

	if (!keys || !blk || !runs)
		goto out; /* the walk reads each block alone */
	for (; upto < to && (upto == from || n < DIR_AHEAD_BLOCKS); upto++)
		n = dir_blocks(c, dirs[upto], keys, blk, n);
	qsort(keys, n, sizeof(*keys), addr_cmp);
	nruns = plan_runs(c, keys, n, runs);
	if (chk_ahead_start(c->fs, runs, nruns, &a))
		goto out;
	for (k = 0; k < nruns; k++) {
		if (!chk_ahead_take(a, k, &buf))
			for (j = runs[k].first; j < runs[k].first + runs[k].count; j++)
				dir_keep(c, blk[(uint32_t)keys[j]],
					 buf + (size_t)((keys[j] >> 32) - runs[k].addr) * ZLFS_BLOCK_SIZE);
		chk_ahead_give_back(a, k);
	}
	chk_ahead_stop(a);
out:
	free(keys);
	free(blk);
	free(runs);
	return upto > from ? upto : to;
}

/* BATCH, N files reached (block address << 32 | ino), in block order, their nodes read ahead
 * run by run (verify_ahead.c). Directories among them add to T. */
static void visit_files(struct chk *c, struct todo *t, uint64_t *batch, uint32_t n)
{
	struct chk_run *runs = malloc((size_t)n * sizeof(*runs));
	struct chk_ahead *a = NULL;
	uint32_t nruns = 0, k, i;

	qsort(batch, n, sizeof(*batch), addr_cmp);
	if (runs) {
		nruns = plan_runs(c, batch, n, runs);
		(void)chk_ahead_start(c->fs, runs, nruns, &a); /* without it, nodes are read alone */
	}
	for (k = 0, i = 0; i < n; k++) {
		uint32_t end = a ? runs[k].first + runs[k].count : n;
		const uint8_t *buf = NULL;

		if (a)
			(void)chk_ahead_take(a, k, &buf);
		for (; i < end; i++) {
			uint32_t ino = (uint32_t)batch[i], addr = (uint32_t)(batch[i] >> 32);

			if (!buf || visit_file_block(c, ino, buf + (size_t)(addr - runs[k].addr) *
							      ZLFS_BLOCK_SIZE))
				visit_inode(c, ino, t);
			while (t->dirs_done < t->ndirs)
				visit_inode(c, t->dirs[t->dirs_done++], t);
		}
		if (a)
			chk_ahead_give_back(a, k);
	}
	chk_ahead_stop(a);
	free(runs);
}

/* From the root: every inode reached gets its tree and entries checked. */
void check_tree(struct chk *c)
{
	uint32_t max = c->fs->sb.max_nid, n;
	struct todo t = {.dirs = calloc(max, sizeof(*t.dirs)), .files = calloc(max, sizeof(*t.files))};
	uint64_t *batch = calloc(max, sizeof(*batch)), *swap;

	if (!t.dirs || !t.files || !batch) {
		finding(c, ZLFS_FIND_ERROR, "out of memory");
		c->rep->incomplete = 1;
		free(t.dirs), free(t.files), free(batch);
		return;
	}
	t.dirs[t.ndirs++] = ZLFS_ROOT_INO;
	c->seen[ZLFS_ROOT_INO] = SEEN_REACHED;
	c->parent[ZLFS_ROOT_INO] = ZLFS_ROOT_INO;
	for (;;) {
		while (t.dirs_done < t.ndirs) {
			uint32_t upto = dirs_ahead(c, t.dirs, t.dirs_done, t.ndirs);

			node_shrink(c->fs); /* the node cache keeps the daemon's bound */
			while (t.dirs_done < upto)
				visit_inode(c, t.dirs[t.dirs_done++], &t);
		}
		if (!t.nfiles)
			break;
		/* each nid is reached once: the two buffers never hold more than max together */
		n = t.nfiles;
		swap = batch;
		batch = t.files;
		t.files = swap;
		t.nfiles = 0;
		visit_files(c, &t, batch, n);
	}
	free(t.dirs);
	free(t.files);
	free(batch);
}
