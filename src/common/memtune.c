/* See include/ckptfs/memtune.h. */
#include "config.h"

#include <malloc.h>

#include "ckptfs/memtune.h"

/* Blocks below this come from the heap (the default threshold starts at
 * 128 KiB and only rises after a large free). */
#define MMAP_THRESHOLD (32 << 20)
/* Free memory at the top of a heap kept rather than returned. */
#define TRIM_THRESHOLD (64 << 20)

void ck_release_memory(void)
{
	(void)malloc_trim(0);
}

void ck_tune_malloc(void)
{
	/* Failure leaves glibc's defaults: slower, never wrong. */
	(void)mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
	(void)mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD);
}
