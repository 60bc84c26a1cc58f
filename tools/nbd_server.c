/*
 * nbd_server.c - zlfs-emu serve-nbd: a conventional-mode emulator image served as a block
 * device over the NBD protocol on a Unix socket, for a kernel (nbd.ko with nbd-client) or
 * QEMU's NBD client (the zoned guest's conv-model disk) to put a filesystem on.
 *
 * Owns: the fixed newstyle handshake (NBD_OPT_GO, _INFO, _EXPORT_NAME, _LIST, _ABORT; other
 * options get ERR_UNSUP, so clients fall back to simple replies), the transmission phase
 * (read, write, flush, trim, write zeroes, FUA on any write, disconnect), one client at a
 * time, requests in arrival order, the statistics file, and the control socket
 * (SOCKET.ctl: a line "stats" gets the statistics as one JSON line, without a request to the
 * device; the zoned guest reaches it through a virtio-serial port).
 * May call: zdev.h, zdev_emu.h (public API only), log.h, nbd_proto.h.
 *
 * Durability is the emulator's: a write completes into its volatile cache, NBD_CMD_FLUSH is
 * zdev_flush, a write with FUA is the write then a flush (stronger than FUA needs: it makes
 * earlier writes durable too). So a power cut (zlfs-emu powercut on the image after the
 * server stopped) drops exactly what a power cut drops in zoned mode. A disconnect does not
 * flush, as closing the device does not.
 *
 * Requests are served one at a time, in the order they arrive: the timing model sees the
 * same sequence whatever the client's queue depth, and needs no lock beyond the device's.
 */
#include "nbd_server.h"
#include "nbd_proto.h"
#include "zdev_emu.h"
#include "log.h"

#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define OPT_DATA_MAX 4096u /* option data we take (a name, info requests) */

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct server {
	struct zdev *dev;
	const struct nbd_server_opts *o;
	uint64_t size;
	uint16_t tflags;
	int fd;          /* the NBD client, -1 while there is none */
	int cfd;         /* the control client, -1 while there is none */
	int no_zeroes;
};

/* ---- socket I/O ---------------------------------------------------------------------------- */

static int recv_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR && !stop_requested)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Big-endian fields, appended to a small buffer. */
struct wire {
	uint8_t b[64];
	size_t n;
};

static void put(struct wire *w, const void *v, size_t len)
{
	memcpy(w->b + w->n, v, len);
	w->n += len;
}

static void put16(struct wire *w, uint16_t v) { v = htobe16(v); put(w, &v, 2); }
static void put32(struct wire *w, uint32_t v) { v = htobe32(v); put(w, &v, 4); }
static void put64(struct wire *w, uint64_t v) { v = htobe64(v); put(w, &v, 8); }
static uint32_t min_len(uint32_t a, uint32_t b) { return a < b ? a : b; }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

/* ---- statistics ---------------------------------------------------------------------------- */

/* Written to a temporary name and renamed: a reader never sees half a file. */
static void write_stats(struct server *s)
{
	char json[4096], tmp[4200];
	struct zemu_stats st;
	FILE *f;

	if (!s->o->stats_path || zemu_dev_stats(s->dev, &st) ||
	    zemu_stats_json(&st, json, sizeof(json)) < 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", s->o->stats_path);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", json) < 0 || fclose(f) || rename(tmp, s->o->stats_path)) {
		zlog_warn("%s: cannot write the statistics: %s", s->o->stats_path, strerror(errno));
		if (f)
			unlink(tmp);
	}
}

/* ---- handshake ----------------------------------------------------------------------------- */

static int opt_reply(struct server *s, uint32_t opt, uint32_t type, const void *data, uint32_t len)
{
	struct wire w = {.n = 0};
	int ret;

	put64(&w, NBD_REP_MAGIC);
	put32(&w, opt);
	put32(&w, type);
	put32(&w, len);
	ret = send_all(s->fd, w.b, w.n);
	return ret || !len ? ret : send_all(s->fd, data, len);
}

/* NBD_REP_INFO for the export and its block sizes (4096: the emulator's page), then ACK. */
static int reply_info(struct server *s, uint32_t opt)
{
	struct wire w = {.n = 0};
	int ret;

	put16(&w, NBD_INFO_EXPORT);
	put64(&w, s->size);
	put16(&w, s->tflags);
	ret = opt_reply(s, opt, NBD_REP_INFO, w.b, (uint32_t)w.n);
	w.n = 0;
	put16(&w, NBD_INFO_BLOCK_SIZE);
	put32(&w, 4096);
	put32(&w, 4096);
	put32(&w, NBD_MAX_REQUEST);
	if (!ret)
		ret = opt_reply(s, opt, NBD_REP_INFO, w.b, (uint32_t)w.n);
	return ret ? ret : opt_reply(s, opt, NBD_REP_ACK, NULL, 0);
}

