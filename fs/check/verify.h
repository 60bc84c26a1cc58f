/*
 * verify.h - the consistency check (verify.c) that fsck.zlfs, the tests and the fuzz target
 * run against a mounted filesystem (read-only, or read-write when fsck repairs).
 *
 * The check only reads. When asked (want_fixes), it also lists the repairs that would make
 * the metadata agree with itself; fsck.zlfs decides which of them its mode allows and applies
 * them through the file layer, then writes a checkpoint (docs/fsck.md).
 */
#ifndef ZLFS_CHECK_H
#define ZLFS_CHECK_H

#include "files.h"

enum zlfs_finding_class {
	ZLFS_FIND_ERROR = 0,  /* the metadata contradicts itself */
	ZLFS_FIND_MISMATCH,   /* checkpoint mismatch: the host is behind, recoverable by mount */
	ZLFS_FIND_DEVICE,     /* device write-pointer error: the device holds less than it should */
};

/* A repair the check proposes. "Safe" ones lose no name and no data: fsck -p applies them;
 * the rest need -y. */
enum zlfs_fix_kind {
	ZLFS_FIX_NLINK = 1,    /* safe: inode A gets link count B (the names found) */
	ZLFS_FIX_PARENT,       /* safe: directory A's ".." becomes B (the directory naming it) */
	ZLFS_FIX_BLOCK_FREE,   /* safe: block A is valid in the SIT but nothing references it */
	ZLFS_FIX_BLOCK_VALID,  /* safe: block A is referenced but free in the SIT */
	ZLFS_FIX_SEG_COUNT,    /* safe: segment A counts its valid blocks wrong; B is right */
	ZLFS_FIX_NODE_FREE,    /* safe: node A is in the NAT but no inode's tree reaches it */
	ZLFS_FIX_ORPHAN_DROP,  /* safe: the orphan list names A, which is not an unlinked inode */
	ZLFS_FIX_PREALLOC_COUNT, /* safe: the filesystem's count of reserved blocks becomes A */
	ZLFS_FIX_NODE_COUNT,   /* safe: the checkpoint's counts of nodes and inodes become A and B
				* (the NAT's) */
	ZLFS_FIX_BLOCK_COUNT,  /* safe: inode A's count of blocks becomes what its pointers hold
				* (B when checked; the repair counts again) */
	ZLFS_FIX_SUMMARY_MOVE, /* safe: data block A's segment summary names another owner than
				* node B's slot that points at it: the block moves (gc_relocate) */
	ZLFS_FIX_DENTRY_DROP,  /* -y: directory A's entry NAME points to B, which does not exist */
	ZLFS_FIX_LOST_FOUND,   /* -y: inode A (DT_* type B) is named nowhere: to /lost+found */
	/* Damage the daemon refuses to use (format_check.c); these lose what it held, as
	 * e2fsck's clearing of an inode does, so only -y applies them: */
	ZLFS_FIX_PTR_CLEAR,    /* -y: node A's pointer at slot B (node_slot's numbering, or
				* ZLFS_FIX_SLOT_XATTR) leads to a damaged or foreign node */
	ZLFS_FIX_NODE_DROP,    /* -y: inode A is damaged and no directory keeps it: its nid is
				* freed (its nodes and blocks follow as unreachable ones) */
	ZLFS_FIX_DIRBLOCK_DROP, /* -y: block B of directory A is damaged: dropped with its names
				 * (the inodes it named go to /lost+found) */
};
#define ZLFS_FIX_SLOT_XATTR UINT32_MAX

struct zlfs_fix {
	enum zlfs_fix_kind kind;
	uint32_t a, b;
	uint16_t name_len;
	char name[ZLFS_NAME_MAX + 1];
};

static inline int zlfs_fix_is_safe(enum zlfs_fix_kind k)
{
	return k != ZLFS_FIX_DENTRY_DROP && k != ZLFS_FIX_LOST_FOUND && k != ZLFS_FIX_PTR_CLEAR &&
	       k != ZLFS_FIX_NODE_DROP && k != ZLFS_FIX_DIRBLOCK_DROP;
}

/* Repairs that remove damage: a round that has them applies only them, since until they are
 * made the rest of the check sees a filesystem that will change (names behind a damaged
 * block look lost, say). */
static inline int zlfs_fix_drops_damage(enum zlfs_fix_kind k)
{
	return k == ZLFS_FIX_PTR_CLEAR || k == ZLFS_FIX_NODE_DROP || k == ZLFS_FIX_DIRBLOCK_DROP;
}

/* Phases the check goes through, for progress reports (-C). */
enum zlfs_check_phase {
	ZLFS_PHASE_ZONES = 1, ZLFS_PHASE_TREE, ZLFS_PHASE_LINKS, ZLFS_PHASE_UNREACHABLE,
	ZLFS_PHASE_SIT, ZLFS_PHASES = ZLFS_PHASE_SIT
};

struct zlfs_check_report {
	void (*print)(void *arg, enum zlfs_finding_class cls, const char *msg);
	void *print_arg;
	/* Called now and then: phase, and how far into it (DONE of TOTAL). May be NULL. */
	void (*progress)(void *arg, enum zlfs_check_phase phase, uint64_t done, uint64_t total);
	void *progress_arg;
	int want_fixes;       /* collect proposed repairs in fixes[] */
	uint64_t errors, mismatches, device_errors;
	uint64_t inodes, dentries, blocks, orphans;
	int incomplete;       /* a node or directory could not be read: the block and node
			       * references are not complete, so nothing may be freed */
	struct zlfs_fix *fixes;
	size_t nfixes, cap_fixes;
};

/* Check FS. 0 when no error or device error was found, 1 otherwise. Release the report's
 * fixes with zlfs_check_report_free. */
int zlfs_check(struct zlfs_fs *fs, struct zlfs_check_report *rep);
void zlfs_check_report_free(struct zlfs_check_report *rep);

#endif
