/*
 * why.c - how every check of fs/base says why it refuses something (format.h, "Limits").
 *
 * Owns: zlfs_why, apart from the checks so that the files of checks (format_check.c,
 * format_names.c, dentry_inline.c) may call each other without calling in a circle.
 * May call: libc.
 */
#include "format.h"

#include <stdarg.h>
#include <stdio.h>

int zlfs_why(int err, char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return err;
}
