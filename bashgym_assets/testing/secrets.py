"""Generated sessions for testing and benchmarking redaction: planted secrets and PII, and code with none.

``planted_items(rng)`` returns one value of every kind the redactor supports (48 kinds), each with a sentence, a
command or a file that carries it the way it would appear in a real trace. ``code_heavy_steps(rng)`` produces tool
calls full of things redaction must leave alone: git hashes, digests, UUIDs, version strings, 5-digit numbers,
timestamps, ``localhost`` URLs, ``std::`` paths. ``generate_corpus`` mixes both into realistic sessions.
``decoy_items(rng)`` returns values that look sensitive but are documentation or placeholders (they must survive:
precision), ``near_decoy_items(rng)`` real secrets beside them and URLs of every shape on internal hosts (they must
not: recall), and ``decoy_session`` carries both.
"""

from __future__ import annotations

import contextlib
import json
import random
import string
import uuid
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from bashgym_assets.sessions import Prompt, Session, Step

B62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


class PlantedItem(BaseModel):
    """A value that must not survive redaction, and the kind it is."""

    kind: str
    value: str
    carrier: str  # the text that carries it (prompt, command, output or file content)
    field: str  # prompt | command | output | write


def _tok(rng: random.Random, n: int, alphabet: str = B62) -> str:
    while True:
        t = "".join(rng.choice(alphabet) for _ in range(n))
        if (
            alphabet != B62
            or n < 12
            or (
                sum(c.isdigit() for c in t) >= 2
                and sum(c.isupper() for c in t) >= 2
                and sum(c.islower() for c in t) >= 2
            )
        ):
            return t


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    digits = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return digits + str((10 - total % 10) % 10)


def _jwt(rng: random.Random) -> str:
    import base64

    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return (
        f"{b64({'alg': 'HS256', 'typ': 'JWT'})}.{b64({'sub': str(rng.randint(1000, 99999)), 'name': 'svc'})}."
        f"{_tok(rng, 43, B62 + '-_')}"
    )


def _exchange(rng: random.Random) -> str:
    """A NANP exchange that is neither an N11 service code nor the 555 block."""
    while True:
        ex = f"{rng.randint(2, 9)}{rng.randint(2, 9)}{rng.randint(0, 9)}"
        if ex != "555":
            return ex


