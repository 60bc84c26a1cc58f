/*
 * verify_run.c - the top of the consistency check (verify.h: zlfs_check): the check's state
 * made and freed, and its phases in order - zones and write pointers (verify_zones.c), the
 * walk from the root (verify_walk.c, checking each inode and directory with verify.c), link
 * counts, what the walk did not reach, reservations, and the SIT against what was referenced.
 * May call: verify_int.h (every file of fs/check).
 */
#include "verify_int.h"

#include <stdlib.h>

static void chk_free(struct chk *c)
{
	free(c->ref);
	free(c->packref);
	free(c->links);
	free(c->parent);
	free(c->subdirs);
	free(c->seen);
	free(c->named_lost);
	free(c->named_enc);
	free(c->nlink);
	free(c->iflags);
	sum_cache_free(c);
}

int zlfs_check(struct zlfs_fs *fs, struct zlfs_check_report *rep)
{
	struct chk c = {.fs = fs, .rep = rep};
	uint32_t n = fs->sb.max_nid;

	c.nblocks = fs->sb.nr_zones * zlfs_zone_blocks(&fs->sb);
	c.ref = calloc(c.nblocks / 8 + 1, 1);
	c.packref = calloc(c.nblocks / 8 + 1, 1);
	c.links = calloc(n, sizeof(*c.links));
	c.parent = calloc(n, sizeof(*c.parent));
	c.subdirs = calloc(n, sizeof(*c.subdirs));
	c.seen = calloc(n, 1);
	c.nlink = calloc(n, sizeof(*c.nlink));
	c.iflags = calloc(n, 1);
	c.named_lost = calloc(n, 1);
	c.named_enc = calloc(n, 1);
	if (c.ref && c.packref && c.links && c.parent && c.subdirs && c.seen && c.named_lost && c.named_enc &&
	    c.nlink && c.iflags) {
		check_zones(&c);
		check_tree(&c);
		progress(&c, ZLFS_PHASE_LINKS, 0, 1);
		check_links(&c);
		progress(&c, ZLFS_PHASE_UNREACHABLE, 0, 1);
		check_unreachable(&c);
		check_prealloc(&c);
		check_sit(&c);
		progress(&c, ZLFS_PHASE_SIT, 1, 1);
	} else {
		finding(&c, ZLFS_FIND_ERROR, "out of memory");
		rep->incomplete = 1;
	}
	chk_free(&c);
	return rep->errors || rep->device_errors ? 1 : 0;
}

void zlfs_check_report_free(struct zlfs_check_report *rep)
{
	free(rep->fixes);
	rep->fixes = NULL;
	rep->nfixes = rep->cap_fixes = 0;
}
