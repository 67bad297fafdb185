"""A local Amazon Bedrock runtime endpoint on 127.0.0.1 that answers with the offline model.

The Bedrock backend is Strands' real `BedrockModel` with boto3 underneath. Against this endpoint its requests and the
answers cross a real HTTP connection in Bedrock's wire format, so what only breaks on that path (request shapes, tool
specs, toolUse/toolResult pairs, response parsing, usage, stop reasons, the event-stream framing of ConverseStream)
breaks here too, offline and free:

    with LocalBedrock() as local:                 # a free port on 127.0.0.1, stopped cleanly
        model = make_model("bedrock", endpoint_url=local.url)   # with fake credentials (see `make_model`)

It serves `Converse`, `ConverseStream` (the AWS event stream that botocore parses) and `InvokeModel` for Titan Text
Embeddings V2. Each request is checked as Bedrock checks it (:mod:`companion.models.converse_rules`, and the model id) and
refused with Bedrock's ValidationException text. It answers from the offline model, so what this path proves is the
wire, not a real model's quality, latency, quotas or model access.

Whatever a client sends, it gets an answer in Bedrock's shape: a body that is not a JSON object, messages that are not
a list of messages, a bad Content-Length, JSON nested too deeply to read are each a 400 ValidationException, as
Bedrock answers them; a client that hangs up before its answer is one line on stderr, not a traceback. The endpoint
logs the requests it answered (`requests`, `refused`) for the tests and notebook 00, bounded in number and in body
size, because `local_bedrock()` keeps one endpoint for the life of a kernel.
"""

from __future__ import annotations

import asyncio
import binascii
import json
import logging
import os
import re
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from companion.models.converse_rules import violations

__all__ = ["KNOWN_MODEL_IDS", "LocalBedrock", "TITAN_EMBED_MODEL_ID", "encode_event", "local_bedrock"]

LOCAL_HOST = "127.0.0.1"
TITAN_EMBED_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = (256, 512, 1024)
# The text models this endpoint answers for; any other id gets Bedrock's "invalid model identifier" error.
KNOWN_MODEL_IDS = ("amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0", "amazon.nova-micro-v1:0",
                   "us.amazon.nova-pro-v1:0", "us.amazon.nova-lite-v1:0")
INVALID_MODEL = "The provided model identifier is invalid."
_PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<op>converse|converse-stream|invoke)$")
MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest request body read (Bedrock's own limits are lower); a larger Content-Length is refused unread."""
_HUNG_UP = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)
_log = logging.getLogger(__name__)


class ClientHungUp(ConnectionError):
    """The client closed its connection before its request was read whole or its answer was sent."""


def _malformed(body: Any) -> str | None:
    """Why a Converse request body is not one Bedrock would read (None: its shape is fine), in Bedrock's words."""
    if not isinstance(body, dict):
        return f"Malformed input request: the request body must be a JSON object, not {type(body).__name__}."
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "Malformed input request: messages must be a list of messages."
    for number, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return f"Malformed input request: messages.{number} must be an object with a content list."
        if "role" in message and not isinstance(message["role"], str):
            return f"Malformed input request: messages.{number}.role must be a string."
        if not all(isinstance(block, dict) for block in message["content"]):
            return f"Malformed input request: messages.{number}.content must be a list of content blocks."
    system = body.get("system")
    if system is not None and not (isinstance(system, list) and all(isinstance(b, dict) for b in system)):
        return "Malformed input request: system must be a list of content blocks."
    tool_config = body.get("toolConfig")
    if tool_config is not None:
        tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
        if not isinstance(tools, list) or not all(
                isinstance(t, dict) and (not isinstance(t.get("toolSpec"), dict)
                                         or isinstance(t["toolSpec"].get("name"), str)) for t in tools):
            return "Malformed input request: toolConfig.tools must be a list of tools, each toolSpec with a name."
    return None


