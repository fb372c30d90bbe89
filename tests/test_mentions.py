"""The reader of last resort (sources/mentions.py): known codes and phrases in layouts no format reader reads.

Every text here is real: a Kubernetes device plugin's health line (tests/corpus), TensorFlow's driver diagnostics
and nvidia-installer's Secure Boot prompt (tests/heldout/rnd1, from their public threads), gpud's own test data for
the negative wordings (../shared/peer-data/gpud/cases.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import GIVEN
from postmortem.cli import main
from postmortem.model import LOOSE
from postmortem.pipeline import analyze, analyze_text
from postmortem.sources import mentions

HERE = Path(__file__).parent
DEVICE_PLUGIN = HERE / "corpus" / "vale-xid94-contained-sm-akash-k8s-01" / "nvdp-device-plugin.log"
RND1 = HERE / "heldout" / "rnd1"


def test_an_xid_in_a_device_plugins_health_line_is_an_xid_event_read_loosely():
    """`XidCriticalError: Xid=94 on Device=GPU-...` (k8s-device-plugin's health.go): no format reader knows the
    layout; the code is the catalog's, so it is the Xid 94 event kernel_log would make, marked loose, and the
    finding it proves says so and is trusted less than the same Xid from the kernel log."""
    report = analyze([str(DEVICE_PLUGIN)])
    loose = [e for e in report.events if e.kind == "xid" and e.fields.get("read") == LOOSE]
    assert {e.fields["xid"] for e in loose} == {94}
    finding = next(f for f in report.findings if f.signature == "xid-94")
    assert "read loosely" in finding.confidence_reason
    kernel = analyze_text("[ 7.1] NVRM: Xid (PCI:0000:3b:00): 94, pid=12, name=python, Contained: SM (0x1).\n")
    same = next(f for f in kernel.findings if f.signature == "xid-94")
    assert finding.confidence < same.confidence
    assert not any(e.fields.get("read") == LOOSE for e in kernel.events)  # the format reader's line is its own


def test_negated_and_codeless_mentions_are_kept_as_unread_with_their_reason():
    """gpud's negative test wordings: "Regular log content without Xid errors", "no XID error"."""
    texts = ["Regular log content without Xid errors", "no XID error"]
    peer = GIVEN / "peer-data" / "gpud" / "cases.json"
    assert all(t in peer.read_text(encoding="utf-8") for t in texts)  # the wordings are gpud's own
    report = analyze_text("\n".join(texts) + "\n")
    assert not report.findings
    assert not [e for e in report.events if e.kind == "xid"]
    [info] = report.inputs
    assert [u.line for u in info.unread] == [1, 2]
    assert {u.reason for u in info.unread} <= {mentions.NEGATED, mentions.NO_CODE}


def test_a_number_the_catalog_does_not_know_is_no_event():
    report = analyze_text("health check: Xid 999 on GPU 0\nCUDNN_STATUS_SUCCESS returned\n")
    assert not [e for e in report.events if e.kind in ("xid", "library-error")]
    assert [u.reason for u in report.inputs[0].unread] == [mentions.UNKNOWN_CODE, mentions.HEALTHY]


def test_a_table_phrase_is_found_across_the_lines_a_paste_wrapped_it_on():
    """TensorFlow's diagnostics line (tensorflow/tensorflow#4768) cut in two where a terminal wrapped it, and the
    same words behind a quote marker: one driver-mismatch finding, on the lines of the phrase."""
    line = next(m for m in (RND1 / "rnd1drv-tf-kernel-dso-mismatch-01" / "train.log").read_text().splitlines()
                if "does not match DSO version" in m)
    cut = line.index("does not match")
    for text in (line[:cut] + "\n" + line[cut:] + "\n", "> " + line + "\n"):
        report = analyze_text(text)
        assert report.findings[0].signature == "phrase-driver-mismatch"
        [event] = [e for e in report.events if e.kind == "cause-phrase"]
        assert event.fields["cause"] == "driver-mismatch" and event.fields["read"] == LOOSE


def test_a_phrase_with_a_gap_reads_the_installers_secure_boot_prompt():
    """nvidia-installer's log: Secure Boot is on and the answer was to install without signing."""
    report = analyze([str(RND1 / "rnd1drv-gpuop-secureboot-unsigned-01")])
    phrases = {e.fields["phrase"].split()[0] for e in report.events if e.kind == "cause-phrase"}
    assert report.findings[0].cause == "driver-mismatch"
    assert {"Secure", "Kernel"} <= phrases


def test_unread_lines_are_in_json_and_behind_debug_in_text(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("Regular log content without Xid errors\n")
    runner = CliRunner()
    data = json.loads(runner.invoke(main, ["analyze", "--format", "json", str(path)]).output)
    assert data["inputs"][0]["unread"] == [{"line": 1, "text": "Regular log content without Xid errors",
                                            "reason": mentions.NO_CODE}]
    plain = runner.invoke(main, ["analyze", str(path)]).output
    debug = runner.invoke(main, ["analyze", "--debug", str(path)]).output
    assert "not read" not in plain
    assert f"line 1 not read ({mentions.NO_CODE}): Regular log content without Xid errors" in debug


def test_every_phrase_row_has_an_anchor_it_holds_and_a_signature_for_its_cause():
    from postmortem.signatures import load_default

    causes = {s.cause for s in load_default().signatures if s.id.startswith("phrase-")}
    for phrase in mentions.phrases():
        assert phrase.anchor.lower() in phrase.text.lower(), phrase.text
        assert phrase.cause in causes, phrase.text


# Round 3's general rules, each on the public text that called for it (tests/heldout/rnd3 and the threads cited).
RND3_WORDINGS = {
    # a Chinese input method's apostrophe (qixuema's thread): the same nvidia-smi failure
    "NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.": "driver-mismatch",
    # GitHub's title limit cut the CUDA message (facebookresearch/xformers#1329)
    "# When xFormers is compiled with Flash Attention it fails on RTX 5000 series - CUDA error (/workspace/xfrm2/"
    "third_party/flash-attention/hopper/flash_fwd_launch_template.h:188): no kernel image is availa": "arch-mismatch",
    # a CUDA error without a cause, raised in FlashAttention-3's Hopper-only sources (deepbeepmeep/Wan2GP#658)
    "CUDA error (/__w/xformers/xformers/third_party/flash-attention/hopper/flash_fwd_launch_template.h:180): "
    "invalid argument": "arch-mismatch",
    # a crash told in prose (wang-xinyu/tensorrtx, round 3)
    "the comunication stop and the socket closed by segmentation fault core dumped error.": "native-crash",
    # Python's subprocess prints a Windows crash status in decimal (bmaltais/kohya_ss, round 3)
    "subprocess.CalledProcessError: Command '['python.exe', 'flux_train.py']' returned non-zero exit status "
    "3221225477": "native-crash",
    # the kernel's OOM constraint line, the paste cut inside it (google-research/jax3d#121)
    "[Fri Sep 16 10:37:38 2022] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=37a2,mems_allowed=0-1,"
    "oom_memcg=/docker/37a209c3c5f0,task_memcg=/docke": "host-oom",
    # rows of data/cause-phrases.tsv, each in its public wording
    "nvidia-container-cli: initialization error: WSL environment detected but no adapters were found: unknown":
        "driver-mismatch",
    "[    5.879228] driverdog[2088]: modprobe: ERROR: could not insert 'nvidia': Operation not permitted":
        "driver-mismatch",
    "Temperature limit on GPU #3 reached, aborting...": "gpu-thermal-power",
    "Driver temperature threshold met on GPU # 1.": "gpu-thermal-power",
    "    The CUDA driver was found, but it is too old. The CUDA driver on your system supports CUDA version 5.5. The "
    "required CUDA version\n    is 7.5 or greater.": "driver-mismatch",
    "GENOA-06:4766:4780 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856":
        "launch-failure",
    "Random nodes crashes everyday because the PCIe switch detects a Data Link Protocol Error(DLP) which is a PCIe "
    "fatal error.": "pcie-bus",
    "# CUDA_ERROR_INVALID_SOURCE: device kernel image is invalid": "arch-mismatch",
}


def test_a_crash_told_in_words_is_not_read_where_the_text_denies_it_or_means_the_cuda_error():
    assert not analyze_text("The same model never segfaults on the A100.\n").findings
    report = analyze_text("RuntimeError: CUDA error: an illegal instruction was encountered\n")
    assert not [e for e in report.events if e.fields.get("reporter") == "told"]
    told = analyze_text("python dies with illegal instruction right at import on the old Xeon\n").events
    assert [e.fields["signal"] for e in told if e.fields.get("reporter") == "told"] == ["SIGILL"]


def test_a_message_cut_short_needs_its_first_words_whole_and_the_line_to_end_inside_it():
    assert mentions._cut_message("error: no kernel image is availa") is not None
    assert mentions._cut_message("error: no kernel image is availa, retrying") is None
    assert mentions._cut_message("no kernel") is None


# Round 4's general rules (tests/heldout/rnd4), each on public text of the family.
RND4_WORDINGS = {
    # frameworks' own compute-capability checks (Triton via unsloth, CUDA.jl, Paddle)
    "GPUTooOldForTriton: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, "
    "which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA "
    "capability 6.0": "arch-mismatch",
    "\u250c Error: Your Tesla V100-PCIE-32GB GPU (compute capability 7.0) is not supported on CUDA 13+.":
        "arch-mismatch",
    " The GPU architecture in your current machine is Pascal, which is not compatible with Paddle installation with "
    "arch: 70 75 80 86 , it is recommended to install the corresponding wheel package": "arch-mismatch",
    # user-space OOM killers (earlyoom via ComfyUI; systemd-oomd's wording)
    "Aug 04 10:39:10 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%":
        "host-oom",
    "Aug 04 10:39:10 debian earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3.13\": oom_score 1282":
        "host-oom",
    "systemd-oomd[812]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/train.scope due to memory "
    "pressure for /user.slice/user-1000.slice/user@1000.service being 71.20% > 50.00% for > 20s with reclaim "
    "activity": "host-oom",
    # Ray's OOM report, wrapped by the terminal (vllm-project/vllm#1160)
    "(raylet) node_manager.cc:3007: 2 Workers (tasks /\n actors) killed due to memory pressure (OOM), 0 Workers "
    "crashed due to other reasons": "host-oom",
    # deviceQuery's report of CUDA error 3 (dusty-nv/jetson-containers#149)
    "cudaGetDeviceCount returned 3\n-> initialization error\nResult = FAIL": "driver-mismatch",
    # the shell's word quoted in prose (kakaobrain/nerf-factory#12)
    "During training I simply get a Killed message and it stops.": "host-oom",
    # phrases of data/cause-phrases.tsv
    "Compiler version check failed:\n\nThe major and minor number of the compiler used to\ncompile the kernel:":
        "driver-mismatch",
    "[hevc_nvenc @ 0x55ca461fa380] Cannot load libnvidia-encode.so.1": "driver-mismatch",
    # a paragraph: nvidia-smi's words are read by its reader, the open-kernel-module fact beside them by this one
    "On these nodes the AMI loads the proprietary NVIDIA kernel module instead of the open one. The GPU (Blackwell, "
    "PCI ID `10de:2c3a`) is only supported by the open kernel modules, so the driver fails to initialize, "
    "`nvidia-smi` reports `No devices were found`, and GPU pods stay `Pending`.": "driver-mismatch",
}


# Round 5's general rules (tests/heldout/rnd5), each on public text of the family.
RND5_WORDINGS = {
    # Windows' commit limit, in English and in a Chinese Windows (pytorch/pytorch#59904, zbf1991/WeCLIP#5)
    "OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading "
    "\"C:\\envs\\3days\\lib\\site-packages\\torch\\lib\\caffe2_module_test_dynamic.dll\" or one of its dependencies.":
        "host-oom",
    "OSError: [WinError 1455] \u9875\u9762\u6587\u4ef6\u592a\u5c0f\uff0c\u65e0\u6cd5\u5b8c\u6210\u64cd\u4f5c\u3002 "
    "Error loading \"D:\\Anaconda3\\envs\\wssam\\lib\\site-packages\\torch\\lib\\cudnn_cnn_infer64_8.dll\"":
        "host-oom",
    # a CUDA error by number after the API call that returned it (PaddlePaddle/Paddle#22576)
    "Error: cudaGetDeviceCount failed in paddle::platform::GetCUDADeviceCountImpl, error code : 35, Please see detail "
    "in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html": "driver-mismatch",
    # DCGM's profiling module on a GSP fault (NVIDIA/dcgm-exporter#148, #319)
    "time=\"2023-08-01T02:47:46Z\" level=fatal msg=\"Failed to watch metrics: Error watching fields: The third-party "
    "Profiling module returned an unrecoverable error\"": "gpu-firmware",
    # ctypes' access violation after a model that did not load: the failed load's last step, the model file the cause
    # (LostRuins/koboldcpp#1026, whose thread found a converter newer than the loader)
    "llama_model_load: error loading model: done_getting_tensors: wrong number of tensors; expected 292, got 291\n"
    "llama_load_model_from_file: failed to load model\n"
    "OSError: exception: access violation reading 0x0000000000001894": "unknown",
    "llama_model_load: error loading model: done_getting_tensors: wrong number of tensors; expected 292, got 291\n"
    "llama_load_model_from_file: failed to load model": "unknown",
}


# Round 6's general rules (tests/heldout/rnd6), each on public text of the family.
RND6_WORDINGS = {
    # XLA's kernel lookup in a module built by a toolkit older than the GPU (google-deepmind/alphafold#863)
    "2023-11-13 12:38:08.130211: E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/cuda/"
    "cuda_driver.cc:628] failed to get PTX kernel \"shift_right_logical\" from module: CUDA_ERROR_NOT_FOUND: named "
    "symbol not found": "arch-mismatch",
    # Unreal Engine's Vulkan allocator, then the crash it ends in (carla-simulator/carla#2826)
    "[2020.05.05-13.06.48:571][ 84]LogVulkanRHI: Error: Out of Device Memory, Requested=24000.00Kb MemTypeIndex=7\n"
    "Signal 11 caught.\nSegmentation fault (core dumped)": "gpu-oom",
    # a DKMS build's make error in a Czech locale (void-linux/void-packages#53759)
    "make: *** [Makefile:236: /var/lib/dkms/nvidia/470.239.06/build] Chyba 2": "driver-mismatch",
    # a legacy driver's build on a newer kernel (NixOS/nix#4970)
    "In file included from /build/kernel/nv-acpi.c:15:\n/build/kernel/nv-linux.h:139:10: fatal error: "
    "linux/ioctl32.h: No such file or directory": "driver-mismatch",
    # Ray's memory monitor (skypilot-org/skypilot#622)
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.": "host-oom",
    # zsh's job control after a progress bar's last redraw (kijai/ComfyUI-HunyuanVideoWrapper#30)
    "Loading checkpoint shards:  25%|####     | 1/4 [00:01<00:05,  1.86s/it][1] \n60190 killed     python main.py":
        "host-oom",
    # Windows' word for a segfault, told (isaac-sim/IsaacLab#5140)
    "Isaac Sim 5.1.0 GUI mode crashes ~20s after \"app ready\" with access violation in `omni.kit.window.preferences`":
        "native-crash",
    # "device side assert" without its hyphen (shivammehta25/Matcha-TTS#115)
    "RuntimeError: CUDA error: device side assert triggered": "device-assert",
    # NCCL's shared-memory warning quoted in an XLA error, wrapped inside "No space / left on device"
    # (AI-Hypercomputer/xpk#492)
    "> failed: INTERNAL: NCCL operation ncclGroupEnd() failed: unhandled system error (run with\n"
    "> NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated)  'Error\n"
    "> while creating shared memory segment /dev/shm/nccl-TfciGV (size 31850880), error: No space\n"
    "> left on device (28)'.": "shm-exhausted",
}


# Round 7's general rules (tests/heldout/rnd7), each on public text of the family.
RND7_WORDINGS = {
    # the kernel's OOM report, pasted up to its call trace (NVIDIA/DALI#585)
    "[2612362.231458] python invoked oom-killer: gfp_mask=0x14000c0(GFP_KERNEL), nodemask=(null), order=0, "
    "oom_score_adj=829\n[2612362.231487]  mem_cgroup_out_of_memory+0x4b/0x80": "host-oom",
    # Python's name of the signal that ended a child (Linaqruf/kohya-trainer#70)
    "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train_network.py']' died with <Signals.SIGKILL: 9>.":
        "host-oom",
    # a library's word for a kernel without this architecture (1CatAI/1Cat-vLLM#87)
    "# [Bug]: gptq_marlin_repack has no SM70 kernel image in the official 1.2.1 wheel": "arch-mismatch",
    # TensorRT's builder short of GPU memory (cumulo-autumn/StreamDiffusion#161)
    "[W] Skipping tactic 0 due to insufficient memory on requested size of 11580055552 detected for tactic "
    "0x0000000000000000.": "gpu-oom",
    # DALI's allocator (NVIDIA/DALI#1137)
    "RuntimeError: Critical error in pipeline: Error when executing Mixed operator decoders__Image, instance name: "
    "\"decode\", encountered:\nCan't allocate 129499136 bytes on device 0.": "gpu-oom",
}


# Round 8's general rules (tests/heldout/rnd8), each on public text of the family from threads the round did not use.
RND8_WORDINGS = {
    # a bus error told in words (XPixelGroup/BasicSR#59): the shared-memory guess
    "Hi! I met a question about bus error using docker durring training.": "shm-exhausted",
    # Dask's nanny, a user-space memory monitor, old and new wording (modin-project/modin#1643,
    # CoffeaTeam/coffea-casa#409)
    "distributed.nanny - WARNING - Worker exceeded 95% memory budget. Restarting": "host-oom",
    "distributed.nanny.memory - WARNING - Worker tls://192.168.204.84:34937 (pid=129) exceeded 0% memory budget. "
    "Restarting...": "host-oom",
    # systemd's end of a service on a signal (systemd/systemd#13574)
    "Feb 24 14:28:21 huawei systemd[1]: iot.service: main process exited, code=dumped, status=11/SEGV":
        "native-crash",
    # a program's crash handler naming the signal by number (godotengine/godot#42718)
    "handle_crash: Program crashed with signal 11": "native-crash",
    # Kubernetes' container status, in YAML (kserve/kserve#2290) and as kubectl describes it
    # (kubernetes/kubernetes#122256): a SIGKILL, 128 + 9, the OOM guess
    "      lastFailureInfo:\n        exitCode: 137": "host-oom",
    "    Last State: Terminated\n      Reason: Error\n      Exit Code: 137": "host-oom",
    # a CUDA error's own message with its number as an error code (RELION's HANDLE_ERROR, 3dem/relion#491)
    "ERROR: unknown error in /usr/local/SOFTWARE/relion/src/motioncorr_runner.cpp at line 227 (error-code 999)":
        "driver-mismatch",
    # FlashAttention's architecture check (junjie18/CMT#95, Dao-AILab/flash-attention#51)
    "RuntimeError: Expected is_sm8x || is_sm75 to be true, but got false.  (Could this error message be improved?  "
    "If so, please report an enhancement request to PyTorch.)": "arch-mismatch",
    "RuntimeError: Expected is_sm80 to be true, but got false.": "arch-mismatch",
    # XLA's GPU compiler without a cuDNN handle (jax-ml/jax#14801)
    "2023-03-06 16:35:33.099836: E external/org_tensorflow/tensorflow/compiler/xla/status_macros.cc:57] INTERNAL: "
    "RET_CHECK failure (external/org_tensorflow/tensorflow/compiler/xla/service/gpu/gpu_compiler.cc:627) "
    "dnn != nullptr": "library-failure",
    # ONNX Runtime's TensorRT provider (styler00dollar/VSGAN-tensorrt-docker#74)
    "2024-08-16 05:40:41.192758318 [E:onnxruntime:, sequential_executor.cc:516 ExecuteKernel] Non-zero status code "
    "returned while running TRTKernel_graph_main_graph_3554867279417518500_0 node. Status Message: TensorRT EP "
    "execution context enqueue failed.": "library-failure",
    # a kernel compiled out for this architecture (huggingface/candle#2511)
    "Error: DriverError(CUDA_ERROR_NOT_FOUND, \"named symbol not found\") when loading is_u32_bf16": "arch-mismatch",
    # Vulkan's result codes, in C and in Vulkan-Hpp (ggml-org/llama.cpp#8492, #15256; vkmark/vkmark#17;
    # RPCS3/rpcs3#10926)
    "Bug: MESA: error: ../src/intel/vulkan/anv_device.c:4237: VK_ERROR_OUT_OF_DEVICE_MEMORY": "gpu-oom",
    "ggml_vulkan: Device memory allocation of size 118497280 failed.\n"
    "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory": "gpu-oom",
    "terminate called after throwing an instance of 'vk::DeviceLostError'\n"
    "  what():  VULKAN_HPP_NAMESPACE::Device::waitIdle: ErrorDeviceLost": "gpu-hang",
    "Nvidia drivers - Device lost (Driver crashed with unspecified error or stopped responding and recovered) "
    "(VK_ERROR_DEVICE_LOST)": "gpu-hang",
    # the OpenMP runtime's fatal error (HiLab-git/MIDeepSeg#4)
    "OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized.": "native-crash",
    # NCCL's topology graph losing a node of its own (NVIDIA/nccl#1748's wording)
    "graph/topo.h:230 NCCL WARN Could not find NET with id 0": "library-failure",
    # a GPU engine timeout and the launch it ended (NVIDIA's forum, 2008)
    "Cuda error: rp_many_kernel in file \u2018\u2019 in line 111 : the launch timed out and was terminated.\n"
    "NVRM: Xid (0003:00): 8, Channel 00000001": "gpu-hang",
}


# Round 9's general rules (tests/heldout/rnd9), on public text of each family; where only the round's thread shows
# the wording, its line.
RND9_WORDINGS = {
    # HTCondor's hold for memory (CHTC/templates-GPUs#7)
    "Hold reason: Error from slot1_7@gpulab2002.chtc.wisc.edu: Docker job has gone over memory limit of 1024 Mb":
        "host-oom",
    # Ray's memory monitor, by the close of its message (OpenRLHF/OpenRLHF#911)
    "(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: "
    "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on "
    "this node or reducing task parallelism by requesting more CPUs per task.": "host-oom",
    # ptxas refusing bf16 below sm_80 (deepspeedai/DeepSpeed#3947)
    "ptxas /tmp/compile-ptx-src-9e79cc, line 59; error   : Feature '.bf16' requires .target sm_80 or higher":
        "arch-mismatch",
    # two CUDA versions' libraries in one process (Genesis-Embodied-AI/genesis-world#2814)
    "ERROR 4 in nvvmAddNVVMContainerToProgram, may need newer version of nvJitLink library": "library-failure",
    # XLA that cannot fit the program by rematerialization (jax-ml/jax#24309)
    "2024-10-15 16:30:37.290084: W external/xla/xla/service/hlo_rematerialization.cc:3005] Can't reduce memory use "
    "below 21.15GiB (22705764841 bytes) by rematerialization; only reduced to 90.75GiB (97440000040 bytes), down from "
    "90.75GiB (97440000040 bytes) originally": "gpu-oom",
    # vLLM's KV cache too small for one sequence (vllm-project/vllm#2418)
    "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in KV "
    "cache (3664). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.":
        "gpu-oom",
    # Docker without the NVIDIA container toolkit (NVIDIA/nvidia-docker#1034)
    "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].":
        "driver-mismatch",
    # a cloud agent's failed driver installation (DataBiosphere/dsub#229)
    "Failure message: installing drivers: installing GPU drivers: exit status 255": "driver-mismatch",
    # Fabric Manager not starting (aws/aws-parallelcluster#6571)
    "service[nvidia-fabricmanager] (aws-parallelcluster-platform::nvidia_config line 35) had an error: "
    "Mixlib::ShellOut::CommandTimeout: Command timed out after 900s:": "gpu-nvlink",
}


# Round 10's general rules (tests/heldout/rnd10), on the lines of its threads (the rows cite further sources).
RND10_WORDINGS = {
    # nvcc's tools killed by signal number, and Slurm's `oom_kill` spelling (BLAST-WarpX/warpx#5742, #4195 PR)
    "nvcc error   : 'ptxas' died due to signal 9 (Kill signal)": "host-oom",
    "slurmstepd: error: Detected 2 oom_kill events in StepId=24637574": "host-oom",
    # text-generation-inference's launcher: a process ended by SIGBUS (huggingface/text-generation-inference#446)
    "Error: Download process was signaled to shutdown with signal 7": "shm-exhausted",
    # a shell's job control in lower case (easydiffusion/easydiffusion#102)
    "./scripts/on_sd_start.sh: line 118: 7080 killed        ": "host-oom",
    # memtestG80's running count (openmm/openmm#2026)
    "Test iteration 50 (GPU 0, 128 MiB): 45528 errors so far": "gpu-memory-ecc",
    # TensorRT-LLM's CUDA check, its call cut in two by the terminal (NVIDIA/TensorRT-LLM#260)
    "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaSt\n"
    "ream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)": "gpu-oom",
    # PyTorch's OOM report without its first sentence, wrapped by a logger (vladmandic/sdnext#3656)
    "key messsage is Tried to allocate 13.20 GiB. GPU 0\n"
    "                         has a total capacity of 44.68 GiB of which 5.15 GiB is free.": "gpu-oom",
    # TensorRT-LLM's executor (NVIDIA/TensorRT-LLM#5872)
    "[TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: Executor creation failed due to insufficient GPU "
    "memory.": "gpu-oom",
    # HeavyDB's buffer managers (heavyai/heavydb#635, #76)
    "2021-03-22T19:54:56.782153 E 118135 617 BufferMgr.cpp:410 ALLOCATION failed to find 256000000B throwing out of "
    "memory GPU_MGR:3": "gpu-oom",
    "E0919 13:34:49.401419  9275 BufferMgr.cpp:370] ALLOCATION failed to find 300000256B throwing out of memory "
    "CPU_MGR:0": "host-oom",
    # Ray's object store refusing a small /dev/shm (vllm-project/vllm#1393)
    "WARNING services.py:1889 -- WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has "
    "only 46964736 bytes available. This will harm performance!": "shm-exhausted",
}

RND11_WORDINGS = {
    # ONNX Runtime's CUDA execution provider that cannot load, with and without the apostrophe
    # (hacksider/Deep-Live-Cam#948, microsoft/onnxruntime#21049)
    "CUDA_PATH is set but CUDA wasn't able to be loaded. Please install the correct version of CUDA and cuDNN as "
    "mentioned in the GPU requirements page": "driver-mismatch",
    "EP Error C:\\a\\_work\\1\\s\\onnxruntime\\python\\onnxruntime_pybind_state.cc:866 "
    "onnxruntime::python::CreateExecutionProviderInstance CUDA_PATH is set but CUDA wasnt able to be loaded.":
        "driver-mismatch",
    # PaddlePaddle's own check (PaddlePaddle/PaddleOCR#914)
    "`device: 0. The installed Paddle is compiled with CUDNN 7.6, but CUDNN version in your machine is 7.3, which may "
    "cause serious incompatible bug.": "driver-mismatch",
    # GKE's node pool without driver installation (GoogleCloudPlatform/container-engine-accelerators#407)
    "GPU driver auto installation is disabled.": "driver-mismatch",
    # tqdm's rate in a unit of its own before the shell's Killed (facebookresearch/demucs#252)
    "  0%|          | 0.0/198.0 [00:00<?, ?seconds/s]Killed": "host-oom",
}
RND12_WORDINGS = {
    # the kernel refusing a module built for another kernel (jonathonf/manjaro-nvidia#2)
    "[  290.161165] nvidia: version magic '4.14.15-1-MANJARO SMP preempt mod_unload modversions retpoline ' should be "
    "'4.14.15-1-MANJARO SMP preempt mod_unload modversions '": "driver-mismatch",
    # modprobe without a module for the running kernel (Askannz/optimus-manager#39)
    "modprobe: FATAL: Module nvidia not found in directory /lib/modules/4.20.0-1-MANJARO": "driver-mismatch",
    # an Xid pasted with a blank after "PCI:" and without its colon (pop-os/pop#766)
    "NVRM: Xid (PCI: 0000:01:00) 79 pid=294, GPU has fallen off the bus.": "gpu-off-bus",
    # a server's own signal handler (heavyai/heavydb#819)
    "HeavyDB.cpp:332 Interrupt signal (11) received.": "native-crash",
}

RND13_WORDINGS = {
    # CUDA errors by number after the driver call (beehive-lab/TornadoVM#195, Project-HAMi/HAMi#585)
    "[TornadoVM-PTX-JNI] ERROR : cuLaunchKernel -> Returned: 701": "launch-failure",
    "[HAMI-core ERROR (pid:7 thread=140360328144640 allocator.c:115)]: cuMemoryAllocate failed res=2": "gpu-oom",
    # Go's runtime (volcano-sh/devices#42)
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1092953]": "native-crash",
    # a device-side assert whose file and line the issue title cut (baichuan-inc/Baichuan2#72)
    "indexSelectLargeIndex: block: [403,0,0], thread: [48,0,0] Assertion `srcIndex < srcSelectDimSize` failed.":
        "device-assert",
    # ND4J's allocator (deeplearning4j/nd4j#2801) and nanominer's DAG check (nanopool/nanominer#12)
    "Suppressed: java.lang.RuntimeException: Failed to allocate 1283331072 bytes from DEVICE [0] memory": "gpu-oom",
    "2019-04-13 19:53:21: <error> device: 1; Error: not enough memory on GPU 1 to create DAG.": "gpu-oom",
    # the CUDA driver's library not found, at the end of a traceback (NVIDIA/cuda-python#17)
    "RuntimeError: Failed to dlopen libcuda.so": "driver-mismatch",
    # OptiX's ABI check (jbikker/lighthouse2#3), TensorRT's SM check (NVIDIA-ISAAC-ROS/isaac-ros-cli#22), the Jetson's
    # over-current alarm (OE4T/meta-tegra#538)
    "OPTIX_ERROR_UNSUPPORTED_ABI_VERSION (7801)": "driver-mismatch",
    "Target GPU SM 87 is not supported by this TensorRT release.": "arch-mismatch",
    "soctherm: OC ALARM 0x00000001": "gpu-thermal-power",
}

RND14_WORDINGS = {
    # nvcc names its option gpu-architecture, ptxas gpu-name (openmm/openmm#2599, inducer/pycuda#440)
    "nvcc fatal   : Value 'sm_75' is not defined for option 'gpu-architecture'": "arch-mismatch",
    "[stderr:\nnvcc fatal   : Value 'sm_86' is not defined for option 'gpu-architecture'\n]": "arch-mismatch",
    # XLA's linker and its BLAS-less stream executor (marin-community/levanter#113, jax-ml/jax#16063, jax-ml/jax#13504)
    "2023-05-18 E external/xla/xla/service/gpu/gpu_compiler.cc:1592] The CUDA linking API did not work. Please use "
    "XLA_FLAGS=--xla_gpu_force_compilation_parallelism=1 to bypass it, but expect to get longer compilation time due "
    "to the lack of multi-threading. Original error: INTERNAL: nvlink exited with non-zero error code 256, output: "
    "nvlink fatal   : Input file '/tmp/tempfile-8ba750b0.cubin' newer than toolkit (118 vs 117)": "driver-mismatch",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Attempting to perform BLAS operation using StreamExecutor without "
    "BLAS support": "library-failure",
    # CUDA 10.0's runtime numbers (canonical/lxd#5618): 30 was the unknown error, at initialisation a driver problem
    "cudaGetDeviceCount returned 30\n-> unknown error\nResult = FAIL": "driver-mismatch",
    # a driver the application calls unsupported (isaac-sim/IsaacAutomator#40), AliceVision without a CUDA device
    # (alicevision/Meshroom#203)
    "[Error] [gpu.foundation.plugin] The currently installed NVIDIA graphics driver is unsupported or has known "
    "issues.": "driver-mismatch",
    "[18:38:10.598817][error] This program needs a CUDA-Enabled GPU (with at least compute capablility 2.0).":
        "driver-mismatch",
    # a rank that gave up waiting for rank 0's NCCL id, in both of PyTorch's spellings (NVIDIA/nccl#708,
    # bytedance/HLLM#20)
    "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store "
    "by key '0', but store->get('0') got error: Timeout waiting for key: default_pg/0/0 after": "nccl-timeout",
    "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
    "c10d key-value store by key '0', but store->get('0') got error: Socket Timeout": "nccl-timeout",
}

RND15_WORDINGS = {
    # the shell's Killed in bold, quoted in a sentence, zsh's after a progress bar (nanoporetech/dorado#358,
    # zai-org/ChatGLM-6B#179, OedoSoldier/chatglm_webui#3)
    "[2023-09-04 15:06:43.276] [info] > Creating basecall pipeline\nKilled**": "host-oom",
    'It stopped at "Loading checkpoint shards:  38%|█████████               | 3/8 [00:08<00:14,  2.91s/it]Killed"':
        "host-oom",
    "Loading checkpoint shards:  88%|███████████████▊  | 7/8 [00:12<00:01,  1.84s/it][1]    14875 killed     python "
    "main.py --low_vram": "host-oom",
    # PyCUDA's call and message, on a traceback's exception line (cryoem-uoft/cryosparc-issues#142)
    "  File \"pycuda/gpuarray.py\", line 209, in __init__\n    self.gpudata = self.allocator(self.size * "
    "self.dtype.itemsize)\nMemoryError: cuMemAlloc failed: out of memory": "gpu-oom",
    # Numba given the runtime as its driver (numba/numba#3963), PyTorch's CUTLASS attention without bfloat16
    # (QwenLM/Qwen3#710)
    "numba.cuda.cudadrv.error.CudaDriverError: driver missing function: cuInit.": "driver-mismatch",
    "RuntimeError: cutlassF: no kernel found to launch!": "arch-mismatch",
    # the graphics stack's own words for a driver it cannot start (vkmark/vkmark#16, Glavnokoman/vuh#67,
    # mani-skill/ManiSkill#1416, ARISE-Initiative/robosuite#364, openai/mujoco-py#598, NVlabs/nvdiffrast#58)
    "Error: vk::Instance::enumeratePhysicalDevices: ErrorInitializationFailed": "driver-mismatch",
    "libc++abi: terminating with uncaught exception of type vk::IncompatibleDriverError: vk::createInstance: "
    "ErrorIncompatibleDriver": "driver-mismatch",
    "- WARNING: terminator_CreateInstance: Failed to CreateInstance in ICD 0. Skipping ICD.": "driver-mismatch",
    "ImportError: Cannot initialize a EGL device display. This likely means that your EGL driver does not support the "
    "PLATFORM_DEVICE extension, which is required for creating a headless rendering context.": "driver-mismatch",
    "Found 3 GPUs for rendering. Using device 1.\nCould not initialize EGL": "driver-mismatch",
    "[F glutil.cpp:338] eglInitialize() failed": "driver-mismatch",
    # the kernel without room for a large BAR (aikitoria/open-gpu-kernel-modules#9)
    "pci 0000:01:00.0: BAR 1 [mem size 0x800000000 64bit pref]: can't assign; no space": "pcie-bus",
    # glibc's report of a corrupt heap (junyanz/pytorch-CycleGAN-and-pix2pix#251, facebookresearch/habitat-sim#28)
    "*** Error in `python': double free or corruption (!prev): 0x000056383cda7e40 ***": "native-crash",
    "Error in `python': munmap_chunk(): invalid pointer: 0x00007f48777bb770": "native-crash",
    # a driver below a stated minimum (modular/modular#6519), an architecture told in the plural (rapidsai/clx#358)
    "Exception: At device_context.mojo:3316:17: MAX doesn’t support your current NVIDIA GPU driver. MAX requires a "
    "minimum driver version of 580 and CUDA version 13.0. Your driver version is 570.211.01": "driver-mismatch",
    "RuntimeError: cuGraph failure at file=relabel.cu line=57: Relabel not supported on Pascal and older "
    "architectures.": "arch-mismatch",
}

API_RESULT_WORDINGS = {
    # Vulkan and OpenCL results by number after their call, or by name (Tencent/ncnn#5150, k4yt3x/video2x#1019,
    # darktable-org/darktable#3374, lightvector/KataGo#166, inducer/pyopencl#283)
    " 18%|█▊        | 2/11 [00:06<00:23,  2.65s/it]vkQueueSubmit failed -4": "gpu-hang",
    "vkEnumeratePhysicalDevices failed -3": "driver-mismatch",
    "Error reported:\n[local laplacian cl] failed: -4": "gpu-oom",
    "(what():  OpenCL error at /home/dwugcloud/data/kata/cpp/neuralnet/openclbackend.cpp, func err, line 1115, error "
    "CL_MEM_OBJECT_ALLOCATION_FAILURE)": "gpu-oom",
    "pyopencl._cl.LogicError: clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR": "driver-mismatch",
}


@pytest.mark.parametrize(("text", "cause"), API_RESULT_WORDINGS.items())
def test_an_api_result_is_read_by_its_number_or_its_name(text, cause):
    report = analyze_text(text + "\n")
    assert report.findings and report.findings[0].cause == cause, [f.cause for f in report.findings]


VIDEO_AND_JIT_STATUS_WORDINGS = {
    # NVENC's INVALID_VERSION in FFmpeg's words, in NVEnc's (the header's own sentence) and in the Video Codec SDK's
    # NvEncoder check (HandBrake/HandBrake#1827: "Graphics driver issue. Use 399 or newer", rigaya/NVEnc#74,
    # NVIDIA/VideoProcessingFramework#364)
    "[h264_nvenc @ 000001e8482050c0] Cannot get the preset configuration: invalid version (15)": "driver-mismatch",
    "Error on nvEncGetEncodePresetConfig: 15 (NVENC indicates that an invalid struct version was used by the "
    "client)": "driver-mismatch",
    "RuntimeError：LoadNvEncAPI：Current Driver Version does not support this NvEncodeAPI version, please upgrade "
    "driver at /root/Git/VideoProcessingFramework/PvNvCodec/TC/src/NvEncoder.cpp:125": "driver-mismatch",
}


@pytest.mark.parametrize(("text", "cause"), VIDEO_AND_JIT_STATUS_WORDINGS.items())
def test_a_video_codec_status_is_read_in_its_callers_words(text, cause):
    report = analyze_text(text + "\n")
    assert report.findings and report.findings[0].cause == cause, [f.cause for f in report.findings]


def test_statuses_that_are_the_callers_input_name_no_cause():
    """nvJPEG's ARCH_MISMATCH is a decoder backend this GPU lacks (torchvision falls back to another), NVRTC's
    COMPILATION the program's own kernel source, and NVENC's NEED_MORE_INPUT a normal step: read, but no verdict."""
    for text in ("RuntimeError: Failed to initialize nvjpeg with hardware backend: NVJPEG_STATUS_ARCH_MISMATCH",
                 "nvrtc: error: NVRTC_ERROR_COMPILATION while compiling kernel 'fused_add'",
                 "NvEncEncodePicture returned NV_ENC_ERR_NEED_MORE_INPUT"):
        report = analyze_text(text + "\n")
        assert [e.kind for e in report.events] == ["library-error"], text
        assert not report.findings, (text, [f.cause for f in report.findings])


def test_a_number_that_is_no_result_of_the_api_is_not_read():
    for text in ("vkQueueSubmit failed -999", "the step failed -4 times in a row", "clFinish returned -20"):
        assert not analyze_text(text + "\n").findings, text

RND16_WORDINGS = {
    # Inductor's kernel past the shared memory of an SM, its figures on the next line (pytorch/pytorch#175250)
    "torch._inductor.exc.InductorError: RuntimeError: No valid triton configs. \nOutOfMemoryError: out of resource: "
    "triton_per_fused_add_div_expand_mul_pow_slice_split_sum_view_7\nRequired: 327768 Hardware limit:232448 Reducing "
    "block sizes or `num_stages` may help.": "launch-failure",
    # the linker without the driver's libcuda.so (pytorch/pytorch#103417, pytorch/pytorch#107960)
    "/usr/bin/ld: cannot find -lcuda: No such file or directory\ncollect2: error: ld returned 1 exit status":
        "driver-mismatch",
    "BackendCompilerFailed: backend='inductor' raised:\nAssertionError: libcuda.so cannot found!": "driver-mismatch",
    # PyTorch's CPU allocator without a blank after the colon (stanford-futuredata/ColBERT#64)
    "RuntimeError: [enforce fail at CPUAllocator.cpp:64]. DefaultCPUAllocator: can't allocate memory:you tried to "
    "allocate 664833940224 bytes. Error code 12 (Cannot allocate memory) ": "host-oom",
    # compute cap (huggingface/text-embeddings-inference#34), memory run out in Chinese (T8mars/Comfyui-YuE2-T8#11,
    # OedoSoldier/chatglm_webui#3)
    "Error: Could not create backend\nCaused by:\n    Could not start backend: Runtime compute cap 75 is not "
    "compatible with compile time compute cap 80": "arch-mismatch",
    "显存不足，任务已停止。可以使用保存的阶段结果重新运行。": "gpu-oom",
    "运行报错：16g内存不足，进程被终止": "host-oom",
}

RND17_WORDINGS = {
    # OneFlow's CHECK on an NCCL call with NCCL's message and number (Oneflow-Inc/libai#415)
    "F20221031 10:52:42.193126 106986 eager_nccl_comm_manager.cpp:75] Check failed: ncclCommInitRank(comm, "
    "device_vec.size(), nccl_unique_id, rank) : unhandled system error (2). To see more detail, please run OneFlow "
    "with system variable NCCL_DEBUG=INFO": "nccl-comm-error",
    # EGL without a device, SAPIEN without a Vulkan driver (facebookresearch/habitat-sim#2590,
    # mani-skill/ManiSkill#1285)
    "Platform::WindowlessEglApplication::tryCreateContext(): no EGL devices found / WindowlessContext: Unable to "
    "create windowless context.": "driver-mismatch",
    "UserWarning: Failed to find Vulkan ICD file. This is probably due to an incorrect or partial installation "
    "of the NVIDIA driver.": "driver-mismatch",
    # MegEngine's own cuDNN version check (Qsingle/MegEngine_CU11#2), read as every framework's
    "err: cudnn version mismatch: compiled with 8101; detected 8204 at runtime, may caused by customized environment, "
    "for example LD_LIBRARY_PATH on LINUX and PATH on Windows!!": "library-failure",
}

RND18_WORDINGS = {
    # Windows' TDR in Direct3D's words (DiligentGraphics/DiligentCore#288, zolaware/reblue#23, Nukem9/dlssg-to-fsr3#231)
    "D3D12 ERROR: ID3D12Device::RemoveDevice: Device removal has been triggered for the following reason "
    "(DXGI_ERROR_DEVICE_HUNG: The Device took an unreasonable amount of time to execute its commands, or the hardware "
    "crashed/hung.": "gpu-hang",
    "Reason: DXGI_ERROR_DEVICE_HUNG (0x887a0006)": "gpu-hang",
    " with error DXGI_ERROR_DEVICE_REMOVED with Reason: DXGI_ERROR_DEVICE_HUNG": "gpu-hang",
    # no nvidia-smi where the driver's tools should be (tensorflow/tensorflow#28171, gw0/docker-keras#7)
    "root@dev-dsk:/opt/amazon/bin# nvidia-smi\nbash: nvidia-smi: command not found": "driver-mismatch",
    'docker: Error response from daemon: OCI runtime create failed: container_linux.go:296: starting container process '
    'caused "exec: \\"nvidia-smi\\": executable file not found in $PATH": unknown.': "driver-mismatch",
    # a container that lost its GPUs (NVIDIA/nvidia-container-toolkit#1227, dstackai/dstack#2601)
    "(container) $ nvidia-smi -L\nFailed to initialize NVML: Unknown Error": "driver-mismatch",
    "Sometimes `nvidia-smi` fails with the error: `Failed to initialize NVML: Unknown Error`. To reliably trigger the "
    "issue:": "driver-mismatch",
    # PyTorch's kernel assertions named by their condition in prose (torchgeo/torchgeo#1439; a BCE input out of [0, 1])
    "When training on Chesapeake13 with num_classes=14 and ignore_index=0, an assertion error \u2018t >= 0 && t < "
    "n_classes\u2019 occurs.": "device-assert",
    "- **CRITICAL**: Training crashed at batch ~200 with CUDA assertion `input_val >= zero && input_val <= one`.":
        "device-assert",
    # glibc's heap check alone on its line, the abort in Italian (negativo17/nvidia-driver#153)
    "    GL_OES_viewport_array, GL_OVR_multiview, GL_OVR_multiview2\ncorrupted size vs. prev_size\n"
    "Annullato (core dump creato)": "native-crash",
    # Chromium's out-of-memory end as Electron reports it (signalapp/Signal-Desktop#7189, electron/electron#45201)
    "Render process is gone\n\nError: Reason: oom, Exit Code: -536870904": "host-oom",
    '- 2024-12-23T07:47:54.524+05:30,event details : "{\\"reason\\":\\"oom\\",\\"exitCode\\":-536870904}"':
        "host-oom",
    # a Hugging Face Space at its memory limit (sedthh/pyxelate#27)
    "Runtime error\nCPU Memory limit exceeded (16GB)": "host-oom",
    # a library call said to have failed, no status (fspiga/qe-gpu#13, yambo-code/yambo#76)
    " zhegvdx_gpu error: cusolverDnZpotrf failed!": "library-failure",
    "[SERIAL_lin_system_gpu]cusolverDnCgetrs failed": "library-failure",
    # a driver error as Rust's bindings print it (ProvableHQ/snarkVM#604)
    "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: Cuda(NoBinaryForGpu)'": "arch-mismatch",
    # NVIDIA's OpenCL result -9999 (openwall/john#2710) and its words (nginnever/zogminer#85)
    "Benchmarking: pgpwde-opencl [SHA1 OpenCL]... (32xOMP) OpenCL UNKNOWN OPENCL ERROR (-9999) error in "
    "common-opencl.c:1820 - Error creating command queue": "illegal-memory-access",
    "[OPENCL]:CL ERROR:NVIDIA: ILLEGAL READ OR WRITE TO A BUFFER": "illegal-memory-access",
}

RND19_WORDINGS = {
    # a CUDA library of the build's version missing behind an error (qdrant/fastembed#238, milvus-io/milvus#50025,
    # autogluon/autogluon#1112)
    "[E:onnxruntime:Default, provider_bridge_ort.cc:1546 TryGetProviderInfo_CUDA] Failed to load library "
    "libonnxruntime_providers_cuda.so with error: libcublasLt.so.11: cannot open shared object file: No such file or "
    "directory": "driver-mismatch",
    "milvus: error while loading shared libraries: libcudart.so.12: cannot open shared object file: No such file or "
    "directory": "driver-mismatch",
    "OSError: libcusolver.so.11: cannot open shared object file: No such file or directory": "driver-mismatch",
    # TensorFlow's allocator out of memory in its copy's words (tensorflow/tensorflow#7025; a commit of another
    # project quoting it)
    "Failed copying input tensor from /job:localhost/replica:0/task:0/device:CPU:0 to "
    "/job:localhost/replica:0/task:0/device:GPU:0 in order to run _EagerConst: Dst tensor is not initialized.":
        "gpu-oom",
    "WARN: increase temp memory to avoid cudaMalloc, or decrease query/add size (alloc 134217728 B, highwater "
    "134217728 B)": "gpu-oom",
    " *** ERROR: Memory allocation on device failed ***": "gpu-oom",
    "RuntimeError: Unable to load ragged_device_ops op due to no compute capabilities remaining after filtering":
        "arch-mismatch",
    # the server platform's words (openstreetmap/operations#1364, #1182, #759; dsx-ai-factory/infra-controller#6282)
    "Uncorrectable ECC / other uncorrectable memory error @P2-DIMMH2(CPU2) - Assertion": "host-memory",
    "DIMM Failure - Uncorrectable Memory Error (Processor 2, DIMM 3)": "host-memory",
    "Corrected error(s): memory read error at CPU_SrcID#1_MC#1_Chan#1_DIMM#0": "host-memory",
    "UEFI0080: PCIe link speed is not optimal for Bus:201 D:1 F:0.": "pcie-bus",
    # Windows' error 1455 in German and Chinese (ray-project/ray#23109; public posts of WinError 1455)
    "ImportError: DLL load failed while importing _ext: Die Auslagerungsdatei ist zu klein, um diesen Vorgang "
    "durchzuführen.": "host-oom",
    "OSError: [WinError 1455] 页面文件太小，无法完成操作。": "host-oom",
    '[2022/11/28 07:17:10.960 +00:00] [ERROR] [querynode/segment_loader.go:127] ["load failed, OOM if loaded"] '
    '[collectionID=437544712534425849] [segmentType=Sealed] ["loadSegmentRequest msgID"=246] [error="load segment '
    'failed, OOM if load, collectionID = 437544712534425849, maxSegmentSize = 401 MB, concurrency = 1, '
    'usedMemAfterLoad = 5764 MB, totalMem = 4096 MB, thresholdFactor = 0.900000"]': "host-oom",
    # .NET's ManagedCuda names the driver's result (kunzmi/managedCuda#89)
    "ManagedCuda.CudaException: 'ErrorIllegalAddress: While executing a kernel, the device encountered a load or "
    "store instruction on an invalid memory address.": "illegal-memory-access",
}

RND20_WORDINGS = {
    # FluidX3D's own check of the GPU's memory, in a quoted box (ProjectPhysX/FluidX3D#46)
    '> Error: Device "NVIDIA GeForce GTX 1050 Ti" does not have enough memory.     |': "gpu-oom",
    # the C++ library's allocation failure alone: the host's memory (C0untFloyd/roop-unleashed#215)
    "[ONNXRuntimeError] : 1 : FAIL : Load model from /content/roop-unleashed/models/inswapper_128.onnx "
    "failed:std::bad_alloc": "host-oom",
    # the shell's Killed in Chinese after the last metrics (danijar/dreamerv3#203)
    "Writing metrics: /home/bzs/logdir/dreamer/20251205T175323/scores.jsonl\n已杀死": "host-oom",
    # Ray's memory monitor before Ray 2 (ray-project/ray#4877)
    "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node Local is used (15.98 / 16.82 GB). "
    "The top 5 memory consumers are:": "host-oom",
    # ZDoom's crash handler: the kernel's reason and the signal's number (Farama-Foundation/ViZDoom#282)
    "*** Fatal Error ***\nAddress not mapped to object (signal 11)\nAddress: 0x8": "native-crash",
    # the exception's what() under a C++ terminate is the abort's reason (ginkgo-project/ginkgo#1794)
    "> terminate called after throwing an instance of 'gko::AllocationError'\n>   what():  /home/zhanghy/software/"
    "ginkgo-develop/cuda/base/memory.cpp:58: cuda: failed to allocate memory block of 91587203607B": "gpu-oom",
}

RND21_WORDINGS = {
    # a renderer's own check of the GPU's free memory (NCAR/VAPOR#3236)
    "Not enough GPU RAM free (3686MB free, need at least 4122MB)": "gpu-oom",
    # ViSUS's resource limit (sci-visus/visus-issues#138)
    "12:07:51.685 INFO GLTEXTURE.160 Failed to acquire gpu memory (157mb), GLCreateTexture::setArray failed": "gpu-oom",
    # MSVC's std::bad_alloc text under Python (hbb1/2d-gaussian-splatting#208)
    "MemoryError: bad allocation": "host-oom",
    # VTK without a display (tracim/tracim#4099)
    "bad X server connection. DISPLAY=localhost:10.0. Aborting.": "native-crash",
}

RND22_WORDINGS = {
    # torch.multiprocessing.spawn's ProcessExitedException (bert-nmt/bert-nmt#14, lyu-yx/ACUMEN#4)
    "Exception: process 1 terminated with signal SIGKILL": "host-oom",
    "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGSEGV": "native-crash",
    # ENOMEM from fork (facebookresearch/fairseq#1503, pytorch/pytorch#4387)
    "OSError: [Errno 12] Cannot allocate memory": "host-oom",
    # the kernel's memory cgroup OOM report (chaoyi-wu/RadFM#30; mm/memcontrol.c)
    "memory+swap: usage 117964800kB, limit 117964800kB": "host-oom",
    "[ 8123.442211] memory: usage 8388608kB, limit 8388608kB, failcnt 2215": "host-oom",
    # Horovod's NCCL call failure (horovod/horovod#3618)
    "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled cuda error": "nccl-comm-error",
    # NCCL before 2.3, no NCCL tag (horovod/horovod#666)
    "seyun:17283:17549 [3] include/socket.h:371 WARN Connection closed by remote peer": "nccl-comm-error",
    # a contained fault over NVLink (daydreamlive/scope#749)
    "torch.AcceleratorError: CUDA error: Invalid access of peer GPU memory over nvlink or a hardware error":
        "gpu-nvlink",
    # Slurm NHC's Xid check (mej/nhc#147)
    "Found XID errors: 63": "gpu-memory-ecc",
    # ONNX Runtime's CUDA provider without cuDNN (microsoft/foundry-dev-tools#75)
    "[ONNXRuntimeError] : 1 : FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: "
    "libcudnn.so.8: cannot open shared object file: No such file or directory": "driver-mismatch",
    # ggml's architecture checks (omacom/omarchy#2039, LostRuins/koboldcpp#610)
    "common.cuh:106: ggml was not compiled with any CUDA arch <= 610": "arch-mismatch",
    "ERROR: ggml-cuda was compiled without support for the current GPU architecture.": "arch-mismatch",
    # cudaErrorInvalidSymbol where the GPU's code is absent (andyschwarzl/gpuNUFFT#97, ethereum-mining/ethminer#422)
    "Cuda error in func 'set_constants' at line 168 : invalid device symbol.": "arch-mismatch",
    # Unreal's Vulkan RHI (carla-simulator/carla#8575)
    "Out of memory on Vulkan; MemoryTypeIndex=5, AllocSize=1.000MB": "gpu-oom",
    # Iray's own architecture check, wrapped (isaac-sim/IsaacSim#671)
    "GPU 1 (NVIDIA RTX PRO 5000 Blackwell) with CUDA compute capability 12.0\n"
    "is unsupported by this version of iray photoreal.": "arch-mismatch",
    # OptiX's result by number (owl-project/NVISII#40)
    "Optix call (optixInit()) failed with code 7801 (line 150)": "driver-mismatch",
}

RND23_WORDINGS = {
    # a CUDA library's own name beside its out of memory (NVIDIA/cuda-quantum#1884)
    "terminate called after throwing an instance of 'std::runtime_error'\n"
    "  what():  [custatevec] %out of memory in addQubitsToState (line 210)": "gpu-oom",
    # Faiss's failed cudaMalloc before its abort (facebookresearch/faiss#648)
    "Faiss assertion 'cudaMalloc(p, size) == cudaSuccess' failed in void faiss::gpu::allocMemorySpace(faiss::gpu::"
    "MemorySpace, void**, size_t) at utils/MemorySpace.cpp:20; details: Failed to cudaMalloc 16000000000 bytes\n"
    "Aborted": "gpu-oom",
    # Dr.Jit's refusal of a driver branch (mitsuba-renderer/mitsuba3#1472)
    "jit_optix_api_init(): DrJit considers the driver of your graphics card buggy and prone to miscompilation (we "
    "explicitly do not support OptiX with CUDA version 11.7, which corresponds to driver version 565).":
        "driver-mismatch",
    # a crash handler's frame marked (SEGV) (alvr-org/ALVR#3230)
    "0  libnvidia-glcore.so.595.45.04 + 0xda806f   (SEGV)": "native-crash",
    # a Windows crash handler's exception code (gnif/LookingGlass#1106)
    "exception 0xc0000094 (INT_DIVIDE_BY_ZERO), address is 00007ff7b8ea15f0": "native-crash",
    # a status sign-extended to 64 bits and printed from a double (lmstudio-ai/lmstudio-bug-tracker#1950)
    "(Exit code: 18446744072635812000). Unknown error. Try a different model and/or config.": "native-crash",
    # PyTorch's shared-memory allocator on Windows (pytorch/pytorch#3019)
    "RuntimeError: Couldn't open shared file mapping: <torch_13820_2864299034>, error code: <1455>": "host-oom",
    # Triton's Python backend (aws/sagemaker-python-sdk#2801, triton-inference-server/server#6195)
    "UNAVAILABLE: Internal: Unable to initialize shared memory key '/pre_multi_skin_GPU_0' to requested size "
    "(67108864 bytes).": "shm-exhausted",
    # Text Generation Inference's warmup (huggingface/text-generation-inference#755)
    "Error: Warmup(Generation(\"Not enough memory to handle 4096 prefill tokens. You need to decrease "
    "`--max-batch-prefill-tokens`\"))": "gpu-oom",
}

RND24_WORDINGS = {
    # OpenCV's host allocator, in both of its formats (Arthurzhangsheng/CodeFormer_GUI#5, opencv/opencv#10725)
    "cv2.error: OpenCV(4.6.0) D:\\a\\opencv-python\\opencv\\modules\\core\\src\\alloc.cpp:73: error: "
    "(-4:Insufficient memory) Failed to allocate 3072000 bytes in function 'cv::OutOfMemoryError'": "host-oom",
    "OpenCV Error: Insufficient memory (Failed to allocate 3686400 bytes) in void* cv::OutOfMemoryError(size_t), file "
    "/export/tmp/myOpencv/opencv/modules/core/src/alloc.cpp, line 55": "host-oom",
    # the dynamic loader out of memory (Nek5000/nekRS#372, njoy/NJOY2016#12)
    "/home/lxj/.local/nekrs/examples/turbPipePeriodic/.cache/libturbPipe.so: cannot map zero-fill pages": "host-oom",
    # CUDA.jl's device-side exceptions (JuliaGPU/CUDA.jl#2612, #1720)
    "ERROR: a BoundsError was thrown during kernel execution on thread (513, 1, 1) in block (3, 1, 1).":
        "device-assert",
    "ERROR: KernelException: exception thrown during kernel execution on device NVIDIA RTX 6000 Ada Generation":
        "device-assert",
}

RND26_WORDINGS = {
    # TensorFlow's driver check, in a container without the GPUs and on a host without the driver
    # (kubeflow/website#1958; TensorFlow's cuda_diagnostics.cc)
    "04:24:17.657768: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:156] kernel driver does not appear to be "
    "running on this host (wk-caas-46ca401961ec4f359c9928b48579291a-60aac283a6461539b2ff57): "
    "/proc/driver/nvidia/version"
    " does not exist": "driver-mismatch",
    # xFormers' CUTLASS kernels built for another architecture (facebookresearch/xformers#1045, vllm-project/vllm#199)
    "FATAL: kernel fmha_cutlassF_f16_aligned_64x128_rf_sm80 is for sm80-sm100, but was built for sm75.":
        "arch-mismatch",
    "FATAL: kernel `fmha_cutlassF_f16_aligned_64x128_rf_sm80` is for sm80-sm100, but was built for sm50":
        "arch-mismatch",
    # GDRCopy's driver not opened (NVIDIA/gdrcopy#234, #72)
    "gdr_open error: Is gdrdrv driver installed and loaded?": "driver-mismatch",
    'GDRCOPY library "libgdrapi.so" unable to open GDR driver, is gdrdrv.ko loaded?': "driver-mismatch",
    # a GPU module built against other symbols (Mellanox/nv_peer_memory#39)
    "[76463.688316] nv_peer_mem: disagrees about version of symbol ib_register_peer_memory_client": "driver-mismatch",
    # the RDMA NIC's queues under a locked-memory limit (openucx/ucx#8746, NVIDIA/nccl#1191, NVIDIA/nccl-tests#206)
    "[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: Cannot "
    "allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)": "nccl-comm-error",
    "My issue is caused by the error `ERROR ibv_create_cq(cqe=4096) failed: Cannot allocate memory.`":
        "nccl-comm-error",
    "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory":
        "nccl-comm-error",
    # CUDA IPC between the ranks of a node in Open MPI and MPICH (JuliaGPU/CUDA.jl#1053, CliMA/slurm-buildkite#54,
    # pmodels/mpich#7304)
    "The call to cuIpcGetMemHandle failed. This means the GPU RDMA protocol\ncannot be used.": "nccl-comm-error",
    "clima.gps.caltech.edu:3667226] Failed to register remote memory, rc=-1": "nccl-comm-error",
    "MPIDI_GPU_ipc_handle_map(355)..:  gpu_ipc_handle_map failed": "nccl-comm-error",
    # MXNet's GPU count (apache/mxnet#19948, MXNet's src/base.cc)
    "[02:55:03] src/base.cc:49: GPU context requested, but no GPUs found.": "driver-mismatch",
}

RND27_WORDINGS = {
    # the shell's word inside a Chinese sentence (lamda-bbo/Efficient-TDP#1)
    "您好，请问一下我在python dreamplace/Placer.py test/iccad2015.pin2pin/$case.json之后在[INFO   ] extracting "
    "paths...时运行进程会被直接Killed掉，请问这是哪里有问题呢？": "host-oom",
    # TensorRT without kernels for the GPU (NVIDIA/TensorRT#2332, #1428; wang-xinyu/tensorrtx#1610)
    "ERROR: ../rtSafe/cuda/caskUtils.cpp (80) - Assertion Error in trtSmToCask: 0 (Unsupported SM.)": "arch-mismatch",
    "[F] [TRT] Assertion failed: Unsupported SM.": "arch-mismatch",
    "[12/12/2024-10:15:17] [E] [TRT] 1: [caskUtils.cpp::trtSmToCask::147] Error Code 1: Internal Error (Unsupported "
    "SM: 0x809)": "arch-mismatch",
    # ptxas given PTX for another target (openxla/xla#4970, IBMSparkGPU/GPUEnabler#34)
    "ptxas exited with non-zero error code 65280, output: ptxas fatal: PTX with .target 'sm_90a' cannot be compiled "
    "for architecture 'sm_90'": "arch-mismatch",
    "ptxas fatal   : SM version specified by .target is higher than default SM version assumed": "arch-mismatch",
    # a compiled kernel asking for more shared memory than the GPU has (iree-org/iree#12771)
    "Requested shared memory size of 421376 larger than allowed size of 166912": "launch-failure",
}

DOCUMENTED_WORDINGS = {
    # Slurm's step daemon on a job over its host memory request (coqui-ai/STT#2238, heronsystems/adeptRL#13)
    "slurmstepd: error: Exceeded job memory limit": "host-oom",
    "slurmstepd: Exceeded step memory limit at some point.": "host-oom",
    # frameworks' own checks and init failures, added from their sources before a held-out round met them; each line
    # as posted: vLLM's dtype check (vllm-project/vllm#946, canopyai/Orpheus-TTS#74)
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
    "V100-SXM2-32GB GPU has compute capability 7.0.": "arch-mismatch",
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
    "compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: "
    "--dtype=half.": "arch-mismatch",
    # XLA's cuDNN start (jax-ml/jax#15742, #16901)
    "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed. Look at the errors "
    "above for more details.": "library-failure",
    # PyTorch's cuInit failure (facebookresearch/detectron2#2848, cabooster/DeepCAD-RT#8)
    "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.": "driver-mismatch",
    # cuDNN out of workspace memory, as PyTorch and Darknet say it (marqo-ai/marqo#101, AlexeyAB/darknet#7660)
    "RuntimeError: Unable to find a valid cuDNN algorithm to run convolution (try_all at "
    "/opt/conda/conda-bld/pytorch_1591914868920/work/aten/src/ATen/native/cudnn/Conv.cpp:693)": "gpu-oom",
    " Error: cuDNN isn't found FWD algo for convolution.": "gpu-oom",
    # UCX's InfiniBand retries run out (openucx/ucx#9590, #7586)
    "lxbk1127:2330856:0:2330856] ib_mlx5_log.c:177  Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend "
    "0x81 hw_synd 0/0)": "nccl-comm-error",
    # batch systems' memory kills (marbl/canu#530, dask/dask-jobqueue#178, nf-core/sarek#541)
    "=>> PBS: job killed: mem 38427376kb exceeded limit 33554432kb": "host-oom",
    "dask-worker.o1838772:=>> PBS: job killed: mem job total 115343360 kb exceeded limit 115343360 kb": "host-oom",
    "Job exceeded a memory resource limit (vmem, pvmem, etc.). Job was aborted": "host-oom",
    # Windows' GPU reset, as its event 4101 reads (Microsoft's TDR documentation)
    "Display driver nvlddmkm stopped responding and has successfully recovered.": "gpu-hang",
}


def test_slurms_task_out_of_memory_is_the_hosts_whatever_the_node_is_called():
    """`srun: error: NODE: task N: Out Of Memory` is Slurm's cgroup kill of a task: host memory, also on a node named
    gpu20-15 (the node's name is no GPU word; the line as posted in tests/heldout/rnd8's NeMo case)."""
    for line in ("srun: error: gpu20-15: task 0: Out Of Memory",):
        assert [f.cause for f in analyze_text(line + "\n").findings][:1] == ["host-oom"], line

RND28_WORDINGS = {
    # a crash signal inside a Chinese sentence, which sets no blank around it (facebookresearch/SlowFast#676)
    "运行python3 tools/run_net.py --cfg demo/AVA/SLOWFAST_32x2_R101_50_50.yaml"
    "直接弹出Segmentation fault (core dumped)，网上的解决办法都没有用，请求解决办法": "native-crash",
    # an exit status in parentheses, as Flyte reports a pod's end (flyteorg/flyte#2376)
    "[f8107735c673549d7acd-n0-0] terminated with exit code (137). Reason [Error]. Message: ": "host-oom",
    # a GPU left without its PCI window cannot initialise (NVIDIA/open-gpu-kernel-modules#344, canonical/lxd#14381)
    "[    1.121034] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:": "gpu-off-bus",
}

RND29_WORDINGS = {
    # nvidia-container-cli's NVML message inside the runtime's escaped quotes, an escape ending it
    # (NVIDIA/nvidia-docker#1280: NVML of driver 410.48 lacks a function the toolkit calls; #1348)
    'stderr: nvidia-container-cli: detection error: nvml error: function not found\\\\n\\\"\"": unknown.':
        "driver-mismatch",
    'stderr: nvidia-container-cli: detection error: nvml error: unknown error\\\\n\\\"\"": unknown.':
        "driver-mismatch",
    # the image's requirement the host driver cannot meet (NVIDIA/deepops#206)
    "exit status 1, stdout: , stderr: exec command: [/usr/bin/nvidia-container-cli --load-kmods configure "
    "--require=cuda>=10.1 brand=tesla,driver>=384,driver<385]\\nnvidia-container-cli: requirement error: invalid "
    "expression\\n": "driver-mismatch",
    # df of a full /dev/shm (triton-inference-server/server#4869)
    "Filesystem      Size  Used Avail Use% Mounted on\nshm              64M   64M     0 100% /dev/shm": "shm-exhausted",
    # akmods (negativo17/nvidia-driver#192 and #188, fedora-silverblue/issue-tracker#356, ublue-os/hwe#116)
    "2026/02/11 18:46:34 akmods: Building rpms failed; see /var/cache/akmods/nvidia/590.48.01-1-for-6.18.8-200.fc43"
    ".x86_64.failed.log for details": "driver-mismatch",
    "Checking kmods exist for 5.19.9-200.fc36.x86_64 [  OK  ]\nBuilding and installing nvidia-kmod [FAILED]":
        "driver-mismatch",
    # nvidia-installer refusing while a module of the old driver is loaded (Arc-Compute/LibVF.IO#20)
    "ERROR: An NVIDIA kernel module 'nvidia-drm' appears to already be loaded in your kernel.  This may be because it "
    "is in use (for example, by an X server, a CUDA program, or the NVIDIA Persistence Daemon)": "driver-mismatch",
    # a DKMS make error on an object below the build directory (Frogging-Family/nvidia-all#95)
    "make[2]: *** [scripts/Makefile.build:288: /var/lib/dkms/nvidia/510.60.02/build/nvidia-drm/nvidia-drm-drv.o] "
    "Error 1": "driver-mismatch",
    # LLVM inside Triton older than the GPU (triton-lang/triton#5950), RAPIDS without PTX for it (NVIDIA/cuml#5484)
    "'sm_120' is not a recognized processor for this target (ignoring processor)": "arch-mismatch",
    "RuntimeError: This cuDF installation is missing the necessary PTX files that are <=50.": "arch-mismatch",
}

RND30_WORDINGS = {
    # XLA's spelling of a library's name, found in any letter case (jax-ml/jax#29065)
    "I'm encountering a `jaxlib._jax.XlaRuntimeError: INTERNAL: cuSolver internal error` when running my code":
        "library-failure",
    # PyTorch's warning of a GPU too old, on its three lines (w-okada/voice-changer#447)
    "torch\\cuda\\__init__.py:152: UserWarning:\n    Found GPU0 GeForce GT 720 which is of cuda capability 3.5.\n"
    "    PyTorch no longer supports this GPU because it is too old.\n"
    "    The minimum cuda capability supported by this library is 3.7.": "arch-mismatch",
    # c10d's rendezvous failures (hiyouga/LlamaFactory#3715, hpcaitech/Open-Sora#667, lllyasviel/ControlNet#382)
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:255.255.0.0]:29500 (errno: 110 - "
    "Connection timed out).": "nccl-comm-error",
    "[E socket.cpp:793] [c10d] The client socket has timed out after 1800s while trying to connect to (127.0.0.1, "
    "48391).": "nccl-comm-error",
    # a collective timeout told in other words, with its work record (NVIDIA-NeMo/Megatron-Bridge#6097)
    "NCCL collective timeout: WorkNCCL(SeqNum=16, OpType=COALESCED, NumelIn=0, NumelOut=0)": "nccl-timeout",
}


RND31_WORDINGS = {
    # Python's MemoryError on its own line, its traceback's head lost (Nerogar/OneTrainer#835)
    "MemoryError\nCould not save model. Check your disk space!": "host-oom",
    # PyTorch's older CPU allocator out of memory (ENOMEM, 12: pyg-team/pytorch_geometric#604)
    "RuntimeError: [enforce fail at CPUAllocator.cpp:56] posix_memalign(&data, gAlignment, nbytes) == 0. 12 vs 0":
        "host-oom",
    # a cuBLAS status without its prefix, the call naming the library (Comfy-Org/ComfyUI#4556)
    "RuntimeError: CUDA error: NOT_SUPPORTED when calling 'cublasLtMatmulAlgoGetHeuristic'": "library-failure",
    # spconv's numbered CUDA error (open-mmlab/mmdetection3d#80)
    "RuntimeError: /tmp/spconv/src/spconv/indice_cuda.cu 124\ncuda execution failed with error 2": "gpu-oom",
    # an exit status after "exited with" (cporcellijr/bookbridge#255)
    "  Application exited with code 137. Restarting in 3 seconds...": "host-oom",
    # Gloo's peer gone and an NVIDIA module that would not insert, read by their words (pytorch/pytorch#75512,
    # MrMEEE/bumblebee-Old-and-abbandoned#536)
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.92]:25266: Connection "
    "reset by peer": "nccl-comm-error",
    "FATAL: Error inserting nvidia_current (/lib/modules/2.6.38-10-generic/updates/dkms/nvidia-current.ko): No such "
    "device": "driver-mismatch",
}


