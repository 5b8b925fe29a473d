"""Metadata people would rather look at: tables with schemas, lake column schemas and row counts, code versions.

Why here: the thin asset modules all turn plain results into Dagster metadata the same way; one place keeps the
UI consistent (every table-like result sortable with typed columns, every lake asset with ``dagster/row_count``
and ``dagster/column_schema``), and gives each asset a code version derived from the plain modules it runs, so
the UI marks an asset stale when its logic changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "string"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], descriptions: Mapping[str, str] | None = None
) -> dg.MetadataValue:
    """Rows as ``MetadataValue.table`` with a schema; a column's type is the first non-null value's (ints, floats
    and bools stay numbers, so the UI sorts them as numbers); other values become text."""
    kinds = []
    for i, _ in enumerate(headers):
        sample = next((r[i] for r in rows if r[i] is not None), "")
        kinds.append(_kind(sample))
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn(h, k, description=(descriptions or {}).get(h))
            for h, k in zip(headers, kinds, strict=True)
        ]
    )
    records = []
    for r in rows:
        values = {}
        for h, k, v in zip(headers, kinds, r, strict=True):
            values[h] = v if (v is None or k != "string") else str(v)
        records.append(dg.TableRecord(values))
    return dg.MetadataValue.table(records, schema=schema)


def counts_table(counts: Mapping[str, Any], key: str = "key", value: str = "count") -> dg.MetadataValue:
    """A mapping as a two-column table (tier counts, reasons, sources)."""
    return table([key, value], [[k, v] for k, v in counts.items()] or [["(none)", 0]])


_ARROW_KIND = (
    (pa.types.is_boolean, "bool"),
    (pa.types.is_integer, "int"),
    (pa.types.is_floating, "float"),
    (pa.types.is_timestamp, "timestamp"),
    (pa.types.is_list, "list"),
    (pa.types.is_large_list, "list"),
    (pa.types.is_struct, "struct"),
    (pa.types.is_map, "map"),
)


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """A parquet schema as Dagster's column schema (shown on the asset page and searchable in the catalog)."""
    columns = []
    for f in schema:
        kind = next((name for test, name in _ARROW_KIND if test(f.type)), "string")
        columns.append(
            dg.TableColumn(
                f.name, kind, description=str(f.type) if kind in ("list", "struct", "map") else None
            )
        )
    return dg.TableSchema(columns=columns)


def lake_metadata(tbl: pa.Table) -> dict[str, Any]:
    """``dagster/row_count`` and ``dagster/column_schema`` of what an asset wrote to the lake."""
    return {
        "dagster/row_count": dg.MetadataValue.int(tbl.num_rows),
        "dagster/column_schema": dg.MetadataValue.table_schema(column_schema(tbl.schema)),
    }


@cache
def code_version(*modules: str) -> str:
    """A short hash of the plain modules' source an asset runs: it changes when their logic does. A package counts
    with every module in it (its logic is spread over them). The files are read, not imported: a code location
    must load without torch or presidio."""
    digest = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise ValueError(f"code_version: no source for module {name!r}")
        files = [Path(spec.origin)]
        for folder in spec.submodule_search_locations or []:
            files += sorted(p for p in Path(folder).rglob("*.py") if p != Path(spec.origin))
        for file in files:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def lake_file_metadata(lake: Any, asset: str, partition: str | None = None) -> dict[str, Any]:
    """Like ``lake_metadata`` from the parquet footer of what is in the lake (no data read); {} if absent."""
    import pyarrow.parquet as pq

    path = lake.table_path(asset, partition)
    if not path.exists():
        return {}
    meta = pq.ParquetFile(path).metadata
    return {
        "dagster/row_count": dg.MetadataValue.int(meta.num_rows),
        "dagster/column_schema": dg.MetadataValue.table_schema(column_schema(meta.schema.to_arrow_schema())),
    }


def gated_scenario_rows(lake: Any) -> list[dict[str, Any]]:
    """``gated_scenarios`` as rows for the assets that play scenarios (student rollouts, GRPO, the evaluation); a
    lake that never gated any is a clear run failure, not a traceback."""
    from bashgym_assets.scenarios.suite import gated_rows

    rows = gated_rows(lake)  # the pipeline's and every suite `bashgym suite gate` admitted
    if not rows:
        raise dg.Failure("gated_scenarios has never been materialized: gate the scenarios first")
    return rows
