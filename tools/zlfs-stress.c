/*
 * zlfs-stress.c - the long runs of tools/long-runs: an fsstress-like load and a random
 * power-cut loop (Debian packages neither xfstests' fsstress nor LTP).
 *
 *   zlfs-stress fsstress DIR [--procs N] [--seconds S] [--seed X]
 *       N processes (default 4), each in DIR/pK, run random operations for S seconds
 *       (default 600): create, write, read, truncate, fallocate (reserve, punch, zero),
 *       fsync, fdatasync, rename, link, unlink, mkdir, rmdir, symlink, readdir, stat,
 *       setxattr/getxattr. Every byte written at file offset O of file F is pat(F, O), so a
 *       read checks that each byte is that or zero (a hole, a punch, a truncation): a block
 *       returned from the wrong place is caught. ENOSPC is expected near full; any other
 *       unexpected error or a wrong byte fails the run (exit 1), with the operation.
 *   zlfs-stress powercut IMAGE MNT --bin DIR [--rounds N] [--writers W] [--fill PCT] [--seed X]
 *                        [--direct]
 *       N rounds (default 500): mount zlfs (DIR/zlfs) on MNT, W writer processes (default 4)
 *       create files of a known pattern, fsync each and note it as durable in a host-side
 *       journal (only a file whose writes all succeeded: near full some fail with ENOSPC),
 *       and delete old files to hold the filesystem near PCT% full (default 85, so GC runs);
 *       after a random 0.2-2 s the daemon is killed with -9 and the emulator cuts power (a
 *       random number of unflushed writes kept, sometimes a torn one); then the filesystem
 *       must mount, every durable file not deleted must be whole, no file may hold
 *       a wrong byte, and after an unmount fsck.zlfs -n must exit 0. Exit 1 at the first
 *       failure, with the round's seed to reproduce it. --direct mounts with -o dev_direct
 *       (the image opened with O_DIRECT, as the benchmarks do).
 *
 * Owns: nothing of the filesystem; a client of a mounted zlfs, zlfs-emu and fsck.zlfs.
 * May call: libc, zdev_emu.h (the power cut).
 */
#include "zdev_emu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MAXF 64
#define MAXFILE (4u << 20)

static uint64_t rng;

static uint64_t rnd64(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t n) { return n ? rnd64() % n : 0; }

static uint8_t pat(uint32_t id, uint64_t off)
{
	return (uint8_t)(id * 2654435761u + off * 7 + (off >> 12) * 13 + 1) | 1; /* never 0 */
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "zlfs-stress: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* ---- fsstress ---------------------------------------------------------------------------- */

struct fss {
	const char *dir;
	int proc;
	long ops, nospc;
	uint8_t *buf;
};

static void fpath(const struct fss *s, char *p, size_t len, const char *kind, uint64_t n)
{
	snprintf(p, len, "%s/p%d/%s%llu", s->dir, s->proc, kind, (unsigned long long)n);
}

/* The file id a path's bytes are patterned with: its number. */
static uint32_t fid(const char *p)
{
	const char *d = strrchr(p, '/');

	while (*d && (*d < '0' || *d > '9'))
		d++;
	return (uint32_t)strtoul(d, NULL, 10);
}

static int expected(int err) { return err == ENOENT || err == EEXIST || err == ENOTEMPTY; }

static void check_err(struct fss *s, const char *what, const char *p, int ret)
{
	if (ret >= 0 || expected(errno))
		return;
	if (errno == ENOSPC) {
		s->nospc++;
		return;
	}
	die("p%d op %ld: %s %s: %s", s->proc, s->ops, what, p, strerror(errno));
}

static void op_write(struct fss *s, const char *p)
{
	uint64_t off = rnd(MAXFILE), len = 1 + rnd(256 << 10), i;
	int fd = open(p, O_CREAT | O_WRONLY, 0644);

	check_err(s, "open", p, fd);
	if (fd < 0)
		return;
	if (off + len > MAXFILE)
		len = MAXFILE - off;
	for (i = 0; i < len; i++)
		s->buf[i] = pat(fid(p), off + i);
	check_err(s, "write", p, (int)pwrite(fd, s->buf, len, (off_t)off));
	if (!rnd(8))
		check_err(s, rnd(2) ? "fsync" : "fdatasync", p, rnd(2) ? fsync(fd) : fdatasync(fd));
	close(fd);
}

static void op_read(struct fss *s, const char *p)
{
	int fd = open(p, O_RDONLY);
	ssize_t n;
	uint64_t off = rnd(MAXFILE);

	check_err(s, "open", p, fd);
	if (fd < 0)
		return;
	n = pread(fd, s->buf, 256 << 10, (off_t)off);
	check_err(s, "read", p, (int)n);
	for (ssize_t i = 0; i < n; i++)
		if (s->buf[i] && s->buf[i] != pat(fid(p), off + (uint64_t)i))
			die("p%d op %ld: %s byte %llu is 0x%02x, expected 0 or 0x%02x", s->proc,
			    s->ops, p, (unsigned long long)(off + (uint64_t)i), s->buf[i],
			    pat(fid(p), off + (uint64_t)i));
	close(fd);
}

static void op_falloc(struct fss *s, const char *p)
{
	static const int modes[] = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				    FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};
	int fd = open(p, O_WRONLY);
	uint64_t off = rnd(MAXFILE), len = 1 + rnd(1 << 20);

	check_err(s, "open", p, fd);
	if (fd < 0)
		return;
	if (off + len > MAXFILE)
		len = MAXFILE - off;
	check_err(s, "fallocate", p, fallocate(fd, modes[rnd(5)], (off_t)off, (off_t)len));
	close(fd);
}

