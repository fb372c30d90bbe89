"""`postmortem explain`: what one code or one pasted line means, for someone holding only that.

`Xid 79`, `SXid 12028`, `cudaErrorIllegalAddress`, `CUDA_ERROR_ILLEGAL_ADDRESS`,
`700` and "an illegal memory access was encountered" are turned into the
event a source would have produced for them and matched against the same
signature database; anything else is analysed as a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import knowledge, later
from .knowledge import CudaError, cuda_error
from .model import Event, Finding, Location, Report
from .pipeline import analyze_text
from .rank import rank
from .render.i18n import LANGUAGES, Translator
from .signatures import Database, load_default, match

_XID = later.compile(r"(?i)^\s*+(s?xid)\s*+[:#]?\s*+(\d{1,6})\s*$")


@dataclass(frozen=True)
class Explanation:
    """What a token is (`what`), the CUDA error record when it names one, and the findings it gives.

    `known` is false when nothing was recognised: no documented code, no CUDA error, no log line a source reads,
    so the command can say so in its exit status.
    """

    token: str
    what: str
    cuda: CudaError | None
    findings: tuple[Finding, ...]
    known: bool = True


def explain(token: str, database: Database | None = None, lang: str = LANGUAGES[0]) -> Explanation:
    """Explain one code or one line of log, the findings' words in `lang` (as `analyze --lang` writes them)."""
    database = database or load_default()
    t = Translator(lang)
    if code := _XID.match(token):
        kind, number = code[1].lower(), int(code[2])
        label = f"{'Xid' if kind == 'xid' else 'SXid'} {number}"
        documented = knowledge.xid(number) if kind == "xid" else knowledge.sxid(number)
        name = t.code_name(kind, number, documented.name) if documented else None
        what = (t("explain_code", label=label, name=name, origin=documented.origin, severity=documented.severity,
                  action=documented.action) if documented and name else
                t("explain_code_unnamed", label=label, origin=documented.origin, severity=documented.severity,
                  action=documented.action) if documented else t("explain_undocumented", label=label))
        report = _report_of(Event(kind, Location("<explain>", 1), token, {kind: number}, id="e1"), database)
        return _answer(token, what, None, report, lang, known=documented is not None or bool(report.findings))
    record = cuda_error(token)
    if record is not None:
        fields = {"error": record.runtime_name or record.driver_name, "number": record.number,
                  "message": record.message, "sticky": record.sticky}
        what = t("explain_cuda", number=record.number, name=record.name, driver_name=record.driver_name or "-",
                 message=record.message)
        report = _report_of(Event("cuda-error", Location("<explain>", 1), token, fields, id="e1"), database)
        return _answer(token, what, record, report, lang)
    report = analyze_text(token, "<explain>", database)
    return _answer(token, _describe(report, t), None, report, lang, known=bool(report.events))


def _report_of(event: Event, database: Database) -> Report:
    """The report of a code alone: the parts of an explanation that need what the code does not say (the GPU's
    address, the message) are left out."""
    findings = rank(match(database, [event]), [event], database.causes)
    return Report({}, (), (event,), {}, tuple(findings))


def _answer(token: str, what: str, record: CudaError | None, report: Report, lang: str,
            known: bool = True) -> Explanation:
    """The explanation with each finding's title, explanation and actions in `lang`."""
    words = Translator(lang)
    findings = tuple(replace(f, title=w.title, explanation=w.explanation, actions=w.actions)
                     for f in report.findings for w in [words.words(f, report)])
    return Explanation(token, what, record, findings, known)


def _describe(report: Report, t: Translator) -> str:
    kinds = sorted({e.kind for e in report.events})
    return t("explain_log_line", kinds=", ".join(kinds)) if kinds else t("explain_nothing")
