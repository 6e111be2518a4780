"""``kopf-dra demo`` (``make run``): the whole system on one machine, and a live view.

One module per job, each importing only those before it: ``supervision`` (the child
processes), ``bringup`` (control plane objects, nodes, operators, examples), ``view`` (the
live view), ``command`` (the command line) and ``in_cluster`` (``--in-cluster``, and ``main``,
which hands it to ``command``). The e2e suite starts the system with ``bringup``.
"""
