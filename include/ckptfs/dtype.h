/* Tensor element types and their names in torch pickles and safetensors. */
#ifndef CKPTFS_DTYPE_H
#define CKPTFS_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#define CK_MAX_DIMS 16

enum ck_dtype {
	CK_DT_INVALID = 0,
	CK_DT_BOOL,
	CK_DT_U8,
	CK_DT_I8,
	CK_DT_I16,
	CK_DT_U16,
	CK_DT_F16,
	CK_DT_BF16,
	CK_DT_I32,
	CK_DT_U32,
	CK_DT_F32,
	CK_DT_F64,
	CK_DT_I64,
	CK_DT_U64,
	CK_DT_C32,   /* torch.complex32 (chalf) */
	CK_DT_C64,   /* torch.complex64 */
	CK_DT_C128,  /* torch.complex128 */
	CK_DT_F8_E5M2,
	CK_DT_F8_E4M3,      /* torch float8_e4m3fn / safetensors F8_E4M3 */
	CK_DT_F8_E5M2FNUZ,
	CK_DT_F8_E4M3FNUZ,
	CK_DT_F8_E8M0,
	CK_DT_QINT8,
	CK_DT_QUINT8,
	CK_DT_QINT32,
	CK_DT_UNTYPED,   /* torch.UntypedStorage: bytes */
	CK_DT__COUNT
};

/* Bytes per element (1 for UNTYPED), 0 for INVALID. */
size_t ck_dtype_size(enum ck_dtype dt);
/* Short lowercase name used in listings and JSON: "float32", "bfloat16"... */
const char *ck_dtype_name(enum ck_dtype dt);
/* torch legacy storage class ("FloatStorage"), or NULL when the dtype has none. */
const char *ck_dtype_torch_storage(enum ck_dtype dt);
enum ck_dtype ck_dtype_from_torch_storage(const char *cls);
/* torch dtype attribute name as in GLOBAL 'torch float8_e4m3fn' ("float32"...). */
const char *ck_dtype_torch_name(enum ck_dtype dt);
enum ck_dtype ck_dtype_from_torch_name(const char *name);
/* safetensors dtype string ("F32"), or NULL when safetensors has none. */
const char *ck_dtype_safetensors(enum ck_dtype dt);
enum ck_dtype ck_dtype_from_safetensors(const char *name);
/* Rank of a dtype in the safetensors enum order (used to sort tensors), -1 if none. */
int ck_dtype_safetensors_rank(enum ck_dtype dt);

#endif