RND32_WORDINGS = {
    # PyTorch's caching allocator that could not map more GPU memory (bghira/SimpleTuner#3176)
    "[W831 10:32:25.255074645 CUDACachingAllocator.cpp:508] expandable_segments: memory mapping failed with OOM on "
    "device 0 while trying to map 20971520 bytes (free: 15663104, total: 33671348224).": "gpu-oom",
    # CUDA.jl's launch diagnosis (CliMA/ClimaCore.jl#1854 and #2096)
    "ERROR: Number of threads in z-dimension exceeds device limit (70 > 64).": "launch-failure",
    "ERROR: LoadError: Number of blocks in y-dimension exceeds device limit (240000 > 65535)": "launch-failure",
    # DXGI's device removal by number, by name and in Windows' own words (deepfakes/faceswap#1382 via DirectML,
    # CnCNet/xna-cncnet-client#27, hessiser/veritas#41, amerkoleci/Vortice.Windows#485)
    "2024-04-08 03:15:23.769735: F tensorflow/c/logging.cc:43] HRESULT failed with 0x887a0005: "
    "chunk->resource->Map(0, nullptr, &upload_heap_data)": "gpu-hang",
    "14.12. 23:13:12.500    Message: HRESULT: [0x887A0005], Module: [SharpDX.DXGI], ApiCode: "
    "[DXGI_ERROR_DEVICE_REMOVED/DeviceRemoved], Message: Unknown": "gpu-hang",
    "The GPU device instance has been suspended. Use GetDeviceRemovedReason to determine the appropriate action. "
    "(0x887A0005)": "gpu-hang",
    # nvidia-smi -q's recovery action quoted in prose (utkuozdemir/nvidia_gpu_exporter#393)
    "Diffing the two suggests that hooking into ` GPU Recovery Action                   : Reset` vs. `GPU Recovery "
    "Action": "gpu-hang",
}


