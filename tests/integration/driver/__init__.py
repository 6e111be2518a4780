"""Integration tests of the example driver against the local control plane."""
