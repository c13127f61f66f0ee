"""The in-container runner: ``python3 -S -m worker.runner`` runs one attempt of one job.

Standard library only (plus :mod:`forge_ci.protocol` and :mod:`forge_ci.workflow.expressions`,
which are standard-library-only too): it runs under ``python -S`` in job images that have no
site packages. The provider writes the attempt credential and the assignment to its standard
input (:class:`forge_ci.protocol.RunnerInput`); it talks to the runner API over a Unix socket.
See ``docs/runner-protocol.md`` (the runner) and ``docs/security-model.md`` (its isolation)::

    main         harden, read stdin, run, print the report, exit 0 / 1 / 2
    job          start -> source -> pre steps -> steps -> post steps -> outputs -> complete
    scripts      one process of a step: its files, environment, commands and effects
    actions/     action steps: trees, inputs, node and composite actions, workflow commands
    steps        one process in its own process group; output streamed and decoded
    checkout     the built-in checkout: download and extract the pinned commit
    archive      tar inspection before extraction, extraction without following links
    environment  the step's environment, built from scratch
    shells       bash / sh argv and the script file
    filecommands GITHUB_ENV, GITHUB_PATH, GITHUB_OUTPUT, GITHUB_STATE, GITHUB_STEP_SUMMARY
    evaluation   runtime templates, step if, continue-on-error
    watchdog     deadlines, lease, cancellation: when to stop, and stopping the step
    heartbeat    lease renewal every 5 s
    uploader     one sequenced, batched, retried log stream (with ::add-mask:: values)
    client       HTTP over the Unix socket, retries of the exact payload
    processes    prctl hardening, process groups, the final sweep of descendants
    report       the JSON report and exit status
"""
