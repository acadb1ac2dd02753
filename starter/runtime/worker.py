"""The one place that wires settings, clients and activities into a Temporal worker.

``python worker.py`` (or ``statekeeper worker``) runs a worker against the configured
Temporal server. The starter and the tests call ``build_worker`` / ``run_worker``;
tests inject their own ports (a fault-injecting wrapper, a fake system) or model.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxRestrictions

from activities.erasure.activity import RetentionActivities
from activities.erasure.service import DataErasure
from activities.identity import IdentityActivities
from activities.journal import JournalActivities
from activities.store.journal import JournalStore
from activities.memory_port import MemoryPort
from activities.store.memory import MemoryStore
from activities.llm.model_activity import ModelActivities, build_client, offline_client
from activities.retail_port import RetailPort
from activities.store.limits import TenantLedger
from activities.tenant_limits import TenantActivities
from activities.tools import ToolActivities
from settings import Settings
from activities.store.audit import AuditLog
from starter.runtime.fairness import cap_tenant_dispatch
from starter.runtime.connection import connect
from starter.runtime.logs import configure_logging
from starter.runtime.process_exit import exit_now
from starter.runtime.preflight import StartupRefused, check_task_queue, ensure_search_attributes
from starter.runtime.sandbox_runner import CompiledSandboxedWorkflowRunner
from starter.runtime.system_of_record import SERVICES, fingerprint, services_fingerprint, worker_identity
from systems.model.plans import PlanBook
from systems.retail.backend import RetailBackend, make_engine
from workflows.refund.workflow import RefundWorkflow
from workflows.retention.workflow import RetentionWorkflow
from workflows.webhooks.workflow import WebhookDeliveryWorkflow, WebhookSweepWorkflow
from workflows.options import GRACEFUL_SHUTDOWN
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain.pseudonym import customer_pseudonym

if TYPE_CHECKING:
    from activities.webhooks.delivery import WebhookActivities

log = logging.getLogger("statekeeper.worker")

PASSTHROUGH_MODULES = ("pydantic", "pydantic_core", "annotated_types", "typing_inspection")
"""Third-party modules shared with the workflow sandbox instead of re-imported per run."""
PROJECT_MODULES = ("workflows",)
"""The project's deterministic modules. Loading them inside the sandbox re-imports them, and
rebuilds every pydantic model of the catalogue, in each workflow run: the 500 τ-bench
training tasks took 647 s that way against 356 s passed through (README). So a worker passes them
through by default, and the test suite runs every workflow fully sandboxed
(``Settings.sandbox_project_modules``), where the sandbox checks them for non-determinism."""


def workflow_runner(sandbox_project_modules: bool = True, sandboxed: bool = True) -> WorkflowRunner:
    """The workflow sandbox with default restrictions. Third-party modules are passed
    through; the project's own (``PROJECT_MODULES``) load inside the sandbox when
    ``sandbox_project_modules`` (the strict mode the tests and the replayer use), else they
    are passed through too (the worker's default, for speed). ``sandboxed`` False: no sandbox
    (``Settings.workflow_sandbox``). The sandbox compiles its source strings once
    (``starter.runtime.sandbox_runner``)."""
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    shared = PASSTHROUGH_MODULES if sandbox_project_modules else PASSTHROUGH_MODULES + PROJECT_MODULES
    return CompiledSandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*shared))


def build_backend(settings: Settings) -> RetailBackend:
    """The retail system of record on the configured database; seeds store ``main`` once."""
    backend = RetailBackend(make_engine(settings.resolved_database_url()))
    backend.create_schema()
    if not backend.store_exists("main"):
        backend.seed_store("main")
    return backend


def build_model_activities(settings: Settings) -> ModelActivities:
    """The LLM activity: Anthropic when a key is set, else the offline stand-in behind
    the same SDK client (only the HTTP transport differs). The stand-in reads benchmark
    plans from its ``PlanBook`` on the worker's database, so every worker on the task
    queue sees a plan whichever process registered it."""
    if settings.offline:
        plans = PlanBook(make_engine(settings.resolved_database_url()))
        plans.create_schema()
        client = lambda: offline_client(settings.model_timeout_seconds, plans=plans)  # noqa: E731
        model = settings.offline_model_name
    else:
        client = lambda: build_client(  # noqa: E731  (the SDK's import waits for ModelActivities.warm)
            settings.anthropic_api_key, settings.anthropic_base_url, settings.model_timeout_seconds)
        model = settings.model
    return ModelActivities(client, model=model, max_tokens=settings.model_max_tokens)


def build_erasure(client: Client, settings: Settings, backend: Optional[RetailBackend] = None,
                  journal: Optional[JournalStore] = None) -> DataErasure:
    """Erasure and retention (``activities.erasure``) over ``settings``' system of record,
    journal and audit log (the journal's database), with the existing pseudonym key (never
    a new one: it would match no run)."""
    from activities.channels_http import HttpOutbox, HttpTickets

    url = settings.resolved_journal_url()
    channels = [*([HttpOutbox(settings.email_url)] if settings.email_url else []),
                *([HttpTickets(settings.ticketing_url)] if settings.ticketing_url else [])]
    return DataErasure(client, backend or build_backend(settings), journal or JournalStore(url), AuditLog(url),
                       pseudonym_key=settings.pseudonym_secret(create=False), channels=channels,
                       memory=MemoryStore(url))


def build_tool_activities(settings: Settings, backend: RetailBackend) -> ToolActivities:
    """The tool activities over the retail system and, when their URLs are set, the external
    payments, email and ticketing services (``activities.payments_port``,
    ``activities.channels_http``), with the dispatch log of the unknown-outcome protocol in
    the journal's database."""
    from activities.channels_http import HttpOutbox, HttpTickets
    from activities.payments_port import HttpPayments
    from activities.reconcile import DispatchLog

    port = RetailPort(backend)
    memory = build_memory_port(settings)
    external = settings.payments_url or settings.email_url or settings.ticketing_url
    log = DispatchLog(make_engine(settings.resolved_journal_url())) if external else None
    timeout = settings.services_timeout_seconds
    return ToolActivities(
        tools=port,
        outbox=HttpOutbox(settings.email_url, timeout, log) if settings.email_url else port,
        tickets=HttpTickets(settings.ticketing_url, timeout, log) if settings.ticketing_url else port,
        payments=HttpPayments(settings.payments_url, timeout, log) if settings.payments_url else None,
        memory=memory)


def build_memory_port(settings: Settings) -> Optional[MemoryPort]:
    """The memory tools' port (``activities.memory_port``) on the journal's database, naming
    customers by the worker's pseudonym key and stores by their tenant; None when
    ``settings.memory_enabled`` is off (nothing is remembered)."""
    if not settings.memory_enabled:
        return None
    key = settings.pseudonym_secret()
    url = settings.resolved_journal_url()
    return MemoryPort(lambda: MemoryStore(url), lambda user_id: customer_pseudonym(user_id, key),
                      lambda store: settings.store_tenants.get(store, settings.default_tenant),
                      retention_days=settings.memory_retention_days)


def tenant_activities(settings: Settings, journal: JournalStore) -> TenantActivities:
    """The tenant's daily budget activity over the journal's database (``activities.tenant_limits``)."""
    return TenantActivities(TenantLedger(journal.engine), lambda tenant: settings.limits_of(tenant).daily_tokens,
                            settings.default_tenant)


def build_webhook_activities(client: Client, settings: Settings, journal: JournalStore) -> "WebhookActivities":
    """The webhook delivery activities (``activities.webhooks``) on the journal's database, and
    the journal's hook that starts the delivery workflows of the events it stores, right after
    each commit (``activities.webhooks.starts``), from this event loop."""
    from activities.webhooks.delivery import WebhookActivities
    from starter.runtime.webhooks import allowance, delivery_starter, webhook_store

    store = webhook_store(settings)
    starter = delivery_starter(client, settings, store)
    try:
        starter.bind()
    except RuntimeError:
        pass  # no running loop: the sweeper starts the deliveries
    journal.on_deliveries = starter.notify
    return WebhookActivities(store, starter, allowance(settings), settings.webhook_timeout_seconds)


def build_worker(client: Client, settings: Settings, backend: Optional[RetailBackend] = None,
                 model: Optional[ModelActivities] = None, tools: Optional[ToolActivities] = None,
                 identity: Optional[IdentityActivities] = None, journal: Optional[JournalStore] = None) -> Worker:
    """A worker for both workflows and all activities on ``settings.task_queue``.
    ``backend``, ``model``, ``tools``, ``identity`` and ``journal`` default to the ones ``settings``
    describe (tests pass their own, e.g. ``ToolActivities`` over a fault-injecting port).
    The journal (decision log and transcript, ``settings.resolved_journal_url()``) gets the
    model's calls (unless ``model`` brings its own journal) and the workflows' turn records.
    The pseudonym key reaches only ``IdentityActivities``, never a workflow. The worker's
    Temporal identity carries the fingerprint of ``settings``' database
    (``starter.runtime.system_of_record``), which ``preflight`` of the next worker on the queue
    compares with its own."""
    if tools is None:
        backend = backend or build_backend(settings)
        tools = build_tool_activities(settings, backend)
    sor = fingerprint(settings.resolved_database_url())
    tools.system_of_record = sor  # processes bind to it; calls bound to another database are refused
    model = model or build_model_activities(settings)
    journal = journal or JournalStore(settings.resolved_journal_url())
    journal.default_tenant = settings.default_tenant
    webhooks = build_webhook_activities(client, settings, journal)
    if model.journal is None:
        model.journal = journal
    if model.turn_records is None:
        model.turn_records = journal
    identity = identity or IdentityActivities(settings.pseudonym_secret())
    return Worker(
        client,
        task_queue=settings.task_queue,
        identity=worker_identity(sor, configured_services(settings)),
        workflows=[SupportWorkflow, RefundWorkflow, RetentionWorkflow, WebhookDeliveryWorkflow, WebhookSweepWorkflow],
        activities=[model.propose_action, *tools.all(), *identity.all(), *JournalActivities(journal).all(),
                    *tenant_activities(settings, journal).all(),
                    *RetentionActivities(lambda: build_erasure(client, settings, backend, journal)).all(),
                    *webhooks.all()],
        workflow_runner=workflow_runner(settings.sandbox_project_modules, settings.workflow_sandbox),
        # reads, the store check and (an option) model calls are local activities: the same bound
        max_concurrent_activities=settings.activity_slots(),
        max_concurrent_local_activities=settings.activity_slots(),
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
        max_cached_workflows=settings.max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_schedule_to_start_seconds),
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )


async def preflight(client: Client, settings: Settings, *, serving: bool = True) -> None:
    """Checks before this process uses the server (``starter.runtime.preflight``): registers missing
    search attributes and, when ``serving`` (a worker is about to poll), refuses a task queue
    whose live workers serve another system of record. Raises ``StartupRefused`` with a message
    for the user."""
    await ensure_search_attributes(client, settings.temporal_namespace)
    if serving:
        await check_task_queue(client, settings.temporal_namespace, settings.task_queue,
                               fingerprint(settings.resolved_database_url()), services=configured_services(settings))
        if settings.tenant_activities_per_second is not None:  # one tenant's burst leaves slots for the others
            await cap_tenant_dispatch(client, settings.task_queue, settings.tenant_activities_per_second)


def _storage_refused(err: Exception, settings: Settings) -> BaseException:
    """``StartupRefused`` saying in one line what is wrong with the database ``err`` came from
    (``starter.runtime.problems.storage_problem``); ``err`` itself when it is no storage failure."""
    from starter.runtime.problems import storage_problem

    what = ("the system of record (STATEKEEPER_DATABASE_URL)" if settings.database_url
            else f"the system of record {settings.data_dir / 'statekeeper.sqlite'}")
    problem = storage_problem(err, what)
    return err if problem is None else StartupRefused(problem)


