// apex-actor: steps environments and feeds the replay server (see actor/actor.h).
#define LOG_MODULE "actor"
#include "actor.h"
#include "blas.h"
#include "cli.h"
#include "log.h"
#include "nn.h"

int main(int argc, char **argv) {
    cli_args_t args;
    apex_config_t cfg;
    int rc = cli_startup("apex-actor", CLI_FLAG_INDEX,
                         "  --index N             this actor's index, 0 <= N < [actor] "
                         "num_actors (required)\n",
                         argc, argv, &args, &cfg);
    if (rc >= 0) {
        return rc;
    }
    blas_startup(argv, cfg.run.blas_kernel); // may start the process again with another kernel
    char err[512];
    if (blas_use_library(config_blas_library_name(cfg.run.blas_library), 1,
                         nn_run_wants_conv_body(&cfg), err, sizeof err) != 0) {
        log_error("%s", err);
        return 2;
    }
    actor_t *actor = actor_new(&cfg, args.index);
    if (!actor) {
        return 2; // start-up error, already logged
    }
    rc = actor_run(actor, 0);
    actor_destroy(&actor);
    return rc == 0 ? 0 : 1;
}
