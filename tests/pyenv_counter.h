// pyenv_counter.h: the model of tests/pyenv_faults.py's Counter env that the bridge's suites
// (check_pyenv.c, discrete actions; check_pyenv_cont.c, Box actions) check the workers'
// results against, and the error text of each of its fault modes. Header-only (static
// inline): two test files include it.
#ifndef APEX_PYENV_COUNTER_H
#define APEX_PYENV_COUNTER_H

#include <math.h>
#include <stddef.h>
#include <string.h>

// Counter's state: its seed, episode and step, and whether its fault has fired.
typedef struct {
    double seed;
    int ep, t, broken;
} s_ctr;

// Counter's episode length: 3 + seed mod 5 steps.
static inline int s_ctr_len(const s_ctr *c) { return 3 + (int)fmod(c->seed, 5.0); }

// Whether the 4 floats of an observation are (a, b, c, d), each as float32.
static inline int s_obs_is(const float *o, double a, double b, double c, double d) {
    return o[0] == (float)a && o[1] == (float)b && o[2] == (float)c && o[3] == (float)d;
}

// The expected error text of each fault mode of Counter.
static inline const char *s_fault_text(const char *mode) {
    static const char *const map[][2] = {{"raise", "boom at step 2"},
                                         {"nan", "non-finite observation"},
                                         {"shape", "(5,)"},
                                         {"dtype", "float64"},
                                         {"reward_nan", "the reward nan"},
                                         {"bad_return", "not (obs, reward, terminated"},
                                         {"reset_raise", "retried at the next step"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(map[i][0], mode) == 0) {
            return map[i][1];
        }
    }
    return "?";
}

#endif
