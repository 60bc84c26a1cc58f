/*
 * data_read.c - reading file data: a read planned under the file's lock (blocks mapped, the
 * key taken, the held partial block copied from memory), its device reads in runs of one
 * zone, and the blocks read ahead past a sequential read (readahead.c keeps them).
 * Part of the file layer's data (data.c owns the tree and writing).
 * A compressed file's plan covers whole clusters, and a cluster stored compressed is read,
 * decrypted and decompressed once (dcluster.c) into the plan's buffer; such files are read
 * ahead by whole clusters too (the window's plaintext kept, as any file's).
 * May call: dmap.c, dcluster.c (data_int.h), inline.c, readahead.c, tailbuf.c, node/log (core.h), crypto/zcrypt.h.
 */
#include "data_int.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The addresses of file blocks [FIRST, FIRST+N): a node held once for the slots it has. */
static int data_addrs(struct zlfs_fs *fs, struct node_page *inode, uint64_t first, uint32_t n,
		      uint32_t *addr)
{
	uint32_t i = 0, k, j;
	struct dref ref;
	int ret;

	while (i < n) {
		ret = data_ref(fs, inode, first + i, 0, &ref);
		if (ret == -ENOENT || ret == -EFBIG) { /* no node there: a hole */
			addr[i++] = ZLFS_ADDR_NULL;
			continue;
		}
		if (ret)
			return ret;
		k = n - i < slots_left(&ref) ? n - i : slots_left(&ref);
		for (j = 0; j < k; j++) {
			addr[i + j] = le32_get(*node_slot(ref.np, ref.slot + j));
			if (addr[i + j] == ZLFS_ADDR_PREALLOC) /* reserved, unwritten: a hole */
				addr[i + j] = ZLFS_ADDR_NULL;
		}
		node_put(fs, ref.np);
		i += k;
	}
	return 0;
}

/* In a plan's addresses: a block already in the buffer, copied from memory. Plans never hold
 * ZLFS_ADDR_PREALLOC otherwise: data_addrs maps it to a hole. */
#define ADDR_IN_MEMORY ZLFS_ADDR_PREALLOC

/* The file's held partial block or cluster (tailbuf.c), as far as it lies among blocks
 * [FIRST, FIRST+N): copied into BUF, and their addresses marked so that no stale copy is read
 * from the device over them (a held cluster's marker among them: plans of compressed files
 * are whole clusters, so it is all in memory or none of it). */
static void plan_held(struct zlfs_fs *fs, uint32_t ino, uint64_t first, uint32_t n,
		      uint32_t *addr, uint8_t *buf)
{
	uint64_t idx, i;
	uint32_t hn;
	const uint8_t *h = tail_block(fs, ino, &idx, &hn);

	for (i = h ? idx : 0; h && i < idx + hn; i++)
		if (i >= first && i - first < n) {
			memcpy(buf + (i - first) * ZLFS_BLOCK_SIZE, h + (i - idx) * ZLFS_BLOCK_SIZE,
			       ZLFS_BLOCK_SIZE);
			addr[i - first] = ADDR_IN_MEMORY;
		}
}

int data_read_plan(struct zlfs_fs *fs, struct node_page *inode, size_t size, uint64_t off,
		   struct data_rplan *p)
{
	uint64_t fsize = le64_get(inode_of(inode)->size), end, first;
	struct dkey dk;
	int ret = 0;

