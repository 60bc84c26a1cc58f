/*
 * test_posix_attrs.c - attributes and permissions, through the mounted daemon: mode, owner,
 * times to the nanosecond and which of them each call moves, truncate, extended attributes and
 * their limits, and access, setgid, sticky and set-id rules checked as other users. Part of
 * test_posix (test_posix.c).
 */
#include "posix_testutil.h"

#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define UID_A 2000
#define UID_B 2001

/* ---- attributes: mode, owner, times, truncate ------------------------------------------ */

START_TEST(t_attrs)
{
	struct timespec ts[2];
	struct stat st, st2;
	uint8_t *buf = malloc(40000), *got;
	uint64_t before, after;
	size_t n;
	int fd;

	OK(mkdir(P("at"), 0755));
	put_file(P("at/f"), "attr", 4, 0644);
	OK(chmod(P("at/f"), 0600));
	ck_assert_int_eq(lst(P("at/f")).st_mode, S_IFREG | 0600);
	OK(chmod(P("at/f"), 07777));
	ck_assert_int_eq(lst(P("at/f")).st_mode, S_IFREG | 07777);
	OK(chmod(P("at/f"), 0640));
	OK(chown(P("at/f"), 1234, 5678));
	st = lst(P("at/f"));
	ck_assert_int_eq(st.st_uid, 1234);
	ck_assert_int_eq(st.st_gid, 5678);
	OK(chown(P("at/f"), (uid_t)-1, 42));
	ck_assert_int_eq(lst(P("at/f")).st_uid, 1234);
	ck_assert_int_eq(lst(P("at/f")).st_gid, 42);
	fd = xopen(P("at/f"), O_RDWR, 0);
	OK(fchmod(fd, 0604));
	OK(fchown(fd, 7, 8));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_mode, S_IFREG | 0604);
	ck_assert_int_eq(st.st_uid, 7);
	ck_assert_int_eq(st.st_gid, 8);
	close(fd);
	FAILS(chmod(P("at/none"), 0644), ENOENT);

	/* utimensat: nanoseconds, times before 1970 and after 2038, UTIME_NOW, UTIME_OMIT */
	ts[0] = (struct timespec){1234567890, 123456789};
	ts[1] = (struct timespec){1500000000, 987654321};
	before = ts_ns(lst(P("at/f")).st_ctim);
	OK(utimensat(AT_FDCWD, P("at/f"), ts, 0));
	st = lst(P("at/f"));
	ck_assert_int_eq(st.st_atim.tv_sec, 1234567890);
	ck_assert_int_eq(st.st_atim.tv_nsec, 123456789);
	ck_assert_int_eq(st.st_mtim.tv_sec, 1500000000);
	ck_assert_int_eq(st.st_mtim.tv_nsec, 987654321);
	ck_assert_uint_ge(ts_ns(st.st_ctim), before);
	ts[0] = (struct timespec){-86400 * 365 - 1, 500000000}; /* 1968-12-31 23:59:59.5 */
	ts[1] = (struct timespec){4102444800, 1};              /* 2100-01-01 00:00:00.000000001 */
	OK(utimensat(AT_FDCWD, P("at/f"), ts, 0));
	st = lst(P("at/f"));
	ck_assert_int_eq(st.st_atim.tv_sec, -86400 * 365 - 1);
	ck_assert_int_eq(st.st_atim.tv_nsec, 500000000);
	ck_assert_int_eq(st.st_mtim.tv_sec, 4102444800);
	ck_assert_int_eq(st.st_mtim.tv_nsec, 1);
	ts[0] = (struct timespec){0, UTIME_OMIT};
	ts[1] = (struct timespec){0, UTIME_NOW};
	before = ts_ns(lst(P("at")).st_mtim) - 1;
	OK(utimensat(AT_FDCWD, P("at/f"), ts, 0));
	after = (uint64_t)time(NULL) * 1000000000ull + 1000000000ull;
	st2 = lst(P("at/f"));
	ck_assert_int_eq(st2.st_atim.tv_sec, st.st_atim.tv_sec);
	ck_assert_int_eq(st2.st_atim.tv_nsec, st.st_atim.tv_nsec);
	ck_assert_uint_ge(ts_ns(st2.st_mtim), before);
	ck_assert_uint_le(ts_ns(st2.st_mtim), after);
	ts[0] = (struct timespec){0, UTIME_OMIT};
	ts[1] = (struct timespec){0, UTIME_OMIT};
	sleep_ms(5);
	OK(utimensat(AT_FDCWD, P("at/f"), ts, 0));
	st = lst(P("at/f"));
	ck_assert_uint_eq(ts_ns(st.st_ctim), ts_ns(st2.st_ctim)); /* nothing changed */
	ck_assert_uint_eq(ts_ns(st.st_mtim), ts_ns(st2.st_mtim));
	ts[0] = (struct timespec){1, 2};
	ts[1] = (struct timespec){3, 4};
	OK(utimensat(AT_FDCWD, P("at/f"), ts, AT_SYMLINK_NOFOLLOW));
	st = lst(P("at/f"));
	ck_assert_uint_eq(ts_ns(st.st_atim), 1000000002ull);
	ck_assert_uint_eq(ts_ns(st.st_mtim), 3000000004ull);
	/* the times of a symlink itself */
	OK(symlink("f", P("at/sl")));
	ts[0] = (struct timespec){11, 12};
	ts[1] = (struct timespec){13, 14};
	OK(utimensat(AT_FDCWD, P("at/sl"), ts, AT_SYMLINK_NOFOLLOW));
	ck_assert_uint_eq(ts_ns(lst(P("at/sl")).st_mtim), 13000000014ull);
	ck_assert_uint_eq(ts_ns(lst(P("at/f")).st_mtim), 3000000004ull);

	/* truncate down and up: what was cut reads back as zeros, blocks are released */
	pat_fill(buf, 40000, 99, 0);
	put_file(P("at/t"), buf, 40000, 0644);
	ck_assert_int_eq(lst(P("at/t")).st_blocks, 10 * 8);
	OK(truncate(P("at/t"), 5000));
	st = lst(P("at/t"));
	ck_assert_int_eq(st.st_size, 5000);
	ck_assert_int_eq(st.st_blocks, 2 * 8);
	OK(truncate(P("at/t"), 20000));
	st = lst(P("at/t"));
	ck_assert_int_eq(st.st_size, 20000);
	ck_assert_int_eq(st.st_blocks, 2 * 8);
	got = (uint8_t *)get_file(P("at/t"), &n);
	ck_assert_int_eq(n, 20000);
	ck_assert(!memcmp(got, buf, 5000));
	ck_assert_msg(is_zero(got + 5000, 15000), "bytes past the old end are not zero");
	free(got);
	/* shrink into the middle of a block and grow again: the block's tail reads zeros */
	fd = xopen(P("at/t"), O_RDWR, 0);
	OK(ftruncate(fd, 4097));
	OK(ftruncate(fd, 12000));
	close(fd);
	got = (uint8_t *)get_file(P("at/t"), &n);
	ck_assert_int_eq(n, 12000);
	ck_assert(!memcmp(got, buf, 4097));
	ck_assert_msg(is_zero(got + 4097, 12000 - 4097), "tail of a cut block is not zero");
	free(got);
	fd = xopen(P("at/t"), O_RDWR, 0);
	OK(ftruncate(fd, 0));
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_blocks, 0);
	OK(ftruncate(fd, 8192));
	close(fd);
	got = (uint8_t *)get_file(P("at/t"), &n);
	ck_assert_int_eq(n, 8192);
	ck_assert(is_zero(got, 8192));
	free(got);
	FAILS(truncate(P("at"), 0), EISDIR);
	FAILS(truncate(P("at/t"), -1), EINVAL);
	fd = xopen(P("at/t"), O_RDONLY, 0);
	FAILS(ftruncate(fd, 0), EINVAL);
	close(fd);
	free(buf);
}
END_TEST

