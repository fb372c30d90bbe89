"""The command line: a thin layer over `postmortem.pipeline`.

Exit status: 0 when the analysis ran (whatever it found), 1 when `--fail-on`
asked for it and a finding that severe is present, 2 for usage errors.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from . import __version__
from .model import SEVERITIES, Options, Report, severity_rank, to_plain
from .outputs import Output, OutputError, check_output, write_text_output
from .pipeline import Progress, analyze as run_analysis
from .render import FORMATS, LANGUAGES, default_language
from .render.i18n import Translator
from .render.terminal import (
    TEXT_WIDTH,
    echo,
    is_terminal as _is_terminal,
    reply,
    terminal_text,
    text_width,
    wants_color,
    wrap,
)
from .signatures import (
    Database,
    Signature,
    SignatureError,
    default_directory,
    load,
    load_checked,
    load_default,
    plugin_directories,
)

if TYPE_CHECKING:
    from .explain import Explanation


_FEATURE_COMMANDS = {
    "gpu-arch": "binaries.commands:gpu_arch_command",
    "collect": "capture.commands:collect_command",
    "run": "capture.commands:run_command",
    "snapshot": "capture.commands:snapshot_command",
    "triage": "triage.commands:triage_command",
    "scan": "fleet.commands:scan_command",
    "buckets": "fleet.commands:buckets_command",
    "report": "fleet.commands:report_command",
    "fleet": "fleet.commands:fleet_group",
}
"""Commands that live beside their feature, imported when named (or when --help lists them): `analyze` of one log
does not pay for the fleet's, triage's or capture's modules (issue 28)."""


