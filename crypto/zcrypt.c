/*
 * zcrypt.c - keys and contents (see zcrypt.h): randomness and wiping, the master key (key
 * file, scrypt-stretched passphrase, passphrase input), the key check value, HKDF and the
 * per-file and per-directory key derivations, and AES-256-XTS of data blocks.
 * Names and their encodings are in zcrypt_names.c.
 * May call: OpenSSL libcrypto, libc, pthreads, zc_ctx.h.
 *
 * XTS contexts are per thread (zc_ctx.c): each thread has one EVP_CIPHER_CTX for encryption
 * and one for decryption, each remembering the key it was last keyed with so that a run of
 * blocks of one file only re-sets the tweak.
 */
#include "zcrypt.h"
#include "zc_ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#define ZC_HALF (ZCRYPT_XTS_KEY_SIZE / 2)
#define ZC_XTS_MAX_LEN (1u << 24) /* OpenSSL caps an XTS data unit at 2^20 blocks */

static const char zc_info_contents[] = "zlfs contents v1";
static const char zc_info_names[] = "zlfs names v1";
static const char zc_info_check[] = "zlfs key check v1";
static const char zc_check_msg[] = "zlfs key check value";

/* ---- one-time setup ------------------------------------------------------------------- */

/* AES-256-XTS through zc_ctx.c: a per-thread context per direction, re-keyed only when the
 * key changes. */
static struct zc_cache zc_xts = ZC_CACHE_INIT("AES-256-XTS", ZCRYPT_XTS_KEY_SIZE, NULL);

/* The HKDF implementation, fetched once rather than looked up by name on every derivation. */
static pthread_once_t zc_hkdf_once = PTHREAD_ONCE_INIT;
static EVP_KDF *zc_hkdf_kdf;

static void zc_hkdf_init(void)
{
	zc_hkdf_kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	ERR_clear_error();
}

static int zc_hkdf_ready(void)
{
	if (pthread_once(&zc_hkdf_once, zc_hkdf_init) || !zc_hkdf_kdf)
		return -EIO;
	return 0;
}

/* ---- randomness and wiping ------------------------------------------------------------ */

