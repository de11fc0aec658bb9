// config_shard.h: the sharded replay's derivation from the run configuration ([replay]
// shards = K > 1; docs/architecture.md "Sharded replay"): which endpoints shard k binds and
// is reached at, how many transitions it holds, which shard an actor inserts into, and the
// config a shard's own process runs with. config.h includes it, so every user of the config
// has these.
//
// Each [endpoints] replay_* key names the endpoints of all K shards: either one endpoint,
// which shard k uses with tcp port P + 10 k (a wildcard port '*' stays '*'; an ipc:// or
// inproc:// path gets the suffix "-k" for k > 0), or a list of exactly K comma-separated
// endpoints, the k-th for shard k, where an entry may leave out the scheme (then the first
// entry's) and, for tcp, the port (then the first entry's port + 10 k):
//   tcp://node1:5550,node2,node3        -> node1:5550, node2:5560, node3:5570
// The stride of 10 keeps the shards of one host clear of the default ports, which are
// consecutive (5550 inserts, 5551 samples, 5552 and 5553 the learner's).
// With K = 1 every value means what it always did (it is used as written).
//
// What it does not do: connect or bind anything (learner/shards.c, replay/server.c), or
// choose a shard to sample (learner/shards.c). Functions of the config alone; reentrant.
#ifndef APEX_CONFIG_SHARD_H
#define APEX_CONFIG_SHARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct apex_config_s apex_config_t; // config.h

#define CONFIG_SHARD_PORT_STRIDE 10 // shard k of "tcp://host:P" listens on P + 10 k

// Writes the endpoint of shard k (0 <= k < K) that `value` names into out (n bytes).
// Returns 0, or -1 with the reason in err (a list of the wrong length, a tcp endpoint without
// a port, a port beyond 65535, too long).
int config_shard_endpoint(const char *value, int k, int K, char *out, size_t n, char *err,
                          size_t errlen);
// Transitions shard k holds: capacity / K, the first capacity % K shards one more.
int64_t config_shard_capacity(const apex_config_t *cfg, int k);

// Frame mode (issue #27): [replay] frame_storage with [env] frame_stack > 1 or [replay]
// compress. Actors then send each new frame once, and the replay stores it once
// (replay/store.h "Frames"), compressed with [replay] compress.
int config_frame_mode(const apex_config_t *cfg);
// Frames shard k holds: its share of [replay] frame_capacity, or by default its capacity plus
// 1/256 and 4096 (store_frame_capacity_default's rule).
int64_t config_shard_frame_capacity(const apex_config_t *cfg, int k);
// Frame numbers of one actor the replay resolves (a power of 2): a row names frames at most
// n_step + 1 steps of its env back, 2 frames per env and step at most (an episode's final
// frame and the next one's first), plus a batch of max_batch frames; twice that for margin.
uint32_t config_frame_window(const apex_config_t *cfg);
// The shard actor `index` inserts into: index mod K (its exactly-once marks and acks live
// there; docs/architecture.md says why).
int config_actor_shard(const apex_config_t *cfg, int index);
// Turns a loaded config into shard k's own: the four [endpoints] replay_* keys become shard
// k's endpoints, [replay] capacity its share, [replay] shard = k. A K = 1 config with k = 0 is
// unchanged. Returns 0, or -1 when k is not below [replay] shards. (config_load has checked
// that every endpoint resolves.)
int config_select_shard(apex_config_t *cfg, int k);

// The check config_load makes (through config_check) that the above can be done for every
// shard: with K > 1, every replay endpoint resolves for every shard, the shards that clients
// connect to are distinct from each other and from the learner's endpoints, and each shard
// holds at least one transition and has at least one actor. Returns 0, or -1 with a one-line
// message naming where the blamed key's value came from. cfg is not changed.
int config_shard_check(apex_config_t *cfg, char *err, size_t errlen);

#endif
