"""Build hook: stop a build on Python older than 3.11 with the reason, before pip resolves the dependencies.

pip 23 and older resolve a local project's dependencies before they weigh its Requires-Python, so on 3.10 they
stop at "No matching distribution found for demangle" (a dependency with no 3.10 release), which says nothing of
the interpreter. Metadata is prepared first, and this hook fails it with a message that does.
"""

from __future__ import annotations

import sys

from hatchling.metadata.plugin.interface import MetadataHookInterface

REQUIRED = (3, 11)


class CustomMetadataHook(MetadataHookInterface):
    """Refuses to prepare metadata on an interpreter older than REQUIRED."""

    def update(self, metadata: dict) -> None:
        if sys.version_info < REQUIRED:
            found = ".".join(map(str, sys.version_info[:3]))
            raise SystemExit(f"postmortem needs Python {REQUIRED[0]}.{REQUIRED[1]} or newer; this pip runs Python "
                             f"{found}. Make the virtual environment with a newer interpreter "
                             f"(python3.11 -m venv .venv) and install again.")
