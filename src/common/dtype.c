/* Element types and their spellings in torch and safetensors. */
#include "config.h"

#include <string.h>

#include "ckptfs/dtype.h"

struct dtype_desc {
	const char *name;        /* ckptfs / torch attribute name */
	size_t size;
	const char *storage;     /* torch legacy storage class */
	const char *st;          /* safetensors name */
	int st_rank;             /* position in the safetensors Dtype enum */
};

/* safetensors enum order: BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3,
 * F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64,
 * F64, I64, U64 (docs/formats.md §3.2). */
static const struct dtype_desc dtypes[CK_DT__COUNT] = {
	[CK_DT_INVALID]     = { "invalid", 0, NULL, NULL, -1 },
	[CK_DT_BOOL]        = { "bool", 1, "BoolStorage", "BOOL", 0 },
	[CK_DT_U8]          = { "uint8", 1, "ByteStorage", "U8", 4 },
	[CK_DT_I8]          = { "int8", 1, "CharStorage", "I8", 5 },
	[CK_DT_F8_E5M2]     = { "float8_e5m2", 1, NULL, "F8_E5M2", 6 },
	[CK_DT_F8_E4M3]     = { "float8_e4m3fn", 1, NULL, "F8_E4M3", 7 },
	[CK_DT_F8_E8M0]     = { "float8_e8m0fnu", 1, NULL, "F8_E8M0", 8 },
	[CK_DT_F8_E4M3FNUZ] = { "float8_e4m3fnuz", 1, NULL, "F8_E4M3FNUZ", 9 },
	[CK_DT_F8_E5M2FNUZ] = { "float8_e5m2fnuz", 1, NULL, "F8_E5M2FNUZ", 10 },
	[CK_DT_I16]         = { "int16", 2, "ShortStorage", "I16", 11 },
	[CK_DT_U16]         = { "uint16", 2, NULL, "U16", 12 },
	[CK_DT_F16]         = { "float16", 2, "HalfStorage", "F16", 13 },
	[CK_DT_BF16]        = { "bfloat16", 2, "BFloat16Storage", "BF16", 14 },
	[CK_DT_I32]         = { "int32", 4, "IntStorage", "I32", 15 },
	[CK_DT_U32]         = { "uint32", 4, NULL, "U32", 16 },
	[CK_DT_F32]         = { "float32", 4, "FloatStorage", "F32", 17 },
	[CK_DT_C64]         = { "complex64", 8, "ComplexFloatStorage", "C64", 18 },
	[CK_DT_F64]         = { "float64", 8, "DoubleStorage", "F64", 19 },
	[CK_DT_I64]         = { "int64", 8, "LongStorage", "I64", 20 },
	[CK_DT_U64]         = { "uint64", 8, NULL, "U64", 21 },
	[CK_DT_C32]         = { "complex32", 4, NULL, NULL, -1 },
	[CK_DT_C128]        = { "complex128", 16, "ComplexDoubleStorage", NULL, -1 },
	[CK_DT_QINT8]       = { "qint8", 1, "QInt8Storage", NULL, -1 },
	[CK_DT_QUINT8]      = { "quint8", 1, "QUInt8Storage", NULL, -1 },
	[CK_DT_QINT32]      = { "qint32", 4, "QInt32Storage", NULL, -1 },
	[CK_DT_UNTYPED]     = { "uint8", 1, "UntypedStorage", NULL, -1 },
};

static int valid(enum ck_dtype dt)
{
	return dt > CK_DT_INVALID && dt < CK_DT__COUNT;
}

size_t ck_dtype_size(enum ck_dtype dt)
{
	return valid(dt) ? dtypes[dt].size : 0;
}

const char *ck_dtype_name(enum ck_dtype dt)
{
	if (dt == CK_DT_UNTYPED)
		return "untyped";
	return valid(dt) ? dtypes[dt].name : "invalid";
}

const char *ck_dtype_torch_storage(enum ck_dtype dt)
{
	return valid(dt) ? dtypes[dt].storage : NULL;
}

enum ck_dtype ck_dtype_from_torch_storage(const char *cls)
{
	for (int i = 1; i < CK_DT__COUNT; i++)
		if (dtypes[i].storage && !strcmp(dtypes[i].storage, cls))
			return (enum ck_dtype)i;
	/* torch.storage.TypedStorage subclasses are also spelled with a "Typed" prefix. */
	return CK_DT_INVALID;
}

const char *ck_dtype_torch_name(enum ck_dtype dt)
{
	return valid(dt) && dt != CK_DT_UNTYPED ? dtypes[dt].name : NULL;
}

enum ck_dtype ck_dtype_from_torch_name(const char *name)
{
	static const struct { const char *alias; enum ck_dtype dt; } aliases[] = {
		{ "float", CK_DT_F32 }, { "double", CK_DT_F64 }, { "half", CK_DT_F16 },
		{ "long", CK_DT_I64 }, { "int", CK_DT_I32 }, { "short", CK_DT_I16 },
		{ "cfloat", CK_DT_C64 }, { "cdouble", CK_DT_C128 }, { "chalf", CK_DT_C32 },
	};

	for (int i = 1; i < CK_DT__COUNT; i++)
		if (i != CK_DT_UNTYPED && !strcmp(dtypes[i].name, name))
			return (enum ck_dtype)i;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(aliases[i].alias, name))
			return aliases[i].dt;
	return CK_DT_INVALID;
}

const char *ck_dtype_safetensors(enum ck_dtype dt)
{
	return valid(dt) ? dtypes[dt].st : NULL;
}

enum ck_dtype ck_dtype_from_safetensors(const char *name)
{
	for (int i = 1; i < CK_DT__COUNT; i++)
		if (dtypes[i].st && !strcmp(dtypes[i].st, name))
			return (enum ck_dtype)i;
	return CK_DT_INVALID;
}

int ck_dtype_safetensors_rank(enum ck_dtype dt)
{
	return valid(dt) ? dtypes[dt].st_rank : -1;
}
