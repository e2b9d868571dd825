/* Error reporting for parsers and the store.
 *
 * Every fallible function returns 0 (or a count) on success and -errno on
 * failure.  Parsers of untrusted bytes also fill a struct ck_error with a
 * human-readable reason ("truncated central directory at offset 1234"),
 * which callers prefix with the file (and tensor) name when they log.
 */
#ifndef CKPTFS_ERROR_H
#define CKPTFS_ERROR_H

#include <stddef.h>

struct ck_error {
	char msg[512];
};

/* Sets err->msg (if err is non-NULL) and returns -errnum (pass a positive errno). */
int ck_fail(struct ck_error *err, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* What to print for a failure rc (-errno): err's message, or strerror(-rc)
 * when the failing call left none. */
const char *ck_error_text(const struct ck_error *err, int rc);

#endif
