/*
 * crash_testutil.c - see crash_testutil.h: the model of what the workload made and what its
 * fsyncs made durable, the workload's operations on the mount, and the daemon.
 */
#include "crash_testutil.h"

#include "zdev_emu.h"
#include "zlfs_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

struct stage stages[MAX_STAGES];
int nstages;
/* The tree as the workload sees it now, and every state any path ever had: after a crash, a
 * path may only be found in one of its states (or, mid-write, a prefix of one). */
struct stage cur;
struct file_exp hist[MAX_HIST];
int nhist;
/* Ranges of logged operations where every operation is a crash point (see focus_begin). */
static long focus[MAX_FOCUS][2];
int nfocus;
char img[512], logpath[512], mnt[512], out[512], bin[512];

static uint8_t pat(uint32_t seed, size_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;

	if (seed < PAT_RANDOM) /* about 4:1 for LZ4 */
		return (uint8_t)(seed * 131 + i * 7 + (i >> 9));
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull; /* splitmix64's mix: no codec shrinks it */
	return (uint8_t)(x ^ (x >> 31));
}

void fill(uint8_t *b, size_t n, uint32_t seed, size_t base)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, base + i);
}

/* A file holding SEED's pattern over its SIZE bytes. */
struct file_exp fe(const char *path, uint32_t seed, size_t size, int may_be_absent)
{
	struct file_exp f = {.size = size, .nex = 1, .may_be_absent = may_be_absent,
			     .hist_from = nhist};

	snprintf(f.path, sizeof(f.path), "%s", path);
	f.e[0] = (struct ext){0, (uint32_t)size, seed, 0};
	return f;
}

static struct file_exp *find_in(struct stage *s, const char *path)
{
	for (int i = 0; i < s->nfiles; i++)
		if (!strcmp(s->f[i].path, path))
			return &s->f[i];
	return NULL;
}

static void drop_in(struct stage *s, const char *path)
{
	int i;

	for (i = 0; i < s->nfiles; i++)
		if (!strcmp(s->f[i].path, path))
			s->f[i] = s->f[--s->nfiles];
}

static void hist_add(const struct file_exp *f)
{
	ck_assert_int_lt(nhist, MAX_HIST);
	hist[nhist++] = *f;
}

/* The current state of PATH, created (empty) if new. */
static struct file_exp *cur_file(const char *path)
{
	struct file_exp *f = find_in(&cur, path);

