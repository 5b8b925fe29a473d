"""GPU location: ``exported_model``, the champion as a standalone model (merged HF folder, GGUF, Ollama Modelfile,
model card), its GGUF round trip checked, optionally pushed to the Hugging Face Hub.

Thin: the export is ``bashgym_assets.export``; this module picks where it goes (``artifacts/exports/<model>-v<N>``)
and reports. It follows ``benchmark_results`` because that is where the champion is decided.
"""

import json
import os

import dagster as dg

from bashgym_assets.defs.automation import DOWNSTREAM
from bashgym_assets.defs.evaluation import benchmark_results
from bashgym_assets.defs.metadata import code_version, table
from bashgym_assets.defs.resources import BashgymHome
from bashgym_assets.export import ExportReport, NoAdapterError, export_model, resolve_model

ROUND_TRIP_CHECK = "gguf_round_trip"


class ExportConfig(dg.Config):
    """Launchpad settings of an export (defaults: the champion, f16 GGUF, a 3-chat round trip, no push)."""

    model_uri: str | None = None  # e.g. models:/bashgym-operator/3; default: champion, else candidate
    formats: list[str] = ["f16"]  # f16 and/or q8_0
    verify: bool = True
    max_new_tokens: int = 16  # per verification reply (3 chats): the GGUF reads dominate anyway
    hub_repo: str | None = None  # push there when HF_TOKEN is set (default: BASHGYM_HF_REPO)


def _ollama_md(out_dir: str, modelfile: str) -> str:
    return (
        f"```\n{modelfile}```\n\nRun it with Ollama:\n\n```bash\ncd {out_dir}\n"
        'ollama create bashgym-operator -f Modelfile\nollama run bashgym-operator "list the files here, '
        'hidden ones too"\n```'
    )


ROUND_TRIP_KEY = dg.AssetCheckKey(dg.AssetKey("exported_model"), ROUND_TRIP_CHECK)


def round_trip_check(report: ExportReport, verify: bool) -> dg.AssetCheckResult | None:
    """The ``gguf_round_trip`` result of an export; None when the round trip was not run (``verify: false``).

    A check that compared nothing must not say "Passed": with no result the check shows as skipped in the UI (its
    run succeeded without evaluating it) and the asset's metadata says why. Run, it passes only when every GGUF
    passed in llama.cpp (a WARN failure otherwise, with what did not match or why llama.cpp could not run: the
    export itself is still there)."""
    if not verify:
        return None
    compared = len(report.verification)
    identical = sum(r.identical for r in report.verification)
    checks = [c.model_dump() for c in report.gguf_checks]
    summary = (
        f"{len(checks)} GGUF file(s) verified in llama.cpp, passed: {sum(c['passed'] for c in checks)}; "
        f"weights exact: {sum(c['weights_exact'] for c in checks)}; tokenizer identical: "
        f"{sum(c['tokenizer_identical'] and c['detokenize_identical'] for c in checks)}; "
        f"{identical} of {compared} greedy replies identical"
    )
    if not checks:
        summary = f"nothing was verified: {report.verify_error or 'no GGUF file was checked'}"
    return dg.AssetCheckResult(
        check_name=ROUND_TRIP_CHECK,
        passed=bool(report.verified and checks),
        severity=dg.AssetCheckSeverity.WARN,
        description=summary,
        metadata={
            "checks": dg.MetadataValue.json(json.loads(json.dumps(checks))),
            "identical_replies": dg.MetadataValue.int(identical),
            "replies": dg.MetadataValue.int(compared),
        },
    )


def _skipped_check_note(why: str) -> dict[str, dg.MetadataValue]:
    return {"round_trip_check": dg.MetadataValue.text(f"skipped: {why}")}


