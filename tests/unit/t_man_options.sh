#!/bin/sh
# The man pages list exactly the options that --help lists, and the programs
# accept every one of them:
#   ckptfs --help            <-> docs/man/ckptfs.1, OPTIONS
#   ckptctl --help           <-> docs/man/ckptctl.1, the commands of COMMANDS
#   ckptctl CMD --help       <-> the options under CMD in COMMANDS, and its
#                                usage line <-> its line in SYNOPSIS
#   mount.ckptfs --help      <-> docs/man/mount.ckptfs.8, OPTIONS
# A difference is named with the side it is missing from.  No FUSE needed.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
tmp=$(ck_tmpdir)
man=$CKPT_SRCDIR/docs/man
helper=$CKPT_SRCDIR/mount-helpers/mount.ckptfs
bad=0

# roff_tags FILE SECTION DEPTH: the tag (the line after .TP or .TQ) of every
# item in .SH SECTION at .RS depth DEPTH, as plain text, one per line,
# prefixed with the tag of the enclosing depth-0 item and a tab when DEPTH
# is 1 (ckptctl's commands and their options).
roff_tags() {
	awk -v want="$2" -v depth="$3" '
	# The text of a roff line: font macros joined the way they print.
	function text(line,    m, rest, n, i, c, q, a, inarg, out, sep, args) {
		if (line !~ /^\./)
			out = line
		else {
			m = line; sub(/ .*/, "", m)
			rest = line; if (!sub(/^[^ ]* /, "", rest)) rest = ""
			n = 0; a = ""; q = 0; inarg = 0
			for (i = 1; i <= length(rest); i++) {
				c = substr(rest, i, 1)
				if (c == "\"") { q = !q; inarg = 1; continue }
				if (c == " " && !q) { if (inarg) { args[++n] = a; a = ""; inarg = 0 } continue }
				a = a c; inarg = 1
			}
			if (inarg) args[++n] = a
			sep = (m == ".B" || m == ".I") ? " " : ""
			out = ""
			for (i = 1; i <= n; i++) out = out (i > 1 ? sep : "") args[i]
		}
		gsub(/\\-/, "-", out); gsub(/\\f[BIRP]/, "", out); gsub(/\\&/, "", out); gsub(/\\e/, "\\", out)
		return out
	}
	/^\.SH / { on = (substr($0, 5) == want || substr($0, 5) == "\"" want "\""); d = 0; next }
	!on { next }
	/^\.RS/ { d++; next }
	/^\.RE/ { d--; next }
	/^\.(TP|TQ)/ { tag = 1; next }
	tag {
		tag = 0
		t = text($0)
		if (d == 0) outer = t
		if (d == depth) print (depth ? outer "\t" : "") t
	}' "$1"
}

# names: reads option columns ("-s, --series NAME", "-o verify=none|first",
# "passthrough | nopassthrough", "nosuid, nodev") and prints one option per
# line: flags as they are (-s, --series), -o options by name, with their
# "=" when they take a value (verify=).  "-o opt[,opt...]" is -o itself.
names() {
	awk '{
		line = $0
		gsub(/\[[^]]*\]/, "", line)           # opt[,opt...] -> opt
		gsub(/=[^ ,]*/, "=", line)              # verify=none|first -> verify=
		n = split(line, item, /[ ]*[,|][ ]*/)
		for (i = 1; i <= n; i++) {
			w = item[i]
			sub(/^ +/, "", w)
			if (w ~ /^-o +([A-Z]+|opts?|options?)$/) { print "-o"; continue }
			if (w ~ /^-o /) sub(/^-o +/, "", w)
			sub(/ .*/, "", w)
			if (w != "") print w
		}
	}' | sort -u
}

# differ WHAT A_NAME A_FILE B_NAME B_FILE: reports lines in only one of them.
differ() {
	for o in $(comm -23 "$3" "$5"); do
		echo "$1: '$o' is in $2 but not in $4" >&2
		bad=1
	done
	for o in $(comm -13 "$3" "$5"); do
		echo "$1: '$o' is in $4 but not in $2" >&2
		bad=1
	done
}

# --- ckptfs ------------------------------------------------------------------------
"$CKPTFS" --help >"$tmp/fs.help" || fail "ckptfs --help exited $?"
{
	# the option column of "    -o NAME   text" lines (a single space may
	# follow a long option: the column is its first one or two words)
	sed -n 's/^    \(-o [^ ]*\).*/\1/p; s/^    \(-[a-zA-Z-]*, -o [^ ]*\) .*/\1/p; s/^    \(-[a-zA-Z-]*\(, --[a-z]*\)\{0,1\}\)  .*/\1/p' \
		"$tmp/fs.help"
	# "Generic mount options (rw, defaults, ...) are accepted and ignored"
	tr '\n' ' ' <"$tmp/fs.help" | sed -n 's/.*Generic mount options (\([^)]*\)).*/\1/p'
} | names >"$tmp/fs.help.opts"
[ -s "$tmp/fs.help.opts" ] || fail "no options found in ckptfs --help"
roff_tags "$man/ckptfs.1" OPTIONS 0 | names >"$tmp/fs.man.opts"
differ "ckptfs" "ckptfs --help" "$tmp/fs.help.opts" "ckptfs(1) OPTIONS" "$tmp/fs.man.opts"
# Each -o option documented is one ckptfs knows: with a store that does not
# exist, a known option gets as far as opening it.
for o in $(grep -v '^-' "$tmp/fs.help.opts"); do
	case $o in
	*=) arg=${o}1 ;;
	*\*) arg=${o%\*}y ;;
	*) arg=$o ;;
	esac
	"$CKPTFS" "$tmp/no-store" "$tmp/no-mnt" -o "$arg" >/dev/null 2>"$tmp/err" </dev/null || true
	if grep -q "unknown option" "$tmp/err"; then
		echo "ckptfs: -o $arg is documented but unknown: $(cat "$tmp/err")" >&2
		bad=1
	fi
