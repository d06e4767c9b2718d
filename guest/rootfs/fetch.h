/* Downloads for `download` sources: libcurl, http(s) only, size-limited, hashed on the way. */
#ifndef AGT_ROOTFS_FETCH_H
#define AGT_ROOTFS_FETCH_H

#include "error.h"

/* Fetch url into out_fd (from its current offset), refusing more than max_bytes.  On success
 * sha256_hex holds the sha256 of what was written and *size its length.  The caller compares
 * the hash with its pin. */
int rootfs_fetch(const char *url, unsigned long long max_bytes, int out_fd, char sha256_hex[65],
                 unsigned long long *size, agt_error_t *err);

#endif
