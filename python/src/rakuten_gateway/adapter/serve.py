"""Serving a site object over the protocol on loopback (uvicorn), and the command line every
adapter program shares (:func:`run_cli`)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from .app import DEFAULT_STEP_TIMEOUT, create_app

__all__ = ["check_listen_host", "run_cli", "serve"]

DEFAULT_LISTEN = "127.0.0.1:31111"
DEFAULT_KEYS_DB = "data/site-adapter-keys.db"


def check_listen_host(host: str, *, allow_remote: bool = False) -> None:
    """Refuses a listen address off loopback unless ``allow_remote``: the adapter holds the
    account's session and pages."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError as e:
        raise ValueError(f"listen host {host!r} is not an IP address or localhost") from e
    if not loopback and not allow_remote:
        raise ValueError(
            f"listen host {host!r} is not loopback (127.0.0.0/8, ::1): an adapter holds the "
            "account's session; pass allow_remote=True (--allow-remote) to listen elsewhere"
        )


def _split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen {listen!r}: want HOST:PORT (PORT 0 picks a free one)")
    return host.strip("[]"), int(port)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, addr_file: Path | None, addr: str) -> None:
        super().__init__(config)
        self._addr_file = addr_file
        self._addr = addr

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self._addr_file is not None and self.started:
            # Written whole then renamed: a reader never sees half an address.
            tmp = self._addr_file.with_name(self._addr_file.name + ".tmp")
            tmp.write_text(self._addr)
            tmp.replace(self._addr_file)


def serve(
    site: object,
    *,
    host: str = "127.0.0.1",
    port: int = 31111,
    keys_db: str | Path = DEFAULT_KEYS_DB,
    addr_file: str | Path | None = None,
    step_timeout: float = DEFAULT_STEP_TIMEOUT,
    allow_remote: bool = False,
    log_level: str = "info",
) -> None:
    """Serves ``site`` until SIGINT/SIGTERM. ``port`` 0 picks a free port; ``addr_file``
    then receives ``HOST:PORT`` once the adapter answers (the site's ``start`` has run)."""
    check_listen_host(host, allow_remote=allow_remote)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_host, bound_port = sock.getsockname()[:2]
    addr = (
        f"[{bound_host}]:{bound_port}"
        if family == socket.AF_INET6
        else f"{bound_host}:{bound_port}"
    )
    app = create_app(site, keys_db=keys_db, step_timeout=step_timeout)
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=False)
    server = _Server(config, Path(addr_file) if addr_file is not None else None, addr)
    logging.getLogger("rakuten_gateway.adapter").info(
        "site adapter %r serving on http://%s (keys %s)", getattr(site, "name", "?"), addr, keys_db
    )
    server.run(sockets=[sock])


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def run_cli(
    build: Callable[[argparse.Namespace], object],
    *,
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: Sequence[str] | None = None,
) -> None:
    """The command line of an adapter program: ``--listen``, ``--addr-file``, ``--keys-db``,
    ``--step-timeout-seconds``, ``--allow-remote`` (each also ``RAKUTEN_SITE_ADAPTER_*``), plus
    the program's own arguments (``add_arguments``); ``build`` makes the site object."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--listen",
        default=_env("RAKUTEN_SITE_ADAPTER_LISTEN", DEFAULT_LISTEN),
        help="HOST:PORT, loopback only (env RAKUTEN_SITE_ADAPTER_LISTEN; default %(default)s; "
        "port 0 picks a free one)",
    )
    p.add_argument(
        "--addr-file",
        default=_env("RAKUTEN_SITE_ADAPTER_ADDR_FILE"),
        help="write the bound HOST:PORT here once serving (env RAKUTEN_SITE_ADAPTER_ADDR_FILE)",
    )
    p.add_argument(
        "--keys-db",
        default=_env("RAKUTEN_SITE_ADAPTER_KEYS_DB", DEFAULT_KEYS_DB),
        help="SQLite file of the idempotency keys of submit and pay, kept across restarts "
        "(env RAKUTEN_SITE_ADAPTER_KEYS_DB; default %(default)s)",
    )
    p.add_argument(
        "--step-timeout-seconds",
        type=float,
        default=float(_env("RAKUTEN_SITE_ADAPTER_STEP_TIMEOUT_SECONDS") or DEFAULT_STEP_TIMEOUT),
        help="bound of one step; keep it below the worker's RAKUTEN_HTTP_TIMEOUT_SECONDS "
        "(default %(default)s)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        default=(_env("RAKUTEN_SITE_ADAPTER_ALLOW_REMOTE") or "").lower() in ("1", "true", "yes"),
        help="listen off loopback (env RAKUTEN_SITE_ADAPTER_ALLOW_REMOTE)",
    )
    p.add_argument("--log-level", default=_env("RAKUTEN_SITE_ADAPTER_LOG_LEVEL", "info"))
    if add_arguments is not None:
        add_arguments(p)
    args = p.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        host, port = _split_listen(args.listen)
        check_listen_host(host, allow_remote=args.allow_remote)
    except ValueError as e:
        p.exit(2, f"{p.prog}: {e}\n")
    site: Any = build(args)
    serve(
        site,
        host=host,
        port=port,
        keys_db=args.keys_db,
        addr_file=args.addr_file,
        step_timeout=args.step_timeout_seconds,
        allow_remote=args.allow_remote,
        log_level=args.log_level,
    )
