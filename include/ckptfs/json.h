/* JSON: a small strict parser (RFC 8259) for safetensors headers, index
 * files and trainer_state.json; the writer of the project's own documents
 * (jw_*); writers of other tools' exact bytes.
 *
 * The parser's input is untrusted: depth and size are bounded, strings are
 * validated UTF-8, numbers keep their text.  Strictness: no comments, no
 * trailing commas, no leading zeros, no lone surrogates in \u escapes, no
 * raw control characters in strings, nothing but whitespace after the
 * value.  Object keys may not contain U+0000 (they are C strings); string
 * values may (see len).  Duplicate keys are kept, in document order:
 * callers decide what a duplicate means. */
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
/* Appends s as a JSON string literal.  Valid UTF-8 is written as
 * serde_json writes it: '"' and '\\' escaped, \b \f \n \r \t, other
 * controls as \u00xx, everything else (UTF-8 included) raw.  A byte that
 * is not part of valid UTF-8 (names on Linux are bytes) is written as the
 * escape \udcXX of the lone surrogate U+DC00+byte, as Python's
 * "surrogateescape" decodes it: the text stays JSON (RFC 8259 section 7
 * allows the escape; section 8.2 says what a lone surrogate may do to a
 * strict reader), two different names never look alike, and in Python
 * json.loads gives exactly os.fsdecode(name), so os.fsencode() turns it
 * back into the bytes.  0 or -ENOMEM. */
int js_put_string(struct ck_buf *b, const char *s, size_t len);

/* ---- Documents built from C values ----
 * The one writer of the project's own JSON: `ckptctl ... --json` and the
 * user.ckptfs.sources attribute.  It keeps track of commas and nesting;
 * strings go through js_put_string.  Start from `struct jw w = { .b =
 * CK_BUF_INIT }` (set .spaced for ", " and ": " between members, as
 * Python's json.dumps writes by default), make the calls in document order,
 * then check jw_error and take the text from w.b (jw_free releases it).
 * Errors stick: after the first (ENOMEM, or E2BIG past JW_MAX_DEPTH
 * levels) every call does nothing and jw_error says what went wrong.
 * Calls out of order (a value where a key belongs) are not detected.
 * One writer belongs to one thread at a time. */
#define JW_MAX_DEPTH 64
struct jw {
	struct ck_buf b;
	int spaced;
	int depth;
	int first[JW_MAX_DEPTH];
	int after_key;
	int err;
};

void jw_begin_obj(struct jw *w);
void jw_begin_arr(struct jw *w);
void jw_end_obj(struct jw *w);
void jw_end_arr(struct jw *w);
/* A member's name; its value follows. */
void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s);
void jw_int(struct jw *w, int64_t v);
void jw_uint(struct jw *w, uint64_t v);
/* %.17g (reads back exactly), or null when v is not finite (JSON has no
 * NaN or infinity). */
void jw_double(struct jw *w, double v);
void jw_bool(struct jw *w, int v);
void jw_null(struct jw *w);
/* v as %.6e, or null when !known or v is not finite, padded with spaces to
 * width characters (13 to 64): a document laid out before its numbers are
 * known keeps its length once they are filled in (the control
 * directory's LAYER.json, whose size stat gives before any tensor is read). */
void jw_fixed(struct jw *w, int known, double v, int width);
/* 0, or the -errno that stopped the writer. */
int jw_error(const struct jw *w);
/* Frees the text; w can be used again from the start. */
void jw_free(struct jw *w);

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
