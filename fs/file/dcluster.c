/*
 * dcluster.c - the data of compressed files (docs/compression.md): a file flagged
 * ZLFS_IFLAG_COMPRESS is read and written by clusters of 2^n blocks, each stored raw (slot
 * per block, as any file) or compressed (the marker, then k blocks under a cluster header).
 *
 * Owns: turning a cluster's plaintext into what is stored and back - compress, then encrypt
 * each stored block with the tweak of its slot (its file block index); read, decrypt,
 * decompress - and the writes, truncations and punches that land inside a cluster, which
 * read it, change it and store it again whole. A write into part of a raw cluster changes its
 * blocks alone, as in any file, and the write that reaches a cluster's last block tries to
 * compress it. A file's last cluster held in memory (tailbuf.c, data.c) is read here and
 * stored here when it goes (dclu_read, dclu_write_held). Which files are compressed: the
 * mount's choice at create (dclu_start), and chattr +c / -c while a file is empty (dclu_set).
 * Slots and appends are dmap.c's (data_put_clusters), the codec cluster.c's. Each thread keeps
 * one codec context (the libraries' state is not shared).
 * May call: dmap.c (data_int.h), inode.c (files.h), node/log (core.h), cluster.h,
 * crypto/zcrypt.h, log.h; counts what it stores in the mount's compression figures (core.h).
 * Not tailbuf.c, which calls it (dclu_write_held): data.c does the holding.
 */
#include "cluster.h"
#include "data_int.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS ZLFS_BLOCK_SIZE

/* A thread's codec context and run buffer (WRITE_RUN blocks), made on first use and freed
 * when the thread ends: a run allocated per write would be mapped and unmapped each time (it
 * is past malloc's mmap threshold), which cost the sequential write more than it saved. */
struct cx_thread {
	struct cluster_ctx *cx;
	uint8_t *run;
	int run_busy; /* a run stored from inside another (a checkpoint's held cluster) */
};

static pthread_key_t cx_key;
static int cx_key_ok; /* set once by cx_key_init: a key that was never made is never used */
static pthread_once_t cx_once = PTHREAD_ONCE_INIT;

static void cx_free(void *p)
{
	struct cx_thread *t = p;

	cluster_ctx_free(t->cx);
	zdev_buf_free(t->run);
	free(t);
}

static void cx_key_init(void) { cx_key_ok = !pthread_key_create(&cx_key, cx_free); }

static struct cx_thread *cx_thread(void)
{
	struct cx_thread *t;

	pthread_once(&cx_once, cx_key_init);
	if (!cx_key_ok) /* the process is out of keys: the caller says ENOMEM */
		return NULL;
	t = pthread_getspecific(cx_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (t && (!(t->cx = cluster_ctx_new()) || pthread_setspecific(cx_key, t))) {
		cluster_ctx_free(t->cx);
		free(t);
		t = NULL;
	}
	return t;
}

/* This thread's codec context. */
static struct cluster_ctx *cx_get(void)
{
	struct cx_thread *t = cx_thread();

