"""Credentials bound to endpoints (issue 24 §2-3; lazaret.toml(5),
[profiles.NAME.credentials.VAR]), attacked from inside the sandbox
(DESIGN.md §7).

Run as root, like test_tls_gate.py, with a world of its own (namespace
names lzc-*, addresses 198.18.70.0/24 .. 198.18.75.0/24, used by no other
module):

  lzc-dns  198.18.70.2  dnsmasq, authoritative for the names below only
  lzc-web  198.18.71.2  api.cred.test (and alias.cred.test, a second name
                        of the same address): HTTPS on 443, plain HTTP on 80
           198.18.71.3  other.cred.test: HTTPS on 443, plain HTTP on 80
           198.18.71.4  git.cred.test: Git smart HTTP over TLS (git
                        http-backend, receive-pack on, Basic auth that takes
                        only the real token)
           198.18.71.5  claude.cred.test, 198.18.71.6 codex.cred.test,
           198.18.71.7  opencode.cred.test: the fake model servers of
                        tests/fixtures/fake-model/ over TLS, logging the
                        credential headers they get

Every server logs what it receives byte for byte (tests/fixtures/
cred-world/server.py): the sentinel. The certificates come from a test CA
made here with the openssl CLI; the host side trusts it the way a
developer's machine would (the host's CAs, host_ca_certificates, whose
directory is LAZARET_TEST_HOST_CA_DIR in test builds); inside, the
sandbox's trust store holds it and the Domain's own CA.

The real values (fresh random ones) exist only in the environment of the
client (`lazaret run`, from_env) and in the servers' logs. The profile
`cred` binds TEST_KEY to api.cred.test (header x-api-key, format "{}") and
GIT_TOKEN to git.cred.test (format "basic", push_refs agent/*). One
session of it (a shell reading commands from the test) serves all its
tests; the attacks are node scripts (tests/fixtures/cred-world/probe.js)
writing requests byte by byte, each with a positive control in the same
session (the same request, placeholder where it belongs, reaches the
server with the real value). The agents (Claude Code, Codex, opencode)
run with their API key held only on the host, each in a Domain of its
own, all three in the background while the shared session's tests run
(they mostly compute, those mostly wait).

The image is builtin:agent-claude (node, git, bash) for the attacks, and
each agent's own; they come from LAZARET_TEST_STORAGE as in
test_agents_by_name.py (skipped outside CI without it, failed in CI).
"""
import base64
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

import netlib
from netlib import FakeLog, LogFile, World, sh

LAZARET = os.environ.get("LAZARET_BIN", "")
FIXTURES = Path(os.environ.get("LAZARET_FIXTURES", ""))
USER = os.environ.get("LAZARET_TEST_USER", "lztest")
STORAGE = os.environ.get("LAZARET_TEST_STORAGE", "")
IN_CI = bool(os.environ.get("CI"))


def unable(reason):
    """Skipped outside CI, failed in it: CI must run these tests."""
    if IN_CI:
        pytest.fail(f"{reason} (CI is set: this test must run)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


if os.geteuid() != 0:
    pytest.skip("network tests create test hosts and must run as root (scripts/test.sh)", allow_module_level=True)
if not STORAGE:
    unable("LAZARET_TEST_STORAGE is not set: it names a Storage Root of the test user that holds (or may build) "
           "the agent images (scripts/test.sh passes its own)")
if not shutil.which("node"):
    unable("node is not installed on the host (scripts/setup.sh installs nodejs): the fake model servers need it")

DNS_NS, DNS_HOST, DNS_IP = "lzc-dns", "198.18.70.1", "198.18.70.2"
WEB_NS, WEB_HOST = "lzc-web", "198.18.71.1"
API_IP, OTHER_IP, GIT_IP = "198.18.71.2", "198.18.71.3", "198.18.71.4"
API, ALIAS, OTHER, GIT = "api.cred.test", "alias.cred.test", "other.cred.test", "git.cred.test"
# agent: (fake server, its name, its address, the credential variable,
# the header it arrives in and its form there)
AGENTS = {"claude": ("anthropic", "claude.cred.test", "198.18.71.5", "ANTHROPIC_API_KEY", "x-api-key", "{}"),
          "codex": ("openai-responses", "codex.cred.test", "198.18.71.6", "OPENAI_API_KEY", "authorization",
                    "Bearer {}"),
          "opencode": ("openai-chat", "opencode.cred.test", "198.18.71.7", "OPENAI_API_KEY", "authorization",
                       "Bearer {}")}
NAMES = {API: API_IP, ALIAS: API_IP, OTHER: OTHER_IP, GIT: GIT_IP,
         **{a[1]: a[2] for a in AGENTS.values()}}
WEB_IPS = sorted(set(NAMES.values()))
PH_RE = re.compile(r"^lzph_[0-9a-f]{32}$")
MADE = "made-by-agent"

# The real values: fresh each run, known to the client and the servers.
REAL_KEY = "sk-real-" + secrets.token_hex(16)
GIT_TOKEN = "ghs_real" + secrets.token_hex(16)
AGENT_KEYS = {"claude": "sk-ant-real-" + secrets.token_hex(16), "codex": "sk-oai-real-" + secrets.token_hex(16),
              "opencode": "sk-oc-real-" + secrets.token_hex(16)}
SECRETS = [REAL_KEY, GIT_TOKEN, *AGENT_KEYS.values()]


# ---- the world ----

def make_pki(d):
    """A test CA and one leaf for every name of the world (openssl CLI)."""
    def ossl(*a):
        sh("openssl", *a, cwd=d)
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
         "-out", "ca.crt", "-days", "2", "-subj", "/CN=Lazaret Credential Test CA")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "leaf.key",
         "-out", "leaf.csr", "-subj", f"/CN={API}")
    (d / "leaf.ext").write_text("basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n"
                                "subjectAltName = " + ", ".join(f"DNS:{n}" for n in NAMES) + "\n")
    ossl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "leaf.crt", "-days", "2", "-extfile", "leaf.ext")
    for f in ("ca.crt", "leaf.crt", "leaf.key"):
        os.chmod(d / f, 0o644)


