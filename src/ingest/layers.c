/* Layer rules: regex + template pairs that name the layer of a tensor.
 *
 * Built-in rules match at '.' boundaries anywhere in the name, not only at
 * its start, so the same rule serves "model.layers.3.mlp.up_proj.weight",
 * a state dict nested under a key ("model_state_dict.layers.3.w") and
 * FQN-keyed optimizer state ("state.model.layers.3.mlp.up_proj.weight.exp_avg").
 * Order matters: optimizer entries first, then numbered blocks, then the
 * named parts outside the blocks (embeddings, head, final norm).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/layers.h"

struct layer_rule {
	char *regex;
	char *tmpl;
	regex_t re;
	int user;
};

struct ck_layer_rules {
	struct layer_rule *v;
	size_t n, cap;
	size_t nuser;       /* user rules occupy v[0..nuser) */
};

#define B "(^|\\.)"       /* start of a name segment: group 1 of every built-in */
#define E "(\\.|$)"       /* end of a name segment */

static const char *const builtin_rules[][2] = {
	/* torch optimizer state_dict: {'state': {index: {...}}, 'param_groups': [...]},
	 * DeepSpeed ZeRO partitions of the fp32 master weights. */
	{ B "state\\.[0-9]+" E, "optimizer" },
	{ B "param_groups" E, "optimizer" },
	{ B "(base_optimizer_state|fp32_flat_groups|single_partition_of_fp32_groups)" E, "optimizer" },
	/* Numbered blocks: HF Llama/Qwen/Mistral/NeoX/OPT model(.decoder).layers.N,
	 * GPT-2/Falcon/BLOOM transformer.h.N, BERT encoder.layer.N, Megatron
	 * decoder.layers.N / language_model.encoder.layers.N, plain blocks.N. */
	{ B "(layers|layer|h|blocks|block)\\.([0-9]+)" E, "layers.\\3" },
	/* Embeddings: embed_tokens/embed_positions (Llama, OPT), wte/wpe (GPT-2),
	 * embed_in (NeoX), word_embeddings (Falcon, BLOOM, Megatron), tok_embeddings
	 * (Meta Llama), Megatron's embedding.*, BERT/Mamba embeddings.* */
	{ B "(embed_tokens|embed_positions|embed_in|wte|wpe|tok_embeddings|word_embeddings|"
	    "word_embeddings_layernorm|position_embeddings|token_type_embeddings|embeddings|embedding)" E,
	  "embed" },
	/* LM head: lm_head (HF), embed_out (NeoX), output_layer (Megatron), output (Meta Llama). */
	{ B "(lm_head|embed_out|output_layer)" E, "head" },
	{ B "output\\.(weight|bias)$", "head" },
	/* Final norm: norm (Llama), ln_f (GPT-2, Falcon, BLOOM), final_layer_norm
	 * (NeoX, OPT), final_layernorm / final_norm (Megatron), norm_f (Mamba). */
	{ B "(norm|ln_f|final_layer_norm|final_layernorm|final_norm|norm_f)" E, "norm" },
};

#undef B
#undef E

#define NBUILTIN (sizeof(builtin_rules) / sizeof(builtin_rules[0]))

static void rule_free(struct layer_rule *r)
{
	regfree(&r->re);
	free(r->regex);
	free(r->tmpl);
}

/* Highest \N a template refers to; -1 if it ends in a lone backslash. */
static int tmpl_max_group(const char *t)
{
	int max = 0;

	for (; *t; t++) {
		if (*t != '\\')
			continue;
		t++;
		if (!*t)
			return -1;
		if (*t >= '1' && *t <= '9' && *t - '0' > max)
			max = *t - '0';
	}
	return max;
}

