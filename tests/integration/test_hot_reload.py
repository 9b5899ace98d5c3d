"""Hot reload: host edits reach inotify watchers inside the sandbox (issue 25 §4).

gVisor raises no inotify event for a change it did not make itself (gVisor
issue 8089). The workspace router watches the host tree already; it tells
lazaret-init which paths changed, and init's helper pokes each one through
the sandbox's own file system (an mtime set to a value the router
recognises and does not apply), which makes gVisor raise IN_MODIFY for the
path and its directory, and IN_OPEN/IN_CLOSE_WRITE for a regular file.
docs/hot-reload.md says what each host change becomes and what remains.

One sandbox for the module (the Debian image): a small static watcher
(tests/fixtures/inowatch.c, compiled here) and, when the host has a Node
binary the image can run, Node's fs.watch, each watching its own directory
while the host creates, appends, renames and deletes. Each host file the
mechanism pokes is checked unchanged (mtime and content) after the events;
the positive control is a touch from inside, which the same check sees.
"""
import os
import queue
import re
import shutil
import subprocess
import threading
import time

import pytest

from conftest import FIXTURES, Env, make_git_repo, user_processes

# The Debian image; the module's tests share one sandbox (the fixture `hot`),
# so they run on one worker under pytest-xdist.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hot-reload")]

WATCHER_SRC = FIXTURES / "inowatch.c"
# LZ_HOT_POKE_SEC, LZ_HOT_POKE_NSEC (src/lib/hotnotify.h)
POKE_MTIME_NS = 999999937
EVENT_TIMEOUT = 10.0
FLOOD = 2000

NODE_WATCH = r"""
const fs = require('fs');
const t0 = Date.now();
const out = (w, ev, name) => process.stdout.write(`node ${Date.now() - t0} ${w} ${ev} ${name}\n`);
for (const w of process.argv.slice(2)) fs.watch(w, (ev, name) => out(w, ev, name));
process.stdout.write('node-ready\n');
// Gone with the watcher it was started beside (sh exec'd it).
const pp = process.ppid;
setInterval(() => { if (process.ppid !== pp) process.exit(0); }, 200);
"""


