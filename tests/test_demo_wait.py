"""bin/wait_for_server, which bin/demo runs before it prints the demo's URL and login: against a local server that
starts listening only later it says it waits, every few seconds, and returns once the server answers (an
error page is an answer); it gives up after its timeout, and at once when a process it watches has exited."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

WAIT = Path(__file__).resolve().parents[1] / "bin" / "wait_for_server"


class _Busy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _closed_server() -> HTTPServer:
    """A server whose port is bound but not listening yet: a connection is refused, as before runserver is up."""
    server = HTTPServer(("127.0.0.1", 0), _Busy, bind_and_activate=False)
    server.server_bind()
    return server


def _url(server: HTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/accounts/login/"


def _wait(*args: str, timeout: float = 30) -> tuple[int, str, float]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(WAIT), *args], capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, time.monotonic() - start


def test_it_says_it_waits_until_the_server_answers():
    server = _closed_server()
    url = _url(server)
    waiter = subprocess.Popen([sys.executable, str(WAIT), url, "--every", "0.2", "--poll", "0.05", "--timeout", "60"],
                              stdout=subprocess.PIPE, text=True)
    lines = [waiter.stdout.readline().rstrip("\n") for _ in range(3)]
    # Nothing answered yet: it said where it waits, then that it still waits, twice.
    assert lines[0] == (f"demo: waiting for the web server to answer at {url} (the first start can take "
                        "minutes on a busy machine)")
    assert all(line.startswith("demo: still waiting for the web server (") for line in lines[1:]), lines
    assert waiter.poll() is None
    server.server_activate()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        rest = waiter.communicate(timeout=30)[0].splitlines()
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    assert waiter.returncode == 0
    assert rest[-1].startswith("demo: the web server answered after ")  # a 503 is an answer


def test_it_gives_up_after_its_timeout_when_nothing_answers():
    server = _closed_server()  # never listening: every try is refused
    try:
        code, out, took = _wait(_url(server), "--timeout", "1", "--poll", "0.1")
    finally:
        server.server_close()
    assert code == 1 and 1 <= took < 10
    assert out.splitlines()[-1] == f"demo: no answer from {_url(server)} after 1 s; the log above may say why"


def test_it_stops_at_once_when_a_watched_process_has_exited():
    server = _closed_server()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        code, out, took = _wait(_url(server), "--while-alive", str(gone.pid), "--poll", "0.1", "--timeout", "60")
    finally:
        server.server_close()
    assert code == 2 and took < 30
    assert out.splitlines()[-1] == "demo: the web server or a worker exited before answering; see the log above"
