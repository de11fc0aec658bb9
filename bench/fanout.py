#!/usr/bin/python3
"""bench/fanout.py: many actor processes against one apex-replay and one apex-learner on this
machine (issue #29): where does apex stop scaling with the number of peers?

  bench/fanout.py [--actors 8,64,128,256] [--envs 1] [--total-rate 2560] [--sync-s 0.2]
                  [--warmup 15] [--window 30] [--config configs/cartpole.ini] [--bin bin]
                  [--send-batch 50] [--relays 0|1] [--hosts H] [--keep DIR] [--prefix fanout]

For each actor count N it starts apex-replay, apex-learner and N apex-actor processes (the
config's env, CartPole-v1 by default: a light env, so that the peers and not the envs are
what is measured) with the same total env rate whatever N: each actor is paced at
total-rate / N frames/s ([actor] max_steps_per_s over --envs envs), refreshes its weights
every --sync-s seconds of its own frames (weight_sync_steps) and sends batches of
--send-batch transitions (so the replay takes the same messages per second whatever N: at
256 actors each sends one every 5 s); --send-batch 0 sends one batch a second per actor
instead (a second of its frames: the replay then takes N messages a second, each smaller
as N grows, which prices a message rather than a transition). With --relays 1 an apex-relay serves the actors' weights over ipc:// ([endpoints]
relay), fetching each version once from the learner (issue #29's relays), one per host.

--hosts H > 1 (root, network namespaces: as tests/smoke/multihost.sh) puts the replay and
the learner in a namespace "srv" and the actors, spread round robin, in H namespaces
standing for H hosts, each joined to srv by its own veth pair (10.240.j.0/30): the servers
bind 0.0.0.0, every actor connects to srv's address on its own link, and with --relays 1
each host runs its own relay. The learner trains flat out within the replay's samples_per_insert. Equal total
rates make the per-insert costs comparable across N: what changes is only the number of
peers. After --warmup seconds it measures a window of --window seconds, then stops the
actors (SIGTERM: each flushes and logs what was acknowledged), the learner and the replay,
and prints per N:

  BENCH <prefix>.a<N>.actors_acked          actors whose batches the replay acknowledged
  BENCH <prefix>.a<N>.lost                  acknowledged transitions the replay does not
                                            hold: the actors' acknowledged sum minus the
                                            replay's inserted count (capacity holds all)
  BENCH <prefix>.a<N>.unacked               transitions inserted but never acknowledged
                                            (the other sign of the same difference)
  BENCH <prefix>.a<N>.replay_cpu_per_1k_inserts  replay CPU ms (utime + stime) per 1 000
                                            transitions inserted in the window
  BENCH <prefix>.a<N>.learner_cpu_frac      learner CPU seconds per wall second
  BENCH <prefix>.a<N>.learner_weights_bytes_per_s  Weights bytes the learner answered with
  BENCH <prefix>.a<N>.learner_weights_bytes_per_version  ... per version published
  BENCH <prefix>.a<N>.weights_message_bytes  one Weights message (so: messages per version)
  BENCH <prefix>.a<N>.version_lag_p50_s / p99_s / max_s   from a version's publication to
                                            the learner seeing every actor act with it or a
                                            newer one (metrics.csv rows every 100 ms; the
                                            actors report every 100 ms; includes the
                                            --sync-s refresh period)
  BENCH <prefix>.a<N>.replay_rss_mb, learner_rss_mb, actor_rss_mb (mean)
  BENCH <prefix>.a<N>.replay_fds, learner_fds

and at the end, with 8 and 256 among the counts:
  BENCH <prefix>.replay_cpu_per_1k_inserts_ratio_a256_a8
  BENCH <prefix>.replay_kb_per_connection, learner_kb_per_connection  (RSS slope over N)

Exit status 1 if a daemon failed to start or died, or any transition was lost.
"""
import argparse
import atexit
import csv
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cpu_s(pid):
    """utime + stime of pid in seconds (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK
    except OSError:
        return None


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE / 1e6
    except OSError:
        return None


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def percentile(xs, q):
    """numpy's default (linear) percentile of xs, q in [0, 100]."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def metrics_rows(path):
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def version_lags(rows):
    """For each version the learner published inside rows: seconds from the first row with
    weights_version >= v to the first with actor_version_min >= v (None when never)."""
    pub, seen = {}, {}
    for r in rows:
        t = float(r["elapsed_s"])
        wv, av = int(r["weights_version"]) & 0xFFFFFFFF, int(r["actor_version_min"]) & 0xFFFFFFFF
        for v in range(max(pub, default=0) + 1, wv + 1):
            pub[v] = t
        for v in range(max(seen, default=0) + 1, av + 1):
            seen[v] = t
    return {v: (seen[v] - t if v in seen else None) for v, t in pub.items()}


