/*
 * gc_policy.c - garbage-collection policy: when to collect, how much, which zone, and where
 * moved data goes. The migration itself is gc.c's.
 *
 * Owns: the free-zone levels (foreground level, the background target that pacing keeps
 * free zones near), the phases they give, the pace of writing that the target follows and
 * the debt pacing counts, victim choice (cost-benefit with age; greedy only in emergencies;
 * background GC only takes zones below the valid-ratio threshold), whether the free zones
 * can finish a victim, the garbage statfs counts as free, and the destination log of moved
 * data (moved once, moved more often, or out of the hot log and back into it).
 * docs/design.md, "Garbage collection", gives the figures behind each choice.
 * May call: segment.c (zones, reserve, owed room, under seg_lock where it says so), super.h,
 * lock.h, log.h. Called by gc.c, the background worker, stats and the FUSE layer.
 *
 * Locks: the levels and the phase are asked by every request, so they read only atomics
 * (free zones, owed blocks, the published pace); scans of zones and segments take seg_lock;
 * the pacing debt and fold_hot are the collector's (gc_lock).
 */
#include "core.h"
#include "log.h"

#include <errno.h>
#include <math.h>
#include <time.h>

/* ---- levels ------------------------------------------------------------------------------ */

/* A phase is left only with some margin past its level, and only once the level has stayed
 * past that margin for GC_PHASE_HOLD_MS (core.h), so that a filesystem hovering at a level
 * does not flap. The margin alone did not do it: under RocksDB the boosted phase collects up
 * to two zones past the target, leaves, and a second of writing brings it back (939 changes
 * in 25 minutes), and compactions that delete their inputs lift the level for seconds at a
 * time. Entering a phase is not delayed: the level falling is space running out, and a late
 * start is paid by writers at the foreground level. The work in a held phase follows the
 * level (gc_phase_work). docs/design.md, "Levels and phases". */
#define GC_HYST_ZONES 2
#define GC_HYST_PCT 5

/* The pacing margin: free zones kept above the foreground level for the zones user data takes
 * in GC_PACE_HORIZON_MS at the measured pace, at least GC_PACE_MIN_ZONES, at most
 * 1/GC_PACE_MAX_SHARE of the main area. */
#define GC_PACE_HORIZON_MS 1000
#define GC_PACE_MIN_ZONES 2
#define GC_PACE_MAX_SHARE 16
#define GC_PACE_SAMPLE_MS 250

static uint32_t usable_zones(struct zlfs_fs *fs)
{
	return fs->sb.main_zones - ATOMIC_GET(&fs->retired_zones);
}

/* Foreground collection starts when user data is down to its last zone beyond the reserve
 * and what changed metadata owes (counted per log, as if no log had room left: without a
 * lock, and never less than the exact figure). The reserve already holds what a pass needs
 * (and nodes may use it), so no zone per log is added on top: on a small device that was a
 * large share of it, kept free for nothing. */
uint32_t gc_fg_level(struct zlfs_fs *fs)
{
	uint32_t need = zlfs_gc_zones_needed(fs->sb.nr_logs) + 1;
	uint32_t lvl = seg_reserve(fs) + seg_owed_zones_bound(fs) + 1;

	return lvl > need ? lvl : need;
}

/* The free zones background GC keeps in hand: the foreground level plus what users write
 * meanwhile at their pace (cleaning further ahead only moves data that would have died).
 * gc_low, when given, asks for the old watermark instead: clean ahead up to gc_low%. */
static uint32_t target_above(struct zlfs_fs *fs, uint32_t fg)
{
	uint32_t cap = fs->sb.main_zones / GC_PACE_MAX_SHARE, margin;

	if (fs->gc.o.low_pct) {
		uint32_t wm = (uint32_t)((uint64_t)usable_zones(fs) * fs->gc.o.low_pct / 100);

		return wm > fg + GC_HYST_ZONES ? wm : fg + GC_HYST_ZONES;
	}
	/* zones taken in the horizon, rounded up; the pace is kept in thousandths of a zone */
	margin = (uint32_t)(((uint64_t)ATOMIC_GET(&fs->gc.pace_mzps) * GC_PACE_HORIZON_MS / 1000 +
			     999) / 1000);
	if (margin > cap)
		margin = cap;
	if (margin < GC_PACE_MIN_ZONES)
		margin = GC_PACE_MIN_ZONES;
	return fg + margin;
}

