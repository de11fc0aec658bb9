// config_shard.c: the sharded replay's endpoints, capacities and actors (see config_shard.h).
#include "config_shard.h"

#include "apex.h"
#include "config.h"
#include "config_schema.h"
#include "parse.h"
#include "xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Where the value of [sec] key in this function's cfg came from, for a message.
#define WHERE(sec, key) CONFIG_WHERE(cfg, sec, key)

// ---------------------------------------------------------------------------------------
// Sharded replay: which endpoints, which capacity (config_shard.h has the rule).

// The four keys that name replay endpoints, in schema order.
static const char *const s_replay_ep_keys[] = {"replay_insert_bind", "replay_insert",
                                               "replay_sample_bind", "replay_sample"};

static char *s_replay_ep_field(apex_config_t *cfg, int i) {
    config_endpoints_t *e = &cfg->endpoints;
    char *f[] = {e->replay_insert_bind, e->replay_insert, e->replay_sample_bind, e->replay_sample};
    return f[i];
}

// Splits "scheme://address" at the scheme; *addr points after "://" (NULL: no scheme).
static size_t s_scheme_len(const char *ep, const char **addr) {
    const char *p = strstr(ep, "://");
    *addr = p ? p + 3 : NULL;
    return p ? (size_t)(p + 3 - ep) : 0;
}

// The port of a tcp address ("host:port", "[v6]:port", "*:port"): a pointer to its first
// character, or NULL when the address has none.
static const char *s_tcp_port(const char *addr, size_t len) {
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
        colon = addr[i] == ':' ? addr + i : colon;
        colon = addr[i] == ']' ? NULL : colon; // a colon inside [v6] is not the port's
    }
    return colon ? colon + 1 : NULL;
}

// Writes host + ":" + (port0 + stride k, or '*') for a tcp entry without its own port.
static int s_port_plus(char *out, size_t n, const char *prefix, size_t prefix_len,
                       const char *port0, int k, char *err, size_t errlen) {
    if (strcmp(port0, "*") == 0) {
        return snprintf(out, n, "%.*s:*", (int)prefix_len, prefix) < (int)n
                   ? 0
                   : apex_errf(err, errlen, -1, "too long");
    }
    int64_t p = 0;
    int rc = parse_int64(port0, 1, 65535, &p);
    int64_t q = p + (int64_t)CONFIG_SHARD_PORT_STRIDE * k;
    if (rc != 0 || q > 65535) {
        return apex_errf(err, errlen, -1, "port '%s' + %d is not a port", port0,
                         CONFIG_SHARD_PORT_STRIDE * k);
    }
    return snprintf(out, n, "%.*s:%lld", (int)prefix_len, prefix, (long long)q) < (int)n
               ? 0
               : apex_errf(err, errlen, -1, "too long");
}

int config_shard_endpoint(const char *value, int k, int K, char *out, size_t n, char *err,
                          size_t errlen) {
    if (K <= 1) {
        return snprintf(out, n, "%s", value) < (int)n ? 0 : apex_errf(err, errlen, -1, "too long");
    }
    int entries = 1;
    for (const char *c = value; *c; c++) {
        entries += *c == ',';
    }
    if (entries != 1 && entries != K) {
        return apex_errf(err, errlen, -1,
                         "'%s' has %d endpoints; [replay] shards is %d (give one endpoint, or one "
                         "per shard, comma separated)",
                         value, entries, K);
    }
    const char *addr0;
    size_t scheme = s_scheme_len(value, &addr0);
    size_t first_len = strcspn(value, ",");
    if (!scheme || scheme > first_len) {
        return apex_errf(err, errlen, -1, "'%s': the first endpoint needs a scheme (tcp://...)",
                         value);
    }
    int tcp = strncmp(value, "tcp://", 6) == 0;
    char port0[16] = "";
    if (tcp) {
        const char *p = s_tcp_port(addr0, first_len - scheme);
        size_t plen = p ? (size_t)(value + first_len - p) : 0;
        if (!p || plen == 0 || plen >= sizeof port0) {
            return apex_errf(err, errlen, -1, "'%.*s' has no port", (int)first_len, value);
        }
        memcpy(port0, p, plen);
        port0[plen] = '\0';
    }
    if (entries == 1) { // one endpoint for all: port + stride k, or a suffix
        if (tcp) {
            size_t host = first_len - strlen(port0) - 1;
            return s_port_plus(out, n, value, host, port0, k, err, errlen);
        }
        int w = k == 0 ? snprintf(out, n, "%s", value) : snprintf(out, n, "%s-%d", value, k);
        return w < (int)n ? 0 : apex_errf(err, errlen, -1, "too long");
    }
    const char *e = value;
    for (int i = 0; i < k; i++) {
        e += strcspn(e, ",") + 1;
    }
    size_t len = strcspn(e, ",");
    if (len == 0) {
        return apex_errf(err, errlen, -1, "'%s': endpoint %d is empty", value, k);
    }
    char entry[CONFIG_STR_LEN];
    const char *addr;
    if (s_scheme_len(e, &addr) == 0 || (size_t)(addr - e) > len) { // no scheme: the first's
        snprintf(entry, sizeof entry, "%.*s%.*s", (int)scheme, value, (int)len, e);
    } else {
        snprintf(entry, sizeof entry, "%.*s", (int)len, e);
    }
    s_scheme_len(entry, &addr);
    if (tcp && strncmp(entry, "tcp://", 6) == 0 && !s_tcp_port(addr, strlen(addr))) {
        return s_port_plus(out, n, entry, strlen(entry), port0, k, err, errlen);
    }
    return snprintf(out, n, "%s", entry) < (int)n ? 0 : apex_errf(err, errlen, -1, "too long");
}

