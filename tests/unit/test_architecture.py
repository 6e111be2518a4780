"""The pure core (api, cel, allocator, scheduling, every controller's planning, the runtime's
action types) does no I/O, reads no clock, draws no random numbers and does not log
(docs/architecture.md, Layers). import-linter guards third-party packages; the standard library
is invisible to it, so this test reads the imports (and clock reads) itself."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

PURE = ("api", "cel", "allocator", "scheduling")
ROOT = Path(__file__).resolve().parents[2] / "operators"
PURE_MODULES = (
    *sorted((ROOT / "controllers").glob("*/planning.py")),
    ROOT / "runtime" / "actions.py",
    ROOT / "runtime" / "claim_writes.py",
)
# datetime is a data type (timestamps are parsed and formatted in the core); reading the
# clock through it is what is forbidden.
CLOCK_READS = frozenset({"now", "utcnow", "today"})
# Modules (and their submodules) that do I/O, read clocks or draw random numbers.
# threading and urllib.parse (CEL's url()) are pure.
FORBIDDEN_STDLIB = (
    "asyncio",
    "http",
    "logging",
    "multiprocessing",
    "os",
    "random",
    "secrets",
    "select",
    "shutil",
    "signal",
    "socket",
    "ssl",
    "subprocess",
    "tempfile",
    "time",
    "urllib.request",
    "urllib.error",
    "uuid",
)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _forbidden(modules: set[str]) -> set[str]:
    return {m for m in modules for f in FORBIDDEN_STDLIB if m == f or m.startswith(f + ".")}


def _clock_reads(path: Path) -> set[str]:
    """``datetime.now()`` and the like, however datetime was imported."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        f"{ast.unparse(node.func)}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCK_READS
        and "date" in ast.unparse(node.func.value)
    }


@pytest.mark.parametrize(
    "path",
    sorted(p for layer in PURE for p in (ROOT / layer).rglob("*.py")) + list(PURE_MODULES),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_pure_core_module_imports_no_io_or_clock(path: Path) -> None:
    assert not _forbidden(_imports(path)), f"{path} imports {_forbidden(_imports(path))}"
    assert not _clock_reads(path), f"{path} reads the clock: {_clock_reads(path)}"


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import time\nfrom random import choice\nimport urllib.parse\n")
    assert _forbidden(_imports(probe)) == {"time", "random"}


def test_the_check_sees_a_clock_read(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import datetime\nfrom datetime import date\n"
        "a = datetime.datetime.now(datetime.UTC)\nb = date.today()\n"
        "c = datetime.datetime.fromisoformat('2026-01-01')\n"
    )
    assert _clock_reads(probe) == {"datetime.datetime.now()", "date.today()"}


def test_planning_modules_are_checked() -> None:
    names = {p.parent.name for p in PURE_MODULES if p.name == "planning.py"}
    assert names == {"claim_templates", "fabric", "pool_validator", "reservations", "scheduler"}


# --- no import cycles ---------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _dependencies(path: Path, known: set[str]) -> set[str]:
    """Modules of ours that ``path`` imports (``from pkg import submodule`` is the submodule;
    imports under ``if TYPE_CHECKING`` count too: a cycle of types is still a cycle)."""
    name = _module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if path.name != "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif module in known:
                    found.add(module)
    found.discard(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: _dependencies(path, set(paths)) for name, path in paths.items()}


def test_no_module_imports_itself_through_others() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_every_controller_package_is_in_the_independence_contract() -> None:
    """import-linter keeps apart only the controllers it is told about: a new package left out
    of the list could import another controller's modules unnoticed. ``claims`` composes two
    controllers in one process and is the one left out on purpose."""
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (independent,) = [c["modules"] for c in contracts if c["type"] == "independence"]
    packages = {
        f"operators.controllers.{p.parent.name}"
        for p in (ROOT / "controllers").glob("*/__init__.py")
    }
    assert set(independent) == packages - {"operators.controllers.claims"}


def test_every_module_is_in_the_layers_contract() -> None:
    """import-linter only checks the layers it is told about: none may be left out."""
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    named = {m.strip() for layer in layers for m in layer.split("|")}
    top = {n.split(".")[1] for n in _graph() if n.count(".") >= 1}
    assert {f"operators.{t}" for t in top} <= named


#: Where the scheduling attempt lives: its steps must stay short enough to read one by one.
SHORT_FUNCTION_PACKAGES = ("scheduling", "simulate")
MAX_FUNCTION_LINES = 80


def test_no_function_of_the_scheduling_attempt_is_long() -> None:
    """Long functions hid repeated steps before (a 198-line cycle, a 113-line answer)."""
    long = []
    for package in SHORT_FUNCTION_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}")
    assert long == []


ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"


