"""bin/demo, which `make demo` ends with: once the web server answers it prints the banner and starts the set-up
command behind it (`make demo`: manage.py demo_setup); the set-up ending leaves the server and the workers running,
and Ctrl-C stops all of them, the set-up included, leaving no process behind. The virtualenv is a stand-in here
(runserver: a plain HTTP server, the workers: sleeps), so that the script's own handling is what is tested."""
from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.polling import wait_for

DEMO = Path(__file__).resolve().parents[1] / "bin" / "demo"


@pytest.fixture
def venv(tmp_path) -> Path:
    """A virtualenv whose `python manage.py runserver ADDRESS` serves plain HTTP at ADDRESS (any other use is the
    real Python: bin/wait_for_server) and whose `celery` waits to be stopped, as a worker does."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(textwrap.dedent(f"""\
        #!/bin/bash
        if [[ "$1 $2" == "manage.py runserver" ]]; then
            exec {sys.executable} -m http.server --bind 127.0.0.1 "${{3##*:}}" --directory "{tmp_path}"
        fi
        exec {sys.executable} "$@"
        """))
    (bin_dir / "celery").write_text("#!/bin/bash\nexec sleep 600\n")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    return bin_dir.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _marked(mark: str) -> list[int]:
    """The processes still alive that were started with DEMO_TEST_MARK=mark in their environment."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"DEMO_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass  # gone meanwhile, or not ours to read
    return found


class Demo:
    def __init__(self, venv: Path, setup: str) -> None:
        self.mark = uuid.uuid4().hex
        self.port = _free_port()
        env = {**os.environ, "VENV": str(venv), "PORT": str(self.port), "DEMO_TEST_MARK": self.mark}
        self.process = subprocess.Popen([str(DEMO), sys.executable, "-c", setup], env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[str] = []
        # A thread reads the output line by line: select() on the pipe misses lines the file object has already
        # read ahead into its buffer (two lines written together arrive in one read).
        self._read: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self._read.put(line.rstrip("\n"))
        self._read.put(None)

    def read_until(self, text: str, seconds: float = 30) -> None:
        """Read its output up to the line holding `text`; fail when it has not come within `seconds`."""
        deadline = time.monotonic() + seconds
        while not any(text in line for line in self.lines):
            try:
                line = self._read.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"bin/demo did not print {text!r} within {seconds:.0f} s: {self.lines}") from None
            assert line is not None, f"bin/demo ended before printing {text!r}: {self.lines}"
            self.lines.append(line)

    def ctrl_c(self) -> int:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        while (line := self._read.get_nowait() if not self._read.empty() else None) is not None:
            self.lines.append(line)
        return self.process.returncode


SETUP_THAT_ENDS = "print('setup: queued the runs', flush=True); print('setup: done', flush=True)"
# The line is printed inside the try: a Ctrl-C that comes right after it (the test sends one as soon as it reads the
# line) must find the handler in place.
SETUP_THAT_RUNS = textwrap.dedent("""\
    import time
    try:
        print('setup: waiting for the runs', flush=True)
        time.sleep(600)
    except KeyboardInterrupt:
        print('setup: stopped', flush=True)
        raise SystemExit(130)
    """)


def test_the_setup_starts_once_the_server_answers_and_its_end_stops_nothing(venv):
    demo = Demo(venv, SETUP_THAT_ENDS)
    try:
        demo.read_until("setup: done")
        banner = next(i for i, line in enumerate(demo.lines) if "annotator demo is running" in line)
        answered = next(i for i, line in enumerate(demo.lines) if line.startswith("demo: the web server answered"))
        setup = demo.lines.index("setup: queued the runs")
        assert answered < banner < setup
        assert any("The set-up goes on behind it" in line for line in demo.lines[banner:setup])
        # The set-up has ended: the server still answers and bin/demo still runs.
        time.sleep(1)
        assert demo.process.poll() is None
        socket.create_connection(("127.0.0.1", demo.port), timeout=5).close()
    finally:
        code = demo.ctrl_c()
    assert code == 130
    assert "demo: stopped the web server and the workers" in demo.lines
    wait_for(lambda: not _marked(demo.mark), "a process of the demo was left running", seconds=10)


def test_ctrl_c_while_the_setup_runs_stops_it_with_the_server_and_the_workers(venv):
    demo = Demo(venv, SETUP_THAT_RUNS)
    try:
        demo.read_until("setup: waiting for the runs")
        assert len(_marked(demo.mark)) >= 5  # bin/demo, the server, two workers, the set-up
    finally:
        code = demo.ctrl_c()
    assert code == 130
    # Every line in the message: this failed once in CI under load and its list was cut to four lines.
    assert "setup: stopped" in demo.lines, "\n".join(demo.lines)
    assert "demo: stopped the web server and the workers" in demo.lines, "\n".join(demo.lines)
    wait_for(lambda: not _marked(demo.mark), "a process of the demo was left running", seconds=10)
