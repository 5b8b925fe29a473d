"""The OpenAI-compatible HTTP API over a ``ChatEngine`` (FastAPI + uvicorn), loopback only.

Routes: ``POST /v1/chat/completions`` (non-streaming, or ``stream: true`` as server-sent events carrying the whole
reply in one content chunk: the reply is generated in a batch, not token by token), ``GET /v1/models``,
``GET /v1/models/{id}``, ``GET /health``. Errors use OpenAI's JSON shape with its status codes (400 bad request or
context too long, 404 unknown model). With a ``Router``, a second model id (default ``bashgym-router``) answers
through the router; its responses carry ``bashgym_route`` (which model answered, confidence, reason) and every
decision is logged to ``routing_decisions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from bashgym_assets.serving.batching import Batcher
from bashgym_assets.serving.engine import ChatEngine, Generation, GenerationRequest
from bashgym_assets.serving.schemas import (
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    ChoiceLogprobs,
    ErrorBody,
    ErrorResponse,
    ModelCard,
    ModelList,
    ResponseMessage,
    Usage,
)

LOOPBACK = "127.0.0.1"
DEFAULT_MAX_TOKENS = 256


def _error(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
           code: str | None = None) -> Any:
    from fastapi.responses import JSONResponse

    body = ErrorResponse(error=ErrorBody(message=message, type=type_, param=param, code=code))
    return JSONResponse(status_code=status, content=body.model_dump())


def create_app(engine: ChatEngine, batcher: Batcher | None = None, router: Any = None,
               route_name: str = "bashgym-router") -> Any:
    """The FastAPI app. ``batcher`` defaults to a queue over ``engine`` (started and stopped with the app)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import StreamingResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    batcher = batcher or Batcher(engine)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            batcher.stop()
            if router is not None and router.log is not None:
                router.log.close()

    app = FastAPI(title="bashgym serve", lifespan=lifespan)
    started = time.time()
    models = [engine.name] + ([route_name] if router is not None else [])

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> Any:
        errs = exc.errors()
        first = errs[0] if errs else {}
        if first.get("type") == "json_invalid":
            return _error(400, f"We could not parse the JSON body of your request: {first.get('msg')}")
        loc = [str(p) for p in first.get("loc", []) if p != "body"]
        return _error(400, f"Invalid request: {'.'.join(loc) or 'body'}: {first.get('msg', 'invalid')}",
                      param=".".join(loc) or None)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> Any:
        return _error(exc.status_code, str(exc.detail), type_="invalid_request_error" if exc.status_code < 500
                      else "server_error")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "models": models, "source": engine.source, "uptime_s": round(time.time() - started),
                "max_batch": batcher.max_batch, "max_wait_s": batcher.max_wait_s,
                "batch_sizes": {str(k): v for k, v in sorted(batcher.batch_sizes.items())},
                "router": router.config.model_dump(mode="json") if router is not None else None}

    @app.get("/v1/models")
    async def list_models() -> ModelList:
        return ModelList(data=[ModelCard(id=m, created=int(started)) for m in models])

    @app.get("/v1/models/{model_id}")
    async def get_model(model_id: str) -> Any:
        if model_id not in models:
            return _error(404, f"The model `{model_id}` does not exist", param="model", code="model_not_found")
        return ModelCard(id=model_id, created=int(started))

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest) -> Any:
        if body.model not in models:
            return _error(404, f"The model `{body.model}` does not exist (served: {', '.join(models)})",
                          param="model", code="model_not_found")
        messages = [m.as_dict() for m in body.messages]
        max_tokens = body.max_completion_tokens or body.max_tokens or DEFAULT_MAX_TOKENS
        if body.model == route_name and router is not None:
            return await _routed(body, messages, max_tokens)
        req = GenerationRequest(messages=messages, max_tokens=max_tokens, temperature=body.temperature,
                                top_p=body.top_p, stop=body.stops(), logprobs=body.logprobs,
                                top_logprobs=body.top_logprobs or 0, seed=body.seed)
        gens: list[Generation] = await asyncio.gather(*(asyncio.wrap_future(batcher.submit(req))
                                                        for _ in range(body.n)))
        failed = next((g for g in gens if g.error), None)
        if failed is not None:
            if failed.error_code == "context_length_exceeded":
                return _error(400, failed.error or "", param="messages", code=failed.error_code)
            if failed.error_code == "invalid_messages":
                return _error(400, failed.error or "", param="messages", code=failed.error_code)
            return _error(500, failed.error or "generation failed", type_="server_error", code=failed.error_code)
        completion = ChatCompletion(
            model=body.model,
            choices=[Choice(index=i, message=ResponseMessage(content=g.text), finish_reason=g.finish_reason,
                            logprobs=ChoiceLogprobs(content=g.logprobs or []) if body.logprobs else None)
                     for i, g in enumerate(gens)],
            usage=Usage(prompt_tokens=gens[0].prompt_tokens, completion_tokens=sum(g.completion_tokens for g in gens),
                        total_tokens=gens[0].prompt_tokens + sum(g.completion_tokens for g in gens)))
        return _stream(completion, body) if body.stream else completion

    async def _routed(body: ChatCompletionRequest, messages: list[dict[str, str]], max_tokens: int) -> Any:
        from bashgym_assets.serving.router import ChatParams

        params = ChatParams(max_tokens=max_tokens, temperature=body.temperature, top_p=body.top_p,
                            stop=body.stops(), seed=body.seed)
        routed = (await asyncio.to_thread(router.route_many, [messages], params, source="server"))[0]
        ans, decision = routed.answer, routed.decision
        if ans.error:
            return _error(502, f"routed to the {decision.chosen} ({decision.model}), which failed: {ans.error}",
                          type_="server_error", code="upstream_error")
        completion = ChatCompletion(
            model=body.model,
            choices=[Choice(index=0, message=ResponseMessage(content=ans.text), finish_reason=ans.finish_reason)],
            usage=Usage(prompt_tokens=ans.prompt_tokens, completion_tokens=ans.completion_tokens,
                        total_tokens=ans.prompt_tokens + ans.completion_tokens),
            bashgym_route={"request_id": decision.request_id, "chosen": decision.chosen, "model": decision.model,
                           "confidence": decision.confidence, "reason": decision.reason})
        return _stream(completion, body) if body.stream else completion

    def _stream(completion: ChatCompletion, body: ChatCompletionRequest) -> Any:
        """The finished completion as OpenAI's ``chat.completion.chunk`` events (role, content, finish, usage)."""
        def events() -> Iterator[str]:
            base = {"id": completion.id, "object": "chat.completion.chunk", "created": completion.created,
                    "model": completion.model}
            for c in completion.choices:
                chunks = [{"role": "assistant", "content": ""}, {"content": c.message.content}]
                for delta in chunks:
                    yield "data: " + json.dumps({**base, "choices": [{"index": c.index, "delta": delta,
                                                                      "finish_reason": None}]}) + "\n\n"
                yield "data: " + json.dumps({**base, "choices": [{"index": c.index, "delta": {},
                                                                  "finish_reason": c.finish_reason}]}) + "\n\n"
            if (body.stream_options or {}).get("include_usage"):
                yield "data: " + json.dumps({**base, "choices": [], "usage": completion.usage.model_dump()}) + "\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


class LocalServer:
    """``with LocalServer(app) as server:`` uvicorn on 127.0.0.1 (a free port unless given) in a thread;
    ``server.url`` is the OpenAI base URL (``.../v1``). Used by tests, the benchmark and ``bashgym serve``."""

    def __init__(self, app: Any, port: int = 0) -> None:
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((LOOPBACK, port))
        self.port = self._sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True,
                                        name="bashgym-serve")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    def __enter__(self) -> LocalServer:
        self._thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()
