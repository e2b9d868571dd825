/* Internal entry points of crc32.c, exposed so tests can check every code
 * path against the others whatever the CPU. */
#ifndef CKPTFS_FORMAT_CRC32_IMPL_H
#define CKPTFS_FORMAT_CRC32_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Portable slicing-by-16; same contract as ck_crc32(). */
uint32_t ck_crc32_tables(uint32_t crc, const void *p, size_t n);
/* Carry-less multiply folding (x86-64 PCLMULQDQ); returns 0 and leaves *crc
 * alone when the CPU lacks it.  Otherwise folds n & ~15 bytes (n >= 64)
 * into *crc and returns how many bytes it consumed. */
size_t ck_crc32_clmul(uint32_t *crc, const void *p, size_t n);

#endif
