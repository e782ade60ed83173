"""The promises of the README and the docs/ pages: their figures, keys and tables are the code's.

Commands and links are held by `tests/test_docs.py`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.adapters.cli import main
from infra.bootstrap import config as bootstrap_config
from infra.bootstrap.access import ci_roles, runner_variable
from infra.plan import placeholders, prices, waits
from infra.plan.compare import compare, default_need
from infra.plan.config import StackConfig
from infra.plan.economics import economics
from infra.plan.sizing import plan
from infra.plan.stackfile import load_stack
from tests import builders
from tests.test_workflows import _environment_name, _load, _references, _workflow_files
from tools.doctools import docs_ranking

REPO = Path(__file__).resolve().parent.parent


def _page(name: str) -> str:
    return (REPO / name).read_text()


def _section(title: str, page: str = "README.md") -> str:
    """A `## title` section of a page, up to the next `## `."""
    return _page(page).split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_exactly_two_newcomer_commands_and_both_are_make_targets() -> None:
    block = re.search(r"```sh\n(.*?)```", _section("Two commands"), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make plan", "make test"]  # the targets: test_docs.py's make-target test


def test_ci_runs_the_readme_test_command_first_and_it_installs_its_own_packages() -> None:
    """`.ci/run` proves `make test` on a clean clone: its first step, before it installs anything;
    the test target itself starts with the distribution's packages (`.ci/packages`)."""
    ci = (REPO / ".ci" / "run").read_text()
    steps = re.findall(r"^step .*$", ci, re.M)
    assert steps[0] == 'step "test (README)" make test', steps
    assert "apt-get" not in ci and "dnf" not in ci
    makefile = (REPO / "Makefile").read_text()
    test = re.search(r"^test: (.*)$", makefile, re.M)
    assert test is not None and test.group(1).split()[0] == "packages"
    assert re.search(r"^packages:\n\t.*\.ci/packages$", makefile, re.M)
    packages = (REPO / ".ci" / "packages").read_text()
    assert "nginx-light" in packages and "libseccomp2" in packages
    assert "apt+=(docker-registry)" in packages  # tests/plan/test_pins.py's registry


