/* Process-wide malloc tuning for ckptfs and ckptctl. */
#ifndef CKPTFS_MEMTUNE_H
#define CKPTFS_MEMTUNE_H

/* Keeps freed chunk-sized blocks (up to 1 MiB and a little more: decoded
 * chunks, cache entries, codec buffers) in the heap for reuse, instead of
 * glibc's default of giving blocks above its mmap threshold back to the
 * kernel: every fresh block is a page fault per 4 KiB when first written,
 * which on virtual machines costs more than the copy that writes it
 * (docs/bench.md, "Measurements without a script").  Call first thing in
 * main(). */
void ck_tune_malloc(void);

/* Gives the heap's free memory back to the kernel (malloc_trim), after a
 * one-off burst that ck_tune_malloc's thresholds would otherwise keep: a
 * DCP .metadata of 80,000 chunks parses into some 300 MB of nodes that are
 * freed once its composite is built.  Any thread; costs a walk of the
 * heaps. */
void ck_release_memory(void);

#endif
