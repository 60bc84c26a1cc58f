/*
 * test_posix_data.c - file data and space, through the mounted daemon: open flags, random
 * unaligned writes against a model, holes, mmap and O_DIRECT, an unlinked file kept open,
 * fallocate and hole punching, statfs accounting, fsync, the file tree's level boundaries up
 * to the largest file, and a 2 GiB sparse file. Part of test_posix (test_posix.c).
 */
#include "posix_testutil.h"
#include "format.h"
#include "zlfs_ioctl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- files: create, open flags, read, write -------------------------------------------- */

START_TEST(t_files)
{
	static uint8_t model[300000], got[300000];
	size_t msize = 0, n;
	uint64_t seed = 12345;
	uint8_t *big, tmp[16];
	struct stat st;
	int fd, i;

	OK(mkdir(P("files"), 0755));
	fd = xopen(P("files/a"), O_CREAT | O_EXCL | O_RDWR, 0644);
	FAILS(open(P("files/a"), O_CREAT | O_EXCL | O_RDWR, 0644), EEXIST);
	write_all(fd, "hello world", 11, 0);
	close(fd);
	ck_assert_int_eq(lst(P("files/a")).st_size, 11);
	ck_assert_int_eq(lst(P("files/a")).st_mode, S_IFREG | 0644);
	expect_content(P("files/a"), "hello world", 11);
	/* O_TRUNC empties an existing file; O_CREAT without O_EXCL opens it. */
	fd = xopen(P("files/a"), O_CREAT | O_WRONLY | O_TRUNC, 0600);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(st.st_mode, S_IFREG | 0644); /* the mode of an existing file stays */
	close(fd);
	ck_assert_int_eq(lst(P("files/a")).st_size, 0);
	ck_assert_int_eq(lst(P("files/a")).st_blocks, 0);
	/* O_APPEND writes at the end whatever the offset. */
	put_file(P("files/app"), "abc", 3, 0644);
	fd = xopen(P("files/app"), O_WRONLY | O_APPEND, 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	ck_assert_int_eq(write(fd, "def", 3), 3);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 6);
	close(fd);
	expect_content(P("files/app"), "abcdef", 6);
	/* the umask applies to what is created */
	umask(027);
	put_file(P("files/umask"), "", 0, 0666);
	OK(mkdir(P("files/umaskdir"), 0777));
	umask(0);
	ck_assert_int_eq(lst(P("files/umask")).st_mode, S_IFREG | 0640);
	ck_assert_int_eq(lst(P("files/umaskdir")).st_mode, S_IFDIR | 0750);
	FAILS(open(P("files/none"), O_RDONLY), ENOENT);
	FAILS(open(P("files/nodir/x"), O_CREAT | O_WRONLY, 0644), ENOENT);
	FAILS(open(P("files/a/x"), O_CREAT | O_WRONLY, 0644), ENOTDIR);
	FAILS(open(P("files/a"), O_RDONLY | O_DIRECTORY), ENOTDIR);
	FAILS(open(P("files"), O_WRONLY), EISDIR);

	/* Random unaligned writes against a model, checked after dropping the page cache. */
	fd = xopen(P("files/model"), O_CREAT | O_RDWR, 0644);
	for (i = 0; i < 240; i++) {
		uint64_t off = rnd(&seed) % 280000, len = 1 + rnd(&seed) % 20000;

		if (i % 7 == 0) /* exactly across a block boundary */
			off = (rnd(&seed) % 60) * BLK + BLK - 1 - rnd(&seed) % 3, len = 2 + rnd(&seed) % 5;
		if (i % 11 == 0) /* whole aligned blocks */
			off = (rnd(&seed) % 60) * BLK, len = BLK * (1 + rnd(&seed) % 4);
		if (off + len > sizeof(model))
			len = sizeof(model) - off;
		pat_fill(model + off, len, (uint64_t)i, off);
		write_all(fd, model + off, len, (off_t)off);
		if (off + len > msize)
			msize = off + len;
		if (i % 40 == 39) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			ck_assert_int_eq(pread(fd, got, sizeof(got), 0), (ssize_t)msize);
			ck_assert_msg(!memcmp(got, model, msize), "model file differs after op %d", i);
		}
	}
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)msize);
	/* Reads at and past the end. */
	ck_assert_int_eq(pread(fd, tmp, sizeof(tmp), (off_t)msize), 0);
	ck_assert_int_eq(pread(fd, tmp, sizeof(tmp), (off_t)msize + 100000), 0);
	ck_assert_int_eq(pread(fd, tmp, sizeof(tmp), (off_t)msize - 5), 5);
	ck_assert(!memcmp(tmp, model + msize - 5, 5));
	close(fd);
	expect_content(P("files/model"), model, msize);

	/* A hole reads as zeros and holds no block. */
	fd = xopen(P("files/hole"), O_CREAT | O_RDWR, 0644);
	write_all(fd, "z", 1, 1000000);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 1000001);
	ck_assert_int_eq(st.st_blocks, BLK / 512);
	close(fd);
	big = (uint8_t *)get_file(P("files/hole"), &n);
	ck_assert_int_eq(n, 1000001);
	ck_assert(is_zero(big, 1000000));
	ck_assert_int_eq(big[1000000], 'z');
	free(big);

	/* shared mmap: stores reach the file through the page cache's write-back */
	{
		size_t len = 3 * BLK + 100;
		uint8_t *m, *want = malloc(len);

		pat_fill(want, len, 4711, 0);
		fd = xopen(P("files/mmap"), O_CREAT | O_RDWR, 0644);
		OK(ftruncate(fd, (off_t)len));
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ck_assert(m != MAP_FAILED);
		memcpy(m, want, len);
		ck_assert_int_eq(msync(m, len, MS_SYNC), 0);
		munmap(m, len);
		ck_assert_int_eq(fsync(fd), 0);
		close(fd);
		expect_content(P("files/mmap"), want, len);
		free(want);
	}
	/* O_DIRECT: aligned reads and writes bypass the page cache */
	{
		void *al;

		ck_assert_int_eq(posix_memalign(&al, BLK, 2 * BLK), 0);
		pat_fill(al, 2 * BLK, 4712, 0);
		fd = xopen(P("files/direct"), O_CREAT | O_RDWR | O_DIRECT, 0644);
		ck_assert_int_eq(pwrite(fd, al, 2 * BLK, BLK), 2 * BLK);
		memset(al, 0, 2 * BLK);
		ck_assert_int_eq(pread(fd, al, 2 * BLK, 0), 2 * BLK);
		ck_assert(is_zero(al, BLK));
		pat_fill(tmp, sizeof(tmp), 4712, 0);
		ck_assert(!memcmp((uint8_t *)al + BLK, tmp, sizeof(tmp)));
		close(fd);
		free(al);
	}

	/* One write larger than the FUSE maximum (split by the kernel). */
	big = malloc(3 << 20);
	pat_fill(big, 3 << 20, 777, 0);
	put_file(P("files/big"), big, 3 << 20, 0644);
	expect_content(P("files/big"), big, 3 << 20);
	ck_assert_int_eq(lst(P("files/big")).st_blocks, (3 << 20) / 512);
	free(big);
}
END_TEST

