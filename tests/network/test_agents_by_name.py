"""The real agents against fake model servers reached by name, under the
balanced preset (issue 23, "Egress by name"; docs/agents.md "The balanced
list of each agent"), attacked from inside the same session (DESIGN.md §7).

Run as root, like test_names.py, whose patterns and helpers it reuses: the
test builds its own world out of network namespaces joined to the host by
veth pairs, every address in 198.18.50.0/24 .. 198.18.52.0/24 (apart from
test_names.py's 198.18.40.0/21 and test_network.py's 198.18.7-10.x):

  lzt-agw-dns  198.18.50.2  dnsmasq, authoritative for the test's two names
                            only (--no-resolv --no-hosts), logging every
                            query
  lzt-agw-api  198.18.51.2  api.fake-model.test: the fake model servers of
                            tests/fixtures/fake-model/ (node), one port per
                            API: 8081 Anthropic Messages (Claude Code),
                            8082 OpenAI Responses (Codex), 8083 OpenAI Chat
                            Completions (opencode); each logs every request
                            with its Host header
  lzt-agw-exf  198.18.52.2  exfil.fake-model.test: a TCP listener on the
                            same ports (and 80, 443) that logs every
                            connection: the sentinel

Lazaret runs as the unprivileged test user with `[network] resolver =
"198.18.50.2"` and, for each agent, a profile of the agent's name that is
the built-in one (lazaret.toml(5), "BUILT-IN AGENT PROFILES": the image
builtin:agent-NAME, its command, env and state volumes) plus one rule,
`allow_hosts = ["api.fake-model.test:PORT"]`: no `egress` key anywhere, so
the preset is the default "balanced" and the agent's built-in list stays
in effect (checked with `lazaret config check`). That is how agents.md
says a developer points an agent at a proxy or self-hosted endpoint.

In one session per agent: the agent completes a turn against its fake by
name (ANTHROPIC_BASE_URL, a Codex model provider's base_url, an opencode
provider's baseURL = http://api.fake-model.test:PORT...), running the
fake's shell command (`touch /workspace/made-by-agent`) without a prompt;
the fake logged the requests with the name as Host, and dnsmasq logged the
lookup. Then, in the same session, a probe (node, as an agent's tool would
be) asks for exfil.fake-model.test, which dnsmasq would answer: Lazaret
refuses it, dnsmasq never sees it, and neither the exfil host's address
nor another port of the fake's address can be connected to; the exfil
listener gets no connection. test_world_harness is the positive control
that both sentinels fire (dnsmasq logs exfil.fake-model.test when asked,
the listener logs a connection when one arrives).

The agent images come from LAZARET_TEST_STORAGE, a Storage Root of the test
user (scripts/test.sh passes the one its integration tests use, where the
images were built in the background before this stage); an image missing
there is built as tests/integration/test_agents.py does (Debian mirror and
npm registry, with a configuration of its own: not the world's resolver).
Without LAZARET_TEST_STORAGE, or without node on the host, the module is
skipped outside CI and fails in CI (the environment variable CI is set).
"""
import http.client
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

import netlib

from netlib import FakeLog, World
from test_names import SERVER, DnsLog, ServerLog, dns_answered, dns_ask, user_pids

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


if not STORAGE:
    unable("LAZARET_TEST_STORAGE is not set: it names a Storage Root of the test user that holds (or may build) "
           "the agent images (scripts/test.sh passes its own)")
if not shutil.which("node"):
    unable("node is not installed on the host (scripts/setup.sh installs nodejs): the fake model servers need it")

DNS_NS, DNS_HOST, DNS_IP = "lzt-agw-dns", "198.18.50.1", "198.18.50.2"
API_NS, API_HOST, API_IP = "lzt-agw-api", "198.18.51.1", "198.18.51.2"
EXF_NS, EXF_HOST, EXF_IP = "lzt-agw-exf", "198.18.52.1", "198.18.52.2"
API_NAME, EXFIL_NAME = "api.fake-model.test", "exfil.fake-model.test"