def planted_items(rng: random.Random, user: str = "jdoe42") -> list[PlantedItem]:
    """One value of every supported kind, in context. Random parts differ per call (seeded)."""
    r = rng
    aws_id = "AKIA" + _tok(r, 16, string.ascii_uppercase + string.digits)
    aws_secret = _tok(r, 36) + "/" + _tok(r, 3)
    pem_body = "\n".join(_tok(r, 64, B62 + "+/") for _ in range(6))
    items: list[tuple[str, str, str, str]] = [
        # --- personal data (presidio) ---
        (
            "email",
            f"maria.{_tok(r, 5, string.ascii_lowercase)}@protonmail.com",
            "Please email {v} when it is done.",
            "prompt",
        ),
        (
            "email",
            f"k.{_tok(r, 4, string.ascii_lowercase)}@acme-corp.io",
            "Author: Kim Lee <{v}>\nDate: Mon Mar 3",
            "output",
        ),
        # real-looking numbers outside the ranges reserved for fiction (555-01xx, Ofcom's drama numbers: decoys)
        (
            "phone",
            f"+1 415-{_exchange(r)}-{r.randint(1000, 9999)}",
            "call me on {v} if the deploy breaks",
            "prompt",
        ),
        ("phone", f"+44 20 7{r.randint(100, 899)} {r.randint(1000, 9999)}", "support line: {v}", "output"),
        (
            "phone",
            f"({r.choice([212, 312, 617])}) {_exchange(r)}-{r.randint(1000, 9999)}",
            "Contact phone: {v}",
            "write",
        ),
        ("credit_card", _luhn_complete("4", 16, r), "card_number = '{v}'", "write"),
        ("credit_card", _luhn_complete("51", 16, r), "charged card {v} for the test order", "output"),
        ("iban", "DE89370400440532013000", "wire it to IBAN {v} please", "prompt"),
        ("iban", "GB82 WEST 1234 5698 7654 32", "beneficiary account: {v}", "output"),
        (
            "ip_v4",
            f"10.{r.randint(1, 254)}.{r.randint(1, 254)}.{r.randint(2, 254)}",
            "ssh deploy@{v} 'systemctl restart api'",
            "command",
        ),
        # a public address (203.0.113.0/24 and 2001:db8::/32 are documentation ranges: decoys, not planted)
        (
            "ip_v4",
            f"{r.choice([81, 91, 145, 185])}.{r.randint(1, 254)}.{r.randint(1, 254)}.{r.randint(2, 254)}",
            "Connection from {v} port 51514",
            "output",
        ),
        (
            "ip_v6",
            f"fd{r.randint(16, 255):02x}:{r.randint(4096, 65535):x}:{r.randint(4096, 65535):x}::8a2e:370:7334",
            "listen [{v}]:443;",
            "write",
        ),
        (
            "url",
            f"https://wiki.{_tok(r, 6, string.ascii_lowercase)}-internal.com/team/oncall",
            "see {v} for the rota",
            "prompt",
        ),
        ("crypto_wallet", "1BoatSLRHtKNngkdXEeobR76b53LETtpyT", "donations: {v}", "write"),
        ("crypto_wallet", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "send to {v}", "prompt"),
        ("us_ssn", "536-22-8426", "employee SSN: {v}", "output"),
        ("us_itin", "912-71-1234", "ITIN {v} on the W-7", "prompt"),
        ("uk_nhs", "943 476 5919", "NHS number {v}", "output"),
        ("uk_nino", "JG 10 37 65 A", "National Insurance: {v}", "prompt"),
        ("es_nif", "12345678Z", "NIF del cliente: {v}", "output"),
        ("it_fiscal_code", "RSSMRA85T10A562S", "codice fiscale {v}", "output"),
        ("in_pan", "ABCPE1234F", "PAN card {v}", "prompt"),
        ("mac", "00:1a:2b:3c:4d:5e", "link/ether {v} brd ff:ff:ff:ff:ff:ff", "output"),
        # --- secrets (our detectors) ---
        ("aws_access_key_id", aws_id, "export AWS_ACCESS_KEY_ID={v}", "command"),
        ("aws_secret_access_key", aws_secret, "aws_secret_access_key = {v}", "write"),
        ("gcp_api_key", "AIza" + _tok(r, 35, B62 + "-_"), 'const MAPS_KEY = "{v}";', "write"),
        (
            "gcp_oauth_token",
            "ya29." + _tok(r, 60, B62 + "-_"),
            "curl -H 'Authorization: Bearer {v}' https://www.googleapis.com/drive/v3/files",
            "command",
        ),
        ("gcp_client_secret", "GOCSPX-" + _tok(r, 28, B62 + "-_"), "client_secret: {v}", "write"),
        (
            "azure_storage_key",
            _tok(r, 86, B62 + "+/") + "==",
            "DefaultEndpointsProtocol=https;AccountName=prodstore;AccountKey={v};EndpointSuffix=core.windows.net",
            "write",
        ),
        (
            "azure_sas",
            _tok(r, 43, B62) + "%3D",
            "https://prodstore.blob.core.windows.net/c/f.zip?sv=2022-11-02&ss=b&sig={v}",
            "command",
        ),
        (
            "azure_client_secret",
            _tok(r, 3) + "8Q~" + _tok(r, 34, B62 + "_~.-"),
            "AZURE_CLIENT_SECRET='{v}'",
            "write",
        ),
        (
            "github_token",
            "ghp_" + _tok(r, 36),
            "git clone https://x-access-token:{v}@github.com/acme/private.git",
            "command",
        ),
        ("github_pat", "github_pat_" + _tok(r, 22) + "_" + _tok(r, 59), "GH_TOKEN={v} gh pr list", "command"),
        ("gitlab_token", "glpat-" + _tok(r, 20, B62 + "-_"), "PRIVATE-TOKEN: {v}", "output"),
        (
            "slack_token",
            "xoxb-" + "-".join(str(r.randint(10**10, 10**11)) for _ in range(2)) + "-" + _tok(r, 24),
            'slack_bot_token: "{v}"',
            "write",
        ),
        (
            "slack_webhook",
            "https://hooks.slack.com/services/T"
            + _tok(r, 8, string.ascii_uppercase + string.digits)
            + "/B"
            + _tok(r, 8, string.ascii_uppercase + string.digits)
            + "/"
            + _tok(r, 24),
            'curl -X POST {v} -d \'{{"text":"done"}}\'',
            "command",
        ),
        ("stripe_key", "sk_live_" + _tok(r, 24), 'stripe.api_key = "{v}"', "write"),
        ("stripe_webhook", "whsec_" + _tok(r, 32), "STRIPE_WEBHOOK_SECRET={v}", "write"),
        ("openai_key", "sk-proj-" + _tok(r, 48, B62 + "-_"), "OPENAI_API_KEY={v} python run.py", "command"),
        (
            "anthropic_key",
            "sk-ant-api03-" + _tok(r, 93, B62 + "-_") + "AA",
            'client = Anthropic(api_key="{v}")',
            "write",
        ),
        ("huggingface_token", "hf_" + _tok(r, 34), "huggingface-cli login --token {v}", "command"),
        ("npm_token", "npm_" + _tok(r, 36), "//registry.npmjs.org/:_authToken={v}", "write"),
        ("pypi_token", "pypi-AgEIcHlwaS5vcmc" + _tok(r, 60, B62 + "-_"), "password = {v}", "write"),
        (
            "sendgrid_key",
            "SG." + _tok(r, 22, B62 + "-_") + "." + _tok(r, 43, B62 + "-_"),
            'SENDGRID_API_KEY="{v}"',
            "write",
        ),
        ("twilio_key", "SK" + _tok(r, 32, HEX), "twilio api key sid {v}", "output"),
        ("digitalocean_token", "dop_v1_" + _tok(r, 64, HEX), "doctl auth init -t {v}", "command"),
        ("shopify_token", "shpat_" + _tok(r, 32, HEX), "X-Shopify-Access-Token: {v}", "command"),
        (
            "telegram_bot_token",
            f"{r.randint(10**8, 10**9)}:AA" + _tok(r, 33, B62 + "-_"),
            "bot = Bot('{v}')",
            "write",
        ),
        ("jwt", _jwt(r), "Authorization: Bearer {v}", "output"),
        (
            "private_key_rsa",
            f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----",
            "{v}\n",
            "write",
        ),
        (
            "private_key_openssh",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"
            + _tok(r, 40)
            + "\n-----END OPENSSH PRIVATE KEY-----",
            "cat ~/.ssh/id_ed25519\n{v}",
            "output",
        ),
        (
            "password_in_url",
            "Tr0ub4dor-" + _tok(r, 6),
            "psql postgres://app_rw:{v}@db.prod.internal:5432/orders",
            "command",
        ),
        (
            "password_in_connection_string",
            "Pa55w0rd!" + _tok(r, 4),
            "Server=tcp:sql01,1433;Database=hr;User Id=sa;Password={v};",
            "write",
        ),
        ("env_password", "hunter2-" + _tok(r, 5), "DB_PASSWORD={v}", "write"),
        ("quoted_secret", _tok(r, 32), 'config = {{"api_key": "{v}", "region": "eu-west-1"}}', "write"),
        ("yaml_password", "Sup3r-" + _tok(r, 8), "database:\n  user: app\n  password: {v}\n", "write"),
        ("high_entropy_token", _tok(r, 40, B62 + "_-"), "X-Internal-Auth: {v}", "output"),
        ("home_user", user, "cd /home/{v}/projects/api && ls", "command"),
        ("home_user_bare", user, "{v}@devbox:~/projects/api$ make test", "output"),
    ]
    out = []
    for kind, value, template, field in items:
        out.append(
            PlantedItem(
                kind=kind,
                value=value,
                carrier=template.replace("{v}", value).replace("{{", "{").replace("}}", "}"),
                field=field,
            )
        )
    return out


