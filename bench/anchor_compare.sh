#!/usr/bin/env bash
# anchor_compare.sh — State Anchor backends compared on this machine: kernel
# overlayfs mounted in the Domain's user namespace (userxattr, new mount API)
# against fuse-overlayfs, both as the unprivileged test user inside user +
# mount (+ net) namespaces with the full ID map (0 -> user, 1..N -> subuid).
#
#   1. correctness matrix, per backend: PASS/FAIL per check ("dep" marks the
#      checks the design depends on), INFO for observations;
#   2. host-side checks on the upper/work dirs left behind (whiteouts seen
#      from the host, removal with and without the user namespace);
#   3. runsc (if installed) with an overlay merged dir as an OCI bind source;
#   4. speed, medians of N runs, every figure a ratio to a plain directory on
#      the same filesystem measured in the same run: file storm, tar
#      extraction, dpkg unpack/reinstall/purge, and the storm inside runsc.
#
# Usage (as root; drops to the test user itself):
#   bench/anchor_compare.sh [--runs N] [--files N] [--no-speed] [--no-runsc]
#                           [--only storm,tar,dpkg-install,dpkg-reinstall,dpkg-purge,runsc-storm]
# Env: LAZARET_TEST_USER (default lztest), ANCHOR_BENCH_DEB (a .deb for the
# tar/dpkg benchmarks; default golang-1.19-src from /var/cache/apt/archives),
# ANCHOR_TMPDIR (default /var/tmp; must support user.* xattrs).
# Exit: 0 ok; 1 a "dep" check failed for kernel overlayfs; 2 usage or a
# missing prerequisite; 3 a benchmark failed.
set -euo pipefail

runs=3 files=20000 speed=1 use_runsc=1 only=
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=$2; shift 2 ;;
        --files) files=$2; shift 2 ;;
        --no-speed) speed=0; shift ;;
        --no-runsc) use_runsc=0; shift ;;
        --only) only=,$2,; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "$0: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$runs$files" in *[!0-9]*) echo "$0: --runs/--files take numbers" >&2; exit 2 ;; esac

user=${LAZARET_TEST_USER:-lztest}
if [ "$(id -u)" -ne 0 ]; then echo "$0: run as root (it drops to $user itself)" >&2; exit 2; fi
if ! home=$(getent passwd "$user" | cut -d: -f6) || [ -z "$home" ]; then
    echo "$0: no user $user" >&2; exit 2
fi
uid=$(id -u "$user")
subrange() { # first range of USER in FILE: "start count"
    awk -F: -v u="$user" -v id="$2" '($1 == u || $1 == id) { print $2, $3; exit }' "$1"
}
read -r subu_start subu_count < <(subrange /etc/subuid "$uid") || true
read -r subg_start subg_count < <(subrange /etc/subgid "$uid") || true
if [ -z "${subu_count:-}" ] || [ -z "${subg_count:-}" ]; then
    echo "$0: $user has no /etc/subuid or /etc/subgid range" >&2; exit 2
fi
for t in unshare runuser newuidmap newgidmap python3 cc timeout fuse-overlayfs busybox; do
    command -v "$t" >/dev/null || { echo "$0: $t not found" >&2; exit 2; }
done
if [ "$use_runsc" = 1 ] && ! command -v runsc >/dev/null; then
    echo "INFO: runsc not found: runsc checks skipped"; use_runsc=0
fi

tmp=$(mktemp -d "${ANCHOR_TMPDIR:-/var/tmp}/anchor-compare.XXXXXX")
cleanup() {
    # Only what this script started, by recorded id: the process groups of
    # its `timeout` wrappers (still running only if we were interrupted) and
    # fuse-overlayfs daemons (normally gone after their umount).
    if [ -f "$tmp/groups" ]; then
        while read -r p; do
            if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = timeout ]; then kill -TERM -- "-$p" 2>/dev/null || true; fi
        done < "$tmp/groups"
        sleep 1
    fi
    if [ -f "$tmp/fuse.pids" ]; then
        while read -r p; do
            if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = fuse-overlayfs ]; then kill "$p" 2>/dev/null || true; fi
        done < "$tmp/fuse.pids"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 0755 "$tmp"
mkdir "$tmp/bin"
touch "$tmp/fuse.pids" "$tmp/results" "$tmp/groups"

# probe: the storm (N files of 4 KiB in nested dirs: create, lstat, delete) and a
# rename(2) probe; static, so it also runs inside the sandbox.
cat > "$tmp/probe.c" <<'PROBE_C'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static void die(const char *what, const char *p) {
    fprintf(stderr, "probe: %s %s: %s\n", what, p, strerror(errno));
    exit(1);
}
/* N files of 4 KiB in DIR/sNN/MM/fKK, 100 files per leaf dir, 10 leaves per top dir. */
static int storm(const char *dir, long n) {
    static char buf[4096];
    char p[4096];
    memset(buf, 'x', sizeof buf);
    long ndirs = (n + 99) / 100;
    double t0 = now_ms();
    for (long d = 0; d < ndirs; d++) {
        if (d % 10 == 0) {
            snprintf(p, sizeof p, "%s/s%ld", dir, d / 10);
            if (mkdir(p, 0755) < 0) die("mkdir", p);
        }
        snprintf(p, sizeof p, "%s/s%ld/%ld", dir, d / 10, d % 10);
        if (mkdir(p, 0755) < 0) die("mkdir", p);
        for (long f = 0; f < 100 && d * 100 + f < n; f++) {
            snprintf(p, sizeof p, "%s/s%ld/%ld/f%ld", dir, d / 10, d % 10, f);
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0) die("open", p);
            if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) die("write", p);
            close(fd);
        }
    }
    double t1 = now_ms();
    struct stat st;
    for (long d = 0; d < ndirs; d++)
        for (long f = 0; f < 100 && d * 100 + f < n; f++) {
            snprintf(p, sizeof p, "%s/s%ld/%ld/f%ld", dir, d / 10, d % 10, f);
            if (lstat(p, &st) < 0 || st.st_size != 4096) die("lstat", p);
        }
    double t2 = now_ms();
    for (long d = 0; d < ndirs; d++) {
        for (long f = 0; f < 100 && d * 100 + f < n; f++) {
            snprintf(p, sizeof p, "%s/s%ld/%ld/f%ld", dir, d / 10, d % 10, f);
            if (unlink(p) < 0) die("unlink", p);
        }
        snprintf(p, sizeof p, "%s/s%ld/%ld", dir, d / 10, d % 10);
        if (rmdir(p) < 0) die("rmdir", p);
        if (d % 10 == 9 || d == ndirs - 1) {
            snprintf(p, sizeof p, "%s/s%ld", dir, d / 10);
            if (rmdir(p) < 0) die("rmdir", p);
        }
    }
    double t3 = now_ms();
    printf("create_ms=%.1f stat_ms=%.1f delete_ms=%.1f total_ms=%.1f\n", t1 - t0, t2 - t1, t3 - t2, t3 - t0);
    return 0;
}
int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "storm") == 0)
        return storm(argv[2], atol(argv[3]));
    if (argc == 4 && strcmp(argv[1], "rename") == 0) {
        if (rename(argv[2], argv[3]) == 0) { puts("OK"); return 0; }
        printf("%s\n", errno == EXDEV ? "EXDEV" : strerror(errno));
        return 0;
    }
    fprintf(stderr, "usage: probe storm DIR N | probe rename SRC DST\n");
    return 2;
}
PROBE_C