class WorldLog(LogFile):
    """server.py's log: connections, whole requests, ends, Git requests."""

    def entries(self, since=0):
        return [json.loads(ln) for ln in self.read(since).splitlines() if ln.startswith("{")]

    def conns(self):
        return {e["id"]: e for e in self.entries() if e["ev"] == "conn"}

    def requests(self, since=0):
        """[(conn entry, raw bytes)] of the whole requests logged since."""
        conns = self.conns()
        return [(conns.get(e["id"], {}), base64.b64decode(e["raw"])) for e in self.entries(since)
                if e["ev"] == "req"]

    def received(self, since=0):
        """[(conn entry, bytes)]: whole requests and the rest of each
        connection (what a cut request left): every byte a server got."""
        conns = self.conns()
        return [(conns.get(e["id"], {}), base64.b64decode(e["raw"] if e["ev"] == "req" else e["rest"]))
                for e in self.entries(since) if e["ev"] in ("req", "end")]

    def git(self, since=0):
        return [e for e in self.entries(since) if e["ev"] == "git"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("credworld")
    os.chmod(d, 0o755)
    w = World((DNS_NS, WEB_NS))
    try:
        w.host(DNS_NS, DNS_HOST, [DNS_IP], route=False)
        w.host(WEB_NS, WEB_HOST, WEB_IPS, route=False)
        make_pki(d)
        # The Git server's repositories: repo.git (the sandbox's) with one
        # commit on main, control.git (the harness's own pushes).
        git_root = d / "git"
        seed = d / "seed"
        sh("git", "init", "-q", "-b", "main", str(seed))
        (seed / "README").write_text("seed\n")
        genv = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                    GIT_COMMITTER_EMAIL="t@t")
        sh("git", "-C", str(seed), "add", "README", env=genv)
        sh("git", "-C", str(seed), "commit", "-qm", "seed", env=genv)
        for repo in ("repo.git", "control.git"):
            sh("git", "clone", "-q", "--bare", str(seed), str(git_root / repo))
        log, fake_log = d / "world.log", d / "fake.log"
        log.write_text("")
        fake_log.write_text("")
        listen = [["tls", API_IP, 443], ["tls", OTHER_IP, 443], ["http", API_IP, 80], ["http", OTHER_IP, 80],
                  ["git", GIT_IP, 443]]
        (d / "server.json").write_text(json.dumps({
            "log": str(log), "cert": str(d / "leaf.crt"), "key": str(d / "leaf.key"), "git_root": str(git_root),
            "git_token": GIT_TOKEN, "listen": listen}))
        w.start(["ip", "netns", "exec", WEB_NS, "/usr/bin/python3", str(FIXTURES / "cred-world" / "server.py"),
                 str(d / "server.json")], "ready")
        fake_err = open(fake_log, "a", buffering=1)
        for server, name, ip, *_ in AGENTS.values():
            w.start(["ip", "netns", "exec", WEB_NS, "env", f"FAKE_HOST={ip}", "FAKE_PORT=443",
                     f"FAKE_TLS_CERT={d / 'leaf.crt'}", f"FAKE_TLS_KEY={d / 'leaf.key'}",
                     "FAKE_LOG_HEADERS=x-api-key,authorization", "node",
                     str(FIXTURES / "fake-model" / f"{server}.js")], "443", stderr=fake_err)
        dns = w.start(["ip", "netns", "exec", DNS_NS, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
                       "--no-resolv", "--no-hosts", "--port=53", f"--listen-address={DNS_IP}", "--bind-interfaces",
                       "--user=root", "--group=root", "--pid-file=", "--local-ttl=300"]
                      + [f"--host-record={n},{ip}" for n, ip in NAMES.items()])
        w.wait_answered(dns, lambda: netlib.dns_answers(DNS_IP, API, API_IP), "dnsmasq")
        yield {"dir": d, "ca": d / "ca.crt", "log": WorldLog(log), "fake": FakeLog(fake_log), "git_root": git_root}
    finally:
        w.end()


def tls_exchange(world, ip, sni, data, alpn=None, port=443, plain=False, timeout=5):
    """From the host, straight to a server of the world: (ALPN selected,
    every byte of the answer until the server closes)."""
    ctx = ssl.create_default_context(cafile=str(world["ca"]))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    with socket.create_connection((ip, port), timeout=timeout) as raw:
        s = raw if plain else ctx.wrap_socket(raw, server_hostname=sni)
        sel = None if plain else s.selected_alpn_protocol()
        s.sendall(data)
        got = b""
        while True:
            try:
                d = s.recv(65536)
            except (ssl.SSLError, OSError):
                break
            if not d:
                break
            got += d
        return sel, got


def git_refs(world, repo="repo.git"):
    out = sh("git", "-C", str(world["git_root"] / repo), "for-each-ref", "--format=%(refname) %(objectname)").stdout
    return dict(ln.split(" ", 1) for ln in out.splitlines())


# ---- the test user and its configuration ----

def cred_profile(storage):
    allow = [f"{API}:443", f"{API}:80", f"{ALIAS}:443", f"{OTHER}:443", f"{OTHER}:80", f"{GIT}:443"]
    return (f'[profiles.cred]\nimage = "builtin:agent-claude"\npersistent_dirs = []\negress = "locked"\n'
            f'allow_hosts = {json.dumps(allow)}\n\n'
            f'[profiles.cred.credentials.TEST_KEY]\nhost = "{API}"\nheader = "x-api-key"\nformat = "{{}}"\n'
            f'from_env = "LZ_TEST_REAL_KEY"\n\n'
            f'[profiles.cred.credentials.GIT_TOKEN]\nhost = "{GIT}"\nformat = "basic"\n'
            f'username = "x-access-token"\nfrom_env = "LZ_TEST_GIT_TOKEN"\npush_refs = ["refs/heads/agent/*"]\n')


def agent_profiles(base):
    """Each agent's built-in profile (lazaret.toml(5), "BUILT-IN AGENT
    PROFILES") plus its fake's name, and its API key as a credential bound
    to that name. State volumes of the test's own (the Storage Root may be
    the integration tests')."""
    state = {"claude": [("claude", "/root/.claude")], "codex": [("codex", "/root/.codex")],
             "opencode": [("opencode-config", "/root/.config/opencode"),
                          ("opencode-share", "/root/.local/share/opencode")]}
    env = {"claude": '\nenv = { CLAUDE_CONFIG_DIR = "/root/.claude", IS_SANDBOX = "1" }', "codex": "", "opencode": ""}
    out = ""
    for agent, (_, name, _, var, header, fmt) in AGENTS.items():
        vols = ", ".join(f'{{ host = "{base}/state/{h}", container = "{c}", mode = "rw" }}' for h, c in state[agent])
        out += (f'\n[profiles.{agent}]\nimage = "builtin:agent-{agent}"\ncommand = ["{agent}"]\n'
                f'allow_hosts = ["{name}:443"]\nvolumes = [{vols}]{env[agent]}\n'
                # Only the gate's side must trust the test CA (it does
                # whatever this says): the image is the one prepared for
                # the integration tests, not prepared again with the CA.
                f'host_ca_certificates = false\n\n'
                f'[profiles.{agent}.credentials.{var}]\nhost = "{name}"\nheader = "{header}"\n'
                f'format = "{fmt}"\nfrom_env = "LZ_TEST_{agent.upper()}_KEY"\n')
        for h, _ in state[agent]:
            (base / "state" / h).mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def user_env(world):
    pw = pwd.getpwnam(USER)
    storage = Path(STORAGE)
    if not storage.exists():
        storage.mkdir(parents=True)
        shutil.chown(storage, USER, USER)
    base = netlib.user_base("lzcred", ("config/lazaret", "build-config/lazaret", "build-cwd", "run", "host-ca/test", "ws-cred"))
    # The host trusts the test CA (what update-ca-certificates would read).
    shutil.copy(world["ca"], base / "host-ca" / "test" / "cred-test-ca.crt")
    for agent in AGENTS:
        (base / f"ws-{agent}").mkdir()
    shutil.copy(FIXTURES / "cred-world" / "probe.js", base / "ws-cred" / "probe.js")
    (base / "ws-cred" / "probes.json").write_text(json.dumps(PROBES, indent=1))
    (base / "config/lazaret/config.toml").write_text(
        f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n\n[network]\nresolver = "{DNS_IP}"\n\n'
        + cred_profile(storage) + agent_profiles(base))
    (base / "build-config/lazaret/config.toml").write_text(f'[storage]\ndata_root = "{storage}"\n')
    netlib.give_to(base, USER)
    yield {"base": base, "uid": pw.pw_uid}
    if not os.environ.get("LZ_KEEP"):
        shutil.rmtree(base, ignore_errors=True)