/* ---- extended attributes ----------------------------------------------------------------- */

/* The names listxattr returns, sorted and joined with ','. */
static void xlist(const char *path, char *out, size_t outlen)
{
	char list[4096], *names[64];
	ssize_t n = llistxattr(path, list, sizeof(list)), off = 0;
	int cnt = 0, i;

	out[0] = 0;
	ck_assert_int_ge(n, 0);
	while (off < n) {
		names[cnt++] = list + off;
		off += (ssize_t)strlen(list + off) + 1;
	}
	qsort(names, (size_t)cnt, sizeof(*names), cmp_str);
	for (i = 0; i < cnt; i++) {
		strncat(out, names[i], outlen - strlen(out) - 1);
		strncat(out, ",", outlen - strlen(out) - 1);
	}
}

START_TEST(t_xattr)
{
	char val[8192], names[1024], big[70000];
	const char *f = P("x/f");
	struct stat st;
	ssize_t n;
	int i, fitted;

	OK(mkdir(P("x"), 0755));
	put_file(f, "x", 1, 0644);
	FAILS(getxattr(f, "user.none", val, sizeof(val)), ENODATA);
	FAILS(removexattr(f, "user.none"), ENODATA);
	ck_assert_int_eq(listxattr(f, val, sizeof(val)), 0);
	st = lst(f);
	sleep_ms(5);
	OK(setxattr(f, "user.a", "1", 1, 0));
	ck_assert_uint_gt(ts_ns(lst(f).st_ctim), ts_ns(st.st_ctim));
	ck_assert_uint_eq(ts_ns(lst(f).st_mtim), ts_ns(st.st_mtim));
	ck_assert_int_eq(getxattr(f, "user.a", val, sizeof(val)), 1);
	ck_assert_int_eq(val[0], '1');
	OK(setxattr(f, "user.long", "0123456789", 10, 0));
	ck_assert_int_eq(getxattr(f, "user.long", NULL, 0), 10);
	FAILS(getxattr(f, "user.long", val, 9), ERANGE);
	FAILS(setxattr(f, "user.a", "2", 1, XATTR_CREATE), EEXIST);
	FAILS(setxattr(f, "user.b", "2", 1, XATTR_REPLACE), ENODATA);
	OK(setxattr(f, "user.a", "22", 2, XATTR_REPLACE));
	ck_assert_int_eq(getxattr(f, "user.a", val, sizeof(val)), 2);
	ck_assert(!memcmp(val, "22", 2));
	/* the same suffix in another namespace is another attribute */
	OK(setxattr(f, "trusted.a", "T", 1, XATTR_CREATE));
	ck_assert_int_eq(getxattr(f, "user.a", val, sizeof(val)), 2);
	ck_assert_int_eq(getxattr(f, "trusted.a", val, sizeof(val)), 1);
	ck_assert_int_eq(val[0], 'T');
	OK(removexattr(f, "trusted.a"));
	ck_assert_int_eq(getxattr(f, "user.a", val, sizeof(val)), 2);
	OK(setxattr(f, "user.empty", "", 0, XATTR_CREATE));
	ck_assert_int_eq(getxattr(f, "user.empty", val, sizeof(val)), 0);
	OK(setxattr(f, "trusted.t", "trusted", 7, 0));
	OK(setxattr(f, "security.s", "sec", 3, 0));
	ck_assert_int_eq(getxattr(f, "trusted.t", val, sizeof(val)), 7);
	ck_assert_int_eq(getxattr(f, "security.s", val, sizeof(val)), 3);
	FAILS(setxattr(f, "bogus.ns", "v", 1, 0), EOPNOTSUPP);
	{
		/* a valid access ACL (user::rw- group::r-- other::r--) that the mode says whole:
		 * taken (the kernel enforces ACLs, t_acl), and not stored beside the mode */
		static const uint8_t acl[28] = {2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
						4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
						0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff};

		OK(setxattr(f, "system.posix_acl_access", acl, sizeof(acl), 0));
		FAILS(getxattr(f, "system.posix_acl_access", val, sizeof(val)), ENODATA);
		FAILS(setxattr(f, "system.other", "v", 1, 0), EOPNOTSUPP);
		ck_assert_int_eq(lst(f).st_mode, S_IFREG | 0644);
	}
	xlist(f, names, sizeof(names));
	ck_assert_str_eq(names, "security.s,trusted.t,user.a,user.empty,user.long,");
	n = listxattr(f, NULL, 0);
	ck_assert_int_eq(n, (ssize_t)strlen("security.s,trusted.t,user.a,user.empty,user.long,"));
	FAILS(listxattr(f, val, (size_t)n - 1), ERANGE);
	OK(removexattr(f, "user.long"));
	FAILS(getxattr(f, "user.long", val, sizeof(val)), ENODATA);
	FAILS(removexattr(f, "user.long"), ENODATA);
	xlist(f, names, sizeof(names));
	ck_assert_str_eq(names, "security.s,trusted.t,user.a,user.empty,");

	/* names: 255 bytes in all is the limit */
	snprintf(val, sizeof(val), "user.%s", long_name('n', 250));
	OK(setxattr(f, val, "max", 3, 0));
	ck_assert_int_eq(getxattr(f, val, names, sizeof(names)), 3);
	OK(removexattr(f, val));
	snprintf(val, sizeof(val), "user.%s", long_name('n', 251));
	FAILS(setxattr(f, val, "x", 1, 0), ERANGE);

	/* values: bigger than an xattr node (kept in value nodes), beyond the VFS limit */
	memset(big, 'v', sizeof(big));
	OK(setxattr(f, "user.huge", big, 5000, 0));
	ck_assert_int_eq(getxattr(f, "user.huge", NULL, 0), 5000);
	OK(removexattr(f, "user.huge"));
	FAILS(setxattr(f, "user.huge", big, 70000, 0), E2BIG);
	FAILS(getxattr(f, "user.huge", val, sizeof(val)), ENODATA);
	/* more than one xattr node holds (8 of these): all fit, and read back intact
	 * (test_xattr takes thousands) */
	put_file(P("x/full"), "", 0, 0644);
	for (fitted = 0; fitted < 64; fitted++) {
		char nm[32];

		snprintf(nm, sizeof(nm), "user.fill%02d", fitted);
		memset(big, 'a' + fitted % 26, 500);
		if (setxattr(P("x/full"), nm, big, 500, 0))
			break;
	}
	ck_assert_int_eq(fitted, 64);
	for (i = 0; i < fitted; i++) {
		char nm[32];

		snprintf(nm, sizeof(nm), "user.fill%02d", i);
		ck_assert_int_eq(getxattr(P("x/full"), nm, val, sizeof(val)), 500);
		ck_assert_int_eq(val[499], 'a' + i % 26);
	}
	/* replacing with a smaller value makes room again */
	OK(setxattr(P("x/full"), "user.fill00", "s", 1, XATTR_REPLACE));
	OK(setxattr(P("x/full"), "user.extra", "e", 1, XATTR_CREATE));

	/* directories and symlinks (user.* is refused on symlinks by the VFS) */
	OK(setxattr(P("x"), "user.dir", "d", 1, 0));
	ck_assert_int_eq(getxattr(P("x"), "user.dir", val, sizeof(val)), 1);
	OK(symlink("f", P("x/sl")));
	FAILS(lsetxattr(P("x/sl"), "user.sl", "s", 1, 0), EPERM);
	OK(lsetxattr(P("x/sl"), "trusted.sl", "link", 4, 0));
	ck_assert_int_eq(lgetxattr(P("x/sl"), "trusted.sl", val, sizeof(val)), 4);
	FAILS(getxattr(P("x/sl"), "trusted.sl", val, sizeof(val)), ENODATA); /* follows to f */
}
END_TEST

