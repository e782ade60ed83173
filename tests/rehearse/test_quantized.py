"""The quantized groups' rows: the kernel vLLM selected, read from its own log lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.rehearse.measure.quantized import kernel_check, quantized_dir, selected_kernels

# Lines as vLLM 0.31's CPU build logs them (`model_executor/kernels/linear/__init__.py`).
INT8_LOG = (
    "(EngineCore pid=1) INFO 12-02 01:10:00 [__init__.py:794] Selected "
    "CPUInt8ScaledMMLinearKernel for CompressedTensorsW8A8Int8\n"
    "(EngineCore pid=1) INFO 12-02 01:10:01 [gpu_model_runner.py:1] Model loading took 0.01 GiB\n"
)
INT8 = "CPUInt8ScaledMMLinearKernel"
INT4_LOG = (
    "INFO 12-02 01:11:00 [__init__.py:870] Using Dynamic4bitLinearKernel for mixed-precision "
    "linear\n"
)


@pytest.mark.parametrize(
    ("weights", "log", "ok", "expected", "observed"),
    [
        ("int8", INT8_LOG, True, INT8, INT8),
        ("int4", INT4_LOG, True, "Dynamic4bitLinearKernel", "Dynamic4bitLinearKernel"),
        # The wrong kernel, no kernel line, a second kernel beside the expected one.
        ("int4", INT8_LOG, False, "Dynamic4bitLinearKernel", INT8),
        ("int8", "INFO Model loading took 0.01 GiB\n", False, INT8, "no kernel line in the log"),
        ("int8", INT8_LOG + INT4_LOG, False, INT8, f"{INT8}, Dynamic4bitLinearKernel"),
    ],
)
def test_the_kernel_row_wants_exactly_the_formats_kernel_in_the_log(
    weights: str, log: str, ok: bool, expected: str, observed: str
) -> None:
    check = kernel_check(weights, log)
    assert (check.ok, check.expected, check.observed) == (ok, expected, observed)


def test_the_kernels_are_read_from_the_log_and_each_format_kept_beside_the_bf16_model() -> None:
    assert selected_kernels(INT8_LOG) == [INT8]
    assert quantized_dir(Path("/r/models/abc"), "int4") == Path("/r/models/abc-int4")
