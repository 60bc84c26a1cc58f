/*
 * zdev_test.h - what test_zdev.c's fixture gives the tests that share it (test_wbuf.c): the
 * device under test, fresh for each test, and helpers that check its zones.
 */
#ifndef ZLFS_ZDEV_TEST_H
#define ZLFS_ZDEV_TEST_H

#include "zdev.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>

extern struct zdev *dev;
extern const struct zdev_geometry *geo;

struct zdev_zone zone_info(uint32_t z);
/* Index of the Nth sequential zone; fails the test when the device has fewer. */
uint32_t need_seq_zone(uint32_t nth);
/* Reset zone Z and check that it is empty. */
void reset_zone(uint32_t z);
/* LEN bytes of the pattern for device offset OFF and SEED, in a device-aligned buffer. */
void *pattern(size_t len, uint64_t off, uint64_t seed);
/* Read LEN bytes at OFF and check they hold that pattern. */
void check_pattern(uint64_t off, size_t len, uint64_t seed);

/* test_wbuf.c: add the write buffer's tests to TC. */
void wbuf_tests(TCase *tc);

#endif
