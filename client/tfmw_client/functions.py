"""A Python function made into a program a job runs (`Client().train(fn)`), as Kubeflow's
SDK does it: the function's source, then a call with the parameters.

The job runs the function alone, in a fresh interpreter, without the notebook's globals, so
everything is checked before submission: a lambda, a closure, a method, a generator, a
function whose source cannot be read, one that uses a name it neither imports nor defines,
parameters that are not JSON, and imports that cannot work in the job (a relative import, a
module that is a file of the user's own folder) are refused with the name and the fix.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import inspect
import json
import os
import symtable
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfmw_client.errors import TfmwError

_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__builtins__", "__spec__"}


@dataclass(frozen=True)
class FunctionProgram:
    filename: str
    source: str
    warnings: tuple[str, ...] = field(default=())


def _refuse(fn_name: str, what: str, fix: str) -> TfmwError:
    return TfmwError(f"cannot submit `{fn_name}`: {what}", fix)


def function_source(fn: Callable[..., Any]) -> tuple[str, ast.FunctionDef]:
    """The function's own source (dedented, decorators left out) and its parsed definition."""
    name = getattr(fn, "__name__", repr(fn))
    if inspect.ismethod(fn):
        raise _refuse(
            name, "it is a method, bound to an object the job does not have", "pass a plain function"
        )
    if not inspect.isfunction(fn):
        raise _refuse(
            name, f"it is a {type(fn).__name__}, not a function defined with def", "pass a function"
        )
    if name == "<lambda>":
        raise _refuse(
            name, "it is a lambda", "define it with def (at the top level of a cell or module) and pass that"
        )
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise _refuse(name, "it is async: nothing would await it", "pass a plain (synchronous) function")
    if inspect.isgeneratorfunction(fn):
        raise _refuse(name, "it is a generator: calling it would run nothing", "pass a function that trains")
    if fn.__closure__:
        free = ", ".join(f"`{v}`" for v in fn.__code__.co_freevars)
        raise _refuse(
            name,
            f"it is a closure over {free} of the function that defines it",
            "define it at the top level, and pass those values as parameters={...}",
        )
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise _refuse(
            name,
            "its source cannot be read (defined at a plain Python prompt?)",
            "define it in a file or a notebook cell",
        ) from None
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise _refuse(name, f"its source does not parse: {error}", "check the function's source") from None
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef) or definition.name != name:
        raise _refuse(name, "its source is not a single def", "define it with def, by itself")
    lines = source.splitlines(keepends=True)
    own = "".join(lines[definition.lineno - 1 :])  # without its decorators: they are not in the job
    return own, definition


def _global_names(table: symtable.SymbolTable) -> set[str]:
    """Every name the scope or a scope inside it reads as a global (not declared global)."""
    found = {s.get_name() for s in table.get_symbols() if s.is_global() and not s.is_declared_global()}
    for child in table.get_children():
        found |= _global_names(child)
    return found


def _declared_globals(table: symtable.SymbolTable) -> set[str]:
    found = {s.get_name() for s in table.get_symbols() if s.is_declared_global()}
    for child in table.get_children():
        found |= _declared_globals(child)
    return found


def _import_hint(name: str, value: object) -> str:
    if isinstance(value, types.ModuleType):
        imported = value.__name__
        return f"`import {imported}`" if imported == name else f"`import {imported} as {name}`"
    module = getattr(value, "__module__", None)
    if (
        isinstance(module, str)
        and module not in ("__main__", "builtins")
        and getattr(value, "__name__", "") == name
    ):
        return f"`from {module} import {name}`"
    return ""


