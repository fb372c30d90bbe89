"""Every report format in both languages: renders everything, escapes all input, fetches nothing, reads in a browser."""

from __future__ import annotations

import json
import os
import shutil
import string
import struct
import subprocess
import zlib
from collections import Counter
from datetime import UTC, datetime
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
import regex
import yaml
from click.testing import CliRunner

from postmortem import cli
from postmortem.model import Event, Finding, Location, Report
from postmortem.pipeline import analyze
from postmortem.render import FORMATS, LANGUAGES, default_language, view
from postmortem.render.i18n import Translator, signature_catalog, ui_catalog
from postmortem.render.markdown_report import code, fence, plain_html, text
from postmortem.signatures import load_default

ROOT = Path(__file__).parent.parent
SAMPLES = sorted(p for p in (ROOT / "samples").iterdir() if p.is_dir())
CORPUS = ROOT / "tests" / "given" / "corpus" / "cases"
CASES = sorted(p for p in CORPUS.iterdir() if p.is_dir())
TELEMETRY = ROOT / "tests" / "data" / "gpu_telemetry" / "query-gpu-h200.csv"

# A real Xid 79 line (samples/gpu-off-bus/dmesg.txt) with markup appended, and a catalog Xid whose
# {message} placeholder puts that markup into the explanation as well.
INJECTION = "<script>document.title='INJECTED'</script> <img src=x onerror=alert(1)> javascript:alert(1)"
HOSTILE_LOG = (
    f"[ 1234.567890] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus. {INJECTION}\n"
    f"Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 16, pid='<unknown>', "
    f"name=<unknown>, {INJECTION} ```` </details>\n"
)


@cache
def analysed(path: str) -> Report:
    """One analysis per case, shared by every format and language."""
    return analyze([path])


def hostile(tmp_path: Path) -> Report:
    log = tmp_path / "kern.log"
    log.write_text(HOSTILE_LOG, encoding="utf-8")
    return analyze([str(log)])


# ---------------------------------------------------------------- languages

def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_signature_has_both_languages():
    catalog = signature_catalog("zh-CN")["signatures"]
    database = load_default()
    missing = [s.id for s in database.signatures if s.id not in catalog]
    assert not missing, f"signatures without a zh-CN entry in signatures/i18n/: {missing}"
    for signature in database.signatures:
        entry = catalog[signature.id]
        assert entry["title"] and entry["explain"], signature.id
        assert _placeholders(entry["title"]) == _placeholders(signature.title), signature.id
        assert _placeholders(entry["explain"]) == _placeholders(signature.explain), signature.id
        assert len(entry["actions"]) == len(signature.actions), signature.id
        for english, chinese in zip(signature.actions, entry["actions"]):
            assert _placeholders(chinese) == _placeholders(english), signature.id
    stale = set(catalog) - {s.id for s in database.signatures}
    assert not stale, f"zh-CN entries for signatures that no longer exist: {sorted(stale)}"


def test_every_cause_has_a_chinese_summary():
    causes = signature_catalog("zh-CN")["causes"]
    assert set(load_default().causes) <= set(causes)


def test_interface_catalogues_match():
    english, chinese = ui_catalog("en")["ui"], ui_catalog("zh-CN")["ui"]
    assert english.keys() == chinese.keys()
    for key in english:
        assert _placeholders(english[key]) == _placeholders(chinese[key]), key


def test_reasons_and_diagnostics_are_translated():
    t = Translator("zh-CN")
    assert (t.reason("2 matching events in 1 input; likely a consequence of xid-48")
            == "2 个匹配事件，来自 1 个输入；可能是 xid-48 的后果")
    assert t.sentence("empty file") == "空文件"
    assert t.sentence("something new") == "something new"


@pytest.mark.parametrize(("environ", "expected"), [
    ({"LANG": "zh_CN.UTF-8"}, "zh-CN"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"LC_ALL": "zh_TW.UTF-8"}, "zh-CN"),
    ({}, "en"),
])
def test_default_language_from_the_locale(environ, expected):
    assert default_language(environ) == expected