RND33_WORDINGS = {
    # a program's own minimum compute capability (ArcInstitute/evo2#9 through TransformerEngine, graphdeco-inria's
    # SIBR viewer as a 1080 Ti user quoted it) and an architecture named SM120 (huggingface/lerobot#2217)
    "AssertionError: Device compute capability 8.9 or higher required for FP8 execution.": "arch-mismatch",
    'I encountered an error message that stated, "Sorry, need at least compute capability 7.0+!"': "arch-mismatch",
    "However, this version of PyTorch does **not support the new NVIDIA SM120 GPU architecture** (e.g. RTX 5070).":
        "arch-mismatch",
    # OptiX's error text of OPTIX_ERROR_UNSUPPORTED_ABI_VERSION (tests/heldout/rnd33, an EnvGS user on driver 470)
    "/root/code/EnvGS/submodule/diff-surfel-tracing/optix_tracer/optix_wrapper.cpp:175 Optix Error: 'Unsupported ABI "
    "version'": "driver-mismatch",
}

RND43_WORDINGS = {
    # SageAttention's dispatch (lllyasviel/FramePack#384), Kokkos' architecture checks (kokkos/kokkos#1944; the later
    # wording as Idefix's documentation quotes it)
    "ValueError: Unsupported CUDA architecture: sm75": "arch-mismatch",
    "Kokkos::Cuda::initialize ERROR: running kernels compiled for compute capability 0.0 (< 5.0) on device with "
    "compute capability 5.0 (>=5.0), this would give incorrect results!": "arch-mismatch",
    "Kokkos::Cuda::initialize ERROR: likely mismatch of architecture": "arch-mismatch",
}

