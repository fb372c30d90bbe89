"""`postmortem collect` and `postmortem run`, run for real as commands on this machine.

collect: on this machine as it is (no GPU, no nvidia-smi), and with fake
`nvidia-smi` / `journalctl` executables that print real captured outputs.
run: real Python programs that segfault, raise, get SIGKILLed, exit 0, or are
sent SIGTERM through postmortem.
"""

from __future__ import annotations

import base64
import json
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from postmortem.capture.redact import Redactor, environment_listing, secret_shapes
from postmortem.capture.run import STREAMS
from postmortem.sources.run_record import KERNEL_LOG_NOTE

DATA = Path(__file__).parent / "data" / "capture"
TIMEOUT_S = 60


def postmortem(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "postmortem", *args], check=False, cwd=cwd, env=env,
                          capture_output=True,
                          timeout=TIMEOUT_S)


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}


def analyze_json(path: Path, cwd: Path) -> dict:
    done = postmortem("analyze", os.path.relpath(path, cwd), "--format", "json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ---------------------------------------------------------------- collect

@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this test is about a machine without nvidia-smi")
def test_collect_here_redacts_and_analyze_reads_the_bundle(tmp_path: Path) -> None:
    secret = "pm-" + secrets.token_hex(12)
    github = "ghp_" + secrets.token_hex(18)
    opaque = secrets.token_hex(20)
    log = tmp_path / "train.log"
    log.write_bytes(DATA.joinpath("oom-torch-legacy-02.log").read_bytes()
                    + f"connecting with api_token={secret}\nAuthorization: Bearer {opaque}\n"
                      f"pushed by {github}\n".encode())
    before = (log.read_bytes(), log.stat().st_mtime_ns)
    env = {**os.environ, "POSTMORTEM_TEST_API_TOKEN": secret, "NCCL_DEBUG": "INFO"}
    done = postmortem("collect", "-o", "bundle.tar.gz", "--since", "1d", "--telemetry", "0", "train.log",
                      cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar.gz", "train.log"]  # no temp file left behind
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before

    files = members(tmp_path / "bundle.tar.gz")
    assert next(iter(files)) == "manifest.json"
    manifest = json.loads(files["manifest.json"])
    assert "nvidia-smi not installed" in manifest["gpu"]
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert set(listed) == set(files) - {"manifest.json"}
    assert all(entry["size"] == len(files[path]) for path, entry in listed.items())
    missing = {entry["path"]: entry for entry in manifest["not_collected"]}
    assert missing["gpu/nvidia-smi-q.xml"]["status"] == "not installed"
    assert listed["files/train.log"]["redacted"] == {"bearer-token": 1, "env-secret-value": 1, "github-token": 1}
    assert listed["software/stack.txt"]["source"]
    environment = files["software/environment.txt"].decode()
    assert "NCCL_DEBUG=INFO\n" in environment and "POSTMORTEM_TEST_API_TOKEN=<redacted:env>\n" in environment
    for name, data in files.items():
        assert not any(s.encode() in data for s in (secret, github, opaque)), name
    assert manifest["cores"]["core_pattern"] == Path("/proc/sys/kernel/core_pattern").read_text().strip()

    report = analyze_json(tmp_path / "bundle.tar.gz", tmp_path)
    assert "bundle.tar.gz!/files/train.log" in {i["path"] for i in report["inputs"]}
    # the bundle also holds this machine's real kernel log, which may name anything (a host OOM kill, an Xid)
    assert "gpu-oom" in {finding["cause"] for finding in report["findings"]}


def _fake_tools(folder: Path) -> None:
    """nvidia-smi and journalctl that print real captured outputs (the sampler keeps running like `-l 1` does)."""
    folder.mkdir()
    scripts = {
        "nvidia-smi": f"""case "$*" in
  *"-q -x"*) cat '{DATA / "nvsmi-q-x-a5000-575.xml"}' ;;
  *--query-gpu*) cat '{DATA / "query-gpu-h200.csv"}'; sleep 30 ;;
  *topo*) echo "Topology not supported on this system" >&2; exit 3 ;;
  *) exit 9 ;;
esac""",
        "journalctl": f"""case "$*" in
  *--list-boots*) printf 'IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY\\n'
                  printf ' -1 0f1e2d3c4b5a69788796a5b4c3d2e1f0 Mon 2023-03-06 20:00:01 UTC Mon 2023-03-06 21:40:00 UTC\\n'
                  printf '  0 9a8b7c6d5e4f30211203f4e5d6c7b8a9 Mon 2023-03-06 21:41:10 UTC Mon 2023-03-06 22:00:00 UTC\\n' ;;
  *"-b -1"*) cat '{DATA / "xid119-gsp-timeout-02.dmesg.txt"}' ;;
  *-k*) cat '{DATA / "xid79-154-pf-flr-02.dmesg.txt"}' ;;
esac""",  # noqa: E501 - journalctl's own column layout
    }
    for name, body in scripts.items():
        path = folder / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)


def test_collect_with_gpu_tools_and_anonymize(tmp_path: Path) -> None:
    _fake_tools(tmp_path / "bin")
    host = socket.gethostname()
    notes = tmp_path / "notes.txt"
    notes.write_text(f"job on {host} from 10.20.30.40, data in /home/alice/run1\n"
                     f"retry on {host} from 10.20.30.40 and 10.20.30.41, /home/alice/run2\n")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    (tmp_path / "out").mkdir()
    done = postmortem("collect", "-o", "out/b.tar.gz", "--telemetry", "1s", "--anonymize", "notes.txt",
                      cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    files = members(tmp_path / "out" / "b.tar.gz")
    manifest = json.loads(files["manifest.json"])
    assert manifest["gpu"] == "nvidia-smi answered"
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert listed["gpu/nvidia-smi-q.xml"]["status"] == "ok"
    assert listed["gpu/telemetry.csv"]["status"] == "stopped after 1 s"
    assert files["gpu/telemetry.csv"].startswith(b"timestamp, name, pci.bus_id")
    assert listed["system/kernel.log"]["source"].startswith("journalctl -k --since")
    assert {e["path"]: e["status"] for e in manifest["not_collected"]}["gpu/topology.txt"] == "exit 3"
    older = files["system/kernel-older-boots.log"].decode()
    assert older.startswith("-- boot -1 (ok) --\n") and "NVRM: Xid (PCI:0000:61:00): 119" in older

    text = files["files/notes.txt"].decode()
    if len(host) >= 2:
        assert host not in text and "host-1" in text
    assert "10.20.30.40" not in text and "alice" not in text
    first, second = (re.findall(r"ip-\d+|/home/user-\d+", line) for line in text.splitlines())
    assert first[0] == second[0] != second[1]  # one address, one pseudonym; another address, another one
    assert first[1].startswith("/home/user-") and first[1] == second[2]

    report = analyze_json(tmp_path / "out" / "b.tar.gz", tmp_path)
    assert report["findings"][0]["cause"] == "gpu-off-bus"
    assert report["facts"]["driver_version"] == ["575.57.08"]
    formats = {i["path"].split("!/")[1]: i["format"] for i in report["inputs"]}
    assert formats["gpu/nvidia-smi-q.xml"] == "nvsmi-xml" and formats["gpu/telemetry.csv"] == "gpu-telemetry"


def test_redactor_shapes_and_environment() -> None:
    redactor = Redactor({"HF_TOKEN": "hf_" + "a" * 34, "TOKEN_SHORT": "1"})
    lines = redactor.text(
        "key AKIAABCDEFGHIJKLMNOP\n"
        "password: 'hunter2hunter2'\n"
        "git clone https://bob:pa55w0rd@example.com/repo\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
        "num_tokens: 5 at 1\n").splitlines()
    assert lines == ["key <redacted:aws-access-key>", "password: <redacted:password-or-key>",
                     "git clone https://bob:<redacted:url-credential>@example.com/repo", "<redacted:private-key>",
                     "num_tokens: 5 at 1"]
    listing, hidden = environment_listing({"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_IB_AUTH_TOKEN": "x", "OPENAI_KEY": "y"})
    assert listing == "CUDA_VISIBLE_DEVICES=0,1\nNCCL_IB_AUTH_TOKEN=<redacted:env>\nOPENAI_KEY=<redacted:env>\n"
    assert hidden == 2


# ---------------------------------------------------------------- run

PROGRAMS = {
    "segfault.py": "import ctypes\nprint('step 1', flush=True)\nctypes.string_at(0)\n",
    "raises.py": "def load(batch):\n    raise ValueError(f'bad batch {batch}')\nload(7)\n",
    "sigkill.py": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "ok.py": "import sys\nsys.stdout.buffer.write(b'\\x1b[32mgreen\\x1b[0m \\xff raw\\n')\n"
             "sys.stderr.buffer.write(b'warn\\r\\n')\n",
    "waits.py": "import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda n, f: (print('got', n, flush=True), sys.exit(42)))\n"
                "open('ready', 'w').close()\ntime.sleep(30)\n",
}


@pytest.fixture
def programs(tmp_path: Path) -> Path:
    for name, text in PROGRAMS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def run_job(folder: Path, program: str, *options: str) -> subprocess.CompletedProcess:
    return postmortem("run", "--out", "case", *options, "--", sys.executable, program, cwd=folder)


def _cores_land_here() -> bool:
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    return not pattern.startswith(("|", "/")) and resource.getrlimit(resource.RLIMIT_CORE)[1] != 0


def test_run_segfault(programs: Path) -> None:
    done = run_job(programs, "segfault.py")
    assert done.returncode == 128 + signal.SIGSEGV
    assert done.stdout == b"step 1\n"
    case = programs / "case"
    assert b"Fatal Python error: Segmentation fault" in (case / "stderr.log").read_bytes()
    assert b'segfault.py", line 3 in <module>' in (case / "stderr.log").read_bytes()
    record = json.loads((case / "run.json").read_text())
    assert record["exit_status"] == 139 and record["signal_number"] == signal.SIGSEGV
    assert record["environment_set"].get("PYTHONFAULTHANDLER", os.environ.get("PYTHONFAULTHANDLER")) == "1"
    assert b"Verdict: native-crash" in done.stderr
    if _cores_land_here():
        cores = [p for p in case.iterdir() if p.name.startswith("core")]
        assert cores and cores[0].read_bytes()[:4] == b"\x7fELF"
        report = analyze_json(case, programs)
        assert report["cores"][0]["signal"]["name"] == "SIGSEGV"


def test_run_traceback(programs: Path) -> None:
    done = run_job(programs, "raises.py")
    assert done.returncode == 1
    log = (programs / "case" / "stderr.log").read_bytes()
    assert log.startswith(b"Traceback (most recent call last)") and b"ValueError: bad batch 7" in log
    assert done.stderr.startswith(b"postmortem: case directory")
    assert log in done.stderr  # the terminal saw the traceback as the job wrote it
    assert b"exited with status 1" in done.stderr and b"Inputs (" in done.stderr


def test_run_killed(programs: Path) -> None:
    done = run_job(programs, "sigkill.py")
    assert done.returncode == 128 + signal.SIGKILL
    assert b"was killed by signal 9" in done.stderr
    assert json.loads((programs / "case" / "run.json").read_text())["signal_number"] == signal.SIGKILL


def test_run_success_passes_bytes_through(programs: Path) -> None:
    done = run_job(programs, "ok.py", "--telemetry", "0")
    assert done.returncode == 0
    assert done.stdout == b"\x1b[32mgreen\x1b[0m \xff raw\n"
    assert done.stderr.endswith(b"warn\r\n") and b"Verdict" not in done.stderr
    assert (programs / "case" / "stdout.log").read_bytes() == done.stdout
    assert "collected" not in json.loads((programs / "case" / "run.json").read_text())


def test_run_forwards_sigterm(programs: Path) -> None:
    job = subprocess.Popen([sys.executable, "-m", "postmortem", "run", "--out", "case", "--", sys.executable,
                            "waits.py"], cwd=programs, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not (programs / "ready").exists():
            assert time.monotonic() < deadline and job.poll() is None, "the job did not start"
            time.sleep(0.05)
        job.send_signal(signal.SIGTERM)
        out, err = job.communicate(timeout=TIMEOUT_S)
    finally:
        job.kill()
    assert out == f"got {int(signal.SIGTERM)}\n".encode()
    assert job.returncode == 42
    assert b"exited with status 42" in err


def test_kernel_log_of_a_run_keeps_the_jobs_crashes_and_gpu_lines_only():
    """Real kernel lines (segfault-libnvidia-01 and xid13-109 in tests/data/kernel_log): another process's segfault
    is left out, the job's own (its pid in the family) and every NVRM line stay."""
    from postmortem.capture.run import job_lines

    log = ("[ 8275.824319] zed-editor[11804]: segfault at 25c ip 000075b6d26f2e1a sp 00007ffc262183a0 error 4 in "
           "libnvidia-glcore.so.575.64.03[af2e1a,75b6d2000000+c00000] likely on CPU 10 (core 20, socket 0)\n"
           "[84422.478662] zed-editor[1005460]: segfault at 25c ip 000070183ccf2e1a sp 00007ffe7e4fa740 error 4 in "
           "libnvidia-glcore.so.575.64.03[af2e1a,70183c600000+c00000] likely on CPU 12 (core 24, socket 0)\n"
           "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, "
           "errorString CTX SWITCH TIMEOUT, Info 0x58005\n")
    kept, dropped = job_lines(log, {1005460})
    assert dropped == 1
    assert "zed-editor[11804]" not in kept and "zed-editor[1005460]" in kept and "Xid" in kept


def test_a_sigkill_the_kernel_log_of_the_window_does_not_confirm_is_no_oom_verdict(programs: Path) -> None:
    """A child that SIGKILLs itself under a parent that reports it (`died with <Signals.SIGKILL: 9>`): the usual
    guess is the host OOM killer, and the kernel log run read over the job's window holds no OOM kill, so the guess
    is context with that reason, never the verdict (data/guesses.tsv)."""
    (programs / "parent.py").write_text("import subprocess, sys\n"
                                        "subprocess.run([sys.executable, 'sigkill.py'], check=True)\n")
    done = run_job(programs, "parent.py")
    assert done.returncode == 1
    record = json.loads((programs / "case" / "run.json").read_text())
    if not any(note.startswith(KERNEL_LOG_NOTE) for note in record.get("collected", [])):
        pytest.skip("the kernel log cannot be read on this machine: nothing refutes the guess")
    report = analyze_json(programs / "case", programs)
    assert "died with <Signals.SIGKILL: 9>" in (programs / "case" / "stderr.log").read_text()
    if any(e["kind"] == "oom-kill" for e in report["events"]):
        pytest.skip("this machine's kernel log holds an OOM kill in the job's window")
    assert "host-oom" not in [f["cause"] for f in report["findings"]]
    (guess,) = [f for f in report["context"] if f["signature"] == "sigkill-host-oom-guess"]
    assert "kernel log refutes" in guess["outside"]


RUN_ENDINGS = {"segfault.py": "killed by SIGSEGV (signal 11)", "aborts.py": "killed by SIGABRT (signal 6)",
               "raises.py": "exit status 1", "ok.py": "exit status 0"}
"""How each real program's run ends, as the report's job_exit fact says it."""


@pytest.mark.parametrize("program", sorted(RUN_ENDINGS))
def test_the_run_case_reads_runs_own_files_as_the_run_and_its_streams(programs: Path, program: str) -> None:
    """run.json is the run record (command, ending, times as facts), the captured streams are the job's output:
    none of them is a problem input (no "no known error pattern", no "empty file"), nor a suspect."""
    (programs / "aborts.py").write_text("import os\nprint('step 1', flush=True)\nos.abort()\n")
    done = run_job(programs, program, "--telemetry", "0")
    text = done.stderr if done.returncode else postmortem("analyze", "case", cwd=programs).stdout
    assert b"Inputs (" in text and b"no known error pattern" not in text and b"empty file" not in text
    assert b"case/run.json: run-record" in text
    report = analyze_json(programs / "case", programs)
    inputs = {Path(i["path"]).name: i for i in report["inputs"]}
    assert {name: i["diagnostics"] for name, i in inputs.items() if name in ("run.json", *STREAMS.values())} == {
        "run.json": [], "stdout.log": [], "stderr.log": []}
    assert inputs["run.json"]["format"] == "run-record"
    for name in ("stdout", "stderr"):  # the stream's own format when a source read it, else what it is
        assert inputs[STREAMS[name]]["format"] != "text" and (inputs[STREAMS[name]]["format"] == f"job-{name}"
                                                              or inputs[STREAMS[name]]["size"] > 0)
    assert report["facts"]["job_command"] == [f"{sys.executable} {program}"]
    assert report["facts"]["job_exit"] == [RUN_ENDINGS[program]]
    record = json.loads((programs / "case" / "run.json").read_text())
    assert report["facts"]["job_started"] == [record["started"]] and record["started"][-6] in "+-"
    run_events = {e["id"] for e in report["events"] if e["kind"] == "job-run"}
    assert len(run_events) == 1 and not run_events & set(report["suspects"])


def test_run_tells_the_variables_it_set_from_the_jobs_own(programs: Path) -> None:
    """The user's own TORCH_NCCL_TRACE_BUFFER_SIZE and CUDA_VISIBLE_DEVICES are the job's environment; the flight
    recorder variables run added (and --sync's CUDA_LAUNCH_BLOCKING) are listed as run's, with their purpose."""
    env = {**os.environ, "TORCH_NCCL_TRACE_BUFFER_SIZE": "500", "CUDA_VISIBLE_DEVICES": "0"}
    for name in ("TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "CUDA_LAUNCH_BLOCKING"):
        env.pop(name, None)
    done = postmortem("run", "--out", "case", "--sync", "--telemetry", "0", "--", sys.executable, "segfault.py",
                      cwd=programs, env=env)
    assert done.returncode == 128 + signal.SIGSEGV
    added = re.search(rb"\n  set_by_run: (.*)\n", done.stderr)
    assert added, done.stderr
    assert b"TORCH_NCCL_DUMP_ON_TIMEOUT=1" in added[1] and b"(NCCL flight recorder:" in added[1]
    assert b"CUDA_LAUNCH_BLOCKING=1 (synchronous launches:" in added[1]
    assert b"TORCH_NCCL_TRACE_BUFFER_SIZE" not in added[1] and b"CUDA_VISIBLE_DEVICES" not in added[1]
    report = analyze_json(programs / "case", programs)
    record = json.loads((programs / "case" / "run.json").read_text())
    assert set(record["environment_set"]) >= {"TORCH_NCCL_DUMP_ON_TIMEOUT", "CUDA_LAUNCH_BLOCKING"}
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in record["environment_set"]
    if not _cores_land_here():
        return
    shown = re.search(rb"\n  Environment variables: (.*)\n", done.stderr)
    assert shown and b"TORCH_NCCL_TRACE_BUFFER_SIZE=500" in shown[1] and b"CUDA_VISIBLE_DEVICES=0" in shown[1]
    assert b"TORCH_NCCL_DUMP_ON_TIMEOUT" not in shown[1] and b"CUDA_LAUNCH_BLOCKING" not in shown[1]
    environment = report["cores"][0]["environment"]
    assert environment["values"]["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "500"
    assert environment["set_by_run"] == {name: value for name, value in record["environment_set"].items()
                                         if name in environment["set_by_run"]}
    assert {"TORCH_NCCL_DUMP_ON_TIMEOUT", "CUDA_LAUNCH_BLOCKING"} <= set(environment["set_by_run"])
    assert not set(environment["set_by_run"]) & {*environment["values"], *environment["names_only"]}


# ---------------------------------------------------------------- hostile working directory and hostile files

CONSOLE = str(Path(sys.executable).parent / "postmortem")
"""The installed command: `python -m postmortem` would itself import from the working directory."""


def _planted(folder: Path, marker: Path) -> dict[str, str]:
    """Modules and tools in `folder` that leave `marker` behind when anything runs them; the PATH that names it."""
    for module in ("json", "torch", "pip", "site", "platform"):
        (folder / f"{module}.py").write_text(f"open({str(marker)!r}, 'a').write('{module}.py ran\\n')\n")
    for tool in ("nvidia-smi", "journalctl", "dmesg", "lspci", "coredumpctl", "python3", "compute-sanitizer"):
        script = folder / tool
        script.write_text(f"#!/bin/sh\necho '{tool} ran' >> '{marker}'\n")
        script.chmod(0o755)
    return {**os.environ, "PATH": f".{os.pathsep}{os.pathsep}{os.environ['PATH']}"}  # "." and "" both name the cwd


def test_collect_runs_nothing_from_the_working_directory(tmp_path: Path) -> None:
    here, marker = tmp_path / "untarred-case", tmp_path / "marker"
    here.mkdir()
    env = _planted(here, marker)
    (here / "train.log").write_bytes(DATA.joinpath("oom-torch-legacy-02.log").read_bytes())
    done = subprocess.run([CONSOLE, "collect", "-o", str(tmp_path / "b.tar.gz"), "--telemetry", "0", "train.log"],
                          cwd=here, env=env, capture_output=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    files = members(tmp_path / "b.tar.gz")
    assert "python probes: isolated (python3 -I, in an empty directory)" in files["software/stack.txt"].decode()
    assert "files/train.log" in files


def test_run_starts_nothing_from_the_working_directory_but_the_job(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    env = _planted(tmp_path, marker)
    done = subprocess.run([CONSOLE, "run", "--out", "case", "--telemetry", "1s", "--", sys.executable, "-I", "-c",
                           "import sys; sys.exit(3)"], cwd=tmp_path, env=env, capture_output=True, timeout=TIMEOUT_S,
                          check=False)
    assert done.returncode == 3, done.stderr
    assert not marker.exists(), marker.read_text()
    sanitized = subprocess.run([CONSOLE, "run", "--sanitizer", "--out", "case2", "--", "true"], cwd=tmp_path, env=env,
                               capture_output=True, timeout=TIMEOUT_S, check=False)
    assert not marker.exists(), (sanitized.stderr, marker.read_text())


FAKE_TORCH = """
__version__ = "2.5.1+cu124"
class version: cuda = "12.4"
class backends:
    class cudnn:
        version = staticmethod(lambda: 90100)
class cuda:
    get_arch_list = staticmethod(lambda: ["sm_80", "sm_90"])
    is_available = staticmethod(lambda: False)
    class nccl:
        version = staticmethod(lambda: (2, 21, 5))
"""


def test_torch_only_on_the_jobs_pythonpath_is_probed_with_it_and_the_manifest_says_so(tmp_path: Path) -> None:
    site = tmp_path / "job-site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([CONSOLE, "collect", "-o", "b.tar.gz", "--telemetry", "0"], cwd=tmp_path, env=env,
                          capture_output=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    files = members(tmp_path / "b.tar.gz")
    assert "torch: 2.5.1+cu124\n" in files["software/torch.txt"].decode()
    note = {e["path"]: e for e in json.loads(files["manifest.json"])["files"]}["software/torch.txt"]["note"]
    assert note.startswith("with the job's PYTHONPATH and user site")


def _elf_head(e_type: int) -> bytes:
    """A little-endian ELF64 header: ET_CORE (4) for a core, ET_EXEC (2) for a program."""
    return b"\x7fELF\x02\x01\x01" + b"\0" * 9 + e_type.to_bytes(2, "little") + b"\x3e\0" + b"\0" * 44


def test_collect_redacts_every_member_but_cores_and_their_names(tmp_path: Path) -> None:
    token = secrets.token_hex(16)
    tokens = {
        "password-flag": f"mysql --password {token}a -h db",
        "url-credential": f"redis://:{token}b@cache:6379/0 and https://bob:pa/ss{token}c@example.com/repo",
        "gitlab-token": "glpat-" + secrets.token_hex(10),
        "stripe-key": "sk_live_" + secrets.token_hex(12),
        "slack-webhook": f"https://hooks.slack.com/services/T0123ABCD/B0456EFGH/{token}d",
        "password-or-key": f"DB_PASS={token}e",
    }
    log = "".join(f"{kind}: {text}\n" for kind, text in tokens.items())
    ghp = "ghp_" + secrets.token_hex(18)
    (tmp_path / "nul.log").write_bytes(b"header\0\0binary-ish\n" + log.encode())  # a NUL in the first 8 KiB
    (tmp_path / f"run-{ghp}.log").write_text("step 1\n")
    core = _elf_head(4) + f"env HF_TOKEN=hf_{token}\n".encode()
    (tmp_path / "core.1234").write_bytes(core)
    (tmp_path / "prog").write_bytes(_elf_head(2) + f" api_key={token}f\n".encode())
    done = postmortem("collect", "-o", "b.tar.gz", "--telemetry", "0", "nul.log", f"run-{ghp}.log", "core.1234", "prog",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = members(tmp_path / "b.tar.gz")
    manifest = json.loads(files["manifest.json"])
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert files["files/core.1234"] == core and listed["files/core.1234"]["redacted"].startswith("not redacted")
    assert set(listed["files/nul.log"]["redacted"]) == set(tokens)
    assert "files/run-<redacted:github-token>.log" in files
    assert manifest["redaction"]["in_names_and_manifest"]["github-token"] >= 1
    for name, data in files.items():
        if name != "files/core.1234":
            assert token.encode() not in data and ghp.encode() not in data, name
        assert ghp not in name
    assert b"binary-ish" in files["files/nul.log"] and b"<redacted:password-or-key>" in files["files/prog"]


SAMPLES_BY_KIND = {
    "aws-access-key": "AKIA" + "QWERTYUIOPASDFGH",
    "github-token": "gho_" + "a1B2" * 9,
    "huggingface-token": "hf_" + "aBcD" * 9,
    "api-key": "sk-ant-api03-" + "xY9_" * 10,
    "slack-token": "xoxb-123456789012-" + "AbCd" * 6,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXBhcnQ",
    "google-api-key": "AIza" + "Sy" + "A1b2C3d4" * 4 + "x",
    "npm-token": "npm_" + "Ab12" * 9,
    "bearer-token": "Authorization: Bearer " + "Zz09" * 8,
    "authorization-header": "Proxy-Authorization: Basic dXNlcjpwYXNz",
    "cookie-header": "Cookie: session=abc123; theme=dark",
    "password-or-key": '{"client_secret": "s3cr3t value"}',
    "password-flag": "mysql --password s3cr3t -h db",
    "url-credential": "redis://:pw/with/slashes@cache:6379/0",
    "gitlab-token": "glpat-" + "Ab1_" * 5,
    "stripe-key": "rk_live_" + "Ab12" * 6,
    "slack-webhook": "https://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + "xY12" * 6,
    "discord-webhook": "https://discord.com/api/webhooks/123456789012345678/" + "Ab-1" * 16,
    "pypi-token": "pypi-AgEIcHlwaS5vcmc" + "Ab12" * 14,
    "databricks-token": "dapi" + "0123456789abcdef" * 2,
    "digitalocean-token": "dop_v1_" + "0123456789abcdef" * 4,
    "sendgrid-key": "SG." + "Ab12" * 5 + "Ab." + "Ab12" * 10 + "Ab1",
    "groq-key": "gsk_" + "Ab12" * 13,
    "replicate-token": "r8_" + "Ab12" * 9 + "A",
    "age-secret-key": "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"[:29] * 2,
}
KEPT = ["num_tokens: 5 at 1", "bypass=1", "compass: north", "PWD=/home/x/work", "password: null", "tokens/s 1234",
        "NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC/read", "[ 12.345] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234"]


@pytest.mark.parametrize("kind", sorted(SAMPLES_BY_KIND))
def test_each_secret_family_is_named_by_its_kind(kind: str) -> None:
    redactor = Redactor({})
    scrubbed = redactor.text(f"line with {SAMPLES_BY_KIND[kind]} in it\n")
    assert redactor.counts == {kind: 1}, scrubbed
    assert f"<redacted:{kind}>" in scrubbed


def test_every_family_of_the_table_has_a_sample() -> None:
    assert set(SAMPLES_BY_KIND) == {shape.kind for shape in secret_shapes()}


def test_lines_that_hold_no_secret_are_kept() -> None:
    redactor = Redactor({"PWD": "/home/x/work", "DB_PASS": "hunter2hunter2"})
    text = "".join(line + "\n" for line in KEPT) + "login with hunter2hunter2\n"
    assert redactor.text(text) == "".join(line + "\n" for line in KEPT) + "login with <redacted:env-secret-value>\n"


@pytest.mark.parametrize("line", ["a-" * 16384 + "://", "a_" * 16384 + "=x", "a." * 16384 + "password",
                                  "x://u:" * 5000, "--a " * 8000 + "token", ("password = '" + "a" * 5000) * 6])
def test_redaction_stays_linear_on_crafted_lines(line: str) -> None:
    """Each pattern's repetitions are bounded and none is nested: 32 KiB costs milliseconds (an unbounded scheme
    before `://` made the first one quadratic: 2.8 s)."""
    started = time.monotonic()
    Redactor({}).text(line)
    assert time.monotonic() - started < 1.0


def test_collect_blanks_the_secrets_of_a_crashed_process_in_its_core_and_never_changes_the_core(tmp_path: Path) -> None:
    """Item 16b: the kernel's core of a crashed program holds its environment and command line; the bundle's copy
    has their secrets overwritten by `*` (as `snapshot` blanks them in its own cores: same function), byte for byte,
    the core on disk is left as it is, and the bundle's core still reads."""
    from test_core import crash  # builds and crashes a real program with cores enabled; skips where none is written

    token, password = "hf_" + secrets.token_hex(16), secrets.token_hex(12)
    core = crash(tmp_path / "job", "crash", env={"HF_TOKEN": token, "CUDA_VISIBLE_DEVICES": "0"},
                 args=(f"--password={password}", "--epochs=3"))
    original = core.read_bytes()
    assert token.encode() in original and password.encode() in original
    done = postmortem("collect", "-o", str(tmp_path / "b.tar.gz"), "--telemetry", "0", cwd=core.parent)
    assert done.returncode == 0, done.stderr
    files = members(tmp_path / "b.tar.gz")
    copy = files[f"crash/cores/{core.name}"]
    assert token.encode() not in copy and password.encode() not in copy
    assert len(copy) == len(original) and core.read_bytes() == original
    assert b"\0HF_TOKEN=" + b"*" * len(token) + b"\0" in copy and b"\0CUDA_VISIBLE_DEVICES=0\0" in copy
    assert b"\0--password=" + b"*" * len(password) + b"\0--epochs=3\0" in copy
    listed = {entry["path"]: entry for entry in json.loads(files["manifest.json"])["files"]}
    assert "1 environment value(s) and 1 secret(s) of its command line blanked" in \
        listed[f"crash/cores/{core.name}"]["redacted"]
    (tmp_path / "read").mkdir()
    (tmp_path / "read" / "core").write_bytes(copy)
    report = analyze_json(tmp_path / "read" / "core", tmp_path)
    assert report["cores"][0]["signal"]["name"] == "SIGSEGV", report["cores"][0]


def test_a_secret_across_the_blocks_a_long_line_is_redacted_in_is_redacted(tmp_path: Path) -> None:
    """Item 16c: a log with a NUL in its first 8 KiB (the hole copytruncate leaves) and a line longer than MAX_LINE
    (a JSON record carrying a base64 payload) is redacted in blocks cut after a space or NUL. A cut between a
    secret's name and its base64 value (`Authorization: Basic` | token, `"aws_secret_access_key": ` | value) left
    the value as it was; the cut now never splits a secret, wherever the blocks end."""
    from postmortem.capture.collect import CHUNK

    basic = base64.b64encode(b"deploy:" + secrets.token_hex(16).encode()).decode()
    aws = base64.b64encode(secrets.token_bytes(30)).decode()
    payload = base64.b64encode(secrets.token_bytes(60_000)).decode()
    head = b"2026-12-06T10:00:00Z rank0 step 1\n" + b"\0" * 4096 + b"2026-12-06T10:00:01Z rank0 step 2\n"
    lines = head + b"".join(b"2026-12-06T10:00:02Z rank0 loss 0.1 step %d\n" % i for i in range(CHUNK // 100))
    record = f'{{"payload": "{payload}", "headers": "Authorization: Basic '.encode()
    lines += b"x" * (CHUNK - 10 - len(lines) - len(record)) + record + basic.encode()  # 10 bytes in this block
    lines += b'", "padding": "'
    record = f'", "body": "{payload}", "aws_secret_access_key": "'.encode()
    lines += b"y" * (2 * CHUNK - 12 - len(lines) - len(record)) + record + f'{aws}"}}\n'.encode()  # 12 bytes
    (tmp_path / "train.log").write_bytes(lines)
    done = postmortem("collect", "-o", "b.tar.gz", "--telemetry", "0", "train.log", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log = members(tmp_path / "b.tar.gz")["files/train.log"]
    assert basic.encode() not in log and aws.encode() not in log
    assert b"Authorization: Basic <redacted:" in log and b'"aws_secret_access_key": <redacted:' in log
    assert log.startswith(head) and payload.encode() in log


def test_secrets_encoded_in_base64_are_redacted_and_other_base64_is_kept(tmp_path: Path) -> None:
    """Item 16c: a secret encoded once more in base64 has no shape of its own. The Kubernetes documentation's own
    Secret examples (kubernetes.io/docs/concepts/configuration/secret/: a `.dockerconfigjson` whose JSON holds an
    `auth`, and data values) pasted into a job's log, behind a NUL as a rotated log has, and a GitHub token encoded
    alone: each run is decoded and its text redacted like any other. Base64 of bytes that are no text (a digest,
    a payload) and of text without a secret stays, so the evidence around it is still read."""
    docker = "eyJhdXRocyI6eyJodHRwczovL2V4YW1wbGUvdjEvIjp7ImF1dGgiOiJvcGVuc2VzYW1lIn19fQo="
    token = base64.b64encode(b"ghp_" + secrets.token_hex(18).encode()).decode()
    nested = base64.b64encode(b'{"auths":{"r.io":{"auth":"' + base64.b64encode(b"u:" + secrets.token_hex(8).encode())
                              + b'"}}}').decode()
    harmless = base64.b64encode(b"step 100 loss 0.25 lr 3e-4").decode()
    digest = base64.b64encode(secrets.token_bytes(32)).decode()
    (tmp_path / "train.log").write_bytes(
        b"\0" * 64 + b"\napiVersion: v1\nkind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n"
        + f"  .dockerconfigjson: {docker}\n  nested: {nested}\nexport GH={token}\n".encode()
        + f"note {harmless} sha256 {digest}\n".encode()
        + b"[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    done = postmortem("collect", "-o", "b.tar.gz", "--telemetry", "0", "train.log", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log = members(tmp_path / "b.tar.gz")["files/train.log"]
    for secret in (docker, token, nested):
        assert secret.encode() not in log
    assert log.count(b"<redacted:base64-encoded-secret>") == 3, log
    assert harmless.encode() in log and digest.encode() in log and b"NVRM: Xid" in log


def test_an_over_long_line_ending_in_a_secret_is_cut_at_the_last_blank_before_it() -> None:
    """A line longer than MAX_LINE whose end holds a secret is cut after the last blank outside every secret (here
    the one before `Authorization`, which a shape reads behind it), not in the middle of a word."""
    from postmortem.capture.collect import _whole_lines
    from postmortem.capture.redact import Redactor

    data = b"word " * 20_000 + b"Authorization: Basic " + b"A" * 40
    head, tail = _whole_lines(data, Redactor({}))
    assert head + tail == data and head.endswith(b"word ") and tail.startswith(b"word")
    assert b"Authorization" not in head
