"""`sluice local`: an embedded moto server, the stack's resources on it, and the HTTP API served by the
same Lambda handlers through API Gateway v2 events."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from moto.server import ThreadedMotoServer

from sluice import constants as c
from sluice.local import gateway
from sluice.local.provision import provision
from sluice.local.workers import FunctionPool
from sluice.service import Sluice
from sluice.settings import Settings

LOCAL_REGION = "us-east-1"
# Local credentials for moto; real ones are never needed or read.
LOCAL_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": LOCAL_REGION,
    "AWS_REGION": LOCAL_REGION,
}
DEFAULT_CONCURRENCY = {c.FN_BROKER: 4, c.FN_CONSUMER: 6}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class LocalRuntime:
    host: str = "127.0.0.1"
    port: int = 8787
    admin_token: str | None = None
    stage: str = "local"
    concurrency: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_CONCURRENCY))

    def start(self) -> None:
        os.environ.update(LOCAL_AWS_ENV)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every call
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.settings: Settings = provision(f"http://{host}:{port}", self.stage)
        engine = Sluice.from_settings(self.settings)
        if self.admin_token:
            engine.tokens.create("*", ["admin"], token=self.admin_token)
        env = {
            **LOCAL_AWS_ENV,
            **self.settings.to_env(),
            c.ENV_POWERTOOLS_SERVICE_NAME: c.SERVICE_NAME,
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
            c.ENV_POWERTOOLS_METRICS_NAMESPACE: c.METRICS_NAMESPACE,
        }
        self.pools = {fn: FunctionPool(fn, n, env) for fn, n in self.concurrency.items()}
        for pool in self.pools.values():
            pool.warm()
        self._http = ThreadingHTTPServer((self.host, self.port), _make_handler(self))
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self._serve_thread = threading.Thread(
            target=self._http.serve_forever, name="sluice-http", daemon=True
        )
        self._serve_thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        for pool in self.pools.values():
            pool.close()
        self._moto.stop()

    def dispatch(
        self,
        method: str,
        raw_path: str,
        raw_query: str,
        headers: list[tuple[str, str]],
        body: bytes,
        source_ip: str,
    ) -> tuple[int, dict[str, str], bytes]:
        found = gateway.match(method, raw_path)
        if found is None:
            return 404, {"Content-Type": "application/json"}, json.dumps({"message": "Not Found"}).encode()
        if len(body) > gateway.MAX_PAYLOAD_BYTES:
            return (
                413,
                {"Content-Type": "application/json"},
                json.dumps({"message": "Request Entity Too Large"}).encode(),
            )
        route, params = found
        event = gateway.build_event(route, params, method, raw_path, raw_query, headers, body, source_ip)
        response = self.pools[route.function].invoke(event)
        status, out_headers, cookies, data = gateway.unpack_response(response)
        if cookies:
            out_headers["Set-Cookie"] = "; ".join(cookies)
        return status, out_headers, data


def _make_handler(runtime: LocalRuntime) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "sluice-local"

        def _serve(self) -> None:
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                status, headers, data = runtime.dispatch(
                    self.command, path, query, list(self.headers.items()), body, self.client_address[0]
                )
            except Exception:  # the API Gateway answer to a crashed or timed-out integration
                logging.getLogger("sluice.local").exception("integration failed")
                status, headers = 500, {"Content-Type": "application/json"}
                data = json.dumps({"message": "Internal Server Error"}).encode()
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

        def __getattr__(self, name: str) -> Any:
            """Any other method (TRACE, QUERY, ...) goes to routing too: no route, so 404 as API
            Gateway answers, where http.server would answer 501."""
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)

        def log_message(self, format: str, *args: Any) -> None:
            if os.environ.get("SLUICE_ACCESS_LOG"):
                super().log_message(format, *args)

    return Handler
