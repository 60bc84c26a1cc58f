/*
 * node.c - node ids, the node address table (NAT) and the node-block cache.
 *
 * Owns: allocating and freeing nids, the in-memory NAT (nid -> block address), reading and
 * verifying node blocks, keeping changed nodes in memory until they are written, and writing
 * them to the node logs by temperature. Moving a node rewrites only its NAT entry.
 * May call: nat.c (the NAT and nids), npack.c (inode packs: reading a slot, writing packs,
 * the death of an old copy), segment.c (seg_append, seg_read), icache.c, format.h, lock.h,
 * log.h.
 *
 * Locks (core.h): the NAT and nid bits are under nat_lock; the cache's structure - chains,
 * refs, dirty flags and list - under ncache_lock; a page's contents under its inode's lock.
 * A node's NAT entry changes only through its cached page (written or freed while its owner
 * is locked), and a page being read in stays in the cache marked `reading`, so whoever wants
 * the same node waits for that one read instead of reading a block that may be moving.
 */
#include "core.h"
#include "npack.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCACHE_MAX 4096   /* cached node pages (16 MiB) before clean ones are dropped: stat is
			   * served from the attribute cache, 40 times smaller per inode */

static uint32_t nhash(const struct zlfs_fs *fs, uint32_t nid)
{
	return (nid * 2654435761u) % fs->ncache_buckets;
}

/* ---- the cache ----------------------------------------------------------------------------- */

static struct node_page *ncache_find(struct zlfs_fs *fs, uint32_t nid)
{
	struct node_page *np;

	for (np = fs->ncache[nhash(fs, nid)]; np; np = np->next)
		if (np->nid == nid)
			return np;
	return NULL;
}

static int ncache_add(struct zlfs_fs *fs, uint32_t nid, struct node_page **out)
{
	struct node_page *np = calloc(1, sizeof(*np));
	uint32_t h = nhash(fs, nid);

	if (!np)
		return -ENOMEM;
	np->buf = zdev_page_alloc();
	if (!np->buf) {
		free(np);
		return -ENOMEM;
	}
	np->nid = nid;
	np->refs = 1;
	np->data_gen = ATOMIC_ADD(&fs->data_gen_seq, 1);
	np->next = fs->ncache[h];
	fs->ncache[h] = np;
	__atomic_add_fetch(&fs->nr_cached, 1, __ATOMIC_RELAXED);
	*out = np;
	return 0;
}

/* Directory nodes are hot, file nodes warm, indirect nodes (rarely rewritten) and xattr value
 * nodes (never rewritten: a new value gets new nodes) cold. */
static enum zlfs_log_type node_temp(const struct node_page *np)
{
	const struct zlfs_blkhdr *h = np->buf;

	if (le16_get(h->kind) == ZLFS_KIND_INDNODE || le16_get(h->kind) == ZLFS_KIND_XVALUE)
		return ZLFS_LOG_COLD_NODE;
	return __atomic_load_n(&np->hot, __ATOMIC_RELAXED) ? ZLFS_LOG_HOT_NODE : ZLFS_LOG_WARM_NODE;
}

static void dirty_list_add(struct zlfs_fs *fs, struct node_page *np)
{
	np->dnext = NULL;
	np->dprev = fs->dirty_tail;
	if (fs->dirty_tail)
		fs->dirty_tail->dnext = np;
	else
		fs->dirty_head = np;
	fs->dirty_tail = np;
}

static void dirty_list_del(struct zlfs_fs *fs, struct node_page *np)
{
	if (np->dprev)
		np->dprev->dnext = np->dnext;
	else
		fs->dirty_head = np->dnext;
	if (np->dnext)
		np->dnext->dprev = np->dprev;
	else
		fs->dirty_tail = np->dprev;
	np->dnext = np->dprev = NULL;
}

/* Room a dirty page keeps in its log (DELTA 1) or gives back (-1), under ncache_lock: a
 * block, or of an inode the checkpoint packs, its share of a pack (npack_units; a log type's
 * owe npack_blocks of their sum). Counting one block per such inode made a zone of packs
 * collected by GC owe up to 15 times what the checkpoint writes (ENOSPC near full). */
static void node_owe(struct zlfs_fs *fs, struct node_page *np, int delta)
{
	uint32_t *n = &fs->owing_share[np->owed_type], was = npack_blocks(*n);

	if (!np->owes_share)
		seg_owe(fs, np->owed_type, delta);
	else if ((*n = delta > 0 ? *n + np->owes_share : *n - np->owes_share, npack_blocks(*n)) !=
		 was)
		seg_owe(fs, np->owed_type, (int)npack_blocks(*n) - (int)was);
}

static int node_owes_share(const struct zlfs_fs *fs, const struct node_page *np)
{
	return (int)npack_units(fs, np->buf);
}