uint32_t gc_target_free(struct zlfs_fs *fs)
{
	return target_above(fs, gc_fg_level(fs));
}

/* The pace of writing: zones the user data log took per second, smoothed. The background
 * worker samples it; requests read it (gc_target_free). */
void gc_pace_sample(struct zlfs_fs *fs)
{
	struct gc_state *g = &fs->gc;
	uint64_t taken = ATOMIC_GET(&fs->data_zones_taken), now = mono_ns(), dt;
	double inst;

	dt = now - g->pace_t_ns;
	if (g->pace_t_ns && dt < GC_PACE_SAMPLE_MS * 1000000ULL)
		return;
	if (g->pace_t_ns) {
		inst = (double)(taken - g->pace_zones) * 1e9 / (double)dt;
		g->pace_zps = 0.7 * g->pace_zps + 0.3 * inst;
		ATOMIC_SET(&g->pace_mzps, (uint32_t)(g->pace_zps * 1000.0));
	}
	g->pace_t_ns = now;
	g->pace_zones = taken;
}

/* A reservation is space promised, as good as valid data: the free zones it will take are
 * not free to the levels, so GC starts collecting while dead space can still make up for
 * them. Counting only free zones, RocksDB's reservations (a 64 MiB file preallocated at a
 * time) took the room of 15 of 33 free zones on 16 GiB: every write met ENOSPC while GC,
 * seeing 33 free, never woke with 209 zones partly dead. */
uint32_t gc_free_zones(struct zlfs_fs *fs)
{
	uint32_t free_zones = seg_free_zones(fs), held = seg_prealloc_zones(fs);

	return free_zones > held ? free_zones - held : 0;
}

uint64_t gc_free_blocks(struct zlfs_fs *fs)
{
	return seg_free_blocks_plus(fs, gc_reclaimable_blocks(fs));
}

int gc_urgent(struct zlfs_fs *fs)
{
	return !ATOMIC_GET(&fs->readonly) && gc_free_zones(fs) <= gc_fg_level(fs);
}

/* Every phase change is kept (the last GC_LOG_MAX, for zlfs-ctl stats) and counted; the log
 * has it at the debug level only, as the counts and the kept changes tell an operator. */
static void gc_phase_log(struct zlfs_fs *fs, enum gc_phase p, uint32_t free_zones)
{
	uint32_t i = fs->gc.nlog++ % GC_LOG_MAX;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	fs->gc.log[i].time_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	fs->gc.log[i].from = (uint8_t)fs->gc.phase;
	fs->gc.log[i].to = (uint8_t)p;
	fs->gc.log[i].free_zones = free_zones;
	zlog_debug("GC phase %s -> %s (%u of %u zones free, reservations counted as taken)",
		   gc_phase_name(fs->gc.phase), gc_phase_name(p), free_zones, fs->sb.main_zones);
}

/* The phase the level calls for, with the margins: CUR is the phase now. */
static enum gc_phase phase_called(struct zlfs_fs *fs, enum gc_phase cur, uint32_t free_zones)
{
	uint32_t usable = usable_zones(fs), fg = gc_fg_level(fs), target = gc_target_free(fs);
	uint64_t pct = usable ? (uint64_t)free_zones * 100 / usable : 0;
	enum gc_phase p = GC_NONE;

	/* Foreground is left one zone above its level: between it and the target, background GC
	 * is at work, which the boosted phase names. */
	if ((!ATOMIC_GET(&fs->readonly) && free_zones <= fg) ||
	    (cur == GC_FOREGROUND && free_zones <= fg + 1))
		p = GC_FOREGROUND;
	else if (free_zones < target || (cur >= GC_BOOSTED && free_zones < target + GC_HYST_ZONES))
		p = GC_BOOSTED;
	else if (pct < fs->gc.o.high_pct || (cur >= GC_NORMAL && pct < fs->gc.o.high_pct + GC_HYST_PCT))
		p = GC_NORMAL;
	return p;
}

