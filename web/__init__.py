"""The web front door: browser pages, browser JSON endpoints and the runner API (Flask)."""

from web.app import create_app

__all__ = ["create_app"]
