"""The HTTP API for backend services: the FastAPI app (``app``), its routes by subject,
request and response models, authentication and request-body guards, and its server.

``uvicorn starter.api:app`` serves it; the app is built on first use (``starter.api.application``).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # ``starter.api:app`` for uvicorn and the compose file, without building the app when
    # only a submodule (models, auth) is imported.
    if name == "app":
        from starter.api.application import app

        return app
    raise AttributeError(f"module 'starter.api' has no attribute {name!r}")