# matrix.py: the correctness matrix for one backend (runs inside the namespaces).
cat > "$tmp/matrix.py" <<'MATRIX_PY'
"""State Anchor correctness matrix for one backend.

Run as root of a user namespace that maps 0 to the developer and 1..N to the
developer's subordinate range, inside a private mount namespace:
    python3 -I matrix.py BACKEND SCRATCH
BACKEND is "kernel" (overlayfs, userxattr, new mount API) or "fuse"
(fuse-overlayfs). Prints one line per check:
    PASS|FAIL BACKEND NAME[ dep]: detail      (dep: the design depends on it)
    INFO BACKEND NAME: observation
and leaves SCRATCH/main/{upper,work} for the host-side checks.
"""
import ctypes
import errno
import os
import shutil
import stat
import subprocess
import sys
import time

B, R = sys.argv[1], sys.argv[2]
T = 1_000_000_000_123456789  # a fixed mtime (ns) that copy-up must keep
PIDS = os.path.join(os.path.dirname(R), "fuse.pids")


def out(status, name, detail="", dep=False):
    print(f"{status} {B} {name}{' dep' if dep else ''}: {detail}", flush=True)


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) else type(e).__name__


# ---------------------------------------------------------------- mounting
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_move_mount, SYS_fsopen, SYS_fsconfig, SYS_fsmount = 429, 430, 431, 432
FSCONFIG_SET_FLAG, FSCONFIG_SET_STRING, FSCONFIG_SET_FD, FSCONFIG_CMD_CREATE = 0, 1, 5, 6
AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = -100, 4


def _sc(nr, *args):
    a = [ctypes.c_long(x) if isinstance(x, int) else x for x in args]
    r = libc.syscall(ctypes.c_long(nr), *a)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def _fs_log(fd):
    """The fs_context log ("e overlayfs: ...") explains a failed fsconfig."""
    msgs = []
    for _ in range(8):
        try:
            msgs.append(os.read(fd, 512).decode(errors="replace").strip())
        except OSError:
            break
    return "; ".join(msgs)


def kmount(target, lowers, upper, work, flags=("userxattr",), strings=(), by_fd=False):
    """Kernel overlayfs through fsopen/fsconfig/fsmount/move_mount: every
    layer is its own fsconfig call ("lowerdir+"), so ':' ',' '=' and '\\'
    in paths need no escaping."""
    fd = _sc(SYS_fsopen, b"overlay", 1)  # FSOPEN_CLOEXEC
    try:
        def sstr(k, v):
            try:
                _sc(SYS_fsconfig, fd, FSCONFIG_SET_STRING, k.encode(), v.encode(), 0)
            except OSError as e:
                raise OSError(e.errno, f"fsconfig({k}={v}): {e.strerror} [{_fs_log(fd)}]")

        def sdir(k, p):
            if not by_fd:
                return sstr(k, p)
            dfd = os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                _sc(SYS_fsconfig, fd, FSCONFIG_SET_FD, k.encode(), None, dfd)
            finally:
                os.close(dfd)

        sstr("source", "lazaret-anchor")
        for low in lowers:
            sdir("lowerdir+", low)
        sdir("upperdir", upper)
        sdir("workdir", work)
        for f in flags:
            try:
                _sc(SYS_fsconfig, fd, FSCONFIG_SET_FLAG, f.encode(), None, 0)
            except OSError as e:
                raise OSError(e.errno, f"fsconfig({f}): {e.strerror} [{_fs_log(fd)}]")
        for k, v in strings:
            sstr(k, v)
        try:
            _sc(SYS_fsconfig, fd, FSCONFIG_CMD_CREATE, None, None, 0)
        except OSError as e:
            raise OSError(e.errno, f"FSCONFIG_CMD_CREATE: {e.strerror} [{_fs_log(fd)}]")
        mfd = _sc(SYS_fsmount, fd, 1, 0)  # FSMOUNT_CLOEXEC
        try:
            _sc(SYS_move_mount, mfd, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH)
        finally:
            os.close(mfd)
    finally:
        os.close(fd)


fuse_procs = {}


def fmount(target, lowers, upper, work, extra=()):
    opts = ",".join([f"lowerdir={':'.join(lowers)}", f"upperdir={upper}", f"workdir={work}", *extra])
    with open(os.path.join(R, "fuse-overlayfs.log"), "ab") as log:
        p = subprocess.Popen(["fuse-overlayfs", "-f", "-o", opts, target], stdout=log, stderr=log)
    with open(PIDS, "a") as f:
        f.write(f"{p.pid}\n")
    deadline = time.monotonic() + 10
    while not os.path.ismount(target):
        if p.poll() is not None:
            raise RuntimeError(f"fuse-overlayfs exited with {p.returncode}")
        if time.monotonic() > deadline:
            p.kill()
            p.wait(5)
            raise RuntimeError("fuse-overlayfs did not mount within 10 s")
        time.sleep(0.02)
    fuse_procs[target] = p


def mount(target, lower, upper, work):
    if B == "kernel":
        kmount(target, [lower], upper, work)
    else:
        fmount(target, [lower], upper, work)


def umount(target):
    subprocess.run(["umount", target], check=True, timeout=30)
    p = fuse_procs.pop(target, None)
    if p:
        p.wait(timeout=10)


def cleanup_mounts():
    for t, p in list(fuse_procs.items()):
        subprocess.run(["umount", "-l", t], timeout=30)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
    for line in open("/proc/self/mountinfo"):
        mp = line.split()[4]
        if mp.startswith(R + "/"):
            subprocess.run(["umount", "-l", mp], timeout=30)


def mountopts(target):
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        if f[4] == target:
            return f[-1]
    return "?"


def layers(base):
    d = {k: os.path.join(base, k) for k in ("lower", "upper", "work", "merged")}
    for p in d.values():
        os.makedirs(p, exist_ok=True)
    return d["lower"], d["upper"], d["work"], d["merged"]


def write(p, s, mode="w"):
    with open(p, mode) as f:
        f.write(s)


def read(p):
    with open(p) as f:
        return f.read()


def lexists(p):
    return os.path.lexists(p)


def sig(p):
    s = os.lstat(p)
    return (stat.S_IMODE(s.st_mode), stat.S_IFMT(s.st_mode), s.st_uid, s.st_gid, s.st_mtime_ns)


def fmt(s):
    return f"{s[0]:04o} {s[2]}:{s[3]} mtime={s[4]}"


# ---------------------------------------------------------------- fixture
def make_lower(L):
    write(f"{L}/file.txt", "base")
    write(f"{L}/del.txt", "del")
    write(f"{L}/del2.txt", "del")
    write(f"{L}/recreate.txt", "old")
    write(f"{L}/rename.txt", "ren")
    write(f"{L}/chown.txt", "c")
    write(f"{L}/xattr.txt", "x")
    os.setxattr(f"{L}/xattr.txt", "user.test", b"v1")
    os.makedirs(f"{L}/modes")
    for n, m in (("suid", 0o4755), ("sgid", 0o2755), ("priv", 0o600), ("odd", 0o751), ("suidw", 0o4755)):
        write(f"{L}/modes/{n}", n)
        os.chmod(f"{L}/modes/{n}", m)
    os.makedirs(f"{L}/dirs")
    for n, m, g in (("sgid", 0o2775, 50), ("sticky", 0o1777, 0), ("priv", 0o700, 0)):
        os.makedirs(f"{L}/dirs/{n}")
        write(f"{L}/dirs/{n}/f", "f")
        os.chown(f"{L}/dirs/{n}", 0, g)
        os.chmod(f"{L}/dirs/{n}", m)
    os.makedirs(f"{L}/owned")
    write(f"{L}/owned/f", "o")
    os.chmod(f"{L}/owned/f", 0o640)
    os.chown(f"{L}/owned/f", 1000, 1000)
    os.chown(f"{L}/owned", 1000, 1000)
    os.makedirs(f"{L}/opq/sub")
    write(f"{L}/opq/old", "old")
    write(f"{L}/opq/sub/deep", "deep")
    for d in ("foo", "foo2", "cu"):
        os.makedirs(f"{L}/share/{d}/sub")
        write(f"{L}/share/{d}/a", "a")
        os.chmod(f"{L}/share/{d}/a", 0o751)
        os.chown(f"{L}/share/{d}/a", 1000, 1000)
        write(f"{L}/share/{d}/sub/b", "b")
        os.symlink("a", f"{L}/share/{d}/lnk")
    os.symlink("file.txt", f"{L}/lnk")
    write(f"{L}/hl1", "h")
    os.link(f"{L}/hl1", f"{L}/hl2")
    write(f"{L}/hlsrc", "s")
    write(f"{L}/inotest", "i")
    os.makedirs(f"{L}/dpkgpat")
    for n in ("one", "two"):
        write(f"{L}/dpkgpat/{n}", "lower")
    caps = shutil.which("setcap")
    write(f"{L}/caps.bin", "c")
    if caps:
        subprocess.run([caps, "cap_net_raw+ep", f"{L}/caps.bin"], check=True, timeout=10)
    # fixed mtimes last (creating entries changes the parents' mtimes)
    for dp, dn, fn in os.walk(L, topdown=False):
        for n in fn + dn:
            os.utime(os.path.join(dp, n), ns=(T, T), follow_symlinks=False)