/* ---- running as another user ------------------------------------------------------------- */

/* In a forked child: report and leave with a nonzero status. */
#define CHILD(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "child line %d: %s (errno %s)\n", __LINE__, #cond,   \
				ename(errno));                                               \
			return 1;                                                            \
		}                                                                            \
	} while (0)
#define CHILD_FAILS(expr, err)                                                               \
	do {                                                                                 \
		errno = 0;                                                                   \
		CHILD((expr) == -1 && errno == (err));                                       \
	} while (0)

/* Run FN as UID/GID (no supplementary groups) with the mount as working directory. */
static int run_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		if (chdir(g_mnt) || setgroups(0, NULL) || setresgid(gid, gid, gid) ||
		    setresuid(uid, uid, uid))
			_exit(99);
		_exit(fn(arg));
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- POSIX ACLs (FUSE_CAP_POSIX_ACL: the kernel enforces, zlfs stores and keeps the mode) -- */

#define A_UOBJ 0x01
#define A_USER 0x02
#define A_GOBJ 0x04
#define A_GROUP 0x08
#define A_MASK 0x10
#define A_OTHER 0x20

/* An ACL in its xattr form from N (tag, perm, id) triples; its size. */
static size_t acl_of(uint8_t *b, const uint32_t (*e)[3], size_t n)
{
	uint32_t v = 2;

	memcpy(b, &v, 4);
	for (size_t i = 0; i < n; i++) {
		uint16_t tp[2] = {(uint16_t)e[i][0], (uint16_t)e[i][1]};

		memcpy(b + 4 + i * 8, tp, 4);
		memcpy(b + 8 + i * 8, &e[i][2], 4);
	}
	return 4 + n * 8;
}

