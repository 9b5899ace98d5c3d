"""Shared by the benchmarks that stage builds and re-run themselves as an
unprivileged user when started as root (bench/gitops.py, bench/workspace.py)."""
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path


def run_staged_as_user(script, user, storage, builds, make_args, binaries, extra=None):
    """Copies each build's binaries (builds: {subdir: directory holding
    them}), the script and the extra files (extra: {path in the stage: file})
    into a stage under /var/tmp that `user` owns, runs
    `python3 script *make_args(stage)` as that user with a minimal
    environment, and removes the stage. Returns its exit status."""
    stage = Path(tempfile.mkdtemp(prefix="lazaret-bench.", dir="/var/tmp"))
    try:
        for sub, src in builds.items():
            d = stage / sub
            d.mkdir()
            for b in binaries:
                shutil.copy2(Path(src) / b, d / b)
        shutil.copy2(script, stage / Path(script).name)
        shutil.copy2(__file__, stage / "benchlib.py")
        for rel, src in (extra or {}).items():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, stage / rel)
        pw = pwd.getpwnam(user)
        subprocess.run(["chown", "-R", f"{user}:", str(stage)], check=True)
        os.chmod(stage, 0o755)
        args = make_args(stage)
        if storage:
            Path(storage).mkdir(parents=True, exist_ok=True)
            os.chown(storage, pw.pw_uid, pw.pw_gid)
            args += ["--storage", storage]
        r = subprocess.run(["runuser", "-u", user, "--", "env", "-i", "PATH=/usr/bin:/bin",
                            f"HOME={pw.pw_dir}", f"USER={user}", "LANG=C.UTF-8",
                            "/usr/bin/python3", str(stage / Path(script).name), *args])
        return r.returncode
    finally:
        shutil.rmtree(stage, ignore_errors=True)
