"""Run PyTorch's own flight-recorder analyzer (fr_trace) on the dumps make_dumps.py wrote.

Usage (from the repository root, with a python that has torch):
    /tmp/torchenv/bin/python tests/data/flight_recorder/run_fr_trace.py tests/data/flight_recorder

For each scenario folder SCEN it writes:
  SCEN/fr_trace.txt          fr_trace on the dumps exactly as written (first line: the command).
                             On Gloo dumps of torch 2.13 this fails: pg_config is empty, so
                             fr_trace has no group for pg "0" (KeyError ('0', 0)).
  SCEN/fr_trace_pgconfig.txt fr_trace (analysis, then -j) on a COPY of the pickles, in a temp
                             folder, whose pg_config is filled in from the job's known groups
                             (pg "0" default_pg = ranks 0-3, pg "1" sub_123 = ranks 1-3), in
                             the shape ProcessGroupNCCL records it.  Nothing else is changed.

The copies are decoded with an Unpickler whose find_class refuses every global, so decoding
them can run no code (they are this project's own files anyway).
"""

import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

SCENARIOS = ("skip", "size", "sleep", "barrier", "never")
PREFIX = "nccl_trace_rank_"
PG_CONFIG = {
    "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
    "1": {"name": "1", "desc": "sub_123", "ranks": "[1, 2, 3]"},
}


class NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
                       text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    out = "".join(line + "\n" for line in p.stdout.splitlines()
                  if "Failed to initialize NumPy" not in line
                  and "_conversion_method_template" not in line)
    return out + f"[exit status {p.returncode}]\n"


def show(cmd):
    return " ".join(cmd)


def main(root):
    root = os.path.relpath(root)
    fr = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]
    for scen in SCENARIOS:
        d = os.path.join(root, scen)
        cmd = fr + ["-p", PREFIX, "--print_stack_trace", d]
        with open(os.path.join(d, "fr_trace.txt"), "w") as f:
            f.write(show(cmd) + "\n" + run(cmd, os.getcwd()))

        tmp = os.path.join(tempfile.gettempdir(), "fr_trace_pgconfig", scen)
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for name in sorted(os.listdir(d)):
            if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
                with open(os.path.join(d, name), "rb") as f:
                    dump = NoGlobals(io.BytesIO(f.read())).load()
                dump["pg_config"] = PG_CONFIG
                with open(os.path.join(tmp, name), "wb") as f:
                    pickle.dump(dump, f, protocol=2)
        cmd_a = fr + ["-p", PREFIX, "--print_stack_trace", tmp]
        cmd_j = fr + ["-p", PREFIX, "-j", "--print_stack_trace", tmp]
        with open(os.path.join(d, "fr_trace_pgconfig.txt"), "w") as f:
            f.write(show(cmd_a) + "\n")
            f.write(f"# {tmp} = copy of {d}/{PREFIX}* with pg_config set to {PG_CONFIG}\n")
            f.write(run(cmd_a, os.getcwd()))
            f.write("\n" + show(cmd_j) + "\n" + run(cmd_j, os.getcwd()))
        print(f"{scen}: wrote fr_trace.txt, fr_trace_pgconfig.txt")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
