"""The composable fabric controller (KEP-5007): publish free fabric devices, attach, detach."""