def test_translation_is_used_and_evidence_stays_verbatim():
    report = analysed(str(ROOT / "samples" / "gpu-off-bus"))
    zh = FORMATS["text"](report, lang="zh-CN")
    assert zh.startswith("结论：gpu-off-bus：GPU 已从总线上掉线（Xid 79）")
    assert "处理建议" in zh
    assert "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus." in zh


# ---------------------------------------------------------------- everything renders

@pytest.mark.parametrize("case", SAMPLES + CASES, ids=lambda p: p.name)
def test_every_case_renders_in_every_format_and_language(case):
    report = analysed(str(case))
    for name, render in FORMATS.items():
        for lang in LANGUAGES:
            out = render(report, lang=lang)
            assert out.strip(), (name, lang)
            if name == "html":
                _check_html(out)


# ---------------------------------------------------------------- HTML

class _Tags(HTMLParser):
    """Every start tag with its attributes, and the page title (the first <title>; SVG tooltips are titles too)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title" and not any(t == "title" for t, _ in self.tags[:-1])

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "main", "footer", "section", "p", "h1", "h2", "h3",
    "span", "strong", "code", "pre", "div", "dl", "dt", "dd", "ol", "ul", "li", "table", "thead", "tbody", "tr",
    "th", "td", "details", "summary", "figure", "figcaption", "br", "svg", "defs", "marker", "path", "rect",
    "text", "line", "circle", "polyline", "g", "mark",
}
RESOURCE_ATTRIBUTES = {"src", "href", "xlink:href", "action", "data", "poster", "srcset", "background", "formaction"}


def _check_html(page: str) -> _Tags:
    """The page loads nothing, runs nothing, and holds only the markup the template writes."""
    parser = _Tags()
    parser.feed(page)
    names = {tag for tag, _ in parser.tags}
    assert names <= ALLOWED_TAGS, names - ALLOWED_TAGS
    for tag, attrs in parser.tags:
        assert not any(a.startswith("on") for a in attrs), (tag, attrs)
        assert not RESOURCE_ATTRIBUTES & attrs.keys(), (tag, attrs)
    csp = next(a["content"] for t, a in parser.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "script-src 'none'" in csp
    style = page[page.index("<style>"):page.index("</style>")]
    assert "url(" not in style and "@import" not in style
    return parser


def test_html_escapes_markup_from_the_input(tmp_path):
    report = hostile(tmp_path)
    assert report.findings, "the hostile log must still produce findings"
    for lang in LANGUAGES:
        page = FORMATS["html"](report, lang=lang)
        parser = _check_html(page)
        assert "<script" not in page and "<img" not in page
        assert "&lt;script&gt;document.title=&#39;INJECTED&#39;&lt;/script&gt;" in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page
        assert "javascript:alert(1)" in page  # shown as text ...
        assert "INJECTED" not in parser.title  # ... and never run


def test_html_verdict_comes_first():
    page = FORMATS["html"](analysed(str(ROOT / "samples" / "rtx5090-sm120")), lang="en")
    body = page[page.index("<body>"):]
    assert body.index("arch-mismatch") < body.index("Other findings") < body.index("Timeline") < body.index("Evidence")


def _timed_report() -> Report:
    """An ECC error on GPU 07 of host a, then an illegal address on the same GPU and a timeout on rank 1."""
    def event(number, kind, second, **fields):
        return Event(kind, Location("kern.log", number), f"line {number} <b>", fields,
                     datetime(2024, 5, 1, 10, 0, second, tzinfo=UTC), "wall", 1, f"e{number}")

    def finding(signature, cause, evidence, root=None):
        return Finding(signature, cause, "error", 0.9, "1 matching event in 1 input", signature, "", (), evidence,
                       consequence_of=root)

    events = (event(1, "xid", 0, host="a", pci="0000:07:00"), event(2, "cuda-error", 5, host="a", pci="0000:07:00"),
              event(3, "nccl-timeout", 50, rank=1))
    findings = (finding("xid-48", "gpu-memory-ecc", ("e1",)), finding("illegal-memory-access", "illegal-memory-access",
                ("e2",), "xid-48"), finding("nccl-watchdog-timeout", "nccl-timeout", ("e3",), "xid-48"))
    return Report({"version": "0"}, (), events, {}, findings)


def test_timeline_has_a_lane_per_gpu_or_rank_and_links_roots_to_consequences():
    report = _timed_report()
    line = view.timeline(report)
    assert line.lanes == ("a GPU 0000:07:00", "rank 1")
    assert [m.role for m in line.marks] == ["root", "consequence", "consequence"]
    assert [m.x for m in line.marks] == sorted(m.x for m in line.marks)
    assert len(line.links) == 2 and line.zone == "zone_utc"
    page = FORMATS["html"](report, lang="en")
    assert page.count('class="link"') == 2 and "Times in UTC." in page
    assert "line 1 &lt;b&gt;" in page


def test_html_core_section():
    page = FORMATS["html"](analysed(str(ROOT / "samples" / "native-crash-core")), lang="en")
    assert "SIGSEGV" in page and "lib_c" in page and "Crashing thread" in page
    assert "libcrash.so" in page


def test_html_telemetry_plots():
    report = analysed(str(TELEMETRY))
    if not getattr(report, "telemetry", None):
        pytest.skip("this build reads no telemetry series")
    page = FORMATS["html"](report, lang="zh-CN")
    assert page.count("<polyline") >= 2
    assert "温度" in page and "显存占用" in page


# ---------------------------------------------------------------- Markdown

def test_markdown_fence_is_longer_than_any_backtick_run():
    assert fence("a ```` b").startswith("`````text\n")
    assert fence("plain") == "```text\nplain\n```"
    assert code("a `` b") == "```a `` b```"


def test_markdown_keeps_input_from_breaking_out(tmp_path):
    page = FORMATS["markdown"](hostile(tmp_path), lang="en")
    assert page.startswith("### Verdict: `gpu-off-bus`")
    outside, inside, fence_marks, block = [], [], None, []
    for line in page.splitlines():
        if fence_marks is None and line.startswith("```"):
            fence_marks, block = line[: len(line) - len(line.lstrip("`"))], []
        elif fence_marks is not None and line == fence_marks:
            longest = max((len(run) for run in regex.findall(r"`+", "\n".join(block))), default=0)
            assert len(fence_marks) > longest
            fence_marks = None
        elif fence_marks is not None:
            block.append(line)
            inside.append(line)
        else:
            outside.append(line)
    assert fence_marks is None, "a fence was left open"
    assert any("````" in line for line in inside)  # the run of four backticks stayed inside its fence
    text_outside = "\n".join(outside)
    assert "<script" not in text_outside and "<img" not in text_outside
    assert "&lt;script&gt;" in text_outside  # the explanation quotes the message, escaped
    assert any("<script>document.title" in line for line in inside)  # evidence stays verbatim
    assert text_outside.count("<details>") == text_outside.count("</details>")



# Live tokens and terminal controls inside a real Xid 16 line (whose {message} fills the explanation, outside fences).
LIVE_LOG = (
    "Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 16, pid='<unknown>', "
    "name=<unknown>, see https://evil.example/p?x=1 or www.evil.example cc @octocat @org/team fixes #4242 "
    "and owner/repo#7 mail a@evil.example \x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\ "
    "\x1b]0;title\x07 \x1b[2J \u202egnp.exe\n"
)
LIVE_TOKENS = ("https://evil.example/p?x=1", "www.evil.example", "@octocat", "@org/team", "#4242", "owner/repo#7",
               "a@evil.example")


def _outside_fences(page: str) -> str:
    outside, fence_marks = [], None
    for line in page.splitlines():
        if fence_marks is None and line.startswith("```"):
            fence_marks = line[: len(line) - len(line.lstrip("`"))]
        elif fence_marks is not None and line == fence_marks:
            fence_marks = None
        elif fence_marks is None:
            outside.append(line)
    return "\n".join(outside)


def test_markdown_makes_no_links_or_mentions_from_input(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(LIVE_LOG, encoding="utf-8")
    page = FORMATS["markdown"](analyze([str(log)]), lang="en")
    outside = _outside_fences(page)
    for token in LIVE_TOKENS:
        assert token in outside, token  # the explanation quotes the message outside the fences ...
        bare = regex.sub(r"`+[^`]*`+", "", outside)
        assert token not in bare, token  # ... and every live token sits inside a code span there
    assert "](" not in regex.sub(r"`+[^`]*`+", "", outside)


def test_no_format_passes_terminal_controls_or_bidi_overrides(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(LIVE_LOG, encoding="utf-8")
    report = analyze([str(log)])
    for fmt in ("text", "markdown"):
        page = FORMATS[fmt](report, lang="en")
        assert "Xid" in page
        assert "\x1b" not in page and "\u202e" not in page and "\x07" not in page, fmt
        assert "\\x1b" in page and "\\u202e" in page, fmt  # shown, made visible
    assert "\x1b" not in view.safe("\x1b[2J") and view.safe("\u2067x") == "\\u2067x"


# ---------------------------------------------------------------- terminal and CLI

def test_text_colour_only_when_asked():
    report = analysed(str(ROOT / "samples" / "gpu-off-bus"))
    assert "\x1b[" in FORMATS["text"](report, color=True)
    assert "\x1b[" not in FORMATS["text"](report)


@pytest.mark.parametrize(("args", "environ", "coloured"), [
    ((), {}, True),
    (("--no-color",), {}, False),
    ((), {"NO_COLOR": "1"}, False),
    ((), {"TERM": "dumb"}, False),
])
def test_cli_colour_on_a_terminal_only(monkeypatch, args, environ, coloured):
    from postmortem.render import terminal

    monkeypatch.setattr(terminal, "is_terminal", lambda stream: True)
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(cli.main, ["analyze", *args, str(ROOT / "samples" / "gpu-off-bus")], env=environ)
    assert result.exit_code == 0
    assert ("\x1b[" in result.output) == coloured


def test_cli_piped_output_is_plain_and_formats_and_languages_work(tmp_path):
    runner = CliRunner()
    sample = str(ROOT / "samples" / "ecc-then-illegal-address")
    assert "\x1b[" not in runner.invoke(cli.main, ["analyze", sample]).output
    for fmt in ("markdown", "html"):
        target = tmp_path / f"report.{fmt}"
        result = runner.invoke(cli.main, ["analyze", sample, "--format", fmt, "--lang", "zh-CN", "-o", str(target)])
        assert result.exit_code == 0, result.output
        assert "gpu-memory-ecc" in target.read_text(encoding="utf-8")
        assert "显存" in target.read_text(encoding="utf-8")


# ---------------------------------------------------------------- in a browser

def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium when it runs as root)")
    return found


def _browser(binary: str, profile: Path, *args: str, timeout: int = 90) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={profile}"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=timeout, check=False)


def _png_rows(path: Path) -> list[bytes]:
    """Decoded 8-bit RGB(A) rows of a PNG (the filters Chromium writes), enough to look for ink."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks, header = 8, [], None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        offset += 12 + length
    width, height, depth, colour = header[:4]
    assert depth == 8 and colour in (2, 6)
    step = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(b"".join(chunks)), width * step, [], bytearray(width * step)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return rows


