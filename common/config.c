// config.c: the configuration's engine (see config.h): a value parsed and validated against
// its schema row, defaults, the INI file, --set, and the resolved config and the reference
// printed, all driven by the rows of config_schema.c.
//
// What it does not do: hold the rows (config_schema.c), check keys against each other or
// derive values from several (config_check.c), or derive a replay shard's endpoints
// (config_shard.c).
#include "config.h"

#include "apex.h"
#include "config_check.h"
#include "config_schema.h"
#include "parse.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Value parsing: one function per type, all with end-pointer and range checks.

// An integer against the row's range (doubles, as for every type).
static int s_int_in_range(int64_t x, const config_row_t *r, char *err, size_t errlen) {
    if ((double)x < r->min || (double)x > r->max) {
        return apex_errf(err, errlen, -1, "%lld is out of range [%.0f, %.0f]", (long long)x, r->min,
                         r->max);
    }
    return 0;
}

static int s_parse_int(const char *v, const config_row_t *r, int64_t *out, char *err,
                       size_t errlen) {
    int64_t x;
    if (parse_int64(v, INT64_MIN, INT64_MAX, &x) != 0) {
        return apex_errf(err, errlen, -1, "'%s' is not an integer", v);
    }
    if (s_int_in_range(x, r, err, errlen) != 0) {
        return -1;
    }
    *out = x;
    return 0;
}

static int s_parse_float(const char *v, const config_row_t *r, double *out, char *err,
                         size_t errlen) {
    errno = 0;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !isfinite(x)) {
        return apex_errf(err, errlen, -1, "'%s' is not a finite number", v);
    }
    if (x < r->min || x > r->max) {
        return apex_errf(err, errlen, -1, "%g is out of range [%g, %g]", x, r->min, r->max);
    }
    *out = x;
    return 0;
}

