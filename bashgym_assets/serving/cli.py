"""``bashgym serve``: the champion (or any registered version or adapter folder) behind an OpenAI-compatible API.

    bashgym serve                                         # models:/bashgym-operator@champion on its base
    bashgym serve --model models:/bashgym-operator/3 --port 8001
    bashgym serve --adapter .bashgym/artifacts/adapters/<run> --base <base folder>
    bashgym serve --route confidence --teacher openai/big --teacher-api-base http://127.0.0.1:9000/v1

Then any OpenAI or litellm client: ``litellm.completion(model="openai/bashgym-operator",
api_base="http://127.0.0.1:8000/v1", api_key="x", messages=[...])``, or ``bashgym eval --litellm
openai/bashgym-operator --api-base http://127.0.0.1:8000/v1``. Loopback (127.0.0.1) only.
"""

from __future__ import annotations

import argparse
from typing import Any

from bashgym_assets.config import get_settings


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the champion over an OpenAI-compatible API on 127.0.0.1",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        default="models:/bashgym-operator@champion",
        help="a registered version: models:/name@alias or models:/name/N (default: the champion)",
    )
    p.add_argument("--adapter", help="serve this LoRA adapter folder instead of a registered version")
    p.add_argument(
        "--base",
        help="the base model folder or hub id (default: the version's base_model tag, else "
        "BASHGYM_BASE_MODEL or the offline SmolLM2)",
    )
    p.add_argument("--no-adapter", action="store_true", help="serve the base model alone")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--name", default="bashgym-operator", help="the model id clients ask for")
    p.add_argument(
        "--max-batch",
        type=int,
        default=16,
        help="requests decoded together (continuous batching: they join and leave between steps)",
    )
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=20.0,
        help="how long an idle server's first request waits for others to start with it",
    )
    p.add_argument("--max-context", type=int, default=2048, help="prompt + completion tokens")
    p.add_argument(
        "--route",
        help="also serve model id bashgym-router, routing between this student and "
        "--teacher: teacher_only, student_only, confidence, complexity, progressive, "
        "random (options as in routed:, e.g. 'confidence?threshold=-0.8')",
    )
    p.add_argument("--teacher", help="the teacher's litellm string (default BASHGYM_TEACHER_MODEL)")
    p.add_argument("--teacher-api-base", help="the teacher's base URL (default BASHGYM_TEACHER_API_BASE)")
    p.set_defaults(fn=cmd_serve)


def build_engine(args: argparse.Namespace, settings: Any) -> Any:
    from bashgym_assets.serving.engine import ChatEngine, engine_from_registry
    from bashgym_assets.training import base_model as bm

    if args.adapter or args.no_adapter:
        base = args.base or bm.resolve_base_model(settings, prepare=True)
        return ChatEngine(
            base,
            None if args.no_adapter else args.adapter,
            name=args.name,
            max_context_tokens=args.max_context,
        )
    return engine_from_registry(
        args.model, base=args.base, name=args.name, settings=settings, max_context_tokens=args.max_context
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from bashgym_assets.serving.app import LOOPBACK, create_app
    from bashgym_assets.serving.batching import Batcher

    settings = get_settings()
    engine = build_engine(args, settings).load()
    batcher = Batcher(engine, max_batch=args.max_batch, max_wait_s=args.max_wait_ms / 1000)
    router = None
    if args.route:
        from bashgym_assets.lake import Lake
        from bashgym_assets.serving.router import (
            DecisionLog,
            EngineBackend,
            Router,
            parse_route_spec,
            teacher_backend,
        )

        lake = Lake(settings)
        router = Router(
            parse_route_spec(args.route),
            EngineBackend(engine, submit=batcher.submit, trim=False),
            teacher_backend(args.teacher, args.teacher_api_base, settings),
            DecisionLog(lake),
            lake=lake,
        )
    app = create_app(engine, batcher, router=router)
    print(
        f"serving {engine.source} as '{args.name}'"
        + (f" and 'bashgym-router' ({args.route})" if router else "")
        + f" on http://{LOOPBACK}:{args.port}/v1",
        flush=True,
    )
    uvicorn.run(app, host=LOOPBACK, port=args.port, log_level="info")
    return 0