# agent: (fake server, its port, the paths its API uses)
AGENTS = {"claude": ("anthropic", 8081, ("/v1/messages",)),
          "codex": ("openai-responses", 8082, ("/v1/responses", "/responses")),
          "opencode": ("openai-chat", 8083, ("/v1/chat/completions", "/chat/completions"))}
EXF_PORTS = [8081, 8082, 8083, 80, 443]
# A name each agent's built-in balanced list has (lazaret.toml(5)).
BUILTIN_NAME = {"claude": "api.anthropic.com:443", "codex": "api.openai.com:443", "opencode": "models.dev:443"}
MADE = "made-by-agent"
BUILD_TIMEOUT = 1800


def dnsmasq_args(log):
    return ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--port=53",
            f"--listen-address={DNS_IP}", "--bind-interfaces", "--log-queries", f"--log-facility={log}",
            "--user=root", "--group=root", "--pid-file=", "--local-ttl=300",
            f"--host-record={API_NAME},{API_IP}", f"--host-record={EXFIL_NAME},{EXF_IP}"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("agw-world")
    (d / "server.py").write_text(SERVER)
    w = World((DNS_NS, API_NS, EXF_NS))
    try:
        for ns, hostip, peer in ((DNS_NS, DNS_HOST, DNS_IP), (API_NS, API_HOST, API_IP), (EXF_NS, EXF_HOST, EXF_IP)):
            w.host(ns, hostip, [peer])
        logs = {k: d / f"{k}.log" for k in ("dns", "fake", "exfil")}
        for p in logs.values():
            p.write_text("")
        fake_err = open(logs["fake"], "a", buffering=1)
        for server, port, _ in AGENTS.values():
            # Each prints its port once it listens.
            w.start(["ip", "netns", "exec", API_NS, "env", f"FAKE_HOST={API_IP}", f"FAKE_PORT={port}", "node",
                     str(FIXTURES / "fake-model" / f"{server}.js")], str(port), stderr=fake_err)
        w.start(["ip", "netns", "exec", EXF_NS, "/usr/bin/python3", str(d / "server.py"), EXF_IP, str(logs["exfil"]),
                 ",".join(map(str, EXF_PORTS)), ""], "ready")
        dns = w.start(["ip", "netns", "exec", DNS_NS] + dnsmasq_args(logs["dns"]))
        w.wait_answered(dns, lambda: dns_answered(DNS_IP, API_NAME), "dnsmasq")
        yield {"dns": DnsLog(logs["dns"]), "fake": FakeLog(logs["fake"]), "exfil": ServerLog(logs["exfil"])}
    finally:
        w.end()


def environ(e):
    return {"PATH": "/usr/bin:/bin", "HOME": str(e["base"]), "XDG_CONFIG_HOME": str(e["base"] / "config"),
            "XDG_RUNTIME_DIR": str(e["base"] / "run"), "LANG": "C.UTF-8"}


def as_user(e, argv, config="config"):
    env = environ(e)
    env["XDG_CONFIG_HOME"] = str(e["base"] / config)
    return ["runuser", "-u", USER, "--", "env", "-i"] + [f"{k}={v}" for k, v in env.items()] + argv