# ---- code-heavy material with no secrets ----------------------------------------------------------------

_PY_FILE = '''"""Order service: totals, discounts and the HTTP handlers."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from decimal import Decimal

log = logging.getLogger(__name__)
DEFAULT_PORT = 8080
MAX_ITEMS = 10000
API_VERSION = "2.14.3"


@dataclass
class Order:
    order_id: str
    items: list[tuple[str, int, Decimal]] = field(default_factory=list)
    token: str | None = None

    def total(self) -> Decimal:
        return sum((price * qty for _, qty, price in self.items), Decimal("0"))


def apply_discount(order: Order, percent: int) -> Decimal:
    if not 0 <= percent <= 100:
        raise ValueError(f"bad discount {{percent}}")
    password = os.environ["DB_PASSWORD"]
    secret_key = settings.SECRET_KEY
    api_key = get_api_key()
    token: str = request.headers.get("X-Token")
    return order.total() * (100 - percent) / 100


class AbstractSingletonProxyFactoryBean:
    def handleHttpResponseStatusCodeMapping(self, code: int) -> str:
        return {{200: "ok", 404: "missing", 50000: "zip"}}.get(code, "error")
'''

_TS_FILE = """import {{ useEffect, useState }} from "react";
import type {{ Order }} from "./types";

export const API_BASE = "http://localhost:3000/api/v1";
const RETRY_MS = 15000;

export function useOrders(customerId: string) {{
  const [orders, setOrders] = useState<Order[]>([]);
  useEffect(() => {{
    fetch(`${{API_BASE}}/customers/${{customerId}}/orders?limit=50`)
      .then((r) => r.json())
      .then(setOrders);
  }}, [customerId]);
  return orders;
}}
"""