# ---------------------------------------------------------------- the matrix
rows = []   # [status, name, detail, dep] in the order checks ran
later = []  # (row index, verify-after-remount function)


def check(name, dep=False):
    """Decorator: run the first phase now; a returned function is run again
    after unmount + mount and must also return (ok, detail)."""
    def deco(fn):
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - any failure is a FAIL line
            rows.append(["FAIL", name, f"{ename(e)}: {e}", dep])
            return fn
        ok, detail, verify = (r + (None,))[:3]
        rows.append(["PASS" if ok else "FAIL", name, detail, dep])
        if ok and verify is not None:
            later.append((len(rows) - 1, verify))
        return fn
    return deco


def main_matrix():
    L, U, W, M = layers(f"{R}/main")
    P = f"{R}/plain"
    os.makedirs(P)
    make_lower(L)
    try:
        mount(M, L, U, W)
    except Exception as e:  # noqa: BLE001
        out("FAIL", "mount", f"{ename(e)}: {e}", True)
        return
    out("PASS", "mount", f"options: {mountopts(M)}", True)
    try:
        checks(L, U, W, M, P)
    finally:
        for st_, name, detail, dep in rows:
            out(st_, name, detail, dep)


def checks(L, U, W, M, P):

    @check("create-modify-delete", dep=True)
    def _():
        write(f"{M}/new.txt", "new")
        write(f"{M}/file.txt", "+mod", "a")
        write(f"{M}/tmp.txt", "t")
        os.unlink(f"{M}/tmp.txt")
        ok = (read(f"{M}/file.txt") == "base+mod" and read(f"{L}/file.txt") == "base"
              and read(f"{U}/new.txt") == "new" and not lexists(f"{U}/tmp.txt") and not lexists(f"{M}/tmp.txt"))
        return ok, "new file in upper, modified lower file copied up, lower untouched, upper-only delete leaves nothing", \
            lambda: (read(f"{M}/file.txt") == "base+mod" and read(f"{M}/new.txt") == "new"
                     and not lexists(f"{M}/tmp.txt"), "same after remount")

    @check("copyup-file-mode-mtime", dep=True)
    def _():
        bad = []
        for n in ("suid", "sgid", "priv", "odd"):
            fd = os.open(f"{M}/modes/{n}", os.O_WRONLY)  # copy-up without changing data
            os.close(fd)
            want = sig(f"{L}/modes/{n}")
            for where in (M, U):
                got = sig(f"{where}/modes/{n}")
                if got != want:
                    bad.append(f"{n}@{'merged' if where == M else 'upper'} {fmt(got)} != {fmt(want)}")
        det = "4755/2755/0600/0751 and ns mtime kept on copy-up (open O_WRONLY)" if not bad else "; ".join(bad)

        def again():
            b2 = [n for n in ("suid", "sgid", "priv", "odd") if sig(f"{M}/modes/{n}") != sig(f"{L}/modes/{n}")]
            return not b2, "same after remount" if not b2 else f"differ after remount: {b2}"
        return not bad, det, again

    @check("copyup-dir-mode-owner", dep=True)
    def _():
        bad = []
        for n in ("sgid", "sticky", "priv"):
            write(f"{M}/dirs/{n}/new", "n")  # copies the directory up
            want = sig(f"{L}/dirs/{n}")
            for where in (M, U):
                got = sig(f"{where}/dirs/{n}")
                if got[:4] != want[:4]:
                    bad.append(f"{n}@{'merged' if where == M else 'upper'} {fmt(got)} != {fmt(want)}")
        return not bad, "dirs 2775 root:50, 1777, 0700 keep mode and owner when copied up" if not bad else "; ".join(bad), \
            lambda: (all(sig(f"{M}/dirs/{n}")[:4] == sig(f"{L}/dirs/{n}")[:4] for n in ("sgid", "sticky", "priv")),
                     "same after remount")

    @check("copyup-owner-mapped", dep=True)
    def _():
        write(f"{M}/owned/f", "+", "a")
        got = [sig(p) for p in (f"{M}/owned/f", f"{U}/owned/f", f"{M}/owned", f"{U}/owned")]
        ok = all(s[2:4] == (1000, 1000) for s in got) and got[0][0] == 0o640
        return ok, f"lower 1000:1000 kept after copy-up: merged {fmt(got[0])}, upper {fmt(got[1])}, dir {fmt(got[3])}", \
            lambda: (sig(f"{M}/owned/f")[2:4] == (1000, 1000), "same after remount")

    @check("chown-copyup", dep=True)
    def _():
        os.chown(f"{M}/chown.txt", 1000, 1000)
        a = sig(f"{U}/chown.txt")
        os.chown(f"{M}/chown.txt", 1000, 100)  # again, now on the upper copy
        b = sig(f"{M}/chown.txt")
        ok = a[2:4] == (1000, 1000) and a[4] == T and b[2:4] == (1000, 100)
        return ok, f"chown of a lower file copies up with the new owner and the old mtime ({fmt(a)}); chown after copy-up -> {b[2]}:{b[3]}", \
            lambda: (sig(f"{M}/chown.txt")[2:4] == (1000, 100), "same after remount")

    @check("xattr-user", dep=True)
    def _():
        os.setxattr(f"{M}/xattr.txt", "user.new", b"v2")
        names = os.listxattr(f"{M}/xattr.txt")
        private = [n for n in names if "overlay" in n]
        ok = (os.getxattr(f"{M}/xattr.txt", "user.test") == b"v1" and os.getxattr(f"{M}/xattr.txt", "user.new") == b"v2"
              and not private)
        up = os.listxattr(f"{U}/xattr.txt")
        return ok, f"user.test kept on copy-up, user.new set; merged lists {sorted(names)}, upper holds {sorted(up)}", \
            lambda: (os.getxattr(f"{M}/xattr.txt", "user.test") == b"v1", "same after remount")

    @check("xattr-security.capability")
    def _():
        if not shutil.which("getcap"):
            return False, "getcap not installed (libcap2-bin)"
        before = os.getxattr(f"{L}/caps.bin", "security.capability")
        fd = os.open(f"{M}/caps.bin", os.O_WRONLY)
        os.close(fd)
        r = subprocess.run(["getcap", f"{M}/caps.bin"], capture_output=True, text=True, timeout=10)
        try:
            up = os.getxattr(f"{U}/caps.bin", "security.capability")
        except OSError as e:
            up = ename(e).encode()
        ok = "cap_net_raw" in r.stdout and up == before
        return ok, f"setcap cap_net_raw+ep on a lower file survives copy-up: getcap -> {r.stdout.strip() or r.stderr.strip()}; upper xattr {'same' if up == before else up!r}"

    @check("write-clears-suid-like-plain")
    def _():
        write(f"{P}/suidw", "p")
        os.chmod(f"{P}/suidw", 0o4755)
        write(f"{P}/suidw", "+", "a")
        write(f"{M}/modes/suidw", "+", "a")
        p, m = sig(f"{P}/suidw")[0], sig(f"{M}/modes/suidw")[0]
        u = sig(f"{U}/modes/suidw")[0]
        return p == m == u, f"after root writes a 4755 file: plain dir {p:04o}, merged {m:04o}, upper {u:04o}"

    @check("whiteout-persist", dep=True)
    def _():
        os.unlink(f"{M}/del.txt")
        s = os.lstat(f"{U}/del.txt") if lexists(f"{U}/del.txt") else None
        if s and stat.S_ISCHR(s.st_mode) and s.st_rdev == 0:
            form = "char 0/0 in upper"
        elif s:
            form = f"{stat.filemode(s.st_mode)} rdev={s.st_rdev} in upper"
        else:
            form = "other: " + ",".join(n for n in os.listdir(U) if "del" in n)
        ok = not lexists(f"{M}/del.txt") and lexists(f"{L}/del.txt")
        return ok, f"deleted lower file is gone, lower untouched; whiteout = {form}", \
            lambda: (not lexists(f"{M}/del.txt") and "del.txt" not in os.listdir(M), "still deleted after remount")

    @check("recreate-after-delete", dep=True)
    def _():
        os.unlink(f"{M}/recreate.txt")
        write(f"{M}/recreate.txt", "new")
        return read(f"{M}/recreate.txt") == "new", "delete then create the same name", \
            lambda: (read(f"{M}/recreate.txt") == "new", "same after remount")

    @check("opaque-dir", dep=True)
    def _():
        shutil.rmtree(f"{M}/opq")
        os.mkdir(f"{M}/opq")
        write(f"{M}/opq/new", "n")
        xa = [(n, os.getxattr(f"{U}/opq", n)) for n in os.listxattr(f"{U}/opq")]
        ok = sorted(os.listdir(f"{M}/opq")) == ["new"]
        return ok, f"rm -rf lower dir + mkdir shows only new entries; upper dir xattrs {xa}", \
            lambda: (sorted(os.listdir(f"{M}/opq")) == ["new"], "same after remount")

    @check("rename-lower-file", dep=True)
    def _():
        os.rename(f"{M}/rename.txt", f"{M}/renamed.txt")
        return read(f"{M}/renamed.txt") == "ren" and not lexists(f"{M}/rename.txt"), "rename(2) of a lower file", \
            lambda: (read(f"{M}/renamed.txt") == "ren" and not lexists(f"{M}/rename.txt"), "same after remount")

    @check("rename-over-lower-then-unlink", dep=True)
    def _():
        # dpkg's pattern: write NAME.dpkg-new, rename it over NAME (a lower
        # file), later remove NAME (package removal/purge).
        for n, times in (("one", 1), ("two", 2)):
            for _ in range(times):
                write(f"{M}/dpkgpat/{n}.new", "new")
                os.rename(f"{M}/dpkgpat/{n}.new", f"{M}/dpkgpat/{n}")
            os.unlink(f"{M}/dpkgpat/{n}")
        left = sorted(os.listdir(f"{M}/dpkgpat"))
        return not left, "create X.new, rename over lower X (once; twice), unlink X: X gone" if not left else \
            f"unlink returned 0 but the lower file is visible again: {left}", \
            lambda: (not os.listdir(f"{M}/dpkgpat"), "same after remount")

    @check("rename-lower-dir-syscall")
    def _():
        res = {}
        for src, what in (("foo2", "lower dir"), ("cu", "lower dir copied up by a create inside")):
            if src == "cu":
                write(f"{M}/share/cu/added", "x")
            try:
                os.rename(f"{M}/share/{src}", f"{M}/share/{src}-r")
                res[what] = "OK"
            except OSError as e:
                res[what] = ename(e)
        ok = all(v in ("OK", "EXDEV") for v in res.values())
        return ok, "rename(2): " + ", ".join(f"{k} -> {v}" for k, v in res.items()) + " (OK or EXDEV accepted)"

    @check("mv-lower-dir", dep=True)
    def _():
        r = subprocess.run(["mv", f"{M}/share/foo", f"{M}/share/bar"], capture_output=True, text=True, timeout=60)

        def tree_ok():
            a = sig(f"{M}/share/bar/a")
            return (not lexists(f"{M}/share/foo") and a[0] == 0o751 and a[2:4] == (1000, 1000) and a[4] == T
                    and read(f"{M}/share/bar/sub/b") == "b" and os.readlink(f"{M}/share/bar/lnk") == "a")
        ok = r.returncode == 0 and tree_ok()
        return ok, f"GNU mv of a lower dir: rc={r.returncode} {r.stderr.strip()}; tree at new name keeps mode/owner/mtime/symlink", \
            lambda: (tree_ok(), "same after remount")

    @check("rename-upper-dir", dep=True)
    def _():
        os.makedirs(f"{M}/newdir/x")
        os.rename(f"{M}/newdir", f"{M}/newdir2")
        return lexists(f"{M}/newdir2/x"), "rename(2) of a directory created in the upper", \
            lambda: (lexists(f"{M}/newdir2/x") and not lexists(f"{M}/newdir"), "same after remount")

    @check("symlink", dep=True)
    def _():
        os.symlink("file.txt", f"{M}/sl")
        ok = os.readlink(f"{M}/sl") == "file.txt" and os.readlink(f"{M}/lnk") == "file.txt"
        return ok, "new symlink and lower symlink readable", \
            lambda: (os.readlink(f"{M}/sl") == "file.txt", "same after remount")

    @check("hardlink-new", dep=True)
    def _():
        os.link(f"{M}/hlsrc", f"{M}/hlnew")
        a, b = os.lstat(f"{M}/hlsrc"), os.lstat(f"{M}/hlnew")
        write(f"{M}/hlnew", "+", "a")

        def same():
            a2, b2 = os.lstat(f"{M}/hlsrc"), os.lstat(f"{M}/hlnew")
            return (a2.st_nlink == b2.st_nlink == 2 and read(f"{M}/hlsrc") == "s+",
                    f"after remount nlink={a2.st_nlink}, st_ino {'equal' if a2.st_ino == b2.st_ino else 'differ'}")
        return a.st_nlink == b.st_nlink == 2 and read(f"{M}/hlsrc") == "s+", \
            f"link(2) of a lower file: nlink=2, writes through one name read through the other; st_ino of the two names " \
            f"{'equal' if a.st_ino == b.st_ino else 'differ (old name keeps the lower inode number until remount)'}", same

    @check("inode-number-across-copyup")
    def _():
        i0 = os.lstat(f"{M}/inotest").st_ino
        write(f"{M}/inotest", "+", "a")
        i1 = os.lstat(f"{M}/inotest").st_ino
        return True, f"st_ino before copy-up {'=' if i0 == i1 else '!='} after copy-up", \
            lambda: (True, f"after remount st_ino {'= lower' if os.lstat(f'{M}/inotest').st_ino == i0 else '!= lower (now the upper inode number)'}")

    @check("hardlink-lower-pair-copyup")
    def _():
        n0 = os.lstat(f"{M}/hl2").st_nlink
        write(f"{M}/hl1", "+", "a")
        v = read(f"{M}/hl2")
        return v == "h+", f"lower pair hl1/hl2 (nlink {n0} seen in merged); after writing hl1, hl2 reads {v!r}"

    @check("fifo", dep=True)
    def _():
        os.mkfifo(f"{M}/fifo")
        return stat.S_ISFIFO(os.lstat(f"{M}/fifo").st_mode), "mkfifo", \
            lambda: (stat.S_ISFIFO(os.lstat(f"{M}/fifo").st_mode), "same after remount")

    @check("mknod-refused", dep=True)
    def _():
        res = []
        for nm, dev in (("null", os.makedev(1, 3)), ("wh", os.makedev(0, 0))):
            try:
                os.mknod(f"{M}/{nm}", 0o600 | stat.S_IFCHR, dev)
                res.append(f"c {os.major(dev)} {os.minor(dev)} -> created")
            except OSError as e:
                res.append(f"c {os.major(dev)} {os.minor(dev)} -> {ename(e)}")
        return res[0].endswith("EPERM"), "mknod as userns root: " + ", ".join(res)

    umount(M)
    try:
        mount(M, L, U, W)
    except Exception as e:  # noqa: BLE001
        rows.append(["FAIL", "remount", f"{ename(e)}: {e}", True])
        return
    for i, verify in later:
        try:
            ok, d2 = verify()
        except Exception as e:  # noqa: BLE001
            ok, d2 = False, f"after remount {ename(e)}: {e}"
        rows[i][0] = "PASS" if ok else "FAIL"
        rows[i][2] += f"; {d2}"
    os.unlink(f"{M}/del2.txt")  # a whiteout made in the last session, as a Domain's last session would
    umount(M)
    shutil.rmtree(P)