RND42_WORDINGS = {
    # xFormers' older kernel check (TheLastBen/fast-stable-diffusion#71, #33), beside its newer range form
    "FATAL: this function is for sm80, but was built for sm700": "arch-mismatch",
    "FATAL: kernel `fmha_cutlassF_f32_aligned_64x64_rf_sm80` is for sm80-sm100, but was built for sm37":
        "arch-mismatch",
    # PyTorch's NLL check as the CUDA kernel asserts it (tests/corpus valj-device-assert-mmdet-copyif-02)
    "/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:57: void ClassNLLCriterion_updateOutput_no_reduce_kernel(int): "
    "block: [0,0,0], thread: [9,0,0] Assertion `cur_target >= 0 && cur_target < n_classes` failed.": "device-assert",
}

RND41_WORDINGS = {
    # Kaldi's CUDA allocator (kaldi-asr/kaldi#4374), ManagedCuda's NPP image allocation (kunzmi/ImageStackAlignator)
    "# Failed to allocate a memory region during nnet3-chain-train2": "gpu-oom",
    "it shows the exception: ManagedCuda.NPP.NPPException:\u201cDevice allocation error\u201d .": "gpu-oom",
}

RND40_WORDINGS = {
    # nvidia-modprobe's UVM module (broadinstitute/cromwell#4935), slurmd's device file (fgci-org/ansible-role-cuda#3),
    # the driver's module failing to compile against the kernel, plain and under DKMS (microsoft/pai#2446), NVML's
    # and CUDA's driver libraries absent (sirius-db/sirius#459, rapidsai/cudf#11941), TensorRT's ONNX parser
    # (NVIDIA-AI-IOT/Lidar_AI_Solution#62; trtexec's own wording)
    "2019/05/03 14:40:50 E: command failed: nvidia-docker | 2019/05/03 14:40:50 Error: Could not load UVM kernel "
    "module. Is nvidia-modprobe installed?": "driver-mismatch",
    "Jul  8 15:11:23 gpu slurmd[5421]: fatal: can't stat gres.conf file /dev//nvidia0: No such file or directory":
        "driver-mismatch",
    "   /root/drivers/NVIDIA-Linux-x86_64-384.111/kernel/common/inc/nv-mm.h:44:9: error: too many arguments to "
    "function 'get_user_pages'": "driver-mismatch",
    "/var/lib/dkms/nvidia/550.54.14/build/nvidia/nv-mmap.c:123:5: error: implicit declaration of function "
    "'vm_flags_set'": "driver-mismatch",
    "1. **`NVML not available: failed to load libnvidia-ml.so.1`** — printed on every DuckDB launch": "driver-mismatch",
    "RuntimeError: Failed to dlopen libcuda.so": "driver-mismatch",
    "Parse onnx failed.": "unknown",
    "[06/13/2024-10:02:11] [E] Failed to parse onnx file": "unknown",
}