def profiles_toml(base):
    """Each agent's profile: the built-in one (lazaret.toml(5), "BUILT-IN
    AGENT PROFILES") plus the fake's name. Its state volumes are the
    test's own, not {profile_dir}'s: the Storage Root is the integration
    tests' too, and their agent tests start from the state they left."""
    state = {"claude": [("claude", "/root/.claude")], "codex": [("codex", "/root/.codex")],
             "opencode": [("opencode-config", "/root/.config/opencode"),
                          ("opencode-share", "/root/.local/share/opencode")]}
    env = {"claude": '\nenv = { CLAUDE_CONFIG_DIR = "/root/.claude", IS_SANDBOX = "1" }', "codex": "", "opencode": ""}
    out = ""
    for agent, (_, port, _) in AGENTS.items():
        vols = ", ".join(f'{{ host = "{base}/state/{h}", container = "{c}", mode = "rw" }}' for h, c in state[agent])
        out += (f'\n[profiles.{agent}]\nimage = "builtin:agent-{agent}"\ncommand = ["{agent}"]\n'
                f'allow_hosts = ["{API_NAME}:{port}"]\nvolumes = [{vols}]{env[agent]}\n')
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
    base = netlib.user_base("lzagw", ("config/lazaret", "build-config/lazaret", "build-cwd", "run"))
    for agent in AGENTS:
        (base / f"ws-{agent}").mkdir()
        (base / f"ws-{agent}" / PROBE_FILE).write_text(PROBE)
    (base / "config/lazaret/config.toml").write_text(
        f'[storage]\ndata_root = "{storage}"\nlinger_seconds = 0\n\n'
        f'[network]\nresolver = "{DNS_IP}"\n' + profiles_toml(base))
    # Image builds (only of an image the Storage Root lacks) reach the
    # Debian mirror and npm through the host's own resolver.
    (base / "build-config/lazaret/config.toml").write_text(f'[storage]\ndata_root = "{storage}"\n')
    netlib.give_to(base, USER)
    e = {"base": base, "uid": pw.pw_uid}
    yield e
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def agent_image(user_env):
    return netlib.image_builder(lambda argv: as_user(user_env, argv, "build-config"), user_env["base"] / "build-cwd",
                                LAZARET, BUILD_TIMEOUT)


@pytest.fixture
def quiet(user_env):
    """No Domain of the test user runs before or after (linger_seconds = 0);
    whatever a failed test leaves is ended by pid."""
    yield from netlib.quiet(user_env)


# Inside the session, after the agent's turn: what an agent's tool could
# do. resolve4 goes to the sandbox's resolver (c-ares: the answer's code
# as is, EREFUSED for REFUSED); lookup is getaddrinfo, as most programs
# ask; connect is a plain TCP connect, 3 s at most. One line each.
PROBE_FILE = ".lz-probe.js"
PROBE = r'''
"use strict";
const dns = require("dns"), net = require("net");
const [api, exfil, apiIp, exfIp, port, otherPort] = process.argv.slice(2);
const resolve = (n) => new Promise((ok) => new dns.Resolver({ timeout: 3000, tries: 1 })
    .resolve4(n, (e, a) => ok(e ? `ERR ${e.code}` : `OK ${a.join(",")}`)));
const lookup = (n) => new Promise((ok) => dns.lookup(n, { family: 4 }, (e, a) => ok(e ? `ERR ${e.code}` : `OK ${a}`)));
const connect = (h, p) => new Promise((ok) => {
    const s = net.connect({ host: h, port: Number(p) });
    const t = setTimeout(() => { s.destroy(); ok("ERR TIMEOUT"); }, 3000);
    s.on("connect", () => { clearTimeout(t); s.destroy(); ok("OK"); });
    s.on("error", (e) => { clearTimeout(t); ok(`ERR ${e.code}`); });
});
(async () => {
    console.log(`PROBE resolve ${exfil} ${await resolve(exfil)}`);
    console.log(`PROBE lookup ${exfil} ${await lookup(exfil)}`);
    console.log(`PROBE connect ${exfIp}:${port} ${await connect(exfIp, port)}`);
    console.log(`PROBE connect ${apiIp}:${otherPort} ${await connect(apiIp, otherPort)}`);
    console.log(`PROBE resolve ${api} ${await resolve(api)}`);
    console.log(`PROBE connect ${apiIp}:${port} ${await connect(apiIp, port)}`);
})();
'''

SESSION = r"""
cd /workspace
export FAKE_URL=http://{name}:{port}
{prelude}
timeout 240 {agent_cmd} </dev/null 2>&1
echo "agent-rc=$?"
timeout 60 node /workspace/{probe} {probe_args} 2>&1
echo "probe-rc=$?"
"""

# The agents' one-shot unattended commands and settings, as in
# tests/integration/test_agents.py ($FAKE_URL is the fake's base URL).
CLAUDE = ("env ANTHROPIC_BASE_URL=$FAKE_URL ANTHROPIC_API_KEY=sk-lz-fake CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "
          f"DISABLE_AUTOUPDATER=1 claude -p 'create the file {MADE}' --dangerously-skip-permissions")
