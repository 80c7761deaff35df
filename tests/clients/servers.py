"""A daphne process on a port the test chooses, so that a killed server can be replaced by
a new one at the same address, which is what a client reconnecting to a restarted service
sees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager

from tests.integration.servers import ROOT, ServerUrl, wait_until_serving


class RestartableServer:
    def __init__(self, port: int, env: dict[str, str]):
        self.port, self.env = port, {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.integration.settings",
                                     "LOG_LEVEL": "WARNING", **env}
        self.url = ServerUrl(f"http://127.0.0.1:{port}")
        self.process: subprocess.Popen | None = None
        self.log = tempfile.NamedTemporaryFile(prefix=f"daphne-{port}-", suffix=".log", delete=False)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-e", f"tcp:port={self.port}:interface=127.0.0.1:backlog=1024",
             "config.asgi:application"], cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url.pid = self.process.pid
        wait_until_serving(self.url, self.process, self.log.name)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to the clients, a transaction cut where it stood."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextmanager
def restartable_server(port: int, env: dict[str, str]):
    server = RestartableServer(port, env)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        server.log.close()
        os.unlink(server.log.name)