	if (inline_is(inode))
		return inline_read_plan(fs, inode, size, off, p);
	memset(p, 0, sizeof(*p));
	if (off >= fsize || !size)
		return 0;
	end = off + size < fsize ? off + size : fsize;
	p->clog = data_cluster_log(inode);
	first = off / ZLFS_BLOCK_SIZE >> p->clog << p->clog; /* whole clusters */
	p->first = first;
	p->skip = (size_t)(off - first * ZLFS_BLOCK_SIZE);
	p->len = (size_t)(end - off);
	p->ino = inode->nid;
	p->nblocks = (uint32_t)((((end + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE + (1u << p->clog) - 1)
				 >> p->clog << p->clog) - first);
	p->addr = malloc(p->nblocks * sizeof(*p->addr));
	p->buf = zdev_buf_alloc((size_t)p->nblocks * ZLFS_BLOCK_SIZE);
	if (!p->addr || !p->buf)
		ret = -ENOMEM;
	if (!ret && ra_lookup(fs, p->ino, inode->data_gen, first, p->nblocks, p->buf, &p->ahead)) {
		p->from_ra = 1;
		return 0;
	}
	if (!ret) {
		ret = dkey_get(fs, inode, &dk);
		if (!ret && dk.on && (p->key = malloc(sizeof(*p->key))))
			*p->key = dk.k;
		else if (!ret && dk.on)
			ret = -ENOMEM;
		dkey_put(&dk);
	}
	if (!ret)
		ret = data_addrs(fs, inode, first, p->nblocks, p->addr);
	if (!ret)
		plan_held(fs, p->ino, first, p->nblocks, p->addr, p->buf);
	if (ret) {
		ra_cancel(fs, p->ino, &p->ahead);
		data_read_free(p);
	}
	return ret;
}

/* Runs of consecutive addresses in one zone become one device read each. */
static uint32_t run_length(const struct zlfs_fs *fs, const uint32_t *addr, uint32_t n)
{
	uint32_t zb = zlfs_zone_blocks(&fs->sb), k = 1;

	while (k < n && k < 256 && addr[k] == addr[0] + k && addr[k] / zb == addr[0] / zb)
		k++;
	return k;
}

/* Where blocks read go: file blocks FIRST... of inode INO (of clusters of 2^LOG blocks when
 * compressed, else LOG 0), decrypted with KEY if set. */
struct rdest {
	uint32_t ino, log;
	uint64_t first;
	const struct zcrypt_file_key *key;
};

/* Whether cluster slots ADDR (marker first) hold K stored blocks at FROM, FROM+1, ... in the
 * zone of FROM, ZB blocks to a zone. */
static int stored_at(const uint32_t *addr, uint32_t k, uint32_t from, uint32_t zb)
{
	for (uint32_t j = 0; j < k; j++)
		if (addr[1 + j] != from + j || (from + j) / zb != from / zb)
			return 0;
	return 1;
}

/* The compressed clusters at the start of the N slots ADDR (file block FIRST on) whose stored
 * blocks follow each other in one zone - clusters written one after another - read in one
 * device read (up to 256 blocks, as run_length) and decoded one by one into DST; a cluster
 * alone reads as dclu_unpack does. *USED: the slots they took. */
static int read_clusters(struct zlfs_fs *fs, const uint32_t *addr, uint32_t n, uint64_t first,
			 const struct rdest *to, uint8_t *dst, uint32_t *used)
{
	uint32_t c = 1u << to->log, zb = zlfs_zone_blocks(&fs->sb), m = 0, tot = 0, off = 0;
	uint32_t ks[256];
	uint8_t *tmp;
	int k, ret = 0;

	while (m < 256 && (m + 1) * c <= n && addr[m * c] == ZLFS_ADDR_COMPRESSED) {
		const uint32_t *a = addr + m * c;

		k = dclu_stored(to->ino, first + m * c, to->log, a);
		if (k < 0 || tot + (uint32_t)k > 256 || !stored_at(a, (uint32_t)k, m ? addr[1] + tot
								    : a[1], zb))
			break; /* a bad one is refused below, when it comes first */
		ks[m++] = (uint32_t)k;
		tot += (uint32_t)k;
	}
	*used = m > 1 ? m * c : c;
	if (m <= 1)
		return dclu_unpack(fs, to->ino, to->log, to->key, first, addr, dst);
	tmp = zdev_buf_alloc((size_t)tot * ZLFS_BLOCK_SIZE);
	ret = tmp ? seg_read_run(fs, addr[1], tot, tmp) : -ENOMEM;
	for (uint32_t q = 0; !ret && q < m; off += ks[q++])
		ret = dclu_decode(fs, to->ino, to->log, to->key, first + q * c, ks[q],
				  tmp + (size_t)off * ZLFS_BLOCK_SIZE,
				  dst + (size_t)q * c * ZLFS_BLOCK_SIZE);
	zdev_buf_free(tmp);
	return ret;
}

/* Read the N blocks at ADDR into DST, as TO says. */
static int read_blocks(struct zlfs_fs *fs, const uint32_t *addr, uint32_t n,
		       const struct rdest *to, uint8_t *dst)
{
	const struct zcrypt_file_key *key = to->key;
	uint64_t first = to->first;
	uint32_t i = 0, k;
	int ret = 0;

	while (!ret && i < n) {
		uint8_t *d = dst + (size_t)i * ZLFS_BLOCK_SIZE;

		if (addr[i] == ZLFS_ADDR_COMPRESSED) { /* plans of such files are whole clusters */
			if (!to->log || (i & ((1u << to->log) - 1)) || n - i < 1u << to->log) {
				zlog_err("inode %u: a compressed cluster's marker at file block %llu, "
					 "which starts no cluster: run fsck.zlfs", to->ino,
					 (unsigned long long)(first + i));
				return -EIO;
			}
			ret = read_clusters(fs, &addr[i], n - i, first + i, to, d, &k);
			i += k;
			continue;
		}

		if (addr[i] == ZLFS_ADDR_NULL || addr[i] == ADDR_IN_MEMORY) {
			if (addr[i] == ZLFS_ADDR_NULL) /* a hole reads as zeros */
				memset(d, 0, ZLFS_BLOCK_SIZE);
			i++;
			continue;
		}
		k = run_length(fs, &addr[i], n - i);
		ret = seg_read_run(fs, addr[i], k, d);
		for (uint32_t j = 0; !ret && key && j < k; j++)
			ret = zcrypt_xts_decrypt(key, first + i + j, d + (size_t)j * ZLFS_BLOCK_SIZE,
						 d + (size_t)j * ZLFS_BLOCK_SIZE, ZLFS_BLOCK_SIZE);
		i += k;
	}
	return ret;
}

int data_read_do(struct zlfs_fs *fs, struct data_rplan *p)
{
	struct rdest to = {p->ino, p->clog, p->first, p->key};

	if (p->from_ra)
		return 0;
	return read_blocks(fs, p->addr, p->nblocks, &to, p->buf);
}

/* A compressed file's extension must be whole clusters (plans and windows start on one): the
 * end of file rounded up to a cluster; 0 when the window is not whole clusters (a cluster
 * larger than the first extension), so nothing is read ahead. */
static uint32_t ahead_blocks(const struct ra_ahead *a, uint64_t fblocks, uint32_t log)
{
	uint64_t c = 1ull << log, end = (fblocks + c - 1) / c * c;

	if (a->first >= fblocks || (a->first | a->n) & (c - 1))
		return 0;
	return end - a->first < a->n ? (uint32_t)(end - a->first) : a->n;
}

void data_read_ahead(struct zlfs_fs *fs, struct node_page *inode, struct ra_ahead *a)
{
	uint64_t fblocks = (le64_get(inode_of(inode)->size) + ZLFS_BLOCK_SIZE - 1) / ZLFS_BLOCK_SIZE;
	uint32_t log = data_cluster_log(inode), n = ahead_blocks(a, fblocks, log), *addr = NULL;
	struct dkey dk = {0};
	int ret = -ENODATA; /* at or past the end of file: nothing to read ahead */

	if (n)
		addr = malloc(n * sizeof(*addr));
	if (n)
		ret = addr ? dkey_get(fs, inode, &dk) : -ENOMEM;
	if (!ret)
		ret = data_addrs(fs, inode, a->first, n, addr);
	if (!ret) {
		struct rdest to = {inode->nid, log, a->first, dk.on ? &dk.k : NULL};

		plan_held(fs, inode->nid, a->first, n, addr, a->buf);
		ret = read_blocks(fs, addr, n, &to, a->buf);
	}
	if (!ret)
		ra_keep(fs, inode->nid, inode->data_gen, a, n);
	else
		ra_cancel(fs, inode->nid, a);
	dkey_put(&dk);
	free(addr);
	a->n = 0;
}

void data_read_free(struct data_rplan *p)
{
	if (p->key)
		zcrypt_wipe(p->key, sizeof(*p->key));
	free(p->key);
	p->key = NULL;
	free(p->addr);
	zdev_buf_free(p->buf);
	p->addr = NULL;
	p->buf = NULL;
}

int data_read(struct zlfs_fs *fs, struct node_page *inode, void *buf, size_t size, uint64_t off)
{
	struct data_rplan p;
	int ret = data_read_plan(fs, inode, size, off, &p);

	if (!ret && p.len)
		ret = data_read_do(fs, &p);
	if (!ret && p.len)
		memcpy(buf, p.buf + p.skip, p.len);
	if (p.ahead.n)
		data_read_ahead(fs, inode, &p.ahead);
	data_read_free(&p);
	return ret ? ret : (int)p.len;
}
