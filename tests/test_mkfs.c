/*
 * test_mkfs.c - mkfs on emulated devices: what it writes is found and valid, geometries good
 * and bad, refusing to overwrite, superblock and checkpoint ping-pong, and power cut at every
 * point of a mkfs (write-log replay): the device holds either no filesystem or a whole one.
 * mkfs --encrypt encrypts the root directory (a nonce of its own), --plain-root does not, and
 * a power cut anywhere in an encrypted mkfs leaves no filesystem or one with an encrypted root.
 */
#include "testutil.h"

#include "files.h"
#include "format.h"
#include "super.h"
#include "zdev.h"
#include "zdev_emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1024ULL * 1024)

static void make_image(const char *path, uint64_t size, uint64_t zsize, uint64_t zcap,
		       uint32_t conv, uint32_t lbs, uint32_t max_open, uint32_t max_active,
		       const char *log)
{
	struct zemu_create_opts o = {.size = size, .zone_size = zsize, .zone_capacity = zcap,
				     .lblock_size = lbs, .nr_conv = conv, .max_open = max_open,
				     .max_active = max_active, .log_path = log};

	unlink(path);
	ck_assert_int_eq(zemu_create(path, &o), 0);
}

static struct zdev *open_dev(const char *path)
{
	struct zdev *dev = NULL;

	ck_assert_int_eq(zdev_open(path, NULL, &dev), 0);
	return dev;
}

static void read_blk(struct zdev *dev, uint32_t addr, void *buf)
{
	ck_assert_int_eq(zdev_read(dev, buf, ZLFS_BLOCK_SIZE, (uint64_t)addr * ZLFS_BLOCK_SIZE), 0);
}

/* Follow checkpoint -> map -> NAT -> root inode and the root's SIT entry. */
static void check_fresh_fs(struct zdev *dev, const char *label)
{
	struct zlfs_sb_info sbi;
	struct zlfs_cp_info *cp = calloc(1, sizeof(*cp));
	struct zlfs_cp_pos pos;
	uint8_t *b = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct zlfs_map_block *map = (void *)b;
	struct zlfs_nat_block *nat = (void *)b;
	struct zlfs_sit_block *sit = (void *)b;
	struct zlfs_inode *ino = (void *)b;
	uint32_t nat_addr, sit_addr, root_addr, sit_map = 0, log;
	struct zdev_zone z;
	int zone;

	ck_assert_int_eq(zlfs_sb_read(dev, &sbi, &zone), 0);
	ck_assert_int_eq(zone, 0);
	ck_assert_str_eq(sbi.label, label);
	ck_assert_int_eq(ckpt_read_newest(dev, &sbi, cp, &pos), 0);
	ck_assert_uint_eq(cp->version, 1);
	ck_assert(cp->flags & ZLFS_CP_CLEAN);
	ck_assert_int_eq(pos.slot, 0);
	log = sbi.nr_logs >= 4 ? ZLFS_LOG_HOT_NODE : ZLFS_LOG_WARM_NODE;
	ck_assert_uint_eq(cp->logs[log].zone, sbi.main_zone_first);
	ck_assert_uint_eq(cp->logs[log].next_blk, 1);

	read_blk(dev, cp->map_addr[0], b);
	ck_assert_int_eq(zlfs_blk_verify(b, sbi.seed, ZLFS_KIND_MAP), 0);
	nat_addr = le32_get(map->addr[0]);
	if (sbi.nat_blocks < ZLFS_MAP_PER_BLOCK)
		sit_map = le32_get(map->addr[sbi.nat_blocks]);
	read_blk(dev, nat_addr, b);
	ck_assert_int_eq(zlfs_blk_verify(b, sbi.seed, ZLFS_KIND_NAT), 0);
	root_addr = le32_get(nat->e[ZLFS_ROOT_INO].blkaddr);
	ck_assert_uint_eq(root_addr, zlfs_zone_start_blk(&sbi, sbi.main_zone_first));
	ck_assert_uint_eq(le32_get(nat->e[2].blkaddr), ZLFS_ADDR_NULL);

	read_blk(dev, root_addr, b);
	ck_assert_int_eq(zlfs_blk_verify(b, sbi.seed, ZLFS_KIND_INODE), 0);
	ck_assert_uint_eq(le32_get(ino->mode), S_IFDIR | 0755);
	ck_assert_uint_eq(le32_get(ino->nlink), 2);
	ck_assert_uint_eq(le32_get(ino->hdr.index), ZLFS_ROOT_INO);

	if (sit_map) {
		sit_addr = sit_map;
		read_blk(dev, sit_addr, b);
		ck_assert_int_eq(zlfs_blk_verify(b, sbi.seed, ZLFS_KIND_SIT), 0);
		ck_assert_uint_eq(le16_get(sit->e[0].valid), 1);
		ck_assert_uint_eq(sit->e[0].bitmap[0], 1);
		ck_assert_uint_eq(sit->e[1].log, ZLFS_LOG_NONE);
	}
	ck_assert_int_eq(zdev_report_one(dev, sbi.sb_zone[0], &z), 0);
	ck_assert_int_eq(z.cond, ZDEV_COND_FULL);
	ck_assert_int_eq(zdev_report_one(dev, sbi.sb_zone[1], &z), 0);
	ck_assert_int_eq(z.cond, ZDEV_COND_EMPTY);
	ck_assert_int_eq(zdev_report_one(dev, sbi.main_zone_first + 1, &z), 0);
	ck_assert_int_eq(z.cond, ZDEV_COND_EMPTY);
	zdev_buf_free(b);
	free(cp);
}

