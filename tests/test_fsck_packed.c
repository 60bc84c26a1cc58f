/*
 * test_fsck_packed.c - inode packs (mkfs --packed-inodes; docs/design.md, "Packed inodes")
 * under fsck.zlfs, GC and zlfs-dump: a tree of small files whose inodes a checkpoint packed,
 * one slot made invalid (resealed), a whole pack's checksum broken, a zone full of packs
 * collected, the dump of a packed inode and of its pack, and a pack read or written while
 * an allocation, a read or a NAT update fails (injected through --wrap), the room a zone
 * of packs collected owes, and GC of a pack whose live slots were never worked out. Part of test_fsck
 * (test_fsck.c orders the tests). Spanning slots (SPAN_SLOTS): files of 129 to 3,601 bytes
 * packed or not, unlinked and collected by GC, and crafted spans fsck names.
 */
#include "fsck_testutil.h"

#include "core.h"
#include "files.h"
#include "npack.h"
#include "zdev_emu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPK 240   /* small files, their inodes packed by the checkpoint of the unmount */
#define NCHURN 40 /* files whose fsyncs move the node log on to another zone */

static uint32_t pk_ino[NPK], churn_ino[NCHURN], pk_dir;

/* SPAN_SLOTS (populate_span): inline files that take 2, 5, 9, 15, 1, 2, 4 positions, and one
 * a byte too big for any pack */
static const size_t span_sizes[8] = {129, 1000, 2000, 3600, 40, 300, 3601, 700};
static int spanning; /* pk_size is populate_span's */

static size_t pk_size(int i)
{
	if (spanning)
		return span_sizes[i % 8];
	return i % 5 ? 30 + (size_t)i : 4096 * (size_t)(1 + i % 3);
}

/* /p/fNNN: NPK files, most inline (30-270 bytes), every fifth one to three blocks; /c/cNN:
 * NCHURN more. mkfs --packed-inodes; the unmount's checkpoint packs them. */
static void populate_packed(const char *name)
{
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};
	struct zlfs_fs *fs;
	uint32_t cdir;
	char nm[32];

	spanning = 0;
	tu_fresh_fs(name, &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(tu_sh("%s -q -f --packed-inodes %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
			       img), 0);
	fs = mount_rw(img, 0);
	pk_dir = mk(fs, ZLFS_ROOT_INO, "p", 1, 0);
	cdir = mk(fs, ZLFS_ROOT_INO, "c", 1, 0);
	for (int i = 0; i < NPK; i++) {
		snprintf(nm, sizeof(nm), "f%03d", i);
		pk_ino[i] = mk(fs, pk_dir, nm, 0, pk_size(i));
	}
	for (int i = 0; i < NCHURN; i++) {
		snprintf(nm, sizeof(nm), "c%02d", i);
		churn_ino[i] = mk(fs, cdir, nm, 0, 100);
	}
	ck_assert_int_eq(files_unmount(fs), 0);
}

static struct nat_ent nat_of(struct zlfs_fs *fs, uint32_t nid)
{
	struct nat_ent e;

	ck_assert_int_eq(nat_get(fs, nid, &e), 0);
	return e;
}

/* Inode INO's mtime changed: dirty in the cache, written at the next fsync or checkpoint. */
static void touch_inode(struct zlfs_fs *fs, uint32_t ino)
{
	struct node_page *np;

	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	inode_touch(fs, np, INODE_MTIME);
	node_dirty(fs, np);
	node_put(fs, np);
}

/* fsyncs of the churn files until the node log has left the zone of the packs (full, not
 * open), which it returns. */
static uint32_t churn_past_packs(struct zlfs_fs *fs)
{
	uint32_t zone = nat_of(fs, pk_ino[0]).blkaddr / zlfs_zone_blocks(&fs->sb);

	for (int r = 0; r < 600 / NCHURN && seg_zone_state(fs, zone) == ZONE_OPEN; r++)
		for (int i = 0; i < NCHURN; i++) {
			touch_inode(fs, churn_ino[i]);
			ck_assert_int_eq(files_fsync(fs, churn_ino[i]), 0);
		}
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_USED);
	return zone;
}

/* How many of the files' inodes are in packs; every file reads back its pattern. */
static int packed_and_intact(struct zlfs_fs *fs, uint32_t skip)
{
	int packed = 0;

	for (int i = 0; i < NPK; i++) {
		if (pk_ino[i] == skip)
			continue;
		packed += nat_of(fs, pk_ino[i]).packed;
		ck_assert_msg(same_data(fs, pk_ino[i], pk_size(i)), "file %d (inode %u)", i,
			      pk_ino[i]);
	}
	return packed;
}

/* A packed tree in image NAME, checked clean, every file packed or not read back; the NAT
 * entry of file I, which must be in a pack. */
static struct nat_ent packed_tree(const char *name, int i)
{
	struct zlfs_fs *fs;
	struct nat_ent e;

	populate_packed(name);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_ge(packed_and_intact(fs, 0), NPK * 9 / 10);
	e = nat_of(fs, pk_ino[i]);
	files_unmount(fs);
	ck_assert(e.packed);
	return e;
}