def lower_change():
    """An image update: the same upper over a different lower."""
    base = f"{R}/lowerchange"
    L, U, W, M = layers(base)
    L2 = f"{base}/lower2"
    write(f"{L}/keep", "v1")
    write(f"{L}/mod", "v1")
    write(f"{L}/gone", "v1")
    os.makedirs(f"{L}/opq")
    write(f"{L}/opq/old", "v1")
    os.makedirs(f"{L}/d")
    write(f"{L}/d/keep", "v1")
    mount(M, L, U, W)
    write(f"{M}/mod", "upper")
    os.unlink(f"{M}/gone")
    shutil.rmtree(f"{M}/opq")
    os.mkdir(f"{M}/opq")
    write(f"{M}/opq/mine", "u")
    write(f"{M}/d/added", "u")
    umount(M)
    subprocess.run(["cp", "-a", L, L2], check=True, timeout=60)
    for p in ("keep", "mod", "gone", "new", "opq/new", "d/new"):
        write(f"{L2}/{p}", "v2")
    os.unlink(f"{L2}/d/keep")  # replaced by a new inode, as an image rebuild does
    write(f"{L2}/d/keep", "v2")
    try:
        mount(M, L2, U, W)
    except Exception as e:  # noqa: BLE001
        out("FAIL", "lower-change", f"mount over the new lower: {ename(e)}: {e}", True)
        return

    def rd(p):
        try:
            return read(f"{M}/{p}")
        except OSError as e:
            return ename(e)
    want = {"keep": "v2", "mod": "upper", "gone": "ENOENT", "new": "v2", "opq/new": "ENOENT", "opq/old": "ENOENT",
            "opq/mine": "u", "d/keep": "v2", "d/new": "v2", "d/added": "u"}
    got = {p: rd(p) for p in want}
    bad = {p: (got[p], w) for p, w in want.items() if got[p] != w}
    out("PASS" if not bad else "FAIL", "lower-change",
        "same upper over a changed lower mounts; new and changed base files show; upper edits, whiteouts and opaque dirs "
        "stay authoritative" if not bad else f"got/wanted {bad}", True)
    umount(M)
    try:
        mount(M, L, U, W)
        ok = rd("mod") == "upper" and rd("keep") == "v1"
        umount(M)
        out("PASS" if ok else "FAIL", "lower-change-back", "the same upper over the old lower again", False)
    except Exception as e:  # noqa: BLE001
        out("FAIL", "lower-change-back", f"{ename(e)}: {e}", False)