/* A dirty page changed: whether it still fits a pack (it may have grown out of one, or
 * shrunk into one) decides what it owes. Under ncache_lock. */
static void node_owe_again(struct zlfs_fs *fs, struct node_page *np)
{
	int share = np->dirty ? node_owes_share(fs, np) : 0; /* a clean page owes nothing */

	if (!np->dirty || share == np->owes_share)
		return;
	node_owe(fs, np, -1);
	np->owes_share = (uint8_t)share;
	node_owe(fs, np, 1);
}

/* Under ncache_lock. */
static void node_clean(struct zlfs_fs *fs, struct node_page *np)
{
	if (!np->dirty)
		return;
	__atomic_store_n(&np->dirty, 0, __ATOMIC_RELAXED);
	dirty_list_del(fs, np);
	node_owe(fs, np, -1);
	__atomic_sub_fetch(&fs->nr_dirty_nodes, 1, __ATOMIC_RELAXED);
}

/* Under ncache_lock. */
static void ncache_remove(struct zlfs_fs *fs, struct node_page *victim)
{
	struct node_page **pp = &fs->ncache[nhash(fs, victim->nid)];

	while (*pp && *pp != victim)
		pp = &(*pp)->next;
	if (*pp)
		*pp = victim->next;
	node_clean(fs, victim);
	__atomic_sub_fetch(&fs->nr_cached, 1, __ATOMIC_RELAXED);
	zdev_page_free(victim->buf);
	free(victim);
}

static int node_is_kind(unsigned kind)
{
	return kind == ZLFS_KIND_INODE || kind == ZLFS_KIND_DNODE || kind == ZLFS_KIND_INDNODE ||
	       kind == ZLFS_KIND_XATTR || kind == ZLFS_KIND_XVALUE;
}

/* A node block as read: checksum, then every field against the format's limits, so that
 * nothing above reads past a buffer or loops on what it holds. */
int node_block_check(struct zlfs_fs *fs, uint32_t nid, const void *buf, char *why, size_t len)
{
	int ret = zlfs_blk_verify(buf, fs->sb.seed, ZLFS_KIND_MAX);

	if (ret) {
		snprintf(why, len, "%s", ret == -EUCLEAN ? "bad checksum or magic" : "wrong kind");
		return -EUCLEAN;
	}
	return zlfs_node_check(&fs->sb, nid, buf, why, len);
}

static int node_check(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, const void *buf)
{
	char why[200];
	int ret = node_block_check(fs, nid, buf, why, sizeof(why));

	if (ret)
		zlog_err("node %u at block %u is damaged (%s): run fsck.zlfs", nid, addr, why);
	return ret;
}

/* ---- reading in, with read-ahead ------------------------------------------------------------
 * Nodes are read back in about the order they were written (a directory's inodes, one after
 * another, by stat or unlink of every file), and one read of NODE_RA blocks costs a device
 * about what one block does. After a miss that continues the previous one's run, the blocks
 * that follow are read too, and every one of them that is the current copy of a node not yet
 * cached is kept as a clean page. */
#define NODE_RA 32u
#define NODE_RA_SLACK 64u /* a miss this close after the last read-ahead still counts as a run */

static int node_ra_wanted(const struct zlfs_fs *fs, uint32_t addr)
{
	return fs->nr_cached < NCACHE_MAX && addr + NODE_RA_SLACK >= fs->node_ra_next &&
	       addr <= fs->node_ra_next + NODE_RA_SLACK;
}

/* Keep the slots of the inode pack PK read from ADDR that are their inodes' current copies
 * and not cached, as clean pages (ncache_lock held). A pack that does not check keeps none. */
static void node_ra_keep_pack(struct zlfs_fs *fs, uint32_t addr, const void *pk)
{
	const struct zlfs_inode_pack *p = pk;
	uint32_t i, n = le32_get(p->nr_slots), nid;
	struct node_page *np;
	struct nat_ent e;
	char why[200];

	if (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_PACKED_INODES) ||
	    zlfs_blk_verify(pk, fs->sb.seed, ZLFS_KIND_IPACK) ||
	    zlfs_pack_check_head(&fs->sb, pk, why, sizeof(why)))
		return;
	for (i = 0; i < n && fs->nr_cached < NCACHE_MAX; i++) {
		nid = le32_get(p->slot[i].nid);
		if (!zlfs_pack_is_slot(p, i) || ncache_find(fs, nid) || nat_peek(fs, nid, &e) ||
		    e.blkaddr != addr || !e.packed || e.slot != i || ncache_add(fs, nid, &np))
			continue;
		zlfs_pack_expand(pk, i, np->buf);
		zlfs_blk_seal(np->buf, fs->sb.seed);
		if (zlfs_node_check(&fs->sb, nid, np->buf, why, sizeof(why))) {
			ncache_remove(fs, np); /* a damaged slot is read (and reported) on demand */
			continue;
		}
		np->refs = 0;
		iattr_update(fs, np);
	}
}