def _inked_rows(rows: list[bytes], top: int) -> int:
    """Rows in the first `top` that hold dark (text) pixels."""
    return sum(1 for row in rows[:top] if any(row[i] < 90 and row[i + 1] < 90 and row[i + 2] < 90
                                              for i in range(0, len(row) - 2, 3 if len(row) % 4 else 4)))


def test_browser_shows_the_verdict_and_runs_no_injected_script(tmp_path):
    binary = _chromium()
    sample = tmp_path / "case"
    shutil.copytree(ROOT / "samples" / "rtx5090-sm120", sample)
    (sample / "injected.log").write_text(HOSTILE_LOG, encoding="utf-8")
    report = analyze([str(sample)])
    page = tmp_path / "report.html"
    page.write_text(FORMATS["html"](report, lang="en"), encoding="utf-8")
    url = page.as_uri()

    dom = _browser(binary, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = _Tags()
    parser.feed(dom.stdout)
    assert parser.title.startswith("postmortem report: ")
    assert "INJECTED" not in parser.title
    assert report.verdict.title in dom.stdout
    assert "&lt;script&gt;document.title" in dom.stdout

    for width, height in ((1366, 768), (390, 844)):
        shot = tmp_path / f"shot-{width}.png"
        result = _browser(binary, tmp_path / "profile", f"--screenshot={shot}", f"--window-size={width},{height}", url)
        assert shot.exists(), result.stderr[-2000:]
        rows = _png_rows(shot)
        assert len(rows) == height
        assert _inked_rows(rows, 200) > 40, f"no verdict text in the top of the {width}x{height} screenshot"
        if os.environ.get("POSTMORTEM_SCREENSHOTS"):
            shutil.copy(shot, Path(os.environ["POSTMORTEM_SCREENSHOTS"]) / shot.name)


def test_signature_i18n_folder_is_not_read_as_signatures():
    database = load_default()
    origins = {s.origin.split(":")[0] for s in database.signatures}
    assert not any("/i18n/" in origin for origin in origins)
    for path in (ROOT / "signatures" / "i18n").glob("*.yaml"):
        assert "signatures" in yaml.safe_load(path.read_text(encoding="utf-8"))


def test_html_evidence_shows_context_and_marks_what_matched():
    report = analyze([str(ROOT / "samples" / "ecc-then-illegal-address")])
    page = FORMATS["html"](report, lang="en", color=False)
    assert "<mark>NVRM: Xid</mark>" in page
    assert 'class="line ctx"' in page  # the Xid 64 line shown dimmed under the Xid 48 evidence
    md = FORMATS["markdown"](report, lang="en", color=False)
    assert "\n2 : Dec  2 11:38:47 worker4 kernel" in md and "\n1 | Dec  2 11:38:47 worker4 kernel" in md


# ---------------------------------------------------------------- Markdown through GitHub's own renderer

# A real Xid 13 line (tests/data/kernel_log/xid13-graphics-exc-vllm-02.dmesg.txt, line 2): its message fills the
# explanation, outside any fence, so whatever is appended to it reaches the live Markdown of the report and the comment.
XID_LINE = ("[93297.029837] NVRM: Xid (PCI:0000:43:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: "
            "ESR 0x52ef30=0x0 0x52ef34=0x20 0x52ef28=0xc81eb60 0x52ef2c=0x1174")
HOSTILE_MARKDOWN = [
    "x.@org/security-team -@maint HTTPS://evil.example/x",
    "HtTpS://evil.example/a hTTp://evil.example FTP://evil.example/f Ftp://evil.example",
    "www.evil.example WWW.evil.example/x Www.evil.example (www.evil.example) *www.evil.example*",
    "security@evil.example a.b+c@evil-x.example (x@evil.example) mailto:a@evil.example MAILTO:b@evil.example "
    "xmpp:c@evil.example/res",
    "file:///etc/passwd javascript:alert(1) data:text/html,<b>x</b>",
    "<https://evil.example> <HTTPS://evil.example> <a@evil.example> <mailto:a@evil.example>",
    "[a](https://evil.example) [b](<https://evil.example>) ![i](https://evil.example/i.png) [c][d] [e]",
    "<script>alert(1)</script> <img src=x onerror=alert(1)> <a href=\"https://evil.example\">x</a> <details open>",
    "&#64;maint &commat;maint &#x40;maint &#35;123 &lt;b&gt; &amp;",
    "``` ```` `x` ~~~ ~~strike~~ **bold** _em_",
    "#123 org/repo#1 GH-1 gh-2 Gh-3 !4 #a-name",
    *(f"x{char}@maint{char}#12 {char}@org/team" for char in string.punctuation),
]
LIVE_OUTSIDE_CODE = regex.compile(r"@\w|#\d|(?i:\bgh-\d|\b(?:https?|ftp|mailto|xmpp|file|javascript):|www\.)")
"""What GitHub's passes after CommonMark (mentions, issue references) or its autolinker would make live in text."""


class _Rendered(HTMLParser):
    """cmark-gfm's HTML read back: every start tag, and the text outside <code> and <pre> (entities decoded)."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.live_text: list[str] = []
        self.visible: list[str] = []
        self._in_code = 0
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_code += tag in ("code", "pre")

    def handle_endtag(self, tag):
        self._in_code -= tag in ("code", "pre")

    def handle_data(self, data):
        self.visible.append(data)
        if not self._in_code:
            self.live_text.append(data)


def _github_html(markdown: str) -> _Rendered:
    import cmarkgfm

    return _Rendered(cmarkgfm.github_flavored_markdown_to_html(markdown, options=cmarkgfm.Options.CMARK_OPT_UNSAFE))


def _report_markdown(tmp_path: Path, appended: str) -> str:
    log = tmp_path / f"kern {appended.replace('/', '_')}.log"  # the path is shown outside code too
    log.write_text(f"{XID_LINE} {appended}\n", encoding="utf-8")
    return FORMATS["markdown"](analyze([str(log)]), lang="en")


def _comment_markdown(appended: str) -> str:
    from postmortem.render.triage_comment import render_markdown
    from postmortem.triage import triage
    from postmortem.triage.issue import read_issue

    issue = {"number": 7, "title": f"Xid 13 {appended}", "html_url": "https://github.com/o/r/issues/7",
             "body": f"Our job died. {appended}\n\n```\n{XID_LINE} {appended}\n```\n"}
    return render_markdown(triage(read_issue(json.dumps(issue).encode(), "issue.json")))


@pytest.mark.parametrize("appended", HOSTILE_MARKDOWN)
@pytest.mark.parametrize("form", ["report", "comment", "folded"])
def test_github_renders_no_link_mention_reference_or_markup_from_input(tmp_path, form, appended):
    """The report and the triage comment of a real log holding `appended`, through cmark-gfm (GitHub's renderer,
    autolink extension on): the same structure as with harmless words, no link, and in the text outside code
    nothing GitHub's mention and reference passes would make live."""
    def rendered(words: str) -> tuple[str, _Rendered]:
        if form == "folded":  # a core's path in the raw HTML of a <summary>, and the text under it
            markdown = f"<details><summary>{plain_html(words)}</summary>\n\n{text(words)}\n\n</details>\n"
        else:
            markdown = _report_markdown(tmp_path, words) if form == "report" else _comment_markdown(words)
        return markdown, _github_html(markdown)

    markdown, page = rendered(appended)
    _, harmless = rendered("harmless words")
    assert "a" not in page.tags, markdown
    assert Counter(t for t in page.tags if t != "code") == Counter(t for t in harmless.tags if t != "code"), markdown
    live = [node for node in page.live_text if LIVE_OUTSIDE_CODE.search(node)]
    assert not live, (live, markdown)
    shown = " ".join("".join(page.visible).replace("\\|", "|").split())
    assert " ".join(appended.split()) in shown  # the words are there to read, outside the fence too
    assert shown.count(appended.split()[0]) >= 2
