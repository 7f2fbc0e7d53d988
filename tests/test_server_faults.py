"""The test server's faults placed by request count (-crash-after-requests, -hang-after-requests,
-fail-after-requests), which test_stop.py uses to put a death at an exact moment of a ramp.

Checked from the client side only: status codes of plain ``http.client`` requests, the
process's exit code and a refused connect from the kernel, a timeout on the client's socket.
Skips without Go, unless HEADROOM_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import http.client
import socket

import pytest
from goserver import GoServer, built_or_skip


@pytest.fixture(scope="module")
def binary():
    return built_or_skip()


def status(port: int, path: str = "/", timeout: float = 10.0) -> int:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def test_crash_after_requests(binary):
    with GoServer(binary=binary, crash_after=5) as srv:
        assert [status(srv.port) for _ in range(5)] == [200] * 5
        assert status(srv.port, "/healthz") == 200  # other paths do not count
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            status(srv.port)  # the sixth request to / gets no answer: the process exits
        assert srv.wait(timeout=5) == 3
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=2)
    assert "-crash-after-requests 5" in srv.stderr


def test_fail_after_requests(binary):
    with GoServer(binary=binary, fail_after=3) as srv:
        got = [status(srv.port) for _ in range(7)]
        assert got == [200, 200, 200, 503, 503, 503, 503]
        assert srv.alive() and status(srv.port, "/healthz") == 200


def test_hang_after_requests(binary):
    with GoServer(binary=binary, hang_after=2) as srv:
        assert [status(srv.port) for _ in range(2)] == [200, 200]
        with pytest.raises(TimeoutError):
            status(srv.port, timeout=0.5)
        with pytest.raises(TimeoutError):
            status(srv.port, timeout=0.5)  # and every later one
        assert srv.alive() and status(srv.port, "/healthz") == 200
        assert srv.stop() == 0


def in_flight(port: int) -> float:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    line = next(x for x in body.splitlines() if x.startswith("testserver_in_flight_requests "))
    return float(line.split()[1])


def test_fail_at_concurrency_sheds_load(binary):
    """Two slow requests in flight (waited for on the server's own gauge, not a clock): a third is
    answered 503 at once; once they are done, a request is answered 200 again."""
    import threading
    import time

    with GoServer(binary=binary, delay=1.5, fail_at=3) as srv:
        got: list[int] = []
        threads = [threading.Thread(target=lambda: got.append(status(srv.port))) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while in_flight(srv.port) < 2:
            assert time.monotonic() < deadline, "two requests never got in flight"
            time.sleep(0.01)
        assert status(srv.port) == 503
        for t in threads:
            t.join(30)
        assert got == [200, 200]
        assert status(srv.port) == 200


def test_fault_flags_refuse_negative_counts(binary):
    import subprocess

    done = subprocess.run(
        [str(binary), "-fail-after-requests", "-1"], capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 2 and "-fail-after-requests" in done.stderr
