"""Renderers: a Report in the form each audience reads (terminal, machines)."""

from . import json_report, text_report

FORMATS = {"text": text_report.render, "json": json_report.render}
"""Output format name -> function(Report) -> str."""
