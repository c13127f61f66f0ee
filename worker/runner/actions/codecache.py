"""Node's compile cache for the job's node actions, made ahead in the job's own container.

Most of a node action's start-up is V8 compiling its bundle (setup-python's ncc bundles are
3.4-3.9 MB: about 0.1 s of CPU each, a third of the step). Once an action's tree is unpacked,
a background ``node`` compiles its ``post`` script through node's own CommonJS loader
**without running it** and writes V8's code cache into ``<runner dir>/_node-compile-cache``::

    tree unpacked ──► node _compile-only.js <cache dir> <file>   (PATH only: no inputs, no secrets)
        Module._compile(source, file, "commonjs"): compiles, then reads module.exports, which
        throws before the module function is called ──► flushCompileCache()
    the post step ──► node <file> with NODE_COMPILE_CACHE=<cache dir>: V8 takes the cached code
        (it checks the source's hash and its own flags, and compiles as usual if they differ)

Only ``post`` scripts are compiled ahead, and only on otherwise idle CPU (``SCHED_IDLE``):
they run after at least their main step, so the compile happens beside other steps without
slowing them down. A ``main`` usually runs right after its tree arrived
(the download overlaps only the steps before it), so compiling it ahead would sit on the
critical path and cost more CPU than it saves (compiling, plus a process start, ~0.16 s of CPU
against ~0.1 s saved); measured in bench/job_latency.py.

What the step runs is exactly ``node <file>``: the cache changes how fast the code compiles,
never what it does (a file whose syntax is not CommonJS fails to compile here, and an ES
module is looked up under another key: both simply compile in the step). Only a script
compiled ahead gets ``NODE_COMPILE_CACHE`` (another would write its own entry at exit, for
nothing), after waiting for its compile-only process at most :data:`WAIT_SECONDS` (it is
usually long done; if not, the machine had no idle time for it: it is stopped and the step
compiles as usual). A step whose ``env`` sets ``NODE_COMPILE_CACHE`` (``""``: none) keeps its
value, and an action only such steps use is not compiled ahead.

The folder is this job's alone: in the job container's tmpfs, written by the job's user, gone
with the container. Nothing is shared between jobs, so no job can plant code that another job
runs (within a job, the job's code can rewrite the action's own files anyway). A node without
a compile cache (before 22.1) ignores all of it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterable

from forge_ci.protocol import AssignmentStep

#: How long a step waits for its script's compile-only process before it stops it.
WAIT_SECONDS = 0.05

COMPILE_ONLY_JS = """\
'use strict';
// forge-ci: compile a CommonJS file into node's compile cache without running it.
const fs = require('fs');
const path = require('path');
const Module = require('module');
if (typeof Module.enableCompileCache !== 'function') process.exit(0);
Module.enableCompileCache(process.argv[2]);
const stop = Symbol('compiled, not run');
const filename = fs.realpathSync(path.resolve(process.argv[3]));
const target = new Module(filename, null);
target.filename = filename;
Object.defineProperty(target, 'exports', { get() { throw stop; } });
try {
  target._compile(fs.readFileSync(filename, 'utf8'), filename, 'commonjs');
  process.exitCode = 3;  // never reached: the module function was not called
} catch (error) {
  if (error !== stop) process.exitCode = 1;
}
Module.flushCompileCache();
"""


def opted_out(steps: Iterable[AssignmentStep]) -> set[str]:
    """Keys of the actions that only steps setting ``NODE_COMPILE_CACHE`` themselves use (their
    step keeps its own value, so compiling ahead for them would be wasted)."""
    own: set[str] = set()
    ours: set[str] = set()
    for step in steps:
        if step.action:
            (own if "NODE_COMPILE_CACHE" in step.env else ours).add(step.action)
    return own - ours


def _idle_priority(pid: int) -> None:
    """Let ``pid`` run only on otherwise idle CPU (SCHED_IDLE, else nice 19): compiling ahead
    must never slow down the steps."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, 19)
        except OSError:
            pass  # ended already


class CompileCache:
    """The job's node compile cache and the one background thread that fills it, a script at a
    time in the order asked (one compile-only ``node`` at a time: the steps keep a core)."""

    def __init__(self, runner_dir: str) -> None:
        self.directory = os.path.join(runner_dir, "_node-compile-cache")
        self._script = os.path.join(runner_dir, "_compile-only.js")
        self._changed = threading.Condition()
        self._queue: list[str] = []
        #: Each script asked for: None while queued, then its process.
        self._processes: dict[str, subprocess.Popen[bytes] | None] = {}
        self._closed = False
        self._thread: threading.Thread | None = None

    def environment(self, file: str) -> dict[str, str]:
        """What the node process of ``file`` gets: the cache, once its compile-only process
        ended (waiting at most WAIT_SECONDS), if one was started; else nothing."""
        with self._changed:
            process = self._processes.get(file)
        if process is None:
            return {}  # not compiled ahead, or not started yet: the step compiles it
        try:
            process.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()  # the machine had no idle time for it: the step compiles instead
            return {}
        return {"NODE_COMPILE_CACHE": self.directory}

    def warm(self, files: Iterable[str]) -> None:
        """Compile each of ``files`` (named as the step will name them) in the background."""
        with self._changed:
            for file in files:
                if file not in self._processes and os.path.isfile(file):
                    self._processes[file] = None
                    self._queue.append(file)
            if self._queue and self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="compile-cache", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def _run(self) -> None:
        try:
            with open(self._script, "x", encoding="utf-8") as handle:
                handle.write(COMPILE_ONLY_JS)
        except OSError:
            return
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                file = self._queue.pop(0)
                try:
                    process = subprocess.Popen(
                        ["node", self._script, self.directory, file],
                        env={"PATH": os.environ.get("PATH", os.defpath)},
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        cwd=os.path.dirname(self._script),
                    )
                except OSError:
                    return  # no node here: the steps compile as usual
                self._processes[file] = process
                self._changed.notify_all()
            _idle_priority(process.pid)
            process.wait()

    def close(self) -> None:
        """Stop what still runs (the job ends; the sweep of every descendant follows)."""
        with self._changed:
            self._closed = True
            processes = [process for process in self._processes.values() if process is not None]
            self._changed.notify_all()
        for process in processes:
            if process.poll() is None:
                process.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)