static void op_readdir(struct fss *s)
{
	char p[600];
	DIR *d;

	snprintf(p, sizeof(p), "%s/p%d", s->dir, s->proc);
	d = opendir(p);
	if (!d)
		die("p%d: opendir %s: %s", s->proc, p, strerror(errno));
	while (readdir(d))
		;
	closedir(d);
}

static void fss_step(struct fss *s)
{
	char p[600], q[600];
	uint64_t a = rnd(MAXF), b = rnd(MAXF);
	struct stat st;
	char v[64];

	fpath(s, p, sizeof(p), "f", a);
	switch (rnd(20)) {
	case 0: case 1: case 2: case 3: case 4: op_write(s, p); break;
	case 5: case 6: case 7: op_read(s, p); break;
	case 8: check_err(s, "truncate", p, truncate(p, (off_t)rnd(MAXFILE))); break;
	case 9: case 10: op_falloc(s, p); break;
	case 11: check_err(s, "unlink", p, unlink(p)); break;
	case 12: fpath(s, q, sizeof(q), "f", b);
		if (fid(p) == fid(q)) /* bytes follow the name's number: rename only to itself */
			check_err(s, "rename", p, rename(p, q));
		else
			check_err(s, "stat", p, stat(p, &st));
		break;
	case 13: fpath(s, q, sizeof(q), "d", b);
		check_err(s, "mkdir", q, mkdir(q, 0755)); break;
	case 14: fpath(s, q, sizeof(q), "d", b);
		check_err(s, "rmdir", q, rmdir(q)); break;
	case 15: fpath(s, q, sizeof(q), "s", b);
		check_err(s, "symlink", q, symlink(p, q)); break;
	case 16: fpath(s, q, sizeof(q), "s", b);
		check_err(s, "unlink", q, unlink(q)); break;
	case 17: op_readdir(s); break;
	case 18: snprintf(v, sizeof(v), "v%llu", (unsigned long long)b);
		if (setxattr(p, "user.stress", v, strlen(v), 0) && errno != ENOENT && errno != ENOSPC)
			die("p%d op %ld: setxattr %s: %s", s->proc, s->ops, p, strerror(errno));
		break;
	default: check_err(s, "stat", p, stat(p, &st)); break;
	}
	s->ops++;
}

