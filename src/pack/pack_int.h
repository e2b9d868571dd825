/* Internals shared by the pack reader and writer. */
#ifndef CKPTFS_PACK_INT_H
#define CKPTFS_PACK_INT_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/fileio.h"
#include "ckptfs/pack.h"

/* The file header of a new pack: magic, version, CRC-32 of both. */
void ck_pack_file_header(uint8_t out[CK_PACK_HEADER]);

#endif