/* Keep block BUF read from ADDR as the clean page of its node, if it is one. The NAT is
 * checked under ncache_lock: a node that is written or freed meanwhile is cached (skipped)
 * or has moved (its entry no longer names ADDR). */
static void node_ra_keep(struct zlfs_fs *fs, uint32_t addr, const void *buf)
{
	const struct zlfs_blkhdr *h = buf;
	uint32_t nid = le32_get(h->index);
	struct node_page *np;
	struct nat_ent e;

	char why[160]; /* unused: a block read ahead that does not check is simply not kept */

	if (le16_get(h->kind) == ZLFS_KIND_IPACK) {
		node_ra_keep_pack(fs, addr, buf);
		return;
	}
	if (!node_is_kind(le16_get(h->kind)) || nid == ZLFS_NID_NULL || nid >= fs->sb.max_nid ||
	    ncache_find(fs, nid) || nat_peek(fs, nid, &e) || e.blkaddr != addr || e.packed ||
	    node_block_check(fs, nid, buf, why, sizeof(why)) || ncache_add(fs, nid, &np))
		return;
	memcpy(np->buf, buf, ZLFS_BLOCK_SIZE);
	np->refs = 0;
	iattr_update(fs, np);
}

/* Read the block of NP (a page marked reading) whose NAT entry is E, and N - 1 more after it.
 * Of a pack, the slot is expanded and the other slots are kept as read ahead. */
static int node_read_in(struct zlfs_fs *fs, struct node_page *np, const struct nat_ent *e,
			uint32_t n)
{
	uint32_t addr = e->blkaddr;
	uint8_t *ra = n > 1 || e->packed ? zdev_buf_alloc((size_t)n * ZLFS_BLOCK_SIZE) : NULL;
	int ret;

	if (!ra)
		n = 1;
	if (!ra && e->packed) /* a pack needs its one block, not the read ahead */
		ra = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	/* no early return: ncache_lock is taken below, on every path, as node_get expects */
	ret = ra ? seg_read_run(fs, addr, n, ra) : e->packed ? -ENOMEM : seg_read(fs, addr, np->buf);
	if (!ret && ra)
		ret = e->packed ? npack_expand(fs, np->nid, addr, e->slot, ra, np->buf)
				: (memcpy(np->buf, ra, ZLFS_BLOCK_SIZE), 0);
	if (!ret)
		ret = node_check(fs, np->nid, addr, np->buf);
	zlock_lock(&fs->ncache_lock);
	if (!ret) {
		for (uint32_t i = !e->packed; i < n && fs->nr_cached < NCACHE_MAX; i++)
			node_ra_keep(fs, addr + i, ra + (size_t)i * ZLFS_BLOCK_SIZE);
		np->reading = 0;
		iattr_update(fs, np);
	}
	zdev_buf_free(ra);
	return ret;
}

uint32_t node_next_ptr(const le32 *p, uint32_t i, uint32_t n)
{
	uint64_t w[4];

	while (i + 8 <= n && (memcpy(w, p + i, sizeof(w)), !(w[0] | w[1] | w[2] | w[3])))
		i += 8;
	while (i < n && !p[i])
		i++;
	return i;
}

static void ncache_halve_locked(struct zlfs_fs *fs);

int node_cached(struct zlfs_fs *fs, uint32_t nid)
{
	int ret;

	zlock_lock(&fs->ncache_lock);
	ret = ncache_find(fs, nid) != NULL;
	zlock_unlock(&fs->ncache_lock);
	return ret;
}

void node_keep_run(struct zlfs_fs *fs, uint32_t addr, uint32_t n, const void *buf, int inodes)
{
	zlock_lock(&fs->ncache_lock);
	/* room for the run within the bound, made in one go: the pages dropped stay in the page
	 * pool's warm list (zdev.c), none is given back and faulted in again */
	if (fs->nr_cached + n > NCACHE_MAX)
		ncache_halve_locked(fs);
	for (uint32_t i = 0; i < n && fs->nr_cached < NCACHE_MAX; i++) {
		const struct zlfs_blkhdr *h = (const void *)((const uint8_t *)buf +
							     (size_t)i * ZLFS_BLOCK_SIZE);

		if (inodes || (le16_get(h->kind) != ZLFS_KIND_INODE &&
				le16_get(h->kind) != ZLFS_KIND_IPACK))
			node_ra_keep(fs, addr + i, h);
	}
	zlock_unlock(&fs->ncache_lock);
}

