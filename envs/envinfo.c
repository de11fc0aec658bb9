// envinfo.c: see envinfo.h. Numbers from Gymnasium's environment definitions.
#include "envinfo.h"

#include <string.h>

// MinAtar (Young & Tian 2019): 10 x 10 x C frames of 0/1 bytes, all 6 actions, no time limit
// (the v0 ids of MinAtar's own Gymnasium registration).
static const envinfo_t s_envs[] = {
    {"CartPole-v1", 4, 2, 500, 0, 0, 0, 0, 1.0f},
    {"Acrobot-v1", 6, 3, 500, 0, 0, 0, 0, 1.0f},
    {"MountainCar-v0", 2, 3, 200, 0, 0, 0, 0, 1.0f},
    {"MinAtar/Asterix-v0", 400, 6, 0, 1, 10, 10, 4, 1.0f},
    {"MinAtar/Breakout-v0", 400, 6, 0, 1, 10, 10, 4, 1.0f},
    {"MinAtar/Freeway-v0", 700, 6, 0, 1, 10, 10, 7, 1.0f},
    {"MinAtar/Seaquest-v0", 1000, 6, 0, 1, 10, 10, 10, 1.0f},
    {"MinAtar/SpaceInvaders-v0", 600, 6, 0, 1, 10, 10, 6, 1.0f},
};

const envinfo_t *envinfo_find(const char *id) {
    for (size_t i = 0; i < sizeof s_envs / sizeof s_envs[0]; i++) {
        if (strcmp(s_envs[i].id, id) == 0) {
            return &s_envs[i];
        }
    }
    return NULL;
}

const char *envinfo_known_ids(void) {
    return "CartPole-v1, Acrobot-v1, MountainCar-v0, MinAtar/Asterix-v0, MinAtar/Breakout-v0, "
           "MinAtar/Freeway-v0, MinAtar/Seaquest-v0, MinAtar/SpaceInvaders-v0";
}
