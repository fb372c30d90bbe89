"""The detectors of the framework-log source (sources/framework_log.py), one module per family of words.

`traceback` is the reader they share (launcher prefixes, the report plumbing, Python/IPython/Lua tracebacks);
`cuda_runtime` reads CUDA's and its libraries' words that every framework prints (errors, statuses, out of
memory); `arch` a GPU the build cannot run on; `torch` PyTorch's DataLoader workers and torchrun; `containers`
NGC container banners; `native_crash` fatal signals and aborts. framework_log.py tries them in one fixed order.
"""