/* A lower phase is taken once the level has called for one at every look for the hold time
 * (calm_since: the first look that did, 0 while none does); a higher one at once. */
enum gc_phase gc_phase_update_at(struct zlfs_fs *fs, uint64_t now_ns)
{
	struct gc_state *g = &fs->gc;
	uint32_t free_zones = gc_free_zones(fs);
	enum gc_phase cur = ATOMIC_GET(&g->phase), p = phase_called(fs, cur, free_zones);
	uint64_t since = ATOMIC_GET(&g->calm_since_ns);

	if (p >= cur && since)
		ATOMIC_SET(&g->calm_since_ns, 0);
	if (p == cur) /* every request asks: only a change takes the lock */
		return p;
	if (p < cur) {
		if (!since) { /* the first look: one of the racing requests sets it */
			__atomic_compare_exchange_n(&g->calm_since_ns, &since, now_ns ? now_ns : 1,
						    0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
			return cur;
		}
		if (now_ns < since || now_ns - since < GC_PHASE_HOLD_MS * 1000000ULL)
			return cur;
	}
	zlock_lock(&fs->stats_lock);
	if (p != g->phase) {
		gc_phase_log(fs, p, free_zones);
		ATOMIC_SET(&g->phase, p);
		ATOMIC_SET(&g->calm_since_ns, 0);
	}
	zlock_unlock(&fs->stats_lock);
	return p;
}

enum gc_phase gc_phase_update(struct zlfs_fs *fs) { return gc_phase_update_at(fs, mono_ns()); }

/* A phase held past its exit does what the level calls for: the hold steadies the phase
 * users see and the log, while the work follows the level with its margins as it did, so
 * idle time is still used for collection the moment the level calls for normal (a held
 * boosted phase moves nothing there). */
enum gc_phase gc_phase_work(struct zlfs_fs *fs, enum gc_phase held)
{
	enum gc_phase p = phase_called(fs, held, gc_free_zones(fs));