int zcrypt_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	if (!buf && len)
		return -EINVAL;
	while (len) {
		int n = len > INT_MAX ? INT_MAX : (int)len;

		if (RAND_bytes(p, n) != 1) {
			ERR_clear_error();
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void zcrypt_wipe(void *buf, size_t len)
{
	if (buf && len)
		OPENSSL_cleanse(buf, len);
}

/* ---- master key: key file ------------------------------------------------------------- */

static int zc_write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read up to LEN bytes (fewer only at end of file); the count or -errno. */
static ssize_t zc_read_full(int fd, uint8_t *p, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int zcrypt_keyfile_generate(const char *path)
{
	uint8_t key[ZCRYPT_MASTER_KEY_SIZE];
	int fd, rc;

	if (!path || !*path)
		return -EINVAL;
	rc = zcrypt_random(key, sizeof(key));
	if (rc)
		return rc;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		OPENSSL_cleanse(key, sizeof(key));
		return rc;
	}
	rc = fchmod(fd, 0600) ? -errno : 0;
	if (!rc)
		rc = zc_write_all(fd, key, sizeof(key));
	if (!rc && fsync(fd))
		rc = -errno;
	OPENSSL_cleanse(key, sizeof(key));
	if (close(fd) && !rc)
		rc = -errno;
	if (rc)
		unlink(path);
	return rc;
}

int zcrypt_keyfile_load(const char *path, struct zcrypt_master *m)
{
	uint8_t buf[ZCRYPT_MASTER_KEY_SIZE + 1];
	ssize_t n;
	int fd;

	if (!path || !m)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = zc_read_full(fd, buf, sizeof(buf));
	close(fd);
	if (n == ZCRYPT_MASTER_KEY_SIZE)
		memcpy(m->key, buf, sizeof(m->key));
	OPENSSL_cleanse(buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return n == ZCRYPT_MASTER_KEY_SIZE ? 0 : -EINVAL;
}

/* ---- master key: passphrase ------------------------------------------------------------ */

int zcrypt_passphrase_derive(const char *pass, size_t pass_len, const uint8_t salt[ZCRYPT_SALT_SIZE],
			     uint64_t n, uint32_t r, uint32_t p, struct zcrypt_master *m)
{
	uint64_t need, fixed, maxmem;

	if ((!pass && pass_len) || !salt || !m || n < 2 || (n & (n - 1)) || !r || !p)
		return -EINVAL;
	/* OpenSSL needs 128*r*(n + p + 2) bytes; allow 128*n*r*p as documented, plus slack. */
	if (__builtin_mul_overflow((uint64_t)128 * r, n, &need) ||
	    __builtin_mul_overflow(need, (uint64_t)p, &need) ||
	    __builtin_mul_overflow((uint64_t)128 * r, n + p + 2, &fixed))
		return -EINVAL;
	maxmem = (need > fixed ? need : fixed) + (1u << 20);
	if (EVP_PBE_scrypt(pass ? pass : "", pass_len, salt, ZCRYPT_SALT_SIZE, n, r, p, maxmem,
			   m->key, sizeof(m->key)) != 1) {
		OPENSSL_cleanse(m->key, sizeof(m->key));
		ERR_clear_error();
		return -EINVAL;
	}
	return 0;
}

/* One line from FD into BUF (LEN > 1) without the newline, NUL-terminated; its length, or
 * -EINVAL when it does not fit. Reads a byte at a time so nothing after the line is taken. */
static int zc_read_line(int fd, char *buf, size_t len)
{
	size_t got = 0;
	char c;

	for (;;) {
		ssize_t n = read(fd, &c, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0 || c == '\n')
			break;
		if (got + 1 >= len)
			return -EINVAL;
		buf[got++] = c;
	}
	buf[got] = '\0';
	return (int)got;
}

/* Read a line from the controlling terminal with echo off, after PROMPT. */
static int zc_read_tty(const char *prompt, char *buf, size_t len)
{
	struct termios old, quiet;
	int fd, rc, echo_off = 0;

	fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -ENOTTY;
	if (tcgetattr(fd, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK);
		quiet.c_lflag |= ECHONL;
		echo_off = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
	}
	if (prompt)
		(void)zc_write_all(fd, (const uint8_t *)prompt, strlen(prompt));
	rc = zc_read_line(fd, buf, len);
	if (echo_off)
		tcsetattr(fd, TCSAFLUSH, &old);
	close(fd);
	return rc;
}

int zcrypt_passphrase_read(int fd, const char *prompt, char *buf, size_t len)
{
	int rc;

	if (!buf || len < 2 || len - 1 > INT_MAX)
		return -EINVAL;
	rc = fd >= 0 ? zc_read_line(fd, buf, len) : zc_read_tty(prompt, buf, len);
	if (rc == 0)
		rc = -EINVAL;
	if (rc < 0)
		OPENSSL_cleanse(buf, len);
	return rc;
}

/* ---- key check value ------------------------------------------------------------------ */

int zcrypt_keycheck_make(const struct zcrypt_master *m, uint8_t out[ZCRYPT_KEYCHECK_SIZE])
{
	uint8_t mac_key[32];
	size_t outl = 0;
	int rc;

	if (!m || !out)
		return -EINVAL;
	rc = zcrypt_hkdf("SHA512", m->key, sizeof(m->key), NULL, 0, (const uint8_t *)zc_info_check,
			 strlen(zc_info_check), mac_key, sizeof(mac_key));
	if (rc)
		return rc;
	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, mac_key, sizeof(mac_key),
		       (const unsigned char *)zc_check_msg, strlen(zc_check_msg), out,
		       ZCRYPT_KEYCHECK_SIZE, &outl) ||
	    outl != ZCRYPT_KEYCHECK_SIZE) {
		ERR_clear_error();
		rc = -EIO;
	}
	OPENSSL_cleanse(mac_key, sizeof(mac_key));
	return rc;
}

int zcrypt_keycheck_verify(const struct zcrypt_master *m, const uint8_t check[ZCRYPT_KEYCHECK_SIZE])
{
	uint8_t mine[ZCRYPT_KEYCHECK_SIZE];
	int rc;

	if (!m || !check)
		return -EINVAL;
	rc = zcrypt_keycheck_make(m, mine);
	if (!rc && CRYPTO_memcmp(mine, check, sizeof(mine)))
		rc = -EKEYREJECTED;
	OPENSSL_cleanse(mine, sizeof(mine));
	return rc;
}

/* ---- key derivation -------------------------------------------------------------------- */

int zcrypt_hkdf(const char *digest, const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
		size_t salt_len, const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len)
{
	size_t hlen = digest && !strcmp(digest, "SHA512") ? 64 : 32;
	OSSL_PARAM params[5], *q = params;
	EVP_KDF_CTX *kctx;
	int rc;

	if (!digest || (strcmp(digest, "SHA256") && strcmp(digest, "SHA512")) || !ikm || !ikm_len ||
	    (salt_len && !salt) || (info_len && !info) || !out || !out_len || out_len > 255 * hlen)
		return -EINVAL;
	rc = zc_hkdf_ready();
	if (rc)
		return rc;
	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)digest, 0);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
	if (salt_len)
		*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
	if (info_len)
		*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
	*q = OSSL_PARAM_construct_end();
	kctx = EVP_KDF_CTX_new(zc_hkdf_kdf);
	if (!kctx)
		return -ENOMEM;
	rc = EVP_KDF_derive(kctx, out, out_len, params) == 1 ? 0 : -EIO;
	EVP_KDF_CTX_free(kctx);
	if (rc) {
		OPENSSL_cleanse(out, out_len);
		ERR_clear_error();
	}
	return rc;
}