	if (f)
		return f;
	ck_assert_int_lt(cur.nfiles, MAX_FILES);
	f = &cur.f[cur.nfiles++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	return f;
}

/* F with LEN bytes of SEED's pattern written at AT. An older extent the new one covers whole
 * is no longer seen: it goes, so a region rewritten again and again (a log rewritten in
 * place) keeps few extents. */
static void ext_add(struct file_exp *f, uint32_t seed, size_t at, size_t len)
{
	for (int k = f->nex - 1; k >= 0; k--) {
		if (f->e[k].off < at || (size_t)f->e[k].off + f->e[k].len > at + len)
			continue;
		f->nex--;
		memmove(&f->e[k], &f->e[k + 1], sizeof(f->e[0]) * (size_t)(f->nex - k));
	}
	if (f->nex == MAX_EXT) { /* fold the oldest two: only when the newer covers the older */
		ck_assert(f->e[1].off <= f->e[0].off &&
			  f->e[1].off + f->e[1].len >= f->e[0].off + f->e[0].len);
		memmove(&f->e[0], &f->e[1], sizeof(f->e[0]) * --f->nex);
	}
	f->e[f->nex++] = (struct ext){(uint32_t)at, (uint32_t)len, seed, (uint32_t)at};
	if (at + len > f->size)
		f->size = at + len;
}

void cur_write(const char *path, uint32_t seed, size_t at, size_t len)
{
	struct file_exp *f = cur_file(path);

	ext_add(f, seed, at, len);
	hist_add(f);
}

/* The kernel cuts a buffered write into requests at a page it must read first: after the
 * first page when the write starts inside one, before the last when it ends inside one. A
 * checkpoint another thread's fsync writes between them makes the first part durable alone,
 * so those states are ones the file passed through. Call before cur_write of the same write. */
void cur_write_parts(const char *path, uint32_t seed, size_t at, size_t len)
{
	size_t first = (at / PAGE_CUT + 1) * PAGE_CUT, last = (at + len) / PAGE_CUT * PAGE_CUT;
	struct file_exp part;

	if (at % PAGE_CUT && first < at + len) {
		part = *cur_file(path);
		ext_add(&part, seed, at, first - at);
		hist_add(&part);
	}
	if ((at + len) % PAGE_CUT && last > at && last != first) {
		part = *cur_file(path);
		ext_add(&part, seed, at, last - at);
		hist_add(&part);
	}
}

static void cur_truncate(const char *path, size_t size)
{
	struct file_exp *f = cur_file(path);

	for (int k = 0; k < f->nex; k++) {
		if (f->e[k].off >= size)
			f->e[k].len = 0;
		else if (f->e[k].off + f->e[k].len > size)
			f->e[k].len = (uint32_t)(size - f->e[k].off);
	}
	f->size = size;
	hist_add(f);
}

/* Split extent K of F at offset AT (inside it): the second piece follows the first. */
static void ext_split(struct file_exp *f, int k, size_t at)
{
	struct ext *e = &f->e[k];
	uint32_t cut = (uint32_t)(at - e->off);

	ck_assert_int_lt(f->nex, MAX_EXT);
	memmove(&f->e[k + 1], &f->e[k], sizeof(*e) * (size_t)(f->nex - k));
	f->nex++;
	e->len = cut;
	f->e[k + 1].off += cut;
	f->e[k + 1].len -= cut;
	f->e[k + 1].base += cut;
}

/* Split every extent of F that straddles AT. */
static void ext_split_at(struct file_exp *f, size_t at)
{
	for (int k = 0; k < f->nex; k++)
		if (f->e[k].off < at && f->e[k].off + f->e[k].len > at)
			ext_split(f, k++, at);
}

/* Bytes [OFF, OFF+LEN) read as zeros; extents at or past END move by DELTA. */
static void ext_cut(struct file_exp *f, size_t off, size_t len)
{
	ext_split_at(f, off);
	ext_split_at(f, off + len);
	for (int k = 0; k < f->nex; k++)
		if (f->e[k].off >= off && f->e[k].off + f->e[k].len <= off + len)
			f->e[k].len = 0;
}

/* ZERO_RANGE: zeros, and the size grows unless KEEP. */
void cur_zero(const char *path, size_t off, size_t len, int keep)
{
	struct file_exp *f = cur_file(path);

	ext_cut(f, off, len);
	if (!keep && off + len > f->size)
		f->size = off + len;
	hist_add(f);
}

/* COLLAPSE_RANGE (INSERT = 0) or INSERT_RANGE of [OFF, OFF+LEN). */
void cur_shift(const char *path, size_t off, size_t len, int insert)
{
	struct file_exp *f = cur_file(path);

	if (!insert)
		ext_cut(f, off, len);
	else
		ext_split_at(f, off);
	for (int k = 0; k < f->nex; k++)
		if (f->e[k].len && f->e[k].off >= (insert ? off : off + len))
			f->e[k].off = insert ? f->e[k].off + (uint32_t)len : f->e[k].off - (uint32_t)len;
	f->size = insert ? f->size + len : f->size - len;
	hist_add(f);
}

static void cur_mkdir(const char *path)
{
	struct file_exp *f = cur_file(path);

	f->is_dir = 1;
	hist_add(f);
}

/* Rename OLD to NEW in the model, with everything below OLD when it is a directory. */
static void cur_rename(const char *old, const char *new)
{
	size_t ol = strlen(old);
	int i;

	drop_in(&cur, new);
	for (i = 0; i < cur.nfiles; i++) {
		struct file_exp *f = &cur.f[i];
		char tail[64];

		if (strncmp(f->path, old, ol) || (f->path[ol] && f->path[ol] != '/'))
			continue;
		snprintf(tail, sizeof(tail), "%s", f->path + ol);
		snprintf(f->path, sizeof(f->path), "%s%s", new, tail);
		hist_add(f);
	}
}

char mount_opts[700] = "cp_interval=0"; /* with the key for encrypted workloads */
int want_encrypted_root; /* the workload's filesystem came from mkfs --encrypt */

pid_t daemon_start(const char *image)
{
	return tu_daemon_start(image, mnt, mount_opts);
}

int daemon_stop(pid_t pid) { return tu_daemon_stop(mnt, pid); }

const char *at_mnt(char *p, size_t len, const char *rel)
{
	snprintf(p, len, "%s/%s", mnt, rel);
	return p;
}

/* Write SIZE bytes of SEED's pattern at AT; the model follows. */
void write_file(const char *rel, uint32_t seed, size_t size, size_t at, int do_fsync)
{
	char p[600];
	uint8_t *b = malloc(size);
	int fd;

	fd = open(at_mnt(p, sizeof(p), rel), O_CREAT | O_WRONLY, 0644);
	ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
	fill(b, size, seed, at);
	ck_assert_int_eq(pwrite(fd, b, size, (off_t)at), (ssize_t)size);
	cur_write(rel, seed, at, size);
	if (do_fsync)
		ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	free(b);
}

/* As write_file, for a device that may be full: the open or the write may stop at ENOSPC,
 * and the model follows what was written. Returns 0 or ENOSPC. */
int write_file_room(const char *rel, uint32_t seed, size_t size)
{
	char p[600];
	uint8_t *b;
	ssize_t n;
	int fd = open(at_mnt(p, sizeof(p), rel), O_CREAT | O_WRONLY, 0644);

	if (fd < 0) {
		ck_assert_int_eq(errno, ENOSPC);
		return ENOSPC;
	}
	b = malloc(size);
	fill(b, size, seed, 0);
	n = pwrite(fd, b, size, 0);
	if (n < 0)
		ck_assert_int_eq(errno, ENOSPC);
	cur_write(rel, seed, 0, n > 0 ? (size_t)n : 0);
	close(fd);
	free(b);
	return n == (ssize_t)size ? 0 : ENOSPC;
}

void fsync_path(const char *rel)
{
	char p[600];
	int fd;

	fd = open(at_mnt(p, sizeof(p), rel), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

unsigned gc_now(unsigned zones)
{
	struct zlfs_ioc_gc g = {.zones = zones};
	int fd = open(mnt, O_RDONLY | O_DIRECTORY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ioctl(fd, ZLFS_IOC_GC, &g), 0);
	close(fd);
	return g.zones;
}

void truncate_file(const char *rel, size_t size)
{
	char p[600];

	ck_assert_int_eq(truncate(at_mnt(p, sizeof(p), rel), (off_t)size), 0);
	cur_truncate(rel, size);
}

void rename_path(const char *from, const char *to)
{
	char p[600], q[600];

	ck_assert_int_eq(rename(at_mnt(p, sizeof(p), from), at_mnt(q, sizeof(q), to)), 0);
	cur_rename(from, to);
}

void unlink_path(const char *rel)
{
	char p[600];

	ck_assert_int_eq(unlink(at_mnt(p, sizeof(p), rel)), 0);
	drop_in(&cur, rel);
}

void mkdir_path(const char *rel)
{
	char p[600];

	ck_assert_int_eq(mkdir(at_mnt(p, sizeof(p), rel), 0755), 0);
	cur_mkdir(rel);
}

void rmdir_path(const char *rel)
{
	char p[600];

	ck_assert_int_eq(rmdir(at_mnt(p, sizeof(p), rel)), 0);
	drop_in(&cur, rel);
}

/* `zlfs-ctl sync`: how a sync reaches the daemon (sync(2) does not reach FUSE daemons). */
void ctl_sync(void)
{
	ck_assert_int_eq(tu_sh("%s sync %s", tu_bin(bin, sizeof(bin), "zlfs-ctl"), mnt), 0);
}

/* Every operation logged between focus_begin and focus_end is tried as a crash point. */
void focus_begin(void)
{
	ck_assert_int_lt(nfocus, MAX_FOCUS);
	focus[nfocus][0] = zemu_log_count(logpath) + 1;
}

void focus_end(void) { focus[nfocus++][1] = zemu_log_count(logpath); }

int in_focus(long n)
{
	for (int i = 0; i < nfocus; i++)
		if (n >= focus[i][0] && n <= focus[i][1])
			return 1;
	return 0;
}

/* Everything the fsyncs so far promised; stage files are copied forward and edited. */
struct stage *stage_next(void)
{
	struct stage *s;

	ck_assert_int_lt(nstages, MAX_STAGES);
	s = &stages[nstages];
	if (nstages)
		*s = stages[nstages - 1];
	nstages++;
	return s;
}

void stage_seal(struct stage *s)
{
	s->ops = zemu_log_count(logpath);
	s->nhist = nhist;
	ck_assert_int_gt(s->ops, 0);
}

struct file_exp *stage_file(struct stage *s, const char *path)
{
	struct file_exp *f = find_in(s, path);

	if (f)
		return f;
	ck_assert_int_lt(s->nfiles, MAX_FILES);
	f = &s->f[s->nfiles++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", path);
	return f;
}

void stage_drop(struct stage *s, const char *path) { drop_in(s, path); }

/* PATH is durable as the workload has it now (fsync of a file). */
void stage_take(struct stage *s, const char *path)
{
	struct file_exp *f = find_in(&cur, path), *d;

	ck_assert_ptr_nonnull(f);
	d = stage_file(s, path);
	*d = *f;
	d->hist_from = nhist;
	for (int i = 0; i < s->ngone; i++) /* made again and made durable */
		if (!strcmp(s->gone[i].path, path))
			s->gone[i--] = s->gone[--s->ngone];
}

/* PATH, which stage S had, is gone by a directory fsync. */
static void stage_gone(struct stage *s, const char *path)
{
	ck_assert_int_lt(s->ngone, MAX_GONE);
	size_t n = strnlen(path, sizeof(s->gone[0].path) - 1);

	/* memmove: the optimiser cannot rule out PATH lying in S (-Werror=restrict) */
	memmove(s->gone[s->ngone].path, path, n);
	s->gone[s->ngone].path[n] = 0;
	s->gone[s->ngone++].hist_from = nhist;
}

static int parent_is(const char *path, const char *dir)
{
	const char *slash = strrchr(path, '/');
	size_t dl = strlen(dir);

	if (!strcmp(dir, "."))
		return !slash;
	return slash && (size_t)(slash - path) == dl && !strncmp(path, dir, dl);
}

/* fsync of directory DIR: its entries are durable as they are now - present ones with their
 * content (a directory fsync is a checkpoint), removed ones gone. */
void stage_take_dir(struct stage *s, const char *dir)
{
	int i;

	for (i = 0; i < s->nfiles; i++)
		if (parent_is(s->f[i].path, dir) && !find_in(&cur, s->f[i].path)) {
			if (!s->f[i].is_dir && s->ngone < MAX_GONE)
				stage_gone(s, s->f[i].path);
			s->f[i--] = s->f[--s->nfiles];
		}
	for (i = 0; i < cur.nfiles; i++)
		if (parent_is(cur.f[i].path, dir))
			stage_take(s, cur.f[i].path);
}

/* `zlfs-ctl sync` (a checkpoint): the whole tree is durable as it is now. */
void stage_take_all(struct stage *s)
{
	memcpy(s->f, cur.f, sizeof(cur.f[0]) * (size_t)cur.nfiles);
	s->nfiles = cur.nfiles;
	s->ngone = 0; /* the whole tree as it is: what it lacks is not checked */
	for (int i = 0; i < s->nfiles; i++)
		s->f[i].hist_from = nhist;
}

void fdatasync_path(const char *rel)
{
	char p[600];
	int fd = open(at_mnt(p, sizeof(p), rel), O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fdatasync(fd), 0);
	close(fd);
}

/* Whether the root of the mounted filesystem is encrypted. */
int root_encrypted(void)
{
	struct zlfs_ioc_encrypt e = {0};
	int fd = open(mnt, O_RDONLY | O_DIRECTORY), ret;

	ret = fd >= 0 && !ioctl(fd, ZLFS_IOC_GET_ENCRYPT, &e) && (e.flags & ZLFS_ENC_ENCRYPTED);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- extended attributes -------------------------------------------------------------------- */

#define MAX_XOPS 640
#define MAX_XIDS 256
#define XVAL_MAX 65536

static struct xop {
	char path[64];
	uint16_t id;
	uint8_t remove;
	uint32_t len, seed;
} xscript[MAX_XOPS];
static int nxops;

static void xattr_record(const char *rel, unsigned id, int remove, size_t len, uint32_t seed)
{
	struct file_exp *f = cur_file(rel);

	ck_assert_int_lt(nxops, MAX_XOPS);
	ck_assert_uint_lt(id, MAX_XIDS);
	snprintf(xscript[nxops].path, sizeof(xscript[nxops].path), "%s", rel);
	xscript[nxops].id = (uint16_t)id;
	xscript[nxops].remove = (uint8_t)remove;
	xscript[nxops].len = (uint32_t)len;
	xscript[nxops].seed = seed;
	nxops++;
	f->xops++;
	hist_add(f);
}

void xattr_set_path(const char *rel, unsigned id, size_t len, uint32_t seed)
{
	static uint8_t b[XVAL_MAX];
	char p[600], name[32];

	ck_assert_uint_le(len, sizeof(b));
	snprintf(name, sizeof(name), "user.x%u", id);
	fill(b, len, seed, 0);
	ck_assert_int_eq(setxattr(at_mnt(p, sizeof(p), rel), name, b, len, 0), 0);
	xattr_record(rel, id, 0, len, seed);
}

void xattr_rm_path(const char *rel, unsigned id)
{
	char p[600], name[32];

	snprintf(name, sizeof(name), "user.x%u", id);
	ck_assert_int_eq(removexattr(at_mnt(p, sizeof(p), rel), name), 0);
	xattr_record(rel, id, 1, 0, 0);
}

/* Attribute ID of PATH as the first XOPS operations on it left it: its length, -1 if none. */
static long xattr_model(const char *path, uint32_t xops, unsigned id, uint32_t *seed)
{
	long len = -1;
	uint32_t done = 0;

	for (int i = 0; i < nxops && done < xops; i++) {
		if (strcmp(xscript[i].path, path))
			continue;
		done++;
		if (xscript[i].id == id) {
			len = xscript[i].remove ? -1 : (long)xscript[i].len;
			*seed = xscript[i].seed;
		}
	}
	return len;
}

const char *xattr_match(const char *path, uint32_t xops, char *why, size_t wl)
{
	static uint8_t got[XVAL_MAX], want[XVAL_MAX];
	char p[600], list[MAX_XIDS * 16], name[32];
	unsigned id, listed = 0, expected = 0;
	ssize_t n = nxops ? listxattr(at_mnt(p, sizeof(p), path), list, sizeof(list)) : 0, off;
	uint32_t seed;
	long len;

	if (n < 0) {
		snprintf(why, wl, "%s: listxattr: %s", path, strerror(errno));
		return why;
	}
	for (off = 0; off < n; off += (ssize_t)strlen(list + off) + 1, listed++)
		if (sscanf(list + off, "user.x%u", &id) != 1 || xattr_model(path, xops, id, &seed) < 0) {
			snprintf(why, wl, "%s has attribute %.40s, not in state %u", path, list + off,
				 xops);
			return why;
		}
	for (id = 0; id < MAX_XIDS && nxops; id++) {
		len = xattr_model(path, xops, id, &seed);
		if (len < 0)
			continue;
		expected++;
		snprintf(name, sizeof(name), "user.x%u", id);
		fill(want, (size_t)len, seed, 0);
		n = getxattr(p, name, got, sizeof(got));
		if (n != len || memcmp(got, want, (size_t)len)) {
			snprintf(why, wl, "%s: %s is %zd bytes%s, state %u has %ld", path, name, n,
				 n == len ? " of other content" : "", xops, len);
			return why;
		}
	}
	if (listed != expected) {
		snprintf(why, wl, "%s lists %u attributes, state %u has %u", path, listed, xops,
			 expected);
		return why;
	}
	return NULL;
}