/* ---- an unlinked file stays usable while open; its space returns after close ---------- */

START_TEST(t_unlink_open)
{
	size_t len = 32u << 20, i;
	uint8_t *buf = malloc(len), tail[4];
	struct statvfs s0, s1, s2, s3;
	struct stat st;
	int fd, dfd;
	double t0;

	pat_fill(buf, len, 4242, 0);
	OK(mkdir(P("u"), 0755));
	fs_sync();
	s0 = vfs();
	put_file(P("u/big"), buf, len, 0644);
	fs_sync();
	s1 = vfs();
	ck_assert_msg(s1.f_bfree <= s0.f_bfree - len / BLK, "free %llu -> %llu after %zu blocks",
		      (unsigned long long)s0.f_bfree, (unsigned long long)s1.f_bfree, len / BLK);
	ck_assert_uint_eq(s1.f_bavail, s1.f_bfree);

	fd = xopen(P("u/big"), O_RDWR, 0);
	OK(unlink(P("u/big")));
	FAILS(lstat(P("u/big"), &st), ENOENT);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_nlink, 0);
	ck_assert_int_eq(st.st_size, (off_t)len);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	for (i = 0; i < len; i += len / 8) {
		uint8_t chunk[8192];

		ck_assert_int_eq(pread(fd, chunk, sizeof(chunk), (off_t)i), (ssize_t)sizeof(chunk));
		ck_assert_msg(!memcmp(chunk, buf + i, sizeof(chunk)), "unlinked file at %zu", i);
	}
	write_all(fd, "tail", 4, (off_t)len);
	ck_assert_int_eq(fsync(fd), 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	ck_assert_int_eq(pread(fd, tail, 4, (off_t)len), 4);
	ck_assert(!memcmp(tail, "tail", 4));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)len + 4);
	fs_sync();
	s2 = vfs();
	ck_assert_msg(s2.f_bfree <= s1.f_bfree, "space came back while the file was open");
	close(fd);

	/* The kernel forgets the inode shortly after the last close; then a checkpoint frees
	 * the zones the data filled. At most the two partly shared zones stay used. */
	dfd = xopen(P("u"), O_RDONLY | O_DIRECTORY, 0);
	t0 = now_s();
	do {
		sleep_ms(50);
		ck_assert_int_eq(fsync(dfd), 0);
		s3 = vfs();
	} while (s3.f_bfree + 2 * ZONE_USABLE + 256 < s0.f_bfree && now_s() - t0 < 10);
	close(dfd);
	ck_assert_msg(s3.f_bfree + 2 * ZONE_USABLE + 256 >= s0.f_bfree,
		      "free blocks: %llu before, %llu written, %llu after close+sync",
		      (unsigned long long)s0.f_bfree, (unsigned long long)s1.f_bfree,
		      (unsigned long long)s3.f_bfree);
	ck_assert_msg(s3.f_bfree >= s2.f_bfree + len / BLK - 2 * ZONE_USABLE,
		      "only %llu blocks came back", (unsigned long long)(s3.f_bfree - s2.f_bfree));
	free(buf);
}
END_TEST

