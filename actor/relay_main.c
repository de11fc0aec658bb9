// apex-relay: one per host, serves the host's actors the learner's weights (actor/relay.h).
#include "cli.h"
#include "relay.h"

int main(int argc, char **argv) {
    cli_args_t args;
    apex_config_t cfg;
    int rc = cli_startup("apex-relay", 0, "", argc, argv, &args, &cfg);
    if (rc >= 0) {
        return rc;
    }
    relay_t *relay = relay_new(&cfg);
    if (!relay) {
        return 2; // start-up error, already logged
    }
    rc = relay_run(relay);
    relay_destroy(&relay);
    return rc == 0 ? 0 : 1;
}
