/* The commit rules (include/ckptfs/writer_rules.h): names and marker
 * texts only, no I/O. */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/store.h"
#include "ckptfs/writer_rules.h"

int ck_rule_is_temp_name(const char *name)
{
	size_t len = strlen(name);

	return strncmp(name, "tmp", 3) == 0 || name[0] == '.' ||
	       (len > 4 && strcmp(name + len - 4, ".tmp") == 0);
}

static int has_step(const char *pattern, const char *name)
{
	int64_t step;

	return ck_series_step(name, pattern, &step) == 0;
}

int ck_rule_is_commit_rename(const char *pattern, const char *from, const char *to)
{
	return has_step(pattern, to) && (ck_rule_is_temp_name(from) || !has_step(pattern, from));
}

int ck_rule_commit_target(const char *pattern, const char *dir, const char *value, size_t size,
			  char **final)
{
	*final = NULL;
	if (size > 0 && size < 256 && !memchr(value, '\0', size) && !memchr(value, '/', size)) {
		char *name = strndup(value, size);

		if (!name)
			return -ENOMEM;
		if (has_step(pattern, name)) {
			*final = name;
			return 0;
		}
		free(name);	/* "1" and the like: its own name */
	}
	if (!has_step(pattern, dir))
		return -EINVAL;
	*final = strdup(dir);
	return *final ? 0 : -ENOMEM;
}

unsigned ck_rule_series_marker(const char *name)
{
	if (strcmp(name, CK_MARKER_MEGATRON) == 0)
		return CK_MARK_MEGATRON;
	if (strcmp(name, CK_MARKER_DEEPSPEED) == 0)
		return CK_MARK_DEEPSPEED;
	return 0;
}

char *ck_rule_series_marker_target(unsigned kind, const char *bytes, size_t len)
{
	char text[256], *out = NULL;

	if (len > sizeof(text) - 1)
		len = sizeof(text) - 1;
	memcpy(text, bytes, len);
	text[len] = '\0';
	len = strlen(text);
	while (len && isspace((unsigned char)text[len - 1]))
		len--;
	text[len] = '\0';
	if (!len || strchr(text, '/') || text[0] == '.')
		return NULL;
	if (kind == CK_MARK_MEGATRON) {
		char *end;
		unsigned long long it;

		errno = 0;
		it = strtoull(text, &end, 10);
		if (errno || *end || !isdigit((unsigned char)text[0]))
			return NULL;	/* "release" and the like: no step to commit */
		if (asprintf(&out, "iter_%07llu", it) < 0)
			return NULL;
		return out;
	}
	if (kind == CK_MARK_DEEPSPEED)
		return strdup(text);
	return NULL;
}
