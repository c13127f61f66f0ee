"""Fixtures for the web front door: an application on each database, and its visitors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask

from forge_ci.db import Database
from forge_ci.settings import Settings
from tests.web.browser import chromium, live_server, page, screens  # noqa: F401 - fixtures
from tests.web.people import Browser, People, create_people
from tests.web.scenario import Pipelines, StandardRun, standard_run
from web import create_app


@pytest.fixture
def app(settings: Settings, database: Database) -> Iterator[Flask]:
    application = create_app(settings, database=database)
    application.testing = True
    yield application


@pytest.fixture
def people(app: Flask, database: Database, settings: Settings) -> People:
    return create_people(database, settings)


@pytest.fixture
def browser(app: Flask, database: Database, people: People) -> Browser:
    return Browser(app, database)


@pytest.fixture
def as_person(app: Flask, database: Database, people: People):  # type: ignore[no-untyped-def]
    """``as_person("rita")`` is a Browser signed in as rita ("anonymous": nobody)."""

    def make(name: str) -> Browser:
        return Browser(app, database).sign_in_as(name)

    return make


@pytest.fixture
def pipelines(settings: Settings, database: Database, people: People) -> Pipelines:
    return Pipelines(settings, database)


@pytest.fixture
def standard(pipelines: Pipelines) -> StandardRun:
    """Run #1: build succeeded, lint running with output, test queued (no gpu), deploy waiting."""
    return standard_run(pipelines)
