/* Names of pickle opcodes, for error messages. */
#include "config.h"

#include "pickle_ops.h"

#define N(op) [PK_OP_##op] = #op

static const char *const names[256] = {
	N(MARK), N(STOP), N(POP), N(POP_MARK), N(DUP), N(FLOAT), N(INT), N(BININT),
	N(BININT1), N(LONG), N(BININT2), N(NONE), N(PERSID), N(BINPERSID), N(REDUCE),
	N(STRING), N(BINSTRING), N(SHORT_BINSTRING), N(UNICODE), N(BINUNICODE), N(APPEND),
	N(BUILD), N(GLOBAL), N(DICT), N(EMPTY_DICT), N(APPENDS), N(GET), N(BINGET), N(INST),
	N(LONG_BINGET), N(LIST), N(EMPTY_LIST), N(OBJ), N(PUT), N(BINPUT), N(LONG_BINPUT),
	N(SETITEM), N(TUPLE), N(EMPTY_TUPLE), N(SETITEMS), N(BINFLOAT), N(PROTO), N(NEWOBJ),
	N(EXT1), N(EXT2), N(EXT4), N(TUPLE1), N(TUPLE2), N(TUPLE3), N(NEWTRUE), N(NEWFALSE),
	N(LONG1), N(LONG4), N(BINBYTES), N(SHORT_BINBYTES), N(SHORT_BINUNICODE),
	N(BINUNICODE8), N(BINBYTES8), N(EMPTY_SET), N(ADDITEMS), N(FROZENSET), N(NEWOBJ_EX),
	N(STACK_GLOBAL), N(MEMOIZE), N(FRAME), N(BYTEARRAY8), N(NEXT_BUFFER),
	N(READONLY_BUFFER),
};

/* "opcode 0xNN" for every byte value, built without locking or formatting. */
#define U4(h) "opcode 0x" #h "0", "opcode 0x" #h "1", "opcode 0x" #h "2", "opcode 0x" #h "3", \
	      "opcode 0x" #h "4", "opcode 0x" #h "5", "opcode 0x" #h "6", "opcode 0x" #h "7", \
	      "opcode 0x" #h "8", "opcode 0x" #h "9", "opcode 0x" #h "a", "opcode 0x" #h "b", \
	      "opcode 0x" #h "c", "opcode 0x" #h "d", "opcode 0x" #h "e", "opcode 0x" #h "f"

static const char *const unknown[256] = {
	U4(0), U4(1), U4(2), U4(3), U4(4), U4(5), U4(6), U4(7),
	U4(8), U4(9), U4(a), U4(b), U4(c), U4(d), U4(e), U4(f),
};

const char *pk_opcode_name(uint8_t op)
{
	return names[op] ? names[op] : unknown[op];
}
