/* The crash test hooks (staging.h): CKPT_TEST_CRASH_AT=<stage> ends the
 * process at that stage of a commit exactly as kill -9 would (no atexit
 * handlers, no buffered output flushed, no cleanup), so that tests can
 * check what a crash between any two steps leaves behind.
 * CKPT_TEST_PAUSE_AT=<stage> with CKPT_TEST_PAUSE_FILE=<path> holds the
 * process there instead: it creates path and waits (a minute at most)
 * until the test removes it, so that a test can act at a known point of
 * a commit.  Test only. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "staging.h"

#define PAUSE_POLL_US 10000
#define PAUSE_MAX_POLLS 6000

static void pause_point(const char *stage)
{
	const char *at = getenv("CKPT_TEST_PAUSE_AT");
	const char *file = getenv("CKPT_TEST_PAUSE_FILE");
	int fd;

	if (!at || !file || strcmp(at, stage) != 0)
		return;
	fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	close(fd);
	for (int i = 0; i < PAUSE_MAX_POLLS && access(file, F_OK) == 0; i++)
		usleep(PAUSE_POLL_US);
}

void ck_crash_point(const char *stage)
{
	const char *at = getenv("CKPT_TEST_CRASH_AT");

	pause_point(stage);
	if (at && strcmp(at, stage) == 0)
		_exit(137);
}
