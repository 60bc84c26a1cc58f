/*
 * zc_ctx.c - per-thread cipher contexts for zcrypt.c and zcrypt_names.c (see zc_ctx.h).
 * May call: OpenSSL libcrypto, libc, pthreads.
 *
 * Each struct zc_cache has its own pthread key whose value is the thread's struct zc_thread;
 * the key's destructor frees and wipes it when the thread exits. A thread never touches
 * another thread's contexts, so nothing here locks after the first use of a cache.
 */
#include "zc_ctx.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>

struct zc_slot {
	EVP_CIPHER_CTX *ctx;
	uint8_t key[ZC_CTX_KEY_MAX]; /* the key CTX holds, when KEYED */
	int keyed;
};

/* One thread's contexts for one cache: the AES key schedule differs between directions. */
struct zc_thread {
	struct zc_slot slot[2]; /* [0] decrypt, [1] encrypt */
};

/* The pthread key destructor; also frees a half-made one. Wipes the remembered keys. */
static void zc_thread_free(void *arg)
{
	struct zc_thread *t = arg;
	int i;

	for (i = 0; i < 2; i++)
		EVP_CIPHER_CTX_free(t->slot[i].ctx);
	OPENSSL_cleanse(t, sizeof(*t));
	free(t);
}

/* Fetch C's cipher once (fetching by name per call would cost a lookup each time) and make
 * its thread key. */
static int zc_cache_setup(struct zc_cache *c)
{
	int rc = 0;

	if (c->key_len > ZC_CTX_KEY_MAX)
		return -EINVAL;
	c->cipher = EVP_CIPHER_fetch(NULL, c->name, NULL);
	if (!c->cipher)
		rc = -EIO;
	else if (pthread_key_create(&c->thread_key, zc_thread_free))
		rc = -ENOMEM;
	ERR_clear_error();
	return rc;
}

/* pthread_once for C: pthread_once's routine takes no argument to say which cache, so the
 * first user sets C up under its lock and publishes the result with a release store; later
 * calls cost one acquire load. A failure stays, as it would with pthread_once. */
static int zc_cache_ready(struct zc_cache *c)
{
	int state = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);

	if (!state) {
		if (pthread_mutex_lock(&c->lock))
			return -EIO;
		state = __atomic_load_n(&c->state, __ATOMIC_RELAXED);
		if (!state) {
			state = zc_cache_setup(c);
			state = state ? state : 1;
			__atomic_store_n(&c->state, state, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&c->lock);
	}
	return state > 0 ? 0 : state;
}

/* A fresh, unkeyed pair of contexts, registered so that thread exit frees it. */
static int zc_thread_new(struct zc_cache *c, struct zc_thread **out)
{
	struct zc_thread *t = calloc(1, sizeof(*t));
	int i;

	if (!t)
		return -ENOMEM;
	for (i = 0; i < 2; i++)
		if (!(t->slot[i].ctx = EVP_CIPHER_CTX_new()))
			break;
	if (i < 2 || pthread_setspecific(c->thread_key, t)) {
		zc_thread_free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

/* This thread's slot of C for ENC (0 or 1), made on first use. */
static int zc_slot_get(struct zc_cache *c, int enc, struct zc_slot **out)
{
	struct zc_thread *t;
	int rc = zc_cache_ready(c);

	if (rc)
		return rc;
	t = pthread_getspecific(c->thread_key);
	if (!t && (rc = zc_thread_new(c, &t)))
		return rc;
	*out = &t->slot[enc];
	return 0;
}

/* After a failure the context is in an unknown state: key it afresh next time. */
static void zc_slot_forget(struct zc_slot *s)
{
	s->keyed = 0;
	OPENSSL_cleanse(s->key, sizeof(s->key));
}

int zc_ctx_get(struct zc_cache *c, const uint8_t *key, const uint8_t *iv, int enc,
	       EVP_CIPHER_CTX **out)
{
	struct zc_slot *s;
	int rc, ok;

	enc = enc ? 1 : 0;
	rc = zc_slot_get(c, enc, &s);
	if (rc)
		return rc;
	/* Constant-time compare: how far the keys match must not show in the timing. */
	if (s->keyed && !CRYPTO_memcmp(s->key, key, c->key_len)) {
		ok = EVP_CipherInit_ex2(s->ctx, NULL, NULL, iv, enc, NULL); /* keeps the schedule */
	} else {
		s->keyed = 0;
		ok = EVP_CipherInit_ex2(s->ctx, c->cipher, key, iv, enc, c->params);
		if (ok) {
			memcpy(s->key, key, c->key_len);
			s->keyed = 1;
		}
	}
	if (!ok) {
		zc_slot_forget(s);
		ERR_clear_error();
		return -EIO;
	}
	*out = s->ctx;
	return 0;
}

void zc_ctx_forget(struct zc_cache *c, int enc)
{
	struct zc_thread *t;

	if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) <= 0)
		return; /* never set up: no thread has a context to forget */
	t = pthread_getspecific(c->thread_key);
	if (t)
		zc_slot_forget(&t->slot[enc ? 1 : 0]);
}

int zc_ctx_run(struct zc_cache *c, const uint8_t *key, const uint8_t *iv, int enc, const void *in,
	       void *out, size_t len)
{
	EVP_CIPHER_CTX *ctx;
	int rc, outl = 0;

	if (len > INT_MAX)
		return -EINVAL;
	rc = zc_ctx_get(c, key, iv, enc, &ctx);
	if (rc)
		return rc;
	if (EVP_CipherUpdate(ctx, out, &outl, in, (int)len) != 1 || outl != (int)len) {
		zc_ctx_forget(c, enc);
		ERR_clear_error();
		return -EIO;
	}
	return 0;
}
