#!/usr/bin/python3
"""Checks of scripts/apex-experiment's statistics against independent references, and of its
aggregation on fabricated run directories (run by tests/smoke/experiment.sh, which counts
the lines): prints "ok <what>" or "FAIL <what>" per check.

  experiment_stats.py SCRATCH_DIR

(a) IQM against hand-computed values (scipy.stats.trim_mean(x, 0.25): int(0.25 n) cut from
    each end; scipy is not a dependency, and rliable's IQM is exactly that on the flattened
    scores);
(b) the stratified bootstrap against the exact bootstrap distribution, enumerated: with 2
    tasks x 2 runs every one of the 4 x 4 = 16 resamples is equally likely, with 2 tasks x 3
    runs the 27 x 27; a pooled resampler (mixing tasks) is shown to fail the same check;
(c) apex-experiment aggregate on run directories written here with the daemons' real
    eval.csv and metrics.csv headers (actor/evaluator.c, learner/metrics.c), scores chosen
    so that every statistic is known by hand.
"""
import csv
import importlib.machinery
import importlib.util
import itertools
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "scripts", "apex-experiment")
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1


def load_tool():
    loader = importlib.machinery.SourceFileLoader("apex_experiment", TOOL)
    spec = importlib.util.spec_from_loader("apex_experiment", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


X = load_tool()

# ---------------------------------------------------------------------------------------
# (a) IQM by hand. n: int(0.25 n) cut from each end.
HAND = [
    (list(range(1, 9)), (3 + 4 + 5 + 6) / 4),                          # n 8, cut 2: 4.5
    # Skewed values, so that cutting one more or one less changes the result:
    ([100, 0, 8, 1, 0, 4, 2], (0 + 1 + 2 + 4 + 8) / 5),                # n 7, cut int(1.75) = 1 (2: 2.33)
    ([0, 1, 2, 4, 8, 100], (1 + 2 + 4 + 8) / 4),                       # n 6, cut int(1.5) = 1 (2: 3)
    ([1, 2, 3, 4, 100], (2 + 3 + 4) / 3),                              # n 5, cut 1: the outlier goes
    ([100, 0, 5, 1], (1 + 5) / 2),                                     # n 4, cut 1
    ([10, 0, 1], 11 / 3),                                              # n 3, cut int(0.75) = 0: the mean
    ([10, 20], 15.0),                                                  # n 2: the mean
    ([5.5], 5.5),                                                      # n 1
    ([0, 1, 2, 4, 8, 16, 32, 64, 128, 1000], (2 + 4 + 8 + 16 + 32 + 64) / 6),  # n 10, cut int(2.5) = 2 (3: 15)
    ([0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1000], 254 / 7),            # n 11, cut int(2.75) = 2 (3: 50.4)
    ([0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000], 252 / 6),       # n 12, cut 3
]
bad = [(x, X.iqm(x), want) for x, want in HAND if abs(X.iqm(x) - want) > 1e-12]
check(not bad, f"IQM of {len(HAND)} hand-computed cases (n = 1..12; [1..8] -> 4.5; skewed values where one cut "
      f"more or less changes the result: n = 7 -> the middle 5, n = 3 -> the mean, n = 6 and 10 -> int(n/4), "
      f"not round)" + (f": {bad}" if bad else ""))
curves = np.array([[1, 10], [2, 40], [3, 20], [100, 30], [4, 0]], dtype=float)  # 5 runs x 2 points
got = X.iqm(curves, axis=0)
check(np.allclose(got, [(2 + 3 + 4) / 3, (10 + 20 + 30) / 3]),
      f"IQM per x of curves (runs x points, axis 0): {got} = [3, 20]")

# ---------------------------------------------------------------------------------------
# (b) The stratified bootstrap against the exact bootstrap distribution.


def exact_distribution(tasks, stat):
    """{value: probability} of stat over every stratified resample, enumerated."""
    per_task = [list(itertools.product(t, repeat=len(t))) for t in tasks]
    dist, total = {}, 0
    for combo in itertools.product(*per_task):
        v = round(float(stat(np.concatenate([np.array(c, dtype=float) for c in combo]))), 9)
        dist[v] = dist.get(v, 0) + 1
        total += 1
    return {v: c / total for v, c in dist.items()}


def empirical(draws):
    vals, counts = np.unique(np.round(draws, 9), return_counts=True)
    return dict(zip(vals.tolist(), (counts / draws.size).tolist()))


def tv_distance(p, q):
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def quantile_ok(dist, x, q, tol):
    """x is a q-quantile of dist within tol: P(X < x) <= q + tol and P(X <= x) >= q - tol."""
    below = sum(p for v, p in dist.items() if v < x - 1e-9)
    at_or_below = sum(p for v, p in dist.items() if v <= x + 1e-9)
    return below <= q + tol and at_or_below >= q - tol


B = 20000
small = [np.array([0.0, 1.0]), np.array([10.0, 30.0])]  # 2 tasks x 2 runs: 16 resamples
for name, stat in X.STATS.items():
    exact = exact_distribution(small, stat)
    draws = stat(np.concatenate(X.stratified_resamples(small, B, np.random.default_rng(1)), axis=1), axis=1)
    tv = tv_distance(exact, empirical(draws))
    check(tv < 0.02, f"{name}: the stratified bootstrap's distribution on 2 tasks x 2 runs is the exact "
          f"one over the 16 resamples ({len(exact)} values; total variation {tv:.4f} < 0.02 at B = {B})")

three = [np.array([0.0, 1.0, 2.0]), np.array([100.0, 103.0, 109.0])]  # 27 x 27 resamples
exact = exact_distribution(three, X.iqm)
draws = X.iqm(np.concatenate(X.stratified_resamples(three, B, np.random.default_rng(2)), axis=1), axis=1)
tv = tv_distance(exact, empirical(draws))
check(tv < 0.05, f"IQM on 2 tasks x 3 runs: bootstrap against the exact distribution over 729 resamples "
      f"({len(exact)} values): total variation {tv:.4f} < 0.05")
point, lo, hi = X.bootstrap_ci(three, X.iqm, reps=B, seed=3)
check(abs(point - X.iqm(np.concatenate(three))) < 1e-12 and quantile_ok(exact, lo, 0.025, 0.005)
      and quantile_ok(exact, hi, 0.975, 0.005),
      f"bootstrap_ci's 95% interval [{lo:g}, {hi:g}] is the exact distribution's 2.5% and 97.5% quantiles "
      f"(within 0.005 of probability), point {point:g} the IQM of all 6 scores")
# The same check fails for a resampler that mixes the tasks (all 6 runs pooled).
rng = np.random.default_rng(4)
pooled = np.concatenate(three)
mixed = X.iqm(pooled[rng.integers(0, 6, size=(B, 6))], axis=1)
tv_mixed = tv_distance(exact, empirical(mixed))
check(tv_mixed > 0.3, f"a pooled (unstratified) resampler is far from the exact distribution "
      f"(total variation {tv_mixed:.2f}): the check above can fail")
# Each task's resamples hold only its own runs, as many as it has (2 and 3 here).
uneven = [np.array([1.0, 2.0]), np.array([50.0, 60.0, 70.0])]
rs = X.stratified_resamples(uneven, 500, np.random.default_rng(5))
check(rs[0].shape == (500, 2) and rs[1].shape == (500, 3) and set(np.unique(rs[0])) <= {1.0, 2.0}
      and set(np.unique(rs[1])) <= {50.0, 60.0, 70.0},
      "each task is resampled within itself, keeping its number of runs (2 and 3): no resample mixes tasks")
a1, a2, b1 = (X.bootstrap_ci(three, X.mean, reps=500, seed=s) for s in (7, 7, 8))
check(a1 == a2 and a1 != b1, "the bootstrap is seeded: the same seed gives the same interval, another seed another")
p, lo, hi = X.bootstrap_ci([np.array([[0.0, 5.0], [2.0, 5.0]])], X.iqm, reps=200, seed=0)
check(np.allclose(p, [1.0, 5.0]) and lo[1] == hi[1] == 5.0 and lo[0] >= 0.0 and hi[0] <= 2.0,
      "curves: one interval per x (a constant column has a zero-width band)")

# ---------------------------------------------------------------------------------------
# (c) The whole aggregation on fabricated run directories.
EVAL_HEADER = ("wall_time,elapsed_s,env_frames,updates,incarnation,version,episodes,eval_mean,eval_std,"
               "eval_min,eval_max,truncated,eval_s")
METRICS_HEADER = ("wall_time,elapsed_s,env_frames,episodes,updates,updates_per_s,samples_per_s,frames_per_s,"
                  "mean_return_100,loss,replay_size,replay_inserted,weights_version,actor_version_min,"
                  "priority_updates,stale_updates,bad_messages,wait_frac,train_frac,optim_frac,net_frac,"
                  "duplicate_batches,replay_sampled,env_faults,episodes_dropped,weights_answers,weights_held,"
                  "weights_refused")
exp = os.path.join(sys.argv[1], "exp")


def fake_run(name, c, finished=True):
    """Evaluations at frames 0, 1000, ..., 9000 with eval_mean = c * frames / 9000, at
    t = 10 + 2 i seconds after the evaluator started; training returns c / 2 * frames / 9000."""
    d = os.path.join(exp, name)
    os.makedirs(d)
    with open(os.path.join(d, "eval.csv"), "w") as f:
        f.write(EVAL_HEADER + "\n")
        for i in range(10):
            fr = 1000 * i
            f.write(f"{1.7e9 + 10 + 2 * i:.3f},{10 + 2 * i:.3f},{fr},{25 * i},0,{i + 1},10,"
                    f"{c * fr / 9000:.4f},1.0,0,0,0,0.010\n")
    with open(os.path.join(d, "metrics.csv"), "w") as f:
        f.write(METRICS_HEADER + "\n")
        for i in range(10):
            fr = 1000 * i
            ret = "nan" if i == 0 else f"{c / 2 * fr / 9000:.3f}"
            f.write(f"2026-12-06T08:10:{i + 10}.016Z,{i + 1.0:.3f},{fr},{i},{25 * i},1,1,1,{ret}"
                    + ",0" * 19 + "\n")
    if finished is not None:
        with open(os.path.join(d, "experiment.json"), "w") as f:
            json.dump({"finished": finished, "rc": 0 if finished else 1, "stop": "fake"}, f)


CART = [100.0, 200.0, 300.0, 400.0, 1000.0]
ACRO = [-500.0, -100.0, -200.0, -300.0]
WIDE = [10.0, 20.0, 30.0]
for s, c in enumerate(CART, 1):
    fake_run(f"cartpole.s{s}", c, finished=True if s < 5 else None)  # s5 without experiment.json
for s, c in enumerate(ACRO, 1):
    fake_run(f"acrobot.s{s}", c)
for s, c in enumerate(WIDE, 1):
    fake_run(f"cartpole.wide.s{s}", c)
fake_run("cartpole.s6", 99999.0, finished=False)  # a failed run: left out
fake_run("cartpole.s1.prev", 99999.0)              # apex-local's moved-aside run: not a run name
os.makedirs(os.path.join(exp, "logs"))


def aggregate(*opts):
    p = subprocess.run([TOOL, "aggregate", exp] + list(opts), capture_output=True, text=True)
    rows = {}
    if p.returncode == 0:
        with open(os.path.join(exp, "summary.csv")) as f:
            rows = {(r["variant"], r["task"]): r for r in csv.DictReader(f)}
    return p, rows


def close(row, key, want):
    # (eval.csv holds 4 decimals)
    return row is not None and abs(float(row[key]) - want) < 1e-3 + 1e-6 * abs(want)


# Default score last:5: the mean over frames 5000..9000 = c * (5+6+7+8+9)/9 / 5 = c * 7/9.
p, rows = aggregate("--reference", "cartpole=0:500", "--reference", "acrobot=-500:-100")
check(p.returncode == 0, f"aggregate exits 0 ({p.stderr.strip()[-200:]})")
k = 7 / 9
cp, ac, wd, al = (rows.get(x) for x in (("base", "cartpole"), ("base", "acrobot"), ("wide", "cartpole"), ("base", "all")))
check(cp is not None and cp["runs"] == "5" and close(cp, "iqm", 300 * k) and close(cp, "mean", 400 * k)
      and close(cp, "median", 300 * k) and close(cp, "min", 100 * k) and close(cp, "max", 1000 * k),
      "cartpole (5 runs, last:5 = 7/9 of each run's final return): IQM = mean of the middle 3 = 233.33, "
      "mean 311.11, median 233.33; the failed run and the .prev directory left out")
check(ac is not None and ac["runs"] == "4" and close(ac, "iqm", -250 * k) and close(ac, "median", -250 * k)
      and close(ac, "mean", -275 * k), "acrobot (4 runs): IQM = mean of the middle 2 = -194.44, mean -213.89")
check(wd is not None and wd["runs"] == "3" and close(wd, "iqm", 20 * k) and ("wide", "all") not in rows,
      "variant wide (3 runs of one task): IQM = the mean 15.56, and no pooled row for one task")
# Pooled and normalised: cartpole s/500, acrobot (s + 500)/400; 9 scores, cut int(2.25) = 2.
norm = sorted([c * k / 500 for c in CART] + [(c * k + 500) / 400 for c in ACRO])
check(al is not None and al["runs"] == "9" and al["tasks"] == "2" and al["normalised"] == "yes"
      and close(al, "iqm", sum(norm[2:7]) / 5) and close(al, "mean", sum(norm) / 9),
      f"row all: 9 normalised scores, IQM = mean of the middle 5 = {sum(norm[2:7]) / 5:.4f}")
cis = [(r["variant"], r["task"], float(r[f"{s}_ci_low"]), float(r[s]), float(r[f"{s}_ci_high"]), float(r["min"]),
        float(r["max"])) for r in rows.values() for s in ("iqm", "mean", "median")]
check(cis and all(mn - 1e-9 <= lo <= pt <= hi <= mx + 1e-9 for _, _, lo, pt, hi, mn, mx in cis),
      "every CI holds its estimate and lies within the scores' range")
with open(os.path.join(exp, "scores.csv")) as f:
    scores = {r["run"]: r for r in csv.DictReader(f)}
check(len(scores) == 12 and "cartpole.s6" not in scores and abs(float(scores["cartpole.s2"]["score"]) - 200 * k) < 1e-3
      and scores["cartpole.s5"]["state"] == "unknown", "scores.csv: the 12 runs aggregated, each with its score")
md = open(os.path.join(exp, "summary.md")).read()
check("| base | cartpole | 5 | 233.3 | [" in md and "| base | all (normalised) | 9 |" in md
      and "cartpole.s6 (unfinished: exit 1" in md and "last 5 greedy evaluations" in md and "int(0.25 n)" in md,
      "summary.md: the table's rows, the score's definition, the run left out and why")
with open(os.path.join(exp, "iqm_frames.png"), "rb") as f:
    check(f.read(8) == b"\x89PNG\r\n\x1a\n", "iqm_frames.png is a PNG")
with open(os.path.join(exp, "curves_frames.csv")) as f:
    curve = [r for r in csv.DictReader(f)]
ev = [r for r in curve if r["kind"] == "eval" and r["variant"] == "wide"]
# wide's 3 runs: at frame x the returns c x / 9000, normalised by cartpole's reference 500, IQM
# (n = 3: the mean) 20 x / 9000 / 500; the last point, 9000 frames, is 0.04.
check(len(ev) == 100 and abs(float(ev[-1]["frames"]) - 9000) < 1e-6 and abs(float(ev[-1]["iqm"]) - 0.04) < 1e-6
      and abs(float(ev[50]["iqm"]) - 20 * float(ev[50]["frames"]) / 9000 / 500) < 1e-6,
      "curves_frames.csv: the IQM of the interpolated, normalised evaluations on 100 common frames "
      "(wide: 20 / 500 at 9000)")
tr = [r for r in curve if r["kind"] == "train" and r["variant"] == "wide"]
check(tr and abs(float(tr[0]["frames"]) - 1000) < 1e-6 and abs(float(tr[-1]["iqm"]) - 10 / 500) < 1e-6,
      "training curves from metrics.csv's mean_return_100 by name, its nan rows skipped (from 1000 frames)")

# Other scores: last (the final evaluation), frames:4500 (the one at 4000 frames), time:15
# (t = 10, 12, 14: the one at 2000 frames), train (the last mean_return_100 = c / 2).
for score, factor in (("last", 1.0), ("frames:4500", 4 / 9), ("time:15", 2 / 9), ("train", 0.5)):
    p, rows = aggregate("--score", score, "--x", "time")
    r = rows.get(("wide", "cartpole"))
    check(p.returncode == 0 and r is not None and close(r, "iqm", 20 * factor),
          f"--score {score}: wide's IQM {r['iqm'] if r else '?'} = {20 * factor:g}")
check(os.path.exists(os.path.join(exp, "iqm_time.png")) and os.path.exists(os.path.join(exp, "curves_time.csv")),
      "--x time: iqm_time.png and curves_time.csv")
p, rows = aggregate("--score", "frames:20000")
check(p.returncode == 0 and "ended before the budget" in p.stdout,
      "--score frames:20000 beyond every run: scored by their last evaluations, and the output says so")
p, _ = aggregate("--reference", "cartpole=500")
check(p.returncode == 2 and "acrobot" in p.stderr, "a reference for one of two tasks is refused, naming the other")
p, rows = aggregate("--include-unfinished")
check(p.returncode == 0 and rows.get(("base", "cartpole"), {}).get("runs") == "6",
      "--include-unfinished takes the failed run too (6 cartpole runs)")
sys.exit(1 if failures else 0)
