"""The first process of every host: runs the entry point and keeps every process it starts in reach.

Run as ``python shim.py [--parent PID] [--grace SECONDS] [...] -- COMMAND...`` (stdlib only, imports
nothing of the package, so it starts fast). On Linux it makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``, no privileges needed): a process the entry point starts stays
its descendant even after it calls ``setsid()`` or double-forks, instead of being re-parented to
init. So the endpoint finds every process of a host by walking this process's tree, and nothing a
training script starts can escape a stop or a shutdown.

Given ``--parent``, it also asks for SIGTERM when its parent (the endpoint's thread that started it)
dies (``prctl(PR_SET_PDEATHSIG)``), and checks that parent is still there once asked: a host whose
endpoint was SIGKILLed ends on its own, whole tree included.

Signals: the handlers only note the signal (a list append, which cannot fail and may re-enter
freely); the main loop passes each one to every descendant. SIGTERM also starts the grace:
``--grace`` seconds (default ``GRACE``) later the shim freezes its whole tree and SIGKILLs it,
so a host ends within that bound even when nobody is left to kill it; a process still there
``KILL_WAIT`` seconds after its SIGKILL (stuck in the kernel) is named on stderr and left behind,
and the shim exits all the same. The shim exits with the entry point's exit code (or dies of the
same signal). When the entry point ends, whatever it left running is ended too (SIGTERM, then
SIGKILL after the grace), as when a SageMaker container stops.

Given ``--opt-ml DIR`` (jobs whose ``ContainerEntrypoint`` uses absolute ``/opt/ml`` paths, as the
SageMaker Python SDK v3's drivers do), the shim first moves into a mount namespace of its own where
``DIR`` is bind-mounted on ``/opt/ml``, so the host and everything it starts see their own tree
there: as root (``CAP_SYS_ADMIN``) a plain mount namespace, else an unprivileged user namespace
with it. When neither can be had it writes why on stderr and exits with ``ISOLATION_FAILED``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Seconds between SIGTERM and SIGKILL (a stop, or what an ended entry point left behind).
GRACE = 2.0
#: Rounds of freezing the tree before it is killed (a tree still growing after this is killed as seen).
FREEZE_ROUNDS = 20
#: Seconds the killed tree gets to be gone before the shim exits anyway (saying on stderr what was left).
KILL_WAIT = 2.0
#: The wait status of a process killed by SIGKILL: what the shim reports for an entry point it had to give up on.
KILLED_STATUS = int(signal.SIGKILL)
#: Seconds between two looks at the entry point and the pending signals.
TICK = 0.02
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Where a container sees its SageMaker tree.
OPT_ML = "/opt/ml"
#: The shim's exit code when it could not give the host its own ``/opt/ml``.
ISOLATION_FAILED = 125
ISOLATION_PREFIX = "hostshim: cannot give this host its own /opt/ml: "
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

_received: list[int] = []
"""Signals noted by the handler, not yet passed on (appended by the handler, drained by the loop)."""
_reaped: dict[int, int] = {}
"""Wait status of every child reaped so far, by pid."""
_peak_rss: list[int] = [0]
"""The largest peak resident size (bytes) the kernel reported for a reaped child so far."""


def _note(signum: int, frame: object) -> None:
    """The signal handler: note the signal and nothing else, so it can neither fail nor block."""
    _received.append(signum)


def _say(text: str) -> None:
    """One line on stderr (the host's log), written as bytes; a closed stderr is ignored."""
    with contextlib.suppress(OSError):
        os.write(2, f"hostshim: {text}\n".encode("utf-8", "replace"))


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False where unsupported."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Get ``signum`` when the parent thread dies (Linux); False where unsupported."""
    return _prctl(PR_SET_PDEATHSIG, int(signum))


def _bind_opt_ml(libc: ctypes.CDLL, directory: str) -> str | None:
    """In a fresh mount namespace: keep its mounts private, then bind ``directory`` on ``/opt/ml``."""
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"making / private in the new mount namespace failed: {os.strerror(ctypes.get_errno())}"
    if not os.path.isdir(OPT_ML):
        return f"{OPT_ML} does not exist and this user cannot create it (create it once: sudo mkdir -p {OPT_ML})"
    if libc.mount(directory.encode(), OPT_ML.encode(), None, MS_BIND | MS_REC, None) != 0:
        return f"binding {directory} on {OPT_ML} failed: {os.strerror(ctypes.get_errno())}"
    return None


def _map_self(uid: int, gid: int) -> None:
    """Map this user to itself in the user namespace just entered (as ``unshare --user`` does)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
            handle.write(text)


def own_opt_ml(directory: str) -> str | None:
    """Move into a mount namespace where ``directory`` is ``/opt/ml``; None when done, else why not.

    As root, a mount namespace (``/opt/ml`` is created when missing); otherwise, or when root lacks
    ``CAP_SYS_ADMIN`` (an unprivileged container), an unprivileged user namespace with one. Must run
    while the process has a single thread (the kernel's rule for entering a user namespace).
    """
    if not sys.platform.startswith("linux"):
        return "mount namespaces are a Linux feature; this system has none"
    libc = ctypes.CDLL(None, use_errno=True)
    tried = []
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            os.makedirs(OPT_ML, exist_ok=True)
        if libc.unshare(CLONE_NEWNS) == 0:
            return _bind_opt_ml(libc, directory)
        tried.append(f"as root, a mount namespace: {os.strerror(ctypes.get_errno())}")
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0:
        try:
            _map_self(uid, gid)
        except OSError as exc:
            return f"mapping user {uid} in the new user namespace failed: {exc}"
        return _bind_opt_ml(libc, directory)
    tried.append(f"an unprivileged user namespace: {os.strerror(ctypes.get_errno())}")
    return "neither is available here (" + "; ".join(tried) + ")"


def descendants(root: int) -> list[int]:
    """Pids of every living descendant of ``root`` (from ``/proc``; empty where there is none).

    Reads bytes, not text: no codec is looked up, so this works in any state of the interpreter.
    """
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def signal_all(signum: int, pids: list[int] | None = None) -> None:
    """Send ``signum`` to ``pids`` (every descendant of this process by default)."""
    for pid in descendants(os.getpid()) if pids is None else pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def reap() -> None:
    """Reap every exited child (orphans re-parented to this subreaper included), noting its status
    and its peak resident size."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reaped[pid] = status
        # kilobytes on Linux, bytes on macOS; a child's peak includes this (small) shim's size at fork
        _peak_rss[0] = max(_peak_rss[0], usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024))


def write_peak_rss(path: str) -> None:
    """Write the peak resident size of the largest reaped child (bytes) to ``path``; ignore a failure
    (a full disk must not change how the host ends)."""
    partial = f"{path}.partial"
    try:
        with open(partial, "w", encoding="ascii") as handle:
            handle.write(f"{_peak_rss[0]}\n")
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)


