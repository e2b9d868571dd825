#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ckptfs/error.h"

int ck_fail(struct ck_error *err, int errnum, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -errnum;
}

const char *ck_error_text(const struct ck_error *err, int rc)
{
	return err && err->msg[0] ? err->msg : strerror(-rc);
}
