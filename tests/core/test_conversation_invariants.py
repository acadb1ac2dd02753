"""Conversation invariants over generated interleavings (issue 7, item 7, pure core).

The ``RuleBasedStateMachine`` and its rules live in ``tests/core/conversation_invariants_machine.py``
(the regression tests of its findings import them). Derandomized: a fixed walk of 800 examples.

It ran in a fresh interpreter for one session, because in a shared process (after other core
files) it walked other examples and failed one: "told not done but ... applied" after an approval
expired to a human ticket and a reset re-executed the yes, which parked the write again for a
supervisor who then approved it. That was a product gap, not process state leaking into the
conversation: the ticketing system is now asked before a write is parked (``handed_over``;
tests/core/test_conversation_regressions.py, test 4). Which walk hypothesis takes still depends
on more than its seed (seen here: one seed of a non-derandomized run failed once, then passed on
the same code), so the machine runs in the suite's process like every other test, without the
explain phase whose tracing ran a late failure's shrink into the timeout; a failure is a finding.
"""

from __future__ import annotations

from tests.core.conversation_invariants_machine import ConversationMachine

TestConversationInvariants = ConversationMachine.TestCase
