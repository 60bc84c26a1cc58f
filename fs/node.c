/*
 * node.c - node ids, the node address table (NAT) and the node-block cache.
 *
 * Owns: allocating and freeing nids, the in-memory NAT (nid -> block address), reading and
 * verifying node blocks, keeping changed nodes in memory until they are written, and writing
 * them to the node logs by temperature. Moving a node rewrites only its NAT entry.
 * May call: segment.c (seg_append, seg_mark, seg_read), format.h, log.h.
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NCACHE_MAX 8192   /* cached node pages (32 MiB) before clean ones are dropped */
#define ICACHE_MAX (256u * 1024) /* inodes whose attributes are kept (about 20 MiB) */
#define ICACHE_BUCKETS 65536

struct iattr_ent {
	struct iattr_ent *next;
	uint32_t ino;
	struct iattr a;
};

struct iattr_cache {
	struct iattr_ent *bucket[ICACHE_BUCKETS];
	uint32_t count;
};

static struct iattr_ent **iattr_slot(struct zlfs_fs *fs, uint32_t ino)
{
	struct iattr_ent **pp = &fs->icache->bucket[ino % ICACHE_BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

/* Keep the cached attributes of an inode page in step with the page. */
static void iattr_update(struct zlfs_fs *fs, struct node_page *np)
{
	const struct zlfs_inode *in = np->buf;
	struct iattr_ent **pp, *e;

	if (!fs->icache || le16_get(in->hdr.kind) != ZLFS_KIND_INODE)
		return;
	pp = iattr_slot(fs, np->nid);
	e = *pp;
	if (!e) {
		if (fs->icache->count >= ICACHE_MAX || !(e = calloc(1, sizeof(*e))))
			return;
		e->ino = np->nid;
		*pp = e;
		fs->icache->count++;
	}
	e->a = (struct iattr){le32_get(in->mode),	  le32_get(in->nlink),	le32_get(in->uid),
			      le32_get(in->gid),	  le32_get(in->rdev),	le32_get(in->generation),
			      le64_get(in->size),	  le64_get(in->blocks), le64_get(in->atime_ns),
			      le64_get(in->mtime_ns), le64_get(in->ctime_ns)};
}

static void iattr_drop(struct zlfs_fs *fs, uint32_t ino)
{
	struct iattr_ent **pp, *e;

	if (!fs->icache)
		return;
	pp = iattr_slot(fs, ino);
	e = *pp;
	if (e) {
		*pp = e->next;
		free(e);
		fs->icache->count--;
	}
}

int iattr_get(struct zlfs_fs *fs, uint32_t ino, struct iattr *a)
{
	struct iattr_ent *e = fs->icache ? *iattr_slot(fs, ino) : NULL;

	if (!e)
		return -ENOENT;
	*a = e->a;
	return 0;
}
#define NDIRTY_MAX 2048   /* dirty node pages before they are written out */

static uint32_t nhash(const struct zlfs_fs *fs, uint32_t nid)
{
	return (nid * 2654435761u) % fs->ncache_buckets;
}

void nat_set(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t ino)
{
	fs->nat[nid].blkaddr = addr;
	fs->nat[nid].ino = ino;
	if (!fs->nat_dirty[nid / ZLFS_NAT_PER_BLOCK]) {
		fs->nat_dirty[nid / ZLFS_NAT_PER_BLOCK] = 1;
		fs->dirty_meta++;
	}
	fs->dirty = 1;
}

int node_alloc_nid(struct zlfs_fs *fs, uint32_t ino, uint32_t *nid)
{
	uint32_t n = fs->sb.max_nid, i, cand, held = 0;

	for (i = 0; i < n; i++) {
		cand = (fs->nid_hint + i) % n;
		if (cand == ZLFS_NID_NULL || fs->nat[cand].blkaddr != ZLFS_ADDR_NULL)
			continue;
		if (fs->nid_freed[cand / 8] & (1u << (cand % 8))) {
			held++;
			continue;
		}
		fs->nid_hint = cand + 1;
		nat_set(fs, cand, ZLFS_ADDR_NEW, ino ? ino : cand);
		if (!ino) /* its name is not durable until a checkpoint */
			fs->nofast[cand / 8] |= (uint8_t)(1u << (cand % 8));
		fs->valid_nodes++;
		if (!ino)
			fs->valid_inodes++;
		*nid = cand;
		return 0;
	}
	return held ? -EAGAIN : -ENOSPC; /* -EAGAIN: a checkpoint releases freed nids */
}

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
	np->buf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!np->buf) {
		free(np);
		return -ENOMEM;
	}
	np->nid = nid;
	np->refs = 1;
	np->next = fs->ncache[h];
	fs->ncache[h] = np;
	fs->nr_cached++;
	*out = np;
	return 0;
}

