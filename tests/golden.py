"""The golden SQL runner: `sql/<name>.sql` scripts run against a real `use serve` through real JDBC
clients, their results rendered as text and compared with `sql/<name>.out` (format: sql/README.md).

A script runs in a fresh JDBC session, in a database of its own (`golden_<name>`, dropped and
created again before each run, so runs are independent and repeatable), with `${SCRATCH}` (a fresh
empty directory, e.g. for `LOCATION`) and `${DATA_DIR}` (the server's data directory) substituted
before the statements are sent and substituted back in the results. Values that change from run
to run (creation times, the Spark version that created a table, the owner) are masked.

A statement preceded by the comment line `-- golden: columns only` (kept in the statement) is
checked for its columns only: its rows are not recorded (e.g. a lake-wide table that lists the tables
other scripts created).

Every error a client receives must be one clean message: a JVM stack frame or a Python traceback
in it fails the run whatever the expected file says.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQL_DIR = ROOT / "sql"
UPDATE_HINT = "pytest tests/test_sql_golden.py --update-golden"

# DESCRIBE rows whose value changes from run to run or machine to machine.
VOLATILE_ROWS = frozenset({"Created Time", "Last Access", "Created By", "Owner"})
MASK = "<masked>"
#: The directive line that makes a statement's rows not compared (see the module docstring).
COLUMNS_ONLY = "-- golden: columns only"
_TRACE = re.compile(r"^\s+at \S+\(.*\)$|Traceback \(most recent call last\)", re.MULTILINE)


@dataclass(frozen=True)
class Result:
    """What one statement gave a client: columns (name, type; type None when the client does not
    say) and rows as the client shows them, or the error message and SQLSTATE."""

    statement: str
    columns: tuple[tuple[str, str | None], ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    error: str | None = None
    sqlstate: str | None = None


def split_statements(text: str) -> list[str]:
    """The statements of a script: `;` ends a statement unless it is inside quotes or a `--`
    comment; comment-only lines are dropped, the statement text is kept as written."""
    statements: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for line in text.splitlines():
        if quote is None and line.strip() == COLUMNS_ONLY:
            current.append(COLUMNS_ONLY)
            continue
        if quote is None and line.lstrip().startswith("--"):
            continue
        i = 0
        while i < len(line):
            ch = line[i]
            if quote:
                if ch == "\\" and quote != "`":
                    i += 1
                elif ch == quote:
                    quote = None
            elif ch in "'\"`":
                quote = ch
            elif ch == "-" and line.startswith("--", i):
                line = line[:i].rstrip()
                break
            elif ch == ";":
                current.append(line[:i])
                statements.append("\n".join(current).strip())
                current, line, i = [], line[i + 1 :], -1
            i += 1
        current.append(line)
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return [s for s in statements if s]


class Variables:
    """`${SCRATCH}` and `${DATA_DIR}`: substituted into statements, substituted back in results."""

    def __init__(self, data_dir: Path, scratch: Path) -> None:
        self.values = {"${SCRATCH}": str(scratch), "${DATA_DIR}": str(data_dir)}

    def substitute(self, statement: str) -> str:
        for name, value in self.values.items():
            statement = statement.replace(name, value)
        return statement

    def restore(self, text: str) -> str:
        # Longest value first: the scratch directory may lie inside the data directory.
        for name, value in sorted(self.values.items(), key=lambda kv: -len(kv[1])):
            text = text.replace(value, name)
        return text


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _masked(row: tuple[str, ...]) -> tuple[str, ...]:
    if len(row) >= 2 and row[0].strip() in VOLATILE_ROWS:
        return (row[0], MASK, *row[2:])
    return row


def check_clean(result: Result) -> None:
    """An error must reach the client as one message: no JVM frames, no Python traceback."""
    if result.error is not None and _TRACE.search(result.error):
        raise AssertionError(f"the error of {result.statement!r} carries a stack trace:\n{result.error}")


def render(results: Sequence[Result], types: bool = True) -> str:
    """The text form of a script's results (the `.out` format); `types=False` leaves the column
    types out (beeline does not show them)."""
    out: list[str] = []
    for r in results:
        out += ["-- query", r.statement]
        if r.error is not None:
            out += [f"-- error {r.sqlstate or ''}".rstrip(), r.error]
        else:
            columns = [f"{n}: {t}" if types and t else n for n, t in r.columns]
            out.append("-- columns: " + " | ".join(columns))
            if r.statement.startswith(COLUMNS_ONLY):
                out.append("-- rows not compared")
            else:
                out += [" | ".join(_masked(row)) for row in r.rows]
        out.append("")
    return "\n".join(out)


def without_types(rendered: str) -> str:
    """An expected `.out` text as a client that shows no column types renders it."""

    def names(match: re.Match[str]) -> str:
        return "-- columns: " + " | ".join(c.rsplit(": ", 1)[0] for c in match.group(1).split(" | "))

    return re.sub(r"^-- columns: (.*)$", names, rendered, flags=re.MULTILINE)


def prelude(name: str) -> list[str]:
    db = f"golden_{name}"
    return [f"DROP DATABASE IF EXISTS {db} CASCADE", f"CREATE DATABASE {db}", f"USE {db}"]


def expected_file(script: Path) -> Path:
    return script.with_suffix(".out")


# --- PyHive ---------------------------------------------------------------------------------


def _pyhive_error(exc: Exception) -> tuple[str, str | None]:
    """The message and SQLSTATE a PyHive error carries (its first argument is the Thrift
    response whose status says what went wrong)."""
    response = exc.args[0] if exc.args else None
    status = getattr(response, "status", None)
    if status is None:
        return str(exc), None
    return status.errorMessage or str(exc), status.sqlState


def run_pyhive(server, script: Path) -> list[Result]:
    """Run a script through PyHive (one connection, one cursor); one `Result` per statement."""
    from pyhive.exc import DatabaseError

    scratch = Path(tempfile.mkdtemp(prefix=f"golden-{script.stem}-"))
    variables = Variables(server.data_dir, scratch)
    results = []
    connection = server.connect()
    try:
        cursor = connection.cursor()
        for statement in prelude(script.stem):
            cursor.execute(statement)
        for statement in split_statements(script.read_text()):
            try:
                cursor.execute(variables.substitute(statement))
                description = cursor.description or []
                rows = cursor.fetchall() if description else []
                columns = tuple((d[0], str(d[1]).removesuffix("_TYPE")) for d in description)
                result = Result(
                    statement,
                    columns=tuple((variables.restore(n), t) for n, t in columns),
                    rows=tuple(tuple(variables.restore(_cell(v)) for v in row) for row in rows),
                )
            except DatabaseError as exc:
                message, state = _pyhive_error(exc)
                result = Result(statement, error=variables.restore(message), sqlstate=state)
            check_clean(result)
            results.append(result)
    finally:
        connection.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return results


# --- beeline --------------------------------------------------------------------------------

_MARKER = "-- golden statement "
_BEELINE_ERROR = re.compile(r"^Error: (?P<message>.*) \(state=(?P<state>[^,]*),code=-?\d+\)$", re.DOTALL)


def beeline_command(url: str, script_file: Path) -> list[str]:
    """Beeline from pyspark's own jars (no Hive installation needed)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    return [
        "java", "-cp", f"{jars}/*", "org.apache.hive.beeline.BeeLine",
        "-u", url, "-n", "use-tests",
        "--outputformat=tsv2", "--showHeader=true", "--silent=true", "--force=true",
        "-f", str(script_file),
    ]  # fmt: skip


