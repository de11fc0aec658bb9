// parse.h: decimal integers from text, with the end-pointer, overflow and range checks that
// STYLE S17 asks of every number apex reads (never atoi, never an unchecked strtol).
//
// What it does: strtoll's syntax (optional leading blanks, an optional sign, decimal digits)
// into an int64_t, either as the whole string or as the start of one (for lists and files).
// What it does not do: other bases, floats (config.c uses strtod with the same checks),
// units or suffixes, or messages (callers know what the number was for and say so).
// Every function is reentrant, and leaves errno as it found it.
#ifndef APEX_PARSE_H
#define APEX_PARSE_H

#include <stdint.h>

// The whole of s is a decimal integer in [min, max]: returns 0 with *out set, or -1 (*out
// untouched) when s is empty, has anything after the digits, overflows int64_t or is out of
// range.
int parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);

// s starts with a decimal integer: returns 0 with *out and *end (the first character after
// the digits) set, or -1 (both untouched) when it does not or the integer overflows int64_t.
// No range check: the caller's, with its own message.
int parse_int64_prefix(const char *s, int64_t *out, const char **end);

#endif
