"""The sandbox base image as an asset: every sandboxed stage depends on it."""

import subprocess

import dagster as dg

from bashgym_assets import images
from bashgym_assets.defs.resources import BashgymHome


@dg.asset(
    group_name="sandbox",
    kinds={"docker"},
    code_version=images.recipe_hash(),  # the recipe: a changed recipe shows the image as stale
    description="The offline-built sandbox base image (debootstrap -> docker import), tagged by recipe hash.",
)
def sandbox_image(context: dg.AssetExecutionContext, bashgym: BashgymHome) -> dg.MaterializeResult:
    if bashgym.sandbox_image:  # the user's own image (BASHGYM_SANDBOX_IMAGE or run config): used, never built
        images.ensure_docker_engine()
        tag = bashgym.sandbox_image
        if not images.image_exists(tag):
            raise dg.Failure(
                f"the configured sandbox image {tag!r} is not in the Docker engine: pull or build it "
                "first, or unset BASHGYM_SANDBOX_IMAGE to use the offline-built image"
            )
        context.log.info(f"sandbox image {tag} (configured) is present")
        return dg.MaterializeResult(
            metadata={"image": dg.MetadataValue.text(tag), "source": dg.MetadataValue.text("configured")},
            data_version=dg.DataVersion(tag),
        )
    tag = images.build_sandbox_image(cache_dir=bashgym.settings().home / "cache" / "debootstrap")
    size = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, text=True
    ).stdout.strip()
    packages = images.recipe_packages()
    context.log.info(f"sandbox image {tag} ready")
    return dg.MaterializeResult(
        metadata={
            "image": dg.MetadataValue.text(tag),
            "size_mb": dg.MetadataValue.float(round(int(size or 0) / 1e6, 1)),
            "packages": dg.MetadataValue.int(len(packages)),
            "recipe": dg.MetadataValue.md("\n".join(f"- `{p}`" for p in packages)),
        },
        data_version=dg.DataVersion(tag),
    )


defs = dg.Definitions(assets=[sandbox_image])
