/* The emitter: writes a tree the way CPython's C pickler writes the
 * objects it stands for (docs/formats.md §2.1), so that a plain torch.save
 * data.pkl (protocol 2) comes out byte for byte as it went in, and a DCP
 * .metadata (protocol 4) in the same protocol.
 *
 *   - memo: strs, non-empty tuples, lists, dicts, globals and REDUCE/NEWOBJ
 *     results get BINPUT n in emission order; a node met again is BINGET.
 *     Globals are memoized by name (the same class is the same object);
 *   - batches of 1000 items, with the exact-list/dict and the iterator
 *     (REDUCE items) variants of CPython's batch_list/batch_dict;
 *   - sets, bytes and bytearrays as protocol 2 spells them (REDUCE of
 *     __builtin__ set / _codecs encode / __builtin__ bytearray);
 *   - recursive objects as CPython: lists and dicts are memoized before
 *     their items; a tuple or REDUCE met again inside itself is finished by
 *     the inner occurrence and the outer one POPs and BINGETs it.
 *
 * The walk is iterative: an explicit stack of frames, bounded by max_depth.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "pickle_int.h"
#include "pickle_ops.h"

#define BATCHSIZE 1000
/* CPython's frames (protocol 4+): cut once they hold this much, and
 * only written as frames from FRAME_MIN bytes on. */
#define FRAME_TARGET 65536
#define FRAME_MIN 4
#define FRAME_HEADER 9
#define NO_FRAME SIZE_MAX

/* Per-object emission state, keyed by node (or storage) address. */
struct ent {
	const void *key;
	uint32_t memo1;             /* memo index + 1, 0 when not memoized yet */
	uint32_t active;            /* frames of this node on the stack */
};

struct emap {
	struct ent *slots;
	size_t mask, count;
};

enum batch_state { B_BEGIN, B_SINGLE, B_IN, B_DONE };

struct frame {
	const struct pk_node *node;
	const struct pk_node *tuple;    /* storage frames: the pid tuple */
	const char *key;                /* storage frames: the key written instead of tuple[2] */
	int phase;
	/* batching of items */
	enum batch_state bstate;
	size_t i, batch;
	int half;                       /* pairs: key written, value next */
};

struct global_memo {
	const char *module, *name;
	int64_t memo;
};

struct em {
	struct ck_buf *out;
	struct ck_error *err;
	const struct pk_emit_opts *opts;
	size_t max_depth;
	int proto;
	size_t frame;                   /* where the open frame's header goes, or NO_FRAME */
	struct global_memo *names;      /* protocol 4+: module and name strs written, by value */
	size_t nnames, names_cap;
	struct pk_htab names_tab;
	int rc;
	uint64_t next_memo;
	int64_t latin1_memo;
	struct emap map;
	struct global_memo *globals;
	size_t nglobals, globals_cap;
	struct pk_htab globals_tab;
	struct frame *frames;
	size_t nframes, frames_cap;
};

