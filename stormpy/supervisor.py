"""Worker processes: one per NIC queue or socket, forked by the server, restarted
when one dies.

The server maps the memory it shares with the workers (the published table, each
worker's state and counters; see TableRef) before it forks, so a worker needs
nothing else from it. A worker opens its own backend, says "ok" on a pipe, and
runs the C loop until its stop flag is set in shared memory. When one dies, for
any reason, a new process takes its index at once (after a short, growing pause
if it keeps dying right after it starts) and continues its counters.

Every backend reopens cleanly in a new process: a socket worker reuses the socket
the server keeps open (datagrams that arrived meanwhile are still answered), and
a ring worker makes its queue's AF_XDP or AF_PACKET socket again.
"""
from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import time
from typing import Callable

from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")

PR_SET_PDEATHSIG = 1
QUICK_DEATH_SECONDS = 1.0     # dying sooner than this after starting counts as a crash loop
MAX_BACKOFF_SECONDS = 5.0


def _die_with_parent(parent: int) -> None:
    """A worker must not outlive the server: its rings and the XDP program would."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:      # the server died before prctl took effect
        os._exit(1)


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class WorkerPool:
    """`count` worker processes; make_worker(index) runs in the new process and
    returns the opened worker (a FrameWorker) or raises a StormpyError."""

    def __init__(self, ref, count: int, make_worker: Callable[[int], object],
                 cpus: list[int] | None = None, after_open: Callable[[], None] | None = None,
                 before_open: Callable[[], None] | None = None):
        """before_open and after_open run in a worker around opening its backend
        (raising, then dropping, privileges)."""
        self.ref = ref
        self.after_open = after_open
        self.before_open = before_open
        self.count = count
        self.make_worker = make_worker
        self.cpus = cpus or []
        self.pids = [0] * count
        self.restarts = [0] * count
        self.ready = [False] * count        # opened its backend and said so
        self._pidfd = [-1] * count
        self._status = [-1] * count        # read end of each worker's status pipe
        self._started = [0.0] * count
        self._backoff = [0.0] * count
        self._said = [""] * count
        self._loop = None
        self._stopping = False

    # -- the worker process ----------------------------------------------------
    def _child(self, index: int, status_fd: int, parent: int) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)           # the server's event loop is not ours
            # A terminal's signals, and a SIGTERM to the whole group (systemd), are the
            # server's: it stops the workers through their stop flags.
            for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _die_with_parent(parent)
            if self.cpus:
                os.sched_setaffinity(0, {self.cpus[index % len(self.cpus)]})
            if self.before_open is not None:
                self.before_open()
            worker = self.make_worker(index)
            if self.after_open is not None:
                self.after_open()
                _die_with_parent(parent)       # a change of user cleared it
            os.write(status_fd, b"ok\n")
            try:
                worker.run()
                code = 0
            finally:
                worker.close()
        except StormpyError as e:
            os.write(status_fd, f"error {e}\n".encode())
        except OSError as e:
            os.write(status_fd, f"error {e.strerror or e}\n".encode())
        except BaseException as e:            # a bug: still one line, and still exit
            os.write(status_fd, f"error internal {type(e).__name__}: {e}\n".encode())
        finally:
            os._exit(code)

    def _spawn(self, index: int) -> None:
        self.ref.rearm_worker(index)
        rfd, wfd = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(rfd)
            os.close(wfd)
            raise
        if pid == 0:
            os.close(rfd)
            self._child(index, wfd, parent)
        os.close(wfd)
        self.pids[index] = pid
        self.ready[index] = False
        self._status[index] = rfd
        self._started[index] = time.monotonic()
        self._pidfd[index] = os.pidfd_open(pid)

    def _read_status(self, index: int) -> str:
        try:
            return os.read(self._status[index], 4096).decode(errors="replace").strip()
        except OSError:
            return ""

    def _close_fds(self, index: int) -> None:
        for fds in (self._status, self._pidfd):
            if fds[index] >= 0:
                if self._loop is not None:
                    self._loop.remove_reader(fds[index])
                os.close(fds[index])
                fds[index] = -1

    # -- start, watch, stop -----------------------------------------------------
    def start(self, timeout: float = 15.0) -> None:
        """Start every worker and wait until each has opened its backend. The first
        error stops them all and is raised as one line."""
        try:
            for i in range(self.count):
                self._spawn(i)
            deadline = time.monotonic() + timeout
            for i in range(self.count):
                ready, _, _ = select.select([self._status[i]], [], [],
                                            max(0.0, deadline - time.monotonic()))
                text = self._read_status(i) if ready else ""
                self.ready[i] = text.startswith("ok")
                if not text.startswith("ok"):
                    reason = text[6:] if text.startswith("error ") else \
                        "did not start within %.0f s" % timeout if not ready else "died while starting"
                    raise StormpyError(f"worker {i}: {reason.splitlines()[0]}")
        except BaseException:
            self.stop(timeout=2.0)
            raise

    def watch(self, loop) -> None:
        """From now on, restart a worker that dies (loop: the server's asyncio loop)."""
        self._loop = loop
        for i in range(self.count):
            self._watch(i)

    def _watch(self, index: int) -> None:
        self._loop.add_reader(self._pidfd[index], self._on_exit, index)

    def _on_exit(self, index: int) -> None:
        pid = self.pids[index]
        status = os.waitpid(pid, 0)[1]
        self.ref.worker_gone(index)         # died mid-batch or not: it reads no table now
        said = self._said[index] + "\n" + self._read_status(index)
        self._said[index] = ""
        self._close_fds(index)
        self.pids[index] = 0
        self.ready[index] = False
        if self._stopping:
            return
        reason = next((line[6:] for line in said.splitlines() if line.startswith("error ")), "")
        lived = time.monotonic() - self._started[index]
        self._backoff[index] = self._longer_pause(index) if lived < QUICK_DEATH_SECONDS else 0.0
        log.warning("worker %d (pid %d) %s%s; restarting it%s", index, pid, _describe(status),
                    f": {reason}" if reason else "",
                    f" in {self._backoff[index]:.1f} s" if self._backoff[index] else "")
        self._loop.call_later(self._backoff[index], self._respawn, index)

    def _longer_pause(self, index: int) -> float:
        """The next pause before restarting a worker that keeps failing: 0.1 s, doubling."""
        return min(max(self._backoff[index] * 2, 0.1), MAX_BACKOFF_SECONDS)

    def _respawn(self, index: int) -> None:
        if self._stopping or self.pids[index]:
            return
        self.restarts[index] += 1
        try:
            self._spawn(index)
        except OSError as e:                # no fork, pipe or pidfd: try again later
            if self.pids[index]:
                self._reaped(self.pids[index]) or os.kill(self.pids[index], signal.SIGKILL)
                self.pids[index] = 0
            self._close_fds(index)
            self._backoff[index] = self._longer_pause(index)
            log.error("cannot start worker %d again (%s); retrying in %.1f s", index,
                      e.strerror or e, self._backoff[index])
            self._loop.call_later(self._backoff[index], self._respawn, index)
            return
        self._loop.add_reader(self._status[index], self._on_ready, index)
        self._watch(index)

    def _on_ready(self, index: int) -> None:
        self._loop.remove_reader(self._status[index])
        text = self._read_status(index)
        if text.startswith("ok"):
            self.ready[index] = True
            log.info("worker %d restarted as pid %d in %.0f ms", index, self.pids[index],
                     (time.monotonic() - self._started[index]) * 1000)
        self._said[index] = text    # an error: it exits next, and _on_exit says why

    @staticmethod
    def _reaped(pid: int) -> bool:
        try:
            return os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:
            return True

    def alive(self) -> int:
        return sum(1 for p in self.pids if p)

    def stop(self, timeout: float = 2.0) -> bool:
        """Ask every worker to stop after its batch; kill one that does not within
        timeout. True when all stopped by themselves."""
        self._stopping = True
        for i in range(self.count):
            if self.pids[i]:
                self.ref.stop_worker(i)
        deadline = time.monotonic() + timeout
        clean = True
        for i in range(self.count):
            pid = self.pids[i]
            if not pid:
                self._close_fds(i)
                continue
            while not self._reaped(pid):
                if time.monotonic() >= deadline:
                    log.warning("worker %d (pid %d) did not stop within %.0f s; killing it",
                                i, pid, timeout)
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    clean = False
                    break
                time.sleep(0.01)
            self.pids[i] = 0
            self._close_fds(i)
        return clean
