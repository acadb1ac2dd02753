"""The policy: the validator that accepts or rejects a proposed action, the clauses a refusal
cites, approvals, confirmation and read-before-write rules, and the policy text the model sees.
Pure functions of the state."""
