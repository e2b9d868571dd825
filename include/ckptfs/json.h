/* A small strict JSON parser (RFC 8259) for safetensors headers, index
 * files and trainer_state.json.  Input is untrusted: depth and size are
 * bounded, strings are validated UTF-8, numbers keep their text.
 *
 * Strictness: no comments, no trailing commas, no leading zeros, no lone
 * surrogates in \u escapes, no raw control characters in strings, nothing
 * but whitespace after the value.  Object keys may not contain U+0000 (they
 * are C strings); string values may (see len).  Duplicate keys are kept, in
 * document order: callers decide what a duplicate means. */
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

#define JS_MAX_DEPTH 128                        /* nested arrays/objects */
#define JS_MAX_TEXT ((size_t)1 << 30)           /* input bytes */
#define JS_MAX_TREE ((size_t)1 << 30)           /* bytes of the parsed tree */

/* Parses exactly one value (surrounding whitespace allowed).  Returns 0,
 * -EINVAL (malformed; err says where and why), -E2BIG (over a bound above)
 * or -ENOMEM. */
int js_parse(const char *text, size_t len, struct js_doc **out, struct ck_error *err);
struct js_value *js_root(const struct js_doc *doc);
void js_free(struct js_doc *doc);
/* Object member by key (first match) or NULL. */
const struct js_value *js_get(const struct js_value *obj, const char *key);
/* JS_NUMBER as an unsigned integer: 0, or -ERANGE / -EINVAL if not a plain non-negative integer. */
int js_as_u64(const struct js_value *v, uint64_t *out);
/* Appends s as a JSON string literal (quotes, escapes of '"', '\\' and control
 * characters), byte for byte as serde_json writes it: \b \f \n \r \t, other
 * controls as \u00xx, everything else (UTF-8 included) raw. */
int js_put_string(struct ck_buf *b, const char *s, size_t len);

/* Writers that reproduce other tools' bytes exactly. */
/* Like js_put_string, but as Python's json.dumps (ensure_ascii=True) does it:
 * everything outside ' '..'~' is escaped, non-ASCII as \uXXXX (surrogate
 * pairs above U+FFFF, lowercase hex).  s must be valid UTF-8 (-EINVAL). */
int js_put_string_ascii(struct ck_buf *b, const char *s, size_t len);
/* v as compact JSON (serde_json::to_string: no spaces, raw UTF-8).  Numbers
 * are written as their source text. */
int js_write_compact(struct ck_buf *b, const struct js_value *v);
/* v as Python's json.dumps(v, indent=indent, sort_keys=sort_keys) writes it,
 * as if nested `level` deep (for splicing into a larger document).  Numbers
 * are written as their source text, so the output matches Python exactly
 * when the numbers came from Python (or are plain integers). */
int js_write_python(struct ck_buf *b, const struct js_value *v, int indent, int level,
		    int sort_keys);

#endif
