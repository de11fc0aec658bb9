// log.c: see log.h.
#include "log.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int log_level_current = LOG_INFO;

static char s_role[32] = "apex";
static int s_file_fd = -1;
static const char s_level_chars[] = "EWID";

void log_set_role(const char *role) { snprintf(s_role, sizeof s_role, "%s", role); }

void log_set_level(log_level level) { log_level_current = (int)level; }

int log_parse_level(const char *s, log_level *out) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    }
    return -1;
}

int log_open_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    log_close_file();
    s_file_fd = fd;
    return 0;
}

void log_close_file(void) {
    if (s_file_fd >= 0) {
        close(s_file_fd);
        s_file_fd = -1;
    }
}

static void s_write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; // nowhere left to report a failing log write
        }
        buf += n;
        len -= (size_t)n;
    }
}

void log_write(log_level level, const char *module, const char *fmt, ...) {
    char line[2048];
    char ts[32];
    clock_iso8601(ts, clock_wall_ms());
    int n = snprintf(line, sizeof line, "%s %s[%d] %c %s: ", ts, s_role, (int)getpid(),
                     s_level_chars[level & 3], module);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) {
        len = sizeof line - 2; // truncated: keep the line whole and newline-terminated
    }
    line[len++] = '\n';
    s_write_all(STDERR_FILENO, line, len);
    if (s_file_fd >= 0) {
        s_write_all(s_file_fd, line, len);
    }
}

int log_limiter_allow(log_limiter_t *lim, int64_t now_ms, int64_t interval_ms,
                      uint64_t *suppressed) {
    if (lim->last_ms != 0 && now_ms - lim->last_ms < interval_ms) {
        lim->suppressed++;
        return 0;
    }
    *suppressed = lim->suppressed;
    lim->suppressed = 0;
    lim->last_ms = now_ms == 0 ? 1 : now_ms;
    return 1;
}

void log_raw_from_handler(const char *msg) {
    s_write_all(STDERR_FILENO, msg, strlen(msg));
    if (s_file_fd >= 0) {
        s_write_all(s_file_fd, msg, strlen(msg));
    }
}
