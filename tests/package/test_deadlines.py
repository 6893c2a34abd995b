"""No test can block without a deadline: every wait in ``tests/`` (and ``tests/support``) is bounded.

Read statically (``ast``): a ``.wait()``, ``.join()``, ``.readline()`` or ``.acquire()`` with no argument
and no ``timeout=``, a ``.communicate()`` without a timeout; a ``subprocess.run/check_output/check_call/
call`` without ``timeout=``; a ``.read()`` of a child's ``.stdout``/``.stderr``; a ``for`` over a child's
``.stdout`` or ``.stderr``; a queue's ``.get()`` without a timeout; an HTTP request (``urlopen``,
``requests.<verb>``) without ``timeout=``. Bounded from outside: a boto3 waiter given
``WaiterConfig={"MaxAttempts": N}``, a call ``asyncio.wait_for`` wraps or that runs in ``async with
asyncio.timeout(...)``. A call that cannot block (a regular file's ``readline()``, say) says why on its
line: ``# deadline: <why>``. ``support.child_output`` follows a child's output with a deadline.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.child_output import ChildOutput, wait_exit

TESTS = Path(__file__).resolve().parents[1]
#: The opt-out, on a line of the call: ``# deadline: <why>`` (the reason is required).
OPT_OUT = re.compile(r"#\s*deadline:\s*\S")
#: Calls that block until their object is done, unless given a bound (positionally or as ``timeout=``).
BOUNDED_BY_ARGUMENT = frozenset({"wait", "join", "communicate", "readline", "acquire"})
SUBPROCESS_CALLS = frozenset({"run", "check_output", "check_call", "call"})
STREAMS = frozenset({"stdout", "stderr"})
#: How long the children of the ChildOutput tests may take to print or exit (a fresh interpreter, loaded machine).
CHILD_TIMEOUT = 60.0
REQUESTS_CALLS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "request"})


def _keywords(call: ast.Call) -> set[str | None]:
    return {k.arg for k in call.keywords}


def _is_stream(node: ast.expr) -> bool:
    """``<x>.stdout`` or ``<x>.stderr`` (a child's pipe; ``sys.stdout`` is not read)."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr in STREAMS
        and not (isinstance(node.value, ast.Name) and node.value.id == "sys")
    )


def _subprocess_names(tree: ast.Module) -> set[str]:
    """The names a module imported ``from subprocess`` (``from subprocess import run``)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "subprocess"
        for alias in node.names
        if alias.name in SUBPROCESS_CALLS
    }


def _waiter_bounded(call: ast.Call) -> bool:
    """A boto3 waiter's ``wait(..., WaiterConfig={"MaxAttempts": N, ...})``: bounded by its attempts."""
    return any(
        k.arg == "WaiterConfig"
        and isinstance(k.value, ast.Dict)
        and any(isinstance(key, ast.Constant) and key.value == "MaxAttempts" for key in k.value.keys)
        for k in call.keywords
    )


def _call_problem(call: ast.Call, from_subprocess: set[str]) -> str | None:
    func, keywords = call.func, _keywords(call)
    if "timeout" in keywords or _waiter_bounded(call):
        return None
    if isinstance(func, ast.Attribute):
        name = func.attr
        if isinstance(func.value, ast.Name) and func.value.id == "subprocess" and name in SUBPROCESS_CALLS:
            return f"subprocess.{name}() without timeout="
        if name == "communicate" and len(call.args) < 2:  # its first argument is the input
            return ".communicate() without a timeout"
        if name in BOUNDED_BY_ARGUMENT - {"communicate"} and not call.args:
            if name == "acquire" and any(
                k.arg == "blocking" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in call.keywords
            ):
                return None
            return f".{name}() without a timeout"
        if name == "get" and not call.args and not keywords - {"block"}:
            return "queue .get() without a timeout"
        if name == "urlopen" and len(call.args) < 3:
            return "urlopen() without timeout="
        if isinstance(func.value, ast.Name) and func.value.id == "requests" and name in REQUESTS_CALLS:
            return f"requests.{name}() without timeout="
        if name == "read" and _is_stream(func.value):
            return f".{func.value.attr}.read() of a child's pipe (blocks until it closes)"  # type: ignore[attr-defined]
    elif isinstance(func, ast.Name) and func.id in from_subprocess:
        return f"{func.id}() (subprocess) without timeout="
    elif isinstance(func, ast.Name) and func.id == "urlopen" and len(call.args) < 3:
        return "urlopen() without timeout="
    return None


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _bounded_by_asyncio(tree: ast.Module) -> set[int]:
    """The ids of the calls an ``asyncio.wait_for(CALL, timeout)`` wraps, or that sit in the body of an
    ``async with asyncio.timeout(...)`` (or ``timeout_at``): their wait is bounded from outside."""
    bounded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "wait_for" and node.args:
            if len(node.args) >= 2 or "timeout" in _keywords(node):
                bounded.add(id(node.args[0]))
        elif isinstance(node, ast.AsyncWith) and any(
            isinstance(item.context_expr, ast.Call) and _name(item.context_expr.func) in {"timeout", "timeout_at"}
            for item in node.items
        ):
            bounded |= {id(inner) for stmt in node.body for inner in ast.walk(stmt) if isinstance(inner, ast.Call)}
    return bounded