int node_get(struct zlfs_fs *fs, uint32_t nid, struct node_page **out)
{
	struct node_page *np;
	struct nat_ent e;
	uint32_t addr, n = 1;
	int ret, brought = 0;

	if (nid == ZLFS_NID_NULL || nid >= fs->sb.max_nid)
		return -EUCLEAN;
	zlock_lock(&fs->ncache_lock);
	for (;;) {
		while ((np = ncache_find(fs, nid)) && np->reading)
			zlock_wait(&fs->ncache_cond, &fs->ncache_lock);
		if (np) {
			np->refs++;
			zlock_unlock(&fs->ncache_lock);
			*out = np;
			return 0;
		}
		/* A node miss whose NAT page is not cached either: bring the NAT page in without
		 * ncache_lock (a miss reads the device), then look again, since the node may have
		 * come in meanwhile. The entry is read below, under the lock, where it cannot
		 * change. */
		if (brought || !nat_peek(fs, nid, &e))
			break;
		zlock_unlock(&fs->ncache_lock);
		(void)nat_get(fs, nid, &e);
		brought = 1;
		zlock_lock(&fs->ncache_lock);
	}
	ret = nat_get(fs, nid, &e);
	addr = e.blkaddr;
	if (ret || addr == ZLFS_ADDR_NULL || addr == ZLFS_ADDR_NEW) {
		zlock_unlock(&fs->ncache_lock);
		return ret ? ret : -ENOENT;
	}
	ret = ncache_add(fs, nid, &np);
	if (ret) {
		zlock_unlock(&fs->ncache_lock);
		return ret;
	}
	np->reading = 1;
	if (node_ra_wanted(fs, addr))
		n = seg_valid_span(fs, addr, NODE_RA);
	fs->node_ra_next = addr + n;
	zlock_unlock(&fs->ncache_lock);
	ret = node_read_in(fs, np, &e, n); /* returns with ncache_lock held */
	if (ret)
		ncache_remove(fs, np);
	pthread_cond_broadcast(&fs->ncache_cond);
	zlock_unlock(&fs->ncache_lock);
	if (!ret)
		*out = np;
	return ret;
}

int node_explain(struct zlfs_fs *fs, uint32_t nid, char *why, size_t len)
{
	uint8_t *buf = zdev_buf_alloc(2 * ZLFS_BLOCK_SIZE);
	struct nat_ent e;
	int ret = buf ? nat_get(fs, nid, &e) : -ENOMEM;

	snprintf(why, len, "unreadable");
	if (!ret && (e.blkaddr == ZLFS_ADDR_NULL || e.blkaddr == ZLFS_ADDR_NEW))
		ret = -ENOENT;
	if (!ret)
		ret = seg_read(fs, e.blkaddr, buf);
	if (!ret && e.packed) /* the pack's own damage, or the slot's inode below */
		ret = npack_slot(fs, nid, e.slot, buf, buf + ZLFS_BLOCK_SIZE, why, len);
	if (!ret)
		ret = node_block_check(fs, nid, buf + (e.packed ? ZLFS_BLOCK_SIZE : 0), why, len);
	zdev_buf_free(buf);
	return ret;
}

int node_get_as(struct zlfs_fs *fs, uint32_t nid, uint32_t ino, enum zlfs_blk_kind kind,
		uint32_t ofs, struct node_page **out)
{
	const struct zlfs_node *n;
	int ret = node_get(fs, nid, out);

	if (ret)
		return ret == -ENOENT ? -EUCLEAN : ret; /* a pointer to a free node is damage */
	n = (*out)->buf;
	if (le16_get(n->hdr.kind) == kind && le32_get(n->hdr.ino) == ino &&
	    (ofs == NODE_OFS_ANY || le32_get(n->ofs) == ofs))
		return 0;
	zlog_err("inode %u points to node %u, but that is a %s of inode %u (offset %u), not "
		 "its %s%s: run fsck.zlfs", ino, nid, zlfs_kind_name(le16_get(n->hdr.kind)),
		 le32_get(n->hdr.ino), le32_get(n->ofs), zlfs_kind_name(kind),
		 ofs == NODE_OFS_ANY ? "" : " at that offset");
	node_put_unchanged(fs, *out);
	*out = NULL;
	return -EUCLEAN;
}

int node_new(struct zlfs_fs *fs, uint32_t nid, uint32_t ino, enum zlfs_blk_kind kind,
	     struct node_page **out)
{
	struct node_page *np;
	int ret;

	zlock_lock(&fs->ncache_lock);
	ret = ncache_add(fs, nid, &np);
	zlock_unlock(&fs->ncache_lock);
	if (ret)
		return ret;
	memset(np->buf, 0, ZLFS_BLOCK_SIZE);
	zlfs_blk_init(np->buf, kind, nid, ino, fs->cp_ver);
	node_dirty(fs, np);
	*out = np;
	return 0;
}

