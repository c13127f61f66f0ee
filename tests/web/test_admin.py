"""Administration is for site administrators only."""

from __future__ import annotations

import pytest

from tests.web.people import ROLES

ADMIN_PAGES = ["/-/admin", "/-/admin/pipelines/providers"]


@pytest.mark.parametrize("page", ADMIN_PAGES)
@pytest.mark.parametrize("name", ["anonymous", *ROLES])
def test_only_site_administrators_reach_administration(as_person, name: str, page: str) -> None:  # type: ignore[no-untyped-def]
    response = as_person(name).get(page)
    if name == "anonymous":
        assert response.status_code == 302
        assert response.headers["Location"].startswith("/-/login?next=/-/admin")
    elif name == "sam":
        assert response.status_code == 200
    else:
        assert response.status_code == 403
        assert "only site administrators" in response.get_data(as_text=True)


@pytest.mark.parametrize("name", list(ROLES))
def test_the_administration_link_is_shown_only_to_site_administrators(as_person, name: str) -> None:  # type: ignore[no-untyped-def]
    body = as_person(name).get("/").get_data(as_text=True)
    assert ('href="/-/admin"' in body) == (name == "sam")


def test_the_users_page_lists_every_user(as_person) -> None:  # type: ignore[no-untyped-def]
    body = as_person("sam").get("/-/admin").get_data(as_text=True)
    for name in ROLES:
        assert f"<td>{name}</td>" in body
