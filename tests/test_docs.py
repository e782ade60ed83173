"""Every command in the README and docs/ is run here or listed with the reason it cannot run
offline, and every relative link (and #anchor) in them resolves."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.adapters.cli import main
from infra.plan.config import StackConfig
from infra.plan.config_parts import SECRET_KEYS, ScheduleConfig
from tests.fakes.openai_stub import StubConfig, StubServer, token_text
from tests.test_readme import _section
from tools.doctools import docs_keys

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)
#: The first word of an inline `code` span that makes it a command (a lone word is a tool's name).
PROGRAMS = {
    "make",
    "pulumi",
    "aws",
    "kubectl",
    "curl",
    "gh",
    "git",
    "python",
    "python3",
    ".venv/bin/python",
    "openssl",
    "sudo",
    "unzip",
    "brew",
    "cd",
    "export",
}

RUN = "run here"
#: The line that writes each stack's passphrase file, for the stacks it names.
PASSPHRASE_FILES = (
    r"\(umask 077; for s in ([a-z ]+); "
    r'do openssl rand -base64 32 > "\.pulumi-passphrase-\$s"; done\)'
)
#: What becomes of each command: the first pattern it matches decides. RUN means a test below
#: runs it; any other value is why it cannot run offline (or here).
RULES: list[tuple[str, str]] = [
    (r'make plan( STACK=\w+)?( ARGS="[^"]*")?', RUN),
    (r"(\.venv/bin/)?python -m infra\.plan( [^\[\]]*)?", RUN),
    (r"python -m infra\.plan \[.*", "a usage synopsis; its examples are run"),
    (
        r"make regen|python -m tools\.regen( --check)?",
        "rewrites the generated files; tests/test_regen.py runs its check",
    ),
    (r'export (ENDPOINT|MODEL|API_KEY)="\$\(pulumi stack output .*', RUN),
    (r'curl -sN --max-time \d+ "\$ENDPOINT/chat/completions" .*', RUN),
    (
        r"python -m infra\.saved_plan plan\.json",
        "deploy-prod.yml's step; tests/test_workflows.py runs it on a saved plan",
    ),
    (r"make test", "the suite itself; .ci/run runs it on a clean clone"),
    (r"\.venv/bin/python -m pytest .*", "a part of `make test`"),
    (r"make (rehearse|rehearse-faults)|python -m tools\.rehearse( --faults)?", ".ci/run runs it"),
    (
        r"make rehearse-prefill|python -m tools\.rehearse --prefill",
        "minutes of full-width model building and warm-up on a quiet machine",
    ),
    (
        r"make rehearse-moe-group.*|python -m tools\.rehearse\.measure\.moe_group.*",
        "real vLLM: four tiny MoE groups started one after another, lm-eval on two (minutes)",
    ),
    (
        r"make rehearse-(moe|peer).*|python -m tools\.rehearse\.measure\.moe_probe.*",
        "15-20 minutes of full-width model building and serving (llama.cpp's build: 5 more)",
    ),
    (r"make mutants.*", "minutes of mutation testing; .github/workflows/mutants.yml runs it"),
    (
        r"make pin-images.*|python -m tools\.pins.*",
        "needs the registries; tests/plan/test_pins.py runs it against one on loopback",
    ),
    (
        r"python -m tools\.vllm_flags.*",
        "reads the rehearsal environment's vLLM (`make rehearse` builds it); "
        "tests/plan/test_engine_flags.py holds the recording to the pinned version",
    ),
    (r"(\.venv/bin/)?python -m tools\.bench.*", "needs a deployed endpoint (tests/bench: a stub)"),
    (r"make bench.*", "needs a deployed endpoint (make rehearse runs a short one)"),
    (r"make quality.*", "needs a deployed endpoint (make rehearse scores its tiny groups)"),
    (
        r"(\.venv/bin/)?python -m infra\.quantize.*",
        "needs llm-compressor and a checkpoint; make rehearse runs it on its tiny model",
    ),
    (r"python3 -m venv \.venv && .*", "downloads from PyPI; `make` builds .venv the same way"),
    (r"curl -fsSL https://get\.pulumi\.com.*|brew install .*", "installs the Pulumi CLI"),
    (r'curl -fsSL "https://awscli\.amazonaws\.com.*|unzip .*|sudo \./aws/install', "AWS CLI"),
    (r"curl -sfL .*huggingface\.co.*", "needs a Hugging Face token and the internet"),
    (PASSPHRASE_FILES, RUN),
    (r'export PULUMI_CONFIG_PASSPHRASE_FILE="\$PWD/\.pulumi-passphrase-\w+"', RUN),
    (r"(PULUMI_CONFIG_PASSPHRASE_FILE=\S+ )?pulumi .*", "needs a Pulumi backend (and AWS for up)"),
    (r"cd (infra/bootstrap|\.\./\.\.)", "moves into the bootstrap project to run Pulumi there"),
    (r"aws .*", "needs AWS credentials"),
    (r'kubectl .*|kubectl -n "\$\(pulumi.*', "needs a running cluster"),
    (r"gh .*", "needs a GitHub repository"),
    (r"git add stacks/ && git commit .*", "commits to the reader's repository"),
    (r"git show \w+:\S+", "reads a file back from the history, which a shallow clone lacks"),
]


def _commands_in(text: str) -> list[str]:
    """Commands: each line of a `sh` block (continuations joined, comments dropped), and inline
    code spans outside blocks that start with a program and have arguments."""
    commands = []
    for block in FENCE.finditer(text):
        if block.group(2) != "sh":
            continue
        joined = re.sub(r"\\\n\s*", "", block.group(3))
        joined = re.sub(r"(,)\n\s+", r"\1 ", joined)  # a JSON body wrapped inside quotes
        for line in joined.splitlines():
            command = _strip_comment(line).strip()
            if command:
                commands.append(command)
    prose = FENCE.sub("", text)
    for span in re.findall(r"`([^`]+)`", prose):
        words = span.split()
        if len(words) > 1 and words[0] in PROGRAMS:
            commands.append(" ".join(words))
    return commands


def _strip_comment(line: str) -> str:
    """A shell line without its trailing `# comment` (a `#` inside quotes stays)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


