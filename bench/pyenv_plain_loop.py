#!/usr/bin/python3
"""pyenv_plain_loop.py: the cost floor of bench_pyenv.c: the same 64 reference CartPoles
(tests/pyenv_faults.py cartpole(): the peer's CartPole behind the Gymnasium API, as the
bridge's workers step them) stepped in a plain Python loop with random actions and
auto-reset, no bridge. What a Python user pays for the envs alone.

    /usr/bin/python3 bench/pyenv_plain_loop.py CARTPOLE_PY [--envs 64] [--steps 2000]
        [--windows 3]

Prints "RESULT python_cartpole64.plain_loop_steps_per_s <median> <min> <max> steps/s"
(env steps: vector steps x envs, over timed windows of --steps vector steps after a warm-up)
and "RESULT python_cartpole64.plain_loop_cpu_ns_per_step <median> <min> <max> ns": the
process's CPU time per env step, which does not depend on how much of a core the loop got.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import pyenv_faults  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cartpole")
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--windows", type=int, default=3)
    a = p.parse_args()
    envs = [pyenv_faults.cartpole(a.cartpole) for _ in range(a.envs)]
    for e, env in enumerate(envs):
        env.reset(seed=e)
    rng = np.random.default_rng(0)

    cpu = []

    def window(steps):
        c0 = time.process_time_ns()
        t0 = time.perf_counter()
        for _ in range(steps):
            actions = rng.integers(0, 2, size=len(envs)).tolist()
            for env, act in zip(envs, actions):
                _, _, terminated, truncated, _ = env.step(act)
                if terminated or truncated:
                    env.reset()
        rate = steps * len(envs) / (time.perf_counter() - t0)
        cpu.append((time.process_time_ns() - c0) / (steps * len(envs)))
        return rate

    window(max(a.steps // 4, 1))
    del cpu[:]
    rates = [window(a.steps) for _ in range(a.windows)]
    print("RESULT python_cartpole%d.plain_loop_steps_per_s %.0f %.0f %.0f steps/s"
          % (a.envs, statistics.median(rates), min(rates), max(rates)))
    print("RESULT python_cartpole%d.plain_loop_cpu_ns_per_step %.0f %.0f %.0f ns"
          % (a.envs, statistics.median(cpu), min(cpu), max(cpu)))


if __name__ == "__main__":
    main()