JOURNAL_CHECK_SECONDS = 15.0
"""How long the start waits for the journal's database (its own connect timeout is 5 s)."""
WITHOUT_JOURNAL = ("the worker goes on without it: conversations run, but no decision log or transcript is written, "
                   "tenants' daily token budgets are not enforced and external calls go without their dispatch log "
                   "until it answers")


async def check_journal(journal: JournalStore, seconds: float = JOURNAL_CHECK_SECONDS) -> Optional[str]:
    """Bring the journal's schema up at start (``JournalStore.ready``) and, when its database
    cannot be used, log one warning line naming it (its URL without the password, never the
    driver's text or a traceback) and return it; None when it answered. The worker goes on
    either way: the journal is an audit record, and conversations never wait for it
    (docs/concepts.md, "Decision log and transcript")."""
    from starter.runtime.problems import storage_problem

    try:
        await asyncio.wait_for(asyncio.to_thread(journal.ready), seconds)
        return None
    except asyncio.TimeoutError:
        problem = None
        said = f"did not answer within {seconds:g} s"
    except Exception as err:  # noqa: BLE001 - any failure of an optional store is warned of, not raised
        problem, said = storage_problem(err, ""), "could not be used"
    where = f"the journal database {journal.engine.url.render_as_string(hide_password=True)}"
    warning = f"{where} {(problem or said).strip()}; {WITHOUT_JOURNAL}"
    log.warning("%s", warning)
    return warning


