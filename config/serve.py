"""Serve the site with N daphne processes on one port: one process runs Python on one core
at a time, so a machine with N cores serves with N processes.

    python -m config.serve --host 0.0.0.0 --port 8000 --processes 4 [--backlog 1024]

Each daphne process gets a listening socket of its own on the port (SO_REUSEPORT, with a
listen queue of `--backlog`: twisted's default of 50 drops the connections of a burst), so
the kernel spreads connections over the processes evenly. One socket shared by all was
measured first: a process accepts up to a hundred connections per wake-up, so one of two
took nearly all of a client's keep-alive connections and two processes served 1.06 x one.
The socket is handed over by systemd's socket-activation protocol (fd 3, LISTEN_FDS,
LISTEN_FDNAMES, LISTEN_PID), which daphne speaks through twisted's `systemd:` endpoint; this
process keeps no copy, so the socket of a process that died leaves the port with it.

A daphne process that exits is started again (after a second, so a crash loop does not
spin); SIGTERM or SIGINT stops them all (SIGTERM to each, SIGKILL to any still running after
`--grace` seconds) and then this process. Nothing here imports Django."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time

logger = logging.getLogger("config.serve")

SD_LISTEN_FDS_START = 3  # systemd's first passed descriptor
APPLICATION = "config.asgi:application"


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def start_daphne(host: str, port: int, backlog: int, extra_args: list[str]) -> subprocess.Popen:
    """One daphne process with a listening socket of its own on the port, handed over as
    systemd would hand it."""
    with listening_socket(host, port, backlog) as sock:
        return _daphne_on(sock, extra_args)


def _daphne_on(sock: socket.socket, extra_args: list[str]) -> subprocess.Popen:
    family = "INET6" if sock.family == socket.AF_INET6 else "INET"
    fileno = sock.fileno()

    def socket_at_fd_3():
        if fileno != SD_LISTEN_FDS_START:
            os.dup2(fileno, SD_LISTEN_FDS_START)

    # LISTEN_PID must be daphne's own pid: the shell exports its pid, then becomes daphne
    command = ["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"', sys.executable, "-m", "daphne",
               "-e", f"systemd:domain={family}:index=0", *extra_args, APPLICATION]
    return subprocess.Popen(command, env={**os.environ, "LISTEN_FDS": "1", "LISTEN_FDNAMES": "web"},
                            pass_fds=(fileno, SD_LISTEN_FDS_START), preexec_fn=socket_at_fd_3)


def serve(host: str, port: int, processes: int, backlog: int, grace: float, extra_args: list[str]) -> int:
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    children = [start_daphne(host, port, backlog, extra_args) for _ in range(processes)]
    logger.info("Serving on %s:%s with %d daphne processes (pids %s)", host, port, processes,
                ", ".join(str(child.pid) for child in children))
    try:
        while not stopping:
            time.sleep(0.2)
            for n, child in enumerate(children):
                if child.poll() is not None and not stopping:
                    logger.warning("daphne process %s exited with %s; starting another", child.pid, child.returncode)
                    time.sleep(1)
                    children[n] = start_daphne(host, port, backlog, extra_args)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + grace
        for child in children:
            try:
                child.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--processes", type=int, default=1, help="daphne processes (one per core)")
    parser.add_argument("--backlog", type=int, default=1024, help="the listen queue")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds a stopping process gets before SIGKILL")
    args, extra = parser.parse_known_args(argv)  # the rest goes to daphne (e.g. --proxy-headers)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    return serve(args.host, args.port, args.processes, args.backlog, args.grace, extra)


if __name__ == "__main__":
    sys.exit(main())
