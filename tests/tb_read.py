#!/usr/bin/env python3
"""tb_read.py: an independent reader of TensorBoard event files (tests only).

    /usr/bin/python3 tests/tb_read.py PATH...     (a directory or an event file)

For a directory it reads every file whose name contains "tfevents", in name order (the
order TensorBoard's loader uses). Every TFRecord is checked (u64 length LE, masked CRC-32C
of the 8 length bytes, data, masked CRC-32C of the data), every Event is parsed by the
official protobuf runtime (python3-protobuf) and then re-encoded by it, which must give the
same bytes: so no field is unknown to TensorBoard's schema and the encoding is canonical.
The first record of a file must be Event{file_version "brain.Event:2"}, every later one a
summary of simple_value scalars. Prints "step,tag,value" and one CSV row per scalar (value
is the float32 as a Python float, repr: exact).

Independent of apex's C code on purpose: its own CRC-32C (checked against published vectors
at start), and message classes built here, at run time, from TensorBoard's field numbers
(tensorboard/compat/proto/event.proto and summary.proto) rather than from
proto/tensorboard.proto, so a wrong field number there cannot hide. No protoc needed.

Exit status: 0 all good, 1 a bad file (the reason on stderr), 2 usage, 77 the protobuf
runtime is missing (tests skip on it).
"""
import os
import struct
import sys

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:
    sys.stderr.write("tb_read.py: python3-protobuf is not installed (apt-get install "
                     "python3-protobuf)\n")
    sys.exit(77)

FILE_VERSION = "brain.Event:2"

# ---- CRC-32C (Castagnoli, reflected 0x82F63B78), byte-at-a-time --------------------------


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def self_test():
    # RFC 3720 check value, 32 zero bytes (RFC 3720 B.4), the rustboard masked_crc test, and
    # the mask of the empty CRC.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert masked_crc(b"\x1a\x11CRC test, one two") == 0x5794D08A
    assert masked_crc(b"") == 0xA282EAD8


# ---- messages, from TensorBoard's field numbers ------------------------------------------


def _event_class():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_read/event.proto", package="tensorboard",
                                             syntax="proto3")
    summary = fdp.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL,
                    oneof_index=0)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorboard.Summary.Value")
    event = fdp.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                    oneof_index=0)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorboard.Summary", oneof_index=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tensorboard.Event")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22 (Python API)
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


# ---- reading -----------------------------------------------------------------------------


class BadFile(Exception):
    pass


def records(path):
    """Yields (offset, data) for each record of path, checking the framing and both CRCs."""
    with open(path, "rb") as f:
        blob = f.read()
    off = 0
    while off < len(blob):
        if len(blob) - off < 12:
            raise BadFile(f"{path}:{off}: truncated record header ({len(blob) - off} bytes)")
        (n,) = struct.unpack_from("<Q", blob, off)
        (len_crc,) = struct.unpack_from("<I", blob, off + 8)
        if masked_crc(blob[off:off + 8]) != len_crc:
            raise BadFile(f"{path}:{off}: length CRC mismatch")
        if len(blob) - off - 12 < n + 4:
            raise BadFile(f"{path}:{off}: truncated record ({n} data bytes announced)")
        data = blob[off + 12:off + 12 + n]
        (data_crc,) = struct.unpack_from("<I", blob, off + 12 + n)
        if masked_crc(data) != data_crc:
            raise BadFile(f"{path}:{off}: data CRC mismatch")
        yield off, data
        off += 12 + n + 4


def read_file(path, Event, out):
    first = True
    for off, data in records(path):
        ev = Event()
        ev.ParseFromString(data)
        ev.DiscardUnknownFields()
        if ev.SerializeToString() != data:
            raise BadFile(f"{path}:{off}: fields unknown to TensorBoard's Event, or a "
                          f"non-canonical encoding")
        what = ev.WhichOneof("what")
        if first:
            if what != "file_version" or ev.file_version != FILE_VERSION:
                raise BadFile(f"{path}:{off}: first record is not file_version {FILE_VERSION}")
            first = False
            continue
        if what != "summary":
            raise BadFile(f"{path}:{off}: a record after the first is {what}, not a summary")
        for v in ev.summary.value:
            if v.WhichOneof("value") != "simple_value":
                raise BadFile(f"{path}:{off}: value {v.tag!r} has no simple_value")
            out.write(f"{ev.step},{v.tag},{v.simple_value!r}\n")
    if first:
        raise BadFile(f"{path}: no records")


def event_files(path):
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if "tfevents" in n)
        return [os.path.join(path, n) for n in names]
    return [path]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    self_test()
    Event = _event_class()
    out = sys.stdout
    out.write("step,tag,value\n")
    try:
        for arg in argv[1:]:
            files = event_files(arg)
            if not files:
                raise BadFile(f"{arg}: no event files")
            for path in files:
                read_file(path, Event, out)
    except (BadFile, OSError) as e:
        out.flush()
        sys.stderr.write(f"tb_read.py: {e}\n")
        return 1
    except Exception as e:  # a parse error of the protobuf runtime (DecodeError, ...)
        out.flush()
        sys.stderr.write(f"tb_read.py: {type(e).__name__}: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
