"""pyenv_hostile.py: python/apex_env.py's worker over the local transport (pipes and shared
memory), misbehaving in one way the bridge must survive. check_pyenv spawns it as the
worker script ([python] script), with apex_env.py's own arguments; the misbehaviour is
$APEX_PYENV_HOSTILE:

  rehello  Before its first RESULT of group 1, the worker says its HELLO again, with the
           same nonce (a ZeroMQ worker repeats it when idle; nothing stops a local one).
           The actor must ignore it: a local message has no routing id to remember.
           Sent while region 0 is idle (the test steps group 1 first), so the HELLO's text
           is still there when the actor reads the header: the test does not depend on
           timing.
  version  The worker speaks bridge version 2 (an apex_env.py of another apex): the actor
           must fail its start-up at once, saying so, rather than wait for a timeout.

Everything else is apex_env.py's, unchanged.
"""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "apex_env", os.path.join(HERE, "..", "python", "apex_env.py"))
ae = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ae)

MODE = os.environ.get("APEX_PYENV_HOSTILE", "")
_send = ae._Local.send
_state = {"hello": None, "rehello_sent": False}


def _hostile_send(self, frames, region):
    mtype = frames[0][6] | frames[0][7] << 8
    if mtype == ae.HELLO:
        _state["hello"] = frames
    if MODE == "rehello" and mtype == ae.RESULT and region == 1 and not _state["rehello_sent"]:
        _state["rehello_sent"] = True
        _send(self, _state["hello"], 0)
    _send(self, frames, region)


ae._Local.send = _hostile_send
if MODE == "version":
    ae.VERSION = 2

if __name__ == "__main__":
    if MODE not in ("rehello", "version"):
        sys.exit("pyenv_hostile.py: unknown APEX_PYENV_HOSTILE %r" % MODE)
    sys.exit(ae.main())
