/* Exit statuses of ckptfs and ckptctl: one table for both programs.
 *
 * Documented in ckptfs(1), ckptctl(1) and README.md under "Exit status";
 * mount-helpers/mount.ckptfs translates CK_EXIT_USAGE into mount(8)'s own
 * status for a bad invocation.  Scripts branch on these numbers, so a value
 * never changes meaning; tests/unit/t_exit_status.sh checks the programs and
 * the documents against this table.
 */
#ifndef CKPTFS_EXITCODES_H
#define CKPTFS_EXITCODES_H

enum ck_exit {
	/* Done. */
	CK_EXIT_OK = 0,
	/* The command failed: nothing (more) was done.  ckptfs: the mount
	 * failed, or the daemon failed while serving. */
	CK_EXIT_FAILURE = 1,
	/* ckptctl: done, but some inputs were set aside and named on stderr
	 * (import: files refused; reindex: manifests damaged or, with
	 * --verify, files changed; stats: files that cannot be served). */
	CK_EXIT_PARTIAL = 2,
	/* ckptctl: the data checked is bad (verify: damage found; commit: the
	 * directory was quarantined). */
	CK_EXIT_DAMAGED = 3,
	/* ckptctl resume-info: the series has no checkpoint to resume from
	 * (none committed, or none the mount can serve whole). */
	CK_EXIT_NONE = 4,
	/* Bad command line, for both programs: unknown option or command, bad
	 * option value, missing or extra operands (sysexits.h's EX_USAGE, so
	 * that it cannot be mistaken for a result above). */
	CK_EXIT_USAGE = 64,
};

#endif
