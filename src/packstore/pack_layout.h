/* Private to src/packstore: cutting a file version into chunks (pack_layout.c). */
#ifndef CKPTFS_PACKSTORE_PACK_LAYOUT_H
#define CKPTFS_PACKSTORE_PACK_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/store.h"

struct ck_layout_chunk {
	uint64_t off;
	uint32_t len;
	unsigned elem;        /* element size: the storage's dtype, 1 between storages */
	const char *key;      /* the storage's key (borrowed), NULL between storages */
	const struct ck_storage_info *storage;   /* that storage (borrowed), or NULL */
	const char *ident;    /* what the storage holds, the same version after version:
			       * the name of its first tensor (torch storage keys are
			       * numbers in pickle order, which partial saves shift), else
			       * the key; between storages, the ident of the storage that
			       * follows (CK_LAYOUT_END after the last), so that the zip
			       * header before a tensor's bytes finds its previous
			       * version as a reference too (borrowed) */
	uint32_t index;       /* chunk number inside its storage; CK_LAYOUT_GAP + n
			       * for chunk n of the bytes before it */
};

#define CK_LAYOUT_GAP 0x80000000u
#define CK_LAYOUT_END "\x01end of file"

struct ck_layout_ref {
	const char *ident;
	uint32_t index;
	uint32_t pos;         /* into c[] */
};

struct ck_layout {
	struct ck_layout_chunk *c;
	size_t n, cap;
	struct ck_layout_ref *refs;   /* ck_layout_index */
	size_t nrefs;
};

/* Cuts [0, size) given the file's storages and tensors (for element
 * sizes); the layout borrows their key strings.  0 or -ENOMEM. */
int ck_layout_build(struct ck_layout *l, uint64_t size, const struct ck_storage_info *s, size_t ns,
		    const struct ck_tensor_info *t, size_t nt);
void ck_layout_clear(struct ck_layout *l);
/* Prepares ck_layout_find: 0 or -ENOMEM. */
int ck_layout_index(struct ck_layout *l);
/* The chunk that is number index of the storage holding ident, or -1. */
long ck_layout_find(const struct ck_layout *l, const char *ident, uint32_t index);

#endif