void node_put_unchanged(struct zlfs_fs *fs, struct node_page *np)
{
	if (!np)
		return;
	zlock_lock(&fs->ncache_lock);
	np->refs--;
	zlock_unlock(&fs->ncache_lock);
}

/* Whoever changed a page holds it until here: the last chance to refresh its attributes. */
void node_put(struct zlfs_fs *fs, struct node_page *np)
{
	if (!np)
		return;
	if (__atomic_load_n(&np->dirty, __ATOMIC_RELAXED))
		iattr_update(fs, np);
	zlock_lock(&fs->ncache_lock);
	node_owe_again(fs, np); /* a dirty page may have changed since node_dirty */
	np->refs--;
	zlock_unlock(&fs->ncache_lock);
}

void node_ref(struct zlfs_fs *fs, struct node_page *np)
{
	zlock_lock(&fs->ncache_lock);
	np->refs++;
	zlock_unlock(&fs->ncache_lock);
}

void node_dirty(struct zlfs_fs *fs, struct node_page *np)
{
	iattr_update(fs, np);
	zlock_lock(&fs->ncache_lock);
	if (!np->dirty) {
		__atomic_store_n(&np->dirty, 1, __ATOMIC_RELAXED);
		dirty_list_add(fs, np);
		np->owed_type = (uint8_t)node_temp(np);
		np->owes_share = (uint8_t)node_owes_share(fs, np);
		node_owe(fs, np, 1);
		__atomic_add_fetch(&fs->nr_dirty_nodes, 1, __ATOMIC_RELAXED);
	} else {
		node_owe_again(fs, np);
	}
	zlock_unlock(&fs->ncache_lock);
	__atomic_store_n(&fs->dirty, 1, __ATOMIC_RELAXED);
}

void node_set_hot(struct zlfs_fs *fs, struct node_page *np, int hot)
{
	if (__atomic_load_n(&np->hot, __ATOMIC_RELAXED) == hot)
		return;
	zlock_lock(&fs->ncache_lock);
	if (np->hot != hot) {
		__atomic_store_n(&np->hot, hot, __ATOMIC_RELAXED);
		if (np->dirty) { /* its room is now kept in the other log */
			node_owe(fs, np, -1);
			np->owed_type = (uint8_t)node_temp(np);
			node_owe(fs, np, 1);
		}
	}
	zlock_unlock(&fs->ncache_lock);
}

void node_fsync_needs_checkpoint(struct zlfs_fs *fs, uint32_t ino)
{
	zlock_lock(&fs->nat_lock);
	nidset_add(&fs->nofast, ino);
	zlock_unlock(&fs->nat_lock);
}

static void node_free_copy(struct zlfs_fs *fs, uint32_t nid, int stray)
{
	struct node_page *np;
	struct nat_ent e, *ep;

	/* Page and NAT entry go together, so a read-ahead never brings the freed node back. The
	 * NAT page is brought in before, as in node_get. */
	(void)nat_get(fs, nid, &e);
	zlock_lock(&fs->ncache_lock);
	np = ncache_find(fs, nid);
	if (np) {
		if (np->refs)
			zlog_err("node %u freed while %d users hold it: accounting error", nid,
				 np->refs);
		ncache_remove(fs, np);
	}
	zlock_lock(&fs->nat_lock);
	ep = nat_ent_locked(fs, nid); /* NULL: logged, and nothing more is written */
	e = ep ? *ep : (struct nat_ent){0};
	if (e.blkaddr != ZLFS_ADDR_NULL) {
		nidset_add(&fs->nid_freed, nid);
		/* Roll-forward cannot free nodes: the owner's next fsync takes a checkpoint. */
		nidset_add(&fs->nofast, e.ino);
		if (e.ino == nid)
			fs->valid_inodes--;
		fs->valid_nodes--;
		ep->version++;
		nat_set_locked(fs, nid, ZLFS_ADDR_NULL, 0);
	}
	zlock_unlock(&fs->nat_lock);
	zlock_unlock(&fs->ncache_lock);
	iattr_drop(fs, nid);
	if (!stray)
		node_addr_dead(fs, nid, &e);
}

void node_free(struct zlfs_fs *fs, uint32_t nid)
{
	node_free_copy(fs, nid, 0);
}

void node_free_stray(struct zlfs_fs *fs, uint32_t nid)
{
	node_free_copy(fs, nid, 1);
}

/* ---- writing ----------------------------------------------------------------------------------
 * A page is written from a sealed copy: the cached page is never changed by its writer, so
 * readers holding its inode's lock shared may read it while a checkpoint writes it. The caller
 * keeps the page from changing: its inode's lock, or cp_lock exclusive. */

