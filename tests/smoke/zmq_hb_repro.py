#!/usr/bin/python3
"""Stand-alone reproduction of the libzmq 4.3.4 abort that flood.sh hits in apex-replay.

A ROUTER (like apex-replay's insert socket: rcvhwm 1000, handover) is flooded by two DEALERs
(like actors: sndhwm 64, immediate). Both ends heartbeat (1 s interval, 3 s timeout, as
common/net.c sets on every socket). The ROUTER process is frozen with SIGSTOP for 5 s and
resumed; it then often dies in a libzmq I/O thread with
  Assertion failed: !_io_error (src/stream_engine_base.cpp:331)
(upstream zeromq/libzmq#4364). HB=server or HB=client (heartbeats on one end only) survive.

  /usr/bin/python3 tests/smoke/zmq_hb_repro.py PORT      # exit 1 if the ROUTER died
"""
import os, signal, sys, time
import zmq

EP = "tcp://127.0.0.1:%s" % sys.argv[1]


def hb(s, role):
    s.setsockopt(zmq.LINGER, 0)
    if role in os.environ.get("HB", "server,client"):
        s.setsockopt(zmq.HEARTBEAT_IVL, 1000)
        s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3000)


def server():
    s = zmq.Context().socket(zmq.ROUTER)
    hb(s, "server")
    s.setsockopt(zmq.RCVHWM, 1000)
    s.setsockopt(zmq.SNDHWM, 1000)
    s.setsockopt(zmq.ROUTER_HANDOVER, 1)
    s.bind(EP)
    while True:
        if s.poll(100):
            for _ in range(256):
                try:
                    ident, _msg = s.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    s.send_multipart([ident, b"ack"], zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass


def client(i, until):
    s = zmq.Context().socket(zmq.DEALER)
    hb(s, "client")
    s.setsockopt(zmq.SNDHWM, 64)
    s.setsockopt(zmq.IMMEDIATE, 1)
    s.setsockopt(zmq.ROUTING_ID, b"c%d" % i)
    s.connect(EP)
    payload = b"x" * 1000
    while time.time() < until:
        try:
            s.send(payload, zmq.NOBLOCK)
        except zmq.Again:
            time.sleep(0.001)
        while True:
            try:
                s.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
    os._exit(0)


srv = os.fork()
if srv == 0:
    server()
time.sleep(0.5)
until = time.time() + 16
kids = []
for i in range(2):
    p = os.fork()
    if p == 0:
        client(i, until)
    kids.append(p)
time.sleep(4)
os.kill(srv, signal.SIGSTOP)
time.sleep(5)
os.kill(srv, signal.SIGCONT)
time.sleep(5)
pid, st = os.waitpid(srv, os.WNOHANG)
if pid == 0:
    print("libzmq %s: ROUTER survived" % zmq.zmq_version())
    os.kill(srv, signal.SIGKILL)
    os.waitpid(srv, 0)
    rc = 0
else:
    print("libzmq %s: ROUTER died (%s)" % (zmq.zmq_version(), "signal %d" % os.WTERMSIG(st)
          if os.WIFSIGNALED(st) else "exit %d" % os.WEXITSTATUS(st)))
    rc = 1
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
sys.exit(rc)
