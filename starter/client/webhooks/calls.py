"""``StatekeeperClient.webhooks`` (``WebhookCalls``): the client's webhook subscriptions
(``starter.client.webhooks.service.Webhooks``), built on first use, so a client that never uses them
never loads them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from starter.client.errors import ConversationError

if TYPE_CHECKING:
    from starter.client.webhooks.service import Webhooks


class WebhookCalls:
    """``StatekeeperClient.webhooks``: the client's ``Webhooks`` (from ``webhooks_source``, set by
    ``starter.ops.bootstrap.client_for``). Raises ``ConversationError`` ``unavailable`` when the
    client was made without one."""

    webhooks_source: Optional[Callable[[], Webhooks]] = None
    _webhooks: Optional[Webhooks] = None

    @property
    def webhooks(self) -> Webhooks:
        """The webhooks of this client's deployment (built on first use)."""
        if self._webhooks is None:
            if self.webhooks_source is None:
                raise ConversationError("this client was made without webhooks (use starter.client_for)",
                                        "unavailable")
            self._webhooks = self.webhooks_source()
        return self._webhooks