struct slot_edit {
	uint32_t slot;
	uint32_t mode;
};

static void set_slot_mode(uint8_t *b, void *arg)
{
	struct zlfs_inode_pack *pk = (void *)b;
	const struct slot_edit *e = arg;

	pk->slot[e->slot].mode = le32_put(e->mode);
}

static void flip_byte(uint8_t *b, void *arg)
{
	b[*(size_t *)arg] ^= 0x10;
}

/* One slot of a pack made no inode (no file type in its mode), the pack resealed. -n: that inode is damaged
 * and the pack's other inodes are not (4); -y drops it, the pack stays for the others (1); a
 * second -n is clean and every other file reads back. */
START_TEST(t_packed_slot_damaged)
{
	struct slot_edit ed = {.mode = 0170000};
	struct nat_ent e = packed_tree("pkslot.img", NPK / 2 + 1);
	uint32_t victim = pk_ino[NPK / 2 + 1], ino;
	struct zlfs_fs *fs;
	struct node_page *d;
	char s[120];

	ed.slot = e.slot;
	edit_block(e.blkaddr, ZLFS_KIND_IPACK, set_slot_mode, &ed, 1);
	ck_assert_int_eq(fsck("-n", img), 4);
	snprintf(s, sizeof(s), "inode %u is damaged: inode mode = 0170000 is no file type", victim);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	snprintf(s, sizeof(s), "inode %u is damaged", pk_ino[NPK / 2]);
	ck_assert(!said(s)); /* its neighbour in the pack, or in the next one */
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, pk_dir, &d), 0);
	snprintf(s, sizeof(s), "f%03d", NPK / 2 + 1);
	ck_assert_int_eq(dir_lookup(fs, d, s, strlen(s), &ino, NULL), -ENOENT);
	node_put(fs, d);
	packed_and_intact(fs, victim);
	ck_assert(nat_of(fs, pk_ino[NPK / 2]).blkaddr == e.blkaddr || e.slot == 0);
	files_unmount(fs);
}
END_TEST

/* A bit flipped in a pack (its checksum broken): every inode of it is damaged (4); -y drops
 * them and, once no slot is live, frees the block (1); a second -n is clean. */
START_TEST(t_packed_pack_flipped)
{
	size_t byte = 2000;
	struct zlfs_fs *fs;
	struct nat_ent e;
	char s[120];
	int in_pack = 0;

	populate_packed("pkflip.img");
	fs = mount_rw(img, 1);
	e = nat_of(fs, pk_ino[NPK / 3]);
	for (int i = 0; i < NPK; i++)
		in_pack += nat_of(fs, pk_ino[i]).blkaddr == e.blkaddr;
	files_unmount(fs);
	ck_assert(e.packed);
	ck_assert_int_gt(in_pack, 1);
	edit_block(e.blkaddr, ZLFS_KIND_IPACK, flip_byte, &byte, 0);
	ck_assert_int_eq(fsck("-n", img), 4);
	snprintf(s, sizeof(s), "inode %u is damaged: bad checksum", pk_ino[NPK / 3]);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	ck_assert_int_eq(fsck("-y", img), 1);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	for (int i = 0; i < NPK; i++) {
		struct nat_ent f = nat_of(fs, pk_ino[i]);

		ck_assert_uint_ne(f.blkaddr, e.blkaddr);
		if (f.blkaddr)
			ck_assert(same_data(fs, pk_ino[i], pk_size(i)));
	}
	files_unmount(fs);
}
END_TEST

/* GC of a zone that holds the packs: the node log is moved on to another zone (fsyncs of
 * other files, each a whole block), then the zone is migrated. Every inode leaves it, is
 * packed again by the checkpoint, reads back; the zone is free; fsck is clean. */
START_TEST(t_packed_gc_zone)
{
	struct zlfs_fs *fs;
	uint32_t zone, zb;
	int moved = 0;

	populate_packed("pkgc.img");
	fs = mount_rw(img, 0);
	zb = zlfs_zone_blocks(&fs->sb);
	zone = churn_past_packs(fs);
	ck_assert_int_eq(gc_migrate_zone(fs, zone), 0);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_FREE);
	for (int i = 0; i < NPK; i++) {
		struct nat_ent e = nat_of(fs, pk_ino[i]);

		ck_assert_uint_ne(e.blkaddr / zb, zone);
		moved += e.packed;
	}
	ck_assert_int_ge(moved, NPK * 9 / 10);
	ck_assert_int_ge(packed_and_intact(fs, 0), NPK * 9 / 10);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	packed_and_intact(fs, 0);
	files_unmount(fs);
}
END_TEST

/* A zone of packs collected: the inodes moved owe the room of the packs they go out in (not
 * a block each), GC counts a block per pack moved, and the checkpoint settles the debt. */
