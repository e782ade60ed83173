"""The quantized groups' rows: the kernel vLLM selected, read from its own log lines."""

from __future__ import annotations

from pathlib import Path

from tools.rehearse.measure.quantized import kernel_check, quantized_dir, selected_kernels

# Lines as vLLM 0.31's CPU build logs them (`model_executor/kernels/linear/__init__.py`).
INT8_LOG = (
    "(EngineCore pid=1) INFO 12-02 01:10:00 [__init__.py:794] Selected "
    "CPUInt8ScaledMMLinearKernel for CompressedTensorsW8A8Int8\n"
    "(EngineCore pid=1) INFO 12-02 01:10:01 [gpu_model_runner.py:1] Model loading took 0.01 GiB\n"
)
INT4_LOG = (
    "INFO 12-02 01:11:00 [__init__.py:870] Using Dynamic4bitLinearKernel for mixed-precision "
    "linear\n"
)


def test_the_int8_kernel_is_read_from_the_log() -> None:
    assert selected_kernels(INT8_LOG) == ["CPUInt8ScaledMMLinearKernel"]
    check = kernel_check("int8", INT8_LOG)
    assert check.ok is True
    assert check.observed == "CPUInt8ScaledMMLinearKernel"


def test_the_int4_kernel_is_read_from_the_log() -> None:
    assert kernel_check("int4", INT4_LOG).ok is True


def test_the_wrong_kernel_fails() -> None:
    check = kernel_check("int4", INT8_LOG)
    assert check.ok is False
    assert check.expected == "Dynamic4bitLinearKernel"


def test_a_log_without_a_kernel_line_fails() -> None:
    check = kernel_check("int8", "INFO Model loading took 0.01 GiB\n")
    assert check.ok is False
    assert check.observed == "no kernel line in the log"


def test_a_second_kernel_beside_the_expected_one_fails() -> None:
    check = kernel_check("int8", INT8_LOG + INT4_LOG)
    assert check.ok is False
    assert check.observed == "CPUInt8ScaledMMLinearKernel, Dynamic4bitLinearKernel"


def test_each_format_is_kept_beside_the_bf16_model() -> None:
    assert quantized_dir(Path("/r/models/abc"), "int4") == Path("/r/models/abc-int4")
