/*
 * test_dump.c - zlfs-dump's figures against what the library says about the same image:
 * the inode a path names, the block of a known file and the node holding its pointer, each
 * block's owner round-tripping to the file that points at it, the SIT's validity and a zone's
 * valid blocks; its exit codes for what does not exist; and a mounted device, refused without
 * --shared (with the reason) and read with it, a small file's bytes counted inline.
 */
#include "fsck_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_BLOCKS 1100 /* past the inode's 977 pointers: a direct node holds the rest */

static char dump_out[512];

/* Run zlfs-dump ARGS IMAGE > dump_out; its exit status. */
static int dump(const char *args)
{
	char b[512], err[512];

	tu_path(dump_out, sizeof(dump_out), "dump.out");
	return tu_sh("%s %s > %s 2> %s", tu_bin(b, sizeof(b), "zlfs-dump"), args, dump_out,
		     tu_path(err, sizeof(err), "dump.err"));
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = calloc(1, 1 << 20);

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_lt(fread(s, 1, (1 << 20) - 1, f), (1 << 20) - 1);
	fclose(f);
	return s;
}

/* The number after "KEY": at or after FROM (the test fails if there is none). */
static long long num_after(const char *from, const char *key)
{
	char k[80];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\": ", key);
	p = strstr(from, k);
	ck_assert_msg(p != NULL, "no %s in the report", key);
	return strtoll(p + strlen(k), NULL, 10);
}

/* The object of the blocks list whose address is ADDR. */
static const char *block_obj(const char *json, uint32_t addr)
{
	char k[64];
	const char *p = strstr(json, "\"blocks\": [");

	ck_assert_ptr_nonnull(p);
	snprintf(k, sizeof(k), "\"addr\": %u,", addr);
	p = strstr(p, k);
	ck_assert_msg(p != NULL, "block %u not in the report", addr);
	return p;
}

struct facts {
	uint32_t ino_big, inode_addr, a0, a_far, dnode, dnode_addr, zone, zone_valid, zone_blocks;
	uint32_t seg_far;
};

/* /big through the library, then what the library says about it. */
static void make_big(struct facts *f)
{
	struct zlfs_fs *fs = mount_rw(img, 0);
	struct node_page *np;

	f->ino_big = mk(fs, ZLFS_ROOT_INO, "big", 0, (size_t)BIG_BLOCKS * ZLFS_BLOCK_SIZE);
	ck_assert_int_eq(files_unmount(fs), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, f->ino_big, &np), 0);
	ck_assert_int_eq(data_addr(fs, np, 0, &f->a0), 0);
	ck_assert_int_eq(data_addr(fs, np, ZLFS_INODE_ADDRS + 23, &f->a_far), 0);
	f->dnode = le32_get(inode_of(np)->nid[0]);
	ck_assert_uint_ne(f->dnode, 0);
	node_put(fs, np);
	f->inode_addr = nat_addr_of(fs, f->ino_big);
	f->dnode_addr = nat_addr_of(fs, f->dnode);
	f->zone_blocks = zlfs_zone_blocks(&fs->sb);
	f->zone = f->a_far / f->zone_blocks;
	f->zone_valid = seg_zone_valid(fs, f->zone);
	f->seg_far = (f->zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone +
		     f->a_far % f->zone_blocks / fs->sb.seg_blocks;
	ck_assert(seg_is_valid(fs, f->a_far));
	files_unmount(fs);
}

