"""The OpenAI-compatible HTTP API over a ``ChatEngine`` (FastAPI + uvicorn), loopback only.

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /v1/models/{id}``, ``GET /health``. Requests go
through the continuous-batching scheduler (``batching.Batcher``): they join the running batch and leave it when
their reply ends. ``stream: true`` sends server-sent events in OpenAI's ``chat.completion.chunk`` shape as the
tokens are generated (with their log-probabilities when asked), then ``[DONE]``. A client that goes away (a closed
stream, a non-streaming request whose connection drops) is cancelled: its row leaves the batch at the next step.
``n`` choices are ``n`` rows; with a ``seed``, choice ``i`` samples with its own seed derived from it
(``choice_seed``): distinct samples, the same ones for the same seed. Errors use OpenAI's JSON shape with its
status codes (400 bad request, a field it cannot honour or one outside OpenAI's API, context too long, 404 unknown
model). With a ``Router``, a second model id (default ``bashgym-router``) answers through the router; its responses
carry ``bashgym_route`` (which model answered, confidence, reason), its token counts and finish reason are the
answering model's, and every decision is logged to ``routing_decisions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any

from starlette.requests import Request  # module level: FastAPI resolves the handlers' annotations here

from bashgym_assets.serving.batching import Batcher
from bashgym_assets.serving.engine import ChatEngine, Delta, Generation, GenerationRequest
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
CLIENT_CLOSED = 499  # nginx's "client closed request": nobody reads it, the access log does


def _error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> Any:
    from fastapi.responses import JSONResponse

    body = ErrorResponse(error=ErrorBody(message=message, type=type_, param=param, code=code))
    return JSONResponse(status_code=status, content=body.model_dump())


def _generation_error(gen: Generation) -> Any:
    if gen.error_code in ("context_length_exceeded", "invalid_messages"):
        return _error(400, gen.error or "", param="messages", code=gen.error_code)
    return _error(500, gen.error or "generation failed", type_="server_error", code=gen.error_code)


def choice_seed(seed: int | None, index: int) -> int | None:
    """The seed choice ``index`` samples with: the request's own for the first choice (so ``n=1`` and ``n>1`` agree
    on it), one derived from it for the others (distinct, and the same for the same seed)."""
    if seed is None or index == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:8], "big") >> 1


async def _client_gone(request: Any) -> None:
    """Returns when the client disconnects (the ASGI ``http.disconnect`` message after the body was read)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