CODEX = ("codex exec -c model_provider=lzfake "
         "-c 'model_providers.lzfake={name=\"lzfake\", base_url=\"'$FAKE_URL'/v1\", wire_api=\"responses\"}' "
         f"-m lz-fake-model --dangerously-bypass-approvals-and-sandbox 'create the file {MADE}'")
OPENCODE_CFG = {"provider": {"lzfake": {"npm": "@ai-sdk/openai-compatible", "name": "lzfake",
                                        "options": {"baseURL": "@URL@/v1", "apiKey": "sk-lz-fake"},
                                        "models": {"lz-fake-model": {"name": "lz-fake-model"}}}},
                "model": "lzfake/lz-fake-model", "autoupdate": False, "share": "disabled"}
OPENCODE_PRELUDE = (f"CFG='{json.dumps(OPENCODE_CFG)}'\n"
                    'export OPENCODE_CONFIG_CONTENT="${CFG//@URL@/$FAKE_URL}"\n'
                    "export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 "
                    "OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1")
OPENCODE = f"opencode run -m lzfake/lz-fake-model 'create the file {MADE}'"
COMMANDS = {"claude": ("", CLAUDE), "codex": ("", CODEX), "opencode": (OPENCODE_PRELUDE, OPENCODE)}


def probes(out):
    """{"resolve NAME": result, "lookup NAME": ..., "connect IP:PORT": ...}"""
    return {f"{m.group(1)} {m.group(2)}": m.group(3)
            for m in re.finditer(r"^PROBE (\w+) (\S+) (.*)$", out, re.M)}


def lz(e, agent, argv, timeout=60):
    return subprocess.run(as_user(e, [LAZARET] + argv), cwd=e["base"] / f"ws-{agent}", capture_output=True,
                          text=True, timeout=timeout)


# ---- the world itself (passes without Lazaret: the sentinels' positive control) ----

def test_world_harness(world):
    """From the host: dnsmasq answers both names and logs each query
    (exfil.fake-model.test included: its absence later means something);
    each fake answers a request by address, logging its Host header; the
    exfil listener logs a connection on every port."""
    dns, fake, exfil = world["dns"], world["fake"], world["exfil"]
    m, fm = dns.mark(), fake.mark()
    for name, ip in ((API_NAME, API_IP), (EXFIL_NAME, EXF_IP)):
        rc, rrs = dns_ask(DNS_IP, name)
        assert rc == 0 and [r[2] for r in rrs] == [ip], (name, rrs)
    names = dns.names(m, "A")
    assert names.count(API_NAME) == 1 and names.count(EXFIL_NAME) == 1, names
    for _, port, paths in AGENTS.values():
        c = http.client.HTTPConnection(API_IP, port, timeout=5)
        c.request("POST", paths[0], body=json.dumps({"model": "x", "messages": [], "input": []}),
                  headers={"Host": f"{API_NAME}:{port}", "content-type": "application/json"})
        assert c.getresponse().status == 200, (port, paths)
        c.close()
    reqs = fake.requests(fm)
    assert sorted(q["path"] for q in reqs) == sorted(a[2][0] for a in AGENTS.values()), reqs
    assert {q["host"] for q in reqs} == {f"{API_NAME}:{a[1]}" for a in AGENTS.values()}, reqs
    for port in EXF_PORTS:
        before = exfil.count("tcp", EXF_IP, port)
        with socket.create_connection((EXF_IP, port), timeout=3) as c:
            assert c.makefile().readline() == f"HELLO-{EXF_IP}-{port}\n"
        assert exfil.count("tcp", EXF_IP, port) == before + 1


# ---- the agents ----

@pytest.fixture
def reset_domain(quiet):
    """After the test, once its Domain has stopped (quiet), its State
    Anchor is deleted: the Storage Root may be CI's, kept for the
    integration tests."""
    ids = []
    yield ids
    deadline = time.monotonic() + 45
    while user_pids(quiet["uid"], "runsc|slirp4netns|lazaret") and time.monotonic() < deadline:
        time.sleep(0.1)
    for agent, domain in ids:
        lz(quiet, agent, ["state", "reset", domain, "--yes"], timeout=120)


