// clock.c: see clock.h.
#include "clock.h"

#include <stdio.h>
#include <time.h>

int64_t clock_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t clock_now_ms(void) { return clock_now_ns() / 1000000LL; }

int64_t clock_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000LL;
}

double clock_wall_s(void) { return (double)clock_wall_ms() / 1000.0; }

void clock_iso8601(char *buf, int64_t wall_ms) {
    time_t secs = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, 21, "%Y-%m-%dT%H:%M:%S", &tm); // 19 chars
    snprintf(buf + n, 6, ".%03dZ", (int)(wall_ms % 1000 + 1000) % 1000);
}
