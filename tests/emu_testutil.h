/*
 * emu_testutil.h - helpers shared by the emulator's test files (test_emu*.c, test_ftl.c,
 * test_nbd.c): the default test geometry, images, patterned writes and reads, zone checks,
 * the child a kill test kills, and the zlfs-emu command.
 */
#ifndef ZLFS_EMU_TESTUTIL_H
#define ZLFS_EMU_TESTUTIL_H

#include "testutil.h"
#include "zdev.h"
#include "zdev_emu.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KB 1024ull
#define BLK 4096u
/* default test geometry: 8 zones of 64K, zone 0 conventional, sequential capacity 48K */
#define ZS (64 * KB)
#define ZCAP (48 * KB)

/* Kill tests: zones big enough that the child is still writing when it is killed. */
#define KZS (4ull << 20)
#define KPER (uint32_t)(KZS / BLK)

/* Scratch paths of the test running: the image, a second file, a write log. */
extern char img[512], aux[512], lg[512];
/* The zlfs-emu binary, set by the tests that run it. */
extern char bin[512];

struct zemu_create_opts geo_opts(void);
void mkimg(const char *name, const struct zemu_create_opts *o);
void mkdefault(const char *name);
struct zdev *opn(const char *path);
/* The same with O_DIRECT; NULL where the file system has no O_DIRECT (tmpfs). */
struct zdev *opn_direct(const char *path);
uint64_t zs(uint32_t z);
void pattern(void *buf, size_t len, uint32_t seed);
int wr(struct zdev *d, uint64_t off, size_t len, uint32_t seed);
/* 1 if BUF holds pattern SEED (or zeros when SEED is 0). */
int buf_holds(const void *buf, size_t len, uint32_t seed);
/* 1 if [off, off+len) holds pattern SEED (or zeros when SEED is 0). */
int holds(struct zdev *d, uint64_t off, size_t len, uint32_t seed);
struct zdev_zone rep(struct zdev *d, uint32_t z);
void expect_zone(struct zdev *d, uint32_t z, int cond, uint64_t wp);
/* Block I of the kill tests' sequential writes. */
uint64_t kblk(uint32_t i);
/* The child writes blocks (zones 1..7 in order, plus conventional blocks) and reports through
 * PIPEFD how many sequential blocks were flushed, after each flush returned. */
void kill_child(const char *path, int pipefd);
/* Run CHILD(PATH, the pipe's write end) in a forked process, SIGKILL it after DELAY_US, and
 * return the pipe's read end, holding what the child wrote. Asserts the child was killed. */
int kill_after(void (*child)(const char *path, int pipefd), const char *path, useconds_t delay_us);
/* Conventional block B was last written with version i (pattern 5000 + i, i = B mod 16)
 * before FLUSHED: it must hold that version or a newer one (flushed later than reported). */
int conv_version_ok(struct zdev *d, uint32_t b, uint32_t flushed);
/* Whether the file PATH contains NEEDLE (in its first 8 KiB). */
int file_has(const char *path, const char *needle);

/* Each test file of test_emu adds its test case to the suite. */
void emu_rules_tests(Suite *s);
void emu_durability_tests(Suite *s);
void emu_hostcrash_tests(Suite *s);
void emu_log_tests(Suite *s);
void emu_misc_tests(Suite *s);
void emu_timing_tests(Suite *s);

#endif
