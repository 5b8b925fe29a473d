"""Sessions that start as the service account ``app`` (issue 39 item 4): one definition of the session users, read
by the bundle, the sandbox spec, the CLI and the importer; a real session as ``app`` as contained as operator's;
a bundle as ``app`` through the real gate; the prompt banner; an unknown user refused by name."""

from __future__ import annotations

import io
import tarfile
import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from bashgym_assets.rollout.transcript import initial_messages
from bashgym_assets.sandbox import Sandbox, SandboxSpec
from bashgym_assets.sandbox.layout import (
    OFFERED_USERS,
    SERVICE_USER,
    SESSION_ACCOUNTS,
    SessionUser,
)
from bashgym_assets.scenarios import external
from bashgym_assets.scenarios.bundle import ScenarioBundle

RECIPE = Path(__file__).resolve().parents[1] / "sandbox_images" / "base" / "configure-rootfs.sh"
LABELS = {"bashgym.test": "service-user"}
APP = SESSION_ACCOUNTS[SERVICE_USER]


def bundle(**kw: object) -> ScenarioBundle:
    body: dict[str, object] = {
        "task": "Rotate the ledger's log.",
        "category": "services",
        "difficulty": 1,
        "check": "true",
        "reference": ["true"],
        "user": SERVICE_USER,
    }
    body.update(kw)
    return ScenarioBundle(**body)  # type: ignore[arg-type]


# ---- one definition -------------------------------------------------------------------------------------------------
def test_every_layer_reads_the_one_definition_of_the_session_users() -> None:
    from bashgym_assets.sandbox.__main__ import main  # noqa: F401 - the CLI's choices come from the same dict

    users = set(typing.get_args(SessionUser))
    assert users == set(SESSION_ACCOUNTS) == {"root", "operator", "app"}
    assert set(typing.get_args(ScenarioBundle.model_fields["user"].annotation)) == users
    assert set(typing.get_args(SandboxSpec.model_fields["user"].annotation)) == users
    assert external.SANDBOX_USERS is SESSION_ACCOUNTS and external.OFFERED_USERS == OFFERED_USERS
    # a system account the way Debian makes a daemon's: uid below 1000, its own group, home under /srv
    assert (APP.uid, APP.group, APP.gid, APP.home) == (999, "app", 999, "/srv/app")
    # the image does not have it (tasks written elsewhere make their own app, take uid 999, build /srv/app as root):
    # a container makes it when its session is app
    recipe = RECIPE.read_text()
    commands = [line for line in recipe.splitlines() if not line.lstrip().startswith("#")]
    assert any(c.startswith("useradd ") for c in commands)
    assert not [c for c in commands if "groupadd" in c or " app" in c or "/srv/app" in c]
    assert not APP.in_image and all(a.in_image for n, a in SESSION_ACCOUNTS.items() if n != SERVICE_USER)
    for user in typing.get_args(SessionUser):
        assert bundle(user=user).home == SandboxSpec(user=user).home == SESSION_ACCOUNTS[user].home


def test_the_cli_offers_the_service_user(capsys: pytest.CaptureFixture[str]) -> None:
    from bashgym_assets.sandbox.__main__ import main

    with pytest.raises(SystemExit):
        main(["try", "--help"])
    said = capsys.readouterr().out
    assert "{operator,root,app}" in said or "{root,operator,app}" in said
    with pytest.raises(SystemExit):
        main(["try", "--user", "alice", "true"])
    assert "invalid choice: 'alice'" in capsys.readouterr().err


def test_an_unknown_user_is_refused_naming_it_and_what_the_sandbox_offers() -> None:
    with pytest.raises(ValidationError) as err:
        bundle(user="alice")
    said = str(err.value)
    assert "user 'alice' is not a sandbox user" in said and f"offers only {OFFERED_USERS}" in said
    assert "the service account app (uid 999, home /srv/app)" in said
    with pytest.raises(ValidationError):
        SandboxSpec(user="www-data")  # type: ignore[arg-type]


def test_the_banner_states_the_service_user_and_its_folder() -> None:
    assert initial_messages(bundle())[0].content == (
        "You are logged in to sandbox as app. Working directory: /srv/app.\napp@sandbox:/srv/app$"
    )
    assert initial_messages(bundle(workdir="/var/lib/ledger"))[0].content == (
        "You are logged in to sandbox as app. Working directory: /var/lib/ledger.\n"
        "app@sandbox:/var/lib/ledger$"
    )


def test_the_failure_classifier_knows_the_service_users_home() -> None:
    from bashgym_assets.evaluation.failures import facts_of_bundle, facts_of_messages

    assert facts_of_bundle(bundle()).home == "/srv/app"
    facts = facts_of_messages(initial_messages(bundle(workdir="/var/lib/ledger")))
    assert (facts.user, facts.start_dir, facts.home) == ("app", "/var/lib/ledger", "/srv/app")


