/* The symbolic pickle VM: runs the opcodes of protocols 0-5 over untrusted
 * bytes and builds a tree of nodes.  Nothing is imported or called: GLOBAL
 * makes a name, REDUCE/NEWOBJ/BUILD record what would have been called.
 *
 * Safety: every length is checked against the bytes left before anything
 * is allocated for it; the stack, mark stack and memo grow with the input
 * only; nesting and node counts are limited; the loop is iterative, so no
 * input can exhaust the C stack.  Errors name the opcode, its offset and
 * the reason, in the words of CPython's unpickler where it has some.
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

struct vm {
	struct pk_doc *doc;
	const uint8_t *base, *p, *end;
	size_t max_depth, max_nodes, max_memo;
	struct ck_error *err;
	size_t op_off;
	uint8_t op;
	int rc;                     /* first error, for helpers that return pointers */

	struct pk_node **stack;
	size_t sp, scap;
	size_t *marks;
	size_t nmarks, mcap;

	struct pk_memo memo;

	struct ck_buf scratch;
	int heights_stale;

	/* Immutable leaves that Python shares too: one node each per document
	 * (a state dict is mostly small ints). */
	struct pk_node *none, *true_, *false_, *empty_tuple;
	struct pk_node *small_ints[256];
};

static int fail(struct vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct vm *vm, const char *fmt, ...)
{
	char why[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	vm->rc = ck_fail(vm->err, EINVAL, "pickle: %s at offset %zu: %s",
			 pk_opcode_name(vm->op), vm->op_off, why);
	return vm->rc;
}

static int oom(struct vm *vm)
{
	vm->rc = ck_fail(vm->err, ENOMEM, "pickle: %s at offset %zu: out of memory",
			 pk_opcode_name(vm->op), vm->op_off);
	return vm->rc;
}

static size_t left(const struct vm *vm)
{
	return (size_t)(vm->end - vm->p);
}

/* --- reading arguments --------------------------------------------------- */

static int need(struct vm *vm, size_t n)
{
	if (left(vm) < n)
		return fail(vm, "pickle data was truncated (needs %zu bytes, %zu left)", n, left(vm));
	return 0;
}

static int read_line(struct vm *vm, const char **s, size_t *len)
{
	const uint8_t *nl = memchr(vm->p, '\n', left(vm));

	*s = NULL;
	*len = 0;
	if (!nl)
		return fail(vm, "pickle data was truncated (no end of line)");
	*s = (const char *)vm->p;
	*len = (size_t)(nl - vm->p);
	vm->p = nl + 1;
	return 0;
}

/* A declared byte count: must fit in what is left of the input. */
static int read_length(struct vm *vm, size_t width, int is_signed, size_t *out)
{
	uint64_t v;

	*out = 0;
	if (need(vm, width))
		return vm->rc;
	switch (width) {
	case 1: v = vm->p[0]; break;
	case 4: v = ck_le32(vm->p); break;
	default: v = ck_le64(vm->p); break;
	}
	vm->p += width;
	if (is_signed && width == 4 && (v & 0x80000000u))
		return fail(vm, "negative byte count");
	if (v > left(vm))
		return fail(vm, "declared length %llu exceeds the %zu bytes left",
			    (unsigned long long)v, left(vm));
	*out = (size_t)v;
	return 0;
}

/* --- nodes ---------------------------------------------------------------- */

static struct pk_node *node_new(struct vm *vm, enum pk_kind kind)
{
	struct pk_node *n;

	if (vm->doc->nnodes >= vm->max_nodes) {
		fail(vm, "more than %zu nodes", vm->max_nodes);
		return NULL;
	}
	n = pk_new(vm->doc, kind);
	if (!n)
		oom(vm);
	return n;
}

static struct pk_node *node_bytes(struct vm *vm, enum pk_kind kind, const void *s, size_t len)
{
	struct pk_node *n = node_new(vm, kind);

	if (!n)
		return NULL;
	n->v.str.s = pk_strndup(vm->doc, s, len);
	if (!n->v.str.s) {
		oom(vm);
		return NULL;
	}
	n->v.str.len = len;
	return n;
}

/* A shared leaf, made on first use. */
static struct pk_node *shared_leaf(struct vm *vm, struct pk_node **slot, enum pk_kind kind)
{
	if (!*slot)
		*slot = node_new(vm, kind);
	return *slot;
}

static struct pk_node *node_int(struct vm *vm, int64_t v)
{
	struct pk_node *n;

	if (v >= 0 && v < 256) {
		n = vm->small_ints[v];
		if (n)
			return n;
	}
	n = node_new(vm, PK_INT);
	if (!n)
		return NULL;
	n->v.i = v;
	if (v >= 0 && v < 256)
		vm->small_ints[v] = n;
	return n;
}

/* A Python 2 str: text when it is UTF-8 (torch.load decodes with utf-8),
 * bytes otherwise. */
static struct pk_node *node_py2str(struct vm *vm, const void *s, size_t len)
{
	return node_bytes(vm, pk_utf8_valid(s, len) ? PK_STR : PK_BYTES, s, len);
}

/* An integer from minimal two's-complement bytes. */
static struct pk_node *node_integer(struct vm *vm, const uint8_t *p, size_t len)
{
	int64_t v;

	len = pk_bytes_minimal_len(p, len);
	if (pk_bytes_to_int64(p, len, &v))
		return node_int(vm, v);
	return node_bytes(vm, PK_LONG, p, len);
}

/* Records that child hangs below parent, keeping the height bound. */
static int adopt(struct vm *vm, struct pk_node *parent, struct pk_node *child)
{
	struct pk_inode *p = pk_inode_of(parent), *c = pk_inode_of(child);

	if (child != parent && c->height + 1 > p->height) {
		p->height = c->height + 1;
		if (p->height > vm->max_depth)
			return fail(vm, "nesting deeper than %zu levels", vm->max_depth);
	}
	c->embedded = 1;
	return 0;
}

/* Before changing a node that already has a parent: the parents' heights
 * do not follow, so the whole tree is measured again at STOP. */
static void mutating(struct vm *vm, struct pk_node *n)
{
	if (pk_inode_of(n)->embedded)
		vm->heights_stale = 1;
}

static const char *kind_name(enum pk_kind k)
{
	static const char *const names[] = {
		"None", "bool", "int", "int", "float", "str", "bytes", "tuple", "list", "dict",
		"set", "frozenset", "global", "reduce result", "new object", "persistent id",
		"storage", "tensor",
	};

	return (size_t)k < sizeof(names) / sizeof(names[0]) ? names[k] : "object";
}

/* --- the stack ------------------------------------------------------------- */

static size_t fence(const struct vm *vm)
{
	return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
}

static int push(struct vm *vm, struct pk_node *n)
{
	if (vm->sp == vm->scap) {
		struct pk_node **s = ck_grow(vm->stack, &vm->scap, sizeof(*s), 256);

		if (!s)
			return oom(vm);
		vm->stack = s;
	}
	vm->stack[vm->sp++] = n;
	if (n->kind == PK_GLOBAL && pk_is_getattr(n))
		vm->doc->getattr_pushes++;
	return 0;
}

static int underflow(struct vm *vm)
{
	return fail(vm, "unpickling stack underflow");
}

static int pop(struct vm *vm, struct pk_node **out)
{
	*out = NULL;
	if (vm->sp <= fence(vm))
		return underflow(vm);
	*out = vm->stack[--vm->sp];
	return 0;
}

static int peek(struct vm *vm, struct pk_node **out)
{
	*out = NULL;
	if (vm->sp <= fence(vm))
		return underflow(vm);
	*out = vm->stack[vm->sp - 1];
	return 0;
}

/* The stack's items from slot i up (i <= sp).  The stack is NULL until
 * something is pushed (a MARK pushes nothing), and NULL + 0 is undefined
 * behaviour, so an empty run of items is NULL rather than computed. */
static struct pk_node **items_from(struct vm *vm, size_t i)
{
	return vm->stack ? vm->stack + i : NULL;
}

/* Items pushed since the last MARK are stack[*start .. sp); the mark is
 * removed, the items stay until the caller drops them (sp = *start). */
static int pop_mark(struct vm *vm, size_t *start)
{
	*start = 0;
	if (!vm->nmarks)
		return fail(vm, "could not find MARK");
	*start = vm->marks[--vm->nmarks];
	return 0;
}

static int push_mark(struct vm *vm)
{
	if (vm->nmarks == vm->mcap) {
		size_t *m = ck_grow(vm->marks, &vm->mcap, sizeof(*m), 64);

		if (!m)
			return oom(vm);
		vm->marks = m;
	}
	vm->marks[vm->nmarks++] = vm->sp;
	return 0;
}

/* A new sequence node holding items[0..n). */
static struct pk_node *node_seq(struct vm *vm, enum pk_kind kind, struct pk_node **items, size_t n)
{
	struct pk_node *s = node_new(vm, kind);

	if (!s)
		return NULL;
	if (n) {
		/* exactly n slots: these arrays never grow (tuples) or rarely */
		s->items = n <= SIZE_MAX / sizeof(*items) ? pk_alloc(vm->doc, n * sizeof(*items)) : NULL;
		if (!s->items) {
			oom(vm);
			return NULL;
		}
		memcpy(s->items, items, n * sizeof(*items));
		s->n = s->cap = n;
		for (size_t i = 0; i < n; i++)
			if (adopt(vm, s, items[i]))
				return NULL;
	}
	return s;
}

/* --- memo ------------------------------------------------------------------ */

static int op_put(struct vm *vm, uint64_t idx)
{
	struct pk_node *top;

	if (peek(vm, &top))
		return vm->rc;
	if (idx > vm->max_memo)
		return fail(vm, "memo index %llu exceeds the limit %zu", (unsigned long long)idx,
			    vm->max_memo);
	return pk_memo_put(&vm->memo, idx, top) ? oom(vm) : 0;
}

static int op_get(struct vm *vm, uint64_t idx)
{
	struct pk_node *n = pk_memo_get(&vm->memo, idx);

	if (!n)
		return fail(vm, "memo value not found at index %llu", (unsigned long long)idx);
	return push(vm, n);
}

/* A decimal memo index of the text opcodes. */
/* The u8 (BINPUT/BINGET) or u32 (LONG_BINPUT/LONG_BINGET) memo index. */
static int bin_index(struct vm *vm, size_t width, uint64_t *idx)
{
	if (need(vm, width))
		return vm->rc;
	*idx = width == 1 ? *vm->p : ck_le32(vm->p);
	vm->p += width;
	return 0;
}

static int text_index(struct vm *vm, uint64_t *idx)
{
	const char *s, *why;
	size_t len;
	int64_t v;

	if (read_line(vm, &s, &len))
		return vm->rc;
	if (pk_text_integer(s, len, &vm->scratch, &why))
		return fail(vm, "%s", why);
	if (!pk_bytes_to_int64(vm->scratch.data, vm->scratch.len, &v) || v < 0)
		return fail(vm, "invalid memo index");
	*idx = (uint64_t)v;
	return 0;
}

/* --- container and object opcodes ------------------------------------------ */

static int append_items(struct vm *vm, struct pk_node *target, struct pk_node **items, size_t n)
{
	if (target->kind == PK_CALL || target->kind == PK_NEWOBJ) {
		if (target->flags & PK_F_DICTITEMS)
			return fail(vm, "APPEND to an object that already received SETITEM");
		target->flags |= PK_F_LISTITEMS;
	} else if (target->kind != PK_LIST) {
		return fail(vm, "cannot append to a %s", kind_name(target->kind));
	}
	mutating(vm, target);
	if (n && pk_items_reserve(vm->doc, target, n))
		return oom(vm);
	for (size_t i = 0; i < n; i++) {
		if (adopt(vm, target, items[i]))
			return vm->rc;
		target->items[target->n++] = items[i];
	}
	return 0;
}

static int set_items(struct vm *vm, struct pk_node *target, struct pk_node **items, size_t n)
{
	if (n % 2)
		return fail(vm, "odd number of items for SETITEMS");
	if (target->kind == PK_CALL || target->kind == PK_NEWOBJ) {
		/* Unknown __setitem__: record the calls as they come. */
		if (target->flags & PK_F_LISTITEMS)
			return fail(vm, "SETITEM on an object that already received APPEND");
		target->flags |= PK_F_DICTITEMS;
		mutating(vm, target);
		if (n && pk_items_reserve(vm->doc, target, n))
			return oom(vm);
		for (size_t i = 0; i < n; i++) {
			if (adopt(vm, target, items[i]))
				return vm->rc;
			target->items[target->n++] = items[i];
		}
		return 0;
	}
	if (target->kind != PK_DICT)
		return fail(vm, "cannot set items of a %s", kind_name(target->kind));
	mutating(vm, target);
	for (size_t i = 0; i < n; i += 2) {
		if (adopt(vm, target, items[i]) || adopt(vm, target, items[i + 1]))
			return vm->rc;
		if (pk_dict_put(vm->doc, target, items[i], items[i + 1]))
			return oom(vm);
	}
	return 0;
}

/* add_items as ADDITEMS applies it: only to a set. */
static int add_items(struct vm *vm, struct pk_node *set, struct pk_node **items, size_t n)
{
	if (set->kind != PK_SET)
		return fail(vm, "cannot add items to a %s", kind_name(set->kind));
	mutating(vm, set);
	for (size_t i = 0; i < n; i++) {
		if (adopt(vm, set, items[i]))
			return vm->rc;
		if (pk_set_add(vm->doc, set, items[i]))
			return oom(vm);
	}
	return 0;
}

/* APPENDS, SETITEMS, ADDITEMS: pop back to the mark and apply the items
 * to the object just below it. */
static int op_marked_items(struct vm *vm,
			   int (*apply)(struct vm *, struct pk_node *, struct pk_node **, size_t))
{
	size_t start;

	if (pop_mark(vm, &start))
		return vm->rc;
	if (start <= fence(vm) || start == 0)
		return underflow(vm);
	if (apply(vm, vm->stack[start - 1], items_from(vm, start), vm->sp - start))
		return vm->rc;
	vm->sp = start;
	return 0;
}

static int op_build(struct vm *vm)
{
	struct pk_node *state, *inst;

	if (pop(vm, &state) || peek(vm, &inst))
		return vm->rc;
	switch (inst->kind) {
	case PK_CALL:
	case PK_NEWOBJ:
	case PK_TENSOR:
		break;
	case PK_DICT:
		if (inst->cls)
			break;
		/* fall through */
	default:
		if (state->kind == PK_NONE)
			return 0;    /* Python does nothing with a None state */
		return fail(vm, "cannot BUILD a %s", kind_name(inst->kind));
	}
	if (inst->state)
		return fail(vm, "a second BUILD on the same object is not supported");
	mutating(vm, inst);
	if (adopt(vm, inst, state))
		return vm->rc;
	inst->state = state;
	return 0;
}

/* cls(*args) as REDUCE, INST and OBJ record it. */
static int push_call(struct vm *vm, struct pk_node *cls, struct pk_node *args)
{
	struct pk_node *n;

	if (pk_is_getattr(cls) && pk_getattr_is_member_lookup(args))
		vm->doc->getattr_member_calls++;
	else if (cls->kind == PK_CALL && pk_is_getattr(cls->cls))
		vm->doc->getattr_pushes++;  /* calling what getattr returned: never harmless */
	if (pk_global_is(cls, "collections", "OrderedDict") && args->n == 0) {
		n = node_new(vm, PK_DICT);
	} else {
		n = node_new(vm, PK_CALL);
	}
	if (!n)
		return vm->rc;
	n->cls = cls;
	n->args = args;
	if (adopt(vm, n, cls) || adopt(vm, n, args))
		return vm->rc;
	if (n->kind == PK_CALL && pk_torch_tensor(vm->doc, n))
		return oom(vm);
	return push(vm, n);
}

static int op_reduce(struct vm *vm)
{
	struct pk_node *args, *cls;

	if (pop(vm, &args) || pop(vm, &cls))
		return vm->rc;
	if (args->kind != PK_TUPLE)
		return fail(vm, "REDUCE argument must be a tuple, not %s", kind_name(args->kind));
	return push_call(vm, cls, args);
}

static int op_newobj(struct vm *vm, int ex)
{
	struct pk_node *cls, *args, *kwargs = NULL, *n;

	if (ex && pop(vm, &kwargs))
		return vm->rc;
	if (pop(vm, &args) || pop(vm, &cls))
		return vm->rc;
	if (args->kind != PK_TUPLE)
		return fail(vm, "NEWOBJ expected an arg tuple, not %s", kind_name(args->kind));
	if (kwargs && kwargs->kind != PK_DICT)
		return fail(vm, "NEWOBJ_EX kwargs argument should be a dict, not %s",
			    kind_name(kwargs->kind));
	n = node_new(vm, PK_NEWOBJ);
	if (!n)
		return vm->rc;
	n->cls = cls;
	n->args = args;
	n->kwargs = kwargs;
	if (adopt(vm, n, cls) || adopt(vm, n, args) || (kwargs && adopt(vm, n, kwargs)))
		return vm->rc;
	return push(vm, n);
}

static int check_name(struct vm *vm, const char *s, size_t len)
{
	if (memchr(s, '\0', len))
		return fail(vm, "NUL byte in a global name");
	return 0;
}

static int make_global(struct vm *vm, const char *module, size_t mlen, const char *name, size_t nlen,
		       struct pk_node **out)
{
	*out = NULL;
	if (check_name(vm, module, mlen) || check_name(vm, name, nlen))
		return vm->rc;
	*out = pk_doc_intern_global(vm->doc, module, mlen, name, nlen);
	return *out ? 0 : oom(vm);
}

/* The "module\nname\n" argument of GLOBAL and INST. */
static int read_global(struct vm *vm, struct pk_node **out)
{
	const char *module, *name;
	size_t mlen, nlen;

	*out = NULL;
	if (read_line(vm, &module, &mlen) || read_line(vm, &name, &nlen))
		return vm->rc;
	return make_global(vm, module, mlen, name, nlen, out);
}

static int op_global(struct vm *vm)
{
	struct pk_node *g;

	return read_global(vm, &g) ? vm->rc : push(vm, g);
}

static int op_stack_global(struct vm *vm)
{
	struct pk_node *name, *module, *g;

	if (pop(vm, &name) || pop(vm, &module))
		return vm->rc;
	if (name->kind != PK_STR || module->kind != PK_STR)
		return fail(vm, "STACK_GLOBAL requires str");
	if (make_global(vm, module->v.str.s, module->v.str.len, name->v.str.s, name->v.str.len, &g))
		return vm->rc;
	return push(vm, g);
}

static int op_inst(struct vm *vm)
{
	struct pk_node *cls, *args;
	size_t start;

	if (read_global(vm, &cls) || pop_mark(vm, &start))
		return vm->rc;
	args = node_seq(vm, PK_TUPLE, items_from(vm, start), vm->sp - start);
	if (!args)
		return vm->rc;
	vm->sp = start;
	return push_call(vm, cls, args);
}

static int op_obj(struct vm *vm)
{
	struct pk_node *cls, *args;
	size_t start;

	if (pop_mark(vm, &start))
		return vm->rc;
	if (vm->sp - start < 1)
		return underflow(vm);
	cls = vm->stack[start];
	args = node_seq(vm, PK_TUPLE, items_from(vm, start + 1), vm->sp - start - 1);
	if (!args)
		return vm->rc;
	vm->sp = start;
	return push_call(vm, cls, args);
}

static int push_persid(struct vm *vm, struct pk_node *pid)
{
	struct pk_node *n = node_new(vm, PK_PERSID);

	if (!n)
		return vm->rc;
	n->args = pid;
	if (adopt(vm, n, pid))
		return vm->rc;
	if (pk_torch_storage(vm->doc, n))
		return oom(vm);
	return push(vm, n);
}

static int push_shared(struct vm *vm, struct pk_node **slot, enum pk_kind kind, int b)
{
	struct pk_node *n = shared_leaf(vm, slot, kind);

	if (!n)
		return vm->rc;
	if (kind == PK_BOOL)
		n->v.b = b;
	return push(vm, n);
}

/* --- scalar opcodes ---------------------------------------------------------- */

static int op_text_int(struct vm *vm, int is_long)
{
	const char *s, *why;
	struct pk_node *n;
	size_t len;

	if (read_line(vm, &s, &len))
		return vm->rc;
	if (!is_long && len == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1')) {
		/* Protocol 0 spells booleans I00 / I01. */
		return s[1] == '1' ? push_shared(vm, &vm->true_, PK_BOOL, 1)
				   : push_shared(vm, &vm->false_, PK_BOOL, 0);
	}
	if (is_long && len && s[len - 1] == 'L')
		len--;
	if (pk_text_integer(s, len, &vm->scratch, &why))
		return fail(vm, "%s", why);
	n = node_integer(vm, vm->scratch.data, vm->scratch.len);
	return n ? push(vm, n) : vm->rc;
}

static int op_text_float(struct vm *vm)
{
	const char *s, *why;
	struct pk_node *n;
	size_t len;
	double f;

	if (read_line(vm, &s, &len))
		return vm->rc;
	if (pk_text_float(s, len, &f, &why))
		return fail(vm, "%s", why);
	n = node_new(vm, PK_FLOAT);
	if (!n)
		return vm->rc;
	n->v.f = f;
	return push(vm, n);
}

static int op_binfloat(struct vm *vm)
{
	struct pk_node *n;
	uint64_t bits = 0;
	double f;

	if (need(vm, 8))
		return vm->rc;
	for (int i = 0; i < 8; i++)
		bits = bits << 8 | vm->p[i];
	vm->p += 8;
	memcpy(&f, &bits, sizeof(f));
	n = node_new(vm, PK_FLOAT);
	if (!n)
		return vm->rc;
	n->v.f = f;
	return push(vm, n);
}

static int op_binint(struct vm *vm, size_t width)
{
	struct pk_node *n;
	int64_t v;

	if (need(vm, width))
		return vm->rc;
	switch (width) {
	case 1: v = vm->p[0]; break;
	case 2: v = ck_le16(vm->p); break;
	default: v = (int32_t)ck_le32(vm->p); break;
	}
	vm->p += width;
	n = node_int(vm, v);
	return n ? push(vm, n) : vm->rc;
}

static int op_long_bytes(struct vm *vm, size_t width)
{
	struct pk_node *n;
	size_t len;

	if (read_length(vm, width, 1, &len))
		return vm->rc;
	n = node_integer(vm, vm->p, len);
	vm->p += len;
	return n ? push(vm, n) : vm->rc;
}

static int op_counted(struct vm *vm, enum pk_kind kind, size_t width, int is_signed, int py2str)
{
	struct pk_node *n;
	size_t len;

	if (read_length(vm, width, is_signed, &len))
		return vm->rc;
	n = py2str ? node_py2str(vm, vm->p, len) : node_bytes(vm, kind, vm->p, len);
	vm->p += len;
	return n ? push(vm, n) : vm->rc;
}

static int op_text_string(struct vm *vm, int unicode)
{
	const char *s, *why;
	struct pk_node *n;
	size_t len;

	if (read_line(vm, &s, &len))
		return vm->rc;
	if (unicode ? pk_text_unicode(s, len, &vm->scratch, &why)
		    : pk_text_string(s, len, &vm->scratch, &why))
		return fail(vm, "%s", why);
	n = unicode ? node_bytes(vm, PK_STR, vm->scratch.data, vm->scratch.len)
		    : node_py2str(vm, vm->scratch.data, vm->scratch.len);
	return n ? push(vm, n) : vm->rc;
}

/* --- the loop ------------------------------------------------------------------ */

static int step(struct vm *vm)
{
	struct pk_node *a, *b;
	size_t start, len;
	uint64_t idx = 0;

	switch (vm->op) {
	case PK_OP_MARK:
		return push_mark(vm);
	case PK_OP_POP:
		/* An empty frame means the MARK itself is popped (as CPython does). */
		if (vm->nmarks && vm->marks[vm->nmarks - 1] == vm->sp) {
			vm->nmarks--;
			return 0;
		}
		return pop(vm, &a);
	case PK_OP_POP_MARK:
		if (pop_mark(vm, &start))
			return vm->rc;
		vm->sp = start;
		return 0;
	case PK_OP_DUP:
		return peek(vm, &a) ? vm->rc : push(vm, a);

	case PK_OP_NONE:
		return push_shared(vm, &vm->none, PK_NONE, 0);
	case PK_OP_NEWTRUE:
		return push_shared(vm, &vm->true_, PK_BOOL, 1);
	case PK_OP_NEWFALSE:
		return push_shared(vm, &vm->false_, PK_BOOL, 0);
	case PK_OP_INT:
		return op_text_int(vm, 0);
	case PK_OP_LONG:
		return op_text_int(vm, 1);
	case PK_OP_BININT:
		return op_binint(vm, 4);
	case PK_OP_BININT1:
		return op_binint(vm, 1);
	case PK_OP_BININT2:
		return op_binint(vm, 2);
	case PK_OP_LONG1:
		return op_long_bytes(vm, 1);
	case PK_OP_LONG4:
		return op_long_bytes(vm, 4);
	case PK_OP_FLOAT:
		return op_text_float(vm);
	case PK_OP_BINFLOAT:
		return op_binfloat(vm);

	case PK_OP_STRING:
		return op_text_string(vm, 0);
	case PK_OP_UNICODE:
		return op_text_string(vm, 1);
	case PK_OP_BINSTRING:
		return op_counted(vm, PK_STR, 4, 1, 1);
	case PK_OP_SHORT_BINSTRING:
		return op_counted(vm, PK_STR, 1, 0, 1);
	case PK_OP_BINUNICODE:
		return op_counted(vm, PK_STR, 4, 0, 0);
	case PK_OP_SHORT_BINUNICODE:
		return op_counted(vm, PK_STR, 1, 0, 0);
	case PK_OP_BINUNICODE8:
		return op_counted(vm, PK_STR, 8, 0, 0);
	case PK_OP_BINBYTES:
		return op_counted(vm, PK_BYTES, 4, 0, 0);
	case PK_OP_SHORT_BINBYTES:
		return op_counted(vm, PK_BYTES, 1, 0, 0);
	case PK_OP_BINBYTES8:
		return op_counted(vm, PK_BYTES, 8, 0, 0);
	case PK_OP_BYTEARRAY8:
		if (op_counted(vm, PK_BYTES, 8, 0, 0))
			return vm->rc;
		vm->stack[vm->sp - 1]->flags |= PK_F_BYTEARRAY;
		return 0;

	case PK_OP_EMPTY_TUPLE:
		return push_shared(vm, &vm->empty_tuple, PK_TUPLE, 0);
	case PK_OP_TUPLE1:
	case PK_OP_TUPLE2:
	case PK_OP_TUPLE3:
		len = (size_t)(vm->op - PK_OP_TUPLE1) + 1;
		if (vm->sp - fence(vm) < len)
			return underflow(vm);
		a = node_seq(vm, PK_TUPLE, items_from(vm, vm->sp - len), len);
		if (!a)
			return vm->rc;
		vm->sp -= len;
		return push(vm, a);
	case PK_OP_TUPLE:
	case PK_OP_LIST:
	case PK_OP_FROZENSET:
		if (pop_mark(vm, &start))
			return vm->rc;
		if (vm->op == PK_OP_FROZENSET) {
			a = node_new(vm, PK_FROZENSET);
			if (!a)
				return vm->rc;
			for (size_t i = start; i < vm->sp; i++)
				if (adopt(vm, a, vm->stack[i]) || pk_set_add(vm->doc, a, vm->stack[i]))
					return vm->rc ? vm->rc : oom(vm);
		} else {
			a = node_seq(vm, vm->op == PK_OP_LIST ? PK_LIST : PK_TUPLE,
				     items_from(vm, start), vm->sp - start);
			if (!a)
				return vm->rc;
		}
		vm->sp = start;
		return push(vm, a);
	case PK_OP_DICT:
		if (pop_mark(vm, &start))
			return vm->rc;
		if ((vm->sp - start) % 2)
			return fail(vm, "odd number of items for DICT");
		a = node_new(vm, PK_DICT);
		if (!a || set_items(vm, a, items_from(vm, start), vm->sp - start))
			return vm->rc;
		vm->sp = start;
		return push(vm, a);
	case PK_OP_EMPTY_LIST:
		a = node_new(vm, PK_LIST);
		return a ? push(vm, a) : vm->rc;
	case PK_OP_EMPTY_DICT:
		a = node_new(vm, PK_DICT);
		return a ? push(vm, a) : vm->rc;
	case PK_OP_EMPTY_SET:
		a = node_new(vm, PK_SET);
		return a ? push(vm, a) : vm->rc;
	case PK_OP_APPEND:
		if (pop(vm, &b) || peek(vm, &a))
			return vm->rc;
		return append_items(vm, a, &b, 1);
	case PK_OP_APPENDS:
		return op_marked_items(vm, append_items);
	case PK_OP_SETITEM:
		if (vm->sp - fence(vm) < 3)
			return underflow(vm);
		a = vm->stack[vm->sp - 3];
		if (set_items(vm, a, items_from(vm, vm->sp - 2), 2))
			return vm->rc;
		vm->sp -= 2;
		return 0;
	case PK_OP_SETITEMS:
		return op_marked_items(vm, set_items);
	case PK_OP_ADDITEMS:
		return op_marked_items(vm, add_items);

	case PK_OP_GLOBAL:
		return op_global(vm);
	case PK_OP_STACK_GLOBAL:
		return op_stack_global(vm);
	case PK_OP_REDUCE:
		return op_reduce(vm);
	case PK_OP_NEWOBJ:
		return op_newobj(vm, 0);
	case PK_OP_NEWOBJ_EX:
		return op_newobj(vm, 1);
	case PK_OP_BUILD:
		return op_build(vm);
	case PK_OP_INST:
		return op_inst(vm);
	case PK_OP_OBJ:
		return op_obj(vm);
	case PK_OP_PERSID:
		{
			const char *s;

			if (read_line(vm, &s, &len))
				return vm->rc;
			for (size_t i = 0; i < len; i++)
				if ((unsigned char)s[i] >= 0x80)
					return fail(vm, "persistent IDs in protocol 0 must be ASCII strings");
			a = node_bytes(vm, PK_STR, s, len);
			return a ? push_persid(vm, a) : vm->rc;
		}
	case PK_OP_BINPERSID:
		return pop(vm, &a) ? vm->rc : push_persid(vm, a);

	case PK_OP_PUT:
		return text_index(vm, &idx) ? vm->rc : op_put(vm, idx);
	case PK_OP_BINPUT:
		return bin_index(vm, 1, &idx) ? vm->rc : op_put(vm, idx);
	case PK_OP_LONG_BINPUT:
		return bin_index(vm, 4, &idx) ? vm->rc : op_put(vm, idx);
	case PK_OP_MEMOIZE:
		return op_put(vm, vm->memo.len);
	case PK_OP_GET:
		return text_index(vm, &idx) ? vm->rc : op_get(vm, idx);
	case PK_OP_BINGET:
		return bin_index(vm, 1, &idx) ? vm->rc : op_get(vm, idx);
	case PK_OP_LONG_BINGET:
		return bin_index(vm, 4, &idx) ? vm->rc : op_get(vm, idx);

	case PK_OP_PROTO:
		if (need(vm, 1))
			return vm->rc;
		if (vm->p[0] > 5)
			return fail(vm, "unsupported pickle protocol: %d", vm->p[0]);
		vm->doc->protocol = vm->p[0];
		vm->p++;
		return 0;
	case PK_OP_FRAME:
		/* Frames only group opcodes for buffered reading. */
		if (need(vm, 8))
			return vm->rc;
		if (ck_le64(vm->p) > left(vm) - 8)
			return fail(vm, "frame of %llu bytes exceeds the %zu bytes left",
				    (unsigned long long)ck_le64(vm->p), left(vm) - 8);
		vm->p += 8;
		return 0;
	case PK_OP_EXT1:
	case PK_OP_EXT2:
	case PK_OP_EXT4:
		return fail(vm, "extension registry codes are not supported");
	case PK_OP_NEXT_BUFFER:
	case PK_OP_READONLY_BUFFER:
		return fail(vm, "out-of-band buffers are not supported");
	default:
		return fail(vm, "invalid load key 0x%02x", vm->op);
	}
}

static int run(struct vm *vm)
{
	struct pk_node *root;

	while (vm->p < vm->end) {
		vm->op_off = (size_t)(vm->p - vm->base);
		vm->op = *vm->p++;
		if (vm->op == PK_OP_STOP) {
			if (pop(vm, &root))
				return vm->rc;
			if (vm->heights_stale) {
				int rc = pk_tree_check_height(root, vm->max_depth);

				if (rc == -ENOMEM)
					return oom(vm);
				if (rc)
					return fail(vm, "nesting deeper than %zu levels", vm->max_depth);
			}
			vm->doc->root = root;
			vm->doc->length = vm->op_off + 1;
			return 0;
		}
		if (step(vm))
			return vm->rc;
	}
	vm->op_off = (size_t)(vm->p - vm->base);
	return vm->rc = ck_fail(vm->err, EINVAL,
				"pickle: truncated at offset %zu: no STOP opcode", vm->op_off);
}

int pk_parse(const uint8_t *data, size_t len, const struct pk_limits *lim,
	     struct pk_doc **out, struct ck_error *err)
{
	struct vm vm;
	int rc;

	memset(&vm, 0, sizeof(vm));
	*out = NULL;
	vm.base = vm.p = data;
	vm.end = data + len;
	vm.err = err;
	vm.max_depth = lim && lim->max_depth ? lim->max_depth : PK_DEFAULT_DEPTH;
	vm.max_nodes = lim && lim->max_nodes ? lim->max_nodes : PK_DEFAULT_NODES;
	vm.max_memo = lim && lim->max_memo ? lim->max_memo : PK_DEFAULT_MEMO;
	if (vm.max_nodes > UINT32_MAX - 1)
		vm.max_nodes = UINT32_MAX - 1;
	if (vm.max_depth > UINT32_MAX - 1)
		vm.max_depth = UINT32_MAX - 1;
	vm.doc = pk_doc_new();
	if (!vm.doc)
		return ck_fail(err, ENOMEM, "pickle: out of memory");
	rc = run(&vm);
	free(vm.stack);
	free(vm.marks);
	pk_memo_free(&vm.memo);
	ck_buf_free(&vm.scratch);
	if (rc) {
		pk_doc_free(vm.doc);
		return rc;
	}
	*out = vm.doc;
	return 0;
}
