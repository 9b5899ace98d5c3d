"""The escalation mailbox is bounded (docs/escalation.md, "The mailbox's bound").

A hostile agent writes into /run/lazaret/mailbox/req/ and holds the
descriptor (gVisor keeps the host file open; a file made in place is taken
only when it is closed), a second one, moves and links big files in. The
inode cap is checked from outside (mount options, statvfs). The host side: every byte of a file under the Domain's mailbox that
any of our processes holds open or that is still linked, whatever device
it lives on. Each attack has its positive control: the same attack with the
bound switched off (test hook LAZARET_TEST_MAILBOX_UNBOUNDED, test builds
only) holds all of it on the host.

Each test has its own workspace, runtime directory and Domain (fixtures of
conftest.py); the Storage Root is shared read-mostly as everywhere."""
import os
import re
import signal
import subprocess
from pathlib import Path

import pexpect

from conftest import domain_dir_for, wait_until

ESC = "/run/lazaret/escalate"
ECHO = os.path.realpath("/bin/echo")
REQ = "/run/lazaret/mailbox/req"
RES = "/run/lazaret/mailbox/res"
BOUND = 24 * 1024 * 1024  # LZ_MBOX_TMPFS_BYTES (mailbox.h)
INODES = 1024  # LZ_MBOX_TMPFS_INODES
MiB = 1024 * 1024


def rules(*rs):
    return "\x1e".join("\x1f".join(r) for r in rs)


def coord_log(env, workspace):
    return (domain_dir_for(env, workspace) / "coordinator.log").read_text()


def spawn_tty(lazaret, env, workspace, spec, **kw):
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=spec, LAZARET_DEBUG="1", **kw)
    c = pexpect.spawn(lazaret, ["run", "-p", "test"], cwd=str(workspace), env=e, timeout=120, encoding="utf-8",
                      dimensions=(24, 200))
    c.expect(r"[#$] ")
    return c


def sh(c, cmd, timeout=120):
    """Runs cmd in the session; its output up to the marker."""
    c.sendline(f"{cmd}; echo E''ND=$?")
    c.expect(r"END=(\d+)", timeout=timeout)
    return c.before, int(c.match.group(1))


def mailbox_dir(env):
    hits = list((Path(env.runtime) / "lazaret").glob("*/mailbox"))
    assert len(hits) == 1, hits
    return hits[0]