def kill_all(wait: float = KILL_WAIT) -> None:
    """Freeze every descendant (SIGSTOP until no new one appears), SIGKILL them all, reap them.

    Gives up waiting after ``wait`` seconds (a process stuck in the kernel), never blocks longer, and
    then says on stderr which processes were left.
    """
    frozen: list[int] = []
    for _ in range(FREEZE_ROUNDS):
        fresh = [pid for pid in descendants(os.getpid()) if pid not in frozen]
        if not fresh:
            break
        signal_all(signal.SIGSTOP, fresh)
        frozen.extend(fresh)
    signal_all(signal.SIGKILL, frozen)
    deadline = time.monotonic() + wait
    while True:
        reap()
        left = descendants(os.getpid())
        if not left:
            return
        if time.monotonic() >= deadline:
            _say(f"{len(left)} process(es) still there {wait:.1f} s after SIGKILL, left behind: {left}")
            return
        signal_all(signal.SIGKILL, left)
        time.sleep(TICK / 2)


def end_leftovers(grace: float = GRACE) -> None:
    """SIGTERM what the entry point left running, SIGKILL it after ``grace`` seconds, reap it all."""
    if not descendants(os.getpid()):
        reap()
        return
    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while descendants(os.getpid()) and time.monotonic() < deadline:
        reap()
        time.sleep(TICK)
    kill_all()


def supervise(child: int, grace: float) -> tuple[int, float]:
    """Wait for ``child``, passing noted signals on and killing the tree ``grace`` s after a SIGTERM.

    Returns (the child's wait status, the monotonic time by which leftovers must be gone). Bounded once
    SIGTERM came: a child still unreaped ``KILL_WAIT`` seconds after the kill (stuck in the kernel) is
    given up on, said on stderr, and reported as killed (``KILLED_STATUS``).
    """
    kill_at: float | None = None
    while True:
        reap()
        if child in _reaped:
            return _reaped[child], kill_at if kill_at is not None else time.monotonic() + grace
        pending = set()
        while _received:
            pending.add(_received.pop())
        for signum in sorted(pending):
            signal_all(signum)
        if signal.SIGTERM in pending and kill_at is None:
            kill_at = time.monotonic() + grace
        if kill_at is not None and time.monotonic() >= kill_at:
            kill_all()
            reap()
            if child not in _reaped and time.monotonic() >= kill_at + KILL_WAIT:
                _say(f"entry point {child} still not gone {KILL_WAIT:.1f} s after it was killed; exiting without it")
                return KILLED_STATUS, kill_at
        time.sleep(TICK)


def parse(argv: list[str]) -> tuple[int | None, float, str | None, str | None, list[str]]:
    """(parent pid or None, grace seconds, /opt/ml directory, peak-RSS file, command) from
    ``[--parent PID] [--grace S] [--opt-ml DIR] [--peak-rss-file FILE] -- COMMAND...``."""
    values: dict[str, str] = {}
    args = list(argv)
    while args and args[0] in ("--parent", "--grace", "--opt-ml", "--peak-rss-file") and len(args) > 1:
        option, value = args.pop(0), args.pop(0)
        values[option[2:]] = value
    if args and args[0] == "--":
        args.pop(0)
    parent = values.get("parent")
    grace = float(values.get("grace", GRACE))
    return int(parent) if parent is not None else None, grace, values.get("opt-ml"), values.get("peak-rss-file"), args


def main(argv: list[str]) -> int:
    """Run the command, return its exit code; die of its signal when it was killed.

    Given ``--peak-rss-file``, writes there the peak resident size of the host's largest process
    (from the kernel, when reaped) before it exits: a host too short to be sampled still has a
    memory figure.
    """
    parent, grace, opt_ml, peak_rss_file, command = parse(argv)
    if not command:
        sys.stderr.write("hostshim: no command\n")
        return 2
    if opt_ml is not None:
        problem = own_opt_ml(opt_ml)
        if problem is not None:
            sys.stderr.write(ISOLATION_PREFIX + problem + "\n")
            return ISOLATION_FAILED
        os.chdir(OPT_ML)  # the same folder, now under the name a container knows it by
    for signum in FORWARDED:
        signal.signal(signum, _note)
    become_subreaper()
    if parent is not None:
        die_with_parent(signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before it could be watched
            return 128 + signal.SIGTERM
    child = subprocess.Popen(command)
    status, kill_at = supervise(child.pid, grace)
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code  # reaped here, not by Popen
    end_leftovers(max(0.0, kill_at - time.monotonic()))
    if peak_rss_file is not None:
        write_peak_rss(peak_rss_file)
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
