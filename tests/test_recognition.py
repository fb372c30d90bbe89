"""Recognition in the wordings and layouts real reports use (each family on two or more real texts).

The texts are public log excerpts; the comment above each names its thread.
"""

from __future__ import annotations

import pytest

from postmortem import knowledge
from postmortem.pipeline import analyze_text


def kinds(text: str) -> list[tuple[str, dict]]:
    return [(e.kind, dict(e.fields)) for e in analyze_text(text).events]


def causes(text: str) -> list[str]:
    return [f.cause for f in analyze_text(text).findings]


def only(text: str, kind: str) -> dict:
    found = [fields for k, fields in kinds(text) if k == kind]
    assert len(found) == 1, kinds(text)
    return found[0]


# https://github.com/negativo17/nvidia-driver/issues/158 (journal, indented continuation lines)
UNSUPPORTED_OPEN = """kernel: NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)
             NVRM: installed in this system is not supported by open
             NVRM: nvidia.ko because it does not include the required GPU
             NVRM: System Processor (GSP).
             NVRM: Please see the 'Open Linux Kernel Modules' and 'GSP
             NVRM: Firmware' sections in the driver README, available on
kernel: nvidia 0000:09:00.0: probe with driver nvidia failed with error -1
kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).
kernel: NVRM: None of the NVIDIA devices were initialized.
"""
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/393 (dmesg -H, another driver release)
UNSUPPORTED_RELEASE = """[  +0.000005] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:25a0)
              NVRM: installed in this system is not supported by the
              NVRM: NVIDIA 520.56.06 driver release.
              NVRM: Please see 'Appendix A - Supported NVIDIA GPU Products'
"""


def test_wrapped_unsupported_gpu_is_one_driver_message_and_the_root():
    for text in (UNSUPPORTED_OPEN, UNSUPPORTED_RELEASE):
        report = analyze_text(text)
        messages = [e for e in report.events if e.kind == "driver-message" and e.fields["family"] == "unsupported-gpu"]
        assert len(messages) == 1 and messages[0].where.end_line > messages[0].where.line
        assert report.findings[0].signature == "nvrm-unsupported-gpu"
    probe = analyze_text(UNSUPPORTED_OPEN).findings
    assert [f.consequence_of for f in probe if f.signature == "nvrm-probe-failed"] == ["nvrm-unsupported-gpu"]


# https://github.com/stackhpc/ansible-slurm-appliance/issues/287 (rsyslog escapes the newlines as #012)
API_ESCAPED = ("Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: "
               "this kernel module has the version 530.30.02.  Please#012NVRM: make sure that this kernel module and "
               "all NVIDIA driver#012NVRM: components have the same version.\n")
# https://github.com/NVIDIA/nvidia-docker/issues/182 (journal, wrapped)
API_WRAPPED = """Aug 26 14:08:07 nyasara-linux kernel: NVRM: API mismatch: the client has the version 367.44, but
                                      NVRM: this kernel module has the version 367.35.  Please
                                      NVRM: make sure that this kernel module and all NVIDIA driver
                                      NVRM: components have the same version.
"""


def test_api_mismatch_in_both_layouts():
    for text in (API_ESCAPED, API_WRAPPED):
        assert only(text, "driver-message")["family"] == "api-mismatch"
        assert causes(text)[0] == "driver-mismatch"


# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1230
GSP_TIMEOUT = """[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200
[   84.300476] NVRM: GPU6 kbusSendSysmembarSingle_GH100: - timeout error waiting for startToken = 0x3 cnt=24105122
[   84.300480] NVRM: GPU6 kgmmuCheckMemSubsysError_IMPL: Memory Subsystem Error detected. kbusSendSysmembarSingle failed.
[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************
"""  # noqa: E501 - the driver's lines, verbatim
# https://github.com/ublue-os/bazzite/issues/2668: firmware missing, then the init failure it causes
GSP_BOOT = """[   23.991660] nvidia 0000:07:00.0: Direct firmware load for nvidia/570.144/gsp_ga10x.bin failed with error -2
[   23.991667] NVRM: RmFetchGspRmImages: No firmware image found
[   23.991672] NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x61:0x56:1770)
[   23.991822] NVRM: GPU 0000:07:00.0: rm_init_adapter failed, device minor number 0
"""  # noqa: E501 - the driver's lines, verbatim


def test_driver_lines_are_classified_by_function_subsystem():
    found = {f["function"]: (f["subsystem"], f["family"], f["gpu_index"])
             for k, f in kinds(GSP_TIMEOUT) if k == "driver-message"}
    assert found == {
        "_kgspIsHeartbeatTimedOut": ("gsp", "gsp-heartbeat", 6),
        "kbusSendSysmembarSingle_GH100": ("bus", "timeout", 6),
        "kgmmuCheckMemSubsysError_IMPL": ("mmu", "memsys-error", 6),
        "_kgspLogRpcTimeout": ("gsp", "gsp-timeout-banner", 6),
    }
    assert causes(GSP_TIMEOUT)[0] == "gpu-firmware"


def test_init_failure_after_a_driver_error_is_its_consequence():
    report = analyze_text(GSP_BOOT)
    assert report.findings[0].signature == "nvrm-gsp-boot-failed"
    init = next(f for f in report.findings if f.signature == "rminit-failed")
    assert init.consequence_of == "nvrm-gsp-boot-failed"
    first = next(f for k, f in kinds(GSP_BOOT) if k == "gpu-init-failed")
    assert first["nv_status"] == "NV_ERR_NOT_SUPPORTED"  # the 0x56 of (0x61:0x56:1770)


