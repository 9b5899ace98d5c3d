#!/usr/bin/env python3
"""Captures the real ClientHellos that tests/unit/test_tlshello.c replays.

Loopback only: a catcher on 127.0.0.1 reads the records holding the
ClientHello that openssl s_client or curl sends, then closes; for the
resumed session, a local openssl s_server (a throwaway self-signed
certificate) gives s_client a ticket first. Run from the source tree
(Debian: openssl, curl):
    python3 tests/unit/data/tls/capture.py
It rewrites the *.bin files next to it.
"""
import os
import socket
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def read_hello(conn):
    """The records holding one handshake message (at most 4 records)."""
    data = b""
    conn.settimeout(10)

    def need(n):
        nonlocal data
        while len(data) < n:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError("client closed after %d bytes" % len(data))
            data += chunk

    off, hs, total = 0, b"", None
    for _ in range(4):
        need(off + 5)
        flen = int.from_bytes(data[off + 3:off + 5], "big")
        need(off + 5 + flen)
        hs += data[off + 5:off + 5 + flen]
        off += 5 + flen
        if total is None and len(hs) >= 4:
            total = 4 + int.from_bytes(hs[1:4], "big")
        if total is not None and len(hs) >= total:
            return data[:off]
    raise ValueError("hello over more than 4 records")


def catch(argv, stdin=b""):
    """Runs a client against a fresh catcher; returns the hello's records."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    argv = [a.replace("PORT", str(port)) for a in argv]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = threading.Thread(target=lambda: p.communicate(stdin, timeout=20))
    t.start()
    srv.settimeout(10)
    conn, _ = srv.accept()
    try:
        return read_hello(conn)
    finally:
        conn.close()
        srv.close()
        t.join(timeout=30)


def save(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def main():
    sc = ["openssl", "s_client", "-connect", "127.0.0.1:PORT"]
    save("openssl-sni-alpn.bin", catch(sc + ["-servername", "Api.Allowed.TEST", "-alpn", "h2,http/1.1"]))
    save("openssl-nosni.bin", catch(sc + ["-noservername"]))
    save("openssl-tls12.bin", catch(sc + ["-tls1_2", "-servername", "allowed.test."]))
    # A hello of more than 512 bytes (many ALPN names) in 512-byte records.
    alpn = ",".join("a-long-protocol-name-%02d" % i for i in range(16))
    save("openssl-frag.bin", catch(sc + ["-servername", "www.allowed.test", "-alpn", alpn, "-max_send_frag", "512"]))
    save("curl.bin", catch(["curl", "-sk", "--max-time", "5", "--resolve", "api.allowed.test:PORT:127.0.0.1",
                            "https://api.allowed.test:PORT/"]))
    save("curl-tls12.bin", catch(["curl", "-sk", "--max-time", "5", "--tls-max", "1.2", "--http1.1", "--resolve",
                                  "allowed.test:PORT:127.0.0.1", "https://allowed.test:PORT/"]))
    # Resumption: a ticket from a local s_server, then the hello that offers it.
    with tempfile.TemporaryDirectory() as d:
        key, crt, sess = (os.path.join(d, n) for n in ("k.pem", "c.pem", "sess.pem"))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", crt, "-subj", "/CN=allowed.test", "-days", "1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        server = subprocess.Popen(["openssl", "s_server", "-accept", "127.0.0.1:%d" % port, "-cert", crt, "-key", key,
                                   "-www"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):  # until it listens (bounded)
                if subprocess.run(["ss", "-Htln", "src", "127.0.0.1:%d" % port], capture_output=True).stdout:
                    break
                time.sleep(0.1)
            subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", "allowed.test",
                            "-sess_out", sess], input=b"GET / HTTP/1.0\r\n\r\n", timeout=20,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not os.path.exists(sess):
                raise RuntimeError("s_server gave no session")
        finally:
            server.terminate()
            server.wait(timeout=10)
        save("openssl-resume.bin", catch(sc + ["-servername", "allowed.test", "-sess_in", sess]))


if __name__ == "__main__":
    main()
