#!/usr/bin/python3
"""Steps the MinAtar reference (kenjyoung/MinAtar) as bench_env steps apex's port.

For each game: minatar.Environment(game) with its defaults (sticky_action_prob 0.1,
difficulty_ramping True), seeded, then timed windows of random actions: act(a), state()
after every act (the observation an agent reads), reset() when the episode ends. Actions
are drawn before the timed loop. One environment: the reference steps one game per call,
so 64 of them in a Python loop cost 64 times one.

Output, per game: "RESULT minatar_<game>_ref.steps_per_s <median> <min> <max> steps/s",
"RESULT minatar_<game>_ref.steps_per_cpu_s <v> <v> <v> steps/s" (all timed steps over the
process's CPU time: the one-core rate with the machine's sharing taken out) and a comment
line with the process's CPU share.

Usage: /usr/bin/python3 bench/minatar_ref.py --minatar-src DIR [--games g1,g2,...]
       [--seconds S per window, default 0.5] [--windows W, default 3]
DIR is a checkout of kenjyoung/MinAtar (the directory holding the `minatar` package); it is
imported from there and never copied into this repository.
"""
import argparse
import os
import sys
import time

GAMES = ["asterix", "breakout", "freeway", "seaquest", "space_invaders"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--minatar-src", required=True)
    p.add_argument("--games", default=",".join(GAMES))
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--windows", type=int, default=3)
    args = p.parse_args()
    sys.path.insert(0, os.path.abspath(args.minatar_src))
    import logging

    logging.disable(logging.WARNING)  # environment.py warns when matplotlib is missing
    import numpy as np
    from minatar import Environment

    for game in args.games.split(","):
        env = Environment(game)
        env.seed(1)
        env.reset()
        acts = np.random.RandomState(2).randint(0, 6, size=1 << 16).tolist()
        k, episodes = 0, 0
        # Warm-up, then windows of at least args.seconds of wall time.
        t_end = time.perf_counter() + 0.2 * args.seconds
        while time.perf_counter() < t_end:
            _, term = env.act(acts[k & 0xFFFF])
            env.state()
            k += 1
            if term:
                env.reset()
        rates, cpu, wall, steps = [], 0.0, 0.0, 0
        for _ in range(args.windows):
            n = 0
            c0, t0 = time.process_time(), time.perf_counter()
            t_end = t0 + args.seconds
            while True:
                for _ in range(256):
                    _, term = env.act(acts[k & 0xFFFF])
                    env.state()
                    k += 1
                    if term:
                        env.reset()
                        episodes += 1
                n += 256
                if time.perf_counter() >= t_end:
                    break
            dt = time.perf_counter() - t0
            cpu += time.process_time() - c0
            wall += dt
            rates.append(n / dt)
            steps += n
        rates.sort()
        med = rates[len(rates) // 2] if len(rates) % 2 else 0.5 * (
            rates[len(rates) // 2 - 1] + rates[len(rates) // 2])
        print(f"# minatar_ref {game}: {args.windows} windows of {args.seconds} s, {episodes} "
              f"episodes, process CPU {100 * cpu / wall:.0f}% of wall")
        print(f"RESULT minatar_{game}_ref.steps_per_s {med:.0f} {rates[0]:.0f} {rates[-1]:.0f} steps/s")
        print(f"RESULT minatar_{game}_ref.steps_per_cpu_s {steps / cpu:.0f} {steps / cpu:.0f} "
              f"{steps / cpu:.0f} steps/s")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
