/* Shared support of the C unit tests: see testutil.h. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

int test_failures;
static int test_skipped;

void test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	test_failures++;
	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void test_skip(const char *fmt, ...)
{
	const char *all = getenv("CKPT_REQUIRE_ALL");
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "SKIP part: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (all && !strcmp(all, "1"))
		test_fail(__FILE__, __LINE__, "a part would be skipped, but CKPT_REQUIRE_ALL=1");
	else
		test_skipped = 1;
}

int test_result(void)
{
	if (!test_failures)
		return test_skipped ? 77 : 0;
	fflush(stdout);
	fprintf(stderr, "%d failure(s)\n", test_failures);
	return 1;
}

uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = 0;
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

const char *test_fixtures(void)
{
	const char *dir = getenv("CKPT_FIXTURES");

	return dir && *dir ? dir : NULL;
}

const char *test_python(void)
{
	const char *py = getenv("TORCH_PYTHON");

	return py && *py ? py : "/usr/bin/python3";
}

int run_command(const char *cmd, struct ck_buf *out)
{
	FILE *p = popen(cmd, "r");
	char chunk[4096];
	size_t n;

	if (!p)
		return -1;
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		if (out)
			ck_buf_put(out, chunk, n);
	if (out)
		ck_buf_putc(out, 0);
	return pclose(p);
}

char *run_output(const char *cmd)
{
	struct ck_buf out = CK_BUF_INIT;

	if (run_command(cmd, &out) != 0 || out.len <= 1) {
		ck_buf_free(&out);
		return NULL;
	}
	return (char *)ck_buf_steal(&out, NULL);
}

char *python_on(const char *script, const void *bytes, size_t len)
{
	const char *py = test_python();
	char path[] = "/tmp/ckptfs_test.XXXXXX", *cmd, *out = NULL;
	size_t cmd_size;
	FILE *f;
	int fd;

	if (access(py, X_OK)) {
		test_skip("no Python (%s) to compare with", py);
		return NULL;
	}
	if ((fd = mkstemp(path)) < 0)
		return NULL;
	f = fdopen(fd, "wb");
	if (!f) {
		close(fd);
		unlink(path);
		return NULL;
	}
	if (fwrite(bytes, 1, len, f) != len) {
		fclose(f);
		unlink(path);
		return NULL;
	}
	fclose(f);
	cmd_size = strlen(py) + strlen(script) + strlen(path) + 32;
	cmd = malloc(cmd_size);
	if (cmd) {
		snprintf(cmd, cmd_size, "'%s' -c '%s' '%s'", py, script, path);
		out = run_output(cmd);
		free(cmd);
		if (!out)
			test_fail(__FILE__, __LINE__, "%s failed on %zu bytes (or printed nothing)", py, len);
	}
	unlink(path);
	return out;
}

const char *pathf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	SETUP((size_t)vsnprintf(buf, size, fmt, ap) < size);
	va_end(ap);
	return buf;
}

void write_bytes(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	SETUP(f && fwrite(p, 1, n, f) == n && fclose(f) == 0);
}