def node_binary():
    """The host's Node when it links only what the Debian image has."""
    node = shutil.which("node")
    if not node:
        return None
    r = subprocess.run(["ldd", node], capture_output=True, text=True)
    libs = {line.split()[0] for line in r.stdout.splitlines() if "=>" in line}
    ok = {"libdl.so.2", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libc.so.6"}
    return node if r.returncode == 0 and libs <= ok else None


@pytest.fixture(scope="session")
def inowatch(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the static watcher")
    out = tmp_path_factory.mktemp("inowatch") / "inowatch"
    subprocess.run([cc, "-static", "-O2", "-o", str(out), str(WATCHER_SRC)], check=True, timeout=120)
    return out


class Session:
    """`lazaret run -- sh -c SCRIPT` on pipes: stdin goes to the watcher's
    commands; its output lines are read on a thread, each with the host's
    monotonic time it arrived."""

    def __init__(self, lazaret, env, ws, script, extra_env=None):
        self.p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", script], cwd=ws,
                                  env=env.environ(**(extra_env or {})), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.q = queue.Queue()
        self.lines = []  # (time, line), every line read so far
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            self.q.put((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))
        self.q.put((time.monotonic(), None))

    def wait_for(self, pred, timeout):
        """The (time, line) of the first line from now on matching pred
        (the lines before it are kept), or None at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                t, line = self.q.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            self.lines.append((t, line))
            if pred(line):
                return t, line

    def drain(self, seconds):
        self.wait_for(lambda line: False, seconds)

    def since(self, t0, prefix="ev "):
        return [(t, line) for t, line in self.lines if t >= t0 and line.startswith(prefix)]

    def cmd(self, c, timeout=20):
        self.p.stdin.write((c + "\n").encode())
        self.p.stdin.flush()
        hit = self.wait_for(lambda line: line == "done " + c.split()[0], timeout)
        assert hit, f"no answer to {c!r}"
        # The command's own output line comes just before its "done".
        outs = [line for _, line in self.lines[-6:] if line.startswith(c.split()[0] + " ")]
        return outs[-1] if outs else ""

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.drain(0.5)
        return self.p.stderr.read().decode(errors="replace")


def host_state(paths):
    """mtime, ctime and content of each host file still there."""
    out = {}
    for p in paths:
        try:
            st = os.stat(p)
            out[p] = (st.st_mtime_ns, st.st_ctime_ns, p.read_bytes())
        except FileNotFoundError:
            pass
    return out


def ev_matches(line, watched, name, masks=("MODIFY", "CLOSE_WRITE", "ATTRIB", "CREATE", "DELETE",
                                           "MOVED_FROM", "MOVED_TO")):
    """An inowatch line `ev MS WATCHED NAME MASK...` for watch `watched`
    naming `name` ("-": the watched path itself) with one of `masks`."""
    f = line.split()
    return len(f) >= 5 and f[0] == "ev" and f[2] == watched and f[3] == name and any(m in f[4:] for m in masks)


def node_matches(line, watched, name):
    f = line.split()
    return len(f) >= 5 and f[0] == "node" and f[2] == watched and f[4] == name


# kind: (host action on directory D, the inowatch event expected for each
# watch: (watched path relative to /workspace, name), the host files that
# must be left as the host made them).
KINDS = {
    "append": (lambda d: open(d / "f", "a").write("more\n"), [("D", "f"), ("D/f", "-")], ["f"]),
    "create": (lambda d: (d / "new").write_text("n\n"), [("D", "new")], ["new"]),
    "rename": (lambda d: os.rename(d / "old", d / "renamed"), [("D", "renamed"), ("D", "-")], ["renamed"]),
    "delete": (lambda d: os.unlink(d / "del"), [("D", "-")], []),
    "mkdir": (lambda d: os.mkdir(d / "sub"), [("D", "sub")], []),
    "symlink": (lambda d: os.symlink("f", d / "ln"), [("D", "ln")], []),
}


def prepare_dir(d):
    d.mkdir()
    for n in ("f", "old", "del"):
        (d / n).write_text(n + "\n")


@pytest.fixture(scope="module")
def hot(lazaret, debian, tmp_path_factory, inowatch):
    """Runs the whole module's sandbox once and returns what it saw."""
    base = tmp_path_factory.mktemp("hot")
    env = Env(base / "env", debian.storage, "builtin:debian-bookworm")
    ws = make_git_repo(base / "ws")
    prepare_dir(ws / "d")
    prepare_dir(ws / "n")
    (ws / "flood").mkdir()
    shutil.copy2(inowatch, ws / ".inowatch")
    node = node_binary()
    script = "exec /workspace/.inowatch /workspace/d /workspace/d/f /workspace/flood"
    if node:
        shutil.copy2(node, ws / ".node")
        (ws / ".nodewatch.js").write_text(NODE_WATCH)
        script = ("/workspace/.node /workspace/.nodewatch.js /workspace/n /workspace/n/f </dev/null & " + script)
    res = {"node": bool(node), "latency": {}, "node_latency": {}, "missing": [], "changed": [], "events": {}}
    s = Session(lazaret, env, ws, script)
    try:
        assert s.wait_for(lambda line: line == "ready", 120), "the watcher did not start"
        if node:
            assert any(line == "node-ready" for _, line in s.lines) or \
                s.wait_for(lambda line: line == "node-ready", 60), "the Node watcher did not start"
        # The watcher has seen the tree once, as a real one does.
        for c in ("ls /workspace/d", "ls /workspace/n", "ls /workspace/flood"):
            s.cmd(c)
        for n in ("f", "old", "del"):
            s.cmd(f"stat /workspace/d/{n}")
        s.drain(0.5)

        for kind, (act, expect, keep) in KINDS.items():
            for dname, watch in (("d", "inowatch"), ("n", "node")):
                if watch == "node" and not node:
                    continue
                d = ws / dname
                t0 = time.monotonic()
                act(d)
                after = host_state([d / k for k in keep])
                # Each expected event, with its latency from the host's action.
                for wrel, name in expect:
                    wpath = "/workspace/" + wrel.replace("D", dname)
                    if watch == "inowatch":
                        pred = lambda line, w=wpath, n=name: ev_matches(line, w, n)  # noqa: E731
                    else:
                        nname = name if name != "-" else os.path.basename(wpath)
                        pred = lambda line, w=wpath, n=nname: node_matches(line, w, n)  # noqa: E731
                    hit = next(((t, line) for t, line in s.lines if t >= t0 and pred(line)), None) or \
                        s.wait_for(pred, EVENT_TIMEOUT)
                    key = (kind, wrel, name)
                    if hit:
                        res["latency" if watch == "inowatch" else "node_latency"][key] = hit[0] - t0
                    else:
                        res["missing"].append((watch, key))
                s.drain(0.5)
                res["events"][(watch, kind)] = [line for _, line in s.since(t0, "ev " if watch == "inowatch"
                                                                            else "node ")]
                if host_state([d / k for k in keep]) != after:
                    res["changed"].append((watch, kind))

        # A burst of host appends, 10 ms apart: the last one is told (an
        # event after it), whatever was coalesced on the way.
        s.drain(0.3)
        for i in range(20):
            with open(ws / "d" / "f", "a") as f:
                f.write(f"burst {i}\n")
            t_last = time.monotonic()
            time.sleep(0.01)
        hit = s.wait_for(lambda line: ev_matches(line, "/workspace/d/f", "-", ("MODIFY",)), EVENT_TIMEOUT)
        while hit and hit[0] < t_last:
            hit = s.wait_for(lambda line: ev_matches(line, "/workspace/d/f", "-", ("MODIFY",)), EVENT_TIMEOUT)
        res["burst_last_s"] = hit[0] - t_last if hit else None
        s.drain(0.5)

        # What inside sees of a poked file: the host's mtime, not the poke's.
        st = os.stat(ws / "d" / "f")
        res["inside_mtime"] = s.cmd("mtime /workspace/d/f").split()[-1]
        res["host_mtime"] = f"{st.st_mtime_ns // 10**9}.{st.st_mtime_ns % 10**9:09d}"
        # A poke made by hand from inside leaves the host file as it was...
        before = host_state([ws / "d" / "f"])
        res["poke_rc"] = s.cmd("poke /workspace/d/f").split()[-1]
        res["poke_kept"] = host_state([ws / "d" / "f"]) == before
        # ...and the positive control: a touch from inside is seen by the
        # same check.
        time.sleep(0.02)
        t_touch = time.monotonic()
        res["touch_rc"] = s.cmd("touch /workspace/d/f").split()[-1]
        res["touch_seen"] = host_state([ws / "d" / "f"]) != before
        # The sandbox's own change raised its own event (IN_ATTRIB) and is
        # not told back: no poke's IN_MODIFY after it.
        s.drain(0.5)
        res["touch_events"] = [line for _, line in s.since(t_touch) if "/workspace/d" in line]

        # A flood: FLOOD creates in one directory. Its watchers get events
        # (coalesced to the directory when the channel is full) and the
        # last one is told within a bound; then a single append is told as
        # quickly as before.
        t0 = time.monotonic()
        for i in range(FLOOD):
            (ws / "flood" / f"x{i}").write_text("x")
        t_done = time.monotonic()
        last = f"x{FLOOD - 1}"
        # The last file named, or the directory itself poked (coalesced)
        # after the host's last create.
        hit = next(((t, line) for t, line in s.lines if t >= t0 and ev_matches(line, "/workspace/flood", last)),
                   None)
        deadline = time.monotonic() + 60
        while not hit and time.monotonic() < deadline:
            got = s.wait_for(lambda line: ev_matches(line, "/workspace/flood", last) or
                             ev_matches(line, "/workspace/flood", "-"), deadline - time.monotonic())
            if got and (got[1].split()[3] == last or got[0] >= t_done):
                hit = got
        res["flood_write_s"] = t_done - t0
        res["flood_last_s"] = hit[0] - t_done if hit else None
        s.drain(3.0)
        res["flood_events"] = len(s.since(t0))
        t1 = time.monotonic()
        with open(ws / "d" / "f", "a") as f:
            f.write("after the flood\n")
        hit = s.wait_for(lambda line: ev_matches(line, "/workspace/d/f", "-"), EVENT_TIMEOUT)
        res["after_flood_s"] = hit[0] - t1 if hit else None
        res["after_flood_events"] = [line for _, line in s.since(t1)][:20]
        if not hit:
            r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c",
                                'for p in /proc/[0-9]*; do echo $p $(tr "\\0" " " < $p/cmdline); done'],
                               cwd=ws, env=env.environ(), capture_output=True, timeout=60)
            res["after_flood_events"].append(r.stdout.decode(errors="replace"))
    finally:
        err = s.close()
    res["stderr"] = err
    print("hot reload:", {k: v for k, v in res.items() if k not in ("events", "stderr")})
    for (watch, kind), lines in res["events"].items():
        print("EVENTS", watch, kind, " | ".join(" ".join(line.split()[2:]) for line in lines))
    return res


