"""The package's stages import only earlier stages: capture never imports translation, translation
never the optimizer, quantization (a stage after finalize) neither verification nor the result,
nothing outside ``cli/`` imports ``cli/`` (every import counted, function-level
ones included); and ``import onnxport`` loads no op translation."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "onnxport"

# stage of each top-level part, in pipeline order; a module imports only stages up to its own
STAGES = {
    "errors": 0, "metadata": 0, "torch_behaviour": 0,
    "rewrite": 1, "capture": 1,
    "translate": 2,
    "optimize": 3,
    "finalize": 4,
    "verify": 5, "show": 5, "quantize": 5,
    "result": 6, "saving": 6, "export": 6, "demo_models": 6, "encoder_decoder": 6,
    "config": 7,
    "integrations": 8,
    "__init__": 9, "__main__": 10,
    "cli": 10,
}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("onnxport"):
            if node.module == "onnxport":  # a submodule, or a name of the package itself
                out += [(node.lineno, f"onnxport.{a.name}" if (PACKAGE / a.name).exists()
                         or (PACKAGE / f"{a.name}.py").exists() else "onnxport") for a in node.names]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("onnxport")]
    return out


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        yield name.removesuffix(".__init__"), path


@pytest.mark.parametrize("module,path", list(_modules()), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_imports_point_down_the_pipeline(module, path):
    own = _part(module) if module != "onnxport" else "__init__"
    assert own in STAGES, f"{module}: place {own!r} in STAGES"
    for line, target in _imports(path):
        part = _part(target)
        if part == own:
            continue
        assert part in STAGES, f"{path.name}:{line} imports {target}, of no known stage"
        assert STAGES[part] <= STAGES[own], f"{module} (stage {own}) imports a later stage: {target} at line {line}"
        assert part != "cli" or own in ("cli", "__main__"), f"{module} imports the CLI: {target} at line {line}"


def test_importing_onnxport_loads_no_translation():
    code = "import sys, onnxport; print(sorted(m for m in sys.modules if m.startswith('onnxport.translate.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['onnxport.translate.registry']"


def test_every_error_class_is_in_errors_and_exported():
    import onnxport
    from onnxport import errors

    defined = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.ExportError)}
    assert defined <= set(onnxport.__all__), sorted(defined - set(onnxport.__all__))
    for module, path in _modules():
        if module == "onnxport.errors":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                assert not bases & defined, f"{module} defines {node.name}, an ExportError, outside errors.py"


def test_quantization_and_verification_do_not_import_each_other():
    """Both come after finalize and take a finished result: quantization chooses and quantizes,
    verification measures; neither needs the other's code."""
    for module, path in _modules():
        own = _part(module)
        if own in ("quantize", "verify"):
            other = "verify" if own == "quantize" else "quantize"
            for line, target in _imports(path):
                assert _part(target) != other, f"{module} imports {target} at line {line}"
