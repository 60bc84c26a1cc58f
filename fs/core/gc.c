/*
 * gc.c - garbage collection: emptying zones whose blocks are mostly dead.
 *
 * Owns: migrating a victim's valid blocks: a data block is copied as it is (ciphertext stays
 * ciphertext) to the destination log gc_policy.c names, keeping its age, and its owner node
 * re-pointed; a node block is rewritten through the node cache, which only moves its NAT
 * entry. Owners come from the segment summaries and are checked against the owner's pointer
 * before anything moves. Which zone, when and how much is gc_policy.c's.
 * May call: gc_policy.c, gc_ahead.c, segment.c, node.c, npack.c (npack_settle), ilock.c,
 * format.h, zdev.h, lock.h, log.h.
 *
 * Locks: one collector at a time (gc_lock, held by the caller); each step holds cp_lock
 * shared. Victim blocks are read with no inode lock, so users are not held off while GC
 * reads; a block is then moved under its owner's inode lock, and only if the owner still
 * points at the block read - a user write to the file in between wins, and GC's copy is
 * simply not used. The victim is pinned while GC works on it, so no checkpoint frees it.
 *
 * A victim is never reset here: once empty it is prefree, becomes free only after the next
 * checkpoint is durable (that checkpoint no longer points into it) and is reset when a log
 * takes it. So a power cut anywhere in a pass loses nothing: before the checkpoint the old
 * copies are the ones the durable checkpoint knows.
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int gc_read_summary(struct zlfs_fs *fs, uint32_t zone, uint32_t seg,
			   struct zlfs_summary *sum)
{
	uint32_t segno = (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + seg;
	uint32_t addr = zlfs_zone_start_blk(&fs->sb, zone) + (seg + 1) * fs->sb.seg_blocks - 1;
	int ret = seg_read(fs, addr, sum);

	if (!ret)
		ret = zlfs_blk_verify(sum, fs->sb.seed, ZLFS_KIND_SUMMARY);
	if (!ret && le32_get(sum->hdr.index) != segno)
		ret = -EUCLEAN;
	if (ret)
		zlog_err("GC: summary of segment %u (block %u) unreadable: %s", segno, addr,
			 strerror(-ret));
	return ret;
}

static le32 *owner_slot(struct node_page *np, uint16_t ofs)
{
	const struct zlfs_blkhdr *h = np->buf;

	if (le16_get(h->kind) == ZLFS_KIND_INODE && ofs < ZLFS_INODE_ADDRS &&
	    !zlfs_iflags_area_inline(le32_get(((struct zlfs_inode *)np->buf)->flags)))
		return &((struct zlfs_inode *)np->buf)->addr[ofs]; /* inline: bytes, no address */
	if (le16_get(h->kind) == ZLFS_KIND_DNODE && ofs < ZLFS_NODE_ADDRS)
		return &((struct zlfs_node *)np->buf)->ptr[ofs];
	return NULL;
}

/* A victim's blocks are read GC_WINDOW at a time, valid or not, rather than one by one:
 * victims are mostly valid, and one 256 KiB read costs a device about what a 4 KiB one does.
 * A window ends at the last valid block before its segment's summary slot, so it never
 * reaches past what was written. The data of a closed zone never changes, so a window stays
 * good while its zone is the victim. */
#define GC_WINDOW 64u

/* W holds ADDR on: the window read ahead if it has it, else read now; either way the window
 * after W is posted to be read meanwhile (gc_ahead.c). */
static int gc_window_fill(struct zlfs_fs *fs, struct gc_window *w, uint32_t addr)
{
	uint32_t next;
	int ret = 0;

	if (!gc_ahead_take(fs, addr, w)) {
		w->start = addr;
		w->n = seg_valid_span(fs, addr, GC_WINDOW);
		ret = seg_read_run(fs, addr, w->n, w->buf);
		ATOMIC_ADD(&fs->gc.bytes_read, (uint64_t)w->n * ZLFS_BLOCK_SIZE);
	}
	if (ret) {
		w->n = 0;
		return ret;
	}
	next = seg_next_valid(fs, w->start + w->n);
	if (next != UINT32_MAX)
		gc_ahead_post(fs, next, seg_valid_span(fs, next, GC_WINDOW));
	return 0;
}

