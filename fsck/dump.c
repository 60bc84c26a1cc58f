/*
 * dump.c - zlfs-dump: what is where on a zlfs filesystem, for the engineer who would
 * otherwise read the source (dump.f2fs's and xfs_db's job).
 *
 * Owns: the command line, the superblock and checkpoint reports, a zone's report (device
 * state and write pointer, zlfs's state, valid blocks, age and log, each segment's SIT entry),
 * a block's report (its area, zone and segment; its owner from the remap list, the open
 * segment's summary carried in the checkpoint or the segment's summary block; whether the SIT
 * counts it valid; whether the owner still points at it) and where a block lies
 * (dump_where). Inodes are dump_inode.c's.
 * It mounts read-only through the library, as fsck.zlfs -n does: nothing is ever written.
 * With --shared it opens a device a daemon holds (zdev_open_opts.shared) and shows the last
 * checkpoint and what roll-forward finds after it, not what the daemon holds in memory.
 * May call: dump.h, files.h, core.h, format.h, zdev.h, log.h, crypto/zcrypt.h.
 */
#include "dump.h"
#include "log.h"
#include "zcrypt.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_OK = 0, EXIT_NOTFOUND = 1, EXIT_FAIL = 8, EXIT_USAGE = 16 };

enum query_kind { Q_SUPER, Q_CP, Q_INODE, Q_PATH, Q_BLOCK, Q_ZONE };
struct query {
	enum query_kind kind;
	const char *arg;
	uint64_t n;
};

struct args {
	const char *path;
	int json, shared;
	unsigned wait_secs;
	const char *keyfile;
	struct query *q;
	int nq;
};

static const char *const log_names[ZLFS_NR_LOG_TYPES] = {
	"hot_node", "warm_node", "cold_node", "hot_data", "warm_data",
	"cold_data", "frozen_data", "warm_data_1", "warm_data_2", "warm_data_3"};

const char *dump_log_name(unsigned log)
{
	return log < ZLFS_NR_LOG_TYPES ? log_names[log] : "none";
}

static const char *const state_names[] = {"free", "open", "used", "retired"};

/* ---- where a block lies ----------------------------------------------------------------- */

static const char *area_of(const struct zlfs_sb_info *sb, uint32_t zone)
{
	if (zone == sb->sb_zone[0] || zone == sb->sb_zone[1])
		return "superblock";
	if (zone == sb->cp_zone[0] || zone == sb->cp_zone[1])
		return "checkpoint";
	if (zone >= sb->meta_zone_first && zone < sb->meta_zone_first + sb->meta_zones)
		return "meta";
	if (zone >= sb->main_zone_first && zone < sb->nr_zones)
		return "main";
	return zone < sb->nr_zones ? "unused" : "beyond the device";
}

/* Main-area segment of ADDR, or -1 (not main, or past the zone's last segment). */
static int64_t segno_of(const struct zlfs_sb_info *sb, uint32_t addr)
{
	uint32_t zb = zlfs_zone_blocks(sb), zone = addr / zb, in = addr % zb;

	if (zone < sb->main_zone_first || zone >= sb->nr_zones ||
	    in >= sb->segs_per_zone * sb->seg_blocks)
		return -1;
	return (int64_t)(zone - sb->main_zone_first) * sb->segs_per_zone + in / sb->seg_blocks;
}

static struct seg_ent sit_of(struct zlfs_fs *fs, uint32_t segno, int *ok)
{
	struct seg_ent e = {.log = ZLFS_LOG_NONE}, *p;

	zlock_lock(&fs->seg_lock);
	p = sit_ent_locked(fs, segno);
	if (p)
		e = *p;
	zlock_unlock(&fs->seg_lock);
	*ok = !!p;
	return e;
}

void dump_where(struct out *o, struct zlfs_fs *fs, uint32_t addr)
{
	const struct zlfs_sb_info *sb = &fs->sb;
	uint32_t zb = zlfs_zone_blocks(sb), zone = addr / zb;
	int64_t seg = segno_of(sb, addr);
	struct seg_ent e;
	int ok;

	out_u(o, "zone", zone);
	out_s(o, "area", area_of(sb, zone));
	if (seg < 0)
		return;
	e = sit_of(fs, (uint32_t)seg, &ok);
	out_u(o, "segment", (uint64_t)seg);
	out_s(o, "log", ok ? dump_log_name(e.log) : "unreadable SIT");
}

/* ---- superblock and checkpoint ---------------------------------------------------------- */

