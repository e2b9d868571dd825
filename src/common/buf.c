/* Growable byte buffer. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"

int ck_buf_reserve(struct ck_buf *b, size_t extra)
{
	size_t need, cap;
	uint8_t *p;

	if (extra > SIZE_MAX - b->len)
		return -ENOMEM;
	need = b->len + extra;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

void *ck_grow(void *arr, size_t *cap, size_t size, size_t first)
{
	size_t n = *cap ? *cap : first;
	void *p;

	if (*cap && n > SIZE_MAX / 2 / size)
		return NULL;
	if (*cap)
		n *= 2;
	else if (n > SIZE_MAX / size)
		return NULL;
	p = realloc(arr, n * size);
	if (p)
		*cap = n;
	return p;
}

int ck_buf_put(struct ck_buf *b, const void *p, size_t n)
{
	int rc;

	if (!n)
		return 0;
	rc = ck_buf_reserve(b, n);
	if (rc)
		return rc;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int ck_buf_putc(struct ck_buf *b, uint8_t c)
{
	return ck_buf_put(b, &c, 1);
}

int ck_buf_puts(struct ck_buf *b, const char *s)
{
	return ck_buf_put(b, s, strlen(s));
}

int ck_buf_printf(struct ck_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = ck_buf_reserve(b, (size_t)n + 1);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int ck_buf_put_le16(struct ck_buf *b, uint16_t v)
{
	uint8_t p[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	return ck_buf_put(b, p, sizeof(p));
}

int ck_buf_put_le32(struct ck_buf *b, uint32_t v)
{
	uint8_t p[4];

	ck_set_le32(p, v);
	return ck_buf_put(b, p, sizeof(p));
}

int ck_buf_put_le64(struct ck_buf *b, uint64_t v)
{
	uint8_t p[8];

	ck_set_le64(p, v);
	return ck_buf_put(b, p, sizeof(p));
}

uint8_t *ck_buf_steal(struct ck_buf *b, size_t *len)
{
	uint8_t *p = b->data;

	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void ck_buf_free(struct ck_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void ck_strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}
