"""The small runtime every kopf-dra controller is built on.

One place for what controllers share: the controller base and its lifecycle (``controller``),
leader election and write fencing (``leader``), typed writes applied with preconditions
(``actions``, ``apply``), watch-fed stores and the work queue (``stores``, ``queue``), how an
error maps to a retry (``errors``), the clock and the Event recorder, and running a registry
under kopf (``app``). Controllers keep only their wiring (app.py), their reads and writes
(handlers.py) and their pure decisions (planning.py).
"""
