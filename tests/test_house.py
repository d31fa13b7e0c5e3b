"""The house checks itself (issue 48): sizes, the import graph and the comments of the
source tree, read as files from the checkout that holds these tests.

CI runs pytest from outside the checkout on the installed package, so the tree is
found from this file (``tests/..``), never from ``dmlnumba.__file__``.

How each rule counts:
- a module's length is its number of lines (blank lines and comments included);
- a function's length runs from its first decorator (or its ``def`` line when it has
  none) to its last line, docstring and nested functions included; every function
  and method is measured, nested ones too;
- an import is every ``import``/``from`` statement anywhere in a module (inside a
  function, under ``if TYPE_CHECKING:`` or ``try:`` alike), relative or absolute,
  naming ``dmlnumba`` or one of its modules.  ``from p import name`` depends on the
  module ``p.name`` when that is a module, else on ``p`` itself.  A cycle is a
  strongly connected component of two or more modules, or a module importing itself;
- a date is ``YYYY-MM-DD``, ``YYYY-MM``, or a month's name beside a day or a year; a
  time of day is ``HH:MM`` (not a slice such as ``[1:10]``), a.m./p.m. after an hour, or
  a time zone's name (UTC, GMT).  Comments and docstrings are read; code is not.
"""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dmlnumba"

MODULE_LINES = 400
FUNCTION_LINES = 120
DOC_LINES = {"README.md": 250, "docs/PERFORMANCE.md": 350}


def _modules():
    """``{dotted name: path}`` of every module under src/dmlnumba."""
    if not SRC.is_dir():
        pytest.fail(f"no source tree at {SRC}: the house checks read the checkout")
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _where(path, line=None):
    rel = path.relative_to(ROOT)
    return f"{rel}:{line}" if line else str(rel)


def _report(what, found):
    """Fail listing every finding, one per line."""
    if found:
        pytest.fail(f"{len(found)} {what}:\n  " + "\n  ".join(found), pytrace=False)


def test_modules_are_at_most_400_lines():
    found = []
    for path in _modules().values():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MODULE_LINES:
            found.append(f"{_where(path)}: {n} lines")
    _report(f"modules over {MODULE_LINES} lines", found)


def function_lengths(tree):
    """``(name, first line, lines)`` of every function in ``tree``, nested ones too."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield node.name, first, node.end_lineno - first + 1


def test_functions_are_at_most_120_lines():
    found = []
    for path in _modules().values():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, line, n in function_lengths(tree):
            if n > FUNCTION_LINES:
                found.append(f"{_where(path, line)}: {name}() {n} lines")
    _report(f"functions over {FUNCTION_LINES} lines", found)


# ---------------------------------------------------------------- import cycles


def _package_of(name, path):
    """The package a relative import in module ``name`` starts from."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_edges(modules):
    """``{module: {imported module: first line}}`` over every import statement."""
    edges = {m: {} for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = _package_of(name, path)
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            for t in targets:
                while t and t not in modules:  # dmlnumba.x.name -> dmlnumba.x
                    t = t.rpartition(".")[0]
                if t:
                    edges[name].setdefault(t, node.lineno)
    return edges


def strongly_connected(edges):
    """Tarjan's strongly connected components of the graph ``edges``."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def cycle_through(start, comp, edges):
    """The shortest import path from ``start`` back to itself inside ``comp``."""
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(edges[path[-1]]):
            if w == start:
                return path + [start]
            if w in comp and w not in seen:
                seen.add(w)
                paths.append(path + [w])
    raise AssertionError("not a cycle")  # pragma: no cover


def test_no_import_cycles_counting_lazy_imports():
    modules = _modules()
    edges = import_edges(modules)
    found = []
    for comp in strongly_connected(edges):
        if len(comp) == 1 and comp[0] not in edges[comp[0]]:
            continue
        found.append(f"component of {len(comp)} modules: {', '.join(comp)}")
        seen = set()
        for start in comp:  # the shortest cycle through each module, each cycle once
            cycle = cycle_through(start, set(comp), edges)
            if frozenset(cycle) in seen:
                continue
            seen.add(frozenset(cycle))
            steps = [f"{a} ({_where(modules[a], edges[a][b])})" for a, b in zip(cycle, cycle[1:])]
            found.append("  cycle: " + " -> ".join(steps + [cycle[-1]]))
    _report("lines on import cycles", found)


# ---------------------------------------------------------------- dates and times in comments

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
DATE_OR_TIME = re.compile(
    r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])(?:-[0-3]\d)?\b"  # 2026-11-27, 2026-11
    rf"|\b{_MONTH}\s+(?:[0-3]?\d(?:st|nd|rd|th)?|(?:19|20)\d\d)\b"  # Nov 27, November 2026
    rf"|\b[0-3]?\d(?:st|nd|rd|th)?\s+{_MONTH}\b"  # 27 Nov
    r"|(?<![\w\[:.])(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?![\w\]:])"  # 11:50, 11:50:08
    r"|\b(?:1[0-2]|0?[1-9])\s?(?:a\.?m|p\.?m)\b\.?"  # 9 am, 5pm
    r"|\b(?:UTC|GMT)\b"
)


def comments_and_docstrings(source):
    """``(line, text)`` of every comment and docstring of a module's source."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    yield body[0].lineno, body[0].value.value


def test_no_dates_or_times_of_day_in_src_comments():
    found = []
    for path in _modules().values():
        for line, text in comments_and_docstrings(path.read_text(encoding="utf-8")):
            for m in DATE_OR_TIME.finditer(text):
                found.append(f"{_where(path, line)}: {m.group(0)!r}")
    _report("dates or times of day in comments or docstrings", found)


@pytest.mark.parametrize(
    "text, hit",
    [
        ("# measured 2026-11-27 on the GPU", "2026-11-27"),
        ("# since 2026-11", "2026-11"),
        ("# run at 11:50 on Friday", "11:50"),
        ("# took until 23:05:10", "23:05:10"),
        ("# Nov 27 numbers", "Nov 27"),
        ("# on 27 November", "27 November"),
        ("# in March 2026", "March 2026"),
        ("# 9 am run", "9 am"),
        ("# a UTC timestamp", "UTC"),
        ("# x[1:10] and a[:12] copy", None),
        ("# 16:9 aspect, ratio 3:1, offsets 0..12", None),
        ("# may be 2 elements, 64-bit, 2**31-1", None),
    ],
)
def test_the_date_pattern(text, hit):
    m = DATE_OR_TIME.search(text)
    assert (m and m.group(0)) == hit


# ---------------------------------------------------------------- documents


@pytest.mark.parametrize("doc", sorted(DOC_LINES))
def test_documents_within_their_length(doc):
    path = ROOT / doc
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= DOC_LINES[doc], f"{doc}: {n} lines, at most {DOC_LINES[doc]}"


def test_the_cycle_finder():
    edges = {"a": {"b": 1}, "b": {"c": 1, "a": 2}, "c": {}, "d": {"d": 3}}
    comps = strongly_connected(edges)
    assert sorted(comps) == [["a", "b"], ["c"], ["d"]]
    assert cycle_through("a", {"a", "b"}, edges) == ["a", "b", "a"]
    assert cycle_through("d", {"d"}, edges) == ["d", "d"]