def test_summary_alone_is_not_presented_as_a_confident_root():
    # https://github.com/geerlingguy/raspberry-pi-pcie-devices/issues/26: only the summary was posted
    report = analyze_text("[   37.673624] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"
                          "[   37.673683] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0\n")
    verdict = report.findings[0]
    assert verdict.role == "consequence" and verdict.consequence_of is None
    assert verdict.confidence < 0.8 and "not recognised" in verdict.confidence_reason
    assert only(report_text := "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n",
                "gpu-init-failed")["nv_status"] == "NV_ERR_MEMORY_ERROR" and report_text


# gpud's kmsg tests (https://github.com/leptonai/gpud, components/accelerator/nvidia/xid) and NVSentinel's
OFF_BUS = [
    "NVRM: The NVIDIA GPU 0000:18:00.0\nNVRM: (PCI ID: 10de:2901) installed in this system has\n"
    "NVRM: fallen off the bus and is not responding to commands.\n",
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
    "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
    "               NVRM: fallen off the bus and is not responding to commands.\n",
    "NVRM: GPU 18:00.0: GPU has fallen off the bus.\n",
]


def test_off_bus_wrapped_and_without_domain():
    pcis = [only(text, "gpu-off-bus")["pci"] for text in OFF_BUS]
    assert pcis == ["0000:18:00.0", "0000:b3:00.0", "0000:18:00.0"]  # one spelling
    assert only(OFF_BUS[1], "gpu-off-bus")["pci_id"] == "10de:26b5"


NVLINK5 = [  # gpud kmsg_extended_test.go
    ("NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 "
     "0x00000000 0x00000000 0x00000000)", ("NETIR_LINK_EVT", "Fatal", 4, 0x004505c6, 0, 8)),
    ("NVRM: Xid (PCI:0018:01:00): 145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 13 "
     "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
     ("RLW_RXPIPE", "Nonfatal", 0, 67739842, 8, 13)),
]


def test_nvlink5_unit_severity_subcode_and_words():
    for line, expected in NVLINK5:
        f = only(line, "xid")
        assert (f["unit"], f["nvlink_severity"], f["subcode"], f["intrinfo"], f["error_status"], f["link"]) == expected
    assert analyze_text(NVLINK5[0][0]).findings[0].signature == "xid-nvlink5-fatal"
    assert analyze_text(NVLINK5[1][0]).findings[0].signature == "xid-nvlink5"


def test_xid_with_only_pid_and_name():
    # NVSentinel parser/csv_test.go: nothing after the process name
    f = only("NVRM: Xid (PCI:0000:9b:00): 8, pid=5678, name=idle_timeout\n", "xid")
    assert (f["pid"], f["process"]) == (5678, "idle_timeout")


def test_nvlink5_unit_with_sub_unit():
    # gpud xid/nvlink_logs_test.go
    f = only("NVRM: Xid (PCI:0000:04:00): 146, TLW_RX/TLW_RX_PIPE0 Nonfatal XC0 i0 Link 00 (0x0000000a 0x00000001 "
             "0x00000000 0x00000000)\n", "xid")
    assert f["unit"] == "TLW_RX/TLW_RX_PIPE0" and f["nvlink_severity"] == "Nonfatal"


def test_xid74_register_words():
    # NVSentinel parser/csv_test.go
    f = only("NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on "
             "link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", "xid")
    assert f["registers"] == [0, 0, 0x10000, 0, 0, 0, 0] and f["link"] == 14


PANICS = [  # gpud components/os/kmsg_matcher_test.go
    ("<0>[2315424.098863] Kernel panic - not syncing: hung_task: blocked tasks\n"
     "<4>[2315424.099010] CPU: 24 PID: 1364 Comm: khungtaskd "
     "Tainted: P           OE     5.15.0-1053-nvidia #54-Ubuntu\n",
     (24, 1364, "khungtaskd"), "kernel-hang"),
    ("Oct 16 20:47:19 V09 kernel: Kernel panic - not syncing: hung_task: blocked tasks\n"
     "Oct 16 20:47:19 V09 kernel: NMI backtrace for cpu 31 skipped: idling at intel_idle+0x87/0x130\n"
     "Oct 16 20:47:19 V09 kernel: CPU: 1 PID: 210 Comm: khungtaskd Tainted: P           OE     5.4.0-149-generic\n",
     (1, 210, "khungtaskd"), "kernel-hang"),
    ("[  789.012345] Kernel panic - not syncing: out of memory. panic_on_oom is selected\n"
     "[  789.012346] CPU: 16 PID: 42 Comm: kswapd0 Not tainted 5.15.0-72-generic #79-Ubuntu\n",
     (16, 42, "kswapd0"), "host-oom"),
]


def test_kernel_panics_name_the_task_and_the_reason_decides_the_cause():
    for text, (cpu, pid, process), cause in PANICS:
        f = only(text, "kernel-panic")
        assert (f["cpu"], f["pid"], f["process"]) == (cpu, pid, process)
        assert causes(text)[0] == cause


OOPSES = [
    # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1107
    ("Apr 28 10:17:39 nixos kernel: BUG: kernel NULL pointer dereference, address: 0000000000000030\n"
     "Apr 28 10:17:39 nixos kernel: Oops: Oops: 0000 [#1] SMP NOPTI\n"
     "Apr 28 10:17:39 nixos kernel: CPU: 0 UID: 1000 PID: 28651 "
     "Comm: python3.14 Tainted: G           O        6.18.24\n"
     "Apr 28 10:17:39 nixos kernel: RIP: 0010:nvidia_vma_access+0x1b/0x350 [nvidia]\n", "nvidia", "gpu-hang"),
    # https://github.com/Askannz/optimus-manager/issues/176
    ("Nov 15 07:37:53 chaoran-zenbook kernel: BUG: unable to handle page fault for address: 0000000000001a81\n"
     "Nov 15 07:37:53 chaoran-zenbook kernel: Oops: 0000 [#2] PREEMPT SMP PTI\n"
     "Nov 15 07:37:53 chaoran-zenbook kernel: CPU: 11 PID: 1094 Comm: irq/181-nvidia Tainted: P      D W  OE\n"
     "Nov 15 07:37:53 chaoran-zenbook kernel: RIP: 0010:exit_thread+0x12/0xc0\n", None, "kernel-hang"),
]