static void mkfs_dev(const char *path, const char *label, struct zlfs_sb_info *sbi)
{
	struct zlfs_mkfs_opts o = {.label = label, .quiet = 1};
	struct zdev *dev = open_dev(path);

	ck_assert_int_eq(zlfs_mkfs(dev, &o, sbi), 0);
	check_fresh_fs(dev, label);
	zdev_close(dev);
}

START_TEST(t_mkfs_basic)
{
	char img[512];
	struct zlfs_sb_info sbi;

	make_image(tu_path(img, sizeof(img), "basic.img"), 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 0,
		   NULL);
	mkfs_dev(img, "basic", &sbi); /* 26 main zones: 4 logs (fewer than 32) */
	ck_assert_uint_eq(sbi.nr_logs, 4);
	ck_assert_uint_eq(sbi.seg_blocks, 512);
	ck_assert_uint_eq(sbi.sb_zone[0], 0);
	/* 16 zones: 4 logs too */
	make_image(tu_path(img, sizeof(img), "small.img"), 64 * MiB, 4 * MiB, 0, 0, 4096, 0, 0,
		   NULL);
	mkfs_dev(img, "small", &sbi);
	ck_assert_uint_eq(sbi.nr_logs, 4);
	ck_assert_uint_eq(sbi.min_revision, 1);
	/* 42 main zones: no warm data lanes (fewer than 64), the frozen log (revision 2) */
	make_image(tu_path(img, sizeof(img), "seven.img"), 96 * MiB, 2 * MiB, 0, 0, 4096, 0, 0,
		   NULL);
	mkfs_dev(img, "seven", &sbi);
	ck_assert_uint_eq(sbi.nr_logs, ZLFS_NR_LOG_TYPES_R2);
	ck_assert_uint_eq(sbi.min_revision, 2);
	/* 122 main zones: the warm data lanes too, which only revision 3 reads */
	make_image(tu_path(img, sizeof(img), "lanes.img"), 256 * MiB, 2 * MiB, 0, 0, 4096, 0, 0,
		   NULL);
	mkfs_dev(img, "lanes", &sbi);
	ck_assert_uint_eq(sbi.nr_logs, ZLFS_NR_LOG_TYPES);
	ck_assert_uint_eq(sbi.min_revision, 3);
	/* the same with 11 open zones: 10 logs and the checkpoint and meta logs do not fit */
	make_image(tu_path(img, sizeof(img), "lanes11.img"), 256 * MiB, 2 * MiB, 0, 0, 4096, 11,
		   11, NULL);
	mkfs_dev(img, "lanes11", &sbi);
	ck_assert_uint_eq(sbi.nr_logs, ZLFS_NR_LOG_TYPES_R2);
	ck_assert_uint_eq(sbi.min_revision, 2);
}
END_TEST

