"""The Hugging Face Trainer recipe of docs/training/libraries.md (examples/hf_trainer.py) on the
checked-in example's device, compared with the same run on the CPU.

transformers and accelerate come from requirements-dev.txt; the model is a tiny GPT-2 built from a
config and the data are synthetic, so nothing is downloaded."""

import json
import os
import shutil
import subprocess

import pytest

import project

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = [pytest.mark.slow, pytest.mark.backend("foo")]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, builds):
    """run(*args, **env) runs examples/hf_trainer.py with the example's build; returns (exit code,
    stdout + stderr, losses or None)."""
    copy = tmp_path_factory.mktemp("hf") / "foo"
    shutil.copytree(project.EXAMPLE, copy, ignore=shutil.ignore_patterns(*project.BUILD_ARTIFACTS, "*.so"))
    python = builds.python(copy, "example_generated")
    script = project.EXAMPLE / "examples" / "hf_trainer.py"
    base = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}

    runs = {}  # the CPU run serves two tests

    def run(*args: str, **env: str):
        key = (args, tuple(sorted(env.items())))
        if key not in runs:
            runs[key] = launch(*args, **env)
        return runs[key]

    def launch(*args: str, **env: str):
        result = subprocess.run(
            [str(python), str(script), *args],
            capture_output=True,
            text=True,
            env={**base, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **env},
            timeout=600,
        )
        output = result.stdout + result.stderr
        lines = [line for line in result.stdout.splitlines() if line.startswith("losses ")]
        return result.returncode, output, json.loads(lines[-1][len("losses ") :]) if lines else None

    return run


def test_trainer_on_the_device_matches_the_cpu(recipe):
    code, output, on_cpu = recipe("--cpu")
    assert code == 0 and "trained on cpu" in output, output
    code, output, on_device = recipe(ACCELERATE_TORCH_DEVICE="foo")
    assert code == 0 and "trained on foo:0" in output, output
    assert len(on_device) == len(on_cpu) == 6
    for step, (device_loss, cpu_loss) in enumerate(zip(on_device, on_cpu, strict=True)):
        assert abs(device_loss - cpu_loss) < 1e-4, (step, on_device, on_cpu)
    assert on_device[-1] < on_device[0]  # it learns


def test_bf16_through_accelerate_on_the_device(recipe):
    """TrainingArguments(bf16=True) is refused (transformers' is_torch_bf16_gpu_available lists vendors);
    ACCELERATE_MIXED_PRECISION=bf16 reaches accelerate, which autocasts on the device."""
    _, _, on_cpu = recipe("--cpu")
    code, output, in_bf16 = recipe(ACCELERATE_TORCH_DEVICE="foo", ACCELERATE_MIXED_PRECISION="bf16")
    assert code == 0 and "trained on foo:0, mixed precision: bf16" in output, output
    for device_loss, cpu_loss in zip(in_bf16, on_cpu, strict=True):
        assert abs(device_loss - cpu_loss) < 2e-3, (in_bf16, on_cpu)


def test_without_the_variable_transformers_and_accelerate_disagree(recipe):
    """What the page tells users to avoid: accelerate finds the device through torch.accelerator and
    moves the model there, TrainingArguments keeps the CPU, and the first step fails. If a release
    of transformers fixes it, this test fails: update docs/training/libraries.md."""
    code, output, _ = recipe()
    expected = "Calculated loss must be on the original device: cpu but device in use is foo:0"
    assert code != 0 and expected in output, output
