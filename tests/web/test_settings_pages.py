"""Settings -> Secrets over HTTP, for every person: who sees the pages, CSRF, refusals, and
that no answer ever carries a secret value."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.people import EVERYONE, ROLES
from tests.web.scenario import CI, WORKFLOW, Pipelines

PAGE = "/olivia/app/settings/secrets"
VALUE = "http-secret-value-0042"


@pytest.fixture
def committed(pipelines: Pipelines) -> Pipelines:
    pipelines.commit({CI: WORKFLOW})
    return pipelines


def add(person: Any, **extra: str) -> Any:
    form = {
        "name": "DEPLOY_TOKEN",
        "branch": "main",
        "workflow": CI,
        "version": "0",
        "value": VALUE,
        **extra,
    }
    return person.post(PAGE, form)


@pytest.mark.parametrize("name", EVERYONE)
def test_only_owners_and_admins_see_and_change_secrets(
    as_person: Any, committed: Pipelines, name: str
) -> None:
    person = as_person(name)
    role = ROLES.get(name)
    manages = role is not None and role.value >= 3
    page = person.get(PAGE)
    if name == "anonymous":
        assert page.status_code in (302, 303, 404)
    else:
        assert page.status_code == (200 if manages else 404)
    answer = add(person)
    assert answer.status_code == (303 if manages else 404) or name == "anonymous"
    listed = person.get(PAGE).get_data(as_text=True)
    assert VALUE not in listed and VALUE not in answer.get_data(as_text=True)
    if manages:
        assert "DEPLOY_TOKEN" in listed


def test_forms_need_the_csrf_token(as_person: Any, committed: Pipelines) -> None:
    olivia = as_person("olivia")
    answer = olivia.client.post(
        PAGE, data={"name": "X", "branch": "main", "workflow": CI, "version": "0", "value": VALUE}
    )
    assert answer.status_code == 400
    assert "No secrets yet" in olivia.get(PAGE).get_data(as_text=True)


def test_a_refused_form_keeps_its_metadata_and_never_echoes_the_value(
    as_person: Any, committed: Pipelines
) -> None:
    olivia = as_person("olivia")
    refused = add(olivia, name="1BAD")
    text = refused.get_data(as_text=True)
    assert refused.status_code == 400 and "must not start with a digit" in text
    assert 'value="1BAD"' in text and VALUE not in text
    assert add(olivia).status_code == 303
    stale = add(olivia)  # version 0 again: it exists now
    assert stale.status_code == 409 and "already exists" in stale.get_data(as_text=True)
    assert VALUE not in stale.get_data(as_text=True)
    unknown = olivia.get("/olivia/app/settings/nothing")
    assert unknown.status_code == 404