/* ---- fallocate --------------------------------------------------------------------------- */

/* KEEP_SIZE reserves: statfs counts the blocks as used and st_blocks as the file's, the size
 * stays; writing into the range spends the reservation, truncating gives it back. */
START_TEST(t_fallocate_reserve)
{
	uint8_t buf[8192];
	uint64_t before, reserved, after;
	struct stat st;
	int fd;

	fd = xopen(P("resv"), O_CREAT | O_RDWR, 0644);
	OK(pwrite(fd, "x", 1, 0) == 1 ? 0 : -1);
	before = vfs().f_bfree;
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 << 20));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 1);
	ck_assert_int_eq(st.st_blocks, 2048 * 8); /* the written block and 2047 reserved */
	reserved = vfs().f_bfree;
	ck_assert_msg(before - reserved >= 2047 && before - reserved <= 2047 + 16,
		      "statfs free went from %llu to %llu for 2047 reserved blocks",
		      (unsigned long long)before, (unsigned long long)reserved);
	/* again over the same range: nothing more is reserved */
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 << 20));
	ck_assert_uint_le(reserved - vfs().f_bfree, 2);
	memset(buf, 'r', sizeof(buf));
	OK(pwrite(fd, buf, sizeof(buf), 4 << 20) == (ssize_t)sizeof(buf) ? 0 : -1);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_blocks, 2048 * 8); /* written blocks were reserved ones */
	ck_assert_int_eq(st.st_size, (4 << 20) + 8192);
	OK(ftruncate(fd, 4096));
	after = vfs().f_bfree;
	ck_assert_msg(after + 4 >= before, "truncating gave back %llu of %llu reserved blocks",
		      (unsigned long long)(after - reserved), (unsigned long long)(before - reserved));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_blocks, 8);
	/* more than the free space: refused, nothing reserved */
	FAILS(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(before + 4096) * 4096), ENOSPC);
	ck_assert_uint_le(after - vfs().f_bfree, 2);
	close(fd);
	OK(unlink(P("resv")));
}
END_TEST

/* ZERO_RANGE reads as zeros (partial blocks too) and extends the size unless KEEP_SIZE;
 * COLLAPSE_RANGE and INSERT_RANGE (zlfs's ioctls) move the blocks after the offset. */
