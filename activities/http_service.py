"""One HTTP client for the simulated external services: timeouts bounded by the attempt's
deadline, the deadline sent along (``X-Deadline``), no retries of its own (Temporal owns
retries), and every failure sorted by what it proves about the effect."""

from __future__ import annotations

import time
from typing import Any, Optional

import httpx

from activities import deadline
from activities.ports import PortError
from activities.reconcile import Ambiguous, NotDone
from workflows.domain.errors import ErrorType

DEADLINE_HEADER = "X-Deadline"
SERVICE_MARGIN_SECONDS = 0.25
"""The service must be done this long before our own timeout: its answer still has to arrive."""


class ServiceClient:
    """``ServiceClient(base_url, name, timeout_seconds=10.0)``: synchronous (activities call
    the ports in a worker thread)."""

    def __init__(self, base_url: str, name: str, timeout_seconds: float = 10.0) -> None:
        self.name = name
        self.timeout_seconds = timeout_seconds
        self._http = httpx.Client(base_url=base_url, transport=httpx.HTTPTransport(retries=0))

    def _budget(self) -> float:
        end = deadline.current()
        left = self.timeout_seconds if end is None else min(self.timeout_seconds, end - time.time())
        if left <= SERVICE_MARGIN_SECONDS:
            raise NotDone(f"no time left to call the {self.name} system")
        return left

    def send(self, method: str, path: str, *, json: Any = None, headers: Optional[dict[str, str]] = None,
             params: Optional[dict[str, str]] = None) -> httpx.Response:
        """An effect request. Returns the 2xx response. Raises ``NotDone`` (not sent, or the
        service said nothing was done: 503, 504), ``Ambiguous`` (timeout, connection lost
        mid-request, other 5xx) or ``PortError`` (4xx: ``InvalidData`` for 422,
        ``IdempotencyKeyConflict`` for 409, ``InvalidArguments`` otherwise)."""
        budget = self._budget()
        sent = {**(headers or {}), DEADLINE_HEADER: f"{time.time() + budget - SERVICE_MARGIN_SECONDS:.3f}"}
        try:
            response = self._http.request(method, path, json=json, headers=sent, params=params, timeout=budget)
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            raise NotDone(f"the {self.name} system could not be reached") from err
        except (httpx.TimeoutException, httpx.TransportError) as err:
            raise Ambiguous(f"the {self.name} system did not answer") from err
        return self._checked(response)

    def get(self, path: str, params: Optional[dict[str, str]] = None) -> Optional[httpx.Response]:
        """A lookup: the 2xx response, None for 404; any other failure raises (an
        ``httpx`` error or ``Ambiguous``): the caller cannot tell."""
        response = self._http.get(path, params=params, timeout=self._budget())
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise Ambiguous(f"the {self.name} system answered a lookup with {response.status_code}")
        return response

    def _checked(self, response: httpx.Response) -> httpx.Response:
        status = response.status_code
        if status < 400:
            return response
        if status in (503, 504):
            raise NotDone(f"the {self.name} system did nothing ({status})")
        if status >= 500:
            raise Ambiguous(f"the {self.name} system failed ({status})")
        if status == 422:
            raise PortError(ErrorType.INVALID_DATA, f"the {self.name} system refused the data as invalid")
        if status == 409:
            raise PortError(ErrorType.IDEMPOTENCY_KEY_CONFLICT, f"the {self.name} system holds another request "
                                                                "under this key")
        raise PortError(ErrorType.INVALID_ARGUMENTS, f"the {self.name} system refused the request ({status})")

    def close(self) -> None:
        self._http.close()