/* The old way into transmission: size and flags, no option reply. */
static int reply_export_name(struct server *s)
{
	static const uint8_t zeroes[124];
	struct wire w = {.n = 0};
	int ret;

	put64(&w, s->size);
	put16(&w, s->tflags);
	ret = send_all(s->fd, w.b, w.n);
	return ret || s->no_zeroes ? ret : send_all(s->fd, zeroes, sizeof(zeroes));
}

/* INFO and GO carry a name (any name is our one export) and info requests: check the
 * lengths add up. */
static int info_request_ok(const uint8_t *data, uint32_t len)
{
	uint32_t nlen;

	if (len < 6)
		return 0;
	nlen = get32(data);
	return nlen <= len - 6 && len == 6 + nlen + 2u * get16(data + 4 + nlen);
}

/* Options until one starts transmission (1), the client leaves (0) or breaks off (-errno). */
static int handshake(struct server *s)
{
	uint8_t hdr[16], *data = malloc(OPT_DATA_MAX);
	struct wire w = {.n = 0};
	uint32_t cflags;
	int ret;

	if (!data)
		return -ENOMEM;
	put64(&w, NBD_MAGIC);
	put64(&w, NBD_IHAVEOPT);
	put16(&w, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	ret = send_all(s->fd, w.b, w.n);
	if (!ret)
		ret = recv_all(s->fd, &cflags, 4);
	s->no_zeroes = !ret && (be32toh(cflags) & NBD_FLAG_C_NO_ZEROES);
	while (!ret) {
		uint32_t opt, len;

		ret = recv_all(s->fd, hdr, sizeof(hdr));
		if (ret)
			break;
		if (get64(hdr) != NBD_IHAVEOPT) {
			ret = -EPROTO;
			break;
		}
		opt = get32(hdr + 8);
		len = get32(hdr + 12);
		if (len > OPT_DATA_MAX) { /* nothing we know needs that much: refuse, drop it */
			for (uint32_t left = len; !ret && left; left -= min_len(left, OPT_DATA_MAX))
				ret = recv_all(s->fd, data, min_len(left, OPT_DATA_MAX));
			if (!ret)
				ret = opt_reply(s, opt, NBD_REP_ERR_TOO_BIG, NULL, 0);
			continue;
		}
		ret = len ? recv_all(s->fd, data, len) : 0;
		if (ret)
			break;
		switch (opt) {
		case NBD_OPT_EXPORT_NAME:
			ret = reply_export_name(s);
			free(data);
			return ret ? ret : 1;
		case NBD_OPT_ABORT:
			opt_reply(s, opt, NBD_REP_ACK, NULL, 0); /* the client may be gone already */
			free(data);
			return 0;
		case NBD_OPT_LIST: {
			uint32_t none = 0; /* one export, the unnamed one */

			ret = len ? opt_reply(s, opt, NBD_REP_ERR_INVALID, NULL, 0) :
				    opt_reply(s, opt, NBD_REP_SERVER, &none, 4);
			if (!ret && !len)
				ret = opt_reply(s, opt, NBD_REP_ACK, NULL, 0);
			break;
		}
		case NBD_OPT_INFO:
		case NBD_OPT_GO:
			if (!info_request_ok(data, len)) {
				ret = opt_reply(s, opt, NBD_REP_ERR_INVALID, NULL, 0);
				break;
			}
			ret = reply_info(s, opt);
			if (!ret && opt == NBD_OPT_GO) {
				free(data);
				return 1;
			}
			break;
		default: /* STRUCTURED_REPLY, STARTTLS, meta contexts...: simple replies only */
			ret = opt_reply(s, opt, NBD_REP_ERR_UNSUP, NULL, 0);
		}
	}
	free(data);
	return ret;
}

/* ---- transmission -------------------------------------------------------------------------- */

static uint32_t nbd_error(int err)
{
	switch (err) {
	case 0: return 0;
	case -EPERM:
	case -EROFS: return NBD_EPERM;
	case -ENOMEM: return NBD_ENOMEM;
	case -EINVAL: return NBD_EINVAL;
	case -ENOSPC: return NBD_ENOSPC;
	case -EOVERFLOW: return NBD_EOVERFLOW;
	case -EOPNOTSUPP: return NBD_ENOTSUP;
	default: return NBD_EIO;
	}
}

static int send_reply(struct server *s, uint64_t handle, int err, const void *data, size_t len)
{
	struct wire w = {.n = 0};
	int ret;

	put32(&w, NBD_SIMPLE_REPLY_MAGIC);
	put32(&w, nbd_error(err));
	put64(&w, handle);
	ret = send_all(s->fd, w.b, w.n);
	return ret || err || !len ? ret : send_all(s->fd, data, len);
}

/* Ranges must lie inside the export, in whole 4 KiB pages (the block size we announced). */
static int range_ok(const struct server *s, uint64_t off, uint32_t len)
{
	return off <= s->size && len <= s->size - off && !(off % 4096) && !(len % 4096) &&
	       len <= NBD_MAX_REQUEST;
}

static int do_write_zeroes(struct server *s, uint64_t off, uint32_t len, int no_hole)
{
	void *z;
	int ret;

	if (!no_hole)
		return zemu_trim(s->dev, off, len); /* a trimmed range reads as zeros */
	z = zdev_buf_alloc(len);
	if (!z)
		return -ENOMEM;
	memset(z, 0, len);
	ret = zdev_write(s->dev, z, len, off);
	zdev_buf_free(z);
	return ret;
}

/* One request: 0 when served (an error included: it was sent back), 1 when the client
 * disconnected, -errno when the connection broke. */
static int serve_request(struct server *s)
{
	uint8_t h[NBD_REQUEST_SIZE];
	uint16_t flags, type;
	uint64_t handle, off;
	uint32_t len;
	void *buf = NULL;
	int err = 0, ret;

	ret = recv_all(s->fd, h, sizeof(h));
	if (ret)
		return ret;
	if (get32(h) != NBD_REQUEST_MAGIC)
		return -EPROTO;
	flags = get16(h + 4);
	type = get16(h + 6);
	handle = get64(h + 8);
	off = get64(h + 16);
	len = get32(h + 24);
	if (type == NBD_CMD_DISC)
		return 1;
	if (type == NBD_CMD_READ || type == NBD_CMD_WRITE) {
		if (len > NBD_MAX_REQUEST)
			return -EPROTO; /* we could not even take its payload */
		buf = zdev_buf_alloc(len ? len : 1);
		if (!buf)
			return -ENOMEM;
	}
	if (type == NBD_CMD_WRITE && (ret = recv_all(s->fd, buf, len))) {
		zdev_buf_free(buf);
		return ret;
	}
	if (type != NBD_CMD_FLUSH && !range_ok(s, off, len))
		err = -EINVAL;
	else if (s->o->readonly && type != NBD_CMD_READ && type != NBD_CMD_FLUSH)
		err = -EPERM;
	else if (type == NBD_CMD_READ)
		err = len ? zdev_read(s->dev, buf, len, off) : 0;
	else if (type == NBD_CMD_WRITE)
		err = len ? zdev_write(s->dev, buf, len, off) : 0;
	else if (type == NBD_CMD_TRIM)
		err = zemu_trim(s->dev, off, len);
	else if (type == NBD_CMD_WRITE_ZEROES)
		err = do_write_zeroes(s, off, len, flags & NBD_CMD_FLAG_NO_HOLE);
	else if (type != NBD_CMD_FLUSH)
		err = -EINVAL;
	if (!err && (type == NBD_CMD_FLUSH || (flags & NBD_CMD_FLAG_FUA))) {
		err = zdev_flush(s->dev);
		write_stats(s);
	}
	ret = send_reply(s, handle, err, buf, type == NBD_CMD_READ ? len : 0);
	zdev_buf_free(buf);
	return ret;
}

/* The client is gone or broke off: say why if it broke, and keep the statistics. */
static void end_client(struct server *s, int ret)
{
	if (ret < 0 && ret != -ECONNRESET && ret != -EPIPE && !stop_requested)
		zlog_warn("NBD client: %s", strerror(-ret));
	close(s->fd);
	s->fd = -1;
	write_stats(s);
}

/* ---- the control socket: statistics without touching the device --------------------------- */

/* One line from the control client: "stats" gets the statistics as one JSON line. Lines
 * longer than the buffer are cut; the client is one reader asking one question at a time. */
static int control_line(struct server *s)
{
	char line[64], json[4096];
	struct zemu_stats st;
	size_t n = 0;
	int ret;

	for (;;) {
		ssize_t r = read(s->cfd, line + n, 1);

		if (r <= 0)
			return r < 0 && errno == EINTR ? 0 : -ECONNRESET;
		if (line[n] == '\n' || ++n == sizeof(line) - 1)
			break;
	}
	line[n] = 0;
	if (n && line[n - 1] == '\r')
		line[--n] = 0;
	if (!strcmp(line, "stats") && !zemu_dev_stats(s->dev, &st) &&
	    (ret = zemu_stats_json(&st, json, sizeof(json) - 1)) > 0) {
		json[ret] = '\n';
		return send_all(s->cfd, json, (size_t)ret + 1);
	}
	snprintf(json, sizeof(json), "{\"error\": \"unknown request (stats is the one)\"}\n");
	return send_all(s->cfd, json, strlen(json));
}

/* ---- the server ---------------------------------------------------------------------------- */

static int listen_on(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		zlog_err("%s: socket path too long", path);
		return -ENAMETOOLONG;
	}
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			zlog_err("%s exists and is not a socket", path);
			return -EEXIST;
		}
		unlink(path); /* a stale socket of an earlier server */
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 1)) {
		int err = errno;

		zlog_err("%s: cannot listen: %s", path, strerror(err));
		if (fd >= 0)
			close(fd);
		return -err;
	}
	return fd;
}

