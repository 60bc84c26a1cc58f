/*
 * zcrypt.h - the cryptographic primitives of zlfs, on OpenSSL's libcrypto.
 *
 * Owns: the master key (from a key file or an scrypt-stretched passphrase), the key check
 * value stored in the superblock, per-file and per-directory key derivation (HKDF-SHA512),
 * AES-256-XTS of 4 KiB data blocks with the logical block number as tweak, AES-256-CBC-CTS
 * of file names and symlink targets, and the base64url encoding of ciphertext names shown
 * when the key is absent. Keys are wiped with OPENSSL_cleanse when dropped; nothing here
 * logs key material.
 * May call: OpenSSL libcrypto, libc. Called by the file layer (fs/), mkfs, zlfs-ctl.
 *
 * Every function returns 0 or a negative errno: -EINVAL for bad arguments, -EIO when
 * OpenSSL fails, -ENOMEM, -EKEYREJECTED for a key that does not match its check value.
 * All functions are safe to call from several threads at once (cipher contexts are per
 * thread; key objects are read-only after creation).
 */
#ifndef ZLFS_ZCRYPT_H
#define ZLFS_ZCRYPT_H

#include <stddef.h>
#include <stdint.h>

#define ZCRYPT_MASTER_KEY_SIZE 64 /* bytes of a key file, and of the scrypt output */
#define ZCRYPT_XTS_KEY_SIZE 64    /* AES-256-XTS: two AES-256 keys */
#define ZCRYPT_NAME_KEY_SIZE 32   /* AES-256-CBC-CTS */
#define ZCRYPT_NONCE_SIZE 16
#define ZCRYPT_KEYCHECK_SIZE 32
#define ZCRYPT_SALT_SIZE 32
#define ZCRYPT_DATA_UNIT 4096     /* XTS data unit: one filesystem block */
#define ZCRYPT_NAME_PAD 32        /* names are padded to a multiple of this (capped at max) */
#define ZCRYPT_NAME_MIN 16        /* CBC-CTS needs at least one AES block */

/* Default scrypt cost for new passphrase filesystems: N = 2^15, r = 8, p = 1 (32 MiB). */
#define ZCRYPT_SCRYPT_N (1ull << 15)
#define ZCRYPT_SCRYPT_R 8u
#define ZCRYPT_SCRYPT_P 1u

struct zcrypt_master {
	uint8_t key[ZCRYPT_MASTER_KEY_SIZE];
};

/* A file's content key, ready to use (holds the raw XTS key; contexts are made per thread). */
struct zcrypt_file_key {
	uint8_t key[ZCRYPT_XTS_KEY_SIZE];
};

/* A directory's (or a symlink's) name key. */
struct zcrypt_name_key {
	uint8_t key[ZCRYPT_NAME_KEY_SIZE];
};

/* ---- randomness and wiping ------------------------------------------------------------ */
int zcrypt_random(void *buf, size_t len);          /* RAND_bytes */
void zcrypt_wipe(void *buf, size_t len);           /* OPENSSL_cleanse */

/* ---- master key ---------------------------------------------------------------------- */
/* Write 64 random bytes to PATH, created with mode 0600 (O_EXCL: refuses to overwrite). */
int zcrypt_keyfile_generate(const char *path);
/* Read exactly 64 bytes from PATH into M. -EINVAL (with nothing kept) when the file is not
 * exactly 64 bytes; -errno when it cannot be opened/read. */
int zcrypt_keyfile_load(const char *path, struct zcrypt_master *m);
/* M = scrypt(PASS, SALT, N, R, P), 64 bytes, through EVP_PBE_scrypt or EVP_KDF "SCRYPT".
 * -EINVAL for parameters OpenSSL rejects (N not a power of two > 1, memory limit). The memory
 * limit passed to OpenSSL must allow 128*N*R*P bytes plus slack. */
int zcrypt_passphrase_derive(const char *pass, size_t pass_len, const uint8_t salt[ZCRYPT_SALT_SIZE],
			     uint64_t n, uint32_t r, uint32_t p, struct zcrypt_master *m);
/* Read a passphrase: from file descriptor FD if FD >= 0 (up to a newline or EOF), else from
 * the controlling terminal (/dev/tty) with echo off, after printing PROMPT to it. The
 * trailing newline is dropped. BUF holds up to LEN-1 bytes plus a NUL; returns the length or
 * a negative errno (-ENOTTY without a terminal, -EINVAL for an empty passphrase). */
int zcrypt_passphrase_read(int fd, const char *prompt, char *buf, size_t len);

/* Key check value: HMAC-SHA256 keyed by HKDF-SHA512(M, info "zlfs key check v1"), of the
 * fixed message "zlfs key check value". Never the key itself. */
int zcrypt_keycheck_make(const struct zcrypt_master *m, uint8_t out[ZCRYPT_KEYCHECK_SIZE]);
/* 0 if M matches CHECK (constant-time compare, CRYPTO_memcmp), else -EKEYREJECTED. */
int zcrypt_keycheck_verify(const struct zcrypt_master *m, const uint8_t check[ZCRYPT_KEYCHECK_SIZE]);

