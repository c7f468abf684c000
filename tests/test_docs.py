"""The documentation site builds in strict mode (no broken link or anchor, no page missing from the
nav), covers what users need, and stays true to the template: every question is documented, and
every generated path and identifier a page names (runtime functions, torch.<name>.* attributes,
environment variables, tests, ...) exists in the example."""

import ast
import functools
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

import checks
import facts
import project
import render_diagrams
from conftest import ROOT

DOCS = ROOT / "docs"
INTEGRATION_POINTS = [
    "runtime",
    "errors",
    "devices",
    "allocator",
    "device-guard",
    "hooks",
    "operator-library",
    "factories-views-resize",
    "copies",
    "native-kernels",
    "cpu-fallback",
    "shallow-copy",
    "backend-meta",
    "sparse",
    "python-package",
    "autoload",
    "distributed",
    "compile",
    "profiler",
    "memory-debugging",
    "compat",
    "benchmarks",
]
REQUIRED = [
    "index.md",
    "getting-started.md",
    "questions.md",
    "architecture.md",
    "porting.md",
    "troubleshooting.md",
    "updating.md",
    *(f"integration/{name}.md" for name in INTEGRATION_POINTS),
]


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml uses !!python/name tags; the nav does not."""


_IgnoreTags.add_multi_constructor("", lambda loader, suffix, node: None)


def nav_pages() -> list[str]:
    def walk(items):
        for item in items:
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict):
                for value in item.values():
                    yield from walk(value) if isinstance(value, list) else [value]

    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_IgnoreTags)
    return list(walk(config["nav"]))


def test_site_builds_in_strict_mode(tmp_path):
    result = checks.build_docs(tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "integration" / "runtime" / "index.html").exists()


@pytest.mark.parametrize("page", REQUIRED)
def test_required_page_is_in_the_nav(page):
    assert (DOCS / page).is_file()
    assert page in nav_pages()


def test_architecture_shows_its_diagram_as_an_up_to_date_svg():
    """Diagrams are SVG files rendered from their Mermaid sources (scripts/render_diagrams.py), shown
    with <img>: no ```mermaid block, which a script from a CDN would draw at view time."""
    assert "(diagrams/architecture.svg)" in (DOCS / "architecture.md").read_text()
    assert (DOCS / "diagrams" / "architecture.mmd").is_file()
    assert not render_diagrams.stale(), "a diagram's source changed: run python scripts/render_diagrams.py"
    for svg in DOCS.rglob("*.svg"):
        root = ElementTree.parse(svg).getroot()  # an image must be well-formed XML to be shown at all
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("width") and root.get("height"), svg
        assert not list(root.iter("{http://www.w3.org/2000/svg}foreignObject")), (
            f"{svg}: HTML labels do not show in <img>"
        )
    fenced = [str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md") if "```mermaid" in page.read_text()]
    assert not fenced, f"render these diagrams to SVG instead of ```mermaid blocks: {fenced}"


