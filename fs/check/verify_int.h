/*
 * verify_int.h - what the files of the consistency check share, lowest first:
 * verify_report.c (findings, proposed repairs, progress, NAT and SIT entries),
 * verify_summary.c (data blocks against their segment summary entries), verify.c (each
 * inode, node and directory; links and reachability), verify_zones.c (zones and the SIT
 * against what the tree references), verify_ahead.c (node runs read ahead), verify_walk.c
 * (the order of the walk), verify_run.c (the phases: zlfs_check). Each calls only the files
 * before it.
 */
#ifndef ZLFS_VERIFY_INT_H
#define ZLFS_VERIFY_INT_H

#include "verify.h"

#include <dirent.h>

enum { SEEN_NODE = 1, SEEN_REACHED = 2, SEEN_LOST = 3, SEEN_DAMAGED = 4 };
/* What the tree walk keeps of an inode it read, so that nothing reads it twice. */
enum { INODE_READ = 1, INODE_DIR = 2, INODE_ENC = 4 };

struct chk {
	struct zlfs_fs *fs;
	struct zlfs_check_report *rep;
	uint8_t *ref;        /* per device block: referenced by the tree walk */
	uint8_t *packref;    /* per device block: referenced as an inode pack (its first slot
			      * set ref, the others find this) */
	uint32_t pack_checked; /* the inode pack whose checksum and header the walk checked last */
	uint32_t *links;     /* per nid: names found in reachable directories */
	uint32_t *parent;    /* per nid: directory holding its (last seen) name */
	uint8_t *seen;       /* per nid: SEEN_* */
	uint8_t *named_lost; /* per nid: named by a directory that is itself unreachable */
	uint8_t *named_enc;  /* per nid: named by an encrypted directory */
	uint32_t *subdirs;   /* per directory: subdirectories found */
	uint32_t *nlink;     /* per reached inode: its link count, read once (check_links) */
	uint8_t *iflags;     /* per reached inode: INODE_SEEN_* */
	uint32_t nblocks;
	uint64_t prealloc;   /* data pointers reserved by fallocate */
	uint64_t xv_bytes;   /* bytes in the value nodes of the xattr value being walked */
	struct node_page *file; /* the inode whose tree is being walked */
	uint64_t fblocks;    /* its data pointers found: blocks and reservations */
	uint32_t clog;       /* its cluster size's log2 if compressed, else 0 */
	struct sum_cache *sums; /* segment summaries read (verify_summary.c) */
};

void finding(struct chk *c, enum zlfs_finding_class cls, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void propose(struct chk *c, enum zlfs_fix_kind kind, uint32_t a, uint32_t b, const char *name,
	     size_t len);
void progress(struct chk *c, enum zlfs_check_phase ph, uint64_t done, uint64_t total);
/* Segment SEG's SIT entry; one that cannot be read makes the report incomplete. */
struct seg_ent chk_sit(struct chk *c, uint32_t seg);

/* verify_summary.c: data block ADDR, which slot OFS of node NID (of inode INO) points at,
 * against its segment summary entry (when the SIT counts it valid); the cache it reads
 * summaries into is freed with the check. */
void check_summary(struct chk *c, uint32_t addr, uint32_t ino, uint32_t nid, uint16_t ofs);
void sum_cache_free(struct chk *c);

static inline int bit(const uint8_t *map, uint32_t i) { return !!(map[i / 8] & (1u << (i % 8))); }

static inline int in_main(const struct zlfs_fs *fs, uint32_t addr)
{
	uint32_t zone = addr / zlfs_zone_blocks(&fs->sb);

	return zone >= fs->sb.main_zone_first && zone < fs->sb.nr_zones;
}

/* NID's NAT entry (a free one when it cannot be read). */
struct nat_ent chk_nat(struct chk *c, uint32_t nid);

/* The inodes reached and not yet visited (verify_walk.c's): directories, and the other inodes
 * as block address << 32 | ino, to be visited in the order of their blocks. */
struct todo {
	uint32_t *dirs, ndirs, dirs_done;
	uint64_t *files;
	uint32_t nfiles;
};

/* Inode INO (at block ADDR, of DT_* TYPE as its name says) is reached for the first time. */
static inline void walk_reached(struct todo *t, uint32_t ino, uint32_t addr, uint8_t type)
{
	if (type == DT_DIR)
		t->dirs[t->ndirs++] = ino;
	else
		t->files[t->nfiles++] = (uint64_t)addr << 32 | ino;
}

/* verify.c: what is checked of an inode and a directory. INO's inode page, or 0 (reported)
 * when it cannot be had; an inode read: its tree and what check_links needs of it; a
 * directory's entries (each inode they reach new goes to walk_reached). After the walk: link
 * counts against the names found, what it did not reach, the reservations counted. */
int inode_usable(struct chk *c, uint32_t ino, struct node_page **np);
void inode_seen(struct chk *c, struct node_page *np);
void check_dir(struct chk *c, struct node_page *np, struct todo *t);
void check_links(struct chk *c);
void check_unreachable(struct chk *c);
void check_prealloc(struct chk *c);

/* verify_walk.c: the walk from the root, in an order that reads the device in large runs. */
void check_tree(struct chk *c);

/* verify_zones.c: write pointers against the checkpoint; every block referenced by the tree
 * valid in the SIT and the other way round, and the SIT's counts. */
void check_zones(struct chk *c);
void check_sit(struct chk *c);

/* verify_ahead.c: runs of node blocks read ahead by a helper thread, in the order the check
 * visits them. A run is consecutive blocks of one zone (N 0: nothing to read); FIRST and COUNT
 * are the check's own (the inodes it holds). */
#define AHEAD_RUN_MAX 256u /* blocks: seg_read_run's most */
struct chk_run {
	uint32_t addr, n;
	uint32_t first, count;
};
struct chk_ahead;
/* Start reading RUNS (kept by the caller until chk_ahead_stop). */
int chk_ahead_start(struct zlfs_fs *fs, const struct chk_run *runs, uint32_t nruns,
		    struct chk_ahead **out);
/* Wait for run I (runs are taken in order), keep its nodes other than inodes in the node
 * cache, and point BUF at its blocks: 0, or the error its read met (BUF NULL: its nodes are
 * then read one by one). */
int chk_ahead_take(struct chk_ahead *a, uint32_t i, const uint8_t **buf);
/* Done with run I's buffer. */
void chk_ahead_give_back(struct chk_ahead *a, uint32_t i);
void chk_ahead_stop(struct chk_ahead *a);

#endif