/* The data of block ADDR of the victim, through window W. */
static int gc_block(struct zlfs_fs *fs, struct gc_window *w, uint32_t addr, const uint8_t **data)
{
	int ret = 0;

	if (!w->n || addr < w->start || addr >= w->start + w->n)
		ret = gc_window_fill(fs, w, addr);
	*data = ret ? NULL : w->buf + (size_t)(addr - w->start) * ZLFS_BLOCK_SIZE;
	return ret;
}

/* The owner of node NID locked exclusively, with NID's NAT entry as seen under that lock;
 * NULL when NID is gone (its blocks died with it). */
static struct ilock *gc_lock_owner(struct zlfs_fs *fs, uint32_t nid, struct nat_ent *e)
{
	struct ilock *il;
	uint32_t ino;

	if (nat_get(fs, nid, e) || e->blkaddr == ZLFS_ADDR_NULL)
		return NULL; /* unreadable: read-only now, and nothing is moved */
	/* A nid freed meanwhile is not reused before the next checkpoint, which waits for this
	 * step (cp_lock): after the lock is taken, the entry tells whether it is still ours. */
	ino = e->ino;
	il = ilock_take(fs, ino, 1, LR_ICHILD, ino);
	if (il && (nat_get(fs, nid, e) || e->blkaddr == ZLFS_ADDR_NULL || e->ino != ino)) {
		ilock_drop(fs, il);
		il = NULL;
	}
	return il;
}

/* Append the data of victim block ADDR where policy puts it, with the age it had. */
static int gc_append_moved(struct zlfs_fs *fs, uint32_t addr, const uint8_t *data, uint32_t nid,
			   uint16_t ofs, uint32_t *to)
{
	enum zlfs_log_type dest;
	uint64_t born;
	uint8_t from;
	int ret;

	seg_origin(fs, addr, &born, &from);
	dest = gc_dest_log(fs, from);
	ret = seg_append_born(fs, dest, data, nid, ofs, born, to);
	if (!ret)
		ATOMIC_ADD(&fs->gc.moved_blocks[gc_dest_index(dest)], 1);
	return ret;
}

/* Tries at the owner of one block: each failed one saw a collapse or an insert move it. */
#define GC_OWNER_TRIES 4

/* The owner of block ADDR locked, with its slot in *NID / *OFS: the summary's, or where a
 * fallocate moved the block (remap.c). Moves stay inside their file and happen under its
 * lock, so once that lock is held the table's answer stands. But GC may wait for the lock
 * while a collapse moves the block out of the node the summary names and frees that node
 * (the end of the file shrank): the node is then gone and the block alive elsewhere, which
 * is no damage, so the table is asked again. NULL when the owner cannot be had. */
static struct ilock *gc_lock_block_owner(struct zlfs_fs *fs, uint32_t addr, uint32_t *nid,
					 uint16_t *ofs)
{
	const uint32_t sum_nid = *nid;
	const uint16_t sum_ofs = *ofs;
	struct ilock *il = NULL;
	struct nat_ent e;

	for (int i = 0; !il && i < GC_OWNER_TRIES && seg_is_valid(fs, addr); i++) {
		*nid = sum_nid;
		*ofs = sum_ofs;
		remap_find(fs, addr, nid, ofs);
		il = gc_lock_owner(fs, *nid, &e);
	}
	if (il && !seg_is_valid(fs, addr)) { /* died while GC waited: nothing to move */
		ilock_drop(fs, il);
		il = NULL;
	}
	if (il) {
		*nid = sum_nid;
		*ofs = sum_ofs;
		remap_find(fs, addr, nid, ofs);
	}
	return il;
}

/* The slot of node NP that points at ADDR: *OFS, the one its summary entry names, or else
 * another (*OFS set to it): the summary is GC's hint, the owner's pointer decides. NULL when
 * no slot of NP points there. */
static le32 *owner_slot_of(struct node_page *np, uint32_t addr, uint16_t *ofs)
{
	le32 *slot = owner_slot(np, *ofs);

	if (slot && le32_get(*slot) == addr)
		return slot;
	for (uint16_t i = 0; (slot = owner_slot(np, i)); i++)
		if (le32_get(*slot) == addr) {
			*ofs = i;
			return slot;
		}
	return NULL;
}