static int node_write_to(struct zlfs_fs *fs, struct node_page *np, uint16_t flags,
			 enum zlfs_log_type log, uint8_t *copy)
{
	struct zlfs_blkhdr *h = (struct zlfs_blkhdr *)copy;
	struct nat_ent e;
	uint32_t addr;
	int ret = nat_get(fs, np->nid, &e);

	if (ret)
		return ret;
	memcpy(copy, np->buf, ZLFS_BLOCK_SIZE);
	h->flags = le16_put(flags);
	blk_seal(fs, copy);
	ret = seg_append(fs, log, copy, np->nid, ZLFS_SUM_NODE, &addr);
	if (ret)
		return ret;
	ret = nat_set(fs, np->nid, addr, le32_get(h->ino));
	if (ret)
		return ret;
	node_addr_dead(fs, np->nid, &e);
	zlock_lock(&fs->ncache_lock);
	node_clean(fs, np);
	zlock_unlock(&fs->ncache_lock);
	return 0;
}

/* The first dirty page on the list, held; NULL when none is left. */
static struct node_page *dirty_first(struct zlfs_fs *fs)
{
	struct node_page *np;

	zlock_lock(&fs->ncache_lock);
	np = fs->dirty_head;
	if (np)
		np->refs++;
	zlock_unlock(&fs->ncache_lock);
	return np;
}

/* The dirty inodes that fit a pack slot, held, in dirty-list order. */
static int dirty_packable(struct zlfs_fs *fs, struct npack_item **out, uint32_t *n)
{
	struct npack_item *v = NULL, *g;
	struct node_page *np;
	uint32_t cap = 0, k;
	int ret = 0;

	*n = 0;
	zlock_lock(&fs->ncache_lock);
	for (np = fs->dirty_head; np && !ret; np = np->dnext) {
		if (!(k = npack_positions(fs, np->buf)))
			continue;
		if (*n == cap) {
			if (!(g = realloc(v, (cap ? cap * 2 : 64) * sizeof(*v)))) {
				ret = -ENOMEM;
				break;
			}
			v = g;
			cap = cap ? cap * 2 : 64;
		}
		np->refs++;
		v[*n] = (struct npack_item){np, *n, (uint8_t)node_temp(np), (uint8_t)k, 0};
		(*n)++;
	}
	zlock_unlock(&fs->ncache_lock);
	*out = v;
	return ret;
}

/* The dirty inodes that fit, ZLFS_PACK_SLOTS positions to a pack, packs per node log
 * (npack_group says which go together). Out of memory, packing stops and the rest are
 * written as whole blocks (node_flush_all): a checkpoint that failed for it would leave the
 * filesystem read-only. */
static int node_flush_packs(struct zlfs_fs *fs)
{
	struct npack_item *v, *grp[ZLFS_PACK_SLOTS];
	const void *bufs[ZLFS_PACK_SLOTS];
	uint32_t n, i = 0, k;
	int ret = dirty_packable(fs, &v, &n);

	if (ret == -ENOMEM) /* those listed so far */
		ret = 0;
	npack_sort(v, n);
	while (!ret && (k = npack_group(v, n, &i, grp))) {
		for (uint32_t m = 0; m < k; m++)
			bufs[m] = grp[m]->np->buf;
		ret = npack_write(fs, bufs, k, (enum zlfs_log_type)grp[0]->type);
		zlock_lock(&fs->ncache_lock);
		for (uint32_t m = 0; !ret && m < k; m++)
			node_clean(fs, grp[m]->np);
		zlock_unlock(&fs->ncache_lock);
	}
	for (i = 0; i < n; i++)
		node_put(fs, v[i].np);
	free(v);
	return ret == -ENOMEM ? 0 : ret; /* a group left dirty goes whole */
}

int node_flush_all(struct zlfs_fs *fs)
{
	uint8_t *copy = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct node_page *np;
	int ret = copy ? 0 : -ENOMEM;

	/* Under cp_lock exclusive (checkpoints) or alone (mount, fsck): nothing else dirties a
	 * page meanwhile, and each write takes its page off the list. */
	if (!ret && (zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_PACKED_INODES))
		ret = node_flush_packs(fs);
	while (!ret && (np = dirty_first(fs))) {
		ret = node_write_to(fs, np, 0, node_temp(np), copy);
		node_put(fs, np);
	}
	zdev_buf_free(copy);
	return ret;
}

/* Staged blocks to the device, then a device flush. */
static int node_make_durable(struct zlfs_fs *fs)
{
	int ret = wbuf_flush_all(fs->wb);

	return ret ? ret : zdev_flush(fs->dev);
}

