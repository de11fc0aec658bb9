// apex-replay: the central prioritized replay server (see replay/server.h).
#include "cli.h"
#include "log.h"
#include "server.h"

int main(int argc, char **argv) {
    cli_args_t args;
    apex_config_t cfg;
    int rc = cli_startup("apex-replay", CLI_FLAG_DUMP | CLI_FLAG_SHARD,
                         "  --shard K             serve shard K of [replay] shards (required "
                         "when shards > 1)\n"
                         "  --dump PATH           restore the run's replay state (per [replay] "
                         "durability),\n"
                         "                        write it to PATH as CSV and exit\n",
                         argc, argv, &args, &cfg);
    if (rc >= 0) {
        return rc;
    }
    replay_server_t *server = replay_server_new(&cfg, args.dump == NULL);
    if (!server) {
        return 2; // start-up error, already logged
    }
    if (args.dump) {
        rc = replay_server_dump(server, args.dump);
    } else {
        rc = replay_server_run(server);
    }
    replay_server_destroy(&server);
    return rc == 0 ? 0 : 1;
}
