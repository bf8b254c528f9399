from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rakuten_gateway import Client
from services import TOKEN, Process, start_gateway, start_shop


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """One gateway for the client tests (no worker: tasks stay queued unless a test moves them)."""
    g = start_gateway(tmp_path_factory.mktemp("gateway"))
    yield g
    g.stop()


@pytest.fixture
def client(gateway: Process) -> Iterator[Client]:
    with Client(gateway.url, TOKEN) as c:
        yield c


@pytest.fixture(scope="session")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    s = start_shop(tmp_path_factory.mktemp("shop"))
    yield s
    s.stop()


@pytest.fixture
def uid() -> str:
    """A short unique id for names a test creates."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Lists the screenshots the end-to-end order left, so a person can look at them."""
    base = terminalreporter.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    pngs = sorted(Path(base).glob("test_an_order_submitted*/evidence/*/*.png"))
    if pngs:
        terminalreporter.section("evidence screenshots of the end-to-end order")
        for p in pngs:
            terminalreporter.write_line(str(p))
