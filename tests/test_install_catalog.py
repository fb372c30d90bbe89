"""Every failure wording of two vendor catalogs, printed as the program prints it, is read for its cause.

tests/data/driver-install-catalog.tsv lists every error and warning of nvidia-installer (ui_error / ui_warn, which
its log writes as one `ERROR: ` or `WARNING: ` line), of libnvidia-container's CLI (`nvidia-container-cli: <stage>
error: <detail>`, quoted by the container engine when its hook fails) and of the NVIDIA Container Toolkit's runtime
and hook, each with its source file and the cause it proves ("-" for a permission, configuration or usage error,
which names no GPU cause). Each wording that proves a cause is rendered with sample values in the layout its program
prints and must give that cause; the real lines people posted (tests below, with their threads) must too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import catalog_rows
from postmortem.pipeline import analyze_text

CATALOG = Path(__file__).parent / "data" / "driver-install-catalog.tsv"
VERB = re.compile(r"%(?:[-+ 0#]*\d*(?:\.\d+)?[a-zA-Z]|%)")
"""A printf or Go verb: %s %d %04X %v %w %q, and %% for a percent sign."""
DAEMON = "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
ENGINE = (f"{DAEMON}runc create failed: unable to start container process: error during container init: error running"
          " hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n")
"""What Docker prints before the hook's stderr (nvidia-container-runtime in legacy mode runs the hook)."""


@dataclass(frozen=True)
class Wording:
    program: str
    level: str
    format: str
    file: str
    cause: str
    args: tuple[str, ...]


def catalog() -> list[Wording]:
    return [Wording(r["program"], r["level"], r["format"], r["file"], r["cause"],
                    () if r["args"] == "-" else tuple(r["args"].split("|"))) for r in catalog_rows(CATALOG)]


def filled(wording: Wording) -> str:
    """The wording with its verbs filled in from the row's sample values (an empty value where it has fewer)."""
    values = iter(wording.args)
    return VERB.sub(lambda verb: "%" if verb[0] == "%%" else next(values, ""), wording.format)


def printed(wording: Wording) -> str:
    """The line the program prints: the installer's log line, the CLI's error under Docker's hook failure, the
    toolkit runtime's error as Docker quotes it."""
    text = filled(wording)
    if wording.program == "nvidia-installer":
        return f"{'ERROR' if wording.level == 'error' else 'WARNING'}: {text}\n"
    if wording.program == "nvidia-container-cli":
        return f"{ENGINE}nvidia-container-cli: {text}: unknown.\n"
    return f"{DAEMON}{text}: unknown.\n"


CAUSED = [w for w in catalog() if w.cause != "-"]
READ_ELSEWHERE = {("pkg/nvcdi/lib.go", "failed to initialize nvml: %v")}
"""Wordings another reader claims without their cause: gpu_tools reads `nvml: ERROR_LIBRARY_NOT_FOUND` (lower-case
nvml) as an NVML error without the return's name, so no signature fires (sources/gpu_tools.py, not the table)."""


def test_the_catalog_lists_both_programs_whole():
    """Every wording once per file, with its source file; the installer's and the container stack's."""
    rows = catalog()
    assert {w.program for w in rows} == {"nvidia-installer", "nvidia-container-cli", "nvidia-container-toolkit"}
    assert len(rows) > 500 and all(w.file and w.format for w in rows)
    assert len({(w.file, w.format, w.args) for w in rows}) == len(rows)
    assert len(CAUSED) >= 35


@pytest.mark.parametrize("wording", [
    pytest.param(w, marks=pytest.mark.xfail(strict=True, reason="read elsewhere without its cause"))
    if (w.file, w.format) in READ_ELSEWHERE else w for w in CAUSED],
    ids=lambda w: f"{w.program}:{w.file}:{w.format[:40]}")
def test_every_wording_with_a_cause_is_read_for_it(wording):
    report = analyze_text(printed(wording))
    assert [f.cause for f in report.findings][:1] == [wording.cause], printed(wording)


NO_CAUSE = [
    "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla",  # the image's own limit
    "ERROR: nvidia-installer must be run as root",
]


@pytest.mark.parametrize("text", NO_CAUSE)
def test_a_permission_or_configuration_error_names_no_gpu_cause(text):
    assert not analyze_text(text + "\n").findings


WORDS_TOLD = {"No NVIDIA driver is currently installed; the '--kernel-modules-only' option can only be used to "
              "install the NVIDIA kernel modules on top of an existing driver installation."}
