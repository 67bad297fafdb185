"""A local AWS-compatible endpoint on 127.0.0.1 (moto's server, in a thread), and the clients that talk to it or to AWS.

Notebook 12 and its tests start the endpoint, use it and stop it, all in one process:

    with LocalEndpoint() as local:
        s3 = make_client("s3", local)      # fake credentials, endpoint http://127.0.0.1:<port>
        ...
    local.leftover_threads                 # [] when the server left nothing behind

`endpoint="aws"` (see :func:`open_endpoint`) returns None instead, and the same helpers build clients for real AWS
with the usual credentials and the limits of `companion.models.aws` (which this module wraps and does not change).

The local endpoint emulates the S3 and DynamoDB HTTP APIs: the same requests, answers and error codes. It does not
emulate latency across a network, request-rate limits, DynamoDB's native vector search, IAM (any key is accepted),
DynamoDB's eventual consistency (a `Query` here always sees the last write), the atomicity of S3's conditional writes
(moto answers `If-None-Match: *` by looking the key up, then writing: two requests that arrive together can both
succeed, where S3 lets one through and answers the other 412), or the bill.

One endpoint per process: moto keeps one store per Python process, and every start empties it, so `start()` refuses
while another endpoint of this process is running, and :func:`open_endpoint` returns the running one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from companion.models import aws

LOCAL_HOST = "127.0.0.1"
LOCAL_REGION = "us-east-1"
# Fake credentials for the local endpoint only: botocore needs some to sign requests, moto accepts any.
FAKE_ACCESS_KEY = "testing"
FAKE_SECRET_KEY = "testing"  # noqa: S105 - not a secret: the local endpoint accepts any key
ENDPOINTS = ("local", "aws")
MAX_ATTEMPTS = 3  # one try and two retries for storage calls (throttling is retried; a 4xx such as 403 is not)
CONNECT_TIMEOUT = 2  # seconds; on loopback a refused connection fails at once
READ_TIMEOUT = 10


class EndpointError(RuntimeError):
    """The local endpoint could not start, or stopped leaving something behind."""


def offline_environment() -> None:
    """What a process that talks to the local endpoint sets: no EC2 metadata probe (169.254.169.254)."""
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


_RUNNING: dict[str, Any] = {"endpoint": None}  # the one local endpoint this process serves (moto: one store per process)
MAX_PORT = 65535


def running_endpoint() -> LocalEndpoint | None:
    """The local endpoint this process started and has not stopped, or None."""
    return _RUNNING["endpoint"]


def check_port(port: Any) -> int:
    """0 (any free port) or a port number from 1 to 65535; anything else is refused at once, naming the value."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise EndpointError(f"port must be a whole number from 1 to {MAX_PORT}, or 0 for any free port; got {port!r}")
    return port


