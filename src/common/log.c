/* Leveled logging to stderr or syslog. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <pthread.h>

#include "ckptfs/log.h"

static int log_to_syslog;
static enum ck_log_level log_max = CK_LOG_INFO;
static const char *log_ident = "ckptfs";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/* A child forked while another thread held log_lock (the daemon forks its
 * commits) would block forever on its first message: hold the lock across
 * fork and release it on both sides. */
static void log_atfork_prepare(void)
{
	pthread_mutex_lock(&log_lock);
}

static void log_atfork_release(void)
{
	pthread_mutex_unlock(&log_lock);
}

static pthread_once_t log_atfork_once = PTHREAD_ONCE_INIT;

static void log_register_atfork(void)
{
	pthread_atfork(log_atfork_prepare, log_atfork_release, log_atfork_release);
}

void ck_log_init(const char *ident, int use_syslog, enum ck_log_level max_level)
{
	pthread_once(&log_atfork_once, log_register_atfork);
	if (ident)
		log_ident = ident;
	log_max = max_level;
	if (use_syslog && !log_to_syslog)
		openlog(log_ident, LOG_PID, LOG_DAEMON);
	log_to_syslog = use_syslog;
}

enum ck_log_level ck_log_level(void)
{
	return log_max;
}

void ck_log(enum ck_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	va_list ap;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	if (log_to_syslog) {
		vsyslog(prio[level], fmt, ap);
	} else {
		/* One locked write per message so lines of worker threads never interleave. */
		pthread_mutex_lock(&log_lock);
		fprintf(stderr, "%s: %s: ", log_ident, names[level]);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		pthread_mutex_unlock(&log_lock);
	}
	va_end(ap);
}
