"""Push events: the core's side of a push through forge-ci.

- ``refpolicy``: which refs a push may touch (pre-receive asks, intents re-check).
- ``intents``: what the ``reference-transaction`` hook records, confirms and cancels.
- ``settling``: recovery and pinning under the repository lock, before and after every push.
- ``events``: reading events and what workers do with them.

The SSH front door drives these in the order of ARCHITECTURE.md, "A push, step by step".
"""