START_TEST(t_packed_gc_owed)
{
	struct zlfs_fs *fs;
	uint32_t zone, valid;
	uint64_t owed0, owed, gcb0;

	populate_packed("pkgcowed.img");
	fs = mount_rw(img, 0);
	zone = churn_past_packs(fs);
	valid = seg_zone_valid(fs, zone);
	owed0 = seg_owed_blocks(fs);
	gcb0 = fs->gc_bytes;
	ck_assert_int_eq(gc_migrate_zone(fs, zone), 0);
	owed = seg_owed_blocks(fs);
	ck_assert_uint_ge(valid, 10); /* mostly packs of up to ZLFS_PACK_SLOTS inodes */
	/* at most a block per valid block moved, and one per node log type for a part pack */
	ck_assert_msg(owed <= owed0 + valid + 3, "owed %llu -> %llu for %u valid blocks",
		      (unsigned long long)owed0, (unsigned long long)owed, valid);
	ck_assert_uint_le((fs->gc_bytes - gcb0) / ZLFS_BLOCK_SIZE, valid);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_uint_eq(seg_owed_blocks(fs), 0);
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_FREE);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* zlfs-dump: a packed inode names its slot; its block lists the pack's slots, live. */
START_TEST(t_packed_dump)
{
	struct nat_ent e = packed_tree("pkdump.img", 7);
	char s[80];

	ck_assert_int_eq(tu_sh("%s --json -i %u %s > %s", tu_bin(bin, sizeof(bin), "zlfs-dump"),
			       pk_ino[7], img, out), 0);
	snprintf(s, sizeof(s), "\"pack_slot\": %u", e.slot);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	ck_assert_int_eq(tu_sh("%s --json -b %u %s > %s", tu_bin(bin, sizeof(bin), "zlfs-dump"),
			       e.blkaddr, img, out), 0);
	ck_assert(said("\"header_kind\": \"inode pack\""));
	ck_assert(said("\"kind\": \"inode pack\""));
	snprintf(s, sizeof(s), "\"nid\": %u", pk_ino[7]);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	ck_assert(said("\"live\": true"));
}
END_TEST

/* ---- failures injected: this binary is linked with --wrap=zdev_buf_alloc and
 * --wrap=nat_set_packed (tests/CMakeLists.txt); calls from other objects of the library come
 * here, and fail while a test asks ---- */

void *__real_zdev_buf_alloc(size_t len);
void *__wrap_zdev_buf_alloc(size_t len);
int __real_nat_set_packed(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot);
int __wrap_nat_set_packed(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot);

int __real_npack_write(struct zlfs_fs *fs, const void *const *in, uint32_t n,
		       enum zlfs_log_type log);
int __wrap_npack_write(struct zlfs_fs *fs, const void *const *in, uint32_t n,
		       enum zlfs_log_type log);

int __real_seg_read(struct zlfs_fs *fs, uint32_t addr, void *buf);
int __wrap_seg_read(struct zlfs_fs *fs, uint32_t addr, void *buf);

static int fail_bufs;        /* every device buffer allocation returns NULL */
static int fail_seg_reads;   /* every block read of the node layer fails with -EIO */
static int nat_set_fail_at;  /* the Nth call from now on fails with -EIO (0: none) */
static uint32_t nat_set_addr; /* the pack address of the call that failed */
static int pack_enomem_at;   /* the Nth pack written from now on fails with -ENOMEM (0: none) */

/* Out of memory as npack_write's own buffer would be: before anything is written. */
int __wrap_npack_write(struct zlfs_fs *fs, const void *const *in, uint32_t n,
		       enum zlfs_log_type log)
{
	if (pack_enomem_at > 0 && !--pack_enomem_at)
		return -ENOMEM;
	return __real_npack_write(fs, in, n, log);
}

void *__wrap_zdev_buf_alloc(size_t len)
{
	return fail_bufs ? NULL : __real_zdev_buf_alloc(len);
}

int __wrap_seg_read(struct zlfs_fs *fs, uint32_t addr, void *buf)
{
	return fail_seg_reads ? -EIO : __real_seg_read(fs, addr, buf);
}

int __wrap_nat_set_packed(struct zlfs_fs *fs, uint32_t nid, uint32_t addr, uint32_t slot)
{
	if (nat_set_fail_at > 0 && !--nat_set_fail_at) {
		nat_set_addr = addr;
		return -EIO;
	}
	return __real_nat_set_packed(fs, nid, addr, slot);
}

/* A packed inode read while no read buffer can be had fails with -ENOMEM, ncache_lock
 * balanced (the test build checks the lock order), and reads once memory is back. */
START_TEST(t_packed_read_enomem)
{
	struct zlfs_fs *fs;
	struct node_page *np;

	populate_packed("pkenomem.img");
	fs = mount_rw(img, 1);
	ck_assert(nat_of(fs, pk_ino[7]).packed); /* the NAT page is cached: only the node is read */
	fail_bufs = 1;
	ck_assert_int_eq(node_get(fs, pk_ino[7], &np), -ENOMEM);
	fail_bufs = 0;
	ck_assert_int_eq(node_get(fs, pk_ino[7], &np), 0);
	node_put(fs, np);
	ck_assert(same_data(fs, pk_ino[7], pk_size(7)));
	files_unmount(fs);
}
END_TEST