def test_one_oops_is_one_event_with_its_faulting_module():
    for text, module, cause in OOPSES:
        f = only(text, "kernel-oops")
        assert f.get("module") == module
        assert causes(text)[0] == cause


def test_old_kernel_oom_choice_and_kill_are_one_event():
    # gpud memory/kmsg_matcher_test.go (cadvisor's legacy format)
    text = ("Memory cgroup out of memory: Kill process 19636 (evil-program2) score 1923 or sacrifice child\n"
            "Killed process 19636 (evil-program2) total-vm:1460016kB, anon-rss:1414008kB, file-rss:4kB\n")
    f = only(text, "oom-kill")
    assert f["pid"] == 19636 and f["cgroup"] is True and f["anon_rss_kb"] == 1414008


JOB_ENDS = [
    # https://github.com/ArjunaCluster/ArjunaUsers/issues/52
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may "
     "have been killed by the cgroup out-of-memory handler.\n", "oom-kill", "host-oom"),
    # https://github.com/ollama/ollama/issues/9322
    ("Feb 24 11:16:32 adl systemd[1]: ollama.service: Failed with result 'oom-kill'.\n", "oom-kill", "host-oom"),
    # https://github.com/IBM/FfDL/issues/127
    ("135 | 1534166953117 | /usr/local/bin/train.sh: line 18:    "
     "36 Killed                  python3 convolutional_network.py\n",
     "child-failed", "host-oom"),
    # https://github.com/2U1/Qwen-VL-Series-Finetune/issues/79
    ("[ERROR] [launch.py:325:sigkill_handler] exits with return code = -9\n", "child-failed", "host-oom"),
    # https://github.com/horovod/horovod/issues/585
    ("[HOST:03599] Signal: Segmentation fault (11)\n", "fatal-signal", "native-crash"),
]


def test_schedulers_and_shells_say_how_a_job_ended():
    for text, kind, cause in JOB_ENDS:
        assert kind in [k for k, _ in kinds(text)], text
        assert causes(text)[0] == cause, text
    # a plain non-zero exit code is not a signal
    assert causes("Job exited with error code 1\n") == []


TOOLCHAIN = [
    # https://github.com/triton-lang/triton/issues/8539
    ("ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n", "arch-mismatch"),
    # https://github.com/facebookresearch/xformers/issues/659
    ("2023-01-30 07:14:49 [warning  ] Internal Triton PTX codegen error: ptxas fatal   : Value 'sm_89' is not "
     "defined for option 'gpu-name'\n", "arch-mismatch"),
    # https://github.com/numba/numba/issues/8961
    ("ptxas application ptx input, line 9; fatal   : Unsupported .version 8.1; current version is '8.0'\n",
     "driver-mismatch"),
]


def test_toolchains_that_cannot_build_for_the_gpu():
    for text, cause in TOOLCHAIN:
        assert causes(text)[0] == cause, text


def test_cuda_errors_found_by_their_message_in_any_wording():
    # https://github.com/lllyasviel/Fooocus/issues/2169 and https://github.com/vllm-project/vllm/issues/4940
    for text in ('When I start Fooocus I get "_Unexpected error from cudaGetDeviceCount(). Error 804: forward '
                 'compatibility was attempted on non supported HW"\n',
                 "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
                 "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility "
                 "was attempted on non supported HW\n"):
        assert causes(text)[0] == "driver-mismatch"


def test_framework_oom_wordings():
    for text in (
        # https://github.com/cupy/cupy/issues/2537
        "Exception in main training loop: Out of memory allocating "
        "25,600,000 bytes (allocated so far: 3,635,267,072 bytes).\n",
        # https://github.com/microsoft/onnxruntime/issues/16307
        "Non-zero status code returned while running ReduceSum node. onnxruntime::BFCArena::AllocateRawInternal "
        "Failed to allocate memory for requested buffer of size 939524096\n",
    ):
        assert causes(text)[0] == "gpu-oom"


def test_launcher_prefixes_are_taken_off():
    # https://github.com/vllm-project/vllm/issues/21633 (docker compose)
    text = ("vllm-1  | NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current "
            "PyTorch installation.\n")
    assert causes(text)[0] == "arch-mismatch"


def test_top_findings_are_different_causes():
    for text in (GSP_TIMEOUT, API_WRAPPED + OFF_BUS[2] + JOB_ENDS[0][0]):
        findings = analyze_text(text).findings
        distinct = len({f.cause for f in findings if f.consequence_of is None})
        assert distinct >= 2
        assert len({f.cause for f in findings[:distinct]}) == distinct


