"""The package's stages import only earlier stages: capture never imports translation, translation
never the optimizer, quantization (a stage after finalize) neither verification nor the result,
nothing outside ``cli/`` imports ``cli/`` (every import counted, function-level
ones included), and no module imports itself through others; ``import onnxport`` loads no op
translation; knowledge of other libraries and models lives in ``library/``, the capture core and
the translator name no model library."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "onnxport"

# stage of each top-level part, in pipeline order; a module imports only stages up to its own
STAGES = {
    "errors": 0, "metadata": 0, "torch_behaviour": 0, "library_functions": 0, "source_forms": 0, "weights": 0,
    "options": 0,
    "rewrite": 1, "capture": 1,
    "translate": 2, "library": 2,
    "optimize": 3,
    "finalize": 4, "join_pieces": 4, "targets": 4, "same_graph": 4, "residues": 4,
    "verify": 5, "show": 5, "quantize": 5,
    "result": 6, "saving": 6, "export": 6, "pieces": 6, "stages": 6, "settle": 6, "demo_models": 6,
    "remainder_sides": 6, "value_sides": 6,
    "encoder_decoder": 6,
    "config": 7, "pretrained": 7, "observation": 7,
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


@pytest.mark.slow
def test_importing_onnxport_loads_no_translation():
    code = "import sys, onnxport; print(sorted(m for m in sys.modules if m.startswith('onnxport.translate.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['onnxport.translate.registry']"


@pytest.mark.slow
def test_importing_onnxport_loads_no_target_rewrite():
    """``onnxport.targets.TARGETS`` names its rewrites (``targets.Later``): imported when a target is applied."""
    code = ("import sys, onnxport; from onnxport.targets import TARGETS; "
            "named = {f.where.partition(':')[0] for t in TARGETS.values() "
            "for f in (*t.rewrites, t.check_sizes, t.prepare) if f is not None}; "
            "print(len(named), sorted(n for n in named if 'onnxport.targets.' + n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    count, loaded = out.strip().split(" ", 1)
    assert int(count) >= 6 and loaded == "[]", out


@pytest.mark.slow
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


# ------------------------------------------------------------------------------ capture-time patches
REGISTRY_MODULE = PACKAGE / "capture" / "patches.py"
# setattr/delattr outside the registry, each on an object onnxport itself made or reads as data
SETATTR_ALLOWED = {
    ("config/parse.py", "decl"), ("config/parse.py", "cfg"),  # the config objects being parsed
    ("capture/caches.py", "layer"),  # a cache layer being rebuilt from its tensors
    ("capture/decompose.py", "graph.owning_module"),  # the captured program's own module: a constant kept
    ("result.py", "self"),
}
_EXTERNAL = ("torch", "transformers", "torchvision", "timm", "math", "sys", "builtins")


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _external_names(tree: ast.AST) -> set[str]:
    """Names bound to torch, transformers, ... (imports, and names assigned from them)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in _EXTERNAL}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in _EXTERNAL:
            names |= {a.asname or a.name for a in node.names}
    changed = True
    while changed:  # aliases: vf = torch._VF, cls = nn.LSTM (an attribute, not a value a call makes)
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Attribute, ast.Name)) \
                    and _root(node.value) in names:
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id not in names:
                        names.add(t.id)
                        changed = True
    return names