/* The checkpoint packs the NPK inodes dirtied; the NAT update of the FAILth slot written fails.
 * The pack then written is named by FAIL - 1 NAT entries; its block dies with them. */
static void pack_with_nat_failure(const char *name, int fail)
{
	struct zlfs_fs *fs;
	struct nat_ent named[ZLFS_PACK_SLOTS];
	int nnamed = 0;

	populate_packed(name);
	fs = mount_rw(img, 0);
	for (int i = 0; i < NPK; i++)
		touch_inode(fs, pk_ino[i]);
	nat_set_fail_at = fail;
	ck_assert_int_eq(files_sync(fs), -EIO);
	ck_assert_int_eq(nat_set_fail_at, 0);
	for (int i = 0; i < NPK; i++) {
		struct nat_ent e = nat_of(fs, pk_ino[i]);

		if (e.packed && e.blkaddr == nat_set_addr)
			named[nnamed++] = e;
	}
	ck_assert_int_eq(nnamed, fail - 1);
	ck_assert_int_eq(seg_is_valid(fs, nat_set_addr), nnamed > 0);
	for (int i = 0; i < nnamed; i++) /* what a rewrite of the named inodes would do */
		node_addr_dead(fs, named[i].ino, &named[i]);
	ck_assert_int_eq(seg_is_valid(fs, nat_set_addr), 0);
	files_unmount(fs); /* after a failed checkpoint: what it returns is not the point */
}

/* No slot of the pack named: its block is dead at once. */
START_TEST(t_packed_nat_fail_first)
{
	pack_with_nat_failure("pknatfail1.img", 1);
}
END_TEST

/* Two slots named, the rest not: the pack dies with those two. */
START_TEST(t_packed_nat_fail_third)
{
	pack_with_nat_failure("pknatfail3.img", 3);
}
END_TEST

/* Every slot of a pack dies by an fsync while the pack cannot be read (its live slots not
 * worked out, the pack kept valid): GC of its zone works them out again and the zone empties. */
START_TEST(t_packed_gc_unknown_slots)
{
	struct zlfs_fs *fs;
	uint32_t pack, zone;
	int slots = 0;

	populate_packed("pkunknown.img");
	fs = mount_rw(img, 0);
	pack = nat_of(fs, pk_ino[0]).blkaddr;
	for (int i = 0; i < NPK; i++) {
		if (nat_of(fs, pk_ino[i]).blkaddr != pack)
			continue;
		touch_inode(fs, pk_ino[i]);
		fail_seg_reads = 1;
		ck_assert_int_eq(files_fsync(fs, pk_ino[i]), 0);
		fail_seg_reads = 0;
		ck_assert_uint_ne(nat_of(fs, pk_ino[i]).blkaddr, pack);
		slots++;
	}
	ck_assert_int_ge(slots, 2);
	ck_assert_int_eq(seg_is_valid(fs, pack), 1); /* kept: a lost inode is worse than space */
	zone = churn_past_packs(fs);
	ck_assert_uint_eq(zone, pack / zlfs_zone_blocks(&fs->sb));
	ck_assert_int_eq(gc_migrate_zone(fs, zone), 0);
	ck_assert_int_eq(seg_is_valid(fs, pack), 0);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_FREE);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST


/* The checkpoint packs the NPK inodes dirtied; the third pack cannot be had (no memory):
 * packing stops there and the inodes left go out as whole blocks, the checkpoint succeeds
 * (it once failed, leaving the filesystem read-only), every file reads back, fsck clean. */
