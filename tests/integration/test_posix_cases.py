"""POSIX filesystem semantics inside the sandbox, compared with a local ext4.

tests/posix/fscases (a static C program, built by meson) runs named cases
in a directory and prints `name PASS|FAIL expected=X got=Y`, X being what
a local ext4 gives. Here it runs inside the sandbox, as root and as a
non-root user (uid 1000, `setpriv`), on each kind of directory the sandbox
has:

  workspace  /workspace, served by lazaret-router (Git policy)
  ignored    a git-ignored directory of /workspace, served by the router from
             the Domain's Ignored Workspace State
  volume     a read-write profile volume, served by lazaret-router --plain
  anchor     /root, a State Anchor layer (a plain bind of an overlayfs)
  tmp        /tmp, gVisor's own tmpfs

Every FAIL must be listed in tests/posix/known-differences.txt with its
reason, and every entry there must still happen: a new difference fails
the test (a regression shows), and so does a fixed one (the list stays
true). The native run on the host is the control that the expectations are
ext4's.
"""
import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, Env, LAZARET, lz_run, make_git_repo

WHERES = {
    "workspace": "/workspace/posix-cases",
    "ignored": "/workspace/node_modules/posix-cases",
    "volume": "/vol/posix-cases",
    "anchor": "/root/posix-cases",
    "tmp": "/tmp/posix-cases",
}
CREDS = ("root", "user")
KNOWN = ROOT / "tests" / "posix" / "known-differences.txt"
LINE = re.compile(r"^(\S+) (PASS|FAIL) expected=(\S*) got=(\S*)$")
SANDBOX_TIMEOUT = 900


def fscases_binary():
    for p in (os.environ.get("LAZARET_FSCASES"), Path(LAZARET).parent / "fscases", ROOT / "build" / "fscases"):
        if p and os.access(p, os.X_OK):
            return Path(p)
    pytest.fail("fscases not found: build it (ninja -C build) or set LAZARET_FSCASES")


def parse(out):
    """{(where, cred): {case: (verdict, expected, got)}} from the tagged output."""
    res, key = {}, None
    for line in out.splitlines():
        if line.startswith("@@ "):
            _, where, cred = line.split()
            key = (where, cred)
            res[key] = {}
            continue
        m = LINE.match(line)
        if m and key:
            res[key][m.group(1)] = (m.group(2), m.group(3), m.group(4))
    return res


def load_known(path=KNOWN):
    """Entries (case glob, [where/cred globs], got glob, reason), in file order."""
    entries = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        assert len(parts) == 4 and parts[2].startswith("got="), f"{path.name}:{n}: want CASE WHERES got=VALUE REASON"
        entries.append((parts[0], parts[1].split(","), parts[2][4:], parts[3]))
    return entries


def _names(pats, combo):
    return any(fnmatch.fnmatchcase(combo, p) for p in pats)


def compare(results, entries, wheres):
    """(unlisted differences, listed ones that no longer occur) for `wheres`.

    An entry is stale when one of the where/cred combinations it names (of
    those in `wheres`) has no FAIL it matches."""
    used = set()
    unlisted = []
    for (where, cred), cases in sorted(results.items()):
        if where not in wheres:
            continue
        combo = f"{where}/{cred}"
        for case, (verdict, exp, got) in sorted(cases.items()):
            if verdict == "PASS":
                continue
            hit = [i for i, (c, w, g, _) in enumerate(entries)
                   if fnmatch.fnmatchcase(case, c) and _names(w, combo) and fnmatch.fnmatchcase(got, g)]
            if hit:
                used.add((hit[0], combo))
            else:
                unlisted.append(f"{case} {combo} got={got} (expected={exp})")
    stale = [f"{c} {wh}/{cr} got={g}" for i, (c, w, g, _) in enumerate(entries)
             for wh in wheres for cr in CREDS if _names(w, f"{wh}/{cr}") and (i, f"{wh}/{cr}") not in used]
    return unlisted, stale


