/*
 * zc_ctx.h - per-thread cipher contexts for the crypto/ files (internal: not installed, not
 * used outside crypto/).
 *
 * Owns: the lazy, once-only fetch of one OpenSSL cipher per struct zc_cache, and each
 * thread's pair of EVP_CIPHER_CTX (decrypt, encrypt) for it, with the key each last took so
 * that a run of operations under one key only re-sets the IV. Keying is the costly step (the
 * AES key schedule, and for XTS two of them); a per-thread context needs no lock.
 * The per-thread state is freed and wiped when its thread exits (pthread key destructor).
 * May call: OpenSSL libcrypto, libc, pthreads. Called by zcrypt.c (XTS) and zcrypt_names.c
 * (CBC-CTS).
 *
 * Functions return 0 or a negative errno: -EIO when OpenSSL fails, -ENOMEM.
 */
#ifndef ZLFS_ZC_CTX_H
#define ZLFS_ZC_CTX_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/params.h>

#define ZC_CTX_KEY_MAX 64 /* longest key a cache may use (AES-256-XTS) */

/* One cipher. Define it static with ZC_CACHE_INIT; the rest is filled in on first use. */
struct zc_cache {
	const char *name;         /* OpenSSL cipher name, e.g. "AES-256-XTS" */
	size_t key_len;           /* bytes, at most ZC_CTX_KEY_MAX */
	const OSSL_PARAM *params; /* passed when a context is keyed (e.g. the CTS mode), or NULL */
	pthread_mutex_t lock;     /* serialises the first use */
	int state;                /* 0 before first use, 1 ready, or the (sticky) negative errno */
	EVP_CIPHER *cipher;
	pthread_key_t thread_key;
};

#define ZC_CACHE_INIT(cipher_name, klen, init_params)                                        \
	{ .name = (cipher_name), .key_len = (klen), .params = (init_params),                  \
	  .lock = PTHREAD_MUTEX_INITIALIZER }

/* This thread's context of C for direction ENC (1 encrypt, 0 decrypt), keyed with KEY
 * (C->key_len bytes) and with IV set; valid until this thread's next call for C and ENC. */
int zc_ctx_get(struct zc_cache *c, const uint8_t *key, const uint8_t *iv, int enc,
	       EVP_CIPHER_CTX **out);
/* Forget (and wipe) the key this thread's context of C for ENC holds, after a failed use. */
void zc_ctx_forget(struct zc_cache *c, int enc);
/* zc_ctx_get, then one EVP_CipherUpdate of LEN bytes IN -> OUT (IN == OUT allowed), which must
 * produce exactly LEN bytes. LEN must fit an int. */
int zc_ctx_run(struct zc_cache *c, const uint8_t *key, const uint8_t *iv, int enc, const void *in,
	       void *out, size_t len);

#endif
