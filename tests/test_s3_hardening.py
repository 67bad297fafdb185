"""Notebook 12's companion under bad input (issue 19, items 2, 3, 5 and 9): bad and taken ports fail at once with the
port and what holds it; one local endpoint per process, so a second start cannot empty the first one's buckets; session
ids checked on every S3 path, not only in run_phase."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from companion.sessions.local_aws import EndpointError, LocalEndpoint, make_client, open_endpoint, running_endpoint
from companion.support.workspace import UnsafePathError


def start_within(make: Callable[[], LocalEndpoint], seconds: float) -> BaseException | None:
    """Build and start an endpoint in a thread (before the fix a start could block forever); the error it raised, or
    fail the test if it had not returned after `seconds`."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            make().start()
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - returned to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"start() still blocked after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("port", [-1, "abc", 70000, True, 2.5, None])
def test_a_bad_port_is_refused_at_once_naming_it(port):
    started = time.monotonic()
    error = start_within(lambda: LocalEndpoint(port=port), 10)
    assert time.monotonic() - started < 1
    assert isinstance(error, EndpointError), error
    assert "port must be a whole number from 1 to 65535" in str(error) and str(error).endswith(f"got {port!r}")
    assert running_endpoint() is None


def test_a_taken_port_fails_within_seconds_naming_the_port_and_its_holder():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        error = start_within(lambda: LocalEndpoint(port=port), 10)
        assert time.monotonic() - started < 5
    assert isinstance(error, EndpointError), error
    assert f"127.0.0.1:{port}" in str(error) and "held by this process" in str(error)
    assert running_endpoint() is None


def test_one_endpoint_per_process_a_second_start_cannot_empty_the_first():
    with LocalEndpoint() as first:
        s3 = make_client("s3", first)
        s3.create_bucket(Bucket="kept-by-the-first")
        error = start_within(LocalEndpoint, 10)
        assert isinstance(error, EndpointError) and "already running in this process at " + first.url in str(error)
        assert open_endpoint("local") is first and running_endpoint() is first
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["kept-by-the-first"]
    assert running_endpoint() is None
    with LocalEndpoint() as again:  # after a stop, a new one starts (empty)
        assert make_client("s3", again).list_buckets()["Buckets"] == []


@pytest.mark.parametrize("session_id", ["..", "../x", "a/b", "a\nb", ""])
def test_session_ids_are_checked_on_every_s3_path(session_id):
    from companion.sessions.s3_sessions import guarded_turn, read_session_messages, session_manager

    # nothing is called on these: the check comes before any request (None would fail on first use)
    with pytest.raises(UnsafePathError, match="Unsafe session id"):
        session_manager(session_id, "some-bucket", None, "http://127.0.0.1:9")
    with pytest.raises(UnsafePathError, match="Unsafe session id"):
        read_session_messages(None, "some-bucket", session_id)
    with pytest.raises(UnsafePathError, match="Unsafe session id"):
        guarded_turn(None, "hello", None, "some-bucket", session_id)
