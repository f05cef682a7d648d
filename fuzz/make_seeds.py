#!/usr/bin/env python3
"""Writes the seed corpora of the targets whose inputs are binary records (master_request_fuzz,
shm_reply_fuzz, handoff_piece_fuzz, auth_handshake_fuzz, tcp_frame_fuzz, ucx_key_fuzz) and http_endpoint_fuzz's
requests into fuzz/corpus/<target>/.
Each seed is a small valid input in the layout its target's header comment describes.
Deterministic: rerunning it rewrites the same bytes.  usage: fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---- protobuf, by hand: just what master.proto's requests use ----
def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def u(field, n):
    return varint(field << 3) + varint(n)


def b(field, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def packed(field, values):
    return b(field, b"".join(varint(v) for v in values))


# master_request_fuzz: a record is type u8 | length u16 LE | request bytes (fuzz/master_request_fuzz.cc)
MOUNT, UNMOUNT, HEARTBEAT, PULL, PUT_START, PUT_END, PUT_REVOKE, REMOVE, GET, EXISTS, STAT, DESCRIBE, RETAIN, TIME = \
    range(14)


def record(kind, payload=b""):
    return struct.pack("<BH", kind, len(payload)) + payload


def put_start(items, replicas=0, group="", pin_ttl_ms=0):
    body = b"".join(b(1, b(1, key) + u(2, length) + (b(3, g) if g else b"")) for key, length, g in items)
    options = (u(1, replicas) if replicas else b"") + (b(2, group) if group else b"") + (u(3, pin_ttl_ms) if pin_ttl_ms else b"")
    return record(PUT_START, body + (b(2, options) if options else b""))


def keys(kind, names, lease_ms=0):
    return record(kind, b"".join(b(1, k) for k in names) + (u(2, lease_ms) if lease_ms else b""))


def time_passes(ms):
    return record(TIME, struct.pack("<H", ms))


def endpoint(store, size):
    return b(2, store) + b(3, "fuzz-host") + b(4, "127.0.0.1:2") + u(6, size)


def entry(key, offset, length, put_id, complete, group=""):
    return b(1, key) + u(2, offset) + u(3, length) + (b(4, group) if group else b"") + u(5, put_id) + (u(6, 1) if complete else b"")


write("master_request_fuzz", "put_get",
      put_start([("a", 1000, ""), ("b", 5000, "g"), ("c", 100, "g")]) + keys(PUT_END, ["a", "b", "c"]) +
      keys(GET, ["a", "b", "x"], lease_ms=100) + keys(EXISTS, ["a", "b", "x"]) + keys(REMOVE, ["a"]) +
      record(STAT) + record(DESCRIBE))
write("master_request_fuzz", "copies_and_eviction",
      put_start([("k%d" % i, 7000, "") for i in range(8)], replicas=2) + keys(PUT_END, ["k%d" % i for i in range(8)]) +
      put_start([("big", 60000, "")], pin_ttl_ms=500) + keys(PUT_END, ["big"]) + time_passes(1500) +
      keys(GET, ["k0", "k7", "big"]) + record(STAT))
write("master_request_fuzz", "store_calls",
      record(MOUNT, b(1, endpoint("s2", 32768)) + u(2, 3) + u(3, 1)) +
      record(HEARTBEAT, b(1, "fuzz-store") + packed(2, [0, 1, 99])) +
      put_start([("j", 3000, "")]) + record(PULL, u(1, 2) + u(2, 1)) + record(PULL, u(1, 2) + u(2, 1) + u(3, 3)) +
      record(UNMOUNT, u(1, 0)) + time_passes(5000) + record(STAT))
write("master_request_fuzz", "rejoin",
      record(MOUNT, b(1, endpoint("s3", 65536)) + u(2, 3) + u(3, 1) + u(4, 12345) +
             b(5, entry("r1", 0, 100, 5, True)) + b(5, entry("r2", 128, 64, 6, False, "g"))) +
      keys(GET, ["r1", "r2"]) + keys(REMOVE, ["r1"]) + time_passes(20000) + record(STAT))
# A store restarted on its SSD tier file: objects it announces on SSD (on_ssd, offset in the
# file) are looked up where they lie in the file, retained (nothing to retain in DRAM), read again.
write("master_request_fuzz", "ssd_objects_at_a_mount",
      record(MOUNT, b(1, endpoint("s4", 65536) + u(7, 1 << 20) + u(8, 8192)) + u(2, 3) + u(3, 1) +
             b(5, entry("d1", 4096, 3000, 0, True, "dg") + u(12, 1)) +
             b(5, entry("d2", 16384, 3000, 0, True, "dg") + u(12, 1))) +
      keys(GET, ["d1", "d2", "x"]) + keys(RETAIN, ["d1"], lease_ms=1000) + keys(GET, ["d2"]) + record(STAT))
write("master_request_fuzz", "retain_and_release",
      put_start([("w%d" % i, 9000, "g%d" % (i % 3)) for i in range(6)]) + keys(PUT_END, ["w%d" % i for i in range(6)]) +
      keys(RETAIN, ["w0", "w1", "w2", "x"], lease_ms=2000) + keys(RETAIN, ["w3"]) +
      put_start([("more", 30000, "")]) + keys(PUT_END, ["more"]) + time_passes(2500) + keys(GET, ["w0", "w3"]) +
      record(STAT))
write("master_request_fuzz", "timeouts",
      put_start([("t", 100, ""), ("u", 200, "")]) + time_passes(3000) + keys(PUT_END, ["t"]) +
      keys(PUT_REVOKE, ["u", "v"]) + keys(GET, ["t"]))

# http_endpoint_fuzz: what a scraper or a probe sends
write("http_endpoint_fuzz", "metrics", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
write("http_endpoint_fuzz", "health_head", b"HEAD /health?verbose=1 HTTP/1.0\r\n\r\n")
write("http_endpoint_fuzz", "post", b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
write("http_endpoint_fuzz", "no_slash", b"GET metrics HTTP/1.1\r\n\r\n")

# shm_reply_fuzz: flags u8 | u16 LE size per fd | the reply (transfer/shm_protocol.h)
SHM_MAGIC = 0x5350564B


def shm_reply(status, segment_id, size, tier_size=0):
    return struct.pack("<IBBHQQQ", SHM_MAGIC, 2, 1, status, segment_id, size, tier_size)


def shm(fds, sizes, reply, served=True, prefault=False):
    flags = fds | (4 if served else 0) | (8 if prefault else 0)
    return bytes([flags]) + b"".join(struct.pack("<H", s) for s in sizes) + reply


write("shm_reply_fuzz", "grant", shm(2, [8192, 4096], shm_reply(0, 7, 8192), prefault=True))
write("shm_reply_fuzz", "grant_empty_segment", shm(2, [0, 4096], shm_reply(0, 7, 0)))
write("shm_reply_fuzz", "stale", shm(0, [], shm_reply(10, 7, 0)))
write("shm_reply_fuzz", "one_fd", shm(1, [4096], shm_reply(0, 7, 4096)))
write("shm_reply_fuzz", "three_fds", shm(3, [4096, 4096, 4096], shm_reply(0, 7, 4096)))
write("shm_reply_fuzz", "grant_with_tier", shm(3, [8192, 4096, 16384], shm_reply(0, 7, 8192, tier_size=16384)))
write("shm_reply_fuzz", "tier_size_without_file", shm(2, [8192, 4096], shm_reply(0, 7, 8192, tier_size=4096)))
# What the first runs found (shm_protocol_test.cc has both): a grant larger than its memfd, which
# the client mapped and died on (SIGBUS), and a status code the protocol does not have.
# (Re-encoded for version 2 of the reply, which is 8 bytes longer.)
write("shm_reply_fuzz", "grant_past_memfd_end", shm(2, [0, 4096], shm_reply(0, 7, 246)))
write("shm_reply_fuzz", "unknown_status_code", shm(1, [4096], shm_reply(284, 7, 4096)))

# handoff_piece_fuzz: 11 layout bytes, then announcements rank | decode rank | u16 piece | flags
def layout(split, bytes_index, prefill_block, stages, stage_layers, decode_block, dcp, interleave, first, count,
           slot_rows, slot_extra):
    layers = 0
    for p, n in enumerate(stage_layers):
        layers |= (n - 1) << (2 * p)
    return bytes([int(split) | bytes_index << 1, prefill_block, stages - 1, layers, decode_block, dcp - 1, interleave,
                  first, count - 1, slot_rows - 1, slot_extra])


def announce(rank, decode_rank, piece, flags=1, checksum=None):
    out = struct.pack("<BBHB", rank, decode_rank, piece, flags)
    return out + (struct.pack("<Q", checksum) if checksum is not None else b"")


write("handoff_piece_fuzz", "latent_pp2_dcp2",
      layout(False, 1, 2, 2, [2, 1], 4, 2, 0, 3, 61, 4, 0) +
      b"".join(announce(p, d, i) for p in range(2) for d in range(2) for i in range(16)))
write("handoff_piece_fuzz", "split_pp4_dcp4_interleave",
      layout(True, 1, 4, 4, [1, 2, 1, 3], 1, 4, 1, 0, 200, 16, 5) +
      announce(0, 0, 0) + announce(0, 0, 0) + announce(1, 3, 1, flags=0, checksum=12345) + announce(2, 4, 0) +
      b"".join(announce(3, d, i, flags=1 | 8) for d in range(4) for i in range(4)))

# auth_handshake_fuzz: a 24-byte challenge, then a 40-byte proof of the fuzzer's secret for it
import hashlib, hmac
SECRET = b"the fuzzer's secret, 32 bytes .."
nonce = bytes(range(16))
challenge = struct.pack("<IB3x", 0x4350564B, 1) + nonce
proof = struct.pack("<IB3x", 0x4150564B, 1) + hmac.new(SECRET, b"transfer-tcp\0" + nonce, hashlib.sha256).digest()
write("auth_handshake_fuzz", "tcp_proof", challenge + proof)
# a tenant's proof: its key is HMAC(pool secret, "kvpool-tenant\n" + claim ‖ 0 ‖ 16 zero bytes)
CLAIM = b"team-a:model1,model2"
tenant_key = hmac.new(SECRET, b"kvpool-tenant\n" + CLAIM + b"\0" + bytes(16), hashlib.sha256).digest()
write("auth_handshake_fuzz", "tenant_proof", challenge + struct.pack("<IBxH", 0x4150564B, 1, len(CLAIM)) +
      hmac.new(tenant_key, b"transfer-tcp\0" + nonce, hashlib.sha256).digest() + CLAIM)
write("auth_handshake_fuzz", "proof_for_another_purpose",
      challenge + struct.pack("<IB3x", 0x4150564B, 1) +
      hmac.new(SECRET, b"transfer-shm\0" + bytes(16), hashlib.sha256).digest())


# tcp_frame_fuzz: an 80-byte request header (a tenant's, with the master's grant for it), then a
# 24-byte response header
def grant(op, segment, offset, length, expiry):
    msg = b"kvpool-grant\n%d\n%d\n%d\n%d\n%d" % (op, segment, offset, length, expiry)
    mac = hmac.new(SECRET, msg + b"\0" + bytes(16), hashlib.sha256).digest()[:16]
    return struct.pack("<qQQ", expiry, offset, length) + mac


def request(op, rid, segment, offset, length, g):
    return struct.pack("<IBBHQQQQ", 0x5450564B, 2, op, 0, rid, segment, offset, length) + g


def response(op, status, rid, length):
    return struct.pack("<IBBHQQ", 0x5450564B, 2, op, status, rid, length)


write("tcp_frame_fuzz", "read", request(1, 7, 3, 4096, 65536, bytes(40)) + response(1, 0, 7, 65536))
write("tcp_frame_fuzz", "write", request(2, 8, 3, 0, 100, bytes(40)) + response(2, 0, 8, 0))
write("tcp_frame_fuzz", "ucx_key", request(4, 11, 3, 0, 4096, bytes(40)) + response(4, 0, 11, 4096))
write("tcp_frame_fuzz", "tier_read", request(3, 10, 3, 4096, 8192, bytes(40)) + response(3, 0, 10, 8192))
write("tcp_frame_fuzz", "granted_read",
      request(1, 9, 3, 8192, 4096, grant(1, 3, 4096, 65536, 1_800_000_001_000)) + response(1, 13, 9, 0))


# ucx_key_fuzz: a store's UCX key reply (transfer/ucx_key.h), 4096 bytes
def ucx_key(base, size, address, rkey):
    body = struct.pack("<IB3xQQII", 0x5550564B, 1, base, size, len(address), len(rkey)) + address + rkey
    return body + bytes(4096 - len(body))


write("ucx_key_fuzz", "tcp_key", ucx_key(0x7F0000001000, 64 << 20, bytes(range(79)), bytes(range(10))))
write("ucx_key_fuzz", "long_address", ucx_key(0x1000, 4096, bytes(3000), bytes(1000)))
