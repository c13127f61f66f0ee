"""SQLAlchemy models on the core's ``Base``. Import this package to register every table."""

from forge_ci.models.accounts import SshKey, User
from forge_ci.models.base import Base, utcnow
from forge_ci.models.push_events import PushEvent, PushEventState
from forge_ci.models.repositories import Membership, Repository

__all__ = [
    "Base",
    "Membership",
    "PushEvent",
    "PushEventState",
    "Repository",
    "SshKey",
    "User",
    "utcnow",
]
