"""The quality command: lm-eval's command line and environment, its results, the table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from tests.fakes.openai_stub import STUB_API_KEY, StubConfig, StubServer
from tools.bench import quality
from tools.bench.args import UsageError

TARGET = quality.Target("endpoint", "http://door.example/v1", "k3y", "google/gemma-4-12B-it")


def _flags(argv: list[str]) -> dict[str, str]:
    return {argv[i]: argv[i + 1] for i in range(3, len(argv) - 1) if argv[i].startswith("--")}


def test_lm_eval_talks_to_the_chat_route_without_a_tokenizer(tmp_path: Path) -> None:
    argv = quality.lm_eval_argv(Path("/q/bin/python"), TARGET, tmp_path, limit=8)
    assert argv[:3] == ["/q/bin/python", "-m", "lm_eval"]
    flags = _flags(argv)
    assert flags["--model"] == "local-chat-completions"
    model_args = dict(item.split("=", 1) for item in flags["--model_args"].split(","))
    assert model_args["base_url"] == "http://door.example/v1/chat/completions"
    assert model_args["model"] == "google/gemma-4-12B-it"
    assert model_args["tokenized_requests"] == "False"
    assert "--apply_chat_template" in argv
    assert flags["--tasks"] == quality.TASK
    assert flags["--include_path"] == str(quality.TASK_DIR)
    assert flags["--limit"] == "8"


def test_the_key_travels_in_the_environment_and_the_hub_is_off() -> None:
    env = quality.lm_eval_env({"PATH": "/bin", "OPENAI_API_KEY": "stale"}, "k3y")
    assert env["OPENAI_API_KEY"] == "k3y"
    assert env["HF_HUB_OFFLINE"] == env["HF_DATASETS_OFFLINE"] == "1"
    argv = quality.lm_eval_argv(Path("python"), TARGET, Path("/o"), None)
    assert not any("k3y" in arg for arg in argv)
    assert "--limit" not in argv
    # No key leaves no stale one.
    assert "OPENAI_API_KEY" not in quality.lm_eval_env({"OPENAI_API_KEY": "stale"}, None)


def test_the_shipped_task_reads_the_shipped_file() -> None:
    task = yaml.safe_load((quality.TASK_DIR / f"{quality.TASK}.yaml").read_text())
    assert task["task"] == quality.TASK
    assert task["dataset_path"] == "json"
    assert task["output_type"] == "generate_until"
    data = quality.REPO / task["dataset_kwargs"]["data_files"]["test"]
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 40
    assert all(set(row) == {"question", "answer"} and row["answer"] for row in rows)


def _results(out: Path, value: float, stderr: float | str, questions: int) -> None:
    run = out / "model__name"
    run.mkdir(parents=True)
    (run / "results_2026-12-02T01-00-00.json").write_text(
        json.dumps(
            {
                "results": {
                    quality.TASK: {
                        "exact_match,none": value,
                        "exact_match_stderr,none": stderr,
                    }
                },
                "n-samples": {quality.TASK: {"original": 40, "effective": questions}},
            }
        )
    )


def test_the_score_is_read_from_lm_evals_results(tmp_path: Path) -> None:
    _results(tmp_path, 0.75, 0.07, 40)
    assert quality.read_score(tmp_path) == quality.Score(0.75, 0.07, 40)


def test_a_stderr_lm_eval_could_not_compute_reads_as_zero(tmp_path: Path) -> None:
    _results(tmp_path, 0.0, "N/A", 1)
    assert quality.read_score(tmp_path) == quality.Score(0.0, 0.0, 1)


def test_no_results_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no results_"):
        quality.read_score(tmp_path)


def test_both_scores_and_the_difference_are_printed() -> None:
    against = quality.Target("against", "http://int8.example/v1", "k", "m")
    text = quality.render(
        [(TARGET, quality.Score(0.8, 0.06, 40)), (against, quality.Score(0.725, 0.07, 40))]
    )
    lines = text.splitlines()
    assert "0.800 ± 0.060  (40 questions)" in lines[2]
    assert "0.725 ± 0.070  (40 questions)" in lines[3]
    assert lines[4] == "difference (against - endpoint): -0.075"


def _ns(**given: object) -> argparse.Namespace:
    defaults = {"endpoint": None, "api_key": None, "against": None, "against_key": None}
    return argparse.Namespace(**{**defaults, "limit": None, **given})


def test_the_second_endpoint_takes_its_own_key_else_the_first() -> None:
    env = {"GEMMA_GRAVITON_API_KEY": "one"}
    chosen = quality.targets(_ns(endpoint="http://a/v1", against="http://b"), env)
    assert chosen == [("endpoint", "http://a/v1", "one"), ("against", "http://b/v1", "one")]
    env[quality.AGAINST_KEY_ENV] = "two"
    chosen = quality.targets(_ns(endpoint="http://a/v1", against="http://b"), env)
    assert chosen[1] == ("against", "http://b/v1", "two")


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(UsageError) as caught:
        quality.targets(_ns(endpoint="http://a/v1", limit=0), {})
    assert str(caught.value) == "`--limit` must be at least 1, got 0; pass e.g. --limit 10"


def test_the_model_is_the_first_the_endpoint_lists_and_a_wrong_key_is_one_line() -> None:
    with StubServer(StubConfig(model="tiny")) as stub:
        base_url = stub.base_url
        assert quality.served_model(base_url, STUB_API_KEY) == "tiny"
        with pytest.raises(UsageError) as caught:
            quality.served_model(base_url, "wrong")
    assert str(caught.value) == (
        f"{base_url}/models answered HTTP 401; check --endpoint and the key, or pass --model NAME"
    )
