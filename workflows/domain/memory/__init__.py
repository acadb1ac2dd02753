"""What statekeeper may remember about a customer across conversations: the facts (``facts``)
and the rule a fact must pass before it is kept (``rule``). ``docs/memory.md`` tells the whole."""

from workflows.domain.memory.facts import (MAX_VALUE_CHARS, MAX_WORDS_CHARS, RETENTION_DAYS, FactKind, FactSource,
                                           MemoryFact, expiry, fact_id)
from workflows.domain.memory.rule import fact_problem, holds_card_number, instruction_problem, sensitive_problem

__all__ = ["MAX_VALUE_CHARS", "MAX_WORDS_CHARS", "RETENTION_DAYS", "FactKind", "FactSource", "MemoryFact", "expiry",
           "fact_id", "fact_problem", "holds_card_number", "instruction_problem", "sensitive_problem"]
