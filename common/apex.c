// apex.c: error names, error messages and the panic path shared by every module.
#include "apex.h"

#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const s_err_names[APEX_ERR_COUNT_] = {
    [APEX_OK] = "ok",
    [APEX_EINVAL] = "invalid input",
    [APEX_EPROTO] = "malformed message",
    [APEX_EVERSION] = "protocol version mismatch",
    [APEX_ETIMEDOUT] = "timed out",
    [APEX_ECLOSED] = "closed",
    [APEX_EAGAIN] = "try again",
    [APEX_EIO] = "I/O error",
    [APEX_ENOSPC] = "no space",
};

const char *apex_strerror(int err) {
    if (err < 0 || err >= APEX_ERR_COUNT_) {
        return "unknown error";
    }
    return s_err_names[err];
}

int apex_verrf(char *err, size_t errlen, int code, const char *fmt, va_list ap) {
    if (errlen > 0) {
        vsnprintf(err, errlen, fmt, ap);
    }
    return code;
}

int apex_errf(char *err, size_t errlen, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    apex_verrf(err, errlen, code, fmt, ap);
    va_end(ap);
    return code;
}

_Noreturn void apex_panic_at(const char *file, int line, const char *fmt, ...) {
    // stderr is unbuffered; one fprintf per piece keeps this usable even when the heap is
    // corrupt, which is when panics tend to happen.
    fprintf(stderr, "%s:%d: PANIC: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    abort();
}
