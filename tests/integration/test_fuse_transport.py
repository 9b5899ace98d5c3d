"""The workspace router's FUSE transport (issue 26 §2): FUSE over io_uring
where the host's fuse module has enable_uring on, /dev/fuse otherwise or
when forced (LAZARET_TEST_FUSE=classic). `lazaret ps` and `lazaret doctor`
say which transport each Domain's router got, and a workload inside (names,
small and large files past the io_uring entries' 128 KiB, renames, a
directory listing, Git) gives the same results on both transports.

The rest of the router's tests run on whatever transport the host gives
(io_uring when scripts/setup.sh switched it on); with LAZARET_TEST_FUSE=classic
in the test runner's environment, on /dev/fuse.
"""
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from conftest import git, make_git_repo

URING_PARAM = Path("/sys/module/fuse/parameters/enable_uring")

pytestmark = pytest.mark.slow


def uring_on():
    try:
        return URING_PARAM.read_text().strip() in ("Y", "1") and \
            Path("/proc/sys/kernel/io_uring_disabled").read_text().strip() == "0"
    except OSError:
        return False


# Inside: files of sizes around the entries' payload (128 KiB), copies and
# renames, a listing, and the digests of what it wrote.
WORKLOAD = r"""
set -e
cd /workspace
mkdir -p t/sub
for s in 0 1 4095 4096 131071 131072 131073 1048576 3000001; do
  head -c $s /dev/urandom > t/f$s
done
cp t/f3000001 t/sub/copy
mv t/f1 t/sub/moved
for i in $(seq 1 200); do echo "n$i" > t/sub/n$i; done
rm t/sub/n1?
ls t/sub | wc -l
sha256sum t/f* t/sub/copy t/sub/moved | sort -k2
git status --porcelain | head -3
echo WORKLOAD-DONE
"""