def test_watchers_see_host_changes(hot):
    """inowatch sees each host create, append, rename and delete within
    EVENT_TIMEOUT (the latencies are printed; docs/hot-reload.md)."""
    missing = [m for m in hot["missing"] if m[0] == "inowatch"]
    assert not missing, (missing, hot["events"], hot["stderr"][-2000:])
    assert max(hot["latency"].values()) < EVENT_TIMEOUT


def test_node_fs_watch_sees_host_changes(hot):
    if not hot["node"]:
        pytest.skip("no host Node binary the Debian image can run (and no agent image with Node here)")
    missing = [m for m in hot["missing"] if m[0] == "node"]
    assert not missing, (missing, hot["events"])


def test_host_files_left_as_the_host_made_them(hot):
    """The mechanism changes no host file: mtime, ctime and content as the
    host's own action left them; inside, stat shows the host's mtime."""
    assert not hot["changed"], hot["changed"]
    assert hot["poke_rc"] == "0" and hot["poke_kept"]
    assert hot["inside_mtime"] == hot["host_mtime"]
    assert hot["inside_mtime"] != f"0.{POKE_MTIME_NS:09d}"
    # Positive control: a change from inside is seen by the same check.
    assert hot["touch_rc"] == "0" and hot["touch_seen"]


def test_sandbox_changes_not_told_back(hot):
    """A change made inside raises gVisor's own event once; the router does
    not tell it back. inowatch's touch sets the mtime alone: gVisor's
    IN_MODIFY for the file and its directory, once each; a poke would add a
    second IN_MODIFY and IN_CLOSE_WRITE (it opens the file for writing)."""
    ev = hot["touch_events"]
    assert sorted(" ".join(line.split()[2:]) for line in ev) == ["/workspace/d f MODIFY",
                                                               "/workspace/d/f - MODIFY"], ev


