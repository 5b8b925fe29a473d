"""``bashgym export``: the champion (or any registered version) as a merged HF folder + GGUF + Ollama Modelfile.

    bashgym export                                           # champion (else candidate) -> ./bashgym-export
    bashgym export --model models:/bashgym-operator/3 --format f16 --format q8_0 --out /tmp/op
    HF_TOKEN=hf_... bashgym export --push me/bashgym-operator  # also upload the folder to the Hub

Then ``cd <out> && ollama create bashgym-operator -f Modelfile && ollama run bashgym-operator``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from bashgym_assets.config import get_settings


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="export the champion: merged HF folder, GGUF, Ollama Modelfile, model card",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="models:/name@alias or models:/name/N (default: champion, else candidate)")
    p.add_argument("--out", default="bashgym-export", help="output folder (default ./bashgym-export)")
    p.add_argument(
        "--format",
        action="append",
        choices=["f16", "q8_0"],
        dest="formats",
        help="GGUF format, repeatable (default f16)",
    )
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the GGUF verification in llama.cpp (tokenizer, greedy replies, weights)",
    )
    p.add_argument("--push", metavar="REPO_ID", help="upload to this Hub repo (needs HF_TOKEN)")
    p.set_defaults(fn=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from bashgym_assets.export import export_model

    token = os.environ.get("HF_TOKEN")
    if args.push and not token:
        raise ValueError("--push needs HF_TOKEN in the environment")
    report = export_model(
        Path(args.out).resolve(),
        model_uri=args.model,
        formats=args.formats or ["f16"],
        verify=not args.no_verify,
        hub_repo=args.push,
        hub_token=token,
        hub_endpoint=os.environ.get("HF_ENDPOINT") or None,
        settings=get_settings(),
    )
    m = report.model
    print(f"exported {m.model_uri} ({m.alias or 'explicit version'}) on {m.base_model} -> {report.out_dir}")
    if m.fallback_note:
        print(f"note: {m.fallback_note}")
    for f in report.files_table():
        print(f"  {f['file']:<40} {f['size_mb']:>10.3f} MB")
    for c in report.gguf_checks:
        print(
            f"  {c.llama_cpp} on {c.gguf}: pre-tokenizer {c.pre_tokenizer}, tokenizer "
            f"{'identical' if c.tokenizer_identical and c.detokenize_identical else 'DIFFERS'}, weights "
            f"{'exact' if c.weights_exact else 'DIFFER'}, {c.replies_identical}/{c.replies} greedy replies "
            f"identical, teacher-forced agreement {c.forced_agreement:.2f}: {'passed' if c.passed else 'FAILED'}"
        )
    for r in report.verification:
        if not r.identical:
            print(
                f"    {r.gguf} differs after {r.agreeing_prefix} tokens (agreement {r.token_agreement:.2f}) on "
                f"{r.prompt[:50]!r}"
            )
    if report.verify_error:
        print(f"not verified: {report.verify_error}")
    print(
        f"verified: {report.verified}" if report.verification or report.verify_error else "verified: skipped"
    )
    if report.pushed_to:
        print(f"pushed: {report.pushed_to}")
    print(
        f"ollama: cd {report.out_dir} && ollama create bashgym-operator -f Modelfile && "
        "ollama run bashgym-operator"
    )
    return 0 if report.verified or not (report.verification or report.verify_error) else 1
