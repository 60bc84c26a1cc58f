/*
 * test_nbd.c - Check tests of zlfs-emu serve-nbd, speaking the NBD protocol to it over its
 * Unix socket (no nbd-client, no kernel): the fixed newstyle handshake and its options, reads
 * and writes, errors, flush, FUA, trim and write zeroes, the statistics file, a read-only
 * export, and what a power cut after the server stopped keeps.
 * May call: zdev.h, zdev_emu.h, emu_testutil.h, tools/nbd_proto.h, libc.
 */
#include "emu_testutil.h"
#include "nbd_proto.h"

#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEV_SIZE (64ull << 20)

static char sock[512], stats[512];

/* ---- the wire ------------------------------------------------------------------------------ */

static void xsend(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void xrecv(int fd, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r = read(fd, b, n);

		ck_assert_int_gt(r, 0);
		b += r;
		n -= (size_t)r;
	}
}

static void send32(int fd, uint32_t v) { v = htobe32(v); xsend(fd, &v, 4); }
static void send64(int fd, uint64_t v) { v = htobe64(v); xsend(fd, &v, 8); }
static uint16_t recv16(int fd) { uint16_t v; xrecv(fd, &v, 2); return be16toh(v); }
static uint32_t recv32(int fd) { uint32_t v; xrecv(fd, &v, 4); return be32toh(v); }
static uint64_t recv64(int fd) { uint64_t v; xrecv(fd, &v, 8); return be64toh(v); }

/* ---- the server ---------------------------------------------------------------------------- */

static void mk_conv_image(const char *name)
{
	struct zemu_create_opts o = {.size = DEV_SIZE, .zone_size = 4 << 20, .mode = ZEMU_MODE_FTL};

	zemu_timing_parse("block=256K", &o.timing);
	mkimg(name, &o);
}

/* The server's address (the scratch path must be short enough for one). */
static struct sockaddr_un sock_addr(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	ck_assert_uint_lt(strlen(sock), sizeof(a.sun_path));
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	return a;
}

/* The socket is there (bound; listening follows at once: nbd_connect retries a refusal).
 * Not a probe connection: a --once server would take it for its client. */
static int sock_ready(void)
{
	struct stat st;

	return !stat(sock, &st) && S_ISSOCK(st.st_mode);
}

/* zlfs-emu serve-nbd IMG SOCK --stats STATS [EXTRA], once it accepts connections. */
static pid_t start_server(const char *extra)
{
	struct timespec ts = {0, 20 * 1000 * 1000};
	pid_t pid;

	tu_bin(bin, sizeof(bin), "zlfs-emu");
	tu_path(sock, sizeof(sock), "nbd.sock");
	tu_path(stats, sizeof(stats), "nbd-stats.json");
	unlink(stats);
	unlink(sock);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		execl(bin, "zlfs-emu", "serve-nbd", img, sock, "--stats", stats, extra, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && !sock_ready(); i++)
		nanosleep(&ts, NULL);
	ck_assert_msg(sock_ready(), "the server did not create %s", sock);
	return pid;
}

static int stop_server(pid_t pid)
{
	int status;

	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A connection, through the greeting: returns the fd, *FLAGS the handshake flags. */
static int nbd_connect(uint16_t *flags, uint32_t cflags)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	struct sockaddr_un a = sock_addr();
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), ret;

	for (int i = 0; (ret = connect(fd, (struct sockaddr *)&a, sizeof(a))) && i < 300; i++)
		nanosleep(&ts, NULL);
	ck_assert_int_eq(ret, 0);
	ck_assert_uint_eq(recv64(fd), NBD_MAGIC);
	ck_assert_uint_eq(recv64(fd), NBD_IHAVEOPT);
	*flags = recv16(fd);
	send32(fd, cflags);
	return fd;
}

static void send_opt(int fd, uint32_t opt, const void *data, uint32_t len)
{
	send64(fd, NBD_IHAVEOPT);
	send32(fd, opt);
	send32(fd, len);
	if (len)
		xsend(fd, data, len);
}

/* One option reply: its type, the data in BUF (at most MAX bytes), *LEN its length. */
static uint32_t recv_opt_reply(int fd, uint32_t opt, void *buf, uint32_t max, uint32_t *len)
{
	uint32_t type;

	ck_assert_uint_eq(recv64(fd), NBD_REP_MAGIC);
	ck_assert_uint_eq(recv32(fd), opt);
	type = recv32(fd);
	*len = recv32(fd);
	ck_assert_uint_le(*len, max);
	if (*len)
		xrecv(fd, buf, *len);
	return type;
}

