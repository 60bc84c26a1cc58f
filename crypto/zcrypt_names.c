/*
 * zcrypt_names.c - names and symlink targets (see zcrypt.h): their ciphertext length,
 * AES-256-CBC-CTS (CS3) with a zero IV, and the base64url forms a directory shows when its
 * key is absent (full, or '_' + digest for long ciphertexts).
 * May call: OpenSSL libcrypto, libc, zc_ctx.h. Keys and contents are in zcrypt.c.
 *
 * Like the XTS contexts of zcrypt.c, the CBC-CTS contexts are per thread (zc_ctx.c), one for
 * encryption and one for decryption, each remembering the name key it was last keyed with.
 */
#include "zcrypt.h"
#include "zc_ctx.h"

#include <errno.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#define ZC_CT_MAX 4096        /* longest ciphertext: a symlink target of one block */
#define ZC_FULL_MAX 240       /* longest full-form name */
#define ZC_DIG_PREFIX 92      /* ciphertext bytes kept in the digest form */
#define ZC_DIG_RAW 128        /* hash (4) + prefix (92) + SHA-256 (32) */
#define ZC_DIG_NAME 172       /* '_' + base64url of 128 bytes */
#define ZC_DIG_CT (ZC_DIG_RAW - 4)

/* ---- CBC-CTS ------------------------------------------------------------------------- */

/* CS3 is the CTS variant fscrypt uses: the last two blocks always swapped. */
static const OSSL_PARAM zn_cts_params[] = {
	OSSL_PARAM_utf8_string(OSSL_CIPHER_PARAM_CTS_MODE, "CS3", 3),
	OSSL_PARAM_END,
};
static struct zc_cache zn_cts = ZC_CACHE_INIT("AES-256-CBC-CTS", ZCRYPT_NAME_KEY_SIZE,
					      zn_cts_params);
/* A zero IV keeps equal names equal under one directory key, which lookup needs. */
static const uint8_t zn_zero_iv[16];

/* ---- names and symlink targets -------------------------------------------------------- */

size_t zcrypt_name_ct_len(size_t len, size_t max)
{
	size_t r;

	if (!len || len > max)
		return 0;
	r = (len + ZCRYPT_NAME_PAD - 1) / ZCRYPT_NAME_PAD * ZCRYPT_NAME_PAD;
	if (r > max)
		r = max;
	return r < ZCRYPT_NAME_MIN ? ZCRYPT_NAME_MIN : r;
}

int zcrypt_name_encrypt(const struct zcrypt_name_key *nk, const char *name, size_t len, size_t max,
			uint8_t *out)
{
	uint8_t pt[ZC_CT_MAX];
	size_t ct_len;
	int rc;

	if (!nk || !name || !out || !len || len > max || max < ZCRYPT_NAME_MIN || max > ZC_CT_MAX ||
	    memchr(name, '\0', len))
		return -EINVAL;
	ct_len = zcrypt_name_ct_len(len, max);
	memcpy(pt, name, len);
	memset(pt + len, 0, ct_len - len);
	rc = zc_ctx_run(&zn_cts, nk->key, zn_zero_iv, 1, pt, out, ct_len);
	OPENSSL_cleanse(pt, ct_len);
	return rc ? rc : (int)ct_len;
}

int zcrypt_name_decrypt(const struct zcrypt_name_key *nk, const uint8_t *ct, size_t ct_len, char *out)
{
	size_t n, i;
	int rc;

	if (!nk || !ct || !out || ct_len < ZCRYPT_NAME_MIN || ct_len > ZC_CT_MAX)
		return -EINVAL;
	rc = zc_ctx_run(&zn_cts, nk->key, zn_zero_iv, 0, ct, out, ct_len);
	if (rc)
		return rc;
	out[ct_len] = '\0';
	n = strnlen(out, ct_len);
	for (i = n; i < ct_len && !out[i]; i++)
		;
	if (!n || i < ct_len) {
		OPENSSL_cleanse(out, ct_len + 1);
		return -EUCLEAN;
	}
	return (int)n;
}

/* ---- base64url without padding -------------------------------------------------------- */

