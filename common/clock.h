// clock.h: time sources. Monotonic time for every timeout and rate (STYLE S13);
// wall-clock time only for log lines and metrics rows.
#ifndef APEX_CLOCK_H
#define APEX_CLOCK_H

#include <stdint.h>

int64_t clock_now_ms(void); // CLOCK_MONOTONIC, milliseconds
int64_t clock_now_ns(void); // CLOCK_MONOTONIC, nanoseconds
double clock_wall_s(void);  // CLOCK_REALTIME, seconds since the epoch
// Writes "2026-05-01T12:00:00.123Z" (24 chars + NUL) into buf (at least 25 bytes).
void clock_iso8601(char *buf, int64_t wall_ms);
int64_t clock_wall_ms(void);

#endif
