/* Pickle opcodes of protocols 0-5 (CPython Lib/pickle.py), private to the
 * pickle module. */
#ifndef CKPTFS_PICKLE_OPS_H
#define CKPTFS_PICKLE_OPS_H

#include <stdint.h>

enum pk_opcode {
	PK_OP_MARK = '(',
	PK_OP_STOP = '.',
	PK_OP_POP = '0',
	PK_OP_POP_MARK = '1',
	PK_OP_DUP = '2',
	PK_OP_FLOAT = 'F',
	PK_OP_INT = 'I',
	PK_OP_BININT = 'J',
	PK_OP_BININT1 = 'K',
	PK_OP_LONG = 'L',
	PK_OP_BININT2 = 'M',
	PK_OP_NONE = 'N',
	PK_OP_PERSID = 'P',
	PK_OP_BINPERSID = 'Q',
	PK_OP_REDUCE = 'R',
	PK_OP_STRING = 'S',
	PK_OP_BINSTRING = 'T',
	PK_OP_SHORT_BINSTRING = 'U',
	PK_OP_UNICODE = 'V',
	PK_OP_BINUNICODE = 'X',
	PK_OP_APPEND = 'a',
	PK_OP_BUILD = 'b',
	PK_OP_GLOBAL = 'c',
	PK_OP_DICT = 'd',
	PK_OP_EMPTY_DICT = '}',
	PK_OP_APPENDS = 'e',
	PK_OP_GET = 'g',
	PK_OP_BINGET = 'h',
	PK_OP_INST = 'i',
	PK_OP_LONG_BINGET = 'j',
	PK_OP_LIST = 'l',
	PK_OP_EMPTY_LIST = ']',
	PK_OP_OBJ = 'o',
	PK_OP_PUT = 'p',
	PK_OP_BINPUT = 'q',
	PK_OP_LONG_BINPUT = 'r',
	PK_OP_SETITEM = 's',
	PK_OP_TUPLE = 't',
	PK_OP_EMPTY_TUPLE = ')',
	PK_OP_SETITEMS = 'u',
	PK_OP_BINFLOAT = 'G',
	/* protocol 2 */
	PK_OP_PROTO = 0x80,
	PK_OP_NEWOBJ = 0x81,
	PK_OP_EXT1 = 0x82,
	PK_OP_EXT2 = 0x83,
	PK_OP_EXT4 = 0x84,
	PK_OP_TUPLE1 = 0x85,
	PK_OP_TUPLE2 = 0x86,
	PK_OP_TUPLE3 = 0x87,
	PK_OP_NEWTRUE = 0x88,
	PK_OP_NEWFALSE = 0x89,
	PK_OP_LONG1 = 0x8a,
	PK_OP_LONG4 = 0x8b,
	/* protocol 3 */
	PK_OP_BINBYTES = 'B',
	PK_OP_SHORT_BINBYTES = 'C',
	/* protocol 4 */
	PK_OP_SHORT_BINUNICODE = 0x8c,
	PK_OP_BINUNICODE8 = 0x8d,
	PK_OP_BINBYTES8 = 0x8e,
	PK_OP_EMPTY_SET = 0x8f,
	PK_OP_ADDITEMS = 0x90,
	PK_OP_FROZENSET = 0x91,
	PK_OP_NEWOBJ_EX = 0x92,
	PK_OP_STACK_GLOBAL = 0x93,
	PK_OP_MEMOIZE = 0x94,
	PK_OP_FRAME = 0x95,
	/* protocol 5 */
	PK_OP_BYTEARRAY8 = 0x96,
	PK_OP_NEXT_BUFFER = 0x97,
	PK_OP_READONLY_BUFFER = 0x98,
};

/* "BINUNICODE", or "opcode 0xNN" for bytes that are no opcode. */
const char *pk_opcode_name(uint8_t op);

#endif