@pytest.mark.parametrize("agent", list(AGENTS))
def test_agent_reaches_its_fake_by_name_and_nothing_else(world, quiet, reset_domain, agent_image, agent):
    """The agent's profile is its built-in balanced list plus the fake's
    name on the fake's port; the agent completes a turn against the fake
    by name and runs its tool without a prompt; in the same session
    exfil.fake-model.test is refused, never forwarded, and neither its
    address nor another port of the fake's address can be reached."""
    dns, fake, exfil = world["dns"], world["fake"], world["exfil"]
    _, port, paths = AGENTS[agent]
    other = next(p for _, p, _ in AGENTS.values() if p != port)
    e = quiet
    ws = e["base"] / f"ws-{agent}"
    agent_image(agent)

    # The profile in effect: the default preset, the agent's own list, the fake.
    chk = lz(e, agent, ["config", "check", "-p", agent])
    assert chk.returncode == 0, chk.stderr
    text = chk.stdout
    assert "built-in agent profile" not in text, text
    assert 'egress = "balanced"  # from [network] egress' in text, text
    assert f'"{BUILTIN_NAME[agent]}",  # preset "balanced"' in text, text
    assert f'"{API_NAME}:{port}"' in text and f'resolver = "{DNS_IP}:53"' in text, text
    reset_domain.append((agent, re.search(r"^# Domain ID: ([0-9a-f]{64})$", text, re.M).group(1)))

    m, fm = dns.mark(), fake.mark()
    exf0 = len(exfil.lines())
    prelude, cmd = COMMANDS[agent]
    script = SESSION.format(name=API_NAME, port=port, prelude=prelude, agent_cmd=cmd,
                            probe=PROBE_FILE, probe_args=f"{API_NAME} {EXFIL_NAME} {API_IP} {EXF_IP} {port} {other}")
    r = subprocess.run(as_user(e, [LAZARET, "run", "-p", agent, "--", "bash", "-c", script]), cwd=ws,
                       capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    reqs = fake.requests(fm)
    looked = dns.queries(m)
    p = probes(out)
    diag = f"\n--- session:\n{out[-4000:]}\n--- fake:\n{reqs}\n--- dnsmasq:\n{looked}"

    # Positive: the turn, by name.
    assert r.returncode == 0 and "agent-rc=0" in out, diag
    ours = [q for q in reqs if q.get("path") in paths]
    assert ours and all(q.get("host") == f"{API_NAME}:{port}" for q in ours), diag
    asked = [i for i, q in enumerate(ours) if q.get("call")]
    assert asked and [q for q in ours[asked[0] + 1:] if q.get("tool_result") is not None], diag
    made = ws / MADE
    assert made.exists() and made.stat().st_uid == e["uid"], diag
    assert API_NAME in [n for t, n in looked if t == "A"], diag
    assert p.get(f"resolve {API_NAME}") == f"OK {API_IP}", diag
    assert p.get(f"connect {API_IP}:{port}") == "OK", diag

    # Negative: the unlisted name, its address, another port.
    assert p.get(f"resolve {EXFIL_NAME}") == "ERR EREFUSED", diag
    assert f"lazaret: the sandbox looked up {EXFIL_NAME}, which this profile does not allow" in r.stderr, diag
    assert (p.get(f"lookup {EXFIL_NAME}") or "OK").startswith("ERR "), diag
    assert p.get(f"connect {EXF_IP}:{port}") == "ERR EACCES", diag
    assert p.get(f"connect {API_IP}:{other}") == "ERR EACCES", diag
    assert EXFIL_NAME not in [n for _, n in looked], f"{EXFIL_NAME} reached the world's resolver{diag}"
    assert len(exfil.lines()) == exf0, f"the exfil host got a connection: {exfil.lines()[exf0:]}{diag}"
    assert not [q for q in reqs if q.get("host") != f"{API_NAME}:{port}" and q.get("path") in paths], diag