def undefined_globals(fn: Callable[..., Any], source: str) -> list[str]:
    """The globals the function uses that the job will not have, each with how to fix it."""
    # As the job's program has it: annotations are never evaluated, so the names they use
    # need not exist there (and symtable then leaves them out).
    table = symtable.symtable(f"from __future__ import annotations\n{source}", "<function>", "exec")
    (function_table,) = [t for t in table.get_children() if t.get_name() == fn.__name__]
    allowed = _BUILTINS | {fn.__name__} | _declared_globals(function_table)
    problems = []
    namespace: Mapping[str, object] = getattr(fn, "__globals__", {})
    for name in sorted(_global_names(function_table) - allowed):
        hint = _import_hint(name, namespace.get(name))
        if hint:
            problems.append(f"`{name}` (import it inside the function: {hint})")
        elif name in namespace:
            problems.append(
                f"`{name}` (a global of the notebook: pass it in parameters={{...}} or define it inside)"
            )
        else:
            problems.append(f"`{name}` (defined nowhere)")
    return problems


def _imports(definition: ast.FunctionDef) -> Iterable[tuple[str, int]]:
    """(top-level module, level) of every import in the function."""
    for node in ast.walk(definition):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], 0
        elif isinstance(node, ast.ImportFrom):
            yield (node.module or "").split(".")[0], node.level


def _local_file(module: str) -> str:
    """The path when `module` is a file or package of the user's own folder, not an installed one."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return ""
    origin = getattr(spec, "origin", None) if spec else None
    if not origin or origin in ("built-in", "frozen"):
        return ""
    where = Path(origin).resolve()
    installed = [Path(p).resolve() for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)]
    stdlib = Path(os.__file__).resolve().parent
    if any(where.is_relative_to(p) for p in [*installed, stdlib]):
        return ""
    return str(where)


def check_imports(fn_name: str, definition: ast.FunctionDef, packages: Sequence[str]) -> list[str]:
    """Refuses imports that cannot work in the job; returns warnings for the doubtful ones."""
    warnings = []
    for module, level in _imports(definition):
        if level:
            raise _refuse(
                fn_name,
                "it has a relative import (`from .`): the job runs it as a script, outside any package",
                "import by the module's full name",
            )
        if not module or module in sys.stdlib_module_names:
            continue
        local = _local_file(module)
        if local:
            raise _refuse(
                fn_name,
                f"it imports `{module}`, a module of your own folder ({local}) that the job does not have",
                "submit the folder with `tfmw submit FOLDER`, or move that code into the function",
            )
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found and not packages:
            warnings.append(
                f"`{fn_name}` imports `{module}`, which is not installed here: the image must have it, "
                "or name it in packages=[...]"
            )
    return warnings


def function_program(
    fn: Callable[..., Any], parameters: Mapping[str, Any] | None = None, packages: Sequence[str] = ()
) -> FunctionProgram:
    """The program a job runs for `fn(**parameters)`, checked; refused with the reason."""
    unwrapped = inspect.unwrap(fn)
    source, definition = function_source(unwrapped)
    name = unwrapped.__name__
    decorated = unwrapped is not fn or bool(definition.decorator_list)
    fn = unwrapped
    problems = undefined_globals(fn, source)
    if problems:
        raise _refuse(
            name,
            f"it uses {', '.join(problems)}, which the job will not have",
            "the job runs the function alone, without the notebook's globals: import inside the function "
            "what it uses, and pass values as parameters={...}",
        )
    warnings = check_imports(name, definition, packages)
    if decorated:
        warnings.append(f"`{name}` runs in the job without its decorators")
    try:
        encoded = json.dumps(dict(parameters or {}), sort_keys=True)
    except (TypeError, ValueError) as error:
        raise _refuse(
            name, f"its parameters are not JSON: {error}", "pass numbers, strings, lists and dicts"
        ) from None
    accepted = inspect.signature(fn)
    try:
        accepted.bind(**json.loads(encoded))
    except TypeError as error:
        raise _refuse(name, f"its parameters do not fit its signature {accepted}: {error}", "") from None
    where = inspect.getsourcefile(fn) or "<unknown>"
    program = (
        f"# Written by tfmw (Client().train) from the function `{name}` of {Path(where).name}.\n"
        "from __future__ import annotations  # annotations may name what the job does not have\n\n"
        "import json as _tfmw_json\n\n\n"
        f"{source.rstrip()}\n\n\n"
        'if __name__ == "__main__":\n'
        f"    {name}(**_tfmw_json.loads({encoded!r}))\n"
    )
    return FunctionProgram(f"{name}.py", program, tuple(warnings))
