"""The house rule on function shape (ARCHITECTURE.md, "Rules of the house"), read from the AST of every product
module: objects instead of long parameter lists (no public function or method takes more than
``MAX_PARAMS``), and a function over ``MAX_FUNCTION_LINES`` lines says in its docstring why it is long.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_architecture import MODULES, ROOT

MAX_PARAMS = 8  # self / cls not counted
MAX_FUNCTION_LINES = 80  # from the def line to the last line of the body
LONG_REASON = "Long because"  # how a long function's docstring starts its reason

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _params(fn: _Function, method: bool) -> int:
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    if method and not static and names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def shape_faults(source: str, where: str = "<source>") -> list[str]:
    """What in ``source`` breaks the rule: public functions or methods over MAX_PARAMS parameters, functions over
    MAX_FUNCTION_LINES lines whose docstring gives no reason. A function is public when neither it nor a class
    around it is named with a leading underscore (``__init__`` aside: a public class's constructor is public) and
    it is not nested in another function."""
    out: list[str] = []

    def visit(node: ast.AST, public: bool, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, public and not child.name.startswith("_"), True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _params(child, in_class)
                named = not child.name.startswith("_") or (in_class and child.name == "__init__")
                if public and named and n > MAX_PARAMS:
                    out.append(f"{where}:{child.lineno}: {child.name} takes {n} parameters (> {MAX_PARAMS})")
                lines = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES and LONG_REASON not in (ast.get_docstring(child) or ""):
                    out.append(
                        f"{where}:{child.lineno}: {child.name} has {lines} lines (> {MAX_FUNCTION_LINES}) and no "
                        f"'{LONG_REASON} ...' in its docstring"
                    )
                visit(child, False, False)
            else:
                visit(child, public, in_class)

    visit(ast.parse(source, where), True, False)
    return out


def test_functions_take_few_parameters_and_long_ones_say_why() -> None:
    faults = [
        fault
        for module, path in sorted(MODULES.items())
        for fault in shape_faults(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not faults, "pass an object instead of a long parameter list, or split the function:\n" + "\n".join(faults)


def test_the_shape_check_finds_a_violation() -> None:
    wide = ", ".join(f"p{i}" for i in range(MAX_PARAMS + 1))
    ok = ", ".join(f"p{i}" for i in range(MAX_PARAMS))
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = (
        f"def wide({wide}): pass\n"
        f"def _private_wide({wide}): pass\n"
        f"class C:\n    def method(self, {ok}): pass\n    def wide_method(self, {wide}): pass\n"
        f"    def __init__(self, {wide}): pass\n    def __call__(self, {wide}): pass\n"
        f"    @staticmethod\n    def static(self, {ok}): pass\n"
        f"class _Hidden:\n    def method(self, {wide}): pass\n"
        f"def outer():\n    def inner({wide}): pass\n"
        f"def stars(*args, **kwargs): pass\n"
        f"def long():\n    '''No reason given.'''\n{body}\n"
        f"def long_with_reason():\n    '''Does x.\n\n    {LONG_REASON} it must.\n    '''\n{body}\n"
    )
    faults = shape_faults(source)
    assert [f.split(": ")[1].split(" ")[0] for f in faults] == ["wide", "wide_method", "__init__", "static", "long"]
    assert f"takes {MAX_PARAMS + 1} parameters" in faults[0] and f"has {MAX_FUNCTION_LINES + 2} lines" in faults[4]


def test_the_doc_states_the_function_shape_rule() -> None:
    doc = (ROOT / "ARCHITECTURE.md").read_text()
    params = re.search(r"takes more than (\d+) parameters", doc)
    lines = re.search(r"over (\d+) lines", doc)
    assert params and lines, "ARCHITECTURE.md must state the function shape rule"
    assert (int(params.group(1)), int(lines.group(1))) == (MAX_PARAMS, MAX_FUNCTION_LINES)
    assert LONG_REASON in doc


def test_every_product_module_is_read() -> None:
    assert any(Path(p).name == "db.py" for p in MODULES.values()) and len(MODULES) > 100
