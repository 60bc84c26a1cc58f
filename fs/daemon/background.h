/*
 * background.h - the daemon's background garbage collection (background.c).
 */
#ifndef ZLFS_BACKGROUND_H
#define ZLFS_BACKGROUND_H

#include "core.h"

struct bg;

int bg_start(struct zlfs_fs *fs, struct bg **out);
/* Stop and wait for the worker (it finishes its current step first). */
void bg_stop(struct bg *b);

#endif
