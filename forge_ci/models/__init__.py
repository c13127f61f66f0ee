"""SQLAlchemy models on the core's ``Base``. Import this package to register every table."""

from forge_ci.models.accounts import SshKey, User
from forge_ci.models.annotations import AttemptAnnotation
from forge_ci.models.attempts import Attempt, AttemptSecret, AttemptStep
from forge_ci.models.base import Base, utcnow
from forge_ci.models.egress import EgressConnection
from forge_ci.models.logs import LogCarry, LogRecord
from forge_ci.models.providers import Provider, ProviderGrant
from forge_ci.models.push_events import PushEvent, PushEventState
from forge_ci.models.push_runs import PushEventResult, PushEventWorkflow
from forge_ci.models.queue import QueueCount, QueuedJob
from forge_ci.models.repositories import Membership, Repository
from forge_ci.models.runs import Job, JobDependency, JobOutput, Run, RunSequence
from forge_ci.models.schedules import ScheduledMinute
from forge_ci.models.secrets import RepositorySecret, RepositoryVariable, SettingsAudit
from forge_ci.models.signins import LoginThrottle, WebSession

__all__ = [
    "Attempt",
    "AttemptAnnotation",
    "AttemptSecret",
    "AttemptStep",
    "Base",
    "EgressConnection",
    "Job",
    "JobDependency",
    "JobOutput",
    "LogCarry",
    "LogRecord",
    "LoginThrottle",
    "Membership",
    "Provider",
    "ProviderGrant",
    "PushEvent",
    "PushEventResult",
    "PushEventState",
    "PushEventWorkflow",
    "QueueCount",
    "QueuedJob",
    "Repository",
    "RepositorySecret",
    "RepositoryVariable",
    "Run",
    "RunSequence",
    "ScheduledMinute",
    "SettingsAudit",
    "SshKey",
    "User",
    "WebSession",
    "utcnow",
]