HOST_MESSAGES = [  # NVSentinel's syslog monitor tests and gpud's infiniband / peermem / fabric-manager tests
    ("kernel: [   17.982092] mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health compromised - reached "
     "miss count", "mlx5-health", "nccl-comm-error"),
    ("kernel: [   66.816635] mlx5_core 0000:03:00.0: wait_func:964:(pid 112): ENABLE_HCA(0x104) timeout. Will cause a "
     "leak of a command resource", "mlx5-command-timeout", "nccl-comm-error"),
    ("ny2g1r12hh2 kernel: mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the "
     "PCIe slot (27W).", "mlx5-pcie-power", "nccl-comm-error"),
    ("nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing",
     "peermem-invalid-context", "nccl-comm-error"),
    ("nvidia-peermem ERROR detected invalid context, skipping further processing",
     "peermem-invalid-context", "nccl-comm-error"),
    ("kernel: [   17.982217] mlx5_core 0000:41:00.0: print_health_info:458:(pid 0): synd 0x8: unrecoverable hardware "
     "error", "mlx5-unrecoverable", "nccl-comm-error"),
    ("kernel: [123.456792] NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue timed out", "mlx5-tx-timeout",
     "nccl-comm-error"),
    ("mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 268269): ACCESS_REG(0x805) op_mod(0x1) failed",
     "mlx5-access-reg", "nccl-comm-error"),
    ("mlx5_port_module_event:2345:(pid 1234): Port module event[warning]: module 1, Cable error, High Temperature",
     "mlx5-module-temperature", "nccl-comm-error"),
    ("[Sep 17 2024 06:01:46] [ERROR] [tid 1230079] failed to find the GPU handle 5410063385821516767 in the multicast "
     "team request setup 6130285411925746235.", "fm-multicast", "gpu-nvlink"),
]


def test_nic_peer_memory_and_fabric_manager_lines():
    for text, family, cause in HOST_MESSAGES:
        assert only(text + "\n", "host-message")["family"] == family
        assert causes(text + "\n")[0] == cause


def test_fabric_manager_nothing_to_do_is_shown_but_blames_nothing():
    # https://github.com/data-infra/cube-studio/issues/29: no NVSwitch on a 2x RTX 4090 box
    text = ("request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to "
            "do [NV_WARN_NOTHING_TO_DO]\n")
    assert only(text, "host-message")["family"] == "fm-nothing-to-do"
    assert causes(text) == []


def test_link_flaps_count_and_only_a_storm_is_a_finding():
    # azurehpc-health-checks test/data/1dev_6flap_syslog
    flap = "Aug 17 06:18:01 jplc7eb7-vm-0 systemd-networkd[5398]: ib6: lost carrier\n"
    assert causes(flap) == []
    report = analyze_text(flap * 6)
    assert [e.count for e in report.events if e.kind == "host-message"] == [6]
    assert report.findings[0].signature == "nic-warning"


CONTAINER_BANNERS = [
    # https://github.com/NVIDIA/nvidia-docker/issues/1479 (wrapped after "but")
    "ERROR: This container was built for NVIDIA Driver Release 450.51 or later, but\n"
    "       version 440.33.01 was detected and compatibility mode is UNAVAILABLE.\n\n"
    "       [[CUDA Driver UNAVAILABLE (cuInit(0) returned 804)]]\n",
    # https://github.com/hiyouga/LlamaFactory/issues/5962 (the wrap lost its space)
    "This container was built for NVIDIA Driver Release 545.23 or later, butversion 535.104.05 was detected and "
    "compatibility mode is UNAVAILABLE\n",
    # https://github.com/eugr/spark-vllm-docker/issues/266
    "ERROR: This container was built for NVIDIA Driver Release 590.48 or later, but\n"
    "       version 580.159.03 was detected and compatibility mode is UNAVAILABLE.\n",
]


def test_ngc_container_banner_names_both_drivers():
    expected = [("450.51", "440.33.01"), ("545.23", "535.104.05"), ("590.48", "580.159.03")]
    for text, (required, found) in zip(CONTAINER_BANNERS, expected):
        f = only(text, "driver-error")
        assert (f["driver_required"], f["driver_version_found"]) == (required, found)
        assert causes(text)[0] == "driver-mismatch"


def test_worker_signal_wrapped_inside_its_name():
    # https://github.com/fastai/docker-containers/issues/21 (hard-wrapped at 65 columns)
    wrapped = ("RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\n"
               "error. It is possible that dataloader's workers are out of shared\n"
               "memory. Please try to raise your shared memory limit.\n")
    # https://github.com/pytorch/pytorch/issues/16979 (the same message on one line)
    whole = ("RuntimeError: DataLoader worker (pid 2477) is killed by signal: Bus error. It is possible that "
             "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n")
    for text in (wrapped, whole):
        assert only(text, "bus-error")["signal"] == "SIGBUS"
        assert causes(text)[0] == "shm-exhausted"


def test_unrecognised_root_shows_its_suspects_in_every_format():
    from postmortem.render import render

    # the summary of https://github.com/geerlingguy/raspberry-pi-pcie-devices/issues/26 and a driver line
    # no signature knows (an unknown function; its words say it failed)
    report = analyze_text("[   37.673624] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"
                          "[   37.60] NVRM: GPU0 kfooBar_IMPL: something failed <b>badly</b>\n")
    suspect = report.event(report.suspects[0])
    assert suspect.kind == "driver-message" and suspect.where.line == 2
    assert "kfooBar_IMPL" in render("text", report)
    assert "kfooBar_IMPL" in render("markdown", report)
    html = render("html", report, "zh-CN")
    assert "嫌疑行" in html and "&lt;b&gt;badly" in html and "<b>badly" not in html


GLOG_CHECKS = [
    # glog's CHECK_EQ as Caffe, MXNet and DIGITS print it; the message wins over old toolkits' numbers
    ("F0519 13:47:44.378706 22962 math_functions.cu:79] Check failed: error == cudaSuccess (4 vs. 0)  unspecified "
     "launch failure", "cudaErrorLaunchFailure"),  # https://github.com/BVLC/caffe/issues/5632
    ("F0311 02:01:35.163677  6921 benchmark.cpp:92] Check failed: error == cudaSuccess (74 vs. 0)  misaligned "
     "address", "cudaErrorMisalignedAddress"),  # https://github.com/BVLC/caffe/issues/5384
    ("Check failed: error == cudaSuccess (3 vs. 0)  initialization error",
     "cudaErrorInitializationError"),  # https://github.com/NVIDIA/nvidia-docker/issues/382
    ("Check failed: error == cudaSuccess (46 vs. 0)  all CUDA-capable devices are busy or unavailable",
     "cudaErrorDevicesUnavailable"),  # https://github.com/NVIDIA/DIGITS/issues/2005 (an older wording: by number)
]


