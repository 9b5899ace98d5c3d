"""Attacks through the files the HOST's git writes, on the real Debian image.

test_git.py covers the files Git reads (config, hooks, gitfiles...). This
file covers the other direction: files inside Git directories that the
host's git *writes or appends to* during everyday commands (COMMIT_EDITMSG,
MERGE_MSG, reflogs, FETCH_HEAD, the index...). If the agent can turn one of
them into a link to config, to a hook, or to a file outside the repository,
or can make the index name `.git/...` or `../...`, the host's own git writes
agent-chosen text there, and a later git command (or shell) runs it.

Each test:
  1. the host (the developer) prepares two identical repositories: the real
     workspace, and a control copy under a profile volume (`/ctl`), which is
     reachable from inside the same sandbox but carries no Git policy;
  2. inside the sandbox, as root, the same attack script runs in /workspace
     and in /ctl/repo;
  3. the host's real git, as the unprivileged developer, runs the everyday
     command that would trigger it, in both repositories;
  4. evidence is collected: a sentinel file (in a directory only the test
     knows, outside both repositories) and a snapshot of what must not change
     (.git/config, .git/hooks/**, a fake ~/.bashrc, an outside directory,
     `../escape`).
The control must show the harm (so the test can fail); the workspace must
show none.
"""
import hashlib
import os
import struct
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import Env, git_env, lz_run, make_git_repo, user_processes, wait_until

pytestmark = pytest.mark.slow

# What every attack script starts with: an identity for the agent's commits,
# and safe.directory so the agent's git works in /ctl as well.
PREAMBLE = """\
export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@x.invalid
export GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@x.invalid
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
"""

DEV_HOOK = "#!/bin/sh\n: the developer hook\n"


def run_git(repo, *args, extra_env=None, **kw):
    env = git_env(**(extra_env or {}))
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          timeout=60, **kw)


def commit_all(repo, msg):
    run_git(repo, "add", "-A", check=True)
    run_git(repo, "commit", "-qm", msg, check=True)


def dev_hook(repo, name, text=DEV_HOOK):
    hook = repo / ".git" / "hooks" / name
    hook.write_text(text)
    hook.chmod(0o755)


class Side:
    """One of the two repositories: where it is on the host and inside."""

    def __init__(self, name, repo: Path, inside: str, box: Path):
        self.name, self.repo, self.inside, self.box = name, repo, inside, box
        box.mkdir(parents=True, exist_ok=True)
        (box / "out").mkdir()
        (box / "bashrc").write_text("# the developer's ~/.bashrc\nalias ll='ls -l'\n")
        self.sentinel = box / "SENTINEL"
        self.log = []

    def sub(self, text):
        """Fills the placeholders of an attack or setup text for this side."""
        return (text.replace("@S@", str(self.sentinel)).replace("@BOX@", str(self.box))
                .replace("@OUT@", str(self.box / "out")))

    def git(self, *args, extra_env=None, cwd=None):
        r = run_git(cwd or self.repo, *args, extra_env=extra_env)
        self.log.append(f"$ git {' '.join(args)} -> {r.returncode}\n{r.stdout[-300:]}{r.stderr[-300:]}")
        return r

    def git_dirs(self):
        return [p for p in [self.repo / ".git", self.repo / "vendor" / "lib" / ".git"] if p.is_dir()]

    def snapshot(self):
        s = {}
        for gd in self.git_dirs():
            s[f"{gd}/config"] = (gd / "config").read_bytes()
            for p in sorted((gd / "hooks").rglob("*")):
                if p.is_symlink():
                    s[str(p)] = "-> " + os.readlink(p)
                elif p.is_dir():
                    s[str(p)] = "dir"
                else:
                    s[str(p)] = (p.stat().st_mode & 0o111, p.read_bytes())
        s["bashrc"] = (self.box / "bashrc").read_bytes()
        s["outside dir"] = sorted(str(p) for p in (self.box / "out").rglob("*"))
        s["../escape"] = (self.repo.parent / "escape").exists()
        return s

    def harm(self, before):
        after = self.snapshot()
        found = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
        if self.sentinel.exists():
            found.insert(0, "SENTINEL (a planted command ran)")
        return found


