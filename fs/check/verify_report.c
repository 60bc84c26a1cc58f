/*
 * verify_report.c - the lowest part of the consistency check (verify_int.h): what every other
 * file of fs/check reports through - findings counted by class, the repairs proposed, the
 * progress of the phases - and the NAT and SIT entries as the check reads them (one that
 * cannot be read makes the report incomplete).
 * May call: verify_int.h, core.h, lock.h.
 */
#include "verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void finding(struct chk *c, enum zlfs_finding_class cls, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cls == ZLFS_FIND_DEVICE)
		c->rep->device_errors++;
	else if (cls == ZLFS_FIND_MISMATCH)
		c->rep->mismatches++;
	else
		c->rep->errors++;
	if (c->rep->print)
		c->rep->print(c->rep->print_arg, cls, msg);
}

void propose(struct chk *c, enum zlfs_fix_kind kind, uint32_t a, uint32_t b,
		    const char *name, size_t len)
{
	struct zlfs_check_report *r = c->rep;
	struct zlfs_fix *f;

	if (!r->want_fixes)
		return;
	if (r->nfixes == r->cap_fixes) {
		size_t cap = r->cap_fixes ? r->cap_fixes * 2 : 64;
		struct zlfs_fix *n = realloc(r->fixes, cap * sizeof(*n));

		if (!n) {
			r->incomplete = 1; /* a repair list with holes must not be trusted */
			return;
		}
		r->fixes = n;
		r->cap_fixes = cap;
	}
	f = &r->fixes[r->nfixes++];
	memset(f, 0, sizeof(*f));
	*f = (struct zlfs_fix){.kind = kind, .a = a, .b = b};
	if (name) {
		f->name_len = (uint16_t)(len > ZLFS_NAME_MAX ? ZLFS_NAME_MAX : len);
		memcpy(f->name, name, f->name_len);
	}
}

void progress(struct chk *c, enum zlfs_check_phase ph, uint64_t done, uint64_t total)
{
	if (c->rep->progress)
		c->rep->progress(c->rep->progress_arg, ph, done, total);
}

/* NID's NAT entry; one that cannot be read makes the report incomplete and reads as free. */
struct nat_ent chk_nat(struct chk *c, uint32_t nid)
{
	struct nat_ent e;

	if (nat_get(c->fs, nid, &e))
		c->rep->incomplete = 1;
	return e;
}

/* Segment SEG's SIT entry, as chk_nat. */
struct seg_ent chk_sit(struct chk *c, uint32_t seg)
{
	struct seg_ent e = {0};
	const struct seg_ent *p;

	zlock_lock(&c->fs->seg_lock);
	p = sit_ent_locked(c->fs, seg);
	if (p)
		e = *p;
	zlock_unlock(&c->fs->seg_lock);
	if (!p)
		c->rep->incomplete = 1;
	return e;
}
