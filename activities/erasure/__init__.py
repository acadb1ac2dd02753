"""Erasure of a customer's data and retention purges of closed conversations, across the
journal, the system of record's side records and Temporal (``service.DataErasure``)."""