def configured_services(settings: Settings) -> str:
    """The services fingerprint of ``settings``' payments, email and ticketing URLs, which
    every worker of a task queue must share (``starter.runtime.preflight.check_task_queue``)."""
    return services_fingerprint({name: getattr(settings, f"{name}_url") for name in SERVICES})


async def run_worker(settings: Optional[Settings] = None, tools: Optional[ToolActivities] = None,
                     model: Optional[ModelActivities] = None) -> None:
    """Connect, run ``preflight``, then run a worker until cancelled (``tools``/``model``: see
    ``build_worker``). Raises ``StartupRefused`` before polling when the server or the task
    queue does not fit."""
    settings = settings or Settings()
    client = await connect(settings)
    await preflight(client, settings)
    journal = JournalStore(settings.resolved_journal_url())
    await check_journal(journal)
    from starter.runtime.webhooks import ensure_sweeper

    await ensure_sweeper(client, settings)
    try:
        model = model or build_model_activities(settings)
        worker = build_worker(client, settings, tools=tools, model=model, journal=journal)
    except Exception as err:  # noqa: BLE001 - only storage failures are translated; the rest re-raised
        # an unreachable or damaged system of record ended the worker with a page of
        # SQLAlchemy traceback (psycopg's "connection failed") instead of what to fix
        refused = _storage_refused(err, settings)
        if refused is err:
            raise
        raise refused from None
    # one thread per activity slot and per local activity slot: an activity that got a slot
    # never queues for a thread (the default pool has cores + 4 threads) while its timer runs
    loop = asyncio.get_running_loop()
    loop.set_default_executor(
        ThreadPoolExecutor(max_workers=2 * settings.activity_slots(), thread_name_prefix="activity"))
    # polling first: the model's SDK (seconds of imports) loads meanwhile; a restarted worker
    # can replay and run reads and writes before it is there (the first model call waits for it)
    loop.call_soon(loop.run_in_executor, None, model.warm)
    log.info("worker polling %s on %s (offline model: %s)", settings.task_queue, settings.temporal_address,
             settings.offline)
    await run_until_signalled(worker)


async def run_until_signalled(worker: Worker) -> None:
    """Run ``worker`` until it fails or SIGTERM/SIGINT arrives; then shut it down gracefully
    (``GRACEFUL_SHUTDOWN``: no new tasks are polled, running activities get that long to
    finish, then they are cancelled). Outside the main thread signals are not caught and only
    cancellation stops the worker."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    caught = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            caught.append(sig)
        except (ValueError, RuntimeError, NotImplementedError):
            pass  # not the main thread (or no signal support): the caller cancels instead
    running = asyncio.ensure_future(worker.run())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            log.info("signal received: shutting down (activities get %.0f s to finish)",
                     GRACEFUL_SHUTDOWN.total_seconds())
            await worker.shutdown()
        await running
    finally:
        stopping.cancel()
        for sig in caught:
            loop.remove_signal_handler(sig)


def main(run: Optional[Callable[[], Awaitable[None]]] = None) -> None:
    """``python worker.py``: run a worker (``run()``, default ``run_worker()``) until
    SIGTERM/SIGINT. Exits 2 when startup is refused. After a graceful shutdown the process
    exits at once, without joining the threads still running a database call (a write stuck
    on a lock would otherwise hold the exit for ever): a write's transaction either committed,
    and its retry with the same idempotency key finds the ledger row, or it rolls back when
    the connection closes."""
    configure_logging(logging.INFO)
    # not asyncio.run: its shutdown joins the default executor's threads, i.e. waits for a
    # database call that may never return
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete((run or run_worker)())
    except StartupRefused as refused:
        log.error("worker not started: %s", refused)
        exit_now(2, exit_handlers=False)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM under `statekeeper worker`, before it polled
        log.info("worker stopped before polling")
        exit_now(0, exit_handlers=False)
    log.info("worker stopped")
    # not sys.exit: the SDK's native threads (the failed connect's too) may still call into
    # Python while the interpreter finalizes (starter.runtime.process_exit). Without the exit
    # handlers, deliberately: the tracer's span export could hold a stopping worker for its
    # exporter's timeouts while the collector is down
    exit_now(0, exit_handlers=False)


if __name__ == "__main__":
    main()