static int child_acl_read(void *arg)
{
	int fd = open((const char *)arg, O_RDONLY);

	CHILD(fd >= 0);
	close(fd);
	CHILD_FAILS(open((const char *)arg, O_WRONLY), EACCES);
	return 0;
}

static int child_acl_denied(void *arg)
{
	CHILD_FAILS(open((const char *)arg, O_RDONLY), EACCES);
	return 0;
}

static int child_acl_write(void *arg)
{
	int fd = open((const char *)arg, O_WRONLY);

	CHILD(fd >= 0);
	CHILD(write(fd, "w", 1) == 1);
	close(fd);
	return 0;
}

/* ACL entry I of the stored access ACL of PATH: its perm, or -1. */
static int acl_perm(const char *path, const char *name, unsigned i)
{
	uint8_t b[512];
	ssize_t n = getxattr(path, name, b, sizeof(b));
	uint16_t perm;

	if (n < (ssize_t)(4 + (i + 1) * 8))
		return -1;
	memcpy(&perm, b + 4 + i * 8 + 2, 2);
	return perm;
}

/* A named user's entry grants what the mode does not, the mask limits it and follows chmod,
 * the mode's group bits show the mask; a default ACL is inherited (umask ignored) by files
 * and directories; an ACL the mode says whole is not stored; all of it after a remount. */