/* ---- key derivation -------------------------------------------------------------------- */
/* Generic HKDF (extract + expand) through EVP_KDF "HKDF", digest "SHA256" or "SHA512", with an
 * optional SALT (NULL/0 = none). Exposed for the RFC 5869 known-answer tests. */
int zcrypt_hkdf(const char *digest, const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
		size_t salt_len, const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len);
/* Content key: HKDF-SHA512(M, no salt, info = "zlfs contents v1" || NONCE), 64 bytes. OpenSSL
 * refuses XTS keys whose two halves are equal: if that happens the derivation is repeated with
 * a counter byte appended to the info (1, 2, ...) until the halves differ. */
int zcrypt_file_key_derive(const struct zcrypt_master *m, const uint8_t nonce[ZCRYPT_NONCE_SIZE],
			   struct zcrypt_file_key *fk);
/* Name key: HKDF-SHA512(M, info = "zlfs names v1" || NONCE), 32 bytes. */
int zcrypt_name_key_derive(const struct zcrypt_master *m, const uint8_t nonce[ZCRYPT_NONCE_SIZE],
			   struct zcrypt_name_key *nk);
/* 1 when the two 32-byte halves of an XTS key differ (usable), else 0. */
int zcrypt_xts_key_ok(const uint8_t key[ZCRYPT_XTS_KEY_SIZE]);

/* ---- contents ------------------------------------------------------------------------- */
/* AES-256-XTS of LEN bytes (a multiple of 16, at least 16; normally 4096) with tweak = LBLK as
 * a 16-byte little-endian number. IN and OUT may be the same buffer. Uses a per-thread
 * EVP_CIPHER_CTX (no global lock); the key schedule is reused when the same key is used by
 * the same thread twice in a row. -EINVAL for an XTS key with equal halves. */
int zcrypt_xts_encrypt(const struct zcrypt_file_key *fk, uint64_t lblk, const void *in, void *out,
		       size_t len);
int zcrypt_xts_decrypt(const struct zcrypt_file_key *fk, uint64_t lblk, const void *in, void *out,
		       size_t len);
/* Same with a raw key and a raw 16-byte tweak, for the IEEE 1619 known-answer tests. */
int zcrypt_xts_raw(const uint8_t key[ZCRYPT_XTS_KEY_SIZE], const uint8_t tweak[16], const void *in,
		   void *out, size_t len, int enc);

/* ---- names and symlink targets -------------------------------------------------------- */
/* Ciphertext length of a name of LEN bytes (1..MAX): max(16, min(roundup(LEN, 32), MAX)). */
size_t zcrypt_name_ct_len(size_t len, size_t max);
/* Encrypt NAME (LEN bytes, no NUL inside) padded with NULs to zcrypt_name_ct_len(LEN, MAX)
 * bytes, AES-256-CBC-CTS (CS3) with a zero IV, so equal names give equal ciphertext within a
 * directory (needed for lookup). OUT must hold MAX bytes; returns the ciphertext length. */
int zcrypt_name_encrypt(const struct zcrypt_name_key *nk, const char *name, size_t len, size_t max,
			uint8_t *out);
/* Decrypt CT (CT_LEN bytes, 16..max) and strip the NUL padding. OUT holds CT_LEN+1 bytes and is
 * NUL-terminated; returns the name length, or -EUCLEAN if the plaintext is empty or has a NUL
 * before non-NUL bytes (wrong key or damaged name). */
int zcrypt_name_decrypt(const struct zcrypt_name_key *nk, const uint8_t *ct, size_t ct_len, char *out);

/* ---- names without the key ------------------------------------------------------------ */
/* The name a locked directory shows for ciphertext CT: base64url without padding of CT when
 * that fits in 240 characters (but not a 172-character one starting with '_', which would
 * read back as the digest form); otherwise '_' followed by base64url of (HASH as 4 bytes LE,
 * the first 92 bytes of CT, SHA-256 of CT) = 128 bytes -> 171 characters, 172 in all.
 * OUT holds at least 256 bytes; returns the length (OUT is NUL-terminated). */
int zcrypt_nokey_encode(const uint8_t *ct, size_t ct_len, uint32_t hash, char *out);
/* Parse a name made by zcrypt_nokey_encode. Full form: CT gets the ciphertext, *IS_DIGEST = 0.
 * Digest form: *IS_DIGEST = 1, *HASH the dentry hash, CT gets the 92-byte prefix followed by
 * the 32-byte SHA-256 (124 bytes). Returns the byte length in CT, or -ENOENT for a name that
 * cannot have come from zcrypt_nokey_encode. CT holds at least 256 bytes. */
int zcrypt_nokey_decode(const char *name, size_t len, uint8_t *ct, int *is_digest, uint32_t *hash);
/* 1 when ciphertext CT matches the digest form DIG (124 bytes from zcrypt_nokey_decode). */
int zcrypt_nokey_digest_match(const uint8_t *ct, size_t ct_len, const uint8_t *dig);

#endif