def test_glog_check_failures_name_the_cuda_error():
    for text, error in GLOG_CHECKS:  # the event kind follows the cause the table gives the error
        kind = knowledge.cuda_error_kind(knowledge.cuda_error(error).cause)
        assert only(text + "\n", kind)["error"] == error, text
    # https://github.com/naibaf7/caffe/issues/47: a library status by number in the same form
    assert only("Check failed: status == CUDNN_STATUS_SUCCESS(1 vs. 0)\n", "library-error")["status"] == \
        "CUDNN_STATUS_NOT_INITIALIZED"


def test_libraries_refusing_an_older_architecture():
    for text in (
        # https://github.com/vllm-project/vllm/issues/8189 (RTX 2080 Ti)
        "ERROR 01-11 13:09:40 engine.py:366] RuntimeError: Error in model execution (input dumped to "
        "/tmp/err_execute_model_input_20250111-130939.pkl): FlashAttention only supports Ampere GPUs or newer.\n",
        # https://github.com/Dao-AILab/flash-attention/issues/1540 (a build without sm_120, on an RTX 5090)
        "!!! Exception during processing !!! FlashAttention only supports Ampere GPUs or newer.\n",
    ):
        f = only(text, "arch-unsupported")
        assert (f["feature"], f["min_family"]) == ("FlashAttention", "Ampere")
        assert causes(text)[0] == "arch-mismatch"


def test_scheduler_memory_limits_are_oom_kills():
    for text in (
        # https://github.com/wheaton5/souporcell/issues/20 (LSF)
        "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\nExited with exit code 143.\n",
        # https://github.com/cBio/cbio-cluster/issues/251 (PBS/Torque)
        "Job deleted at request of root@mskcc-fe1.local\njob 3132467 exceeded MEM usage hard limit (2528 > 1126)\n",
    ):
        assert "oom-kill" in [k for k, _ in kinds(text)]
        assert causes(text)[0] == "host-oom"


def test_old_kernel_memcg_report_without_its_kill_line():
    # https://github.com/kvcache-ai/ktransformers/issues/637 (dmesg -T in a Chinese locale)
    text = ("[四 3月 20 21:01:25 2025] Task in "
            "/docker/6b4502403e158b560d76f212e9d1ebf6d498a7725fd9198d50b26038c1957f9c "
            "killed as a result of limit of host\n")
    assert only(text, "oom-kill")["cgroup"] is True and causes(text)[0] == "host-oom"
    # gpud's cadvisor test: with the kill line after it, one event
    legacy = ("Task in /mem2 killed as a result of limit of /mem3\n"
              "Memory cgroup out of memory: Kill process 19636 (evil-program2) score 1923 or sacrifice child\n"
              "Killed process 19636 (evil-program2) total-vm:1460016kB, anon-rss:1414008kB, file-rss:4kB\n")
    assert only(legacy, "oom-kill")["pid"] == 19636


def test_driver_too_old_in_loader_and_encoder_wordings():
    for text in (
        # https://github.com/ollama/ollama/issues/6604
        'time=2024-09-03T16:36:00.853+08:00 level=DEBUG source=gpu.go:537 msg="Unable to load cudart" '
        'library=C:\\Users\\asus\\cudart64_12.dll error="your nvidia driver is too old or missing.  If you have a '
        'CUDA GPU please upgrade to run ollama"\n',
        # https://github.com/HandBrake/HandBrake/issues/6506 (FFmpeg's NVENC)
        "[hevc_nvenc @ 000001f2768adcc0] Driver does not support the required nvenc API version. Required: 12.2 "
        "Found: 12.1\n[hevc_nvenc @ 000001f2768adcc0] The minimum "
        "required Nvidia driver for nvenc is 551.76 or newer\n",
        # https://github.com/NVIDIA/TensorRT/issues/2879 (error 35: the driver is older than the runtime)
        "[04/15/2023-04:37:46] [W] [TRT] CUDA initialization failure with error: 35. Please check your CUDA "
        "installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html\n",
    ):
        assert causes(text)[0] == "driver-mismatch", text


def test_glued_markdown_fence_and_nccl_shm_fallocate():
    # https://github.com/DreamTechAI/Direct3D-S2/issues/32: the fence glued to the first line
    fenced = ("```NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
              "installation.\nThe current PyTorch install supports "
              "CUDA capabilities sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 "
              "sm_86 sm_90.\n```\n")
    assert causes(fenced)[0] == "arch-mismatch"
    # https://github.com/NVIDIA/nccl/issues/290
    shm = ("gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call "
           "to posix_fallocate failed : No space left on device\n"
           "gpu2-ru7:2143:2561 [1] NCCL INFO include/shm.h:41 -> 2\n")
    assert causes(shm)[0] == "shm-exhausted"


def test_suspects_of_a_summary_are_the_lines_before_it():
    report = analyze_text("[   37.60] NVRM: GPU0 kfooBar_IMPL: early step failed\n"
                          "[   37.673624] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n"
                          "[   38.10] NVRM: GPU0 kbazQux_IMPL: later step failed\n")
    assert [report.event(i).where.line for i in report.suspects] == [1]