static void dump_super(struct out *o, struct zlfs_fs *fs)
{
	const struct zlfs_sb_info *s = &fs->sb;
	char uuid[40];

	snprintf(uuid, sizeof(uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x", s->uuid[0], s->uuid[1], s->uuid[2], s->uuid[3],
		 s->uuid[4], s->uuid[5], s->uuid[6], s->uuid[7], s->uuid[8], s->uuid[9],
		 s->uuid[10], s->uuid[11], s->uuid[12], s->uuid[13], s->uuid[14], s->uuid[15]);
	out_obj(o, "superblock");
	out_u(o, "revision", s->revision);
	out_u(o, "min_revision", s->min_revision);
	out_u(o, "feat_compat", s->feat_compat);
	out_u(o, "feat_ro_compat", s->feat_ro_compat);
	out_u(o, "feat_incompat", s->feat_incompat);
	out_s(o, "uuid", uuid);
	out_s(o, "label", s->label);
	out_u(o, "create_time", s->create_time);
	out_u(o, "sb_seq", s->sb_seq);
	out_u(o, "sb_zone_newest", s->sb_zone[fs->sb_zone]);
	out_u(o, "block_size", s->block_size);
	out_u(o, "dev_lblock_size", s->dev_lblock_size);
	out_u(o, "zone_size", s->zone_size);
	out_u(o, "zone_capacity", s->zone_capacity);
	out_u(o, "nr_zones", s->nr_zones);
	out_u(o, "nr_conv", s->nr_conv);
	out_u(o, "max_open", s->max_open);
	out_u(o, "max_active", s->max_active);
	out_u(o, "seg_blocks", s->seg_blocks);
	out_u(o, "segs_per_zone", s->segs_per_zone);
	out_u(o, "sb_zone0", s->sb_zone[0]);
	out_u(o, "sb_zone1", s->sb_zone[1]);
	out_u(o, "cp_zone0", s->cp_zone[0]);
	out_u(o, "cp_zone1", s->cp_zone[1]);
	out_u(o, "meta_zone_first", s->meta_zone_first);
	out_u(o, "meta_zones", s->meta_zones);
	out_u(o, "main_zone_first", s->main_zone_first);
	out_u(o, "main_zones", s->main_zones);
	out_u(o, "nr_logs", s->nr_logs);
	out_u(o, "ovp_percent", s->ovp_percent);
	out_u(o, "reserved_zones", s->reserved_zones);
	out_u(o, "max_nid", s->max_nid);
	out_u(o, "nat_blocks", s->nat_blocks);
	out_u(o, "sit_blocks", s->sit_blocks);
	out_u(o, "root_ino", s->root_ino);
	out_u(o, "last_fsck_time", s->last_fsck_time);
	out_u(o, "enc_kdf", s->enc_kdf);
	out_u(o, "scrypt_n", s->scrypt_n);
	out_u(o, "scrypt_r", s->scrypt_r);
	out_u(o, "scrypt_p", s->scrypt_p);
	out_end(o);
}

static void dump_cp(struct out *o, struct zlfs_fs *fs)
{
	const struct zlfs_cp_info *c = &fs->cp;

	out_obj(o, "checkpoint");
	out_u(o, "version", c->version);
	out_u(o, "time_ns", c->time_ns);
	out_u(o, "flags", c->flags);
	out_b(o, "clean", !!(c->flags & ZLFS_CP_CLEAN));
	out_b(o, "needs_fsck", !!(c->flags & ZLFS_CP_FSCK));
	out_u(o, "zone", fs->sb.cp_zone[fs->cp_pos.slot]);
	out_u(o, "block_in_zone", fs->cp_pos.blk);
	out_u(o, "pack_blocks", c->pack_blocks);
	out_u(o, "nr_summaries", c->nr_summaries);
	out_u(o, "nr_orphan_blocks", c->nr_orphan_blocks);
	out_u(o, "nr_orphans", c->nr_orphans);
	out_u(o, "nr_remap_blocks", c->nr_remap_blocks);
	out_u(o, "nr_remaps", c->nr_remaps);
	out_u(o, "meta_zone", c->meta_zone);
	out_u(o, "meta_next_blk", c->meta_next_blk);
	out_u(o, "nr_map", c->nr_map);
	out_u(o, "next_free_nid", c->next_free_nid);
	out_u(o, "valid_blocks", c->valid_blocks);
	out_u(o, "valid_nodes", c->valid_nodes);
	out_u(o, "valid_inodes", c->valid_inodes);
	out_u(o, "prealloc_blocks", c->prealloc_blocks);
	out_u(o, "user_bytes", c->user_bytes);
	out_u(o, "dev_bytes", c->dev_bytes);
	out_u(o, "gc_bytes", c->gc_bytes);
	out_u(o, "seq", c->seq);
	out_list(o, "logs");
	for (uint32_t t = 0; t < ZLFS_NR_LOG_TYPES; t++) {
		if (!zlfs_log_active(fs->sb.nr_logs, t))
			continue;
		out_obj(o, NULL);
		out_s(o, "log", dump_log_name(t));
		if (c->logs[t].zone == ZLFS_ZONE_NONE)
			out_s(o, "zone", "none");
		else
			out_u(o, "zone", c->logs[t].zone);
		out_u(o, "next_blk", c->logs[t].next_blk);
		out_u(o, "summary_entries", c->logs[t].nr_entries);
		out_end(o);
	}
	out_end(o);
	out_list(o, "map_addr");
	for (uint32_t i = 0; i < c->nr_map && i < ZLFS_CP_MAP_MAX; i++)
		out_u(o, NULL, c->map_addr[i]);
	out_end(o);
	out_end(o);
}

/* ---- zones -------------------------------------------------------------------------------- */

static int dump_zone(struct out *o, struct zlfs_fs *fs, uint64_t zone)
{
	const struct zlfs_sb_info *sb = &fs->sb;
	struct zdev_zone z;
	uint32_t mz, valid = 0;
	uint64_t born = 0;
	int ret;

	if (zone >= sb->nr_zones)
		return -ERANGE;
	ret = zdev_report_one(fs->dev, (uint32_t)zone, &z);
	if (ret)
		return ret;
	out_obj(o, NULL);
	out_u(o, "zone", zone);
	out_s(o, "area", area_of(sb, (uint32_t)zone));
	out_u(o, "start_blk", zlfs_zone_start_blk(sb, (uint32_t)zone));
	out_s(o, "cond", zdev_cond_name(z.cond));
	out_s(o, "type", zdev_type_name(z.type));
	out_u(o, "capacity_blocks", z.capacity / ZLFS_BLOCK_SIZE);
	out_u(o, "write_pointer_blk", (z.wp - z.start) / ZLFS_BLOCK_SIZE);
	if (zone < sb->main_zone_first) {
		out_end(o);
		return 0;
	}
	mz = (uint32_t)zone - sb->main_zone_first;
	zlock_lock(&fs->seg_lock);
	out_s(o, "state", state_names[fs->zone_state[mz] & 3]);
	valid = fs->zone_valid[mz];
	born = fs->zone_born[mz];
	zlock_unlock(&fs->seg_lock);
	out_u(o, "valid_blocks", valid);
	out_u(o, "usable_blocks", (uint64_t)sb->segs_per_zone * (sb->seg_blocks - 1));
	/* a segment's mtime is the mean write time of its valid blocks; the zone's, weighted */
	out_u(o, "age_mtime", valid ? born / valid : 0);
	for (uint32_t t = 0; t < ZLFS_NR_LOG_TYPES; t++)
		if (zlfs_log_active(sb->nr_logs, t) && fs->logs[t].zone == zone) {
			out_s(o, "open_for_log", dump_log_name(t));
			out_u(o, "log_next_blk", fs->logs[t].next_blk);
		}
	out_list(o, "segments");
	for (uint32_t s = 0; s < sb->segs_per_zone; s++) {
		int ok;
		struct seg_ent e = sit_of(fs, mz * sb->segs_per_zone + s, &ok);

		out_obj(o, NULL);
		out_u(o, "segment", mz * sb->segs_per_zone + s);
		if (!ok) {
			out_s(o, "error", "SIT block unreadable");
		} else {
			out_u(o, "valid", e.valid);
			out_s(o, "log", dump_log_name(e.log));
			out_u(o, "mtime", e.mtime);
		}
		out_end(o);
	}
	out_end(o);
	out_end(o);
	return 0;
}

/* ---- blocks ------------------------------------------------------------------------------- */

/* The summary entry of main-area block ADDR: from the open segment's summary a log carries
 * (the checkpoint's copy, rolled forward), else from the segment's own summary block. The
 * source is named in *FROM; 0, -ENOENT (not written yet), or an error. */
static int owner_from_summary(struct zlfs_fs *fs, uint32_t addr, uint32_t *nid, uint16_t *ofs,
			      const char **from)
{
	const struct zlfs_sb_info *sb = &fs->sb;
	uint32_t b = addr % zlfs_zone_blocks(sb) % sb->seg_blocks;
	uint32_t segno = (uint32_t)segno_of(sb, addr);
	struct zlfs_summary *sum;
	int ret = log_open_entry(fs, addr, nid, ofs);

	if (ret) {
		*from = "open segment summary (checkpoint pack)";
		return ret < 0 ? ret : 0;
	}
	sum = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!sum)
		return -ENOMEM;
	ret = zdev_read(fs->dev, sum, ZLFS_BLOCK_SIZE,
			(uint64_t)(addr - b + sb->seg_blocks - 1) * ZLFS_BLOCK_SIZE);
	if (!ret)
		ret = zlfs_blk_verify(sum, sb->seed, ZLFS_KIND_SUMMARY);
	if (!ret && le32_get(sum->hdr.index) != segno)
		ret = -EUCLEAN;
	if (!ret) {
		*nid = le32_get(sum->nid[b]);
		*ofs = le16_get(sum->ofs[b]);
		*from = "segment summary block";
	}
	zdev_buf_free(sum);
	return ret;
}

