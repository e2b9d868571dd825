/* Layer rules: which layer a logical tensor belongs to.
 *
 * A rule is a POSIX extended regex and a template; the first rule whose
 * regex matches the tensor name gives the layer, with \1..\9 replaced by
 * the groups.  Built-in rules cover HF Llama/Qwen/Mistral/GPT-2/NeoX/OPT/
 * Falcon/BERT names and Megatron names; user rules (STORE/layers.conf:
 * lines "REGEX<whitespace>TEMPLATE", '#' comments) come first.
 */
#ifndef CKPTFS_LAYERS_H
#define CKPTFS_LAYERS_H

#include <stddef.h>
#include "ckptfs/error.h"

struct ck_layer_rules;

/* Built-in rules only. */
int ck_layer_rules_default(struct ck_layer_rules **out, struct ck_error *err);
/* User rules from a file prepended to the built-ins; a missing file is not an error. */
int ck_layer_rules_load(const char *path, struct ck_layer_rules **out, struct ck_error *err);
/* Adds one rule in front of the others. */
int ck_layer_rules_add(struct ck_layer_rules *r, const char *regex, const char *tmpl, struct ck_error *err);
void ck_layer_rules_free(struct ck_layer_rules *r);
/* Rules in the order they are tried: the user's (from layers.conf or
 * ck_layer_rules_add) first, then the built-ins. */
size_t ck_layer_rules_count(const struct ck_layer_rules *r);
/* The i-th rule: 0, or -ENOENT past the end.  *user is set to 1 for user rules (user may be NULL). */
int ck_layer_rule_at(const struct ck_layer_rules *r, size_t i, const char **regex, const char **tmpl, int *user);
/* Checks a rule (regex compiles, template refers only to existing groups and
 * holds no blanks or '/') and appends it as a line to the layers.conf at path. */
int ck_layer_rules_append_file(const char *path, const char *regex, const char *tmpl, struct ck_error *err);
/* Writes the layer of name into out ("other" when no rule matches).  0 or -ENOSPC. */
int ck_layer_of(const struct ck_layer_rules *r, const char *name, char *out, size_t size);

#endif