START_TEST(t_packed_ckpt_enomem)
{
	struct zlfs_fs *fs;
	int packed, whole = 0;

	populate_packed("pkckenomem.img");
	fs = mount_rw(img, 0);
	for (int i = 0; i < NPK; i++)
		touch_inode(fs, pk_ino[i]);
	pack_enomem_at = 3;
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_int_eq(pack_enomem_at, 0);
	ck_assert(!fs->readonly);
	packed = packed_and_intact(fs, 0);
	for (int i = 0; i < NPK; i++)
		whole += nat_of(fs, pk_ino[i]).packed == 0 && pk_size(i) < 4096;
	ck_assert_int_ge(packed, 2 * (ZLFS_PACK_SLOTS - 1)); /* the two packs before it */
	ck_assert_int_ge(whole, ZLFS_PACK_SLOTS);           /* the rest, whole */
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* Inode VICTIM's NAT entry made to name the slot inode OWNER holds in its pack, OWNER the
 * pack's last live slot (the others moved out by fsyncs): a crafted NAT naming one slot
 * twice. VICTIM's death must not kill OWNER's slot: the pack stays valid (it was marked
 * dead when the death was taken for the slot's owner's). */
START_TEST(t_packed_stray_nat)
{
	struct nat_ent e = packed_tree("pkstray.img", 20), v;
	uint32_t owner = pk_ino[20], victim = pk_ino[NPK - 1];
	struct zlfs_fs *fs;
	char s[160];

	fs = mount_rw(img, 0);
	for (int i = 0; i < NPK; i++) {
		if (pk_ino[i] == owner || nat_of(fs, pk_ino[i]).blkaddr != e.blkaddr)
			continue;
		touch_inode(fs, pk_ino[i]); /* out of the pack, a whole block */
		ck_assert_int_eq(files_fsync(fs, pk_ino[i]), 0);
	}
	v = nat_of(fs, victim);
	ck_assert_uint_ne(v.blkaddr, e.blkaddr);
	ck_assert_int_eq(nat_set_packed(fs, victim, e.blkaddr, e.slot), 0);
	ck_assert_int_eq(files_unmount(fs), 0);

	/* the library, on a copy: VICTIM freed on a fresh mount (no pack met yet) leaves the
	 * pack valid */
	ck_assert_int_eq(tu_sh("cp --sparse=always %s %s.keep", img, img), 0);
	fs = mount_rw(img, 0);
	ck_assert_int_eq(seg_is_valid(fs, e.blkaddr), 1);
	node_free(fs, victim);
	ck_assert_int_eq(seg_is_valid(fs, e.blkaddr), 1);
	ck_assert(same_data(fs, owner, pk_size(20)));
	files_unmount(fs);
	ck_assert_int_eq(tu_sh("mv %s.keep %s", img, img), 0);

	/* fsck: VICTIM is damaged (its slot holds another inode); -y drops only its entry */
	ck_assert_int_eq(fsck("-n", img), 4);
	ck_assert_int_eq(fsck("-y", img), 1);
	snprintf(s, sizeof(s), "inode %u: its NAT entry named slot %u of inode pack %u, which "
		 "holds inode %u; entry dropped", victim, e.slot, e.blkaddr, owner);
	ck_assert_msg(said(s), "expected \"%s\"", s);
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(seg_is_valid(fs, e.blkaddr), 1);
	ck_assert(same_data(fs, owner, pk_size(20)));
	ck_assert_uint_eq(nat_of(fs, owner).blkaddr, e.blkaddr);
	files_unmount(fs);
}
END_TEST

/* Near full, fsyncs of many small inodes each owing only a share of a pack: written whole,
 * each would take a block it never owed, the rest from the GC reserve, until the node log
 * met ENOSPC and the filesystem went read-only. Packed by a checkpoint, then all dirtied,
 * the data log filled to ENOSPC, then each fsync'ed: every fsync succeeds, nothing goes
 * read-only, every file reads back, fsck clean. */
#define NEARFULL_FILES 6000
START_TEST(t_packed_fsync_nearfull)
{
	struct zemu_create_opts o = {.size = 256 << 20, .zone_size = 2 << 20};
	static uint32_t ino[NEARFULL_FILES];
	static uint8_t chunk[64 << 10];
	struct node_page *np;
	struct zlfs_fs *fs;
	uint32_t dir, big;
	uint64_t off = 0;
	char nm[32];
	int ret;

	tu_fresh_fs("pknearfull.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(tu_sh("%s -q -f --packed-inodes %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
			       img), 0);
	fs = mount_rw(img, 0);
	dir = mk(fs, ZLFS_ROOT_INO, "s", 1, 0);
	for (int i = 0; i < NEARFULL_FILES; i++) {
		snprintf(nm, sizeof(nm), "f%04d", i);
		ino[i] = mk(fs, dir, nm, 0, 40);
	}
	big = mk(fs, ZLFS_ROOT_INO, "big", 0, 0);
	ck_assert_int_eq(files_sync(fs), 0); /* packed; none is new to the next fsync */
	ck_assert(nat_of(fs, ino[NEARFULL_FILES / 2]).packed);
	for (int i = 0; i < NEARFULL_FILES; i++)
		touch_inode(fs, ino[i]);
	memset(chunk, 0x5a, sizeof(chunk));
	ck_assert_int_eq(inode_get(fs, big, &np), 0);
	while ((ret = data_write(fs, np, chunk, sizeof(chunk), off)) == (int)sizeof(chunk))
		off += sizeof(chunk);
	node_put(fs, np);
	ck_assert_msg(ret == -ENOSPC || (ret >= 0 && ret < (int)sizeof(chunk)), "fill: %d", ret);
	ck_assert_uint_gt(off, 128u << 20);
	for (int i = 0; i < NEARFULL_FILES; i++)
		ck_assert_msg((ret = files_fsync(fs, ino[i])) == 0, "fsync of file %d: %d", i, ret);
	ck_assert(!fs->readonly);
	for (int i = 0; i < NEARFULL_FILES; i += 97)
		ck_assert(same_data(fs, ino[i], 40));
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* ---- spanning slots (SPAN_SLOTS) ---------------------------------------------------------- */

/* A regular file NAME in DIR kept inline (as the daemon creates one), of LEN bytes: B, or
 * when NULL mk's pattern. */
static uint32_t mk_inline(struct zlfs_fs *fs, uint32_t dir, const char *name, size_t len,
			  const uint8_t *b)
{
	uint32_t ino = mk(fs, dir, name, 0, 0);
	static uint8_t p[4096];
	struct node_page *np;

	for (size_t i = 0; i < len && !b; i++)
		p[i] = pat(ino, i);
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	inline_start(fs, np);
	ck_assert_int_eq(inline_try_write(fs, np, b ? b : p, len, 0), (int)len);
	ck_assert(le32_get(inode_of(np)->flags) & ZLFS_IFLAG_INLINE);
	node_put(fs, np);
	return ino;
}

/* populate_packed with inline files of span_sizes instead (s000...), the others unlinked. */
static void populate_span(const char *name)
{
	struct node_page *d;
	struct zlfs_fs *fs;
	char nm[32];

	populate_packed(name);
	fs = mount_rw(img, 0);
	spanning = 1;
	ck_assert_int_eq(inode_get(fs, pk_dir, &d), 0);
	for (int i = 0; i < NPK; i++) {
		snprintf(nm, sizeof(nm), "f%03d", i);
		ck_assert_int_eq(dir_remove(fs, d, nm, strlen(nm)), 0);
		ck_assert_int_eq(inode_free(fs, pk_ino[i]), 0);
		snprintf(nm, sizeof(nm), "s%03d", i);
		pk_ino[i] = mk_inline(fs, pk_dir, nm, pk_size(i), NULL);
	}
	node_put(fs, d);
	ck_assert_int_eq(files_unmount(fs), 0);
}

/* The positions inode INO's slot takes in its pack (0: not packed). */
static uint32_t positions_of(struct zlfs_fs *fs, uint32_t ino)
{
	struct nat_ent e = nat_of(fs, ino);
	uint8_t *pk;
	uint32_t k;

	if (!e.packed)
		return 0;
	pk = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	ck_assert_int_eq(seg_read(fs, e.blkaddr, pk), 0);
	ck_assert(zlfs_pack_is_slot(pk, e.slot));
	ck_assert_uint_eq(le32_get(((struct zlfs_inode_pack *)pk)->slot[e.slot].nid), ino);
	k = zlfs_pack_span(pk, e.slot);
	zdev_buf_free(pk);
	return k;
}

/* A file of LEN bytes i % 251 + 1 (none zero) named NAME in DIR, its 4 KiB inode into IN. */
static uint32_t mk_dense(struct zlfs_fs *fs, uint32_t dir, const char *name, size_t len,
			 uint8_t *in)
{
	static uint8_t b[4096];
	struct node_page *np;
	uint32_t ino;

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)(i % 251 + 1);
	ino = mk_inline(fs, dir, name, len, b);
	ck_assert_int_eq(inode_get(fs, ino, &np), 0);
	memcpy(in, np->buf, ZLFS_BLOCK_SIZE);
	node_put(fs, np);
	return ino;
}

