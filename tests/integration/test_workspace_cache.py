"""The workspace router caches (lazaret-router --watch) and still shows host edits.

The kernel may cache entries and attributes for 10 s; an inotify thread in
the router invalidates what the host changes. Each case: the sandbox looks
at a file (which caches it), the host changes it, and the sandbox polls
(bounded: 300 polls) until it sees a difference. The latency is measured
on the host, from the edit to the sandbox's report, so it includes the
relay of the session's pipes.

Positive control: with LAZARET_TEST_WORKSPACE=noinval the router watches but
does not invalidate, and the same edits stay unseen for seconds (until the
10 s timeout runs out): the freshness above is the invalidation's doing,
not a cache that was never used.
"""
import os
import select
import subprocess
import time

import pytest

CASES = ["write", "content", "new", "list", "rename", "unlink", "chmod", "dirmtime"]

# busybox's stat and usleep have no links in the test image. poll CASE
# BEFORE: up to 300 polls until CASE's check differs from BEFORE.
FUNCS = r"""
cd /workspace
check() {
  case $1 in
    write) busybox stat -c %s w.txt ;;
    content) cat c.txt ;;
    list) ls l | tr '\n' ' ' ;;
    new) [ -e d/new.txt ] && echo yes || echo no ;;
    rename) [ -e d/old.txt ] && echo old || echo gone ;;
    unlink) [ -e u.txt ] && echo there || echo gone ;;
    chmod) busybox stat -c %a m.txt ;;
    dirmtime) busybox stat -c %Y e ;;
  esac
}
poll() {
  i=0; seen=stale
  while [ $i -lt 300 ]; do
    now=$(check $1)
    if [ "$now" != "$2" ]; then seen=seen; break; fi
    i=$((i+1)); busybox usleep 10000
  done
  echo "$seen $1 $i $now"
}
"""

# One case after the other: look, the host edits, poll; then the next.
SCRIPT = FUNCS + r"""
for c in CASES; do
  before=$(check $c)
  echo "ready $c $before"
  read go || exit 1
  poll $c "$before"
done
echo done
""".replace("CASES", " ".join(CASES))

# Every case at once: look at all of them, the host edits all, each case
# polls in a subshell of its own (one line each, in the order seen).
TOGETHER = FUNCS + r"""
for c in CASES; do
  before=$(check $c)
  eval "before_$c=\$before"
  echo "ready $c $before"
done
read go || exit 1
for c in CASES; do
  eval "before=\$before_$c"
  poll $c "$before" &
done
wait
echo done
""".replace("CASES", " ".join(CASES))


def host_edit(ws, case):
    if case == "write":
        (ws / "w.txt").write_text("a longer content now\n")
    elif case == "content":
        # The same size: only the data differs, which the kernel keeps
        # cached across opens (zero-message opens).
        (ws / "c.txt").write_text("v2\n")
    elif case == "new":
        (ws / "d" / "new.txt").write_text("new\n")
    elif case == "list":
        # A listing the kernel may keep across opens (cache_readdir).
        (ws / "l" / "two").write_text("2\n")
    elif case == "rename":
        os.rename(ws / "d" / "old.txt", ws / "d" / "renamed.txt")
    elif case == "unlink":
        os.unlink(ws / "u.txt")
    elif case == "chmod":
        os.chmod(ws / "m.txt", 0o700)
    elif case == "dirmtime":
        # A directory's mtime changes when an entry is added to it.
        os.utime(ws / "e", (1_000_000_000, 1_000_000_000))


def prepare(ws):
    (ws / "w.txt").write_text("v1\n")
    (ws / "c.txt").write_text("v1\n")
    (ws / "d").mkdir()
    (ws / "d" / "old.txt").write_text("old\n")
    (ws / "u.txt").write_text("u\n")
    (ws / "m.txt").write_text("m\n")
    os.chmod(ws / "m.txt", 0o644)
    (ws / "e").mkdir()
    (ws / "l").mkdir()
    (ws / "l" / "one").write_text("1\n")


