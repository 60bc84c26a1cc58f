/*
 * nbd_server.h - zlfs-emu serve-nbd: an emulator image in conventional mode as an NBD export
 * on a Unix socket (nbd_server.c; docs/emulator.md, "The NBD server").
 */
#ifndef ZLFS_NBD_SERVER_H
#define ZLFS_NBD_SERVER_H

struct nbd_server_opts {
	const char *stats_path; /* rewritten with zemu_stats_json() at every flush and at exit */
	int once;               /* exit when the first client disconnects */
	int readonly;           /* refuse writes and trims (NBD_FLAG_READ_ONLY) */
	int direct;             /* O_DIRECT on the image */
};

/* Serve IMAGE on SOCKET_PATH until SIGTERM or SIGINT (or, with ONCE, until the first client
 * leaves); the socket is removed at the end. 0, or -errno with a message logged. */
int nbd_serve(const char *image, const char *socket_path, const struct nbd_server_opts *o);

#endif