/* Move one data block at ADDR owned by slot OFS of node NID, whose contents are DATA. */
static int gc_move_data(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs,
			const uint8_t *data)
{
	struct node_page *np;
	struct ilock *il;
	uint16_t sum_ofs;
	uint32_t to;
	le32 *slot;
	int ret;

	il = gc_lock_block_owner(fs, addr, &nid, &ofs);
	if (!il)
		return seg_is_valid(fs, addr) ? -EUCLEAN : 0;
	ret = node_get(fs, nid, &np);
	if (ret) {
		ilock_drop(fs, il);
		return ret;
	}
	sum_ofs = ofs;
	slot = owner_slot_of(np, addr, &ofs);
	if (slot && ofs != sum_ofs) /* moved with the slot that owns it: its new entry is right */
		zlog_warn("GC: block %u: its summary names node %u slot %u, but slot %u points to "
			  "it; moved as slot %u's (fsck.zlfs reports such an entry)", addr, nid,
			  sum_ofs, ofs, ofs);
	if (!slot) {
		/* rewritten or dropped since the window was read: the user's write stands */
		ret = seg_is_valid(fs, addr) ? -EUCLEAN : 0;
		if (ret)
			zlog_err("GC: block %u is valid but node %u slot %u does not point to it",
				 addr, nid, ofs);
	} else {
		ret = gc_append_moved(fs, addr, data, nid, ofs, &to);
		if (!ret) {
			seg_mark(fs, addr, 0);
			*slot = le32_put(to);
			node_dirty(fs, np);
			ATOMIC_ADD(&fs->gc_bytes, ZLFS_BLOCK_SIZE);
		}
	}
	node_put(fs, np);
	ilock_drop(fs, il);
	return ret;
}

int gc_relocate(struct zlfs_fs *fs, uint32_t addr, uint32_t nid)
{
	struct node_page *np;
	struct ilock *il = NULL;
	struct nat_ent e;
	uint16_t ofs = 0;
	uint8_t *data;
	uint32_t to;
	le32 *slot;
	int ret;

	if (!seg_is_valid(fs, addr) || nid == ZLFS_NID_NULL || nid >= fs->sb.max_nid)
		return -ENODATA;
	data = zdev_buf_alloc(ZLFS_BLOCK_SIZE);
	if (!data)
		return -ENOMEM;
	zrw_rdlock(&fs->cp_lock);
	ret = seg_read(fs, addr, data);
	if (!ret && !(il = gc_lock_owner(fs, nid, &e)))
		ret = -ENODATA;
	if (!ret && !(ret = node_get(fs, nid, &np))) {
		slot = owner_slot_of(np, addr, &ofs);
		ret = slot ? gc_append_moved(fs, addr, data, nid, ofs, &to) : -ENODATA;
		if (!ret) {
			seg_mark(fs, addr, 0);
			*slot = le32_put(to);
			node_dirty(fs, np);
		}
		node_put(fs, np);
	}
	if (il)
		ilock_drop(fs, il);
	zrw_unlock(&fs->cp_lock);
	zdev_buf_free(data);
	return ret;
}

/* E names the copy of a node at ADDR: the whole block (SLOT < 0) or slot SLOT of the pack. */
static int nat_names(const struct nat_ent *e, uint32_t addr, int slot)
{
	return e->blkaddr == addr && (slot < 0 ? !e->packed : e->packed && e->slot == slot);
}

/* A node block (SLOT < 0) or an inode in slot SLOT of the pack at ADDR moves by being
 * written again (at the next checkpoint); only its NAT entry changes. 1 if it was moved,
 * 0 if that copy is no longer the node's. */
static int gc_move_node(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, int slot)
{
	struct node_page *np;
	struct nat_ent e;
	struct ilock *il;
	int ret;

	if (nid >= fs->sb.max_nid)
		return 0;
	ret = nat_get(fs, nid, &e);
	if (ret || !nat_names(&e, addr, slot))
		return ret; /* a newer copy exists: this one died when it was written */
	il = gc_lock_owner(fs, nid, &e);
	if (!il || !nat_names(&e, addr, slot)) {
		ilock_drop(fs, il);
		return 0;
	}
	ret = node_get(fs, nid, &np);
	if (!ret) {
		node_dirty(fs, np);
		node_put(fs, np);
	}
	ilock_drop(fs, il);
	return ret ? ret : 1;
}

