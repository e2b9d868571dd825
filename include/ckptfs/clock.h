/* Clocks.  Timestamps the store keeps (import and deletion times, file
 * mtimes) are int64 nanoseconds since the epoch; durations are measured on
 * the monotonic clock.  All are safe from any thread. */
#ifndef CKPTFS_CLOCK_H
#define CKPTFS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* ts in nanoseconds, e.g. ck_timespec_ns(sb.st_mtim) for a file's mtime. */
static inline int64_t ck_timespec_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Now, in nanoseconds since the epoch (CLOCK_REALTIME). */
static inline int64_t ck_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ck_timespec_ns(ts);
}

/* Seconds on the monotonic clock, for durations and rates. */
static inline double ck_monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