def test_every_error_a_user_can_hit_has_its_message_fix_and_test():
    """The errors table of docs/integration/errors.md (issue 14) has the errors users meet, each row
    with a message, a fix and at least one test; test_identifiers_named_in_the_docs_exist checks that
    those tests exist."""
    page = (DOCS / "integration" / "errors.md").read_text()
    section = page.split("## Every error a user can hit", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")][1:]
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    assert all(len(row) == 4 and all(row) for row in cells), "each row: error | message | fix | test"
    untested = [row[0] for row in cells if not re.search(r"`test_\w+`", row[3])]
    assert not untested, f"rows without a test: {untested}"
    errors = " ".join(row[0].lower() for row in cells)
    expected = ["device index", "out of memory", "fork", "kernel failure", "different devices", "rename", "strict"]
    expected += [f"injected {kind}" for kind in ("allocation", "copy", "kernel", "event")]
    missing = [name for name in expected if name not in errors]
    assert not missing, f"the errors table has no row for {missing}"


def test_every_question_is_documented():
    questions = yaml.safe_load((ROOT / "copier.yml").read_text().replace("!include", "#"))
    asked = [name for name, spec in questions.items() if not name.startswith("_") and spec.get("when") is not False]
    # With the rows it includes (the features': docs/snippets/features.md, from copier/features.yml).
    table = re.sub(
        r'^--8<-- "([^"]+)"$',
        lambda m: (ROOT / m[1].split(":")[0]).read_text(),
        (DOCS / "questions.md").read_text(),
        flags=re.M,
    )
    missing = [name for name in asked if f"| `{name}` |" not in table]
    assert not missing, f"docs/questions.md has no row for {missing}"


def test_generated_paths_named_in_the_docs_exist():
    """Paths such as `csrc/core/GuardImpl.cpp` or `torch_<name>/device.py`, in backticks, code blocks
    or quoted settings, must exist in example_generated/ (for foo) or in this repository, so that pages
    follow files that move."""
    pattern = re.compile(
        r"(?<![\w/.-])((?:csrc|tests|benchmarks|torch_<name>|_torch_<name>)/[\w<>/.{},-]*\.(?:h|cpp|py))\b"
    )
    missing = []
    for page in DOCS.rglob("*.md"):
        for path in pattern.findall(page.read_text()):
            path = path.replace("<name>", "foo")
            if "{" in path:
                continue
            if not (project.EXAMPLE / path).exists() and not (ROOT / path).exists():  # or the template's own
                missing.append(f"{page.relative_to(DOCS)}: {path}")
    exempt = {f"{page}: {name}" for page, names in NAMED_BUT_NOT_GENERATED.items() for name in names}
    missing = [m for m in missing if m not in exempt and m.split(": ", 1)[1] not in in_place_of_a_feature()]
    assert not missing, "\n".join(missing)


# --- Identifiers the docs name must exist in the example ------------------------------------------------
# The docs write names for the device `foo` (the example), `npu`, `my_accel` or `<name>`; each is read as
# the same name for `foo` (with copier.yml's own derivations), then looked up in what example_generated/
# defines, read statically, without a build: runtime functions and types in the C headers of the driver
# and the kernel library, C++ classes and source files in csrc/, attributes of torch.<name> in the
# package, custom operators in their schemas, environment variables in the sources, tests in tests/.
# Nothing here lists names: a renamed function or test fails each page that still names it.

DOC_NAMES = ("foo", "npu", "my_accel")

# Names a page uses on purpose although the example has none such, and why.
NAMED_BUT_NOT_GENERATED = {
    "getting-started.md": {
        "csrc/kernels/CMakeFiles/foo_kernels.dir/emulated/attention.cpp": "ninja's progress line names an object "
        "of the build directory",
    },
    "updating.md": {
        "tests/test_elementwise.py": "the example migration renames tests/test_ops.py to it",
        "test_elementwise": "the same",
    },
    # <Feature>Bindings.cpp: the pattern of the features' binding files, not a file.
    "development.md": {"csrc/python/<Feature>Bindings.cpp": "a pattern", "Bindings.cpp": "the same"},
    "build-speed.md": {"Bindings.cpp": "the pattern <Feature>Bindings.cpp"},
    "integration/compile.md": {
        "FOO_OPENCL_DEVICES": "csrc/runtime/opencl/select.h (driver=opencl): the OpenCL path's measurements",
    },
    # The OpenCL driver's names: a render with driver=opencl has them, the example (emulated) does not.
    "opencl.md": {
        "fooOpenCLNoDeviceReason": "csrc/runtime/opencl/devices.cpp (driver=opencl)",
        "FOO_OPENCL_DEVICES": "csrc/runtime/opencl/select.h (driver=opencl)",
        "FOO_OPENCL_PROBE": "csrc/runtime/opencl/devices.cpp (driver=opencl)",
        "prelude.cpp": "csrc/kernels/opencl/prelude.cpp (driver=opencl)",
        "blas.cpp": "csrc/kernels/opencl/blas.cpp (driver=opencl, native_operators)",
        "FOO_OPENCL_FP64": "csrc/kernels/opencl/library.cpp (driver=opencl)",
        "FOO_OPENCL_GEMM": "csrc/kernels/opencl/blas.cpp (driver=opencl, native_operators)",
        "fooOpenCLSingleFpConfig": "csrc/runtime/opencl/devices.cpp (driver=opencl)",
        "FOO_OPENCL_FP32_CORRECTLY_ROUNDED": "csrc/runtime/opencl/select.h (driver=opencl)",
        "FOO_OPENCL_LIBRARY": "csrc/runtime/opencl/loader.cpp (driver=opencl)",
        "loader.cpp": "csrc/runtime/opencl/loader.cpp (driver=opencl)",
        "FOO_OPENCL_COMMAND_BUFFERS": "csrc/runtime/opencl/command_buffers.cpp (driver=opencl)",
        "command_buffers.cpp": "csrc/runtime/opencl/command_buffers.cpp (driver=opencl)",
    },
    "porting.md": {"FOO_OPENCL_DEVICES": "csrc/runtime/opencl/select.h (driver=opencl)"},
    "questions.md": {"FOO_OPENCL_DEVICES": "csrc/runtime/opencl/select.h (driver=opencl)"},
    "snippets/features.md": {"FOO_OPENCL_DEVICES": "csrc/runtime/opencl/select.h (driver=opencl)"},
}


@functools.cache
def in_place_of_a_feature() -> set[str]:
    """The paths, and their file names, that only renders without a feature have (the off_paths of
    copier/features.yml), and those of the answers of a choice other than the example's (the OpenCL
    driver's): any page may name them, though the example, with every feature, lacks them."""
    import features

    paths = {path for feature in checks.FEATURE_LIST for path in feature.off_paths}
    for choice in features.load_choices():
        paths |= {path for answer, named in choice.choice_paths.items() if answer != choice.default for path in named}
    # A feature's files inside such an answer's directory (csrc/kernels/opencl/blas.cpp).
    paths |= {
        path
        for feature in checks.FEATURE_LIST
        for path in feature.paths
        if any(Path(other) in Path(path).parents for other in paths)
    }
    # As the docs name them for foo: `{{ package_name }}/_inductor/opencl_scheduling.py` is torch_foo/...
    package = facts.derived_names("foo")["package_name"]
    paths |= {path.replace("{{ package_name }}", package) for path in paths}
    return paths | {Path(path).name for path in paths}


@functools.cache
def _aliases() -> list[tuple[re.Pattern, str]]:
    """(pattern, replacement) pairs that rewrite a page's names for any device to the names for foo."""
    foo = facts.derived_names("foo")
    forms = [facts.derived_names(name) for name in DOC_NAMES]
    forms.append(
        {
            "backend_name": "<name>",
            "package_name": "torch_<name>",
            "runtime_prefix": "<name>",
            "macro_prefix": "<NAME>",
            "class_prefix": "<Name>",
        }
    )
    rules = []
    for names in forms:
        n = {key: re.escape(value) for key, value in names.items()}
        rules += [
            (rf"(?<![\w<]){n['package_name']}\b", foo["package_name"]),
            (rf"\btorch\.{n['backend_name']}(?=\.)", f"torch.{foo['backend_name']}"),
            (rf"(?<![\w<]){n['runtime_prefix']}(?=[A-Z])", foo["runtime_prefix"]),
            (rf"(?<![\w<]){n['class_prefix']}(?=[A-Z][a-z])", foo["class_prefix"]),
            (rf"(?<![\w<]){n['macro_prefix']}_(?=[A-Z0-9])", f"{foo['macro_prefix']}_"),
        ]
    return [(re.compile(pattern), replacement) for pattern, replacement in rules]


def _tokens(paths) -> set[str]:
    return {token for path in paths for token in re.findall(r"\w+", path.read_text(errors="replace"))}


class Example:
    """What example_generated/ defines, found without building it."""

    def __init__(self, root: Path):
        self.package = root / facts.derived_names("foo")["package_name"]
        csrc = [p for p in root.glob("csrc/**/*") if p.suffix in (".h", ".cpp")]
        # The driver contract and the device operator library: the C APIs a port implements.
        self.runtime_api = _tokens([*root.glob("csrc/runtime/**/*.h"), *root.glob("csrc/kernels/**/*.h")])
        self.cpp = _tokens(csrc)
        sources = [p for p in root.rglob("*") if p.is_file() and p.name != "README.md" and "build" not in p.parts]
        self.sources = _tokens(sources)
        self.files = {p.name for p in sources}
        definitions = "".join(p.read_text() for p in csrc)
        self.bound = set(re.findall(r'\bm\.def\(\s*"(\w+)"', definitions))  # functions of the extension, _C
        self.operators = set(re.findall(r'\bm\.def\(\s*"(\w+)\(', definitions))  # schemas: torch.ops.<package>.*
        self.test_functions = {
            name for p in root.glob("tests/*.py") for name in re.findall(r"^\s*def (test_\w+)", p.read_text(), re.M)
        }

    def module(self, name: str) -> dict:
        """Top-level names of the package's module `name` ("" for __init__.py), each with its
        definition (a function or class node), "module:<name>" for a submodule, or "?" for a value."""
        path = self.package / (f"{name}.py" if name else "__init__.py")
        if not path.exists():
            return {}
        found: dict = {}

        def visit(body):
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    found[node.name] = node
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        if isinstance(target, ast.Name):
                            found[target.id] = "?"
                elif isinstance(node, ast.ImportFrom) and node.level == 1:
                    for alias in node.names:
                        if node.module is None:  # from . import x
                            found[alias.asname or alias.name] = f"module:{alias.name}"
                        elif alias.name == "*":
                            found.update(self.module(node.module))
                        else:
                            found[alias.asname or alias.name] = self.module(node.module).get(alias.name, "?")
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        found[alias.asname or alias.name.split(".")[0]] = "?"
                elif isinstance(node, (ast.If, ast.Try)):
                    visit(node.body)
                    visit(node.orelse)

        visit(ast.parse(path.read_text()).body)
        getattr_ = found.get("__getattr__")
        if isinstance(getattr_, ast.FunctionDef):  # a module __getattr__ that answers fixed names
            for node in ast.walk(getattr_):
                if isinstance(node, ast.Compare) and isinstance(node.comparators[0], ast.Constant):
                    found[str(node.comparators[0].value)] = "?"
        return found

    def resolve(self, dotted: str) -> str | None:
        """Why torch.foo.<dotted> does not exist, or None when it does. A trailing * matches a prefix."""
        scope = self.module("")
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            prefix = part.endswith("*")
            part = part.rstrip("*")
            if i == 0 and not prefix and part not in scope and (self.package / f"{part}.py").exists():
                scope = {**scope, part: f"module:{part}"}  # a submodule, an attribute once __init__ imports it
            matches = [name for name in scope if (name.startswith(part) if prefix else name == part)]
            if not matches:
                return f"no {'.'.join(parts[: i + 1])}{'*' if prefix else ''}"
            value = scope[matches[0]]
            if i == len(parts) - 1:
                return None
            if value == "module:_C":  # the extension: what csrc/python binds
                rest = parts[i + 1]
                return None if rest in self.bound else f"the extension _C binds no {rest} (csrc/python/)"
            if isinstance(value, str) and value.startswith("module:"):
                scope = self.module(value.removeprefix("module:"))
            elif isinstance(value, ast.ClassDef):
                if any(not isinstance(base, ast.Name) or base.id not in scope for base in value.bases):
                    return None  # derives from a torch class (torch.Stream, ...), whose attributes it has
                scope = {n.name: n for n in value.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            else:
                return None  # a value: its attributes are not checked
        return None


@functools.cache
def example() -> Example:
    return Example(project.EXAMPLE)


@functools.cache
def own_tests() -> set[str]:
    """Tests of this repository (development.md names some)."""
    return {n for p in (ROOT / "tests").glob("*.py") for n in re.findall(r"^\s*def (test_\w+)", p.read_text(), re.M)}


def page_text(page: Path) -> str:
    """The page with its names rewritten to foo's, without snippet lines (the strict build checks them)."""
    text = "\n".join(line for line in page.read_text().splitlines() if "--8<--" not in line)
    for pattern, replacement in _aliases():
        text = pattern.sub(replacement, text)
    return text


def unknown_identifiers(page: Path) -> list[str]:
    """What `page` names that the example does not have, one line each."""
    ex = example()
    foo = facts.derived_names("foo")
    rp, cp, mp, pkg, name = (
        foo[k] for k in ("runtime_prefix", "class_prefix", "macro_prefix", "package_name", "backend_name")
    )
    text = page_text(page)
    found = lambda pattern: sorted(set(re.findall(pattern, text)))  # noqa: E731
    problems = [
        f"runtime function or type {x} is in no header of csrc/runtime/ or csrc/kernels/"
        for x in found(rf"\b{rp}[A-Z]\w*")
        if x not in ex.runtime_api
    ]
    problems += [f"C++ name {x} is not in csrc/" for x in found(rf"\b{cp}[A-Z][a-z]\w*") if x not in ex.cpp]
    problems += [
        f"environment variable or macro {x} appears in no generated source"
        for x in found(rf"\b{mp}_[A-Z0-9_]*[A-Z0-9]\b")
        if x not in ex.sources
    ]
    problems += [
        f"torch.{name}.{x}: {why}"
        for x in found(rf"\btorch\.{name}\.([A-Za-z_][\w.]*\w\*?|\w+_\*)")
        if (why := ex.resolve(x))
    ]
    problems += [
        f"operator torch.ops.{pkg}.{x} has no schema in csrc/"
        for x in found(rf"\btorch\.ops\.{pkg}\.(\w+)")
        if x not in ex.operators
    ]
    problems += [
        f"file {x} is not in example_generated/"
        for x in found(r"\b(\w+\.cpp|test_\w+\.py)\b")
        if x not in ex.files and not (ROOT / "tests" / x).exists()
    ]
    # test_x, and test_x_<op>_... for the tests that a parametrised test_x generates
    problems += [
        f"test {x} is defined in no tests/*.py"
        for x in found(r"(?<![\w/.])(test_\w+?)_?(?:\b(?!\.\w)|(?=<))")
        if x not in ex.test_functions and x not in own_tests()
    ]
    exempt = NAMED_BUT_NOT_GENERATED.get(page.relative_to(DOCS).as_posix() if page.is_relative_to(DOCS) else "", {})
    exempt = {*exempt, *in_place_of_a_feature()}
    return [problem for problem in problems if not any(re.search(rf"\b{re.escape(x)}\b", problem) for x in exempt)]


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_identifiers_named_in_the_docs_exist(page):
    """Runtime functions, C++ names and files, torch.<name>.* attributes, custom operators,
    environment variables and tests that a page names exist in example_generated/ (tests: or here)."""
    problems = unknown_identifiers(DOCS / page)
    assert not problems, f"docs/{page} names what example_generated/ does not have:\n" + "\n".join(problems)


def test_the_identifier_check_finds_what_does_not_exist(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Existing: `npuMalloc`, `myAccelStreamCreate`, `torch.npu.synchronize()`, `torch.<name>.memory_*`,\n"
        "`torch.foo.Stream`, `torch.npu._C._fallback_ops`, `torch.ops.torch_npu.bias_gelu`, `NPU_STRICT_MEMORY`,\n"
        "`tests/test_streams.py`, `Copy.cpp`, `test_compare_cpu_<op>`, `NpuDeviceAllocator`, `torch.npu._utils`.\n"
        "Stale: `npuFrobnicate`, `torch.npu.frobnicate()`, `torch.npu._C._frobnicate`, `torch.ops.torch_npu.frob`,\n"
        "`<NAME>_FROBNICATE`, `Frob.cpp`, `test_frobnicate.py`, `test_frobnicate_twice`, `NpuFrobnicator`.\n"
    )
    problems = unknown_identifiers(page)
    stale = ["fooFrobnicate", "torch.foo.frobnicate", "_frobnicate", "torch_foo.frob ", "FOO_FROBNICATE", "Frob.cpp"]
    stale += ["test_frobnicate.py", "test_frobnicate_twice", "FooFrobnicator"]
    for name in stale:
        assert [problem for problem in problems if name in problem], f"{name} was not reported: {problems}"
    assert len(problems) == len(stale), problems


def test_guide_and_generated_readme_say_how_long_the_cold_build_takes_and_how_to_watch_it(render):
    """A newcomer's first build is a silent minute or more: docs/getting-started.md and the generated
    README give the same measured time and the same verbose command."""
    guide = " ".join((DOCS / "getting-started.md").read_text().split())
    readme = " ".join((render("foo") / "README.md").read_text().split())
    time = re.compile(
        r"about [\w ]+ on two (?:otherwise idle )?cores \((?:\d+( to \d+)? s wall with 2 jobs, )?measured with"
    )
    stated = [time.search(text) for text in (guide, readme)]
    assert all(stated) and stated[0].group() == stated[1].group(), stated
    for text in (guide, readme):
        assert "pip install -v --no-build-isolation -e ." in text and "scripts/measure_build.py" in text
