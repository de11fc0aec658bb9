// apex.h: project-wide basics every module includes.
//
// What it gives: the protocol/format version numbers, the apex_err codes returned for
// runtime errors that come from outside the process (STYLE S6.4), and APEX_ASSERT /
// APEX_PANIC for broken invariants (S6.1), which stay on in release builds.
// apex_errf writes the one-line message that goes with a failure into a caller's buffer.
// What it does not do: logging (log.h) or allocation (xalloc.h).
#ifndef APEX_APEX_H
#define APEX_APEX_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define APEX_VERSION_STRING "0.1.0"
// Bumped on any incompatible change to proto/apex.proto's meaning. A peer that sends
// another version is refused with APEX_EVERSION.
#define APEX_PROTOCOL_VERSION 1u

// Runtime errors (class 4 in STYLE S6). Returned as negative-free ints: 0 is success.
typedef enum {
    APEX_OK = 0,
    APEX_EINVAL,    // malformed input: bad sizes, NaN, out-of-range values
    APEX_EPROTO,    // bytes that are not a valid message of the expected kind
    APEX_EVERSION,  // a valid message of another protocol version
    APEX_ETIMEDOUT, // a peer did not answer in time
    APEX_ECLOSED,   // the object or peer has been closed
    APEX_EAGAIN,    // nothing to do now; try again later
    APEX_EIO,       // an I/O call failed (see errno in the log line)
    APEX_ENOSPC,    // no room: a buffer, a queue or a disk is full
    APEX_ERR_COUNT_
} apex_err;

// Returns a static, human-readable name for an apex_err ("invalid input", ...).
// Thread-safe. Unknown codes give "unknown error".
const char *apex_strerror(int err);

// The error-message helper of every function that reports "why" through a caller's buffer
// (`char *err, size_t errlen`): writes the printf-formatted message into err (truncated to
// errlen - 1 characters and always terminated; nothing is written when errlen is 0) and
// returns code, so that a failure is one statement: `return apex_errf(err, errlen, -1, ...)`.
// err may be NULL when errlen is 0. Thread-safe.
int apex_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// apex_errf for a caller that has its own variadic arguments (ap is consumed).
int apex_verrf(char *err, size_t errlen, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

// Prints "file:line: assertion failed: expr" (or the formatted message), a backtrace,
// and aborts. Never returns. Used only through the macros below.
_Noreturn void apex_panic_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define APEX_PANIC(...) apex_panic_at(__FILE__, __LINE__, __VA_ARGS__)
// Programming errors only; never for input from peers, files or users.
// The condition must have no side effects.
#define APEX_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (__builtin_expect(!(cond), 0)) {                                                        \
            apex_panic_at(__FILE__, __LINE__, "assertion failed: %s", #cond);                      \
        }                                                                                          \
    } while (0)

#define APEX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define APEX_MAX(a, b) ((a) > (b) ? (a) : (b))
#define APEX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
