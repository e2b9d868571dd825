#!/bin/sh
# A store on a GlusterFS volume moves: written, copied (cp -a), restored
# (tar) and synced (rsync -a) through one client mount (node A), mounted
# and verified through the other (node B), each node with its own index.
# The steps are in relocate_steps.sh.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
. "$CKPT_SRCDIR/tests/integration/gluster.sh"
need_fuse
need_torch
need_gluster
command -v rsync >/dev/null 2>&1 || skip "no rsync"
tmp=$(ck_tmpdir)
ck_gluster ckptrelocate
w=$node_a r=$node_b mopts="index_dir=$tmp/index" more=0
ctl() { "$CKPTCTL" --index-dir "$tmp/index" "$@"; }
. "$CKPT_SRCDIR/tests/integration/relocate_steps.sh"
echo "gluster_relocate: ok"
