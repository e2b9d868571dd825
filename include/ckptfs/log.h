/* Leveled logging for the whole project.
 *
 * Messages go to stderr (foreground) or syslog (daemonized).  Error messages
 * should name the file, tensor and reason: "model.pt: tensor 'w': hash mismatch".
 */
#ifndef CKPTFS_LOG_H
#define CKPTFS_LOG_H

enum ck_log_level { CK_LOG_ERR = 0, CK_LOG_WARN, CK_LOG_INFO, CK_LOG_DEBUG };

/* Selects the sink and the most verbose level printed.  Safe to call again. */
void ck_log_init(const char *ident, int use_syslog, enum ck_log_level max_level);
enum ck_log_level ck_log_level(void);
void ck_log(enum ck_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define ck_err(...)   ck_log(CK_LOG_ERR, __VA_ARGS__)
#define ck_warn(...)  ck_log(CK_LOG_WARN, __VA_ARGS__)
#define ck_info(...)  ck_log(CK_LOG_INFO, __VA_ARGS__)
#define ck_debug(...) do { if (ck_log_level() >= CK_LOG_DEBUG) ck_log(CK_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
