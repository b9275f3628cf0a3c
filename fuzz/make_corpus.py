#!/usr/bin/env python3
"""Writes the NBD fuzzer's seed corpus (fuzz/corpus/). Each seed is: a config
byte and a split seed (see fuzz/nbd_fuzz.cc), then what a client sends after
the greeting. Rerun after changing the input layout."""
import os
import struct

OPT_MAGIC = 0x49484156454F5054
REQ_MAGIC = 0x25609513
FLAGS = struct.pack(">I", 3)  # C_FIXED_NEWSTYLE | C_NO_ZEROES


def opt(num, data=b""):
    return struct.pack(">QII", OPT_MAGIC, num, len(data)) + data


def go_data(name, infos=()):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", len(infos)) + b"".join(
        struct.pack(">H", i) for i in infos)


def meta_data(name, queries):
    return (struct.pack(">I", len(name)) + name + struct.pack(">I", len(queries)) +
            b"".join(struct.pack(">I", len(q)) + q for q in queries))


def req(cmd, offset, length, flags=0, cookie=1):
    return struct.pack(">IHHQQI", REQ_MAGIC, flags, cmd, cookie, offset, length)


REQUESTS = (req(1, 0, 512, cookie=1) + b"\xab" * 512 + req(0, 0, 512, cookie=2) + req(3, 0, 0, cookie=3) +
            req(1, 4096, 512, flags=1, cookie=4) + b"\x5a" * 512 + req(4, 0, 4096, cookie=5) +
            req(6, 8192, 4096, flags=2, cookie=6) + req(7, 0, 65536, cookie=7) + req(9, 0, 0, cookie=8) +
            req(2, 0, 0, cookie=9))

SEEDS = {
    # conf 0x10: TLS off, one export with 512-byte blocks
    "go": bytes([0x10, 0]) + FLAGS + opt(8) + opt(7, go_data(b"disk", (3,))) + REQUESTS,
    "go_split": bytes([0x10, 7]) + FLAGS + opt(7, go_data(b"disk")) + REQUESTS,
    "list": bytes([0x80, 3]) + FLAGS + opt(3) + opt(3, b"x") + opt(2),
    "info_then_go": bytes([0x50, 1]) + FLAGS + opt(8) + opt(6, go_data(b"disk", (0, 1, 2, 3, 99))) +
                    opt(9, meta_data(b"disk", [b"base:"])) + opt(10, meta_data(b"disk", [b"base:allocation"])) +
                    opt(7, go_data(b"disk", (3,))) + REQUESTS,
    "export_name": bytes([0x80, 5]) + struct.pack(">I", 1) + opt(1, b"") + REQUESTS,
    # conf 0x02: TLS required; STARTTLS, then haggling resumes inside TLS
    "starttls": bytes([0x02, 2]) + FLAGS + opt(7, go_data(b"disk")) + opt(5) + opt(7, go_data(b"disk")) + REQUESTS,
    # an option over the 64 KiB limit, cut short: the skip path, kept small
    "oversized": bytes([0x00, 9]) + FLAGS + struct.pack(">QII", OPT_MAGIC, 42, 65537) + b"\0" * 64 + opt(99, b"zz") + opt(7, go_data(b"nope")) +
                 opt(7, go_data(b"disk")) + REQUESTS,
}

# For nbd_conn_fuzz (a real Connection; its config byte: bit 0 min block
# 512, bit 1 read-only, bit 2 base:allocation): byte-granular requests, TRIM
# with FUA, structured replies with BLOCK_STATUS, and a WRITE whose payload
# is cut by a DISC's bytes.
CONN = (req(1, 1000, 100, cookie=1) + b"\x11" * 100 + req(0, 999, 102, cookie=2) + req(4, 0, 8192, flags=1, cookie=3) +
        req(1, 0, 65536, flags=1, cookie=4) + b"\x22" * 65536 + req(0, 1, (1 << 20) + 14, cookie=5) +
        req(5, 0, 4096, cookie=6))
SEEDS.update({
    "conn_unaligned": bytes([0x04, 11]) + FLAGS + opt(8) + opt(10, meta_data(b"disk", [b"base:allocation"])) +
                      opt(7, go_data(b"disk")) + CONN + req(7, 0, 1 << 20, cookie=7) + req(2, 0, 0, cookie=8),
    "conn_cut_write": bytes([0x01, 13]) + FLAGS + opt(7, go_data(b"disk", (3,))) + CONN +
                      req(1, 0, 1 << 20, cookie=9) + b"\x33" * 1000 + req(2, 0, 0, cookie=10),
})

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(here, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