START_TEST(t_fallocate_shift)
{
	uint8_t *buf = malloc(16 * 4096), *want = malloc(32 * 4096);
	struct zlfs_ioc_range r;
	int fd, i;

	for (i = 0; i < 16; i++)
		memset(buf + i * 4096, 'a' + i, 4096);
	put_file(P("shift"), buf, 16 * 4096, 0644);
	fd = xopen(P("shift"), O_RDWR, 0);
	OK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 4096 + 10, 2 * 4096));
	memcpy(want, buf, 16 * 4096);
	memset(want + 4096 + 10, 0, 2 * 4096);
	OK(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 15 * 4096, 8 * 4096));
	memset(want + 15 * 4096, 0, 4096);
	close(fd);
	expect_content(P("shift"), want, 16 * 4096);
	fd = xopen(P("shift"), O_RDWR, 0);
	OK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 16 * 4096, 4096)); /* past EOF: grows */
	memset(want + 16 * 4096, 0, 4096);
	/* collapse blocks 2-4: blocks 5.. move down by 3 */
	r = (struct zlfs_ioc_range){2 * 4096, 3 * 4096};
	OK(ioctl(fd, ZLFS_IOC_COLLAPSE_RANGE, &r));
	memmove(want + 2 * 4096, want + 5 * 4096, 12 * 4096);
	close(fd);
	expect_content(P("shift"), want, 14 * 4096);
	/* insert two blocks at block 1 */
	fd = xopen(P("shift"), O_RDWR, 0);
	r = (struct zlfs_ioc_range){4096, 2 * 4096};
	OK(ioctl(fd, ZLFS_IOC_INSERT_RANGE, &r));
	memmove(want + 3 * 4096, want + 4096, 13 * 4096);
	memset(want + 4096, 0, 2 * 4096);
	/* the rules of fallocate(2): aligned, and a collapse must end before EOF */
	r = (struct zlfs_ioc_range){100, 4096};
	FAILS(ioctl(fd, ZLFS_IOC_COLLAPSE_RANGE, &r), EINVAL);
	r = (struct zlfs_ioc_range){0, 16 * 4096};
	FAILS(ioctl(fd, ZLFS_IOC_COLLAPSE_RANGE, &r), EINVAL);
	r = (struct zlfs_ioc_range){16 * 4096, 4096};
	FAILS(ioctl(fd, ZLFS_IOC_INSERT_RANGE, &r), EINVAL);
	close(fd);
	expect_content(P("shift"), want, 16 * 4096);
	free(buf);
	free(want);
}
END_TEST

/* Every block of PATH's first N read with O_DIRECT in 128 KiB requests from the start (a
 * stream the daemon reads ahead of) and compared with WANT; 0 when all match. */
static int direct_differs(const char *path, const uint8_t *want, size_t n)
{
	uint8_t *b = aligned_alloc(4096, 32 * 4096);
	int fd = xopen(path, O_RDONLY | O_DIRECT, 0), bad = 0;

	for (size_t off = 0; off < n * 4096; off += 32 * 4096) {
		size_t len = n * 4096 - off < 32 * 4096 ? n * 4096 - off : 32 * 4096;

		ck_assert_int_eq(pread(fd, b, len, (off_t)off), (ssize_t)len);
		bad += memcmp(b, want + off, len) != 0;
	}
	close(fd);
	free(b);
	return bad;
}

/* A collapse or an insert moves blocks under read-ahead's feet: a window read before it must
 * not serve the blocks that were at those offsets (test_fsx met one, seed 8). */
START_TEST(t_fallocate_shift_readahead)
{
	const size_t n = 512;
	uint8_t *want = malloc((n + 16) * 4096);
	struct zlfs_ioc_range r;
	int fd;

	for (size_t i = 0; i < n * 4096; i++)
		want[i] = (uint8_t)(i / 4096 * 5 + i % 251);
	put_file(P("shift_ra"), want, n * 4096, 0644);
	ck_assert_int_eq(direct_differs(P("shift_ra"), want, n), 0);
	fd = xopen(P("shift_ra"), O_RDWR, 0);
	r = (struct zlfs_ioc_range){16 * 4096, 16 * 4096};
	OK(ioctl(fd, ZLFS_IOC_INSERT_RANGE, &r));
	memmove(want + 32 * 4096, want + 16 * 4096, (n - 16) * 4096);
	memset(want + 16 * 4096, 0, 16 * 4096);
	ck_assert_int_eq(direct_differs(P("shift_ra"), want, n + 16), 0);
	r = (struct zlfs_ioc_range){8 * 4096, 24 * 4096};
	OK(ioctl(fd, ZLFS_IOC_COLLAPSE_RANGE, &r));
	memmove(want + 8 * 4096, want + 32 * 4096, (n - 16) * 4096);
	ck_assert_int_eq(direct_differs(P("shift_ra"), want, n - 8), 0);
	close(fd);
	OK(unlink(P("shift_ra")));
	free(want);
}
END_TEST

