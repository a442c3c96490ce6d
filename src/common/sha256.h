/*
 * sha256.h -- SHA-256 (FIPS 180-4, section 6.2), used to check downloaded
 * model files against the digest the server announces.
 */
#ifndef HEARTH_SHA256_H
#define HEARTH_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_BYTES 32
#define SHA256_HEX_BYTES 65     /* 64 hex digits and a NUL */

typedef struct sha256_ctx {
    uint32_t state[8];          /* H0..H7 */
    uint64_t bytes;             /* message length so far */
    uint8_t block[64];          /* a partial block */
    size_t block_len;
} sha256_ctx;

void sha256_init(sha256_ctx *ctx);
void sha256_update(sha256_ctx *ctx, const void *data, size_t len);
void sha256_final(sha256_ctx *ctx, uint8_t digest[SHA256_DIGEST_BYTES]);

/* One call for a whole buffer. */
void sha256(const void *data, size_t len, uint8_t digest[SHA256_DIGEST_BYTES]);

/* Lower-case hex of a digest. */
void sha256_hex(const uint8_t digest[SHA256_DIGEST_BYTES], char hex[SHA256_HEX_BYTES]);

#endif /* HEARTH_SHA256_H */