START_TEST(t_acl)
{
	static const uint32_t named[][3] = {{A_UOBJ, 6, ~0u}, {A_USER, 4, UID_A}, {A_GOBJ, 4, ~0u},
					    {A_MASK, 4, ~0u}, {A_OTHER, 0, ~0u}};
	static const uint32_t dflt[][3] = {{A_UOBJ, 7, ~0u}, {A_USER, 7, UID_A}, {A_GOBJ, 5, ~0u},
					   {A_MASK, 7, ~0u}, {A_OTHER, 0, ~0u}};
	static const uint32_t bad[][3] = {{A_UOBJ, 6, ~0u}, {A_USER, 4, UID_A}, {A_GOBJ, 4, ~0u},
					  {A_OTHER, 0, ~0u}}; /* a named entry without a mask */
	uint8_t b[128], got[128];
	size_t n;

	OK(mkdir(P("acl"), 0755));
	put_file(P("acl/f"), "secret", 6, 0600);
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_denied, (void *)P("acl/f")), 0);
	n = acl_of(b, named, 5);
	OK(setxattr(P("acl/f"), "system.posix_acl_access", b, n, 0));
	ck_assert_int_eq(lst(P("acl/f")).st_mode, S_IFREG | 0640); /* group bits: the mask */
	ck_assert_int_eq(getxattr(P("acl/f"), "system.posix_acl_access", got, sizeof(got)),
			 (ssize_t)n);
	ck_assert(!memcmp(got, b, n));
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_read, (void *)P("acl/f")), 0);
	ck_assert_int_eq(run_as(UID_B, UID_B, child_acl_denied, (void *)P("acl/f")), 0);
	OK(chmod(P("acl/f"), 0600)); /* the mask follows the group bits: UID_A loses read */
	ck_assert_int_eq(acl_perm(P("acl/f"), "system.posix_acl_access", 3), 0);
	ck_assert_int_eq(acl_perm(P("acl/f"), "system.posix_acl_access", 1), 4);
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_denied, (void *)P("acl/f")), 0);
	OK(chmod(P("acl/f"), 0640));
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_read, (void *)P("acl/f")), 0);
	n = acl_of(b, bad, 4);
	FAILS(setxattr(P("acl/f"), "system.posix_acl_access", b, n, 0), EINVAL);
	/* a default ACL: new files and directories get it, masked by the mode asked for */
	OK(mkdir(P("acl/d"), 0755));
	n = acl_of(b, dflt, 5);
	OK(setxattr(P("acl/d"), "system.posix_acl_default", b, n, 0));
	FAILS(setxattr(P("acl/f"), "system.posix_acl_default", b, n, 0), EACCES);
	umask(077); /* a default ACL replaces the umask */
	put_file(P("acl/d/new"), "", 0, 0666);
	OK(mkdir(P("acl/d/sub"), 0755));
	umask(0);
	ck_assert_int_eq(lst(P("acl/d/new")).st_mode, S_IFREG | 0660);
	ck_assert_int_eq(lst(P("acl/d/sub")).st_mode, S_IFDIR | 0750);
	ck_assert_int_eq(acl_perm(P("acl/d/new"), "system.posix_acl_access", 1), 7);
	ck_assert_int_eq(acl_perm(P("acl/d/new"), "system.posix_acl_access", 3), 6);
	ck_assert_int_eq(getxattr(P("acl/d/sub"), "system.posix_acl_default", got, sizeof(got)),
			 (ssize_t)n);
	ck_assert(!memcmp(got, b, n));
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_write, (void *)P("acl/d/new")), 0);
	/* removing the access ACL leaves the mode; the default's removal stops inheritance */
	OK(removexattr(P("acl/d"), "system.posix_acl_default"));
	put_file(P("acl/d/plain"), "", 0, 0640);
	FAILS(getxattr(P("acl/d/plain"), "system.posix_acl_access", got, sizeof(got)), ENODATA);
	remount();
	ck_assert_int_eq(lst(P("acl/f")).st_mode, S_IFREG | 0640);
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_read, (void *)P("acl/f")), 0);
	ck_assert_int_eq(run_as(UID_B, UID_B, child_acl_denied, (void *)P("acl/f")), 0);
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_write, (void *)P("acl/d/new")), 0);
	OK(removexattr(P("acl/f"), "system.posix_acl_access"));
	ck_assert_int_eq(lst(P("acl/f")).st_mode, S_IFREG | 0640);
	ck_assert_int_eq(run_as(UID_A, UID_A, child_acl_denied, (void *)P("acl/f")), 0);
}
END_TEST

/* ---- permissions: access, setgid directories, sticky directories, suid ----------------- */

static int child_access(void *arg)
{
	(void)arg;
	CHILD_FAILS(access("pm/secret", R_OK), EACCES);
	CHILD(access("pm/public", R_OK) == 0);
	CHILD_FAILS(access("pm/public", W_OK), EACCES);
	CHILD_FAILS(access("pm/public", X_OK), EACCES);
	CHILD(access("pm/mine", R_OK | W_OK) == 0);
	CHILD_FAILS(open("pm/secret", O_RDONLY), EACCES);
	CHILD_FAILS(open("pm/public", O_WRONLY), EACCES);
	CHILD_FAILS(open("pm/closed/inner", O_RDONLY), EACCES);
	CHILD_FAILS(open("pm/new", O_CREAT | O_WRONLY, 0644), EACCES);
	CHILD_FAILS(chmod("pm/public", 0777), EPERM);
	CHILD_FAILS(chown("pm/mine", 0, 0), EPERM);
	CHILD(chmod("pm/mine", 0600) == 0);
	return 0;
}

START_TEST(t_access)
{
	OK(mkdir(P("pm"), 0755));
	put_file(P("pm/secret"), "s", 1, 0640);
	put_file(P("pm/public"), "p", 1, 0644);
	put_file(P("pm/mine"), "m", 1, 0644);
	OK(chown(P("pm/mine"), UID_A, UID_A));
	OK(mkdir(P("pm/closed"), 0700));
	put_file(P("pm/closed/inner"), "i", 1, 0644);
	put_file(P("pm/none"), "n", 1, 0);
	/* root: read and write regardless of bits, execute only with some x bit */
	OK(access(P("pm/none"), R_OK | W_OK));
	FAILS(access(P("pm/none"), X_OK), EACCES);
	OK(chmod(P("pm/none"), 0010));
	OK(access(P("pm/none"), X_OK));
	FAILS(access(P("pm/nothing"), F_OK), ENOENT);
	ck_assert_int_eq(run_as(UID_A, UID_A, child_access, NULL), 0);
	ck_assert_int_eq(lst(P("pm/mine")).st_mode, S_IFREG | 0600);
}
END_TEST