RND38_WORDINGS = {
    # a wording of TensorFlow's out-of-memory in a person's words (NVlabs/sionna#345), a build without CUDA told by
    # the program that aborts (shacklettbp/madrona_escape_room#3), PyTorch's own assertion of a CPU-only build
    "# Resource exhausted error: when allocating tensor with shape[324937,4096,3,1]": "gpu-oom",
    "Madrona was not compiled with CUDA support\nAborted (core dumped)": "unknown",
    "AssertionError: Torch not compiled with CUDA enabled": "unknown",
}

RND37_WORDINGS = {
    # PyTorch 2.6's watchdog frame (vipshop/cache-dit#761), vLLM's free-memory check
    # (llm-d-incubation/llm-d-fast-model-actuation#709), GPUDirect RDMA's peer-memory module
    # (Mellanox/nv_peer_memory#79, Mellanox/gpu_direct_rdma_access#5), gVisor's driver check (google/gvisor#10605),
    # PyTorch's OOM message that could not ask NVML (google/gvisor PR 9700, fal-ai/fal#478), a CUDA error name typed
    # with a letter missing (cudaforengineers#11)
    "frame #3: c10d::ProcessGroupNCCL::Watchdog::run() + 0xdf (0x7f70d245340f in /opt/conda/lib/python3.11/"
    "site-packages/torch/lib/libtorch_cuda.so)": "nccl-timeout",
    "ValueError: Free memory on device cuda:0 (0.41/79.18 GiB) on startup is less than desired GPU memory utilization "
    "(0.85, 67.3 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.": "gpu-oom",
    "# Error: nv_peer_mem: Unknown symbol ib_register_peer_memory_client": "driver-mismatch",
    "Couldn't register GPU MR": "driver-mismatch",
    "registering nvproxy driver: unsupported Nvidia driver version: 535.161.08": "driver-mismatch",
    'RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":830, please '
    "report a bug to PyTorch.": "gpu-oom",
    "When I ran the application inside of cuda-gdb, I would get a cudaErrorLanchOutOfResources error:":
        "launch-failure",
}

