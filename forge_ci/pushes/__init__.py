"""Push events: the core's side of a push through forge-ci.

- ``refpolicy``: which refs a push may touch (pre-receive asks, intents re-check).
- ``intents``: what a push's ``pre-receive`` report records before any ref moves.
- ``settling``: confirming (and pinning) or aborting intents against the refs, under the
  repository lock, after every push and before every write (recovery after a crash).
- ``events``: reading events and what workers do with them.

The SSH front door drives these in the order of ARCHITECTURE.md, "A push, step by step".
"""
