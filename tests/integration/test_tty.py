"""Interactive sessions through a real PTY (pexpect)."""
import os
import signal
import subprocess
import time

import pexpect
import pytest

from conftest import user_processes, wait_until

PROMPT = r"[#$] "


def spawn(lazaret, env, workspace, args=(), rows=24, cols=80):
    c = pexpect.spawn(lazaret, ["run", "-p", "test", *args], cwd=str(workspace), env=env.environ(),
                      encoding="utf-8", timeout=60, dimensions=(rows, cols))
    return c


def start_guest_sleep(c, n):
    """Starts `sleep n` as a direct child of the interactive guest shell (so it
    has default signal dispositions: a `sh -c` wrapper would inherit the
    interactive shell's ignored SIGQUIT/SIGTSTP) and returns once the line
    runs. The sleep may still be forking: callers retry their key, bounded."""
    c.sendline(f"echo STAR''TED-{n}; sleep {n}")
    c.expect(f"STARTED-{n}")


def press_until(c, key, pattern, failure):
    """Presses Ctrl-key until pattern shows, at most 5 times: the sleep of
    start_guest_sleep may still be forking when the first key arrives."""
    for _ in range(5):
        c.sendcontrol(key)
        if c.expect([pattern, pexpect.TIMEOUT], timeout=3) == 0:
            return
    pytest.fail(failure)


def test_shell_is_a_terminal_and_follows_resize(lazaret, env, workspace):
    c = spawn(lazaret, env, workspace)
    c.expect(PROMPT)
    c.sendline("test -t 0 && echo IS-A-TTY; stty size; pwd")
    c.expect("IS-A-TTY")
    c.expect("24 80")
    c.expect("/workspace")
    c.setwinsize(50, 132)
    # The resize is delivered asynchronously: ask until the shell sees it.
    for _ in range(50):
        c.sendline("stty size")
        i = c.expect(["50 132", "24 80"])
        if i == 0:
            break
    else:
        pytest.fail("resize never reached the sandbox")
    c.sendline("exit 0")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0


def test_ctrl_c_ctrl_z_ctrl_backslash(lazaret, env, workspace):
    c = spawn(lazaret, env, workspace)
    c.expect(PROMPT)
    start_guest_sleep(c, 100)
    press_until(c, "c", PROMPT, "^C never reached the guest job")
    c.sendline("echo status=$?")
    c.expect("status=130")
    start_guest_sleep(c, 101)
    press_until(c, "z", "Stopped", "^Z never stopped the guest job")
    c.sendline("kill -9 %1; echo killed")
    c.expect("killed")
    start_guest_sleep(c, 102)
    press_until(c, "\\", "Quit", "^\\ never reached the guest job")
    c.expect(PROMPT)
    c.sendline("echo status=$?")
    c.expect("status=131")
    c.sendline("exit 7")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 7


def test_command_with_tty_exit_status(lazaret, env, workspace):
    c = spawn(lazaret, env, workspace, ["--", "sh", "-c", "test -t 1 && echo TTYOUT; exit 3"])
    c.expect("TTYOUT")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 3


def test_terminal_restored_after_coordinator_killed(lazaret, env, workspace):
    """kill -9 of the Host Coordinator: the client restores the terminal and says why."""
    sh = pexpect.spawn("/bin/bash", ["--norc", "--noprofile"], cwd=str(workspace), env=env.environ(PS1="HOST$ "),
                       encoding="utf-8", timeout=60)
    sh.expect("HOST\\$ ")
    sh.sendline("stty -g > /tmp/.lz-stty-before-$PPID; echo saved")
    sh.expect("saved")
    sh.expect("HOST\\$ ")
    sh.sendline(f"{lazaret} run -p test; echo client-exit=$?")
    sh.expect(PROMPT)
    coords = user_processes("lazaret-core __coordinator")
    assert len(coords) == 1
    os.kill(coords[0], signal.SIGKILL)
    sh.expect("ended unexpectedly")
    sh.expect("client-exit=125")
    sh.expect("HOST\\$ ")
    sh.sendline("stty -g | cmp - /tmp/.lz-stty-before-$PPID && echo RESTORED; rm -f /tmp/.lz-stty-before-$PPID")
    sh.expect("RESTORED")
    sh.sendline("exit")
    sh.expect(pexpect.EOF)
    # The orphaned Supervisor notices and stops the sandbox.
    assert wait_until(lambda: not user_processes("runsc"), timeout=45)