START_TEST(t_dump_figures)
{
	struct facts f;
	char args[600];
	const char *p;
	char *json;

	populate("dump.img", NULL);
	make_big(&f);
	snprintf(args, sizeof(args), "--json %s -p /big -p /d/f1 -b %u -b %u -b %u -z %u", img,
		 f.a0, f.a_far, f.dnode_addr, f.zone);
	ck_assert_int_eq(dump(args), 0);
	tu_sh("cat %s | head -c 3000", dump_out);
	ck_assert(tu_sh("python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s",
			dump_out) == 0);
	json = slurp(dump_out);
	/* the inode /big names, where it is, its direct node and its first extent */
	ck_assert_int_eq(num_after(json, "ino"), f.ino_big);
	ck_assert_int_eq(num_after(json, "addr"), f.inode_addr);
	ck_assert_int_eq(num_after(strstr(json, "\"nid\": {"), "direct0"), f.dnode);
	p = strstr(json, "\"nodes\": [");
	ck_assert_int_eq(num_after(p, "nid"), f.dnode);
	ck_assert_int_eq(num_after(p, "addr"), f.dnode_addr);
	p = strstr(json, "\"extents\": [");
	ck_assert_int_eq(num_after(p, "file_block"), 0);
	ck_assert_int_eq(num_after(p, "addr"), f.a0);
	ck_assert_int_eq(num_after(p, "data_blocks"), BIG_BLOCKS);
	/* the second inode: /d/f1 */
	ck_assert_int_eq(num_after(strstr(json, "\"node_count\""), "ino"), ino_f1);
	/* block 0 of /big: owned by slot 0 of its inode, valid */
	p = block_obj(json, f.a0);
	ck_assert_int_eq(num_after(p, "zone"), f.a0 / f.zone_blocks);
	ck_assert_int_eq(num_after(p, "nid"), f.ino_big);
	ck_assert_int_eq(num_after(p, "slot"), 0);
	ck_assert(!strncmp(strstr(p, "\"valid\": ") + 9, "true", 4));
	ck_assert(!strncmp(strstr(p, "\"owner_points_here\": ") + 21, "true", 4));
	/* a block behind the direct node: its owner is the node, at the slot that points to it */
	p = block_obj(json, f.a_far);
	ck_assert_int_eq(num_after(p, "zone"), f.zone);
	ck_assert_int_eq(num_after(p, "segment"), f.seg_far);
	ck_assert_int_eq(num_after(p, "nid"), f.dnode);
	ck_assert_int_eq(num_after(p, "slot"), 23);
	ck_assert_int_eq(num_after(p, "ino"), f.ino_big);
	ck_assert(!strncmp(strstr(p, "\"owner_points_here\": ") + 21, "true", 4));
	/* the direct node's block: a node, owned by itself */
	p = block_obj(json, f.dnode_addr);
	ck_assert(!strncmp(strstr(p, "\"header_kind\": ") + 15, "\"direct node\"", 13));
	ck_assert_int_eq(num_after(p, "nid"), f.dnode);
	ck_assert(!strncmp(strstr(p, "\"kind\": ") + 8, "\"node\"", 6));
	/* the zone: as many valid blocks as the SIT sums */
	p = strstr(json, "\"zones\": [");
	ck_assert_int_eq(num_after(p, "zone"), f.zone);
	ck_assert_int_eq(num_after(p, "valid_blocks"), f.zone_valid);
	ck_assert_int_gt(f.zone_valid, 0);
	free(json);
	/* the same in text */
	snprintf(args, sizeof(args), "%s -b %u", img, f.a_far);
	ck_assert_int_eq(dump(args), 0);
	ck_assert(tu_file_has(dump_out, "owner_points_here: true"));
	snprintf(args, sizeof(args), "nid: %u", f.dnode);
	ck_assert(tu_file_has(dump_out, args));
	/* no query: the superblock and the checkpoint */
	snprintf(args, sizeof(args), "%s", img);
	ck_assert_int_eq(dump(args), 0);
	ck_assert(tu_file_has(dump_out, "superblock:"));
	ck_assert(tu_file_has(dump_out, "checkpoint:"));
	ck_assert(tu_file_has(dump_out, "main_zone_first:"));
}
END_TEST

START_TEST(t_dump_missing)
{
	char args[600];

	populate("dump_missing.img", NULL);
	snprintf(args, sizeof(args), "%s -i 900", img);
	ck_assert_int_eq(dump(args), 1); /* a free nid */
	snprintf(args, sizeof(args), "%s -p /d/nothing", img);
	ck_assert_int_eq(dump(args), 1);
	snprintf(args, sizeof(args), "%s -b 4000000000", img);
	ck_assert_int_eq(dump(args), 1);
	snprintf(args, sizeof(args), "%s -z 12x", img);
	ck_assert_int_eq(dump(args), 16);
	ck_assert_int_eq(dump("/nonexistent/image"), 8);
}
END_TEST

START_TEST(t_dump_mounted)
{
	char args[600], ctl[512], *json;
	const char *p;
	pid_t pid;

	populate("dump_mounted.img", NULL);
	pid = tu_daemon_start(img, mnt, NULL);
	ck_assert_int_gt(pid, 0);
	snprintf(args, sizeof(args), "--wait 0 %s -p /d/f1", img);
	ck_assert_int_eq(dump(args), 8);
	ck_assert(tu_file_has(tu_path(args, sizeof(args), "dump.err"), "--shared"));
	/* with --shared: what the daemon has checkpointed */
	ck_assert_int_eq(tu_sh("echo hello > %s/new && %s sync %s", mnt,
			       tu_bin(ctl, sizeof(ctl), "zlfs-ctl"), mnt), 0);
	snprintf(args, sizeof(args), "--shared --json %s -p /d/f1 -p /new", img);
	ck_assert_int_eq(dump(args), 0);
	snprintf(args, sizeof(args), "\"ino\": %u,", ino_f1);
	ck_assert(tu_file_has(dump_out, args));
	ck_assert(tu_file_has(dump_out, "\"size\": 6,"));
	/* /new is small: its 6 bytes are in its inode (inline data), no data block */
	json = slurp(dump_out);
	p = strstr(json, "\"size\": 6,");
	ck_assert_int_eq(num_after(p, "data_blocks"), 0);
	ck_assert_int_eq(num_after(p, "inline_bytes"), 6);
	ck_assert_int_eq(num_after(json, "inline_bytes"), 0); /* /d/f1, in blocks */
	free(json);
	ck_assert_int_eq(tu_daemon_stop(mnt, pid), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dump");
	TCase *tc = tcase_create("dump");

	if (tu_fuse_missing())
		return 77;
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, t_dump_figures);
	tcase_add_test(tc, t_dump_missing);
	tcase_add_test(tc, t_dump_mounted);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