class _Main(click.Group):
    """The command group: SQLite's error on a store that a command met unguarded (a damaged page under
    `triage --store`) is one sentence, exit 2, never a traceback; every error message passes the terminal
    gate. The feature commands are found by name (_FEATURE_COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_FEATURE_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _FEATURE_COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, name = _FEATURE_COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
        return command

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:  # its message may quote an input (a path, a foreign store's table)
            exc.message = terminal_text(exc.message)  # type: ignore[misc]  # Final in typeshed only: show() reads it
            raise
        except Exception as exc:  # only a command that opened a store imported sqlite3 and can raise its errors
            sqlite = sys.modules.get("sqlite3")
            if sqlite is None or not isinstance(exc, sqlite.DatabaseError):
                raise
            why = f"a SQLite store cannot be read or written ({exc}): is it damaged?"
            raise StoreProblem(terminal_text(why)) from None


class StoreProblem(click.ClickException):
    """A store that cannot be read: exit 2, one sentence."""

    exit_code = 2


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="postmortem")
@click.option("--cache", "cache_dir", metavar="DIR|off", default=None,
              help="Where to keep what start-up would rebuild every run (the parsed signatures, the prefilter's "
                   "database), or 'off'. Default: $POSTMORTEM_CACHE, else $XDG_CACHE_HOME/postmortem.")
def main(cache_dir: str | None) -> None:
    """Tell why a GPU job died, from the files it left behind."""
    if cache_dir is not None:
        from .user_cache import ENV

        os.environ[ENV] = cache_dir


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="text", show_default=True,
              help="Output format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, allow_dash=True), default="-",
              help="Write the report here instead of standard output.")
@click.option("--fail-on", type=click.Choice(SEVERITIES[1:]), default=None,
              help="Exit 1 when a finding of this severity or worse is present.")
@click.option("--signatures", "signature_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Also load this signature pack (a directory of YAML files) beside the bundled one; repeatable.")
@click.option("--sysroot", type=click.Path(exists=True, file_okay=False), default=None,
              help="Root of a copy of the crashed machine's files: libraries a core names are looked up under it.")
@click.option("--debug-dir", "debug_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Directory of separate debug files (.build-id/xx/rest.debug layout); repeatable.")
@click.option("--exe", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The crashed program's file, for a core that does not name its files (no NT_FILE note: qemu-user, "
                   "kernels before 3.7) and whose program name cannot be read; as eu-stack -e.")
@click.option("--show-env", is_flag=True, help="Show every environment variable of a core by value (may hold secrets).")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None,
              help="Language of the report's own words (evidence stays verbatim); default from LC_ALL / LANG.")
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal (also when NO_COLOR is set or TERM=dumb; "
                                               "FORCE_COLOR colours a pipe).")
@click.option("--debug", is_flag=True,
              help="Also list each input's lines that hold a known code or phrase but were not read, and why "
                   "(JSON always has them as `unread`).")
@click.option("--threads", type=click.Choice(["crashed", "all"]), default="crashed", show_default=True,
              help="A core's threads shown in text: the crashing one, or every thread (as gdb's `thread apply all "
                   "bt` and pystack show them; JSON always holds them all).")
@click.option("--one-incident", is_flag=True,
              help="Read a directory of many folders or archives as one incident; without it such a directory (a "
                   "fleet's crash archive) is refused with the `fleet scan` command that analyses each case.")
def analyze(inputs: tuple[str, ...], fmt: str, output: str, fail_on: str | None, signature_dirs: tuple[Path, ...],
            sysroot: str | None, debug_dirs: tuple[str, ...], exe: str | None, show_env: bool, lang: str | None,
            no_color: bool, debug: bool, threads: str, one_incident: bool) -> None:
    """Analyse crash artifacts: files, directories, archives, or - for stdin.

    Every input is sniffed by content; compressed files (.gz .xz .bz2 .zst)
    and archives (.tar*, .zip) are read without extracting them.
    """
    if not any(path == "-" or os.path.lexists(path) for path in inputs):  # nothing at all to read: a usage error
        raise click.BadParameter(f"no such file: {', '.join(inputs)}", param_hint="INPUTS")
    if not one_incident:
        _refuse_a_fleet(inputs)
    target = None if output == "-" else checked_output(output, inputs, [*signature_dirs, *filter(None, [sysroot, exe]),
                                                                          *debug_dirs])
    database = _database(signature_dirs)
    if (lang or default_language()) != "en" and database is not load_default():
        from .lint import check_translations  # a pack's words: reports read only the bundled translations

        for warning in check_translations(database, [lang or default_language()]).warnings:
            echo(f"postmortem: warning: {warning}", err=True)
    options = Options(sysroot=sysroot, debug_dirs=debug_dirs, show_env=show_env, exe=exe)
    report = _with_spinner(lambda progress: run_analysis(list(inputs), database, options, progress))
    color = output == "-" and wants_color(sys.stdout, no_color)
    width = text_width(sys.stdout) if output == "-" else TEXT_WIDTH
    text = FORMATS[fmt](report, lang=lang or default_language(), color=color, debug=debug, width=width,
                        all_threads=threads == "all")
    if target is None:
        reply(text, data=fmt != "text", nl=False, color=color)
    else:
        output_step(lambda: write_text_output(target, text))
    if fail_on and any(severity_rank(f.severity) >= severity_rank(fail_on) for f in report.findings):
        sys.exit(1)


def _refuse_a_fleet(inputs: tuple[str, ...]) -> None:
    """A usage error naming `fleet scan` when an input directory holds many separate cases (inputs.SEPARATE_CASES)."""
    from .inputs import SEPARATE_CASES, separate_cases

    for path in inputs:
        if os.path.isdir(path) and separate_cases(path) > SEPARATE_CASES:
            raise click.UsageError(
                f"{path} holds more than {SEPARATE_CASES} folders or archives, each a case of its own, and `analyze` "
                f"reads one incident. To analyse every case and see the fleet: postmortem fleet scan {path} --db "
                f"cases.sqlite, then postmortem fleet report --db cases.sqlite -o fleet.html. To read them all as one "
                f"incident anyway: postmortem analyze --one-incident {path}")


def _database(extra: tuple[Path, ...]) -> Database:
    """The bundled signatures, plus installed packs (entry points) and the packs named on the command line."""
    packs = _packs(extra)
    if not packs:
        return load_default()
    try:
        return load(default_directory(), *packs)
    except SignatureError as exc:
        raise click.UsageError(f"signature database: {exc}") from exc


def _packs(extra: tuple[Path, ...]) -> list[Path]:
    """Installed packs (entry points; one that fails to load is a warning) and the packs named on the command line."""
    plugins, warnings = plugin_directories()
    for warning in warnings:
        echo(f"postmortem: {warning}", err=True)
    return [*plugins, *extra]


def _signature(signature_id: str, database: Database) -> Signature:
    """The signature of this id; a usage error (exit 2) when the database has none."""
    signature = next((s for s in database.signatures if s.id == signature_id), None)
    if signature is None:
        raise click.UsageError(f"no signature {signature_id!r} (see: postmortem signatures list)")
    return signature


@main.command("explain")
@click.argument("tokens", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--lang", type=click.Choice(LANGUAGES), default=None,
              help="Language of the findings' words, as for analyze; default from LC_ALL / LANG.")
def explain_command(tokens: tuple[str, ...], fmt: str, lang: str | None) -> None:
    """What one code or one log line means: 'Xid 79', cudaErrorIllegalAddress, 700, or - to read lines from stdin.

    Exit status 1 when one of them is recognised as nothing (no documented code, no CUDA error, no known line).
    """
    from .explain import explain

    lines = [line for line in sys.stdin.read().splitlines() if line.strip()] if tokens == ("-",) else [" ".join(tokens)]
    answers = [explain(line, _database(()), lang or default_language()) for line in lines]
    if fmt == "json":
        reply(json.dumps([to_plain(a) for a in answers], indent=2, ensure_ascii=False), data=True)
    else:
        _echo_explanations(answers, Translator(lang or default_language()), text_width(sys.stdout))
    if not all(a.known for a in answers):
        sys.exit(1)


def _echo_explanations(answers: list[Explanation], t: Translator, width: int) -> None:
    """Each answer as text in the reader's language: what the token is, then every finding with its explanation
    (wrapped to the terminal, Chinese as Chinese is set) and first actions."""
    for answer in answers:
        echo(f"{answer.token}\n  {answer.what}")
        if answer.cuda is not None:
            sticky = answer.cuda.sticky if answer.cuda.sticky in ("yes", "no") else "unknown"
            echo(f"  {t(f'explain_sticky_{sticky}')}")
        if not answer.findings:
            echo(f"  {t('explain_no_signature')}")
        for finding in answer.findings:
            echo("  " + t("explain_finding", cause=finding.cause, signature=finding.signature,
                          severity=finding.severity, title=finding.title))
            echo("\n".join(f"    {line}" for line in wrap(finding.explanation, width - 4)))
            for i, action in enumerate(finding.actions[:3], 1):
                echo(f"    {i}. {action}")


@main.group("signatures")
def signatures_group() -> None:
    """List, show and check the signature database."""


@signatures_group.command("list")
@click.option("--cause", default=None, help="Only signatures of this cause.")
@click.option("--signatures", "signature_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Also load this pack.")
def signatures_list(cause: str | None, signature_dirs: tuple[Path, ...]) -> None:
    """One line per signature: id, cause, severity, title."""
    for signature in _database(signature_dirs).signatures:
        if cause is None or signature.cause == cause:
            echo(f"{signature.id:34} {signature.cause:22} {signature.severity:9} {signature.title}")


@signatures_group.command("show")
@click.argument("signature_id")
@click.option("--signatures", "signature_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Also load this pack.")
def signatures_show(signature_id: str, signature_dirs: tuple[Path, ...]) -> None:
    """Everything about one signature: where it is defined, what it means, what to do, its examples."""
    signature = _signature(signature_id, _database(signature_dirs))
    echo(f"{signature.id}: {signature.title}\n  cause {signature.cause}, severity {signature.severity}, "
         f"confidence {signature.confidence}\n  defined in {signature.origin}")
    import yaml

    rule = yaml.safe_dump(dict(signature.match), sort_keys=False, allow_unicode=True, width=100,
                          default_flow_style=None)
    echo(f"  match ({signature.source}:{signature.lines['match']}):\n"
         + textwrap.indent(rule.rstrip(), "    "))
    echo(textwrap.fill(signature.explain, 88, initial_indent="  ", subsequent_indent="  "))
    for action in signature.actions:
        echo(f"  - {action}")
    for reference in signature.references:
        echo(f"  see {reference}")
    for kind in ("positive", "negative"):
        for example in signature.examples[kind]:
            echo(f"  {kind} example: {example}")


@signatures_group.command("lint")
@click.option("--signatures", "signature_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Also load and check this pack.")
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Where file examples ({file: path}) are found; default: the bundled database's repository.")
def signatures_lint(signature_dirs: tuple[Path, ...], root: Path | None) -> None:
    """Check the database: schema, causes, duplicate ids, every example, every translation; every problem at once.

    Each problem is given as file:line of its YAML; a positive example that does not fire comes with the trace
    of its condition. Exits 1 when a problem is found, 2 for usage errors."""
    from .lint import lint

    database, flaws = load_checked(default_directory(), *_packs(signature_dirs))
    result = lint(database, root or default_directory().parent, flaws)
    for warning in result.warnings:
        echo(f"postmortem: warning: {warning}", err=True)
    for problem in result.problems:
        echo(str(problem))
        for line in problem.detail:
            echo(f"    {line}")
    echo(f"{len(database.signatures)} signatures, {len(result.problems)} problem(s)")
    if result.problems:
        sys.exit(1)


@signatures_group.command("explain-match")
@click.argument("signature_id")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
@click.option("--signatures", "signature_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path), help="Also load this pack.")
def signatures_explain_match(signature_id: str, inputs: tuple[str, ...], signature_dirs: tuple[Path, ...]) -> None:
    """Why one signature fires on these inputs or not: each part of its condition on the closest event.

    Exits 0 when it fires, 1 when it does not, 2 for usage errors."""
    from .lint import explain_match, fires

    database = _database(signature_dirs)
    signature = _signature(signature_id, database)
    report = run_analysis(list(inputs), database)
    for line in explain_match(signature, report):
        echo(line)
    if not fires(signature, report):
        sys.exit(1)


T = TypeVar("T")


class OutputProblem(click.ClickException):
    """An output that cannot be written (missing folder, a directory, an input, a full disk): exit 2, one sentence."""

    exit_code = 2


def output_step(step: Callable[[], T]) -> T:
    """Run one step of placing an output (its check before the work, its final write): an OutputError (missing
    folder, an input, a full disk) becomes the command's one-sentence error, exit 2, never a traceback."""
    try:
        return step()
    except OutputError as exc:
        raise OutputProblem(str(exc)) from None


