"""Where factory tasks start (issue 39, item 4): the start distribution (session user, start folder, shell variables
set) that factory_report and ``generated_scenarios`` report, and the families whose shell starts with a variable
naming the folder to work in (``world.session_variables``): in a real sandbox the reference passes, while acting
as if the variable were not set, or a plausible wrong scope, fails the check."""

from __future__ import annotations

import re

import pytest
from sandbox_fixtures import check_exits_after

from bashgym_assets.scenarios.bundle import ScenarioBundle
from bashgym_assets.scenarios.factory.family import all_families
from bashgym_assets.scenarios.factory.generate import draw_family
from bashgym_assets.scenarios.factory.variety import (
    PROFILE_DIR,
    sets_shell_variables,
    start_distribution,
    start_folder,
    start_rows,
    start_summary,
)
from bashgym_assets.scenarios.factory.world import World, quote, session_variables
from bashgym_assets.scenarios.gate import gate_bundle

FAMILIES = all_families()
VARIABLE_FAMILIES = ("files-delete-by-pattern", "logs-errors-per-service", "text-replace-in-files")


def _bundle(
    user: str = "operator", workdir: str | None = None, files: dict[str, str] | None = None
) -> ScenarioBundle:
    return ScenarioBundle(
        task="t", category="files", difficulty=1, user=user, workdir=workdir, files=files or {}, check="true",
        reference=["true"],
    )  # fmt: skip


def test_start_folder_and_shell_variables_are_read_from_the_bundle() -> None:
    assert start_folder(_bundle()) == "home"
    assert start_folder(_bundle(workdir="/home/operator/atlas")) == "under home"
    assert start_folder(_bundle("root", "/root")) == "home"
    assert start_folder(_bundle("root", "/srv/atlas/releases")) == "/srv"
    assert start_folder(_bundle(workdir="/app")) == "/app"
    exported = {f"{PROFILE_DIR}site.sh": "# site\nexport LOG_DIR='/var/log/atlas'\n"}
    assert sets_shell_variables(_bundle(files=exported))
    assert not sets_shell_variables(_bundle(files={f"{PROFILE_DIR}site.sh": "# export LOG_DIR=/x\n"}))
    assert not sets_shell_variables(_bundle(files={"/home/operator/.bashrc": "export LOG_DIR=/x\n"}))


def test_start_distribution_counts_users_folders_families_and_variables() -> None:
    exported = {f"{PROFILE_DIR}site.sh": "export APP_HOME=/opt/atlas\n"}
    dist = start_distribution(
        {
            "a": [_bundle(), _bundle(workdir="/home/operator/x")],  # never leaves the home tree
            "b": [_bundle("root", "/srv/b"), _bundle(files=exported)],
            "c": [_bundle("root")],
        }
    )
    assert dist.tasks == 5 and dist.families == 3
    assert dist.tasks_by_user() == {"operator": 3, "root": 2}
    assert dist.tasks_by_folder() == {"home": 3, "/srv": 1, "under home": 1}
    assert dist.families_by_users == {"operator": 1, "operator+root": 1, "root": 1}
    assert (dist.families_elsewhere, dist.families_outside_home) == (2, 1)
    assert (dist.tasks_elsewhere, dist.tasks_outside_home) == (2, 1)
    assert (dist.tasks_with_variables, dist.families_with_variables) == (1, 1)
    headers, rows = start_rows(dist)
    assert headers == ["start folder", "operator", "root", "tasks"]
    assert rows[0] == ["home", 2, 1, 3] and ["/srv", 0, 1, 1] in rows
    text = start_summary(dist)
    assert (
        "operator 3, root 2" in text
        and "2 start in another folder" in text
        and "1 tasks in 1 families" in text
    )


def test_session_variables_write_a_profile_file_that_exports_them() -> None:
    w = World("env:1")
    files = session_variables(w, {"LOG_DIR": "/var/log/my app"}, "site")
    assert files == {"/etc/profile.d/site.sh": f"export LOG_DIR={quote('/var/log/my app')}\n"}
    assert "LOG_DIR" in w.values


