"""The server the provider works for: its origin, and HTTP connections to it.

``--server`` is an origin only (``http://127.0.0.1:8080``, ``https://ci.example.org``): no path,
query, fragment or credentials, so the provider can never be pointed at a URL that smuggles
anything into the requests it builds. HTTPS uses the system's trust store. Plain ``http://``
sends the provider token and every job's source unencrypted, so it needs ``allow_http``
(``forge-ci provider run --allow-http``, for development and a server on the same machine).
"""

from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from forge_ci.errors import ConfigurationError


@dataclass(frozen=True)
class Server:
    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str, *, allow_http: bool = False) -> Server:
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as exc:
            raise ConfigurationError(f"--server {url!r} is not a URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise ConfigurationError(f"--server {url!r} must start with http:// or https://")
        if not parts.hostname:
            raise ConfigurationError(f"--server {url!r} names no host")
        if parts.scheme == "http" and not allow_http:
            raise ConfigurationError(
                f"--server {url!r} is plain http://, which sends the provider token and every "
                "job's source unencrypted; use https://, or pass --allow-http (development, or "
                "a server on this machine)"
            )
        if parts.username or parts.password:
            raise ConfigurationError(f"--server {url!r} must not hold credentials")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigurationError(
                f"--server {url!r} must be an origin only (scheme, host and port), no path"
            )
        default = 443 if parts.scheme == "https" else 80
        return cls(parts.scheme, parts.hostname, port or default)

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        """A new connection (nothing is sent until a request is made)."""
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