static int s_parse_bool(const char *v, int *out, char *err, size_t errlen) {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcmp(v, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return apex_errf(err, errlen, -1, "'%s' is not a boolean (true/false)", v);
}

static int s_parse_enum(const char *v, const config_row_t *r, int *out, char *err, size_t errlen) {
    const char *p = r->choices;
    for (int i = 0; *p; i++) {
        size_t n = strcspn(p, "|");
        if (strlen(v) == n && strncmp(v, p, n) == 0) {
            *out = i;
            return 0;
        }
        p += n + (p[n] == '|');
    }
    return apex_errf(err, errlen, -1, "'%s' is not one of %s", v, r->choices);
}

static int s_parse_intlist(const char *v, const config_row_t *r, apex_config_t *cfg, char *err,
                           size_t errlen) {
    // Only [network] hidden uses this type; its count lives next to it.
    int vals[CONFIG_MAX_HIDDEN] = {0};
    int n = 0;
    const char *p = v;
    while (1) {
        int64_t x;
        const char *end;
        if (parse_int64_prefix(p, &x, &end) != 0) {
            return apex_errf(err, errlen, -1, "'%s' is not a comma-separated list of integers", v);
        }
        if (s_int_in_range(x, r, err, errlen) != 0) {
            return -1;
        }
        if (n == CONFIG_MAX_HIDDEN) {
            return apex_errf(err, errlen, -1, "at most %d values allowed", CONFIG_MAX_HIDDEN);
        }
        vals[n++] = (int)x;
        while (*end == ' ') {
            end++;
        }
        if (*end == '\0') {
            break;
        }
        if (*end != ',') {
            return apex_errf(err, errlen, -1, "'%s' is not a comma-separated list of integers", v);
        }
        p = end + 1;
    }
    memcpy(cfg->network.hidden, vals, sizeof vals);
    cfg->network.n_hidden = n;
    return 0;
}

static int s_apply(apex_config_t *cfg, const config_row_t *r, const char *v, char *err,
                   size_t errlen) {
    char *base = (char *)cfg + r->offset;
    switch (r->type) {
    case T_INT:
        return s_parse_int(v, r, (int64_t *)base, err, errlen);
    case T_FLOAT:
        return s_parse_float(v, r, (double *)base, err, errlen);
    case T_BOOL:
        return s_parse_bool(v, (int *)base, err, errlen);
    case T_ENUM:
        return s_parse_enum(v, r, (int *)base, err, errlen);
    case T_INTLIST:
        return s_parse_intlist(v, r, cfg, err, errlen);
    case T_STR:
        if (strlen(v) < r->min) {
            return apex_errf(err, errlen, -1, "must not be empty");
        }
        // --print-config must write a file that loads back to the same values: refuse what
        // INI cannot carry (a leading comment character, surrounding blanks, control
        // characters, or a line longer than libinih's INI_MAX_LINE).
        if (v[0] == ';' || v[0] == '#' || v[0] == ' ' || v[0] == '\t' ||
            (v[0] && (v[strlen(v) - 1] == ' ' || v[strlen(v) - 1] == '\t'))) {
            return apex_errf(err, errlen, -1,
                             "must not start with ';' or '#' or start/end with blanks");
        }
        for (const char *c = v; *c; c++) {
            if ((unsigned char)*c < 0x20) {
                return apex_errf(err, errlen, -1, "must not contain control characters");
            }
            if (c[0] == ' ' && (c[1] == ';' || c[1] == '#')) {
                return apex_errf(err, errlen, -1,
                                 "must not contain ' ;' or ' #' (read as a comment)");
            }
        }
        if (strlen(r->key) + 3 + strlen(v) > INI_MAX_LINE - 2) {
            return apex_errf(err, errlen, -1, "too long for one INI line (%d characters)",
                             INI_MAX_LINE - 2);
        }
        if (strlen(v) >= r->size) {
            return apex_errf(err, errlen, -1, "longer than %zu characters", r->size - 1);
        }
        memcpy(base, v, strlen(v) + 1);
        return 0;
    }
    return apex_errf(err, errlen, -1, "internal: unknown type");
}

void config_defaults(apex_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char err[CONFIG_ERR_LEN];
    for (size_t i = 0; i < config_schema_len; i++) {
        if (s_apply(cfg, &config_schema[i], config_schema[i].def, err, sizeof err) != 0) {
            APEX_PANIC("config schema default for [%s] %s: %s", config_schema[i].section,
                       config_schema[i].key, err);
        }
    }
}

// ---------------------------------------------------------------------------------------
// INI file reading. libinih does not report line numbers to the handler in Debian's build
// (INI_HANDLER_LINENO is 0), so a reader wrapper counts lines as inih pulls them.

typedef struct {
    FILE *f;
    int line;       // line number of the line inih is processing
    int next_line;  // line number of the next line to read
    int indented;   // the current line starts with whitespace (a continuation line)
    int too_long;   // a line did not fit inih's buffer
    int bad_header; // line of a "[" without its "]" (inih keeps the section before)
    char bad_text[64];
    apex_config_t *cfg;
    unsigned char seen[CONFIG_MAX_KEYS];
    char *err;
    size_t errlen;
    int failed;
} s_ini_ctx;

static char *s_reader(char *str, int num, void *stream) {
    s_ini_ctx *c = stream;
    char *r = fgets(str, num, c->f);
    if (!r) {
        return NULL;
    }
    size_t n = strlen(str);
    c->line = c->next_line;
    c->indented = (str[0] == ' ' || str[0] == '\t');
    const char *t = str + strspn(str, " \t");
    if (*t == '[' && !strchr(t, ']') && !c->bad_header) {
        c->bad_header = c->line;
        snprintf(c->bad_text, sizeof c->bad_text, "%.*s", (int)strcspn(t, "\r\n"), t);
    }
    if (n > 0 && str[n - 1] == '\n') {
        c->next_line++;
    } else if (!feof(c->f)) {
        c->too_long = 1;
    }
    return r;
}

static int s_handler(void *user, const char *section, const char *key, const char *value) {
    s_ini_ctx *c = user;
    if (c->failed) {
        return 0;
    }
    char why[CONFIG_ERR_LEN];
    const config_row_t *r = config_schema_find(section, key);
    if (c->bad_header) {
        snprintf(c->err, c->errlen, "%s:%d: '%s' is not a section header (missing ']')",
                 c->cfg->source, c->bad_header, c->bad_text);
        c->failed = 1;
        return 0;
    }
    if (c->too_long) {
        snprintf(why, sizeof why, "line too long");
    } else if (!config_schema_has_section(section)) {
        snprintf(why, sizeof why, "unknown section");
    } else if (!r && config_schema_retired(section, key)) {
        snprintf(why, sizeof why, "%s", config_schema_retired(section, key));
    } else if (!r) {
        snprintf(why, sizeof why, "unknown key (see --help-config)");
    } else if (c->indented) {
        snprintf(why, sizeof why, "indented continuation lines are not supported");
    } else if (c->seen[r - config_schema]) {
        snprintf(why, sizeof why, "duplicate key");
    } else if (s_apply(c->cfg, r, value, why, sizeof why) == 0) {
        c->seen[r - config_schema] = 1;
        c->cfg->origin_line[r - config_schema] = (uint16_t)(c->line > 65535 ? 65535 : c->line);
        return 1;
    }
    snprintf(c->err, c->errlen, "%s:%d: [%s] %s: %s", c->cfg->source, c->line, section, key, why);
    c->failed = 1;
    return 0;
}

static int s_load_file(apex_config_t *cfg, const char *path, char *err, size_t errlen) {
    s_ini_ctx c = {.line = 0, .next_line = 1, .cfg = cfg, .err = err, .errlen = errlen};
    c.f = fopen(path, "r");
    if (!c.f) {
        return apex_errf(err, errlen, -1, "%s: cannot open config: %s", path, strerror(errno));
    }
    int rc = ini_parse_stream(s_reader, &c, s_handler, &c);
    fclose(c.f);
    if (c.failed) {
        return -1;
    }
    if (c.bad_header) {
        return apex_errf(err, errlen, -1, "%s:%d: '%s' is not a section header (missing ']')", path,
                         c.bad_header, c.bad_text);
    }
    if (rc != 0) {
        if (c.too_long) {
            return apex_errf(err, errlen, -1, "%s:%d: line too long", path, c.line);
        }
        return apex_errf(err, errlen, -1,
                         "%s:%d: syntax error (expected '[section]' or 'key = value')", path,
                         rc > 0 ? rc : c.line);
    }
    return 0;
}

int config_set(apex_config_t *cfg, const char *assignment, char *err, size_t errlen) {
    const char *dot = strchr(assignment, '.');
    const char *eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq) {
        return apex_errf(err, errlen, -1, "--set %s: expected section.key=value", assignment);
    }
    char section[64], key[64];
    size_t ls = (size_t)(dot - assignment), lk = (size_t)(eq - dot - 1);
    if (ls == 0 || ls >= sizeof section || lk == 0 || lk >= sizeof key) {
        return apex_errf(err, errlen, -1, "--set %s: expected section.key=value", assignment);
    }
    memcpy(section, assignment, ls);
    section[ls] = '\0';
    memcpy(key, dot + 1, lk);
    key[lk] = '\0';
    const config_row_t *r = config_schema_find(section, key);
    if (!r) {
        const char *retired = config_schema_retired(section, key);
        return apex_errf(err, errlen, -1, "--set: [%s] %s: %s", section, key,
                         retired ? retired : "unknown key (see --help-config)");
    }
    char why[CONFIG_ERR_LEN];
    if (s_apply(cfg, r, eq + 1, why, sizeof why) != 0) {
        return apex_errf(err, errlen, -1, "--set: [%s] %s: %s", section, key, why);
    }
    cfg->origin_set[r - config_schema] = 1;
    return 0;
}

