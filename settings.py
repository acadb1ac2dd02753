"""statekeeper's one typed settings object, read from the environment (prefix
``STATEKEEPER_``; ``ANTHROPIC_API_KEY`` as is). Only ``worker.py`` and the starter
read it; workflows never do."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from workflows.options import DEFAULT_WRITE_TIMEOUT_SECONDS


class Settings(BaseSettings):
    """Settings of the worker, the CLI and the embedded dev server.

    Durations are seconds. ``database_url`` is any SQLAlchemy URL; the embedded default is
    a SQLite file under ``data_dir``. With ``anthropic_api_key`` unset the model is the
    offline stand-in, reached through the same Anthropic SDK code path.
    """

    model_config = SettingsConfigDict(env_prefix="STATEKEEPER_", extra="ignore")

    temporal_address: str = "127.0.0.1:7233"
    temporal_namespace: str = "default"
    task_queue: str = "statekeeper"
    data_dir: Path = Path(".statekeeper")
    database_url: Optional[str] = None
    ui_port: int = 8233

    anthropic_api_key: Optional[str] = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "STATEKEEPER_ANTHROPIC_API_KEY")
    )
    anthropic_base_url: Optional[str] = None
    model: str = "claude-sonnet-4-5"
    offline_model_name: str = "statekeeper-offline-stand-in"
    model_max_tokens: int = 1024
    model_timeout_seconds: float = 50.0

    write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS
    max_concurrent_activities: int = 64
    max_concurrent_workflow_tasks: int = 64

    sandbox_project_modules: bool = False
    """True: the project's workflow modules load inside the workflow sandbox in every run
    (strict, slower; the tests run so); False: they are passed through (see ``worker``)."""

    def resolved_database_url(self) -> str:
        """The database URL; defaults to ``sqlite:///<data_dir>/statekeeper.sqlite``."""
        if self.database_url:
            return self.database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'statekeeper.sqlite').resolve()}"

    @property
    def offline(self) -> bool:
        """True when no Anthropic API key is configured: the offline stand-in model answers."""
        return not self.anthropic_api_key