/* Whether the owner NID still points at ADDR: its NAT entry for a node block, its slot OFS
 * for a data block. */
static int owner_points_here(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs)
{
	struct node_page *np;
	struct nat_ent e;
	int here;

	if (nid == ZLFS_NID_NULL || nid >= fs->sb.max_nid || nat_get(fs, nid, &e))
		return 0;
	if (ofs == ZLFS_SUM_NODE)
		return e.blkaddr == addr && !e.packed;
	if (e.blkaddr == ZLFS_ADDR_NULL || node_get(fs, nid, &np))
		return 0;
	here = le16_get(((struct zlfs_blkhdr *)np->buf)->kind) == ZLFS_KIND_INODE
		       ? ofs < ZLFS_INODE_ADDRS && le32_get(inode_of(np)->addr[ofs]) == addr &&
				 !zlfs_iflags_area_inline(le32_get(inode_of(np)->flags))
		       : ofs < ZLFS_NODE_ADDRS &&
				 le32_get(((struct zlfs_node *)np->buf)->ptr[ofs]) == addr;
	node_put(fs, np);
	return here;
}

/* The slots of the inode pack PK at ADDR: each one's nid, and whether its NAT entry names
 * it (a pack is valid while one does). */
static void dump_pack_slots(struct out *o, struct zlfs_fs *fs, uint32_t addr,
			    const struct zlfs_inode_pack *pk)
{
	char why[200];
	uint32_t n = le32_get(pk->nr_slots);

	if (zlfs_pack_check_head(&fs->sb, pk, why, sizeof(why))) {
		out_s(o, "pack_error", why);
		return;
	}
	out_list(o, "pack_slots");
	for (uint32_t i = 0; i < n; i++) {
		uint32_t nid = le32_get(pk->slot[i].nid);
		struct nat_ent e;

		if (!zlfs_pack_is_slot(pk, i)) /* a continuation: its slot's "positions" says so */
			continue;
		out_obj(o, NULL);
		out_u(o, "slot", i);
		out_u(o, "positions", zlfs_pack_span(pk, i));
		out_u(o, "nid", nid);
		out_b(o, "live", !nat_get(fs, nid, &e) && e.blkaddr == addr && e.packed &&
					 e.slot == i);
		out_end(o);
	}
	out_end(o);
}