@dg.multi_asset(
    name="exported_model",
    specs=[
        dg.AssetSpec(
            "exported_model",
            group_name="evaluation",
            kinds={"pytorch", "mlflow"},
            code_version=code_version(
                "bashgym_assets.export.exporter",
                "bashgym_assets.export.gguf_file",
                "bashgym_assets.export.ollama",
                "bashgym_assets.export.llama_cpp",
            ),
            deps=[benchmark_results],
            automation_condition=DOWNSTREAM,
            description="The champion (else the newest candidate) as a standalone model: LoRA merged into its base and "
            "saved in Hugging Face format, GGUF written with the gguf package, Ollama Modelfile, model card; "
            "each GGUF verified in llama.cpp; pushed to the Hub when HF_TOKEN and a repo are configured.",
        )
    ],
    pool="gpu",
    # the round trip is optional (``verify: false``, nothing to export): then no result, and the UI shows it skipped
    can_subset=True,
    check_specs=[
        dg.AssetCheckSpec(
            ROUND_TRIP_CHECK,
            asset="exported_model",
            description="Each GGUF loaded in llama.cpp itself (node-llama-cpp's prebuilt CPU "
            "binary) behaves as the merged model: same token ids and text back "
            "for probe texts and the chat prompts, weights exact after the "
            "format's rounding, same chat template, and greedy replies "
            "identical (f16) or agreeing at >= 80% of teacher-forced positions "
            "(q8_0). Skipped when the export runs "
            "with verify: false (the demo profiles) or exports nothing.",
        )
    ],
)
def exported_model(context: dg.AssetExecutionContext, config: ExportConfig, bashgym: BashgymHome):
    settings = bashgym.settings()
    lake = bashgym.lake()
    try:
        resolved = resolve_model(config.model_uri, settings)
    except NoAdapterError as exc:
        context.log.warning(f"nothing exported: {exc}")
        yield dg.MaterializeResult(
            metadata={
                "skipped": dg.MetadataValue.text(f"no adapter is registered yet, nothing to export ({exc})"),
                **_skipped_check_note("nothing was exported"),
            }
        )
        return
    repo = config.hub_repo or settings.hf_repo
    token = os.environ.get("HF_TOKEN") or None
    name = f"{resolved.model_name}-v{resolved.version}"
    context.log.info(
        f"exporting {resolved.model_uri} ({resolved.alias or 'explicit version'}) on "
        f"{resolved.base_model}" + (f"; {resolved.fallback_note}" if resolved.fallback_note else "")
    )
    with lake.atomic_artifact_dir("exports", name) as tmp:
        report = export_model(
            tmp,
            resolved=resolved,
            formats=config.formats,
            verify=config.verify,
            max_new_tokens=config.max_new_tokens,
            hub_repo=repo,
            hub_token=token,
            hub_endpoint=os.environ.get("HF_ENDPOINT") or None,
            settings=settings,
        )
        files = report.files_table()
    out_dir = str(lake.artifact_dir("exports", name, create=False))
    report.out_dir = (
        out_dir  # the folder was renamed into place: record where it ended up (GGUF paths follow)
    )
    (lake.artifact_dir("exports", name, create=False) / "export_report.json").write_text(
        report.model_dump_json(indent=2)
    )
    verify_rows = [
        [
            r.gguf,
            r.prompt,
            r.identical,
            r.token_agreement,
            r.prompt_tokens_identical,
            r.merged_reply,
            r.gguf_reply,
        ]
        for r in report.verification
    ]
    metadata = {
        "path": dg.MetadataValue.path(out_dir),
        "model_uri": dg.MetadataValue.text(resolved.model_uri),
        "alias": dg.MetadataValue.text(resolved.alias or "explicit version"),
        "files": table(["file", "size_mb"], [[f["file"], f["size_mb"]] for f in files]),
        "round_trip": table(
            [
                "gguf",
                "prompt",
                "identical",
                "token_agreement",
                "prompt_tokens_identical",
                "merged_reply",
                "gguf_reply",
            ],
            verify_rows or [["(not verified)", "", False, 0.0, False, "", ""]],
        ),
        "gguf_checks": table(
            [
                "gguf",
                "llama_cpp",
                "pre_tokenizer",
                "tokenizer_identical",
                "weights_exact",
                "max_abs_weight_diff",
                "chat_template_identical",
                "forced_agreement",
                "passed",
            ],
            [
                [
                    c.gguf,
                    c.llama_cpp,
                    c.pre_tokenizer,
                    c.tokenizer_identical and c.detokenize_identical,
                    c.weights_exact,
                    c.max_abs_weight_diff,
                    c.chat_template_identical,
                    c.forced_agreement,
                    c.passed,
                ]
                for c in report.gguf_checks
            ]
            or [
                [
                    f"(not verified{': ' + report.verify_error[:200] if report.verify_error else ''})",
                    "",
                    "",
                    False,
                    False,
                    0.0,
                    False,
                    0.0,
                    False,
                ]
            ],
        ),
        "verified": dg.MetadataValue.bool(report.verified),
        "modelfile": dg.MetadataValue.md(_ollama_md(out_dir, report.modelfile)),
        "timings_s": dg.MetadataValue.json(report.timings_s),
        "pushed_to": dg.MetadataValue.text(
            report.pushed_to or ("not pushed: set HF_TOKEN and BASHGYM_HF_REPO (or hub_repo)")
        ),
    }
    if resolved.fallback_note:
        metadata["note"] = dg.MetadataValue.text(resolved.fallback_note)
    check = round_trip_check(report, config.verify)
    if check is None:
        context.log.info("GGUF round trip not verified (verify: false): the gguf_round_trip check is skipped")
        metadata.update(_skipped_check_note("verify: false, the GGUF files were not read back"))
    selected = ROUND_TRIP_KEY in context.selected_asset_check_keys
    yield dg.MaterializeResult(
        metadata=metadata,
        check_results=[check] if check is not None and selected else [],
        data_version=dg.DataVersion(f"{resolved.model_uri}:{','.join(config.formats)}"),
    )


defs = dg.Definitions(assets=[exported_model])
