/* Small helpers on C strings (pure functions, any thread). */
#ifndef CKPTFS_STR_H
#define CKPTFS_STR_H

#include <string.h>

/* 1 when s ends with suffix (every string ends with ""), else 0. */
static inline int ck_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* qsort comparator for an array of C strings (char * or const char *):
 * byte order, as strcmp. */
static inline int ck_strp_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

#endif