def encode_event(event_type: str, payload: dict[str, Any]) -> bytes:
    """One frame of the AWS event stream (application/vnd.amazon.eventstream), as ConverseStream sends it."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


def _strands_request(body: dict[str, Any]) -> tuple[list[dict], list[dict], str | None]:
    """Converse's request body as the offline model's stream() takes it: messages, tool specs, system prompt."""
    specs = []
    for tool in (body.get("toolConfig") or {}).get("tools", []):
        spec = tool.get("toolSpec")
        if spec:
            specs.append({"name": spec["name"], "description": spec.get("description", ""),
                          "inputSchema": spec.get("inputSchema", {})})
    system = "\n".join(block["text"] for block in body.get("system") or [] if "text" in block) or None
    return body.get("messages") or [], specs, system


class _Answer:
    """The offline model's events for one request, gathered into Converse's response pieces."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.content: list[dict[str, Any]] = []
        text, tool, tool_input = "", None, ""
        for event in events:
            if "contentBlockStart" in event:
                tool = event["contentBlockStart"]["start"]["toolUse"]
            elif "contentBlockDelta" in event:
                delta = event["contentBlockDelta"]["delta"]
                text += delta.get("text", "")
                tool_input += delta.get("toolUse", {}).get("input", "")
            elif "contentBlockStop" in event:
                if tool is not None:
                    self.content.append({"toolUse": {**tool, "input": json.loads(tool_input or "{}")}})
                elif text:
                    self.content.append({"text": text})
                text, tool, tool_input = "", None, ""
            elif "messageStop" in event:
                self.stop_reason = event["messageStop"]["stopReason"]
            elif "metadata" in event:
                self.usage = event["metadata"]["usage"]
                self.metrics = event["metadata"].get("metrics", {"latencyMs": 0})


class _Server(ThreadingHTTPServer):
    """The HTTP server, with one log line (not a traceback) for a connection that fails outside a request's answer."""

    daemon_threads = True
    on_hung_up: Any = None  # the endpoint's count of clients that hung up, called for each one seen here

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, _HUNG_UP):
            if self.on_hung_up is not None:
                self.on_hung_up()
            _log.warning("local Bedrock endpoint: client %s:%s hung up (%s)", *client_address[:2],
                         type(error).__name__)
        else:
            _log.warning("local Bedrock endpoint: connection from %s:%s failed: %s: %.200s", *client_address[:2],
                         type(error).__name__, error)


