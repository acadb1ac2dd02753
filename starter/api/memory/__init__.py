"""A customer's memory over HTTP (``routes``)."""
