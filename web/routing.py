"""URL converters for owner and repository names.

The routes ``/<owner>/<name>/...`` would otherwise also match ``/-/login`` and the other pages
under ``/-/`` (owner ``-``). These converters accept only the characters names may contain
(:mod:`forge_ci.names` still checks the full rules), so ``-`` is never an owner.
"""

from __future__ import annotations

from flask import Flask
from werkzeug.routing import BaseConverter


class OwnerConverter(BaseConverter):
    regex = r"[a-z0-9][a-z0-9-]{0,38}"


class RepositoryNameConverter(BaseConverter):
    regex = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"


def init_app(app: Flask) -> None:
    app.url_map.converters["owner"] = OwnerConverter
    app.url_map.converters["repo"] = RepositoryNameConverter
