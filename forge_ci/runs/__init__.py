"""Runs: push events into pinned, immutable runs; dispatch; DAG scheduling; cancel and rerun.

Modules (import the one you need; this package imports nothing on its own)::

    sources       git reads: branches, workflow files at a commit, changed paths
    blob_answers  answers about workflow files kept by blob id (dispatch form, scheduler)
    pins          refs/forge-ci/pipelines/<token>: a run's source, kept alive
    numbering     gapless run numbers; the per-repository scheduling lock
    definition    the immutable snapshot (YAML, resolved plan, digest, context, group)
    transactions  serialized write transactions (BEGIN IMMEDIATE on SQLite)
    create        pin -> number -> rows -> admit -> commit, or nothing at all
    conditions    job `if` on the server: status functions, needs.<id>.result/outputs
    concurrency   workflow concurrency groups (cancel-in-progress or wait)
    scheduling    job and run transitions; entry points for the runner protocol
    dispatch      workflow_dispatch from a local branch, with its inputs
    scheduled     on.schedule: one run per workflow and minute (keyed in the database)
    scheduler     the worker's per-minute clock for scheduled, with an injectable clock
    cancel        cancel_run
    rerun         rerun_run (all jobs, or --failed)
    events        push events -> runs (one outcome per workflow file)
    event_payload github.event: the payload of push / dispatch / schedule, built at creation
    queries       list_runs, show_run, run_view, find_run, show_push_event

Use cases take a session first and an Actor, check authorization themselves (creating and
cancelling runs needs a current owner/admin or site administrator; reading needs read access)
and raise ForgeCIError subclasses.
"""