/* Directory nodes are hot, file nodes warm, indirect nodes (rarely rewritten) cold. */
static enum zlfs_log_type node_temp(const struct node_page *np)
{
	const struct zlfs_blkhdr *h = np->buf;

	if (le16_get(h->kind) == ZLFS_KIND_INDNODE)
		return ZLFS_LOG_COLD_NODE;
	return np->hot ? ZLFS_LOG_HOT_NODE : ZLFS_LOG_WARM_NODE;
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

static void node_clean(struct zlfs_fs *fs, struct node_page *np)
{
	if (!np->dirty)
		return;
	np->dirty = 0;
	dirty_list_del(fs, np);
	seg_owe(fs, np->owed_type, -1);
	fs->nr_dirty_nodes--;
}

static void ncache_remove(struct zlfs_fs *fs, struct node_page *victim)
{
	struct node_page **pp = &fs->ncache[nhash(fs, victim->nid)];

	while (*pp && *pp != victim)
		pp = &(*pp)->next;
	if (*pp)
		*pp = victim->next;
	node_clean(fs, victim);
	fs->nr_cached--;
	zdev_buf_free(victim->buf);
	free(victim);
}

static int node_is_kind(unsigned kind)
{
	return kind == ZLFS_KIND_INODE || kind == ZLFS_KIND_DNODE || kind == ZLFS_KIND_INDNODE ||
	       kind == ZLFS_KIND_XATTR;
}

static int node_read(struct zlfs_fs *fs, uint32_t nid, void *buf)
{
	const struct zlfs_blkhdr *h = buf;
	uint32_t addr = fs->nat[nid].blkaddr;
	int ret;

	ret = seg_read(fs, addr, buf);
	if (ret)
		return ret;
	ret = zlfs_blk_verify(buf, fs->sb.seed, ZLFS_KIND_MAX);
	if (!ret && (!node_is_kind(le16_get(h->kind)) || le32_get(h->index) != nid))
		ret = -EUCLEAN;
	if (ret)
		zlog_err("node %u at block %u is damaged (%s): run fsck.zlfs", nid, addr,
			 strerror(-ret));
	return ret;
}

/* Node read-ahead: nodes are read back in about the order they were written (a directory's
 * inodes, one after another, by stat or unlink of every file), and one read of NODE_RA
 * blocks costs a device about what one block does. After a miss that continues the previous
 * one's run, the blocks that follow are read too, and every one of them that is the current
 * copy of a node not yet cached is kept as a clean page. */
#define NODE_RA 32u
#define NODE_RA_SLACK 64u /* a miss this close after the last read-ahead still counts as a run */

static int node_ra_wanted(const struct zlfs_fs *fs, uint32_t addr)
{
	return fs->nr_cached < NCACHE_MAX && addr >= fs->node_ra_next - NODE_RA_SLACK &&
	       addr <= fs->node_ra_next + NODE_RA_SLACK;
}

/* Keep block BUF read from ADDR as the clean page of its node, if it is one. */
static void node_ra_keep(struct zlfs_fs *fs, uint32_t addr, const void *buf)
{
	const struct zlfs_blkhdr *h = buf;
	uint32_t nid = le32_get(h->index);
	struct node_page *np;

	if (!node_is_kind(le16_get(h->kind)) || nid == ZLFS_NID_NULL || nid >= fs->sb.max_nid ||
	    fs->nat[nid].blkaddr != addr || ncache_find(fs, nid) ||
	    zlfs_blk_verify(buf, fs->sb.seed, ZLFS_KIND_MAX) || ncache_add(fs, nid, &np))
		return;
	memcpy(np->buf, buf, ZLFS_BLOCK_SIZE);
	np->refs = 0;
	iattr_update(fs, np);
}

static void node_readahead(struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t n = seg_valid_span(fs, addr, NODE_RA), i;
	uint8_t *buf;

	fs->node_ra_next = addr + n;
	if (n < 2 || !(buf = zdev_buf_alloc((size_t)n * ZLFS_BLOCK_SIZE)))
		return;
	if (!seg_read_run(fs, addr, n, buf))
		for (i = 0; i < n && fs->nr_cached < NCACHE_MAX; i++)
			node_ra_keep(fs, addr + i, buf + (size_t)i * ZLFS_BLOCK_SIZE);
	zdev_buf_free(buf);
}

int node_get(struct zlfs_fs *fs, uint32_t nid, struct node_page **out)
{
	struct node_page *np;
	int ret;

	if (nid == ZLFS_NID_NULL || nid >= fs->sb.max_nid)
		return -EUCLEAN;
	np = ncache_find(fs, nid);
	if (np) {
		np->refs++;
		*out = np;
		return 0;
	}
	if (fs->nat[nid].blkaddr == ZLFS_ADDR_NULL || fs->nat[nid].blkaddr == ZLFS_ADDR_NEW)
		return -ENOENT;
	if (node_ra_wanted(fs, fs->nat[nid].blkaddr)) {
		node_readahead(fs, fs->nat[nid].blkaddr);
		np = ncache_find(fs, nid);
		if (np) {
			np->refs++;
			*out = np;
			return 0;
		}
	}
	fs->node_ra_next = fs->nat[nid].blkaddr + 1;
	ret = ncache_add(fs, nid, &np);
	if (ret)
		return ret;
	ret = node_read(fs, nid, np->buf);
	if (ret) {
		ncache_remove(fs, np);
		return ret;
	}
	iattr_update(fs, np);
	*out = np;
	return 0;
}

int node_new(struct zlfs_fs *fs, uint32_t nid, uint32_t ino, enum zlfs_blk_kind kind,
	     struct node_page **out)
{
	struct node_page *np;
	int ret = ncache_add(fs, nid, &np);