static int fsstress(int argc, char **argv)
{
	static const struct option lo[] = {{"procs", 1, NULL, 'p'}, {"seconds", 1, NULL, 's'},
					   {"seed", 1, NULL, 'x'}, {NULL, 0, NULL, 0}};
	int procs = 4, c, k, fails = 0;
	double secs = 600, t0;
	uint64_t seed = 1;
	char p[600];

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'p')
			procs = atoi(optarg);
		else if (c == 's')
			secs = atof(optarg);
		else if (c == 'x')
			seed = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (optind + 1 != argc || procs < 1)
		return 2;
	t0 = now();
	for (k = 0; k < procs; k++) {
		if (fork() == 0) {
			struct fss s = {.dir = argv[optind], .proc = k, .buf = malloc(1 << 20)};

			rng = seed * 1000003 + (uint64_t)k;
			snprintf(p, sizeof(p), "%s/p%d", s.dir, k);
			if (mkdir(p, 0755) && errno != EEXIST)
				die("mkdir %s: %s", p, strerror(errno));
			while (now() - t0 < secs)
				fss_step(&s);
			printf("p%d: %ld operations, %ld refused with ENOSPC\n", k, s.ops, s.nospc);
			exit(0);
		}
	}
	for (k = 0; k < procs; k++) {
		int st;

		wait(&st);
		fails += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	printf("fsstress: %d processes, %.0f s, %d failed\n", procs, now() - t0, fails);
	return fails ? 1 : 0;
}

/* ---- the power-cut loop -------------------------------------------------------------------- */

struct pcut {
	const char *img, *mnt, *bin;
	int writers, fill;
	const char *opts; /* the daemon's -o */
	char journal[600];
};

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int mounted(const char *mnt)
{
	char line[4096], m[4096];
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int found = 0;

	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%*s %*s %*s %*s %4095s", m) == 1 && !strcmp(m, mnt);
	if (f)
		fclose(f);
	return found;
}

/* The sum of the numbers in one `zlfs-ctl stats` whose keys match the extended regular
 * expression KEYS, or 0: what GC did in a round before its cut. */
static long ctl_stat_sum(const struct pcut *c, const char *keys)
{
	char cmd[1400];
	long v, sum = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/zlfs-ctl stats %s 2>/dev/null | grep -oE '\"%s\": [0-9]+'",
		 c->bin, c->mnt, keys);
	f = popen(cmd, "r");
	while (f && fscanf(f, " %*[^:]: %ld", &v) == 1)
		sum += v;
	if (f)
		pclose(f);
	return sum;
}

static pid_t mount_zlfs(const struct pcut *c)
{
	char zlfs[600];
	pid_t pid;
	int i;

	snprintf(zlfs, sizeof(zlfs), "%s/zlfs", c->bin);
	pid = fork();
	if (!pid) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 1);
		execl(zlfs, zlfs, "-f", "-o", c->opts, c->img, c->mnt, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 600 && !mounted(c->mnt); i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	return mounted(c->mnt) ? pid : -1;
}

/* Reads file P (ID, SIZE long) back through B in pieces of 1 MiB: -1 if a read returned data
 * other than what was written, or O_DIRECT was refused (every check would pass unseen),
 * else 0 (a read cut short by the kill proves nothing). The reads put the cut inside GC's
 * policy for readers as well (docs/design.md, "Pacing"), so they bypass the kernel's cache
 * of what this process just wrote. */
static int read_back(const char *p, uint64_t id, uint64_t size, uint8_t *b)
{
	int fd = open(p, O_RDONLY | O_DIRECT), bad = fd < 0 && errno == EINVAL;
	uint64_t off, i;

	for (off = 0; fd >= 0 && !bad && off < size; off += 1 << 20) {
		uint64_t k = size - off < (1u << 20) ? size - off : 1u << 20;

		if (pread(fd, b, k, (off_t)off) != (ssize_t)k)
			break;
		for (i = 0; i < k && !bad; i++)
			bad = b[i] != pat((uint32_t)id, off + i);
	}
	if (fd >= 0)
		close(fd);
	return bad ? -1 : 0;
}