class LocalBedrock:
    """Bedrock's runtime API on 127.0.0.1, answered by the offline model (either voice); one per `with` block."""

    MAX_LOGGED_REQUESTS = 200
    """How many requests `requests` and `refused` keep (the latest)."""
    MAX_LOGGED_BODY = 256 * 1024
    """The largest request body `requests` keeps as it was sent (bytes); a larger one is logged by its size only."""

    def __init__(self, port: int = 0, *, voice: str | None = None) -> None:
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"port must be 0 (any free port) or 1-65535, got {port!r}")
        self.port, self.voice = port, voice
        self.requests: list[dict[str, Any]] = []  # what the latest calls sent: operation, model id, body (bounded)
        self.refused: list[dict[str, Any]] = []   # the latest requests refused, with Bedrock's message (bounded)
        self.dropped = 0  # clients that hung up before their answer (in their request or before it was read)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the local Bedrock endpoint is not running: call start() or use `with`")
        return f"http://{LOCAL_HOST}:{self._server.server_address[1]}"

    def start(self) -> LocalBedrock:
        if self._server is not None:
            return self
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # An answer is written in two sends (headers, body); with Nagle's algorithm on, the body waits for the
            # client's delayed ACK of the headers, about 40 ms a call on Linux. Bedrock answers do not wait.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet: a notebook shows only what it prints
                return

            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                endpoint._answer(self)

        try:
            self._server = _Server((LOCAL_HOST, self.port), Handler)
        except OSError as error:
            raise RuntimeError(f"the local Bedrock endpoint cannot listen on {LOCAL_HOST}:{self.port}: {error}") from None
        self._server.on_hung_up = self._count_hung_up
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-bedrock", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> LocalBedrock:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ answering

    def _model(self) -> Any:
        from companion.models.offline_model import OfflineModel

        return OfflineModel(**({"voice": self.voice} if self.voice else {}))

    def _count_hung_up(self) -> None:
        with self._lock:
            self.dropped += 1

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        """Answer one request whatever it holds: a client that hangs up is one log line, an answer that fails inside
        the endpoint is a 500 in Bedrock's shape with one log line, never a dropped connection and a traceback."""
        try:
            self._handle(request)
        except (ClientHungUp, *_HUNG_UP) as error:
            request.close_connection = True
            self._count_hung_up()
            _log.warning("local Bedrock endpoint: client %s:%s hung up before its answer was sent (%s)",
                         *request.client_address[:2], type(error).__name__)
        except Exception as error:  # a bug of the endpoint or the offline model: still an answer, as Bedrock gives
            request.close_connection = True
            _log.warning("local Bedrock endpoint: %s on %s: %.200s", type(error).__name__, request.path, error)
            try:
                self._error(request, 500, "InternalServerException", f"The local endpoint failed: {type(error).__name__}")
            except _HUNG_UP:
                pass

    def _body(self, request: BaseHTTPRequestHandler) -> bytes | str:
        """The request's body, or why its Content-Length cannot be read (a str; the connection is then closed,
        since where the body ends is unknown). Raises ClientHungUp when the client sends less than it announced."""
        given = request.headers.get("Content-Length")
        if given is None:
            return b""
        if not given.strip().isdigit():
            request.close_connection = True
            return f"Invalid Content-Length header: {given[:40]!r} is not a number of bytes."
        length = int(given)
        if length > MAX_BODY_BYTES:
            request.close_connection = True
            return f"Invalid Content-Length header: {length:,} bytes is more than this endpoint reads ({MAX_BODY_BYTES:,})."
        raw = request.rfile.read(length) if length else b""
        if len(raw) < length:
            raise ClientHungUp(f"{len(raw):,} of {length:,} bytes received")
        return raw

    def _log_request(self, entry: dict[str, Any], raw: bytes) -> None:
        if len(raw) > self.MAX_LOGGED_BODY:
            entry = {**entry, "body": {"omitted": f"{len(raw):,} bytes (over the log's limit)"}}
        with self._lock:
            self.requests.append(entry)
            del self.requests[:-self.MAX_LOGGED_REQUESTS]

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        raw = self._body(request)
        if isinstance(raw, str):
            return self._error(request, 400, "ValidationException", raw)
        match = _PATH.match(request.path.split("?")[0])
        if match is None:
            return self._error(request, 404, "UnknownOperationException", f"No operation at {request.path[:200]}")
        model_id, operation = unquote(match["model"]), match["op"]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._error(request, 400, "ValidationException", "The request body is not valid JSON.")
        except RecursionError:
            return self._error(request, 400, "ValidationException",
                               "Malformed input request: the request body is nested too deeply.")
        self._log_request({"operation": operation, "model_id": model_id, "body": body}, raw)
        if operation == "invoke":
            if not isinstance(body, dict):
                return self._refuse(request, model_id, "malformed", _malformed(body) or "Malformed input request.")
            return self._invoke(request, model_id, body)
        if model_id not in KNOWN_MODEL_IDS:
            return self._refuse(request, model_id, "model-id", INVALID_MODEL)
        problem = _malformed(body)
        if problem is not None:
            return self._refuse(request, model_id, "malformed", problem)
        messages, specs, system = _strands_request(body)
        try:
            json.dumps(messages)  # the offline model copies and reads what it is given; Bedrock caps the depth too
        except RecursionError:
            return self._refuse(request, model_id, "malformed",
                                "Malformed input request: the request body is nested too deeply.")
        found = violations(messages)
        if found:
            return self._refuse(request, model_id, *found[0])
        answer = _Answer(asyncio.run(self._events(messages, specs, system)))
        if operation == "converse":
            payload = {"output": {"message": {"role": "assistant", "content": answer.content}},
                       "stopReason": answer.stop_reason, "usage": answer.usage, "metrics": answer.metrics}
            return self._json(request, 200, payload)
        self._stream(request, answer)

    async def _events(self, messages: list[dict], specs: list[dict], system: str | None) -> list[dict]:
        return [event async for event in self._model().stream(messages, specs or None, system)]

    def _stream(self, request: BaseHTTPRequestHandler, answer: _Answer) -> None:
        frames = [encode_event("messageStart", {"role": "assistant"})]
        for index, block in enumerate(answer.content):
            if "toolUse" in block:
                use = block["toolUse"]
                frames.append(encode_event("contentBlockStart", {
                    "start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}},
                    "contentBlockIndex": index}))
                frames.append(encode_event("contentBlockDelta", {
                    "delta": {"toolUse": {"input": json.dumps(use["input"])}}, "contentBlockIndex": index}))
            else:
                frames.append(encode_event("contentBlockDelta", {"delta": {"text": block["text"]},
                                                                 "contentBlockIndex": index}))
            frames.append(encode_event("contentBlockStop", {"contentBlockIndex": index}))
        frames.append(encode_event("messageStop", {"stopReason": answer.stop_reason}))
        frames.append(encode_event("metadata", {"usage": answer.usage, "metrics": answer.metrics}))
        data = b"".join(frames)
        request.send_response(200)
        request.send_header("Content-Type", "application/vnd.amazon.eventstream")
        request.send_header("Content-Length", str(len(data)))
        request.send_header("x-amzn-RequestId", "local-bedrock")
        request.end_headers()
        request.wfile.write(data)

    def _invoke(self, request: BaseHTTPRequestHandler, model_id: str, body: dict[str, Any]) -> None:
        if model_id != TITAN_EMBED_MODEL_ID:
            return self._refuse(request, model_id, "model-id", INVALID_MODEL)
        text = body.get("inputText")
        dimensions = body.get("dimensions", 1024)
        if not isinstance(text, str) or not text.strip():
            return self._refuse(request, model_id, "titan-input", "Malformed input request: inputText is required.")
        if dimensions not in TITAN_DIMENSIONS:
            return self._refuse(request, model_id, "titan-dimensions",
                                f"Malformed input request: dimensions must be one of {list(TITAN_DIMENSIONS)}.")
        from companion.models.embeddings import titan_like_vector

        vector = titan_like_vector(text, dimensions, normalize=body.get("normalize", True))
        self._json(request, 200, {"embedding": vector, "inputTextTokenCount": max(1, len(text) // 4)})

    def _refuse(self, request: BaseHTTPRequestHandler, model_id: str, rule: str, message: str) -> None:
        with self._lock:
            self.refused.append({"model_id": model_id, "rule": rule, "message": message})
            del self.refused[:-self.MAX_LOGGED_REQUESTS]
        self._error(request, 400, "ValidationException", message)

    def _error(self, request: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
        request.send_response(status)
        request.send_header("x-amzn-ErrorType", f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/")
        data = json.dumps({"message": message}).encode()
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _json(self, request: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.send_header("x-amzn-RequestId", "local-bedrock")
        request.end_headers()
        request.wfile.write(data)


_RUNNING: LocalBedrock | None = None
_RUNNING_LOCK = threading.Lock()
CONNECT_LOG_ENV = "WORKBOOK_CONNECT_LOG"
_SEEN_HOSTS: set[str] = set()


def _record_connection(event: str, args: tuple) -> None:
    """Audit hook: append each host this process connects to (once) to $WORKBOOK_CONNECT_LOG."""
    if event != "socket.connect":
        return
    address = args[1]
    host = str(address[0]) if isinstance(address, tuple) else "unix-socket"
    if host in _SEEN_HOSTS:
        return
    _SEEN_HOSTS.add(host)
    with open(os.environ[CONNECT_LOG_ENV], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {host}\n")


def local_bedrock(voice: str | None = None) -> LocalBedrock:
    """The process's local endpoint, started on first use and kept for the life of the process (a notebook's kernel,
    a child process of notebook 01 or 11): `make_model("bedrock", bedrock_endpoint="local")` uses it."""
    global _RUNNING
    with _RUNNING_LOCK:
        if _RUNNING is None:
            if os.environ.get(CONNECT_LOG_ENV):  # the test suite's proof that only 127.0.0.1 is contacted
                sys.addaudithook(_record_connection)
            _RUNNING = LocalBedrock(voice=voice).start()
        return _RUNNING
