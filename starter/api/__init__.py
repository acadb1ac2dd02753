"""The HTTP API for backend services: the FastAPI app (``app``), its routes by subject,
request and response models, authentication and request-body guards, and its server.

``uvicorn starter.api:app`` serves it; the app is built on first use (``starter.api.app``).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # ``starter.api:app`` for uvicorn and the compose file, without building the app when
    # only a submodule (models, auth) is imported.
    if name == "app":
        from starter.api.app import app as served

        # Importing the submodule binds its module to this package's ``app``, and uvicorn looks
        # the name up twice (it checks the import before it loads the app): from here on the name
        # is the served app, never the module (served as an ASGI2 app, every request a 500).
        globals()["app"] = served
        return served
    raise AttributeError(f"module 'starter.api' has no attribute {name!r}")