done

# --- ckptctl: commands ---------------------------------------------------------
"$CKPTCTL" --help >"$tmp/ctl.help" || fail "ckptctl --help exited $?"
awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }' "$tmp/ctl.help" | sort >"$tmp/ctl.cmds"
[ -s "$tmp/ctl.cmds" ] || fail "no commands found in ckptctl --help"
roff_tags "$man/ckptctl.1" COMMANDS 0 | awk '{ print $1 }' | sort >"$tmp/ctl.man.cmds"
differ "ckptctl" "ckptctl --help" "$tmp/ctl.cmds" "ckptctl(1) COMMANDS" "$tmp/ctl.man.cmds"
roff_tags "$man/ckptctl.1" COMMANDS 1 >"$tmp/ctl.man.tags"

# --- ckptctl: each command's options -----------------------------------------------
for c in $(cat "$tmp/ctl.cmds"); do
	"$CKPTCTL" "$c" --help >"$tmp/cmd.help" || fail "ckptctl $c --help exited $?"
	# "  -s, --series NAME   text": the option column; -h/--help is every command's
	sed -n 's/^  \(-[a-zA-Z], --[a-z-]*\( [A-Z][A-Z/]*\)*\) .*/\1/p; s/^  \(--[a-z-]*\( [A-Z][A-Z/]*\)*\) .*/\1/p' "$tmp/cmd.help" |
		grep -v -- '--help' >"$tmp/cmd.cols" || true
	names <"$tmp/cmd.cols" >"$tmp/cmd.opts"
	awk -F'\t' -v c="$c" '{ split($1, w, " ") } w[1] == c { print $2 }' "$tmp/ctl.man.tags" |
		grep '^-' | names >"$tmp/cmd.man.opts" || true
	differ "ckptctl $c" "ckptctl $c --help" "$tmp/cmd.opts" "ckptctl(1) under $c" "$tmp/cmd.man.opts"

	# The usage line names each option (by one of its spellings), and the
	# man page's SYNOPSIS line for the command names the same ones.
	sed -n "s/^usage: ckptctl $c //p" "$tmp/cmd.help" | grep -o -- '-\{1,2\}[a-zA-Z][a-z-]*' | sort -u >"$tmp/cmd.usage"
	while read -r col; do
		hit=0
		for o in $(echo "$col" | names); do
			grep -qx -- "$o" "$tmp/cmd.usage" && hit=1
		done
		if [ $hit = 0 ]; then
			echo "ckptctl $c: '$col' is in its options but not in its usage line" >&2
			bad=1
		fi
	done <"$tmp/cmd.cols"
	awk -v c="$c" '
		/^\.SH / { on = ($0 == ".SH SYNOPSIS"); next }
		{ line = $0; gsub(/\\-/, "-", line) }   # resume\-info
		on && line == ".B ckptctl " c { take = 1; next }
		on && /^\.B ckptctl/ { take = 0 }
		on && /^\.br/ { take = 0 }
		take' "$man/ckptctl.1" | sed 's/\\-/-/g' | grep -o -- '-\{1,2\}[a-zA-Z][a-z-]*' | sort -u >"$tmp/cmd.man.usage" || true
	differ "ckptctl $c" "its usage line" "$tmp/cmd.usage" "ckptctl(1) SYNOPSIS" "$tmp/cmd.man.usage"

	# Each option documented is one the command knows.
	for o in $(grep -- '^-' "$tmp/cmd.opts"); do
		"$CKPTCTL" "$c" "$tmp/no-store" "$o" 1 >/dev/null 2>"$tmp/err" </dev/null || true
		if grep -q "unknown option" "$tmp/err"; then
			echo "ckptctl $c: $o is documented but unknown: $(cat "$tmp/err")" >&2
			bad=1
		fi
	done
done

# --- mount.ckptfs ------------------------------------------------------------------
"$helper" --help >"$tmp/helper.help" || fail "mount.ckptfs --help exited $?"
sed -n 's/^  \(-[a-zA-Z-]*\(, -[a-zA-Z-]*\)*\( [A-Za-z]*\)\{0,1\}\)  .*/\1/p' "$tmp/helper.help" | names >"$tmp/helper.opts"
[ -s "$tmp/helper.opts" ] || fail "no options found in mount.ckptfs --help"
roff_tags "$man/mount.ckptfs.8" OPTIONS 0 | names >"$tmp/helper.man.opts"
differ "mount.ckptfs" "mount.ckptfs --help" "$tmp/helper.opts" "mount.ckptfs(8) OPTIONS" "$tmp/helper.man.opts"

[ $bad = 0 ] || fail "the man pages and --help differ (above)"
echo "PASS: $(wc -l <"$tmp/fs.help.opts") ckptfs options, $(wc -l <"$tmp/ctl.cmds") ckptctl commands," \
	"$(wc -l <"$tmp/helper.opts") mount.ckptfs options"