class Hosts:
    """H network namespaces for the actors and one for the servers, joined by veth pairs;
    or, for H = 1, this machine's loopback. wrap(h, cmd) runs cmd on host h ("srv" for the
    servers); server(h) is the address host h reaches the servers at."""

    def __init__(self, h):
        self.h, self.names = h, []
        if h == 1:
            return
        tag = f"{os.getpid() % 100000}"
        self.srv = f"apexfo-srv-{tag}"
        self._ip("netns", "add", self.srv)
        self.names.append(self.srv)
        atexit.register(self.close)
        for j in range(h):
            ns = f"apexfo-h{j}-{tag}"
            self._ip("netns", "add", ns)
            self.names.append(ns)
            self._ip("-n", self.srv, "link", "add", f"vs{j}", "type", "veth", "peer", "name",
                     f"vh{j}", "netns", ns)
            self._ip("-n", self.srv, "addr", "add", f"10.240.{j}.1/30", "dev", f"vs{j}")
            self._ip("-n", ns, "addr", "add", f"10.240.{j}.2/30", "dev", f"vh{j}")
            for n_, dev in ((self.srv, f"vs{j}"), (ns, f"vh{j}"), (ns, "lo")):
                self._ip("-n", n_, "link", "set", dev, "up")
        self._ip("-n", self.srv, "link", "set", "lo", "up")

    @staticmethod
    def _ip(*a):
        subprocess.run(["ip"] + list(a), check=True, capture_output=True)

    def wrap(self, host, cmd):
        if self.h == 1:
            return cmd
        ns = self.srv if host == "srv" else self.names[1 + host]
        return ["ip", "netns", "exec", ns] + cmd  # exec: the pid is the daemon's

    def server(self, host):
        return "127.0.0.1" if self.h == 1 else f"10.240.{host}.1"

    def close(self):
        for ns in self.names:
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.names = []


