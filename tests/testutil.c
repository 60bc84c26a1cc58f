/*
 * testutil.c - see testutil.h.
 */
#include "testutil.h"

#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tu_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("ZLFS_TEST_TMP");

	snprintf(buf, len, "%s/%s", dir && *dir ? dir : "/tmp", name);
	return buf;
}

/* $ZLFS_BIN_DIR, else bin/ beside the tests/ folder this program was built in. */
const char *tu_bin(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("ZLFS_BIN_DIR");
	char self[1024];
	ssize_t n;

	if (dir && *dir) {
		snprintf(buf, len, "%s/%s", dir, name);
		return buf;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(buf, len, "%s/../bin/%s", n > 0 ? dirname(self) : ".", name);
	return buf;
}

int tu_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(NULL);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int tu_run_suite(Suite *suite)
{
	SRunner *sr = srunner_create(suite);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
