#!/bin/sh
# The writable mount's commit rules beyond rename and xattr: completion
# markers (HF trainer_state.json, DCP .metadata.tmp renamed to .metadata,
# Megatron latest_checkpointed_iteration.txt and DeepSpeed latest in the
# series directory) commit their directory once every file in it is
# closed; a directory without a step in its name never commits on a
# marker; -o commit_idle=SEC commits a closed, resting directory.
# trainer_state.json waits -o marker_grace of quiet (a file written after
# it still belongs to the checkpoint); -o commit_markers chooses the
# markers, user-named ones included; a marker that landed while no daemon
# ran commits when the mount starts.
# Commits answer after the last close (the kernel releases files
# asynchronously), so each check waits for the commit to show.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
rules() { ck_py writable_rules.py "$@"; }

# committed SERIES NAME: waits (up to 30 s) until ckptctl lists it.
committed() {
	i=0
	while [ $i -lt 300 ]; do
		"$CKPTCTL" ls "$tmp/store" "$1" 2>/dev/null | grep -q "$2" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	fail "$1/$2 was not committed"
}

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt"
mkdir "$tmp/mnt/run"

# Older transformers write rng_state.pth after trainer_state.json: the
# marker's grace keeps the directory open for it.
mkdir "$tmp/mnt/old"
rules hf_late "$tmp/mnt/old" checkpoint-5 "$tmp/plain"
committed old checkpoint-5
rules same "$tmp/mnt/old/checkpoint-5" "$tmp/plain/checkpoint-5"

# A marker in a directory without a step commits nothing.
rules hf "$tmp/mnt/run" final "$tmp/plain"

# HF Trainer: trainer_state.json written last commits checkpoint-10.
rules hf "$tmp/mnt/run" checkpoint-10 "$tmp/plain"
committed run checkpoint-10
[ -d "$tmp/store/data/run/checkpoint-10" ] || fail "checkpoint-10 not under STORE/data"
rules same "$tmp/mnt/run/checkpoint-10" "$tmp/plain/checkpoint-10"
[ -d "$tmp/store/staging/run/final" ] || fail "final (no step) left the staging area"
"$CKPTCTL" ls "$tmp/store" run | grep -q final && fail "final (no step) was committed"

# DCP: data file, then .metadata.tmp renamed to .metadata.
mkdir -p "$tmp/dcp/step_20"
head -c 8192 /dev/urandom >"$tmp/dcp/step_20/__0_0.distcp"
ck_py commit_check.py dcp_metadata "$tmp/dcp/step_20/.metadata" __0_0.distcp
mkdir -p "$tmp/mnt/dcp/step_20"
cp "$tmp/dcp/step_20/__0_0.distcp" "$tmp/mnt/dcp/step_20/"
cp "$tmp/dcp/step_20/.metadata" "$tmp/mnt/dcp/step_20/.metadata.tmp"
[ -d "$tmp/store/staging/dcp/step_20" ] || fail "step_20 committed before its .metadata"
mv "$tmp/mnt/dcp/step_20/.metadata.tmp" "$tmp/mnt/dcp/step_20/.metadata"
committed dcp step_20
rules same "$tmp/mnt/dcp/step_20" "$tmp/dcp/step_20"

# Megatron: the iteration in the series directory names iter_0000030.
mkdir "$tmp/mnt/mega"
rules hf "$tmp/mnt/mega" iter_0000030 "$tmp/plain" -
echo 30 >"$tmp/mnt/mega/latest_checkpointed_iteration.txt"
committed mega iter_0000030
[ "$(cat "$tmp/mnt/mega/latest_checkpointed_iteration.txt")" = 30 ] || fail "Megatron marker not kept"
rules same "$tmp/mnt/mega/iter_0000030" "$tmp/plain/iter_0000030"

# DeepSpeed: the tag in latest names the directory.
mkdir "$tmp/mnt/ds"
rules hf "$tmp/mnt/ds" global_step40 "$tmp/plain" -
printf global_step40 >"$tmp/mnt/ds/latest"
committed ds global_step40
[ -f "$tmp/store/staging/ds/latest" ] || fail "DeepSpeed marker not kept in the store"
echo x >"$tmp/mnt/ds/other.txt" 2>/dev/null && fail "a non-marker file was created in a series directory"
ck_umount "$tmp/mnt"

# Idle commit: no marker, all files closed, nothing written for 1 s.
ck_mount "$tmp/store" "$tmp/mnt" -o commit_idle=1
mkdir "$tmp/mnt/idle"
rules hf "$tmp/mnt/idle" checkpoint-50 "$tmp/plain" -
committed idle checkpoint-50
rules same "$tmp/mnt/idle/checkpoint-50" "$tmp/plain/checkpoint-50"
[ -d "$tmp/store/staging/run/final" ] || fail "final (no step) committed when idle"
ck_umount "$tmp/mnt"

# -o commit_markers: a user-named marker commits; trainer_state.json, not
# in the list, does not.
ck_mount "$tmp/store" "$tmp/mnt" -o commit_markers=dcp:COMPLETE,marker_grace=0.2
mkdir "$tmp/mnt/custom" "$tmp/mnt/late"
rules hf "$tmp/mnt/custom" checkpoint-60 "$tmp/plain" COMPLETE
committed custom checkpoint-60
rules same "$tmp/mnt/custom/checkpoint-60" "$tmp/plain/checkpoint-60"
rules hf "$tmp/mnt/late" checkpoint-70 "$tmp/plain"
sleep 1.5
"$CKPTCTL" ls "$tmp/store" late 2>/dev/null | grep -q checkpoint-70 && fail "trainer_state.json committed without hf in commit_markers"
ck_umount "$tmp/mnt"

# A marked directory left in progress (the daemon died before it could
# commit) commits when a mount starts: checkpoint-70 has trainer_state.json.
ck_mount "$tmp/store" "$tmp/mnt"
committed late checkpoint-70
rules same "$tmp/mnt/late/checkpoint-70" "$tmp/plain/checkpoint-70"
ck_umount "$tmp/mnt"
