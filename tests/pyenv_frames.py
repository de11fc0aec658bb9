"""pyenv_frames.py: image envs for tests/check_pyenv_image.c, run by python/apex_env.py
(--make tests/pyenv_frames.py:square --kwargs JSON). numpy only, no gymnasium (the spaces
are duck-typed as python/apex_env.py expects them).

square(layout="hwc1", dtype="uint8", size=84, k=4)
    A square moving over a dark 84x84 frame, deterministic from the reset seed: frame t of
    episode ep of an env reset with seed s (s = the seed of its first reset: later resets
    are unseeded and count ep up) is frame(s, ep, t) below, which the C test computes too.
    An episode ends (terminated) after length(s) = 5 + s % 3 steps, reward 1 each; actions
    (Discrete(3)) change nothing, so the frames of a run are known whatever the policy.
    layout: what one observation is
      "hw"    the frame, (size, size)                              a grayscale frame
      "hwc1"  the frame, (size, size, 1)                           the same bytes
      "hwck"  the last k frames channels last, (size, size, k)     channel j = frame t-k+1+j
      "chwk"  the last k frames channels first, (k, size, size)    Gymnasium's
              FrameStackObservation of grayscale frames (its padding_type "reset": an
              episode's first frame repeated)
    dtype: "uint8" (the frames), or "float32" (the same values as floats).

frame(s, ep, t), size x size uint8: zeros, with
  - pixels [0, 0..2] = s % 256, ep % 256, t % 256 (the test reads which frame a row is);
  - rows 1..size-1 of column j = (s + 3 ep + j) % 64 in the low 6 bits of a faint background;
  - an 8x8 square of value 128 + (s + ep + t) % 128 with its corner at row
    (3 t + 11 ep + s) % (size - 8) + 1, column (5 t + 7 s + ep) % (size - 8).
"""
import numpy as np


class Box:
    def __init__(self, dtype, shape):
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)

    def __repr__(self):
        return "Box(%s, %s)" % (self.dtype, self.shape)


class Discrete:
    def __init__(self, n, start=0):
        self.n, self.start = n, start


def length(s):
    return 5 + s % 3


def frame(s, ep, t, size=84):
    f = np.zeros((size, size), dtype=np.uint8)
    f[1:, :] = ((s + 3 * ep + np.arange(size)) % 64).astype(np.uint8)
    r, c = (3 * t + 11 * ep + s) % (size - 8) + 1, (5 * t + 7 * s + ep) % (size - 8)
    f[r:r + 8, c:c + 8] = 128 + (s + ep + t) % 128
    f[0, 0], f[0, 1], f[0, 2] = s % 256, ep % 256, t % 256
    return f


class Square:
    def __init__(self, layout="hwc1", dtype="uint8", size=84, k=4):
        shapes = {"hw": (size, size), "hwc1": (size, size, 1), "hwck": (size, size, k),
                  "chwk": (k, size, size)}
        if layout not in shapes:
            raise ValueError("layout %r: one of %s" % (layout, sorted(shapes)))
        self.layout, self.size, self.k = layout, size, k
        self.dtype = np.dtype(dtype)
        self.observation_space = Box(self.dtype, shapes[layout])
        self.action_space = Discrete(3)
        self.seed, self.ep, self.t = 0, -1, 0
        self.frames = []

    def _obs(self):
        f = self.frames
        if self.layout == "hw":
            o = f[-1]
        elif self.layout == "hwc1":
            o = f[-1][:, :, None]
        else:
            last = [f[max(0, len(f) - self.k + j)] for j in range(self.k)]
            o = np.stack(last, axis=2 if self.layout == "hwck" else 0)
        return np.ascontiguousarray(o, dtype=self.dtype)

    def reset(self, seed=None):
        if seed is not None:
            self.seed, self.ep = int(seed), 0
        else:
            self.ep += 1
        self.t = 0
        self.frames = [frame(self.seed, self.ep, 0, self.size)]
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.frames.append(frame(self.seed, self.ep, self.t, self.size))
        del self.frames[:-self.k]
        return self._obs(), 1.0, self.t >= length(self.seed), False, {}


def square(**kw):
    return Square(**kw)
