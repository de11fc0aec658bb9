"""apexwire.py: a minimal, independent encoder/decoder of apex's wire format for test
fixtures (python3-zmq peers). Written from proto/apex.proto, not from common/wire.c, so the
smoke tests also check that the C code speaks the documented protocol."""
import struct

VERSION = 1


def _varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _uint(field, v):
    return _varint(field << 3) + _varint(v) if v else b""


def _bytes(field, b):
    return _varint((field << 3) | 2) + _varint(len(b)) + b if b else b""


def _f32(field, v):
    return _varint((field << 3) | 5) + struct.pack("<f", v)


def envelope(body_field, body, version=VERSION):
    return _uint(1, version) + _varint((body_field << 3) | 2) + _varint(len(body)) + body


OBS_FLOAT32 = 0  # enum ObsDtype
OBS_UINT8 = 1
_DTYPES = {"float32": OBS_FLOAT32, "uint8": OBS_UINT8}


def _obs_bytes(rows, obs_dtype):
    """rows (lists of numbers) packed as obs_dtype: float32 little-endian, or one byte per
    element for uint8 (ints 0..255)."""
    flat = [x for r in rows for x in r]
    if obs_dtype == "uint8":
        return bytes(flat)  # raises ValueError outside 0..255
    return struct.pack("<%df" % len(flat), *flat)


def transition_batch(actor_id, epoch, seq, obs, actions, rewards, discounts, next_obs,
                     priorities=None, version=VERSION, obs_dtype="float32"):
    """obs/next_obs: lists of rows (lists of floats, or of ints 0..255 when obs_dtype is
    "uint8"). obs_dtype ("float32" or "uint8") goes in field 13 (omitted when float32, the
    proto3 default)."""
    if obs_dtype not in _DTYPES:
        raise ValueError("obs_dtype %r: float32 or uint8" % (obs_dtype,))
    n, d = len(obs), len(obs[0])
    body = (_uint(1, actor_id) + _uint(2, seq) + _uint(4, n) + _uint(5, d) +
            _bytes(6, _obs_bytes(obs, obs_dtype)) + _bytes(7, struct.pack("<%di" % n, *actions)) +
            _bytes(8, struct.pack("<%df" % n, *rewards)) +
            _bytes(9, struct.pack("<%df" % n, *discounts)) +
            _bytes(10, _obs_bytes(next_obs, obs_dtype)) +
            (_bytes(11, struct.pack("<%df" % n, *priorities)) if priorities else b"") +
            _uint(12, epoch) + _uint(13, _DTYPES[obs_dtype]))
    return envelope(2, body, version)


def sample_request(req_id, batch_size, beta):
    return envelope(3, _uint(1, req_id) + _uint(2, batch_size) + _f32(3, beta))


def _fields(buf):
    """Yields (field, wire_type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wt)
        yield field, wt, v


def _read_varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def decode(buf):
    """Returns (body_field, {field: value}) of an Envelope."""
    version, body_field, body = 0, None, b""
    for f, wt, v in _fields(buf):
        if f == 1:
            version = v
        elif wt == 2:
            body_field, body = f, v
    if version != VERSION:
        raise ValueError("version %d" % version)
    return body_field, {f: v for f, _, v in _fields(body)}


def ack_seqs(f):
    """The seqs an InsertAck body (field dict from decode) acknowledges: seq (field 2) and
    the packed repeated seqs (field 3) the replay server uses to coalesce acks."""
    seqs, packed, i = [f.get(2, 0)], f.get(3, b""), 0
    while i < len(packed):
        v, i = _read_varint(packed, i)
        seqs.append(v)
    return seqs


def drain_acks(sock):
    """The (actor, seq) pairs of every InsertAck already waiting on a pyzmq socket, read
    without blocking; other messages are skipped."""
    import zmq  # only the socket helpers need pyzmq
    out = []
    while True:
        try:
            msg = sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return out
        body, f = decode(msg)
        if body == BODY_INSERT_ACK:
            out.extend((f.get(1, 0), q) for q in ack_seqs(f))


def sample_reply(f):
    """The fields of a SampleReply body (field dict from decode) as a dict: id, status,
    count, obs_dim, obs_dtype ("float32" or "uint8"; field 13, absent = float32), keys,
    is_weights, obs and next_obs (lists of rows: floats, or ints 0..255 for uint8),
    actions, rewards, discounts. Raises ValueError when a length does not match count."""
    n, d = f.get(3, 0), f.get(4, 0)
    dt = {v: k for k, v in _DTYPES.items()}.get(f.get(13, OBS_FLOAT32))
    if dt is None:
        raise ValueError("obs_dtype %d" % f[13])

    def arr(field, fmt, k):
        b = f.get(field, b"")
        if len(b) != k * struct.calcsize(fmt):
            raise ValueError("field %d: %d bytes for %d x %s" % (field, len(b), k, fmt))
        return list(struct.unpack("<%d%s" % (k, fmt), b)) if k else []

    def rows(field):
        flat = arr(field, "B" if dt == "uint8" else "f", n * d)
        return [flat[i * d:(i + 1) * d] for i in range(n)]

    return {"id": f.get(1, 0), "status": f.get(2, 0), "count": n, "obs_dim": d,
            "obs_dtype": dt, "keys": arr(5, "Q", n), "is_weights": arr(6, "f", n),
            "obs": rows(7), "actions": arr(8, "i", n), "rewards": arr(9, "f", n),
            "discounts": arr(10, "f", n), "next_obs": rows(11)}


BODY_INSERT_ACK = 8
BODY_SAMPLE_REPLY = 4
