"""Home, repository and pipelines pages for every kind of visitor."""

from __future__ import annotations

import pytest

from tests.web.people import EVERYONE, READERS, ROLES, Browser


def test_anonymous_visitors_are_sent_to_the_login_page(browser: Browser) -> None:
    response = browser.get("/")
    assert response.status_code == 302
    assert response.headers["Location"] == "/-/login?next=/"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("olivia", ["olivia/app"]),
        ("rita", ["olivia/app"]),
        ("will", ["olivia/app"]),
        ("adam", ["olivia/app"]),
        ("sam", ["olivia/app", "otto/other"]),
        ("otto", ["otto/other"]),
    ],
)
def test_home_lists_exactly_the_repositories_a_person_can_read(
    as_person,
    name: str,
    expected: list[str],  # type: ignore[no-untyped-def]
) -> None:
    body = as_person(name).get("/").get_data(as_text=True)
    for full_name in ("olivia/app", "otto/other"):
        assert (f'href="/{full_name}"' in body) == (full_name in expected), full_name


@pytest.mark.parametrize("name", EVERYONE)
@pytest.mark.parametrize("page", ["/olivia/app", "/olivia/app/pipelines"])
def test_repository_pages_are_404_for_those_who_cannot_read(
    as_person,
    name: str,
    page: str,  # type: ignore[no-untyped-def]
) -> None:
    response = as_person(name).get(page)
    if name in READERS:
        assert response.status_code == 200
        body = response.get_data(as_text=True)
        assert "olivia/app" in body
        assert 'href="/olivia/app/pipelines"' in body
    else:
        assert response.status_code == 404
        body = response.get_data(as_text=True)
        # Exactly what a repository that does not exist answers: nothing tells them apart.
        unknown = as_person(name).get(page.replace("/app", "/nope")).get_data(as_text=True)
        assert body == unknown.replace("olivia/nope", "olivia/app")
        assert ("Sign in" in body) == (name == "anonymous")


@pytest.mark.parametrize("name", READERS)
def test_the_repository_page_shows_the_visitors_role(as_person, name: str) -> None:  # type: ignore[no-untyped-def]
    body = as_person(name).get("/olivia/app").get_data(as_text=True)
    role = ROLES[name]
    assert role is not None
    assert f'<span class="badge">{role.label}</span>' in body
    assert "git clone ssh://git@" in body


@pytest.mark.parametrize(
    "path", ["/olivia/nope", "/nobody/app", "/Olivia/app", "/olivia/..", "/olivia/app.git"]
)
def test_unknown_and_malformed_repositories_are_404(as_person, path: str) -> None:  # type: ignore[no-untyped-def]
    assert as_person("sam").get(path).status_code == 404
