"""statekeeper's one typed settings object, read from the environment (prefix
``STATEKEEPER_``; ``ANTHROPIC_API_KEY`` as is). Only ``worker.py`` and the starter
read it; workflows never do."""

from __future__ import annotations

import os
import secrets
from decimal import Decimal
from pathlib import Path
from typing import Literal, Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from settings.types import (MAX_SLOTS, MAX_WAIT_SECONDS, DatabaseUrl, HostPort, HttpUrl, MemoryKind, Name, Origins,
                            RetentionDays, Seconds, Slots, Tenant)



def write_private_once(path: Path, content: str) -> None:
    """Create ``path`` (mode 0600, its folder if missing) holding ``content``, unless it
    exists. Written whole under a private name, then linked into place: a process starting
    at the same moment sees either no file or the whole content, never a partial one; if
    another process made it first, theirs stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(content)
    try:
        os.link(partial, path)
    except FileExistsError:
        pass
    finally:
        partial.unlink()

MAX_DAYS = 36500
"""The longest retention period (100 years) the settings and the commands' ``--older-than-days``
take: a larger one (``1e308``) overflowed the date arithmetic into a traceback, and in a
schedule failed every purge."""
OFFLINE_ACTIVITY_SLOTS = 16
PROVIDER_ACTIVITY_SLOTS = 64


class TenantLimits(BaseModel):
    """One tenant's limits: open conversations at once and tokens a day (UTC); None: none."""

    model_config = ConfigDict(extra="forbid")

    open_conversations: Optional[int] = Field(default=None, ge=1)
    daily_tokens: Optional[int] = Field(default=None, ge=1)


