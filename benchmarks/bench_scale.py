"""Scale benchmark (issue 14 item 5): the trace sensor, the ``repos`` dynamic partitions, per-partition ingest and
the lake, with up to 10,000 repositories and 100,000 generated sessions, on a real Dagster SQLite instance.

    .venv/bin/python benchmarks/bench_scale.py [--repos 100 1000 10000] [--sessions 10] [--runs 5]
        [--chain-repos 10] [--lake-partitions 100 1000 10000] [--out benchmarks/results/scale.md]

Why: the README only knew the sensor's scan of 10,000 files; whether anything grows faster than linearly with
repositories (partition keys) or sessions (files) was not measured. Per size, in a temporary folder (never in the
repo) with a fresh BASHGYM_HOME and DAGSTER_HOME (the project's dagster.yaml: SQLite storage):

- data: ``--sessions`` Claude Code session files per repository, each a copy of one of the bundled sample sessions
  (``SAMPLE_TRACES_DIR``) with its own session id and its repository's ``cwd`` (folders that do not exist here, so
  the repo key comes from the folder name, as for a clone that was deleted; no ``git`` call);
- sensor: ``trace_files_sensor`` evaluated with ``build_sensor_context`` on the instance, each tick in a fresh
  process (peak RSS is the tick's own; a code server keeps its caches between ticks, so this is the cold case):
  first tick (all new; the partition keys it requests are then added with ``add_dynamic_partitions``, timed on
  their own), a tick with nothing changed, and a tick after appending a line to 1% of the files and adding 5 new
  repositories;
- partitions: with every key registered, the instance calls the sensor and the UI make per tick / page
  (``get_dynamic_partitions``, ``has_dynamic_partition``, ``get_materialized_partitions``, the asset partition
  status cache) and ``create_run_for_job`` (what the daemon does per run request: the first tick requests one run
  per repository);
- ingest, per partition: ``ingest_repo`` (the code ``raw_sessions`` runs) for ``--runs`` repositories in a fresh
  process, in a data folder where the sensor never ran ("no index": every file's repo is found by reading its head,
  as before the fix) and where it did (the sensor's newest cursor serves as the index); then the Dagster cost:
  ``raw_sessions -> redacted_sessions -> tiered_traces`` materialized for ``--runs`` partitions, one run per
  partition on the in-process executor as ``demo.plan_main`` does, while every key exists;
- chain (once): parse -> redact -> tier through the plain modules for ``--chain-repos`` repositories, per session;
- lake (once per ``--lake-partitions``): ``tiered_traces`` parquet files written directly (copies of a real one),
  then ``Lake.read_all`` and ``bashgym sql``'s DuckDB views over all of them.

The figures, the machine and the exact command go to ``benchmarks/results/scale.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ["raw_sessions", "redacted_sessions", "tiered_traces"]
NEW_REPOS = 5


def _usage() -> dict[str, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_mb": ru.ru_maxrss / 1024}


# ---- data ------------------------------------------------------------------------------------------------------
def _templates() -> list[tuple[bytes, str, str]]:
    """(content, cwd, session id) of each bundled top-level sample session."""
    from bashgym_assets.ingest import SAMPLE_TRACES_DIR
    from bashgym_assets.ingest.claude_code import peek_cwd_jsonl

    out = []
    for path in sorted(SAMPLE_TRACES_DIR.glob("*/*.jsonl")):
        cwd = peek_cwd_jsonl(path)
        if cwd:
            out.append((path.read_bytes(), cwd, path.stem))
    return out


def repo_cwd(i: int) -> str:
    return f"/nonexistent-bench/src/repo{i:05d}"


def session_id(i: int, j: int) -> str:
    return f"{i:08x}-{j:04x}-5000-8000-{i * 1000 + j:012x}"


def generate(dest: Path, repos: range, sessions: int, templates: list[tuple[bytes, str, str]]) -> int:
    """Write ``sessions`` files per repository in ``repos`` (Claude Code's layout: one folder per cwd); bytes."""
    nbytes = 0
    old = time.time() - 600  # settled: nothing waits for a half-written line
    for i in repos:
        cwd = repo_cwd(i)
        folder = dest / cwd.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        for j in range(sessions):
            data, t_cwd, t_sid = templates[(i * sessions + j) % len(templates)]
            sid = session_id(i, j)
            data = data.replace(f'"cwd":"{t_cwd}"'.encode(), f'"cwd":"{cwd}"'.encode()).replace(
                t_sid.encode(), sid.encode()
            )
            path = folder / f"{sid}.jsonl"
            path.write_bytes(data)
            os.utime(path, (old, old))
            nbytes += len(data)
    return nbytes


def change(
    dest: Path, n_repos: int, sessions: int, templates: list[tuple[bytes, str, str]]
) -> dict[str, int]:
    """Append one complete user line to 1% of the files and add ``NEW_REPOS`` repositories."""
    files = sorted(dest.rglob("*.jsonl"))
    step = 100
    appended = 0
    for path in files[::step]:
        line = {
            "type": "user",
            "cwd": "/x",
            "sessionId": path.stem,
            "uuid": f"appended-{appended}",
            "timestamp": "2026-10-05T12:00:00.000Z",
            "message": {"role": "user", "content": "one more thing"},
        }
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")
        appended += 1
    generate(dest, range(n_repos, n_repos + NEW_REPOS), sessions, templates)
    return {"appended": appended, "new_repos": NEW_REPOS}


# ---- children (each in its own process) -----------------------------------------------------------------------
def _instance():  # noqa: ANN202 - dagster type
    import dagster as dg

    from bashgym_assets.instance import ensure_dagster_home

    ensure_dagster_home()
    return dg.DagsterInstance.get()


def child_tick(args: dict) -> dict:
    """One sensor tick on the instance; the partition keys it asks for are added afterwards (timed apart)."""
    import dagster as dg

    from bashgym_assets.defs.ingest import trace_files_sensor
    from bashgym_assets.defs.resources import BashgymHome

    instance = _instance()
    token_file = Path(args["token_file"])
    token = token_file.read_text() if token_file.exists() else None
    resources = {
        "bashgym": BashgymHome(home=os.environ["BASHGYM_HOME"], trace_dirs=os.environ["BASHGYM_TRACE_DIRS"])
    }
    context = dg.build_sensor_context(instance=instance, cursor=token, resources=resources)
    cpu0 = _usage()["cpu_s"]
    t0 = time.perf_counter()
    result = trace_files_sensor(context)
    tick_s = time.perf_counter() - t0
    tick_cpu = _usage()["cpu_s"] - cpu0
    new_keys = [k for req in result.dynamic_partitions_requests for k in req.partition_keys]
    t1 = time.perf_counter()
    if new_keys:
        instance.add_dynamic_partitions("repos", new_keys)
    add_s = time.perf_counter() - t1
    token_file.write_text(result.cursor)
    cursors = list(Path(os.environ["BASHGYM_HOME"]).rglob("scan_cursors/*.cursor"))
    newest = max(cursors, key=lambda p: p.stat().st_mtime)
    return {
        "tick_s": tick_s,
        "tick_cpu_s": tick_cpu,
        "run_requests": len(result.run_requests),
        "new_keys": len(new_keys),
        "add_partitions_s": add_s,
        "dagster_cursor_chars": len(result.cursor),
        "cursor_file_kb": newest.stat().st_size / 1024,
    }


def _timed(fn: Any, repeat: int = 3) -> tuple[float, Any]:
    """Median of ``repeat`` calls, in seconds, and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], out


def child_partitions(args: dict) -> dict:
    """The instance calls that scale with the number of partition keys."""
    import dagster as dg
    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    from bashgym_assets.defs.ingest import ingest_repo_job
    from bashgym_assets.defs.partitions import repo_partitions

    instance = _instance()
    out: dict[str, Any] = {}
    out["get_dynamic_partitions_s"], keys = _timed(lambda: instance.get_dynamic_partitions("repos"))
    out["keys"] = len(keys)
    probe = keys[len(keys) // 2]
    out["has_dynamic_partition_s"], _ = _timed(lambda: instance.has_dynamic_partition("repos", probe), 20)
    key = dg.AssetKey("tiered_traces")
    out["get_materialized_partitions_s"], mat = _timed(lambda: instance.get_materialized_partitions(key))
    out["materialized"] = len(mat)
    out["partition_status_cache_s"], _ = _timed(
        lambda: get_and_update_asset_status_cache_value(instance, key, repo_partitions, instance)
    )
    out["partition_keys_from_def_s"], _ = _timed(
        lambda: repo_partitions.get_partition_keys(dynamic_partitions_store=instance)
    )
    from bashgym_assets.definitions import defs

    job = defs.resolve_job_def(ingest_repo_job.name)
    n = int(args.get("create_runs", 50))
    t0 = time.perf_counter()
    for k in keys[:n]:
        instance.create_run_for_job(
            job, run_config={}, tags={"dagster/partition": k, "dagster/sensor_name": "trace_files_sensor"}
        )
    out["create_run_s"] = (time.perf_counter() - t0) / n
    return out


def child_ingest(args: dict) -> dict:
    """``ingest_repo`` for a few repositories: seconds per partition with the whole trace tree to look through."""
    from bashgym_assets.config import get_settings
    from bashgym_assets.ingest.pipeline import ingest_repo
    from bashgym_assets.lake import Lake

    settings = get_settings()
    lake = Lake(settings)
    times, sessions = [], 0
    cpu0 = _usage()["cpu_s"]
    for repo in args["repos"]:
        report = ingest_repo(lake, settings.trace_dirs, repo)
        times.append(report.seconds)
        sessions += report.sessions
    return {
        "per_partition_s": sum(times) / len(times),
        "first_s": times[0],
        "sessions": sessions,
        "cpu_s_total": _usage()["cpu_s"] - cpu0,
    }


def child_dagster(args: dict) -> dict:
    """The ingest chain for a few partitions, one run each on the in-process executor (``demo.plan_main``)."""
    import dagster as dg

    from bashgym_assets.definitions import defs

    instance = _instance()
    job = dg.define_asset_job(
        "bench_scale",
        selection=dg.AssetSelection.assets(*ASSETS),
        partitions_def=_repo_partitions(),
        executor_def=dg.in_process_executor,
    )
    t0 = time.perf_counter()
    resolved = dg.Definitions.merge(defs, dg.Definitions(jobs=[job])).resolve_job_def(job.name)
    resolve_s = time.perf_counter() - t0
    times, failed = [], 0
    for key in args["repos"]:
        t1 = time.perf_counter()
        result = resolved.execute_in_process(partition_key=key, instance=instance, raise_on_error=False)
        times.append(time.perf_counter() - t1)
        failed += not result.success
    return {
        "resolve_s": resolve_s,
        "per_run_s": sum(times) / len(times),
        "first_run_s": times[0],
        "runs": len(times),
        "failed": failed,
    }


def _repo_partitions():  # noqa: ANN202 - dagster type
    from bashgym_assets.defs.partitions import repo_partitions

    return repo_partitions


def child_chain(args: dict) -> dict:
    """parse -> redact -> tier through the plain modules, per session; leaves ``tiered_traces`` in the lake."""
    from bashgym_assets.config import get_settings
    from bashgym_assets.ingest.pipeline import ingest_repo
    from bashgym_assets.lake import Lake
    from bashgym_assets.privacy.pipeline import parse_rows, redact_rows
    from bashgym_assets.privacy.redactor import Redactor
    from bashgym_assets.quality.tiers import tier_sessions, traces_to_table

    settings = get_settings()
    lake = Lake(settings)
    t0 = time.perf_counter()
    redactor = Redactor()
    init_s = time.perf_counter() - t0
    parse_s = redact_s = tier_s = 0.0
    sessions = segments = 0
    for repo in args["repos"]:
        t1 = time.perf_counter()
        ingest_repo(lake, settings.trace_dirs, repo)
        rows = lake.read("raw_sessions", repo).to_pylist()
        t2 = time.perf_counter()
        result = redact_rows(rows, redactor)
        lake.write("redacted_sessions", result.table(), repo)
        t3 = time.perf_counter()
        parsed, _ = parse_rows(lake.read("redacted_sessions", repo).to_pylist())
        traces = tier_sessions(parsed)
        lake.write("tiered_traces", traces_to_table(traces), repo)
        t4 = time.perf_counter()
        parse_s, redact_s, tier_s = parse_s + t2 - t1, redact_s + t3 - t2, tier_s + t4 - t3
        sessions += len(rows)
        segments += len(traces)
    return {
        "sessions": sessions,
        "segments": segments,
        "redactor_init_s": init_s,
        "parse_ms": 1e3 * parse_s / sessions,
        "redact_ms": 1e3 * redact_s / sessions,
        "tier_ms": 1e3 * tier_s / sessions,
        "tiered_file": str(lake.table_path("tiered_traces", args["repos"][0])),
    }


def child_lake(args: dict) -> dict:
    """``tiered_traces`` over many partition files: ``Lake.read_all`` and the DuckDB views ``bashgym sql`` uses."""
    from bashgym_assets.config import get_settings
    from bashgym_assets.lake import Lake, duckdb_connection

    settings = get_settings()
    lake = Lake(settings)
    source = Path(args["source"])
    folder = lake.table_path("tiered_traces", "x").parent
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(args["partitions"]):
        shutil.copyfile(source, folder / f"repo{i:05d}.parquet")
    out: dict[str, Any] = {"partitions": args["partitions"]}
    t0 = time.perf_counter()
    table = lake.read_all("tiered_traces", columns=["tier"])
    out["read_all_s"] = time.perf_counter() - t0
    out["rows"] = table.num_rows
    t1 = time.perf_counter()
    con = duckdb_connection(settings)
    out["views_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    con.execute("select tier, count(*) from tiered_traces group by 1").fetchall()
    out["sql_s"] = time.perf_counter() - t2
    return out


CHILDREN = {
    "tick": child_tick,
    "partitions": child_partitions,
    "ingest": child_ingest,
    "dagster": child_dagster,
    "chain": child_chain,
    "lake": child_lake,
}


def run_child(kind: str, home: Path, traces: Path, **args: Any) -> dict:
    env = {
        **os.environ,
        "BASHGYM_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster"),
        "BASHGYM_TRACE_DIRS": str(traces),
        "PYTHONUNBUFFERED": "1",
    }
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, json.dumps(args)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = time.perf_counter() - started
    print(
        f"  {kind}: {json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()})}",
        flush=True,
    )
    return out


# ---- driver ---------------------------------------------------------------------------------------------------
def measure_size(tmp: Path, n_repos: int, sessions: int, runs: int, templates: list) -> dict[str, Any]:
    traces = tmp / f"traces-{n_repos}"
    t0 = time.perf_counter()
    nbytes = generate(traces, range(n_repos), sessions, templates)
    gen_s = time.perf_counter() - t0
    files = n_repos * sessions
    print(f"{n_repos} repos, {files} sessions, {nbytes / 1e6:.0f} MB generated in {gen_s:.0f} s", flush=True)
    home = tmp / f"home-{n_repos}"
    token = tmp / f"token-{n_repos}"
    out: dict[str, Any] = {"repos": n_repos, "files": files, "mb": nbytes / 1e6}
    out["first"] = run_child("tick", home, traces, token_file=str(token))
    out["unchanged"] = run_child("tick", home, traces, token_file=str(token))
    picked = [f"repo{i:05d}" for i in range(0, n_repos, max(1, n_repos // runs))][:runs]
    # ingest per partition before any change (the sensor's cursor then matches every file)
    bare = tmp / f"bare-{n_repos}"
    out["ingest_no_index"] = run_child("ingest", bare, traces, repos=picked)
    out["ingest_index"] = run_child("ingest", home, traces, repos=picked)
    out["dagster"] = run_child("dagster", home, traces, repos=picked)
    out["partitions"] = run_child("partitions", home, traces, create_runs=min(50, n_repos))
    out["change"] = change(traces, n_repos, sessions, templates)
    out["changed"] = run_child("tick", home, traces, token_file=str(token))
    shutil.rmtree(traces, ignore_errors=True)
    shutil.rmtree(bare, ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repos", type=int, nargs="+", default=[100, 1000, 10000], help="repository counts")
    parser.add_argument("--sessions", type=int, default=10, help="sessions per repository")
    parser.add_argument("--runs", type=int, default=5, help="partitions ingested / materialized per size")
    parser.add_argument(
        "--chain-repos", type=int, default=10, help="repositories for the per-session chain cost"
    )
    parser.add_argument("--lake-partitions", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale.md")
    parser.add_argument("--render", type=Path, help="re-write the report from a run's saved <out>.json")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("payload", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = CHILDREN[args.child](json.loads(args.payload or "{}"))
        result.update(_usage())
        print(json.dumps(result))
        return 0

    if args.render:  # re-render a report from a run's saved figures (``<out>.json``)
        saved = json.loads(args.render.read_text())
        args.out = Path(saved["out"])
        for key in ("sessions", "runs", "chain_repos"):
            setattr(args, key, saved["args"][key])
        print(
            write_report(
                args,
                saved["command"],
                tuple(saved["load_start"]),
                saved["total_s"],
                saved["sizes"],
                saved["chain"],
                saved["lake"],
                tuple(saved["load_end"]),
            )
        )
        return 0

    exe = Path(sys.executable)
    python = str(exe.relative_to(ROOT)) if exe.is_relative_to(ROOT) else str(exe)
    command = " ".join([python, "benchmarks/bench_scale.py", *sys.argv[1:]])
    load_start = os.getloadavg()
    started = time.perf_counter()
    templates = _templates()
    tmp = Path(tempfile.mkdtemp(prefix="bashgym-bench-scale-"))
    try:
        sizes = [measure_size(tmp, n, args.sessions, args.runs, templates) for n in args.repos]
        traces = tmp / "traces-chain"
        generate(traces, range(args.chain_repos), args.sessions, templates)
        print("chain", flush=True)
        chain = run_child(
            "chain", tmp / "home-chain", traces, repos=[f"repo{i:05d}" for i in range(args.chain_repos)]
        )
        lake = [
            run_child("lake", tmp / f"home-lake-{n}", traces, source=chain["tiered_file"], partitions=n)
            for n in args.lake_partitions
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total_s = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(
        json.dumps(
            {
                "out": str(args.out),
                "command": command,
                "load_start": load_start,
                "load_end": os.getloadavg(),
                "total_s": total_s,
                "args": {"sessions": args.sessions, "runs": args.runs, "chain_repos": args.chain_repos},
                "sizes": sizes,
                "chain": chain,
                "lake": lake,
            },
            indent=1,
        )
    )
    report = write_report(args, command, load_start, total_s, sizes, chain, lake)
    print(report)
    print(f"wrote {args.out}")
    return 0


def _later(mean: float, first: float, n: int) -> float:
    """Mean of the runs after the first, from the mean of all ``n`` and the first."""
    return (mean * n - first) / (n - 1) if n > 1 else mean


def _f(v: float, digits: int = 2) -> str:
    return f"{v:,.{digits}f}"


def write_report(
    args: argparse.Namespace,
    command: str,
    load_start: tuple[float, float, float],
    total_s: float,
    sizes: list[dict],
    chain: dict,
    lake: list[dict],
    load_end: tuple[float, float, float] | None = None,
) -> str:
    load_end = load_end or os.getloadavg()
    lines = [
        "# Scale: sensor, dynamic partitions, ingest and lake with many repositories (issue 14 item 5)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine()}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average (1/5/15 min) at the start "
        f"{load_start[0]:.1f}/{load_start[1]:.1f}/{load_start[2]:.1f}, at the end "
        f"{load_end[0]:.1f}/{load_end[1]:.1f}/{load_end[2]:.1f}; whole run {total_s / 60:.1f} min.  ",
        f"Data: {args.sessions} generated Claude Code sessions per repository (copies of the bundled samples, "
        "~11 KB each), Dagster SQLite instance (the project's dagster.yaml), every measurement in a fresh process. "
        "The machine's 2 cores are shared with other jobs: wall times include their load.",
        "",
        "## Sensor (`trace_files_sensor`, one tick per fresh process)",
        "",
        "| repos | sessions (files) | tick | wall s | CPU s | files/s | run requests | new partition keys | "
        "add_dynamic_partitions s | cursor file KB | Dagster cursor chars | peak RSS MB |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        for name, label, files in (
            ("first", "first (all new)", s["files"]),
            ("unchanged", "nothing changed", s["files"]),
            (
                "changed",
                f"1% appended ({s['change']['appended']}) + {NEW_REPOS} new repos",
                s["files"] + NEW_REPOS * args.sessions,
            ),
        ):
            t = s[name]
            lines.append(
                f"| {s['repos']:,} | {files:,} | {label} | {_f(t['tick_s'])} | {_f(t['tick_cpu_s'])} | "
                f"{files / t['tick_s']:,.0f} | {t['run_requests']:,} | {t['new_keys']:,} | "
                f"{_f(t['add_partitions_s'])} | {t['cursor_file_kb']:,.0f} | {t['dagster_cursor_chars']} | "
                f"{t['max_rss_mb']:.0f} |"
            )
    lines += [
        "",
        "## Dynamic partitions: instance calls with every repository registered",
        "",
        "| partition keys | get_dynamic_partitions ms | has_dynamic_partition ms | partitions_def.get_partition_keys ms"
        " | get_materialized_partitions(tiered_traces) ms | partition status cache ms | create_run_for_job ms/run |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        p = s["partitions"]
        lines.append(
            f"| {p['keys']:,} | {_f(1e3 * p['get_dynamic_partitions_s'], 1)} | "
            f"{_f(1e3 * p['has_dynamic_partition_s'], 2)} | {_f(1e3 * p['partition_keys_from_def_s'], 1)} | "
            f"{_f(1e3 * p['get_materialized_partitions_s'], 1)} | "
            f"{_f(1e3 * p['partition_status_cache_s'], 1)} | {_f(1e3 * p['create_run_s'], 1)} |"
        )
    lines += [
        "",
        "## Ingest per partition: the whole trace tree is looked through for one repository's files",
        "",
        f'`ingest_repo` for {args.runs} repositories ({args.sessions} sessions each) in a fresh process: "no index" '
        "is a data folder where the sensor never ran (every file's repository read from its head), \"sensor "
        'index" one where it did. Dagster: `raw_sessions -> redacted_sessions -> tiered_traces`, one run per '
        "partition on the in-process executor (`demo.plan_main`), while every key exists.",
        "",
        '"cold" is the first partition of a process (what each sensor-launched run is: a process of its own), '
        '"warm" the mean of the later ones in the same process (in-process caches filled).',
        "",
        "| repos | files in the tree | ingest_repo s, no index, cold | no index, warm | sensor index, cold | "
        "sensor index, warm | Dagster chain: first run in a process s | later runs s/run | every partition once, "
        "later-run rate |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        d = s["dagster"]
        later = _later(d["per_run_s"], d["first_run_s"], d["runs"])
        a, b = s["ingest_no_index"], s["ingest_index"]
        lines.append(
            f"| {s['repos']:,} | {s['files']:,} | {_f(a['first_s'], 3)} | "
            f"{_f(_later(a['per_partition_s'], a['first_s'], args.runs), 3)} | {_f(b['first_s'], 3)} | "
            f"{_f(_later(b['per_partition_s'], b['first_s'], args.runs), 3)} | {_f(d['first_run_s'])} | "
            f"{_f(later)} | {s['repos'] * later / 3600:,.2f} h |"
        )
    lines += [
        "",
        "## Plain modules, per session",
        "",
        f"{chain['sessions']} sessions of {args.chain_repos} repositories, {chain['segments']} tiered segments; "
        f"Redactor start-up {chain['redactor_init_s']:.1f} s once per process.",
        "",
        "| parse (ingest_repo + read) ms | redact ms | tier ms | total ms/session |",
        "|---:|---:|---:|---:|",
        f"| {_f(chain['parse_ms'], 1)} | {_f(chain['redact_ms'], 1)} | {_f(chain['tier_ms'], 1)} | "
        f"{_f(chain['parse_ms'] + chain['redact_ms'] + chain['tier_ms'], 1)} |",
        "",
        "## Lake: `tiered_traces` over many partition files",
        "",
        "| partition files | rows | Lake.read_all(columns=[tier]) s | DuckDB views (duckdb_connection) s | "
        "`select tier, count(*) ... group by 1` s | peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in lake:
        lines.append(
            f"| {row['partitions']:,} | {row['rows']:,} | {_f(row['read_all_s'])} | {_f(row['views_s'])} | "
            f"{_f(row['sql_s'])} | {row['max_rss_mb']:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return text


if __name__ == "__main__":
    raise SystemExit(main())