	return p < held ? p : held;
}

/* ---- pacing ------------------------------------------------------------------------------ */

/* A background step moves at least GC_STEP_MIN blocks and at most GC_STEP_MAX. */
#define GC_STEP_MIN 32
#define GC_STEP_MAX 1024

/* Pacing: each block users write while GC is behind its target costs u/(1-u) moved blocks at
 * a victim of utilisation u. That debt is what background GC owes them; between debts it
 * stands aside while users wait, unless it is more than a zone short of the target, where it
 * catches up, moving twice as much per zone short, before the foreground level makes writers
 * pay installments. Called with gc_lock held. */
void gc_pace_owe(struct zlfs_fs *fs, enum gc_phase phase)
{
	struct gc_state *g = &fs->gc;
	uint64_t ub = ATOMIC_GET(&fs->user_bytes) / ZLFS_BLOCK_SIZE;
	uint32_t usable = seg_usable_per_zone(fs);
	double ratio = 1.0;

	if (g->has_victim) {
		uint32_t v = seg_zone_valid(fs, g->victim);

		ratio = v < usable ? (double)v / (usable - v) : (double)usable;
	}
	if (phase < GC_BOOSTED)
		g->pace_debt = 0;
	else if (ub > g->pace_user_blocks)
		g->pace_debt += (double)(ub - g->pace_user_blocks) * ratio;
	g->pace_user_blocks = ub;
}

/* How long after a user's read, and after a bulk read or write, background GC still leaves
 * the device to them: longer than the gap between two requests of one stream (a round trip,
 * and for bulk ones the time the user takes with a MiB), and for small reads short enough
 * that a reader of a few hundred requests a second holds GC off a fraction of the time. */
#define GC_READ_QUIET_MS 1
#define GC_BULK_QUIET_MS 5

/* Whether THEN is less than MS before NOW; a stamp taken after NOW was read is recent too. */
static int recent(uint64_t now, uint64_t then, uint64_t ms)
{
	return then >= now || now - then < ms * 1000000ULL;
}

int gc_users_io(struct zlfs_fs *fs)
{
	uint64_t now = mono_ns();
	int io = 0;

	if (ATOMIC_GET(&fs->users_reading) > 0 ||
	    recent(now, ATOMIC_GET(&fs->last_read_ns), GC_READ_QUIET_MS) ||
	    recent(now, ATOMIC_GET(&fs->last_bulk_read_ns), GC_BULK_QUIET_MS))
		io |= GC_USERS_READING;
	if (ATOMIC_GET(&fs->users_bulk_writing) > 0 ||
	    recent(now, ATOMIC_GET(&fs->last_bulk_write_ns), GC_BULK_QUIET_MS))
		io |= GC_USERS_BULK_WRITING;
	return io;
}

/* While users read, or write in bulk (USERS_IO), GC's debt waits, and is paid in the requests
 * around them (small writes, metadata, pauses), where its traffic costs users little:
 * - for reads while free zones are above the foreground level: reads take no room, so
 *   waiting for them costs only time. At the foreground level it does not wait, as F2FS's
 *   background GC does not once writers wait for foreground GC: an installment (at most
 *   gc_fg_budget blocks a request) falls behind a write's debt where victims are mostly
 *   valid, and the free zones would run on down to a request's whole foreground pass;
 * - for bulk writes only within the first half of the margin above the foreground level:
 *   writes take room, and past that half GC catches up as before, so the foreground level
 *   is still kept off. */
uint32_t gc_step_budget(struct zlfs_fs *fs, int users_wait, int users_io)
{
	const struct gc_state *g = &fs->gc;
	uint32_t fg = gc_fg_level(fs), target = target_above(fs, fg), margin = target - fg;
	uint32_t free_zones = gc_free_zones(fs), have = free_zones + seg_prefree_zones(fs);
	uint32_t shift = have < target ? target - have : 0;
	double want;

	if ((users_io & GC_USERS_READING) && free_zones > fg) {
		ATOMIC_ADD(&fs->gc.read_yields, 1);
		return 0;
	}
	if ((users_io & GC_USERS_BULK_WRITING) && shift * 2 <= margin) {
		ATOMIC_ADD(&fs->gc.bulk_yields, 1);
		return 0;
	}
	if (users_wait && g->pace_debt < GC_STEP_MIN && shift <= 1)
		return 0;
	want = g->pace_debt > GC_STEP_MIN ? g->pace_debt : GC_STEP_MIN;
	want *= (double)(1u << (shift < 5 ? shift : 5));
	return want > GC_STEP_MAX ? GC_STEP_MAX : (uint32_t)want;
}

void gc_pace_moved(struct zlfs_fs *fs, uint32_t moved)
{
	fs->gc.pace_debt = fs->gc.pace_debt > moved ? fs->gc.pace_debt - moved : 0;
}

/* What a writer pays at the foreground level: as much as a paced step at its most. */
uint32_t gc_fg_budget(const struct zlfs_fs *fs)
{
	(void)fs;
	return GC_STEP_MAX;
}

int gc_bg_more(struct zlfs_fs *fs, enum gc_phase phase, unsigned done)
{
	if (phase == GC_NORMAL)
		return done < 1;
	/* Boosted and foreground: up to the target and a little past it, so one checkpoint
	 * frees a few zones rather than each its own, and at most boost_zones before that
	 * checkpoint. */
	return done < fs->gc.o.boost_zones &&
	       gc_free_zones(fs) + seg_prefree_zones(fs) < gc_target_free(fs) + GC_HYST_ZONES;
}

const char *gc_phase_name(enum gc_phase p)
{
	static const char *const names[] = {"no-gc", "normal", "boosted", "foreground"};

	return p <= GC_FOREGROUND ? names[p] : "unknown";
}

void gc_defaults(struct gc_opts *o)
{
	o->high_pct = 60;
	o->low_pct = 0; /* paced: gc_target_free */
	o->valid_thresh_pct = 90;
	o->idle_ms = 500;
	o->boost_zones = 4;
	o->pe_cycles = 3000;
	/* From the UFS 4.0 notes in shared/seeds: 5 GB read for 0.81 Wh is about 580 nJ/byte;
	 * writes run at 2.76 against 4.19 GB/s at a similar rail power, so about 1.5x that. */
	o->read_nj_per_byte = 583.0;
	o->write_nj_per_byte = 883.0;
}

/* ---- victims ----------------------------------------------------------------------------- */

/* When the zone's valid data was written: the mean of its segments' mtimes, weighted by their
 * valid blocks (segment.c keeps each segment's mean and the zone's weighted sum). Under
 * seg_lock. */
static uint64_t zone_born(const struct zlfs_fs *fs, uint32_t mz)
{
	return fs->zone_valid[mz] ? fs->zone_born[mz] / fs->zone_valid[mz] : 0;
}

/* Cost-benefit as in the log-structured file system papers: the space a victim frees, (1-u),
 * weighed by the age of its data, against reading and rewriting u. Old data has had its
 * chance to die; what is still valid in it will likely stay so. The square root damps age,
 * which in the papers' linear form outweighs utilisation: under uniform overwrites, where
 * age tells nothing, that took fuller victims (docs/design.md has the figures). Greedy, in
 * emergencies, wants the most free space now. Under seg_lock. */
static double gc_score(const struct zlfs_fs *fs, uint32_t mz, int greedy, uint64_t now)
{
	double u = (double)fs->zone_valid[mz] / seg_usable_per_zone(fs);
	uint64_t born = zone_born(fs, mz);
	double age = now > born ? (double)(now - born) : 0.0;

	if (greedy)
		return 1.0 - u;
	return (1.0 - u) * sqrt(age + 1.0) / (1.0 + u);
}

/* A zone is worth collecting only if it frees at least 1/GC_MIN_GAIN of itself: near full,
 * moving a zone to win back a few blocks costs a whole zone of writes for each deleted file
 * (a foreground pass per request, write amplification without bound) and never reaches the
 * free zones it is after. Such thin garbage waits until more of its zone dies. */
#define GC_MIN_GAIN 8

/* Most valid blocks a zone may hold and still be a victim. */
static uint32_t gc_victim_limit(const struct zlfs_fs *fs)
{
	uint32_t usable = seg_usable_per_zone(fs);

	return usable - usable / GC_MIN_GAIN - 1;
}

/* Dead blocks GC can turn back into free space: those of every zone it would take. Pacing
 * leaves garbage in place until the space is needed, so this is free space as users should
 * see it (statfs), beside the free zones; thin garbage, which GC leaves alone, is not. */
uint64_t gc_reclaimable_blocks(struct zlfs_fs *fs)
{
	uint32_t mz, usable = seg_usable_per_zone(fs), limit = gc_victim_limit(fs), t;
	uint64_t n = 0;

	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++)
		if (fs->zone_state[mz] == ZONE_USED && fs->zone_valid[mz] <= limit)
			n += usable - fs->zone_valid[mz];
	/* The open zone of a data log: its dead blocks count as they will once it is closed,
	 * the room still to be written taken as valid, so closing a zone does not change the
	 * sum (logs publish their position under seg_lock). Only logs that the writes which
	 * need the room fill (user data, and GC's moves, which run because users need room):
	 * the dead blocks of a node or directory log's zone wait until metadata fills it, and
	 * users who were told they were free met ENOSPC with df showing a tenth of a small
	 * device free (docs/design.md, "Free space"). */
	for (t = ZLFS_LOG_WARM_DATA; t < ZLFS_NR_LOG_TYPES; t++) {
		const struct zlog_state *l = &fs->logs[t];
		uint32_t written, valid;

		if (l->zone == ZLFS_ZONE_NONE || fs->log_of[t] != t)
			continue;
		written = l->next_blk - l->next_blk / fs->sb.seg_blocks;
		valid = fs->zone_valid[l->zone - fs->sb.main_zone_first];
		if (written > usable)
			written = usable;
		if (valid < written && valid + (usable - written) <= limit)
			n += written - valid;
	}
	zlock_unlock(&fs->seg_lock);
	return n;
}