def run_beeline(server, script: Path) -> list[Result]:
    """Run a script through beeline (one process, one session). Each statement is preceded by a
    `!sh echo` marker so the output can be cut per statement; errors go to the same stream."""
    statements = split_statements(script.read_text())
    scratch = Path(tempfile.mkdtemp(prefix=f"golden-{script.stem}-"))
    variables = Variables(server.data_dir, scratch)
    lines = [f"{s};" for s in prelude(script.stem)]
    for i, statement in enumerate(statements):
        lines += [f"!sh echo {_MARKER}{i}", f"{variables.substitute(statement)};"]
    script_file = scratch / f"{script.stem}.beeline.sql"
    script_file.write_text("\n".join(lines) + "\n")
    try:
        done = subprocess.run(
            beeline_command(server.url, script_file), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    blocks = re.split(rf"^{re.escape(_MARKER)}(\d+)$", done.stdout, flags=re.MULTILINE)
    if len(blocks) != 2 * len(statements) + 1:
        raise AssertionError(f"beeline (exit {done.returncode}) did not run every statement:\n{done.stdout}")
    results = []
    for statement, block in zip(statements, blocks[2::2], strict=False):
        text = variables.restore(block.strip("\n"))
        error = _BEELINE_ERROR.match(text)
        if error:
            result = Result(statement, error=error["message"], sqlstate=error["state"] or None)
        elif not text.strip():
            result = Result(statement)
        else:
            header, *rows = text.split("\n")
            result = Result(
                statement,
                columns=tuple((name, None) for name in header.split("\t")),
                rows=tuple(tuple(row.split("\t")) for row in rows),
            )
        check_clean(result)
        results.append(result)
    return results


# What newer Spark versions print differently for the same result (the `.out` files hold what the
# pinned pyspark prints; `pyproject.toml` allows up to 4.3): pattern -> the pinned version's form.
# Applied to both sides of a comparison, so the files stay exact for the pinned version.
_SPARK_RENDERINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    # DESCRIBE EXTENDED: 4.3 splits `Name | c.db.t` into Catalog/Namespace/Database/Table rows
    (
        re.compile(r"^Catalog \| (.*?) \| \nNamespace \| (.*?) \| \nDatabase \| .*? \| \nTable \| (.*?) \| $", re.MULTILINE),
        r"Name | \1.\2.\3 | ",
    ),
    # SHOW CREATE TABLE: 4.3 names the default collation of string columns
    (re.compile(r" COLLATE UTF8_BINARY\b"), ""),
    # TABLE_OR_VIEW_NOT_FOUND and friends: 4.3 adds the search path on a line of its own
    (re.compile(r"\nSearch path: \[.*?\]\.$", re.MULTILINE), ""),
    # parse errors: the token and position Spark points at differ between its parsers' versions
    (
        re.compile(r"Syntax error at or near '[^']*'\. SQLSTATE: 42601; line \d+ pos \d+"),
        "Syntax error at or near <token>. SQLSTATE: 42601",
    ),
)


def spark_neutral(text: str) -> str:
    """`text` with the renderings that depend on the Spark version brought to the pinned one's."""
    for pattern, replacement in _SPARK_RENDERINGS:
        text = pattern.sub(replacement, text)
    return text


def compare(script: Path, actual: str, expected_text: str | None = None) -> None:
    """Assert `actual` equals the script's expected results, with a unified diff if not (what only
    the Spark version changes is compared in the pinned version's form: `spark_neutral`)."""
    import difflib

    path = expected_file(script)
    if expected_text is None:
        if not path.exists():
            raise AssertionError(f"{path} does not exist; write it with `{UPDATE_HINT}` and review it")
        expected_text = path.read_text()
    actual, expected_text = spark_neutral(actual), spark_neutral(expected_text)
    if actual != expected_text:
        diff = "".join(
            difflib.unified_diff(expected_text.splitlines(keepends=True), actual.splitlines(keepends=True), str(path), "actual")
        )
        raise AssertionError(f"{script.name}: results differ from {path.name} (`{UPDATE_HINT}` rewrites it):\n{diff}")


if __name__ == "__main__":  # print a script's statements as the runner splits them
    for s in split_statements(Path(sys.argv[1]).read_text()):
        print(f"{s};\n")