class Settings(BaseSettings):
    """Settings of the worker, the CLI and the embedded dev server.

    Durations are seconds. ``database_url`` is any SQLAlchemy URL; the embedded default is
    a SQLite file under ``data_dir``. With ``anthropic_api_key`` unset the model is the
    offline stand-in, reached through the same Anthropic SDK code path.
    """

    model_config = SettingsConfigDict(env_prefix="STATEKEEPER_", extra="ignore")

    temporal_address: HostPort = "127.0.0.1:7233"
    temporal_namespace: Name = "default"
    task_queue: Name = "statekeeper"
    data_dir: Path = Path(".statekeeper")
    """Resolved to an absolute path at load, so every process started for it agrees on it."""
    database_url: Optional[DatabaseUrl] = None
    journal_url: Optional[DatabaseUrl] = None
    """SQLAlchemy URL of the journal (decision log and transcript; ``activities.journal``), our
    own store, never the system of record. None: ``sqlite:///<data_dir>/journal.sqlite``."""
    ui_port: int = Field(default=8233, ge=1, le=65535)
    web_ui_url: Optional[HttpUrl] = None
    """The Temporal Web UI's address as supervisors' browsers reach it: the approvals inbox
    (``/ui/approvals``) links each approval's run there. None: the embedded one,
    ``http://127.0.0.1:<ui_port>``."""
    dev_state_file: Optional[Path] = None
    """Where a detached ``statekeeper dev`` records its settings for commands started from any
    directory (``starter.dev.state``). None: ``$XDG_STATE_HOME/statekeeper/dev.json``, else
    ``~/.local/state/statekeeper/dev.json``."""

    anthropic_api_key: Optional[str] = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "STATEKEEPER_ANTHROPIC_API_KEY")
    )
    anthropic_base_url: Optional[HttpUrl] = None
    """The Messages API's base URL (None: the SDK's default). Checked at load: any string was
    taken, and every model call of the worker then failed as a connection error (retried as the
    provider being unavailable) instead of the worker refusing to start."""
    model: Name = "claude-sonnet-4-5"
    offline_model_name: str = "statekeeper-offline-stand-in"
    model_max_tokens: int = Field(default=1024, ge=1, le=1_000_000)
    model_timeout_seconds: Seconds = 50.0
    token_budget: Optional[int] = Field(default=None, ge=1)
    """Tokens one conversation's model calls may use in all (input, cache reads and writes,
    output); past it the conversation is handed to a human agent. None (default): no budget."""
    model_calls: Literal["activity", "local"] = "activity"
    """How conversations started by this client run their model calls: ``activity`` (default:
    heartbeating activities that a newer message or a cancel interrupts at once) or ``local``
    (local activities: fewer server tasks per turn; see ``SupportInput.local_model_calls``)."""

    write_timeout_seconds: float = Field(default=30.0, gt=0, le=MAX_WAIT_SECONDS,
                                         allow_inf_nan=False)
    """Start-to-close timeout of a write activity, in seconds; the default is the workflows' own
    (``workflows.options.DEFAULT_WRITE_TIMEOUT_SECONDS``, held equal by the settings tests). Zero or less is refused here: taken as no
    timeout at all, it failed the refund child's workflow task at every attempt and hung the
    conversation."""
    max_concurrent_activities: Optional[Slots] = None
    """Activity slots of a worker (and threads of its activity pool). None: ``activity_slots``
    picks by what an activity waits for."""
    max_concurrent_workflow_tasks: Slots = 64
    sticky_schedule_to_start_seconds: float = Field(default=1.0, gt=0, le=60)
    """How long a conversation's workflow task waits on the sticky queue of the worker that last
    ran it before any worker may take it (``workflows.options.STICKY_SCHEDULE_TO_START``)."""
    max_cached_workflows: int = Field(default=1000, ge=0, le=MAX_SLOTS)
    """Conversations a worker keeps in memory between their messages (the SDK's default); a
    message to one evicted from it costs a replay of its run's history (bench/turns/idle.py)."""

    api_host: Name = "127.0.0.1"
    api_port: int = Field(default=8000, ge=1, le=65535)
    """Where ``statekeeper dev`` serves the HTTP API (``statekeeper api`` takes --host/--port)."""

    approval_threshold: Decimal = Field(default=Decimal("500.00"), ge=0)
    """Refund-type writes moving more than this (decimal currency) wait for a supervisor. Both
    approval settings have the bounds of ``workflows.domain.policy.approvals.ApprovalPolicy``, so a value it
    would refuse is an invalid setting here, not a traceback where a client is made."""
    approval_timeout_seconds: float = Field(default=24 * 3600.0, gt=0, le=366 * 86400.0)
    """An undecided approval is escalated to a human ticket after this long."""

    rpc_timeout_seconds: Seconds = 10.0
    """Deadline of one client RPC to Temporal (API and CLI calls; ``starter.client.core.Deadlines``)."""
    update_accept_seconds: Seconds = 5.0
    """An update (a message, a decision) not accepted by a worker within this is checked
    against the task queue's pollers: no worker → a ``no_worker`` refusal (HTTP 503)."""
    reply_timeout_seconds: Seconds = 120.0
    """The longest a client waits for a reply to a message (HTTP 504 after it; resending the
    same message id returns the reply once it exists)."""

    pseudonym_key: Optional[SecretStr] = None
    """Key of the ``CustomerId`` pseudonyms (``workflows.domain.pseudonym``). None: a random key
    kept in ``<data_dir>/pseudonym.key`` (created 0600 on first use)."""

    codec_enabled: bool = True
    """Payload encryption (``starter.runtime.codec``): every payload sent to Temporal is AES-GCM encrypted."""
    codec_keys: Optional[SecretStr] = None
    """``id:base64key,...`` (16/24/32-byte AES keys). None: ``<data_dir>/codec.keys``, which
    ``statekeeper dev`` creates (0600) when missing; other processes refuse to start without a key."""
    codec_key_id: Optional[str] = None
    """The key that encrypts (the others only decrypt: rotation). None: the first listed."""
    codec_compress: bool = True
    """Compress payloads before sealing them (``starter.runtime.codec``). Every release since it decodes
    both; set false while processes of an older release still serve the task queue."""
    codec_port: int = Field(default=8234, ge=1, le=65535)
    """Where ``statekeeper dev`` serves the codec server for the Web UI (``codec-server --port``)."""
    codec_cors_origins: Optional[Origins] = None
    """Comma-separated origins allowed to call the codec server. None: the embedded Web UI
    (``http://127.0.0.1:<ui_port>``, ``http://localhost:<ui_port>``)."""

    # --- API authentication and tenancy (activities.store.api_keys, starter.api.auth, starter.client.tenancy) ---
    default_tenant: Tenant = "default"
    """The tenant of every store not in ``store_tenants``, of runs started without a ``Tenant``
    (by the CLI, τ-bench, or before tenancy existed) and of the keyless loopback API."""
    store_tenants: dict[str, Tenant] = {}
    """Store → tenant (JSON in ``STATEKEEPER_STORE_TENANTS``, e.g. ``{"acme-eu": "acme"}``); a
    store not listed (``main`` by default) belongs to ``default_tenant``."""
    api_requests_per_minute: int = Field(default=600, ge=1, le=1_000_000)
    """Requests a minute each API key may send (a burst of this many at once, then one every
    60/N s), unless the key has its own (``statekeeper keys create --requests-per-minute``);
    past it the API answers 429 with ``Retry-After``. Shared by every API process on the same
    journal database (``activities.store.limits``). The keyless loopback API is not limited."""
    tenant_open_conversations: Optional[int] = Field(default=None, ge=1)
    """Conversations each tenant may have open at once through the API; starting one more is a
    429. None (default): no limit. ``tenant_limits`` sets it per tenant."""
    tenant_daily_tokens: Optional[int] = Field(default=None, ge=1)
    """Tokens each tenant's conversations' model calls may use per day (UTC), across all of
    them; at it, a message is answered without a model call. None (default): no cap.
    ``tenant_limits`` sets it per tenant."""
    tenant_activities_per_second: Optional[float] = Field(default=None, gt=0, le=1_000_000)
    """Activity tasks of one tenant (fairness key) the task queue hands out per second at most,
    set on the task queue by each worker at start (``starter.runtime.fairness.cap_tenant_dispatch``):
    below the queue's capacity, a tenant that would fill every activity slot leaves some for
    the others. None (default): the task queue's setting is left as it is."""
    tenant_limits: dict[Tenant, TenantLimits] = {}
    """Tenant → its own limits (JSON in ``STATEKEEPER_TENANT_LIMITS``, e.g. ``{"acme":
    {"open_conversations": 50, "daily_tokens": 2000000}}``); a field left out takes the
    ``tenant_open_conversations`` / ``tenant_daily_tokens`` default."""
    api_key_secret: Optional[SecretStr] = None
    """Server secret of the API keys' HMAC-SHA256 digests (``activities.store.api_keys``). None: a random
    secret kept in ``<data_dir>/api-key.secret`` (0600, made on first use)."""
    retention_days: Optional[float] = Field(default=None, gt=0, le=MAX_DAYS)
    """Closed conversations older than this many days are purged by ``statekeeper retention
    purge`` and its schedule (``activities.erasure``). None (default): retention is off."""
    memory_enabled: bool = True
    """True (default): conversations read what is remembered about their customer and may remember
    facts they confirm (``activities.memory_port``, docs/memory.md). False: nothing is remembered
    (the read answers "nothing", a write is refused)."""
    memory_retention_days: dict[MemoryKind, RetentionDays] = {}
    """Days a remembered fact of a kind is kept after its last confirmation (JSON in
    ``STATEKEEPER_MEMORY_RETENTION_DAYS``, e.g. ``{"open_complaint": 30}``); a kind not listed
    keeps its default (``workflows.domain.memory.RETENTION_DAYS``). A kind that is not one of the
    memory's, or a period outside 1 to 36,500 days, is refused when the settings are read."""

    # --- webhooks (activities.webhooks, workflows.webhooks; docs/webhooks.md) ---
    webhook_allow_loopback: bool = False
    """True: webhooks may be sent to loopback addresses (127.0.0.0/8, ::1): a receiver on the
    same machine. ``statekeeper dev`` turns it on for itself and the commands beside it."""
    webhook_allow_private: bool = False
    """True: webhooks may be sent to private addresses (10/8, 172.16/12, 192.168/16, 100.64/10,
    fc00::/7): receivers inside the deployment's own network. Link-local, multicast, reserved
    and unspecified addresses are never allowed."""
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=25, allow_inf_nan=False)
    """The longest one delivery attempt waits for the receiver (connect, send, status line)."""
    webhook_retry_initial_seconds: float = Field(default=5.0, gt=0, le=86400, allow_inf_nan=False)
    """The wait before a failed delivery's first retry; each next wait doubles."""
    webhook_retry_max_interval_seconds: float = Field(default=3600.0, gt=0, le=86400, allow_inf_nan=False)
    """The longest wait between two attempts of a delivery."""
    webhook_give_up_seconds: float = Field(default=25 * 3600.0, gt=0, le=30 * 86400, allow_inf_nan=False)
    """How long after its first attempt a delivery is retried before it is marked failed."""
    webhook_sweep_seconds: float = Field(default=30.0, ge=1, le=3600, allow_inf_nan=False)
    """How often the sweeper starts deliveries whose workflow a crash left unstarted."""

    payments_url: Optional[HttpUrl] = None
    email_url: Optional[HttpUrl] = None
    ticketing_url: Optional[HttpUrl] = None
    """Base URLs of the external payments, email and ticketing services (``systems/``; started
    by ``statekeeper dev``). None: no payments mirror, and emails and tickets go to the retail
    database's side channels (the tests' default)."""
    services_port: int = Field(default=8301, ge=1, le=65533)
    """``statekeeper dev`` serves payments, email and ticketing on this port and the next two."""
    services_timeout_seconds: Seconds = 10.0
    """Timeout of one request to an external service (also bounded by the activity's own)."""

    sandbox_project_modules: bool = False
    """True: the project's workflow modules load inside the workflow sandbox in every run
    (strict, slower; the tests run so); False: they are passed through (see ``worker``)."""
    workflow_sandbox: bool = True
    """False: the worker runs workflows without the sandbox (``worker.workflow_runner``): the
    guard against non-deterministic code then lives in CI alone (every workflow test and the
    replayer run fully sandboxed). It saves the sandbox's per-activation and per-payload cost
    (bench/turns.py measures both)."""

    # --- a secured Temporal (mTLS, API key) and telemetry: starter.runtime.connection, starter.runtime.telemetry ---
    temporal_tls: bool = False
    """True: TLS to Temporal with the system's root CAs (implied by any ``temporal_tls_*`` path
    or server name; with only ``temporal_api_key`` set the SDK turns TLS on itself)."""
    temporal_tls_server_ca_cert: Optional[Path] = None
    """PEM file of the CA that signed the server's certificate (None: the system's roots)."""
    temporal_tls_client_cert: Optional[Path] = None
    """PEM file of this client's certificate (mTLS; needs ``temporal_tls_client_key``)."""
    temporal_tls_client_key: Optional[Path] = None
    """PEM file of this client's private key (mTLS)."""
    temporal_tls_server_name: Optional[str] = None
    """Name to verify the server's certificate against (None: the address's host)."""
    temporal_api_key: Optional[SecretStr] = None
    """Temporal Cloud API key (sent as a bearer token; TLS on)."""
    otel_exporter_otlp_endpoint: Optional[HttpUrl] = None
    """OTLP/HTTP traces endpoint, e.g. ``http://otel-collector:4318/v1/traces``. None: spans are
    still made (the trace id of every log line) but exported nowhere."""
    otel_service_name: Name = "statekeeper"
    """The traces' ``service.name`` and the metrics' ``service_name`` tag: not blank (a blank one
    was taken, and exported spans and metrics named no service)."""
    metrics_prometheus_address: Optional[HostPort] = None
    """``host:port`` where the Temporal SDK's metrics are served for Prometheus (None: off)."""
    metrics_otlp_endpoint: Optional[HttpUrl] = None
    """OTLP/gRPC collector URL the SDK's metrics are pushed to, e.g. ``http://otel-collector:4317`` (None: off)."""

    @field_validator("temporal_tls_server_ca_cert", "temporal_tls_client_cert", "temporal_tls_client_key",
                     "temporal_tls_server_name", "temporal_api_key", "otel_exporter_otlp_endpoint",
                     "metrics_prometheus_address", "metrics_otlp_endpoint", "anthropic_base_url", "anthropic_api_key",
                     mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # compose passes an unset variable as "" (``${VAR:-}``): that means "not configured"; a
        # blank API key (" ") was taken for a provider's: every model call was sent with a blank key
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("pseudonym_key", "api_key_secret")
    @classmethod
    def _secret_not_blank(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        # a blank key was used as is (" ": pseudonyms anyone could compute) or failed later
        # (the worker's "a pseudonym key is required" traceback)
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("is set but blank: set it to a long random value, or unset it")
        return value

    @field_validator("data_dir", "dev_state_file", mode="before")
    @classmethod
    def _path_not_blank(cls, value: object) -> object:
        # Path("") is the working directory: a blank data dir put the databases and keys there
        if isinstance(value, str) and not value.strip():
            raise ValueError("is set but empty: unset it for the default, or name a path")
        return value

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, value: Path) -> Path:
        # a relative data dir means another database from another working directory
        return value.expanduser().resolve()

    def resolved_database_url(self) -> str:
        """The database URL; defaults to ``sqlite:///<data_dir>/statekeeper.sqlite``."""
        if self.database_url:
            return self.database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'statekeeper.sqlite').resolve()}"

    def resolved_journal_url(self) -> str:
        """The journal's URL; defaults to ``sqlite:///<data_dir>/journal.sqlite``."""
        if self.journal_url:
            return self.journal_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'journal.sqlite').resolve()}"

    def pseudonym_secret(self, create: bool = True) -> Optional[str]:
        """The pseudonym key: ``pseudonym_key``, else the data directory's key file (made
        on first use by the worker, mode 0600, so every process sharing the data directory
        agrees). ``create=False`` (clients): None when there is no key yet, never a new one
        that would match nothing the workers wrote."""
        if self.pseudonym_key is not None:
            return self.pseudonym_key.get_secret_value()
        return self._secret_file("pseudonym.key", create)

    def web_ui_base(self) -> str:
        """``web_ui_url`` without its trailing slash, else ``http://127.0.0.1:<ui_port>``."""
        return str(self.web_ui_url).rstrip("/") if self.web_ui_url is not None else f"http://127.0.0.1:{self.ui_port}"

    def api_key_hmac_secret(self, create: bool = True) -> Optional[str]:
        """The API keys' HMAC secret: ``api_key_secret``, else ``<data_dir>/api-key.secret``
        (made on first use, 0600). ``create=False``: None when there is none yet."""
        if self.api_key_secret is not None:
            return self.api_key_secret.get_secret_value()
        return self._secret_file("api-key.secret", create)

    def _secret_file(self, name: str, create: bool) -> Optional[str]:
        """The secret kept in ``<data_dir>/<name>``; made (0600) when missing and ``create``."""
        path = self.data_dir / name
        if not path.exists() and not create:
            return None
        if not path.exists():
            write_private_once(path, secrets.token_hex(32))
        return path.read_text().strip()

    def limits_of(self, tenant: str) -> TenantLimits:
        """``tenant``'s limits: its entry of ``tenant_limits``, each field left out taking the default."""
        own = self.tenant_limits.get(tenant, TenantLimits())
        return TenantLimits(
            open_conversations=own.open_conversations if "open_conversations" in own.model_fields_set
            else self.tenant_open_conversations,
            daily_tokens=own.daily_tokens if "daily_tokens" in own.model_fields_set else self.tenant_daily_tokens)

    def activity_slots(self) -> int:
        """``max_concurrent_activities``, or by default 16 with the offline stand-in, which answers
        on the worker's own CPU, and 64 with a provider, whose calls wait on the network. A worker
        that takes more CPU-bound activities than it can serve holds them up on its event loop
        until their heartbeats time out: 234 timeouts at 500 concurrent conversations with 64
        slots, 0 with 16, which also served more turns per CPU-second (bench/turns.py);
        a task left on the server waits on its schedule-to-start time, which is not limited."""
        if self.max_concurrent_activities is not None:
            return self.max_concurrent_activities
        return OFFLINE_ACTIVITY_SLOTS if self.offline else PROVIDER_ACTIVITY_SLOTS

    @property
    def offline(self) -> bool:
        """True when no Anthropic API key is configured: the offline stand-in model answers."""
        return not self.anthropic_api_key
