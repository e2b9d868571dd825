/* Layer rules on tensor names of real model families, user rules from a
 * layers.conf in front of the built-ins, and malformed rules refused. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/layers.h"

static int failures;

static void expect(const struct ck_layer_rules *r, const char *name, const char *want)
{
	char out[128];
	int rc = ck_layer_of(r, name, out, sizeof(out));

	if (rc != 0 || strcmp(out, want) != 0) {
		printf("FAIL %s: rc %d layer '%s', want '%s'\n", name, rc, rc ? "" : out, want);
		failures++;
	}
}

static void builtins(const struct ck_layer_rules *r)
{
	/* HF Llama / Qwen2 / Mistral */
	expect(r, "model.embed_tokens.weight", "embed");
	expect(r, "model.layers.0.self_attn.q_proj.weight", "layers.0");
	expect(r, "model.layers.31.mlp.down_proj.weight", "layers.31");
	expect(r, "model.layers.7.input_layernorm.weight", "layers.7");
	expect(r, "model.layers.3.self_attn.q_proj.bias", "layers.3");
	expect(r, "model.norm.weight", "norm");
	expect(r, "lm_head.weight", "head");
	/* GPT-2 */
	expect(r, "transformer.wte.weight", "embed");
	expect(r, "transformer.wpe.weight", "embed");
	expect(r, "transformer.h.11.attn.c_attn.weight", "layers.11");
	expect(r, "transformer.h.0.ln_1.bias", "layers.0");
	expect(r, "transformer.ln_f.weight", "norm");
	/* GPT-NeoX / Pythia */
	expect(r, "gpt_neox.embed_in.weight", "embed");
	expect(r, "gpt_neox.layers.5.attention.query_key_value.weight", "layers.5");
	expect(r, "gpt_neox.final_layer_norm.weight", "norm");
	expect(r, "embed_out.weight", "head");
	/* OPT */
	expect(r, "model.decoder.embed_tokens.weight", "embed");
	expect(r, "model.decoder.embed_positions.weight", "embed");
	expect(r, "model.decoder.layers.2.fc1.weight", "layers.2");
	expect(r, "model.decoder.final_layer_norm.bias", "norm");
	/* Falcon / BLOOM */
	expect(r, "transformer.word_embeddings.weight", "embed");
	expect(r, "transformer.word_embeddings_layernorm.weight", "embed");
	expect(r, "transformer.h.23.self_attention.dense.weight", "layers.23");
	expect(r, "transformer.ln_f.bias", "norm");
	/* Megatron-Core and legacy Megatron */
	expect(r, "embedding.word_embeddings.weight", "embed");
	expect(r, "decoder.layers.4.self_attention.linear_qkv.weight", "layers.4");
	expect(r, "decoder.layers.4.mlp.experts.local_experts.1.linear_fc1.weight", "layers.4");
	expect(r, "decoder.final_layernorm.weight", "norm");
	expect(r, "output_layer.weight", "head");
	expect(r, "language_model.embedding.word_embeddings.weight", "embed");
	expect(r, "language_model.encoder.layers.9.mlp.dense_h_to_4h.weight", "layers.9");
	expect(r, "language_model.encoder.final_norm.weight", "norm");
	expect(r, "language_model.output_layer.weight", "head");
	/* BERT, Meta Llama originals, plain blocks */
	expect(r, "bert.encoder.layer.10.attention.self.query.weight", "layers.10");
	expect(r, "bert.embeddings.word_embeddings.weight", "embed");
	expect(r, "tok_embeddings.weight", "embed");
	expect(r, "layers.12.attention.wq.weight", "layers.12");
	expect(r, "norm.weight", "norm");
	expect(r, "output.weight", "head");
	expect(r, "blocks.3.attn.proj.weight", "layers.3");
	expect(r, "h.1.mlp.c_fc.weight", "layers.1");
	/* nested state dicts */
	expect(r, "model_state_dict.layers.2.weight", "layers.2");
	expect(r, "module.model.layers.1.mlp.gate_proj.weight", "layers.1");
	/* optimizer state */
	expect(r, "state.17.exp_avg", "optimizer");
	expect(r, "state.0.step", "optimizer");
	expect(r, "optimizer.state.3.exp_avg_sq", "optimizer");
	expect(r, "optimizer_state_dict.base_optimizer_state.state.0.exp_avg", "optimizer");
	expect(r, "optimizer_state_dict.single_partition_of_fp32_groups.0", "optimizer");
	expect(r, "param_groups.0.params", "optimizer");
	/* FQN-keyed optimizer state lands in the layer of its parameter */
	expect(r, "state.model.layers.3.mlp.up_proj.weight.exp_avg", "layers.3");
	/* everything else */
	expect(r, "", "other");
	expect(r, "fc1.weight", "other");
	expect(r, "model.rotary_emb.inv_freq", "other");
	expect(r, "layers_norm.weight", "other");
	expect(r, "normalizer.weight", "other");
	expect(r, "statement.0.w", "other");
}

