"""Fixtures for the LLM step tests: a scripted local HTTP endpoint."""

from __future__ import annotations

import pytest
from llm_stub_server import StubServer


@pytest.fixture()
def stub():
    server = StubServer()
    try:
        yield server
    finally:
        server.close()