/* Move the inodes of the pack at ADDR that still live there: each slot the NAT names. */
static int gc_move_pack(struct zlfs_fs *fs, uint32_t addr, struct gc_window *w)
{
	const struct zlfs_inode_pack *pk;
	const uint8_t *data;
	char why[200];
	int ret = gc_block(fs, w, addr, &data), moved = 0;

	if (ret)
		return ret;
	pk = (const void *)data;
	if (zlfs_blk_verify(pk, fs->sb.seed, ZLFS_KIND_IPACK) ||
	    zlfs_pack_check_head(&fs->sb, pk, why, sizeof(why))) {
		if (!seg_is_valid(fs, addr))
			return 0;
		zlog_err("GC: the inode pack at block %u is damaged: run fsck.zlfs", addr);
		return -EUCLEAN;
	}
	for (uint32_t i = 0; ret >= 0 && i < le32_get(pk->nr_slots); i++) {
		if (!zlfs_pack_is_slot(pk, i)) /* a spanning slot's continuation */
			continue;
		ret = gc_move_node(fs, addr, le32_get(pk->slot[i].nid), (int)i);
		moved |= ret > 0;
	}
	if (moved && ret >= 0) /* the slots moved go out packed again: one block */
		ATOMIC_ADD(&fs->gc_bytes, ZLFS_BLOCK_SIZE);
	/* none named, still valid: its live slots were never worked out (logged then); else the
	 * zone would never empty and be picked again each round */
	if (!moved && ret >= 0 && seg_is_valid(fs, addr))
		return npack_settle(fs, addr);
	return ret < 0 ? ret : 0;
}

/* Move the valid block ADDR of the victim, whose summary entry is NID/OFS. */
static int gc_move(struct zlfs_fs *fs, uint32_t addr, uint32_t nid, uint16_t ofs,
		   struct gc_window *w)
{
	const uint8_t *data;
	int ret;

	if (ofs == ZLFS_SUM_NODE) {
		ret = gc_move_node(fs, addr, nid, -1);
		if (ret > 0)
			ATOMIC_ADD(&fs->gc_bytes, ZLFS_BLOCK_SIZE);
		return ret < 0 ? ret : 0;
	}
	if (ofs == ZLFS_SUM_PACK)
		return gc_move_pack(fs, addr, w);
	ret = gc_block(fs, w, addr, &data); /* read before the owner is locked */
	return ret ? ret : gc_move_data(fs, addr, nid, ofs, data);
}

/* Move valid blocks of the victim from the cursor on, at most BUDGET of them. */
static int gc_step_blocks(struct zlfs_fs *fs, uint32_t budget)
{
	struct zlfs_summary *sum = fs->gc.sum;
	uint32_t zone = fs->gc.victim, seg_blocks = fs->sb.seg_blocks, moved = 0;
	uint32_t end = fs->sb.segs_per_zone * seg_blocks;
	int ret = 0;

	while (!ret && moved < budget && fs->gc.cursor < end) {
		uint32_t seg = fs->gc.cursor / seg_blocks, b = fs->gc.cursor % seg_blocks;
		uint32_t segno = (zone - fs->sb.main_zone_first) * fs->sb.segs_per_zone + seg;
		uint32_t addr = zlfs_zone_start_blk(&fs->sb, zone) + fs->gc.cursor;

		fs->gc.cursor++;
		if (b + 1 == seg_blocks || !seg_is_valid(fs, addr))
			continue;
		if (fs->gc.sum_segno != segno) { /* written once when the segment closed */
			ret = gc_read_summary(fs, zone, seg, sum);
			if (ret)
				break;
			fs->gc.sum_segno = segno;
		}
		ret = gc_move(fs, addr, le32_get(sum->nid[b]), le16_get(sum->ofs[b]), &fs->gc.win);
		moved++;
	}
	return ret ? ret : (int)moved;
}

/* Make ZONE the victim, pinned, with its cursor at the start. */
static void gc_take_victim(struct zlfs_fs *fs, uint32_t zone)
{
	fs->gc.victim = zone;
	fs->gc.has_victim = 1;
	fs->gc.cursor = 0;
	fs->gc.sum_segno = UINT32_MAX; /* a zone reused since may carry the same numbers */
	fs->gc.win.n = 0;
	gc_ahead_forget(fs); /* read for another victim, or this zone before a reset */
	seg_pin(fs, zone);
}

/* The victim is done (or dropped): unpin it; the next checkpoint writes its moved nodes,
 * which leaves it empty and free. */
static void gc_drop_victim(struct zlfs_fs *fs, int emptied)
{
	fs->gc.has_victim = 0;
	gc_ahead_forget(fs); /* no read of the zone may be under way once it is unpinned */
	seg_pin(fs, ZLFS_ZONE_NONE);
	if (emptied)
		ATOMIC_ADD(&fs->gc_zones, 1);
}

