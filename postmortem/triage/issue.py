"""A bug report as a tracker gives it -- Markdown, or GitHub's JSON -- read into posts, and each post into the
pieces the pipeline sniffs like any other input.

An issue arrives as:

- a Markdown file (the body as typed; a first `# ` heading is its title);
- GitHub's REST `issue` object (`number`, `title`, `body`, `html_url`, `user`, `labels`), optionally with its
  comments: a `comments` list of comment objects in place of REST's count, or `[issue, comment, ...]`;
- a webhook payload (`issues` or `issue_comment` event: `{"action", "issue", "repository", "comment"?}`).

People paste evidence every way Markdown allows, so a post is unwrapped before it is cut: `<details>`, `<pre>`
and the other HTML GitHub renders, quoted replies (`> `, nested, fences inside them too), tables (a two-column
row reads as `key: value`, what an issue template's table says). Every fenced block is a piece; so is every
unfenced run of lines that look like a log; what is left is the post's text, where an issue form's answers
(`### GPU` / `RTX 5090`) and typed facts (`Driver: 570.86`) are. A block's language tag is kept as a hint, and
never trusted: every piece is sniffed by content.

Nothing in an issue is followed: a link is text. Size is bounded here, before anything is parsed.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import regex

from .. import later
from ..text import MAX_LINE, detect_encoding

MAX_ISSUE_BYTES = 8 << 20
"""Most bytes of an issue read (GitHub caps a body and a comment at 65,536 characters; a thread of a hundred
comments fits)."""
MAX_POSTS = 300
"""Most posts (the body and comments) read from one issue."""
MAX_POST_CHARS = 262_144
"""Most characters of one post read (four times GitHub's cap: a pasted file is cut, with a note)."""
MAX_PIECES = 400
"""Most pieces cut from one issue (a body of 10,000 one-line fences is a bomb, not a report)."""
MIN_LOG_RUN = 2
"""Consecutive log-looking lines that make an unfenced run a piece of its own."""


class IssueError(ValueError):
    """The input is not an issue this module can read (the message says why)."""


@dataclass(frozen=True)
class Post:
    """One message of the thread: the issue's body or a comment."""

    where: str
    """"body", "comment 3": how the comment names it."""
    author: str
    text: str


@dataclass(frozen=True)
class Issue:
    """The thread as read: who, where, and its posts, body first."""

    ref: str
    """What the store and the comment call it: "owner/repo#123", or the file's name."""
    title: str
    posts: tuple[Post, ...]
    number: int | None = None
    repository: str | None = None
    url: str | None = None
    labels: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def shows_images(self) -> bool:
        """Whether a post holds an image (`![...](...)`, `<img>`): a screenshot of an error postmortem cannot
        read."""
        return any(_IMAGE.search(post.text) for post in self.posts)
    """What could not be read, or was cut, and why."""


@dataclass(frozen=True)
class Piece:
    """One input cut from a post: a fenced block, an unfenced log run, or the post's remaining text."""

    name: str
    """How evidence names it: "body, block 2 (console)"."""
    text: str
    kind: str
    """"block", "log" or "text"."""
    hint: str = ""
    """The fence's language tag, as written."""


def read_issue(data: bytes, name: str) -> Issue:
    """The issue in `data` (JSON when it parses as one of GitHub's shapes, else Markdown); raises IssueError."""
    notes: list[str] = []
    if len(data) > MAX_ISSUE_BYTES:
        notes.append(f"the issue holds more than {MAX_ISSUE_BYTES:,} bytes; the first {MAX_ISSUE_BYTES:,} were read")
        data = data[:MAX_ISSUE_BYTES]
    if b"\x00" in data[:65536] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IssueError(f"{name}: binary data, not an issue (a NUL byte in its first 64 KiB)")
    text = _decode(data)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            document = json.loads(stripped)
        except (ValueError, RecursionError):
            document = None
        if document is not None:
            return issue_from_json(document, name, notes)
    return _from_markdown(text, name, notes)


def _decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    return data.decode(detect_encoding(data[:65536]), "replace").removeprefix("\ufeff")


def _from_markdown(text: str, name: str, notes: list[str]) -> Issue:
    title = ""
    first = text.lstrip("\n").split("\n", 1)
    if first and first[0].startswith("# "):
        title, text = cut_lines(first[0][2:].strip(), "title", notes), first[1] if len(first) > 1 else ""
    return Issue(name, title, (_post("body", "", text, notes),), notes=tuple(notes))


def issue_from_json(document: Any, name: str, notes: list[str] | None = None) -> Issue:
    """The issue in a parsed GitHub document (REST issue, `[issue, comment, ...]`, webhook payload); raises
    IssueError for any other shape."""
    notes = [] if notes is None else notes
    comments: list[Any] = []
    repository = None
    if isinstance(document, list) and document and isinstance(document[0], dict):
        issue, comments = document[0], document[1:]
    elif isinstance(document, dict) and isinstance(document.get("issue"), dict):  # a webhook payload
        issue = document["issue"]
        comments = [document["comment"]] if isinstance(document.get("comment"), dict) else []
        comments = document["comments"] if isinstance(document.get("comments"), list) else comments
        repo = document.get("repository")
        repository = _text(repo.get("full_name")) if isinstance(repo, dict) else None
    elif isinstance(document, dict):
        issue = document
        comments = document["comments"] if isinstance(document.get("comments"), list) else []
    else:
        raise IssueError(f"{name}: JSON, but not an issue (neither an object nor a list of them)")
    if not any(key in issue for key in ("body", "title", "number")):
        raise IssueError(f"{name}: JSON, but not an issue (no body, title or number)")
    url = _text(issue.get("html_url")) or None
    repository = repository or _repository(url or "") or _repository(_text(issue.get("repository_url")))
    number = issue.get("number") if isinstance(issue.get("number"), int) else None
    posts = [_post("body", _login(issue), _text(issue.get("body")), notes)]
    if len(comments) >= MAX_POSTS:
        notes.append(f"{len(comments)} comments; the first {MAX_POSTS - 1} were read")
    for i, comment in enumerate(comments[: MAX_POSTS - 1], 1):
        if isinstance(comment, dict):
            posts.append(_post(f"comment {i}", _login(comment), _text(comment.get("body")), notes))
    labels = tuple(_text(label.get("name") if isinstance(label, dict) else label)
                   for label in issue.get("labels") or () if isinstance(label, dict | str))
    ref = f"{repository}#{number}" if repository and number is not None else (f"#{number}" if number else name)
    title = cut_lines(" ".join(_text(issue.get("title")).split()), "title", notes)
    return Issue(ref, title, tuple(posts), number, repository, url, labels, tuple(notes))


def _post(where: str, author: str, text: str, notes: list[str]) -> Post:
    if len(text) > MAX_POST_CHARS:
        notes.append(f"the {where} holds {len(text):,} characters; the first {MAX_POST_CHARS:,} were read")
        text = text[:MAX_POST_CHARS]
    return Post(where, author, cut_lines(text.replace("\r\n", "\n").replace("\r", "\n"), where, notes))


def cut_lines(text: str, where: str, notes: list[str]) -> str:
    """`text` with every line cut to its first MAX_LINE characters, as the log reader cuts a log's lines: no pattern
    that cuts a post into pieces ever runs on a longer line, and what is cut is said in `notes`."""
    lines = text.split("\n")
    long = sum(len(line) > MAX_LINE for line in lines)
    if not long:
        return text
    notes.append(f"the {where} holds {long:,} line(s) longer than {MAX_LINE:,} characters; the first {MAX_LINE:,} "
                 "of each were read")
    return "\n".join(line[:MAX_LINE] for line in lines)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _login(thing: dict) -> str:
    user = thing.get("user")
    return _text(user.get("login")) if isinstance(user, dict) else ""


_REPOSITORY = later.compile(r"^https?://[^/\s]+/(?:repos/)?(?P<repo>[\w.-]+/[\w.-]+)(?:/|$)")


def _repository(url: str) -> str | None:
    """"owner/repo" from an issue's html_url (https://github.com/o/r/issues/1) or repository_url (…/repos/o/r)."""
    match = _REPOSITORY.match(url)
    return match["repo"] if match else None


# ------------------------------------------------------------------ cutting a post into pieces

_IMAGE = later.compile(r"!\[[^\]\n]{0,200}\]\(|<img\b", regex.I)
_FENCE = later.compile(r"^(?P<indent> {0,3})(?P<marks>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_QUOTE = later.compile(r"^ {0,3}(?:>[ \t]?)+")
_TAG = later.compile(r"</?(?:details|summary|p|div|span|br|hr|sub|sup|b|i|em|strong|code|kbd|samp|tt|small|"
                     r"h[1-6]|ul|ol|li|img|a|table|thead|tbody|tr|td|th|blockquote)\b[^>\n]*+>", regex.I)
_PRE = later.compile(r"<(?P<close>/?)pre\b[^<>\n]*+>", regex.I)  # a tag ends before the next one starts
PRE_HINT = "html-pre"
"""The info string a `<pre>` block is read under: GitHub decodes entities inside it, never inside a fence."""
_INLINE_CODE = later.compile(r"(?<!`)`{1,2}(?!`)")
"""The backticks of an inline code span (`Segmentation fault (core dumped)`): Markdown, not what was printed."""
_EMPHASIS = later.compile(r"(?<![\w*])[*_]{1,3}(?=[^\s*_])|(?<=[^\s*_])[*_]{1,3}(?![\w*])")
"""Emphasis delimiters at a word's edge (`_Check_ failed`, `**GPU**`), in a line that does not look like a log
(where `__init__.py` and `*args` are what was printed)."""
_TABLE_RULE = later.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_TABLE_ROW = later.compile(r"^\s*\|.*\|\s*$")
_LOG_LINE = later.compile(
    r"""(?x)
      ^\s*File\ ".*",\ line\ \d+                        # a Python traceback frame
    | ^Traceback\ \(most\ recent\ call\ last\)
    | ^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Warning|Interrupt):[ ]
    | ^\s*\[\s*\d+\.\d+\]                               # dmesg
    | \b\d{1,2}:\d\d:\d\d\b                             # a clock time
    | ^\s*(?:\#\d+\s+)?0x[0-9a-fA-F]{6,}                # a native frame
    | ^\s*\#\d+\s+\S                                    # gdb frame
    | ^\s+at\ \S                                        # an indented "at ..." frame
    | ^[EWIF]\d{4}\ \d                                  # glog
    | \bNVRM:|\bNCCL\ (?:WARN|INFO)\b|\bXid\b
    | Segmentation\ fault|core\ dumped|Aborted|Killed\b
    | \bCUDA\ error\b|\bcuda(?:Error|Malloc)\w*|CUBLAS_STATUS|CUDNN_STATUS
    | ^\s*[|+][-=+| ]{6,}                               # nvidia-smi's frame
    | ^\s*\|.*\|\s*$
    | [/\\][\w.-]+[/\\][\w./\\-]+:\d+                     # a source path with a line
    | ^\s*={5,}[ ]
    """
)


def pieces(issue: Issue) -> list[Piece]:
    """Every piece of every post, body first: its fenced blocks and log runs, then its text."""
    found: list[Piece] = []
    for post in issue.posts:
        title = [issue.title] if post.where == "body" and issue.title else []
        for piece in _cut(post, title):
            if len(found) >= MAX_PIECES:
                return found
            found.append(piece)
    return found


def _cut(post: Post, title: list[str]) -> Iterator[Piece]:
    text_lines: list[str] = list(title)
    run: list[str] = []
    blocks = 0

    def flush_run() -> Iterator[Piece]:
        nonlocal blocks
        if len(run) >= MIN_LOG_RUN:
            blocks += 1
            yield Piece(f"{post.where}, log {blocks}", "\n".join(run), "log")
        else:
            text_lines.extend(run)
        run.clear()

    for kind, hint, body in _segments(post.text):
        if kind == "block":
            yield from flush_run()
            if body.strip():
                blocks += 1
                label = f" ({hint})" if hint else ""
                yield Piece(f"{post.where}, block {blocks}{label}", body, "block", hint)
            continue
        for line in body.split("\n"):
            if _LOG_LINE.search(line):
                run.append(line)
            elif run and line.strip() and (line.startswith((" ", "\t")) or run[-1].rstrip().endswith(":")):
                run.append(line)  # a continuation: an indented line, or the line after "...Error:"
            else:
                yield from flush_run()
                text_lines.append(line)
    yield from flush_run()
    prose = "\n".join(text_lines).strip()
    if prose:
        yield Piece(f"{post.where}, text", prose, "text")


def _segments(text: str) -> Iterator[tuple[str, str, str]]:
    """("block", info, body) for each fenced block and ("text", "", unwrapped lines) between them."""
    prose: list[str] = []
    lines = _PRE.sub(lambda m: "\n```\n" if m["close"] else f"\n```{PRE_HINT}\n", text).split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        quote = _QUOTE.match(line)
        depth = quote.group().count(">") if quote else 0
        inner = line[quote.end():] if quote else line
        fence = _FENCE.match(inner)
        if fence is None:
            prose.append(inner)
            i += 1
            continue
        if prose:
            yield "text", "", _unwrapped(prose)
            prose = []
        marks, body = fence["marks"], []
        i += 1
        while i < len(lines):
            inside = _strip_quotes(lines[i], depth)
            close = _FENCE.match(inside)
            if close and close["marks"][0] == marks[0] and len(close["marks"]) >= len(marks) and not close["info"]:
                i += 1
                break
            body.append(inside[len(fence["indent"]):] if inside.startswith(fence["indent"]) else inside)
            i += 1
        info = fence["info"].split(" ", 1)[0].strip("{}.")
        yield ("block", "", html.unescape("\n".join(body))) if info == PRE_HINT else ("block", info, "\n".join(body))
    if prose:
        yield "text", "", _unwrapped(prose)


def _strip_quotes(line: str, depth: int) -> str:
    """The line without the `depth` quote markers its fence was opened under."""
    for _ in range(depth):
        match = regex.match(r" {0,3}>[ \t]?", line)
        if match is None:
            break
        line = line[match.end():]
    return line


def _unwrapped(lines: list[str]) -> str:
    """Prose with its HTML tags gone, entities decoded, and tables read as `cell: cell` lines."""
    out: list[str] = []
    rows = [bool(_TABLE_ROW.match(line)) for line in lines]
    in_table = _table_rows(lines, rows)
    for i, line in enumerate(lines):
        if i > 0 and rows[i - 1] and _TABLE_RULE.match(line):
            continue
        if in_table[i]:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            out.append(": ".join(cell for cell in cells if cell))
            continue
        line = _INLINE_CODE.sub("", html.unescape(_TAG.sub(" ", line))).rstrip()
        out.append(line if _LOG_LINE.search(line) else _EMPHASIS.sub("", line))
    return "\n".join(out)


def _table_rows(lines: list[str], rows: list[bool]) -> list[bool]:
    """Which lines are rows of a Markdown table: a block of consecutive table rows (`rows`) with a `|---|` rule
    under its first row. One pass over the blocks: a post of 16,000 rows is not 16,000 walks back up its block."""
    in_table = [False] * len(lines)
    start = 0
    for end, is_row in enumerate([*rows, False]):
        if is_row:
            continue
        if start < end and start + 1 < len(lines) and _TABLE_RULE.match(lines[start + 1]):
            in_table[start:end] = [True] * (end - start)
        start = end + 1
    return in_table
