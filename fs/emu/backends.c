/*
 * backends.c - the table of device backends, and zdev_open over it.
 *
 * Owns: which backends there are and the order they are tried in: the kernel's zoned block
 * devices first (fs/dev, zdev_zbd.c), then zlfs-emu images. It sits here, at the top of the
 * device layers, so that fs/dev's dispatch names no backend above it and the backends call
 * only down into fs/dev's helpers (docs/design.md, "Layers").
 * May call: zdev_impl.h (zdev_open_from), the backends' descriptions.
 */
#include "zdev_emu_impl.h"

static const struct zdev_backend *const backends[] = {&zdev_zbd_backend, &zdev_emu_backend,
							NULL};

int zdev_open(const char *path, const struct zdev_open_opts *opts, struct zdev **out)
{
	return zdev_open_from(backends, path, opts, out);
}