static void fail(struct em *em, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(struct em *em, int errnum, const char *fmt, ...)
{
	char why[320];
	va_list ap;

	if (em->rc)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	em->rc = ck_fail(em->err, errnum, "pickle emit: %s", why);
}

/* --- object map ------------------------------------------------------------ */

static size_t ptr_hash(const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p;

	/* splitmix64's finalizer: arena addresses differ in a few middle bits */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return (size_t)h;
}

static struct ent *emap_get(const struct emap *m, const void *key)
{
	if (!m->slots)
		return NULL;
	for (size_t i = ptr_hash(key) & m->mask; m->slots[i].key; i = (i + 1) & m->mask)
		if (m->slots[i].key == key)
			return &m->slots[i];
	return NULL;
}

/* The entry of key, added when missing (one probe sequence). */
static struct ent *emap_add(struct em *em, const void *key)
{
	struct emap *m = &em->map;
	size_t i;

	if (!m->slots || (m->count + 1) * 2 > m->mask + 1) {
		size_t cap = m->slots ? (m->mask + 1) * 2 : 1024;
		struct ent *slots = calloc(cap, sizeof(*slots));

		if (!slots) {
			fail(em, ENOMEM, "out of memory");
			return NULL;
		}
		for (size_t j = 0; m->slots && j <= m->mask; j++) {
			if (!m->slots[j].key)
				continue;
			for (i = ptr_hash(m->slots[j].key) & (cap - 1); slots[i].key; i = (i + 1) & (cap - 1))
				;
			slots[i] = m->slots[j];
		}
		free(m->slots);
		m->slots = slots;
		m->mask = cap - 1;
	}
	for (i = ptr_hash(key) & m->mask; m->slots[i].key; i = (i + 1) & m->mask)
		if (m->slots[i].key == key)
			return &m->slots[i];
	m->slots[i] = (struct ent){ key, 0, 0 };
	m->count++;
	return &m->slots[i];
}

static int64_t memo_of(const struct em *em, const void *key)
{
	const struct ent *e = emap_get(&em->map, key);

	return e ? (int64_t)e->memo1 - 1 : -1;
}

/* --- writing ------------------------------------------------------------------- */

static void w(struct em *em, const void *p, size_t n)
{
	if (!em->rc && ck_buf_put(em->out, p, n))
		fail(em, ENOMEM, "out of memory");
}

static void w1(struct em *em, uint8_t op)
{
	w(em, &op, 1);
}

static void w_u32(struct em *em, uint8_t op, uint32_t v)
{
	uint8_t b[5] = { op, (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	w(em, b, sizeof(b));
}

/* --- frames (protocol 4+) ---------------------------------------------------- */

static void frame_begin(struct em *em)
{
	static const uint8_t hdr[FRAME_HEADER];

	em->frame = em->out->len;
	w(em, hdr, sizeof(hdr));
}

/* Closes the open frame: its header filled in, or taken out when it holds
 * less than FRAME_MIN bytes (as CPython does). */
static void frame_end(struct em *em)
{
	size_t start = em->frame, len;
	uint8_t *h;

	if (start == NO_FRAME || em->rc)
		return;
	em->frame = NO_FRAME;
	len = em->out->len - start - FRAME_HEADER;
	h = em->out->data + start;
	if (len < FRAME_MIN) {
		memmove(h, h + FRAME_HEADER, len);
		em->out->len -= FRAME_HEADER;
		return;
	}
	h[0] = PK_OP_FRAME;
	for (int i = 0; i < 8; i++)
		h[1 + i] = (uint8_t)((uint64_t)len >> (8 * i));
}

/* Before each object, as CPython's save(): a full frame is cut there. */
static void frame_boundary(struct em *em)
{
	if (em->frame != NO_FRAME && em->out->len - em->frame - FRAME_HEADER >= FRAME_TARGET) {
		frame_end(em);
		frame_begin(em);
	}
}

/* A str or bytes payload of FRAME_TARGET bytes or more goes outside any
 * frame, header and all, and the next frame starts after it. */
static void w_large(struct em *em, const uint8_t *hdr, size_t hlen, const void *p, size_t n)
{
	int framed = em->frame != NO_FRAME;

	if (framed)
		frame_end(em);
	w(em, hdr, hlen);
	w(em, p, n);
	if (framed)
		frame_begin(em);
}

/* BINPUT/LONG_BINPUT (MEMOIZE from protocol 4) of the next memo index,
 * which is returned. */
static int64_t put(struct em *em)
{
	uint64_t idx = em->next_memo++;

	if (idx >= UINT32_MAX) {
		fail(em, EOVERFLOW, "more than 2^32 - 1 memoized objects");
		return -1;
	}
	if (em->proto >= 4) {
		w1(em, PK_OP_MEMOIZE);
	} else if (idx < 256) {
		uint8_t b[2] = { PK_OP_BINPUT, (uint8_t)idx };

		w(em, b, 2);
	} else {
		w_u32(em, PK_OP_LONG_BINPUT, (uint32_t)idx);
	}
	return (int64_t)idx;
}

static void memoize(struct em *em, const void *key)
{
	struct ent *e = emap_add(em, key);
	int64_t idx = put(em);

	if (e)
		e->memo1 = (uint32_t)(idx + 1);
}

static void get(struct em *em, int64_t idx)
{
	if (idx < 256) {
		uint8_t b[2] = { PK_OP_BINGET, (uint8_t)idx };

		w(em, b, 2);
	} else {
		w_u32(em, PK_OP_LONG_BINGET, (uint32_t)idx);
	}
}

static void w_int(struct em *em, int64_t v)
{
	uint8_t b[10];

	if (v >= 0 && v <= 0xff) {
		b[0] = PK_OP_BININT1;
		b[1] = (uint8_t)v;
		w(em, b, 2);
	} else if (v >= 0 && v <= 0xffff) {
		b[0] = PK_OP_BININT2;
		b[1] = (uint8_t)v;
		b[2] = (uint8_t)(v >> 8);
		w(em, b, 3);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		w_u32(em, PK_OP_BININT, (uint32_t)v);
	} else {
		b[0] = PK_OP_LONG1;
		b[1] = (uint8_t)pk_int64_to_bytes(v, b + 2);
		w(em, b, 2 + (size_t)b[1]);
	}
}

static void w_long(struct em *em, const uint8_t *p, size_t len)
{
	if (len < 256) {
		uint8_t b[2] = { PK_OP_LONG1, (uint8_t)len };

		w(em, b, 2);
	} else if (len <= INT32_MAX) {
		w_u32(em, PK_OP_LONG4, (uint32_t)len);
	} else {
		fail(em, EOVERFLOW, "integer of %zu bytes", len);
	}
	w(em, p, len);
}

static void w_float(struct em *em, double f)
{
	uint8_t b[9] = { PK_OP_BINFLOAT };
	uint64_t bits;

	memcpy(&bits, &f, sizeof(bits));
	for (int i = 0; i < 8; i++)
		b[1 + i] = (uint8_t)(bits >> (56 - 8 * i));
	w(em, b, sizeof(b));
}

/* A str without memo: BINUNICODE, or from protocol 4 SHORT_BINUNICODE up
 * to 255 bytes and BINUNICODE8 past 4 GiB. */
static void w_str(struct em *em, const char *s, size_t len)
{
	uint8_t h[9];

	if (em->proto >= 4 && len < 256) {
		h[0] = PK_OP_SHORT_BINUNICODE;
		h[1] = (uint8_t)len;
		w(em, h, 2);
		w(em, s, len);
		return;
	}
	if (len > UINT32_MAX) {
		if (em->proto < 4) {
			fail(em, EOVERFLOW, "string of %zu bytes does not fit protocol %d", len, em->proto);
			return;
		}
		h[0] = PK_OP_BINUNICODE8;
		for (int i = 0; i < 8; i++)
			h[1 + i] = (uint8_t)((uint64_t)len >> (8 * i));
		w_large(em, h, 9, s, len);
		return;
	}
	h[0] = PK_OP_BINUNICODE;
	for (int i = 0; i < 4; i++)
		h[1 + i] = (uint8_t)((uint32_t)len >> (8 * i));
	if (em->proto >= 4 && len >= FRAME_TARGET)
		w_large(em, h, 5, s, len);
	else {
		w(em, h, 5);
		w(em, s, len);
	}
}

/* The name of the builtins module in this protocol (CPython maps it for
 * protocol 2 readers). */
static const char *builtins(const struct em *em)
{
	return em->proto >= 3 ? "builtins" : "__builtin__";
}

/* --- globals, by name ------------------------------------------------------------ */

struct gprobe {
	const struct em *em;
	const char *module, *name;
};

static int global_eq(const void *ctx, uint32_t pos)
{
	const struct gprobe *p = ctx;
	const struct global_memo *g = &p->em->globals[pos];

	return !strcmp(g->module, p->module) && !strcmp(g->name, p->name);
}

static int name_eq(const void *ctx, uint32_t pos)
{
	const struct gprobe *p = ctx;

	return !strcmp(p->em->names[pos].module, p->module);
}

/* Protocol 4+: a module or class name str, memoized by value (CPython's
 * are the same object wherever a module's classes meet). */
static void w_name(struct em *em, const char *s)
{
	struct gprobe p = { em, s, NULL };
	uint64_t h = pk_hash_bytes(s, strlen(s));
	long pos = pk_htab_find(&em->names_tab, h, name_eq, &p);
	int64_t idx;

	frame_boundary(em);
	if (pos >= 0) {
		get(em, em->names[pos].memo);
		return;
	}
	w_str(em, s, strlen(s));
	idx = put(em);
	if (em->nnames == em->names_cap) {
		struct global_memo *v = ck_grow(em->names, &em->names_cap, sizeof(*v), 32);

		if (!v) {
			fail(em, ENOMEM, "out of memory");
			return;
		}
		em->names = v;
	}
	if (pk_htab_add(&em->names_tab, h, (uint32_t)em->nnames)) {
		fail(em, ENOMEM, "out of memory");
		return;
	}
	em->names[em->nnames++] = (struct global_memo){ s, NULL, idx };
}

/* GLOBAL module\nname\n (STACK_GLOBAL from protocol 4), or BINGET of the
 * same name written before.  node (may be NULL) is the tree's GLOBAL node,
 * remembered for quick lookups. */
static void w_global(struct em *em, const char *module, const char *name, const struct pk_node *node)
{
	struct gprobe p = { em, module, name };
	int64_t idx = node ? memo_of(em, node) : -1;
	uint64_t h;
	long pos;

	frame_boundary(em);
	if (idx >= 0) {
		get(em, idx);
		return;
	}
	h = pk_hash_bytes(module, strlen(module)) * 0x9e3779b97f4a7c15ULL ^
	    pk_hash_bytes(name, strlen(name));
	pos = pk_htab_find(&em->globals_tab, h, global_eq, &p);
	if (pos >= 0) {
		idx = em->globals[pos].memo;
		get(em, idx);
	} else {
		if (em->proto >= 4) {
			w_name(em, module);
			w_name(em, name);
			w1(em, PK_OP_STACK_GLOBAL);
		} else {
			if (strchr(module, '\n') || strchr(name, '\n')) {
				fail(em, EINVAL, "global name %.64s.%.64s contains a newline", module, name);
				return;
			}
			w1(em, PK_OP_GLOBAL);
			w(em, module, strlen(module));
			w1(em, '\n');
			w(em, name, strlen(name));
			w1(em, '\n');
		}
		idx = put(em);
		if (em->nglobals == em->globals_cap) {
			struct global_memo *v = ck_grow(em->globals, &em->globals_cap, sizeof(*v), 32);

			if (!v) {
				fail(em, ENOMEM, "out of memory");
				return;
			}
			em->globals = v;
		}
		if (pk_htab_add(&em->globals_tab, h, (uint32_t)em->nglobals)) {
			fail(em, ENOMEM, "out of memory");
			return;
		}
		em->globals[em->nglobals++] = (struct global_memo){ module, name, idx };
	}
	if (node) {
		struct ent *e = emap_add(em, node);

		if (e)
			e->memo1 = (uint32_t)(idx + 1);
	}
}

/* --- bytes ------------------------------------------------------------------------ */

/* _codecs.encode(<latin-1 text>, 'latin1'): protocol 2's spelling of bytes.
 * Leaves the REDUCE result on the stack, not memoized. */
static void w_codecs_encode(struct em *em, const uint8_t *p, size_t len)
{
	size_t ulen = 0;
	uint8_t *text;

	w_global(em, "_codecs", "encode", NULL);
	for (size_t i = 0; i < len; i++)
		ulen += p[i] < 0x80 ? 1 : 2;
	if (em->rc)
		return;
	text = malloc(ulen ? ulen : 1);
	if (!text) {
		fail(em, ENOMEM, "out of memory");
		return;
	}
	ulen = 0;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < 0x80) {
			text[ulen++] = p[i];
		} else {
			text[ulen++] = (uint8_t)(0xc0 | p[i] >> 6);
			text[ulen++] = (uint8_t)(0x80 | (p[i] & 0x3f));
		}
	}
	w_str(em, (const char *)text, ulen);
	free(text);
	put(em);
	/* 'latin1' is one interned object in CPython: written once, then BINGET. */
	if (em->latin1_memo >= 0) {
		get(em, em->latin1_memo);
	} else {
		w_str(em, "latin1", 6);
		em->latin1_memo = put(em);
	}
	w1(em, PK_OP_TUPLE2);
	put(em);
	w1(em, PK_OP_REDUCE);
}

/* Protocol 3+: SHORT_BINBYTES, BINBYTES or (4+) BINBYTES8, no memo. */
static void w_bytes3(struct em *em, const uint8_t *p, size_t len)
{
	uint8_t h[9];

	if (len < 256) {
		h[0] = PK_OP_SHORT_BINBYTES;
		h[1] = (uint8_t)len;
		w(em, h, 2);
		w(em, p, len);
		return;
	}
	if (len > UINT32_MAX) {
		if (em->proto < 4) {
			fail(em, EOVERFLOW, "bytes of %zu bytes do not fit protocol %d", len, em->proto);
			return;
		}
		h[0] = PK_OP_BINBYTES8;
		for (int i = 0; i < 8; i++)
			h[1 + i] = (uint8_t)((uint64_t)len >> (8 * i));
		w_large(em, h, 9, p, len);
		return;
	}
	h[0] = PK_OP_BINBYTES;
	for (int i = 0; i < 4; i++)
		h[1 + i] = (uint8_t)((uint32_t)len >> (8 * i));
	if (em->proto >= 4 && len >= FRAME_TARGET) {
		w_large(em, h, 5, p, len);
	} else {
		w(em, h, 5);
		w(em, p, len);
	}
}

static void save_bytes(struct em *em, const struct pk_node *n)
{
	const uint8_t *p = (const uint8_t *)n->v.str.s;
	size_t len = n->v.str.len;

	if (em->proto >= 5 && (n->flags & PK_F_BYTEARRAY)) {
		uint8_t h[9] = { PK_OP_BYTEARRAY8 };

		for (int i = 0; i < 8; i++)
			h[1 + i] = (uint8_t)((uint64_t)len >> (8 * i));
		if (len >= FRAME_TARGET) {
			w_large(em, h, 9, p, len);
		} else {
			w(em, h, 9);
			w(em, p, len);
		}
	} else if (em->proto >= 3 && (n->flags & PK_F_BYTEARRAY)) {
		/* bytearray(bytes(obj)): the bytes object is new, memoized too */
		w_global(em, builtins(em), "bytearray", NULL);
		if (len) {
			frame_boundary(em);
			w_bytes3(em, p, len);
			put(em);
			w1(em, PK_OP_TUPLE1);
			put(em);
		} else {
			w1(em, PK_OP_EMPTY_TUPLE);
		}
		w1(em, PK_OP_REDUCE);
	} else if (em->proto >= 3) {
		w_bytes3(em, p, len);
	} else if (n->flags & PK_F_BYTEARRAY) {
		w_global(em, builtins(em), "bytearray", NULL);
		if (len) {
			w_codecs_encode(em, p, len);
			put(em);
			w1(em, PK_OP_TUPLE1);
			put(em);
		} else {
			w1(em, PK_OP_EMPTY_TUPLE);
		}
		w1(em, PK_OP_REDUCE);
	} else if (len) {
		w_codecs_encode(em, p, len);
	} else {
		w_global(em, builtins(em), "bytes", NULL);
		w1(em, PK_OP_EMPTY_TUPLE);
		w1(em, PK_OP_REDUCE);
	}
	memoize(em, n);
}

/* --- frames ---------------------------------------------------------------------- */

/* e: the node's entry, when the caller has it at hand. */
static struct frame *push_frame(struct em *em, const struct pk_node *n, struct ent *e)
{
	struct frame *f;

	if (!e)
		e = emap_add(em, n);
	if (!e)
		return NULL;
	if (e->active >= 2) {
		/* Seen inside itself twice without a list or dict in between:
		 * CPython would recurse forever. */
		fail(em, EINVAL, "recursive %s cannot be pickled", n->kind == PK_TUPLE ? "tuple" : "object");
		return NULL;
	}
	if (em->nframes >= em->max_depth) {
		fail(em, EINVAL, "nesting deeper than %zu levels", em->max_depth);
		return NULL;
	}
	if (em->nframes == em->frames_cap) {
		struct frame *v = ck_grow(em->frames, &em->frames_cap, sizeof(*v), 64);

		if (!v) {
			fail(em, ENOMEM, "out of memory");
			return NULL;
		}
		em->frames = v;
	}
	e->active++;
	f = &em->frames[em->nframes++];
	memset(f, 0, sizeof(*f));
	f->node = n;
	return f;
}

static void pop_frame(struct em *em)
{
	struct ent *e = emap_get(&em->map, em->frames[em->nframes - 1].node);

	if (e)
		e->active--;
	em->nframes--;
}

static const char *storage_key(const struct em *em, const struct pk_storage *st)
{
	const char *k = em->opts && em->opts->storage_key ? em->opts->storage_key(em->opts->ctx, st) : NULL;

	return k && strcmp(k, st->key) ? k : NULL;
}

static int needs_frame(const struct pk_node *n)
{
	return pk_node_has_children(n);
}

/* Writes n, or pushes a frame that will write it. */
static void save(struct em *em, const struct pk_node *n)
{
	struct ent *e;
	int64_t idx;

	if (em->rc)
		return;
	if (!n) {
		fail(em, EINVAL, "incomplete node (missing child)");
		return;
	}
	frame_boundary(em);
	switch (n->kind) {
	case PK_NONE:
		w1(em, PK_OP_NONE);
		return;
	case PK_BOOL:
		w1(em, n->v.b ? PK_OP_NEWTRUE : PK_OP_NEWFALSE);
		return;
	case PK_INT:
		w_int(em, n->v.i);
		return;
	case PK_LONG:
		w_long(em, (const uint8_t *)n->v.str.s, n->v.str.len);
		return;
	case PK_FLOAT:
		w_float(em, n->v.f);
		return;
	case PK_GLOBAL:
		w_global(em, n->v.global.module, n->v.global.name, n);
		return;
	default:
		break;
	}
	if (n->kind == PK_TUPLE && !n->n) {
		w1(em, PK_OP_EMPTY_TUPLE);    /* never memoized, as in CPython */
		return;
	}
	e = emap_add(em, n);
	if (!e)
		return;
	if (e->memo1) {
		get(em, (int64_t)e->memo1 - 1);
		return;
	}
	switch (n->kind) {
	case PK_STR:
		w_str(em, n->v.str.s, n->v.str.len);
		idx = put(em);
		e->memo1 = (uint32_t)(idx + 1);
		return;
	case PK_BYTES:
		save_bytes(em, n);
		return;
	case PK_LIST:
		if (!n->n) {
			w1(em, PK_OP_EMPTY_LIST);
			memoize(em, n);
			return;
		}
		break;
	case PK_DICT:
		if (!needs_frame(n)) {
			w1(em, PK_OP_EMPTY_DICT);
			memoize(em, n);
			return;
		}
		break;
	case PK_STORAGE: {
		const char *key;
		struct frame *f;

		if (!n->v.storage || !n->args) {
			fail(em, EINVAL, "storage node without its persistent id");
			return;
		}
		key = storage_key(em, n->v.storage);
		if (!key || n->args->kind != PK_TUPLE || n->args->n != 5)
			break;     /* written as any persistent id */
		idx = memo_of(em, n->args);
		if (idx >= 0) {
			get(em, idx);
			w1(em, PK_OP_BINPERSID);
			return;
		}
		f = push_frame(em, n, NULL);
		if (f) {
			f->tuple = n->args;
			f->key = key;
		}
		return;
	}
	default:
		break;
	}
	push_frame(em, n, e);
}

/* Emits one entry (item, or key and value) per call of the batch machine.
 * exact: CPython's list/dict fast path; otherwise its iterator path (items
 * of a REDUCE result).  Returns 1 once everything is written. */
static int batches(struct em *em, struct frame *f, struct pk_node *const *items, size_t nitems,
		   size_t stride, int exact)
{
	size_t count = nitems / stride;
	const struct pk_node *next;

	for (;;) {
		switch (f->bstate) {
		case B_BEGIN:
			if (count - f->i == 0 && !exact)
				return 1;
			if (count == 0)
				return 1;
			if ((exact && count == 1) || (!exact && count - f->i == 1)) {
				f->bstate = B_SINGLE;
				continue;
			}
			w1(em, PK_OP_MARK);
			f->batch = 0;
			f->bstate = B_IN;
			continue;
		case B_SINGLE:
			if (f->half < (int)stride) {
				next = items[f->i * stride + (size_t)f->half];
				f->half++;
				save(em, next);
				return 0;
			}
			w1(em, stride == 2 ? PK_OP_SETITEM : PK_OP_APPEND);
			f->i++;
			f->bstate = B_DONE;
			return 1;
		case B_IN:
			if (f->batch < BATCHSIZE && f->i < count) {
				next = items[f->i * stride + (size_t)f->half];
				if (++f->half == (int)stride) {
					f->half = 0;
					f->i++;
					f->batch++;
				}
				save(em, next);
				return 0;
			}
			w1(em, stride == 2 ? PK_OP_SETITEMS : PK_OP_APPENDS);
			if (exact && stride == 1 ? f->i < count : f->batch == BATCHSIZE) {
				f->bstate = B_BEGIN;
				if (exact) {
					/* exact batches go on with a MARK even when nothing is left (dicts) */
					w1(em, PK_OP_MARK);
					f->batch = 0;
					f->bstate = B_IN;
				}
				continue;
			}
			f->bstate = B_DONE;
			return 1;
		case B_DONE:
			return 1;
		}
	}
}

static void reset_batches(struct frame *f)
{
	f->bstate = B_BEGIN;
	f->i = f->batch = 0;
	f->half = 0;
}

/* Tuples, and the pid tuple of a renamed storage. */
static void step_tuple(struct em *em, struct frame *f)
{
	const struct pk_node *t = f->tuple ? f->tuple : f->node;
	const struct pk_node *next;
	int64_t idx;

	if (f->phase == 0) {
		if (t->n > 3)
			w1(em, PK_OP_MARK);
		f->phase = 1;
	}
	if (f->i < t->n) {
		if (f->key && f->i == 2) {
			/* The renamed key: one string per storage, then BINGET. */
			const struct pk_storage *st = f->node->v.storage;

			f->i++;
			idx = memo_of(em, st);
			if (idx >= 0) {
				get(em, idx);
			} else {
				w_str(em, f->key, strlen(f->key));
				memoize(em, st);
			}
			return;
		}
		next = t->items[f->i++];
		save(em, next);
		return;
	}
	idx = memo_of(em, t);
	if (idx >= 0) {
		/* Written by a recursive occurrence inside: drop ours. */
		if (t->n > 3) {
			w1(em, PK_OP_POP_MARK);
		} else {
			for (size_t k = 0; k < t->n; k++)
				w1(em, PK_OP_POP);
		}
		get(em, idx);
	} else {
		static const uint8_t ops[] = { 0, PK_OP_TUPLE1, PK_OP_TUPLE2, PK_OP_TUPLE3 };

		w1(em, t->n <= 3 ? ops[t->n] : PK_OP_TUPLE);
		memoize(em, t);
	}
	if (f->tuple)
		w1(em, PK_OP_BINPERSID);
	pop_frame(em);
}

static void step_list(struct em *em, struct frame *f)
{
	const struct pk_node *n = f->node;

	if (f->phase == 0) {
		if (n->state) {
			fail(em, EINVAL, "a list cannot have a BUILD state");
			return;
		}
		w1(em, PK_OP_EMPTY_LIST);
		memoize(em, n);
		f->phase = 1;
	}
	if (batches(em, f, n->items, n->n, 1, 1))
		pop_frame(em);
}

static void step_dict(struct em *em, struct frame *f)
{
	const struct pk_node *n = f->node;

	if (f->phase == 0) {
		if (n->state || n->n % 2) {
			fail(em, EINVAL, "%s", n->state ? "a plain dict cannot have a BUILD state"
							: "dict with an odd number of items");
			return;
		}
		w1(em, PK_OP_EMPTY_DICT);
		memoize(em, n);
		f->phase = 1;
	}
	if (batches(em, f, n->items, n->n, 2, 1))
		pop_frame(em);
}

static void step_persid(struct em *em, struct frame *f)
{
	if (f->phase == 0) {
		f->phase = 1;
		save(em, f->node->args);
		return;
	}
	w1(em, PK_OP_BINPERSID);
	pop_frame(em);
}

/* Everything written as callable + arguments + REDUCE (or NEWOBJ), then
 * the object's items and state: calls, tensors, OrderedDicts, new objects,
 * sets and frozensets. */
enum { R_HEAD, R_CLS, R_ARGS, R_KWARGS, R_SETITEMS, R_SETEND, R_CALL, R_LIST, R_DICT, R_STATE, R_BUILD };

static void step_reduce(struct em *em, struct frame *f)
{
	const struct pk_node *n = f->node;
	int is_set = n->kind == PK_SET || n->kind == PK_FROZENSET;
	int newobj_ex = n->kind == PK_NEWOBJ && n->kwargs;
	int64_t idx;

	switch (f->phase) {
	case R_HEAD:
		if (is_set) {
			w_global(em, builtins(em), n->kind == PK_SET ? "set" : "frozenset", NULL);
			/* set(<list of the items>) */
			w1(em, PK_OP_EMPTY_LIST);
			put(em);
			f->phase = R_SETITEMS;
			return;
		}
		if (!n->cls || (!n->args && n->kind != PK_DICT)) {
			fail(em, EINVAL, "incomplete %s node (no callable or arguments)",
			     n->kind == PK_NEWOBJ ? "NEWOBJ" : "REDUCE");
			return;
		}
		if (n->args && n->args->kind != PK_TUPLE) {
			fail(em, EINVAL, "arguments of a call must be a tuple");
			return;
		}
		if (newobj_ex && em->proto < 4) {
			/* copyreg.__newobj_ex__(cls, args, kwargs) is what NEWOBJ_EX does. */
			w_global(em, "copyreg", "__newobj_ex__", NULL);
		}
		f->phase = R_CLS;
		save(em, n->cls);
		return;
	case R_CLS:
		f->phase = newobj_ex ? R_KWARGS : R_CALL;
		if (n->args)
			save(em, n->args);
		else
			w1(em, PK_OP_EMPTY_TUPLE);
		return;
	case R_KWARGS:
		f->phase = em->proto >= 4 ? R_CALL : R_SETEND;
		save(em, n->kwargs);
		return;
	case R_SETITEMS:
		if (!batches(em, f, n->items, n->n, 1, 1))
			return;
		f->phase = R_SETEND;
		/* fall through */
	case R_SETEND:
		w1(em, is_set ? PK_OP_TUPLE1 : PK_OP_TUPLE3);
		put(em);
		f->phase = R_CALL;
		/* fall through */
	case R_CALL:
		if (newobj_ex)
			w1(em, em->proto >= 4 ? PK_OP_NEWOBJ_EX : PK_OP_REDUCE);
		else
			w1(em, n->kind == PK_NEWOBJ ? PK_OP_NEWOBJ : PK_OP_REDUCE);
		idx = memo_of(em, n);
		if (idx >= 0) {
			/* Built by a recursive occurrence inside the arguments. */
			w1(em, PK_OP_POP);
			get(em, idx);
			pop_frame(em);
			return;
		}
		memoize(em, n);
		if (is_set) {
			pop_frame(em);
			return;
		}
		reset_batches(f);
		f->phase = R_LIST;
		/* fall through */
	case R_LIST:
		if (n->kind != PK_DICT && (n->flags & PK_F_LISTITEMS) && !batches(em, f, n->items, n->n, 1, 0))
			return;
		reset_batches(f);
		f->phase = R_DICT;
		/* fall through */
	case R_DICT:
		if (n->kind == PK_DICT || (n->flags & PK_F_DICTITEMS)) {
			if (n->n % 2) {
				fail(em, EINVAL, "dict items with an odd count");
				return;
			}
			if (!batches(em, f, n->items, n->n, 2, 0))
				return;
		}
		f->phase = R_STATE;
		/* fall through */
	case R_STATE:
		if (n->state) {
			f->phase = R_BUILD;
			save(em, n->state);
			return;
		}
		pop_frame(em);
		return;
	case R_BUILD:
		w1(em, PK_OP_BUILD);
		pop_frame(em);
		return;
	}
}

/* Protocol 4+ sets: EMPTY_SET, memo, then MARK ... ADDITEMS per 1000
 * items (and one more after a full batch, as CPython's C pickler); frozensets: MARK, the items, FROZENSET (or POP_MARK and the memo
 * when an item held the frozenset itself). */
static void step_set4(struct em *em, struct frame *f)
{
	const struct pk_node *n = f->node;
	int64_t idx;

	if (n->kind == PK_FROZENSET) {
		if (f->phase == 0) {
			w1(em, PK_OP_MARK);
			f->phase = 1;
		}
		if (f->i < n->n) {
			save(em, n->items[f->i++]);
			return;
		}
		idx = memo_of(em, n);
		if (idx >= 0) {
			w1(em, PK_OP_POP_MARK);
			get(em, idx);
		} else {
			w1(em, PK_OP_FROZENSET);
			memoize(em, n);
		}
		pop_frame(em);
		return;
	}
	if (f->phase == 0) {
		w1(em, PK_OP_EMPTY_SET);
		memoize(em, n);
		if (!n->n) {
			pop_frame(em);
			return;
		}
		f->phase = 1;
	}
	if (f->phase == 1) {
		/* a batch; after a full one CPython writes another, even empty */
		w1(em, PK_OP_MARK);
		f->batch = 0;
		f->phase = 2;
	}
	if (f->batch < BATCHSIZE && f->i < n->n) {
		f->batch++;
		save(em, n->items[f->i++]);
		return;
	}
	w1(em, PK_OP_ADDITEMS);
	if (f->batch < BATCHSIZE) {
		pop_frame(em);
		return;
	}
	f->phase = 1;
}

static void step(struct em *em)
{
	struct frame *f = &em->frames[em->nframes - 1];

	if (f->tuple) {
		step_tuple(em, f);
		return;
	}
	switch (f->node->kind) {
	case PK_TUPLE:
		step_tuple(em, f);
		break;
	case PK_LIST:
		step_list(em, f);
		break;
	case PK_DICT:
		if (f->node->cls)
			step_reduce(em, f);
		else
			step_dict(em, f);
		break;
	case PK_PERSID:
	case PK_STORAGE:
		step_persid(em, f);
		break;
	case PK_SET:
	case PK_FROZENSET:
		if (em->proto >= 4)
			step_set4(em, f);
		else
			step_reduce(em, f);
		break;
	case PK_CALL:
	case PK_TENSOR:
	case PK_NEWOBJ:
		step_reduce(em, f);
		break;
	default:
		fail(em, EINVAL, "cannot emit node kind %d", (int)f->node->kind);
		break;
	}
}

int pk_emit(const struct pk_node *root, const struct pk_emit_opts *opts,
	    struct ck_buf *out, struct ck_error *err)
{
	struct em em;
	size_t start = out->len;
	uint8_t proto[2] = { PK_OP_PROTO, 2 };

	memset(&em, 0, sizeof(em));
	em.out = out;
	em.err = err;
	em.opts = opts;
	em.max_depth = opts && opts->max_depth ? opts->max_depth : PK_DEFAULT_DEPTH;
	em.latin1_memo = -1;
	em.frame = NO_FRAME;
	em.proto = opts && opts->protocol > 2 ? opts->protocol : 2;
	if (em.proto > 5)
		return ck_fail(err, EINVAL, "pickle emit: protocol %d is not supported", em.proto);
	proto[1] = (uint8_t)em.proto;
	w(&em, proto, sizeof(proto));
	if (em.proto >= 4)
		frame_begin(&em);
	save(&em, root);
	while (em.nframes && !em.rc)
		step(&em);
	w1(&em, PK_OP_STOP);
	frame_end(&em);
	free(em.map.slots);
	free(em.globals);
	pk_htab_free(&em.globals_tab);
	free(em.names);
	pk_htab_free(&em.names_tab);
	free(em.frames);
	if (em.rc) {
		out->len = start;
		return em.rc;
	}
	return 0;
}