static void block_owner(struct out *o, struct zlfs_fs *fs, uint32_t addr)
{
	const char *from = "remap list (checkpoint pack)";
	uint32_t nid = 0;
	uint16_t ofs = 0;
	struct nat_ent e;
	int ret = remap_find(fs, addr, &nid, &ofs) ? 0 : owner_from_summary(fs, addr, &nid, &ofs,
									     &from);

	out_obj(o, "owner");
	if (ret) {
		out_s(o, "error", ret == -ENOENT ? "not written yet" : strerror(-ret));
		out_end(o);
		return;
	}
	out_s(o, "from", from);
	if (ofs == ZLFS_SUM_PACK) { /* the slots say whose: dump_pack_slots */
		out_s(o, "kind", "inode pack");
		out_end(o);
		return;
	}
	out_u(o, "nid", nid);
	if (ofs == ZLFS_SUM_NODE) {
		out_s(o, "kind", "node");
	} else {
		out_s(o, "kind", "data");
		out_u(o, "slot", ofs);
	}
	if (nid && nid < fs->sb.max_nid && !nat_get(fs, nid, &e))
		out_u(o, "ino", e.ino);
	out_b(o, "owner_points_here", owner_points_here(fs, addr, nid, ofs));
	out_end(o);
}

static int dump_block(struct out *o, struct zlfs_fs *fs, uint64_t addr)
{
	const struct zlfs_sb_info *sb = &fs->sb;
	uint32_t zb = zlfs_zone_blocks(sb), a = (uint32_t)addr;
	int64_t seg = addr < (uint64_t)sb->nr_zones * zb ? segno_of(sb, a) : -1;
	uint8_t *buf;

	if (addr >= (uint64_t)sb->nr_zones * zb)
		return -ERANGE;
	out_obj(o, NULL);
	out_u(o, "addr", addr);
	dump_where(o, fs, a);
	out_u(o, "block_in_zone", a % zb);
	buf = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (buf && !zdev_read(fs->dev, buf, ZLFS_BLOCK_SIZE, addr * ZLFS_BLOCK_SIZE) &&
	    !zlfs_blk_verify(buf, sb->seed, ZLFS_KIND_MAX)) {
		out_s(o, "header_kind", zlfs_kind_name(le16_get(((struct zlfs_blkhdr *)buf)->kind)));
		if (le16_get(((struct zlfs_blkhdr *)buf)->kind) == ZLFS_KIND_IPACK)
			dump_pack_slots(o, fs, a, (const void *)buf);
	} else {
		out_s(o, "header_kind", "none (user data, unwritten, or damaged)");
	}
	zdev_buf_free(buf);
	if (seg >= 0) {
		uint32_t b = (a % zb) % sb->seg_blocks;
		int ok;
		struct seg_ent e = sit_of(fs, (uint32_t)seg, &ok);

		out_u(o, "block_in_segment", b);
		if (b == sb->seg_blocks - 1) {
			out_s(o, "role", "segment summary");
		} else {
			out_b(o, "valid", ok && (e.bitmap[b / 8] & (1u << (b % 8))));
			block_owner(o, fs, a);
		}
	}
	out_end(o);
	return 0;
}

