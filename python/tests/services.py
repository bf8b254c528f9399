"""The project's binaries (``target/debug``) and the Python adapter as processes for the tests:
each starts on port 0 on loopback, writes the address it bound to a file, and is read back from
it; none is assumed to be free. Every process runs in its own directory (no ``.env`` of the
caller's is read) with the caller's ``RAKUTEN_*`` variables removed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("RAKUTEN_BIN_DIR", REPO / "target" / "debug"))

#: The full-access token of every gateway the tests start.
TOKEN = "py-tests-operator-token-0123456789"
#: An upstream-role token (submit and read only).
UPSTREAM_TOKEN = "py-tests-upstream-token-0123456789"

STARTUP_SECONDS = 60.0

TEA_URL = "https://item.rakuten.co.jp/simshop/sample-tea/"


def intent(**kw: object) -> dict[str, object]:
    """A valid order intent (the shop's tea), with ``kw`` over it."""
    return {"item_url": TEA_URL, "quantity": 1, **kw}


def binary(name: str) -> Path:
    """A built binary of the workspace; a missing one fails the test with how to build it."""
    p = BIN_DIR / name
    if not p.is_file():
        pytest.fail(
            f"{p} is missing: build it with `cargo build -p order-gateway -p trading-worker "
            "-p shop-sim` (or point RAKUTEN_BIN_DIR at the binaries)"
        )
    return p


def _env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAKUTEN_")}
    env.setdefault("RUST_LOG", "warn")
    env.update(extra)
    return env


class Process:
    """A service process started on port 0 that reports its address in a file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str | Path],
        *,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        addr_file: Path | None = None,
    ) -> None:
        self.name = name
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        self.addr_file = addr_file
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(a) for a in argv],
            cwd=workdir,
            env=_env(env or {}),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.addr = self._wait_addr() if addr_file is not None else ""

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        return f"http://{self.addr}"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the process's output."""
        self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _wait_addr(self) -> str:
        assert self.addr_file is not None
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.addr_file.exists():
                addr = self.addr_file.read_text().strip()
                if addr:
                    return addr
            if self.proc.poll() is not None:
                pytest.fail(
                    f"{self.name} exited with {self.proc.returncode} before listening:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"{self.name} did not report its address in {STARTUP_SECONDS:g} s")

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s; this process only."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def start_gateway(workdir: Path, **settings: str) -> Process:
    """``order-gateway serve`` on SQLite in ``workdir``, port 0; ``settings`` are
    ``RAKUTEN_*`` variables (names without the prefix, e.g. ``LEASE_TTL_SECONDS="1"``)."""
    env = {
        "RAKUTEN_API_TOKEN": TOKEN,
        "RAKUTEN_UPSTREAM_TOKENS": f"upstream:{UPSTREAM_TOKEN}",
        "RAKUTEN_GATEWAY_HOST": "127.0.0.1",
        "RAKUTEN_GATEWAY_PORT": "0",
        "RAKUTEN_GATEWAY_DB_PATH": str(workdir / "gateway.db"),
        "RAKUTEN_GATEWAY_ADDR_FILE": str(workdir / "gateway.addr"),
        "RAKUTEN_LEASE_MAX_WAIT_SECONDS": "2",
    }
    env.update({f"RAKUTEN_{k}": v for k, v in settings.items()})
    return Process(
        "order-gateway",
        [binary("order-gateway"), "serve"],
        workdir=workdir,
        env=env,
        addr_file=workdir / "gateway.addr",
    )


def start_shop(workdir: Path, *extra: str) -> Process:
    """``shop-sim serve`` on port 0."""
    return Process(
        "shop-sim",
        [
            binary("shop-sim"),
            "serve",
            "--port",
            "0",
            "--addr-file",
            workdir / "shop.addr",
            "--submission-log",
            workdir / "shop-submissions.jsonl",
            *extra,
        ],
        workdir=workdir,
        addr_file=workdir / "shop.addr",
    )


def start_python_adapter(workdir: Path, shop_url: str) -> Process:
    """The reference adapter (Playwright, headless Chromium) on port 0."""
    return Process(
        "python-adapter",
        [
            sys.executable,
            "-m",
            "rakuten_gateway.adapter.shop_sim",
            "--shop-url",
            shop_url,
            "--listen",
            "127.0.0.1:0",
            "--addr-file",
            workdir / "adapter.addr",
            "--keys-db",
            workdir / "adapter-keys.db",
            "--log-level",
            "warning",
        ],
        workdir=workdir,
        addr_file=workdir / "adapter.addr",
    )
