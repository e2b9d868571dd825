/* A protocol-2 pickle assembler for the store tests: builds the opcode
 * streams torch.save writes (docs/formats.md §2) without torch, so tests can
 * make state trees of any shape, including hostile ones. */
#ifndef CKPTFS_T_STORE_PK_H
#define CKPTFS_T_STORE_PK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"

struct pk {
	struct ck_buf b;
	unsigned memo;       /* next BINPUT index */
	unsigned nstorage;   /* next storage key */
};

static inline void pka_op(struct pk *p, const char *bytes, size_t n)
{
	if (ck_buf_put(&p->b, bytes, n) < 0)
		abort();
}

static inline void pka_put(struct pk *p)
{
	uint8_t q[2] = { 'q', (uint8_t)p->memo++ };

	if (p->memo > 255)
		abort();
	pka_op(p, (const char *)q, 2);
}

static inline void pka_str(struct pk *p, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);

	pka_op(p, "X", 1);
	if (ck_buf_put_le32(&p->b, n) < 0)
		abort();
	pka_op(p, s, n);
	pka_put(p);
}

static inline void pka_global(struct pk *p, const char *module, const char *name)
{
	pka_op(p, "c", 1);
	pka_op(p, module, strlen(module));
	pka_op(p, "\n", 1);
	pka_op(p, name, strlen(name));
	pka_op(p, "\n", 1);
	pka_put(p);
}

static inline void pka_int1(struct pk *p, uint8_t v)
{
	char b[2] = { 'K', (char)v };

	pka_op(p, b, 2);
}

/* Ends both rebuild calls the way torch.save does: pushes the last
 * argument, OrderedDict() (no backward hooks), makes the argument tuple
 * from the MARK (TUPLE) and calls the rebuild function on it (REDUCE). */
static inline void pka_hooks_and_call(struct pk *p)
{
	pka_global(p, "collections", "OrderedDict");
	pka_op(p, ")R", 2);
	pka_put(p);
	pka_op(p, "t", 1);
	pka_put(p);
	pka_op(p, "R", 1);
	pka_put(p);
}

/* torch._utils._rebuild_tensor_v2 of a new float32 storage of numel
 * elements, viewed as rows x cols (cols = 0: 1-D of rows). */
static inline void pka_tensor(struct pk *p, unsigned rows, unsigned cols)
{
	char key[16];

	snprintf(key, sizeof(key), "%u", p->nstorage++);
	pka_global(p, "torch._utils", "_rebuild_tensor_v2");
	pka_op(p, "(", 1);                                   /* MARK: the argument tuple */
	pka_op(p, "(", 1);                                   /* MARK: the persistent id */
	pka_str(p, "storage");
	pka_global(p, "torch", "FloatStorage");
	pka_str(p, key);
	pka_str(p, "cpu");
	pka_int1(p, (uint8_t)(rows * (cols ? cols : 1)));
	pka_op(p, "t", 1);
	pka_put(p);
	pka_op(p, "Q", 1);                                   /* BINPERSID */
	pka_int1(p, 0);                                   /* storage offset */
	if (cols) {
		pka_int1(p, (uint8_t)rows);
		pka_int1(p, (uint8_t)cols);
		pka_op(p, "\x86", 1);
		pka_put(p);
		pka_int1(p, (uint8_t)cols);
		pka_int1(p, 1);
		pka_op(p, "\x86", 1);
		pka_put(p);
	} else {
		pka_int1(p, (uint8_t)rows);
		pka_op(p, "\x85", 1);
		pka_put(p);
		pka_int1(p, 1);
		pka_op(p, "\x85", 1);
		pka_put(p);
	}
	pka_op(p, "\x89", 1);                                /* requires_grad False */
	pka_hooks_and_call(p);
}

/* nn.Parameter: torch._utils._rebuild_parameter(tensor, True, OrderedDict()) */
static inline void pka_parameter(struct pk *p, unsigned rows, unsigned cols)
{
	pka_global(p, "torch._utils", "_rebuild_parameter");
	pka_op(p, "(", 1);
	pka_tensor(p, rows, cols);
	pka_op(p, "\x88", 1);
	pka_hooks_and_call(p);
}

#endif
