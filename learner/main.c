// apex-learner: trains the Q-network on replayed experience (see learner/learner.h).
#define LOG_MODULE "learner"
#include "blas.h"
#include "cli.h"
#include "log.h"
#include "learner.h"
#include "nn.h"

int main(int argc, char **argv) {
    cli_args_t args;
    apex_config_t cfg;
    int rc = cli_startup("apex-learner", CLI_FLAG_RESUME,
                         "  --resume / --no-resume  continue from <run dir>/checkpoint.bin if it "
                         "exists (default: resume)\n",
                         argc, argv, &args, &cfg);
    if (rc >= 0) {
        return rc;
    }
    blas_startup(argv, cfg.run.blas_kernel); // may start the process again with another kernel
    char err[512];
    if (blas_use_library(config_blas_library_name(cfg.run.blas_library), (int)cfg.learner.threads,
                         nn_run_wants_conv_body(&cfg), err, sizeof err) != 0) {
        log_error("%s", err);
        return 2;
    }
    learner_t *learner = learner_new(&cfg, args.resume);
    if (!learner) {
        return 2; // start-up error, already logged
    }
    rc = learner_run(learner);
    learner_destroy(&learner);
    return rc == 0 ? 0 : 1;
}
