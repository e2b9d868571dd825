# A GlusterFS volume for the tests of one store on many nodes (sourced
# after lib.sh).  ck_gluster NAME starts a glusterd of the test's own, makes
# a replica-2 volume of two bricks in the test's scratch directory, and
# mounts it twice, $node_a and $node_b: two clients, each with its own
# caches, standing for two nodes.  Everything goes at exit: the client
# mounts, the volume, the glusterd (by its pid), and what it left in
# /var/lib/glusterd, /var/run/gluster and /var/log/glusterfs.
#
# Only one glusterd can run on a machine (it owns port 24007): tests take a
# lock to run one at a time, and a glusterd this test did not start is
# never used or stopped (the test skips, or fails where everything must
# run).  glusterd keeps its state in the test's directory (a volfile of its
# own with working-directory there), so nothing of an existing setup is
# touched.  Needs root.

# need_gluster: glusterd, gluster, mount.glusterfs and root, or skip (77).
need_gluster() {
	for p in glusterd gluster mount.glusterfs; do
		command -v "$p" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$p" >/dev/null 2>&1 ||
			skip "no $p (Debian: glusterfs-server, glusterfs-client)"
	done
	PATH=$PATH:/usr/sbin:/sbin
	[ "$(id -u)" = 0 ] || skip "GlusterFS needs root"
}

_gl_dir="" _gl_pid="" _gl_vol="" _gl_made=""

# gl_cli ARGS...: the gluster command line, quiet, non-interactive.
gl_cli() {
	gluster --mode=script "$@"
}

# _gl_answers: glusterd has written its pid file and answers the CLI.
_gl_answers() {
	[ -s "$_gl_dir/glusterd.pid" ] && gl_cli volume list >/dev/null 2>&1
}

_gl_gone() { ! kill -0 "$_gl_pid" 2>/dev/null; }

_gl_stop() {
	[ -n "$_gl_vol" ] && gl_cli volume stop "$_gl_vol" force >/dev/null 2>&1
	[ -n "$_gl_vol" ] && gl_cli volume delete "$_gl_vol" >/dev/null 2>&1
	if [ -n "$_gl_pid" ] && kill -0 "$_gl_pid" 2>/dev/null; then
		kill "$_gl_pid"
		# Gone for good, reaped too: the next test's pgrep lists zombies.
		ck_until 10 _gl_gone || kill -9 "$_gl_pid"
	fi
	# Brick and self-heal processes of this volume, by the pid files they left.
	for f in /var/run/gluster/vols/"$_gl_vol"/*.pid "$_gl_dir"/wd/glustershd/run/*.pid; do
		[ -f "$f" ] || continue
		p=$(cat "$f" 2>/dev/null)
		[ -n "$p" ] && kill "$p" 2>/dev/null
	done
	for d in $_gl_made; do
		rm -rf "$d"
	done
	[ -n "$_gl_vol" ] && rm -rf /var/run/gluster/vols/"$_gl_vol"
	[ -n "$_gl_dir" ] && rm -f /var/log/glusterfs/bricks/"$(echo "$_gl_dir" | sed 's|^/||; s|/|-|g')"-b*.log
	return 0
}

# ck_gluster NAME: the volume NAME, mounted at $node_a and $node_b.
ck_gluster() {
	_gl_dir=$(ck_tmpdir)/gluster
	mkdir -p "$_gl_dir/wd"
	# One test with a glusterd at a time; the lock goes with this shell.
	exec 8>"${TMPDIR:-/tmp}/ckptfs-test-glusterd.lock"
	flock -w 900 8 || skip "another test has held the GlusterFS lock for 15 minutes"
	if pgrep -x glusterd >/dev/null 2>&1; then
		skip "a glusterd this test did not start is running (pid $(pgrep -x glusterd | tr '\n' ' ')): not using it"
	fi
	# What glusterd makes outside its working directory, removed at exit
	# when this test made it.
	for d in /var/lib/glusterd/geo-replication /var/lib/glusterd/ss_brick; do
		[ -e "$d" ] || _gl_made="$_gl_made $d"
	done
	ck_atexit _gl_stop
	cp -r /var/lib/glusterd/groups /var/lib/glusterd/hooks "$_gl_dir/wd/" 2>/dev/null || true
	sed "s|^\( *option working-directory \).*|\1$_gl_dir/wd|" /etc/glusterfs/glusterd.vol >"$_gl_dir/glusterd.vol"
	grep -q "working-directory $_gl_dir/wd" "$_gl_dir/glusterd.vol" || fail "cannot make a glusterd volfile"
	# Daemons started from here must not inherit the lock (fd 8): one
	# that outlived the test would keep every later test waiting.
	glusterd -f "$_gl_dir/glusterd.vol" -p "$_gl_dir/glusterd.pid" -l "$_gl_dir/glusterd.log" \
		--log-level WARNING 8>&- || fail "glusterd did not start (log: $_gl_dir/glusterd.log)"
	ck_until 20 _gl_answers || fail "glusterd does not answer: $(tail -5 "$_gl_dir/glusterd.log")"
	_gl_pid=$(cat "$_gl_dir/glusterd.pid")
	# glusterd refuses localhost and 127.0.0.1 for bricks, not the host's name.
	host=$(hostname)
	_gl_vol=$1
	mkdir -p "$_gl_dir/b1" "$_gl_dir/b2"
	gl_cli volume create "$_gl_vol" replica 2 "$host:$_gl_dir/b1" "$host:$_gl_dir/b2" force >"$_gl_dir/cli.out" 2>&1 ||
		fail "gluster volume create: $(cat "$_gl_dir/cli.out")"
	gl_cli volume start "$_gl_vol" >"$_gl_dir/cli.out" 2>&1 || fail "gluster volume start: $(cat "$_gl_dir/cli.out")"
	node_a=$(ck_tmpdir)/nodeA node_b=$(ck_tmpdir)/nodeB
	for n in "$node_a" "$node_b"; do
		mkdir -p "$n"
		_ck_fs_mounts="$_ck_fs_mounts $n"
		# The bricks may take a moment to come up after the start.
		ck_until 10 mount -t glusterfs -o log-file="$_gl_dir/$(basename "$n").log" "$host:/$_gl_vol" "$n" \
			2>/dev/null 8>&- ||
			fail "mount -t glusterfs $host:/$_gl_vol $n: $(tail -3 "$_gl_dir/$(basename "$n").log")"
	done
	[ "$(stat -f -c %t "$node_a")" = 65735546 ] || fail "$node_a is not a FUSE (GlusterFS) mount"
	echo "gluster: volume $_gl_vol (replica 2) mounted at $node_a and $node_b"
}