def test_files_under_a_home_are_its_accounts_when_the_account_exists() -> None:
    from bashgym_assets.sandbox.layout import home_owners
    from bashgym_assets.sandbox.sandbox import _seed_tar

    files = {
        "/srv/app/conf/app.ini": "x",
        "/home/operator/a": "y",
        "/srv/other/b": "z",
        "/var/lib/app/c": "w",
    }

    def owners(user: str) -> dict[str, tuple[int, int]]:
        with tarfile.open(fileobj=io.BytesIO(_seed_tar(files, home_owners(user)))) as tar:
            return {m.name: (m.uid, m.gid) for m in tar.getmembers()}

    as_app, as_operator = owners("app"), owners("operator")
    assert as_app["srv/app/conf"] == as_app["srv/app/conf/app.ini"] == (999, 999)
    assert as_app["home/operator/a"] == as_operator["home/operator/a"] == (1000, 37)
    assert as_app["srv/other/b"] == as_app["var/lib/app/c"] == (0, 0)
    assert "srv/other" not in as_app  # no folder entry outside a home: an existing folder keeps its owner
    # no service account in an operator's session: its files under /srv/app are root's, as anywhere else
    assert as_operator["srv/app/conf/app.ini"] == (0, 0) and "srv/app/conf" not in as_operator
    assert owners("root") == as_operator


@pytest.mark.docker
def test_an_operators_session_leaves_app_uid_999_and_srv_app_to_the_task(sandbox_image: str) -> None:
    """What tasks written elsewhere do (the bundled pack's uid-999 user and /srv/app audit, the factory's own
    ``groupadd app``) works in a session that is not the service account's: the image has no app."""
    setup = [
        "! getent passwd app && ! getent group app && ! getent passwd 999 && [ ! -e /srv/app ]",
        "groupadd app && useradd -u 999 -r svc && useradd -m -g app app",
        "mkdir -p /srv/app/public && echo x > /srv/app/public/index.html && chmod 646 /srv/app/public/index.html",
    ]
    spec = SandboxSpec(image=sandbox_image, setup=setup, command_timeout_s=20, labels=LABELS)
    with Sandbox(spec) as box:
        done = box.setup()
        assert done.ok, done
        s = box.session()
        r = s.run("id -un; find /srv/app -type f -perm -o+w; id -u svc; getent passwd app | cut -d: -f6")
        assert r.stdout.splitlines() == ["operator", "/srv/app/public/index.html", "999", "/home/app"], r


# ---- a real session as the service account ---------------------------------------------------------------------------
@pytest.mark.docker
def test_a_service_session_is_who_and_where_it_says_and_contained(sandbox_image: str) -> None:
    files = {"/srv/app/ledger.conf": "level=info\n", "/srv/ledger/data.csv": "a,b\n"}
    setup = [
        "mkdir -p /var/lib/ledger && chown app:app /var/lib/ledger",
        "cp /bin/bash /usr/local/bin/rootbash && chmod 4755 /usr/local/bin/rootbash",
    ]
    spec = SandboxSpec(
        image=sandbox_image, user="app", files=files, setup=setup, command_timeout_s=20, labels=LABELS
    )
    with Sandbox(spec) as box:
        assert box.setup().ok
        s = box.session()
        r = s.run('whoami; echo "$HOME $USER $LOGNAME"; pwd; id -u; id -g -n; id -G')
        assert r.stdout.splitlines() == ["app", "/srv/app app app", "/srv/app", "999", "app", "999"], r
        owned = s.run(
            "stat -c '%U %a' ~ ~/ledger.conf /srv/ledger/data.csv ~/.gitconfig; git config user.name"
        )
        assert owned.stdout.splitlines() == ["app 750", "app 644", "root 644", "app 644", "app"], owned
        # its home and /tmp are size-capped tmpfs folders; the folder setup handed it is its to work in
        assert s.run("df --output=fstype ~ /tmp | tail -n +2").stdout.split() == ["tmpfs", "tmpfs"]
        assert s.run("cd /var/lib/ledger && echo ok > state && cat state").stdout == "ok\n"
        # nothing of operator's or root's is writable, and nothing grants more than the account has
        for target in ("/home/operator/x", "/root/x", "/etc/x", "/usr/local/bin/x", "/srv/ledger/data.csv"):
            w = s.run(f"echo no >> {target}")
            assert w.exit_code == 1 and "Permission denied" in w.stderr, (target, w)
        assert s.run("ls /root").exit_code == 2
        assert s.run("rootbash -p -c 'id -u'").stdout == "999\n"  # no-new-privileges: setuid grants nothing
        assert s.run("su -c id root </dev/null").exit_code != 0
        assert s.run("command -v sudo").exit_code == 1
        caps = s.run("grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs)' /proc/self/status").stdout
        assert all(v.split(":")[1].strip() in ("0000000000000000", "1") for v in caps.splitlines()), caps
        assert "NoNewPrivs:\t1" in caps
        k = s.run("kill -9 1")
        assert k.exit_code == 1 and "Operation not permitted" in k.stderr
        tmpfs = set(box.inspect()["HostConfig"]["Tmpfs"])
        assert tmpfs == {"/tmp", "/var/tmp", "/run", "/home/operator", "/srv/app"}
        assert box.run_check('test "$(cat /var/lib/ledger/state)" = ok && test $(id -u) = 0').exit_code == 0


