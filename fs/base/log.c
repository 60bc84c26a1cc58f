/*
 * log.c - message sink shared by the daemon, mkfs, fsck and the tools (see log.h).
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

static enum zlog_level zlog_level_max = ZLOG_INFO;
static int zlog_to_syslog;
static const char *zlog_ident = "zlfs";

void zlog_set_level(enum zlog_level level) { zlog_level_max = level; }
void zlog_set_ident(const char *ident) { zlog_ident = ident; }

void zlog_set_syslog(int on)
{
	zlog_to_syslog = on;
	if (on)
		openlog(zlog_ident, LOG_PID, LOG_DAEMON);
}

void zlog(enum zlog_level level, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	va_list ap;

	if (level > zlog_level_max)
		return;
	va_start(ap, fmt);
	if (zlog_to_syslog) {
		vsyslog(prio[level], fmt, ap);
	} else {
		char line[12288]; /* room for the statistics JSON at unmount */
		vsnprintf(line, sizeof(line), fmt, ap);
		fprintf(stderr, "%s: %s\n", zlog_ident, line);
	}
	va_end(ap);
}
