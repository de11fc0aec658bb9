// envinfo.c: see envinfo.h. Numbers from Gymnasium's environment definitions.
#include "envinfo.h"

#include <string.h>

static const envinfo_t s_envs[] = {
    {"CartPole-v1", 4, 2, 500},
    {"Acrobot-v1", 6, 3, 500},
    {"MountainCar-v0", 2, 3, 200},
};

const envinfo_t *envinfo_find(const char *id) {
    for (size_t i = 0; i < sizeof s_envs / sizeof s_envs[0]; i++) {
        if (strcmp(s_envs[i].id, id) == 0) {
            return &s_envs[i];
        }
    }
    return NULL;
}

const char *envinfo_known_ids(void) { return "CartPole-v1, Acrobot-v1, MountainCar-v0"; }