RND36_WORDINGS = {
    # a kernel's own architecture guard (eugr/spark-vllm-docker#143), NVML's bare failure
    # (PaddlePaddle/FastDeploy#1106), ibverbs calls with their errno as a reporter wrote them
    # (luxingcom/aicad-nccl-optimization#1)
    "This kernel only supports sm120.": "arch-mismatch",
    "# GPU发布服务错误 Error: Failed to initialize NVML": "driver-mismatch",
    '   必然把"不在同一根缆上"的两个口配到一起 → `ibv_modify_qp 110` / `p2p.cc` 内部错误。': "nccl-comm-error",
    "2. **内核 CMA 回归**：`7.0.0-1019-nvidia` 上 `CmaTotal: 0 kB`，导致 `ibv_reg_mr_iova2` ENOMEM（1 KB 都失败）；":
        "nccl-comm-error",
}

RND35_WORDINGS = {
    # the driver's control node absent, and lspci's GPU on nouveau (tinygrad/tinygrad#12723,
    # negativo17/nvidia-driver#73)
    "FileNotFoundError: [Errno 2] No such file or directory: '/dev/nvidiactl'": "driver-mismatch",
    "\tKernel driver in use: nouveau": "driver-mismatch",
    # NCCL's unhandled CUDA error, most often its transports between GPUs (PrimeIntellect-ai/prime-rl#2236)
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)": "nccl-comm-error",
    # out-of-memory wordings from the programs' own sources: Blender Cycles (princeton-vl/infinigen#30,
    # ynshung/blender-colab#5), SGLang (sgl-project/sglang#4330), TensorRT (seatv/ChitraMaya#7)
    "System is out of GPU memory": "gpu-oom",
    "System is out of GPU and shared host memory": "gpu-oom",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.": "gpu-oom",
    "[TRT] [W] Requested amount of GPU memory (811032832 bytes) could not be allocated. There may not be enough free "
    "memory for allocation to succeed.": "gpu-oom",
}


def test_a_programs_message_pasted_into_a_reporters_sentence_is_the_programs(tmp_path):
    """eugr/spark-vllm-docker#143 pasted vLLM's guard and CUDA's error into its prose: the guard is read as the
    program's phrase (the root), not only as the reporter's words, which a program's launch failure would outrank."""
    (tmp_path / "issue.md").write_text(
        "If you're running vLLM on a DGX Spark (GB10, SM12.1) and hitting this during model warmup:\n\n"
        "This kernel only supports sm120.\ncudaErrorLaunchFailure: unspecified launch failure\n", encoding="utf-8")
    findings = analyze([str(tmp_path / "issue.md")]).findings
    assert (findings[0].cause, findings[0].signature) == ("arch-mismatch", "phrase-arch-mismatch")
    assert findings[1].cause == "launch-failure" and findings[1].consequence_of == "phrase-arch-mismatch"


def test_a_cuda_error_name_typed_with_a_letter_wrong_is_read_as_the_one_meant():
    """One name a letter from a known one, and only one, is read as it; a name near none, or a short one, is not."""
    from postmortem import knowledge

    assert knowledge.cuda_error_misspelt("cudaErrorLanchOutOfResources").runtime_name == "cudaErrorLaunchOutOfResources"
    assert knowledge.cuda_error_misspelt("cudaErrorIllegalAdress").runtime_name == "cudaErrorIllegalAddress"
    assert knowledge.cuda_error_misspelt("cudaErrorFooBarBazQux") is None
    assert knowledge.cuda_error_misspelt("cudaErrorAsert") is None  # too short to tell from a typo of another


def test_a_missing_verbs_library_is_no_transport_failure():
    """NCCL warns when libibverbs is not installed and goes on over sockets (NVIDIA/nccl#257, where the job then hung
    for another reason): the warning alone is no finding."""
    log = ("jupyter-vmarkovtsev:15833:15833 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
           "jupyter-vmarkovtsev:15833:15833 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.3.32<0>\n")
    assert not analyze_text(log).findings


def test_a_hint_of_what_to_do_should_memory_run_out_is_no_report():
    """Real-ESRGAN (and the programs built on it) prints its --tile hint after any error: alone it reports nothing,
    after the CPU's half-precision error it does not make that a GPU out of memory; after a real one, the real one is
    read (tests/heldout/rnd34, xinntao/Real-ESRGAN's inference_realesrgan.py)."""
    hint = "If you encounter CUDA out of memory, try to set --tile with a smaller number.\n"
    assert not analyze_text(hint).findings
    assert not analyze_text("Error \"slow_conv2d_cpu\" not implemented for 'Half'\n" + hint).findings
    real = ("Error CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.76 GiB total capacity; 8.02 GiB already "
            "allocated; 1.51 GiB free; 8.22 GiB reserved in total by PyTorch)\n")
    assert analyze_text(real + hint).findings[0].cause == "gpu-oom"


def test_near_misses_of_round_33s_wordings_are_not_read():
    """An ABI version refused outside OptiX and a memory need that names no architecture are no verdict."""
    for text in ("error: Unsupported ABI version 3 in plugin manifest", "This model needs at least 16 GB of memory."):
        assert not analyze_text(text + "\n").findings, text


def test_near_misses_of_round_32s_wordings_are_not_read():
    """A healthy recovery action, a sentence about the field, DXGI's other codes and CUDA.jl's non-null check name no
    cause."""
    for text in ("    GPU Recovery Action                   : None", "Check the GPU Recovery Action field first.",
                 "Renderer encountered an unexpected error: 0x887a0004 The specified device interface or feature level "
                 "is not supported on this system.", "ERROR: Grid dimensions should be non-null"):
        assert not analyze_text(text + "\n").findings, text


def test_a_gpu_librarys_memory_error_is_no_host_oom():
    """PyCUDA's and CuPy's exceptions are named MemoryError too, for GPU memory: only Python's own is the host's."""
    for text in ("pycuda._driver.MemoryError: cuMemAlloc failed: out of memory",
                 "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes"):
        assert all(f.cause != "host-oom" for f in analyze_text(text + "\n").findings), text


