"""apex_atari.py: Atari 2600 games for apex through Gymnasium and ale-py, with the DQN /
Ape-X preprocessing, emitting single 84x84 grayscale frames for apex's own frame stacking.

    [env]
    id = python
    make = apex_atari:make
    kwargs = {"game": "Pong"}
    obs_shape = 84x84x1
    obs_dtype = uint8
    n_actions = 6
    frame_stack = 4

(configs/atari-python.ini; needs `pip install "gymnasium[atari]"`, which brings ale-py and
its ROMs.) Each env is, outermost last:

  gymnasium.make("ALE/<game>-v5", frameskip=1, repeat_action_probability=0.0,
                 full_action_space=False, max_episode_steps=108000)
      the emulator, one frame a step, no sticky actions (DQN's and Ape-X's setting: v4
      "NoFrameskip"), the minimal action set, episodes cut at 108 000 frames (30 minutes)
  gymnasium.wrappers.AtariPreprocessing(noop_max=30, frame_skip=4, screen_size=84,
                 grayscale_obs=True, terminal_on_life_loss=False, scale_obs=False)
      up to 30 no-op actions at each reset, every action repeated 4 frames with the max over
      the last two (flicker), grayscale, resized to 84x84 uint8: observations (84, 84)
  LifeLossTerminal (training only)
      a lost life ends the episode for the learner (terminated), and the next reset goes on
      from there with a no-op step instead of restarting the game (DQN's "episodic life":
      the game is only reset when it is really over)
  gymnasium.wrappers.TransformReward(clip_reward) (training only)
      rewards clipped to [-1, 1]

make(..., training=False) gives the evaluation env: whole games, unclipped rewards.
apex-actor's episode returns (metrics.csv) are therefore per life and clipped; they are not
the game scores the papers report.

Only make() imports gymnasium; clip_reward and LifeLossTerminal are plain Python over any
Gymnasium-style env, so that they are tested here without gymnasium or ROMs
(tests/apex_atari_check.py, run by check_pyenv_image.c).
"""
import math

MAX_EPISODE_FRAMES = 108000  # 30 minutes of emulator frames at 60 Hz


def clip_reward(r):
    """A training reward clipped to [-1, 1] (DQN's clipping; Atari's rewards are integers, so
    this is their sign)."""
    r = float(r)
    if math.isnan(r):
        return r
    return -1.0 if r < -1.0 else 1.0 if r > 1.0 else r


def ale_lives(env):
    """The lives left in an ale-py env (under any wrappers)."""
    return env.unwrapped.ale.lives()


class LifeLossTerminal:
    """A lost life terminates the episode for training, without resetting the game: the
    next reset() takes one no-op step from where the life was lost (and a real reset() only
    when the game is over). DQN's EpisodicLifeEnv for the Gymnasium API, duck-typed (not a
    gymnasium.Wrapper: this module must import without gymnasium).

    lives: a function env -> lives left (ale_lives for Atari); noop: the action of the step
    that follows a lost life (0 is NOOP in every minimal action set)."""

    def __init__(self, env, lives=ale_lives, noop=0):
        self.env, self.lives_of, self.noop = env, lives, noop
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self.lives, self.game_over = 0, True

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def reset(self, seed=None, options=None):
        if self.game_over or seed is not None:
            kw = {} if options is None else {"options": options}
            obs, info = self.env.reset(seed=seed, **kw) if seed is not None else \
                self.env.reset(**kw)
        else:
            # The game goes on from the lost life; a no-op step that ends it is a real reset.
            obs, _, terminated, truncated, info = self.env.step(self.noop)
            if terminated or truncated:
                obs, info = self.env.reset()
        self.game_over = False
        self.lives = self.lives_of(self.env)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = bool(terminated or truncated)
        lives = self.lives_of(self.env)
        if 0 < lives < self.lives:
            terminated = True  # for the learner; the game is not over
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def close(self):
        close = getattr(self.env, "close", None)
        if close:
            close()


class ClipReward:
    """Rewards through clip_reward: the fallback of make() for a gymnasium without
    TransformReward, and what the test wraps a fake env in."""

    def __init__(self, env):
        self.env = env
        self.observation_space, self.action_space = env.observation_space, env.action_space

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def reset(self, **kw):
        return self.env.reset(**kw)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, clip_reward(reward), terminated, truncated, info


def wrap_training(env, lives=ale_lives, transform_reward=None):
    """The training wrappers over a preprocessed env: life loss terminal, then clipping
    (Gymnasium's TransformReward when given, else ClipReward)."""
    env = LifeLossTerminal(env, lives)
    return transform_reward(env, clip_reward) if transform_reward else ClipReward(env)


def make(game="Pong", training=True, noop_max=30, frame_skip=4, screen_size=84,
         max_episode_frames=MAX_EPISODE_FRAMES, apex_worker=0, apex_env=0):
    """An Atari env for apex (see the module's comment): single (84, 84) uint8 frames,
    Discrete(minimal action set). training=False: no life loss terminal, no clipping."""
    del apex_worker, apex_env  # per-env seeds come from the actor's RESET
    import gymnasium as gym

    try:
        import ale_py

        gym.register_envs(ale_py)  # gymnasium >= 1.0 no longer registers ALE/ by itself
    except (ImportError, AttributeError):
        pass
    env = gym.make("ALE/%s-v5" % game, frameskip=1, repeat_action_probability=0.0,
                   full_action_space=False, max_episode_steps=max_episode_frames)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip,
                                          screen_size=screen_size, grayscale_obs=True,
                                          grayscale_newaxis=False,
                                          terminal_on_life_loss=False, scale_obs=False)
    if not training:
        return env
    # The wrappers here are duck-typed: TransformReward needs a gymnasium.Env inside, so the
    # life-loss wrapper goes in a gym.Wrapper shell for it.
    shell = _GymShell(gym, LifeLossTerminal(env))
    return gym.wrappers.TransformReward(shell, clip_reward)


def _GymShell(gym, inner):
    """inner (a duck-typed env) as a gymnasium.Wrapper, for Gymnasium's own wrappers."""

    class Shell(gym.Wrapper):
        def __init__(self):
            super().__init__(inner.env)
            self.inner = inner

        def reset(self, *, seed=None, options=None):
            return self.inner.reset(seed=seed, options=options)

        def step(self, action):
            return self.inner.step(action)

    return Shell()