def make_sides(tmp_path, debian):
    """The workspace, the control repository under a volume, and the Env
    whose profile mounts that volume at /ctl."""
    ws = make_git_repo(tmp_path / "wsparent" / "repo")
    ctl_dir = (tmp_path / "ctl").resolve()
    ctl = make_git_repo(ctl_dir / "repo")
    env = Env(tmp_path / "env", debian.storage, debian.image)
    env.write_config(extra_profile=f'volumes = [{{ host = "{ctl_dir}", container = "/ctl", mode = "rw" }}]')
    return Side("workspace", ws, "/workspace", tmp_path / "box-ws"), Side("control", ctl, "/ctl/repo", tmp_path / "box-ctl"), env


def run_inside(lazaret, env, ws, sides, attack):
    parts = [PREAMBLE]
    for side in sides:
        body = side.sub(textwrap.dedent(attack))
        parts.append(f"echo '== {side.name}'\n( cd {side.inside} || exit 1\n{body}\n)\n")
    r = lz_run(lazaret, env, ws, ["bash", "-c", "\n".join(parts)])
    # The host's git runs once the Domain is gone: while it runs, files the
    # agent wrote may still be open for writing there (exec gives ETXTBSY).
    subprocess.run([lazaret, "stop", "-p", "test"], cwd=ws, env=env.environ(), capture_output=True, timeout=60)
    assert wait_until(lambda: not user_processes("runsc"), timeout=45), "the Domain did not stop"
    return r


def check(lazaret, tmp_path, debian, attack, setup=None, host=None, control=True):
    """Runs one attack against both sides and asserts the outcome.

    control=False is for attacks that this Git version is not fooled by
    even without a defence (the reason is given where it is used): then the
    control only records, and the workspace must still show nothing."""
    ws, ctl, env = make_sides(tmp_path, debian)
    sides = [ws, ctl]
    for side in sides:
        if setup:
            setup(side)
    before = {side.name: side.snapshot() for side in sides}
    r = run_inside(lazaret, env, ws.repo, sides, attack)
    inside_out = r.stdout.decode(errors="replace")[-3000:] + r.stderr.decode(errors="replace")[-3000:]
    assert "== control" in inside_out, f"the attack script did not run:\n{inside_out}"
    for side in sides:
        host(side)
    harm = {side.name: side.harm(before[side.name]) for side in sides}
    report = (f"inside:\n{inside_out}\nhost (workspace):\n" + "\n".join(ws.log) +
              "\nhost (control):\n" + "\n".join(ctl.log))
    if control:
        assert harm["control"], f"positive control: the attack did nothing even without a defence\n{report}"
    assert harm["workspace"] == [], f"the attack got through the workspace: {harm['workspace']}\n{report}"
    return ws, ctl


def shell_dq(text):
    """text for inside a shell double-quoted string ($ kept literal)."""
    return text.replace("$", "\\$")


def sourced_bashrc(side):
    """The developer opens a new shell: their ~/.bashrc runs."""
    subprocess.run(["sh", str(side.box / "bashrc")], cwd=side.box, capture_output=True, timeout=30)


# ---------------------------------------------------------------------------
# 1. Links inside Git directories that the host's git writes through.

CONFIG_TEXT = "$(printf '[core]\\n\\tfsmonitor = touch @S@')"


def test_commit_editmsg_symlink_to_config(lazaret, debian, tmp_path):
    """git commit always writes the message to COMMIT_EDITMSG (fopen "w",
    following a symlink); --amend --no-edit reuses the agent's message."""
    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qa", "--amend", "--no-edit")
        side.git("status")
    check(lazaret, tmp_path, debian, f"""
        git commit -q --allow-empty -m "{CONFIG_TEXT}"
        ln -sfn config .git/COMMIT_EDITMSG; echo "ln: $?"
    """, host=host)


def test_commit_editmsg_hard_link_to_config(lazaret, debian, tmp_path):
    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qa", "--amend", "--no-edit")
        side.git("status")
    check(lazaret, tmp_path, debian, f"""
        git commit -q --allow-empty -m "{CONFIG_TEXT}"
        rm -f .git/COMMIT_EDITMSG
        ln .git/config .git/COMMIT_EDITMSG; echo "ln: $?"
    """, host=host)


