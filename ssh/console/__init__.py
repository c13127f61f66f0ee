"""SSH-side commands: ``ssh git@HOST run list alice/demo`` and the rest (see docs/ssh.md).

    exec request -> session.run_console_command
      split (shlex, bounded) -> parse (argparse, catalog.COMMANDS) -> one slot of the user's
      -> handler (a module here) -> core use cases with the key's user as the Actor
      -> lines on stdout / --json, one "forge-ci: ..." line on stderr for a refusal
      -> exit status: 0 done, 1 a run that did not succeed, 2 refused

Handlers only parse and print: every decision (who may, what exists) is a core use case, the
same one the web UI and the operator CLI call.
"""
