"""The package map in capsule/README.md, enforced: imports point only down the layers, with no cycles,
and commands stay thin (they never open a run directory themselves), and analyses and ledger
entries are read as dicts only where JSON becomes their types.

Every import of a project module is read from the source (module level and inside functions alike;
`if TYPE_CHECKING:` blocks too, since a type can pull a layer up as well as a call can).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The layers, lowest first (capsule/README.md); a module may import its own layer and those below.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "capsule", "capsule.errors", "capsule.hashing", "capsule.jsonio", "capsule.atomic", "capsule.pins",
        "capsule.run_dir", "capsule.locks", "capsule.faults",
    ),
    ("capsule.prereg",),
    ("capsule.artifacts",),
    ("capsule.machine",),
    ("capsule.cluster",),
    ("capsule.costing",),
    ("capsule.generation",),
    ("capsule.analysis",),
    ("capsule.report",),
    ("capsule.evidence",),
    ("capsule.authoring",),
    ("capsule.pipeline",),
    ("capsule.commands", "capsule.cli", "capsule.__main__"),
)


def module_name(path: Path) -> str:
    """`capsule/prereg/loader.py` -> `capsule.prereg.loader` (a package's `__init__` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The layer index of a capsule module: the longest owner in LAYERS that is it or contains it."""
    best, rank = "", -1
    for index, owners in enumerate(LAYERS):
        for owner in owners:
            if (module == owner or module.startswith(owner + ".")) and len(owner) > len(best):
                best, rank = owner, index
    if rank < 0:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it to capsule/README.md and here")
    return rank


def project_imports(path: Path) -> set[str]:
    """The capsule / ifeval_scorer modules `path` imports (resolving `from pkg import module`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in ("capsule", "ifeval_scorer")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in ("capsule", "ifeval_scorer"):
                continue
            found.add(node.module)
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if module_file(candidate) is not None:
                    found.add(candidate)
    return found


def module_file(module: str) -> Path | None:
    """The source file of a project module, or None when `module` names no module."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def graph(package: str) -> dict[str, set[str]]:
    """Module -> the project modules it imports, for every module under `package`."""
    return {
        module_name(path): project_imports(path) for path in sorted((ROOT / package).rglob("*.py"))
    }


def test_capsule_imports_point_down_the_layers() -> None:
    upward = []
    for module, imports in graph("capsule").items():
        for target in imports:
            if target.startswith("capsule") and layer_of(target) > layer_of(module):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that climb a layer: " + "; ".join(sorted(upward))


#: What evidence/ may take from analysis/: the typed schema, its codec, and the cross-run comparison it
#: hands two verified runs to. Evidence verifies; it computes no statistics itself.
EVIDENCE_READS_FROM_ANALYSIS = (
    "capsule.analysis", "capsule.analysis.codec", "capsule.analysis.schema",
    "capsule.analysis.control_schema", "capsule.analysis.paired_schema", "capsule.analysis.compare",
)
NUMERIC_LIBRARIES = ("numpy", "scipy")


def all_imports(path: Path) -> set[str]:
    """Every module `path` imports by absolute name (project or not), module level and in functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found | project_imports(path)


def statistics_imports(imports: set[str]) -> set[str]:
    """Those of `imports` that compute statistics: numpy, scipy, or an analysis/ module other than
    the schema, the codec and the cross-run comparison."""
    return {
        name for name in imports
        if name.split(".")[0] in NUMERIC_LIBRARIES
        or (name.startswith("capsule.analysis") and name not in EVIDENCE_READS_FROM_ANALYSIS)
    }


def test_evidence_computes_no_statistics() -> None:
    offending = [
        f"{module_name(path)} -> {target}"
        for path in sorted((ROOT / "capsule" / "evidence").rglob("*.py"))
        for target in statistics_imports(all_imports(path))
    ]
    assert not offending, "evidence/ computes statistics (move it to analysis/): " + "; ".join(
        sorted(offending)
    )


def test_ifeval_scorer_imports_nothing_from_capsule() -> None:
    offending = [
        f"{module} -> {target}"
        for module, imports in graph("ifeval_scorer").items()
        for target in imports
        if target.split(".")[0] == "capsule"
    ]
    assert not offending, "; ".join(sorted(offending))


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `edges` as a list of modules, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in edges:
                continue
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


@pytest.mark.parametrize("package", ["capsule", "ifeval_scorer"])
def test_no_import_cycles(package: str) -> None:
    edges = graph(package)
    # a package's __init__ importing its own modules, and those importing the package, is no cycle
    # of meaning; count only module -> module edges between different files
    own = {m: {t for t in ts if t != m and not m.startswith(t + ".")} for m, ts in edges.items()}
    cycle = find_cycle(own)
    assert cycle is None, " -> ".join(cycle or [])


#: What only the library may touch: a command that imports one of these opens run directories, writes
#: their manifest or generates arms itself, which is workflow (`capsule.pipeline`), not parsing.
RUN_DIRECTORY_WORK: dict[str, set[str] | None] = {  # module -> the names refused (None: all of it)
    "capsule.run_dir": {"RunDir"},
    "capsule.pipeline.opening": None,
    "capsule.generation.arm_runner": None,
}


def run_directory_work(source: str) -> list[str]:
    """What a command module's source imports of RUN_DIRECTORY_WORK, or names `RunDir` by."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in RUN_DIRECTORY_WORK:
            refused = RUN_DIRECTORY_WORK[node.module]
            found += [f"{node.module}.{a.name}" for a in node.names if refused is None or a.name in refused]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if RUN_DIRECTORY_WORK.get(a.name, set()) is None]
        elif isinstance(node, ast.Name) and node.id == "RunDir":
            found.append("RunDir")
    return found


