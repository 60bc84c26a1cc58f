/*
 * test_posix.c - POSIX behaviour of the mounted daemon, end to end.
 *
 * Makes an emulated zoned image, runs mkfs.zlfs, mounts it with `zlfs -f` as a child process
 * and checks through the kernel what a Linux filesystem must do: exact errno values, link
 * counts, times, permissions, xattrs, space accounting, persistence across clean remounts and
 * a daemon kill after fsync, large directories, sparse files, concurrent clients, readdir
 * cookies, and real tools (cp -a, tar, git) compared with their sources.
 *
 * The tests share one mounted filesystem and run in order in one process (CK_NOFORK): later
 * tests remount and compare what earlier ones left behind. A second, small image is filled
 * up for ENOSPC. Tests run as root (devices, chown, other users through setresuid); exit 77
 * (skipped) only when /dev/fuse is missing. Timings of the large tests are printed.
 *
 * The tests live by concern in test_posix_data.c (file data and space), test_posix_names.c
 * (the namespace), test_posix_attrs.c (attributes and permissions), test_posix_persist.c
 * (remounts, tools, a kill, a full filesystem) and test_posix_threads.c (concurrent clients);
 * what they share is in posix_testutil.h. This file puts them in order. Cases: "posix" (the
 * big image), "full" (the small one), and "threads" (t_threads and t_fsync_kill alone, only
 * with CK_RUN_CASE=threads); ctest runs each as a test of its own (tests/CMakeLists.txt).
 */
#include "posix_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct tu_tests g_tests; /* 32 today */

/* The big image's tests in order: t_remount and t_final check what the ones before left. */
static const char *const posix_order[] = {
	"t_files", "t_dirs", "t_unlink_open", "t_rename", "t_rename_whiteout", "t_links", "t_attrs", "t_fallocate",
	"t_fallocate_reserve", "t_fallocate_shift", "t_fallocate_shift_readahead", "t_statfs", "t_xattr", "t_acl", "t_names",
	"t_access", "t_setgid", "t_sticky", "t_suid", "t_falloc_privs", "t_times",
	"t_fsync", "t_direct_aio", "t_boundaries", "t_remount", "t_readonly", "t_remount_ro", "t_second_mount", "t_many", "t_manydirs", "t_sparse",
	"t_threads", "t_listing_after_rename", "t_seekdir", "t_handles", "t_unsupported", "t_chattr", "t_tools", "t_final", "t_fsync_kill", "t_unmount", NULL,
};
static const char *const threads_order[] = {"t_threads", "t_listing_after_rename", "t_fsync_kill", NULL};
static const char *const full_order[] = {"t_enospc", NULL};

static TCase *fixture_case(const char *name, void (*setup)(void))
{
	TCase *tc = tcase_create(name);

	tcase_add_unchecked_fixture(tc, setup, teardown_fs);
	tcase_add_checked_fixture(tc, need_mount, NULL);
	return tc;
}

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	if (access("/dev/fuse", R_OK | W_OK)) {
		printf("SKIP: /dev/fuse is not usable (%s): the FUSE tests need it\n", ename(errno));
		fflush(stdout);
		return 77;
	}
	tu_collect(&g_tests, posix_data_tests);
	tu_collect(&g_tests, posix_names_tests);
	tu_collect(&g_tests, posix_attrs_tests);
	tu_collect(&g_tests, posix_persist_tests);
	tu_collect(&g_tests, posix_threads_tests);
	s = suite_create("posix");
	tc = fixture_case("posix", setup_fs);
	umask(0); /* modes below are exact; t_files checks that the umask applies */
	tu_add_tests(&g_tests, tc, posix_order);
	suite_add_tcase(s, tc);
	/* CK_RUN_CASE=threads: the concurrent tests alone, on a fresh filesystem (ctest runs it
	 * as test_posix_threads, under ThreadSanitizer in tools/run-tests). */
	if (getenv("CK_RUN_CASE") && !strcmp(getenv("CK_RUN_CASE"), "threads")) {
		tc = fixture_case("threads", setup_fs);
		tu_add_tests(&g_tests, tc, threads_order);
		suite_add_tcase(s, tc);
	}
	tc = fixture_case("full", setup_small);
	tu_add_tests(&g_tests, tc, full_order);
	suite_add_tcase(s, tc);
	if (tu_unplaced(&g_tests))
		return EXIT_FAILURE;
	sr = srunner_create(s);
	/* One process: the tests share the mount and the daemon is this process's child. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
