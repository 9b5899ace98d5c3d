"""gVisor's dentry cache of /workspace (profiles.NAME.workspace_cache_entries,
lazaret.toml(5)).

runsc keeps at most 1000 unused dentries per mount; Lazaret gives /workspace
a cache sized from the hard limit of open files, so that a tree walked again
(`git status`, `rg`, a build) is found in it instead of being looked up
again through the router. Every kept dentry holds a host file descriptor in
the sandbox process, so the tests count those: the cache is what keeps them.

Every run here is under a hard limit of 16000 open files (lowering it needs
no privilege), so that the automatic size is the same on every machine:
(16000 - 4096) / 3 = 3968 entries.
"""
import resource
import subprocess
from pathlib import Path

import pytest

from conftest import lz_run, user_processes, wait_until

pytestmark = pytest.mark.slow

HARD = 16000
AUTO = (HARD - 4096) // 3
FILES = 3000


def limited():
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, HARD))


def tree(ws: Path, n=FILES):
    t = ws / "t"
    for d in range(30):
        (t / f"d{d}").mkdir(parents=True)
        for f in range(n // 30):
            (t / f"d{d}" / f"f{f}").write_text("x\n")


def sandbox_fds(env):
    """Host descriptors held by this Domain's sandbox process (runsc-sandbox,
    the user's own process, named by its --root under the Env's runtime
    directory)."""
    pids = [p for p in user_processes("runsc-sandbox") if str(env.runtime) in
            Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
    assert len(pids) == 1, pids
    return len(list(Path(f"/proc/{pids[0]}/fd").iterdir()))


def walk_then_count(lazaret, env, workspace, extra_profile):
    """Walks the tree twice in a session; the Domain lingers after it, and
    the sandbox's descriptors are counted then (nothing else runs)."""
    env.write_config(extra_profile=extra_profile, linger=120)
    tree(workspace)
    r = lz_run(lazaret, env, workspace, ["sh", "-c", "ls -lR t >/dev/null && ls -lR t | grep -c '^-'"],
               timeout=300, preexec_fn=limited)
    try:
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
        assert r.stdout.decode().split() == [str(FILES)], r.stdout
        return sandbox_fds(env)
    finally:
        subprocess.run([lazaret, "stop", "-p", "test"], cwd=workspace, env=env.environ(), capture_output=True,
                       timeout=120)


def test_walked_tree_stays_cached(lazaret, env, workspace):
    # Automatic (no key): all 3000 files and their directories stay cached.
    n = walk_then_count(lazaret, env, workspace, "")
    assert n >= FILES, n


def test_runsc_own_lru_keeps_1000(lazaret, env, workspace):
    # Positive control of the count: with runsc's own LRU (the key set to
    # 0) most of the walked files are dropped again.
    n = walk_then_count(lazaret, env, workspace, "workspace_cache_entries = 0\n")
    assert n < 2000, n


def test_cache_stays_within_the_descriptor_budget(lazaret, env, workspace):
    """A created or read file's dentry holds two descriptors: 8500 files
    created and read fill the automatic cache (3968) with such dentries,
    and the sandbox must stay under the hard limit (a cache sized to the
    limit itself, 11904, would pass it: `Too many open files`)."""
    env.write_config(linger=0)
    script = ("mkdir c && i=0; while [ $i -lt 8500 ]; do : > c/f$i; i=$((i+1)); done; "
              "cat c/* | wc -c; ls c | wc -l; rm -r c && echo OK")
    r = lz_run(lazaret, env, workspace, ["sh", "-c", script], timeout=600, preexec_fn=limited)
    out = r.stdout.decode()
    assert r.returncode == 0, (out, r.stderr.decode(errors="replace")[-2000:])
    assert out.split() == ["0", "8500", "OK"], out


def test_set_value_over_the_budget_is_refused(lazaret, env, workspace):
    env.write_config(extra_profile=f"workspace_cache_entries = {AUTO * 2}\n")
    r = lz_run(lazaret, env, workspace, ["true"], timeout=120, preexec_fn=limited)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0
    need = 2 * AUTO * 2 + 4096
    fit = (HARD - 4096) // 2
    assert f"workspace_cache_entries = {AUTO * 2} needs up to {need} open files" in err, err
    assert f"hard limit of open files here is {HARD}: set it to at most {fit}" in err, err
    assert wait_until(lambda: not user_processes("runsc"), timeout=45)
    # What the message says works.
    env.write_config(extra_profile=f"workspace_cache_entries = {fit}\n")
    r = lz_run(lazaret, env, workspace, ["true"], timeout=120, preexec_fn=limited)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