def test_commit_editmsg_symlink_outside(lazaret, debian, tmp_path):
    """A link to a file outside the repository that the developer can write
    (their ~/.bashrc): the next shell runs the agent's message."""
    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qa", "--amend", "--no-edit")
        sourced_bashrc(side)
    check(lazaret, tmp_path, debian, """
        git commit -q --allow-empty -m 'touch @S@'
        ln -sfn @BOX@/bashrc .git/COMMIT_EDITMSG; echo "ln: $?"
    """, host=host)


def test_merge_msg_symlink_to_hook(lazaret, debian, tmp_path):
    """MERGE_MSG -> the developer's executable post-merge hook. Git writes
    "Merge branch 'NAME'" there, then runs the hook (a script with no #! is
    run by /bin/sh); the agent chose NAME."""
    branch = "x';touch${IFS}@S@;#"

    def host(side):
        side.git("merge", "--no-edit", side.sub(branch))
    check(lazaret, tmp_path, debian, f"""
        B="{shell_dq(branch)}"
        git checkout -qb "$B" && echo a > agent.txt && git add agent.txt && git commit -qm 'agent work'
        git checkout -q main && echo m > main.txt && git add main.txt && git commit -qm 'main work'
        ln -sfn hooks/post-merge .git/MERGE_MSG; echo "ln: $?"
    """, setup=lambda s: dev_hook(s.repo, "post-merge"), host=host)


def test_squash_msg_symlink_to_hook(lazaret, debian, tmp_path):
    """SQUASH_MSG lists the squashed commits with their (agent-chosen) author."""
    def host(side):
        side.git("merge", "--squash", "agent")
    check(lazaret, tmp_path, debian, """
        git checkout -qb agent && echo a > agent.txt && git add agent.txt
        GIT_AUTHOR_NAME='Agent;touch${IFS}@S@;#' git commit -qm 'agent work'
        git checkout -q main
        ln -sfn hooks/post-merge .git/SQUASH_MSG; echo "ln: $?"
    """, setup=lambda s: dev_hook(s.repo, "post-merge"), host=host)


def test_tag_editmsg_symlink_to_config(lazaret, debian, tmp_path):
    """`git tag -a -f TAG` pre-fills TAG_EDITMSG with the old tag's message."""
    def host(side):
        side.git("tag", "-a", "-f", "v1", extra_env={"GIT_EDITOR": "true"})
        side.git("status")
    check(lazaret, tmp_path, debian, f"""
        git tag -a v1 -m "{CONFIG_TEXT}"
        ln -sfn config .git/TAG_EDITMSG; echo "ln: $?"
    """, host=host)


def test_reflog_head_symlink_to_hook(lazaret, debian, tmp_path):
    """logs/HEAD -> post-checkout: the host's `git checkout main` appends
    "checkout: moving from NAME to main" to it, then runs it."""
    def host(side):
        side.git("checkout", "main")
    check(lazaret, tmp_path, debian, """
        git checkout -qb 'x;touch${IFS}@S@;#'
        rm -f .git/logs/HEAD; ln -s ../hooks/post-checkout .git/logs/HEAD; echo "ln: $?"
    """, setup=lambda s: dev_hook(s.repo, "post-checkout"), host=host)


def test_reflog_branch_symlink_to_hook(lazaret, debian, tmp_path):
    """logs/refs/heads/main -> post-merge: merging the agent's branch appends
    "merge NAME: Fast-forward", then runs post-merge."""
    branch = "x;touch${IFS}@S@;#"

    def host(side):
        side.git("merge", side.sub(branch))
    check(lazaret, tmp_path, debian, f"""
        B="{shell_dq(branch)}"
        git checkout -qb "$B" && echo a > agent.txt && git add agent.txt && git commit -qm 'agent work'
        git checkout -q main
        rm -f .git/logs/refs/heads/main; ln -s ../../../hooks/post-merge .git/logs/refs/heads/main; echo "ln: $?"
    """, setup=lambda s: dev_hook(s.repo, "post-merge"), host=host)