"""A no-cause wording whose words do say what a person would read in them (no driver is installed)."""


def test_no_wording_without_a_cause_is_given_one_by_the_words_reader():
    """The error-word rows read lines no table holds by their words; the catalog's wordings that name no cause (a
    usage error, a missing tool, an option) must not be read into one by them (the kernel-module row once read
    `nvidia-installer must be run as root` as a driver problem)."""
    told = [w.format for w in catalog() if w.cause == "-" and w.format not in WORDS_TOLD
            and any(f.signature.startswith("words-") for f in analyze_text(printed(w)).findings)]
    assert told == []


def test_the_cli_stage_is_read_as_its_stage_not_as_cudas_initialization_error():
    """`initialization error` names the CLI's stage; the detail after it says why (sources/frameworks/containers.py):
    NVML's library not found, read with the row that explains it rather than as cudaErrorInitializationError."""
    line = ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared"
            " object file: no such file or directory: unknown.\n")
    report = analyze_text(ENGINE + line)
    [event] = [e for e in report.events if e.fields.get("reporter") == "nvidia-container-cli"]
    assert (event.kind, event.fields["stage"]) == ("cause-phrase", "initialization")
    assert event.fields["phrase"] == "load library failed: libnvidia-ml"
    assert not [e for e in report.events if e.fields.get("error") == "cudaErrorInitializationError"]
    assert report.findings[0].cause == "driver-mismatch"


POSTED = [
    # Bumblebee-Project/Bumblebee#925: the installer's terminal output, wrapped, on a kernel without its headers
    ("ERROR: Unable to find the kernel source tree for the currently running kernel.  Please make sure you have"
     " installed the\n       kernel source files for your kernel and that they are properly configured; on Red Hat"
     " Linux systems, for example, be\n       sure you have the 'kernel-source' or 'kernel-devel' RPM installed.\n\n\n"
     "ERROR: Installation has failed.  Please see the file '/var/log/nvidia-installer.log' for details.  You may find"
     " suggestions\n       on fixing installation problems in the README available on the Linux driver download"
     " page at www.nvidia.com.\n", "driver-mismatch"),
    # BenedictThompson-zz/Azure-Ethereum-mine#2
    (" ERROR: The Nouveau kernel driver is currently in use by your system.  This\n         driver is incompatible"
     " with the NVIDIA driver, and must be disabled\n         before proceeding.\n", "driver-mismatch"),
    # Bumblebee-Project/Bumblebee#656: the installer's log
    ("-> Tagging shared libraries with chcon -t textrel_shlib_t.\nWARNING: You do not appear to have an NVIDIA GPU"
     " supported by the 346.47 NVIDIA Linux graphics driver installed in this system.  For further details, please"
     " see the appendix SUPPORTED NVIDIA GRAPHICS CHIPS in the README available on the Linux driver download page at"
     " www.nvidia.com.\n", "driver-mismatch"),
    # koszullab/instaGRAAL#10: the same warning wrapped, with blank lines between its lines
    ("WARNING: You do not appear to have an NVIDIA GPU supported by the 410.48\n\n         NVIDIA Linux graphics"
     " driver installed in this system.  For\n", "driver-mismatch"),
    # NVIDIA/nvidia-installer#3
    ("WARNING: One or more modprobe configuration files to disable Nouveau are already present at: /e\n",
     "driver-mismatch"),
    # docker/for-linux#846: the CLI's error as Docker quoted it
    ('docker: Error response from daemon: OCI runtime create failed: container_linux.go:348: starting container'
     ' process caused "process_linux.go:402: container init caused \\"process_linux.go:385: running prestart hook 1'
     ' caused \\\\\\"error running hook: exit status 1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli'
     ' --load-kmods configure --ldconfig=@/sbin/ldconfig.real --device=all --compute --utility --require=cuda>=10.0'
     ' brand=tesla,driver>=384,driver<385 --pid=33019 /docker/overlay2/6e96/merged]\\\\\\\\nnvidia-container-cli:'
     ' requirement error: unsatisfied condition: driver >= 410\\\\\\\\n\\\\\\"\\"": unknown.\n', "driver-mismatch"),
]


@pytest.mark.parametrize(("text", "cause"), POSTED, ids=[f"posted-{n}" for n in range(len(POSTED))])
def test_real_posted_lines_are_read_for_their_cause(text, cause):
    report = analyze_text(text)
    assert report.findings and report.findings[0].cause == cause