def create_app(
    engine: ChatEngine, batcher: Batcher | None = None, router: Any = None, route_name: str = "bashgym-router"
) -> Any:
    """The FastAPI app. ``batcher`` defaults to a scheduler over ``engine`` (started and stopped with the app)."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import Response, StreamingResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    batcher = batcher or Batcher(engine)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            try:
                batcher.stop()
            finally:
                if router is not None and router.log is not None:
                    router.log.close()  # the buffered routing decisions reach the lake on a clean stop

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
        return _error(
            400,
            f"Invalid request: {'.'.join(loc) or 'body'}: {first.get('msg', 'invalid')}",
            param=".".join(loc) or None,
            code="invalid_type" if "type" in str(first.get("type")) else None,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> Any:
        return _error(
            exc.status_code,
            str(exc.detail),
            type_="invalid_request_error" if exc.status_code < 500 else "server_error",
        )

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "models": models,
            "source": engine.source,
            "uptime_s": round(time.time() - started),
            "max_batch": batcher.max_batch,
            "max_wait_s": batcher.max_wait_s,
            "continuous": engine.continuous_reason() is None,
            "in_flight": batcher.in_flight,
            "requests": vars(batcher.stats),
            "batch_sizes": {str(k): v for k, v in sorted(batcher.batch_sizes.items())},
            "router": router.config.model_dump(mode="json") if router is not None else None,
        }

    @app.get("/v1/models")
    async def list_models() -> ModelList:
        return ModelList(data=[ModelCard(id=m, created=int(started)) for m in models])

    @app.get("/v1/models/{model_id}")
    async def get_model(model_id: str) -> Any:
        if model_id not in models:
            return _error(
                404, f"The model `{model_id}` does not exist", param="model", code="model_not_found"
            )
        return ModelCard(id=model_id, created=int(started))

    @app.post("/v1/chat/completions")
    async def chat(request: Request, body: ChatCompletionRequest) -> Any:
        if body.model not in models:
            return _error(
                404,
                f"The model `{body.model}` does not exist (served: {', '.join(models)})",
                param="model",
                code="model_not_found",
            )
        routed = body.model == route_name and router is not None
        refused = body.unsupported(routed=routed)
        if refused is not None:
            unknown = refused[0] in (body.model_extra or {})  # outside OpenAI's API: refused as OpenAI does
            code = "unknown_parameter" if unknown else "unsupported_parameter"
            return _error(400, refused[1], param=refused[0], code=code)
        messages = [m.as_dict() for m in body.messages]
        max_tokens = body.max_completion_tokens or body.max_tokens or DEFAULT_MAX_TOKENS
        if routed:
            return await _routed(body, messages, max_tokens)
        base = GenerationRequest(
            messages=messages,
            max_tokens=max_tokens,
            temperature=body.sampling_temperature,
            top_p=body.sampling_top_p,
            stop=body.stops(),
            logprobs=bool(body.logprobs),
            top_logprobs=body.top_logprobs or 0,
            seed=body.seed,
        )
        prompt = await asyncio.to_thread(
            engine.prompt_of, base
        )  # a too-long prompt is refused before any stream
        if isinstance(prompt, Generation):
            return _generation_error(prompt)
        reqs = [
            base.model_copy(update={"prompt": prompt, "seed": choice_seed(body.seed, i)})
            for i in range(body.choices)
        ]
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        if body.stream:
            return StreamingResponse(
                _live(body, reqs, cid),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        futures = [batcher.submit(r, request_id=f"{cid}-{i}") for i, r in enumerate(reqs)]
        gens = await _wait(request, futures)
        if gens is None:
            return Response(status_code=CLIENT_CLOSED)
        failed = next((g for g in gens if g.error), None)
        if failed is not None:
            return _generation_error(failed)
        return ChatCompletion(
            id=cid,
            model=body.model,
            choices=[
                Choice(
                    index=i,
                    message=ResponseMessage(content=g.text),
                    finish_reason=g.finish_reason,
                    logprobs=ChoiceLogprobs(content=g.logprobs or []) if body.logprobs else None,
                )
                for i, g in enumerate(gens)
            ],
            usage=Usage(
                prompt_tokens=gens[0].prompt_tokens,
                completion_tokens=sum(g.completion_tokens for g in gens),
                total_tokens=gens[0].prompt_tokens + sum(g.completion_tokens for g in gens),
            ),
        )

    async def _wait(request: Request, futures: list[Future]) -> list[Generation] | None:
        """The generations, or None when the client went away first (then every one of them is cancelled)."""
        waiting = asyncio.ensure_future(asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not waiting.done():
                for f in futures:
                    batcher.cancel(f)
                waiting.cancel()
        return waiting.result() if not waiting.cancelled() else None

    async def _live(
        body: ChatCompletionRequest, reqs: list[GenerationRequest], cid: str
    ) -> AsyncIterator[str]:
        """The stream: a role chunk per choice, then content chunks as the scheduler hands out deltas, a finish
        chunk per choice, the usage chunk if asked, ``[DONE]``. Leaving early (the client closed the stream: the
        server cancels this generator) cancels what is still generating."""
        loop = asyncio.get_running_loop()
        deltas: asyncio.Queue[tuple[int, Delta]] = asyncio.Queue()

        def sink(i: int) -> Any:
            return lambda d: loop.call_soon_threadsafe(deltas.put_nowait, (i, d))

        futures = [batcher.submit(r, on_delta=sink(i), request_id=f"{cid}-{i}") for i, r in enumerate(reqs)]
        base = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.model,
            "system_fingerprint": None,
        }

        def chunk(i: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> str:
            choice = {"index": i, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            return "data: " + json.dumps({**base, "choices": [choice]}) + "\n\n"

        try:
            for i in range(len(reqs)):
                yield chunk(i, {"role": "assistant", "content": ""})
            open_, gens = set(range(len(reqs))), {}
            while open_:
                i, d = await deltas.get()
                if d.text or d.logprobs:
                    lps = {"content": [t.model_dump() for t in d.logprobs]} if body.logprobs else None
                    yield chunk(i, {"content": d.text}, logprobs=lps)
                if d.finish_reason is not None:
                    g = d.generation or Generation(finish_reason=d.finish_reason)
                    if g.error:
                        err = ErrorBody(message=g.error, type="server_error", code=g.error_code)
                        yield "data: " + json.dumps({"error": err.model_dump()}) + "\n\n"
                        return
                    gens[i] = g
                    yield chunk(i, {}, finish=g.finish_reason)
                    open_.discard(i)
            if (body.stream_options or {}).get("include_usage"):
                prompt_tokens = next(iter(gens.values())).prompt_tokens
                done = sum(g.completion_tokens for g in gens.values())
                usage = Usage(
                    prompt_tokens=prompt_tokens, completion_tokens=done, total_tokens=prompt_tokens + done
                )
                yield "data: " + json.dumps({**base, "choices": [], "usage": usage.model_dump()}) + "\n\n"
            yield "data: [DONE]\n\n"
        finally:
            for f in futures:
                if not f.done():
                    batcher.cancel(f)

    async def _routed(body: ChatCompletionRequest, messages: list[dict[str, str]], max_tokens: int) -> Any:
        from bashgym_assets.serving.router import ChatParams

        params = ChatParams(
            max_tokens=max_tokens,
            temperature=body.sampling_temperature,
            top_p=body.sampling_top_p,
            stop=body.stops(),
            seed=body.seed,
        )
        routed = (await asyncio.to_thread(router.route_many, [messages], params, source="server"))[0]
        ans, decision = routed.answer, routed.decision
        if ans.error:
            message = f"routed to the {decision.chosen} ({decision.model}), which failed: {ans.error}"
            if ans.error_code in ("context_length_exceeded", "invalid_request_error", "invalid_messages"):
                return _error(400, message, param="messages", code=ans.error_code)
            return _error(502, message, type_="server_error", code="upstream_error")
        completion = ChatCompletion(
            model=body.model,
            choices=[
                Choice(index=0, message=ResponseMessage(content=ans.text), finish_reason=ans.finish_reason)
            ],
            usage=Usage(
                prompt_tokens=ans.prompt_tokens,
                completion_tokens=ans.completion_tokens,
                total_tokens=ans.prompt_tokens + ans.completion_tokens,
            ),
            bashgym_route={
                "request_id": decision.request_id,
                "chosen": decision.chosen,
                "model": decision.model,
                "confidence": decision.confidence,
                "reason": decision.reason,
            },
        )
        return _stream_whole(completion, body) if body.stream else completion

    def _stream_whole(completion: ChatCompletion, body: ChatCompletionRequest) -> Any:
        """A routed answer as ``chat.completion.chunk`` events: the router decides on whole replies (the
        student's confidence is over all its tokens), so the reply comes as one content chunk."""

        def events() -> Iterator[str]:
            base = {
                "id": completion.id,
                "object": "chat.completion.chunk",
                "created": completion.created,
                "model": completion.model,
            }
            for c in completion.choices:
                chunks = [{"role": "assistant", "content": ""}, {"content": c.message.content}]
                for delta in chunks:
                    yield (
                        "data: "
                        + json.dumps(
                            {**base, "choices": [{"index": c.index, "delta": delta, "finish_reason": None}]}
                        )
                        + "\n\n"
                    )
                yield (
                    "data: "
                    + json.dumps(
                        {
                            **base,
                            "choices": [{"index": c.index, "delta": {}, "finish_reason": c.finish_reason}],
                        }
                    )
                    + "\n\n"
                )
            if (body.stream_options or {}).get("include_usage"):
                yield (
                    "data: "
                    + json.dumps({**base, "choices": [], "usage": completion.usage.model_dump()})
                    + "\n\n"
                )
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
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="bashgym-serve"
        )

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
