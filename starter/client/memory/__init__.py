"""A customer's memory as backends and operators read and correct it (``reads``)."""
