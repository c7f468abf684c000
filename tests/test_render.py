"""Rendering: several names, every file rendered, names derived consistently, Python that compiles."""

import py_compile
import re

import pytest
import yaml

import facts
from conftest import ROOT

NAMES = ["foo", "npu", "my_accel", "tpu_v"]


@pytest.mark.parametrize("name", NAMES)
def test_render_leaves_nothing_unrendered(render, name):
    project = render(name)
    files = [p for p in project.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".jinja"]
    for path in files:
        text = path.read_text()
        # `${{ ... }}` is a GitHub Actions expression, not Jinja.
        assert not re.search(r"(?<!\$)\{\{|\{%|\{#", text), f"unrendered Jinja in {path.relative_to(project)}"
        assert "{{" not in str(path) and "package_name" not in str(path)


@pytest.mark.parametrize("name", NAMES)
def test_generated_python_compiles(render, name, tmp_path):
    project = render(name)
    sources = sorted(project.rglob("*.py"))
    assert len(sources) > 20, "the render lost its Python files"
    for path in sources:
        py_compile.compile(str(path), cfile=str(tmp_path / "compiled.pyc"), doraise=True)


def test_names_are_derived_from_the_backend_name(render):
    project = render("my_accel")
    assert (project / "torch_my_accel" / "__init__.py").exists()
    assert (project / "_torch_my_accel_autoload.py").exists()
    pyproject = (project / "pyproject.toml").read_text()
    assert 'name = "torch-my-accel"' in pyproject
    assert 'my_accel = "_torch_my_accel_autoload:load"' in pyproject
    runtime = (project / "csrc" / "runtime" / "runtime.h").read_text()
    assert "myAccelError_t myAccelMalloc(void** devPtr, size_t size);" in runtime
    assert "MY_ACCEL_DEVICE_COUNT" in (project / "csrc" / "runtime" / "emulated" / "config.cpp").read_text()
    assert "namespace torch_my_accel" in (project / "csrc" / "core" / "Device.h").read_text()
    assert "MyAccelDeviceAllocator" in (project / "csrc" / "core" / "DeviceAllocator.cpp").read_text()
    assert 'BACKEND_NAME = "my_accel"' in (project / "torch_my_accel" / "__init__.py").read_text()
    assert 'BACKEND = "my_accelccl"' in (project / "torch_my_accel" / "distributed.py").read_text()


def test_collective_backend_name_avoids_torchs_own(render):
    """Backend "x" would be called xccl, which is XPU's collective backend: it becomes x_ccl."""
    project = render("x")
    assert 'BACKEND = "x_ccl"' in (project / "torch_x" / "distributed.py").read_text()
    assert 'kName = "x_ccl"' in (project / "csrc" / "distributed" / "Arguments.h").read_text()


def test_answers_file_records_the_questions_only(render):
    project = render("npu", author_name="Ada", device_count=4)
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["backend_name"] == "npu"
    assert answers["author_name"] == "Ada"
    assert answers["device_count"] == 4
    assert "_src_path" in answers
    assert answers["torch_version"] == facts.torch_version(), "the release is a question, its answer is kept"
    computed_values = ("reserved", "torch", "torch_minor_version", "max_device_count")
    computed_names = ("package_name", "dist_name", "cpp_namespace", "class_prefix", "macro_prefix", "ccl_name")
    for computed in (*computed_values, *computed_names):
        assert computed not in answers
    assert "int device_count = 4;" in (project / "csrc" / "runtime" / "emulated" / "emulated.h").read_text()


@pytest.mark.parametrize("license_name", ["BSD-3-Clause", "Apache-2.0", "MIT", "Proprietary"])
def test_license_choice(render, license_name):
    project = render("npu", license=license_name)
    pyproject = (project / "pyproject.toml").read_text()
    expected = "LicenseRef-Proprietary" if license_name == "Proprietary" else license_name
    assert f'license = "{expected}"' in pyproject


def test_a_template_file_is_jinja_exactly_when_it_uses_an_answer():
    """docs/development.md's rule: `.jinja` files are rendered, so they must use Jinja; other files
    are copied as they are, so Jinja in them would reach users unrendered."""
    jinja = re.compile(r"(?<!\$)\{\{|\{%|\{#")
    needless, unrendered = [], []
    for path in sorted((ROOT / "template").rglob("*")):
        if path.is_file():
            uses = bool(jinja.search(path.read_text()))
            if path.suffix == ".jinja" and not uses:
                needless.append(str(path.relative_to(ROOT)))
            elif path.suffix != ".jinja" and uses:
                unrendered.append(str(path.relative_to(ROOT)))
    assert not needless, f"these use no answer: drop their .jinja suffix: {needless}"
    assert not unrendered, f"these use Jinja but are copied unrendered: add .jinja: {unrendered}"
