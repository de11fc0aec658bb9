// config_check.h: the checks between the keys of a loaded configuration, and the values
// derived from them. config_load calls it once the file and the --set overrides are
// applied, so every value has passed its own row's type and range (config_schema.h).
//
// What it does: [env] id resolves to the environment's dimensions, dtype, shape and scale
// (a built-in id through envinfo.h; python and external from [env]'s keys, which must then
// be given); [network] conv is parsed and walked through the observation shape; [env]
// eval_id, make and kwargs, and [python] against [actor]; the batch sizes against [replay]
// max_batch and capacity ([learner] batches_per_request = 0 resolved here); last, the sharded
// replay's endpoints, capacity and actors (config_shard_check).
// What it does not do: one value's syntax or range (config.c against the schema), printing.
// Each message starts with where the blamed key's value came from (CONFIG_WHERE): a file
// line, a --set, or the default.
#ifndef APEX_CONFIG_CHECK_H
#define APEX_CONFIG_CHECK_H

#include "config.h"

#include <stddef.h>

// Checks cfg's keys against each other and fills in its derived fields (config.h marks
// them). Returns 0, or -1 with a one-line message in err. Not thread-safe on one cfg.
int config_check(apex_config_t *cfg, char *err, size_t errlen);

#endif