def held_bytes(mbox: Path):
    """Bytes on the host in files under mbox: those still linked (seen by
    walking it from the host) plus those our processes hold open, linked or
    not (/proc/PID/fd; the sandbox's processes run in a user namespace we
    own, so their descriptors are ours to read). Counted once per inode."""
    seen = {}
    prefix = str(mbox) + "/"
    for root, _, files in os.walk(mbox):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fds = list((p / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
                if not target.startswith(prefix):
                    continue
                st = os.stat(fd)
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def supervisor_pid(env, workspace):
    m = re.findall(r"Runtime Supervisor started \(pid (\d+)\)", coord_log(env, workspace))
    assert m
    return int(m[-1])


def mailbox_mounts(pid):
    """The mailbox's mounts in the Domain's mount namespace: {"req": options, ...}."""
    out = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        f = line.split()
        sep = f.index("-")
        if "/mailbox/" in f[4] and f[4].rsplit("/", 1)[1] in ("req", "res"):
            out[f[4].rsplit("/", 1)[1]] = (f[sep + 1], f[5], f[sep + 3])
    return out


def escalate_echo(c, word):
    out, rc = sh(c, f"{ESC} -- {ECHO} {word} 2>&1")
    return out, rc


def test_filled_and_held_mailbox_is_bounded(lazaret, env, workspace, tmp_path):
    """The issue's attack: a descriptor held on req/ while 256 MiB go in.
    The write stops at the bound with ENOSPC and the host holds at most the
    bound; renaming or linking big files in and a second held descriptor
    stay inside it too; the tmpfs's size and inode caps read from outside. While the agent holds req/ full, its own escalation
    fails with a clear message (gVisor keeps a file's host descriptor even
    after the sandbox closes it, so the space stays taken for this
    generation), another Domain's escalation works, and this Domain's works
    again in its next generation."""
    c = spawn_tty(lazaret, env, workspace, rules([ECHO, "ok"]))
    mbox = mailbox_dir(env)
    # Everyday flow first.
    out, rc = escalate_echo(c, "ok")
    assert rc == 0 and "ok" in out, out

    out, rc = sh(c, f"exec 7>{REQ}/held.bin; dd if=/dev/zero bs=1M count=256 >&7; echo DD=$?")
    assert "No space left on device" in out, out
    m = re.search(r"(\d+)\+\d+ records out", out)
    assert m and int(m.group(1)) * MiB <= BOUND, out
    assert "DD=1" in out, out
    held = held_bytes(mbox)
    assert 0 < held <= BOUND + MiB, held  # the sentinel sees the held bytes, bounded
    # Nothing of it is in the runtime directory: only the mount points.
    assert not [p for p in mbox.rglob("*") if p.is_file() and p.name != "hc.pub"], list(mbox.rglob("*"))

    # Variants: a big file moved or linked in from another file system of
    # the sandbox (a copy across devices, bounded the same), a second held
    # descriptor, and res/ (read-only).
    out, rc = sh(c, "dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null; "
                    f"mv /tmp/big {REQ}/big.bin 2>&1; echo MV=$?; ln /tmp/big {REQ}/lnk 2>&1; echo LN=$?; "
                    f"exec 8>{REQ}/held2.bin; dd if=/dev/zero bs=1M count=64 >&8 2>&1; echo DD2=$?")
    assert "MV=0" not in out and "LN=0" not in out and "DD2=0" not in out, out
    # The inode cap, read from outside (a posture check: an attack that
    # exhausts it needs more than a thousand files held open at once).
    rs = supervisor_pid(env, workspace)
    mounts = mailbox_mounts(rs)
    assert set(mounts) == {"req", "res"}, mounts
    for fstype, mopts, sopts in mounts.values():
        assert fstype == "tmpfs" and "nosuid" in mopts and "nodev" in mopts and "noexec" in mopts, mounts
        assert f"size={BOUND // 1024}k" in sopts and f"nr_inodes={INODES}" in sopts, mounts
    st = os.statvfs(f"/proc/{rs}/root{mbox}/req")
    assert st.f_files == INODES and st.f_blocks * st.f_frsize == BOUND and st.f_bavail * st.f_frsize < MiB, st
    out, rc = sh(c, f"(: > {RES}/x) 2>&1; echo RES=$?")
    assert "RES=0" not in out, out
    assert held_bytes(mbox) <= BOUND + MiB

    # While the agent holds the whole req/, its own requests fail cleanly.
    out, rc = escalate_echo(c, "ok")
    assert rc != 0 and "the escalation mailbox /run/lazaret/mailbox/req is full" in out, out

    # Another Domain (its own workspace) is not affected meanwhile.
    ws2 = workspace.parent / "ws2"
    subprocess.run(["git", "init", "-q", str(ws2)], check=True, timeout=30)
    e = env.environ(LAZARET_TEST_AUTO_APPROVE=rules([ECHO, "other"]))
    r = subprocess.run([lazaret, "run", "-p", "test", "--", ESC, "--", ECHO, "other"], cwd=ws2, env=e,
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"other\n", r.stderr

    # The coordinator is alive; the session ends, the Domain stops (linger
    # 0) and its mailbox goes with the Supervisor's mount namespace.
    out, rc = sh(c, "echo AL''IVE")
    assert "ALIVE" in out
    c.sendline("exit")
    c.expect(pexpect.EOF)
    assert wait_until(lambda: not list((Path(env.runtime) / "lazaret").glob("*/mailbox")), timeout=60)
    assert held_bytes(mbox) == 0

    # The next generation escalates again.
    c = spawn_tty(lazaret, env, workspace, rules([ECHO, "ok"]))
    out, rc = escalate_echo(c, "ok")
    assert rc == 0 and "ok" in out, out
    c.sendline("exit")
    c.expect(pexpect.EOF)


def test_unbounded_mailbox_holds_the_host(lazaret, env, workspace):
    """Positive control: with the bound off (the mailbox as it was, plain
    directories of the runtime directory), the same held descriptor keeps
    all of it on the host, and the sentinel sees it."""
    c = spawn_tty(lazaret, env, workspace, rules([ECHO, "ok"]), LAZARET_TEST_MAILBOX_UNBOUNDED="1")
    mbox = mailbox_dir(env)
    assert "the mailbox is not bounded (test hook" in coord_log(env, workspace)
    out, rc = sh(c, f"exec 7>{REQ}/held.bin; dd if=/dev/zero bs=1M count=64 >&7; echo DD=$?")
    assert "DD=0" in out, out
    assert held_bytes(mbox) >= 64 * MiB
    assert mailbox_mounts(supervisor_pid(env, workspace)) == {}
    sh(c, "exec 7>&-")
    out, rc = escalate_echo(c, "ok")
    assert rc == 0 and "ok" in out, out
    c.sendline("exit")
    c.expect(pexpect.EOF)
