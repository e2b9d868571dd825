/* A small strict JSON parser (RFC 8259) for safetensors headers, index
 * files and trainer_state.json.  Input is untrusted: depth and size are
 * bounded, strings are validated UTF-8, numbers keep their text. */
#ifndef CKPTFS_JSON_H
#define CKPTFS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/buf.h"
#include "ckptfs/error.h"

enum js_kind { JS_NULL, JS_BOOL, JS_NUMBER, JS_STRING, JS_ARRAY, JS_OBJECT };

struct js_value {
	enum js_kind kind;
	int b;                       /* JS_BOOL */
	char *str;                   /* JS_STRING: decoded UTF-8, NUL-terminated; JS_NUMBER: the text */
	size_t len;                  /* bytes in str */
	size_t n;                    /* JS_ARRAY / JS_OBJECT members */
	char **keys;                 /* JS_OBJECT: decoded keys, in document order */
	struct js_value **vals;      /* members */
};

struct js_doc;

/* Parses exactly one value (surrounding whitespace allowed). */
int js_parse(const char *text, size_t len, struct js_doc **out, struct ck_error *err);
struct js_value *js_root(const struct js_doc *doc);
void js_free(struct js_doc *doc);
/* Object member by key (first match) or NULL. */
const struct js_value *js_get(const struct js_value *obj, const char *key);
/* JS_NUMBER as an unsigned integer: 0, or -ERANGE / -EINVAL if not a plain non-negative integer. */
int js_as_u64(const struct js_value *v, uint64_t *out);
/* Appends s as a JSON string literal (quotes, escapes of '"', '\\' and control characters). */
int js_put_string(struct ck_buf *b, const char *s, size_t len);

#endif