def kernel_extras():
    base = f"{R}/api"
    os.makedirs(base)
    # paths that legacy mount(8)/mount(2) option strings cannot carry unescaped
    L1, L2, U, W, M = (f"{base}/{n}" for n in ("low:er,1 x", "lo=w\\2", "up:per,dir", "wo,rk:", "merged"))
    for d in (L1, L2, U, W, M):
        os.makedirs(d)
    write(f"{L1}/a", "a")
    write(f"{L2}/b", "b")
    write(f"{L2}/a", "hidden")
    try:
        kmount(M, [L1, L2], U, W)
        ok = sorted(os.listdir(M)) == ["a", "b"] and read(f"{M}/a") == "a"
        os.unlink(f"{M}/b")
        ok = ok and sorted(os.listdir(U)) == ["b"]
        umount(M)
        out("PASS" if ok else "FAIL", "newapi-lowerdir+", "fsopen/fsconfig(\"lowerdir+\") x2 with ':' ',' '=' '\\' ' ' in "
            "layer paths, in the user namespace; first lowerdir+ is the top lower", True)
    except Exception as e:  # noqa: BLE001
        out("FAIL", "newapi-lowerdir+", f"{ename(e)}: {e}", True)
    try:
        shutil.rmtree(U)
        shutil.rmtree(W)
        os.makedirs(U)
        os.makedirs(W)
        kmount(M, [L1], U, W, by_fd=True)
        ok = sorted(os.listdir(M)) == ["a"]
        umount(M)
        out("PASS" if ok else "FAIL", "newapi-set-fd", "FSCONFIG_SET_FD with O_PATH dir fds for lowerdir+/upperdir/workdir")
    except Exception as e:  # noqa: BLE001
        out("FAIL", "newapi-set-fd", f"{ename(e)}: {e}")
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={L1},upperdir={U},workdir={W},userxattr", M],
                       capture_output=True, text=True, timeout=30)
    if r.returncode == 0:
        umount(M)
    out("INFO", "legacy-mount-special-chars", f"mount(8) -o lowerdir=<path with ':' ','> rc={r.returncode}")

    # which options the kernel takes in a user namespace
    L, U, W, M = layers(f"{R}/opts")
    write(f"{L}/f", "f")
    for opts in ((), ("index=off",), ("index=on",), ("redirect_dir=on",), ("redirect_dir=follow",),
                 ("redirect_dir=nofollow",), ("redirect_dir=off",), ("metacopy=on",), ("metacopy=off",),
                 ("xino=auto",), ("uuid=off",), ("uuid=null",), ("volatile",)):
        shutil.rmtree(U)
        shutil.rmtree(W)
        os.makedirs(U)
        os.makedirs(W)
        strings = [tuple(o.split("=", 1)) for o in opts if "=" in o]
        flags = ["userxattr"] + [o for o in opts if "=" not in o]
        try:
            kmount(M, [L], U, W, flags=flags, strings=strings)
            eff = mountopts(M).split(f"{W},", 1)[-1]
            umount(M)
            out("INFO", f"opt[{','.join(opts) or 'default'}]", f"accepted; effective: {eff}")
        except OSError as e:
            out("INFO", f"opt[{','.join(opts) or 'default'}]", f"refused: {e.strerror}")

    # without userxattr the overlay mounts but cannot write its trusted.* xattrs
    L, U, W, M = layers(f"{R}/nouserxattr")
    os.makedirs(f"{L}/d")
    write(f"{L}/d/f", "f")
    write(f"{L}/g", "g")
    try:
        kmount(M, [L], U, W, flags=())
        res = []
        for what, fn in (("unlink lower file", lambda: os.unlink(f"{M}/g")),
                         ("rm -rf lower dir", lambda: shutil.rmtree(f"{M}/d"))):
            try:
                fn()
                res.append(f"{what}: OK")
            except OSError as e:
                res.append(f"{what}: {ename(e)}")
        eff = mountopts(M).split(f"{W},", 1)[-1]
        umount(M)
        out("INFO", "without-userxattr", f"mounts ({eff}); " + "; ".join(res))
    except OSError as e:
        out("INFO", "without-userxattr", f"refused: {e.strerror}")