def port_holder(host: str, port: int) -> str:
    """Who listens on host:port, as far as this machine tells (Linux: /proc; elsewhere: unknown)."""
    running = running_endpoint()
    if running is not None and running.port == port:
        return f"this process's own local endpoint ({running.url})"
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table, encoding="ascii").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    if not inodes:
        return "another program (this system does not say which)"
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        links = set()
        try:
            for fd in (pid_dir / "fd").iterdir():
                try:
                    links.add(os.readlink(fd))
                except OSError:  # closed meanwhile
                    continue
        except OSError:  # another user's process
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            command = " ".join((pid_dir / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
            who = "this process" if int(pid_dir.name) == os.getpid() else f"process {pid_dir.name}"
            return f"{who} ({command[:120] or 'no command line'})"
    return "a process this user cannot see"


@lru_cache(maxsize=1)
def _dispatcher_class() -> type:
    """moto's request dispatcher, with its list of services read once.

    moto 5.2 decides which service a request is for by listing its own package folder (one stat per service, about
    200) on every request, holding a lock every request thread waits on: about a sixth of notebook 12's processor time.
    The folder does not change while the endpoint runs; a host that is not a service name goes to moto as before.
    """
    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    services = frozenset(backends.list_of_moto_modules())

    class Dispatcher(DomainDispatcherApplication):
        def get_backend_for_host(self, host: str | None) -> Any:
            if host is None or host == "moto_api" or host in services:
                return host
            for backend, pattern in self.backend_url_patterns:
                if pattern.match(f"http://{host}"):
                    return backend
            return super().get_backend_for_host(host)  # moto's own answer for a host it does not know

    return Dispatcher


class LocalEndpoint:
    """moto's server on 127.0.0.1 and a free port (or `port`), emptied at start, stopped and checked at stop.

    One per process: moto keeps one store per Python process, so starting a second endpoint would empty the first
    one's buckets and tables. `start()` refuses while another is running (use :func:`running_endpoint`, or stop it)."""

    def __init__(self, host: str = LOCAL_HOST, port: int = 0):
        if host != LOCAL_HOST:
            raise EndpointError(f"the local endpoint listens on {LOCAL_HOST} only, not {host!r}")
        self.host, self.port = host, check_port(port)
        self.url: str | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._own_threads: list[threading.Thread] = []  # its serving thread and request threads
        self.leftover_threads: list[str] = []

    def start(self) -> LocalEndpoint:
        from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        running = running_endpoint()
        if running is not None:
            raise EndpointError(
                f"a local endpoint is already running in this process at {running.url}; moto keeps one store per "
                "process, so a second endpoint would empty its buckets and tables. Use that one "
                "(companion.sessions.local_aws.running_endpoint()), or stop it first.")
        offline_environment()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr
        app = _dispatcher_class()(create_backend_app)
        # Bound here, in the caller's thread: a taken port fails now (moto's own server thread would die and leave
        # start() waiting forever; werkzeug's make_server prints and exits on a taken port, so probe it first).
        if self.port:
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug's server does
                try:
                    probe.bind((self.host, self.port))
                except OSError as error:
                    raise self._taken(error.strerror or str(error)) from None
        try:
            self._server = make_server(self.host, self.port, app, True, request_handler=MotoRequestHandler)
        except (OSError, SystemExit) as error:  # taken between the probe and here
            raise self._taken(str(error)) from None
        host, port = self._server.server_address[:2]
        self.port = port
        self.url = f"http://{host}:{port}"
        self._own_threads = []
        self._server.process_request = self._process_request  # its request threads, named and kept: see stop()
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"local-endpoint-{port}", daemon=True)
        self._own_threads.append(self._thread)
        self._thread.start()
        _RUNNING["endpoint"] = self
        try:
            self.reset()
        except Exception:
            self.stop()
            raise
        return self

    def _process_request(self, request: Any, client_address: Any) -> None:
        """socketserver.ThreadingMixIn's, with a named thread that stop() counts as this endpoint's own (another
        server in the process, such as the local Bedrock endpoint, starts threads of its own meanwhile)."""
        server = self._server
        thread = threading.Thread(target=server.process_request_thread, args=(request, client_address),
                                  name=f"local-endpoint-{self.port}-request", daemon=True)
        self._own_threads = [t for t in self._own_threads if t.is_alive()] + [thread]
        thread.start()

    def _taken(self, reason: str) -> EndpointError:
        return EndpointError(f"cannot listen on {self.host}:{self.port}: {reason}; held by "
                             f"{port_holder(self.host, self.port)}. Use port=0 for any free port.")

    def reset(self) -> None:
        """Empty every bucket and table: moto keeps its state per Python process, across server restarts."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - loopback only
            answer.read()

    def stop(self, wait: float = 5.0) -> list[str]:
        """Stop serving, close the listening socket, and return the names of threads still alive that it started
        (its serving thread and the threads that answered its requests), after waiting up to `wait` seconds."""
        if self._server is None:
            return self.leftover_threads
        self._server.shutdown()  # serve_forever returns
        if self._thread is not None:
            self._thread.join(wait)
        self._server.server_close()
        self._server, self._thread = None, None
        if _RUNNING["endpoint"] is self:
            _RUNNING["endpoint"] = None
        deadline = time.monotonic() + wait
        while True:  # its serving thread and request threads (other threads of the process are not its own)
            extra = [t for t in self._own_threads if t.is_alive()]
            if not extra or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.leftover_threads = [t.name for t in extra]
        return self.leftover_threads

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def open_endpoint(endpoint: str) -> LocalEndpoint | None:
    """`"local"`: a started LocalEndpoint (the one already running in this process, with its data, if there is
    one); `"aws"`: None (clients then go to the region's real endpoints)."""
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint must be one of {ENDPOINTS}; got {endpoint!r}")
    if endpoint == "aws":
        return None
    return running_endpoint() or LocalEndpoint().start()


def client_config(*, local: bool = True, **overrides: Any) -> Any:
    """`companion.models.aws.client_config()` (time limits, standard retries) with the storage limits of this module, and
    path-style S3 URLs for the local endpoint (http://127.0.0.1:port/bucket/key; AWS gets its default style)."""
    from botocore.config import Config

    settings = dict(
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        s3={"addressing_style": "path" if local else "auto"},
    )
    settings.update(overrides)
    return aws.client_config().merge(Config(**settings))


def boto_session(local: LocalEndpoint | None, *, access_key: str = FAKE_ACCESS_KEY, secret_key: str = FAKE_SECRET_KEY,
                 region: str | None = None) -> Any:
    """A boto3 session: fake credentials for the local endpoint, the usual credential chain for AWS."""
    import boto3

    if local is None:
        return aws.session(region)
    offline_environment()
    return boto3.Session(aws_access_key_id=access_key, aws_secret_access_key=secret_key,
                         region_name=region or LOCAL_REGION)


def endpoint_url(local: LocalEndpoint | None) -> str | None:
    return None if local is None else local.url


def make_client(service: str, local: LocalEndpoint | None, session: Any = None, **config: Any) -> Any:
    """A client for `service` on the local endpoint (or AWS when `local` is None), with the module's limits."""
    session = session or boto_session(local)
    return session.client(service, endpoint_url=endpoint_url(local), config=client_config(local=local is not None, **config))


def child_environment(local: LocalEndpoint | None) -> dict[str, str]:
    """Environment variables for a child process that must reach the same endpoint (and nothing else)."""
    env = dict(os.environ, AWS_EC2_METADATA_DISABLED="true")
    if local is not None:
        env.update(AWS_ACCESS_KEY_ID=FAKE_ACCESS_KEY, AWS_SECRET_ACCESS_KEY=FAKE_SECRET_KEY,
                   AWS_DEFAULT_REGION=LOCAL_REGION, AWS_REGION=LOCAL_REGION, WORKBOOK_S3_ENDPOINT=local.url or "")
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
    return env


# --- what the clients did: every API call timed and counted, from botocore's own events ---------------------------


@dataclass
class RequestLog:
    """Every API call made through the sessions it is attached to: service, operation, seconds, ok."""

    calls: list[tuple[str, str, float, bool]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def attach(self, session: Any) -> Any:
        """Register on a boto3 session (before its clients are created: they copy its handlers); returns it."""
        session.events.register("before-call", self._before)
        session.events.register("after-call", self._after)
        session.events.register("after-call-error", self._error)
        return session

    def _before(self, context: dict[str, Any], **kwargs: Any) -> None:
        context["_workbook_started"] = time.perf_counter()

    def _record(self, event_name: str, context: dict[str, Any], ok: bool) -> None:
        started = context.get("_workbook_started")
        if started is None:
            return
        seconds = time.perf_counter() - started
        _, service, operation = event_name.split(".", 2)  # "after-call.s3.PutObject"
        with self._lock:
            self.calls.append((service, operation, seconds, ok))

    def _after(self, event_name: str, context: dict[str, Any], http_response: Any = None, **kwargs: Any) -> None:
        self._record(event_name, context, http_response is not None and http_response.status_code < 300)

    def _error(self, event_name: str, context: dict[str, Any], **kwargs: Any) -> None:
        self._record(event_name, context, False)

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()

    def counts(self) -> dict[str, int]:
        """Calls per operation, e.g. {"PutObject": 1000, "GetObject": 40}."""
        out: dict[str, int] = {}
        for _, operation, _, _ in self.calls:
            out[operation] = out.get(operation, 0) + 1
        return dict(sorted(out.items()))

    def seconds(self, operations: set[str]) -> list[float]:
        return [s for _, op, s, _ in self.calls if op in operations]

    def outcomes(self, operation: str) -> dict[str, int]:
        """How many of the `operation` calls logged succeeded (HTTP 2xx) and how many failed."""
        found = [ok for _, name, _, ok in self.calls if name == operation]
        return {"succeeded": found.count(True), "failed": found.count(False)}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation, as numpy's default."""
    import numpy as np

    return float(np.percentile(values, q)) if values else float("nan")


# --- failures on purpose: answers a real service gives, injected before the request is sent ---------------------


class _Body:
    def __init__(self, data: bytes):
        self._data = data

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._data


S3_ERRORS = {
    "SlowDown": (503, "Please reduce your request rate."),
    "InvalidAccessKeyId": (403, "The AWS Access Key Id you provided does not exist in our records."),
}


def s3_error_response(url: str, code: str) -> Any:
    from botocore.awsrequest import AWSResponse

    status, message = S3_ERRORS[code]
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            "<RequestId>injected</RequestId></Error>").encode()
    return AWSResponse(url, status, {"Content-Type": "application/xml", "Content-Length": str(len(body))}, _Body(body))


@contextmanager
def inject_s3_error(client: Any, code: str, *, operation: str = "*", times: int | None = None,
                    url_contains: str = "") -> Iterator[dict[str, int]]:
    """Answer the S3 `operation` requests whose URL contains `url_contains` with the error `code` (SlowDown,
    InvalidAccessKeyId) before they are sent, `times` times (None: every time). Yields {"injected": n, "attempts": n},
    counted as it goes (attempts: the matching requests botocore tried to send, retries included). `client` is a
    client, or a boto3 session (then only the clients created from it inside the block get the hook)."""
    if code not in S3_ERRORS:
        raise ValueError(f"code must be one of {sorted(S3_ERRORS)}")
    seen = {"injected": 0, "attempts": 0}

    def answer(request: Any, **kwargs: Any) -> Any:
        if url_contains not in request.url:
            return None
        seen["attempts"] += 1
        if times is None or seen["injected"] < times:
            seen["injected"] += 1
            return s3_error_response(request.url, code)
        return None

    events = client.meta.events if hasattr(client, "meta") else client.events  # a client, or a boto3 session
    event = f"before-send.s3.{operation}"
    events.register(event, answer)
    try:
        yield seen
    finally:
        events.unregister(event, answer)


def describe(local: LocalEndpoint | None) -> str:
    if local is None:
        return "endpoint: real AWS (the usual credentials; region from AWS_REGION or the profile)"
    return (f"endpoint: local, moto {_moto_version()} on {local.host} (a free port chosen at start; fake credentials, "
            f"region {LOCAL_REGION})")


def _moto_version() -> str:
    from importlib.metadata import version

    return version("moto")


def json_size(data: Any) -> int:
    """Bytes of `data` as the SDK's S3 session manager writes it (indent 2, UTF-8)."""
    return len(json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8"))


# --- where this process connected: a socket audit hook, installed once per process --------------------------------

_AUDIT: dict[str, Any] = {"installed": False, "addresses": [], "ports": []}


def _audit(event: str, args: tuple) -> None:
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else str(address)
        _AUDIT["addresses"].append(host)
        _AUDIT["ports"].append((host, address[1] if isinstance(address, tuple) and len(address) > 1 else None))


def record_connections() -> list[str]:
    """Start recording the host of every socket this process connects from now on; returns the (live) list.
    Audit hooks cannot be removed, so the hook is installed once and the list is emptied on each call."""
    import sys

    if not _AUDIT["installed"]:
        sys.addaudithook(_audit)
        _AUDIT["installed"] = True
    _AUDIT["addresses"].clear()
    _AUDIT["ports"].clear()
    return _AUDIT["addresses"]


def recorded_addresses() -> list[tuple[str, int | None]]:
    """(host, port) of every socket connected since :func:`record_connections` was last called."""
    return list(_AUDIT["ports"])


def port_of(url: str | None) -> int | None:
    """The port of an http://host:port URL, or None."""
    from urllib.parse import urlsplit

    return urlsplit(url).port if url else None


def name_connections(addresses: list[tuple[str, int | None]], names: dict[int | None, str]) -> list[str]:
    """Each distinct address connected, by its name in `names` (port -> name) when it is on 127.0.0.1, else as
    host:port; sorted. A list of names only says every connection went to a local endpoint this process knows."""
    named = {names[port] if host == LOCAL_HOST and port in names else f"{host}:{port}" for host, port in addresses}
    return sorted(named)


def serving_port(thread: threading.Thread) -> int | None:
    """The port of the socketserver a running thread serves (its serve_forever or one of its request threads), or
    None. It reads the thread's target, which CPython keeps until the thread's run() returns."""
    target = getattr(thread, "_target", None)
    server = getattr(target, "__self__", None)
    address = getattr(server, "server_address", None)
    return address[1] if isinstance(address, tuple) and len(address) > 1 else None


_AWS_ERROR = re.compile(r"An error occurred \((\w+)\) when calling the (\w+) operation(?: \(reached max retries: \d+\))?: (.*)")


def short_error(error: BaseException, url: str | None = None) -> str:
    """`Type: service code on Operation: message` for an AWS error (also inside the SDK's wrappers), else the
    first line; the endpoint's URL (which holds a port that changes on every run) replaced by <endpoint>."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    found = _AWS_ERROR.search(text)
    if found:
        code, operation, message = found.groups()
        return f"{type(error).__name__}: {code} on {operation}: {message}"
    if url:
        text = text.replace(url, "<endpoint>")
    return f"{type(error).__name__}: {text}"


# --- evidence for notebook 12's checks, kept apart from RequestLog -----------------------------------------------


class Audit:
    """What a boto3 session's clients did, recorded for the checks apart from :class:`RequestLog` (which the lesson's
    tables read): every S3 `PutObject` as (bucket, key, conditional, HTTP status of the last attempt), and the address
    of every socket this process connects (:func:`record_connections`).

    Attach it before the session's clients are created: they copy the session's handlers. `puts` fills as the calls
    return, from any thread."""

    def __init__(self, session: Any) -> None:
        self.puts: list[tuple[str, str, bool, int | None]] = []
        self.hosts = record_connections()
        self._lock = threading.Lock()
        session.events.register("before-parameter-build.s3.PutObject", self._asked)
        session.events.register("after-call.s3.PutObject", self._answered)
        session.events.register("after-call-error.s3.PutObject", self._failed)

    @staticmethod
    def _asked(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["_audit_put"] = (params.get("Bucket", ""), params.get("Key", ""), "IfNoneMatch" in params)

    def _note(self, context: dict[str, Any], status: int | None) -> None:
        bucket, key, conditional = context.get("_audit_put", ("", "", False))
        with self._lock:
            self.puts.append((bucket, key, conditional, status))

    def _answered(self, context: dict[str, Any], http_response: Any = None, **_: Any) -> None:
        self._note(context, http_response.status_code if http_response is not None else None)

    def _failed(self, context: dict[str, Any], **_: Any) -> None:
        self._note(context, None)


DEFAULT_BUCKET = "workbook-12-sessions"  # notebook 12's default: fine locally, taken on AWS (bucket names are global)


def check_storage(endpoint: str, bucket: str, memory_table: str, *, default_bucket: str = DEFAULT_BUCKET) -> str:
    """Notebook 12's storage parameters, checked before anything is written: the endpoint is "local" or "aws", the
    bucket and table names follow AWS's rules, and with "aws" the bucket is not the notebook's default name (bucket
    names are global). Returns the endpoint."""
    from companion.support import parameters as check

    check.choice("endpoint", endpoint, ENDPOINTS)
    check.s3_bucket_name("bucket", bucket)
    check.dynamodb_table_name("memory_table", memory_table)
    if len(bucket) > 55:
        raise check.ParameterError(f"bucket must be at most 55 characters (the failure demo adds '-missing'); got "
                                   f"{bucket!r}. Change it in the parameters cell (or papermill -p).")
    if endpoint == "aws" and bucket == default_bucket:
        raise check.ParameterError(f"bucket must be a name of your own with endpoint='aws' (bucket names are global); "
                                   f"got {bucket!r}. Change it in the parameters cell (or papermill -p).")
    return endpoint


def closed_port_url() -> str:
    """The URL of a port on 127.0.0.1 that nobody listens on: bound, then closed."""
    with socket.socket() as probe:
        probe.bind((LOCAL_HOST, 0))
        return f"http://{LOCAL_HOST}:{probe.getsockname()[1]}"


def check_parameters(*, endpoint: str, bucket: str, memory_table: str, users: int, turns: int, workers: int,
                     writers: int) -> str:
    """Notebook 12's parameters, all checked before anything is created: the storage names (:func:`check_storage`),
    then the load run's and the writers' numbers. A bad one raises `ParameterError`, saying what it must be. Returns
    the endpoint."""
    from companion.support import parameters as check

    check_storage(endpoint, bucket, memory_table)
    check.integer("users", users, minimum=2, maximum=500, why="two users at least, to compare their keys")
    check.integer("turns", turns, minimum=1, maximum=50)
    check.integer("workers", workers, minimum=1, maximum=64)
    check.integer("writers", writers, minimum=2, maximum=4, why="one fact per writer")
    return endpoint


@dataclass
class Storage:
    """What notebook 12 talks to: the local endpoint (None for AWS), its URL, one boto3 session with a
    :class:`RequestLog` (the lesson's counts) and an :class:`Audit` (the checks' evidence) attached before any client
    was made, and an S3 and a DynamoDB client from that session."""

    local: LocalEndpoint | None
    url: str | None
    session: Any
    s3: Any
    ddb: Any
    log: RequestLog
    audit: Audit

    def describe(self) -> str:
        return describe(self.local)


def ensure_bucket(s3: Any, bucket: str, *, must_be_empty: bool) -> None:
    """Create `bucket` if it does not exist; with `must_be_empty`, stop if it holds objects (the checks count them)."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("404", "NoSuchBucket"):
            raise
        region = s3.meta.region_name
        extra = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        s3.create_bucket(Bucket=bucket, **extra)
        return
    if must_be_empty and s3.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount", 0):
        raise RuntimeError(f"The bucket {bucket!r} is not empty; this notebook counts every object in it. "
                           "Name an empty bucket (or a new one) in the parameters cell.")


def open_storage(endpoint: str, bucket: str) -> Storage:
    """Start (or reuse) the local endpoint, or use AWS; build the session, attach the log and the audit, make the
    clients, and create `bucket` (it must be empty: the checks count every object in it)."""
    local = open_endpoint(endpoint)
    session = boto_session(local)  # fake credentials for the local endpoint
    log = RequestLog()
    log.attach(session)
    audit = Audit(session)
    s3 = make_client("s3", local, session)
    ddb = make_client("dynamodb", local, session)
    ensure_bucket(s3, bucket, must_be_empty=True)
    return Storage(local, endpoint_url(local), session, s3, ddb, log, audit)


class PutCount:
    """The PutObject calls of the clients made from a boto3 session while the count is open, by file name (the key's
    last part: `message_2.json`, `agent.json`) and by outcome: the lesson's count of what writers wrote, kept apart
    from the checks' :class:`Audit`. Open it before the clients are made (they copy the session's handlers):

        with PutCount(session) as puts:
            ...                      # clients made from `session` here are counted
        print(puts)                  # agent.json 2, message_2.json 2, message_3.json 2; all 6 succeeded
    """

    def __init__(self, session: Any) -> None:
        self.session = session
        self.by_file: dict[str, int] = {}
        self.failed = 0
        self._lock = threading.Lock()

    @staticmethod
    def _asked(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["_put_count_file"] = str(params.get("Key", "")).rsplit("/", 1)[-1]

    def _note(self, context: dict[str, Any], ok: bool) -> None:
        name = context.get("_put_count_file")
        if name is None:
            return
        with self._lock:
            self.by_file[name] = self.by_file.get(name, 0) + 1
            self.failed += not ok

    def _answered(self, context: dict[str, Any], http_response: Any = None, **_: Any) -> None:
        self._note(context, http_response is not None and http_response.status_code < 300)

    def _error(self, context: dict[str, Any], **_: Any) -> None:
        self._note(context, False)

    def _handlers(self) -> list[tuple[str, Any]]:
        return [("before-parameter-build.s3.PutObject", self._asked), ("after-call.s3.PutObject", self._answered),
                ("after-call-error.s3.PutObject", self._error)]

    def __enter__(self) -> PutCount:
        for event, handler in self._handlers():
            self.session.events.register(event, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for event, handler in self._handlers():
            self.session.events.unregister(event, handler)

    @property
    def total(self) -> int:
        return sum(self.by_file.values())

    def __str__(self) -> str:
        files = ", ".join(f"{name} {n}" for name, n in sorted(self.by_file.items()))
        outcome = f"all {self.total} succeeded" if not self.failed else f"{self.failed} of {self.total} failed"
        return f"{files}; {outcome}" if files else "none"