def test_kernel_asserts_from_cu_files_with_or_without_block_and_thread():
    # https://github.com/PaddlePaddle/PaddleDetection/issues/4638 (Paddle's kernel enforce: no block/thread)
    paddle = ("Error: /paddle/paddle/fluid/operators/bce_loss_op.cu:38 Assertion `(x >= static_cast<T>(0)) && "
              "(x <= one)` failed. Input is expected to be within the interval [0, 1], but recieved nan.\n")
    # https://github.com/LlamaChinese/Llama-Chinese/issues/299 (PyTorch's, backticks lost in Markdown)
    torch = ('../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [19,0,0] Assertion '
             '-sizes[i] <= index && index < sizes[i] && "index out of bounds" failed.\n')
    assert only(paddle, "device-assert")["file"].endswith("bce_loss_op.cu")
    assert only(torch, "device-assert")["thread"] == "19,0,0"
    # a host assert in a header is not a device assert (https://github.com/PaddlePaddle/Paddle/issues/40394)
    host = ("op_function_generator: /home/Paddle/paddle/utils/small_vector.h:334: T& paddle::SmallVectorTemplateCommon"
            "<T>::at(size_type): Assertion `idx < size()' failed.\n")
    assert "device-assert" not in [k for k, _ in kinds(host)]


def test_per_architecture_extension_builds_and_gpu_allocators():
    # https://github.com/NVlabs/tiny-cuda-nn/issues/230
    tcnn = "OSError: Could not find compatible tinycudann extension for compute capability 75.\n"
    assert only(tcnn, "arch-unsupported")["sm"] == "sm_75" and causes(tcnn)[0] == "arch-mismatch"
    # https://github.com/Improbable-AI/walk-these-ways/issues/20 (PhysX in Isaac Gym)
    physx = "PxgCudaDeviceMemoryAllocator fail to allocate memory 339738624 bytes!! Result = 2\n"
    assert causes(physx)[0] == "gpu-oom"


DATACENTER = [
    # https://github.com/canonical/microk8s/issues/2119
    ("fabric manager NVIDIA GPU driver interface version 460.91.03 don't match with driver version 460.73.01. "
     "Please update with matching NVIDIA driver package.", "driver-mismatch"),
    # https://github.com/dstackai/dstack/issues/2348 (the journal line cut short)
    ("Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager NVIDIA GPU driver interface version "
     "535.183.01 don'", "driver-mismatch"),
    # https://github.com/NVIDIA/gpu-operator/issues/375 (CUDA's vectorAdd sample in the operator's validator)
    ("Failed to allocate device vector A (error code system not yet initialized)!", "gpu-nvlink"),
    # https://github.com/NVIDIA/gpu-operator/issues/523
    ("May 05 14:13:15 ip-10-51-52-158.us-west-2.compute.internal kubelet[33460]: nvidia-container-cli: detection "
     "error: driver error: timed out: unknown", "gpu-hang"),
    # https://github.com/awslabs/awsome-distributed-ai/issues/647 (EFA)
    ("Libfabric EFA provider has encountered an internal error:\n\nLibfabric error: (-12) Cannot allocate memory\n"
     "EFA internal error: (4112) Failure to post internal receive buffers", "nccl-comm-error"),
    # https://github.com/aws/aws-ofi-nccl/issues/584
    ("register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, Error: "
     "Invalid argument", "nccl-comm-error"),
    # https://github.com/mesosphere/konvoy-image-builder/pull/1200
    ("ERROR: modpost: GPL-incompatible module nvidia.ko uses GPL-only symbol 'rcu_read_unlock_strict'",
     "driver-mismatch"),
    # https://github.com/NVIDIA/k8s-device-plugin/issues/23
    ("loading NVML\nFailed to start nvml with error:  could not load NVML library", "driver-mismatch"),
    # https://github.com/dstndstn/tractor/issues/126 (Perlmutter's Slurm: singular, underscore)
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=43622791.67. Some of the step tasks have been OOM "
     "Killed.", "host-oom"),
]


def test_datacenter_node_failures():
    for text, cause in DATACENTER:
        assert causes(text + "\n")[:1] == [cause], text


PLATFORM_AND_DISTRO = [
    # https://github.com/Frogging-Family/nvidia-all/issues/34 (DKMS)
    ("Error! Bad return status for module build on kernel: 5.12.0-rc5-144-tkg-cfs (x86_64)", "driver-mismatch"),
    # https://github.com/Tk-Glitch/PKGBUILDS/issues/414 (NVIDIA's Kbuild sanity checks, quoted)
    ("> make[2]: *** [/var/lib/dkms/nvidia/435.27.08/build/Kbuild:181: module_symvers_sanity_check] Error 1",
     "driver-mismatch"),
    # https://github.com/void-linux/void-packages/issues/4473
    ("nvidia-modeset: Version mismatch: nvidia.ko(410.73) nvidia-modeset.ko(390.87)", "driver-mismatch"),
    # https://github.com/coiled/feedback/issues/338
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded", "driver-mismatch"),
    # https://github.com/Nerogar/OneTrainer/issues/981 (RunPod)
    ("> nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a "
     "newer version, or use an earlier cuda container: unknown", "driver-mismatch"),
    # https://github.com/aws/sagemaker-rl-container/issues/61
    ("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory", "driver-mismatch"),
    # https://github.com/kubeflow/pipelines/issues/4275 (kubelet eviction)
    ("This step is in Failed state with this message: The node was low on resource: memory. Container main was "
     "using 1783932Ki, which exceeds its request of 0.", "host-oom"),
    # https://github.com/kubeflow/trainer/issues/1184 (a CHECK condition names errors that are not the error)
    ("tensorflow/stream_executor/cuda/cuda_driver.cc:175] Check failed: err == cudaSuccess || err == "
     "cudaErrorInvalidValue Unexpected CUDA error: out of memory", "gpu-oom"),
    # https://github.com/kubeflow/trainer/issues/1158
    ("Non-OK-status: GpuLaunchKernel (FillPhiloxRandomKernelLaunch <Distribution>, num_blocks, block_size, 0, "
     "d.stream (), gen, data, size, dist) status: Internal: out of memory", "gpu-oom"),
    # https://github.com/rapidsai/deployment/issues/523 (RMM under XGBoost)
    ("> xgboost.core.XGBoostError: [02:14:02] device_helpers.cuh:393: Memory allocation error on worker 0: "
     "std::bad_alloc: out_of_memory: CUDA error at: /opt/conda/include/rmm/mr/device/cuda_memory_resource.hpp",
     "gpu-oom"),
]