	if (ret)
		return ret;
	memset(np->buf, 0, ZLFS_BLOCK_SIZE);
	zlfs_blk_init(np->buf, kind, nid, ino, fs->cp_ver);
	node_dirty(fs, np);
	*out = np;
	return 0;
}

/* Whoever changed a page holds it until here: the last chance to refresh its attributes. */
void node_put(struct zlfs_fs *fs, struct node_page *np)
{
	if (!np)
		return;
	if (np->dirty)
		iattr_update(fs, np);
	np->refs--;
}

void node_dirty(struct zlfs_fs *fs, struct node_page *np)
{
	iattr_update(fs, np);
	if (!np->dirty) {
		np->dirty = 1;
		dirty_list_add(fs, np);
		np->owed_type = (uint8_t)node_temp(np);
		seg_owe(fs, np->owed_type, 1);
		fs->nr_dirty_nodes++;
	}
	fs->dirty = 1;
}

void node_set_hot(struct zlfs_fs *fs, struct node_page *np, int hot)
{
	if (np->hot == hot)
		return;
	np->hot = hot;
	if (np->dirty) { /* its room is now kept in the other log */
		seg_owe(fs, np->owed_type, -1);
		np->owed_type = (uint8_t)node_temp(np);
		seg_owe(fs, np->owed_type, 1);
	}
}

void node_free(struct zlfs_fs *fs, uint32_t nid)
{
	struct node_page *np = ncache_find(fs, nid);
	uint32_t addr = fs->nat[nid].blkaddr;

	if (np)
		ncache_remove(fs, np);
	iattr_drop(fs, nid);
	if (addr == ZLFS_ADDR_NULL)
		return;
	fs->nid_freed[nid / 8] |= (uint8_t)(1u << (nid % 8));
	/* Roll-forward cannot free nodes: the owner's next fsync takes a checkpoint. */
	fs->nofast[fs->nat[nid].ino / 8] |= (uint8_t)(1u << (fs->nat[nid].ino % 8));
	seg_mark(fs, addr, 0);
	if (fs->nat[nid].ino == nid)
		fs->valid_inodes--;
	fs->valid_nodes--;
	fs->nat[nid].version++;
	nat_set(fs, nid, ZLFS_ADDR_NULL, 0);
}

static int node_write_to(struct zlfs_fs *fs, struct node_page *np, uint16_t flags,
			 enum zlfs_log_type log)
{
	struct zlfs_blkhdr *h = np->buf;
	uint32_t old = fs->nat[np->nid].blkaddr, addr;
	int ret;

