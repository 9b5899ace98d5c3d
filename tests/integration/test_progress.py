"""Image progress as a log reads it: with standard error not a terminal
(a file here), `lazaret image prepare` and the first `lazaret run` of an
image write plain lines (no carriage return, no escape), one per phase and
a summary with bytes and rate, never the same line twice in a row.

Positive control: the same preparation on a terminal (pexpect's PTY)
redraws one line with \\r, so the sentinel can fire.
"""
import os
import re
import shutil
import subprocess

import pexpect
import pytest

from conftest import Env, RUN_TIMEOUT


def plain(text):
    return "\r" not in text and "\x1b" not in text


def no_repeats(lines):
    return all(a != b for a, b in zip(lines, lines[1:]))


@pytest.fixture
def fresh(tmp_path, busybox_image):
    """An environment with its own, empty Storage Root (so preparation runs)."""
    return Env(tmp_path / "env", tmp_path / "storage", f"oci:{busybox_image}")


def prepare_to_file(lazaret, e, ref, cwd, out):
    # `image` commands read the configuration through the default profile.
    e.write_config(extra=f'[profiles.default]\nimage = "{e.image}"\n')
    with open(out, "wb") as f:
        r = subprocess.run([lazaret, "image", "prepare", "--config", str(e.config), ref], cwd=cwd,
                           env=e.environ(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=f,
                           timeout=600)
    return r, out.read_text(errors="replace")


def test_prepare_to_a_file_is_plain_lines(lazaret, fresh, workspace, tmp_path):
    r, err = prepare_to_file(lazaret, fresh, fresh.image, workspace, tmp_path / "stderr")
    assert r.returncode == 0, err
    assert plain(err), repr(err)
    lines = err.splitlines()
    assert any(ln.startswith("import") for ln in lines), err
    assert any(ln.startswith("prepare") for ln in lines), err
    assert no_repeats(lines), err


def test_first_run_progress_to_a_file_is_plain_lines(lazaret, fresh, workspace, tmp_path):
    out = tmp_path / "stderr"
    with open(out, "wb") as f:
        r = subprocess.run([lazaret, "run", "-p", "test", "--", "true"], cwd=workspace, env=fresh.environ(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=f, timeout=RUN_TIMEOUT)
    err = out.read_text(errors="replace")
    assert r.returncode == 0, err
    assert plain(err), repr(err)
    assert re.search(r"^lazaret: prepare", err, re.M), err
    assert no_repeats(err.splitlines()), err


@pytest.mark.slow
def test_debian_prepare_to_a_file_shows_bytes_and_rate(lazaret, debian, workspace, tmp_path):
    """The real Debian image (bootstrapped once by the `debian` fixture),
    prepared again in an empty Storage Root: a large layer, so its lines
    carry sizes and a rate."""
    e = Env(tmp_path / "env", tmp_path / "storage", "builtin:debian-bookworm")
    shutil.copytree(debian.storage / "images", e.storage / "images", symlinks=True)
    r, err = prepare_to_file(lazaret, e, "builtin:debian-bookworm", workspace, tmp_path / "stderr")
    assert r.returncode == 0, err
    assert plain(err), repr(err)
    assert re.search(r"^prepare \(\d+\.\d MiB\)$", err, re.M), err
    assert re.search(r"^prepare: \d+\.\d MiB in \d+\.\d s, \d+\.\d [KMG]iB/s$", err, re.M), err
    assert no_repeats(err.splitlines()), err
    assert len(err.splitlines()) < 40, err


def test_control_a_terminal_gets_redraws(lazaret, fresh, workspace):
    """Positive control: on a terminal the display redraws with \\r, which
    the plain() sentinel above rejects."""
    fresh.write_config(extra=f'[profiles.default]\nimage = "{fresh.image}"\n')
    c = pexpect.spawn(lazaret, ["image", "prepare", "--config", str(fresh.config), fresh.image], cwd=str(workspace),
                      env=fresh.environ(), timeout=120)
    c.expect(pexpect.EOF)
    c.close()
    text = c.before.decode(errors="replace")
    assert c.exitstatus == 0, text
    assert not plain(text) and "\r\x1b[K" in text, repr(text)