def run_one(args, n, tmp, hosts):
    run = os.path.join(tmp, f"a{n}")
    os.makedirs(run, exist_ok=True)
    per_actor = max(1, round(args.total_rate / n / args.envs))  # vector steps/s per actor
    frames_per_actor = per_actor * args.envs
    p = free_ports(4) if hosts.h == 1 else [5550, 5551, 5552, 5553]
    names = ("replay_insert", "replay_sample", "learner_weights", "learner_stats")
    sets = {
        "run.out_dir": tmp, "run.name": f"a{n}", "run.max_seconds": 0, "run.target_return": 0,
        "replay.capacity": 1 << 20, "replay.durability": "none",
        "learner.metrics_interval_ms": 100, "learner.checkpoint_interval_s": 3600,
        "actor.num_actors": n, "actor.envs_per_actor": args.envs,
        "actor.max_steps_per_s": per_actor,
        "actor.weight_sync_steps": max(1, round(frames_per_actor * args.sync_s)),
        "actor.send_batch": args.send_batch or frames_per_actor, "actor.stats_interval_ms": 100,
    }
    bind = "127.0.0.1" if hosts.h == 1 else "0.0.0.0"
    for name, port in zip(names, p):
        sets[f"endpoints.{name}_bind"] = f"tcp://{bind}:{port}"
        sets[f"endpoints.{name}"] = f"tcp://127.0.0.1:{port}"

    def cfg_of(host):
        """The daemons' arguments on host (an int) or srv: the servers' address as host
        reaches them, and its relay."""
        s2 = dict(sets)
        if host != "srv":
            for name, port in zip(names, p):
                if name != "replay_sample":  # the learner's, on srv
                    s2[f"endpoints.{name}"] = f"tcp://{hosts.server(host)}:{port}"
            if args.relays:
                s2["endpoints.relay"] = f"ipc://{run}/relay{host}.sock"
        out = ["-c", os.path.abspath(args.config)]
        for k, v in s2.items():
            out += ["--set", f"{k}={v}"]
        return out
    log = lambda name: open(os.path.join(run, name), "w")
    binp = lambda name: os.path.join(args.bin, name)
    procs = {}
    srv = cfg_of("srv")
    procs["replay"] = subprocess.Popen(hosts.wrap("srv", [binp("apex-replay")] + srv),
                                       stdout=log("replay.out"), stderr=subprocess.STDOUT, cwd=run)
    procs["learner"] = subprocess.Popen(hosts.wrap("srv", [binp("apex-learner")] + srv),
                                        stdout=log("learner.out"), stderr=subprocess.STDOUT,
                                        cwd=run)
    for j in range(hosts.h if args.relays else 0):
        procs[f"relay{j}"] = subprocess.Popen(hosts.wrap(j, [binp("apex-relay")] + cfg_of(j)),
                                              stdout=log(f"relay{j}.out"),
                                              stderr=subprocess.STDOUT, cwd=run)
    actors = []
    for i in range(n):
        j = i % hosts.h
        actors.append(subprocess.Popen(hosts.wrap(j, [binp("apex-actor")] + cfg_of(j)
                                                  + ["--index", str(i)]),
                                       stdout=log(f"actor{i}.out"), stderr=subprocess.STDOUT,
                                       cwd=run))
    t_start = time.monotonic()
    metrics = os.path.join(run, "metrics.csv")  # the learner's, in its run directory
    time.sleep(args.warmup)
    dead = [k for k, pr in procs.items() if pr.poll() is not None]
    dead += [f"actor{i}" for i, a in enumerate(actors) if a.poll() is not None]
    w0 = time.monotonic()
    c0 = {k: cpu_s(pr.pid) for k, pr in procs.items()}
    rows0 = metrics_rows(metrics)
    time.sleep(args.window)
    w1 = time.monotonic()
    c1 = {k: cpu_s(pr.pid) for k, pr in procs.items()}
    rows1 = metrics_rows(metrics)
    mem = {k: rss_mb(pr.pid) for k, pr in procs.items()}
    fd = {k: fds(pr.pid) for k, pr in procs.items()}
    actor_rss = [x for x in (rss_mb(a.pid) for a in actors) if x is not None]
    dead += [k for k, pr in procs.items() if pr.poll() is not None and k not in dead]
    # Stop: actors first (each flushes its window and logs what was acknowledged).
    for a in actors:
        if a.poll() is None:
            a.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    for a in actors:
        try:
            a.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            a.kill()
            a.wait()
    for k in [k for k in procs if k.startswith("relay")] + ["learner", "replay"]:
        if procs[k].poll() is None:
            procs[k].send_signal(signal.SIGTERM)
        try:
            procs[k].wait(timeout=60)
        except subprocess.TimeoutExpired:
            procs[k].kill()
            procs[k].wait()
    # What the actors saw acknowledged, and what the replay inserted.
    acked_rows = acked_actors = 0
    for i in range(n):
        text = open(os.path.join(run, f"actor{i}.out")).read()
        m = re.findall(r"(\d+) acked, \d+ dropped, \d+ unacked .*; (\d+) transitions acknowledged", text)
        if m:
            acked_actors += int(m[-1][0]) > 0
            acked_rows += int(m[-1][1])
    rtext = open(os.path.join(run, "replay.out")).read()
    m = re.findall(r"stopping: (\d+) transitions held, (\d+) inserted", rtext)
    inserted = int(m[-1][1]) if m else -1
    ltext = open(os.path.join(run, "learner.out")).read()
    wb = re.findall(r"answers (\d+) \((\d+) bytes\)", ltext)
    bytes_per_answer = int(wb[-1][1]) / int(wb[-1][0]) if wb and int(wb[-1][0]) else 0.0
    # The window from metrics.csv (rows0[-1] .. rows1[-1]): inserts, answers, versions; the
    # lags of the versions published in it but its last 2 s, from every row to the stop.
    rows = metrics_rows(metrics)
    win = rows1[len(rows0) - 1:] if rows0 else []
    res = {"n": n, "dead": dead}
    if len(win) >= 2 and inserted >= 0:
        a, b = win[0], win[-1]
        dt = float(b["elapsed_s"]) - float(a["elapsed_s"])
        ins = int(b["replay_inserted"]) - int(a["replay_inserted"])
        answers = int(b["weights_answers"]) - int(a["weights_answers"])
        versions = (int(b["weights_version"]) & 0xFFFFFFFF) - (int(a["weights_version"]) & 0xFFFFFFFF)
        rcpu = (c1["replay"] - c0["replay"]) if c0["replay"] is not None and c1["replay"] is not None else float("nan")
        lcpu = (c1["learner"] - c0["learner"]) if c0["learner"] is not None and c1["learner"] is not None else float("nan")
        wall = w1 - w0
        t_a, t_b = float(win[0]["elapsed_s"]), float(win[-1]["elapsed_s"])
        pub = {}
        for r in rows:
            for v in range(max(pub, default=0) + 1, (int(r["weights_version"]) & 0xFFFFFFFF) + 1):
                pub[v] = float(r["elapsed_s"])
        lags = [x for v, x in version_lags(rows).items() if t_a < pub[v] <= t_b - 2.0]
        never = sum(1 for x in lags if x is None)
        lags = [x for x in lags if x is not None]
        res.update({
            "actors_acked": acked_actors, "lost": max(0, acked_rows - inserted),
            "unacked": max(0, inserted - acked_rows),
            "replay_cpu_per_1k_inserts": 1000.0 * rcpu * 1000.0 / ins if ins > 0 else float("nan"),
            "learner_cpu_frac": lcpu / wall,
            "learner_weights_bytes_per_s": answers * bytes_per_answer / dt if dt > 0 else float("nan"),
            "learner_weights_bytes_per_version": answers * bytes_per_answer / versions if versions > 0 else float("nan"),
            "version_lag_p50_s": percentile(lags, 50), "version_lag_p99_s": percentile(lags, 99),
            "version_lag_max_s": max(lags) if lags else float("nan"),
            "versions_never_reached": never,
            "weights_message_bytes": bytes_per_answer,
            "inserts_per_s": ins / dt if dt > 0 else float("nan"),
            "replay_rss_mb": mem["replay"], "learner_rss_mb": mem["learner"],
            "actor_rss_mb": sum(actor_rss) / len(actor_rss) if actor_rss else float("nan"),
            "replay_fds": fd["replay"], "learner_fds": fd["learner"],
        })
    res["wall_s"] = time.monotonic() - t_start
    return res, run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--actors", default="8,64,128,256")
    ap.add_argument("--envs", type=int, default=1)
    ap.add_argument("--total-rate", type=float, default=2560.0)
    ap.add_argument("--sync-s", type=float, default=0.2)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/cartpole.ini"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin"))
    ap.add_argument("--send-batch", type=int, default=50,
                    help="transitions per batch; 0: one batch a second per actor")
    ap.add_argument("--relays", type=int, default=0, choices=(0, 1))
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--keep", default=None, help="copy the run directories here")
    ap.add_argument("--prefix", default="fanout")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    counts = [int(x) for x in args.actors.split(",")]
    tmp = tempfile.mkdtemp(prefix="apex-fanout-")
    results, failed = {}, False
    hosts = None
    try:
        hosts = Hosts(args.hosts)
        for n in counts:
            res, run = run_one(args, n, tmp, hosts)
            results[n] = res
            if res["dead"]:
                print(f"fanout: a{n}: died or failed to start: {', '.join(res['dead'])} "
                      f"(logs in {run})", file=sys.stderr)
                failed = True
            if "lost" not in res:
                print(f"fanout: a{n}: no measurement (metrics.csv or the replay's stop line "
                      f"missing; logs in {run})", file=sys.stderr)
                failed = True
                continue
            failed |= res["lost"] > 0
            for k, v in res.items():
                if k in ("n", "dead", "wall_s"):
                    continue
                unit = ("ms" if "cpu_per" in k else "B/s" if k.endswith("bytes_per_s") else
                        "/s" if k.endswith("per_s") else "s" if k.endswith("_s") else
                        "B" if "bytes" in k else "MB" if k.endswith("_mb") else
                        "actors" if k == "actors_acked" else
                        "transitions" if k in ("lost", "unacked") else
                        "fds" if k.endswith("_fds") else "versions" if "versions" in k else
                        "cpu-s/s" if k.endswith("cpu_frac") else "")
                val = f"{v:.4g}" if isinstance(v, float) else str(v)
                print(f"BENCH {args.prefix}.a{n}.{k} {val} {unit}".rstrip(), flush=True)
        ok = [n for n in counts if "lost" in results[n]]
        if 8 in ok and 256 in ok:
            r = results[256]["replay_cpu_per_1k_inserts"] / results[8]["replay_cpu_per_1k_inserts"]
            print(f"BENCH {args.prefix}.replay_cpu_per_1k_inserts_ratio_a256_a8 {r:.3g} x")
        if len(ok) >= 2:
            lo, hi = min(ok), max(ok)
            for d in ("replay", "learner"):
                kb = (results[hi][f"{d}_rss_mb"] - results[lo][f"{d}_rss_mb"]) * 1000 / (hi - lo)
                print(f"BENCH {args.prefix}.{d}_kb_per_connection {kb:.4g} kB")
    finally:
        if hosts:
            hosts.close()
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
