"""Lazaret run by root, as on VMs and cloud machines (the README's
Quick start as root). Run as root by scripts/test.sh.

scripts/setup.sh gives root a subordinate ID range; with it, a process in
the sandbox can drop to another user and use files of that user from the
image, as apt-get does (_apt owns /var/lib/apt/lists/partial). Without a
range the Domain maps one ID and that fails with "Permission denied":
the positive control removes root's range for one run and sees exactly
that, and `lazaret doctor` then fails the subordinate-ID check.
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

LAZARET = os.environ.get("LAZARET_BIN") or str(Path(__file__).resolve().parents[2] / "build" / "lazaret")
APT_PROBE = ["su", "-s", "/bin/sh", "_apt", "-c", "touch /var/lib/apt/lists/partial/probe && echo DROP-OK"]


@pytest.fixture(scope="module")
def root_env():
    if os.geteuid() != 0:
        pytest.fail("run as root (scripts/test.sh does)")
    base = Path(tempfile.mkdtemp(prefix="lz-root-", dir="/var/tmp"))
    (base / "cfg" / "lazaret").mkdir(parents=True)
    rt = Path(tempfile.mkdtemp(prefix="lzrt", dir="/tmp"))
    os.chmod(rt, 0o700)
    (base / "cfg" / "lazaret" / "config.toml").write_text(
        f'[storage]\ndata_root = "{base / "storage"}"\nlinger_seconds = 0\n\n'
        '[profiles.deb]\nimage = "builtin:debian-bookworm"\npersistent_dirs = ["/var"]\n')
    ws = base / "ws"
    ws.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(base), "LANG": "C.UTF-8",
           "XDG_CONFIG_HOME": str(base / "cfg"), "XDG_RUNTIME_DIR": str(rt)}
    yield env, ws
    subprocess.run([LAZARET, "state", "reset", "--all", "--yes", "-p", "deb"], cwd=ws, env=env,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(rt, ignore_errors=True)


def run(env, ws, argv, timeout=900):
    return subprocess.run([LAZARET, "run", "-p", "deb", "--", *argv], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_root_sandbox_can_drop_privileges_like_apt(root_env):
    env, ws = root_env
    doc = subprocess.run([LAZARET, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    line = next((ln for ln in doc.stdout.splitlines() if "subordinate ID ranges" in ln), "")
    assert line.startswith("[ok"), doc.stdout
    r = run(env, ws, APT_PROBE)  # the first run bootstraps the Debian image (minutes)
    assert r.returncode == 0 and "DROP-OK" in r.stdout, r.stdout + r.stderr


def test_control_without_a_range_apt_style_drop_fails(root_env):
    """Positive control: root without a subordinate range (as before setup
    gave it one) gets "Permission denied", and doctor fails."""
    env, ws = root_env
    saved = {f: Path(f).read_text() for f in ("/etc/subuid", "/etc/subgid")}
    try:
        for f, text in saved.items():
            Path(f).write_text("".join(ln + "\n" for ln in text.splitlines()
                                       if not ln.startswith("root:") and not ln.startswith("0:")))
        doc = subprocess.run([LAZARET, "doctor"], env=env, capture_output=True, text=True, timeout=120)
        line = next((ln for ln in doc.stdout.splitlines() if "subordinate ID ranges" in ln), "")
        assert line.startswith("[FAIL") and "_apt" in line, doc.stdout
        assert doc.returncode != 0
        r = run(env, ws, APT_PROBE)
        assert "DROP-OK" not in r.stdout and "Permission denied" in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        for f, text in saved.items():
            Path(f).write_text(text)
