"""``GET /-/metrics``: the figures of a real run (made through the coordinator), in a format a
Prometheus parser reads, and only for the holder of the metrics token."""

from __future__ import annotations

import dataclasses
import re
import secrets
from pathlib import Path

from flask import Flask

from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.web.scenario import StandardRun
from web import create_app

_SAMPLE = re.compile(r'^([a-z_]+)(\{(?:[a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+]+|\+Inf)$')


def _parse(text: str) -> dict[str, float]:
    """A strict reader of the text format: every line a comment or a well-formed sample."""
    samples: dict[str, float] = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP "):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        assert any(match.group(1).startswith(name) for name in typed), line
        samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


def _app(settings: Settings, database: Database, token_file: Path | None) -> Flask:
    app = create_app(
        dataclasses.replace(settings, metrics_token_file=token_file), database=database
    )
    app.testing = True
    return app


def test_metrics_report_runs_jobs_queue_claims_logs_and_providers(
    settings: Settings, database: Database, standard: StandardRun, tmp_path: Path
) -> None:
    token = secrets.token_hex(24)
    token_file = tmp_path / "metrics-token"
    token_file.write_text(token + "\n")
    client = _app(settings, database, token_file).test_client()

    response = client.get("/-/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    samples = _parse(response.get_data(as_text=True))
    assert samples['forge_ci_runs{state="running"}'] == 1
    assert samples['forge_ci_runs{state="completed"}'] == 0
    for state, count in (("waiting", 1), ("queued", 1), ("running", 1), ("completed", 1)):
        assert samples[f'forge_ci_jobs{{state="{state}"}}'] == count, state
    # test waits for a gpu machine: its label set is queued, with its age.
    assert samples['forge_ci_queue_jobs{labels="gpu,linux,self-hosted"}'] == 1
    assert samples['forge_ci_queue_oldest_age_seconds{labels="gpu,linux,self-hosted"}'] >= 0
    assert samples["forge_ci_claim_latency_seconds_count"] == 2
    assert samples['forge_ci_claim_latency_seconds_bucket{le="+Inf"}'] == 2
    assert samples["forge_ci_log_bytes_ingested_total"] > 0
    assert samples['forge_ci_provider_up{provider="p1",state="active"}'] == 1
    assert samples['forge_ci_provider_last_contact_timestamp_seconds{provider="p1"}'] > 1.7e9

    # Refusals: no token, a wrong one, a cookie-less basic header; and off without the setting.
    for headers in ({}, {"Authorization": "Bearer " + "x" * 48}, {"Authorization": token}):
        refused = client.get("/-/metrics", headers=headers)
        assert refused.status_code == 401 and "forge_ci_" not in refused.get_data(as_text=True)
    off = _app(settings, database, None).test_client()
    assert off.get("/-/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 404
    # A token file with a guessable token is a configuration error, not an open door.
    token_file.write_text("short\n")
    weak = client.get("/-/metrics", headers={"Authorization": "Bearer short"})
    assert weak.status_code >= 400 and "forge_ci_" not in weak.get_data(as_text=True)