START_TEST(t_mkfs_geometries)
{
	char img[512];
	struct zlfs_sb_info sbi;

	/* ZNS-like: capacity below zone size, limits that allow only 4 logs */
	make_image(tu_path(img, sizeof(img), "zns.img"), 256 * MiB, 8 * MiB, 6 * MiB, 0, 4096, 6,
		   6, NULL);
	mkfs_dev(img, "zns", &sbi);
	ck_assert_uint_eq(sbi.nr_logs, 4);
	ck_assert_uint_eq(sbi.zone_capacity, 6 * MiB);
	ck_assert_uint_eq(sbi.segs_per_zone, 3);
	/* leading conventional zones and 512-byte logical blocks */
	make_image(tu_path(img, sizeof(img), "conv.img"), 64 * MiB, 2 * MiB, 0, 3, 512, 0, 0,
		   NULL);
	mkfs_dev(img, "conv", &sbi);
	ck_assert_uint_eq(sbi.sb_zone[0], 3);
	ck_assert_uint_eq(sbi.dev_lblock_size, 512);
	/* small zones: smaller segments */
	make_image(tu_path(img, sizeof(img), "small.img"), 32 * MiB, 512 * 1024, 0, 0, 4096, 0, 0,
		   NULL);
	mkfs_dev(img, "small", &sbi);
	ck_assert_uint_eq(sbi.seg_blocks, 128);
}
END_TEST

static int run_mkfs(const char *args, const char *img, const char *errfile)
{
	char bin[512];

	return tu_sh("%s %s %s >/dev/null 2>%s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"), args, img,
		     errfile);
}

START_TEST(t_cli_refuses_existing)
{
	char img[512], err[512];
	struct zlfs_sb_info a, b;
	struct zdev *dev;

	make_image(tu_path(img, sizeof(img), "cli.img"), 64 * MiB, 2 * MiB, 0, 1, 4096, 0, 0, NULL);
	tu_path(err, sizeof(err), "cli.err");
	ck_assert_int_eq(run_mkfs("-q -L first", img, err), 0);
	dev = open_dev(img);
	ck_assert_int_eq(zlfs_sb_read(dev, &a, NULL), 0);
	zdev_close(dev);
	ck_assert_int_eq(run_mkfs("-q -l second", img, err), 1);
	ck_assert(tu_file_has(err, "already holds a zlfs filesystem"));
	ck_assert_int_eq(run_mkfs("-q -f -l second", img, err), 0);
	dev = open_dev(img);
	ck_assert_int_eq(zlfs_sb_read(dev, &b, NULL), 0);
	ck_assert_str_eq(b.label, "second");
	ck_assert_int_ne(memcmp(a.uuid, b.uuid, 16), 0);
	zdev_close(dev);
}
END_TEST

START_TEST(t_cli_refuses_foreign)
{
	char img[512], err[512];
	uint8_t *buf = zdev_buf_alloc(4096);
	struct zdev *dev;

	make_image(tu_path(img, sizeof(img), "ext4.img"), 64 * MiB, 2 * MiB, 0, 2, 4096, 0, 0, NULL);
	dev = open_dev(img);
	memset(buf, 0, 4096);
	buf[1080] = 0x53;
	buf[1081] = 0xef;
	ck_assert_int_eq(zdev_write(dev, buf, 4096, 0), 0); /* zone 0 is conventional */
	ck_assert_int_eq(zdev_flush(dev), 0);
	zdev_close(dev);
	tu_path(err, sizeof(err), "ext4.err");
	ck_assert_int_eq(run_mkfs("-q", img, err), 1);
	ck_assert(tu_file_has(err, "ext2/ext3/ext4"));
	ck_assert_int_eq(run_mkfs("-q -f", img, err), 0);
	zdev_buf_free(buf);
}
END_TEST