def _patch_sites_outside_the_registry(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else path.name
    external = _external_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and node.args:
            target = ast.unparse(node.args[0])
            if (rel, target) not in SETATTR_ALLOWED:
                found.append(f"{rel}:{node.lineno}: {node.func.id}({target}, ...)")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else node.targets if isinstance(node, ast.Delete) else []
        for t in targets:
            if not isinstance(t, (ast.Attribute, ast.Subscript)):
                continue
            text = ast.unparse(t)
            attribute = isinstance(t, ast.Attribute)
            if (attribute and _root(t) in external) or ".__code__" in text or ".py_kernels" in text or (
                    attribute and t.attr == "forward" and _root(t) != "self"):
                found.append(f"{rel}:{node.lineno}: {text} = ...")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("clear", "update", "pop") and ".py_kernels" in ast.unparse(node.func.value):
            found.append(f"{rel}:{node.lineno}: {ast.unparse(node.func)}(...)")
    return found


@pytest.mark.slow
def test_every_capture_time_patch_goes_through_the_registry():
    """torch, transformers and the user's modules are changed only by ``capture/patches.py``'s changes
    (``SetAttribute``, ``SetKernel``, ``SetCode``, ``SetConfig``), each part of a registered ``Patch``."""
    found = [site for _, path in _modules() if path != REGISTRY_MODULE
             for site in _patch_sites_outside_the_registry(path)]
    assert not found, "patch these through onnxport.capture.patches (register(Patch(...))):\n" + "\n".join(found)


def test_the_patch_check_finds_a_patch_made_directly(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import torch\nfrom torch.export import _trace\n\n"
                      "def f(fn, new):\n    vf = torch._VF\n    vf._pack = new\n    _trace.produce = new\n"
                      "    fn.__code__ = new.__code__\n    torch.nn.LSTM.forward = new\n    setattr(vf, 'x', 1)\n")
    found = sorted(_patch_sites_outside_the_registry(sample), key=lambda s: int(s.split(":")[1]))
    assert [f.split(": ", 1)[1] for f in found] == ["vf._pack = ...", "_trace.produce = ...", "fn.__code__ = ...",
                                                    "torch.nn.LSTM.forward = ...", "setattr(vf, ...)"]


_REGISTERED = """
import importlib, json, pkgutil, sys
import onnxport
from onnxport.capture.patches import REGISTRY
for info in pkgutil.walk_packages(onnxport.__path__, "onnxport."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
print(json.dumps({"loaded": sorted(m for m in ("transformers", "torchvision", "timm") if m in sys.modules),
                  "patches": [{"name": n, "module": p.changes.__module__, "doc": p.doc, "when": p.when is not None,
                               "order": p.order, "sites": None if p.sample is None else len(p.sites())}
                              for n, p in REGISTRY.items()]}))
"""
CORE = ("capture", "translate")  # the core's own patches: torch changed while traced, an ATen op kept whole


def _library_of(module: str) -> str:
    """The library a module of ``onnxport/library/`` knows (``torch_nn``: torch), torch for the core."""
    parts = module.split(".")
    return parts[2].split("_")[0] if parts[1] == "library" else "torch"


@pytest.fixture(scope="module")
def registered():
    """Every registered capture patch once every onnxport module is imported, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _REGISTERED], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_importing_onnxport_imports_no_model_library(registered):
    """Every module imported, and no model library with them: ``library/`` reads a library's modules
    when a patch is installed, never at import."""
    assert registered["loaded"] == []


def test_every_registered_patch_lives_in_the_library_or_the_core(registered):
    """A patch a trace installs by itself (``when``) is defined in ``library/`` or in the core
    (``capture/``, ``translate/``), with its place (``order``); one installed only where code asks
    for it may also live beside that code (``integrations/``: RETURNN's hooks). Every patch has a doc."""
    for patch in registered["patches"]:
        name, part = patch["name"], _part(patch["module"])
        assert patch["doc"], f"{name} has no doc"
        assert part in ("library", *CORE) or (not patch["when"] and part == "integrations"), \
            f"{name} ({patch['module']}): a capture patch lives in onnxport/library/ or the core"
        assert not patch["when"] or isinstance(patch["order"], int), f"{name} has when= and no order="


def test_every_registered_patch_lists_its_sites(registered):
    """A patch lists the sites it changes, unless its library is not imported (a fresh process
    imports none): the core's patches change torch, which always is."""
    for patch in registered["patches"]:
        if patch["sites"] is None:  # the sites depend on the capture (the user's module)
            continue
        library = _library_of(patch["module"])
        assert patch["sites"] or library not in ("torch", *registered["loaded"]), \
            f"{patch['name']} ({patch['module']}) lists no site"


@pytest.mark.parametrize("part", CORE)
def test_the_core_names_no_model_library(part):
    """Model knowledge lives in ``library/``: the capture core and the translator name no model of
    transformers or torchvision."""
    found = [f"{path.relative_to(PACKAGE)}:{i}" for path in sorted((PACKAGE / part).rglob("*.py"))
             for i, line in enumerate(path.read_text().splitlines(), 1)
             if "transformers.models." in line or "torchvision.models" in line]
    assert not found, "move this knowledge to onnxport/library/:\n" + "\n".join(found)


# ------------------------------------------------------------------------------ import cycles
def _imported_modules(path: Path, known: set[str]) -> set[str]:
    """The onnxport modules ``path`` imports, function-level imports included (``from package import
    module`` as the module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "onnxport":
            modules = {f"{node.module}.{a.name}" for a in node.names} & known
            out |= modules or {node.module}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "onnxport"}
    return out & known


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycle():
    modules = dict(_modules())
    graph = {m: _imported_modules(p, set(modules)) - {m} for m, p in modules.items()}
    cycles = _cycles(graph)
    assert not cycles, "modules that import each other (function-level imports counted):\n" + \
        "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


# ------------------------------------------------------------------------------ capture steps
def test_the_capture_steps_are_listed_in_one_place():
    """Every step class of ``capture/steps.py`` is in ``STEPS`` once, and only ``STEPS`` lists them:
    ``capture()`` runs the list (``run_steps``) and calls no step itself."""
    import inspect

    from onnxport.capture import steps

    classes = {c for c in vars(steps).values() if inspect.isclass(c) and issubclass(c, steps.Step)
               and c not in (steps.Step, steps.Fallback, steps.Decision)}
    listed = [type(s) for s in steps.STEPS]
    assert sorted(c.__name__ for c in classes) == sorted(c.__name__ for c in listed) and len(set(listed)) == len(listed)
    for _, path in _modules():
        text = path.read_text()
        for c in classes:
            if path.name != "steps.py":
                assert f"{c.__name__}(" not in text, f"{path} makes the step {c.__name__} outside STEPS"


def test_capture_trace_has_no_long_nested_function():
    for name in ("trace.py", "steps.py"):
        tree = ast.parse((PACKAGE / "capture" / name).read_text())
        for outer in ast.walk(tree):
            if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(outer):
                    if inner is not outer and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        length = inner.end_lineno - inner.lineno + 1
                        assert length <= 20, f"capture/{name}: {outer.name}.{inner.name} is {length} lines"


def test_quantization_and_verification_do_not_import_each_other():
    """Both come after finalize and take a finished result: quantization chooses and quantizes,
    verification measures; neither needs the other's code."""
    for module, path in _modules():
        own = _part(module)
        if own in ("quantize", "verify"):
            other = "verify" if own == "quantize" else "quantize"
            for line, target in _imports(path):
                assert _part(target) != other, f"{module} imports {target} at line {line}"