static const char zn_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t zn_b64_len(size_t n) { return (n * 4 + 2) / 3; }

/* Encode N bytes of IN to OUT (zn_b64_len(N) characters, no NUL). */
static void zn_b64_encode(const uint8_t *in, size_t n, char *out)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			*out++ = zn_b64[(acc >> bits) & 63];
		}
	}
	if (bits)
		*out++ = zn_b64[(acc << (6 - bits)) & 63];
}

static int zn_b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/* Decode LEN characters; the byte count, or -1 unless IN is canonical base64url. */
static int zn_b64_decode(const char *in, size_t len, uint8_t *out)
{
	uint32_t acc = 0;
	int bits = 0, v;
	size_t i, n = 0;

	if (len % 4 == 1)
		return -1;
	for (i = 0; i < len; i++) {
		v = zn_b64_value(in[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	if (acc & ((1u << bits) - 1)) /* leftover bits must be zero */
		return -1;
	return (int)n;
}

/* ---- names without the key ------------------------------------------------------------ */

static int zn_sha256(const uint8_t *in, size_t len, uint8_t md[32])
{
	unsigned int mdlen = 0;

	if (EVP_Digest(in, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
		ERR_clear_error();
		return -EIO;
	}
	return 0;
}

/* The full form is used when it fits, except a 172-character one starting with '_' (a 129-byte
 * ciphertext whose first byte is >= 0xfc), which would read back as the digest form. */
static int zn_full_form_ok(const uint8_t *ct, size_t ct_len)
{
	size_t l = zn_b64_len(ct_len);

	return l <= ZC_FULL_MAX && !(l == ZC_DIG_NAME && (ct[0] >> 2) == 63);
}

int zcrypt_nokey_encode(const uint8_t *ct, size_t ct_len, uint32_t hash, char *out)
{
	uint8_t raw[ZC_DIG_RAW];
	int i, rc;

	if (!ct || !out || ct_len < ZCRYPT_NAME_MIN)
		return -EINVAL;
	if (zn_full_form_ok(ct, ct_len)) {
		zn_b64_encode(ct, ct_len, out);
		out[zn_b64_len(ct_len)] = '\0';
		return (int)zn_b64_len(ct_len);
	}
	for (i = 0; i < 4; i++)
		raw[i] = (uint8_t)(hash >> (8 * i));
	memcpy(raw + 4, ct, ZC_DIG_PREFIX);
	rc = zn_sha256(ct, ct_len, raw + 4 + ZC_DIG_PREFIX);
	if (rc)
		return rc;
	out[0] = '_';
	zn_b64_encode(raw, sizeof(raw), out + 1);
	out[ZC_DIG_NAME] = '\0';
	return ZC_DIG_NAME;
}

int zcrypt_nokey_decode(const char *name, size_t len, uint8_t *ct, int *is_digest, uint32_t *hash)
{
	uint8_t raw[ZC_DIG_RAW + 3];
	int n;

	if (!name || !ct || !is_digest)
		return -EINVAL;
	if (len == ZC_DIG_NAME && name[0] == '_') {
		if (zn_b64_decode(name + 1, len - 1, raw) != ZC_DIG_RAW)
			return -ENOENT;
		if (hash)
			*hash = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 |
				(uint32_t)raw[3] << 24;
		memcpy(ct, raw + 4, ZC_DIG_CT);
		*is_digest = 1;
		return ZC_DIG_CT;
	}
	if (len < zn_b64_len(ZCRYPT_NAME_MIN) || len > ZC_FULL_MAX)
		return -ENOENT;
	n = zn_b64_decode(name, len, ct);
	if (n < ZCRYPT_NAME_MIN)
		return -ENOENT;
	*is_digest = 0;
	return n;
}

int zcrypt_nokey_digest_match(const uint8_t *ct, size_t ct_len, const uint8_t *dig)
{
	uint8_t md[32];

	if (!ct || !dig || ct_len < ZC_DIG_PREFIX || memcmp(ct, dig, ZC_DIG_PREFIX))
		return 0;
	if (zn_sha256(ct, ct_len, md))
		return 0;
	return !memcmp(md, dig + ZC_DIG_PREFIX, sizeof(md));
}
