/* Fuzz target: ck_recipe_parse.  Whatever it accepts is a complete recipe
 * (slices with models and ranges, a base, named weights with models);
 * whatever it refuses says why. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ckptfs/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ref(const struct ck_recipe_ref *ref)
{
	if (!ref->series || !ref->ckpt || !*ref->series || !*ref->ckpt || strchr(ref->ckpt, '/'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ck_error err = { "" };
	struct ck_recipe *r = NULL;
	unsigned line = 0;

	if (ck_recipe_parse((const char *)data, size, &r, &line, &err)) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	if (!r->nslices)
		abort();
	for (size_t i = 0; i < r->nslices; i++)
		check_ref(&r->slices[i].model);
	for (size_t i = 0; i < r->nweights; i++) {
		if (!r->weights[i].name)
			abort();
		check_ref(&r->weights[i].model);
	}
	check_ref(&r->base);
	ck_recipe_free(r);
	return 0;
}
