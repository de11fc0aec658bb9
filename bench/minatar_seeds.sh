#!/usr/bin/env bash
# minatar_seeds.sh EXPDIR [PNG]: bench/RESULTS.md's 3-seed MinAtar table and figure from an
# experiment directory that scripts/apex-experiment filled with the five MinAtar configs:
#
#   scripts/apex-experiment run configs/minatar-{breakout,asterix,freeway,seaquest,space-invaders}.ini \
#       --seeds 1-3 --dir EXPDIR --max-seconds 600 --full-budget
#   bash bench/minatar_seeds.sh EXPDIR bench/figures/minatar-10min.png
#
# It measures each game's random policy (apex-eval --epsilon 1, 1 000 episodes, on the
# game's seed-1 checkpoint: the network does not matter), aggregates with apex-experiment
# (--score last and last:5; --reference random:DQN, DQN being the MinAtar paper's return at
# 5 M frames), prints the Markdown table (the IQMs and intervals from summary.csv, the
# per-run and per-evaluation columns from eval.csv, the runs' throughput from metrics.csv),
# and draws one gnuplot page: each game's IQM curve with its band, and the five pooled.
# Work files go to EXPDIR/report. Needs numpy and gnuplot, as apex-experiment does.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
EXP=$(cd "${1:?usage: minatar_seeds.sh EXPDIR [PNG]}" && pwd)
OUT=$EXP/report
PNG=${2:-$OUT/minatar-seeds.png}
BIN=${APEX_BIN:-$ROOT/bin}
GAMES="breakout asterix freeway seaquest space-invaders"
declare -A DQN=([breakout]=10 [asterix]=17 [freeway]=50 [seaquest]=20 [space-invaders]=43)
rm -rf "$OUT"
mkdir -p "$OUT"

refs=() pairs=""
for g in $GAMES; do
  ck=$EXP/minatar-$g.s1/checkpoint.bin
  [ -f "$ck" ] || { echo "minatar_seeds.sh: no $ck" >&2; exit 1; }
  rnd=$("$BIN/apex-eval" -c "$ROOT/configs/minatar-$g.ini" --checkpoint "$ck" --epsilon 1 \
    --episodes 1000 2>/dev/null | sed -n 's/.* mean \([-0-9.]*\) .*/\1/p')
  [ -n "$rnd" ] || { echo "minatar_seeds.sh: apex-eval gave no mean for $g" >&2; exit 1; }
  refs+=(--reference "minatar-$g=$rnd:${DQN[$g]}")
  pairs+=" $g=$rnd:${DQN[$g]}"
done
X="$ROOT/scripts/apex-experiment"
"$X" aggregate "$EXP" --score last "${refs[@]}" --x frames --out "$OUT/last" > /dev/null
"$X" aggregate "$EXP" --score last:5 "${refs[@]}" --out "$OUT/last5" > /dev/null
for g in $GAMES; do # one game's runs alone, for its own curve
  mkdir -p "$OUT/$g"
  for d in "$EXP"/minatar-$g.s*; do [ -d "$d" ] && ln -s "$d" "$OUT/$g/"; done
  "$X" aggregate "$OUT/$g" --x frames --out "$OUT/$g/agg" > /dev/null
  awk -F, '$1=="eval"' "$OUT/$g/agg/curves_frames.csv" > "$OUT/$g.dat"
done
awk -F, '$1=="eval"' "$OUT/last/curves_frames.csv" > "$OUT/all.dat"

/usr/bin/python3 - "$EXP" "$OUT" $pairs <<'PY'
import csv, os, statistics, sys
exp, out = sys.argv[1:3]
ref = {k: tuple(map(float, v.split(":"))) for k, v in (a.split("=") for a in sys.argv[3:])}
names = {"breakout": "Breakout", "asterix": "Asterix", "freeway": "Freeway",
         "seaquest": "Seaquest", "space-invaders": "Space Invaders"}
rows = lambda p: list(csv.DictReader(open(p)))
last = {r["task"]: r for r in rows(os.path.join(out, "last", "summary.csv"))}
last5 = {r["task"]: r for r in rows(os.path.join(out, "last5", "summary.csv"))}
ci = lambda r, d=2, b="": (f"{b}{float(r['iqm']):.{d}f}{b} [{float(r['iqm_ci_low']):.{d}f},"
                           f" {float(r['iqm_ci_high']):.{d}f}]")