/* Writer W: files w<W>-<n>-<size>, SEED's pattern (pat(seed = W * 1e6 + n, offset)). */
static void writer(const struct pcut *c, int w, uint64_t seed)
{
	char p[700], jl[700];
	uint8_t *b = NULL;
	FILE *j;
	long n, wfailed = 0, crefused = 0;
	int full = 0;
	uint64_t off;

	if (posix_memalign((void **)&b, 4096, 1 << 20))
		exit(1);
	snprintf(jl, sizeof(jl), "%s.%d", c->journal, w);
	j = fopen(jl, "a");
	rng = seed;
	for (n = 0;; n++) {
		struct statvfs v;
		uint64_t size = 4096 + rnd(768 << 10), i, id;
		int fd;

		if (statvfs(c->mnt, &v))
			break;
		if (full || (v.f_blocks - v.f_bfree) * 100 > (uint64_t)c->fill * v.f_blocks) {
			/* near the target: delete one of this writer's older files */
			DIR *d = opendir(c->mnt);
			struct dirent *e;
			char mine[16];

			snprintf(mine, sizeof(mine), "w%d-", w);
			while (d && (e = readdir(d)))
				if (!strncmp(e->d_name, mine, strlen(mine)) && !rnd(3)) {
					/* Noted before the unlink: the daemon may do it, see it made
					 * durable by another writer's checkpoint, and be killed before
					 * it replies (a request replies after its GC installment and
					 * checkpoint). A noted file may be found or not; whole if found. */
					snprintf(p, sizeof(p), "%s/%s", c->mnt, e->d_name);
					fprintf(j, "D %s\n", e->d_name);
					fflush(j);
					unlink(p);
					break;
				}
			if (d)
				closedir(d);
		}
		id = (uint64_t)w * 1000000 + (uint64_t)(seed % 1000) * 1000 + (uint64_t)n;
		snprintf(p, sizeof(p), "%s/w%d-%llu-%llu", c->mnt, w, (unsigned long long)id,
			 (unsigned long long)size);
		fd = open(p, O_CREAT | O_WRONLY | O_EXCL, 0644);
		/* Creating stops while only the GC reserve is left (df then shows no free inodes):
		 * make room and go on, rather than leave the round with one writer fewer. */
		full = fd < 0 && errno == ENOSPC;
		crefused += full;
		if (full) {
			usleep(10000);
			continue;
		}
		if (fd < 0)
			break; /* the daemon is gone */
		for (off = 0; off < size; off += 1 << 20) {
			uint64_t k = size - off < (1u << 20) ? size - off : 1u << 20;

			for (i = 0; i < k; i++)
				b[i] = pat((uint32_t)id, off + i);
			errno = 0; /* a short write sets none */
			if (pwrite(fd, b, k, (off_t)off) != (ssize_t)k)
				break;
		}
		/* Only a file written whole is durable once fsync'ed: a write that failed (ENOSPC
		 * near full) leaves a shorter file that fsync makes durable as it is. */
		if (off < size) {
			if (errno != ENOTCONN && errno != ECONNABORTED) /* not the kill */
				wfailed++;
		} else if (!fsync(fd)) {
			fprintf(j, "F w%d-%llu-%llu\n", w, (unsigned long long)id,
				(unsigned long long)size);
			fflush(j);
		}
		close(fd);
		if (off >= size && (n & 1) && read_back(p, id, size, b)) {
			fprintf(stderr, "writer %d: %s: read back wrong, or O_DIRECT refused\n", w,
				p);
			exit(3);
		}
	}
	fclose(j);
	if (wfailed) /* expected near full: tells that the run reached ENOSPC */
		fprintf(stderr, "writer %d: %ld files left short by a failed write (not durable)\n",
			w, wfailed);
	if (crefused)
		fprintf(stderr, "writer %d: %ld creates refused with ENOSPC\n", w, crefused);
	exit(0);
}

/* The names a writer's journal says it deleted, in an open-addressing set: verify looks each
 * durable file up once (a grep per file made rounds slower as the journal grew). */
struct nameset {
	char **slot;
	size_t cap;
};

static size_t name_hash(const char *n)
{
	size_t h = 1469598103934665603ULL;

	while (*n)
		h = (h ^ (unsigned char)*n++) * 1099511628211ULL;
	return h;
}

static void set_add(struct nameset *set, const char *n)
{
	size_t i;

	if (!set->cap) {
		set->cap = 1 << 16;
		set->slot = calloc(set->cap, sizeof(*set->slot));
	}
	for (i = name_hash(n) & (set->cap - 1); set->slot[i]; i = (i + 1) & (set->cap - 1))
		if (!strcmp(set->slot[i], n))
			return;
	set->slot[i] = strdup(n);
}

