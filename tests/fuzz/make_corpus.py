#!/usr/bin/env python3
"""Writes the seed corpus of the bootstrap fuzz targets (tests/fuzz/corpus/<target>/).

Each seed is one well-formed input of one parser, prefixed with the byte that selects the parser
(see the fuzz_*.cc files), so the fuzzer starts from inputs that get past the first checks.
Run from anywhere; the output is committed.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

FRAME_JOIN, FRAME_TABLE, FRAME_ERROR, FRAME_IDENTIFY, FRAME_ACCEPT, FRAME_RING, FRAME_MESSAGE = (
    1, 2, 3, 4, 5, 6, 7)


def frame(ftype, payload=b"", flags=0, tag=0):
    return b"BRFR" + struct.pack("<HHII", ftype, flags, tag, len(payload)) + payload


def wire_v4(a, b, c, d, port):
    return struct.pack("<HHI", 4, port, 0) + bytes([a, b, c, d]) + bytes(12)


def wire_v6_loopback(port):
    return struct.pack("<HHI", 6, port, 0) + bytes(15) + b"\x01"


def error_payload(code, text):
    return struct.pack("<I", code) + text.encode()


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def unique_id(address_wire, secret):
    head = b"BRID" + struct.pack("<HH", 1, 0) + address_wire + secret
    assert len(head) == 64
    return head + struct.pack("<I", fnv1a(head)) + bytes(128 - 68)


def write(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def main():
    join = struct.pack("<ii", 2, 4) + wire_v4(127, 0, 0, 1, 40000) + struct.pack("<Q", 0x5eed)
    identify = struct.pack("<Iii", 1, 3, 4)
    # Each entry: a listener address, then its rank's host key.
    table = b"".join(wire_v4(10, 0, 0, r + 1, 41000 + r) + struct.pack("<Q", r // 2)
                     for r in range(3))
    all_types = 0xFE

    # fuzz_frames: 0 header, 1 payloads, 2 stream, 3 parting words.
    write("frames", "header_join", b"\x00" + struct.pack("<II", all_types, 64) +
          frame(FRAME_JOIN, join)[:16])
    write("frames", "header_error", b"\x00" + struct.pack("<II", all_types, 64) +
          frame(FRAME_ERROR, error_payload(6, "x" * 40))[:16])
    write("frames", "payload_join", b"\x01" + join)
    write("frames", "payload_identify", b"\x01" + identify)
    write("frames", "payload_table", b"\x01" + table)
    write("frames", "payload_error", b"\x01" + error_payload(5, "rank 3 called broadcast"))
    write("frames", "stream", b"\x02" + frame(FRAME_RING, b"abcd", flags=1, tag=7) +
          frame(FRAME_MESSAGE, bytes(100), tag=3) + frame(FRAME_ERROR, error_payload(6, "gone")))
    write("frames", "parting_words", b"\x03" + frame(FRAME_ERROR, error_payload(8, "timed out")))

    # fuzz_handshake: 0 server, 1 client, 2 stranger, 3 member.
    hello = b"BRHS" + struct.pack("<HH", 1, 0) + bytes(range(32))
    write("handshake", "server_hello", b"\x00" + hello + bytes(32))
    write("handshake", "client_server_hello", b"\x01" + b"BRHS" + struct.pack("<HH", 1, 0) +
          bytes(64))
    write("handshake", "stranger_hello", b"\x02" + hello + bytes(32) + frame(FRAME_JOIN, join))
    write("handshake", "member_join", b"\x03" + frame(FRAME_JOIN, join))
    write("handshake", "member_identify", b"\x03" + frame(FRAME_IDENTIFY, identify))

    # fuzz_unique_id: 0 id, 1 wire address, 2 text.
    write("unique_id", "id_v4", b"\x00" + unique_id(wire_v4(192, 168, 1, 7, 29500), bytes(range(32))))
    write("unique_id", "id_v6", b"\x00" + unique_id(wire_v6_loopback(29501), bytes(32)))
    write("unique_id", "wire_v4", b"\x01" + wire_v4(10, 1, 2, 3, 8080))
    write("unique_id", "wire_v6", b"\x01" + wire_v6_loopback(9))
    write("unique_id", "text_v4", b"\x02" + b"127.0.0.1:29500")
    write("unique_id", "text_v6", b"\x02" + b"[::1]:80")
    write("unique_id", "text_ifname", b"\x02" + b"^=eth0,ib")


if __name__ == "__main__":
    main()