def run_session(lazaret, env, ws, extra_env, script, timeout=300):
    """`lazaret run` of script, with `lazaret ps --json` taken while the
    session still runs (it waits for a line on stdin after `ready`)."""
    e = env.environ(**extra_env)
    p = subprocess.Popen([lazaret, "run", "-p", "debian-ft", "--", "bash", "-c",
                          script + "\necho SESSION-READY; read -r -t 120 _ || true"],
                         cwd=ws, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out = ""
    try:
        while "SESSION-READY" not in out:
            line = p.stdout.readline()
            if not line:
                break
            out += line
        ps = subprocess.run([lazaret, "ps", "--json"], env=e, capture_output=True, text=True, timeout=60)
        doctor = subprocess.run([lazaret, "doctor"], env=e, capture_output=True, text=True, timeout=120)
    finally:
        try:
            p.stdin.write("\n")
            p.stdin.flush()
        except OSError:
            pass
        try:
            rest, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, err = p.communicate()
    out += rest
    assert p.returncode == 0, (out[-2000:], err[-2000:])
    assert ps.returncode == 0, ps.stderr
    doms = [d for d in json.loads(ps.stdout) if d["workspace"] == str(ws)]
    assert len(doms) == 1, ps.stdout
    return out, doms[0], doctor.stdout


def host_digests(ws):
    lines = []
    for p in sorted(list((ws / "t").glob("f*")) + [ws / "t/sub/copy", ws / "t/sub/moved"], key=lambda x: str(x)):
        lines.append((hashlib.sha256(p.read_bytes()).hexdigest(), "t/" + str(p.relative_to(ws / "t"))))
    return lines


def check_workload(out, ws):
    assert "WORKLOAD-DONE" in out
    lines = out.splitlines()
    # 200 names less the ten n10..n19, plus copy and moved
    assert lines[0].strip() == "192", out[:500]
    inside = sorted((l.split()[0], l.split()[1]) for l in lines[1:] if len(l.split()) == 2 and len(l.split()[0]) == 64)
    assert inside == sorted(host_digests(ws)), out[:3000]
    assert (ws / "t/f3000001").stat().st_size == 3000001
    assert (ws / "t/sub/copy").read_bytes() == (ws / "t/f3000001").read_bytes()
    assert not (ws / "t/f1").exists() and (ws / "t/sub/moved").stat().st_size == 1


@pytest.fixture
def ft_env(debian):
    """The shared Debian environment with a profile of this module's (its
    configuration put back afterwards)."""
    before = debian.config.read_text()
    debian.config.write_text(before + '\n[profiles.debian-ft]\nimage = "builtin:debian-bookworm"\n'
                             'persistent_dirs = []\n')
    yield debian
    debian.config.write_text(before)


@pytest.mark.skipif(not uring_on(), reason="FUSE over io_uring is off on this host (enable_uring N)")
def test_io_uring_when_on(lazaret, ft_env, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    out, dom, doctor = run_session(lazaret, ft_env, ws, {"LAZARET_TEST_FUSE": "auto"}, WORKLOAD)
    assert dom.get("fuse_transport", "").startswith("io_uring, "), dom
    # one queue per possible CPU
    assert int(dom["fuse_transport"].split(", ")[1].split()[0]) >= 1
    check_workload(out, ws)
    assert f"Domain {dom['domain_id'][:12]} workspace FUSE transport: io_uring" in doctor, doctor
    assert "FUSE over io_uring" in doctor and "enabled" in doctor, doctor
    # Git on the host sees what the sandbox wrote.
    assert "t/" in git(ws, "status", "--porcelain", "-uall").stdout


def test_classic_forced(lazaret, ft_env, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    out, dom, doctor = run_session(lazaret, ft_env, ws, {"LAZARET_TEST_FUSE": "classic"}, WORKLOAD)
    assert dom.get("fuse_transport") == "/dev/fuse (forced)", dom
    check_workload(out, ws)
    assert f"Domain {dom['domain_id'][:12]} workspace FUSE transport: /dev/fuse (forced)" in doctor, doctor


@pytest.mark.skipif(uring_on(), reason="FUSE over io_uring is on on this host")
def test_dev_fuse_when_off(lazaret, ft_env, tmp_path):
    ws = make_git_repo(tmp_path / "ws")
    out, dom, doctor = run_session(lazaret, ft_env, ws, {"LAZARET_TEST_FUSE": "auto"}, WORKLOAD)
    assert dom.get("fuse_transport", "").startswith("/dev/fuse ("), dom
    check_workload(out, ws)
    assert "available but off" in doctor or "not in this kernel" in doctor or "disabled" in doctor, doctor


@pytest.mark.skipif(not uring_on(), reason="FUSE over io_uring is off on this host (enable_uring N)")
def test_a_refused_commit_fails_the_domain_instead_of_hanging(lazaret, ft_env, tmp_path):
    """A reply the kernel cannot match (a commit ID it does not know, as a
    lost ring entry would give) leaves its request unanswered: before, the
    entry was quietly dropped, and that request's caller (here a write of
    the workload; a FLUSH's caller cannot even be killed) waited forever,
    the sandbox with it. The router must end its session instead: the
    kernel ends every request with an error, and the Domain fails with a
    reason, in bounded time. LAZARET_TEST_FUSE=break-commit breaks the
    workspace router's 200th reply."""
    ws = make_git_repo(tmp_path / "ws")
    e = ft_env.environ(LAZARET_TEST_FUSE="break-commit")
    try:
        r = subprocess.run([lazaret, "run", "-p", "debian-ft", "--", "bash", "-c", WORKLOAD], cwd=ws, env=e,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired:
        pytest.fail("the session hung after the refused commit (no answer in 150 s)")
    assert r.returncode != 0 and "WORKLOAD-DONE" not in r.stdout, (r.stdout[-1000:], r.stderr[-1000:])
    logs = [p.read_text(errors="replace") for p in Path(ft_env.storage).glob("domains/*/coordinator.log")]
    mine = [t for t in logs if f"workspace {ws})" in t]
    assert len(mine) == 1, len(mine)
    assert "COMMIT_AND_FETCH failed" in mine[0] and "ending the FUSE session" in mine[0], mine[0][-3000:]