int64_t config_shard_capacity(const apex_config_t *cfg, int k) {
    int64_t K = cfg->replay.shards, c = cfg->replay.capacity;
    return c / K + (k < c % K ? 1 : 0);
}

int config_frame_mode(const apex_config_t *cfg) {
    return cfg->replay.frame_storage && (cfg->env.frame_stack > 1 || cfg->replay.compress != 0);
}

int64_t config_shard_frame_capacity(const apex_config_t *cfg, int k) {
    int64_t K = cfg->replay.shards, f = cfg->replay.frame_capacity;
    if (f == 0) {
        int64_t c = config_shard_capacity(cfg, k);
        f = c + c / 256 + 4096;
        return f > (1LL << 31) ? (1LL << 31) : f;
    }
    return f / K + (k < f % K ? 1 : 0);
}

uint32_t config_frame_window(const apex_config_t *cfg) {
    uint64_t need = 2 * ((uint64_t)cfg->replay.max_batch + 2 * (uint64_t)cfg->actor.envs_per_actor *
                                                               (uint64_t)(cfg->actor.n_step + 2));
    uint32_t w = 16;
    while (w < need && w < (1u << 24)) {
        w <<= 1;
    }
    return w;
}

int config_actor_shard(const apex_config_t *cfg, int index) {
    return (int)(index % cfg->replay.shards);
}

int config_select_shard(apex_config_t *cfg, int k) {
    int K = (int)cfg->replay.shards;
    if (k < 0 || k >= K) {
        return -1;
    }
    if (K == 1) {
        return 0; // the config is shard 0's as it is
    }
    char err[CONFIG_ERR_LEN];
    for (int i = 0; i < 4; i++) {
        char ep[CONFIG_STR_LEN] = {0}; // zero-filled: the struct stays comparable with memcmp
        if (config_shard_endpoint(s_replay_ep_field(cfg, i), k, K, ep, sizeof ep, err,
                                  sizeof err) != 0) {
            return -1; // config_load checked every key resolves: not reached after it
        }
        memcpy(s_replay_ep_field(cfg, i), ep, sizeof ep);
    }
    cfg->replay.capacity = config_shard_capacity(cfg, k);
    cfg->replay.shard = k;
    return 0;
}

// [replay] shards > 1: every replay endpoint resolves for every shard, and the shards that
// clients connect to are distinct (two entries reaching one server would count its priority
// mass twice); each shard holds at least one transition and has at least one actor.
int config_shard_check(apex_config_t *cfg, char *err, size_t errlen) {
    int K = (int)cfg->replay.shards;
    if (K == 1) {
        return 0;
    }
    if (cfg->replay.capacity < K || cfg->actor.num_actors < K) {
        const char *key = cfg->replay.capacity < K ? "capacity" : "num_actors";
        return apex_errf(
            err, errlen, -1,
            "%s: [replay] shards: %d shards need a capacity and [actor] num_actors of "
            "at least %d (%s is %lld: %s)",
            WHERE("replay", "shards"), K, K, key,
            (long long)(cfg->replay.capacity < K ? cfg->replay.capacity : cfg->actor.num_actors),
            WHERE(cfg->replay.capacity < K ? "replay" : "actor", key));
    }
    // Binds (keys 0, 2) and connects (1, 3) are checked as two sets: within each, the insert
    // and sample endpoints of every shard and the learner's two must all differ.
    const config_endpoints_t *le = &cfg->endpoints;
    const char *learner[2][2] = {{le->learner_weights_bind, le->learner_stats_bind},
                                 {le->learner_weights, le->learner_stats}};
    char(*eps)[CONFIG_STR_LEN] = xcalloc(4 * (size_t)K, CONFIG_STR_LEN); // [set][index]
    int n[2] = {0, 0}, rc = 0;
    char why[CONFIG_ERR_LEN];
    for (int i = 0; i < 4 && rc == 0; i++) {
        int set = i % 2;
        char(*seen)[CONFIG_STR_LEN] = eps + (size_t)set * 2 * K;
        for (int k = 0; k < K && rc == 0; k++) {
            char *e = seen[n[set]];
            if (config_shard_endpoint(s_replay_ep_field(cfg, i), k, K, e, CONFIG_STR_LEN, why,
                                      sizeof why) != 0) {
                rc = apex_errf(err, errlen, -1, "%s: [endpoints] %s: shard %d: %s",
                               WHERE("endpoints", s_replay_ep_keys[i]), s_replay_ep_keys[i], k,
                               why);
                break;
            }
            const char *clash = NULL;
            for (int j = 0; j < n[set] && !clash && !strstr(e, ":*"); j++) {
                clash = strcmp(seen[j], e) == 0 ? "another replay shard" : NULL;
            }
            for (int j = 0; j < 2 && !clash && !strstr(e, ":*"); j++) {
                clash = strcmp(learner[set][j], e) == 0 ? "the learner" : NULL;
            }
            if (clash) {
                rc = apex_errf(
                    err, errlen, -1, "%s: [endpoints] %s: shard %d is at %s, which %s uses",
                    WHERE("endpoints", s_replay_ep_keys[i]), s_replay_ep_keys[i], k, e, clash);
            }
            n[set]++;
        }
    }
    free(eps);
    return rc;
}