START_TEST(t_cli_bad_geometry)
{
	char img[512], err[512], plain[512];
	int fd;

	tu_path(err, sizeof(err), "geo.err");
	make_image(tu_path(img, sizeof(img), "tiny.img"), 16 * MiB, 2 * MiB, 0, 0, 4096, 0, 0, NULL);
	ck_assert_int_eq(run_mkfs("-q", img, err), 1);
	ck_assert(tu_file_has(err, "device too small"));
	make_image(tu_path(img, sizeof(img), "limits.img"), 64 * MiB, 2 * MiB, 0, 0, 4096, 3, 0,
		   NULL);
	ck_assert_int_eq(run_mkfs("-q", img, err), 1);
	ck_assert(tu_file_has(err, "open"));
	make_image(tu_path(img, sizeof(img), "logs.img"), 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 6, NULL);
	ck_assert_int_eq(run_mkfs("-q --logs 6", img, err), 1);
	ck_assert(tu_file_has(err, "--logs 4"));
	ck_assert_int_eq(run_mkfs("-q --logs 4", img, err), 0);
	ck_assert_int_eq(run_mkfs("-q -o 80 -f", img, err), 1);
	ck_assert(tu_file_has(err, "overprovision"));
	ck_assert_int_eq(run_mkfs("-q --bogus", img, err), 1);
	tu_path(plain, sizeof(plain), "plain.file");
	fd = open(plain, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 64 * MiB), 0);
	close(fd);
	ck_assert_int_eq(run_mkfs("-q", plain, err), 1);
	ck_assert(tu_file_has(err, "not a zoned block device or zlfs-emu image"));
}
END_TEST

START_TEST(t_sb_ping_pong)
{
	char img[512];
	struct zlfs_sb_info sbi, got;
	struct zdev *dev;
	int zone;

	make_image(tu_path(img, sizeof(img), "pp.img"), 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 0, NULL);
	mkfs_dev(img, "pp", &sbi);
	dev = open_dev(img);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(zlfs_sb_read(dev, &got, &zone), 0);
		ck_assert_uint_eq(got.sb_seq, sbi.sb_seq + i);
		ck_assert_int_eq(zone, i % 2);
		got.sb_seq++;
		snprintf(got.label, sizeof(got.label), "gen%d", i);
		ck_assert_int_eq(zlfs_sb_write(dev, &got, zone), 0);
	}
	ck_assert_int_eq(zlfs_sb_read(dev, &got, &zone), 0);
	ck_assert_str_eq(got.label, "gen2");
	ck_assert_int_eq(zone, 1);
	zdev_close(dev);
}
END_TEST

START_TEST(t_cp_newest_and_torn_pack)
{
	char img[512];
	struct zlfs_sb_info sbi;
	struct zlfs_cp_info *cp = calloc(1, sizeof(*cp));
	struct zlfs_summary *sum = calloc(2, sizeof(*sum));
	uint8_t logs[2] = {ZLFS_LOG_HOT_NODE, ZLFS_LOG_WARM_DATA};
	uint32_t orphans[3] = {5, 6, 7};
	struct zlfs_cp_pos pos;
	uint8_t *b = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	struct zdev *dev;

	make_image(tu_path(img, sizeof(img), "cp.img"), 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 0, NULL);
	mkfs_dev(img, "cp", &sbi);
	dev = open_dev(img);
	ck_assert_int_eq(ckpt_read_newest(dev, &sbi, cp, &pos), 0);
	uint32_t next = pos.blk + cp->pack_blocks;
	cp->version = 2;
	cp->nr_orphans = 3;
	/* the two summaries belong to open segments of those logs: the pack must say so */
	cp->logs[ZLFS_LOG_HOT_NODE].zone = sbi.main_zone_first;
	cp->logs[ZLFS_LOG_HOT_NODE].next_blk = 1;
	cp->logs[ZLFS_LOG_WARM_DATA].zone = sbi.main_zone_first + 1;
	cp->logs[ZLFS_LOG_WARM_DATA].next_blk = 1;
	ck_assert_int_eq(ckpt_write_pack(dev, &sbi, cp, 0, next, sum, logs, 2, orphans, NULL), 0);
	ck_assert_uint_eq(cp->pack_blocks, 5);
	ck_assert_int_eq(ckpt_read_newest(dev, &sbi, cp, &pos), 0);
	ck_assert_uint_eq(cp->version, 2);
	ck_assert_uint_eq(pos.blk, next);
	ck_assert_uint_eq(cp->nr_orphans, 3);
	/* A pack cut after its head: only the head reaches the device. */
	next += cp->pack_blocks;
	cp->version = 3;
	cp->nr_orphans = 0;
	cp->pack_blocks = 2;
	cp->nr_summaries = cp->nr_orphan_blocks = 0;
	zlfs_cp_head_encode(cp, sbi.seed, b);
	ck_assert_int_eq(zdev_write(dev, b, ZLFS_BLOCK_SIZE,
				    (uint64_t)sbi.cp_zone[0] * sbi.zone_size +
					    (uint64_t)next * ZLFS_BLOCK_SIZE), 0);
	ck_assert_int_eq(ckpt_read_newest(dev, &sbi, cp, &pos), 0);
	ck_assert_uint_eq(cp->version, 2);
	/* The other zone takes the next pack; the newest wins across zones. */
	cp->version = 4;
	cp->nr_orphans = 0;
	ck_assert_int_eq(zdev_zone_reset(dev, sbi.cp_zone[1]), 0);
	ck_assert_int_eq(ckpt_write_pack(dev, &sbi, cp, 1, 0, sum, logs, 1, NULL, NULL), 0);
	ck_assert_int_eq(ckpt_read_newest(dev, &sbi, cp, &pos), 0);
	ck_assert_uint_eq(cp->version, 4);
	ck_assert_int_eq(pos.slot, 1);
	zdev_close(dev);
	zdev_buf_free(b);
	free(cp);
	free(sum);
}
END_TEST