static int set_has(const struct nameset *set, const char *n)
{
	size_t i;

	if (!set->cap)
		return 0;
	for (i = name_hash(n) & (set->cap - 1); set->slot[i]; i = (i + 1) & (set->cap - 1))
		if (!strcmp(set->slot[i], n))
			return 1;
	return 0;
}

static void set_free(struct nameset *set)
{
	for (size_t i = 0; i < set->cap; i++)
		free(set->slot[i]);
	free(set->slot);
	set->slot = NULL;
	set->cap = 0;
}

/* Whether durable file NAME (of SIZE bytes, pattern ID) is whole; 0 if so. */
static int check_file(const struct pcut *c, long round, const char *name, uint64_t id,
		      uint64_t size, uint8_t *b)
{
	char p[700];
	int fd, bad = 0;

	snprintf(p, sizeof(p), "%s/%s", c->mnt, name);
	fd = open(p, O_RDONLY);
	for (uint64_t off = 0; fd >= 0 && !bad && off < size; off += 1 << 20) {
		uint64_t k = size - off < (1u << 20) ? size - off : 1u << 20;

		if (pread(fd, b, k, (off_t)off) != (ssize_t)k) {
			fprintf(stderr, "round %ld: %s is short\n", round, name);
			bad = 1;
		}
		for (uint64_t i = 0; !bad && i < k; i++)
			if (b[i] != pat((uint32_t)id, off + i)) {
				fprintf(stderr, "round %ld: %s differs at byte %llu\n", round, name,
					(unsigned long long)(off + i));
				bad = 1;
			}
	}
	if (fd >= 0)
		close(fd);
	return bad;
}

/* After the crash: durable files present and whole, no wrong byte anywhere. */
static int verify(const struct pcut *c, long round, long *files)
{
	char p[700], name[300], kind;
	uint8_t *b = malloc(1 << 20);
	int w, bad = 0;

	*files = 0;
	for (w = 0; w < c->writers; w++) {
		struct nameset deleted = {0};
		FILE *j;

		snprintf(p, sizeof(p), "%s.%d", c->journal, w);
		for (int pass = 0; pass < 2; pass++) { /* deletions first, then the files */
			j = fopen(p, "r");
			while (j && fscanf(j, " %c %299s", &kind, name) == 2) {
				unsigned long long id, size;
				struct stat st;
				char path[700];

				if (!pass) {
					if (kind == 'D')
						set_add(&deleted, name);
					continue;
				}
				if (kind != 'F' || sscanf(name, "w%*d-%llu-%llu", &id, &size) != 2)
					continue;
				snprintf(path, sizeof(path), "%s/%s", c->mnt, name);
				if (stat(path, &st)) { /* deleted later, or lost */
					if (!set_has(&deleted, name)) {
						fprintf(stderr, "round %ld: durable %s is missing\n", round,
							name);
						bad++;
					}
					continue;
				}
				bad += check_file(c, round, name, id, size, b);
				(*files)++;
			}
			if (j)
				fclose(j);
		}
		set_free(&deleted);
	}
	free(b);
	return bad;
}

static void reset_journal(const struct pcut *c)
{
	char p[700];

	for (int w = 0; w < c->writers; w++) { /* keep what is on the device: rebuild from it */
		DIR *d = opendir(c->mnt);
		struct dirent *e;
		char mine[16];
		FILE *j;

		snprintf(p, sizeof(p), "%s.%d", c->journal, w);
		j = fopen(p, "w");
		snprintf(mine, sizeof(mine), "w%d-", w);
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, mine, strlen(mine)))
				fprintf(j, "F %s\n", e->d_name);
		if (d)
			closedir(d);
		fclose(j);
	}
}

