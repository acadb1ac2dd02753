"""A failed request to an external service is logged through the process's root logger and
its redaction (starter.runtime.logs), never by handlers of uvicorn's own: the dev process serves
the services beside its worker, and a SQLite "database is locked" traceback under load once
wrote a payment method id from the SQL parameters into dev.log (the PII scan found it)."""

from __future__ import annotations

import logging

import httpx
from fastapi import FastAPI

from systems.service_kit.server import ServiceThread
from tests.log_capture import root_log

SECRET = "paypal_1038468"


def test_a_services_failure_is_logged_redacted():
    app = FastAPI()

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError(f"(sqlite3.OperationalError) database is locked\n[SQL: INSERT INTO payment_operations "
                           f"VALUES (?)]\n[parameters: ('[{{\"payment_method_id\": \"{SECRET}\"}}]',)]")

    uvicorn_log, uvicorn_error = logging.getLogger("uvicorn"), logging.getLogger("uvicorn.error")
    # as in the dev process, where nothing configured uvicorn's loggers (another test's server
    # with uvicorn's default config leaves them with handlers of their own, not propagating)
    with root_log("INFO", "uvicorn", "uvicorn.error") as stream:
        server = ServiceThread(app).start()
        try:
            response = httpx.get(f"http://{server.host}:{server.port}/boom", timeout=10)
        finally:
            server.stop()
        # the service configured none of uvicorn's loggers itself
        assert uvicorn_log.handlers == [] and uvicorn_log.propagate and uvicorn_error.level == logging.NOTSET
    logged = stream.getvalue()
    assert response.status_code == 500
    assert "database is locked" in logged  # the failure is logged, for operators
    assert SECRET not in logged, logged