def fuse_extras():
    L, U, W, M = layers(f"{R}/squash")
    write(f"{L}/f", "f")
    os.chown(f"{L}/f", 1000, 1000)
    try:
        fmount(M, [L], U, W, extra=("squash_to_root",))
        s = os.lstat(f"{M}/f")
        umount(M)
        out("INFO", "squash_to_root", f"a lower file owned 1000:1000 shows as {s.st_uid}:{s.st_gid} (not wanted: the "
            "full ID map already gives real owners)")
    except Exception as e:  # noqa: BLE001
        out("INFO", "squash_to_root", f"{ename(e)}: {e}")


def main():
    os.makedirs(R)
    try:
        main_matrix()
        lower_change()
        if B == "kernel":
            kernel_extras()
        else:
            fuse_extras()
    finally:
        cleanup_mounts()


if __name__ == "__main__":
    main()
MATRIX_PY

# runsc_check.sh: an overlay merged dir as the OCI bind source of /usr.
cat > "$tmp/runsc_check.sh" <<'RUNSC_SH'
# shellcheck shell=bash
# runsc_check.sh BACKEND DIR PROBE PIDFILE — inside the namespaces: an overlay
# merged dir as the OCI bind source of /usr in a runsc sandbox.
set -euo pipefail
b=$1 d=$2 probe=$3 pids=$4
id=lzac-$b-$$
mkdir -p "$d"/rootfs/{bin,usr,proc,tmp,dev,sys,run} "$d"/lower/lib "$d"/lower/share/foo/sub \
    "$d"/lower/share/foo2 "$d"/{upper,work,merged,state,ovl}
cp /bin/busybox "$probe" "$d/rootfs/bin/"
for a in sh ls touch mkdir rm mv cat echo; do ln -s busybox "$d/rootfs/bin/$a"; done
echo f1 > "$d/lower/lib/f1"; echo a > "$d/lower/share/foo/a"; echo s > "$d/lower/share/foo/sub/s"
echo x > "$d/lower/share/foo2/x"
fpid=
finish() {
    timeout 20 runsc --root "$d/state" kill --all "$id" KILL >/dev/null 2>&1 || true
    timeout 20 runsc --root "$d/state" delete --force "$id" >/dev/null 2>&1 || true
    if mountpoint -q "$d/merged"; then timeout 20 umount "$d/merged" || timeout 20 umount -l "$d/merged" || true; fi
    if [ -n "$fpid" ]; then timeout 10 tail --pid="$fpid" -f /dev/null || kill "$fpid" 2>/dev/null || true; fi
}
trap finish EXIT
if [ "$b" = kernel ]; then
    mount -t overlay overlay -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work,userxattr" "$d/merged"
else
    fuse-overlayfs -f -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged" 2>>"$d/fuse.log" &
    fpid=$!; echo "$fpid" >> "$pids"
    for _ in $(seq 100); do mountpoint -q "$d/merged" && break; sleep 0.1; done
    mountpoint -q "$d/merged"
fi
script='touch /usr/x && mkdir -p /usr/d/e && rm /usr/lib/f1 && echo "rename(2) of a lower dir: $(/bin/probe rename /usr/share/foo2 /usr/share/foo2r)" && mv /usr/share/foo /usr/renamed && echo MV_OK'
cat > "$d/config.json" <<JSON
{"ociVersion":"1.0.2",
 "process":{"terminal":false,"user":{"uid":0,"gid":0},"args":["/bin/sh","-c",$(printf '%s' "$script" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')],
  "env":["PATH=/bin"],"cwd":"/","noNewPrivileges":true,
  "capabilities":{"bounding":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FOWNER"],"effective":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FOWNER"],"permitted":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FOWNER"]}},
 "root":{"path":"$d/rootfs","readonly":false},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc","options":["nosuid","noexec","nodev"]},
   {"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["nosuid","nodev","mode=1777"]},
   {"destination":"/usr","type":"bind","source":"$d/merged","options":["rbind","rw"]}],
 "linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network","path":"/proc/$$/ns/net"}]}}
JSON
set +e
outp=$(cd "$d" && timeout 120 runsc --root "$d/state" --network=host --ignore-cgroups \
    --overlay2="root:dir=$d/ovl" run --bundle "$d" "$id" 2>&1)
rc=$?
set -e
finish; fpid=
ft() { stat -c '%F %t:%T' "$1" 2>/dev/null || echo absent; }
bad=()
[ "$rc" = 0 ] || bad+=("runsc rc=$rc")
grep -q MV_OK <<<"$outp" || bad+=("mv failed")
[ -f "$d/upper/x" ] || bad+=("upper/x missing")
[ -d "$d/upper/d/e" ] || bad+=("upper/d/e missing")
[ "$(ft "$d/upper/lib/f1")" = "character special file 0:0" ] || bad+=("lib/f1 whiteout: $(ft "$d/upper/lib/f1")")
[ "$(cat "$d/upper/renamed/a" 2>/dev/null)" = a ] && [ -f "$d/upper/renamed/sub/s" ] || bad+=("renamed/ not in upper")
[ "$(ft "$d/upper/share/foo")" = "character special file 0:0" ] || bad+=("share/foo whiteout: $(ft "$d/upper/share/foo")")
ren=$(grep -o 'rename(2) of a lower dir: [A-Za-z ]*' <<<"$outp" || echo 'rename(2) probe: no output')
dep=; [ "$b" = kernel ] && dep=" dep"
if [ ${#bad[@]} -eq 0 ]; then
    echo "PASS $b runsc-bind-source$dep: runsc --network=host --overlay2=root:dir with /usr = merged dir (rbind,rw): touch, mkdir -p, rm of a lower file (whiteout char 0:0 in upper), busybox mv of a lower dir (copied into upper, old name whited out); inside gVisor $ren"
else
    echo "FAIL $b runsc-bind-source$dep: ${bad[*]}; output: $(tr '\n' ' ' <<<"$outp" | cut -c1-400)"
fi
RUNSC_SH

# bench_one.sh: one timed run of one benchmark on one backend.
cat > "$tmp/bench_one.sh" <<'BENCH_SH'
# shellcheck shell=bash
# bench_one.sh BENCH BACKEND DIR PROBE PIDFILE FILES DATA_TAR DEB PKG SEEDS
# One timed run inside the namespaces; prints "RESULT key=ms ...".
# BACKEND plain: a plain directory on the same filesystem as the uppers.
set -euo pipefail
bench=$1 b=$2 d=$3 probe=$4 pids=$5 files=$6 data=$7 deb=$8 pkg=$9 seeds=${10}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
ms() { echo $(( $(date +%s%N) / 1000000 )); }
fpid='' rid=''
finish() {
    if [ -n "$rid" ]; then
        timeout 20 runsc --root "$d/state" kill --all "$rid" KILL >/dev/null 2>&1 || true
        timeout 20 runsc --root "$d/state" delete --force "$rid" >/dev/null 2>&1 || true
        rid=
    fi
    if mountpoint -q "$d/merged" 2>/dev/null; then timeout 60 umount "$d/merged" || timeout 20 umount -l "$d/merged" || true; fi
    if [ -n "$fpid" ]; then timeout 10 tail --pid="$fpid" -f /dev/null || kill "$fpid" 2>/dev/null || true; fpid=; fi
}
trap 'finish; rm -rf "$d"' EXIT

if [ "$bench" = seed ]; then
    # dpkg roots shared read-only by all runs: "empty" (no package) and
    # "full" (the package unpacked); lowers are never written through.
    for s in empty full; do
        mkdir -p "$seeds/$s/var/lib/dpkg/info" "$seeds/$s/var/lib/dpkg/updates" \
            "$seeds/$s/var/lib/dpkg/triggers" "$seeds/$s/usr" "$seeds/$s/etc" "$seeds/$s/tmp"
        : > "$seeds/$s/var/lib/dpkg/status"
    done
    timeout 600 dpkg --root="$seeds/full" --log=/dev/null --unpack "$deb" >/dev/null
    trap - EXIT
    exit 0
fi

mkdir -p "$d"
case $bench in
    dpkg-install) lower=$seeds/empty ;;
    dpkg-reinstall|dpkg-purge) lower=$seeds/full ;;
    *) lower=$d/lower; mkdir -p "$lower/share" ;;