/* Files of 129, 1,000, 2,000, 3,600 and 3,601 bytes among small ones and one of 1,000 bytes
 * zero past its first 100: after the unmount's checkpoint the first four are spanning slots
 * of 2, 5, 9 and 15 positions, the last a whole block, the zero-tailed one a slot of one;
 * each reads back as the inode it was (every field but the header's versions); SPAN_SLOTS
 * is on (it was not before); fsck is clean; zlfs-dump shows the spans. */
START_TEST(t_span_files)
{
	static const size_t len[] = {129, 1000, 2000, 3600, 3601};
	static const uint32_t want[] = {2, 5, 9, 15, 0};
	static uint8_t in[6][ZLFS_BLOCK_SIZE], back[ZLFS_BLOCK_SIZE], zero[900];
	struct zemu_create_opts o = {.size = 64 << 20, .zone_size = 2 << 20};
	const size_t hdr = sizeof(struct zlfs_blkhdr);
	uint32_t ino[6], small[6], dir, addr;
	struct node_page *np;
	struct zlfs_fs *fs;
	char nm[32];

	tu_fresh_fs("span.img", &o, img, sizeof(img), mnt, sizeof(mnt));
	ck_assert_int_eq(tu_sh("%s -q -f --packed-inodes %s", tu_bin(bin, sizeof(bin), "mkfs.zlfs"),
			       img), 0);
	fs = mount_rw(img, 0);
	ck_assert(!(fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_SPAN_SLOTS)); /* not yet */
	dir = mk(fs, ZLFS_ROOT_INO, "s", 1, 0);
	for (int i = 0; i < 6; i++) {
		snprintf(nm, sizeof(nm), "small%d", i);
		small[i] = mk(fs, dir, nm, 0, 40);
		snprintf(nm, sizeof(nm), "f%d", i);
		ino[i] = mk_dense(fs, dir, nm, i < 5 ? len[i] : 100, in[i]);
	}
	ck_assert_int_eq(inode_get(fs, ino[5], &np), 0); /* 1,000 bytes, zero past 100 */
	ck_assert_int_eq(inline_try_write(fs, np, zero, sizeof(zero), 100), (int)sizeof(zero));
	memcpy(in[5], np->buf, ZLFS_BLOCK_SIZE);
	node_put(fs, np);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);

	fs = mount_rw(img, 1);
	ck_assert(fs->sb.feat_incompat & ZLFS_FEAT_INCOMPAT_SPAN_SLOTS);
	for (int i = 0; i < 6; i++) {
		ck_assert_uint_eq(positions_of(fs, ino[i]), i < 5 ? want[i] : 1);
		ck_assert_uint_eq(positions_of(fs, small[i]), 1);
		ck_assert_int_eq(inode_get(fs, ino[i], &np), 0);
		memcpy(back, np->buf, ZLFS_BLOCK_SIZE);
		node_put(fs, np);
		ck_assert_uint_eq(le64_get(((struct zlfs_inode *)back)->size), i < 5 ? len[i] : 1000);
		/* the header (versions, seq) aside: every field, the inline bytes among them */
		ck_assert_msg(!memcmp(back + hdr, in[i] + hdr, ZLFS_CSUM_OFF - hdr), "file %d", i);
	}
	addr = nat_of(fs, ino[3]).blkaddr;
	files_unmount(fs);
	ck_assert_int_eq(tu_sh("%s --json -b %u %s > %s", tu_bin(bin, sizeof(bin), "zlfs-dump"),
			       addr, img, out), 0);
	ck_assert(said("\"positions\": 15"));
}
END_TEST

