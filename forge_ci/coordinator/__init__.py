"""The coordinator: providers, claims, leases, attempts, steps and logs of the runner protocol.

Use cases here take a session first and raise :mod:`forge_ci.errors` types (the protocol ones
in :mod:`forge_ci.coordinator.errors` carry stable ``code`` values that the runner API sends).
Leases, deadlines and cancellation are enforced here, never trusted to a runner::

    providers.py    create/ensure/pause/resume/revoke, labels and repository access
    credentials.py  random credentials, hashes, constant-time checks
    claims.py       claim (serialized, fair, replayable) and the assignment it returns
    direct_claims.py  the common claim in a handful of prebuilt statements (direct_claim_sql.py)
    driver_sql.py   Core statements compiled once and run on the bare DB-API cursor
    claim_rows.py   what both claim paths write (attempt, steps) and how they rank work
    assignments.py  the assignment a claim returns, built from the claimed rows
    wakeups.py      how a waiting claim learns that work was queued (Redis, DB fallback)
    attempts.py     authenticate, start, heartbeat, complete, cancellation
    leases.py       lease and deadline arithmetic, reconciliation of one attempt
    steps.py        per-step states reported by the runner
    logs.py         log ingestion with masking, the log cap, reading pages
    sources.py      the pinned commit as a tar for a running attempt (checked, bounded)
    sweeper.py      the periodic sweep that reconciles expired attempts in batches
    blockers.py     why a queued job waits (the run page), from the providers' rows
    watch.py        a run page's poll in one statement: the reader's rights and the change token
"""