def test_orig_head_symlink_to_hook(lazaret, debian, tmp_path):
    """Control not required: Git 2.39 writes ORIG_HEAD as a ref (lock file,
    then rename) and refuses a symlinked ORIG_HEAD as a broken ref, so the
    link only breaks reset/rebase (denial of service). Kept as a guard."""
    def setup(side):
        dev_hook(side.repo, "post-checkout")
        (side.repo / "README").write_text("two\n")
        commit_all(side.repo, "two")
        run_git(side.repo, "branch", "side", "HEAD~1", check=True)

    def host(side):
        side.git("reset", "-q", "--hard", "HEAD~1")
        side.git("rebase", "-q", "side")
        side.git("checkout", "-q", "-b", "after")
    check(lazaret, tmp_path, debian, """
        ln -sfn hooks/post-checkout .git/ORIG_HEAD; echo "ln: $?"
    """, setup=setup, host=host, control=False)


def test_fetch_head_symlink_to_hook(lazaret, debian, tmp_path):
    """FETCH_HEAD -> post-checkout: `git fetch` writes one line per fetched
    branch (names from the remote, e.g. a branch the agent's PR pushed)."""
    def setup(side):
        remote = make_git_repo(side.box / "remote")
        run_git(remote, "branch", side.sub("x';touch${IFS}@S@;#"), check=True)
        run_git(side.repo, "remote", "add", "origin", str(remote), check=True)
        dev_hook(side.repo, "post-checkout")

    def host(side):
        side.git("fetch", "-q")
        side.git("checkout", "-q", "-b", "after-fetch")
    check(lazaret, tmp_path, debian, """
        ln -sfn hooks/post-checkout .git/FETCH_HEAD; echo "ln: $?"
    """, setup=setup, host=host)


def test_gc_log_symlink_to_config(lazaret, debian, tmp_path):
    """Control not required: Git 2.39 writes gc.log through a lock file and
    rename, and removes it after a clean run; it never writes through."""
    def host(side):
        side.git("-c", "gc.auto=1", "gc", "--auto")
        side.git("gc", "-q")
        side.git("status")
    check(lazaret, tmp_path, debian, """
        ln -sfn config .git/gc.log; echo "ln: $?"
    """, host=host, control=False)


def test_logs_refs_symlink_to_hooks(lazaret, debian, tmp_path):
    """The directory logs/refs replaced by a link to hooks/: every reflog
    append then creates files in hooks/."""
    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qam", "dev")
        side.git("checkout", "-q", "-b", "dev2")
    check(lazaret, tmp_path, debian, """
        rm -rf .git/logs/refs; ln -s ../hooks .git/logs/refs; echo "ln: $?"
    """, host=host)


def test_logs_refs_symlink_outside(lazaret, debian, tmp_path):
    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qam", "dev")
        side.git("checkout", "-q", "-b", "dev2")
    check(lazaret, tmp_path, debian, """
        rm -rf .git/logs/refs; ln -s @OUT@ .git/logs/refs; echo "ln: $?"
    """, host=host)


# ---------------------------------------------------------------------------
# 2. A crafted index. Git 2.39 checks out index entries named
# `.git/hooks/...`, `.git/config` or `../x` without complaint.

def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def build_index(entries):
    """A version 2 index: header, entries (62 bytes + name, NUL-padded to a
    multiple of 8), and the SHA-1 of everything before it (Git checks it).
    entries: (path bytes, mode, blob sha hex)."""
    body = b""
    for path, mode, sha in sorted(entries):
        e = struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes.fromhex(sha)
        e += struct.pack(">H", min(len(path), 0xFFF)) + path
        e += b"\0" * (8 - len(e) % 8)
        body += e
    data = b"DIRC" + struct.pack(">II", 2, len(entries)) + body
    return data + hashlib.sha1(data).digest()


def split_index(shared: bytes):
    """A split index: the main index has no entries and a `link` extension
    naming the shared index (its trailing SHA-1) with empty delete and
    replace bitmaps (EWAH: bit size 0, one word 0, RLW position 0). Git reads
    the entries from .git/sharedindex.<that SHA-1>. Returns (main, hex)."""
    sha = shared[-20:]
    ewah = struct.pack(">IIQI", 0, 1, 0, 0)
    data = b"DIRC" + struct.pack(">II", 2, 0) + b"link" + struct.pack(">I", 20 + 2 * len(ewah)) + sha + 2 * ewah
    return data + hashlib.sha1(data).digest(), sha.hex()