static void user_rules(void)
{
	char path[] = "/tmp/t_layers.XXXXXX";
	struct ck_error err = { { 0 } };
	struct ck_layer_rules *r = NULL;
	const char *re, *tmpl;
	int fd, user = -1;
	FILE *f;

	fd = mkstemp(path);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		printf("FAIL: cannot make a temporary layers.conf\n");
		failures++;
		return;
	}
	fputs("# comment line\n"
	      "\n"
	      "^encoder\\.stage([0-9])\\.   stage.\\1\n"
	      "   ^model\\.layers\\.0\\.\tfirst   \n"
	      "^odd name with spaces$ spaced\n", f);
	fclose(f);
	if (ck_layer_rules_load(path, &r, &err) != 0) {
		printf("FAIL: layers.conf refused: %s\n", err.msg);
		failures++;
		unlink(path);
		return;
	}
	expect(r, "encoder.stage3.conv.weight", "stage.3");
	expect(r, "model.layers.0.mlp.w", "first");          /* user rule before the built-in */
	expect(r, "model.layers.1.mlp.w", "layers.1");       /* built-ins still apply */
	expect(r, "odd name with spaces", "spaced");
	if (ck_layer_rules_count(r) < 4 || ck_layer_rule_at(r, 0, &re, &tmpl, &user) != 0 || user != 1 ||
	    strcmp(re, "^encoder\\.stage([0-9])\\.") != 0 || strcmp(tmpl, "stage.\\1") != 0) {
		printf("FAIL: first rule is not the file's first rule\n");
		failures++;
	}
	if (ck_layer_rule_at(r, ck_layer_rules_count(r) - 1, &re, &tmpl, &user) != 0 || user != 0) {
		printf("FAIL: last rule is not a built-in\n");
		failures++;
	}
	if (ck_layer_rule_at(r, ck_layer_rules_count(r), &re, &tmpl, NULL) != -ENOENT) {
		printf("FAIL: rule past the end\n");
		failures++;
	}
	/* ck_layer_rules_add puts a rule in front of everything */
	if (ck_layer_rules_add(r, "^encoder\\.", "enc", &err) != 0) {
		printf("FAIL: add refused: %s\n", err.msg);
		failures++;
	}
	expect(r, "encoder.stage3.conv.weight", "enc");
	ck_layer_rules_free(r);

	/* appending through the file, then reloading */
	if (ck_layer_rules_append_file(path, "^vit\\.blocks\\.([0-9]+)\\.", "vit.\\1", &err) != 0) {
		printf("FAIL: append refused: %s\n", err.msg);
		failures++;
	}
	if (ck_layer_rules_append_file(path, "^x(", "bad", &err) != -EINVAL) {
		printf("FAIL: malformed regex appended\n");
		failures++;
	}
	if (ck_layer_rules_append_file(path, "^x([0-9])", "l.\\2", &err) != -EINVAL || !strstr(err.msg, "\\2")) {
		printf("FAIL: template with a missing group appended (%s)\n", err.msg);
		failures++;
	}
	if (ck_layer_rules_append_file(path, "^x", "two words", &err) != -EINVAL) {
		printf("FAIL: template with a blank appended\n");
		failures++;
	}
	if (ck_layer_rules_append_file(path, "#x", "t", &err) != -EINVAL) {
		printf("FAIL: regex that reads back as a comment appended\n");
		failures++;
	}
	if (ck_layer_rules_load(path, &r, &err) != 0) {
		printf("FAIL: reloading refused: %s\n", err.msg);
		failures++;
	} else {
		expect(r, "vit.blocks.4.attn.qkv.weight", "vit.4");
		expect(r, "encoder.stage3.conv.weight", "stage.3");
		ck_layer_rules_free(r);
	}

	/* a malformed file names its line */
	f = fopen(path, "a");
	if (f) {
		fputs("lonely\n", f);
		fclose(f);
	}
	r = NULL;
	if (ck_layer_rules_load(path, &r, &err) != -EINVAL || !strstr(err.msg, ":7:")) {
		printf("FAIL: malformed line accepted or not named (%s)\n", err.msg);
		failures++;
	}
	ck_layer_rules_free(r);
	unlink(path);

	/* a missing file is no error */
	if (ck_layer_rules_load("/nonexistent/layers.conf", &r, &err) != 0) {
		printf("FAIL: missing layers.conf refused: %s\n", err.msg);
		failures++;
	} else {
		ck_layer_rules_free(r);
	}
}

static void small_buffers(const struct ck_layer_rules *r)
{
	char out[4];

	if (ck_layer_of(r, "model.layers.10.w", out, sizeof(out)) != -ENOSPC ||
	    ck_layer_of(r, "fc.weight", out, sizeof(out)) != -ENOSPC) {
		printf("FAIL: short output buffer not reported\n");
		failures++;
	}
}

int main(void)
{
	struct ck_error err = { { 0 } };
	struct ck_layer_rules *r;

	if (ck_layer_rules_default(&r, &err) != 0) {
		printf("FAIL: built-in rules: %s\n", err.msg);
		return 1;
	}
	builtins(r);
	small_buffers(r);
	ck_layer_rules_free(r);
	user_rules();
	if (failures)
		printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