START_TEST(t_setgid)
{
	struct stat st;

	OK(mkdir(P("sg"), 0755));
	OK(chown(P("sg"), (uid_t)-1, 4321));
	OK(chmod(P("sg"), 02775));
	OK(mkdir(P("sg/sub"), 0755));
	st = lst(P("sg/sub"));
	ck_assert_int_eq(st.st_gid, 4321);
	ck_assert_int_eq(st.st_mode, S_IFDIR | 02755);
	OK(mkdir(P("sg/sub/deeper"), 0700));
	st = lst(P("sg/sub/deeper"));
	ck_assert_int_eq(st.st_gid, 4321);
	ck_assert_int_eq(st.st_mode, S_IFDIR | 02700);
	put_file(P("sg/file"), "g", 1, 0644);
	st = lst(P("sg/file"));
	ck_assert_int_eq(st.st_gid, 4321);
	ck_assert_int_eq(st.st_mode, S_IFREG | 0644);
	OK(mkfifo(P("sg/fifo"), 0600));
	ck_assert_int_eq(lst(P("sg/fifo")).st_gid, 4321);
	OK(symlink("file", P("sg/sl")));
	ck_assert_int_eq(lst(P("sg/sl")).st_gid, 4321);
	/* control: without the bit the creator's group is used */
	OK(mkdir(P("nsg"), 0775));
	OK(chown(P("nsg"), (uid_t)-1, 4321));
	OK(mkdir(P("nsg/sub"), 0755));
	st = lst(P("nsg/sub"));
	ck_assert_int_eq(st.st_gid, getegid());
	ck_assert_int_eq(st.st_mode, S_IFDIR | 0755);
}
END_TEST

static int child_sticky(void *arg)
{
	(void)arg;
	CHILD_FAILS(unlink("st/victim"), EPERM);
	CHILD_FAILS(rename("st/victim", "st/moved"), EPERM);
	CHILD_FAILS(rmdir("st/vdir"), EPERM);
	CHILD(close(open("st/mine", O_CREAT | O_WRONLY, 0644)) == 0);
	CHILD(close(open("st/mine2", O_CREAT | O_WRONLY, 0644)) == 0);
	CHILD_FAILS(rename("st/mine2", "st/victim"), EPERM); /* replacing counts as deleting */
	CHILD(unlink("st/mine2") == 0);
	CHILD(unlink("st/mine") == 0);
	CHILD(unlink("nst/victim") == 0); /* no sticky bit: the directory's w bit suffices */
	return 0;
}

START_TEST(t_sticky)
{
	struct stat st;

	OK(mkdir(P("st"), 0777));
	OK(chmod(P("st"), 01777));
	ck_assert_int_eq(lst(P("st")).st_mode, S_IFDIR | 01777);
	put_file(P("st/victim"), "v", 1, 0666);
	OK(chown(P("st/victim"), UID_B, UID_B));
	OK(mkdir(P("st/vdir"), 0777));
	OK(chown(P("st/vdir"), UID_B, UID_B));
	OK(mkdir(P("nst"), 0777));
	OK(chmod(P("nst"), 0777));
	put_file(P("nst/victim"), "v", 1, 0644);
	OK(chown(P("nst/victim"), UID_B, UID_B));
	ck_assert_int_eq(run_as(UID_A, UID_A, child_sticky, NULL), 0);
	ck_assert_int_eq(lst(P("st/victim")).st_uid, UID_B);
	ck_assert(S_ISDIR(lst(P("st/vdir")).st_mode));
	FAILS(lstat(P("st/mine"), &st), ENOENT);
	FAILS(lstat(P("nst/victim"), &st), ENOENT);
}
END_TEST

static int child_suid(void *arg)
{
	int fd = open("su/prog", O_WRONLY);

	(void)arg;
	CHILD(fd >= 0);
	CHILD(pwrite(fd, "w", 1, 0) == 1);
	CHILD(close(fd) == 0);
	CHILD(truncate("su/prog2", 1) == 0);
	fd = open("su/prog3", O_WRONLY | O_TRUNC);
	CHILD(fd >= 0);
	CHILD(close(fd) == 0);
	return 0;
}