def test_commands_do_not_open_run_directories() -> None:
    """commands/ parse options, call one library function and print: a run directory is opened, its
    manifest written and its arms generated in `capsule.pipeline` (issue 29)."""
    offending = {
        str(path.relative_to(ROOT)): work
        for path in sorted((ROOT / "capsule" / "commands").glob("*.py"))
        if (work := run_directory_work(path.read_text(encoding="utf-8")))
    }
    assert not offending, f"workflow in commands/, move it into capsule/pipeline/: {offending}"


#: Records that travel typed once read: who alone may read them as dicts (issue 29's "done when").
TYPED_RECORDS = {
    "analysis": ("capsule/analysis/codec.py",),  # analysis.json: `Analysis` after the codec
    "entry": ("capsule/prereg/ledger.py", "capsule/prereg/chain.py", "capsule/prereg/ledger_entries.py"),
    "comparison": ("capsule/analysis/compare.py",),  # `capsule compare`'s `RunComparison`
    # manifest.json: `ManifestRecord` after its codec; built, validated and hashed as JSON in manifest.py
    "manifest": ("capsule/machine/manifest.py", "capsule/machine/manifest_record.py"),
    "bundle": ("capsule/evidence/bundle_index.py", "capsule/evidence/bundle.py"),  # `BundleIndex`
    "sidecar": ("capsule/generation/arm_sidecar.py",),  # generations/<arm>.meta.json: `Sidecar`
    "refusal": ("capsule/generation/refused_arms.py",),  # generations/<arm>.refused.json: `RefusalRecord`
    "run_start": ("capsule/pipeline/run_start.py",),  # run.json: `RunStart`
}

#: The run directory's typed record files (their `RunDir` accessors) and the codecs that alone read or
#: write them as JSON; everything else goes through the codec's reader and gets the frozen type.
TYPED_FILES = {
    "bundle": ("capsule/evidence/bundle_index.py", "capsule/evidence/bundle.py"),
    "generations_meta": ("capsule/generation/arm_sidecar.py",),
    "refusal": ("capsule/generation/refused_arms.py",),
    "record": ("capsule/pipeline/run_start.py",),
    # built and validated as JSON there; its digest is of the JSON, which the verifier recomputes
    "manifest": ("capsule/machine/manifest.py", "capsule/machine/manifest_record.py",
                 "capsule/evidence/signed_files.py"),
}
JSON_IO = {"read_json", "read_json_object", "write_json_atomic", "parse_json", "loads", "load"}