class Lines:
    """Lines of a pipe, each read with a deadline."""

    def __init__(self, f):
        self.f, self.buf = f, b""

    def next(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line from the sandbox within {timeout} s; got {self.buf!r}")
            r, _, _ = select.select([self.f], [], [], left)
            if r:
                chunk = os.read(self.f.fileno(), 4096)
                if not chunk:
                    raise AssertionError(f"the session ended; got {self.buf!r}")
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()


def run_cases(lazaret, env, ws, mode=None, together=False):
    """Each case's (verdict, latency, polls). together: all cases edited at
    once and polled side by side (TOGETHER), otherwise one after the other."""
    prepare(ws)
    environ = env.environ()
    if mode:
        environ["LAZARET_TEST_WORKSPACE"] = mode
    script = TOGETHER if together else SCRIPT
    p = subprocess.Popen([lazaret, "run", "-p", "test", "--", "sh", "-c", script], cwd=ws, env=environ,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = {}

    def result(line, t0):
        latency = time.monotonic() - t0
        verdict, name, polls = line.split()[:3]
        assert name in CASES and name not in results, line
        results[name] = (verdict, latency, int(polls))
        return name

    try:
        out = Lines(p.stdout)
        if together:
            for case in CASES:
                line = out.next(timeout=120 if case == CASES[0] else 30)
                assert line.startswith(f"ready {case}"), line
            for case in CASES:
                host_edit(ws, case)
            t0 = time.monotonic()
            p.stdin.write(b"go\n")
            p.stdin.flush()
            for _ in CASES:
                result(out.next(timeout=60), t0)
        else:
            for case in CASES:
                line = out.next(timeout=120 if case == CASES[0] else 30)
                assert line.startswith(f"ready {case}"), line
                host_edit(ws, case)
                t0 = time.monotonic()
                p.stdin.write(b"go\n")
                p.stdin.flush()
                assert result(out.next(timeout=30), t0) == case, case
        assert out.next(timeout=30) == "done"
        p.stdin.close()
        assert p.wait(timeout=60) == 0, p.stderr.read().decode(errors="replace")[-2000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    print(f"\n{mode or 'watch'}: " + ", ".join(f"{c} {v} {lat * 1000:.0f} ms ({n} polls)"
                                             for c, (v, lat, n) in results.items()))
    return results


@pytest.mark.serial  # latency bounds: measured alone, not beside other tests
def test_host_edits_seen_with_caching(lazaret, env, workspace):
    res = run_cases(lazaret, env, workspace)
    for case, (verdict, latency, _) in res.items():
        assert verdict == "seen", (case, res)
        # The goal is 100 ms; this shared 2-core machine gets a margin
        # (the figure includes a process start in the sandbox per poll).
        assert latency < 1.0, (case, res)


@pytest.mark.serial  # latency bounds: measured alone, not beside other tests
def test_positive_control_without_invalidation_edits_stay_unseen(lazaret, env, workspace):
    # The cases side by side (together): each waits out the kernel's 10 s
    # timeout, so one after the other took over 70 s for the same verdicts.
    # Each case still looks at its own files only, the host edits each of
    # them once, and a case the kernel did not cache is seen at its first
    # poll, as in the sequential run (tried: with invalidation on, this
    # run saw every case at its first poll, within 0.4 s, and each
    # assertion below failed; without it, each cached case about 10 s on).
    res = run_cases(lazaret, env, workspace, mode="noinval", together=True)
    # Everything the kernel had cached stays, a name looked up and absent
    # ("new") too. The cached ones show once the 10 s timeout runs out (a
    # poll starts a process in the sandbox, so 300 polls outlast it): never
    # before 3 s.
    # A read makes the kernel's atime stale, so the next stat asks the
    # router again and a changed mtime drops the cached data: "content" is
    # seen either way too (kept as a case: the data must never be stale).
    assert res["content"][0] == "seen", res
    for case in ("write", "new", "list", "rename", "unlink", "chmod", "dirmtime"):
        verdict, latency, _ = res[case]
        assert verdict == "stale" or latency > 3.0, (case, res)


@pytest.mark.parametrize("mode", ["nowatch"])
def test_uncached_router_sees_edits(lazaret, env, workspace, mode):
    """Timeouts of 0 (the router before --watch): every edit seen too."""
    res = run_cases(lazaret, env, workspace, mode=mode)
    assert all(v == "seen" for v, _, _ in res.values()), res


def test_tail_follows_host_files_by_polling(lazaret, debian, tmp_path):
    """Issue 25 §6(c): a host file stayed "No such file or directory" under
    `tail -F` for a whole session. The router is not why (a name the host
    makes is seen at the next lookup: case "new" above); GNU tail follows
    by inotify on /workspace (v9fs, which it takes for local), and gVisor's
    inotify reports only what the sandbox itself does there, so tail never
    hears of the host's file or of its appends. Polling (docs/state.md,
    "Files the host changes") follows both."""
    from conftest import make_git_repo
    ws = make_git_repo(tmp_path / "ws")
    (ws / "early.txt").write_text("early-1\n")
    p = subprocess.Popen([lazaret, "run", "--", "timeout", "8", "tail", "---disable-inotify", "-s", "0.3", "-F",
                          "early.txt", "late.txt"], cwd=ws, env=debian.environ(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        with open(ws / "early.txt", "a") as f:
            f.write("early-2\n")
        (ws / "late.txt").write_text("late-1\n")
        time.sleep(1.5)
        with open(ws / "late.txt", "a") as f:
            f.write("late-2\n")
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    lines = out.splitlines()
    for want in ("early-1", "early-2", "late-1", "late-2"):
        assert want in lines, (out, err)
    assert lines.index("late-1") < lines.index("late-2"), out