def test_platform_and_distribution_wordings():
    for text, cause in PLATFORM_AND_DISTRO:
        assert causes(text + "\n")[:1] == [cause], text


def test_fourth_round_wordings():
    for text, cause in (
        # https://github.com/PaddlePaddle/PaddleOCR/issues/9391 and https://github.com/PaddlePaddle/PaddleSpeech/issues/790
        ("ERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by insufficient shared "
         "memory (shm), please check whether use_shared_memory is set and storage space in /dev/shm is enough",
         "shm-exhausted"),
        # https://github.com/triton-lang/triton/issues/130 (an old Triton ran the message together)
        ("triton.code_gen.OutOfResources: out of resource: shared memoryRequired: 65536Hardware limit: 49152",
         "launch-failure"),
        # https://github.com/alipay/PainlessInferenceAcceleration/issues/35
        ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 163842, Hardware "
         "limitation: 101376. reducing the block size or `num_stages` may help", "launch-failure"),
        # https://github.com/hiyouga/LlamaFactory/issues/2902 (progress bars and the watchdog line run together)
        ("> 2%|▏ | 13/620 [01:07<50:20, 4.98s/it][rank0]:[E1123 00:52:57.664949121 ProcessGroupNCCL.cpp:607] [Rank 0] "
         "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1516, OpType=ALLREDUCE, NumelIn=25, last "
         "enqueued NCCL work: 1516, last completed NCCL work: 1515.", "nccl-timeout"),
    ):
        assert causes(text + "\n")[:1] == [cause], text


def test_driver_errors_named_in_words_as_cycles_prints_them():
    for text, error in (
        # https://github.com/KillzXGaming/Switch-Toolbox/issues/657 (Blender Cycles, overclocked GPU)
        ("`Illegal address in CUDA queue copy_from_device (integrator_shade_surface integrator_sorted_paths_array "
         "prefix_sum)`", "cudaErrorIllegalAddress"),
        # https://github.com/boberfly/GafferCycles/issues/50
        ("CUDA error: Illegal address in cuMemcpyDtoH( (char *)mem.host_pointer + offset, (CUdeviceptr)"
         "mem.device_pointer + offset, size), line 970", "cudaErrorIllegalAddress"),
        ("CUDA error at cuCtxCreate: Illegal address", "cudaErrorIllegalAddress"),
        # https://github.com/jesterKing/CCSycles/issues/44 (the enum suffix)
        ("CUDA error: ILLEGAL_ADDRESS in cuCtxSynchronize()", "cudaErrorIllegalAddress"),
        # https://github.com/vosen/ZLUDA/issues/223
        ("Out of memory in cuStreamCreate(&cuda_stream_, CU_STREAM_NON_BLOCKING) (C:\\Users\\blender\\git\\"
         "blender-v410\\blender.git\\intern\\cycles\\device\\cuda\\queue.cpp:21)", "cudaErrorMemoryAllocation"),
    ):
        found = {e.fields.get("error") for e in analyze_text(text + "\n").events}
        assert error in found, text
    assert kinds("Something else in CUDA queue maybe\n") == []


def test_fifth_round_wordings():
    # https://github.com/mila-iqia/milabench/pull/269 (every line prefixed by the benchmark runner)
    timeout = ("dinov2-giant-nodes.cn-d003.nolog [stderr] [rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] "
               "[PG 0 (default_pg) Rank 3] Timeout at NCCL work: 2070, last enqueued NCCL work: 2070, last completed "
               "NCCL work: 2069.\n")
    assert only(timeout, "nccl-timeout")["seq"] == 2070 and causes(timeout)[0] == "nccl-timeout"
    # https://github.com/motokimura/spacenet_building_detection/issues/3 (CuPy before v8)
    cupy = "Exception in main training loop: out of memory to allocate 163840000 bytes (total 1673061376 bytes)\n"
    assert causes(cupy)[0] == "gpu-oom"


def test_a_go_program_says_how_the_child_it_ran_ended():
    # https://github.com/ollama/ollama/issues/4601
    assert only("Error: llama runner process has terminated: signal: segmentation fault", "child-failed") == {
        "reporter": "go", "signal": "SIGSEGV", "core_dumped": False}
    # https://github.com/ollama/ollama/issues/5904
    assert only("llama runner process has terminated: signal: aborted (core dumped)", "child-failed") == {
        "reporter": "go", "signal": "SIGABRT", "core_dumped": True}
    # https://github.com/Mintplex-Labs/anything-llm/issues/2162 (the server's own log line)
    line = ('time=2024-08-22T15:25:14.569-05:00 level=ERROR source=sched.go:451 msg="error loading llama server" '
            'error="llama runner process has terminated: signal: aborted (core dumped)"')
    assert only(line, "child-failed")["signal"] == "SIGABRT"
    assert causes("Error: llama runner process has terminated: signal: segmentation fault")[0] == "native-crash"


