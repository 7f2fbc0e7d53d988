"""Every request of a Locust run, and every change of its user count, into a run folder headroom reads.

Enable it with one line in the locustfile::

    import headroom.locust  # noqa: F401  (adds --headroom-dir, default ./headroom-locust)

or without touching the locustfile, by giving Locust this package's plugin file as a second
locustfile (``python3 -m headroom.locust`` prints its path)::

    locust -f locustfile.py,$(python3 -m headroom.locust) --headless -u 40 -r 40 -t 60s --headroom-dir run1

Each process that makes requests writes one CSV file into the folder: ``locust.csv`` for a
single process, ``locust-worker-N.csv`` for worker N of a distributed run (the master gives
its workers the folder with the rest of its options; a worker on another machine writes there
on that machine: copy the files into one folder).  ``headroom summary run1`` reads the folder;
several workers' files are load generators of one ramp, merged as histograms.

A file's rows (:data:`HEADER`), in the order they happened in the process:

* ``request``: a request's start (``time_us``, microseconds since the epoch, Locust's own
  ``start_time``), its latency (``latency_us``: Locust's ``response_time``, to 1 us), the
  stage, this process's running users when it completed, the HTTP status (0: no response),
  ``ok`` (1: Locust counted it a success, 0: a failure), method, name and error;
* ``stage``: the target user count changed (``users``: the new target, all processes
  together): a ``LoadTestShape`` tick, ``-u``, or the web UI.  Stages are numbered from 0
  by the process that decides them (the single process, or the master, which tells its
  workers before it dispatches the users);
* ``users``: this process's running users changed (every user started or stopped);
* ``run`` (first row: the versions and the process's role) and ``stop`` (the test stopped).

A request belongs to the stage in force when it completed, as in Locust's own statistics.
Nothing here is imported by headroom's readers (:mod:`headroom.formats.locust` reads the
files without Locust); importing this module imports Locust (and gevent's monkey patching).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from locust import __version__ as LOCUST_VERSION
from locust import events
from locust.event import EventHook
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

#: Version of the file's layout (the ``run`` row says it).
FORMAT_VERSION = 1
#: The header of every file.
HEADER = "event,time_us,stage,users,latency_us,status,ok,method,name,error"
#: The run folder when ``--headroom-dir`` is not given.
DEFAULT_DIR = "headroom-locust"
#: The custom message by which a master tells its workers a new stage.
STAGE_MESSAGE = "headroom_stage"
_BUFFER = 1 << 20

#: Fired in a process that writes a file when its stage changes, after the ``stage`` row:
#: ``stage_changed.fire(environment=..., stage=k, users=target)`` (e.g. to snapshot Locust's own
#: statistics at the same moment, as scripts/locust/ does to check the files against them).
stage_changed = EventHook()
_QUOTE = frozenset(',"\r\n')


def _field(text: str) -> str:
    """A CSV field on one line (a line end becomes a space), quoted when it holds a comma or quote."""
    if "\n" in text or "\r" in text:
        text = " ".join(text.splitlines())
    if _QUOTE.isdisjoint(text):
        return text
    return '"' + text.replace('"', '""') + '"'


def _error_text(exception) -> str:
    """An exception in one line of at most 200 characters (Locust's own failure key is its repr)."""
    text = " ".join(repr(exception).split())
    return text if len(text) <= 200 else text[:197] + "..."


def file_name(runner) -> str | None:
    """The file a process writes: ``locust.csv`` alone, ``locust-worker-N.csv`` as worker N;
    None for a master (it makes no requests)."""
    if isinstance(runner, WorkerRunner):
        return f"locust-worker-{runner.worker_index}.csv"
    if isinstance(runner, MasterRunner):
        return None
    return "locust.csv"


class _CountingGroup:
    """Wraps the runner's group of user greenlets: every user started or stopped is a ``users`` row."""

    @staticmethod
    def install(runner, on_change) -> None:
        from gevent.pool import Group

        class Counting(Group):
            def add(self, greenlet):
                Group.add(self, greenlet)
                on_change(len(self))

            def _discard(self, greenlet):
                had = len(self)
                Group._discard(self, greenlet)
                if len(self) != had:
                    on_change(len(self))

        old = runner.user_greenlets
        runner.user_greenlets = Counting(list(old.greenlets))


class Recorder:
    """The rows of one Locust process (see the module docstring)."""

    def __init__(self, environment, folder: str | os.PathLike):
        self.env, self.runner = environment, environment.runner
        self.folder = Path(folder)
        self.name = file_name(self.runner)
        self.stage, self.target = -1, None
        self.users = 0
        self.pending: list[str] = []  # rows before the file is open
        self.out = None
        self.role = "worker" if isinstance(self.runner, WorkerRunner) else "local"
        self._names: dict[tuple[str, str], str] = {}

    # ------------------------------------------------------------------ rows

    def _write(self, row: str) -> None:
        if self.out is not None:
            self.out.write(row)
        else:
            self.pending.append(row)

    def open(self) -> None:
        """Open the process's file (once: a test started again in the web UI appends to it)."""
        if self.out is not None or self.name is None:
            return
        if self.role == "worker":  # the master's folder arrives with its options, at the first spawn
            self.folder = Path(getattr(self.env.parsed_options, "headroom_dir", None) or self.folder)
            self.name = file_name(self.runner)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.out = open(self.folder / self.name, "w", buffering=_BUFFER, encoding="utf-8", newline="")  # noqa: SIM115
        self.out.write(HEADER + "\n")
        about = f"headroom.locust {FORMAT_VERSION}; locust {LOCUST_VERSION}"
        if self.role == "worker":
            about += f"; worker {self.runner.worker_index}"
        self.out.write(
            f"run,{time.time_ns() // 1000},{max(self.stage, 0)},{self.users},,,,{self.role},{about},\n"
        )
        for row in self.pending:
            self.out.write(row)
        self.pending = []

    def flush(self) -> None:
        if self.out is not None:
            self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.close()
            self.out = None

    def new_stage(self, stage: int, users: int) -> None:
        self.stage, self.target = stage, users
        self._write(f"stage,{time.time_ns() // 1000},{stage},{users},,,,,,\n")
        if self.name is not None:
            stage_changed.fire(environment=self.env, stage=stage, users=users)

    def users_changed(self, n: int) -> None:
        self.users = n
        self._write(f"users,{time.time_ns() // 1000},{max(self.stage, 0)},{n},,,,,,\n")

    def stopped(self) -> None:
        self._write(f"stop,{time.time_ns() // 1000},{max(self.stage, 0)},{self.users},,,,,,\n")
        self.flush()

    def request(self, request_type, name, response_time, response_length, response=None, context=None,
                exception=None, start_time=None, url=None, **kwargs) -> None:  # fmt: skip
        if self.out is None:
            return  # a request before the test started (none in practice): no stage to give it
        now = time.time()
        lat = 0.0 if response_time is None else float(response_time) / 1000.0
        if start_time is None:  # a custom client that fires the event without its start
            start_time = now - lat
        status = getattr(response, "status_code", 0) or 0
        key = (request_type, name)
        label = self._names.get(key)
        if label is None:
            label = f"{_field(str(request_type))},{_field(str(name))}"
            if len(self._names) < 100_000:
                self._names[key] = label
        err = "" if exception is None else _field(_error_text(exception))
        self.out.write(
            f"request,{int(start_time * 1e6)},{max(self.stage, 0)},{self.users},{round(lat * 1e6)},"
            f"{status},{0 if exception is not None else 1},{label},{err}\n"
        )

    # ------------------------------------------------------------ the stages

    def target_changed(self, users: int) -> None:
        """The single process or the master sets a new target user count: a new stage, told to the
        workers before the users are dispatched."""
        if users == self.target:
            return
        self.new_stage(self.stage + 1, int(users))
        if isinstance(self.runner, MasterRunner):
            self.runner.send_message(STAGE_MESSAGE, {"stage": self.stage, "users": self.target})

    def on_stage_message(self, environment, msg, **kwargs) -> None:
        self.new_stage(int(msg.data["stage"]), int(msg.data["users"]))


def _wrap_start(runner, recorder: Recorder) -> None:
    """``runner.start(user_count, spawn_rate, ...)``: the new target is a stage before it is dispatched."""
    original = runner.start

    def start(*args, **kwargs):
        users = kwargs["user_count"] if "user_count" in kwargs else args[0]
        recorder.target_changed(users)
        return original(*args, **kwargs)

    runner.start = start


@events.init_command_line_parser.add_listener
def _add_arguments(parser, **kwargs) -> None:
    parser.add_argument(
        "--headroom-dir",
        default=os.environ.get("HEADROOM_LOCUST_DIR", DEFAULT_DIR),
        help="headroom.locust: the run folder every request and user count is written to "
        f"(default ./{DEFAULT_DIR}, or $HEADROOM_LOCUST_DIR); read it with 'headroom summary FOLDER'",
        include_in_web_ui=False,
    )


@events.init.add_listener
def _on_init(environment, runner=None, **kwargs) -> None:
    runner = runner or environment.runner
    if runner is None or getattr(environment, "_headroom_recorder", None) is not None:
        return
    options = environment.parsed_options
    rec = Recorder(environment, getattr(options, "headroom_dir", None) or DEFAULT_DIR)
    environment._headroom_recorder = rec
    if isinstance(runner, MasterRunner | LocalRunner):
        _wrap_start(runner, rec)
    if isinstance(runner, WorkerRunner):
        runner.register_message(STAGE_MESSAGE, rec.on_stage_message)
    if isinstance(runner, MasterRunner):
        return
    _CountingGroup.install(runner, rec.users_changed)
    environment.events.test_start.add_listener(lambda **kw: rec.open())
    environment.events.request.add_listener(rec.request)
    environment.events.test_stop.add_listener(lambda **kw: rec.stopped())
    environment.events.quitting.add_listener(lambda **kw: rec.close())


def plugin_path() -> Path:
    """The file to give Locust as a second locustfile (``-f locustfile.py,PATH``) to enable the listener."""
    return Path(__file__).with_name("headroom_locust.py")