static int gc_buffers(struct zlfs_fs *fs)
{
	if (!fs->gc.sum) {
		fs->gc.sum = zdev_buf_alloc(sizeof(*fs->gc.sum));
		fs->gc.sum_segno = UINT32_MAX;
	}
	if (!fs->gc.win.buf) { /* apart: one failed allocation must not stick for the mount */
		fs->gc.win.buf = zdev_buf_alloc((size_t)GC_WINDOW * ZLFS_BLOCK_SIZE);
		fs->gc.win.n = 0;
	}
	if (!fs->gc.sum || !fs->gc.win.buf)
		return -ENOMEM;
	/* without the helper (no memory, no thread), GC reads each window itself */
	gc_ahead_start(fs, (size_t)GC_WINDOW * ZLFS_BLOCK_SIZE);
	return 0;
}

/* Up to BUDGET blocks of the current victim, under cp_lock shared: blocks moved, or 0 when
 * the victim is done. */
static int gc_victim_step(struct zlfs_fs *fs, uint32_t budget)
{
	int ret;

	zrw_rdlock(&fs->cp_lock);
	ret = gc_buffers(fs);
	if (!ret)
		ret = gc_step_blocks(fs, budget);
	zrw_unlock(&fs->cp_lock);
	if (ret == -EUCLEAN && !ATOMIC_GET(&fs->readonly)) {
		/* A summary, a SIT bit or an owner that contradict each other: moving more would
		 * build on them, and the next pass would pick the same victim again. */
		zlog_err("GC met damaged metadata in zone %u; filesystem switched to read-only: "
			 "run fsck.zlfs", fs->gc.victim);
		ATOMIC_SET(&fs->readonly, 1);
	}
	if (ret < 0)
		gc_drop_victim(fs, 0);
	else if (!ret || fs->gc.cursor >= fs->sb.segs_per_zone * fs->sb.seg_blocks)
		gc_drop_victim(fs, 1);
	return ret;
}

int gc_migrate_zone(struct zlfs_fs *fs, uint32_t zone)
{
	int ret;

	gc_take_victim(fs, zone);
	while ((ret = gc_victim_step(fs, UINT32_MAX)) > 0 && fs->gc.has_victim)
		;
	return ret < 0 ? ret : 0;
}

int gc_reclaim(struct zlfs_fs *fs, uint32_t want_free, enum gc_pick pick, uint32_t max_zones)
{
	uint32_t zone, done = 0;
	int ret;

	for (;;) {
		/* Reservations are taken space (gc_policy.c); a victim emptied in this pass is
		 * prefree already (the caller's checkpoint frees it): counted once, not twice. */
		if (gc_free_zones(fs) + seg_prefree_zones(fs) >= want_free || done >= max_zones)
			return (int)done;
		if (fs->gc.has_victim && seg_zone_state(fs, fs->gc.victim) == ZONE_USED) {
			zone = fs->gc.victim; /* partly moved already: the cheapest to finish */
		} else {
			ret = gc_pick_victim(fs, pick, &zone);
			if (ret)
				return done ? (int)done : ret;
			/* With fewer zones left a pass could spend the last ones and leave
			 * nothing to write the checkpoint that frees its victim with. */
			if (!gc_can_finish(fs, zone))
				return done ? (int)done : -ENOSPC;
		}
		ret = gc_migrate_zone(fs, zone);
		if (ret)
			return ret;
		done++;
	}
}

int gc_step(struct zlfs_fs *fs, enum gc_pick pick, uint32_t budget)
{
	int ret;

	if (fs->gc.has_victim && seg_zone_state(fs, fs->gc.victim) != ZONE_USED)
		gc_drop_victim(fs, 0); /* emptied meanwhile by foreground GC or deletes */
	if (!fs->gc.has_victim) {
		uint32_t zone;

		ret = gc_pick_victim(fs, pick, &zone);
		/* A cost-benefit victim may be too full to finish with the zones left, where the
		 * emptiest zone is not: take that rather than stall until a write meets ENOSPC. */
		if (!ret && pick == GC_PICK_FOREGROUND && !gc_can_finish(fs, zone))
			ret = gc_pick_victim(fs, GC_PICK_EMERGENCY, &zone);
		if (ret)
			return ret;
		if (!gc_can_finish(fs, zone))
			return -ENOSPC; /* a victim is started only with the zones to finish it */
		gc_take_victim(fs, zone);
	}
	return gc_victim_step(fs, budget);
}