static int open_image(const char *image, const struct nbd_server_opts *o, struct zdev **dev)
{
	struct zdev_open_opts oo = {.readonly = o->readonly, .direct = o->direct};
	struct zemu_stats st;
	int ret = zdev_open(image, &oo, dev);

	if (ret)
		return ret;
	if (!zdev_is_emu(*dev) || zemu_dev_stats(*dev, &st) || st.mode != ZEMU_MODE_FTL) {
		zlog_err("%s: not a conventional-mode image: serve-nbd serves what "
			 "'zlfs-emu create --mode conventional' makes", image);
		zdev_close(*dev);
		return -EINVAL;
	}
	return 0;
}

/* Between requests, whichever of the two sockets and their clients has something. */
static int serve_loop(struct server *s, int lfd, int ctl_lfd)
{
	while (!stop_requested) {
		struct pollfd p[4] = {{lfd, s->fd < 0 ? POLLIN : 0, 0},
				      {ctl_lfd, s->cfd < 0 ? POLLIN : 0, 0},
				      {s->fd, POLLIN, 0}, {s->cfd, POLLIN, 0}};
		int ret;

		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[0].revents & POLLIN) {
			s->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			ret = s->fd < 0 ? 0 : handshake(s);
			if (s->fd >= 0 && ret != 1) {
				end_client(s, ret);
				if (s->o->once)
					return 0;
			}
		}
		if (p[1].revents & POLLIN)
			s->cfd = accept4(ctl_lfd, NULL, NULL, SOCK_CLOEXEC);
		if (p[2].revents && (ret = serve_request(s))) {
			end_client(s, ret);
			if (s->o->once)
				return 0;
		}
		if (p[3].revents && control_line(s)) {
			close(s->cfd);
			s->cfd = -1;
		}
	}
	return 0;
}

