/* The crash test hook (staging.h): CKPT_TEST_CRASH_AT=<stage> ends the
 * process at that stage of a commit exactly as kill -9 would (no atexit
 * handlers, no buffered output flushed, no cleanup), so that tests can
 * check what a crash between any two steps leaves behind.  Test only. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "staging.h"

void ck_crash_point(const char *stage)
{
	const char *at = getenv("CKPT_TEST_CRASH_AT");

	if (at && strcmp(at, stage) == 0)
		_exit(137);
}