esac
case $b in
    plain)
        target=$d/plain
        case $bench in dpkg-*) cp -a "$lower" "$target" ;; *) mkdir -p "$target" ;; esac ;;
    kernel)
        target=$d/merged; mkdir -p "$d/upper" "$d/work" "$target"
        mount -t overlay overlay -o "lowerdir=$lower,upperdir=$d/upper,workdir=$d/work,userxattr" "$target" ;;
    fuse)
        target=$d/merged; mkdir -p "$d/upper" "$d/work" "$target"
        fuse-overlayfs -f -o "lowerdir=$lower,upperdir=$d/upper,workdir=$d/work" "$target" 2>>"$d/fuse.log" &
        fpid=$!; echo "$fpid" >> "$pids"
        for _ in $(seq 100); do mountpoint -q "$target" && break; sleep 0.1; done
        mountpoint -q "$target" ;;
    *) echo "bench_one: backend $b?" >&2; exit 2 ;;
esac

case $bench in
    storm)
        mkdir "$target/x"; sync
        echo "RESULT $("$probe" storm "$target/x" "$files")" ;;
    tar)
        mkdir "$target/x"; sync
        t0=$(ms); tar -xf "$data" -C "$target/x"; t1=$(ms)
        echo "RESULT total_ms=$((t1 - t0))" ;;
    dpkg-install|dpkg-reinstall)
        sync
        t0=$(ms); timeout 600 dpkg --root="$target" --log=/dev/null --unpack "$deb" >/dev/null; t1=$(ms)
        echo "RESULT total_ms=$((t1 - t0))" ;;
    dpkg-purge)
        sync
        t0=$(ms); timeout 600 dpkg --root="$target" --log=/dev/null --purge "$pkg" >/dev/null; t1=$(ms)
        echo "RESULT total_ms=$((t1 - t0))" ;;
    runsc-storm)
        mkdir -p "$d"/rootfs/{bin,usr,proc,tmp,dev,sys} "$d/state" "$d/ovl"
        cp /bin/busybox "$probe" "$d/rootfs/bin/"; ln -s busybox "$d/rootfs/bin/sh"; ln -s busybox "$d/rootfs/bin/mkdir"
        cat > "$d/config.json" <<JSON
{"ociVersion":"1.0.2",
 "process":{"terminal":false,"user":{"uid":0,"gid":0},"args":["/bin/sh","-c","mkdir /usr/x && exec /bin/probe storm /usr/x $files"],"env":["PATH=/bin"],"cwd":"/","noNewPrivileges":true},
 "root":{"path":"$d/rootfs","readonly":false},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},
   {"destination":"/usr","type":"bind","source":"$target","options":["rbind","rw"]}],
 "linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network","path":"/proc/$$/ns/net"}]}}
JSON
        rid=lzab-$$; sync
        out=$(cd "$d" && timeout 900 runsc --root "$d/state" --network=host --ignore-cgroups \
            --overlay2="root:dir=$d/ovl" run --bundle "$d" "$rid")
        rid=
        echo "RESULT $out" ;;
    *) echo "bench_one: bench $bench?" >&2; exit 2 ;;
esac
case $bench in
    tar|dpkg-*)
        # the end state, to compare backends: names, types, modes, owners,
        # sizes of non-directories, symlink targets (not times)
        top=$target; [ "$bench" = tar ] && top=$target/x
        echo "DIGEST $( (cd "$top" && find . -mindepth 1 -type d -printf '%P d %m %U %G\n' \
            && find . -mindepth 1 ! -type d -printf '%P %y %m %U %G %s %l\n') | sort | sha256sum | cut -c1-16)" ;;
esac
BENCH_SH

# summary.py: medians and ratios.
cat > "$tmp/summary.py" <<'SUMMARY_PY'
"""summary.py RESULTS — medians with ratios against the plain directory, then
the spread (min..max) of every measure. RESULTS lines: BENCH BACKEND RUN key=ms ..."""
import statistics
import sys
from collections import defaultdict

BACKENDS = ("plain", "kernel", "fuse")
v = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4:
        continue
    bench, backend = f[0], f[1]
    for kv in f[3:]:
        k, _, x = kv.partition("=")
        key = f"{bench}.{k.removesuffix('_ms')}"
        if key not in order:
            order.append(key)
        v[(key, backend)].append(float(x))


def med(key, b):
    xs = v.get((key, b))
    return statistics.median(xs) if xs else None


