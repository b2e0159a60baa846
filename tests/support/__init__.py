"""Helpers shared by the tests: the one way to start an emulator process (``server``), a client for its
API with history waits (``emulator_api``), times (``times``), certificates (``certificates``) and rows
written straight into a store (``store_rows``)."""
