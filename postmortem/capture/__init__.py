"""Capturing evidence on the machine where a job died: `postmortem collect` and `postmortem run`.

`collect` gathers the kernel log, GPU state, software stack and crash files
into one redacted bundle that `postmortem analyze` reads; `run` starts a job
with the evidence switched on and explains its death. Nothing here is imported
by `analyze`: the commands import it on first use.
"""
