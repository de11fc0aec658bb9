// log.h: the one logger (STYLE S20).
//
// Line format, fixed so that logs of many daemons can be merged and grepped:
//   2026-05-01T12:00:00.123Z apex-replay[4242] W sumtree: dropped 12 stale updates
// (ISO-8601 UTC time, role, pid, level letter, module, message). The level test happens
// before any formatting, so a disabled log_debug costs one compare.
// log_every() rate-limits a repeating message and reports how many it suppressed.
// Lines go to stderr (and, after log_open_file, to that file too), written with a single
// write(2) each so lines from threads never interleave. Thread-safe.
#ifndef APEX_LOG_H
#define APEX_LOG_H

#include "clock.h"

#include <stdint.h>

typedef enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 } log_level;

extern int log_level_current; // the one global besides the shutdown flag (STYLE S25)

void log_set_role(const char *role); // "apex-replay"; copied
void log_set_level(log_level level);
// Parses "error|warn|info|debug"; returns 0 and sets *out, or -1.
int log_parse_level(const char *s, log_level *out);
// Also append every line to path. Returns 0, or -1 (errno set) when it cannot be opened.
int log_open_file(const char *path);
void log_close_file(void);

void log_write(log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifndef LOG_MODULE
#define LOG_MODULE "apex"
#endif

#define log_at_(lvl, ...)                                                                          \
    do {                                                                                           \
        if ((int)(lvl) <= log_level_current) {                                                     \
            log_write((lvl), LOG_MODULE, __VA_ARGS__);                                             \
        }                                                                                          \
    } while (0)
#define log_error(...) log_at_(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_at_(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_at_(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_at_(LOG_DEBUG, __VA_ARGS__)

// Rate limiter state for one repeating message; zero-initialise it (static or in a struct).
typedef struct {
    int64_t last_ms;     // monotonic time of the last line written; 0 = never
    uint64_t suppressed; // calls swallowed since then
} log_limiter_t;

// Returns 1 when a line should be written now (at most once per interval_ms) and stores in
// *suppressed how many calls were swallowed since the last written line; else returns 0 and
// counts the call. now_ms is the caller's monotonic clock, which makes this testable.
int log_limiter_allow(log_limiter_t *lim, int64_t now_ms, int64_t interval_ms,
                      uint64_t *suppressed);

// Writes at most one line per interval_ms through lim, appending "(N similar suppressed)".
#define log_every(lim, interval_ms, lvl, fmt, ...)                                                 \
    do {                                                                                           \
        uint64_t log_sup_;                                                                         \
        if ((int)(lvl) <= log_level_current &&                                                     \
            log_limiter_allow((lim), clock_now_ms(), (interval_ms), &log_sup_)) {                  \
            if (log_sup_) {                                                                        \
                log_write((lvl), LOG_MODULE, fmt " (%llu similar suppressed)", ##__VA_ARGS__,      \
                          (unsigned long long)log_sup_);                                           \
            } else {                                                                               \
                log_write((lvl), LOG_MODULE, fmt, ##__VA_ARGS__);                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

// Async-signal-safe: writes msg with write(2) only. For signal handlers (STYLE S20).
void log_raw_from_handler(const char *msg);

#endif
