#!/usr/bin/env python3
"""Captures the real request heads that tests/unit/test_httphead.c and
tests/unit/test_pktline.c replay.

Loopback only: a catcher on 127.0.0.1 records each request (head and body,
as sent) and answers it; for `git push` over smart HTTP it runs the local
git receive-pack on a throwaway bare repository, so git sees a real
server. Clients: curl, Node's fetch (undici), Python requests, git. Run
from the source tree (Debian: curl, nodejs, python3-requests, git):
    python3 tests/unit/data/http/capture.py
It rewrites the *.bin files next to it.
"""
import os
import socket
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))


def read_request(conn):
    """One request: the head, then the body its framing gives."""
    conn.settimeout(20)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise EOFError("client closed after %d bytes" % len(data))
        data += chunk
    head_len = data.index(b"\r\n\r\n") + 4
    head = data[:head_len].decode("latin-1").lower()
    if "\r\nexpect: 100-continue" in head:
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "\r\ntransfer-encoding: chunked" in head:
        while not data.endswith(b"\r\n0\r\n\r\n") and data[head_len:] != b"0\r\n\r\n":
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError("client closed in a chunked body")
            data += chunk
    else:
        n = 0
        for line in head.split("\r\n"):
            if line.startswith("content-length:"):
                n = int(line.split(":", 1)[1])
        while len(data) < head_len + n:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError("client closed in the body")
            data += chunk
    return data, head_len


def dechunk(body):
    out = b""
    while True:
        line, body = body.split(b"\r\n", 1)
        n = int(line.split(b";")[0], 16)
        if n == 0:
            return out
        out += body[:n]
        body = body[n + 2:]


def serve(sock, repo, caught, stop):
    """Answers requests until stop; records all but the ref advertisements."""
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except socket.timeout:
            continue
        with conn:
            data, head_len = read_request(conn)
            line = data.split(b"\r\n", 1)[0].decode()
            ctype, body = b"text/plain", b"ok\n"
            if "/info/refs?service=git-receive-pack" in line:
                adv = subprocess.run(["git", "receive-pack", "--stateless-rpc", "--advertise-refs", repo],
                                     capture_output=True, check=True).stdout
                ctype = b"application/x-git-receive-pack-advertisement"
                body = b"001f# service=git-receive-pack\n0000" + adv
            else:
                caught.append(data)
                if line.endswith("git-receive-pack HTTP/1.1"):
                    req = data[head_len:]
                    if b"\r\ntransfer-encoding: chunked" in data[:head_len].lower():
                        req = dechunk(req)
                    body = subprocess.run(["git", "receive-pack", "--stateless-rpc", repo], input=req,
                                          capture_output=True, check=True).stdout
                    ctype = b"application/x-git-receive-pack-result"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: " +
                         str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)


def catch(argv, repo=None, cwd=None, env=None):
    """Runs a client (argv with {url}) against a fresh catcher; returns the
    requests it sent (not the ref advertisements)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    url = "http://127.0.0.1:%d" % sock.getsockname()[1]
    caught, stop = [], threading.Event()
    t = threading.Thread(target=serve, args=(sock, repo, caught, stop))
    t.start()
    try:
        subprocess.run([a.replace("{url}", url) for a in argv], check=True, timeout=60, cwd=cwd, env=env,
                       stdout=subprocess.DEVNULL)
    finally:
        stop.set()
        t.join()
        sock.close()
    return caught


def save(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


NODE_JSON = """
fetch(process.argv[1] + '/v1/messages', {method: 'POST',
  headers: {'x-api-key': '{}', 'anthropic-version': '2023-06-01', 'content-type': 'application/json'},
  body: JSON.stringify({model: 'm', max_tokens: 16, messages: [{role: 'user', content: 'hi'}]})})
  .then(r => r.text());
"""
NODE_STREAM = """
const body = new ReadableStream({start(c) { c.enqueue(new TextEncoder().encode('{"part":1}'));
  c.enqueue(new TextEncoder().encode('{"part":2}')); c.close(); }});
fetch(process.argv[1] + '/upload', {method: 'POST', body, duplex: 'half',
  headers: {'authorization': 'Bearer {}'}}).then(r => r.text());
"""
PY_REQUESTS = """
import sys, requests
requests.post(sys.argv[1] + '/v1/chat/completions', json={'model': 'm', 'messages': []},
              headers={'Authorization': 'Bearer {}'})
requests.post(sys.argv[1] + '/upload', data=(b for b in [b'one', b'two']))
"""


def git(*args, cwd=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@a", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@a", GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2026-01-01T00:00:00Z", GIT_CONFIG_NOSYSTEM="1", HOME=cwd or "/")
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return env


def git_pushes(tmp, fmt):
    srv, cl = os.path.join(tmp, fmt + "-srv.git"), os.path.join(tmp, fmt + "-cl")
    git("init", "-q", "--bare", "--object-format=" + fmt, srv)
    git("-C", srv, "config", "http.receivepack", "true")
    git("-C", srv, "config", "receive.advertisePushOptions", "true")
    git("init", "-q", "--object-format=" + fmt, cl)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=cl)
    env = git("commit", "-q", "--allow-empty", "-m", "two", cwd=cl)
    first = catch(["git", "push", "-q", "{url}/repo.git", "HEAD~1:refs/heads/main", "HEAD:refs/heads/agent/x"],
                  repo=srv, cwd=cl, env=env)
    second, shallow = [], []
    if fmt == "sha1":
        second = catch(["git", "push", "-q", "--atomic", "-o", "ci.skip", "{url}/repo.git", "HEAD:refs/heads/main",
                        ":refs/heads/agent/x"], repo=srv, cwd=cl, env=env)
        # A push from a shallow clone starts with its shallow lines.
        git("-C", srv, "config", "receive.shallowUpdate", "true")
        sh = os.path.join(tmp, "shallow")
        git("clone", "-q", "--depth", "1", "file://" + cl, sh)
        env = git("commit", "-q", "--allow-empty", "-m", "three", cwd=sh)
        shallow = catch(["git", "push", "-q", "{url}/repo.git", "HEAD:refs/heads/agent/shallow"], repo=srv, cwd=sh,
                        env=env)
    return first, second, shallow


def main():
    save("curl-get.bin", catch(["curl", "-sS", "-H", "Authorization: Bearer {}", "{url}/v1/models?limit=2"])[0])
    got = catch(["curl", "-sS", "-H", "x-api-key: {}", "-H", "content-type: application/json",
                 "-d", '{"model":"m","max_tokens":16}', "{url}/v1/messages"])
    save("curl-post.bin", got[0])
    save("undici-post.bin", catch(["node", "-e", NODE_JSON, "{url}"])[0])
    save("undici-chunked.bin", catch(["node", "-e", NODE_STREAM, "{url}"])[0])
    got = catch(["python3", "-c", PY_REQUESTS, "{url}"])
    save("requests-post.bin", got[0])
    save("requests-chunked.bin", got[1])
    with tempfile.TemporaryDirectory() as tmp:
        first, second, shallow = git_pushes(tmp, "sha1")
        save("git-push.bin", first[0])
        save("git-push-options.bin", second[0])
        save("git-push-shallow.bin", shallow[0])
        first, _, _ = git_pushes(tmp, "sha256")
        save("git-push-sha256.bin", first[0])


if __name__ == "__main__":
    main()