START_TEST(t_suid)
{
	int fd;

	OK(mkdir(P("su"), 0777));
	put_file(P("su/prog"), "#!", 2, 0777);
	OK(chmod(P("su/prog"), 06777)); /* setgid with group exec: a real setgid file */
	put_file(P("su/prog2"), "#!", 2, 0777);
	OK(chmod(P("su/prog2"), 04777));
	put_file(P("su/prog3"), "#!", 2, 0777);
	OK(chmod(P("su/prog3"), 06777));
	ck_assert_int_eq(run_as(UID_A, UID_A, child_suid, NULL), 0);
	ck_assert_int_eq(lst(P("su/prog3")).st_size, 0);
	ck_assert_int_eq(lst(P("su/prog3")).st_mode, S_IFREG | 0777); /* open(O_TRUNC) */
	ck_assert_int_eq(lst(P("su/prog")).st_mode, S_IFREG | 0777);
	ck_assert_int_eq(lst(P("su/prog2")).st_mode, S_IFREG | 0777);
	/* root (CAP_FSETID) writing keeps the bits */
	put_file(P("su/rootw"), "#!", 2, 0755);
	OK(chmod(P("su/rootw"), 04755));
	fd = xopen(P("su/rootw"), O_WRONLY, 0);
	write_all(fd, "xx", 2, 0);
	close(fd);
	ck_assert_int_eq(lst(P("su/rootw")).st_mode, S_IFREG | 04755);
	/* chown clears set-id bits of a regular file, even for root */
	OK(chmod(P("su/rootw"), 06755));
	OK(chown(P("su/rootw"), 5, 5));
	ck_assert_int_eq(lst(P("su/rootw")).st_mode, S_IFREG | 0755);
}
END_TEST

/* fallocate in every mode changes data as a write does, and drops the same privileges
 * (issue 35, item 6: the kernel leaves this to a FUSE filesystem). */
static const int falloc_modes[] = {0, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE,
				   FALLOC_FL_ZERO_RANGE};

static int child_falloc_privs(void *arg)
{
	char name[32];
	unsigned i;
	int fd;

	(void)arg;
	for (i = 0; i < sizeof(falloc_modes) / sizeof(falloc_modes[0]); i++) {
		snprintf(name, sizeof(name), "fp/sgid%u", i);
		fd = open(name, O_WRONLY);
		CHILD(fd >= 0);
		CHILD(fallocate(fd, falloc_modes[i], 0, 4096) == 0);
		CHILD(close(fd) == 0);
		snprintf(name, sizeof(name), "fp/suid%u", i);
		fd = open(name, O_WRONLY);
		CHILD(fd >= 0);
		CHILD(fallocate(fd, falloc_modes[i], 0, 4096) == 0);
		CHILD(close(fd) == 0);
	}
	return 0;
}

START_TEST(t_falloc_privs)
{
	static const char cap[20] = {1, 0, 0, 2}; /* a vfs_cap_data header, no capabilities */
	char name[64], buf[32];
	unsigned i, n = sizeof(falloc_modes) / sizeof(falloc_modes[0]);

	OK(mkdir(P("fp"), 0777));
	for (i = 0; i < n; i++) {
		/* setgid without group execute, a group the caller is not in: a write drops it */
		snprintf(name, sizeof(name), "fp/sgid%u", i);
		put_file(P(name), "data", 4, 0666);
		OK(chown(P(name), UID_B, UID_B));
		OK(chmod(P(name), 02666));
		snprintf(name, sizeof(name), "fp/suid%u", i);
		put_file(P(name), "data", 4, 0777);
		OK(chmod(P(name), 04777));
		OK(lsetxattr(P(name), "security.capability", cap, sizeof(cap), 0));
	}
	ck_assert_int_eq(run_as(UID_A, UID_A, child_falloc_privs, NULL), 0);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "fp/sgid%u", i);
		ck_assert_msg(lst(P(name)).st_mode == (S_IFREG | 0666), "mode %d keeps setgid", i);
		snprintf(name, sizeof(name), "fp/suid%u", i);
		ck_assert_msg(lst(P(name)).st_mode == (S_IFREG | 0777), "mode %d keeps setuid", i);
		errno = 0;
		ck_assert_msg(lgetxattr(P(name), "security.capability", buf, sizeof(buf)) == -1 &&
			      errno == ENODATA, "mode %d keeps security.capability", i);
	}
	/* root (CAP_FSETID) keeps them */
	put_file(P("fp/root"), "data", 4, 0777);
	OK(chmod(P("fp/root"), 06777));
	{
		int fd = xopen(P("fp/root"), O_WRONLY, 0);

		OK(fallocate(fd, 0, 0, 8192));
		close(fd);
	}
	ck_assert_int_eq(lst(P("fp/root")).st_mode, S_IFREG | 06777);
}
END_TEST

/* ---- which times change ------------------------------------------------------------------- */

struct t3 {
	uint64_t a, m, c;
};

static struct t3 times_of(const char *path)
{
	struct stat st = lst(path);

	return (struct t3){ts_ns(st.st_atim), ts_ns(st.st_mtim), ts_ns(st.st_ctim)};
}

/* Assert which of atime/mtime/ctime of PATH moved forward since OLD ("amc" letters). */
static struct t3 changed(const char *path, struct t3 old, const char *which, const char *what)
{
	struct t3 t = times_of(path);