seeds = sorted({int(r["seed"]) for r in rows(os.path.join(out, "last", "scores.csv"))})
print("| game | random (1 000 episodes) | DQN at 5 M frames (paper) | "
      + " | ".join(f"seed {s}" for s in seeds)
      + " | **IQM at 10 min** [95% CI] | mean of evaluations 5-9 min: IQM [95% CI]"
      + " | runs >= DQN at 10 min | evaluations >= DQN from 5 min on |")
print("|---|---:|---:|" + "---:|" * len(seeds) + "---|---|---|---|")
ups, fps = [], []
for g, (rnd, dqn) in ref.items():
    task, cells, above, ev_above, ev_n = "minatar-" + g, [], 0, 0, 0
    for s in seeds:
        d = os.path.join(exp, f"{task}.s{s}")
        ev = rows(os.path.join(d, "eval.csv"))
        cells.append(f"{float(ev[-1]['eval_mean']):.2f}")
        above += float(ev[-1]["eval_mean"]) >= dqn
        late = [float(r["eval_mean"]) for r in ev if float(r["elapsed_s"]) >= 299]
        ev_n += len(late)
        ev_above += sum(v >= dqn for v in late)
        m = [r for r in rows(os.path.join(d, "metrics.csv")) if float(r["elapsed_s"]) >= 60]
        ups.append(statistics.median(float(r["updates_per_s"]) for r in m))
        fps.append(statistics.median(float(r["frames_per_s"]) for r in m))
    print(f"| {names[g]} | {rnd:.2f} | {dqn:g} | " + " | ".join(cells)
          + f" | {ci(last[task], 2, '**')} | {ci(last5[task])} | {above} of {len(seeds)} | {ev_above} of {ev_n} |")
print("| **all five**, normalised: (score - random) / (DQN - random) | 0 | 1 | " + "| " * len(seeds)
      + f"{ci(last['all'], 3, '**')} | {ci(last5['all'], 3)} | | |")
print(f"\nthroughput, median of each run after its first minute: {min(ups):.1f}-{max(ups):.1f}"
      f" updates/s, {min(fps):.0f}-{max(fps):.0f} frames/s over {len(ups)} runs")
PY

{
  echo "set terminal pngcairo size 1500,850 noenhanced font ',11'"
  echo "set output '$PNG'"
  echo "set datafile separator ','"
  echo "set grid; set style fill transparent solid 0.25 noborder; set key bottom right"
  echo "set xrange [0:*]; set yrange [0:*]; set xlabel 'environment frames (millions)'"
  echo "set multiplot layout 2,3 title 'apex, MinAtar: IQM of greedy evaluations (100 episodes, epsilon 0.1) over seeds, 95% stratified bootstrap bands'"
  for p in $pairs; do
    g=${p%%=*} v=${p#*=}
    n=$(awk -F, 'NR == 1 {print $4}' "$OUT/$g.dat")
    echo "set title 'minatar-$g ($n runs)'; set ylabel 'return'"
    echo "plot '$OUT/$g.dat' using (\$3/1e6):6:7 with filledcurves lc 1 notitle, '' using (\$3/1e6):5 with lines lw 2 lc 1 title 'IQM', ${v#*:} with lines dt 2 lc 7 title 'DQN at 5 M frames (${v#*:})', ${v%%:*} with lines dt 3 lc 0 title 'random (${v%%:*})'"
  done
  echo "set title 'all five, normalised (random 0, DQN at 5 M frames 1)'; set ylabel 'normalised return'"
  echo "plot '$OUT/all.dat' using (\$3/1e6):6:7 with filledcurves lc 2 notitle, '' using (\$3/1e6):5 with lines lw 2 lc 2 title 'IQM', 1 with lines dt 2 lc 7 title 'DQN'"
  echo "unset multiplot"
} > "$OUT/figure.gp"
gnuplot "$OUT/figure.gp"
echo "figure: $PNG"
