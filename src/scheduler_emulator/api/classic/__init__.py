"""The classic (2014) Service Management surface (docs/reference/classic-api.md): a thin adapter over ``service/``.

``routes`` matches classic paths (subscription id first, case-insensitive literals, optional ``~``,
trailing ``/``), ``wire`` reads and writes its XML and JSON, ``cloud_services``, ``collections`` and
``jobs`` are the handlers.
"""
