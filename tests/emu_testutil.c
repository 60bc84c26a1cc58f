/*
 * emu_testutil.c - the helpers of emu_testutil.h.
 */
#include "emu_testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

char img[512], aux[512], lg[512];

struct zemu_create_opts geo_opts(void)
{
	struct zemu_create_opts o = {.size = 8 * ZS, .zone_size = ZS, .zone_capacity = ZCAP,
				     .lblock_size = BLK, .nr_conv = 1};
	return o;
}

void mkimg(const char *name, const struct zemu_create_opts *o)
{
	tu_path(img, sizeof(img), name);
	ck_assert_int_eq(zemu_create(img, o), 0);
}

void mkdefault(const char *name)
{
	struct zemu_create_opts o = geo_opts();
	mkimg(name, &o);
}

struct zdev *opn(const char *path)
{
	struct zdev *d = NULL;
	int ret = zdev_open(path, NULL, &d);

	ck_assert_msg(ret == 0, "open %s: %d", path, ret);
	return d;
}

struct zdev *opn_direct(const char *path)
{
	struct zdev_open_opts o = {.direct = 1};
	struct zdev *d = NULL;
	int ret = zdev_open(path, &o, &d);

	if (ret == -EINVAL)
		return NULL;
	ck_assert_msg(ret == 0, "open %s with O_DIRECT: %d", path, ret);
	return d;
}

uint64_t zs(uint32_t z) { return z * ZS; }

void pattern(void *buf, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 12345;
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345;
		p[i] = (uint8_t)(x >> 16);
	}
}

int wr(struct zdev *d, uint64_t off, size_t len, uint32_t seed)
{
	void *b = zdev_buf_alloc(len);
	int ret;

	ck_assert_ptr_nonnull(b);
	pattern(b, len, seed);
	ret = zdev_write(d, b, len, off);
	zdev_buf_free(b);
	return ret;
}

int buf_holds(const void *buf, size_t len, uint32_t seed)
{
	uint8_t *e = malloc(len);
	int ok;

	ck_assert_ptr_nonnull(e);
	if (seed)
		pattern(e, len, seed);
	else
		memset(e, 0, len);
	ok = !memcmp(buf, e, len);
	free(e);
	return ok;
}

int holds(struct zdev *d, uint64_t off, size_t len, uint32_t seed)
{
	uint8_t *b = zdev_buf_alloc(len);
	int ok;

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(zdev_read(d, b, len, off), 0);
	ok = buf_holds(b, len, seed);
	zdev_buf_free(b);
	return ok;
}

struct zdev_zone rep(struct zdev *d, uint32_t z)
{
	struct zdev_zone zone;

	ck_assert_int_eq(zdev_report_one(d, z, &zone), 0);
	return zone;
}

void expect_zone(struct zdev *d, uint32_t z, int cond, uint64_t wp)
{
	struct zdev_zone zone = rep(d, z);

	ck_assert_msg(zone.cond == cond, "zone %u cond %s, expected %s", z,
		      zdev_cond_name(zone.cond), zdev_cond_name(cond));
	ck_assert_msg(zone.wp == wp, "zone %u wp %llu, expected %llu", z,
		      (unsigned long long)zone.wp, (unsigned long long)wp);
}


uint64_t kblk(uint32_t i) { return KZS * (1 + i / KPER) + (i % KPER) * BLK; }

void kill_child(const char *path, int pipefd)
{
	struct zdev *d;
	uint32_t n = 0;

	if (zdev_open(path, NULL, &d))
		_exit(3);
	for (;;) {
		if (n >= 7 * KPER)
			break;
		if (wr(d, kblk(n), BLK, 1000 + n))
			_exit(4);
		if (wr(d, (n % 16) * BLK, BLK, 5000 + n))
			_exit(5);
		n++;
		if (n % 5 == 0) {
			if (zdev_flush(d))
				_exit(6);
			if (write(pipefd, &n, sizeof(n)) != sizeof(n))
				_exit(7);
		}
	}
	pause();
	_exit(0);
}

int kill_after(void (*child)(const char *path, int pipefd), const char *path, useconds_t delay_us)
{
	int p[2], st;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		child(path, p[1]);
		_exit(0);
	}
	close(p[1]);
	usleep(delay_us);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child died early: %d", st);
	return p[0];
}

int conv_version_ok(struct zdev *d, uint32_t b, uint32_t flushed)
{
	uint32_t last = b + (flushed - 1 - b) / 16 * 16;

	for (uint32_t j = last; j < last + 16 * 8; j += 16)
		if (holds(d, b * BLK, BLK, 5000 + j))
			return 1;
	return 0;
}

char bin[512];

int file_has(const char *path, const char *needle)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}