/* HKDF-SHA512(M, no salt, info = LABEL || NONCE [|| COUNTER when non-zero]). */
static int zc_derive(const struct zcrypt_master *m, const char *label, const uint8_t *nonce,
		     uint8_t counter, uint8_t *out, size_t out_len)
{
	uint8_t info[32 + ZCRYPT_NONCE_SIZE + 1];
	size_t l = strlen(label), n = l + ZCRYPT_NONCE_SIZE;

	memcpy(info, label, l);
	memcpy(info + l, nonce, ZCRYPT_NONCE_SIZE);
	if (counter)
		info[n++] = counter;
	return zcrypt_hkdf("SHA512", m->key, sizeof(m->key), NULL, 0, info, n, out, out_len);
}

int zcrypt_file_key_derive(const struct zcrypt_master *m, const uint8_t nonce[ZCRYPT_NONCE_SIZE],
			   struct zcrypt_file_key *fk)
{
	unsigned int counter;
	int rc;

	if (!m || !nonce || !fk)
		return -EINVAL;
	for (counter = 0; counter < 256; counter++) {
		rc = zc_derive(m, zc_info_contents, nonce, (uint8_t)counter, fk->key, sizeof(fk->key));
		if (rc)
			return rc;
		if (zcrypt_xts_key_ok(fk->key))
			return 0;
	}
	OPENSSL_cleanse(fk->key, sizeof(fk->key));
	return -EIO;
}

int zcrypt_name_key_derive(const struct zcrypt_master *m, const uint8_t nonce[ZCRYPT_NONCE_SIZE],
			   struct zcrypt_name_key *nk)
{
	if (!m || !nonce || !nk)
		return -EINVAL;
	return zc_derive(m, zc_info_names, nonce, 0, nk->key, sizeof(nk->key));
}

int zcrypt_xts_key_ok(const uint8_t key[ZCRYPT_XTS_KEY_SIZE])
{
	return key && CRYPTO_memcmp(key, key + ZC_HALF, ZC_HALF) != 0;
}

/* ---- contents ------------------------------------------------------------------------- */

int zcrypt_xts_raw(const uint8_t key[ZCRYPT_XTS_KEY_SIZE], const uint8_t tweak[16], const void *in,
		   void *out, size_t len, int enc)
{
	if (!key || !tweak || !in || !out || len < 16 || len % 16 || len > ZC_XTS_MAX_LEN ||
	    !zcrypt_xts_key_ok(key))
		return -EINVAL;
	return zc_ctx_run(&zc_xts, key, tweak, enc, in, out, len);
}

/* zcrypt_xts_encrypt and zcrypt_xts_decrypt: the tweak is LBLK as 16 bytes little-endian. */
static int zc_xts_lblk(const struct zcrypt_file_key *fk, uint64_t lblk, const void *in, void *out,
		       size_t len, int enc)
{
	uint8_t tweak[16];
	int i;

	if (!fk)
		return -EINVAL;
	for (i = 0; i < 16; i++, lblk >>= 8)
		tweak[i] = i < 8 ? (uint8_t)lblk : 0;
	return zcrypt_xts_raw(fk->key, tweak, in, out, len, enc);
}

int zcrypt_xts_encrypt(const struct zcrypt_file_key *fk, uint64_t lblk, const void *in, void *out,
		       size_t len)
{
	return zc_xts_lblk(fk, lblk, in, out, len, 1);
}

int zcrypt_xts_decrypt(const struct zcrypt_file_key *fk, uint64_t lblk, const void *in, void *out,
		       size_t len)
{
	return zc_xts_lblk(fk, lblk, in, out, len, 0);
}