// Defaults, the file, the overrides, then the checks between keys (config_check.h).
int config_load(apex_config_t *cfg, const char *path, const char *const *sets, int n_sets,
                char *err, size_t errlen) {
    config_defaults(cfg);
    snprintf(cfg->source, sizeof cfg->source, "%s", path ? path : "(defaults)");
    if (path && s_load_file(cfg, path, err, errlen) != 0) {
        return -1;
    }
    for (int i = 0; i < n_sets; i++) {
        if (config_set(cfg, sets[i], err, errlen) != 0) {
            return -1;
        }
    }
    return config_check(cfg, err, errlen);
}

// ---------------------------------------------------------------------------------------
// Printing: the resolved config as INI, and the reference.

static void s_format_value(const apex_config_t *cfg, const config_row_t *r, char *buf, size_t n) {
    const char *base = (const char *)cfg + r->offset;
    switch (r->type) {
    case T_INT:
        snprintf(buf, n, "%lld", (long long)*(const int64_t *)base);
        break;
    case T_FLOAT:
        snprintf(buf, n, "%.17g", *(const double *)base);
        break;
    case T_BOOL:
        snprintf(buf, n, "%s", *(const int *)base ? "true" : "false");
        break;
    case T_STR:
        snprintf(buf, n, "%s", base);
        break;
    case T_ENUM: {
        const char *p = r->choices;
        for (int i = *(const int *)base; i > 0 && *p; i--) {
            p += strcspn(p, "|") + 1;
        }
        snprintf(buf, n, "%.*s", (int)strcspn(p, "|"), p);
        break;
    }
    case T_INTLIST: {
        size_t off = 0;
        buf[0] = '\0';
        for (int i = 0; i < cfg->network.n_hidden && off < n; i++) {
            off += (size_t)snprintf(buf + off, n - off, "%s%d", i ? "," : "",
                                    cfg->network.hidden[i]);
        }
        break;
    }
    }
}