/* A tree of spanning slots (populate_span): a third of its files unlinked, the zone of its
 * packs collected by GC: the rest leave it, packed again, read back; the zone is free; the
 * room owed is settled; fsck is clean. */
START_TEST(t_span_unlink_gc)
{
	int spans = 0, whole = 0, moved = 0;
	struct node_page *d;
	struct zlfs_fs *fs;
	uint32_t zone;
	char nm[32];

	populate_span("spangc.img");
	ck_assert_int_eq(fsck("-n", img), 0);
	fs = mount_rw(img, 0);
	for (int i = 0; i < NPK; i++) {
		spans += positions_of(fs, pk_ino[i]) > 1;
		whole += !nat_of(fs, pk_ino[i]).packed;
	}
	ck_assert_int_ge(spans, NPK / 2); /* 5 of the 8 sizes span */
	ck_assert_int_eq(whole, NPK / 8); /* 3,601 bytes */
	ck_assert_int_eq(inode_get(fs, pk_dir, &d), 0);
	for (int i = 1; i < NPK; i += 3) { /* not pk_ino[0]: churn_past_packs follows it */
		snprintf(nm, sizeof(nm), "s%03d", i);
		ck_assert_int_eq(dir_remove(fs, d, nm, strlen(nm)), 0);
		ck_assert_int_eq(inode_free(fs, pk_ino[i]), 0);
	}
	node_put(fs, d);
	ck_assert_int_eq(files_sync(fs), 0);
	zone = churn_past_packs(fs);
	ck_assert_int_eq(gc_migrate_zone(fs, zone), 0);
	ck_assert_int_eq(files_sync(fs), 0);
	ck_assert_uint_eq(seg_owed_blocks(fs), 0);
	ck_assert_int_eq(seg_zone_state(fs, zone), ZONE_FREE);
	for (int i = 0; i < NPK; i++) {
		if (i % 3 == 1)
			continue;
		ck_assert_uint_ne(nat_of(fs, pk_ino[i]).blkaddr / zlfs_zone_blocks(&fs->sb), zone);
		moved += positions_of(fs, pk_ino[i]) > 1;
		ck_assert_msg(same_data(fs, pk_ino[i], pk_size(i)), "file %d", i);
	}
	ck_assert_int_ge(moved, NPK / 3);
	ck_assert_int_eq(files_unmount(fs), 0);
	ck_assert_int_eq(fsck("-n", img), 0);
}
END_TEST

/* npack_group: a pack takes later items of its log that fit its room ({10, 5} twice where
 * taking them in order would write {10}, {10, 5}, {5}); every item goes once, with items of
 * its log only, in dirty-list order; and for random positions the packs of a log never
 * exceed the blocks the units owed (npack_units: 2k - 1 for a span of k) pay for. */
START_TEST(t_span_groups)
{
	static struct npack_item it[2000];
	struct npack_item *grp[ZLFS_PACK_SLOTS];
	static const uint8_t ks[] = {10, 10, 5, 5};
	uint32_t first = 0, k, n, units[2] = {0, 0}, packs[2] = {0, 0}, seen = 0;

	for (n = 0; n < 4; n++)
		it[n] = (struct npack_item){.order = n, .type = ZLFS_LOG_WARM_NODE, .k = ks[n]};
	npack_sort(it, 4);
	ck_assert_uint_eq(npack_group(it, 4, &first, grp), 2);
	ck_assert(grp[0]->order == 0 && grp[1]->order == 2);
	ck_assert_uint_eq(npack_group(it, 4, &first, grp), 2);
	ck_assert(grp[0]->order == 1 && grp[1]->order == 3);
	ck_assert_uint_eq(npack_group(it, 4, &first, grp), 0);

	srandom(7);
	for (n = 0; n < 2000; n++) {
		uint8_t kk = random() % 3 ? 1 + random() % 3 : 1 + random() % ZLFS_PACK_SLOTS;

		it[n] = (struct npack_item){.order = n, .type = (uint8_t)(ZLFS_LOG_HOT_NODE +
							random() % 2), .k = kk};
		units[it[n].type - ZLFS_LOG_HOT_NODE] += kk > 1 ? 2u * kk - 1 : 1;
	}
	npack_sort(it, n);
	for (first = 0; (k = npack_group(it, n, &first, grp));) {
		uint32_t pos = 0;

		for (uint32_t m = 0; m < k; m++) {
			ck_assert_uint_eq(grp[m]->type, grp[0]->type);
			ck_assert(!m || grp[m]->order > grp[m - 1]->order);
			pos += grp[m]->k;
		}
		ck_assert_uint_le(pos, ZLFS_PACK_SLOTS);
		packs[grp[0]->type - ZLFS_LOG_HOT_NODE]++;
		seen += k;
	}
	ck_assert_uint_eq(seen, n);
	for (int t = 0; t < 2; t++)
		ck_assert_msg(packs[t] <= npack_blocks(units[t]), "log %d: %u packs, %u owed", t,
			      packs[t], npack_blocks(units[t]));
}
END_TEST

