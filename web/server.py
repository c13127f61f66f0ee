"""Serving the application: gunicorn in production, werkzeug's threaded server with ``--dev``.

Why gthread workers: the runner API's claim endpoint is a long poll (a provider waits up to
``claim_wait_seconds`` for work), and browsers poll pipeline pages every two seconds. A
long-polling request occupies a thread, not a process, so ``workers x threads`` is the number of
requests served at once; size ``threads`` for the providers plus the browsers you expect (the
default 2 x 16 serves 32 at once). gunicorn loads the application in each worker after the fork,
so every worker opens its own database engine. The workers are web/intake.py's gthread: each
request is read whole by the worker's event loop before a thread sees it, so slow clients hold no
thread (issue #14, finding 1). ``--dev`` (werkzeug) has no such defence: never expose it.
"""

from __future__ import annotations

import gc
import signal
import threading
from typing import Any

from flask import Flask

from forge_ci.settings import Settings

DEFAULT_WORKERS = 2
DEFAULT_THREADS = 16


def bind_address(settings: Settings) -> str:
    host, port = settings.web_listen
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_options(settings: Settings, workers: int, threads: int) -> dict[str, Any]:
    return {
        "bind": [bind_address(settings)],
        # gthread, with each request read whole by the event loop first (web/intake.py).
        "worker_class": "web.intake.BufferingWorker",
        "workers": workers,
        "threads": threads,
        # The arbiter's liveness timeout: a gthread worker keeps notifying while its threads
        # wait in long polls, so this only catches a stuck worker process.
        "timeout": max(60, int(settings.claim_wait_seconds * 3)),
        "graceful_timeout": int(settings.claim_wait_seconds) + 10,
        "keepalive": 5,
        "accesslog": "-",
        "errorlog": "-",
        "proc_name": "forge-ci-web",
        "preload_app": False,
        "post_worker_init": _drain_claims_on_term,
    }


def _drain_claims_on_term(worker: Any) -> None:
    """gunicorn's post_worker_init: on SIGTERM, answer waiting claims before the graceful wait.

    A graceful stop waits for requests in flight, and a provider's claim waits up to
    ``claim_wait_seconds`` for work: without this, every stop (a deploy, Ctrl-C of ``forge-ci
    up``) would take that long. The providers just claim again.
    """
    from web.runner_api import drain_claims

    app = worker.wsgi
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        # Not in the handler itself: draining takes a lock that this thread may hold.
        threading.Thread(target=drain_claims, args=(app,), daemon=True).start()
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_term)


def serve_gunicorn(settings: Settings, workers: int, threads: int) -> None:
    """Run gunicorn in this process until it is told to stop (SIGTERM, SIGINT)."""
    from gunicorn.app.base import BaseApplication

    from web.app import create_app

    options = gunicorn_options(settings, workers, threads)

    class _Application(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Flask:
            # Called in each worker after the fork: the engine belongs to that worker.
            return _frozen(create_app(settings))

    _Application().run()


def serve_development(settings: Settings) -> None:
    """Werkzeug's threaded development server: one process, no reloader, no debugger."""
    from werkzeug.serving import run_simple

    from web.app import create_app

    host, port = settings.web_listen
    app = _frozen(create_app(settings))
    # Stop on SIGTERM (supervisors, `forge-ci up`) as on Ctrl-C: close the socket, exit 0.
    signal.signal(signal.SIGTERM, _interrupt)
    run_simple(host, port, app, threaded=True, use_reloader=False)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _frozen(app: Flask) -> Flask:
    """``app``, with everything the process holds now moved out of the garbage collector's way.

    The modules, the mappers and the application live as long as the process; without this,
    every full collection walks them all again (100,000 objects: tens of milliseconds, and a
    big run page allocates enough to cause one every few requests).
    """
    gc.collect()
    gc.freeze()
    return app
