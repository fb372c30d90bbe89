"""postmortem: why a GPU job died, from the evidence it left behind."""

__version__ = "0.1.0"


def analyze(paths):
    """Analyse files, directories or archives; returns a `postmortem.model.Report`."""
    from .pipeline import analyze as run

    return run(list(paths))


def load(db):
    """The fleet store written by `postmortem scan` as pandas DataFrames (`.cases`, `.findings`, `.events`,
    `.facts`, `.gpus`, `.gpu_faults`, `.locations`; `.tables()` gives them all by name)."""
    from .fleet.store import load as read

    return read(db)