/* ---- the command -------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: zlfs-dump [--json] [--shared] [--keyfile FILE] [--wait SECS] DEVICE "
		   "[WHAT...]\n"
		   "  -s, --super        the superblock\n"
		   "  -c, --checkpoint   the newest checkpoint's head\n"
		   "  -i, --inode INO    inode INO: every field, its node tree, its data blocks\n"
		   "  -p, --path PATH    the same for the inode PATH names (from the root)\n"
		   "  -b, --block ADDR   block ADDR: zone, segment, owner, valid\n"
		   "  -z, --zone N       zone N: state, write pointer, valid blocks, age, log\n"
		   "  --json             one JSON document on stdout\n"
		   "  --shared           DEVICE may be mounted: open it without claiming it (the\n"
		   "                     last checkpoint and what was written since, not the\n"
		   "                     daemon's memory)\n"
		   "  --keyfile FILE     master key: look up names in encrypted directories\n"
		   "  --wait SECS        held by a daemon finishing its unmount: wait (default %u)\n"
		   "Without WHAT: the superblock and the checkpoint. Nothing is ever written.\n"
		   "exit: 0 shown, 1 something asked for does not exist, 8 cannot read the "
		   "filesystem, 16 usage error\n", ZDEV_WAIT_DEFAULT);
}

static int add_query(struct args *a, enum query_kind k, const char *arg)
{
	struct query *n = realloc(a->q, (size_t)(a->nq + 1) * sizeof(*n));
	char *end = NULL;

	if (!n)
		return -ENOMEM;
	a->q = n;
	n[a->nq] = (struct query){k, arg, 0};
	if (k != Q_PATH && arg) {
		errno = 0;
		n[a->nq].n = strtoull(arg, &end, 0);
		if (errno || !*arg || *end || *arg == '-') {
			fprintf(stderr, "zlfs-dump: '%s' is not a number\n", arg);
			return -EINVAL;
		}
	}
	a->nq++;
	return 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option lo[] = {
		{"super", no_argument, NULL, 's'},     {"checkpoint", no_argument, NULL, 'c'},
		{"inode", required_argument, NULL, 'i'}, {"path", required_argument, NULL, 'p'},
		{"block", required_argument, NULL, 'b'}, {"zone", required_argument, NULL, 'z'},
		{"json", no_argument, NULL, 'j'},      {"shared", no_argument, NULL, 'S'},
		{"keyfile", required_argument, NULL, 'K'}, {"wait", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},      {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}};
	static const enum query_kind kinds[] = {['s'] = Q_SUPER, ['c'] = Q_CP, ['i'] = Q_INODE,
						['p'] = Q_PATH, ['b'] = Q_BLOCK, ['z'] = Q_ZONE};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "sci:p:b:z:hV", lo, NULL)) != -1) {
		switch (c) {
		case 's': case 'c': case 'i': case 'p': case 'b': case 'z':
			if (add_query(a, kinds[c], optarg))
				return EXIT_USAGE;
			break;
		case 'j': a->json = 1; break;
		case 'S': a->shared = 1; break;
		case 'K': a->keyfile = optarg; break;
		case 'w':
			a->wait_secs = (unsigned)strtoul(optarg, &end, 10);
			if (end == optarg || *end || a->wait_secs > 86400) {
				fprintf(stderr, "zlfs-dump: --wait takes seconds, 0 to 86400\n");
				return EXIT_USAGE;
			}
			break;
		case 'V': printf("zlfs-dump %s (format revision %d)\n", ZLFS_VERSION, ZLFS_REVISION); return -1;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	a->path = argv[optind];
	if (!a->nq && (add_query(a, Q_SUPER, NULL) || add_query(a, Q_CP, NULL)))
		return EXIT_FAIL;
	return 0;
}

static const char *const list_names[] = {[Q_INODE] = "inodes", [Q_PATH] = "inodes",
					 [Q_BLOCK] = "blocks", [Q_ZONE] = "zones"};

/* Queries of the lists, in the order given, grouped by list (JSON needs one key each). */
static int run_list(struct out *o, struct zlfs_fs *fs, const struct args *a, enum query_kind k)
{
	int missing = 0, any = 0;

	for (int i = 0; i < a->nq; i++) {
		const struct query *q = &a->q[i];
		int ret;

		if (!(q->kind == k || (k == Q_INODE && q->kind == Q_PATH)))
			continue;
		if (!any++)
			out_list(o, list_names[k]);
		ret = k == Q_ZONE ? dump_zone(o, fs, q->n)
		      : k == Q_BLOCK ? dump_block(o, fs, q->n)
		      : q->kind == Q_PATH ? dump_path(o, fs, q->arg)
		      : dump_inode(o, fs, q->n > UINT32_MAX ? 0 : (uint32_t)q->n);
		if (ret) {
			fprintf(stderr, "zlfs-dump: %s %s: %s\n", list_names[k], q->arg,
				ret == -ERANGE ? "out of range for this filesystem"
					       : strerror(-ret));
			missing = 1;
		}
	}
	if (any)
		out_end(o);
	return missing;
}