/* ---- power cuts, and an encrypted root ---------------------------------------------------- */

/* The root inode's flags of the filesystem on IMG, mounted read-only (with KEYFILE or none);
 * its nonce to NONCE. -1 when it does not mount. */
static long root_flags(const char *img, const char *keyfile, uint8_t nonce[16])
{
	struct zlfs_key_source ks = {.keyfile = keyfile};
	struct zlfs_mount_opts mo = {.readonly = 1, .key = keyfile ? &ks : NULL};
	struct node_page *root;
	struct zlfs_fs *fs;
	long flags;

	if (files_mount(img, &mo, &fs))
		return -1;
	ck_assert_int_eq(inode_get(fs, ZLFS_ROOT_INO, &root), 0);
	flags = le32_get(inode_of(root)->flags);
	memcpy(nonce, inode_of(root)->nonce, 16);
	node_put(fs, root);
	files_unmount(fs);
	return flags;
}

static const char *new_key(char *key, size_t len)
{
	char bin[512];

	tu_path(key, len, "mkfs.key");
	unlink(key);
	ck_assert_int_eq(tu_sh("%s genkey %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), key), 0);
	return key;
}

START_TEST(t_encrypted_root)
{
	static const uint8_t zero[16];
	char img[512], err[512], key[512], args[1200];
	uint8_t n1[16], n2[16];

	make_image(tu_path(img, sizeof(img), "encroot.img"), 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 0,
		   NULL);
	tu_path(err, sizeof(err), "encroot.err");
	snprintf(args, sizeof(args), "-q --encrypt --keyfile %s", new_key(key, sizeof(key)));
	ck_assert_int_eq(run_mkfs(args, img, err), 0);
	ck_assert_int_eq(root_flags(img, key, n1), ZLFS_IFLAG_ENCRYPT);
	ck_assert_int_eq(root_flags(img, NULL, n1), ZLFS_IFLAG_ENCRYPT); /* no key: the same */
	ck_assert(memcmp(n1, zero, 16));
	snprintf(args, sizeof(args), "-q -f --encrypt --keyfile %s", key);
	ck_assert_int_eq(run_mkfs(args, img, err), 0);
	ck_assert_int_eq(root_flags(img, key, n2), ZLFS_IFLAG_ENCRYPT);
	ck_assert(memcmp(n1, n2, 16)); /* a fresh nonce each time */
	snprintf(args, sizeof(args), "-q -f --encrypt --plain-root --keyfile %s", key);
	ck_assert_int_eq(run_mkfs(args, img, err), 0);
	ck_assert_int_eq(root_flags(img, key, n2), 0);
	ck_assert(!memcmp(n2, zero, 16));
	ck_assert_int_eq(run_mkfs("-q -f --plain-root", img, err), 1);
	ck_assert(tu_file_has(err, "--plain-root only means something with --encrypt"));
	ck_assert_int_eq(run_mkfs("-q -f", img, err), 0);
	ck_assert_int_eq(root_flags(img, NULL, n2), 0);
}
END_TEST

/* Replay a mkfs's write log to every prefix (and torn): no filesystem, or a whole one. With
 * KEY, the mkfs is mkfs.zlfs --encrypt with that key file, and a whole filesystem must have an
 * encrypted root, mounted with the key or without: never a plain root to write names into. */
static void mkfs_cut_everywhere(const char *name, const char *key)
{
	char img[512], log[512], base[512], out[512], err[512], args[1200], f[64];
	struct zlfs_sb_info sbi;
	struct zlfs_cp_info *cp = calloc(1, sizeof(*cp));
	struct zlfs_cp_pos pos;
	uint8_t nonce[16];
	long n, total;
	int torn, whole = 0, none = 0;

	snprintf(f, sizeof(f), "%s.img", name);
	tu_path(img, sizeof(img), f);
	snprintf(f, sizeof(f), "%s.log", name);
	tu_path(log, sizeof(log), f);
	snprintf(f, sizeof(f), "%s-base.img", name);
	tu_path(base, sizeof(base), f);
	snprintf(f, sizeof(f), "%s-out.img", name);
	tu_path(out, sizeof(out), f);
	unlink(log);
	make_image(base, 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 0, NULL);
	make_image(img, 64 * MiB, 2 * MiB, 0, 0, 4096, 0, 0, log);
	if (key) {
		snprintf(args, sizeof(args), "-q --encrypt --keyfile %s", key);
		ck_assert_int_eq(run_mkfs(args, img, tu_path(err, sizeof(err), "pc.err")), 0);
	} else {
		mkfs_dev(img, "pc", &sbi);
	}
	total = zemu_log_count(log);
	ck_assert_int_gt(total, 5);
	for (n = 0; n <= total; n++) {
		for (torn = 0; torn < 2; torn++) {
			struct zdev *dev;
			int ret;

			unlink(out);
			ck_assert_int_eq(zemu_replay(base, log, n, out, torn), 0);
			dev = open_dev(out);
			ret = zlfs_sb_read(dev, &sbi, NULL);
			if (ret == 0) {
				ck_assert_int_eq(ckpt_read_newest(dev, &sbi, cp, &pos), 0);
				ck_assert_uint_eq(cp->version, 1);
				whole++;
			} else {
				ck_assert_int_eq(ret, -ENOENT);
				none++;
			}
			zdev_close(dev);
			if (!ret && key) {
				ck_assert_msg(root_flags(out, key, nonce) == ZLFS_IFLAG_ENCRYPT,
					      "cut at %ld%s: the root is not encrypted", n,
					      torn ? " (torn)" : "");
				ck_assert_int_eq(root_flags(out, NULL, nonce), ZLFS_IFLAG_ENCRYPT);
			}
		}
	}
	printf("power cuts in a%s mkfs: %d points with no filesystem, %d with a whole one\n",
	       key ? "n encrypted" : "", none, whole);
	ck_assert_int_gt(whole, 0);
	ck_assert_int_gt(none, 0);
	free(cp);
}

START_TEST(t_mkfs_power_cut_everywhere)
{
	mkfs_cut_everywhere("pc", NULL);
}
END_TEST

START_TEST(t_encrypted_mkfs_power_cut)
{
	char key[512];

	mkfs_cut_everywhere("epc", new_key(key, sizeof(key)));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mkfs");
	TCase *tc = tcase_create("mkfs");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_mkfs_basic);
	tcase_add_test(tc, t_mkfs_geometries);
	tcase_add_test(tc, t_cli_refuses_existing);
	tcase_add_test(tc, t_cli_refuses_foreign);
	tcase_add_test(tc, t_cli_bad_geometry);
	tcase_add_test(tc, t_sb_ping_pong);
	tcase_add_test(tc, t_cp_newest_and_torn_pack);
	tcase_add_test(tc, t_mkfs_power_cut_everywhere);
	tcase_add_test(tc, t_encrypted_root);
	tcase_add_test(tc, t_encrypted_mkfs_power_cut);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