START_TEST(t_fallocate)
{
	uint8_t *buf = malloc(65536), *got;
	struct stat st;
	size_t n;
	int fd;

	OK(mkdir(P("fa"), 0755));
	fd = xopen(P("fa/grow"), O_CREAT | O_RDWR, 0644);
	OK(fallocate(fd, 0, 0, 1 << 20));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	OK(fallocate(fd, 0, 4096, 100)); /* inside the file: the size stays */
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 2 << 20, 4096));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	/* the kernel's FUSE module passes neither: zlfs offers them as ioctls (t_fallocate_shift) */
	FAILS(fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), EOPNOTSUPP);
	FAILS(fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, 4096), EOPNOTSUPP);
	FAILS(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP); /* needs KEEP_SIZE */
	FAILS(fallocate(fd, 0, 0, 0), EINVAL);
	FAILS(fallocate(fd, 0, -1, 10), EINVAL);
	close(fd);
	got = (uint8_t *)get_file(P("fa/grow"), &n);
	ck_assert_int_eq(n, 1 << 20);
	ck_assert(is_zero(got, n));
	free(got);

	/* punch: partial blocks at both ends are zeroed, whole blocks inside are freed */
	pat_fill(buf, 65536, 5, 0);
	put_file(P("fa/punch"), buf, 65536, 0644);
	ck_assert_int_eq(lst(P("fa/punch")).st_blocks, 16 * 8);
	fd = xopen(P("fa/punch"), O_RDWR, 0);
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 4096 + 100, 4 * 4096 - 50));
	memset(buf + 4096 + 100, 0, 4 * 4096 - 50);
	close(fd);
	st = lst(P("fa/punch"));
	ck_assert_int_eq(st.st_size, 65536);
	ck_assert_int_eq(st.st_blocks, (16 - 3) * 8); /* blocks 2, 3 and 4 */
	expect_content(P("fa/punch"), buf, 65536);
	/* aligned punch up to and past the end: size kept, tail blocks freed */
	fd = xopen(P("fa/punch"), O_RDWR, 0);
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 12 * 4096, 1 << 20));
	memset(buf + 12 * 4096, 0, 4 * 4096);
	close(fd);
	st = lst(P("fa/punch"));
	ck_assert_int_eq(st.st_size, 65536);
	ck_assert_int_eq(st.st_blocks, (16 - 3 - 4) * 8);
	expect_content(P("fa/punch"), buf, 65536);
	/* within one block */
	fd = xopen(P("fa/punch"), O_RDWR, 0);
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 10, 20));
	memset(buf + 10, 0, 20);
	close(fd);
	ck_assert_int_eq(lst(P("fa/punch")).st_blocks, (16 - 3 - 4) * 8);
	expect_content(P("fa/punch"), buf, 65536);
	free(buf);
}
END_TEST

/* ---- statfs ------------------------------------------------------------------------------- */

START_TEST(t_statfs)
{
	struct statvfs s0 = vfs(), s1, s2;
	size_t len = 24u << 20;
	uint8_t *buf = malloc(len);
	double t0;

	ck_assert_uint_eq(s0.f_bsize, BLK);
	ck_assert_uint_eq(s0.f_frsize, BLK);
	ck_assert_uint_eq(s0.f_namemax, 255);
	ck_assert_uint_gt(s0.f_blocks, s0.f_bfree);
	ck_assert_uint_gt(s0.f_files, s0.f_ffree);
	ck_assert_uint_eq(s0.f_favail, s0.f_ffree);
	OK(mkdir(P("sf"), 0755));
	fs_sync();
	s0 = vfs();
	put_file(P("sf/empty"), "", 0, 0644);
	s1 = vfs();
	ck_assert_uint_eq(s1.f_ffree, s0.f_ffree - 1); /* one inode, no other node */
	pat_fill(buf, len, 31, 0);
	put_file(P("sf/data"), buf, len, 0644);
	fs_sync();
	s1 = vfs();
	ck_assert_uint_le(s1.f_bfree, s0.f_bfree - len / BLK);
	ck_assert_uint_lt(s1.f_ffree, s0.f_ffree - 1); /* the inode and its direct nodes */
	OK(unlink(P("sf/data")));
	OK(unlink(P("sf/empty")));
	t0 = now_s();
	do {
		sleep_ms(50);
		fs_sync();
		s2 = vfs();
	} while ((s2.f_ffree != s0.f_ffree || s2.f_bfree < s1.f_bfree + len / BLK - 2 * ZONE_USABLE) &&
		 now_s() - t0 < 10);
	ck_assert_uint_eq(s2.f_ffree, s0.f_ffree);
	ck_assert_msg(s2.f_bfree >= s1.f_bfree + len / BLK - 2 * ZONE_USABLE,
		      "free %llu -> %llu (written) -> %llu (deleted)", (unsigned long long)s0.f_bfree,
		      (unsigned long long)s1.f_bfree, (unsigned long long)s2.f_bfree);
	free(buf);
}
END_TEST