static int has(const struct args *a, enum query_kind k)
{
	for (int i = 0; i < a->nq; i++)
		if (a->q[i].kind == k)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct args a = {.wait_secs = ZDEV_WAIT_DEFAULT};
	struct zlfs_key_source key = {0};
	struct zlfs_mount_opts mo = {.readonly = 1};
	struct out o = {0};
	struct zlfs_fs *fs;
	int code = parse(argc, argv, &a), missing = 0, ret;

	if (code) {
		free(a.q);
		return code < 0 ? EXIT_OK : code;
	}
	zlog_set_ident("zlfs-dump");
	zlog_set_level(ZLOG_WARN);
	key.keyfile = a.keyfile;
	mo.key = a.keyfile ? &key : NULL;
	mo.shared = a.shared;
	mo.wait_secs = a.wait_secs;
	ret = files_mount(a.path, &mo, &fs);
	if (ret) {
		fprintf(stderr, "zlfs-dump: %s: cannot read the filesystem: %s%s\n", a.path,
			strerror(-ret), ret == -EBUSY ? " (mounted? --shared reads it as the "
							"daemon has written it so far)" : "");
		free(a.q);
		return EXIT_FAIL;
	}
	o.json = a.json;
	out_obj(&o, NULL);
	out_s(&o, "device", a.path);
	if (has(&a, Q_SUPER))
		dump_super(&o, fs);
	if (has(&a, Q_CP))
		dump_cp(&o, fs);
	missing |= run_list(&o, fs, &a, Q_INODE);
	missing |= run_list(&o, fs, &a, Q_BLOCK);
	missing |= run_list(&o, fs, &a, Q_ZONE);
	out_end(&o);
	files_unmount(fs);
	free(a.q);
	return missing ? EXIT_NOTFOUND : EXIT_OK;
}