def test_last_of_a_burst_is_told(hot):
    assert hot["burst_last_s"] is not None and hot["burst_last_s"] < EVENT_TIMEOUT, hot["burst_last_s"]


def test_flood_coalesces_and_recovers(hot):
    assert hot["flood_last_s"] is not None and hot["flood_last_s"] < 30, hot["flood_last_s"]
    assert hot["after_flood_s"] is not None and hot["after_flood_s"] < EVENT_TIMEOUT, hot["after_flood_events"]


# ---- measurement (not a test): what gVisor raises by itself ----


def skip_unless_measuring(request):
    """Measurements run only when selected (-m measure), never by default."""
    if not re.search(r"(?<!not )\bmeasure\b", request.config.getoption("markexpr") or ""):
        pytest.skip("a measurement: select it with -m measure")


PROBES = ["stat", "open", "read", "ls", "statdir", "omit", "chmod", "wopen", "poke"]


@pytest.mark.measure
@pytest.mark.serial
def test_measure_revalidation(request, lazaret, debian, tmp_path, inowatch):
    """Which access from inside makes gVisor raise which event for a path the
    host changed, with the router's channel off (LAZARET_TEST_WORKSPACE=nohot):
    one directory per (change, probe) in one sandbox. Prints a table
    (docs/hot-reload.md). Run with -m measure -s."""
    skip_unless_measuring(request)
    env = Env(tmp_path / "env", debian.storage, "builtin:debian-bookworm")
    ws = make_git_repo(tmp_path / "ws")
    pairs = [(k, p) for k in KINDS for p in PROBES]
    for k, p in pairs:
        prepare_dir(ws / f"{k}-{p}")
    shutil.copy2(inowatch, ws / ".inowatch")
    s = Session(lazaret, env, ws, "exec /workspace/.inowatch", {"LAZARET_TEST_WORKSPACE": "nohot"})
    rows = []
    try:
        assert s.wait_for(lambda line: line == "ready", 120)
        for k, p in pairs:
            d = f"/workspace/{k}-{p}"
            s.cmd(f"watch {d}")
            s.cmd(f"watch {d}/f")
            s.cmd(f"ls {d}")
            for n in ("f", "old", "del"):
                s.cmd(f"stat {d}/{n}")
        s.drain(0.5)
        for k, p in pairs:
            d = f"/workspace/{k}-{p}"
            t0 = time.monotonic()
            KINDS[k][0](ws / f"{k}-{p}")
            s.drain(1.0)
            quiet = len(s.since(t0))
            t1 = time.monotonic()
            names = {"append": ["f"], "create": ["new"], "rename": ["old", "renamed"], "delete": ["del"],
                     "mkdir": ["sub"], "symlink": ["ln"]}[k]
            for n in names:
                target = d if p in ("ls", "statdir") else f"{d}/{n}"
                s.cmd({"statdir": "stat", "ls": "ls"}.get(p, p) + " " + target)
            s.drain(0.5)
            seen = " | ".join(" ".join(line.split()[2:]) for _, line in s.since(t1)) or "-"
            rows.append((k, p, quiet, seen))
    finally:
        s.close()
    for r in rows:
        print("ROW", *r)


