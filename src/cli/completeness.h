/* Whether each checkpoint of a series is complete: it holds every file and
 * every tensor that an earlier checkpoint of the series has.  A partial
 * save (only some layers written at a step) is "partial"; the mount shows
 * it complete by filling in the rest from earlier steps. */
#ifndef CKPTFS_CLI_COMPLETENESS_H
#define CKPTFS_CLI_COMPLETENESS_H

#include <stddef.h>

#include "ckptfs/store.h"

struct cli_ckpt_summary {
	size_t files, bad, tensors;
	int complete;
};

struct cli_completeness;

int cli_completeness_new(struct cli_completeness **out);
/* Feed the checkpoints of one series in ascending step order. */
int cli_completeness_add(struct cli_completeness *c, struct ck_store *st, const struct ck_ckpt_info *ck,
			 struct cli_ckpt_summary *out);
void cli_completeness_free(struct cli_completeness *c);

#endif
