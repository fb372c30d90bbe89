"""Linux x86-64 core files, read like a debugger: notes, memory, modules, unwound and symbolized stacks.

Pure Python and `struct`; no gdb at run time. Entry point: `analysis.read_core`;
`sources.core_file` turns its result into events and the report's `cores` entry.
"""
