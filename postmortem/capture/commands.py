"""The `collect` and `run` commands; `postmortem.cli` registers them, their work is imported when they run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..render.terminal import echo

COMMAND_NOT_FOUND = 127
"""Exit status when the job cannot be started, as shells use it."""


def _seconds(text: str, option: str) -> float:
    from .collect import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


@click.command("collect")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Bundle to write (default: postmortem-bundle-<time>.tar.gz here).")
@click.option("--since", default="2h", show_default=True,
              help="Start of the window: a duration back from now (30m, 2h, 1d) or a local date and time.")
@click.option("--anonymize", is_flag=True, help="Also replace host names, user names, IP addresses and home paths.")
@click.option("--telemetry", "telemetry", default="5s", show_default=True,
              help="How long to sample nvidia-smi telemetry (0 to skip).")
@click.option("--timeout", "timeout", default="30s", show_default=True, help="Time limit of each step.")
@click.option("--core-limit-mb", type=click.IntRange(0), default=2048, show_default=True,
              help="Cores and GPU dumps larger than this are named in the manifest, not copied.")
def collect_command(paths: tuple[str, ...], output: Path | None, since: str, anonymize: bool, telemetry: str,
                    timeout: str, core_limit_mb: int) -> None:
    """Gather the evidence of a GPU job's death on this machine into one redacted bundle.

    Kernel log of the window, nvidia-smi report and telemetry, driver and
    PCIe state, software stack, environment, core dumps, and the PATHs you
    name. Secrets are redacted; binary cores are not (see the manifest).
    Read the bundle with `postmortem analyze BUNDLE`.
    """
    import os
    from datetime import datetime

    from ..cli import checked_output, output_step
    from .collect import Plan, collect, parse_since

    now = datetime.now()
    try:
        start = parse_since(since, now)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from exc
    output = output or Path(f"postmortem-bundle-{now:%Y%m%d-%H%M%S}.tar.gz")
    bundle = checked_output(output, paths)
    plan = Plan(since=start, paths=paths, telemetry_s=_seconds(telemetry, "--telemetry"),
                core_limit=core_limit_mb << 20, timeout_s=_seconds(timeout, "--timeout"),
                skip=frozenset({str(bundle.target), os.path.abspath(output)}))
    manifest = output_step(lambda: collect(bundle, plan, anonymize,
                                       progress=lambda step: echo(f"postmortem: {step} ...", err=True)))
    for entry in manifest.get("not_collected", []):
        echo(f"postmortem: not collected: {entry['path']} ({entry['why']})", err=True)
    if any(isinstance(entry["redacted"], str) for entry in manifest.get("files", [])):
        echo("postmortem: the bundle holds core files, which are process memory and are not redacted", err=True)
    total = manifest.get("redaction", {}).get("total", {})
    redacted = ", ".join(f"{count} {kind}" for kind, count in total.items()) or "nothing"
    echo(f"postmortem: wrote {output} ({len(manifest.get('files', []))} files; redacted: {redacted})", err=True)


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--telemetry", default="5s", show_default=True,
              help="nvidia-smi sampling interval while the job runs (0 to skip).")
@click.option("--sanitizer", is_flag=True, help="Run the command under compute-sanitizer (memcheck).")
@click.option("--gpu-core", is_flag=True,
              help="Let CUDA write a GPU core dump on an exception, into the case directory.")
@click.option("--sync", is_flag=True,
              help="CUDA_LAUNCH_BLOCKING=1: errors are reported at the launch that caused them.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Case directory (default: postmortem-run-<time> here).")
@click.option("--hang-after", default="0", show_default=True,
              help="Take a snapshot of the job (postmortem snapshot) when its output and its GPU utilisation have "
                   "not changed for this long (20m, 1h); 0 never. A job that used CPU meanwhile is looked at first: "
                   "if every process runs code and none waits, it is moving and the watch goes on. The job goes on.")
def run_command(command: tuple[str, ...], telemetry: str, sanitizer: bool, gpu_core: bool, sync: bool,
                out: Path | None, hang_after: str) -> None:
    """Run a job with crash evidence switched on; if it fails, collect and explain.

    Example: postmortem run --gpu-core -- python train.py --lr 3e-4

    Exits with the job's own status (128+N when it died by signal N).
    """
    from ..cli import output_step
    from ..outputs import check_folder_output
    from .run import RunError, RunOptions, run

    if out is not None:
        output_step(lambda: check_folder_output(out))  # before the job starts, not after it ran for hours
    options = RunOptions(list(command), out, _seconds(telemetry, "--telemetry"), sanitizer, gpu_core, sync,
                         _seconds(hang_after, "--hang-after"))
    try:
        status = output_step(lambda: run(options))
    except RunError as exc:
        echo(f"postmortem: {exc}", err=True)
        status = COMMAND_NOT_FOUND
    sys.stdout.flush()
    sys.exit(status)


@click.command("snapshot")
@click.argument("pids", nargs=-1, type=click.IntRange(1))
@click.option("--job", is_flag=True,
              help="Every process of the job each PID belongs to (the tree under its torchrun, mpirun or srun); "
                   "with no PID, every such job on this node.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Case directory (default: postmortem-snapshot-<time> here).")
@click.option("--telemetry", default="3s", show_default=True, help="How long to sample nvidia-smi (0 to skip).")
@click.option("--timeout", default="10s", show_default=True,
              help="Time limit of nvidia-smi and the other node tools (a hung nvidia-smi is recorded as such).")
def snapshot_command(pids: tuple[int, ...], job: bool, out: Path | None, telemetry: str, timeout: str) -> None:
    """Capture hung processes alive: every thread's native and Python stack, where each waits in the kernel,
    the GPU state and the kernel log; each process is stopped for milliseconds and goes on running.

    Read the case directory with `postmortem analyze DIR`. Exits with 1 when no process could be taken.
    """
    from datetime import datetime

    from ..cli import output_step
    from ..outputs import check_folder_output
    from .collect import Plan
    from .snapshot import job_processes, snapshot

    if not pids and not job:
        raise click.UsageError("name the PIDs to capture, or --job to find the job's processes")
    targets = job_processes(pids) if job else list(dict.fromkeys(pids))
    if not targets:
        raise click.UsageError("no job processes found (no torchrun, mpirun or srun tree on this node)")
    now = datetime.now()
    out = out or Path(f"postmortem-snapshot-{now:%Y%m%d-%H%M%S}")
    output_step(lambda: check_folder_output(out))
    plan = Plan(since=now, telemetry_s=_seconds(telemetry, "--telemetry"), timeout_s=_seconds(timeout, "--timeout"))
    manifest = output_step(lambda: snapshot(out, targets, plan,
                                            progress=lambda step: echo(f"postmortem: {step} ...", err=True)))
    for process in manifest["processes"]:
        if process["error"]:
            echo(f"postmortem: {process['error']}", err=True)
            continue
        rank = f" rank {process['rank']['rank']}" if "rank" in process["rank"] else ""
        echo(f"postmortem: pid {process['pid']}{rank}: {process['threads']} threads "
                   f"({process['python_threads']} with Python stacks), stopped {process['stopped_ms']:.1f} ms"
                   + (f"; main thread in {process['waits']}" if process["waits"] else "")
                   + (f"; never stopped (uninterruptible sleep, no stack read): thread(s) "
                      f"{', '.join(map(str, process['never_stopped']))}" if process["never_stopped"] else ""),
             err=True)
    echo(f"postmortem: {manifest['gpu']}", err=True)
    echo(f"postmortem: wrote {out}; read it with: postmortem analyze {out}", err=True)
    if all(process["error"] for process in manifest["processes"]):
        sys.exit(1)