def test_nvml_clients_in_go_name_the_version_mismatch():
    # https://github.com/NVIDIA/nvidia-docker/issues/584 (after a yum update)
    assert only("nvidia-docker | 2017/12/21 05:04:46 Error: nvml: Driver/library version mismatch",
                "nvml-error")["error"] == "Driver/library version mismatch"
    # the same line quoted in two public notes on nvidia-docker 1 (found by the code index), after driver upgrades
    assert causes("nvidia-docker | 2018/01/11 15:09:04 Error: nvml: Driver/library version mismatch")[0] == \
        "driver-mismatch"


def test_a_bus_error_in_a_job_is_first_a_full_dev_shm():
    # https://github.com/facebookresearch/PyTorch-BigGraph/issues/33 and https://github.com/NVIDIA/retinanet-examples/issues/59
    # (both settled by a larger /dev/shm in Docker)
    assert causes("2019-04-16 11:58:14  Initializing global model...\nBus error (core dumped)\n")[0] == "shm-exhausted"
    assert causes("   classes: 80, anchors: 9\nBus error (core dumped)\n")[0] == "shm-exhausted"
    assert causes("Segmentation fault (core dumped)\n")[0] == "native-crash"


# CUDA's "unknown error" (999): at initialisation, the driver's state (pytorch/pytorch#88639, gbionics/jaxsim#50,
# NixOS/nixpkgs#348769: nvidia_uvm after a suspend); elsewhere, a weak guess of the same (NVIDIA/DIGITS#2181).
UNKNOWN_AT_INIT = [
    "/opt/anaconda3/lib/python3.8/site-packages/torch/cuda/__init__.py:88: UserWarning: CUDA initialization: CUDA "
    "unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable "
    "CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. (Triggered internally at "
    "../c10/cuda/CUDAFunctions.cpp:109.)\n  return torch._C._cuda_getDeviceCount() > 0\n",
    "2023-10-04 12:33:47.594219: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] failed call to cuInit: "
    "CUDA_ERROR_UNKNOWN: unknown error\nNo GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun "
    "for more info.)\n",
    ">>> import torch; torch.cuda.is_available()\n"
    "pip_packages/lib/python3.11/site-packages/torch/cuda/__init__.py:128: "
    "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g."
    " changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. "
    "(Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)\n  return torch._C._cuda_getDeviceCount() > 0\n"
    "False\n",
]


def test_cuda_unknown_error_elsewhere_is_a_weak_guess_that_an_xid_outranks():
    from postmortem.render import render

    alone = analyze_text("Train Caffe Model: Check failed: error == cudaSuccess (999 vs. 0) unknown error\n")
    assert (alone.findings[0].signature, alone.findings[0].confidence) == ("cuda-unknown-error", 0.3)
    with_xid = analyze_text("[ 3401.104512] NVRM: Xid (PCI:0000:3b:00): 79, pid=2934, GPU has fallen off the bus.\n"
                            "Train Caffe Model: Check failed: error == cudaSuccess (999 vs. 0) unknown error\n")
    assert with_xid.findings[0].cause == "gpu-off-bus"
    assert "同一故障也报告为 cuda-unknown-error" in render("text", analyze_text(UNKNOWN_AT_INIT[0]), "zh-CN")


# GPUs without peer access under a direct multi-GPU path (sgl-project/sglang#552, NVIDIA/TensorRT-LLM#1625,
# sgl-project/sglang#4814): each thread's fix was to turn the custom all-reduce off.
PEER_ACCESS = [
    "Failed: Cuda error /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:307 'peer access is not supported "
    "between these two devices'\n[rank1]:[W CudaIPCTypes.cpp:16] Producer process has been terminated before all "
    "shared CUDA tensors released. See Note [Sharing CUDA tensors]\n",
    "[TensorRT-LLM][ERROR] [TensorRT-LLM][ERROR] CUDA runtime error in error: peer access is not supported between "
    "these two devices\n",
    "When I start sglang on 4090 with `--tensor-parallel-size=2`, it crashed with `RuntimeError: CUDART error: peer "
    "access is not supported between these two devices`, we must disable custom all reduce on these devices.\n",
]


@pytest.mark.parametrize(("text", "signature", "cause"), [
    *((text, "cuda-unknown-at-init", "driver-mismatch") for text in UNKNOWN_AT_INIT),
    *((text, "peer-access-unsupported", "nccl-comm-error") for text in PEER_ACCESS),
])
def test_the_lead_of_each_real_text(text, signature, cause):
    lead = analyze_text(text).findings[0]
    assert (lead.signature, lead.cause) == (signature, cause)


def test_an_abort_right_after_an_error_is_that_errors_last_step():
    """Caffe's CHECK on an NCCL call, then glog's stack-trace banner and the shell's abort (BVLC/caffe#5599): the
    NCCL error leads and the abort is listed as what it explains, though the abort's own rule is surer."""
    report = analyze_text("F0508 14:41:40.563820 19761 parallel.cpp:195] Check failed: result == ncclSuccess (1 vs. 0)"
                          "  unhandled cuda error\n*** Check failure stack trace: ***\nAborted (core dumped)\n")
    lead = report.findings[0]
    assert lead.signature == "nccl-unhandled-cuda-error"
    assert [f.signature for f in report.findings if f.consequence_of == lead.signature] == ["native-abort"]


def test_an_abort_far_from_an_error_is_not_its_consequence():
    filler = "".join(f"step {i} loss 0.{i:03d}\n" for i in range(40))
    report = analyze_text("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version "
                          "2.20.5\n" + filler + "Aborted (core dumped)\n")
    assert not [f for f in report.findings if f.signature == "native-abort" and f.consequence_of]