/* INO's dirty pages other than the inode itself, held, in the order they were dirtied;
 * *INODE_DIRTY: the inode is dirty too. */
static int node_dirty_of(struct zlfs_fs *fs, uint32_t ino, struct node_page ***out, uint32_t *n,
			 int *inode_dirty)
{
	struct node_page *np, **v = NULL;
	uint32_t cap = 0;

	*n = 0;
	*inode_dirty = 0;
	zlock_lock(&fs->ncache_lock);
	for (np = fs->dirty_head; np; np = np->dnext) {
		*inode_dirty |= np->nid == ino;
		if (np->nid == ino || le32_get(((struct zlfs_blkhdr *)np->buf)->ino) != ino)
			continue;
		if (*n == cap) {
			struct node_page **g = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!g) {
				for (uint32_t i = 0; i < *n; i++)
					v[i]->refs--;
				zlock_unlock(&fs->ncache_lock);
				free(v);
				return -ENOMEM;
			}
			v = g;
		}
		np->refs++;
		v[(*n)++] = np;
	}
	zlock_unlock(&fs->ncache_lock);
	*out = v;
	return 0;
}

/* The dentry mark DM of inode INO, into the warm node log just before its marker. Never
 * valid in the SIT: read only by recovery, and no zone is reset before the checkpoint that
 * writes the name into its directory's blocks. */
static int node_write_dmark(struct zlfs_fs *fs, uint32_t ino, const struct node_dmark *dm,
			    uint8_t *copy)
{
	struct zlfs_dentry_mark *m = (struct zlfs_dentry_mark *)copy;
	uint32_t addr;
	int ret;

	memset(copy, 0, ZLFS_BLOCK_SIZE);
	zlfs_blk_init(m, ZLFS_KIND_DMARK, ino, ino, fs->cp_ver);
	m->parent_ino = le32_put(dm->parent);
	m->generation = le32_put(dm->generation);
	m->name_len = le16_put(dm->len);
	m->type = 8; /* DT_REG */
	memcpy(m->name, dm->name, dm->len);
	blk_seal(fs, m);
	ret = seg_append(fs, ZLFS_LOG_WARM_NODE, m, ino, ZLFS_SUM_NODE, &addr);
	if (!ret)
		seg_mark(fs, addr, 0);
	return ret;
}

/* Called with INO locked exclusively and cp_lock shared. */
/* Only the GC reserve is left and an fsync would write INO whole where it is in a pack, or
 * dirty owing only its share of one: it would take a block where a fifteenth was owed, and
 * fsyncs of thousands of small files near full took the reserve and met ENOSPC
 * (t_packed_fsync_nearfull). A checkpoint, which packs the dirty ones, is what such an
 * fsync takes instead (a clean inode in a pack is already durable). */
static int leaves_pack_near_full(struct zlfs_fs *fs, uint32_t ino)
{
	struct node_page *np;
	struct nat_ent e;
	int share;

	if (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_PACKED_INODES) || seg_room_for_user(fs))
		return 0;
	zlock_lock(&fs->ncache_lock);
	np = ncache_find(fs, ino);
	share = np && np->dirty && np->owes_share;
	zlock_unlock(&fs->ncache_lock);
	return share || (!nat_get(fs, ino, &e) && e.packed);
}