/* ---- fsync ----------------------------------------------------------------------------------- */

START_TEST(t_fsync)
{
	int fd, dfd;

	OK(mkdir(P("fs"), 0755));
	fd = xopen(P("fs/f"), O_CREAT | O_RDWR, 0644);
	write_all(fd, "sync", 4, 0);
	ck_assert_int_eq(fsync(fd), 0);
	write_all(fd, "data", 4, 4);
	ck_assert_int_eq(fdatasync(fd), 0);
	close(fd);
	dfd = xopen(P("fs"), O_RDONLY | O_DIRECTORY, 0);
	ck_assert_int_eq(fsync(dfd), 0);
	ck_assert_int_eq(fdatasync(dfd), 0);
	close(dfd);
	fd = xopen(g_mnt, O_RDONLY, 0);
	ck_assert_int_eq(syncfs(fd), 0);
	close(fd);
	expect_content(P("fs/f"), "syncdata", 8);
}
END_TEST

/* ---- the file tree's level boundaries: inode addresses, direct, indirect, double ------- */

#define NA_ ((uint64_t)ZLFS_NODE_ADDRS)
#define IA_ ((uint64_t)ZLFS_INODE_ADDRS)
#define L1_ (IA_ + 2 * NA_)
#define L2_ (L1_ + 2 * NA_ * NA_)
#define L3_ (L2_ + NA_ * NA_ * NA_)

static const uint64_t bnd[] = {
	0, IA_ - 1, IA_, IA_ + NA_ - 1, IA_ + NA_, L1_ - 1, L1_, L1_ + NA_ - 1, L1_ + NA_,
	L1_ + NA_ * NA_ - 1, L1_ + NA_ * NA_, L2_ - 1, L2_, L2_ + NA_, L2_ + NA_ * NA_,
	L3_ - 1,
};
#define NBND (sizeof(bnd) / sizeof(bnd[0]))

/* Blocks BND[0..n) hold their pattern; the blocks between them read as zeros. */
static void bnd_verify(int fd, size_t n)
{
	uint8_t buf[BLK], want[BLK];
	struct stat st;
	size_t i;

	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_blocks, (blkcnt_t)n * 8);
	ck_assert_int_eq(st.st_size, n ? (off_t)((bnd[n - 1] + 1) * BLK) : 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	for (i = 0; i < n; i++) {
		pat_fill(want, BLK, bnd[i], 0);
		ck_assert_int_eq(pread(fd, buf, BLK, (off_t)(bnd[i] * BLK)), BLK);
		ck_assert_msg(!memcmp(buf, want, BLK), "block %" PRIu64 " differs", bnd[i]);
		if (bnd[i] && (!i || bnd[i - 1] != bnd[i] - 1)) {
			ck_assert_int_eq(pread(fd, buf, BLK, (off_t)((bnd[i] - 1) * BLK)), BLK);
			ck_assert_msg(is_zero(buf, BLK), "hole before block %" PRIu64, bnd[i]);
		}
	}
}