def r(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def n(x):
    return f"{x:.0f}" if x is not None else "-"


def span(key, b):
    xs = v.get((key, b))
    return f"{min(xs):.0f}..{max(xs):.0f}" if xs else "-"


print(f"{'median ms':22} {'plain':>8} {'kernel':>8} {'fuse':>8} | {'kernel/plain':>12} {'fuse/plain':>10} {'fuse/kernel':>11} | runs")
for key in order:
    p, k, f = (med(key, b) for b in BACKENDS)
    runs = min(len(v.get((key, b), [])) for b in BACKENDS)
    print(f"{key:22} {n(p):>8} {n(k):>8} {n(f):>8} | {r(k, p):>12} {r(f, p):>10} {r(f, k):>11} | {runs}")
print(f"\n{'spread ms (min..max)':22} {'plain':>14} {'kernel':>14} {'fuse':>14}")
for key in order:
    print(f"{key:22} {span(key, 'plain'):>14} {span(key, 'kernel'):>14} {span(key, 'fuse'):>14}")
SUMMARY_PY

cc -O2 -Wall -static -o "$tmp/bin/probe" "$tmp/probe.c" 2>/dev/null || cc -O2 -Wall -o "$tmp/bin/probe" "$tmp/probe.c"
chown -R "$user:" "$tmp"
chmod -R a+rX "$tmp"

# Run a command as the test user in new user + mount + net namespaces with
# the full ID map, as the Runtime Supervisor does (0 -> user, 1.. -> subuid).
# `timeout` leads its own process group; its pid is recorded so that an
# interrupted run can end exactly those groups (see cleanup).
bounded() {
    local secs=$1 p; shift
    timeout -k 10 "$secs" "$@" &
    p=$!
    echo "$p" >> "$tmp/groups"
    wait "$p"
}
in_ns() {
    local secs=$1; shift
    bounded "$secs" runuser -u "$user" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" LC_ALL=C \
        unshare --user --map-root-user --map-users="$subu_start,1,$subu_count" \
        --map-groups="$subg_start,1,$subg_count" --mount --net -- "$@"
}
as_user() { bounded 120 runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" LC_ALL=C "$@"; }

echo "== anchor_compare: $(uname -r), $(nproc) cores, $(fuse-overlayfs --version 2>&1 | head -1), user $user (uid $uid, subuid $subu_start:$subu_count)"
echo "== correctness (PASS/FAIL per check; 'dep' = the design depends on it; INFO = observation)"
status=0
for b in kernel fuse; do
    if ! in_ns 600 python3 -I "$tmp/matrix.py" "$b" "$tmp/m-$b" > "$tmp/matrix-$b.out" 2> "$tmp/matrix-$b.err"; then
        echo "FAIL $b matrix dep: matrix.py failed: $(tail -3 "$tmp/matrix-$b.err" | tr '\n' ' ')" >> "$tmp/matrix-$b.out"
    fi
    cat "$tmp/matrix-$b.out"

    # Host side, outside every namespace, on what the Domain left behind.
    m=$tmp/m-$b/main
    if [ -d "$m/upper" ]; then
        w=$(stat -c '%F %t:%T %U' "$m/upper/del.txt" 2>/dev/null || echo absent)
        if [ "$w" = "character special file 0:0 $user" ]; then
            echo "PASS $b host-whiteout dep: seen from the host the whiteout is a char 0:0 device owned by $user"
        else
            echo "FAIL $b host-whiteout dep: upper/del.txt is '$w'"
        fi
        # copies (root keeps owners), so each removal attempt starts from the same tree
        for h in h1 h2 h3; do cp -a "$m" "$tmp/$h-$b"; chown "$user:" "$tmp/$h-$b"; done
        wk=$(cd "$m" && find work -mindepth 1 -printf '%p %M %u, ' 2>/dev/null)
        if as_user rm -rf "$tmp/h1-$b/upper" 2> "$tmp/rm.err"; then r="removed"; else r="fails: $(head -1 "$tmp/rm.err")"; fi
        echo "INFO $b host-rm-upper: rm -rf upper as $user outside the user namespace $r (upper has a dir owned by mapped uid 1000 = host $((subu_start + 999)))"
        if as_user rm -rf "$tmp/h1-$b/work" 2> "$tmp/rm.err"; then r="removed"; else r="fails: $(head -1 "$tmp/rm.err")"; fi
        echo "INFO $b host-rm-work: work holds [${wk%, }]; rm -rf work as $user outside the user namespace $r"
        if as_user sh -c 'chmod -R u+rwx "$1" && rm -rf "$1"' sh "$tmp/h2-$b/work"; then
            echo "PASS $b host-rm-work-chmod dep: chmod -R u+rwx work && rm -rf work as $user outside the namespaces"
        else
            echo "FAIL $b host-rm-work-chmod dep: could not remove the work dir as $user"
        fi
        if in_ns 120 rm -rf "$tmp/h3-$b/upper" "$tmp/h3-$b/work" && [ ! -e "$tmp/h3-$b/upper" ] && [ ! -e "$tmp/h3-$b/work" ]; then
            echo "PASS $b userns-rm dep: rm -rf upper work inside a user namespace with the same ID map"
        else
            echo "FAIL $b userns-rm dep: rm -rf inside the user namespace failed"
        fi
        rm -rf "$tmp/h1-$b" "$tmp/h2-$b" "$tmp/h3-$b"
    fi
    if [ "$use_runsc" = 1 ]; then
        in_ns 300 bash "$tmp/runsc_check.sh" "$b" "$tmp/rs-$b" "$tmp/bin/probe" "$tmp/fuse.pids" 2>&1 | grep -E '^(PASS|FAIL) ' \
            || echo "FAIL $b runsc-bind-source$([ "$b" = kernel ] && echo ' dep'): runsc_check.sh failed"
    fi
done | tee "$tmp/correctness.out"
if grep -q '^FAIL kernel [^:]* dep:' "$tmp/correctness.out"; then status=1; fi
printf '== correctness summary: kernel %s PASS / %s FAIL (%s dep FAIL); fuse %s PASS / %s FAIL (%s dep FAIL)\n' \
    "$(grep -c '^PASS kernel' "$tmp/correctness.out")" "$(grep -c '^FAIL kernel' "$tmp/correctness.out")" \
    "$(grep -c '^FAIL kernel [^:]* dep:' "$tmp/correctness.out")" \
    "$(grep -c '^PASS fuse' "$tmp/correctness.out")" "$(grep -c '^FAIL fuse' "$tmp/correctness.out")" \
    "$(grep -c '^FAIL fuse [^:]* dep:' "$tmp/correctness.out")"
[ "$status" = 0 ] || echo "== a check the design depends on FAILED for kernel overlayfs"

if [ "$speed" = 1 ]; then
    want() { [ -z "$only" ] || case $only in *,"$1",*) true ;; *) false ;; esac; }
    deb=${ANCHOR_BENCH_DEB:-$(ls /var/cache/apt/archives/golang-1.19-src_*.deb 2>/dev/null | head -1 || true)}
    benches='' pkg=-
    : > "$tmp/data.tar"; : > "$tmp/pkg.deb"
    if want storm; then benches=storm; fi
    debbenches=
    for x in tar dpkg-install dpkg-reinstall dpkg-purge; do if want "$x"; then debbenches="$debbenches $x"; fi; done
    if [ -n "$debbenches" ]; then
        if [ -n "$deb" ] && [ -f "$deb" ] && command -v dpkg >/dev/null; then
            dpkg-deb --fsys-tarfile "$deb" > "$tmp/data.tar"
            pkg=$(dpkg-deb -f "$deb" Package)
            cp "$deb" "$tmp/pkg.deb"
            chmod a+r "$tmp/data.tar" "$tmp/pkg.deb"
            benches="$benches$debbenches"
            mkdir "$tmp/seeds"; chown "$user:" "$tmp/seeds"
            in_ns 900 bash "$tmp/bench_one.sh" seed none "$tmp/seedtmp" "$tmp/bin/probe" "$tmp/fuse.pids" 0 - "$tmp/pkg.deb" "$pkg" "$tmp/seeds"
            echo "== speed: tar -xf and dpkg --unpack/--purge use $(basename "$deb") ($(tar -tf "$tmp/data.tar" | wc -l) entries, $(( $(stat -c %s "$tmp/data.tar") / 1048576 )) MiB)"
        else
            echo "== speed: no .deb for the tar/dpkg benchmarks (set ANCHOR_BENCH_DEB): skipped"
        fi
    fi
    if [ "$use_runsc" = 1 ] && want runsc-storm; then benches="$benches runsc-storm"; fi
    echo "== speed: $benches; storm = $files files of 4 KiB; medians of $runs runs; backends interleaved, order rotated per run; 'sync' before each timed step"
    load() { echo "loadavg $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure $(head -1 /proc/pressure/cpu 2>/dev/null || echo n/a)"; }
    echo "   host at start: $(load)"
    bench_failed=0
    for r in $(seq "$runs"); do
        case $((r % 3)) in 1) order="plain kernel fuse" ;; 2) order="kernel fuse plain" ;; 0) order="fuse plain kernel" ;; esac
        for bench in $benches; do
            for b in $order; do
                if out=$(in_ns 1800 bash "$tmp/bench_one.sh" "$bench" "$b" "$tmp/run" "$tmp/bin/probe" "$tmp/fuse.pids" \
                        "$files" "$tmp/data.tar" "$tmp/pkg.deb" "$pkg" "$tmp/seeds" 2> "$tmp/bench.err") \
                        && line=$(grep '^RESULT ' <<<"$out"); then
                    echo "$bench $b $r ${line#RESULT }" | tee -a "$tmp/results"
                    if dg=$(grep '^DIGEST ' <<<"$out"); then echo "$bench $b ${dg#DIGEST }" >> "$tmp/digests"; fi
                else
                    echo "ERROR $bench $b run $r: $(tail -3 "$tmp/bench.err" | tr '\n' ' ')"; bench_failed=1
                fi
            done
        done
    done
    echo "   host at end: $(load)"
    echo "== speed summary (ratios of medians; plain = a plain directory on the filesystem of the uppers)"
    python3 -I "$tmp/summary.py" "$tmp/results"
    if [ -s "$tmp/digests" ]; then
        echo "== end state after each tar/dpkg step (names, types, modes, owners, sizes, symlink targets)"
        for bench in $(cut -d' ' -f1 "$tmp/digests" | sort -u); do
            n=$(awk -v b="$bench" '$1 == b { print $3 }' "$tmp/digests" | sort -u | wc -l)
            if [ "$n" = 1 ]; then echo "   $bench: identical on plain, kernel and fuse in every run"
            else echo "   $bench: DIFFERS: $(awk -v b="$bench" '$1 == b { print $2 "=" $3 }' "$tmp/digests" | sort -u | tr '\n' ' ')"; fi
        done
    fi
    if [ "$status" = 0 ] && [ "$bench_failed" = 1 ]; then status=3; fi
fi
exit "$status"