void config_print(const apex_config_t *cfg, FILE *out) {
    const char *section = "";
    fprintf(out, "; resolved configuration (from %s)\n", cfg->source);
    for (size_t i = 0; i < config_schema_len; i++) {
        if (strcmp(section, config_schema[i].section) != 0) {
            section = config_schema[i].section;
            fprintf(out, "\n[%s]\n", section);
        }
        char v[CONFIG_STR_LEN + 32];
        s_format_value(cfg, &config_schema[i], v, sizeof v);
        fprintf(out, "%s = %s\n", config_schema[i].key, v);
    }
}

static const char *s_type_name(const config_row_t *r) {
    static const char *const names[] = {"int", "float", "bool", "string", "enum", "int list"};
    return names[r->type];
}

static void s_range(const config_row_t *r, char *buf, size_t n) {
    if (r->type == T_INT || r->type == T_INTLIST) {
        if (r->max >= CONFIG_NO_LIMIT) {
            snprintf(buf, n, "%.0f .. (no limit)", r->min);
        } else {
            snprintf(buf, n, "%.0f .. %.0f", r->min, r->max);
        }
    } else if (r->type == T_FLOAT) {
        snprintf(buf, n, "%g .. %g", r->min, r->max);
    } else if (r->type == T_ENUM) {
        snprintf(buf, n, "%s", r->choices);
    } else {
        snprintf(buf, n, "%s", r->type == T_BOOL ? "true|false" : "");
    }
}

void config_help(FILE *out) {
    const char *section = "";
    for (size_t i = 0; i < config_schema_len; i++) {
        const config_row_t *r = &config_schema[i];
        if (strcmp(section, r->section) != 0) {
            section = r->section;
            fprintf(out, "\n[%s]\n", section);
        }
        char range[128];
        s_range(r, range, sizeof range);
        fprintf(out, "  %-22s %-8s default %-22s %s\n  %-22s %-8s %s\n", r->key, s_type_name(r),
                r->def, range, "", "", r->help);
    }
}

// Writes s with the characters that Markdown tables and HTML would swallow escaped.
static void s_md(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|') {
            fputs(" / ", out);
        } else if (*s == '<') {
            fputs("&lt;", out);
        } else if (*s == '>') {
            fputs("&gt;", out);
        } else {
            fputc(*s, out);
        }
    }
}

void config_help_markdown(FILE *out) {
    fprintf(out,
            "| section | key | type | default | range | meaning |\n|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < config_schema_len; i++) {
        const config_row_t *r = &config_schema[i];
        char range[128];
        s_range(r, range, sizeof range);
        fprintf(out, "| %s | %s | %s | `%s` | ", r->section, r->key, s_type_name(r), r->def);
        s_md(out, range);
        fputs(" | ", out);
        s_md(out, r->help);
        fputs(" |\n", out);
    }
}
