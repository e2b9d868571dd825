/* Kernel tuning that only root may do (tune.c).  Both log what they did
 * and never fail the mount: they are about speed, not correctness. */
#ifndef CKPTFS_FS_TUNE_H
#define CKPTFS_FS_TUNE_H

#include <sys/types.h>

/* Raises fs.pipe-max-size to at least min_kb (0: leave it). */
void ckfs_raise_pipe_max(unsigned min_kb);
/* Sets the read_ahead_kb of the mount's bdi (device dev) to kb (0: leave it). */
void ckfs_raise_readahead(dev_t dev, unsigned kb);

#endif