def _recipe(title: str) -> str:
    text = ARCHITECTURE.read_text()
    found = re.search(rf"\*\*{re.escape(title)}\.?\*\*", text)
    assert found is not None, f"architecture.md has no recipe {title!r}"
    start = found.start()
    end = text.find("\n\n**", start)
    return text[start : end if end != -1 else len(text)]


def test_every_path_the_architecture_names_exists() -> None:
    """A recipe that names a module or test that moved sends its reader nowhere."""
    named = set(
        re.findall(r"`((?:operators|tests|bench|e2e|hack)/[\w./-]+)`", ARCHITECTURE.read_text())
    )
    assert named
    assert sorted(p for p in named if not (ROOT.parent / p).exists()) == []


def test_the_recipe_for_a_step_of_an_attempt_names_where_it_goes() -> None:
    """The one module a new step before Filter goes into, and the names the recipe tells a
    reader to extend, exist where it says."""
    recipe = _recipe("A step of a scheduling attempt")
    modules = re.findall(r"`((?:operators|tests)/[\w/]+\.py)`", recipe)
    assert modules[0] == "operators/scheduling/attempt.py"
    sources = "\n".join((ROOT.parent / m).read_text() for m in modules)
    names = set(re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", recipe))
    assert {"prepare", "Prepared", "pre_filter", "_prepare", "OWN_STEPS", "decide"} <= names
    missing = [n for n in names if not re.search(rf"\b(def|class) {n}\b|^{n}\b", sources, re.M)]
    assert missing == []


def _named_in_the_map(path: Path) -> bool:
    """A module of the scheduler's package as ``name.py``; one of ``scheduling`` as
    ``scheduling.name`` or ``scheduling/name.py``."""
    text = ARCHITECTURE.read_text()
    if path.parent.name == "scheduling":
        return re.search(rf"scheduling[./]{path.stem}\b", text) is not None
    return f"`{path.name}`" in text or f"scheduler/{path.name}" in text


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for p in [
            *(ROOT / "controllers" / "scheduler").glob("*.py"),
            *(ROOT / "scheduling").glob("*.py"),
        ]
        if p.name != "__init__.py"
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_the_map_names_every_module_of_the_scheduler(path: Path) -> None:
    """docs/architecture.md is where a newcomer finds a module's place: a new module of the
    scheduler or of the scheduling core goes into it."""
    assert _named_in_the_map(path), f"docs/architecture.md does not name {path.relative_to(ROOT)}"


def test_the_map_check_sees_a_module_left_out(tmp_path: Path) -> None:
    assert not _named_in_the_map(tmp_path / "scheduling" / "nowhere.py")
    assert not _named_in_the_map(tmp_path / "scheduler" / "nowhere.py")
    assert _named_in_the_map(ROOT / "scheduling" / "group_cycle.py")


def test_the_recipe_for_a_step_of_a_group_cycle_names_where_it_goes() -> None:
    recipe = _recipe("A step of a pod group's cycle")
    modules = re.findall(r"`((?:operators|tests)/[\w/]+\.py)`", recipe)
    assert modules[0] == "operators/scheduling/group_cycle.py"
    sources = "\n".join((ROOT.parent / m).read_text() for m in modules)
    names = set(re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", recipe))
    assert {"place", "run", "Host", "Cycle", "GROUP_STEPS"} <= names
    missing = [n for n in names if not re.search(rf"\b(def|class) {n}\b|^{n}\b", sources, re.M)]
    assert missing == []