@pytest.mark.docker
def test_a_disk_fill_in_the_service_home_hits_its_cap(sandbox_image: str) -> None:
    spec = SandboxSpec(image=sandbox_image, user="app", tmpfs_mb=16, command_timeout_s=30, labels=LABELS)
    with Sandbox(spec) as box:
        s = box.session()
        r = s.run("dd if=/dev/zero of=~/fill bs=1M count=100; echo rc=$?")
        assert "No space left on device" in r.stderr and "rc=1" in r.stdout
        assert int(s.run("stat -c %s ~/fill").stdout) <= 16 << 20


@pytest.mark.docker
def test_a_bundle_as_the_service_user_goes_through_the_real_gate(sandbox_image: str) -> None:
    from bashgym_assets.rollout.episode import run_episode
    from bashgym_assets.rollout.operators import ReferenceOperator
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundle

    b = bundle(
        task="Set the ledger's log level to warn in ledger.ini here.",
        workdir="/var/lib/ledger",
        setup=[
            "mkdir -p /var/lib/ledger && printf 'level=info\\nport=8080\\n' > /var/lib/ledger/ledger.ini",
            "chown -R app:app /var/lib/ledger",
        ],
        # the state as the service left it: its file, still its own
        check=(
            "f=/var/lib/ledger/ledger.ini; grep -qx 'level=warn' $f && grep -qx 'port=8080' $f "
            '&& [ "$(stat -c %U $f)" = app ]'
        ),
        reference=["sed -i 's/^level=.*/level=warn/' ledger.ini"],
    )
    result = gate_bundle(b, sandbox_image, GateLimits(command_timeout_s=60, check_timeout_s=60))
    assert result.admitted, (result.reason, result.detail)
    record = run_episode(b, ReferenceOperator(), sandbox_image)
    assert record.verified, record.reject_reason
    assert record.messages[0].content.startswith(
        "You are logged in to sandbox as app. Working directory: /var/lib/ledger."
    )
    # an answer that leaves the file as it was is refused: the gate's verdict is the check's, for app as for all
    wrong = b.model_copy(
        update={"reference": ["cp ledger.ini /tmp/x && sed 's/^level=.*/level=warn/' /tmp/x > l2"]}
    )
    assert not gate_bundle(wrong, sandbox_image, GateLimits(check_timeout_s=60)).admitted


# ---- the factory's service families ----------------------------------------------------------------------------------
def service_draws(name: str, n: int = 55) -> list[ScenarioBundle]:
    from bashgym_assets.scenarios.factory.family import all_families
    from bashgym_assets.scenarios.factory.generate import draw_family

    return [b for b in draw_family(all_families()[name], n, seed=0).bundles if b.user == SERVICE_USER]


def test_the_service_families_start_as_app_in_the_trees_their_service_owns() -> None:
    for name in ("logs-merge-rotated", "forensics-config-key-owner", "forensics-log-failed-file"):
        drawn = service_draws(name)
        assert len(drawn) >= 5, name
        for b in drawn:
            assert not b.start_dir.startswith(("/home/operator", "/root")), (name, b.start_dir)
            # a folder outside its home is one the setup handed the service account
            assert b.start_dir.startswith(APP.home) or any(
                "chown" in c and " app:" in c and b.start_dir in c for c in b.setup
            ), (name, b.start_dir, b.setup)
            assert "/home/operator" not in b.check + "".join(b.reference), (name, b.id)


@pytest.mark.docker
def test_the_service_log_family_passes_the_gate_as_app(sandbox_image: str) -> None:
    from bashgym_assets.scenarios.gate import GateLimits, gate_bundles

    drawn = service_draws("logs-merge-rotated")
    picked = [
        next(b for b in drawn if b.start_dir == APP.home),
        next(b for b in drawn if b.start_dir != APP.home),
    ]
    results = gate_bundles(picked, sandbox_image, max_parallel=2, limits=GateLimits(check_timeout_s=60))
    assert all(r.admitted for r in results), [(r.scenario_id, r.reason, r.detail[:300]) for r in results]