COMMANDS = sorted({(page.name, c) for page in PAGES for c in _commands_in(page.read_text())})


def _rule(command: str) -> str | None:
    return next((verdict for pattern, verdict in RULES if re.fullmatch(pattern, command)), None)


@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_every_command_is_run_or_says_why_not(page: str, command: str) -> None:
    assert _rule(command) is not None, f"{page}: `{command}` is neither run by a test nor listed"


def test_the_pages_have_commands_of_each_kind() -> None:
    verdicts = {_rule(c) for _, c in COMMANDS}
    assert RUN in verdicts and len(verdicts) >= 10, verdicts


def test_every_make_target_named_exists() -> None:
    makefile = (REPO / "Makefile").read_text()
    for _, command in COMMANDS:
        if command.startswith("make "):
            target = command.split()[1]
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), command
            for variable in re.findall(r"\b([A-Z]+)=", command):
                assert f"$({variable})" in makefile, command


# -- the commands run here -------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", sorted({c for _, c in COMMANDS if "infra.plan" in c and _rule(c) == RUN})
)
def test_plan_commands_run(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = shlex.split(command)[3:]
    assert main(args) == 0, command
    capsys.readouterr()


def _make(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`make` as the README gives it, its recipe run by this interpreter (a stand-in `VENV` that
    make sees as installed, so the test builds no virtualenv). --no-print-directory: under
    `make test` this make is a sub-make, which names its directory."""
    (tmp_path / "venv").mkdir(exist_ok=True)
    (tmp_path / "venv" / ".installed").touch()
    return subprocess.run(
        ["make", "--no-print-directory", *args, f"PY={sys.executable}", f"VENV={tmp_path}/venv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ | {"MAKEFLAGS": ""},
        check=False,
    )


@pytest.mark.parametrize("command", sorted({c for _, c in COMMANDS if c.startswith("make plan")}))
def test_make_plan_runs(command: str, tmp_path: Path) -> None:
    stack = re.search(r"STACK=(\w+)", command)
    stack = stack.group(1) if stack else "dev"
    done = _make(tmp_path, *shlex.split(command)[1:])
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"stack                        {stack}" in done.stdout
    assert (REPO / "rendered" / stack).is_dir()


def test_make_plan_passes_its_args_to_the_planner(tmp_path: Path) -> None:
    """`make plan ARGS=...` hands ARGS to `python -m infra.plan` (GNU make passes a command-line
    variable to the recipe's `$(ARGS)`); a refused `--set` shows it reached the planner."""
    shown = _make(tmp_path, "plan", "-n", "ARGS=--set instanceType=m7g.4xlarge")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.rstrip().endswith(
        "-m infra.plan --stack dev --render rendered/dev --set instanceType=m7g.4xlarge"
    ), shown.stdout
    done = _make(tmp_path, "plan", "ARGS=--set pipelineStages=0")
    assert done.returncode != 0
    assert "`pipelineStages`" in done.stderr, done.stderr[-2000:]


SEPARATOR = "=== the client ==="


def _quick_start_blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the README's quick start."""
    section = _section("Quick start: a working endpoint")
    return [(m.group(2), m.group(3)) for m in FENCE.finditer(section)]


def _executable(path: Path, script: str) -> None:
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_the_quick_start_calls_reach_the_model_the_outputs_name(tmp_path: Path) -> None:
    """The README's curl and OpenAI-client calls, run as written against a local OpenAI server,
    with a `pulumi` on PATH that answers `stack output` as a deployed stack would."""
    blocks = _quick_start_blocks()
    call = next(text for _, text in blocks if "curl -sN" in text)
    client = next(text for language, text in blocks if language.startswith("python"))
    key, model = "k" * 24, "served/model-id"
    with StubServer(StubConfig(api_key=key, model=model, ttft_s=0, seconds_per_token=0)) as stub:
        outputs = {"endpoint": stub.base_url, "model": model, "apiKey": key}
        _executable(
            tmp_path / "pulumi",
            "#!/bin/sh\n# stack output [--show-secrets] NAME\neval last=\\${$#}\ncase $last in\n"
            + "".join(f"  {name}) echo '{value}' ;;\n" for name, value in outputs.items())
            + "  *) exit 1 ;;\nesac\n",
        )
        (tmp_path / "client.py").write_text(client)
        python = shlex.quote(sys.executable)
        script = f"{call}\necho {SEPARATOR}\n{python} {tmp_path / 'client.py'}\n"
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            env=os.environ | {"PATH": f"{tmp_path}:{os.environ['PATH']}"},
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert [r["model"] for r in stub.requests] == [model, model]
    assert [r["max_tokens"] for r in stub.requests] == [100, 100]
    curl_out, client_out = done.stdout.split(SEPARATOR, 1)
    assert "data: [DONE]" in curl_out
    assert client_out.strip() == "".join(token_text(i) for i in range(100)).strip()


def test_the_quick_start_keeps_each_stacks_passphrase_in_its_own_ignored_file(
    tmp_path: Path,
) -> None:
    """The README's deploy block, run as written with a `pulumi` on PATH that records the
    passphrase file each call would read: the bootstrap's stack and dev each get their own, the
    files are private and git-ignored, and no call carries the Hugging Face token."""
    block = next(text for _, text in _quick_start_blocks() if "stack init dev" in text)
    (tmp_path / "bin").mkdir()
    _executable(
        tmp_path / "bin" / "pulumi",
        '#!/bin/sh\necho "$PULUMI_CONFIG_PASSPHRASE_FILE|$*" >> "$CALLS"\n',
    )
    work = tmp_path / "clone"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_CONFIG_PASSPHRASE")}
    env |= {"PATH": f"{tmp_path / 'bin'}:{env['PATH']}", "CALLS": str(tmp_path / "calls")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    calls = [line.split("|", 1) for line in (tmp_path / "calls").read_text().splitlines()]
    read = {args: Path(file).name for file, args in calls}
    assert read == {
        "login --local": "",  # before any stack: no passphrase needed
        "-C infra/bootstrap stack init ci --secrets-provider passphrase": ".pulumi-passphrase-ci",
        "-C infra/bootstrap up": ".pulumi-passphrase-ci",
        "stack init dev --secrets-provider passphrase": ".pulumi-passphrase-dev",
        "config set --secret hfToken": ".pulumi-passphrase-dev",  # no value: it prompts
        "up": ".pulumi-passphrase-dev",
    }
    files = {name: work / name for name in set(read.values()) if name}
    assert len({path.read_text() for path in files.values()}) == 2
    for path in files.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
        assert len(path.read_text().strip()) == 44, path.name  # 32 random bytes, base64
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *files], cwd=REPO, capture_output=True, check=False
    )
    assert ignored.returncode == 0 and len(ignored.stdout.splitlines()) == 2, ignored


@pytest.mark.parametrize(
    "line", sorted({c for _, c in COMMANDS if re.fullmatch(PASSPHRASE_FILES, c)})
)
def test_each_passphrase_file_line_writes_one_private_file_per_stack(
    line: str, tmp_path: Path
) -> None:
    match = re.fullmatch(PASSPHRASE_FILES, line)
    assert match is not None
    subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=tmp_path, check=True)
    written = {p.name: p for p in tmp_path.iterdir()}
    assert sorted(written) == sorted(f".pulumi-passphrase-{s}" for s in match.group(1).split())
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written.values())
    assert len({p.read_text() for p in written.values()}) == len(written)