struct span_edit {
	uint32_t slot;
	int what; /* 0: position 0 marked a continuation; 1: the span's last position zeroed */
};

static void edit_span(uint8_t *b, void *arg)
{
	struct zlfs_inode_pack *pk = (void *)b;
	const struct span_edit *e = arg;

	if (e->what == 0)
		pk->span = le32_put(le32_get(pk->span) | 1u);
	else
		memset(&pk->slot[e->slot + zlfs_pack_span(pk, e->slot) - 1], 0,
		       sizeof(pk->slot[0]));
}

/* Crafted spans, resealed: the pack's inodes are damaged and say why (fsck -n 4), a read
 * fails cleanly (no crash: the test build runs ASan), -y drops them, -n is then clean; and a
 * NAT entry naming a continuation position is refused as such. */
START_TEST(t_span_hostile)
{
	static const char *const says[] = {"marks position 0", "the last all zero"};
	struct node_page *np;
	struct zlfs_fs *fs;
	struct nat_ent e;
	char s[200];

	for (int what = 0; what < 2; what++) {
		struct span_edit ed = {.what = what};

		populate_span(what ? "spanbad1.img" : "spanbad0.img");
		fs = mount_rw(img, 1);
		e = nat_of(fs, pk_ino[1]); /* 1,000 bytes: 5 positions */
		files_unmount(fs);
		ck_assert(e.packed);
		ed.slot = e.slot;
		edit_block(e.blkaddr, ZLFS_KIND_IPACK, edit_span, &ed, 1);
		ck_assert_int_eq(fsck("-n", img), 4);
		snprintf(s, sizeof(s), "inode %u is damaged: inode pack", pk_ino[1]);
		ck_assert_msg(said(s) && said(says[what]), "expected \"%s\" ... \"%s\"", s,
			      says[what]);
		fs = mount_rw(img, 1);
		ck_assert_int_eq(inode_get(fs, pk_ino[1], &np), -EUCLEAN);
		ck_assert(same_data(fs, pk_ino[3], pk_size(3))); /* 15 positions: another pack */
		files_unmount(fs);
		ck_assert_int_eq(fsck("-y", img), 1);
		ck_assert_int_eq(fsck("-n", img), 0);
	}

	/* the NAT names the second position of pk_ino[1]'s span */
	populate_span("spanbadnat.img");
	fs = mount_rw(img, 0);
	e = nat_of(fs, pk_ino[1]);
	ck_assert_uint_eq(positions_of(fs, pk_ino[1]), 5);
	ck_assert_int_eq(nat_set_packed(fs, pk_ino[1], e.blkaddr, e.slot + 1), 0);
	ck_assert_int_eq(files_unmount(fs), 0);
	fs = mount_rw(img, 1);
	ck_assert_int_eq(inode_get(fs, pk_ino[1], &np), -EUCLEAN);
	files_unmount(fs);
	ck_assert_int_eq(fsck("-n", img), 4);
	snprintf(s, sizeof(s), "inode %u is damaged: its slot %u holds nid 0 (a spanning slot's "
		 "continuation)", pk_ino[1], e.slot + 1);
	ck_assert_msg(said(s), "expected \"%s\"", s);
}
END_TEST

int fsck_packed_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_packed_read_enomem;
	t[n++] = t_packed_nat_fail_first;
	t[n++] = t_packed_nat_fail_third;
	t[n++] = t_packed_gc_owed;
	t[n++] = t_packed_gc_unknown_slots;
	t[n++] = t_packed_ckpt_enomem;
	t[n++] = t_packed_stray_nat;
	t[n++] = t_packed_fsync_nearfull;

	t[n++] = t_packed_slot_damaged;
	t[n++] = t_packed_pack_flipped;
	t[n++] = t_packed_gc_zone;
	t[n++] = t_packed_dump;
	t[n++] = t_span_groups;
	t[n++] = t_span_files;
	t[n++] = t_span_unlink_gc;
	t[n++] = t_span_hostile;
	return n;
}
