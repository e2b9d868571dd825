/* ckptctl verify STORE [SERIES[/CKPT]]: re-check that every imported
 * physical file is still the file that was imported (device, inode, size,
 * mtime).  Changed files are refused by the mount; re-import them. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct verify_counts {
	size_t ok, changed;
};

static int verify_ckpt(struct ck_store *st, const struct ck_ckpt_info *c, struct verify_counts *vc)
{
	struct ck_file_info *f;
	size_t n, i;
	int rc;

	rc = ck_store_list_files(st, c->id, &f, &n);
	if (rc < 0) {
		cli_error("verify: %s/%s: %s", c->series, c->name, strerror(-rc));
		return rc;
	}
	for (i = 0; i < n; i++) {
		struct ck_error err = { { 0 } };

		if (ck_file_check(&f[i], &err) < 0) {
			vc->changed++;
			printf("CHANGED  %s/%s: %s\n", c->series, c->name, err.msg);
		} else {
			vc->ok++;
		}
	}
	ck_file_info_free(f, n);
	return 0;
}

static int verify_series(struct ck_store *st, const char *series, const char *only, struct verify_counts *vc)
{
	struct ck_ckpt_info *c;
	size_t n, i, seen = 0;
	int rc;

	rc = ck_store_list_checkpoints(st, series, &c, &n);
	if (rc < 0) {
		cli_error("verify: %s: %s", series, strerror(-rc));
		return rc;
	}
	for (i = 0; i < n && rc == 0; i++) {
		if (only && strcmp(c[i].name, only) != 0)
			continue;
		seen++;
		rc = verify_ckpt(st, &c[i], vc);
	}
	ck_ckpt_info_free(c, n);
	if (rc == 0 && (only ? !seen : !n)) {
		cli_error("verify: no %s '%s%s%s'", only ? "checkpoint" : "series", series, only ? "/" : "",
			  only ? only : "");
		return -ENOENT;
	}
	return rc;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	struct verify_counts vc = { 0 };
	struct ck_store *st;
	char **names = NULL, *series, *ckpt;
	size_t n = 0, i;
	int rc;

	rc = cli_getopt(cmd, argc, argv, NULL, NULL, NULL, NULL);
	if (rc >= 0)
		return rc;
	rc = cli_open_target(cmd, argc, argv, &st, &series, &ckpt);
	if (rc >= 0)
		return rc;
	if (series) {
		rc = verify_series(st, series, ckpt, &vc);
	} else {
		rc = ck_store_list_series(st, &names, &n);
		if (rc < 0)
			cli_error("verify: cannot list series: %s", strerror(-rc));
		for (i = 0; i < n && rc == 0; i++)
			rc = verify_series(st, names[i], NULL, &vc);
		ck_strv_free(names, n);
	}
	ck_store_close(st);
	if (rc < 0)
		return CLI_ERROR;
	printf("%zu file%s unchanged, %zu changed since import\n", vc.ok, vc.ok == 1 ? "" : "s", vc.changed);
	return vc.changed ? CLI_ERROR : CLI_OK;
}

const struct cli_cmd cli_cmd_verify = {
	.name = "verify",
	.args = "STORE [SERIES[/CKPT]]",
	.summary = "check that imported files have not changed since import",
	.help = "Re-stats every physical file of the store (or of one series or checkpoint) and\n"
		"compares device, inode, size and modification time with what import recorded.\n"
		"Exit status 1 and a CHANGED line naming each file that differs.\n",
	.run = run,
	.hidden = 1,
};