	ck_assert_msg(strchr(which, 'a') ? t.a > old.a : t.a == old.a, "%s: atime of %s", what, path);
	ck_assert_msg(strchr(which, 'm') ? t.m > old.m : t.m == old.m, "%s: mtime of %s", what, path);
	ck_assert_msg(strchr(which, 'c') ? t.c > old.c : t.c == old.c, "%s: ctime of %s", what, path);
	return t;
}

START_TEST(t_times)
{
	struct t3 f, a, b, t;
	char buf[4];
	int fd;

	OK(mkdir(P("tm"), 0755));
	OK(mkdir(P("tm/a"), 0755));
	OK(mkdir(P("tm/b"), 0755));
	a = times_of(P("tm/a"));
	sleep_ms(5);
	fd = xopen(P("tm/a/f"), O_CREAT | O_EXCL | O_WRONLY, 0644);
	close(fd);
	f = times_of(P("tm/a/f"));
	ck_assert_uint_eq(f.a, f.m); /* a new file: all three times are the creation time */
	ck_assert_uint_eq(f.m, f.c);
	a = changed(P("tm/a"), a, "mc", "create");
	sleep_ms(5);
	fd = xopen(P("tm/a/f"), O_WRONLY, 0);
	write_all(fd, "22", 2, 0);
	close(fd);
	f = changed(P("tm/a/f"), f, "mc", "write");
	a = changed(P("tm/a"), a, "", "write in it");
	sleep_ms(5);
	fd = xopen(P("tm/a/f"), O_RDONLY, 0);
	ck_assert_int_eq(read(fd, buf, 2), 2); /* reading may move atime (relatime): not checked */
	close(fd);
	f = times_of(P("tm/a/f"));
	sleep_ms(5);
	OK(chmod(P("tm/a/f"), 0600));
	f = changed(P("tm/a/f"), f, "c", "chmod");
	sleep_ms(5);
	OK(chown(P("tm/a/f"), 1, 1));
	f = changed(P("tm/a/f"), f, "c", "chown");
	sleep_ms(5);
	OK(truncate(P("tm/a/f"), 1));
	f = changed(P("tm/a/f"), f, "mc", "truncate");
	sleep_ms(5);
	OK(setxattr(P("tm/a/f"), "user.t", "t", 1, 0));
	f = changed(P("tm/a/f"), f, "c", "setxattr");
	sleep_ms(5);
	b = times_of(P("tm/b"));
	OK(rename(P("tm/a/f"), P("tm/b/f")));
	f = changed(P("tm/b/f"), f, "c", "rename (moved inode)");
	a = changed(P("tm/a"), a, "mc", "rename (old parent)");
	b = changed(P("tm/b"), b, "mc", "rename (new parent)");
	sleep_ms(5);
	OK(link(P("tm/b/f"), P("tm/a/l")));
	f = changed(P("tm/b/f"), f, "c", "link (inode)");
	a = changed(P("tm/a"), a, "mc", "link (directory)");
	b = changed(P("tm/b"), b, "", "link (other directory)");
	sleep_ms(5);
	OK(unlink(P("tm/a/l")));
	f = changed(P("tm/b/f"), f, "c", "unlink (inode)");
	a = changed(P("tm/a"), a, "mc", "unlink (directory)");
	sleep_ms(5);
	OK(mkdir(P("tm/a/sub"), 0755));
	a = changed(P("tm/a"), a, "mc", "mkdir");
	sleep_ms(5);
	OK(rmdir(P("tm/a/sub")));
	a = changed(P("tm/a"), a, "mc", "rmdir");
	sleep_ms(5);
	OK(symlink("x", P("tm/a/sl")));
	a = changed(P("tm/a"), a, "mc", "symlink");
	t = times_of(P("tm/a/sl"));
	ck_assert_uint_eq(t.m, t.c);
	sleep_ms(5);
	OK(rename(P("tm/a/sl"), P("tm/a/sl2")));
	a = changed(P("tm/a"), a, "mc", "rename in one directory");
	changed(P("tm/a/sl2"), t, "c", "rename (symlink)");
	sleep_ms(5);
	fd = xopen(P("tm/b/f"), O_WRONLY | O_TRUNC, 0);
	close(fd);
	f = changed(P("tm/b/f"), f, "mc", "O_TRUNC");
	sleep_ms(5);
	fd = xopen(P("tm/b/f"), O_WRONLY, 0);
	OK(fallocate(fd, 0, 0, 8192));
	close(fd);
	changed(P("tm/b/f"), f, "mc", "fallocate growing the file");
}
END_TEST

int posix_attrs_tests(const TTest **t)
{
	int n = 0;

	t[n++] = t_attrs;
	t[n++] = t_xattr;
	t[n++] = t_acl;
	t[n++] = t_access;
	t[n++] = t_setgid;
	t[n++] = t_sticky;
	t[n++] = t_suid;
	t[n++] = t_falloc_privs;
	t[n++] = t_times;
	return n;
}