def index_setup(sub="", split=False):
    """Host side: the blobs' contents and the crafted index, in the work tree
    (the agent could as well write them itself; this keeps the script short).
    sub: the repository the index is for, relative to the workspace."""
    def setup(side):
        repo = side.repo / sub if sub else side.repo
        if sub:
            make_git_repo(repo)
        hook = side.sub("#!/bin/sh\ntouch @S@\n").encode()
        config = side.sub("[core]\n\tfsmonitor = touch @S@\n").encode()
        up = "../" * (sub.count("/") + 1 if sub else 0)
        (side.repo / "evil-hook").write_bytes(hook)
        (side.repo / "evil-config").write_bytes(config)
        index = build_index([
            (b".git/hooks/post-checkout", 0o100755, blob_sha(hook)),
            (b".git/hooks/pre-commit", 0o100755, blob_sha(hook)),
            (b".git/config", 0o100644, blob_sha(config)),
            (f"{up}../escape".encode(), 0o100755, blob_sha(hook)),
            (b"README", 0o100644, blob_sha(b"hello\n")),
        ])
        if split:
            main, name = split_index(index)
            (side.repo / "evil-shared").write_bytes(index)
            (side.repo / "evil-shared.name").write_text(f"sharedindex.{name}")
            index = main
        (side.repo / "evil.idx").write_bytes(index)
    return setup


def index_host(sub=""):
    def host(side):
        repo = side.repo / sub if sub else side.repo
        for args in [("status",), ("checkout", "--", "."), ("checkout", "."), ("restore", "."),
                     ("checkout-index", "-a", "-f"), ("stash",), ("status",)]:
            side.git(*args, cwd=repo)
        (repo / "README").write_text("developer edit\n")
        side.git("commit", "-qam", "dev", cwd=repo)
    return host


INDEX_BLOBS = """
    git hash-object -w evil-hook evil-config >/dev/null
    printf 'hello\\n' | git hash-object -w --stdin >/dev/null
"""


def test_crafted_index_direct(lazaret, debian, tmp_path):
    check(lazaret, tmp_path, debian, INDEX_BLOBS + """
        cp evil.idx .git/index; echo "cp: $?"
        git ls-files -s
    """, setup=index_setup(), host=index_host())


def test_crafted_index_via_lock(lazaret, debian, tmp_path):
    """The way Git itself writes the index: index.lock, then rename."""
    check(lazaret, tmp_path, debian, INDEX_BLOBS + """
        cp evil.idx .git/index.lock && mv .git/index.lock .git/index; echo "mv: $?"
        git ls-files -s
    """, setup=index_setup(), host=index_host())


def test_crafted_split_index(lazaret, debian, tmp_path):
    """The entries live in .git/sharedindex.<SHA-1>, named by the index."""
    check(lazaret, tmp_path, debian, INDEX_BLOBS + """
        cp evil-shared ".git/$(cat evil-shared.name)"; echo "cp shared: $?"
        cp evil.idx .git/index; echo "cp: $?"
        git ls-files -s
    """, setup=index_setup(split=True), host=index_host())


def test_crafted_index_nested_repository(lazaret, debian, tmp_path):
    """A repository the developer keeps inside the workspace (vendor/lib)."""
    check(lazaret, tmp_path, debian, INDEX_BLOBS.replace("git ", "git -C vendor/lib ").replace(
        "evil-hook evil-config", "../../evil-hook ../../evil-config") + """
        cp evil.idx vendor/lib/.git/index; echo "cp: $?"
        git -C vendor/lib ls-files -s
    """, setup=index_setup("vendor/lib"), host=index_host("vendor/lib"))


# ---------------------------------------------------------------------------
# 3. Hooks whose code lives in the work tree.

