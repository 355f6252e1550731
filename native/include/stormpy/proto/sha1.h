/* SHA-1 (FIPS 180-4) for NSEC3 owner names (RFC 5155 section 5): the zone compiler
 * hashes the zone's names with it, dns.c the names asked. Not for anything else:
 * SHA-1 is what NSEC3 names, not a hash to trust. */
#ifndef STORMPY_PROTO_SHA1_H
#define STORMPY_PROTO_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SP_SHA1_LEN 20

/* SHA-1 of a || b (each at most 255 bytes). */
void sp_sha1(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen, uint8_t out[SP_SHA1_LEN]);

/* RFC 5155's IH(salt, name, iterations): name lower-cased wire, len bytes. */
void sp_nsec3_hash(const uint8_t *name, size_t len, const uint8_t *salt, size_t salt_len,
                   unsigned iterations, uint8_t out[SP_SHA1_LEN]);

#endif