def json_io_of(source: str, accessor: str) -> list[int]:
    """The lines where a JSON reader or writer (`JSON_IO`) is handed `<something>.<accessor>` as the
    file it reads or writes (its first argument): a record file of the run directory read or written
    as JSON, not through its codec."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in JSON_IO and node.args and any(
            isinstance(inner, ast.Attribute) and inner.attr == accessor for inner in ast.walk(node.args[0])
        ):
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("accessor", sorted(TYPED_FILES))
def test_typed_record_files_are_read_only_by_their_codecs(accessor: str) -> None:
    """bundle.json, an arm's sidecar and refusal record, run.json and manifest.json are parsed once,
    at their codec, into frozen types (issue 39 item 3): no other module reads `run.bundle` or
    `run.refusal(arm)` with a JSON reader, or writes one with a JSON writer."""
    offending = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "capsule").rglob("*.py"))
        if str(path.relative_to(ROOT)) not in TYPED_FILES[accessor]
        and (lines := json_io_of(path.read_text(encoding="utf-8"), accessor))
    }
    assert not offending, f"run.{accessor} as JSON outside {TYPED_FILES[accessor]}: {offending}"


def dict_reads(source: str, name: str) -> list[int]:
    """The lines where a variable called `name` is read as a dict: `name.get(...)` or `name[...]`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == name):
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("name", sorted(TYPED_RECORDS))
def test_typed_records_are_not_read_as_dicts(name: str) -> None:
    """An analysis is an `Analysis`, a ledger entry a frozen entry type, a comparison of two runs a
    `RunComparison` and a manifest a `ManifestRecord` everywhere but in the modules that turn them
    into JSON or JSON into them: no `analysis.get(...)`, no `entry["kind"]`, no `comparison["arms"]`,
    no `manifest.get("gpus")` elsewhere."""
    offending = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "capsule").rglob("*.py"))
        if str(path.relative_to(ROOT)) not in TYPED_RECORDS[name]
        and (lines := dict_reads(path.read_text(encoding="utf-8"), name))
    }
    assert not offending, f"{name} read as a dict outside {TYPED_RECORDS[name]}: {offending}"


def test_the_checks_can_fail() -> None:
    assert run_directory_work("from capsule.pipeline.opening import open_run_dir") == [
        "capsule.pipeline.opening.open_run_dir"
    ]
    assert run_directory_work("from capsule.run_dir import RunDir, RESULTS_ROOT\nRunDir(p)") == [
        "capsule.run_dir.RunDir", "RunDir"
    ]
    assert run_directory_work("import capsule.generation.arm_runner") == ["capsule.generation.arm_runner"]
    assert run_directory_work("from capsule.run_dir import RESULTS_ROOT") == []
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    source = "x = analysis.get('headline', {})\ny = entry['kind']\nz = analysis.headline"
    assert dict_reads(source, "analysis") == [1] and dict_reads(source, "entry") == [2]
    source = "a = read_json_object(RunDir(d).bundle, 'x')\nb = json.loads(run.refusal(arm).read_text())"
    assert json_io_of(source, "bundle") == [1] and json_io_of(source, "refusal") == [2]
    assert json_io_of("c = read_index(run.bundle)\nwrite_json_atomic(run.probe, x.record())", "record") == []
    assert layer_of("capsule.pipeline.reproduce") > layer_of("capsule.prereg.loader")
    assert layer_of("capsule.run_dir") == 0 and layer_of("capsule.report.plots") == 8
    assert statistics_imports({"capsule.analysis.paired", "numpy.random", "capsule.analysis.codec"}) == {
        "capsule.analysis.paired", "numpy.random"
    }


MAX_MODULE_LINES = 300  # issue 39 item 6: a module longer than this holds more than one responsibility


def test_no_module_is_over_300_lines() -> None:
    """Every module of capsule/ and ifeval_scorer/ is at most MAX_MODULE_LINES lines: split a longer
    one by responsibility (capsule/README.md names what each module does)."""
    root = Path(__file__).resolve().parents[2]
    long = {
        str(path.relative_to(root)): lines
        for package in ("capsule", "ifeval_scorer")
        for path in sorted((root / package).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


#: Where a backend's name may be compared with a string: its declaration, and the plan's list of names.
BACKEND_DECLARATIONS = {
    "capsule/prereg/backend_specs.py", "capsule/prereg/backend_types.py", "capsule/prereg/plan.py",
}


def _backend_literals(node: ast.AST, names: set[str]) -> list[str]:
    """The backend names a comparison's (or a set operation's) operands spell as string literals
    (alone, or in a tuple, list or set an `in` tests against)."""
    found = []
    operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
    operands += [node.left, node.right] if isinstance(node, ast.BinOp) else []
    for operand in operands:
        items = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        found += [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
    return found


def test_no_backend_name_is_compared_outside_its_declaration() -> None:
    """Backend traits live in `BackendSpec` (issue 39 item 2): code that treats backends differently
    asks the spec (`on_vllm`, `static_batches`, `priced_as`, `batch_word`, its options), so a backend
    added by the recipe in capsule/README.md gets engine sharing, lanes, cost and memory from its
    declaration, not from a list of names somewhere else."""
    from capsule.prereg.backend_specs import SPECS

    root = Path(__file__).resolve().parents[2]
    names = set(SPECS)
    found = [
        f"{path.relative_to(root)}:{node.lineno}: {literal!r}"
        for path in sorted((root / "capsule").rglob("*.py"))
        if str(path.relative_to(root)) not in BACKEND_DECLARATIONS
        for node in ast.walk(ast.parse(path.read_text()))
        for literal in _backend_literals(node, names)
    ]
    assert found == []