START_TEST(t_boundaries)
{
	uint8_t buf[BLK];
	struct statvfs s0;
	size_t i;
	int fd;

	fs_sync();
	s0 = vfs();
	fd = xopen(P("bnd"), O_CREAT | O_RDWR, 0644);
	for (i = 0; i < NBND; i++) {
		pat_fill(buf, BLK, bnd[i], 0);
		write_all(fd, buf, BLK, (off_t)(bnd[i] * BLK));
	}
	/* past the largest file the tree can map */
	FAILS(pwrite(fd, "x", 1, (off_t)(L3_ * BLK)), EFBIG);
	FAILS(ftruncate(fd, (off_t)(L3_ * BLK) + 1), EFBIG);
	bnd_verify(fd, NBND);
	close(fd);
	remount();
	fd = xopen(P("bnd"), O_RDWR, 0);
	bnd_verify(fd, NBND);
	/* punch everything from the first indirect level up to the last block: the nodes wholly
	 * inside go too. Freed: the first indirect node with direct nodes 0, 1 and 1013 (4), the
	 * second with direct nodes 0 and 1013 (3), and under the double-indirect node its
	 * indirect nodes 0 (with 2 direct nodes) and 1 (with 1): 5; indirect node 1013 keeps
	 * the last block. */
	{
		uint64_t ffree;
		struct stat st;

		fs_sync();
		ffree = vfs().f_ffree;
		OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(L1_ * BLK),
			     (off_t)((L3_ - 1 - L1_) * BLK)));
		ck_assert_uint_eq(vfs().f_ffree, ffree + 12);
		ck_assert_int_eq(fstat(fd, &st), 0);
		ck_assert_int_eq(st.st_blocks, 7 * 8);
		ck_assert_int_eq(st.st_size, (off_t)(L3_ * BLK));
		for (i = 6; i < NBND - 1; i++) {
			ck_assert_int_eq(pread(fd, buf, BLK, (off_t)(bnd[i] * BLK)), BLK);
			ck_assert(is_zero(buf, BLK));
			pat_fill(buf, BLK, bnd[i], 0);
			write_all(fd, buf, BLK, (off_t)(bnd[i] * BLK));
		}
		bnd_verify(fd, NBND);
	}
	/* cut the tree back level by level */
	for (i = NBND - 1; i > 0; i--) {
		OK(ftruncate(fd, (off_t)(bnd[i] * BLK)));
		OK(ftruncate(fd, (off_t)(bnd[i - 1] + 1) * BLK)); /* grow to the previous end */
		bnd_verify(fd, i);
	}
	OK(ftruncate(fd, 0));
	bnd_verify(fd, 0);
	close(fd);
	/* every node of the tree is gone again: only the inode is left */
	ck_assert_uint_eq(vfs().f_ffree, s0.f_ffree - 1);
	OK(unlink(P("bnd")));
}
END_TEST

/* ---- a 2 GiB sparse file ---------------------------------------------------------------- */

static const struct {
	off_t off;
	size_t len;
} sparse_parts[] = {
	{0, 4096}, {(1ll << 30) - 100, 8192}, {(2ll << 30) - 1, 1},
};

void sparse_verify(void)
{
	int fd = xopen(P("sparse"), O_RDONLY, 0), i;
	uint8_t *buf = malloc(1 << 20), *want = malloc(8192);
	struct stat st;
	off_t probes[] = {4096, 1 << 20, 512ll << 20, (1ll << 30) - 100 - 4096,
			  (1ll << 30) + 8192, (2ll << 30) - (1 << 20) - 1};

	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 2ll << 30);
	ck_assert_int_eq(st.st_blocks, (1 + 3 + 1) * 8); /* 4 KiB, 8 KiB across 3 blocks, 1 byte */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	for (i = 0; i < 3; i++) {
		pat_fill(want, sparse_parts[i].len, 2048 + (uint64_t)i, 0);
		ck_assert_int_eq(pread(fd, buf, sparse_parts[i].len, sparse_parts[i].off),
				 (ssize_t)sparse_parts[i].len);
		ck_assert_msg(!memcmp(buf, want, sparse_parts[i].len), "sparse part %d", i);
	}
	for (i = 0; i < 6; i++) {
		size_t len = 4096;

		ck_assert_int_eq(pread(fd, buf, len, probes[i]), (ssize_t)len);
		ck_assert_msg(is_zero(buf, len), "hole at %lld", (long long)probes[i]);
	}
	/* one megabyte straddling the middle part: zeros, data, zeros */
	ck_assert_int_eq(pread(fd, buf, 1 << 20, (1ll << 30) - (512 << 10)), 1 << 20);
	ck_assert(is_zero(buf, (512 << 10) - 100));
	pat_fill(want, 8192, 2049, 0);
	ck_assert(!memcmp(buf + (512 << 10) - 100, want, 8192));
	ck_assert(is_zero(buf + (512 << 10) - 100 + 8192, (512 << 10) + 100 - 8192));
	ck_assert_int_eq(pread(fd, buf, 100, 2ll << 30), 0);
	close(fd);
	free(buf);
	free(want);
}