def test_the_factory_starts_tasks_elsewhere_as_both_users_and_with_variables_set() -> None:
    by_family = {n: draw_family(f, 12, seed=0).bundles for n, f in FAMILIES.items()}
    dist = start_distribution(by_family)
    assert set(dist.tasks_by_user()) == {"operator", "root", "app"}
    # the service account starts the tasks of the families whose work is a service's own (config, log, backups)
    with_app = sum(n for users, n in dist.families_by_users.items() if "app" in users.split("+"))
    assert with_app >= 4 and dist.tasks_by_user()["app"] >= 8, start_summary(dist)
    assert "app" in start_rows(dist)[0], start_rows(dist)
    assert dist.families_outside_home >= 60, start_summary(dist)
    assert dist.tasks_outside_home >= dist.tasks // 5, start_summary(dist)
    assert dist.families_with_variables >= len(VARIABLE_FAMILIES), start_summary(dist)


@pytest.mark.parametrize("name", VARIABLE_FAMILIES)
def test_a_variable_names_the_folder_and_the_task_only_the_variable(name: str) -> None:
    y = draw_family(FAMILIES[name], 55, seed=0)
    with_var = [b for b in y.bundles if sets_shell_variables(b)]
    assert 5 <= len(with_var) < len(y.bundles), (name, len(with_var))
    for b in with_var:
        var, folder = _variable(b)
        assert f"${var}" in b.task and folder not in b.task, b.task
        assert any(f'"${var}"' in line for line in b.reference), b.reference


def _variable(b: ScenarioBundle) -> tuple[str, str]:
    """The variable the shell starts with, and the folder it names."""
    body = next(v for p, v in b.files.items() if p.startswith(PROFILE_DIR))
    m = re.match(r"export (\w+)='?([^'\n]*)'?", body)
    assert m, body
    return m.group(1), m.group(2)


def _with_variable(name: str, ok=lambda b: True) -> ScenarioBundle:
    for i in range(400):
        b, _ = FAMILIES[name].make(f"env:{i}")
        if sets_shell_variables(b) and ok(b):
            return b
    raise AssertionError(f"{name}: no draw with a shell variable")


def _quoted(task: str) -> list[str]:
    return re.findall(r"'([^']+)'", task)


def _wrong_scope(name: str, b: ScenarioBundle) -> list[str]:
    """A plausible answer with the wrong scope: the top level only, errors counted by mention, every file type."""
    var, _ = _variable(b)
    if name == "files-delete-by-pattern":
        return [f'cd "${var}" && rm -f ' + " ".join(_quoted(b.task))]
    if name == "logs-errors-per-service":
        out = re.search(r"> '([^']+)'", b.reference[-2]) or re.search(r"> (\S+)$", b.reference[-2])
        assert out, b.reference
        return [f'cd "${var}"', f"grep -ci error *.log | sed 's/\\.log:/: /' > {out.group(1)}"]
    old, new = _quoted(b.task)[:2]
    perl = f"OLD={quote(old)} NEW={quote(new)} perl -pi -e 's/\\Q$ENV{{OLD}}\\E/$ENV{{NEW}}/g'"
    return [f'grep -rlF -- {quote(old)} "${var}" | xargs env {perl}']


@pytest.mark.docker
@pytest.mark.parametrize("name", VARIABLE_FAMILIES)
def test_the_reference_passes_and_ignoring_the_variable_or_the_scope_fails(
    name: str, sandbox_image: str
) -> None:

    if name == "logs-errors-per-service":  # a quiet line that mentions an error, and the colon format
        bundle = _with_variable(name, lambda b: "SERVICE: COUNT" in b.task and " INFO " in str(b.files) and any(
            re.search(r" INFO \S+: .*error", body) for body in b.files.values()))  # fmt: skip
    elif name == "files-delete-by-pattern":  # some junk below the top level
        bundle = _with_variable(name, lambda b: any(
            p.count("/") > _variable(b)[1].count("/") + 1 for p in re.findall(r"\[ ! -e '([^']+)' \]", b.check)))  # fmt: skip
    else:
        bundle = _with_variable(name)
    result = gate_bundle(bundle, sandbox_image)
    assert result.admitted, result.detail
    var, _ = _variable(bundle)
    wrong_answers = [
        [f"unset {var}", *bundle.reference],  # the shell's variable ignored: the same commands on no folder
        _wrong_scope(name, bundle),
    ]
    codes = check_exits_after([(bundle, w) for w in wrong_answers], sandbox_image)
    for wrong, code in zip(wrong_answers, codes, strict=True):
        assert code not in (0, None), (name, wrong, code)
