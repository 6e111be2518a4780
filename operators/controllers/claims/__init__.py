"""Both claim controllers in one process (``kopf-dra run claims``)."""
