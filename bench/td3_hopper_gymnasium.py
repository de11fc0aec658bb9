#!/usr/bin/python3
"""Reference TD3 (CleanRL's td3_continuous_action.py hyper-parameters, PyTorch, 1 thread) on
Gymnasium's own Hopper-v4 (hopper_v4.py unmodified, on Debian's libmujoco 2.2.2 through the
ctypes shim in apex's tests/fixtures/mujoco/gymref/). Question: does reference TD3 escape the
~300 "dive" plateau on this library within the frames apex's runs used?

  bench/td3_hopper_gymnasium.py STEPS SEED [EVAL_EVERY]
Needs: Gymnasium's source (GYMNASIUM, default /work/ref/gymfull: a directory holding the
`gymnasium` package; scripts/fetch-mujoco-models names the commit), Gymnasium's hopper.xml
(HOPPER_XML, default models/mujoco/hopper.xml), Debian's python3-torch, and the shim built:
  cc -O2 -shared -fPIC -o /tmp/libmjshim.so tests/fixtures/mujoco/gymref/mjshim.c -lmujoco
  MJSHIM_LIB=/tmp/libmjshim.so /usr/bin/python3 bench/td3_hopper_gymnasium.py 130000 1
Prints "step S eval MEAN (10 greedy episodes) train_return R" lines (bench/RESULTS.md).
"""
import os
import sys
import time

for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[k] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
G = os.path.join(ROOT, "tests/fixtures/mujoco/gymref")
sys.path[:0] = [G, os.path.join(G, "stubs"), os.environ.get("GYMNASIUM", "/work/ref/gymfull")]
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
import mujoco  # noqa: E402,F401  (the shim)
import gymnasium as gym  # noqa: E402
from gymnasium.envs.mujoco import mujoco_env  # noqa: E402

MODEL = os.environ.get("HOPPER_XML", os.path.join(ROOT, "models/mujoco/hopper.xml"))
_orig = mujoco_env.MujocoEnv.__init__


def _init(self, model_path, *a, **kw):
    return _orig(self, MODEL, *a, **kw)


mujoco_env.MujocoEnv.__init__ = _init

steps, seed = int(sys.argv[1]), int(sys.argv[2])
eval_every = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
torch.manual_seed(seed)
np.random.seed(seed)
env = gym.make("Hopper-v4")
eenv = gym.make("Hopper-v4")
O, A = env.observation_space.shape[0], env.action_space.shape[0]
hi = float(env.action_space.high[0])


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc_mu = nn.Linear(O, 256), nn.Linear(256, 256), nn.Linear(256, A)

    def forward(self, x):
        return torch.tanh(self.fc_mu(F.relu(self.fc2(F.relu(self.fc1(x)))))) * hi


class Q(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(O + A, 256), nn.Linear(256, 256), nn.Linear(256, 1)

    def forward(self, x, a):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(torch.cat([x, a], 1))))))


actor, q1, q2 = Actor(), Q(), Q()
actor_t, q1_t, q2_t = Actor(), Q(), Q()
actor_t.load_state_dict(actor.state_dict())
q1_t.load_state_dict(q1.state_dict())
q2_t.load_state_dict(q2.state_dict())
q_opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=3e-4)
a_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
N = steps
obs_b = np.zeros((N, O), np.float32)
nobs_b = np.zeros((N, O), np.float32)
act_b = np.zeros((N, A), np.float32)
rew_b = np.zeros(N, np.float32)
done_b = np.zeros(N, np.float32)
rng = np.random.default_rng(seed)


def evaluate(n=10):
    rets = []
    for i in range(n):
        o, _ = eenv.reset(seed=10_000 + i)
        done, R = False, 0.0
        while not done:
            with torch.no_grad():
                a = actor(torch.as_tensor(o, dtype=torch.float32)[None])[0].numpy()
            o, r, term, trunc, _ = eenv.step(a)
            R += r
            done = term or trunc
        rets.append(R)
    return float(np.mean(rets))


o, _ = env.reset(seed=seed)
ep_ret, rets, t0 = 0.0, [], time.time()
for t in range(steps):
    if t < 25000:
        a = env.action_space.sample()
    else:
        with torch.no_grad():
            a = actor(torch.as_tensor(o, dtype=torch.float32)[None])[0].numpy()
        a = np.clip(a + rng.normal(0, 0.1 * hi, A), -hi, hi).astype(np.float32)
    o2, r, term, trunc, _ = env.step(a)
    obs_b[t], act_b[t], rew_b[t], nobs_b[t], done_b[t] = o, a, r, o2, float(term)
    ep_ret += r
    o = o2
    if term or trunc:
        rets.append(ep_ret)
        ep_ret = 0.0
        o, _ = env.reset()
    if t >= 25000:
        idx = rng.integers(0, t + 1, 256)
        s, a_, r_, s2, d = (torch.as_tensor(x[idx]) for x in (obs_b, act_b, rew_b, nobs_b, done_b))
        with torch.no_grad():
            noise = (torch.randn_like(a_) * 0.2).clamp(-0.5, 0.5) * hi
            a2 = (actor_t(s2) + noise).clamp(-hi, hi)
            y = r_ + 0.99 * (1 - d) * torch.min(q1_t(s2, a2), q2_t(s2, a2)).view(-1)
        loss = F.mse_loss(q1(s, a_).view(-1), y) + F.mse_loss(q2(s, a_).view(-1), y)
        q_opt.zero_grad()
        loss.backward()
        q_opt.step()
        if t % 2 == 0:
            al = -q1(s, actor(s)).mean()
            a_opt.zero_grad()
            al.backward()
            a_opt.step()
            with torch.no_grad():
                for net, tn in ((actor, actor_t), (q1, q1_t), (q2, q2_t)):
                    for p, pt in zip(net.parameters(), tn.parameters()):
                        pt.mul_(0.995).add_(p, alpha=0.005)
    if (t + 1) % eval_every == 0:
        print(f"step {t + 1} eval {evaluate():.1f} train_return {np.mean(rets[-20:]) if rets else 0:.1f} "
              f"episodes {len(rets)} wall {time.time() - t0:.0f}s", flush=True)
