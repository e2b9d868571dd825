# Fuzz the recipe parser (YAML through libyaml, then the recipe's keys).
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_recipe "$CKPT_SRCDIR/tests/fuzz/seeds/recipe"