def domain_cpu():
    """CPU seconds used so far by our sandbox's processes (runsc's and the
    routers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pat in ("runsc", "lazaret-router"):
        for pid in user_processes(pat):
            try:
                f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(f[11]) + int(f[12])
    return total / tick


@pytest.mark.measure
@pytest.mark.serial
@pytest.mark.parametrize("mode", ["hot", "nohot"])
def test_measure_cost(request, lazaret, debian, tmp_path, inowatch, mode):
    """What the channel costs: the sandbox's CPU while the host makes FLOOD
    creates and FLOOD appends in a watched directory, and the wall time of
    FLOOD creates made inside (their own host events come back as pokes).
    Prints one COST line; run with -m measure -s."""
    skip_unless_measuring(request)
    env = Env(tmp_path / "env", debian.storage, "builtin:debian-bookworm")
    ws = make_git_repo(tmp_path / "ws")
    (ws / "h").mkdir()
    (ws / "i").mkdir()
    shutil.copy2(inowatch, ws / ".inowatch")
    extra = {"LAZARET_TEST_WORKSPACE": "nohot"} if mode == "nohot" else {}
    s = Session(lazaret, env, ws, "exec /workspace/.inowatch /workspace/h /workspace/i", extra)
    try:
        assert s.wait_for(lambda line: line == "ready", 120)
        s.cmd("ls /workspace/h")
        s.drain(2.0)
        c0, t0 = domain_cpu(), time.monotonic()
        for i in range(FLOOD):
            (ws / "h" / f"x{i}").write_text("x")
        for i in range(FLOOD):
            with open(ws / "h" / f"x{i}", "a") as f:
                f.write("y")
        t_host = time.monotonic() - t0
        # Until the events stop for a second.
        n = 0
        while s.wait_for(lambda line: line.startswith("ev "), 1.0):
            n += 1
        cpu_host = domain_cpu() - c0
        wall_host = time.monotonic() - t0
        # FLOOD creates inside, in a busybox-free shell loop of the image.
        s.p.stdin.write(b"wait 1\n")
        s.p.stdin.flush()
        c1, t1 = domain_cpu(), time.monotonic()
        r = subprocess.run([lazaret, "run", "-p", "test", "--", "sh", "-c",
                            f"i=0; while [ $i -lt {FLOOD} ]; do echo x > /workspace/i/y$i; i=$((i+1)); done"],
                           cwd=ws, env=env.environ(**extra), capture_output=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        wall_inside = time.monotonic() - t1
        m = 0
        while s.wait_for(lambda line: line.startswith("ev "), 1.0):
            m += 1
        cpu_inside = domain_cpu() - c1
    finally:
        s.close()
    print(f"COST {mode}: host {2 * FLOOD} changes in {t_host:.2f} s -> {n} events, sandbox+router CPU "
          f"{cpu_host:.2f} s, quiet after {wall_host:.2f} s; inside {FLOOD} creates {wall_inside:.2f} s, "
          f"{m} events, CPU {cpu_inside:.2f} s")


@pytest.mark.measure
@pytest.mark.serial
@pytest.mark.parametrize("mode", ["hot", "nohot"])
def test_measure_tail(request, lazaret, debian, tmp_path, mode):
    """GNU tail -F through the sandbox: the host creates, appends, replaces.
    Prints the latency of each line (None: not seen in EVENT_TIMEOUT). It
    polls either way (measured: ~1 s a line with the channel and without):
    coreutils takes gVisor's file system for a remote one and does not use
    inotify on it."""
    skip_unless_measuring(request)
    env = Env(tmp_path / "env", debian.storage, "builtin:debian-bookworm")
    ws = make_git_repo(tmp_path / "ws")
    t = ws / "t"
    t.mkdir()
    extra = {"LAZARET_TEST_WORKSPACE": "nohot"} if mode == "nohot" else {}
    s = Session(lazaret, env, ws, "stat -f -c 'fstype %T' /workspace; echo ready; "
                "exec tail -n +1 -F /workspace/t/log.txt 2>&1", extra)
    lat = {}
    try:
        assert s.wait_for(lambda line: line == "ready", 120)
        time.sleep(2)
        for step, act in (("one", lambda: (t / "log.txt").write_text("one\n")),
                          ("two", lambda: open(t / "log.txt", "a").write("two\n")),
                          ("three", lambda: ((t / "log.tmp").write_text("three\n"),
                                             os.rename(t / "log.tmp", t / "log.txt"))),
                          ("four", lambda: open(t / "log.txt", "a").write("four\n"))):
            t0 = time.monotonic()
            act()
            hit = s.wait_for(lambda line, w=step: line == w, EVENT_TIMEOUT)
            lat[step] = round(hit[0] - t0, 3) if hit else None
    finally:
        s.p.kill()
        s.close()
    print(f"TAIL {mode}: {lat}", [line for _, line in s.lines if not line.startswith(("one", "two", "three", "four"))])