/* NBD_OPT_GO for the unnamed export, asking for the block sizes: *SIZE, *TFLAGS, *MIN. */
static void nbd_go(int fd, uint64_t *size, uint16_t *tflags, uint32_t *min)
{
	uint8_t req[8] = {0, 0, 0, 0, 0, 1, 0, NBD_INFO_BLOCK_SIZE}, b[64];
	uint32_t type, len;

	send_opt(fd, NBD_OPT_GO, req, sizeof(req));
	while ((type = recv_opt_reply(fd, NBD_OPT_GO, b, sizeof(b), &len)) == NBD_REP_INFO) {
		uint16_t it = (uint16_t)(b[0] << 8 | b[1]);

		if (it == NBD_INFO_EXPORT) {
			uint64_t s;
			uint16_t f;

			ck_assert_uint_eq(len, 12);
			memcpy(&s, b + 2, 8);
			memcpy(&f, b + 10, 2);
			*size = be64toh(s);
			*tflags = be16toh(f);
		} else if (it == NBD_INFO_BLOCK_SIZE) {
			uint32_t m;

			ck_assert_uint_eq(len, 14);
			memcpy(&m, b + 2, 4);
			*min = be32toh(m);
		}
	}
	ck_assert_uint_eq(type, NBD_REP_ACK);
}

static int nbd_open(void)
{
	uint64_t size = 0;
	uint16_t flags, tflags = 0;
	uint32_t min = 0;
	int fd = nbd_connect(&flags, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);

	nbd_go(fd, &size, &tflags, &min);
	ck_assert_uint_eq(size, DEV_SIZE);
	return fd;
}

/* One request; OUT is sent for writes, IN receives a read's data. Returns the error. */
static uint32_t nbd_cmd(int fd, uint16_t type, uint16_t flags, uint64_t off, uint32_t len,
			const void *out, void *in)
{
	static uint64_t handle = 1000;
	uint32_t err;

	send32(fd, NBD_REQUEST_MAGIC);
	flags = htobe16(flags);
	xsend(fd, &flags, 2);
	type = htobe16(type);
	xsend(fd, &type, 2);
	send64(fd, ++handle);
	send64(fd, off);
	send32(fd, len);
	if (be16toh(type) == NBD_CMD_WRITE)
		xsend(fd, out, len);
	ck_assert_uint_eq(recv32(fd), NBD_SIMPLE_REPLY_MAGIC);
	err = recv32(fd);
	ck_assert_uint_eq(recv64(fd), handle);
	if (!err && be16toh(type) == NBD_CMD_READ)
		xrecv(fd, in, len);
	return err;
}

static void disconnect(int fd)
{
	send32(fd, NBD_REQUEST_MAGIC);
	send32(fd, NBD_CMD_DISC); /* flags 0, type DISC */
	send64(fd, 1);
	send64(fd, 0);
	send32(fd, 0);
	close(fd);
}