	return t ? t->cx : NULL;
}

int dclu_stored(uint32_t ino, uint64_t first, uint32_t log, const uint32_t *addr)
{
	uint32_t c = 1u << log, k = 0, j;
	int ret = 0;

	while (k + 1 < c && addr[k + 1] && addr[k + 1] != ZLFS_ADDR_PREALLOC &&
	       addr[k + 1] != ZLFS_ADDR_COMPRESSED)
		k++;
	for (j = k + 1; j < c && !ret; j++)
		ret = addr[j] ? -EIO : 0; /* format_check.c refuses such a node: memory went bad */
	if (!k || ret) {
		zlog_err("inode %u: compressed cluster %llu has %u stored blocks and a slot after "
			 "them: run fsck.zlfs", ino, (unsigned long long)(first >> log), k);
		return -EIO;
	}
	return (int)k;
}

int dclu_decode(struct zlfs_fs *fs, uint32_t ino, uint32_t log,
		const struct zcrypt_file_key *key, uint64_t first, uint32_t k, uint8_t *stored,
		uint8_t *dst)
{
	struct cluster_place at = {fs->sb.seed, ino, first >> log};
	struct cluster_ctx *cx = cx_get();
	char why[160] = "";
	int ret = cx ? 0 : -ENOMEM;

	for (uint32_t j = 0; !ret && key && j < k; j++)
		ret = zcrypt_xts_decrypt(key, first + 1 + j, stored + (size_t)j * BS,
					 stored + (size_t)j * BS, BS);
	if (!ret && cluster_decompress(cx, &at, stored, k, log, dst, why, sizeof(why))) {
		zlog_err("inode %u: compressed cluster %llu (file bytes %llu..%llu) does not "
			 "decompress: %s", ino, (unsigned long long)at.index,
			 (unsigned long long)(first * BS),
			 (unsigned long long)((first + (1u << log)) * BS - 1), why);
		ret = -EIO;
	}
	return ret;
}

int dclu_unpack(struct zlfs_fs *fs, uint32_t ino, uint32_t log,
		const struct zcrypt_file_key *key, uint64_t first, const uint32_t *addr,
		uint8_t *dst)
{
	int k = dclu_stored(ino, first, log, addr), ret = k < 0 ? k : 0;
	uint8_t *tmp = ret ? NULL : zdev_buf_alloc((size_t)k * BS);
	uint32_t j, n;

	if (!ret && !tmp)
		ret = -ENOMEM;
	for (j = 0; !ret && j < (uint32_t)k; j += n) { /* runs of consecutive addresses */
		for (n = 1; j + n < (uint32_t)k && addr[1 + j + n] == addr[1 + j] + n; n++)
			;
		ret = seg_read_run(fs, addr[1 + j], n, tmp + (size_t)j * BS);
	}
	if (!ret)
		ret = dclu_decode(fs, ino, log, key, first, (uint32_t)k, tmp, dst);
	zdev_buf_free(tmp);
	return ret;
}

/* The 2^n slots of cluster CIDX, all null where no node maps it yet. */
static int cluster_slots(struct zlfs_fs *fs, struct node_page *inode, uint64_t cidx,
			 uint32_t *addr)
{
	uint32_t log = data_cluster_log(inode), c = 1u << log;
	struct dref ref;
	int ret = data_ref(fs, inode, cidx << log, 0, &ref);

	memset(addr, 0, c * sizeof(*addr));
	if (ret == -ENOENT || ret == -EFBIG)
		return 0;
	if (ret)
		return ret;
	for (uint32_t i = 0; i < c; i++)
		addr[i] = le32_get(*node_slot(ref.np, ref.slot + i));
	node_put(fs, ref.np);
	return 0;
}

int dclu_is_compressed(struct zlfs_fs *fs, struct node_page *inode, uint64_t cidx, int *yes)
{
	uint32_t raw;
	int ret = data_slot_raw(fs, inode, cidx << data_cluster_log(inode), &raw);

	*yes = raw == ZLFS_ADDR_COMPRESSED;
	return ret;
}

int dclu_read(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
	      uint64_t cidx, uint8_t *plain)
{
	uint32_t log = data_cluster_log(inode), c = 1u << log, addr[1u << ZLFS_CLUSTER_LOG_MAX];
	uint64_t first = cidx << log;
	int ret = cluster_slots(fs, inode, cidx, addr), n = 0;

	for (uint32_t i = 0; !ret && i < c; i++) /* the marker is no block */
		n += addr[i] && addr[i] != ZLFS_ADDR_PREALLOC && addr[i] != ZLFS_ADDR_COMPRESSED;
	if (!ret && plain && addr[0] == ZLFS_ADDR_COMPRESSED)
		ret = dclu_unpack(fs, inode->nid, log, dk->on ? &dk->k : NULL, first, addr, plain);
	else
		for (uint32_t i = 0; !ret && plain && i < c; i++)
			ret = data_read_addr(fs, dk, first + i,
					     addr[i] == ZLFS_ADDR_PREALLOC ? ZLFS_ADDR_NULL : addr[i],
					     plain + (size_t)i * BS);
	return ret ? ret : n;
}

/* Cluster CIDX in plaintext into PLAIN (2^n blocks): 0 or a negative errno. */
static int cluster_read(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
			uint64_t cidx, uint8_t *plain)
{
	int n = dclu_read(fs, inode, dk, cidx, plain);

	return n < 0 ? n : 0;
}

/* The write path's figures for zlfs-ctl stats: a store of IN plaintext blocks that took OUT
 * blocks, counted in WHAT (a cluster compressed or raw, or a block written alone). */
static void clu_count(struct zlfs_fs *fs, uint64_t *what, uint32_t in, uint32_t out)
{
	ATOMIC_ADD(what, 1);
	ATOMIC_ADD(&fs->clu_bytes_in, (uint64_t)in * BS);
	ATOMIC_ADD(&fs->clu_bytes_out, (uint64_t)out * BS);
}

static int block_is_zero(const uint8_t *b)
{
	return !b[0] && !memcmp(b, b + 1, BS - 1);
}

/* ---- runs of clusters -------------------------------------------------------------------
 * Whole clusters are stored in runs, as a plain file's blocks are (data_write_run): the
 * clusters a write covers whole, up to WRITE_RUN blocks in one node, are compressed one after
 * another into one buffer, their stored forms packed, and go to the device in one append and
 * into their node in one update (data_put_clusters). A run is stored whole or not at all. */

#define RUN_MAX (WRITE_RUN >> ZLFS_CLUSTER_LOG_MIN)

struct crun {
	uint64_t cidx;              /* its first cluster */
	uint32_t n, used;           /* clusters in it, blocks of BUF they use */
	int compressed_last;        /* the last cluster added compressed: the next skips the probe */
	int no_src;                 /* SRC may no longer stand for BUF */
	const uint8_t *src;         /* raw clusters of the write's own bytes only: BUF's content */
	uint8_t *buf;               /* WRITE_RUN blocks: the stored forms, packed */
	struct dclu_put cl[RUN_MAX];
};

/* A run from cluster CIDX on, in this thread's run buffer unless it is in use. */
static int run_init(struct crun *r, uint64_t cidx)
{
	struct cx_thread *t = cx_thread();

	*r = (struct crun){.cidx = cidx};
	if (t && !t->run)
		t->run = zdev_buf_alloc((size_t)WRITE_RUN * BS);
	if (t && t->run && !t->run_busy) {
		t->run_busy = 1;
		r->buf = t->run;
		return 0;
	}
	r->buf = zdev_buf_alloc((size_t)WRITE_RUN * BS);
	return r->buf ? 0 : -ENOMEM;
}

static void run_done(struct crun *r)
{
	struct cx_thread *t = pthread_getspecific(cx_key);

	if (t && r->buf == t->run)
		t->run_busy = 0;
	else
		zdev_buf_free(r->buf);
}

/* A run of raw clusters that are the caller's consecutive plaintext (no key, no hole) is
 * appended from it, not copied (a copy cost 7% of the daemon's time writing random data):
 * PLAIN, a cluster of C blocks, joins it if it can, and 1 says so; else what SRC stood for
 * is copied into BUF and SRC is not used again. */
static int run_from_src(struct crun *r, const uint8_t *plain, uint32_t c, int direct)
{
	if (direct && !r->no_src && (!r->n || r->src + (size_t)r->used * BS == plain)) {
		r->src = r->n ? r->src : plain;
		r->cl[r->n++] = (struct dclu_put){.k = c};
		r->used += c;
		return 1;
	}
	if (r->src)
		memcpy(r->buf, r->src, (size_t)r->used * BS);
	r->src = NULL;
	r->no_src = 1;
	return 0;
}

/* Cluster R->cidx + R->n from PLAIN (2^n blocks) into the run: compressed (then encrypted)
 * when that saves a block; else raw, its all-zero blocks left holes and the others packed
 * (encrypted), unless KEEP_RAW: then nothing is added and 1 says so. */
static int run_add(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		   struct crun *r, const uint8_t *plain, int keep_raw)
{
	const struct zlfs_inode *in = inode_of(inode);
	uint32_t log = in->cluster_log, c = 1u << log, i, k;
	uint64_t cidx = r->cidx + r->n, first = cidx << log, holes = 0;
	struct cluster_place at = {fs->sb.seed, inode->nid, cidx};
	int level = fs->compress_alg == in->compress_alg ? fs->compress_level : 0;
	struct cluster_ctx *cx = cx_get();
	uint8_t *out = r->buf + (size_t)r->used * BS;
	int ret = cx ? cluster_compress_probed(cx, &at, in->compress_alg, level, plain, log, out,
					       !r->compressed_last) : -ENOMEM;

	if (ret < 0)
		return ret;
	k = (uint32_t)ret;
	r->compressed_last = k > 0;
	for (i = 0, ret = 0; !ret && k && dk->on && i < k; i++)
		ret = zcrypt_xts_encrypt(&dk->k, first + 1 + i, out + (size_t)i * BS,
					 out + (size_t)i * BS, BS);
	if (!k && keep_raw)
		return 1;
	for (i = 0; !k && i < c; i++)
		holes |= (uint64_t)block_is_zero(plain + (size_t)i * BS) << i;
	if (!ret && run_from_src(r, plain, c, !k && !holes && !dk->on))
		return 0;
	for (i = 0; !k && !ret && i < c; i++) { /* raw: its blocks but the holes, packed */
		uint8_t *to = r->buf + (size_t)(r->used + r->cl[r->n].k) * BS;

		if (holes >> i & 1)
			continue;
		if (dk->on)
			ret = zcrypt_xts_encrypt(&dk->k, first + i, plain + (size_t)i * BS, to, BS);
		else
			memcpy(to, plain + (size_t)i * BS, BS);
		r->cl[r->n].k++;
	}
	if (ret)
		return ret;
	if (k)
		r->cl[r->n] = (struct dclu_put){.k = k, .compressed = 1};
	r->cl[r->n].holes = holes;
	r->used += r->cl[r->n++].k;
	return 0;
}

/* Store the run's clusters (OWED: a held cluster's, whose room was set aside); *DONE: how
 * many were, also when an error ends it (the node that maps the next may not be the first's). */
static int run_put(struct zlfs_fs *fs, struct node_page *inode, struct crun *r, int owed,
		   uint32_t *done)
{
	uint32_t c = 1u << data_cluster_log(inode), off = 0;
	int ret = 0;

	for (*done = 0; !ret && *done < r->n;) {
		ret = data_put_clusters(fs, inode, r->cidx + *done,
					(r->src ? r->src : r->buf) + (size_t)off * BS,
					r->cl + *done, r->n - *done, owed);
		for (int i = 0; i < ret; i++, ++*done) {
			const struct dclu_put *p = &r->cl[*done];

			clu_count(fs, p->compressed ? &fs->clu_compressed : &fs->clu_raw, c, p->k);
			off += p->k;
		}
		ret = ret < 0 ? ret : 0;
	}
	return ret;
}

/* Store PLAIN (2^n blocks) as cluster CIDX, a run of one: compressed when that saves a block,
 * else raw (all-zero blocks as holes), unless KEEP_RAW: a cluster that does not compress then
 * stays as it is, and 1 says so. OWED: a held cluster's, whose room was set aside
 * (data_put_clusters). */
static int cluster_store(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
			 uint64_t cidx, const uint8_t *plain, int keep_raw, int owed)
{
	struct crun r;
	uint32_t done;
	int ret = run_init(&r, cidx);

	if (!ret)
		ret = run_add(fs, inode, dk, &r, plain, keep_raw);
	if (!ret)
		ret = run_put(fs, inode, &r, owed, &done);
	run_done(&r);
	return ret;
}

/* Store the N whole clusters at SRC from cluster CIDX on, up to a run's worth: *DONE, how many
 * were stored, also when an error ends it. */
static int store_whole(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		       uint64_t cidx, const uint8_t *src, uint64_t n, uint32_t *done)
{
	uint32_t log = data_cluster_log(inode), c = 1u << log;
	struct crun r;
	int ret = run_init(&r, cidx);

	*done = 0;
	while (!ret && r.n < n && (r.n + 1) * c <= WRITE_RUN &&
	       (cidx + r.n) << log < data_max_blocks())
		ret = run_add(fs, inode, dk, &r, src + ((size_t)r.n << log) * BS, 0);
	if (!ret)
		ret = run_put(fs, inode, &r, 0, done);
	run_done(&r);
	return ret;
}

/* Bytes [AT, AT+N) of a raw cluster CIDX (or one not written yet) from SRC, or zeros: its
 * blocks changed one by one; when the change reaches the cluster's last block, the cluster
 * is tried compressed. BUF is scratch of 2^n blocks. */
static int raw_patch(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
		     uint64_t cidx, uint32_t at, const uint8_t *src, uint32_t n, uint8_t *buf)
{
	uint32_t log = data_cluster_log(inode), c = 1u << log, end = at + n;
	uint64_t first = cidx << log;
	int ret = 0;

	for (uint32_t pos = at; !ret && pos < end;) {
		uint32_t b = pos / BS, o = pos % BS, len = BS - o < end - pos ? BS - o : end - pos;

		if (len < BS)
			ret = data_read_block(fs, inode, dk, first + b, buf);
		if (!ret && src)
			memcpy(buf + o, src + (pos - at), len);
		else if (!ret)
			memset(buf + o, 0, len);
		if (!ret)
			ret = data_write_block(fs, inode, dk, first + b, buf);
		if (!ret)
			clu_count(fs, &fs->clu_blocks_alone, 1, 1);
		pos += len;
	}
	if (!ret && src && end > (c - 1) * BS) { /* an append finishing its cluster */
		ret = cluster_read(fs, inode, dk, cidx, buf);
		if (!ret)
			ret = cluster_store(fs, inode, dk, cidx, buf, 1, 0);
	}
	return ret < 0 ? ret : 0; /* 1: it stays raw */
}

/* Bytes [AT, AT+N) of cluster CIDX from SRC, or zeros (SRC NULL). */
static int cluster_patch(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
			 uint64_t cidx, uint32_t at, const uint8_t *src, uint32_t n)
{
	uint32_t c = 1u << data_cluster_log(inode);
	uint8_t *buf = zdev_buf_alloc((size_t)c * BS);
	int yes = 0, ret = buf ? dclu_is_compressed(fs, inode, cidx, &yes) : -ENOMEM;

	if (!ret && !yes) {
		ret = raw_patch(fs, inode, dk, cidx, at, src, n, buf);
	} else if (!ret) {
		ret = cluster_read(fs, inode, dk, cidx, buf);
		if (!ret && src)
			memcpy(buf + at, src, n);
		else if (!ret)
			memset(buf + at, 0, n);
		if (!ret)
			ret = cluster_store(fs, inode, dk, cidx, buf, 0, 0);
	}
	zdev_buf_free(buf);
	return ret;
}

int dclu_write(struct zlfs_fs *fs, struct node_page *inode, const struct dkey *dk,
	       const uint8_t *src, uint64_t off, uint64_t end, uint64_t *pos)
{
	uint32_t log = data_cluster_log(inode);
	uint64_t cb = (uint64_t)BS << log;
	int ret = 0;

	for (*pos = off; !ret && *pos < end;) {
		uint64_t cidx = *pos / cb, cstart = cidx * cb;
		uint64_t n = (end < cstart + cb ? end : cstart + cb) - *pos;

		uint32_t done;

		if (cidx << log >= data_max_blocks())
			return -EFBIG;
		if (n == cb) { /* a run of whole clusters */
			ret = store_whole(fs, inode, dk, cidx, src + (*pos - off), (end - *pos) / cb,
					  &done);
			*pos += done * cb;
			continue;
		}
		ret = cluster_patch(fs, inode, dk, cidx, (uint32_t)(*pos - cstart),
				    src + (*pos - off), (uint32_t)n);
		if (!ret)
			*pos += n;
	}
	return ret;
}

/* The blocks of held raw cluster FIRST... whose bit is set in DIRTY, from PLAIN, alone; one
 * all zeros (a truncate's, past the end of file) becomes a hole, as in cluster_store. */
static int write_dirty(struct zlfs_fs *fs, struct node_page *inode, uint64_t first,
		       const uint8_t *plain, uint64_t dirty)
{
	int ret = 0;

	for (uint32_t i = 0; !ret && i < 64; i++) {
		const uint8_t *b = plain + (size_t)i * BS;

		if (!(dirty >> i & 1))
			continue;
		if (block_is_zero(b)) {
			ret = data_drop_blocks(fs, inode, first + i, first + i + 1);
			continue;
		}
		ret = data_write_held(fs, inode, first + i, b);
		if (!ret)
			clu_count(fs, &fs->clu_blocks_alone, 1, 1);
	}
	return ret;
}

int dclu_write_held(struct zlfs_fs *fs, struct node_page *inode, uint64_t first,
		    const uint8_t *plain, uint64_t dirty)
{
	uint64_t cidx = first >> data_cluster_log(inode);
	struct dkey dk;
	int stored = 0, ret = dkey_get(fs, inode, &dk);

	/* A raw cluster that stays raw (data that does not compress, appended and fsync'ed a
	 * little at a time) changes only the blocks that changed: stored whole, each fsync would
	 * write its earlier blocks again. */
	if (!ret)
		ret = dclu_is_compressed(fs, inode, cidx, &stored);
	if (!ret)
		ret = cluster_store(fs, inode, &dk, cidx, plain, !stored, 1);
	if (ret == 1)
		ret = write_dirty(fs, inode, first, plain, dirty);
	dkey_put(&dk);
	return ret;
}

/* Zero [FROM, TO) within cluster CIDX when it is stored compressed (only bytes before the end
 * of file FSIZE need it: those past it read as zeros already): *DONE says whether it was. */
static int zero_if_compressed(struct zlfs_fs *fs, struct node_page *inode, uint64_t cidx,
			      uint64_t from, uint64_t to, uint64_t fsize, int *done)
{
	uint64_t cb = (uint64_t)BS << data_cluster_log(inode), cstart = cidx * cb;
	struct dkey dk;
	int ret = dclu_is_compressed(fs, inode, cidx, done);

	if (to > fsize)
		to = fsize;
	if (ret || !*done || from >= to)
		return ret;
	ret = dkey_get(fs, inode, &dk);
	if (!ret)
		ret = cluster_patch(fs, inode, &dk, cidx, (uint32_t)(from - cstart), NULL,
				    (uint32_t)(to - from));
	dkey_put(&dk);
	return ret;
}

int dclu_punch_ends(struct zlfs_fs *fs, struct node_page *inode, uint64_t *off, uint64_t *end,
		    uint64_t fsize)
{
	uint64_t cb = (uint64_t)BS << data_cluster_log(inode);
	uint64_t head = *off / cb, tail = *end / cb;
	int done = 0, ret = 0;

	if (*off % cb) {
		uint64_t to = *end < (head + 1) * cb ? *end : (head + 1) * cb;

		ret = zero_if_compressed(fs, inode, head, *off, to, fsize, &done);
		if (!ret && done)
			*off = to;
	}
	if (!ret && *off < *end && *end % cb) {
		ret = zero_if_compressed(fs, inode, tail, tail * cb > *off ? tail * cb : *off, *end,
					 fsize, &done);
		if (!ret && done)
			*end = tail * cb > *off ? tail * cb : *off;
	}
	return ret;
}

int dclu_cut(struct zlfs_fs *fs, struct node_page *inode, uint64_t size, uint64_t old,
	     uint64_t *from)
{
	uint64_t cb = (uint64_t)BS << data_cluster_log(inode), cidx = size / cb;
	int done = 0, ret = 0;

	*from = (size + BS - 1) / BS;
	if (!(size % cb))
		return 0;
	/* compressed: zeroed up to the old end (past it, zeros already), and never dropped in part */
	ret = zero_if_compressed(fs, inode, cidx, size, (cidx + 1) * cb, old, &done);
	if (!ret && done)
		*from = (cidx + 1) * cb / BS;
	return ret < 0 ? ret : done;
}

/* No data, no node: a file whose tree may change shape. Nothing is held in memory for it
 * either (tailbuf.c): a held span lies below the end of file, and one is let go when a
 * truncate leaves none of it inside the file. The pointers say so, not the count of blocks
 * alone, which a damaged inode may have wrong: a block kept under the other shape would be
 * read as a cluster. An inline file's area holds bytes, not pointers. */
static int file_empty(const struct node_page *np)
{
	const struct zlfs_inode *in = np->buf;

	for (int i = 0; i < ZLFS_INODE_NIDS; i++)
		if (in->nid[i])
			return 0;
	for (int i = 0; i < ZLFS_INODE_ADDRS && !(le32_get(in->flags) & ZLFS_IFLAG_INLINE); i++)
		if (in->addr[i])
			return 0;
	return !le64_get(in->size) && !le64_get(in->blocks);
}

/* The algorithm a file or directory made compressed without one of its own gets: the mount's,
 * else mkfs's default, else LZ4. */
static unsigned default_alg(const struct zlfs_fs *fs)
{
	unsigned alg = fs->compress_alg ? fs->compress_alg : fs->sb.compress_alg;

	return alg ? alg : ZLFS_CLUSTER_LZ4;
}

/* INODE gets the flag with ALG and clusters of 2^LOG blocks (ALG 0: loses it). */
static void flag_set(struct zlfs_inode *in, unsigned alg, unsigned log)
{
	in->flags = le32_put(alg ? le32_get(in->flags) | ZLFS_IFLAG_COMPRESS
				 : le32_get(in->flags) & ~ZLFS_IFLAG_COMPRESS);
	in->compress_alg = (uint8_t)alg;
	in->cluster_log = alg ? (uint8_t)log : 0;
}

int dclu_flagged(const struct node_page *np)
{
	const struct zlfs_inode *in = np->buf;

	return !!(le32_get(in->flags) & ZLFS_IFLAG_COMPRESS);
}

int dclu_set(struct zlfs_fs *fs, struct node_page *np, int on)
{
	struct zlfs_inode *in = inode_of(np);
	uint32_t mode = le32_get(in->mode);

	if (!S_ISREG(mode) && !S_ISDIR(mode))
		return on ? -EOPNOTSUPP : 0;
	if (dclu_flagged(np) == !!on)
		return 0;
	if (on && !(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_COMPRESS))
		return -EOPNOTSUPP;
	if (S_ISDIR(mode)) { /* a directory's flag is what its new files and directories get */
		flag_set(in, on ? default_alg(fs) : 0, fs->sb.cluster_log);
		inode_touch(fs, np, INODE_CTIME);
		return 0;
	}
	if (!file_empty(np))
		return -EINVAL; /* its tree has the other shape: as F2FS, only while empty */
	if (le32_get(in->flags) & ZLFS_IFLAG_INLINE) { /* empty: its area may hold old bytes */
		memset(in->addr, 0, sizeof(in->addr));
		in->inline_size = 0;
	}
	in->flags = le32_put(le32_get(in->flags) & ~ZLFS_IFLAG_INLINE);
	flag_set(in, on ? default_alg(fs) : 0, fs->sb.cluster_log);
	inode_touch(fs, np, INODE_CTIME);
	return 0;
}

/* F2FS's order: a name in nocompress_extension= is never compressed; otherwise a regular file
 * is compressed when the mount compresses, its directory has the flag or its name is in
 * compress_extension=; a directory takes its parent's flag. The mount's algorithm first, then
 * the directory's (with its cluster size), then default_alg's. */
void dclu_start(struct zlfs_fs *fs, struct node_page *dir, struct node_page *np, const char *name)
{
	const struct zlfs_inode *din = inode_of(dir);
	struct zlfs_inode *in = inode_of(np);
	uint32_t mode = le32_get(in->mode);
	int inherit = dclu_flagged(dir), want;
	unsigned alg = fs->compress_alg, log = fs->sb.cluster_log;

	if (!(zlfs_incompat(&fs->sb) & ZLFS_FEAT_INCOMPAT_COMPRESS) ||
	    (S_ISREG(mode) && ((le32_get(in->flags) & ZLFS_IFLAG_INLINE) || le64_get(in->size) ||
			       le64_get(in->blocks))))
		return;
	if (S_ISREG(mode))
		want = (alg || inherit || cluster_ext_match(fs->compress_ext, name)) &&
		       !cluster_ext_match(fs->nocompress_ext, name);
	else
		want = S_ISDIR(mode) && inherit;
	if (!want)
		return;
	if (!alg && inherit) {
		alg = din->compress_alg;
		log = din->cluster_log;
	}
	flag_set(in, alg ? alg : default_alg(fs), log);
	node_dirty(fs, np);
}

int data_cluster_check(struct zlfs_fs *fs, struct node_page *inode, uint64_t first,
		       const uint32_t *addr)
{
	uint32_t log = data_cluster_log(inode);
	uint8_t *buf = log ? zdev_buf_alloc((size_t)BS << log) : NULL;
	struct dkey dk;
	int ret = buf ? dkey_get(fs, inode, &dk) : -EINVAL;

	if (!ret) {
		ret = dclu_unpack(fs, inode->nid, log, dk.on ? &dk.k : NULL, first, addr, buf);
		dkey_put(&dk);
	}
	zdev_buf_free(buf);
	return ret;
}
