"""Runs a Jupyter notebook's code cells as Jupyter would, in one Python process, and prints
what each cell's last expression evaluated to, as one JSON line per cell:
    python notebook_driver.py NOTEBOOK NAMESPACE
Run by test_notebook.py with the Kubeflow SDK's own Python (.tfjob/venv-kubeflow); standard
library only. Two things differ from Jupyter, each printed: a cell with shell escapes
(`!pip install ...`, which needs the internet; the SDK is installed already) is not run, and
a line `namespace = "..."` is given the suite's namespace.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from typing import Any

NAMESPACE_ASSIGNMENT = re.compile(r"""^namespace\s*=\s*["'][^"']*["']\s*$""", re.MULTILINE)


def main() -> None:
    notebook, namespace = sys.argv[1], sys.argv[2]
    with open(notebook) as file:
        cells = [c for c in json.load(file)["cells"] if c["cell_type"] == "code"]
    scope: dict[str, Any] = {"__name__": "__main__"}
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        if any(line.lstrip().startswith("!") for line in source.splitlines()):
            print(json.dumps({"cell": index, "skipped": "shell escape (no internet here)"}), flush=True)
            continue
        source, changed = NAMESPACE_ASSIGNMENT.subn(f"namespace = {namespace!r}", source)
        if changed:
            print(json.dumps({"cell": index, "changed": "namespace"}), flush=True)
        tree = ast.parse(source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        assert last is None or isinstance(last, ast.Expr)
        exec(compile(tree, f"<cell {index}>", "exec"), scope)
        value = None
        if last is not None:
            value = eval(compile(ast.Expression(last.value), f"<cell {index}>", "eval"), scope)
        print(
            json.dumps({"cell": index, "source": source.splitlines()[-1:], "value": repr(value)}), flush=True
        )


if __name__ == "__main__":
    main()
