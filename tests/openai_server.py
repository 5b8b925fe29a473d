"""A real local HTTP server speaking the OpenAI chat-completions API, with scripted answers.

litellm is pointed at it with ``model="openai/<name>"`` and ``api_base=server.url``: every test call goes through
litellm's real HTTP client to a real socket. Answers come from a responder: a function of the request body that
returns the assistant text, or an ``Answer`` (text plus a delay or an HTTP error status).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    content: str = ""
    delay_s: float = 0.0
    status: int = 200


Responder = Callable[[dict[str, Any]], "str | Answer"]


def scripted(answers: Iterable[str | Answer], then: str | Answer | None = None) -> Responder:
    """Answers in order, one per request; after the script runs out, ``then`` (or an HTTP 500)."""
    queue = list(answers)
    lock = threading.Lock()

    def respond(_body: dict[str, Any]) -> str | Answer:
        with lock:
            if queue:
                return queue.pop(0)
        return then if then is not None else Answer(content="script exhausted", status=500)

    return respond


def last_user_text(body: dict[str, Any]) -> str:
    users = [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


class OpenAIServer:
    """``with OpenAIServer(responder) as server:`` serves on 127.0.0.1:<free port> in a daemon thread."""

    def __init__(self, responder: Responder, model: str = "scripted"):
        self.responder = responder
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with server._lock:
                    server.requests.append(body)
                answer = server.responder(body)
                if isinstance(answer, str):
                    answer = Answer(content=answer)
                if answer.delay_s:
                    time.sleep(answer.delay_s)
                if answer.status != 200:
                    self._send(
                        answer.status,
                        {
                            "error": {
                                "message": answer.content or "error",
                                "type": "server_error",
                                "code": answer.status,
                            }
                        },
                    )
                    return
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", server.model),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": answer.content},
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                )

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def litellm_model(self) -> str:
        return f"openai/{self.model}"

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
