/* Helpers shared by the pickle tests: checks, files, and a tiny reader for
 * the stored (uncompressed) zip members of torch.save files, so that these
 * tests depend on nothing but the pickle module. */
#ifndef T_PICKLE_UTIL_H
#define T_PICKLE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int t_failures;

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		t_failures++; \
	} \
} while (0)

#define CHECK_MSG(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		t_failures++; \
	} \
} while (0)

/* Whole file in a malloc'd buffer (NUL-terminated), or NULL. */
/* The reader of tests/unit/testutil.c (NUL-terminated; the caller frees).
 * Declared here because testutil.h's CHECK differs from ours. */
uint8_t *read_file(const char *path, size_t *len);
#define t_read_file read_file
/* The fixtures directory of tests/unit/testutil.c ($CKPT_FIXTURES or NULL). */
const char *test_fixtures(void);
/* test_fixtures(), or exits 77 (skip) when it is not set or not there. */
const char *t_fixtures_dir(void);

struct t_zip_member {
	char name[256];           /* full name, root folder included */
	const uint8_t *data;      /* inside the archive buffer */
	uint64_t size;
};

/* Lists the members of a stored zip from its central directory (zip64
 * aware).  Returns the count (at most max) or -1 when it is no such zip. */
int t_zip_members(const uint8_t *zip, size_t len, struct t_zip_member *out, int max);
/* The member whose name ends with "/suffix" (or equals it), or NULL. */
const struct t_zip_member *t_zip_find(const struct t_zip_member *m, int n, const char *suffix);

#endif