int gc_pick_victim(struct zlfs_fs *fs, enum gc_pick pick, uint32_t *zone)
{
	uint64_t now = zlfs_now_s(); /* the clock segment ages were stamped with */
	uint32_t mz, usable = seg_usable_per_zone(fs), limit = gc_victim_limit(fs);
	int greedy = pick == GC_PICK_EMERGENCY;
	double best = -1.0;

	if (pick == GC_PICK_BACKGROUND) { /* zones above the threshold wait for foreground GC */
		uint32_t t = (uint32_t)((uint64_t)usable * fs->gc.o.valid_thresh_pct / 100);

		if (t < limit)
			limit = t;
	}
	zlock_lock(&fs->seg_lock);
	for (mz = 0; mz < fs->sb.main_zones; mz++) {
		double sc;

		if (fs->zone_state[mz] != ZONE_USED || !fs->zone_valid[mz] || fs->zone_valid[mz] > limit)
			continue;
		sc = gc_score(fs, mz, greedy, now);
		if (sc > best) {
			best = sc;
			*zone = fs->sb.main_zone_first + mz;
		}
	}
	zlock_unlock(&fs->seg_lock);
	return best < 0 ? -ENOENT : 0;
}

/* ---- placement --------------------------------------------------------------------------- */

/* Data moved for the first time goes to the cold log; data a GC log wrote (it survived a
 * move already) goes to the frozen log, so blocks that keep surviving end up among their
 * kind and their zones stay full rather than being moved again and again. Data out of the
 * hot data log (directory blocks, files rewritten often: data.c) goes back to it: it will
 * likely die soon, and among cold data it would hold those zones' garbage open. FROM is the
 * log that wrote the victim's segment; folded layouts (fewer logs) map both to what they
 * have, and a pass with too few free zones for a third GC log folds hot into cold
 * (gc_can_finish). */