static int check_tmpl(const char *regex, const char *tmpl, size_t nsub, struct ck_error *err)
{
	const char *p;
	int max;

	if (!*tmpl)
		return ck_fail(err, EINVAL, "layer rule '%s': empty template", regex);
	for (p = tmpl; *p; p++) {
		if (isspace((unsigned char)*p) || *p == '/')
			return ck_fail(err, EINVAL, "layer rule '%s': template '%s' may not contain spaces or '/'",
				       regex, tmpl);
	}
	max = tmpl_max_group(tmpl);
	if (max < 0)
		return ck_fail(err, EINVAL, "layer rule '%s': template '%s' ends in a lone backslash", regex, tmpl);
	if ((size_t)max > nsub)
		return ck_fail(err, EINVAL, "layer rule '%s': template '%s' refers to group \\%d, the regex has %zu",
			       regex, tmpl, max, nsub);
	return 0;
}

static int insert_rule(struct ck_layer_rules *r, size_t pos, const char *regex, const char *tmpl,
		       int user, struct ck_error *err)
{
	struct layer_rule nr = { 0 };
	char msg[256];
	int rc;

	rc = regcomp(&nr.re, regex, REG_EXTENDED);
	if (rc != 0) {
		regerror(rc, &nr.re, msg, sizeof(msg));
		return ck_fail(err, EINVAL, "layer rule '%s': %s", regex, msg);
	}
	rc = check_tmpl(regex, tmpl, nr.re.re_nsub, err);
	if (rc < 0) {
		regfree(&nr.re);
		return rc;
	}
	nr.regex = strdup(regex);
	nr.tmpl = strdup(tmpl);
	nr.user = user;
	if (!nr.regex || !nr.tmpl)
		goto nomem;
	if (r->n == r->cap) {
		struct layer_rule *v = ck_grow(r->v, &r->cap, sizeof(*v), 16);

		if (!v)
			goto nomem;
		r->v = v;
	}
	memmove(&r->v[pos + 1], &r->v[pos], (r->n - pos) * sizeof(*r->v));
	r->v[pos] = nr;
	r->n++;
	if (user)
		r->nuser++;
	return 0;
nomem:
	rule_free(&nr);
	return ck_fail(err, ENOMEM, "out of memory");
}

int ck_layer_rules_default(struct ck_layer_rules **out, struct ck_error *err)
{
	struct ck_layer_rules *r = calloc(1, sizeof(*r));
	size_t i;
	int rc;

	if (!r)
		return ck_fail(err, ENOMEM, "out of memory");
	for (i = 0; i < NBUILTIN; i++) {
		rc = insert_rule(r, r->n, builtin_rules[i][0], builtin_rules[i][1], 0, err);
		if (rc < 0) {
			ck_layer_rules_free(r);
			return rc;
		}
	}
	*out = r;
	return 0;
}

/* Splits a layers.conf line in place: REGEX is everything up to the last
 * run of blanks (so a regex may contain spaces), TEMPLATE the rest.
 * Returns 0 for a rule, 1 for a blank or comment line, -1 if malformed. */
static int split_line(char *line, char **regex, char **tmpl)
{
	char *end = line + strlen(line);
	char *t;

	while (end > line && isspace((unsigned char)end[-1]))
		*--end = '\0';
	while (isspace((unsigned char)*line))
		line++;
	if (!*line || *line == '#')
		return 1;
	t = end;
	while (t > line && !isspace((unsigned char)t[-1]))
		t--;
	if (t == line)
		return -1;
	*tmpl = t;
	while (t > line && isspace((unsigned char)t[-1]))
		*--t = '\0';
	*regex = line;
	return 0;
}

int ck_layer_rules_load(const char *path, struct ck_layer_rules **out, struct ck_error *err)
{
	struct ck_layer_rules *r;
	char *line = NULL, *regex, *tmpl;
	size_t cap = 0, lineno = 0;
	FILE *f;
	int rc;

	rc = ck_layer_rules_default(&r, err);
	if (rc < 0)
		return rc;
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT) {
			*out = r;
			return 0;
		}
		rc = ck_fail(err, errno, "%s: %s", path, strerror(errno));
		ck_layer_rules_free(r);
		return rc;
	}
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		rc = split_line(line, &regex, &tmpl);
		if (rc == 1)
			continue;
		if (rc < 0) {
			rc = ck_fail(err, EINVAL, "%s:%zu: expected REGEX TEMPLATE", path, lineno);
			goto fail;
		}
		rc = insert_rule(r, r->nuser, regex, tmpl, 1, err);
		if (rc < 0) {
			struct ck_error why = *err;

			ck_fail(err, -rc, "%s:%zu: %s", path, lineno, why.msg);
			goto fail;
		}
	}
	if (ferror(f)) {
		rc = ck_fail(err, EIO, "%s: read error", path);
		goto fail;
	}
	free(line);
	fclose(f);
	*out = r;
	return 0;
