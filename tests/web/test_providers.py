"""Provider administration in the browser UI: site administrators only."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from forge_ci.coordinator.credentials import token_hash
from forge_ci.db import Database
from forge_ci.models import Provider
from tests.web.people import ROLES

PAGE = "/-/admin/pipelines/providers"


def _provider(database: Database, name: str = "docker-1") -> Provider | None:
    with database.session() as session:
        provider = session.scalar(select(Provider).where(Provider.name == name))
        if provider is not None:
            session.expunge(provider)
        return provider


def _grants(database: Database, name: str = "docker-1") -> list[int]:
    with database.session() as session:
        provider = session.scalar(select(Provider).where(Provider.name == name))
        assert provider is not None
        return sorted(g.repository_id for g in provider.grants)


def _create(browser, **fields: str):  # type: ignore[no-untyped-def]
    form = {"name": "docker-1", "labels": "self-hosted,linux", "scope": "selected"}
    form.update(fields)
    return browser.post(PAGE, form)


def test_creating_a_provider_shows_its_token_once(as_person, database: Database) -> None:  # type: ignore[no-untyped-def]
    sam = as_person("sam")
    response = sam.client.post(
        PAGE,
        data={
            "csrf_token": sam.token(),
            "name": "docker-1",
            "labels": "Self-Hosted, linux",
            "scope": "selected",
            "repositories": ["olivia/app", "otto/other"],
        },
    )
    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    token = re.search(r'id="new-token">([0-9a-f]{64})<', response.get_data(as_text=True))
    assert token is not None
    provider = _provider(database)
    assert provider is not None
    assert provider.token_hash == token_hash(token.group(1))
    assert provider.labels == "linux,self-hosted"
    assert len(_grants(database)) == 2
    again = sam.get(PAGE).get_data(as_text=True)
    assert token.group(1) not in again
    assert "docker-1" in again and "last contact never" in again


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"labels": "linux"}, "labels must include self-hosted"),
        ({"labels": "self-hosted"}, "exactly one of linux or windows"),
        ({"name": "-bad"}, "invalid provider name"),
        ({"scope": "some"}, "invalid scope"),
    ],
)
def test_a_bad_provider_is_refused_with_the_form_kept(
    as_person,  # type: ignore[no-untyped-def]
    database: Database,
    fields: dict[str, str],
    message: str,
) -> None:
    response = _create(as_person("sam"), **fields)
    assert response.status_code == 400
    body = response.get_data(as_text=True)
    assert message in body
    assert 'id="new-token"' not in body
    assert _provider(database, fields.get("name", "docker-1")) is None


def test_labels_access_pause_resume_and_revoke(as_person, database: Database) -> None:  # type: ignore[no-untyped-def]
    sam = as_person("sam")
    _create(sam, repositories="olivia/app")
    response = sam.post(f"{PAGE}/docker-1/labels", {"labels": "self-hosted,linux,gpu"})
    assert response.status_code == 302
    provider = _provider(database)
    assert provider is not None and provider.labels == "gpu,linux,self-hosted"
    refused = sam.post(f"{PAGE}/docker-1/labels", {"labels": "gpu"})
    assert refused.status_code == 400 and "self-hosted" in refused.get_data(as_text=True)
    sam.post(f"{PAGE}/docker-1/access", {"scope": "all"})
    provider = _provider(database)
    assert provider is not None and provider.scope == "all" and _grants(database) == []
    sam.post(f"{PAGE}/docker-1/pause")
    provider = _provider(database)
    assert provider is not None and provider.state == "paused"
    sam.post(f"{PAGE}/docker-1/resume")
    provider = _provider(database)
    assert provider is not None and provider.state == "active"
    unconfirmed = sam.post(f"{PAGE}/docker-1/revoke")
    assert unconfirmed.status_code == 400
    sam.post(f"{PAGE}/docker-1/revoke", {"confirm": "yes"})
    provider = _provider(database)
    assert provider is not None and provider.state == "revoked"
    assert sam.post(f"{PAGE}/docker-1/resume").status_code == 409
    assert sam.post(f"{PAGE}/nobody/pause").status_code == 404


@pytest.mark.parametrize("name", [n for n in ROLES if n != "sam"])
def test_nobody_else_may_manage_providers(as_person, database: Database, name: str) -> None:  # type: ignore[no-untyped-def]
    _create(as_person("sam"))
    person = as_person(name)
    assert _create(person, name="mine").status_code == 403
    assert _provider(database, "mine") is None
    assert person.post(f"{PAGE}/docker-1/pause").status_code == 403
    assert person.post(f"{PAGE}/docker-1/revoke", {"confirm": "yes"}).status_code == 403
    provider = _provider(database)
    assert provider is not None and provider.state == "active"


def test_anonymous_visitors_are_sent_to_login_and_forged_forms_refused(
    as_person,  # type: ignore[no-untyped-def]
    database: Database,
) -> None:
    anonymous = as_person("anonymous")
    response = _create(anonymous)
    assert response.status_code == 302 and "/-/login" in response.headers["Location"]
    sam = as_person("sam")
    forged = sam.client.post(PAGE, data={"name": "x1", "labels": "self-hosted,linux"})
    assert forged.status_code == 400
    assert _provider(database, "x1") is None


def test_the_page_shows_the_egress_policy_each_provider_reported(
    as_person, database: Database
) -> None:  # type: ignore[no-untyped-def]
    sam = as_person("sam")
    assert _create(sam).status_code == 201
    assert "not reported yet" in sam.get(PAGE).get_data(as_text=True)
    with database.session() as session:
        provider = session.scalar(select(Provider).where(Provider.name == "docker-1"))
        assert provider is not None
        provider.egress_policy = "allow-list: pypi.org:443, <10.0.0.0/8>; loopback ... denied"
        session.commit()
    body = sam.get(PAGE).get_data(as_text=True)
    assert 'class="egress-policy">allow-list: pypi.org:443, &lt;10.0.0.0/8&gt;; loopback' in body
    assert "not reported yet" not in body