def checked_output(path: str | os.PathLike, inputs: Iterable[str], trees: Iterable[str | os.PathLike] = ()) -> Output:
    """The -o path checked before any work starts (postmortem.outputs)."""
    return output_step(lambda: check_output(path, inputs, [os.fspath(tree) for tree in trees]))


SPINNER_DELAY_S = 1.0
"""An analysis shorter than this shows nothing on stderr."""


def _with_spinner(work: Callable[[Progress | None], Report]) -> Report:
    """Run the analysis; on a terminal, a progress line on stderr once it takes longer than SPINNER_DELAY_S.

    The line names how many inputs are done, the one being read and the time
    spent; it is erased before the report is written. Silent when stderr is
    not a terminal.
    """
    if not _is_terminal(sys.stderr):
        return work(None)
    result: list[Report] = []
    failure: list[BaseException] = []
    current = (0, "")

    def note(done: int, path: str) -> None:
        nonlocal current
        current = (done, path)

    def run() -> None:
        try:
            result.append(work(note))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            failure.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(SPINNER_DELAY_S)
    frames, shown, width = "|/-\\", 0, 0
    while worker.is_alive():
        done, path = current
        line = (f"\r{frames[shown % 4]} postmortem: {done} input(s) done, reading {terminal_text(path)[-50:]} "
                f"({time.monotonic() - started:.0f} s) ")
        width = max(width, len(line))
        sys.stderr.write(line)
        sys.stderr.flush()
        shown += 1
        worker.join(0.2)
    if shown:
        sys.stderr.write("\r" + " " * width + "\r")
        sys.stderr.flush()
    if failure:
        raise failure[0]
    return result[0]