fail:
	free(line);
	fclose(f);
	ck_layer_rules_free(r);
	return rc;
}

int ck_layer_rules_add(struct ck_layer_rules *r, const char *regex, const char *tmpl, struct ck_error *err)
{
	return insert_rule(r, 0, regex, tmpl, 1, err);
}

int ck_layer_rules_append_file(const char *path, const char *regex, const char *tmpl, struct ck_error *err)
{
	struct ck_layer_rules *probe;
	FILE *f;
	int rc;

	/* Validate with the same code that will load it back. */
	rc = ck_layer_rules_default(&probe, err);
	if (rc < 0)
		return rc;
	rc = ck_layer_rules_add(probe, regex, tmpl, err);
	ck_layer_rules_free(probe);
	if (rc < 0)
		return rc;
	if (strchr(regex, '\n') || regex[0] == '#' || isspace((unsigned char)regex[0]) ||
	    isspace((unsigned char)regex[strlen(regex) - 1]))
		return ck_fail(err, EINVAL, "layer rule '%s': a regex may not start with '#' or a blank, "
			       "end in a blank or span lines", regex);
	f = fopen(path, "ae");
	if (!f)
		return ck_fail(err, errno, "%s: %s", path, strerror(errno));
	fprintf(f, "%s\t%s\n", regex, tmpl);
	if (fclose(f) != 0)
		return ck_fail(err, errno ? errno : EIO, "%s: %s", path, strerror(errno ? errno : EIO));
	return 0;
}

void ck_layer_rules_free(struct ck_layer_rules *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->n; i++)
		rule_free(&r->v[i]);
	free(r->v);
	free(r);
}

size_t ck_layer_rules_count(const struct ck_layer_rules *r)
{
	return r->n;
}

int ck_layer_rule_at(const struct ck_layer_rules *r, size_t i, const char **regex, const char **tmpl, int *user)
{
	if (i >= r->n)
		return -ENOENT;
	*regex = r->v[i].regex;
	*tmpl = r->v[i].tmpl;
	if (user)
		*user = r->v[i].user;
	return 0;
}

/* Writes tmpl with \1..\9 replaced by the groups of m. */
static int expand(const char *tmpl, const char *name, const regmatch_t *m, char *out, size_t size)
{
	size_t len = 0;
	const char *p;

	for (p = tmpl; *p; p++) {
		const char *s = p;
		size_t n = 1;

		if (*p == '\\' && p[1]) {
			p++;
			if (*p >= '1' && *p <= '9') {
				const regmatch_t *g = &m[*p - '0'];

				s = name + g->rm_so;
				n = g->rm_so >= 0 ? (size_t)(g->rm_eo - g->rm_so) : 0;
			} else {
				s = p;
			}
		}
		if (len + n >= size)
			return -ENOSPC;
		memcpy(out + len, s, n);
		len += n;
	}
	out[len] = '\0';
	return 0;
}

int ck_layer_of(const struct ck_layer_rules *r, const char *name, char *out, size_t size)
{
	regmatch_t m[10];
	size_t i;

	if (!size)
		return -ENOSPC;
	for (i = 0; r && i < r->n; i++) {
		if (regexec(&r->v[i].re, name, 10, m, 0) == 0)
			return expand(r->v[i].tmpl, name, m, out, size);
	}
	if (size < sizeof("other"))
		return -ENOSPC;
	memcpy(out, "other", sizeof("other"));
	return 0;
}