# -- links ------------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


LINKS = [
    (page, target)
    for page in PAGES
    for target in LINK.findall(FENCE.sub("", page.read_text()))
    if not re.match(r"[a-z]+:", target)
]


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{p.name}->{t}" for p, t in LINKS])
def test_every_relative_link_resolves(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    assert linked.exists(), f"{page.name}: {target} is not a file"
    if anchor:
        assert anchor in _anchors(linked), f"{page.name}: no heading #{anchor} in {linked.name}"


def test_the_readme_links_every_docs_page() -> None:
    linked = {target.split("#")[0] for page, target in LINKS if page.name == "README.md"}
    assert {f"docs/{p.name}" for p in PAGES[1:]} <= linked


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


# -- the stack-keys table ---------------------------------------------------------------------


def _table_rows() -> dict[str, str]:
    """Key -> default cell of the generated table (tests/test_regen.py holds the page to it)."""
    return {key: default for key, default, _, _ in docs_keys.rows()}


def test_the_table_has_one_row_per_key_and_every_description_in_it() -> None:
    """Every key of the model, in its order, the schedule's fields after `schedule`; each row
    holds the key's description (every key has one)."""
    schedule = [(f"schedule.{f.alias or n}", f) for n, f in ScheduleConfig.model_fields.items()]
    fields = []
    for name, info in StackConfig.model_fields.items():
        fields += [(info.alias or name, info), *(schedule if name == "schedule" else [])]
    assert list(_table_rows()) == [key for key, _ in fields]
    lines = docs_keys.render().splitlines()
    for key, info in fields:
        assert info.description, f"`{key}` has no description"
        (row,) = [line for line in lines if line.startswith(f"| `{key}` |")]
        assert f" | {docs_keys.cell(info.description)} | " in row, key


def test_a_changed_description_changes_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    info = StackConfig.model_fields["replicas"]
    monkeypatch.setattr(info, "description", "Groups | counted <here>.")
    row = next(line for line in docs_keys.render().splitlines() if line.startswith("| `replicas`"))
    assert (
        row == "| `replicas` | `1` | Groups \\| counted &lt;here>. | use an integer from 1 to 16 |"
    )


def _required() -> dict[str, object]:
    """The dev stack's values of the required keys: enough for the model to validate."""
    raw = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    values = {k.removeprefix("gemma-graviton:"): v for k, v in raw.items()}
    return {
        f.alias or n: values[f.alias or n]
        for n, f in StackConfig.model_fields.items()
        if f.is_required() or "required_unless" in (f.json_schema_extra or {})  # type: ignore[operator]
    }


def test_each_default_as_written_reads_back_as_the_models_default() -> None:
    """A default cell, pasted into a stack file, gives the model's own default: the table writes
    defaults as YAML would (a quoted "1.35", lists in flow style, `unset` for a key left out)."""
    rows = _table_rows()
    for name, info in StackConfig.model_fields.items():
        key = info.alias or name
        cell = rows[key]
        if info.is_required():
            assert cell == "required", key
            continue
        if cell.startswith("required without"):
            assert cell == f"required without `{info.json_schema_extra['required_unless']}`", key  # type: ignore[index]
            continue
        if cell == "unset":
            assert info.default is None, key
            continue
        assert cell.startswith("`") and cell.endswith("`"), (key, cell)
        written = yaml.safe_load(f"{key}: {cell[1:-1]}")
        if key == "vllmImage":
            # The default has no digest, which a written image must have (its description says
            # so): compare the text only.
            assert written[key] == info.default, (key, cell)
            continue
        # `queuePerGroup`, written, makes the stack elastic: it comes with the group bounds.
        bounds = {"minGroups": 0, "maxGroups": 2} if key == "queuePerGroup" else {}
        cfg = StackConfig.model_validate(_required() | bounds | written)
        assert getattr(cfg, name) == info.default, (key, cell)
    assert rows["kubernetesVersion"] == "`'1.35'`"
    assert rows["schedule.days"] == "`Mon-Fri`" and rows["schedule.timeZone"] == "required"


def test_the_secret_keys_outside_the_model_are_documented_below_it() -> None:
    text = docs_keys.BLOCK.page().read_text()
    after = text.split(docs_keys.END, 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", after, re.M)) == set(SECRET_KEYS)
