/*
 * test_crash_packed.c - the workload test_crash cuts power in on inode packs (mkfs
 * --packed-inodes; docs/design.md, "Packed inodes"): small files whose inodes a checkpoint
 * packs, others fsync'ed over and over (each fsync writes its inode as a whole block) until
 * the node zone holding the packs is closed and mostly dead, GC of that zone (the live slots
 * of its packs moved, packed again by the checkpoint that follows), then fsyncs and unlinks of
 * the files GC moved. It notes in the model (crash_testutil.h) what every fsync and sync made
 * durable; and spanning slots (SPAN_SLOTS), packed, changed and packed again (workload_span).
 * Part of test_crash (test_crash.c).
 */
#include "crash_testutil.h"

#include <stdio.h>

#define NKEPT 120  /* files packed once and left alone until GC moves them */
#define NCHURN 50  /* files rewritten and fsync'ed ... */
#define ROUNDS 12  /* ... this many times each: more whole blocks than a 2 MiB zone holds */

static void kept_name(char *rel, size_t n, int i)
{
	snprintf(rel, n, "%s%03d", i % 3 ? "p/" : "k", i);
}

/* File REL rewritten with SIZE bytes of SEED and fsync'ed: a stage. */
static void rewrite_fsync(const char *rel, uint32_t seed, size_t size)
{
	struct stage *s;

	write_file(rel, seed, size, 0, 1);
	s = stage_next();
	stage_take(s, rel);
	stage_seal(s);
}

static void sync_stage(int focus)
{
	struct stage *s;

	if (focus)
		focus_begin();
	ctl_sync();
	if (focus)
		focus_end();
	s = stage_next();
	stage_take_all(s);
	stage_seal(s);
}

void workload_packed(void)
{
	char rel[32];
	int i, r;

	mkdir_path("p");
	mkdir_path("c");
	for (i = 0; i < NKEPT; i++) { /* inline bytes, every fourth one a few blocks */
		kept_name(rel, sizeof(rel), i);
		write_file(rel, 1000 + (uint32_t)i, i % 4 ? 40 + (size_t)i * 11 : 5000 + (size_t)i * 90,
			   0, 0);
	}
	for (i = 0; i < NCHURN; i++) {
		snprintf(rel, sizeof(rel), "c/%02d", i);
		write_file(rel, 1500 + (uint32_t)i, 20, 0, 0);
	}
	sync_stage(1); /* the checkpoint packs every inode: every operation a crash point */
	for (r = 0; r < ROUNDS; r++) { /* whole blocks; the churn files' slots die */
		struct stage *s;

		for (i = 0; i < NCHURN; i++) {
			snprintf(rel, sizeof(rel), "c/%02d", i);
			write_file(rel, 2000 + (uint32_t)(r * 100 + i), 30 + (size_t)(r + i) % 90, 0,
				   1);
		}
		s = stage_next(); /* a stage a round: each file is checked against every state it
				   * had since (the model's history) */
		for (i = 0; i < NCHURN; i++) {
			snprintf(rel, sizeof(rel), "c/%02d", i);
			stage_take(s, rel);
		}
		stage_seal(s);
	}
	focus_begin(); /* the packs' zone collected, their live slots packed again */
	ck_assert_uint_gt(gc_now(4), 0);
	focus_end();
	sync_stage(0);
	for (i = 0; i < NKEPT; i += 7) { /* inodes GC moved, fsync'ed out of their new packs */
		kept_name(rel, sizeof(rel), i);
		rewrite_fsync(rel, 3000 + (uint32_t)i, i % 2 ? 90 : 7000);
	}
	for (i = 3; i < NKEPT; i += 11) {
		kept_name(rel, sizeof(rel), i);
		unlink_path(rel);
	}
	sync_stage(1);
}

/* ---- spanning slots (SPAN_SLOTS) ---------------------------------------------------------- */

#define NSPAN 40
/* inline files of 1, 2, 5, 9 and 15 positions, one a byte too big for a pack, 2 and 4 */
static const size_t span_len[8] = {40, 129, 1000, 2000, 3600, 3601, 300, 700};

/* Inline files a checkpoint packs over several positions each, among small ones: the first
 * such checkpoint turns SPAN_SLOTS on (the superblock before its packs). Then some grown
 * across spans or out of any pack, shrunk to one position, rewritten and fsync'ed (a whole
 * block: their spans die), unlinked, and packed again by a second checkpoint. Both
 * checkpoints every operation a crash point; every flush boundary too (test_crash.c). */
void workload_span(void)
{
	char rel[32];
	int i;

	mkdir_path("s");
	for (i = 0; i < NSPAN; i++) {
		snprintf(rel, sizeof(rel), "s/%02d", i);
		write_file(rel, 4000 + (uint32_t)i, span_len[i % 8], 0, 0);
	}
	sync_stage(1);
	for (i = 0; i < NSPAN; i++) {
		snprintf(rel, sizeof(rel), "s/%02d", i);
		if (i % 5 == 0) /* grown: to the next size up, or past the area */
			write_file(rel, 4100 + (uint32_t)i, span_len[i % 8] + 900, 0, 0);
		else if (i % 5 == 1) /* shrunk into one position */
			truncate_file(rel, 100);
		else if (i % 5 == 2)
			rewrite_fsync(rel, 4200 + (uint32_t)i, span_len[(i + 3) % 8]);
		else if (i % 10 == 3)
			unlink_path(rel);
	}
	sync_stage(1);
}