/* A number from the statistics file ("KEY": N), or -1. */
static long stat_of(const char *key)
{
	char buf[8192], pat[64], *p;
	FILE *f = fopen(stats, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* The control socket's answer to LINE (one line, at most MAX - 1 bytes kept). */
static void control(const char *line, char *buf, size_t max)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_uint_lt(strlen(sock) + 4, sizeof(a.sun_path));
	snprintf(a.sun_path, sizeof(a.sun_path), "%.100s.ctl", sock);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	xsend(fd, line, strlen(line));
	while (n < max - 1 && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
		n++;
	buf[n] = 0;
	close(fd);
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(t_nbd_handshake)
{
	uint8_t b[4096], info[6] = {0};
	uint16_t flags, tflags = 0;
	uint32_t len, min = 0;
	uint64_t size = 0;
	pid_t pid;
	int fd;

	mk_conv_image("nbd-hs.img");
	pid = start_server(NULL);
	fd = nbd_connect(&flags, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	ck_assert_uint_eq(flags, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	send_opt(fd, NBD_OPT_STRUCTURED_REPLY, NULL, 0); /* simple replies only */
	ck_assert_uint_eq(recv_opt_reply(fd, NBD_OPT_STRUCTURED_REPLY, b, sizeof(b), &len),
			  NBD_REP_ERR_UNSUP);
	send_opt(fd, 99, "x", 1);
	ck_assert_uint_eq(recv_opt_reply(fd, 99, b, sizeof(b), &len), NBD_REP_ERR_UNSUP);
	send_opt(fd, NBD_OPT_LIST, NULL, 0);
	ck_assert_uint_eq(recv_opt_reply(fd, NBD_OPT_LIST, b, sizeof(b), &len), NBD_REP_SERVER);
	ck_assert_uint_eq(len, 4); /* the unnamed export */
	ck_assert_uint_eq(recv_opt_reply(fd, NBD_OPT_LIST, b, sizeof(b), &len), NBD_REP_ACK);
	send_opt(fd, NBD_OPT_INFO, "\0\0\0", 3); /* lengths that do not add up */
	ck_assert_uint_eq(recv_opt_reply(fd, NBD_OPT_INFO, b, sizeof(b), &len), NBD_REP_ERR_INVALID);
	send_opt(fd, NBD_OPT_INFO, info, sizeof(info));
	ck_assert_uint_eq(recv_opt_reply(fd, NBD_OPT_INFO, b, sizeof(b), &len), NBD_REP_INFO);
	ck_assert_uint_eq(len, 12);
	while (recv_opt_reply(fd, NBD_OPT_INFO, b, sizeof(b), &len) != NBD_REP_ACK)
		;
	nbd_go(fd, &size, &tflags, &min);
	ck_assert_uint_eq(size, DEV_SIZE);
	ck_assert_uint_eq(min, 4096);
	ck_assert(tflags & NBD_FLAG_HAS_FLAGS);
	ck_assert(tflags & NBD_FLAG_SEND_FLUSH);
	ck_assert(tflags & NBD_FLAG_SEND_FUA);
	ck_assert(tflags & NBD_FLAG_SEND_TRIM);
	ck_assert(tflags & NBD_FLAG_SEND_WRITE_ZEROES);
	ck_assert(!(tflags & NBD_FLAG_READ_ONLY));
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, 0, 4096, NULL, b), 0);
	disconnect(fd);
	/* the old way in: NBD_OPT_EXPORT_NAME, with the 124 zero bytes for a client that wants them */
	fd = nbd_connect(&flags, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(fd, NBD_OPT_EXPORT_NAME, "", 0);
	ck_assert_uint_eq(recv64(fd), DEV_SIZE);
	ck_assert_uint_eq(recv16(fd), tflags);
	xrecv(fd, b, 124);
	ck_assert(buf_holds(b, 124, 0));
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_FLUSH, 0, 0, 0, NULL, NULL), 0);
	disconnect(fd);
	/* NBD_OPT_ABORT ends the session */
	fd = nbd_connect(&flags, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(fd, NBD_OPT_ABORT, NULL, 0);
	ck_assert_uint_eq(recv_opt_reply(fd, NBD_OPT_ABORT, b, sizeof(b), &len), NBD_REP_ACK);
	close(fd);
	ck_assert_int_eq(stop_server(pid), 0);
	ck_assert_int_ne(access(sock, F_OK), 0); /* the sockets went with the server */
	snprintf((char *)b, sizeof(b), "%s.ctl", sock);
	ck_assert_int_ne(access((char *)b, F_OK), 0);
}
END_TEST

START_TEST(t_nbd_io)
{
	uint8_t *w = zdev_buf_alloc(1 << 20), *r = zdev_buf_alloc(1 << 20);
	pid_t pid;
	int fd;

	mk_conv_image("nbd-io.img");
	pid = start_server(NULL);
	fd = nbd_open();
	pattern(w, 1 << 20, 5);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, 0, 8 << 20, 1 << 20, w, NULL), 0);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, 8 << 20, 1 << 20, NULL, r), 0);
	ck_assert(buf_holds(r, 1 << 20, 5));
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, 0, 4096, NULL, r), 0);
	ck_assert(buf_holds(r, 4096, 0)); /* never written */
	/* errors come back in the reply; the connection goes on */
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, DEV_SIZE - 4096, 8192, NULL, r), NBD_EINVAL);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, 0, 512, 4096, w, NULL), NBD_EINVAL);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_TRIM, 0, DEV_SIZE, 4096, NULL, NULL), NBD_EINVAL);
	ck_assert_uint_eq(nbd_cmd(fd, 42, 0, 0, 0, NULL, NULL), NBD_EINVAL);
	/* trim and write zeroes read as zeros; the trim reaches the FTL */
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_TRIM, 0, 8 << 20, 64 << 10, NULL, NULL), 0);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE,
				  (8 << 20) + (64 << 10), 64 << 10, NULL, NULL), 0);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE_ZEROES, 0, (8 << 20) + (128 << 10), 64 << 10,
				  NULL, NULL), 0);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, 8 << 20, 1 << 20, NULL, r), 0);
	ck_assert(buf_holds(r, 192 << 10, 0));
	ck_assert_int_eq(memcmp(r + (192 << 10), w + (192 << 10), (1 << 20) - (192 << 10)), 0);
	/* the statistics file follows every flush, FUA writes included */
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_FLUSH, 0, 0, 0, NULL, NULL), 0);
	ck_assert_int_eq(stat_of("host_flushes"), 1);
	ck_assert_int_eq(stat_of("host_trims"), 2);
	ck_assert_int_eq(stat_of("host_writes"), 2);
	ck_assert_int_gt(stat_of("sim_ns"), 0);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 0, 4096, w, NULL), 0);
	ck_assert_int_eq(stat_of("host_flushes"), 2);
	ck_assert_int_eq(stat_of("reads_ge_512k"), 2);
	/* the control socket answers at once, without a request to the device */
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, 0, 4096, NULL, r), 0);
	control("stats\n", (char *)r, 4096);
	ck_assert_ptr_nonnull(strstr((char *)r, "\"host_reads\": 4,"));
	ck_assert_ptr_nonnull(strstr((char *)r, "\"host_flushes\": 2,"));
	control("bogus\n", (char *)r, 4096);
	ck_assert_ptr_nonnull(strstr((char *)r, "\"error\""));
	disconnect(fd);
	ck_assert_int_eq(stop_server(pid), 0);
	zdev_buf_free(w);
	zdev_buf_free(r);
}
END_TEST

