"""Name rules for users and repositories (documented in docs/operator-guide.md).

Strict on purpose: names appear in URLs, SSH paths, file-system paths and git refs, so only a
small alphabet is allowed and nothing is silently changed (no lower-casing, no trimming).
"""

from __future__ import annotations

import re

from forge_ci.errors import InvalidInput

# A user name: 1-39 characters, lowercase letters, digits and single hyphens, not at either end
# (GitHub's rule, lower-case only so that two names can never differ by case alone).
USER_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,38}$")
# A repository name: 1-100 characters of letters, digits, '.', '_' and '-', starting with a letter
# or digit, not ending in ".git" or ".lock", no "..".
REPO_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
RESERVED_USER_NAMES = frozenset({"admin", "api", "git", "root", "static", "login", "logout"})


def check_user_name(name: str) -> str:
    """Return ``name`` if it is a valid user name, else raise InvalidInput saying why."""
    if not USER_NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid user name {name!r}: use 1-39 lowercase letters, digits and single hyphens, "
            "starting and ending with a letter or digit"
        )
    if name in RESERVED_USER_NAMES:
        raise InvalidInput(f"invalid user name {name!r}: the name is reserved")
    return name


def check_repo_name(name: str) -> str:
    """Return ``name`` if it is a valid repository name (without owner), else raise."""
    if not REPO_NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid repository name {name!r}: use 1-100 letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    if ".." in name or name.lower().endswith((".git", ".lock")):
        raise InvalidInput(
            f"invalid repository name {name!r}: it may not contain '..' or end in .git or .lock"
        )
    return name


def split_full_name(full_name: str) -> tuple[str, str]:
    """Split ``owner/name`` and validate both halves."""
    owner, sep, name = full_name.partition("/")
    if not sep or "/" in name:
        raise InvalidInput(f"invalid repository {full_name!r}: expected OWNER/NAME")
    return check_user_name(owner), check_repo_name(name)
