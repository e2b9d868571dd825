/* Fuzz target: the lossy policies of a store (STORE/lossy.conf).
 *
 * Input: the file's text.  Whatever parses holds policies compaction can
 * apply (ck_lossy_policy_check), one per series, with valid series names;
 * anything else fails with a reason.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ckptfs/packstore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void need(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ck_error err = { "" };
	struct ck_lossy_policy_entry *v;
	size_t n;

	if (ck_lossy_policies_parse((const char *)data, size, &v, &n, &err) != 0) {
		need(err.msg[0] != '\0');
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		need(ck_lossy_policy_check(&v[i].p, NULL) == 0 && v[i].series[0] && !strchr(v[i].series, '/') &&
		     !strchr(v[i].series, '\n'));
		for (size_t j = 0; j < i; j++)
			need(strcmp(v[i].series, v[j].series) != 0);
	}
	ck_lossy_policies_free(v, n);
	return 0;
}