def test_compare_catches_new_and_fixed_differences():
    """The comparison itself: an unlisted FAIL and a listed case that now
    passes are both reported (the positive control of the check below)."""
    results = {("tmp", "root"): {"a.x": ("FAIL", "0", "EPERM"), "b.y": ("PASS", "0", "0")},
               ("tmp", "user"): {"a.x": ("FAIL", "0", "EPERM")}}
    entries = [("a.*", ["tmp/root"], "EPERM", "r"), ("b.y", ["anchor/*", "tmp/user"], "*", "r")]
    unlisted, stale = compare(results, entries, ["tmp"])
    assert unlisted == ["a.x tmp/user got=EPERM (expected=0)"]
    assert stale == ["b.y tmp/user got=*"]
    # Entries are matched by the observed value too, not only the name.
    unlisted, _ = compare({("tmp", "root"): {"a.x": ("FAIL", "0", "EACCES")}}, entries, ["tmp"])
    assert unlisted == ["a.x tmp/root got=EACCES (expected=0)"]


def test_known_differences_file_is_well_formed():
    entries = load_known()
    assert entries
    for c, ws, g, reason in entries:
        for w in ws:
            where, _, cred = w.partition("/")
            assert where in WHERES or where == "*", w
            assert cred in CREDS or cred == "*", w
        assert re.match(r"^(gvisor|fuse|lazaret-bug|lazaret-policy|lazaret-limit):", reason), reason


def test_expectations_are_those_of_a_local_ext4(tmp_path):
    """Control: natively on the host (as this unprivileged user), every
    case without root-made fixtures passes, when the host's /tmp is ext4."""
    out = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout.strip()
    if out != "ext2/ext3":
        pytest.skip(f"the host's test directory is {out}, not ext4")
    r = subprocess.run([str(fscases_binary()), str(tmp_path)], capture_output=True, text=True, timeout=300)
    fails = [l for l in r.stdout.splitlines() if " FAIL " in l and not l.startswith("user.fixture ")]
    assert r.stdout.count(" PASS ") > 200, r.stdout[-2000:]
    assert not fails, "\n".join(fails)


@pytest.fixture(scope="module")
def sandbox_results(lazaret, debian, tmp_path_factory):
    base = tmp_path_factory.mktemp("posix")
    env = Env(base / "env", debian.storage, "builtin:debian-bookworm")
    vol = base / "vol"
    vol.mkdir()
    env.write_config(extra_profile='persistent_dirs = ["/root"]\n'
                     f'volumes = [ {{ host = "{vol}", container = "/vol", mode = "rw" }} ]\n')
    ws = make_git_repo(base / "ws")
    (ws / ".gitignore").write_text("node_modules/\n")
    shutil.copy2(fscases_binary(), ws / "fscases")
    steps = []
    for where, d in WHERES.items():
        steps += [f"mkdir -p {d}", f"/workspace/fscases --prepare {d} || echo prepare-failed {where}",
                  f"echo '@@ {where} root'", f"/workspace/fscases {d}",
                  f"echo '@@ {where} user'",
                  f"setpriv --reuid 1000 --regid 1000 --clear-groups /workspace/fscases {d}"]
    script = "; ".join(steps) + "; true"
    r = lz_run(lazaret, env, ws, ["sh", "-c", script], timeout=SANDBOX_TIMEOUT)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, (out[-3000:], r.stderr.decode(errors="replace")[-3000:])
    (base / "results.txt").write_text(out)
    print(f"fscases output kept in {base / 'results.txt'}")
    res = parse(out)
    assert set(res) == {(w, c) for w in WHERES for c in CREDS}, (sorted(res), out[-3000:])
    return res


@pytest.mark.slow
@pytest.mark.parametrize("where", list(WHERES))
def test_posix_cases_differ_only_as_listed(sandbox_results, where):
    for cred in CREDS:
        # At least a line per group (a group that cannot start says so in one).
        assert len(sandbox_results[(where, cred)]) >= 18, (where, cred, sandbox_results[(where, cred)])
    unlisted, stale = compare(sandbox_results, load_known(), [where])
    msg = []
    if unlisted:
        msg.append("differences from ext4 not in tests/posix/known-differences.txt:\n  " + "\n  ".join(unlisted))
    if stale:
        msg.append("listed in tests/posix/known-differences.txt but no longer differing (remove them):\n  "
                   + "\n  ".join(stale))
    assert not msg, "\n".join(msg)
