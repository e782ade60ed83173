"""The benchmark prints the plan's predictions beside its measurements."""

from __future__ import annotations

from tools.bench.predict import comparison_lines, predictions


def test_predictions_beside_measured_medians() -> None:
    predicted = predictions("dev", (1, 2, 4), "one two three four", 100)
    assert predicted is not None
    assert [lvl["concurrency"] for lvl in predicted["levels"]] == [1, 2, 4]
    single = predicted["levels"][0]
    assert 3.5 < single["decode_tokens_per_s"] < 5.0  # calibrated on the report's 4.0
    assert predicted["levels"][2]["aggregate_tokens_per_s"] > single["aggregate_tokens_per_s"]
    report = {
        "levels": [
            {
                "concurrency": 1,
                "aggregate_tokens_per_s": {"median": 4.0},
                "decode_tokens_per_s": {"median": 4.1},
                "ttft_s": {"median": 0.9},
            }
        ]
    }
    lines = comparison_lines(report, predicted)
    assert "beside measured medians" in lines[1]
    row = lines[3].split()
    assert row[0] == "1" and row[2] == "4.00" and row[4] == "4.10" and row[6] == "0.90"
    assert lines[4].split()[2] == "-"  # level 2 was not measured


def test_a_stack_that_does_not_plan_says_so() -> None:
    assert comparison_lines({"levels": []}, None)[-1].startswith("plan: the stack does not plan")
    assert predictions("no-such-stack", (1,), "x", 10) is None
