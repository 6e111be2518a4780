"""Unit tests of the example driver."""
