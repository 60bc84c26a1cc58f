/*
 * test_emu_misc.c - Check tests of the emulator (fs/zdev_emu*.c): corrupt images, threads,
 * O_DIRECT, and the zlfs-emu command.
 * May call: zdev.h, zdev_emu.h, emu_testutil.h, libc.
 */
#include "emu_testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- bad images ----------------------------------------------------------------------------- */

static void poke(const char *path, off_t off, uint8_t xor)
{
	int fd = open(path, O_RDWR);
	uint8_t c;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &c, 1, off), 1);
	c ^= xor;
	ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

START_TEST(t_corrupt)
{
	struct zdev *d = NULL;
	FILE *f;

	mkdefault("corrupt.img");
	poke(img, 20, 0x10); /* nr_zones */
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EUCLEAN);
	ck_assert_ptr_null(d);
	mkdefault("corrupt.img");
	poke(img, 4096 + 3 * 32 + 1, 0x01); /* zone 3's table entry */
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EUCLEAN);
	mkdefault("corrupt.img");
	ck_assert_int_eq(truncate(img, 4 * ZS), 0);
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EUCLEAN);
	mkdefault("corrupt.img");
	poke(img, 8, 0x70); /* version 0x73: no such version */
	ck_assert_int_eq(zdev_open(img, NULL, &d), -EINVAL);
	/* not an image at all */
	tu_path(aux, sizeof(aux), "plain.txt");
	f = fopen(aux, "w");
	ck_assert_ptr_nonnull(f);
	fputs("hello, I am not a zoned device\n", f);
	fclose(f);
	ck_assert_int_eq(zdev_open(aux, NULL, &d), -ENODEV);
	tu_path(aux, sizeof(aux), "empty.bin");
	f = fopen(aux, "w");
	fclose(f);
	ck_assert_int_eq(zdev_open(aux, NULL, &d), -ENODEV);
	tu_path(aux, sizeof(aux), "adir");
	mkdir(aux, 0755);
	ck_assert_int_eq(zdev_open(aux, NULL, &d), -ENODEV);
	ck_assert_int_eq(zdev_open("/dev/null", NULL, &d), -ENODEV);
	ck_assert_ptr_null(d);
}
END_TEST


/* ---- threads and O_DIRECT ------------------------------------------------------------------- */

struct thr_arg {
	struct zdev *d;
	uint32_t zone;
	int err;
};

static void *thr_write(void *p)
{
	struct thr_arg *a = p;
	uint8_t *b = zdev_buf_alloc(BLK);

	for (uint32_t i = 0; i < ZCAP / BLK && !a->err; i++) {
		pattern(b, BLK, a->zone * 100 + i);
		a->err = zdev_write(a->d, b, BLK, zs(a->zone) + i * BLK);
		if (!a->err)
			a->err = zdev_read(a->d, b, BLK, zs(a->zone));
		if (!a->err && i % 4 == 3)
			a->err = zdev_flush(a->d);
	}
	zdev_buf_free(b);
	return NULL;
}

