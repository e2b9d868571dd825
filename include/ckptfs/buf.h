/* A growable byte buffer used by emitters and generated headers. */
#ifndef CKPTFS_BUF_H
#define CKPTFS_BUF_H

#include <stddef.h>
#include <stdint.h>

struct ck_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

#define CK_BUF_INIT { NULL, 0, 0 }

/* All return 0 or -ENOMEM; on failure the buffer is unchanged. */
int ck_buf_reserve(struct ck_buf *b, size_t extra);
int ck_buf_put(struct ck_buf *b, const void *p, size_t n);
int ck_buf_putc(struct ck_buf *b, uint8_t c);
int ck_buf_puts(struct ck_buf *b, const char *s);
int ck_buf_printf(struct ck_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int ck_buf_put_le16(struct ck_buf *b, uint16_t v);
int ck_buf_put_le32(struct ck_buf *b, uint32_t v);
int ck_buf_put_le64(struct ck_buf *b, uint64_t v);
/* Hands the bytes to the caller (who frees them) and resets the buffer. */
uint8_t *ck_buf_steal(struct ck_buf *b, size_t *len);
void ck_buf_free(struct ck_buf *b);

/* An array of items of size bytes, full at *cap items, grown to twice
 * that (first, when it has none yet): the new array, *cap updated; NULL
 * on overflow or out of memory, with arr and *cap untouched.
 *   if (n == cap && !(p = ck_grow(v, &cap, sizeof(*v), 16))) fail; v = p; */
void *ck_grow(void *arr, size_t *cap, size_t size, size_t first);

/* Frees n strings and the array holding them (NULL is fine). */
void ck_strv_free(char **v, size_t n);

/* Loads from and stores into bytes in a given order (no alignment needed;
 * loads take untrusted bytes). */
static inline uint16_t ck_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ck_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ck_le64(const uint8_t *p) { return ck_le32(p) | (uint64_t)ck_le32(p + 4) << 32; }
static inline uint64_t ck_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}
static inline void ck_set_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ck_set_le64(uint8_t *p, uint64_t v)
{
	ck_set_le32(p, (uint32_t)v);
	ck_set_le32(p + 4, (uint32_t)(v >> 32));
}
static inline void ck_set_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

#endif
