"""Thin clients of statekeeper: the Python client, the CLI, the τ-bench runner."""

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """The installed statekeeper's version (``pyproject.toml``), e.g. ``0.2.0.dev0``; the
    OpenAPI document and the image tag carry it. ``0+unknown`` when run uninstalled."""
    try:
        return version("statekeeper")
    except PackageNotFoundError:
        return "0+unknown"