static enum zlfs_log_type gc_dest(const struct zlfs_fs *fs, uint8_t from, int fold_hot)
{
	int moved = from != fs->log_of[ZLFS_LOG_WARM_DATA] &&
		    (from == fs->log_of[ZLFS_LOG_COLD_DATA] || from == fs->log_of[ZLFS_LOG_FROZEN_DATA]);
	int hot = from == fs->log_of[ZLFS_LOG_HOT_DATA] &&
		  fs->log_of[ZLFS_LOG_HOT_DATA] != fs->log_of[ZLFS_LOG_WARM_DATA];

	if (hot)
		return fold_hot ? ZLFS_LOG_COLD_DATA : ZLFS_LOG_HOT_DATA;
	return moved ? ZLFS_LOG_FROZEN_DATA : ZLFS_LOG_COLD_DATA;
}

enum zlfs_log_type gc_dest_log(const struct zlfs_fs *fs, uint8_t from)
{
	return gc_dest(fs, from, fs->gc.fold_hot);
}

/* The GC logs a pass may move data to, in the order gc_split counts them. */
static const enum zlfs_log_type gc_dests[] = {ZLFS_LOG_COLD_DATA, ZLFS_LOG_FROZEN_DATA,
					      ZLFS_LOG_HOT_DATA};

/* The valid data blocks of main zone MZ by the GC log a pass would move them to, hot data
 * kept hot: TO[i] for gc_dests[i] (folded layouts: counted once, in the first of them their
 * log is). Hot data folded into cold would be counted in TO[0]. Under seg_lock; -EIO when a
 * SIT page cannot be had. */
static int gc_split(struct zlfs_fs *fs, uint32_t mz, uint64_t to[3])
{
	uint32_t s, i;

	to[0] = to[1] = to[2] = 0;
	for (s = 0; s < fs->sb.segs_per_zone; s++) {
		const struct seg_ent *se = sit_ent_locked(fs, mz * fs->sb.segs_per_zone + s);

		if (!se)
			return -EIO;
		for (i = 0; se->valid && i < 3; i++)
			if (fs->log_of[gc_dest(fs, se->log, 0)] == fs->log_of[gc_dests[i]]) {
				to[i] += se->valid;
				break;
			}
	}
	return 0;
}

