// cli.c: see cli.h.
#include "cli.h"

#include "log.h"
#include "parse.h"
#include "signals.h"

#include <errno.h>
#include <limits.h>
#include <sys/resource.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_usage(FILE *out, const char *role, const char *usage) {
    fprintf(out,
            "usage: %s -c CONFIG [--set section.key=value ...] [options]\n"
            "  -c, --config PATH     INI file describing the run (see configs/)\n"
            "  --set S.K=V           override one key, e.g. --set learner.lr=1e-4 (repeatable)\n"
            "  --print-config        print the resolved configuration and exit\n"
            "  --help-config         list every configuration key and exit\n"
            "  --help-config-markdown  the same as a Markdown table (configs/README.md)\n"
            "  -h, --help            this message\n%s",
            role, usage);
}

// Returns -1 to continue, else an exit status.
static int s_parse(const char *role, unsigned flags, const char *usage, int argc, char **argv,
                   cli_args_t *a) {
    memset(a, 0, sizeof *a);
    a->index = -1;
    a->shard = -1;
    a->resume = 1;
    a->episodes = -1;
    a->epsilon = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t v;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            s_usage(stdout, role, usage);
            return 0;
        } else if (!strcmp(o, "--print-config")) {
            a->print_config = 1;
        } else if (!strcmp(o, "--help-config")) {
            a->help_config = 1;
        } else if (!strcmp(o, "--help-config-markdown")) {
            a->help_config = 2;
        } else if ((!strcmp(o, "-c") || !strcmp(o, "--config")) && next) {
            a->config_path = argv[++i];
        } else if (!strcmp(o, "--set") && next) {
            if (a->n_sets == CLI_MAX_SETS) {
                fprintf(stderr, "%s: too many --set options (max %d)\n", role, CLI_MAX_SETS);
                return 2;
            }
            a->sets[a->n_sets++] = argv[++i];
        } else if ((flags & CLI_FLAG_INDEX) && !strcmp(o, "--index") && next &&
                   parse_int64(next, 0, 1000000, &v) == 0) {
            a->index = (int)v;
            i++;
        } else if ((flags & CLI_FLAG_SHARD) && !strcmp(o, "--shard") && next &&
                   parse_int64(next, 0, CONFIG_MAX_SHARDS - 1, &v) == 0) {
            a->shard = (int)v;
            i++;
        } else if ((flags & CLI_FLAG_RESUME) && !strcmp(o, "--resume")) {
            a->resume = 1;
        } else if ((flags & CLI_FLAG_RESUME) && !strcmp(o, "--no-resume")) {
            a->resume = 0;
        } else if ((flags & CLI_FLAG_DUMP) && !strcmp(o, "--dump") && next) {
            a->dump = argv[++i];
        } else if ((flags & CLI_FLAG_CHECKPOINT) && !strcmp(o, "--checkpoint") && next) {
            a->checkpoint = argv[++i];
        } else if ((flags & CLI_FLAG_EPISODES) && !strcmp(o, "--episodes") && next &&
                   parse_int64(next, 1, 100000000, &v) == 0) {
            a->episodes = v;
            i++;
        } else if ((flags & CLI_FLAG_EVAL) && !strcmp(o, "--follow")) {
            a->follow = 1;
        } else if ((flags & CLI_FLAG_EVAL) && !strcmp(o, "--max-evals") && next &&
                   parse_int64(next, 1, 1000000000, &v) == 0) {
            a->max_evals = v;
            i++;
        } else if ((flags & CLI_FLAG_EVAL) && !strcmp(o, "--trace") && i + 2 < argc &&
                   parse_int64(argv[i + 1], 0, 4294967295LL, &a->trace_seed) == 0 &&
                   parse_int64(argv[i + 2], 1, 100000000, &a->trace_steps) == 0) {
            a->trace = 1;
            i += 2;
        } else if ((flags & CLI_FLAG_EVAL) && !strcmp(o, "--actions") && next) {
            a->actions = argv[++i];
        } else if ((flags & CLI_FLAG_EPSILON) && !strcmp(o, "--epsilon") && next) {
            char *end = NULL;
            a->epsilon = strtod(next, &end);
            if (end == next || *end || !(a->epsilon >= 0 && a->epsilon <= 1)) {
                fprintf(stderr, "%s: --epsilon wants a number in [0, 1], got '%s'\n", role, next);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "%s: bad argument '%s'%s\n", role, o, next ? "" : " (missing value?)");
            s_usage(stderr, role, usage);
            return 2;
        }
    }
    return -1;
}

int cli_startup(const char *role, unsigned flags, const char *usage, int argc, char **argv,
                cli_args_t *args, apex_config_t *cfg) {
    int rc = s_parse(role, flags, usage, argc, argv, args);
    if (rc >= 0) {
        return rc;
    }
    if (args->help_config) {
        if (args->help_config == 2) {
            config_help_markdown(stdout); // configs/README.md's table is generated from this
        } else {
            config_help(stdout);
        }
        return 0;
    }
    if (!args->config_path) {
        fprintf(stderr, "%s: no config given\n---> HINT: %s -c configs/cartpole.ini\n", role, role);
        return 2;
    }
    if ((flags & CLI_FLAG_INDEX) && args->index < 0) {
        fprintf(stderr, "%s: --index N is required (0 <= N < [actor] num_actors)\n", role);
        return 2;
    }
    char err[CONFIG_ERR_LEN];
    if (config_load(cfg, args->config_path, args->sets, args->n_sets, err, sizeof err) != 0) {
        fprintf(stderr, "%s: FATAL CONFIG ERROR: %s\n", role, err);
        return 2;
    }
    if ((flags & CLI_FLAG_INDEX) && args->index >= cfg->actor.num_actors) {
        fprintf(stderr, "%s: --index %d out of range: [actor] num_actors is %lld\n", role,
                args->index, (long long)cfg->actor.num_actors);
        return 2;
    }
    if (args->print_config) {
        config_print(cfg, stdout);
        return 0;
    }
    if (flags & CLI_FLAG_SHARD) {
        int K = (int)cfg->replay.shards;
        if ((K > 1 && args->shard < 0) || args->shard >= K) {
            fprintf(stderr,
                    "%s: %s: [replay] shards is %d\n---> HINT: start one %s per shard, "
                    "with --shard 0 .. --shard %d\n",
                    role, args->shard < 0 ? "--shard K is required" : "--shard out of range", K,
                    role, K - 1);
            return 2;
        }
        config_select_shard(cfg, args->shard < 0 ? 0 : args->shard);
    }
    log_set_role(role);
    log_set_level((log_level)cfg->run.log_level);
    signals_install();
    cli_raise_fd_limit();
    return -1;
}

// Each peer costs a server one or two descriptors (a TCP connection per socket it talks to,
// plus ZeroMQ's own): bench/fanout.py counted 528 in apex-learner with 256 actors and no
// relay. The common soft limit of 1 024 would stop a run at ~500 actors, with the hard limit
// (often 4 096 to 1 M) unused; a daemon may raise its own soft limit to the hard one.
long cli_raise_fd_limit(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
        return -1;
    }
    if (r.rlim_cur < r.rlim_max) {
        rlim_t before = r.rlim_cur;
        r.rlim_cur = r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0) {
            log_warn("open files limit %llu (could not raise it to %llu: %s): a server with "
                     "many peers may run out of descriptors",
                     (unsigned long long)before, (unsigned long long)r.rlim_max, strerror(errno));
            return (long)before;
        }
    }
    return r.rlim_cur == RLIM_INFINITY ? LONG_MAX : (long)r.rlim_cur;
}