static int powercut_loop(int argc, char **argv)
{
	static const struct option lo[] = {{"bin", 1, NULL, 'b'}, {"rounds", 1, NULL, 'r'},
					   {"writers", 1, NULL, 'w'}, {"fill", 1, NULL, 'f'},
					   {"seed", 1, NULL, 'x'}, {"direct", 0, NULL, 'd'},
					   {NULL, 0, NULL, 0}};
	struct pcut c = {.writers = 4, .fill = 85, .opts = "cp_interval=5"};
	long rounds = 500, r, files, yields = 0;
	uint64_t seed = 1;
	double t0 = now();
	int opt;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'b': c.bin = optarg; break;
		case 'r': rounds = atol(optarg); break;
		case 'w': c.writers = atoi(optarg); break;
		case 'f': c.fill = atoi(optarg); break;
		case 'x': seed = strtoull(optarg, NULL, 0); break;
		case 'd': c.opts = "cp_interval=5,dev_direct"; break;
		default: return 2;
		}
	}
	if (optind + 2 != argc || !c.bin)
		return 2;
	c.img = argv[optind];
	c.mnt = argv[optind + 1];
	snprintf(c.journal, sizeof(c.journal), "%s.journal", c.img);
	for (r = 0; r < rounds; r++) {
		uint64_t rs = seed * 7919 + (uint64_t)r;
		struct zemu_powercut_result res;
		pid_t d = mount_zlfs(&c), pids[16];
		int w, bad;

		if (d < 0)
			die("round %ld (seed %llu): the filesystem does not mount", r,
			    (unsigned long long)rs);
		if (r == 0)
			reset_journal(&c);
		else if ((bad = verify(&c, r, &files)))
			die("round %ld (seed %llu): %d files wrong after the power cut", r,
			    (unsigned long long)rs, bad);
		rng = rs;
		for (w = 0; w < c.writers && w < 16; w++)
			if (!(pids[w] = fork()))
				writer(&c, w, rs * 31 + (uint64_t)w);
		usleep((useconds_t)(200000 + rnd(1800000)));
		/* the cut lands in the same GC policy */
		yields += ctl_stat_sum(&c, "(read|bulk)_yields");
		kill(d, SIGKILL);
		waitpid(d, NULL, 0);
		for (bad = 0, w = 0; w < c.writers && w < 16; w++) {
			int st = 0;

			if (waitpid(pids[w], &st, 0) == pids[w] && WIFEXITED(st) &&
			    WEXITSTATUS(st) == 3)
				bad++;
		}
		run("fusermount3 -u %s 2>/dev/null", c.mnt);
		if (bad)
			die("round %ld (seed %llu): %d writers read back wrong data before the "
			    "cut", r, (unsigned long long)rs, bad);
		if (zemu_powercut_ex(c.img, -1, rs | 1, (int)rnd(2), &res) < 0)
			die("round %ld: power cut failed", r);
		if (r % 25 == 24 || r == rounds - 1) { /* recovery, a clean unmount, then fsck */
			d = mount_zlfs(&c);
			if (d < 0)
				die("round %ld (seed %llu): no mount after the power cut", r,
				    (unsigned long long)rs);
			if ((bad = verify(&c, r, &files)))
				die("round %ld (seed %llu): %d files wrong", r, (unsigned long long)rs,
				    bad);
			run("fusermount3 -u %s", c.mnt);
			waitpid(d, NULL, 0);
			if (run("%s/fsck.zlfs -n %s >/dev/null", c.bin, c.img))
				die("round %ld (seed %llu): fsck.zlfs -n is not clean", r,
				    (unsigned long long)rs);
			printf("round %ld: %ld durable files checked, fsck clean, %.0f s\n", r + 1,
			       files, now() - t0);
			fflush(stdout);
		}
	}
	printf("powercut: %ld rounds, %d writers, 0 failures, %.0f s; GC put off %ld steps for "
	       "reads and bulk writes\n", rounds, c.writers, now() - t0, yields);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "fsstress"))
		return fsstress(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "powercut"))
		return powercut_loop(argc - 1, argv + 1);
	fprintf(stderr, "usage: zlfs-stress fsstress DIR [--procs N] [--seconds S] [--seed X]\n"
			"       zlfs-stress powercut IMAGE MNT --bin DIR [--rounds N] [--writers W]\n"
			"                   [--fill PCT] [--seed X] [--direct]\n");
	return 2;
}
