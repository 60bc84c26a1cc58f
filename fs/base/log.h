/*
 * log.h - messages for users and operators.
 *
 * Owns: where messages go (stderr, or syslog once the daemon detaches) and the verbosity.
 * May call: libc only. Every layer may call it. Never pass key material to it.
 */
#ifndef ZLFS_LOG_H
#define ZLFS_LOG_H

enum zlog_level { ZLOG_ERR = 0, ZLOG_WARN, ZLOG_INFO, ZLOG_DEBUG };

void zlog_set_level(enum zlog_level level);
void zlog_set_syslog(int on);
/* Prefix for stderr messages, e.g. the program name; default "zlfs". */
void zlog_set_ident(const char *ident);
void zlog(enum zlog_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define zlog_err(...) zlog(ZLOG_ERR, __VA_ARGS__)
#define zlog_warn(...) zlog(ZLOG_WARN, __VA_ARGS__)
#define zlog_info(...) zlog(ZLOG_INFO, __VA_ARGS__)
#define zlog_debug(...) zlog(ZLOG_DEBUG, __VA_ARGS__)

#endif