int nbd_serve(const char *image, const char *socket_path, const struct nbd_server_opts *o)
{
	struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: poll() returns */
	struct server s = {.o = o, .fd = -1, .cfd = -1};
	char ctl_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
	int lfd, ctl_lfd = -1, ret;

	snprintf(ctl_path, sizeof(ctl_path), "%s.ctl", socket_path);
	ret = open_image(image, o, &s.dev);
	if (ret)
		return ret;
	s.size = zdev_geometry(s.dev)->capacity;
	s.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		   NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
		   (o->readonly ? NBD_FLAG_READ_ONLY : 0);
	lfd = listen_on(socket_path);
	if (lfd >= 0)
		ctl_lfd = listen_on(ctl_path);
	if (lfd < 0 || ctl_lfd < 0) {
		if (lfd >= 0) {
			close(lfd);
			unlink(socket_path);
		}
		zdev_close(s.dev);
		return lfd < 0 ? lfd : ctl_lfd;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	write_stats(&s);
	fprintf(stderr, "zlfs-emu: serving %s (%llu bytes) on %s (statistics on %s)\n", image,
		(unsigned long long)s.size, socket_path, ctl_path);
	ret = serve_loop(&s, lfd, ctl_lfd);
	if (ret)
		zlog_err("%s: %s", socket_path, strerror(-ret));
	if (s.fd >= 0)
		end_client(&s, 0);
	if (s.cfd >= 0)
		close(s.cfd);
	close(lfd);
	close(ctl_lfd);
	unlink(socket_path);
	unlink(ctl_path);
	write_stats(&s);
	zdev_close(s.dev);
	return ret;
}