/* A power cut after the server stopped drops what was not flushed (nor written with FUA),
 * as in zoned mode, and keeps the rest. */
START_TEST(t_nbd_powercut)
{
	uint8_t *b = zdev_buf_alloc(64 << 10);
	struct zdev *d;
	pid_t pid;
	int fd;

	mk_conv_image("nbd-cut.img");
	pid = start_server(NULL);
	fd = nbd_open();
	pattern(b, 64 << 10, 1);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, 0, 0, 64 << 10, b, NULL), 0);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_FLUSH, 0, 0, 0, NULL, NULL), 0);
	pattern(b, 64 << 10, 2);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, 0, 0, 64 << 10, b, NULL), 0); /* unflushed */
	pattern(b, 64 << 10, 3);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, 0, 1 << 20, 64 << 10, b, NULL), 0);
	disconnect(fd);
	ck_assert_int_eq(stop_server(pid), 0);
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 0), 0);
	d = opn(img);
	ck_assert(holds(d, 0, 64 << 10, 1));
	ck_assert(holds(d, 1 << 20, 64 << 10, 0));
	zdev_close(d);
	/* FUA: durable when the reply comes */
	pid = start_server(NULL);
	fd = nbd_open();
	pattern(b, 64 << 10, 4);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 2 << 20, 64 << 10, b, NULL),
			  0);
	disconnect(fd);
	ck_assert_int_eq(stop_server(pid), 0);
	ck_assert_int_eq(zemu_powercut(img, -1, 0, 0), 0);
	d = opn(img);
	ck_assert(holds(d, 2 << 20, 64 << 10, 4));
	ck_assert(holds(d, 0, 64 << 10, 1));
	zdev_close(d);
	zdev_buf_free(b);
}
END_TEST

START_TEST(t_nbd_readonly_once)
{
	uint8_t *b = zdev_buf_alloc(4096);
	uint16_t flags, tflags = 0;
	uint32_t min;
	uint64_t size;
	pid_t pid;
	int fd, status;

	mk_conv_image("nbd-ro.img");
	pid = start_server("--read-only");
	fd = nbd_connect(&flags, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	nbd_go(fd, &size, &tflags, &min);
	ck_assert(tflags & NBD_FLAG_READ_ONLY);
	memset(b, 7, 4096);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_WRITE, 0, 0, 4096, b, NULL), NBD_EPERM);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_TRIM, 0, 0, 4096, NULL, NULL), NBD_EPERM);
	ck_assert_uint_eq(nbd_cmd(fd, NBD_CMD_READ, 0, 0, 4096, NULL, b), 0);
	disconnect(fd);
	ck_assert_int_eq(stop_server(pid), 0);
	/* --once: the server leaves with its first client */
	pid = start_server("--once");
	fd = nbd_open();
	disconnect(fd);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	zdev_buf_free(b);
}
END_TEST

/* Only conventional-mode images: a zoned one is refused with a reason, before any socket. */
START_TEST(t_nbd_refuses_zoned)
{
	mkdefault("nbd-zoned.img");
	tu_bin(bin, sizeof(bin), "zlfs-emu");
	tu_path(sock, sizeof(sock), "nbd-zoned.sock");
	tu_path(aux, sizeof(aux), "nbd-zoned.err");
	ck_assert_int_eq(tu_sh("%s serve-nbd %s %s 2>%s", bin, img, sock, aux), 1);
	ck_assert(file_has(aux, "not a conventional-mode image"));
	ck_assert_int_ne(access(sock, F_OK), 0);
	ck_assert_int_eq(tu_sh("%s serve-nbd %s 2>/dev/null", bin, img), 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nbd");
	TCase *tc = tcase_create("nbd");

	signal(SIGPIPE, SIG_IGN);
	tcase_add_test(tc, t_nbd_handshake);
	tcase_add_test(tc, t_nbd_io);
	tcase_add_test(tc, t_nbd_powercut);
	tcase_add_test(tc, t_nbd_readonly_once);
	tcase_add_test(tc, t_nbd_refuses_zoned);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