def _hash(rng: random.Random, n: int = 40) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


def code_heavy_steps(rng: random.Random, cwd: str) -> list[tuple[str, dict, str, int]]:
    """(tool, input, output, exit_code) tool calls from ordinary development: nothing here is secret."""
    commits = [
        (
            _hash(rng),
            rng.choice(
                [
                    "fix: handle empty cart",
                    "feat: add discount endpoint",
                    "refactor order totals",
                    "chore: bump deps to 2.14.3",
                    "test: cover 404 path",
                ]
            ),
        )
        for _ in range(8)
    ]
    git_log = "\n".join(f"{h[:7]} {msg}" for h, msg in commits)
    pip = "\n".join(
        f"{name}=={rng.randint(0, 5)}.{rng.randint(0, 30)}.{rng.randint(0, 12)}"
        for name in ["numpy", "pandas", "requests", "urllib3", "pydantic", "fastapi", "uvicorn", "sqlalchemy"]
    )
    ls = "\n".join(
        f"-rw-r--r-- 1 dev dev {rng.randint(100, 99999):>6} Mar {rng.randint(1, 28):>2} 1{rng.randint(0, 9)}:"
        f"{rng.randint(10, 59)} {name}"
        for name in [
            "main.py",
            "orders.py",
            "setup.py",
            "README.md",
            "Cargo.toml",
            "package-lock.json",
            "go.sum",
            "index.ts",
        ]
    )
    pytest_out = (
        f"============ test session starts ============\nplatform linux -- Python 3.11.7, pytest-8.3.4\n"
        f"collected {rng.randint(20, 90)} items\n\ntests/test_orders.py ........F.. [ 45%]\n"
        f"tests/test_api.py ............ [100%]\n\nFAILED tests/test_orders.py::test_discount_bounds - "
        f"AssertionError: assert 90.00 == 95.00\n=== 1 failed, {rng.randint(20, 80)} passed in "
        f"{rng.random() * 9:.2f}s ==="
    )
    docker = "\n".join(
        f"app/api  {rng.randint(1, 3)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}  sha256:{_hash(rng, 64)}"
        f"  {rng.randint(2, 9)} days ago  {rng.randint(80, 900)}MB"
        for _ in range(3)
    )
    lock = json.dumps(
        {
            "name": "web",
            "lockfileVersion": 3,
            "packages": {
                f"node_modules/{p}": {
                    "version": f"{rng.randint(1, 18)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
                    "resolved": f"https://registry.npmjs.org/{p}/-/{p}-1.0.0.tgz",
                    "integrity": "sha512-" + _tok(rng, 86, B62 + "+/") + "==",
                }
                for p in ["react", "lodash", "zod", "vite"]
            },
        },
        indent=2,
    )
    gosum = "\n".join(
        f"github.com/{m} v{rng.randint(0, 2)}.{rng.randint(0, 20)}.{rng.randint(0, 9)} h1:"
        f"{_tok(rng, 43, B62 + '+/')}="
        for m in ["spf13/cobra", "stretchr/testify", "google/uuid"]
    )
    ids = "\n".join(
        f"{uuid.UUID(int=rng.getrandbits(128))}  job-{rng.randint(10000, 99999)}  queued" for _ in range(4)
    )
    cpp = (
        "#include <vector>\nstd::vector<std::string> split(const std::string& s) {\n  std::vector<std::string> out;"
        "\n  return out;\n}\nauto v = ::ns::detail::make(0x7fff, 65535);\n"
    )
    versions = (
        f"Ubuntu clang version 14.0.0-1ubuntu1.1\nnode v18.19.0\nGo go1.21.6 linux/amd64\nchromium 120.0.6099.224"
        f"\nserver listening on http://127.0.0.1:8000 and 0.0.0.0:{rng.randint(3000, 9999)}\n"
        f"build 2024-03-0{rng.randint(1, 9)}T1{rng.randint(0, 9)}:42:17Z zip 94107 pid {rng.randint(1000, 65000)}"
    )
    return [
        ("Bash", {"command": "git log --oneline -8"}, git_log, 0),
        ("Bash", {"command": "pip freeze | head -8"}, pip, 0),
        ("Bash", {"command": f"ls -l {cwd}"}, ls, 0),
        ("Read", {"file_path": f"{cwd}/orders.py"}, _PY_FILE.format(), 0),
        ("Write", {"file_path": f"{cwd}/web/useOrders.ts", "content": _TS_FILE.format()}, "File created", 0),
        ("Bash", {"command": "python -m pytest -q"}, pytest_out, 1),
        ("Bash", {"command": "docker images app/api"}, docker, 0),
        ("Read", {"file_path": f"{cwd}/web/package-lock.json"}, lock, 0),
        ("Read", {"file_path": f"{cwd}/go.sum"}, gosum, 0),
        ("Bash", {"command": "jobs-cli list --state queued"}, ids, 0),
        (
            "Edit",
            {"file_path": f"{cwd}/src/split.cpp", "old_string": "return {};", "new_string": cpp},
            "ok",
            0,
        ),
        ("Bash", {"command": "clang --version; node -v; go version; ./serve --dry-run"}, versions, 0),
        (
            "Bash",
            {"command": f"git show --stat {commits[0][0]}"},
            f"commit {commits[0][0]}\n {commits[0][1]}\n orders.py | 12 +++++++-----",
            0,
        ),
    ]