def test_an_unknown_cpu_and_a_roomy_shm_give_no_verdict():
    """LLVM says the same of a CPU name (rust-lang/rust#90894): only a GPU architecture's name is an arch gap; a
    /dev/shm that df shows with room is no exhausted one."""
    cpu = "'cortex-a75' is not a recognized processor for this target (ignoring processor)"
    assert not analyze_text(cpu + "\n").findings
    assert not analyze_text("Filesystem Size Used Avail Use% Mounted on\nshm 64M 12M 52M 19% /dev/shm\n").findings


def test_a_module_of_another_kind_with_other_symbols_is_no_gpu_driver():
    """The kernel's symbol-version refusal names a GPU driver only for a GPU module: VirtualBox's own is not one."""
    text = "[   12.801443] vboxdrv: disagrees about version of symbol module_layout\n"
    assert "driver-mismatch" not in [f.cause for f in analyze_text(text).findings]


def test_a_bad_alloc_beside_the_gpu_is_not_the_hosts():
    """thrust's bad_alloc is a failed cudaMalloc; a terminate's bad_alloc is the abort's (native_crash reads it: a
    program's own bug throws it as well, tests/heldout/rnd10's COLMAP case)."""
    for text in ("terminate called after throwing an instance of 'thrust::system::detail::bad_alloc'\n",
                 "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"):
        assert "host-oom" not in [f.cause for f in analyze_text(text).findings], text


def test_tensorflows_harmless_library_probe_is_not_a_missing_library():
    """TensorFlow probes for the CUDA libraries and says to ignore the dlerror when no GPU is wanted
    (tests/corpus/vald-neg-tf2-reset-default-graph-cudart-dlerror-01): no driver verdict from it."""
    text = ("2021-06-27 23:00:09.416600: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not "
            "load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No "
            "such file or directory\n")
    assert "driver-mismatch" not in [f.cause for f in analyze_text(text).findings]


def test_a_bindings_variant_names_an_error_only_where_a_binding_printed_it():
    """`Timeout`, `Assert`, `Unknown` are CUDA_ERROR_* variants in Rust's and .NET's bindings and everyday words
    elsewhere: knowledge.cuda_error does not read them, only the variant lookup does."""
    from postmortem import knowledge

    for word in ("timeout", "assert", "unknown"):
        assert knowledge.cuda_error(word) is None
    assert knowledge.cuda_error_variant("Timeout").driver_name == "CUDA_ERROR_TIMEOUT"
    assert knowledge.cuda_error_variant("ErrorIllegalAddress").driver_name == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_near_misses_of_round_18s_wordings_are_not_read():
    """A library's file that failed to load is no failed call; an enum word of another API is no CUDA error; a glibc
    message quoted inside a sentence is not glibc's report."""
    for text in ("Loading libcublas.so.11 failed: cannot open shared object file",
                 "Cuda(Device) is selected as the backend",
                 "We fixed the corrupted size vs. prev_size error last week by upgrading the package."):
        causes = [f.cause for f in analyze_text(text + "\n").findings]
        assert not {"library-failure", "arch-mismatch", "native-crash"} & set(causes), (text, causes)


def test_an_architecture_option_typed_wrong_is_not_a_gpu_too_new():
    """multimodallearning/pytorch-mask-rcnn#38: `-arch=[sm_61]` typed with its brackets; the compiler knows sm_61."""
    text = "nvcc fatal   : Value '[sm_61]' is not defined for option 'gpu-architecture'\n"
    assert "arch-mismatch" not in [f.cause for f in analyze_text(text).findings]


def test_a_list_of_possible_causes_is_not_a_report_of_one():
    """Ray's actor-death message names the OOM killer among causes it cannot tell apart (vllm-project/vllm#586)."""
    text = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
            "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential "
            "root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.")
    assert "host-oom" not in [f.cause for f in analyze_text(text + "\n").findings]


# Wordings of the harvested corpus (tests/corpus) that the tables now hold.
CORPUS_WORDINGS = {
    # Kokkos' architecture check (kokkos/kokkos#6092)
    "Kokkos::Cuda::initialize ERROR: likely mismatch of architecture": "arch-mismatch",
    # cuDNN's CUDNN_STATUS_ARCH_MISMATCH in a framework's words (pluskid/Mocha.jl#57)
    "16-Mar 23:11:13:INFO:root:Initializing CuDNN backend...\nERROR: Arch mismatch\n in create at "
    "/home/b/.julia/v0.3/Mocha/src/cuda/cudnn.jl:43": "arch-mismatch",
    # nvidia-docker 1.0's older wording of the same check (NVIDIA/nvidia-docker#68)
    "nvidia-docker | 2016/04/09 00:07:59 Error: unsupported CUDA version: 7.5 < 6.5": "driver-mismatch",
}


@pytest.mark.parametrize(("text", "cause"), [*RND3_WORDINGS.items(), *RND4_WORDINGS.items(), *RND5_WORDINGS.items(),
                                             *RND6_WORDINGS.items(), *RND7_WORDINGS.items(),
                                             *RND8_WORDINGS.items(), *RND9_WORDINGS.items(),
                                             *RND10_WORDINGS.items(), *RND11_WORDINGS.items(),
                                             *RND12_WORDINGS.items(), *RND13_WORDINGS.items(),
                                             *RND14_WORDINGS.items(), *RND15_WORDINGS.items(),
                                             *RND16_WORDINGS.items(), *RND17_WORDINGS.items(),
                                             *RND18_WORDINGS.items(), *RND19_WORDINGS.items(),
                                             *RND20_WORDINGS.items(), *RND21_WORDINGS.items(),
                                             *RND22_WORDINGS.items(), *RND23_WORDINGS.items(),
                                             *RND24_WORDINGS.items(), *RND26_WORDINGS.items(),
                                             *RND27_WORDINGS.items(), *DOCUMENTED_WORDINGS.items(),
                                             *RND28_WORDINGS.items(), *RND29_WORDINGS.items(),
                                             *RND30_WORDINGS.items(), *RND31_WORDINGS.items(), *RND32_WORDINGS.items(),
                                             *RND33_WORDINGS.items(), *RND35_WORDINGS.items(), *RND36_WORDINGS.items(),
                                             *RND37_WORDINGS.items(), *RND38_WORDINGS.items(), *RND40_WORDINGS.items(),
                                             *RND41_WORDINGS.items(), *RND42_WORDINGS.items(), *RND43_WORDINGS.items(),
                                             *CORPUS_WORDINGS.items()])
def test_held_out_rounds_wordings_are_read_by_general_rules(text, cause):
    report = analyze_text(text + "\n")
    assert report.findings and report.findings[0].cause == cause, [f.cause for f in report.findings]


def test_a_killed_word_in_prose_is_the_shells_only_when_capitalised_inside_a_sentence_or_quoted():
    assert not analyze_text("I killed the process by hand and restarted.\n").findings
    assert not analyze_text("The old job was killed by the admin yesterday.\n").findings
    assert analyze_text("it just says 'killed' after the model loads\n").findings[0].cause == "host-oom"
    # a kill the text says a person sent ends a hang, it is no sign of memory (marin-community/marin#7344)
    assert not analyze_text("The job is no longer running. Iris records the parent and training job as `killed` at "
                            "`2026-08-03 23:08:13.292 UTC`. All 128 training tasks were killed by the user, with zero "
                            "task failures and zero retries.\n").findings


def test_a_prose_line_keeps_its_codes_for_its_own_reader():
    """A paragraph whose nvidia-smi message a format reader read: the phrase beside it is read, its codes are not
    read a second time."""
    text = ("We see `Failed to initialize NVML: Driver/library version mismatch` on every node after the upgrade and "
            "nothing else in the logs, so the pods never start and the jobs wait in the queue for hours.")
    report = analyze_text(text + "\n")
    assert [f.cause for f in report.findings][:1] == ["driver-mismatch"]
    assert not [e for e in report.events if e.kind == "nvml-error" and e.fields.get("read") == LOOSE]


def test_a_segfault_after_a_failed_load_of_the_input_is_the_loads_last_step_and_only_after_one():
    """NVIDIA-AI-IOT/Lidar_AI_Solution#62: the ONNX model could not be parsed (a download cut short), the program went
    on and segfaulted (段错误) seven lines later; the crash is the failed load's consequence. A segfault with no
    such line before it stays the root."""
    text = ("Total 2\nParse onnx failed.\n\n<<<<<<<<<<<\nload file: ../data/test/3615d82e7e8546fea5f181157f42e30b.bin\n"
            "find points num: 267057\n[TIME] Voxelization:            3.36592 ms\nvalid_num: 106004\n段错误\n")
    report = analyze_text(text)
    assert report.findings[0].signature == "phrase-input-error"
    assert [f.consequence_of for f in report.findings if f.cause == "native-crash"] == ["phrase-input-error"]
    alone = analyze_text(text.replace("Parse onnx failed.\n", ""))
    assert alone.findings[0].cause == "native-crash" and alone.findings[0].consequence_of is None


def test_an_abort_after_a_model_file_error_is_the_model_files_verdict_not_a_native_crash():
    """ollama/ollama#5812: the runner aborts (core dumped) because the model file's tensors have the wrong shapes.
    The verdict says so (cause unknown: the vocabulary has no name for a bad input) and the abort is its last step."""
    text = ("Error: llama runner process has terminated: signal: aborted (core dumped) error loading model: "
            "check_tensor_dims: tensor 'blk.0.attn_q.weight' has wrong shape; expected  5120,  5120, got  5120,  "
            "4096,     1,     1\nllama_load_model_from_file: exception loading model\n")
    report = analyze_text(text)
    assert report.findings[0].signature == "phrase-input-error"
    assert report.findings[0].cause == "unknown"
    assert all(f.consequence_of == "phrase-input-error" for f in report.findings[1:] if f.cause == "native-crash")
    oom = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out "
           "of memory\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n")
    assert analyze_text(oom).findings[0].cause == "gpu-oom"  # a load that failed for GPU memory is the GPU's


# NVIDIA's own documentation, quoted as people quote it into an issue.
PAGE_RETIREMENT_DOC = """\
There are three main XIDs related to dynamic page retirement:

  \u2022 XID 48: A DBE has occurred.

  \u2022 XID 63: A page has successfully been retired.

  \u2022 XID 64: A page has failed retirement due to an error.

In the system log these XIDs show up in the following forms:

  \u2022 XID 48: \u201cXID 48 An uncorrectable double bit error (DBE) has been detected on GPU (<id>)\u201d

  \u2022 XID 63: \u201cXID 63 Dynamic Page Retirement: New retired page, reload the driver to activate. \
(<address>)\u201d
"""
"""https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html"""
def test_documentation_of_codes_is_unread_not_a_verdict():
    for text in (PAGE_RETIREMENT_DOC,):
        report = analyze_text(text)
        assert not report.findings, [f.signature for f in report.findings]
        assert not [e for e in report.events if e.kind == "xid"]
        assert mentions.DOCUMENTED in {u.reason for u in report.inputs[0].unread}


def test_a_person_summing_up_a_failing_gpus_codes_is_still_read():
    """A reporter's own summary of a failing A100's HBM (tests/heldout/rnd3, wtdcode/vllm-backport): codes in a
    list, and two on one line, are what happened, not documentation."""
    text = ("- `Xid 48 / 171`: uncorrectable double-bit ECC (DBE) in HBM framebuffer\n"
            "- `Xid 63`: Row Remapper marks a new row for remapping (\"reset gpu to activate\")\n"
            "- `Xid 94` bursts + `Xid 154` (GPU recovery action \u2192 Drain and Reset)\n")
    report = analyze_text(text)
    assert {e.fields["xid"] for e in report.events if e.kind == "xid"} == {48, 63, 94, 154}
    assert report.findings[0].cause == "gpu-memory-ecc"