int node_fsync(struct zlfs_fs *fs, uint32_t ino, const struct node_dmark *dm)
{
	uint8_t *copy = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct node_page *inode = NULL, **v = NULL;
	int group = !!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_ONE_FLUSH), fresh, idirty = 0;
	uint32_t n = 0, i;
	int ret = copy ? 0 : -ENOMEM;

	zlock_lock(&fs->nat_lock);
	fresh = nidset_has(&fs->fresh, ino);
	if (nidset_has(&fs->nofast, ino) || (fresh && (!dm || !group)))
		ret = -EAGAIN; /* roll-forward cannot redo it, or would leave the file nameless */
	zlock_unlock(&fs->nat_lock);
	/* A mark of an earlier fsync in this checkpoint's groups stays with them: recovery keeps
	 * every copy up to the last whole marker, so one mark per name suffices. */
	if (!fresh || (dm && dm->on_device))
		dm = NULL;
	if (!ret)
		ret = node_dirty_of(fs, ino, &v, &n, &idirty);
	/* No node of the file dirty: it is durable as it is (every change dirties a node, and a
	 * node is clean only once a checkpoint or an fsync, each ending in a flush, wrote it,
	 * under the locks that keep this fsync from running beside them). Editors and package
	 * managers fsync what they only read, SQLite an unchanged database: no block, no flush. */
	if (!ret && !n && !idirty && !dm) {
		zdev_buf_free(copy);
		return 0;
	}
	if (!ret && leaves_pack_near_full(fs, ino))
		ret = -EAGAIN;
	/* The data first. Without ONE_FLUSH it is made durable before any node is written: a
	 * node that reaches the device before the blocks it points to would give the file
	 * contents it never had if power failed in between. With it, the data stays staged:
	 * the one drain after the marker issues data and nodes together (different zones, so
	 * the flushers write them side by side), one flush makes all of it durable, and
	 * recovery tells a group cut short by its count and by the write pointers of the
	 * zones its blocks lie in. */
	if (!ret && !group)
		ret = node_make_durable(fs);
	/* Then the nodes, all in one zone (a zone keeps writes in order through a power cut),
	 * the inode last and marked: recovery takes the group only when the marker is there. */
	for (i = 0; !ret && i < n; i++)
		ret = node_write_to(fs, v[i], 0, ZLFS_LOG_WARM_NODE, copy);
	for (i = 0; i < n; i++)
		node_put(fs, v[i]);
	free(v);
	if (!ret && dm) /* the group's last copy before the marker, counted in it */
		ret = node_write_dmark(fs, ino, dm, copy);
	if (!ret)
		ret = node_get(fs, ino, &inode);
	if (!ret) {
		/* the count is read only with FSYNC_GROUP, on this copy: no need to dirty */
		((struct zlfs_inode *)inode->buf)->fsync_nodes = le32_put(group ? n + !!dm : 0);
		ret = node_write_to(fs, inode,
				    ZLFS_NODE_FSYNC | (group ? ZLFS_NODE_FSYNC_GROUP : 0) |
					    (dm ? ZLFS_NODE_DENTRY : 0),
				    ZLFS_LOG_WARM_NODE, copy);
		node_put(fs, inode);
	}
	if (!ret)
		ret = node_make_durable(fs);
	if (ret && ret != -EAGAIN && ret != -ENOMEM) {
		zlog_err("fsync of inode %u failed (%s); filesystem switched to read-only", ino,
			 strerror(-ret));
		__atomic_store_n(&fs->readonly, 1, __ATOMIC_RELAXED);
	}
	zdev_buf_free(copy);
	return ret;
}

void node_ckpt_done(struct zlfs_fs *fs)
{
	zlock_lock(&fs->nat_lock);
	nidset_clear(&fs->nofast);
	nidset_clear(&fs->fresh);
	nidset_clear(&fs->nid_freed);
	zlock_unlock(&fs->nat_lock);
	npack_ckpt_done(fs);
}

/* Drop clean, unused pages once the cache is over its bound. Dirty pages wait for the
 * checkpoint that ckpt_due asks for as they pile up. */
/* Drop clean, unused pages down to half the bound, with ncache_lock held. */
static void ncache_halve_locked(struct zlfs_fs *fs)
{
	struct node_page *np, *next;
	uint32_t b;

	for (b = 0; b < fs->ncache_buckets && fs->nr_cached > NCACHE_MAX / 2; b++) {
		for (np = fs->ncache[b]; np; np = next) {
			next = np->next;
			if (!np->dirty && !np->refs && !np->reading && fs->nr_cached > NCACHE_MAX / 2)
				ncache_remove(fs, np);
		}
	}
}

void node_shrink(struct zlfs_fs *fs)
{
	if (__atomic_load_n(&fs->nr_cached, __ATOMIC_RELAXED) <= NCACHE_MAX)
		return;
	zlock_lock(&fs->ncache_lock);
	ncache_halve_locked(fs);
	zlock_unlock(&fs->ncache_lock);
}

int node_init(struct zlfs_fs *fs)
{
	fs->ncache_buckets = 4096;
	fs->ncache = calloc(fs->ncache_buckets, sizeof(*fs->ncache));
	fs->free_nids = malloc(FREE_NIDS_MAX * sizeof(*fs->free_nids));
	fs->nr_free_nids = 0;
	if (fs->nid_hint >= fs->sb.max_nid)
		fs->nid_hint = 0;
	if (!fs->ncache || !fs->free_nids)
		return -ENOMEM;
	return icache_init(fs);
}

void node_destroy(struct zlfs_fs *fs)
{
	uint32_t b;

	if (!fs->ncache)
		return;
	zlock_lock(&fs->ncache_lock);
	for (b = 0; b < fs->ncache_buckets; b++)
		while (fs->ncache[b])
			ncache_remove(fs, fs->ncache[b]);
	zlock_unlock(&fs->ncache_lock);
	free(fs->ncache);
	fs->ncache = NULL;
	npack_destroy(fs);
	nidset_free(&fs->nofast);
	nidset_free(&fs->fresh);
	nidset_free(&fs->nid_freed);
	free(fs->free_nids);
	fs->free_nids = NULL;
	icache_destroy(fs);
}