	h->flags = le16_put(flags);
	blk_seal(fs, np->buf);
	ret = seg_append(fs, log, np->buf, np->nid, ZLFS_SUM_NODE, &addr);
	if (ret)
		return ret;
	seg_mark(fs, old, 0);
	nat_set(fs, np->nid, addr, le32_get(h->ino));
	node_clean(fs, np);
	return 0;
}

static int node_write(struct zlfs_fs *fs, struct node_page *np, uint16_t flags)
{
	return node_write_to(fs, np, flags, node_temp(np));
}

int node_flush_all(struct zlfs_fs *fs)
{
	int ret;

	while (fs->dirty_head) /* each write takes the page off the list */
		if ((ret = node_write(fs, fs->dirty_head, 0)))
			return ret;
	return 0;
}

/* Staged blocks to the device, then a device flush. */
static int node_make_durable(struct zlfs_fs *fs)
{
	int ret = wbuf_flush_all(fs->wb);

	return ret ? ret : zdev_flush(fs->dev);
}

int node_fsync(struct zlfs_fs *fs, uint32_t ino)
{
	struct node_page *np, *next, *inode = NULL;
	int ret;

	if (fs->nofast[ino / 8] & (1u << (ino % 8)))
		return -EAGAIN;
	/* The data first: a node that reaches the device before the blocks it points to would
	 * give the file contents it never had if power failed in between. */
	ret = node_make_durable(fs);
	/* Then the nodes, all in one zone (a zone keeps writes in order through a power cut),
	 * the inode last and marked: recovery takes the group only when the marker is there. */
	for (np = fs->dirty_head; !ret && np; np = next) {
		next = np->dnext; /* a write takes NP off the list */
		if (np->nid != ino && le32_get(((struct zlfs_blkhdr *)np->buf)->ino) == ino)
			ret = node_write_to(fs, np, 0, ZLFS_LOG_WARM_NODE);
	}
	if (!ret)
		ret = node_get(fs, ino, &inode);
	if (!ret) {
		ret = node_write_to(fs, inode, ZLFS_NODE_FSYNC, ZLFS_LOG_WARM_NODE);
		node_put(fs, inode);
	}
	if (!ret)
		ret = node_make_durable(fs);
	if (ret) {
		zlog_err("fsync of inode %u failed (%s); filesystem switched to read-only", ino,
			 strerror(-ret));
		fs->readonly = 1;
	}
	return ret;
}

void node_shrink(struct zlfs_fs *fs)
{
	struct node_page *np, *next;
	uint32_t b;

	if (fs->nr_dirty_nodes > NDIRTY_MAX && node_flush_all(fs))
		return;
	if (fs->nr_cached <= NCACHE_MAX)
		return;
	for (b = 0; b < fs->ncache_buckets && fs->nr_cached > NCACHE_MAX / 2; b++) {
		for (np = fs->ncache[b]; np; np = next) {
			next = np->next;
			if (!np->dirty && !np->refs && fs->nr_cached > NCACHE_MAX / 2)
				ncache_remove(fs, np);
		}
	}
}

int node_init(struct zlfs_fs *fs)
{
	fs->ncache_buckets = 4096;
	fs->ncache = calloc(fs->ncache_buckets, sizeof(*fs->ncache));
	fs->nofast = calloc(fs->sb.max_nid / 8 + 1, 1);
	fs->nid_freed = calloc(fs->sb.max_nid / 8 + 1, 1);
	fs->icache = calloc(1, sizeof(*fs->icache));
	return fs->ncache && fs->nofast && fs->nid_freed && fs->icache ? 0 : -ENOMEM;
}

void node_destroy(struct zlfs_fs *fs)
{
	uint32_t b;

	if (!fs->ncache)
		return;
	for (b = 0; b < fs->ncache_buckets; b++)
		while (fs->ncache[b])
			ncache_remove(fs, fs->ncache[b]);
	free(fs->ncache);
	fs->ncache = NULL;
	free(fs->nofast);
	fs->nofast = NULL;
	free(fs->nid_freed);
	fs->nid_freed = NULL;
	for (b = 0; fs->icache && b < ICACHE_BUCKETS; b++)
		while (fs->icache->bucket[b]) {
			struct iattr_ent *e = fs->icache->bucket[b];

			fs->icache->bucket[b] = e->next;
			free(e);
		}
	free(fs->icache);
	fs->icache = NULL;
}
