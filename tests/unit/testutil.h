/* What the C unit tests and their helper tools share: a failure count with
 * the CHECK macro that feeds it, whole files in memory, and running a
 * command or Python and keeping what it prints.  Linked in as
 * tests/unit/libtestutil.a (see Makefile.am). */
#ifndef CKPTFS_TESTUTIL_H
#define CKPTFS_TESTUTIL_H

#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <stdint.h>

#include "ckptfs/buf.h"

/* How many checks have failed so far. */
extern int test_failures;

/* Counts a failure and prints "FAIL file:line: <message>" on stderr
 * (stdout is flushed first, so the log keeps the order of both). */
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A failed check does not stop the test: it is counted, reported with the
 * printf-style message and the test goes on. */
#define CHECK(cond, ...) do { \
	if (!(cond)) \
		test_fail(__FILE__, __LINE__, __VA_ARGS__); \
} while (0)

/* A part of the test that cannot run here (a missing Python, no
 * fixtures): prints "SKIP part: <why>".  Where everything must run
 * (CKPT_REQUIRE_ALL=1, as CI sets) it is a failure instead. */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The test's exit status: 1 after printing "N failure(s)" on stderr when
 * some check failed, else 77 (skipped, as automake counts it) when a part
 * was skipped, else 0. */
int test_result(void);

/* The whole file in a new buffer (the caller frees it) with a NUL byte
 * after its *len bytes, or NULL when it cannot be opened, sized or read
 * (or memory runs out). */
uint8_t *read_file(const char *path, size_t *len);

/* The shared test fixtures (real torch 2.x and safetensors files):
 * $CKPT_FIXTURES, which make check sets from ./configure --with-fixtures;
 * NULL when it is unset or empty.  Callers skip (77) or leave out the
 * checks that need them. */
const char *test_fixtures(void);

/* The Python to compare with: $TORCH_PYTHON, or /usr/bin/python3 when that
 * is unset or empty.  It may not exist; callers check with access(). */
const char *test_python(void);

/* Runs the shell command cmd.  Appends what it prints on stdout and then a
 * NUL byte to out (when out is not NULL).  Returns its wait status as
 * pclose gives it (0: exited with 0), or -1 when it cannot be started. */
int run_command(const char *cmd, struct ck_buf *out);

/* What cmd prints on stdout, NUL-terminated, in a new buffer (the caller
 * frees it); NULL when it cannot run, exits with non-zero status or prints
 * nothing. */
char *run_output(const char *cmd);

/* Writes len bytes to a temporary file, runs `PYTHON -c script FILE` and
 * returns its stdout as run_output does.  NULL when there is no Python
 * (see test_python: the part is skipped, test_skip) and when Python fails
 * on the bytes or prints nothing (a failure is counted: what it was given
 * must be what Python reads).  script goes between single quotes in a
 * shell command, so it must not contain any. */
char *python_on(const char *script, const void *bytes, size_t len);

/* Test scaffolding that must work for the test to mean anything: on
 * failure the test stops with status 99 (a hard error, not a failure). */
#define SETUP(cond) \
	do { if (!(cond)) { printf("setup failed at %s:%d\n", __FILE__, __LINE__); exit(99); } } while (0)
/* snprintf into buf; stops the test (99) when it does not fit.  Returns buf. */
const char *pathf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Writes n bytes to path (created or truncated); stops the test (99) on failure. */
void write_bytes(const char *path, const void *p, size_t n);

#endif
