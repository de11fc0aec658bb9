// cli.h: the command line every apex binary shares, and the start-up sequence.
//
//   apex-<role> -c CONFIG [--set section.key=value ...] [--print-config] [--help-config]
//               [role-specific flags]
// cli_startup() parses argv, loads and validates the config, sets up logging and signals.
// It returns -1 when the daemon should go on, or the exit status main should return:
// 0 after --help/--print-config/--help-config, 2 on a usage or config error (S6.3).
#ifndef APEX_CLI_H
#define APEX_CLI_H

#include "config.h"

#define CLI_MAX_SETS 128

// Role-specific flags a binary accepts (bitmask).
enum {
    CLI_FLAG_INDEX = 1 << 0,      // --index N (actor)
    CLI_FLAG_RESUME = 1 << 1,     // --resume / --no-resume (learner)
    CLI_FLAG_CHECKPOINT = 1 << 2, // --checkpoint PATH (eval)
    CLI_FLAG_EPISODES = 1 << 3,   // --episodes N (eval)
    CLI_FLAG_EPSILON = 1 << 4,    // --epsilon X (eval)
    CLI_FLAG_DUMP = 1 << 5,       // --dump PATH (replay)
    CLI_FLAG_EVAL = 1 << 6,       // --follow, --max-evals N, --trace SEED STEPS, --actions (eval)
    CLI_FLAG_SHARD = 1 << 7,      // --shard K (replay): the config becomes shard K's
};

typedef struct {
    const char *config_path;
    const char *sets[CLI_MAX_SETS];
    int n_sets;
    int print_config;
    int help_config;
    int index;  // -1 when not given
    int shard;  // -1 when not given
    int resume; // 1 = resume when a checkpoint exists (default), 0 = --no-resume
    const char *checkpoint;
    const char *dump;
    long episodes;  // -1 when not given
    double epsilon; // -1 when not given
    int follow;
    long max_evals; // 0 = no limit
    int trace;
    int64_t trace_seed, trace_steps;
    const char *actions;
} cli_args_t;

// role: "apex-replay" etc. usage: extra usage text for role flags (may be "").
// With CLI_FLAG_SHARD, cfg is turned into shard --shard's own (config_select_shard) after
// --print-config (which prints the run's config); --shard is required when [replay] shards
// > 1 and must be below it.
int cli_startup(const char *role, unsigned flags, const char *usage, int argc, char **argv,
                cli_args_t *args, apex_config_t *cfg);
// Raises the soft limit of open files to the hard one (cli_startup calls it: one descriptor
// or two per peer add up with hundreds of actors). Returns the soft limit now in force
// (LONG_MAX for unlimited), or -1 when it cannot be read.
long cli_raise_fd_limit(void);

#endif