def problems(path: Path, base: Path = TESTS.parent) -> list[str]:
    """``file:line: what`` (``file`` relative to ``base``) for each unbounded wait of one file, in line
    order (none on a line of the call that opts out)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, filename=str(path))
    from_subprocess = _subprocess_names(tree)
    bounded = _bounded_by_asyncio(tree)
    found: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in bounded:
            problem = _call_problem(node, from_subprocess)
            if problem:
                found.append((node, problem))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension) and _is_stream(node.iter):
            found.append((node.iter, f"iterating over .{node.iter.attr} with no deadline"))  # type: ignore[attr-defined]
    rel = path.relative_to(base)
    out = []
    for node, problem in sorted(found, key=lambda item: (item[0].lineno, item[0].col_offset)):  # type: ignore[attr-defined]
        start, end = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        if not any(OPT_OUT.search(line) for line in lines[start - 1 : end]):
            out.append(f"{rel}:{start}: {problem}")
    return out


def test_every_blocking_call_in_the_tests_has_a_deadline() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert len(files) > 100
    found = [problem for path in files for problem in problems(path)]
    assert not found, "calls that can block forever (give them a timeout, or '# deadline: <why>'):\n" + "\n".join(found)


def _scan(tmp_path: Path, code: str) -> list[str]:
    sample = tmp_path / "sample.py"
    sample.write_text(code)
    return [p.split(": ", 1)[1] for p in problems(sample, tmp_path)]


def test_the_scan_finds_each_kind_and_honours_the_opt_out(tmp_path: Path) -> None:
    code = """
import subprocess
from subprocess import check_output as co
proc.wait()
proc.wait(10)
proc.wait(timeout=10)
waiter.wait(Name="j", WaiterConfig={"Delay": 1, "MaxAttempts": 300})
waiter.wait(Name="j")
thread.join()
thread.join(5)
event.wait()  # deadline: set just above, cannot block
barrier.wait()
lock.acquire()
lock.acquire(blocking=False)
lock.acquire(timeout=1)
proc.communicate(input="x")
proc.communicate(timeout=3)
proc.stdout.readline()
q.get()
q.get(timeout=1)
d.get("key")
proc.stdout.read()
path.read()
subprocess.run(["x"], check=True)
subprocess.run(["x"], timeout=60)
subprocess.check_output(
    ["x"],  # deadline: multi-line calls may carry it on any of their lines
)
co(["x"])
for line in proc.stdout:
    pass
lines = [line for line in proc.stderr]
for line in sys.stdout:
    pass
async def f():
    await asyncio.wait_for(event.wait(), 5)
    await event.wait()
    async with asyncio.timeout(5):
        await event.wait()
urllib.request.urlopen(url)
urllib.request.urlopen(url, timeout=5)
requests.post(url, data=b"")
requests.post(url, timeout=5)
"""
    assert _scan(tmp_path, code) == [
        ".wait() without a timeout",
        ".wait() without a timeout",
        ".join() without a timeout",
        ".wait() without a timeout",
        ".acquire() without a timeout",
        ".communicate() without a timeout",
        ".readline() without a timeout",
        "queue .get() without a timeout",
        ".stdout.read() of a child's pipe (blocks until it closes)",
        "subprocess.run() without timeout=",
        "co() (subprocess) without timeout=",
        "iterating over .stdout with no deadline",
        "iterating over .stderr with no deadline",
        ".wait() without a timeout",
        "urlopen() without timeout=",
        "requests.post() without timeout=",
    ]


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_child_output_returns_what_it_saw_and_fails_on_silence_or_an_early_end() -> None:
    proc = _child("import sys, time\nprint('one'); print('two', flush=True)\ntime.sleep(60)")
    try:
        output = ChildOutput.of(proc, name="the sleeper")
        assert output.read_until(lambda line: line == "two", CHILD_TIMEOUT, "its second line") == ["one", "two"]
        started = time.monotonic()
        with pytest.raises(AssertionError, match=r"(?s)the sleeper: 0.3 s passed before a third line.*one\n    two"):
            output.read_until(lambda line: line == "three", 0.3, "a third line")
        assert time.monotonic() - started < CHILD_TIMEOUT
        seen = output.look_for(lambda _: True, 0.1)
        assert (seen.lines, seen.matched, seen.ended, seen.timed_out) == ([], False, False, True)
        assert output.lines_so_far() == ["one", "two"]
        with pytest.raises(AssertionError, match=r"pid \d+: 0\.2 s passed before the sleeper exited; it was killed"):
            wait_exit(proc, 0.2, "the sleeper exited")
        assert proc.poll() is not None  # killed by wait_exit
        assert output.read_to_end(CHILD_TIMEOUT) == [] and output.ended
    finally:
        proc.kill()
        proc.wait(timeout=CHILD_TIMEOUT)

    proc = _child("print('only')")
    output = ChildOutput.of(proc, name="the short one")
    with pytest.raises(AssertionError, match=r"(?s)the short one: its output ended before never.*    only"):
        output.read_until(lambda line: line == "never", CHILD_TIMEOUT, "never")
    seen = output.look_for(lambda _: True, CHILD_TIMEOUT)  # nothing more, and no wait for it
    assert (seen.lines, seen.matched, seen.ended) == ([], False, True)
    assert wait_exit(proc, CHILD_TIMEOUT, "the short one exited") == 0