START_TEST(t_sparse)
{
	uint8_t buf[8192];
	int fd = xopen(P("sparse"), O_CREAT | O_RDWR, 0644), i;
	struct statvfs s0, s1;

	fs_sync();
	s0 = vfs();

	for (i = 0; i < 3; i++) {
		pat_fill(buf, sparse_parts[i].len, 2048 + (uint64_t)i, 0);
		write_all(fd, buf, sparse_parts[i].len, sparse_parts[i].off);
	}
	close(fd);
	sparse_verify();
	fs_sync();
	s1 = vfs();
	ck_assert_msg((long long)s0.f_bfree - (long long)s1.f_bfree < 1024,
		      "2 GiB sparse file took %lld blocks",
		      (long long)s0.f_bfree - (long long)s1.f_bfree);
}
END_TEST

/* ---- asynchronous direct writes beside buffered readers --------------------------------
 * The kernel drops its cached pages before an O_DIRECT write but, when the write is
 * asynchronous, not after it: a reader that fetched the old bytes meanwhile leaves them in the
 * cache. Whoever opens the file after the write must read the new bytes (issue 35, item 1:
 * before the fix 2-44 of 500 such reads were stale). */
#define AIO_SIZE (128 * 1024)
#define AIO_ROUNDS 400
#define AIO_READERS 3

static volatile int g_aio_stop;

static void *aio_reader(void *arg)
{
	char *buf = malloc(AIO_SIZE);

	while (buf && !g_aio_stop) {
		int fd = open(arg, O_RDONLY);

		if (fd >= 0) { /* the main thread checks what it reads; these only fill the cache */
			if (pread(fd, buf, AIO_SIZE, 0) < 0)
				perror("t_direct_aio reader");
			close(fd);
		}
	}
	free(buf);
	return NULL;
}

/* One asynchronous O_DIRECT write of BUF at 0 through CTX, waited for. */
static void aio_write_wait(aio_context_t ctx, int fd, const char *buf)
{
	struct iocb cb = {.aio_fildes = (uint32_t)fd, .aio_lio_opcode = IOCB_CMD_PWRITE,
			  .aio_buf = (uint64_t)(uintptr_t)buf, .aio_nbytes = AIO_SIZE};
	struct iocb *cbs[1] = {&cb};
	struct io_event ev;

	ck_assert_int_eq(syscall(SYS_io_submit, ctx, 1, cbs), 1);
	ck_assert_int_eq(syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL), 1);
	ck_assert_int_eq(ev.res, AIO_SIZE);
}

START_TEST(t_direct_aio)
{
	char *buf, *got = malloc(AIO_SIZE), path[PATH_MAX];
	pthread_t readers[AIO_READERS];
	aio_context_t ctx = 0;
	int fd, i, stale = 0;

	ck_assert(got && !posix_memalign((void **)&buf, 4096, AIO_SIZE));
	memset(buf, '@', AIO_SIZE);
	snprintf(path, sizeof(path), "%s", P("aio")); /* P's ring is not the threads' */
	put_file(path, buf, AIO_SIZE, 0644);
	ck_assert_int_eq(syscall(SYS_io_setup, 4, &ctx), 0);
	g_aio_stop = 0;
	for (i = 0; i < AIO_READERS; i++)
		ck_assert_int_eq(pthread_create(&readers[i], NULL, aio_reader, path), 0);
	fd = xopen(path, O_WRONLY | O_DIRECT, 0);
	for (i = 0; i < AIO_ROUNDS; i++) {
		int rfd;

		memset(buf, 'A' + i % 26, AIO_SIZE);
		aio_write_wait(ctx, fd, buf);
		rfd = xopen(path, O_RDONLY, 0);
		ck_assert_int_eq(pread(rfd, got, AIO_SIZE, 0), AIO_SIZE);
		close(rfd);
		stale += memcmp(got, buf, AIO_SIZE) != 0;
	}
	g_aio_stop = 1;
	for (i = 0; i < AIO_READERS; i++)
		pthread_join(readers[i], NULL);
	close(fd);
	syscall(SYS_io_destroy, ctx);
	free(buf);
	free(got);
	OK(unlink(path));
	ck_assert_msg(!stale, "%d of %d opens after an AIO O_DIRECT write read stale bytes", stale,
		      AIO_ROUNDS);
}
END_TEST

int posix_data_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_files;
	t[n++] = t_unlink_open;
	t[n++] = t_fallocate;
	t[n++] = t_fallocate_reserve;
	t[n++] = t_fallocate_shift;
	t[n++] = t_fallocate_shift_readahead;
	t[n++] = t_statfs;
	t[n++] = t_fsync;
	t[n++] = t_direct_aio;
	t[n++] = t_boundaries;
	t[n++] = t_sparse;
	return n;
}
