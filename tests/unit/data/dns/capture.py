#!/usr/bin/env python3
"""Captures the real DNS packets that tests/unit/test_dnsmsg.c replays.

Loopback only: dnsmasq answers test names on 127.0.0.77:5377 (no upstream,
--no-resolv); dig's queries are caught on 127.0.0.78:5378. Run as root
from the source tree (Debian: dnsmasq-base, bind9-dnsutils):
    python3 tests/unit/data/dns/capture.py
It rewrites the *.bin files next to it.
"""
import os
import socket
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
DNSMASQ = ("127.0.0.77", 5377)
CATCH = ("127.0.0.78", 5378)


def wire(name):
    out = b""
    for label in name.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def lazaret_query(qid, name, qtype):
    """What lz_dns_build_query writes: RD, one question, an OPT of 1232."""
    return (struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1) + wire(name) + struct.pack(">HH", qtype, 1)
            + b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0))


def save(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def ask(query):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(query, DNSMASQ)
    data, _ = s.recvfrom(65535)
    s.close()
    return data


def dig_query(*args):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(CATCH)
    s.settimeout(10)
    p = subprocess.Popen(["dig", "@" + CATCH[0], "-p", str(CATCH[1]), "+tries=1", "+time=1", *args],
                         stdout=subprocess.DEVNULL)
    data, _ = s.recvfrom(65535)
    p.wait(timeout=10)
    s.close()
    return data


def main():
    d = subprocess.Popen([
        "dnsmasq", "-k", "-C", "/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces",
        "--listen-address=" + DNSMASQ[0], "--port=" + str(DNSMASQ[1]), "--local=/test/", "--local-ttl=30",
        "--host-record=allowed.test,198.18.7.2", "--host-record=cdn.allowed.test,198.18.7.3",
        "--host-record=cdn.allowed.test,127.0.0.1", "--cname=www.allowed.test,cdn.allowed.test",
        "--host-record=rebind.test,169.254.169.254", "--pid-file=", "--user=root"])
    try:
        for _ in range(50):  # until dnsmasq answers (bounded)
            try:
                ask(lazaret_query(1, "allowed.test", 1))
                break
            except OSError:
                pass
        for qid, name, qtype, tag in [(0x1001, "www.allowed.test", 1, "cname"), (0x1002, "rebind.test", 1, "rebind"),
                                      (0x1003, "missing.test", 1, "nxdomain"), (0x1004, "allowed.test", 28, "aaaa")]:
            q = lazaret_query(qid, name, qtype)
            save("sent-%s.bin" % tag, q)
            save("resp-%s.bin" % tag, ask(q))
        save("dig-query.bin", dig_query("Api.Allowed.TEST", "A"))
        save("dig-query-noedns.bin", dig_query("+noedns", "allowed.test", "AAAA"))
        save("dig-query-escape.bin", dig_query("allowed\\.test", "A"))
    finally:
        d.terminate()
        d.wait(timeout=10)


if __name__ == "__main__":
    main()
