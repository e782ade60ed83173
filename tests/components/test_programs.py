"""The programs the engine containers run (`components/manifests/programs`), tested as code, and
how the group ships them: one ConfigMap, mounted read-only, none of their text in the
LeaderWorkerSet. The liveness check has its own file (tests/components/test_probes.py); the
drain and the prefetch run end to end in tests/components/test_rollout_and_drain.py and
tests/components/test_manifests.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from components.manifests import gatekeeper, pods, programs
from components.manifests.programs import drain, prefetch
from tests import builders, door_harness
from tests.render_fixtures import dump
from tools.rehearse.group.ranks import free_port

ENGINE = programs.DIR / "engine.sh"
#: dev's rendered LeaderWorkerSet when the programs were strings in it (measured 2026-12-06,
#: tests/fixtures/rendered/dev/03-leaderworkerset-gemma-vllm.yaml at ed8ea7a).
LWS_BYTES_WITH_PROGRAM_TEXT = 67_080


def test_the_shell_program_parses_and_passes_shellcheck() -> None:
    assert subprocess.run(["sh", "-n", str(ENGINE)], check=False).returncode == 0
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is missing: .ci/packages installs it (Debian: shellcheck)"
    done = subprocess.run([shellcheck, str(ENGINE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def _stubs(bin_dir: Path, record: Path, getent_failures: int = 0) -> None:
    """`python3` and `vllm` that write their arguments to `record`; a `getent` that fails the
    first `getent_failures` times; a `sleep` that does not wait."""
    bin_dir.mkdir()
    scripts = {
        "python3": f'echo "python3 $*" >> {record}\n',
        "vllm": f'echo "vllm $*" >> {record}\n',
        "sleep": "exit 0\n",
        "getent": (
            f"n=$(cat {bin_dir}/count 2>/dev/null || echo 0); echo $((n + 1)) > {bin_dir}/count\n"
            f'[ "$n" -ge {getent_failures} ]\n'
        ),
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)


def _lines(record: Path, count: int) -> list[str]:
    # The check process starts in the background: its line may come after vLLM's.
    for _ in range(100):
        lines = record.read_text().splitlines() if record.exists() else []
        if len(lines) >= count:
            return sorted(lines)
        time.sleep(0.02)
    return sorted(lines)


def _entry(
    tmp_path: Path, args: list[str], env: dict[str, str], getent_failures: int = 0
) -> subprocess.CompletedProcess[str]:
    """The entry run with `args` against the stubs, exiting 0."""
    _stubs(tmp_path / "bin", tmp_path / "record", getent_failures)
    done = subprocess.run(
        ["sh", str(ENGINE), *args],
        env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_leaders_entry_clears_the_old_state_writes_the_logging_config_and_becomes_vllm(
    tmp_path: Path,
) -> None:
    state, log, config = tmp_path / "state.json", tmp_path / "warnings.log", tmp_path / "log.json"
    state.write_text("{}")
    log.write_text("an earlier container's warnings")
    args = ["leader", "listen=8082", f"state={state}", f"log={log}", "--", "serve", "m"]
    env = {"GEMMA_VLLM_LOGGING": '{"version": 1}', "VLLM_LOGGING_CONFIG_PATH": str(config)}
    _entry(tmp_path, [*args, "--port=8000"], env)
    assert not state.exists() and not log.exists()
    assert config.read_text() == '{"version": 1}'
    assert _lines(tmp_path / "record", 2) == [
        f"python3 {programs.DIR}/liveness.py serve listen=8082 state={state} log={log}",
        "vllm serve m --port=8000",
    ]


def test_a_workers_entry_waits_for_its_leaders_name_then_becomes_vllm(tmp_path: Path) -> None:
    args = ["worker", "listen=8082", "role=worker", "--", "serve", "--headless"]
    done = _entry(tmp_path, args, {"LWS_LEADER_ADDRESS": "leader-0"}, getent_failures=2)
    assert done.stdout.splitlines() == ["waiting for leader-0 to resolve"] * 2
    assert _lines(tmp_path / "record", 2) == [
        f"python3 {programs.DIR}/liveness.py serve listen=8082 role=worker",
        "vllm serve --headless",
    ]


def test_a_worker_stopped_while_it_waits_for_its_leader_exits_at_once(tmp_path: Path) -> None:
    """In the pod the entry is PID 1 until `exec`, and the kernel delivers a signal from outside
    a PID namespace to its init only when it has a handler: without its trap the shell would
    ignore the kubelet's SIGTERM and wait out the grace period. Run as that init here."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare")
    _stubs(tmp_path / "bin", tmp_path / "record", getent_failures=10**9)
    entry = subprocess.Popen(
        ["unshare", "--pid", "--fork", "sh", str(ENGINE), "worker", "--", "serve"],
        env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "LWS_LEADER_ADDRESS": "leader-0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    children = Path(f"/proc/{entry.pid}/task/{entry.pid}/children")
    for _ in range(100):
        init = children.read_text().split() if children.exists() else []
        if init or entry.poll() is not None:
            break
        time.sleep(0.02)
    if not init:
        entry.wait()
        pytest.skip(f"unshare --pid refused here: {entry.stderr.read().decode().strip()}")
    time.sleep(0.2)  # into the wait loop
    os.kill(int(init[0]), signal.SIGTERM)
    try:
        assert entry.wait(timeout=5) == 143
    finally:
        entry.kill()


def test_the_group_ships_its_programs_once_in_a_read_only_config_map_named_by_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = builders.rendered("dev")
    maps = [o for o in objects if o["kind"] == "ConfigMap" and "programs" in o["metadata"]["name"]]
    # Named by the files' digest and immutable: each template mounts its own programs.
    digest = gatekeeper.config_digest(programs.files())[:10]
    assert [m["metadata"]["name"] for m in maps] == [f"gemma-programs-{digest}"]
    assert maps[0]["immutable"] is True
    assert maps[0]["data"] == programs.files()
    assert sorted(maps[0]["data"]) == sorted(programs.FILES)
    # Each rank's volume of it and each container's read-only mount, exactly:
    # tests/components/test_manifest_fields.py. A changed program is a new ConfigMap.
    spec = builders.planned_spec("dev")
    before = pods.programs_config(spec)["metadata"]["name"]
    assert before == maps[0]["metadata"]["name"]
    changed = {**programs.files(), "drain.py": programs.files()["drain.py"] + "# changed\n"}
    monkeypatch.setattr(programs, "files", lambda key_check=False: changed)
    assert pods.programs_config(spec)["metadata"]["name"] != before


def test_devs_leader_worker_set_holds_no_program_text() -> None:
    (lws,) = [o for o in builders.rendered("dev") if o["kind"] == "LeaderWorkerSet"]
    text = dump(lws)  # as committed under tests/fixtures/rendered
    for name, source in programs.files().items():
        for line in source.splitlines():
            # Every line of every program with some text to it ("fi", "else:" and the like
            # appear in no manifest field and say nothing).
            if len(line.strip()) > 6:
                assert line.strip() not in text, (name, line)
    size = len(text.encode())
    print(f"dev's LeaderWorkerSet: {LWS_BYTES_WITH_PROGRAM_TEXT:,} bytes before, {size:,} now")
    assert size < LWS_BYTES_WITH_PROGRAM_TEXT // 2


def test_the_rehearsal_and_the_tests_run_the_checkouts_files_in_place_of_the_mounted_ones() -> None:
    argv = ["python3", f"{programs.MOUNT}/drain.py", "role=leader"]
    assert programs.local(argv, "/usr/bin/python3.11") == [
        "/usr/bin/python3.11",
        str(programs.DIR / "drain.py"),
        "role=leader",
    ]


# -- the drain's and the prefetch's own functions ------------------------------------------------


def answering(text: str) -> AbstractContextManager[int]:
    """A server on loopback that answers every GET 200 with `text`; its port."""

    class Handler(door_harness.Upstream):
        def do_GET(self) -> None:
            self.answer(200, text.encode(), content_type=None)

    return door_harness.upstream(Handler)


def test_the_drain_counts_the_requests_in_the_engine_and_none_once_it_is_gone() -> None:
    text = 'vllm:num_requests_running{engine="0"} 2.0\nvllm:num_requests_waiting 1.0\nx 9\n'
    with answering(text) as port:
        assert drain.in_flight(str(port)) == 3.0
        assert drain.listening("127.0.0.1", port)
    assert drain.in_flight(str(free_port())) is None


def test_the_prefetch_backs_off_and_reads_every_file_but_the_hubs_cache(tmp_path: Path) -> None:
    assert [prefetch.backoff(a) for a in range(1, 7)] == [15, 30, 60, 120, 240, 300]
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.safetensors").write_bytes(b"w" * 1000)
    (tmp_path / "sub" / "b.json").write_bytes(b"j" * 24)
    (tmp_path / ".cache" / "huggingface").mkdir(parents=True)
    (tmp_path / ".cache" / "huggingface" / "lock").write_bytes(b"x" * 10)
    assert prefetch.read_all(tmp_path) == 1024


def test_the_prefetch_refuses_a_volume_the_quantize_job_has_not_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("CHECKPOINT_MARKER", "quantized.json")
    with pytest.raises(SystemExit) as refused:
        prefetch.main("produced")
    assert str(refused.value).startswith(f"{tmp_path}/quantized.json is missing: ")
    (tmp_path / "quantized.json").write_text("{}")
    assert prefetch.main("produced") == 0
