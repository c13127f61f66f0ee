"""Heartbeats: renew the lease every 5 s (four times per lease when it is shorter).

Each answer goes to the watchdog, which moves the local lease expiry forward and notices a
cancellation or an attempt the server ended. A heartbeat that gets no answer is not retried
beyond its own interval: the next one is the retry, and the watchdog stops everything when the
lease can no longer be trusted. Heartbeats go on while the job winds down, until the
completion was sent.
"""

from __future__ import annotations

import threading

from forge_ci.protocol import HeartbeatRequest, request_body
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.watchdog import Watchdog


class Heartbeat:
    def __init__(
        self, client: ApiClient, attempt_id: int, execution_id: str, watchdog: Watchdog
    ) -> None:
        self.client = client
        self.attempt_id = attempt_id
        self.body = request_body(HeartbeatRequest(execution_id))
        self.watchdog = watchdog
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=15)

    def beat(self) -> None:
        """One heartbeat (the thread calls it every interval)."""
        interval = self.watchdog.heartbeat_interval()
        sent_at = now()
        try:
            status = self.client.call(
                self.attempt_id,
                "heartbeat",
                self.body,
                until=sent_at + interval,
                give_up=self._done.is_set,
            )
        except NoAnswer:
            return
        except Refused as refused:
            if refused.attempt is not None:
                self.watchdog.observe(refused.attempt, sent_at)
            if refused.attempt is None or refused.attempt.state != "completed":
                self.watchdog.request_stop(
                    "refused", f"the server refused a heartbeat: {refused.message}"
                )
            return
        self.watchdog.observe(status, sent_at)

    def _run(self) -> None:
        while not self._done.wait(self.watchdog.heartbeat_interval()):
            self.beat()