def _installs(target: str, venv: Path) -> list[str]:
    """The requirement files `make <target>` would install into a fresh `venv` (`make -n`)."""
    shown = subprocess.run(
        ["make", "--no-print-directory", "-n", target, f"VENV={venv}", "PYTHON=python3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ | {"MAKEFLAGS": ""},
        check=True,
    ).stdout
    return re.findall(
        rf"^{re.escape(str(venv))}/bin/python -m pip install .* -r (\S+)$", shown, re.M
    )


def test_make_plan_installs_the_runtime_alone_and_make_test_the_development_set(
    tmp_path: Path,
) -> None:
    """`make plan` needs what the planner and the program import (requirements.txt), not the
    tests, lint and IAM scanners (754 MB of .venv on a fresh clone, 2026-12-06); `make test`
    lays the development set over the same .venv."""
    venv = tmp_path / "venv"
    assert _installs("plan", venv) == ["requirements.txt"]
    assert _installs("lint", venv) == ["requirements.txt", "requirements-dev.txt"]
    assert _installs("unit", venv) == ["requirements.txt", "requirements-dev.txt"]
    (venv).mkdir()
    (venv / ".installed").touch()  # the runtime is there: `make test` adds the rest only
    assert _installs("lint", venv) == ["requirements-dev.txt"]
    dev = (REPO / "requirements-dev.txt").read_text().splitlines()
    assert "-r requirements.txt" in dev


def test_what_it_serves_is_the_dev_plan() -> None:
    """The README's figures at a glance are the plan's rows for dev, at the catalogue's prices."""
    today = prices.READ_ON
    cfg, dev = builders.planned("dev", today=today)
    e = economics(cfg, dev, today)
    s, c = e.served, e.costs
    assert c.usd_per_hour is not None and c.usd_per_month is not None
    assert e.usd_per_million_full is not None and e.usd_per_million_one is not None
    quoted = " ".join(_section("What it serves").split())
    for figure in (
        f"at the catalogue's prices of {today.isoformat()}",
        f"{dev.max_model_len:,} tokens, {dev.max_concurrency:.2f} such requests at once",
        f"{s.one.aggregate_tokens_per_s:.2f} tokens/s (calibrated",
        f"{s.planned.aggregate_tokens_per_s * dev.replicas:.2f} tokens/s in all, "
        f"{s.planned.per_stream_tokens_per_s:.2f} per stream (modelled)",
        f"~{s.ttft_1k_s:.0f} s for a 1,000-token prompt, ~{s.ttft_max_len_s:.0f} s for "
        f"{dev.max_model_len:,} (modelled, unmeasured)",
        f"${c.usd_per_hour:.4f} an hour, ${c.usd_per_month:,.2f} a month",
        f"${e.usd_per_million_full:.2f} at full load, ${e.usd_per_million_one:.2f} with one stream",
    ):
        assert figure in quoted, figure


def test_the_client_examples_wait_as_long_as_the_dev_plan_says() -> None:
    """curl's `--max-time` (the whole transfer) is the plan's whole-reply timeout, the OpenAI
    client's `timeout=` (each read of a streamed reply) its between-bytes one: dev's first byte
    outwaits the client's default, so an example left at the default would give up on a reply the
    endpoint still sends. A plan that moves its bounds turns this red until the README follows."""
    dev = plan(load_stack("dev", today=prices.READ_ON), "dev")
    need = waits.client_timeouts(dev)
    assert need.stream_s > waits.OPENAI_DEFAULT_TIMEOUT_S
    section = _section("Quick start: a working endpoint")
    assert re.findall(r"curl -sN --max-time (\d+) ", section) == [str(need.whole_s)]
    assert re.findall(r"OpenAI\(.*, timeout=(\d+)\)", section) == [str(need.stream_s)]
    quoted = " ".join(section.split())
    assert f"first byte may take up to {dev.liveness.first_byte_s} s" in quoted
    assert f"{need.stream_s} s between a streamed reply's bytes and {need.whole_s} s" in quoted
    assert f"default timeout of {waits.OPENAI_DEFAULT_TIMEOUT_S} s" in quoted


def test_the_quick_start_edits_the_required_keys_before_any_command_reads_them() -> None:
    """The five keys come first, are every key without a default and every key the shipped dev
    stack holds a placeholder in (the image's digest aside, which the next paragraph names), and
    what the README shows for them is accepted on the stack it edits."""
    section = _section("Quick start: a working endpoint")
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    first_reader = section.index("\npulumi ")  # the first command that reads the stack file
    assert section.index(block.group(0)) < first_reader
    edits = {
        k.removeprefix("gemma-graviton:"): v for k, v in yaml.safe_load(block.group(1)).items()
    }
    assert list(edits) == [
        "owner",
        "endDate",
        "allowedCidrs",
        "endpointPublicAccessCidrs",
        "clusterAdminArns",
    ]
    required = {f.alias or n for n, f in StackConfig.model_fields.items() if f.is_required()}
    assert required <= set(edits), required - set(edits)
    shipped = {p.key for p in placeholders.find(load_stack("dev", today=prices.READ_ON))}
    assert shipped - {"vllmImage"} <= set(edits), shipped - set(edits)
    assert "`vllmImage` is one" in section
    assert "stacks/Pulumi.dev.yaml" in section
    cfg = load_stack("dev", edits, today=prices.READ_ON)
    assert [str(c) for c in cfg.allowed_cidrs] == edits["allowedCidrs"]


def test_the_quick_start_sets_the_bootstraps_repository_as_a_step_before_its_first_up() -> None:
    """A step of its own, naming the file and each key the shipped bootstrap file holds a
    placeholder in, before the command that would make roles trusting someone else's repository."""
    section = _section("Quick start: a working endpoint")
    step = re.search(
        r"^\*\*\d\. Set `repository` in `infra/bootstrap/Pulumi\.ci\.yaml`", section, re.M
    )
    assert step is not None
    assert section.index(step.group(0)) < section.index("pulumi -C infra/bootstrap up")
    shipped = bootstrap_config.notice()
    assert shipped is not None and "`repository` example-org/gemma-graviton" in shipped
    assert "`example-org/gemma-graviton`" in section


def test_quoted_figures_are_the_planners() -> None:
    dev = plan(load_stack("dev"), "dev")
    quoted = _section("What the plan says", "docs/planning.md")
    assert f"{dev.pod_memory_gib:g} GiB pods with {dev.pod_cpu} CPUs" in quoted
    assert f"{dev.kv_cache_bytes / 1024**3:.2f} GiB KV cache per rank" in quoted
    assert f"{dev.max_model_len:,}-token context at {dev.max_concurrency:.2f}x" in quoted
    assert f"{dev.kv_cache_tokens:,} tokens of KV" in quoted
    assert f"sees {dev.guard_available_gib:.2f} GiB" in quoted
    no_prefetch = plan(load_stack("dev", {"weightPrefetch": False}), "dev")
    assert f"{no_prefetch.max_model_len:,} tokens at {no_prefetch.max_concurrency:.2f}x" in quoted
    assert f"`max_num_batched_tokens` to {no_prefetch.max_num_batched_tokens}" in quoted


def test_how_it_fits_together_names_real_places() -> None:
    """Every file, folder and catalogue name the map points a reader to exists."""
    section = _section("How it fits together", "docs/development.md")
    paths = set(re.findall(r"`((?:infra|components|policies|tests|stacks)/[\w/.]*?)`", section))
    assert len(paths) >= 8, paths
    for path in paths:
        assert (REPO / path).exists(), path
    catalog = (REPO / "infra/plan/catalog.py").read_text()
    assert "`MODELS` in `infra/plan/catalog.py`" in section
    assert re.search(r"^MODELS\b", catalog, re.M)
    assert "`[types]` in `infra/plan/instances.toml`" in section
    assert re.search(r"^\[types\]$", (REPO / "infra/plan/instances.toml").read_text(), re.M)
    modules = re.findall(r"\(`(\w+)`\)", section)
    assert len(modules) >= 7, modules
    for module in modules:
        homes = [
            REPO / d / m
            for d in ("infra/plan", "infra/adapters", "tools/doctools", "components")
            for m in (f"{module}.py", module)
        ]
        assert any(home.exists() for home in homes), module


def test_node_size_ranking_is_the_catalogues(capsys: pytest.CaptureFixture[str]) -> None:
    """The generated table is what `--compare` gives for dev on the day the prices were read."""
    today = prices.READ_ON
    cfg = load_stack("dev", today=today)
    result = compare(cfg, default_need(cfg, "dev"), "dev", today)
    expected = []
    for i, c in enumerate(result.ranked, 1):
        p, e = c.plan, c.econ
        assert p is not None and e is not None
        s = e.served
        # Calibrated only on the type measured; elsewhere the extrapolated range.
        low, high = f"{s.node_bandwidth_gbps:.0f}", f"{s.node_bandwidth_high_gbps:.0f}"
        bandwidth = (
            f"{low}, calibrated"
            if c.instance_type == "m7g.2xlarge" and s.bandwidth_measured
            else f"{low if low == high else f'{low}-{high}'}, extrapolated"
        )
        expected.append(
            f"| {i} | {c.instance_type} | {p.nodes} | {e.costs.usd_per_month:,.2f} | "
            f"{p.max_concurrency:.2f}x | {s.one.aggregate_tokens_per_s:.2f} | "
            f"{s.planned.aggregate_tokens_per_s * p.replicas:.2f} | "
            f"{e.usd_per_million_full:.2f} | {e.usd_per_million_one:.2f} | "
            f"{s.ttft_max_len_s:.0f} | {bandwidth} |"
        )
    block = docs_ranking.BLOCK.quoted(docs_ranking.BLOCK.page().read_text()).splitlines()
    rows = [line for line in block if line.startswith("| ") and line[2:3].isdigit()]
    assert rows == expected
    assert len(rows) >= 12
    need = default_need(cfg, "dev")
    assert f"need ({need.context:,} tokens at {need.concurrency}x)" in " ".join(block)
    # The advice the block quotes is the dev plan's own verdict line.
    assert main(["--json"], today=today) == 0
    advice = json.loads(capsys.readouterr().out)["verdict"]["advice"]
    kind, offer = advice.split(": ", 1)
    assert f"`{kind}:` line names {offer.split(',')[0]}:" in " ".join(block)


# -- From zero to a green preview -------------------------------------------------------------

TABLE_ROW = re.compile(
    r"^\| `(?P<name>[A-Z0-9_]+)` \| (?P<kind>variable|secret) \| (?P<where>[^|]+)\|"
)


def _documented_settings() -> dict[tuple[str, str], set[str]]:
    """(`vars`|`secrets`, NAME) -> where the README says to set it (`repository` or envs)."""
    documented: dict[tuple[str, str], set[str]] = {}
    for line in _section("From zero to a green preview", "docs/deploying.md").splitlines():
        match = TABLE_ROW.match(line)
        if match:
            kind = "vars" if match["kind"] == "variable" else "secrets"
            where = set(re.findall(r"`([a-z-]+)`|(repository)", match["where"]))
            documented[(kind, match["name"])] = {a or b for a, b in where}
    return documented


def _read_by_workflows() -> dict[tuple[str, str], set[str | None]]:
    """(`vars`|`secrets`, NAME) -> the environments of the jobs that read it (None: no env)."""
    read: dict[tuple[str, str], set[str | None]] = {}
    for path in _workflow_files():
        for job in _load(path)["jobs"].values():
            for key in _references(job):
                read.setdefault(key, set()).add(_environment_name(job))
    return read


def test_the_variables_and_secrets_table_is_what_the_workflows_read() -> None:
    documented = _documented_settings()
    read = _read_by_workflows()
    assert set(documented) == set(read), (
        f"README only: {sorted(set(documented) - set(read))}; "
        f"workflows only: {sorted(set(read) - set(documented))}"
    )
    for key, environments in read.items():
        where = documented[key]
        if where == {"repository"}:
            assert key[0] == "vars", (
                f"{key[1]}: a secret must live in environments, never the repository"
            )
            continue
        assert None not in environments, f"{key[1]} is read by a job without an environment"
        assert environments <= where, f"{key[1]} read in {environments}, README says {where}"
    # Prod's secrets are documented for prod's two environments alone (both admit `main` only),
    # its deploy role for `prod` alone (the role test below). The runner labels are repository
    # variables: `runs-on` is evaluated before the job enters its environment.
    runners = {("vars", runner_variable(env)) for env in ("preview", "dev", "prod")}
    assert all(documented[k] == {"repository"} for k in runners), runners
    prod_only = [
        k for k in documented if k[1].startswith(("PROD_", "AWS_PROD_")) and k not in runners
    ]
    assert prod_only and all(documented[k] <= {"prod", "preview-prod"} for k in prod_only)


def test_the_role_variables_are_the_bootstraps() -> None:
    roles = ci_roles("acme/gemma-graviton", {"dev": "us-west-2", "prod": "us-east-1"}, None)
    documented = _documented_settings()
    for role in roles:
        assert documented[("vars", role.variable)] == {role.environment}, role.variable


def test_the_green_preview_steps_come_in_order() -> None:
    section = _section("From zero to a green preview", "docs/deploying.md")
    headings = re.findall(r"^### (\d)\. (.+)$", section, re.M)
    steps = ["backend", "stack", "hugging face token", "bootstrap", "github", "pull request"]
    assert [int(number) for number, _ in headings] == list(range(1, len(steps) + 1)), headings
    for (_, title), step in zip(headings, steps, strict=True):
        assert step in title.lower(), (step, title)
    assert "safe to commit" in section
    assert "pulumi stack init dev" in section and "pulumi stack init prod" in section
    assert "config set --secret hfToken" in section


def test_the_bootstrap_outputs_the_readme_names_exist() -> None:
    program = (REPO / "infra" / "bootstrap" / "__main__.py").read_text()
    exported = set(re.findall(r'pulumi\.export\(\s*"(\w+)"', program))
    section = _section("From zero to a green preview", "docs/deploying.md")
    named = set(re.findall(r"stack output (\w+)", section))
    named |= set(re.findall(r"bootstrap output `(\w+)`", section))
    assert named and named <= exported, f"not exported: {sorted(named - exported)}"


def test_the_ci_section_says_what_the_workflows_run() -> None:
    """Each workflow runs it: tests/test_workflows.py's CI-entry test."""
    assert "`.ci/run`" in _section("CI", "docs/deploying.md")


def test_support_window_table_is_the_catalogues() -> None:
    section = _section("Upgrading Kubernetes: the support window", "docs/scaling-and-changes.md")
    rows = [line for line in section.splitlines() if line.startswith("| 1.")]
    assert rows
    for row in rows:
        version, released, standard, extended = (c.strip() for c in row.strip("|").split("|"))
        known = prices.EKS_VERSIONS[version]
        assert (released, standard, extended) == (
            known.released.isoformat(),
            known.end_of_standard.isoformat(),
            known.end_of_extended.isoformat(),
        ), row


def test_every_stack_is_created_with_its_own_passphrase() -> None:
    """The README's quick start, "First deploy" and "From zero to a green preview" create stacks
    alike: one passphrase per stack, so no stack's secrets open with another's."""
    text = _page("README.md") + _page("docs/deploying.md")
    inits = re.findall(r"^.*pulumi stack init .*$", text, re.M)
    assert len(inits) >= 4, inits  # quick start; "First deploy"; dev and prod in "From zero"
    assert [i for i in inits if "--secrets-provider passphrase" not in i] == []
    for section in ("First deploy", "docs/deploying.md"), ("Quick start: a working endpoint",):
        assert "pulumi stack init dev --secrets-provider passphrase" in _section(*section)
