"""The least-privilege server of the security tests, for the clients run against it."""

from tests.security.conftest import admin_bus, secure

__all__ = ["admin_bus", "secure"]
