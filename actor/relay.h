// relay.h: apex-relay, the weights of one host's actors fetched once (issue #29).
//
// Ape-X's actors each ask the learner for weights: with hundreds of actors the learner's
// egress is actors x weights size per refresh. A relay runs once per host. It is a weights
// client of the learner (common/weights_client.h, CURVE with the actors' key when [security]
// mode = curve), takes each version once, and serves it on [endpoints] relay (an ipc://
// socket in the run's directory, or tcp:// on a trusted network) with the learner's own
// endpoint (common/weights_server.h): held requests, the 1-1.5 s heartbeat, versions that
// only increase for a peer that holds a newer one. Actors whose config names a relay ask it
// instead of the learner and change nothing else. The learner's egress then grows with
// hosts, not actors.
//
// What it takes from the learner is judged as an actor judges it (wire_weights_judge: a
// restarted learner's stragglers ignored, a learner started afresh followed after it has
// been quiet), and a Weights message of another size than the run's network
// (nn_run_weights_params) or any other message is dropped and counted, never served. A
// learner silent for WEIGHTS_SILENT_MS (weights_client.h) is reconnected by hand (as the actors do). Nothing a
// peer sends on either side can stop the relay; SIGTERM does.
#ifndef APEX_RELAY_H
#define APEX_RELAY_H

#include <stdint.h>

#include "config.h"

typedef struct relay relay_t;

typedef struct {
    uint64_t version;    // the version served (0: none yet)
    uint64_t taken;      // versions taken from the learner
    uint64_t bad;        // messages from the learner dropped (not Weights of the run's size)
    uint64_t stale;      // older versions ignored (a restarted learner's stragglers)
    uint64_t reconnects; // to a learner silent for WEIGHTS_SILENT_MS
    uint64_t requests;   // valid requests of the host's actors
    uint64_t answers;    // answers to them
    uint64_t bytes;      // Weights bytes in those answers
    uint64_t refused;    // messages on the actors' side that were not valid requests
} relay_stats_t;

// Connects to the learner ([endpoints] learner_weights) and binds [endpoints] relay (which
// must be set; config_check says so). Returns NULL after logging why.
relay_t *relay_new(const apex_config_t *cfg);
void relay_destroy(relay_t **self_p);
// Runs until relay_stop or SIGINT/SIGTERM. Returns 0.
int relay_run(relay_t *self);
void relay_stop(relay_t *self);                          // from any thread
void relay_get_stats(relay_t *self, relay_stats_t *out); // from any thread
// The endpoint the actors' side is bound to (an ephemeral tcp port resolved).
const char *relay_endpoint(const relay_t *self);

#endif
