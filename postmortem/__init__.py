"""postmortem: why a GPU job died, from the evidence it left behind."""

__version__ = "0.1.0"


def analyze(paths):
    """Analyse files, directories or archives; returns a `postmortem.model.Report`."""
    from .pipeline import analyze as run

    return run(list(paths))
