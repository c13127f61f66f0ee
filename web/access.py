"""The repository a request is about, looked up and authorized once per request.

A run page calls several use cases of one repository (the run, its queue blockers, a log);
each would look the repository up and check the reader's role again. The views ask
:func:`request_repository` instead, which does that once and keeps the answer on ``flask.g``
for the rest of the request, and hand it to the use cases' ``..._in`` variants. An unreadable
repository is the same NotFound (404) as a missing one.
"""

from __future__ import annotations

from flask import g

from forge_ci.authz import Role
from forge_ci.repos import RepositoryAccess, repository_access
from web.auth import current_actor
from web.storage import db


def request_repository(owner: str, name: str) -> RepositoryAccess:
    """``owner/name`` with the current user's role in it (read access required)."""
    full_name = f"{owner}/{name}"
    access: RepositoryAccess | None = g.get("repository_access")
    if access is None or access.repository.full_name != full_name:
        access = repository_access(db(), current_actor(), full_name, Role.READ)
        g.repository_access = access
    return access
