#!/bin/sh
# One table of exit statuses (include/ckptfs/exitcodes.h) for ckptfs and
# ckptctl: a bad command line exits CK_EXIT_USAGE from both programs (and
# from every ckptctl command), mount.ckptfs turns it into mount(8)'s 1, and
# ckptfs(1), ckptctl(1) and README.md document the values the header has.
# No FUSE needed: every case fails while parsing the command line.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
tmp=$(ck_tmpdir)
header=$CKPT_SRCDIR/include/ckptfs/exitcodes.h

# NAME VALUE lines of the header's enum.
sed -n 's/^[[:space:]]*CK_EXIT_\([A-Z_]*\) = \([0-9]*\),.*/\1 \2/p' "$header" >"$tmp/table"
code() { awk -v n="$1" '$1 == n { print $2 }' "$tmp/table"; }
usage=$(code USAGE)
[ -n "$usage" ] && [ -n "$(code OK)" ] && [ -n "$(code FAILURE)" ] ||
	fail "cannot read CK_EXIT_OK, _FAILURE and _USAGE from $header: $(cat "$tmp/table")"
[ "$(awk '{ print $2 }' "$tmp/table" | sort | uniq -d)" = "" ] || fail "two names for one status in $header"

# expect WANT CMD...: CMD exits WANT.
expect() {
	_e_want=$1
	shift
	_e_rc=0
	"$@" >"$tmp/out" 2>"$tmp/err" </dev/null || _e_rc=$?
	[ "$_e_rc" = "$_e_want" ] || fail "$* exited $_e_rc, expected $_e_want: $(cat "$tmp/err")"
}

# --- ckptfs ----------------------------------------------------------------------
# Paths that do not exist: if parsing wrongly succeeded, the mount would fail
# with CK_EXIT_FAILURE instead, and the case would still be caught.
st=$tmp/no-store mnt=$tmp/no-mnt
expect "$usage" "$CKPTFS"
expect "$usage" "$CKPTFS" "$st"
expect "$usage" "$CKPTFS" "$st" "$mnt" extra
expect "$usage" "$CKPTFS" "$st" "$mnt" -x
expect "$usage" "$CKPTFS" "$st" "$mnt" --frobnicate
expect "$usage" "$CKPTFS" "$st" "$mnt" -o
expect "$usage" "$CKPTFS" "$st" "$mnt" -o frobnicate
expect "$usage" "$CKPTFS" "$st" "$mnt" -o verify=sometimes
expect "$usage" "$CKPTFS" "$st" "$mnt" -o refresh=-1
expect "$usage" "$CKPTFS" "$st" "$mnt" -o pidfile
grep -q "ckptfs" "$tmp/err" || fail "ckptfs says nothing about a bad command line"
expect "$(code OK)" "$CKPTFS" --help
expect "$(code FAILURE)" "$CKPTFS" "$st" "$mnt" -o ro	# well formed, but no store

# --- ckptctl ---------------------------------------------------------------------
expect "$usage" "$CKPTCTL"
expect "$usage" "$CKPTCTL" frobnicate
expect "$usage" "$CKPTCTL" --frobnicate
expect "$usage" "$CKPTCTL" help frobnicate
expect "$(code OK)" "$CKPTCTL" --help
# Every command that `ckptctl --help` lists, with no operands, an unknown
# option, and an option that lacks its argument where it has one.
cmds=$("$CKPTCTL" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
[ -n "$cmds" ] || fail "ckptctl --help lists no commands"
for c in $cmds; do
	expect "$usage" "$CKPTCTL" "$c"
	expect "$usage" "$CKPTCTL" "$c" "$tmp" --frobnicate
	expect "$(code OK)" "$CKPTCTL" "$c" --help
	opt=$("$CKPTCTL" "$c" --help | sed -n 's/^ *-[a-zA-Z], \(--[a-z-]*\) [A-Z].*/\1/p' | head -n 1)
	[ -z "$opt" ] || expect "$usage" "$CKPTCTL" "$c" "$tmp" "$opt"
done
expect "$(code FAILURE)" "$CKPTCTL" ls "$tmp/no-store"	# well formed, but no store

# --- mount.ckptfs: mount(8)'s statuses, 1 for a bad invocation ------------------
helper=$CKPT_SRCDIR/mount-helpers/mount.ckptfs
expect 1 "$helper" "$st"
expect 1 env CKPTFS="$CKPTFS" "$helper" "$st" "$mnt" -o ro,frobnicate	# ckptfs: CK_EXIT_USAGE

# --- the documents -----------------------------------------------------------
# The statuses a man page's EXIT STATUS section lists (".TP" then ".B N").
man_codes() {
	awk '/^\.SH / { on = ($0 ~ /EXIT STATUS/) } on && prev == ".TP" && /^\.B [0-9]+$/ { print $2 } { prev = $0 }' "$1" |
		sort -n | tr '\n' ' '
}
all=$(awk '{ print $2 }' "$tmp/table" | sort -n | tr '\n' ' ')
got=$(man_codes "$CKPT_SRCDIR/docs/man/ckptctl.1")
[ "$got" = "$all" ] || fail "ckptctl(1) EXIT STATUS lists '$got', $header has '$all'"
got=$(man_codes "$CKPT_SRCDIR/docs/man/ckptfs.1")
want=$(printf '%s\n' "$(code OK)" "$(code FAILURE)" "$usage" | sort -n | tr '\n' ' ')
[ "$got" = "$want" ] || fail "ckptfs(1) EXIT STATUS lists '$got', expected '$want' (the statuses ckptfs uses)"
# README: a table under "### Exit status" with a row "| N | ... |" per status.
got=$(awk -F'|' '/^#+ / { on = ($0 ~ /Exit status/) } on && /^\| *[0-9]+ *\|/ { v = $2; gsub(/ /, "", v); print v }' \
	"$CKPT_SRCDIR/README.md" | sort -n | tr '\n' ' ')
[ "$got" = "$all" ] || fail "README.md's exit status table lists '$got', $header has '$all'"
echo "PASS"