START_TEST(t_threads)
{
	struct thr_arg a[6];
	pthread_t t[6];
	struct zdev *d;

	mkdefault("threads.img");
	d = opn(img);
	for (int i = 0; i < 6; i++) {
		a[i] = (struct thr_arg){.d = d, .zone = 1 + (uint32_t)i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, thr_write, &a[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(a[i].err, 0);
	}
	for (uint32_t z = 1; z <= 6; z++) {
		expect_zone(d, z, ZDEV_COND_FULL, zs(z) + ZS);
		for (uint32_t i = 0; i < ZCAP / BLK; i++)
			ck_assert(holds(d, zs(z) + i * BLK, BLK, z * 100 + i));
	}
	zdev_close(d);
}
END_TEST

START_TEST(t_direct)
{
	struct zemu_create_opts o = {.size = 8 * ZS, .zone_size = ZS, .lblock_size = 512,
				     .nr_conv = 1};
	struct zdev *d;

	mkimg("direct.img", &o);
	d = opn_direct(img);
	if (!d)
		return; /* this file system has no O_DIRECT */
	ck_assert_int_eq(wr(d, zs(1), 512, 1), 0);
	ck_assert_int_eq(wr(d, zs(1) + 512, 3 * 512, 2), 0);
	ck_assert_int_eq(wr(d, 1536, 1024, 3), 0);
	ck_assert_int_eq(zdev_flush(d), 0);
	ck_assert_int_eq(wr(d, zs(1) + 2048, 512, 4), 0);
	ck_assert_int_eq(wr(d, 1536, 512, 5), 0);
	ck_assert(holds(d, zs(1), 512, 1));
	ck_assert(holds(d, zs(1) + 512, 3 * 512, 2));
	ck_assert(holds(d, zs(1) + 2048, 512, 4));
	ck_assert(holds(d, zs(1) + 2560, 1024, 0));
	ck_assert_int_eq(zdev_zone_finish(d, 2), 0);
	ck_assert_int_eq(zemu_inject_dev(d, ZEMU_FAULT_EIO_READ, zs(3)), 0);
	ck_assert_int_eq(zemu_powercut_dev(d, 0, 0, 0), 0);
	ck_assert(holds(d, zs(1) + 2048, 512, 0));
	ck_assert(holds(d, 1536, 1024, 3));
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2048);
	expect_zone(d, 2, ZDEV_COND_FULL, zs(2) + ZS);
	zdev_close(d);
	d = opn_direct(img);
	ck_assert_ptr_nonnull(d);
	expect_zone(d, 1, ZDEV_COND_CLOSED, zs(1) + 2048);
	ck_assert(holds(d, zs(1), 512, 1));
	zdev_close(d);
}
END_TEST


/* ---- the zlfs-emu command ------------------------------------------------------------------- */


START_TEST(t_cli)
{
	char out[512], rimg[512];
	struct zdev *d;

	tu_bin(bin, sizeof(bin), "zlfs-emu");
	tu_path(img, sizeof(img), "cli.img");
	tu_path(lg, sizeof(lg), "cli.log");
	tu_path(out, sizeof(out), "cli.out");
	tu_path(rimg, sizeof(rimg), "cli-replayed.img");
	ck_assert_int_eq(tu_sh("%s --version > %s", bin, out), 0);
	ck_assert(file_has(out, "zlfs-emu "));
	ck_assert_int_eq(tu_sh("%s --help > %s", bin, out), 0);
	ck_assert(file_has(out, "powercut IMAGE"));
	ck_assert_int_eq(tu_sh("%s 2>/dev/null", bin), 2);
	ck_assert_int_eq(tu_sh("%s frobnicate 2>/dev/null", bin), 2);
	ck_assert_int_eq(tu_sh("%s create %s 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s create %s --size 1Q --zone-size 64K 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s create %s --size 512K --zone-size 3 2>/dev/null", bin, img), 1);
	ck_assert_int_eq(tu_sh("%s report %s.none 2>/dev/null", bin, img), 1);
	ck_assert_int_eq(tu_sh("%s create %s --size 512K --zone-size 64K --zone-capacity 48K "
			       "--conventional 1 --max-open 3 --max-active 4 --log %s",
			       bin, img, lg), 0);
	ck_assert_int_eq(tu_sh("%s report %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "8 zones (1 conventional)"));
	ck_assert(file_has(out, "zone capacity 49152"));
	ck_assert(file_has(out, "max open 3, max active 4"));
	ck_assert(file_has(out, "     7       458752        65536        49152       458752  "
				"seq-write-required   empty"));
	ck_assert_int_eq(tu_sh("%s report %s --json > %s", bin, img, out), 0);
	ck_assert(file_has(out, "\"zone\": 7, \"start\": 458752"));

	/* inject: a bare number is a zone, a suffix makes it an offset */
	ck_assert_int_eq(tu_sh("%s inject %s offline 3 > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s readonly 256K > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s eio-read 8K > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s eio-write --offset 4096 > /dev/null", bin, img), 0);
	ck_assert_int_eq(tu_sh("%s inject %s offline 9 2>/dev/null", bin, img), 1);
	ck_assert_int_eq(tu_sh("%s inject %s melt 1 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s inject %s offline 0 2>/dev/null", bin, img), 1);
	d = opn(img);
	expect_zone(d, 3, ZDEV_COND_OFFLINE, UINT64_MAX);
	expect_zone(d, 4, ZDEV_COND_RDONLY, UINT64_MAX);
	{
		uint8_t *b = zdev_buf_alloc(BLK);
		ck_assert_int_eq(zdev_read(d, b, BLK, 8192), -EIO);
		ck_assert_int_eq(zdev_write(d, b, BLK, 4096), -EIO);
		zdev_buf_free(b);
	}
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(wr(d, zs(2) + i * BLK, BLK, 20 + i), 0);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s report %s > %s", bin, img, out), 0);
	ck_assert(file_has(out, "offline"));
	ck_assert(file_has(out, "unflushed writes 3"));

	/* log-count, replay */
	ck_assert_int_eq(tu_sh("%s log-count %s > %s", bin, lg, out), 0);
	ck_assert(file_has(out, "3\n"));
	ck_assert_int_eq(tu_sh("%s replay %s %s 2 %s > /dev/null", bin, img, lg, rimg), 0);
	d = opn(rimg);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + 2 * BLK);
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s replay %s %s 3 %s --torn > /dev/null", bin, img, lg, rimg), 0);
	d = opn(rimg);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + 3 * BLK); /* a one-block write keeps its block */
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s replay %s %s 99 %s 2>/dev/null", bin, img, lg, rimg), 1);
	ck_assert_int_eq(tu_sh("%s replay %s %s 2>/dev/null", bin, img, lg), 2);

	/* powercut */
	ck_assert_int_eq(tu_sh("%s powercut %s --keep-prefix 2 --seed 3 2>/dev/null", bin, img), 2);
	ck_assert_int_eq(tu_sh("%s powercut %s --keep-prefix 1 > %s", bin, img, out), 0);
	ck_assert(file_has(out, "kept 1 of 3 unflushed writes, dropped 2"));
	d = opn(img);
	expect_zone(d, 2, ZDEV_COND_CLOSED, zs(2) + BLK);
	ck_assert(holds(d, zs(2), BLK, 20));
	ck_assert(holds(d, zs(2) + BLK, BLK, 0));
	zdev_close(d);
	ck_assert_int_eq(tu_sh("%s powercut %s --seed 42 --torn > %s", bin, img, out), 0);
	ck_assert(file_has(out, "of 0 unflushed writes"));
}
END_TEST

void emu_misc_tests(Suite *s)
{
	TCase *tc = tcase_create("misc");

	tcase_add_test(tc, t_corrupt);
	tcase_add_test(tc, t_threads);
	tcase_add_test(tc, t_direct);
	tcase_add_test(tc, t_cli);
	suite_add_tcase(s, tc);
}
