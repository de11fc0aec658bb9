// config_schema.h: the configuration's schema, one row per key (STYLE S17), and lookups in
// it. Internal to the config modules: config.c (the engine), config_check.c and
// config_shard.c include it; everything else uses config.h.
//
// What it does: holds every key's row (section, name, type, place in apex_config_t, range,
// default, choices, help) in the order --print-config and --help-config write them, and the
// keys that were retired, with why; finds a row; says where a key's value came from.
// What it does not do: parse, print or check values (config.c, config_check.c). A new key is
// a row in config_schema.c, its field in config.h, a row in tests/check_keys.c and its line
// in the configs/*.ini that set it (configs/README.md is generated).
#ifndef APEX_CONFIG_SCHEMA_H
#define APEX_CONFIG_SCHEMA_H

#include "config.h"

#include <stddef.h>

// A value's type. The names are short because the rows spell one each.
typedef enum { T_INT, T_FLOAT, T_BOOL, T_STR, T_ENUM, T_INTLIST } config_type;

typedef struct {
    const char *section;
    const char *key;
    config_type type;
    size_t offset; // into apex_config_t
    size_t size;   // T_STR: buffer size
    double min, max;
    const char *def;
    const char *choices; // T_ENUM: "a|b|c" (stored as the index)
    const char *help;
} config_row_t;

// An int key's max that means "no limit" (--help-config says so instead of the number).
#define CONFIG_NO_LIMIT 9.0e18

// The rows, config_schema_len of them (at most CONFIG_MAX_KEYS): apex_config_t's origin_line
// and origin_set are indexed by row.
extern const config_row_t config_schema[];
extern const size_t config_schema_len;

// The row of [section] key, or NULL.
const config_row_t *config_schema_find(const char *section, const char *key);
// 1 when [section] has a key, else 0.
int config_schema_has_section(const char *section);
// Why [section] key was removed (a static string), or NULL when it is no retired key.
const char *config_schema_retired(const char *section, const char *key);
// Where [section] key's value (a schema key: asserted) came from, for the messages of the
// cross checks, which would otherwise blame the file for a value given by --set:
// "--set section.key", "file:line", or "file (default)". Writes into buf and returns it.
const char *config_schema_where(const apex_config_t *cfg, const char *section, const char *key,
                                char *buf, size_t n);
// config_schema_where into a buffer of the enclosing block (for one message's arguments).
#define CONFIG_WHERE_LEN (CONFIG_STR_LEN + 32)
#define CONFIG_WHERE(cfg, sec, key)                                                                \
    config_schema_where((cfg), (sec), (key), (char[CONFIG_WHERE_LEN]){0}, CONFIG_WHERE_LEN)

#endif