/* Whether the nodes a pass re-points may need a zone: each of the victim's MOVED valid
 * blocks dirties at most one node (its owner, or itself) or, of an inode pack, the inodes
 * that owe one block between them (node_owe), and a node log's open zone takes them when its
 * room covers them and what its changed nodes already owe. Under seg_lock. */
static int gc_nodes_need_zone(const struct zlfs_fs *fs, uint64_t moved)
{
	static const enum zlfs_log_type nodes[] = {ZLFS_LOG_HOT_NODE, ZLFS_LOG_WARM_NODE,
						   ZLFS_LOG_COLD_NODE};

	for (unsigned i = 0; i < 3; i++)
		if (seg_log_owed(fs, nodes[i]) + moved > seg_log_room_locked(fs, nodes[i]))
			return 1;
	return 0;
}

/* Whether GC log TYPE appends to a log user data also goes to (layouts of 2 and 4 logs fold
 * cold data into the warm log): then the room of its zone is not GC's, as users take it
 * meanwhile. */
static int gc_log_shared(const struct zlfs_fs *fs, enum zlfs_log_type type)
{
	return fs->log_of[type] == fs->log_of[ZLFS_LOG_WARM_DATA] ||
	       fs->log_of[type] == fs->log_of[ZLFS_LOG_HOT_DATA];
}

/* Free zones a pass moving TO needs: one in hand for the checkpoint that frees the victim,
 * one for the nodes it re-points unless the node logs' zones hold them (NODES_FIT), and one
 * for each of the cold and frozen logs it would overflow. The room of a log users share is
 * not counted as GC's: user data (and directory blocks, in the hot log) take it meanwhile,
 * so such a log always counts a zone of its own; the zone it takes out of the reserve is
 * then GC's alone (segment.c). Under seg_lock. */
static uint32_t gc_zones_for(const struct zlfs_fs *fs, const uint64_t to[3], int nodes_fit)
{
	uint32_t need = 2 - !!nodes_fit, i;

	for (i = 0; i < 2; i++)
		need += to[i] && (gc_log_shared(fs, gc_dests[i]) ||
				  to[i] > seg_log_room_locked(fs, gc_dests[i]));
	return need + !!to[2];
}

int gc_can_finish(struct zlfs_fs *fs, uint32_t zone)
{
	uint32_t mz = zone - fs->sb.main_zone_first, hot = UINT32_MAX, folded = UINT32_MAX;
	uint32_t have = seg_free_zones(fs), need;
	uint64_t to[3] = {0}, room;
	int fit;

	zlock_lock(&fs->seg_lock);
	fit = !gc_nodes_need_zone(fs, fs->zone_valid[mz]);
	room = seg_log_room_locked(fs, ZLFS_LOG_COLD_DATA);
	if (!gc_split(fs, mz, to)) {
		hot = gc_zones_for(fs, to, fit);
		to[0] += to[2]; /* the same victim with its hot data folded into cold */
		to[2] = 0;
		folded = gc_zones_for(fs, to, fit);
	}
	zlock_unlock(&fs->seg_lock);
	/* Decided once for the whole victim, whichever steps move it, while users may take free
	 * zones down to the reserve in between: hot data stays hot only if that fits in the
	 * reserve too, which a pass without it always does. */
	fs->gc.fold_hot = have < hot || hot > seg_reserve(fs);
	need = fs->gc.fold_hot ? folded : hot;
	if (have < need)
		zlog_debug("GC cannot finish zone %u yet: %u free zones, it needs %u (%llu valid "
			   "blocks to the cold log, whose zone has room for %llu; node logs %s)",
			   zone, have, need, (unsigned long long)(to[0] + to[1]),
			   (unsigned long long)room, fit ? "have room" : "need a zone");
	return have >= need;
}

/* Which of the moved-data counters (gc.moved_blocks) a block moved to DEST counts in. */
unsigned gc_dest_index(enum zlfs_log_type dest)
{
	unsigned i;

	for (i = 0; i < 2 && gc_dests[i] != dest; i++)
		;
	return i;
}