def test_symlinked_hook_script(lazaret, debian, tmp_path):
    """.git/hooks/pre-commit -> ../../scripts/pre-commit (a tracked script,
    linked by the developer). Editing the script edits the hook."""
    def setup(side):
        (side.repo / "scripts").mkdir()
        script = side.repo / "scripts" / "pre-commit"
        script.write_text(side.sub("#!/bin/sh\ntouch @BOX@/original-ran\n"))
        script.chmod(0o755)
        commit_all(side.repo, "hook script")
        (side.repo / ".git" / "hooks" / "pre-commit").symlink_to("../../scripts/pre-commit")

    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qam", "dev")
    ws, _ = check(lazaret, tmp_path, debian, """
        echo 'touch @S@' >> scripts/pre-commit; echo "append: $?"
        printf '#!/bin/sh\\ntouch @S@\\n' > scripts/pre-commit; echo "write: $?"
        rm -f scripts/pre-commit; printf '#!/bin/sh\\ntouch @S@\\n' > scripts/pre-commit; chmod +x scripts/pre-commit
        mv scripts scripts.old; mkdir -p scripts; cp scripts.old/pre-commit scripts/ 2>/dev/null
        printf '#!/bin/sh\\ntouch @S@\\n' > scripts/pre-commit; chmod +x scripts/pre-commit
        true
    """, setup=setup, host=host)
    assert (ws.box / "original-ran").exists(), "the developer's own hook no longer runs"


HUSKY_H = """#!/usr/bin/env sh
# emulates husky v9's .husky/_/h: run .husky/<hook> if it exists
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n
[ ! -f "$s" ] && exit 0
sh -e "$s" "$@"
"""


def test_husky_v9_hook_script(lazaret, debian, tmp_path):
    """husky v9: core.hooksPath = .husky/_, whose stubs run .husky/<hook>
    (tracked, in the work tree)."""
    def setup(side):
        d = side.repo / ".husky"
        (d / "_").mkdir(parents=True)
        (d / "_" / ".gitignore").write_text("*\n")
        (d / "_" / "h").write_text(HUSKY_H)
        for hook in ["pre-commit", "post-checkout", "post-merge", "commit-msg"]:
            (d / "_" / hook).write_text('#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n')
            (d / "_" / hook).chmod(0o755)
        (d / "pre-commit").write_text(side.sub("touch @BOX@/original-ran\n"))
        commit_all(side.repo, "husky")
        run_git(side.repo, "config", "core.hooksPath", ".husky/_", check=True)

    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qam", "dev")
        side.git("checkout", "-q", "-b", "dev2")
    ws, _ = check(lazaret, tmp_path, debian, """
        echo 'touch @S@' >> .husky/pre-commit; echo "append: $?"
        echo 'touch @S@' > .husky/post-checkout; echo "new: $?"
        printf '#!/bin/sh\\ntouch @S@\\n' > .husky/_/h; echo "runner: $?"
        true
    """, setup=setup, host=host)
    assert (ws.box / "original-ran").exists(), "the developer's own hook no longer runs"


PRE_COMMIT_HOOK = """#!/bin/sh
# emulates the pre-commit framework's hook: run every `entry:` of
# .pre-commit-config.yaml (repo: local, language: system)
sed -n 's/^ *entry: *//p' .pre-commit-config.yaml | while read -r e; do sh -c "$e" || exit 1; done
"""

PRE_COMMIT_CONFIG = """repos:
  - repo: local
    hooks:
      - id: mark
        name: mark
        language: system
        entry: touch @BOX@/original-ran
"""


def test_pre_commit_framework_config(lazaret, debian, tmp_path):
    def setup(side):
        (side.repo / ".pre-commit-config.yaml").write_text(side.sub(PRE_COMMIT_CONFIG))
        commit_all(side.repo, "pre-commit config")
        dev_hook(side.repo, "pre-commit", PRE_COMMIT_HOOK)

    def host(side):
        (side.repo / "README").write_text("developer edit\n")
        side.git("commit", "-qam", "dev")
    ws, _ = check(lazaret, tmp_path, debian, """
        sed -i 's|entry: .*|entry: touch @S@|' .pre-commit-config.yaml; echo "sed: $?"
        printf 'repos:\\n- repo: local\\n  hooks:\\n  - id: x\\n    entry: touch @S@\\n' > .pre-commit-config.yaml; echo "write: $?"
        true
    """, setup=setup, host=host)
    assert (ws.box / "original-ran").exists(), "the developer's own hook no longer runs"
