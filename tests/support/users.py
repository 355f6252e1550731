"""Running code as another user: a forked child of the test process that switches
users and then calls a function already imported, so it needs no access to the
tree or the virtualenv (which another user may not be able to read)."""
from __future__ import annotations

import os
import pwd
import signal
import sys
import tempfile
import time
import traceback
from typing import Callable, Sequence

CAP_DAC_OVERRIDE = 1


def why_not_root() -> str | None:
    """Why the tests that switch users cannot run here, or None."""
    if os.geteuid() != 0:
        return "switching users needs root"
    if "nobody" not in {p.pw_name for p in pwd.getpwall()}:
        return "no user 'nobody' here"
    return None


def run_as(fn: Callable[[], int], user: str = "nobody", groups: Sequence[int] = (),
           dac_override: bool = False, timeout: float = 30.0) -> tuple[int, str, str]:
    """fn() in a child running as user (primary group its own, supplementary groups
    `groups`; with dac_override, holding CAP_DAC_OVERRIDE, which passes file modes):
    its return code, stdout and stderr."""
    from stormpy import privileges

    pw = pwd.getpwnam(user)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:                                   # the child: never returns
            rc = 99
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                if dac_override:
                    privileges.drop_to(pw, (CAP_DAC_OVERRIDE,))
                    privileges.raise_effective()
                else:
                    os.setgroups(list(groups))
                    os.setgid(pw.pw_gid)
                    os.setuid(pw.pw_uid)
                rc = fn()
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        deadline = time.monotonic() + timeout
        while True:                                    # bounded in time
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise TimeoutError(f"run_as({user}) did not finish within {timeout} s")
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()