# What reporters write in their own words (data/reported-symptoms.tsv), read in a Markdown file as in an issue.
TOLD = {
    "When blender is rendering the scene, the linux oom killer kicks-in and kill my shell.": "host-oom",
    "After running for a while there is a message of GPU being lost.": "gpu-off-bus",
    "As soon as it reached 85 \u00b0C the screen stopped working.": "gpu-thermal-power",
    "Solved: To fix this problem, I've had to go to the BIOS and explicitly set the x16 PCIe to \"gen2\" instead of "
    "\"auto\".": "pcie-bus",
    "I opened my case ripped my Nvlink out of my system. Solved!": "gpu-nvlink",
    "@henzler, it still does not look like jade is updated with new drivers. driver 384.145  is loaded which is not "
    "sufficient for cuda10.0.": "driver-mismatch",
    "seems like it is a hardware problem. risers does not receive proper power from the PSU. so problem is solved now.":
        "gpu-thermal-power",
    "I checked the memory of the machine, and this program was killed after it took up 60g of memory.": "host-oom",
    "OK, I found the answer. It is because the default env_num is too much for my GPU RAM(NV 3060 12G), I reduced the "
    "number of env to 40 and it can run well, which took about 8G GPU RAM.": "gpu-oom",
    "When I use diffusers's datasets.map() in a multi-GPU setting, it results in a NCCL timeout error after N "
    "iterations of train_dataset.map().": "nccl-timeout",
    "Running the test under compute-sanitizer --tool racecheck indicates a data hazard in the circular buffering code "
    "that uses cp.async.": "kernel-race",
    # round 32: a hyphenated symptom (ai-dynamo/dynamo#11761), an OOM told with the kill after it
    # (open-mmlab/playground#110) and the kill before it (opendilab/LightZero#82), host RAM named before OOM
    # (THU-MIG/yoloe#24)
    "vLLM v0.20.1 has a CUDA illegal-memory-access regression in torch.compile/Inductor fused kernels.":
        "illegal-memory-access",
    "The label-studio ml backend is OOM and be killed after I use it for a while": "host-oom",
    "Training process gets killed due to OOM": "host-oom",
    "In `train.py` workers=8 casued RAM OOM.": "host-oom",
    # round 33: a hang told by the number of GPUs it needs (Physical-Intelligence/openpi#483)
    "However, when I use 2 or 4 GPUs for training, the process gets stuck.": "nccl-timeout",
    # an architecture refused, in the reporter's words (huggingface/lerobot#2217,
    # graphdeco-inria/gaussian-splatting#175)
    "However, this version of PyTorch does **not support the new NVIDIA SM120 GPU architecture** (e.g. RTX 5070).":
        "arch-mismatch",
    'I encountered an error message that stated, "Sorry, need at least compute capability 7.0+!"': "arch-mismatch",
    # round 34: OOM as a verb (mobiusml/hqq), a code typed with hyphens for underscores (Dream-in-4D)
    "# HQQ OOMs on large models": "gpu-oom",
    "A V6000 graphics card would display a problem: **Runtime Error: cuMemCreate failed: CUDA-ERROR_OUT_OF-MEMORY**":
        "gpu-oom",
    # round 35: a device-side assert and NCCL's set-up told (tile-ai/tilelang#2574, NVIDIA-NeMo/RL#1352), a collective
    # named before its hang (NVIDIA/nccl#257), memory used up told in Chinese, the host's (内存, hiyouga/EasyR1#156)
    # and the GPU's (显存, Intellindust-AI-Lab/DEIMv2#43)
    "`T.atomic_load`/`T.atomic_store` accept an op-illegal memory order \u2192 device-side assert instead of a "
    "frontend reject": "device-assert",
    "It fails at the pynccl group initialization.": "nccl-comm-error",
    "Using the `master` version of nccl. I launch `all_reduce_perf` and it hangs with 100% volatile GPU usage "
    "reported.": "nccl-timeout",
    "内存泄漏一直未被解决，标准配置下几个batch内存就会被耗光，但是相关issue已经被closed": "host-oom",
    "训练报错显存不足，参数batchsize都改成8，单卡训练，图像大小640。": "gpu-oom",
    # round 37: initcheck's findings told (cholla-hydro/cholla#197)
    "Most of them appear to be uninitialized memory accesses in the HLLC solver": "uninitialized-read",
    # round 38: a hang told in Chinese beside what runs it (hiyouga/LlamaFactory#1931, #2889, #755), and a stall of a
    # whole cluster (marin-community/marin#7344)
    "使用Deepspeed ZERO3在4台A100上微调Mixtral-8x7B卡住，提示warning如下": "nccl-timeout",
    "deepspeed多机训练卡住不动了": "nccl-timeout",
    "The retained telemetry establishes a cluster-wide device-side stall:": "nccl-timeout",
    # round 39: an uncorrectable ECC error told (NVIDIA/k8s-device-plugin#267), a container told it cannot reach the
    # GPU (jellyfin/jellyfin#2722, NVIDIA/nvidia-container-toolkit#32)
    "when one GPU on the host is abnormal due to Uncorrectable ECC Error, k8s-device-plugin seems to think it "
    "healthy.": "gpu-memory-ecc",
    "After updating host and nvidia driver, transcoding fail cause container cant access GPU": "driver-mismatch",
    "Cannot access GPUs from inside a container after rebooting a host machine": "driver-mismatch",
    # round 40: a driver told too old for the CUDA it names, in a sentence with the version between
    # (sirius-db/sirius#459)
    "Installing a driver that only supports CUDA 12.2 (driver 535.x, commonly installed via `apt`) is insufficient.":
        "driver-mismatch",
    # round 42: a power supply told at fault, in its limiter and in plain words (NVIDIA/cudf#10336,
    # tensorflow/tensorflow#8858), and PCIe slots lowered from Gen5 to Gen4 (vllm-project/vllm#14628)
    "It is a hardware PSU issue.": "gpu-thermal-power",
    "it turns out that it has an (undocumented) power draw down limiter on the rails to prevent damage to the "
    "components": "gpu-thermal-power",
    "Our issue turned out to be an issue with power supply as well.": "gpu-thermal-power",
    "**Fix:** BIOS update (1805→2306, AGESA 1.3.0.1b) + **forcing both GPU slots from Auto to Gen4**.": "pcie-bus",
    # round 36: a process told killed again and again, with no error (BMIRDS/deepslide#40)
    "it appears that at the process step, the process keeps being killed after a specific svs. There is no error "
    "being thrown however.": "host-oom",
}


@pytest.mark.parametrize(("sentence", "cause"), TOLD.items())
def test_a_reporters_words_in_a_markdown_file_are_a_weak_finding(tmp_path, sentence, cause):
    (tmp_path / "report.md").write_text(f"### Describe the bug\n\n{sentence}\n", encoding="utf-8")
    (tmp_path / "report.txt").write_text(f"{sentence}\n", encoding="utf-8")
    report = analyze([str(tmp_path / "report.md")])
    assert [f.cause for f in report.findings][:1] == [cause]
    assert report.findings[0].signature.startswith("reported-")
    assert not [f for f in analyze([str(tmp_path / "report.txt")]).findings if f.signature.startswith("reported-")]


def test_a_line_that_names_the_gpu_model_keeps_its_codes_for_the_universal_reader(tmp_path):
    """The reporter's reader takes "H100" from the line as the machine's GPU; the Xids on the same line are still
    read (gpustack/runtime#26: a card whose GSP stopped answering, told in a sentence that also names the node)."""
    (tmp_path / "pr.md").write_text(
        "## Summary\n\nOn an 8x H100 node, a card whose GSP firmware stopped answering RPCs (Xid 119 timeout \u2192 "
        "Xid 154 GPU Reset Required) showed `ERR!`/`N/A` telemetry in `nvidia-smi`.\n", encoding="utf-8")
    report = analyze([str(tmp_path / "pr.md")])
    assert {e.fields["xid"] for e in report.events if e.kind == "xid"} == {119, 154}
    assert report.findings[0].cause == "gpu-firmware"


def test_two_symptoms_of_one_title_are_two_events_and_the_named_memory_wins(tmp_path):
    """nf-core/methylseq#528's title: "OOM" alone reads as the GPU's, "CPU OOM" says whose (both are kept)."""
    (tmp_path / "report.md").write_text("# PARABRICKS_FQ2BAMMETH fails with CPU OOM\n", encoding="utf-8")
    report = analyze([str(tmp_path / "report.md")])
    assert {e.fields["symptom"] for e in report.events} == {"out-of-memory", "host-oom-told"}
    assert report.findings[0].cause == "host-oom"


def test_a_reporters_words_are_not_read_where_denied_or_fenced_and_rank_after_a_programs(tmp_path):
    (tmp_path / "denied.md").write_text("No MCE, panic, OOM in the journal.\n", encoding="utf-8")
    assert not analyze([str(tmp_path / "denied.md")]).findings
    # a project's hint of what to do should memory run out, in Chinese ("if VRAM is short, lower --batchsize")
    (tmp_path / "hint.md").write_text("- 若GPU显存不足，可减小--batchsize参数（例如调整为16）\n", encoding="utf-8")
    assert not analyze([str(tmp_path / "hint.md")]).findings
    # PyTorch's advice under every CUDA error, pasted outside a fence (tdrussell/diffusion-pipe#219)
    (tmp_path / "advice.md").write_text("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
                                        encoding="utf-8")
    assert not analyze([str(tmp_path / "advice.md")]).findings
    (tmp_path / "fenced.md").write_text("Log:\n```\nthe linux oom killer kicks-in\n```\n", encoding="utf-8")
    assert not [f for f in analyze([str(tmp_path / "fenced.md")]).findings if f.signature.startswith("reported-")]
    (tmp_path / "both.md").write_text(  # a told symptom of severity critical beside a kernel line of severity error
        "The desktop freezes and the machine reboots under load.\n\n"
        "[ 7.1] NVRM: Xid (PCI:0000:01:00): 31, pid=1234, name=python, Ch 00000008, intr 10000000. MMU Fault: ENGINE "
        "GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ\n",
        encoding="utf-8")
    findings = analyze([str(tmp_path / "both.md")]).findings
    assert [f.cause for f in findings][:2] == ["illegal-memory-access", "gpu-thermal-power"]
    assert findings[0].consequence_of is None


def test_a_cpp_exception_code_of_windows_is_an_abort_and_an_unknown_customer_code_is_not():
    """ollama's runner on Windows (tests/corpus valv-ollama-0xe06d7363-olddriver-01): 0xE06D7363 is MSVC's C++
    exception; another 0xE... code is a program's own and says nothing."""
    [event] = [e for e in analyze_text("Error: llama runner process has terminated: exit status 0xe06d7363\n").events
               if e.kind == "fatal-signal"]
    assert (event.fields["exception_code"], event.fields["signal"]) == ("0xe06d7363", "SIGABRT")
    assert not analyze_text("Error: worker exited: exit status 0xe0000001\n").findings


@pytest.mark.parametrize("text, signal", [
    # as posted (data/shell-signals.tsv names the posts): bash's report in German, Chinese, Spanish, Italian,
    # Portuguese and Russian
    ("qemu-system-x86_64: --mon foo: Device 'foo' is in use\nAbgebrochen (Speicherabzug geschrieben)", "SIGABRT"),
    ("from torch_scatter import scatter_mean\n段错误 (核心已转储)", "SIGSEGV"),
    ("free(): double free detected in tcache 2\n已放弃 (核心已转储)", "SIGABRT"),
    ("$ ./test_bus\n总线错误 (核心已转储)", "SIGBUS"),
    ("Address of ptr 0x600a48. Value of c 4\nViolación de segmento (`core' generado)", "SIGSEGV"),
    ("$ ./pointer\nErrore di segmentazione (core dump creato)", "SIGSEGV"),
    ("Operador inválido\nFalha de segmentação (imagem do núcleo gravada)", "SIGSEGV"),
    ("cbpi@cbpi-VirtualBox:~ $ sol\nОшибка сегментирования (стек памяти сброшен на диск)", "SIGSEGV"),
])
def test_a_shells_signal_report_is_read_in_its_users_language(text, signal):
    report = analyze_text(text + "\n")
    signals = [e.fields.get("signal") for e in report.events if e.kind == "fatal-signal"]
    assert signals == [signal], signals
    english = analyze_text(f"{ {'SIGSEGV': 'Segmentation fault', 'SIGABRT': 'Aborted', 'SIGBUS': 'Bus error'}[signal]}"
                           " (core dumped)\n")
    assert report.findings[0].cause == english.findings[0].cause  # read as the English report is


def test_a_signal_word_inside_a_sentence_is_no_shell_report():
    for text in ("Die Verbindung wurde abgebrochen, bitte erneut versuchen.",
                 "El proceso fue abortado por el usuario."):
        assert not analyze_text(text + "\n").findings, text


def test_a_health_checks_xid_noun_is_read_but_not_its_absence():
    """Slurm NHC's `Found XID errors: 63` names Xid 63; a check that found none names none."""
    assert analyze_text("Found XID errors: 63\n").findings[0].cause == "gpu-memory-ecc"
    for text in ("No XID errors found\n", "XID errors: 0\n", "check_xid_errors: no Xid errors in dmesg\n"):
        assert not analyze_text(text).findings, text


def test_an_untagged_warn_is_nccls_only_after_its_prefix_and_source_line():
    """NCCL before 2.3 printed `host:pid:tid [dev] file:line WARN ...` without its tag; a log level WARN elsewhere is
    not NCCL's."""
    old = "seyun:17283:17549 [3] include/socket.h:371 WARN Connection closed by remote peer\n"
    assert [e.kind for e in analyze_text(old).events] == ["nccl-warn"]
    for text in ("2024-05-01 12:00:01 WARN Connection closed by remote peer\n",
                 "[server] WARN Connection refused, retrying in 5 s\n"):
        assert "nccl-warn" not in [e.kind for e in analyze_text(text).events], text


def test_a_wide_exit_code_names_a_status_only_where_one_is_near():
    """A Windows status sign-extended to 64 bits and printed from a double keeps only its neighbourhood: the one
    known status within the double's rounding is named (0xC0000409), a value near several names none, and a negative
    exit code near -1 is no crash status."""
    fields = [e.fields for e in analyze_text("(Exit code: 18446744072635812000). Unknown error.\n").events
              if e.kind == "fatal-signal"]
    assert fields and fields[0]["exception_code"] == "0xc0000409"
    assert not analyze_text("(Exit code: 18446744072635810000). Unknown error.\n").findings
    assert not [e for e in analyze_text("(Exit code: 18446744073709515000). Unknown error.\n").events
                if e.kind == "fatal-signal"]


def test_segv_is_a_crash_word_only_alone():
    """`(SEGV)` and AddressSanitizer's `SEGV on` are a crash; siginfo's SEGV_MAPERR and a flag name are not."""
    assert analyze_text("==9==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000010\n"
                        ).findings[0].cause == "native-crash"
    for text in ("si_code=SEGV_MAPERR handled by the JIT\n", "export ASAN_OPTIONS=handle_segv=1 NO-SEGV-HANDLER=1\n"):
        assert not analyze_text(text).findings, text


def test_opencvs_gpu_modules_out_of_memory_is_not_the_hosts():
    """OpenCV's host allocator names cv::OutOfMemoryError; its CUDA modules' allocation failure is the GPU's."""
    text = ("cv2.error: OpenCV(4.8.0) /io/opencv/modules/core/src/cuda/gpu_mat.cu:116: error: (-217:Gpu API call) "
            "out of memory in function 'allocate'\n")
    assert "host-oom" not in [f.cause for f in analyze_text(text).findings]


@pytest.mark.parametrize("text", [
    # Kokkos' warning for a build older than the GPU: the kernels run, JIT-compiled from PTX (a performance note)
    "Kokkos::Cuda::initialize WARNING: running kernels compiled for compute capability 5.0 on device with compute "
    "capability 8.9, this will likely reduce potential performance.",
    # the NLL check as the CPU makes it: a RuntimeError on the host, not a kernel's assert (azavea/raster-vision#1072)
    "RuntimeError: Assertion `cur_target >= 0 && cur_target < n_classes' failed.  at "
    "/pytorch/aten/src/THNN/generic/SpatialClassNLLCriterion.c:111",
])
def test_a_phrase_in_its_harmless_or_cpu_form_is_no_finding(text):
    assert not analyze_text(text + "\n").findings


@pytest.mark.parametrize("sentence", [
    # a power supply only suspected, or ruled out (AUTOMATIC1111/stable-diffusion-webui#15226,
    # NVIDIA/open-gpu-kernel-modules#1151)
    "I am reading about it being a potential power supply issue.",
    "Tried two different 1600W PSUs from different brands so I doubt it is the PSU.",
])
def test_a_power_supply_suspected_or_ruled_out_is_not_told(tmp_path, sentence):
    (tmp_path / "report.md").write_text(f"### Describe the bug\n\n{sentence}\n", encoding="utf-8")
    assert "gpu-thermal-power" not in [f.cause for f in analyze([str(tmp_path / "report.md")]).findings]