def _session(
    session_id: str,
    repo: str,
    cwd: str,
    prompts: list[str],
    steps: list[tuple[str, dict, str, int]],
    start: datetime,
    user: str,
) -> Session:
    step_models = []
    t = start
    per_prompt = max(1, len(steps) // max(1, len(prompts)))
    for i, (tool, inp, out, code) in enumerate(steps):
        t = t + timedelta(seconds=20)
        step_models.append(
            Step(
                index=i,
                tool_name=tool,
                tool_use_id=f"toolu_{i:04d}",
                input=json.dumps(inp),
                command=inp.get("command") if tool == "Bash" else None,
                output=out,
                exit_code=code if tool == "Bash" else None,
                success=code == 0,
                is_error=code != 0,
                cwd=cwd,
                started_at=t,
                finished_at=t + timedelta(seconds=2),
                prompt_index=min(i // per_prompt, len(prompts) - 1),
            )
        )
    return Session(
        session_id=session_id,
        source_format="claude_code",
        repo=repo,
        repo_path=cwd,
        cwd=cwd,
        source_path=f"/home/{user}/.claude/projects/-home-{user}-projects-{repo}/{session_id}.jsonl",
        started_at=start,
        ended_at=t,
        prompts=[Prompt(index=i, text=p, timestamp=start) for i, p in enumerate(prompts)],
        steps=step_models,
    )


def _place(items: list, cwd: str, prompts: list[str], steps: list[tuple]) -> None:
    """Put each item's carrier where its field says: a prompt, a command, a command's output or a written file."""
    for i, item in enumerate(items):
        if item.field == "prompt":
            prompts.append(item.carrier)
        elif item.field == "command":
            steps.append(("Bash", {"command": item.carrier}, "ok", 0))
        elif item.field == "output":
            steps.append(("Bash", {"command": f"cat notes-{i}.txt"}, item.carrier, 0))
        else:
            steps.append(
                ("Write", {"file_path": f"{cwd}/config/{i}.txt", "content": item.carrier}, "File created", 0)
            )


def planted_session(seed: int = 7, user: str = "jdoe42") -> tuple[Session, list[PlantedItem]]:
    """One session carrying every planted item (in prompts, commands, outputs and written files), plus code."""
    rng = random.Random(seed)
    items = planted_items(rng, user)
    cwd = f"/home/{user}/projects/api"
    prompts = ["Fix the failing discount test and clean up the config."]
    steps = code_heavy_steps(rng, cwd)
    _place(items, cwd, prompts, steps)
    rng.shuffle(steps)
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    return _session(f"planted-{seed}", "api", cwd, prompts, steps, start, user), items


def code_session(seed: int = 11) -> Session:
    """A session of ordinary development work with no secret or personal data in it."""
    rng = random.Random(seed)
    cwd = "/srv/build/projects/shop"
    steps = code_heavy_steps(rng, cwd) + code_heavy_steps(rng, cwd)
    prompts = ["Make the discount tests pass", "Now bump the dependencies and rebuild the image"]
    return _session(
        f"code-{seed}", "shop", cwd, prompts, steps, datetime(2026, 3, 3, 14, 0, tzinfo=UTC), "dev"
    )


def generate_corpus(
    n_sessions: int, seed: int = 0, planted_every: int = 4
) -> tuple[list[Session], list[PlantedItem]]:
    """A benchmark corpus: mostly code-heavy sessions, every ``planted_every``-th one carrying planted items."""
    sessions: list[Session] = []
    planted: list[PlantedItem] = []
    for i in range(n_sessions):
        if planted_every and i % planted_every == 0:
            s, items = planted_session(seed * 100003 + i, user=f"dev{chr(97 + i % 26)}{i}")
            planted.extend(items)
        else:
            s = code_session(seed * 100003 + i)
        sessions.append(s.model_copy(update={"session_id": f"bench-{seed}-{i}"}))
    return sessions, planted


# ---- decoys: what must survive ----------------------------------------------------------------------------------
class DecoyItem(PlantedItem):
    """A value that looks sensitive but is documentation or a placeholder: it must survive redaction verbatim."""


def decoy_items(rng: random.Random) -> list[DecoyItem]:
    """One decoy of every family ``decoys`` knows (documentation and loopback addresses, reserved domains and
    e-mails at them, placeholder and documented example secrets, fictional phones, test cards, URLs on reserved or
    public hosts), each in the kind of line it appears in. Random parts differ per call where the family allows."""
    r = rng
    name = r.choice(["alice", "bob", "jane.doe", "ops", "admin", "user"])
    word = r.choice(["api", "web", "auth", "billing", "search"])
    items: list[tuple[str, str, str, str]] = [
        # --- addresses ---
        ("ip_doc_v4", f"192.0.2.{r.randint(1, 254)}", "ping -c1 {v}", "command"),
        ("ip_doc_v4", f"198.51.100.{r.randint(1, 254)}", "Connection from {v} port 51514", "output"),
        ("ip_doc_v4", f"203.0.113.{r.randint(1, 254)}", "allow {v};\ndeny all;", "write"),
        (
            "ip_doc_v6",
            f"2001:db8:{r.randint(1, 65535):x}::{r.randint(1, 65535):x}",
            "listen [{v}]:443;",
            "write",
        ),
        (
            "ip_doc_v6",
            f"3fff:{r.randint(0, 4095):x}::{r.randint(1, 255):x}",
            "ip -6 addr add {v}/64 dev eth0",
            "command",
        ),
        ("ip_loopback", "127.0.0.1", "server listening on http://{v}:8000", "output"),
        ("ip_loopback", "::1", "bound to [{v}]:9000", "output"),
        ("ip_unspecified", "0.0.0.0", "uvicorn app:app --host {v} --port 8000", "command"),
        ("ip_metadata", "169.254.169.254", "curl -s http://{v}/latest/meta-data/iam/info", "command"),
        ("ip_netmask", "255.255.255.0", "inet 10.0.0.12 netmask {v} broadcast 10.0.0.255", "output"),
        ("ip_block", "10.0.0.0/8", 'ALLOWED_CIDRS = ["{v}", "172.16.0.0/12"]', "write"),
        # --- names ---
        (
            "url_example",
            f"https://{word}.example.com/v1/users/{r.randint(1, 999)}?page=2",
            "curl -s '{v}' | jq .",
            "command",
        ),
        ("url_example", "https://example.org/docs#install", "see {v} for the steps", "prompt"),
        ("url_test_tld", f"http://{word}.test:{r.randint(3000, 9999)}/health", "curl -fsS {v}", "command"),
        (
            "url_localhost",
            f"http://{word}.localhost:{r.randint(3000, 9999)}/",
            "open {v} in the browser",
            "output",
        ),
        ("url_invalid", "https://registry.invalid/v2/", '"registry": "{v}"', "write"),
        ("url_example_tld", "https://intranet.example/wiki/Onboarding", "[onboarding]({v})", "write"),
        ("url_doc_ip", f"http://192.0.2.{r.randint(1, 254)}:8080/status", "GET {v} -> 200", "output"),
        (
            "url_doc_ip",
            f"http://[2001:db8::{r.randint(1, 65535):x}]:8080/metrics",
            "scrape_url: {v}",
            "write",
        ),
        ("url_public", "https://github.com/acme/api/pull/42", "opened {v}", "output"),
        ("git_remote_public", "git@github.com:acme/api.git", "git remote add origin {v}", "command"),
        ("email_example", f"{name}@example.com", "git config user.email {v}", "command"),
        ("email_example", f"{name}@mail.example.org", "From: Jane <{v}>", "output"),
        ("email_example", "ci@build.test", '"author": "{v}"', "write"),
        # --- secrets ---
        ("placeholder_phrase", "YOUR_API_KEY", "export OPENAI_API_KEY={v}", "command"),
        ("placeholder_phrase", "your-webhook-secret-here", "STRIPE_WEBHOOK_SECRET={v}", "write"),
        ("placeholder_phrase", "my-secret-token", 'token: "{v}"', "write"),
        ("placeholder_phrase", "YOUR_ACCESS_TOKEN_GOES_HERE", "Authorization: Bearer {v}", "prompt"),
        (
            "placeholder_wrapped",
            "<token>",
            "curl -H 'Authorization: Bearer {v}' https://api.example.com/me",
            "command",
        ),
        ("placeholder_wrapped", "${GITHUB_TOKEN}", 'GH_TOKEN="{v}" gh pr list', "command"),
        ("placeholder_wrapped", "{{ secrets.NPM_TOKEN }}", "NODE_AUTH_TOKEN: {v}", "write"),
        ("placeholder_filler", "sk-" + "X" * r.randint(20, 48), "OPENAI_API_KEY={v}", "write"),
        ("placeholder_filler", "ghp_" + "x" * 36, "git clone https://{v}@github.com/acme/api.git", "command"),
        ("placeholder_filler", "x" * r.randint(24, 40), 'api_key = "{v}"', "write"),
        ("placeholder_filler", "sk-...", "set OPENAI_API_KEY (it starts with {v})", "prompt"),
        (
            "placeholder_counting",
            "sk-1234567890abcdef1234567890abcdef",
            'client = OpenAI(api_key="{v}")',
            "write",
        ),
        (
            "placeholder_url_credential",
            "YOUR_TOKEN",
            "git clone https://oauth2:{v}@gitlab.com/acme/api.git",
            "command",
        ),
        (
            "placeholder_url_credential",
            "password",
            "DATABASE_URL=postgres://app:{v}@localhost:5432/app",
            "write",
        ),
        ("documented_example", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = {v}", "write"),
        (
            "documented_example",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = {v}",
            "write",
        ),
        (
            "documented_example",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9l"
            "IiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            "Authorization: Bearer {v}",
            "output",
        ),
        ("documented_example", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", 'stripe.api_key = "{v}"', "write"),
        (
            "placeholder_private_key",
            "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
            "key.pem must look like:\n{v}",
            "prompt",
        ),
        # --- numbers ---
        (
            "phone_fictional",
            f"+1 {r.choice([212, 415, 617])}-555-01{r.randint(0, 99):02d}",
            "call {v} for support",
            "output",
        ),
        ("phone_fictional", f"+44 20 7946 0{r.randint(0, 999):03d}", "Contact phone: {v}", "write"),
        ("phone_fictional", f"07700 900{r.randint(0, 999):03d}", "mobile: {v}", "output"),
        ("test_card", "4242 4242 4242 4242", "use the test card {v}, any future date", "prompt"),
        ("test_card", "4111111111111111", "card_number = '{v}'", "write"),
        ("test_card", "5555555555554444", "charged card {v} for the test order", "output"),
    ]
    return [
        DecoyItem(kind=kind, value=value, carrier=template.replace("{v}", value), field=field)
        for kind, value, template, field in items
    ]


def near_decoy_items(rng: random.Random) -> list[PlantedItem]:
    """Real secrets and infrastructure next to decoys or the word "example", and URLs of every shape on internal
    hosts: these must still be redacted (the decoy rules judge values, never their surroundings)."""
    r = rng
    w = "".join(r.choice(string.ascii_lowercase) for _ in range(6))
    ghp = "ghp_" + _tok(r, 36)
    items: list[tuple[str, str, str, str]] = [
        (
            "openai_key_near_example",
            "sk-proj-" + _tok(r, 48, B62 + "-_"),
            "# example (replace with yours):\nOPENAI_API_KEY={v}",
            "write",
        ),
        (
            "aws_key_near_example",
            "AKIA" + _tok(r, 16, string.ascii_uppercase + string.digits),
            "aws_access_key_id = {v}  # not the AKIAIOSFODNN7EXAMPLE one",
            "write",
        ),
        (
            "github_token_in_public_remote",
            ghp,
            "git clone https://x-access-token:{v}@github.com/acme/api.git",
            "command",
        ),
        (
            "github_token_in_remote_user",
            "ghp_" + _tok(r, 36),
            "git remote set-url origin https://{v}@github.com/a/b.git",
            "command",
        ),
        (
            "token_in_example_query",
            _tok(r, 32),
            "curl 'https://api.example.com/v1/me?access_token={v}&page=2'",
            "command",
        ),
        (
            "password_in_remote",
            "Tr0ub4dor-" + _tok(r, 6),
            f"git clone https://deploy:{{v}}@git.{w}-corp.com/platform/api.git",
            "command",
        ),
        (
            "internal_url_port",
            f"http://build-{r.randint(1, 99):02d}.ci.{w}.lan:{r.randint(8000, 9999)}/job/42/console",
            "open {v}",
            "output",
        ),
        ("internal_host_tld_cut", f"svc-{w}.corp.internal", "curl https://{v}/v1/me", "command"),
        ("internal_url_markdown", f"https://wiki.{w}-corp.com/ops/runbook_(v2)", "[runbook]({v}).", "prompt"),
        ("internal_url_json", f"https://hooks.{w}-corp.com/deploy?env=prod", '{{"url": "{v}"}}', "write"),
        (
            "internal_url_ipv6",
            f"http://[fd{r.randint(16, 255):02x}::{r.randint(1, 255):x}]:8080/metrics",
            "scrape: {v}",
            "write",
        ),
        (
            "internal_ssh_remote",
            f"git.{w}-corp.com",
            "git remote add origin git@{v}:platform/api.git",
            "command",
        ),
        (
            "private_ip_near_doc_ip",
            f"10.{r.randint(1, 254)}.{r.randint(1, 254)}.{r.randint(2, 254)}",
            "ip route add 192.0.2.0/24 via {v}",
            "command",
        ),
        ("email_near_example", f"{w}.lee@{w}-corp.com", "cc: user@example.com and {v}", "prompt"),
    ]
    return [
        PlantedItem(
            kind=kind,
            value=value,
            carrier=template.replace("{v}", value).replace("{{", "{").replace("}}", "}"),
            field=field,
        )
        for kind, value, template, field in items
    ]


def decoy_session(seed: int = 13, user: str = "jdoe42") -> tuple[Session, list[DecoyItem], list[PlantedItem]]:
    """A session of ordinary work carrying every decoy (must survive) and every near-decoy (must not)."""
    rng = random.Random(seed)
    decoys = decoy_items(rng)
    planted = near_decoy_items(rng)
    cwd = f"/home/{user}/projects/api"
    prompts = ["Wire up the config from the docs and make the smoke test pass."]
    steps = code_heavy_steps(rng, cwd)[:4]
    _place([*decoys, *planted], cwd, prompts, steps)
    rng.shuffle(steps)
    start = datetime(2026, 3, 4, 9, 0, tzinfo=UTC)
    return _session(f"decoy-{seed}", "api", cwd, prompts, steps, start, user), decoys, planted


# ---- measuring recall -------------------------------------------------------------------------------------------
def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _strings(v)]
    if isinstance(value, list):
        return [x for v in value for x in _strings(v)]
    return []


def all_text(sessions: list[Session]) -> str:
    """Every text field of the sessions, JSON tool inputs both as stored and decoded, joined: where a planted
    value could still hide after redaction."""
    texts: list[str] = []
    for session in sessions:
        texts += _strings(session.model_dump(mode="json"))
        for step in session.steps:
            with contextlib.suppress(ValueError):
                texts += _strings(json.loads(step.input))
    return "\n\x00\n".join(texts)


def survives(value: str, blob: str) -> bool:
    """Whether a planted value is still in ``all_text`` output, verbatim or JSON-escaped."""
    return value in blob or json.dumps(value)[1:-1] in blob
