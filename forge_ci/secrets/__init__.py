"""Repository secrets and variables: the store, sealing, the policy of who may use them.

::

    rules      names, values, scopes, versions, limits (pure)
    sealing    the key file outside the database and AES-GCM sealing of values
    store      the use cases every front door calls: set, delete, list, audit
    policy     which runs may receive which secret; a run's ``vars`` context
    rotation   re-sealing every value under a new key

Delivery to running steps is the coordinator's (``forge_ci.coordinator.secrets``): it calls
:mod:`.policy` at every request. Nothing here returns a secret value except
:func:`.policy.open_secret`, which only the coordinator's delivery uses.
"""