def as_user(e, argv, config="config"):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(e["base"]), "XDG_CONFIG_HOME": str(e["base"] / config),
           "XDG_RUNTIME_DIR": str(e["base"] / "run"), "LANG": "C.UTF-8",
           "LAZARET_TEST_HOST_CA_DIR": str(e["base"] / "host-ca"),
           # The real values: the developer's shell, never the sandbox.
           "LZ_TEST_REAL_KEY": REAL_KEY, "LZ_TEST_GIT_TOKEN": GIT_TOKEN,
           **{f"LZ_TEST_{a.upper()}_KEY": k for a, k in AGENT_KEYS.items()}}
    return ["runuser", "-u", USER, "--", "env", "-i"] + [f"{k}={v}" for k, v in env.items()] + argv


def lz(e, argv, cwd="ws-cred", timeout=60, config="config"):
    return subprocess.run(as_user(e, [LAZARET] + argv, config), cwd=e["base"] / cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def agent_image(user_env):
    """Builds an agent image once unless the Storage Root holds it."""
    return netlib.image_builder(lambda argv: as_user(user_env, argv, "build-config"), user_env["base"] / "build-cwd",
                                LAZARET)


# ---- the probes (probe.js) ----

def req(method, target, headers, body="", host=API):
    """A request's bytes: the request line, Host first, the headers in
    order, then the body (as is: the caller frames it)."""
    head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    return head + "\r\n" + body


def plen(s):
    """The length of s once probe.js has put the placeholder (37
    characters: lzph_ and 32 hex digits) in."""
    return len(s.replace("@PH1@", "x" * 12).replace("@PH2@", "x" * 25).replace("@PHB64@", "x" * 52)
               .replace("@PCT@", "x" * 39).replace("@PH@", "x" * 37))


def chunk(p):
    return f"{plen(p):x}\r\n{p}\r\n"


def chunked(*parts, trailer=""):
    return "".join(chunk(p) for p in parts) + "0\r\n" + trailer + "\r\n"


UA = [("User-Agent", "lz-probe/1"), ("Accept", "*/*")]
CLOSE = [("Connection", "close")]


def probe(name, segments, host=API, **kw):
    return {"host": host, "segments": segments, **kw}


PROBES = {
    # Where the placeholder belongs: rewritten.
    "good": probe("good", [req("GET", "/p/good", [("x-probe", "good"), ("x-api-key", "@PH@"), *UA, *CLOSE])]),
    "good-case": probe("good-case", [req("GET", "/p/good-case",
                                         [("x-probe", "good-case"), ("X-Api-Key", "@PH@"), *CLOSE])]),
    "good-host-form": probe("good-host-form", [req("GET", "/p/good-host-form",
                                                   [("x-probe", "good-host-form"), ("x-api-key", "@PH@"), *CLOSE],
                                                   host="API.Cred.Test:443")]),
    "good-post": probe("good-post", [req("POST", "/p/good-post", [("x-probe", "good-post"), ("x-api-key", "@PH@"),
                                                                  ("Content-Length", "11"), *CLOSE]), "hello=world"]),
    "good-chunked": probe("good-chunked", [req("POST", "/p/good-chunked",
                                               [("x-probe", "good-chunked"), ("x-api-key", "@PH@"),
                                                ("Transfer-Encoding", "chunked"), *CLOSE]),
                                           chunked("hello")]),
    "good-keepalive": probe("good-keepalive", [
        req("GET", "/p/good-keepalive-1", [("x-probe", "good-keepalive"), ("x-api-key", "@PH@")]),
        req("GET", "/p/good-keepalive-2", [("x-probe", "good-keepalive"), ("x-api-key", "@PH@"), *CLOSE])]),
    "own-key": probe("own-key", [req("GET", "/p/own-key", [("x-probe", "own-key"), ("x-api-key", "sk-own-login"),
                                                           *CLOSE])]),
    "alpn-both": probe("alpn-both", [req("GET", "/p/alpn-both", [("x-probe", "alpn-both"), ("x-api-key", "@PH@"),
                                                                 *CLOSE])], alpn=["h2", "http/1.1"]),
    # The placeholder anywhere else: refused.
    "in-other-header": probe("in-other-header", [req("GET", "/p/in-other-header",
                                                     [("x-probe", "in-other-header"), ("x-leak", "@PH@"), *CLOSE])]),
    "in-header-other-form": probe("in-header-other-form", [req("GET", "/p/in-header-other-form",
                                                               [("x-probe", "in-header-other-form"),
                                                                ("x-api-key", "Bearer @PH@"), *CLOSE])]),
    "in-url": probe("in-url", [req("GET", "/p/in-url?k=@PH@", [("x-probe", "in-url"), *CLOSE])]),
    "in-url-percent": probe("in-url-percent", [req("GET", "/p/in-url-percent?k=@PCT@", [("x-probe", "in-url-percent"),
                                                                                      *CLOSE])]),
    "in-header-base64": probe("in-header-base64", [req("GET", "/p/in-header-base64",
                                                       [("x-probe", "in-header-base64"), ("x-leak", "@PHB64@"),
                                                        *CLOSE])]),
    "in-body-base64": probe("in-body-base64", [req("POST", "/p/in-body-base64",
                                                   [("x-probe", "in-body-base64"), ("Content-Length", "54"),
                                                    *CLOSE]), "k=@PHB64@"]),
    "in-body": probe("in-body", [req("POST", "/p/in-body", [("x-probe", "in-body"), ("Content-Length", "39"),
                                                            *CLOSE]), "k=@PH@"]),
    "in-body-late": probe("in-body-late", [req("POST", "/p/in-body-late",
                                               [("x-probe", "in-body-late"), ("x-api-key", "@PH@"),
                                                ("Content-Length", str(4000 + 37)), *CLOSE]),
                                           "a" * 4000, "@PH@"]),
    "in-chunked": probe("in-chunked", [req("POST", "/p/in-chunked", [("x-probe", "in-chunked"),
                                                                     ("Transfer-Encoding", "chunked"), *CLOSE]),
                                       chunk("k=@PH1@"), chunk("@PH2@"), "0\r\n\r\n"]),
    "in-trailer": probe("in-trailer", [req("POST", "/p/in-trailer", [("x-probe", "in-trailer"),
                                                                     ("Transfer-Encoding", "chunked"),
                                                                     ("Trailer", "x-leak"), *CLOSE]),
                                       chunked("hello", trailer="x-leak: @PH@\r\n")]),
    "host-not-sni": probe("host-not-sni", [req("GET", "/p/host-not-sni", [("x-probe", "host-not-sni"),
                                                                          ("x-api-key", "@PH@"), *CLOSE],
                                               host=OTHER)]),
    "absolute-other": probe("absolute-other", [req("GET", f"https://{OTHER}/p/absolute-other",
                                                   [("x-probe", "absolute-other"), ("x-api-key", "@PH@"), *CLOSE])]),
    "h2-only": probe("h2-only", [req("GET", "/p/h2-only", [("x-probe", "h2-only"), ("x-api-key", "@PH@"), *CLOSE])],
                     alpn=["h2"]),
    # Other hosts and plain HTTP: the placeholder at most.
    "other": probe("other", [req("POST", "/p/other", [("x-probe", "other"), ("x-api-key", "@PH@"),
                                                      ("Content-Length", "39"), *CLOSE], host=OTHER), "k=@PH@"],
                   host=OTHER),
    "alias": probe("alias", [req("GET", "/p/alias", [("x-probe", "alias"), ("x-api-key", "@PH@"), *CLOSE])],
                   host=ALIAS),
    "plain-http": probe("plain-http", [req("GET", "/p/plain-http", [("x-probe", "plain-http"), ("x-api-key", "@PH@"),
                                                                    *CLOSE])], tls=False),
    "front-to-other": probe("front-to-other", [req("GET", "/p/front-to-other",
                                                   [("x-probe", "front-to-other"), ("x-api-key", "@PH@"), *CLOSE])],
                            ip=OTHER_IP, lookups=[OTHER]),
    # A server that sends the real value back.
    "echo": probe("echo", [req("GET", "/echo", [("x-probe", "echo"), ("x-api-key", "@PH@"), *CLOSE])]),
    "echo-split": probe("echo-split", [req("GET", "/echo-split", [("x-probe", "echo-split"), ("x-api-key", "@PH@"),
                                                                  *CLOSE])]),
    "echo-other": probe("echo-other", [req("GET", "/echo", [("x-probe", "echo-other"), ("x-api-key", "@PH@"), *CLOSE],
                                           host=OTHER)], host=OTHER),
    # A held connection (the gate killed under it), and one after.
    "hold": probe("hold", [req("GET", "/p/hold", [("x-probe", "hold"), ("x-api-key", "@PH@")])], hold=True),
    "after-kill": probe("after-kill", [req("GET", "/p/after-kill", [("x-probe", "after-kill"), ("x-api-key", "@PH@"),
                                                                    *CLOSE])], timeout_ms=3000),
}


def declared_lengths_fit():
    """Each probe's Content-Length counts its body as probe.js sends it."""
    for name, p in PROBES.items():
        m = re.search(r"\r\nContent-Length: (\d+)\r\n", p["segments"][0])
        if m:
            assert int(m.group(1)) == plen("".join(p["segments"][1:])), name
    return True


assert declared_lengths_fit()


# ---- the shared session of the profile `cred` ----

LOOP = 'cd /workspace; echo "@@READY"; while IFS= read -r line; do eval "$line"; echo "@@END $?"; done'


LIVE = []  # the shared session, once started (closed by the agents' tests run alone)


class Inside:
    """One `lazaret run -p cred` for the module: a shell that runs each
    line the test sends, its output read up to its end marker."""

    def __init__(self, e, domain):
        self.e = e
        self.domain = domain
        self.s = netlib.Session(as_user(e, [LAZARET, "run", "-p", "cred", "--", "bash", "-c", LOOP]),
                                e["base"] / "ws-cred")
        assert self.s.until("@@READY", 120), f"the sandbox did not start:\n{self.s.out()}"
        self.ph = None
        self.closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            self.s.close()

    def run(self, cmd, timeout=60):
        start = len(self.s.lines)
        self.s.send(cmd.replace("\n", " ") + "\n")
        end = self.s.until("@@END *", timeout)
        assert end, f"no end of {cmd!r} in {timeout} s:\n" + "\n".join(self.s.lines[start:])
        return "\n".join(self.s.lines[start:-1])

    def probes(self, *names, timeout=120):
        out = self.run("node /workspace/probe.js " + " ".join(names), timeout)
        res = {}
        for m in re.finditer(r"^RESULT (\{.*\})$", out, re.M):
            r = json.loads(m.group(1))
            r["got"] = base64.b64decode(r["got"])
            res[r["name"]] = r
        assert sorted(res) == sorted(names), out
        return res, out


@pytest.fixture(scope="module")
def inside(request, world, user_env, agent_image, agents):
    agent_image("claude")
    with quietly(user_env):
        chk = lz(user_env, ["config", "check", "-p", "cred"])
        assert chk.returncode == 0, chk.stdout + chk.stderr
        i = Inside(user_env, re.search(r"^# Domain ID: ([0-9a-f]{64})$", chk.stdout, re.M).group(1))
        LIVE.append(i)
        # The agents' turns (when selected) run meanwhile, each in a
        # Domain of its own: they mostly compute, these tests mostly wait.
        if any(it.name.startswith("test_agent_turn_with_the_key_on_the_host") for it in request.session.items):
            agents.start()
        try:
            yield i
        finally:
            i.close()
    reset_domain(user_env, "cred", "ws-cred")


@contextlib.contextmanager
def quietly(e):
    """netlib.quiet around a block: no Domain of the test user before it,
    whatever it leaves ended after it."""
    g = netlib.quiet(e)
    next(g)
    try:
        yield
    finally:
        next(g, None)


def reset_domain(e, profile, cwd):
    """Deletes the profile's State Anchor once its Domain has stopped (the
    Storage Root may be CI's, kept for the integration tests)."""
    chk = lz(e, ["config", "check", "-p", profile], cwd=cwd)
    m = re.search(r"^# Domain ID: ([0-9a-f]{64})$", chk.stdout, re.M)
    end = time.monotonic() + 45
    while m and time.monotonic() < end:
        if lz(e, ["state", "reset", m.group(1), "--yes"], cwd=cwd, timeout=120).returncode == 0:
            break
        time.sleep(0.5)


def audit(e, profile="cred"):
    r = lz(e, ["audit", "-p", profile, "--net"])
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def no_secret_leaked(world, since=0):
    """Invariant after each test: the real values reached only the server
    they are for, over TLS (the API key api.cred.test's, the token the Git
    server's), never the placeholder's other recipients."""
    for conn, raw in world["log"].received(since):
        where = (conn.get("kind"), conn.get("ip"), conn.get("sni"))
        if where not in (("tls", API_IP, API),):
            assert REAL_KEY.encode() not in raw, f"the real key reached {where}: {raw[:400]!r}"
        if where != ("git", GIT_IP, GIT):
            assert base64.b64encode(f"x-access-token:{GIT_TOKEN}".encode()) not in raw and \
                GIT_TOKEN.encode() not in raw, f"the Git token reached {where}"


def by_probe(reqs, name):
    return [(c, raw) for c, raw in reqs if f"\r\nx-probe: {name}\r\n".encode() in raw]


# ---- the world itself (passes without Lazaret: the sentinels fire) ----

def test_world_harness(world):
    """From the host, with the test CA: every name resolves; api.cred.test
    logs a request byte for byte (the real key with it) and sends an
    x-api-key back on /echo; it selects h2 for a client offering only h2
    (the gate's refusal below is the gate's); plain HTTP on 80 is logged;
    the Git server refuses a wrong token and takes a push with the real
    one; each fake model server answers over TLS and logs the key."""
    log = world["log"]
    for n, ip in NAMES.items():
        assert netlib.dns_answers(DNS_IP, n, ip), n
    m = log.mark()
    raw = req("GET", "/p/harness", [("x-probe", "harness"), ("x-api-key", REAL_KEY), *CLOSE]).encode()
    _, got = tls_exchange(world, API_IP, API, raw)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n"), got
    reqs = log.requests(m)
    assert [r for _, r in reqs] == [raw], reqs
    assert reqs[0][0]["sni"] == API and reqs[0][0]["alpn"] is None
    _, got = tls_exchange(world, API_IP, API, req("GET", "/echo", [("x-api-key", REAL_KEY), *CLOSE]).encode())
    assert got.endswith(f"key={REAL_KEY}\n".encode()), got
    _, got = tls_exchange(world, API_IP, API, req("GET", "/echo-split", [("x-api-key", REAL_KEY), *CLOSE]).encode())
    assert got.endswith(f"key={REAL_KEY}\n".encode()), got
    sel, _ = tls_exchange(world, API_IP, API, req("GET", "/", CLOSE).encode(), alpn=["h2"])
    assert sel == "h2"
    _, got = tls_exchange(world, OTHER_IP, OTHER, req("GET", "/", CLOSE, host=OTHER).encode(), port=80, plain=True)
    assert got.startswith(b"HTTP/1.1 200"), got
    # Chunked, trailer and all: a whole request, logged as sent.
    m = log.mark()
    raw = req("POST", "/p/c", [("Transfer-Encoding", "chunked"), *CLOSE]) + chunked("ab", "cde", trailer="x-t: 1\r\n")
    _, got = tls_exchange(world, API_IP, API, raw.encode())
    assert [r for _, r in log.requests(m)] == [raw.encode()], log.entries(m)
    # Git: refused without the real token, pushed with it.
    gcfg = ["-c", f"http.sslCAInfo={world['ca']}", "-c", f"http.curloptResolve={GIT}:443:{GIT_IP}",
            "-c", "credential.helper=", "-c", "core.askPass=/bin/false"]
    work = world["dir"] / "harness-clone"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(world["dir"]), "GIT_TERMINAL_PROMPT": "0",
           "GIT_SSL_CAINFO": str(world["ca"]), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    bad = subprocess.run(["git", *gcfg, "clone", "-q", f"https://x-access-token:nope@{GIT}/control.git", str(work)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode != 0 and "Authentication failed" in bad.stderr and not work.exists(), bad.stderr
    sh("git", *gcfg, "clone", "-q", f"https://x-access-token:{GIT_TOKEN}@{GIT}/control.git", str(work), env=env)
    (work / "f").write_text("x\n")
    sh("git", "-C", str(work), "add", "f", env=env)
    sh("git", "-C", str(work), "commit", "-qm", "x", env=env)
    sh("git", "-C", str(work), *gcfg, "push", "-q", "origin", "HEAD:refs/heads/main", "HEAD:refs/heads/agent/c",
       env=env)
    head = sh("git", "-C", str(work), "rev-parse", "HEAD").stdout.strip()
    assert git_refs(world, "control.git") == {"refs/heads/main": head, "refs/heads/agent/c": head}
    sh("git", "-C", str(work), *gcfg, "push", "-q", "origin", ":refs/heads/agent/c", env=env)
    assert "refs/heads/agent/c" not in git_refs(world, "control.git")
    # The fakes over TLS, logging the credential header.
    fm = world["fake"].mark()
    for agent, (_, name, ip, _, header, fmt) in AGENTS.items():
        path = {"claude": "/v1/messages", "codex": "/v1/responses", "opencode": "/v1/chat/completions"}[agent]
        body = json.dumps({"model": "x", "messages": [], "input": []})
        raw = req("POST", path, [(header, fmt.format(AGENT_KEYS[agent])), ("Content-Type", "application/json"),
                                 ("Content-Length", str(len(body))), *CLOSE], body, host=name)
        _, got = tls_exchange(world, ip, name, raw.encode())
        assert got.startswith(b"HTTP/1.1 200"), (agent, got[:300])
    seen = [q["headers"] for q in world["fake"].requests(fm)]
    assert seen == [{"x-api-key": AGENT_KEYS["claude"], "authorization": None},
                    {"x-api-key": None, "authorization": f"Bearer {AGENT_KEYS['codex']}"},
                    {"x-api-key": None, "authorization": f"Bearer {AGENT_KEYS['opencode']}"}], seen


# ---- the profile `cred`, one session ----

def test_only_a_placeholder_inside(world, inside):
    """Inside, TEST_KEY and GIT_TOKEN hold placeholders; no file (grep -r
    of / but /proc, /sys, /dev and /usr other than /usr/local: /usr is the
    image's, built before the values existed, and takes 30 s to read) and
    no process's environment or command line holds a real value. Positive
    controls: grep finds a canary file written there, and the placeholder
    in the shell's own environ."""
    out = inside.run('echo "KEY=$TEST_KEY"; echo "GIT=$GIT_TOKEN"')
    key = re.search(r"^KEY=(.*)$", out, re.M).group(1)
    tok = re.search(r"^GIT=(.*)$", out, re.M).group(1)
    assert PH_RE.match(key) and PH_RE.match(tok) and key != tok, out
    inside.ph = key
    assert not any(s in out for s in SECRETS)
    canary = "lzc-canary-" + secrets.token_hex(8)
    pats = unliteral(SECRETS + [canary])
    out = inside.run(f"echo {canary[:11]}''{canary[11:]} > /var/tmp/canary; "
                     "grep -rlaE --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr "
                     f"{pats} / /usr/local 2>/dev/null; "
                     "echo GREP-DONE", timeout=180)
    assert "GREP-DONE" in out, out
    found = [ln for ln in out.splitlines() if ln.startswith("/")]
    assert found == ["/var/tmp/canary"], f"files inside with a real value (or no canary): {found}"
    # Every process: environ and argv (as root inside, all are readable).
    out = inside.run("for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; "
                     "tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done > /var/tmp/procs; "
                     f"grep -caF {key} /var/tmp/procs; grep -caE {unliteral(SECRETS)} /var/tmp/procs; "
                     "ls -d /proc/[0-9]* | wc -l")
    counts = out.split()
    assert int(counts[0]) >= 1, f"positive control: the placeholder is in the shell's environ:\n{out}"
    assert int(counts[1]) == 0, f"a real value in a process's environ or argv inside:\n{out}"
    no_secret_leaked(world)


def unliteral(values):
    """grep -E arguments matching each value without holding it: each
    character in brackets ([s][k][-]...), so that searching for the real
    values never brings them inside (not even in grep's argv)."""
    return " ".join("-e '" + "".join(f"[{c}]" for c in v) + "'" for v in values)


def placeholder(inside):
    if inside.ph is None:
        inside.ph = re.search(r"KEY=(\S+)", inside.run('echo "KEY=$TEST_KEY"')).group(1)
    return inside.ph


def test_declared_header_is_rewritten(world, inside):
    """x-api-key: PLACEHOLDER to api.cred.test reaches the server as
    x-api-key: REAL, the rest of the request byte for byte (GET, POST with
    Content-Length and chunked, two requests on one connection, the
    header's name in another case, Host in capitals with :443); the
    developer's own value in the
    header passes unchanged; a client offering h2 and http/1.1 gets
    http/1.1."""
    ph = placeholder(inside)
    log = world["log"]
    m = log.mark()
    names = ["good", "good-case", "good-host-form", "good-post", "good-chunked", "good-keepalive", "own-key",
             "alpn-both"]
    res, out = inside.probes(*names)
    reqs = log.requests(m)
    for n in names:
        r = res[n]
        assert r["secure"] and r["err"] is None and r["status"] == "HTTP/1.1 200 X", f"{n}: {r}\n{out}"
        sent = "".join(PROBES[n]["segments"]).replace("@PH@", ph).encode()
        want = sent.replace(ph.encode(), REAL_KEY.encode())
        got = b"".join(raw for _, raw in by_probe(reqs, n))
        assert got == want, f"{n}: the server got\n{got!r}\nnot\n{want!r}"
        assert all(c["sni"] == API and c["ip"] == API_IP for c, _ in by_probe(reqs, n))
    assert res["good-keepalive"]["got"].count(b"HTTP/1.1 200") == 2
    assert res["alpn-both"]["alpn"] == "http/1.1", res["alpn-both"]
    no_secret_leaked(world, m)


REFUSED = ["in-other-header", "in-header-other-form", "in-header-base64", "in-url", "in-url-percent", "in-body",
           "in-body-late", "in-chunked", "in-trailer", "host-not-sni", "absolute-other"]


def test_placeholder_elsewhere_is_refused(world, inside):
    """The placeholder in another header (also Base64-encoded), in the
    declared header in another form, in the URL (also percent-encoded), in
    the body (Content-Length; chunked, split over two chunks; a chunked
    trailer), or a Host (or absolute-form
    authority) that is not the TLS server name: the client gets 403
    `lazaret: refused: ...`, the server never gets the request (nor the
    placeholder), and each refused request is a credential-refused row of
    the audit with its reason. The
    positive control, `good`, in the same run, reaches the server."""
    ph = placeholder(inside)
    log = world["log"]
    m = log.mark()
    res, out = inside.probes("good", *REFUSED)
    reqs, got = log.requests(m), log.received(m)
    assert res["good"]["status"] == "HTTP/1.1 200 X" and by_probe(reqs, "good"), f"positive control:\n{out}"
    for n in REFUSED:
        r = res[n]
        assert r["status"] == "HTTP/1.1 403 Forbidden", f"{n}: {r}\n{out}"
        assert r["body"].startswith("lazaret: refused: "), f"{n}: {r}"
        assert not by_probe(reqs, n), f"{n}: the server got the request: {by_probe(reqs, n)}"
    forms = [ph.encode(), ph[12:].encode(), base64.b64encode(ph.encode()), ph.replace("_", "%5F").encode()]
    leaked = [(c, raw) for c, raw in got if any(f in raw for f in forms)]
    assert not leaked, f"the placeholder reached api.cred.test: {leaked}"
    # Audited: a row per refused request (docs/credentials.md), each with
    # the reason its client was given.
    rows = [ln for ln in audit(inside.e).splitlines() if "credential-refused" in ln and f"  {API}  " in ln]
    whys = [res[n]["body"][len("lazaret: refused: "):].strip() for n in REFUSED]
    for n, why in zip(REFUSED, whys):
        assert [ln for ln in rows if why in ln], f"{n}: {why!r} is not in the audit:\n" + "\n".join(rows)
    for why in set(whys):
        assert len([ln for ln in rows if why in ln]) >= whys.count(why), f"{why!r}: not one row per request:\n" + \
            "\n".join(rows)
    no_secret_leaked(world, m)


def test_placeholder_in_base64_in_the_body_goes_as_sent(world, inside):
    """The body is scanned for the placeholder as sent, not decoded
    (docs/credentials.md): its Base64 form in a body reaches the server
    unchanged, and it is the placeholder's, never the value's."""
    ph = placeholder(inside)
    log = world["log"]
    m = log.mark()
    res, out = inside.probes("in-body-base64")
    assert res["in-body-base64"]["status"] == "HTTP/1.1 200 X", out
    sent = "".join(PROBES["in-body-base64"]["segments"]).replace(
        "@PHB64@", base64.b64encode(ph.encode()).decode()).encode()
    assert [raw for _, raw in by_probe(log.requests(m), "in-body-base64")] == [sent]
    no_secret_leaked(world, m)
    assert not [raw for _, raw in log.received(m) if base64.b64encode(REAL_KEY.encode()) in raw]


def test_other_hosts_get_only_the_placeholder(world, inside):
    """other.cred.test (TLS; the placeholder in header and body), the
    credential host's address under its second name alias.cred.test
    (TLS, Host api.cred.test), and api.cred.test over plain HTTP on 80:
    each server gets the request with the placeholder, never the real
    key. api.cred.test's name sent to other.cred.test's address
    (fronting) is reset by the gate: that server sees no such connection."""
    ph = placeholder(inside)
    log = world["log"]
    m = log.mark()
    res, out = inside.probes("other", "alias", "plain-http", "front-to-other", "good")
    reqs = log.requests(m)
    for n, ip, kind, sni in (("other", OTHER_IP, "tls", OTHER), ("alias", API_IP, "tls", ALIAS),
                             ("plain-http", API_IP, "http", None)):
        assert res[n]["status"] == "HTTP/1.1 200 X", f"{n}: {res[n]}\n{out}"
        sent = "".join(PROBES[n]["segments"]).replace("@PH@", ph).encode()
        seen = by_probe(reqs, n)
        assert [raw for _, raw in seen] == [sent], f"{n}: {seen}"
        assert all((c["ip"], c["kind"], c["sni"]) == (ip, kind, sni) for c, _ in seen), seen
    assert res["front-to-other"]["status"] is None and not res["front-to-other"]["secure"], res["front-to-other"]
    assert not [c for c in log.conns().values() if c["ip"] == OTHER_IP and c.get("sni") == API]
    assert [ln for ln in audit(inside.e).splitlines() if "tls-refused" in ln and f"  {API}  " in ln
            and "was not learned for the server name" in ln], "the fronting attempt is audited as in §1"
    assert by_probe(reqs, "good"), "positive control"
    no_secret_leaked(world, m)


def test_echoed_key_never_reaches_the_client(world, inside):
    """api.cred.test sends the real key back (in one piece, or split over
    two TLS records): the server did get and send it, the client never
    receives it (the connection is cut), and it is audited (once per host
    and reason in a run, as every refusal). Control:
    other.cred.test's echo of the placeholder reaches the client."""
    ph = placeholder(inside)
    log = world["log"]
    m = log.mark()
    res, out = inside.probes("echo", "echo-split", "echo-other")
    reqs = log.requests(m)
    for n in ("echo", "echo-split"):
        seen = by_probe(reqs, n)
        assert seen and f"\r\nx-api-key: {REAL_KEY}\r\n".encode() in seen[0][1], f"{n}: the server got the key: {seen}"
        assert REAL_KEY.encode() not in res[n]["got"], f"{n}: the real key reached the client: {res[n]}"
    assert res["echo-other"]["body"] == f"key={ph}\n", f"control: {res['echo-other']}\n{out}"
    rows = [ln for ln in audit(inside.e).splitlines() if "credential-refused" in ln and f"  {API}  " in ln]
    assert [ln for ln in rows if "sent the credential's value back" in ln], "the cut is audited:\n" + "\n".join(rows)
    no_secret_leaked(world, m)


def test_h2_only_is_refused(world, inside):
    """A client offering only ALPN h2 to api.cred.test gets no connection
    (no_application_protocol) and the server no request; the server itself
    would have taken h2 (test_world_harness); h2 and http/1.1 offered:
    http/1.1, and the request passes."""
    log = world["log"]
    m = log.mark()
    res, out = inside.probes("h2-only", "alpn-both")
    r = res["h2-only"]
    assert not r["secure"] and r["status"] is None, f"{r}\n{out}"
    assert "NO_APPLICATION_PROTOCOL" in (r["err"] or ""), r
    reqs = log.requests(m)
    assert not by_probe(reqs, "h2-only") and by_probe(reqs, "alpn-both")


def test_git_push_gate(world, inside):
    """git clone/push https://git.cred.test/repo.git with no token inside
    (Lazaret's credential helper answers with the placeholder, the gate
    puts the real token): a push to refs/heads/agent/x succeeds; to
    refs/heads/main it is refused (`! [remote rejected] main (lazaret:
    ...)`) and the bare repository keeps its main; deleting agent/x is
    refused (no push_delete). Every pushed ref is audited."""
    before = git_refs(world)
    log = world["log"]
    m = log.mark()
    out = inside.run(
        "export GIT_TERMINAL_PROMPT=0 GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a "
        "GIT_COMMITTER_EMAIL=a@a; rm -rf /tmp/r; "
        f"git clone -q https://{GIT}/repo.git /tmp/r 2>&1; echo clone=$?; cd /tmp/r; "
        "echo agent > agent.txt; git add agent.txt; git commit -qm agent; git rev-parse HEAD; "
        "git push origin HEAD:refs/heads/agent/x 2>&1; echo push-agent=$?; "
        "git push origin HEAD:refs/heads/main 2>&1; echo push-main=$?; "
        "git push origin :refs/heads/agent/x 2>&1; echo push-delete=$?; cd /workspace", timeout=120)
    assert "clone=0" in out, out
    head = re.search(r"^([0-9a-f]{40})$", out, re.M).group(1)
    assert "push-agent=0" in out, out
    assert re.search(r"! \[remote rejected\] +HEAD -> main \(lazaret: [^)]*\)", out), out
    assert "push-main=1" in out, out
    assert re.search(r"! \[remote rejected\] +agent/x \(lazaret: [^)]*\)", out), out
    assert "push-delete=1" in out, out
    after = git_refs(world)
    assert after == {**before, "refs/heads/agent/x": head}, (before, after)
    # The server never got the refused commands; it got the real token.
    cmds = [c for g in log.git(m) for c in g["commands"]]
    assert [c.split()[2] for c in cmds] == ["refs/heads/agent/x"], log.git(m)
    assert {g["auth"] for g in log.git(m)} <= {"none", "ok"} and "ok" in {g["auth"] for g in log.git(m)}
    rows = [ln for ln in audit(inside.e).splitlines() if "git-push" in ln and f"  {GIT}  " in ln]
    short = head[:12]
    for ref, old, new, verdict in (("refs/heads/agent/x", "0" * 12, short, "let through"),
                                   ("refs/heads/main", None, short, "refused"),
                                   ("refs/heads/agent/x", short, "0" * 12, "refused")):
        assert [ln for ln in rows if f" {ref} " in ln and f"..{new}" in ln and (old is None or f"{old}.." in ln)
                and verdict in ln], f"no git-push row for {ref} -> {new} {verdict}:\n" + "\n".join(rows)
    no_secret_leaked(world, m)


# ---- last of the shared session: the gate killed under it ----

def cred_gates(inside):
    """The lazaret-gate processes of the shared session's Domain (the
    agents' Domains have their own): children of its coordinator, whose
    pid its log names."""
    log = Path(STORAGE) / "domains" / inside.domain / "coordinator.log"
    hc = re.findall(r"hc\[(\d+)\]: coordinator for Domain ", log.read_text())
    assert hc, f"no coordinator in {log}"
    out = []
    for pid in netlib.user_pids(inside.e["uid"], "lazaret-gate"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == hc[-1]:
            out.append(int(pid))
    return out


def test_gate_killed_fails_closed(world, inside):
    """A connection to api.cred.test through the gate is held open (its
    first request answered); the gate is killed from the host: the held
    connection ends, and a new one is refused; the server gets nothing
    more."""
    log = world["log"]
    m = log.mark()
    inside.run("node /workspace/probe.js hold > /var/tmp/hold.out 2>&1 &")
    end = time.monotonic() + 30
    while not by_probe(log.requests(m), "hold") and time.monotonic() < end:
        time.sleep(0.1)
    assert by_probe(log.requests(m), "hold"), "positive control: the held connection's request reached the server"
    # And its answer reached the client (HELD): killed before the answer
    # got through, the gate would leave the probe nothing to hold.
    end = time.monotonic() + 30
    while "HELD hold" not in inside.run("cat /var/tmp/hold.out") and time.monotonic() < end:
        time.sleep(0.1)
    assert "HELD hold" in inside.run("cat /var/tmp/hold.out"), "positive control: the held connection was answered"
    ends = len([e for e in log.entries(m) if e["ev"] == "end"])
    gates = cred_gates(inside)
    assert len(gates) == 1, gates
    os.kill(gates[0], 9)
    out = inside.run("wait; cat /var/tmp/hold.out; node /workspace/probe.js after-kill", timeout=90)
    assert "HELD hold" in out, out
    hold = json.loads(re.search(r"^RESULT (\{.*\"name\": ?\"hold\".*\})$", out, re.M).group(1))
    assert hold["closed_ms"] is not None and hold["closed_ms"] < 30000, f"the held connection must end: {hold}"
    after = json.loads(re.search(r"^RESULT (\{.*\"name\": ?\"after-kill\".*\})$", out, re.M).group(1))
    assert not after["secure"] and after["status"] is None, f"a new connection must be refused: {after}"
    assert len([e for e in log.entries(m) if e["ev"] == "end"]) >= ends + 1, "the server's side ended too"
    assert not by_probe(log.requests(m), "after-kill")
    inside.close()  # HTTPS stays refused in this Domain: the agents' tests come after



# ---- the agents, each with its API key held on the host ----

CLAUDE = (f"env ANTHROPIC_BASE_URL=https://{AGENTS['claude'][1]} CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "
          f"DISABLE_AUTOUPDATER=1 claude -p 'create the file {MADE}' --dangerously-skip-permissions")
CODEX = ("codex exec -c model_provider=lzfake "
         f"-c 'model_providers.lzfake={{name=\"lzfake\", base_url=\"https://{AGENTS['codex'][1]}/v1\", "
         "wire_api=\"responses\", env_key=\"OPENAI_API_KEY\"}' "
         f"-m lz-fake-model --dangerously-bypass-approvals-and-sandbox 'create the file {MADE}'")
# opencode's provider gets the key from the environment as a developer's
# configuration would ({env:OPENAI_API_KEY}): here put in by the shell.
OPENCODE_CFG = {"provider": {"lzfake": {"npm": "@ai-sdk/openai-compatible", "name": "lzfake",
                                        "options": {"baseURL": f"https://{AGENTS['opencode'][1]}/v1",
                                                    "apiKey": "@KEY@"},
                                        "models": {"lz-fake-model": {"name": "lz-fake-model"}}}},
                "model": "lzfake/lz-fake-model", "autoupdate": False, "share": "disabled"}
OPENCODE_PRELUDE = (f"CFG='{json.dumps(OPENCODE_CFG)}'\n"
                    'export OPENCODE_CONFIG_CONTENT="${CFG//@KEY@/$OPENAI_API_KEY}"\n'
                    "export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 "
                    "OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1")
OPENCODE = f"opencode run -m lzfake/lz-fake-model 'create the file {MADE}'"
COMMANDS = {"claude": ("", CLAUDE), "codex": ("", CODEX), "opencode": (OPENCODE_PRELUDE, OPENCODE)}


class Agents:
    """The three agents' turns, all started at once (each `lazaret run` of
    its profile, in a Domain of its own), while the shared session's tests
    run (the `inside` fixture starts them), or when the first agent test
    asks (run alone). Output to files; every wait bounded."""

    def __init__(self, world, e, agent_image):
        self.world, self.e, self.agent_image = world, e, agent_image
        self.procs, self.results = {}, {}
        self.fm = 0

    def start(self):
        if self.procs:
            return
        for agent in AGENTS:
            self.agent_image(agent)
        self.fm = self.world["fake"].mark()
        for agent, (_, _, _, var, _, _) in AGENTS.items():
            prelude, cmd = COMMANDS[agent]
            script = (f'cd /workspace\necho "KEYVAR=${{{var}}}"\n{prelude}\n'
                      f'timeout 300 {cmd} </dev/null 2>&1\necho "agent-rc=$?"\n')
            out = open(self.e["base"] / f"agent-{agent}.out", "w")
            self.procs[agent] = subprocess.Popen(
                as_user(self.e, [LAZARET, "run", "-p", agent, "--", "bash", "-c", script]),
                cwd=self.e["base"] / f"ws-{agent}", stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                text=True)
            out.close()

    def result(self, agent):
        """(exit status, output) of the agent's session, 600 s at most."""
        if agent not in self.results:
            p = self.procs[agent]
            try:
                p.wait(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
            self.results[agent] = (p.returncode, (self.e["base"] / f"agent-{agent}.out").read_text())
        return self.results[agent]

    def stop(self):
        for agent in self.procs:
            self.result(agent)
        for agent in self.procs:
            reset_domain(self.e, agent, f"ws-{agent}")


@pytest.fixture(scope="module")
def agents(world, user_env, agent_image):
    a = Agents(world, user_env, agent_image)
    yield a
    a.stop()


@pytest.mark.parametrize("agent", list(AGENTS))
def test_agent_turn_with_the_key_on_the_host(world, user_env, agents, agent):
    """The agent's API key is a credential of its profile (from_env on the
    host): inside, the variable holds a placeholder; the agent completes a
    turn against its fake over HTTPS (trusting the Domain's CA inside, with
    nothing set for it) and the fake logs the real key in the header the
    agent sent."""
    _, name, _, var, header, fmt = AGENTS[agent]
    e = user_env
    fake = world["fake"]
    if not agents.procs:  # run without the shared session's tests
        for i in LIVE:
            i.close()
        with quietly(e):
            agents.start()
            for a in AGENTS:
                agents.result(a)
    rc, out = agents.result(agent)
    reqs = [q for q in fake.requests(agents.fm) if (q.get("host") or "").split(":")[0] == name]
    diag = f"\n--- session:\n{out[-4000:]}\n--- fake:\n{reqs}"
    ph = re.search(r"^KEYVAR=(.*)$", out, re.M)
    assert ph and PH_RE.match(ph.group(1)), diag
    assert AGENT_KEYS[agent] not in out, diag
    assert rc == 0 and "agent-rc=0" in out, diag
    assert reqs and all(q["headers"][header] == fmt.format(AGENT_KEYS[agent]) for q in reqs), diag
    assert [q for q in reqs if q.get("call")] and [q for q in reqs if q.get("tool_result") is not None], diag
    assert (e["base"] / f"ws-{agent}" / MADE).exists(), diag
