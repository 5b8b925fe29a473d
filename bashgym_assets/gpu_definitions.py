"""GPU code location: every asset that loads model weights (base model, adapters incl. GRPO, student rollouts,
evaluation).

Its Definitions-level executor is the dedicated GPU executor. Dagster's asset jobs (the UI's "Materialize",
``dagster asset materialize``, schedules and sensors) always use the executor of the code location an asset lives
in, so putting these assets in their own location is what pins them to that executor however they are launched.
Assets here depend on CPU-location assets (e.g. ``sft_dataset``) by asset key; both locations share the lake.
"""

import dagster as dg

from bashgym_assets.defs import evaluation, export, grpo, student, training
from bashgym_assets.defs.automation import automation_sensor
from bashgym_assets.defs.executors import gpu_executor
from bashgym_assets.defs.resources import default_resources
from bashgym_assets.defs.run_health import dead_run_reaper

defs = dg.Definitions.merge(
    training.defs,
    grpo.defs,
    student.defs,
    evaluation.defs,
    export.defs,
    dg.Definitions(
        resources=default_resources(),
        executor=gpu_executor(),
        sensors=[automation_sensor("gpu"), dead_run_reaper],
    ),
)
