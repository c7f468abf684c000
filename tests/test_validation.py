"""Every kind of invalid backend name is rejected with a reason, and nothing is written."""

import re

import pytest
from copier import run_copy

import facts
from conftest import ROOT

MAX_DEVICES = facts.max_device_count()

REJECTED = {
    # name: words the message must contain
    "": "empty",
    "npu2": "not a valid device name",
    "my-npu": "not a valid device name",
    "my npu": "not a valid device name",
    "Npu": "not a valid device name",
    "_npu": "not a valid device name",
    "npu_": "not a valid device name",
    "my__npu": "not a valid device name",
    "npu.x": "not a valid device name",
    "a" * 33: "keep it to 32 or fewer",
    "cuda": "device type torch already has",
    "cpu": "device type torch already has",
    "meta": "device type torch already has",
    "privateuseone": "device type torch already has",
    "vulkan": "device type torch already has",
    "xla": "device type torch already has",
    "class": "Python keyword",
    "lambda": "Python keyword",
    "match": "Python keyword",
    "namespace": "C++ keyword",
    "template": "C++ keyword",
    "std": "namespace or macro prefix",
    "c10": "not a valid device name",
    "aten": "namespace or macro prefix",
    "fft": "torch.fft already exists",
    "linalg": "torch.linalg already exists",
    "nn": "torch.nn already exists",
    "accelerator": "torch.accelerator already exists",
    "grad": "clashes with an existing attribute of Tensor",
    "leaf": "clashes with an existing attribute of Tensor",
    "eager": "torch.compile backend torch already has",
    "inductor": "torch.compile backend torch already has",
    "cuda_graph": None,  # allowed: not used by torch
}


@pytest.mark.parametrize("name", [n for n, why in REJECTED.items() if why], ids=repr)
def test_invalid_names_are_rejected_and_nothing_is_written(tmp_path, name):
    dest = tmp_path / "out"
    with pytest.raises(ValueError) as error:
        run_copy(
            str(ROOT), str(dest), data={"backend_name": name}, defaults=True, unsafe=True, quiet=True, vcs_ref="HEAD"
        )
    assert REJECTED[name] in str(error.value)
    assert not dest.exists() or not any(dest.iterdir())


@pytest.mark.parametrize("name", ["foo", "npu", "my_accel", "tpu_v", "x", "a" * 32, "cuda_graph"])
def test_valid_names_are_accepted(render, name):
    assert (render(name) / f"torch_{name}" / "__init__.py").exists()


@pytest.mark.parametrize(
    "answers,message",
    [
        ({"author_email": "not-an-email"}, "is not an e-mail address"),
        ({"version": "1.0"}, "is not a version"),
        ({"device_count": 0}, f"1 to {MAX_DEVICES} devices"),
        ({"device_count": MAX_DEVICES + 1}, f"1 to {MAX_DEVICES} devices"),
        ({"license": "GPL"}, "license"),
        ({"torch_version": "2.0.0"}, "Invalid choice for 'torch_version'"),
        *(
            ({"torch_version": release}, rf"torch {re.escape(release)} left .* {re.escape(tag)} is the last")
            for release, tag in facts.retired_torch_releases().items()
        ),
    ],
)
def test_other_answers_are_validated(tmp_path, answers, message):
    dest = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        run_copy(
            str(ROOT),
            str(dest),
            data={"backend_name": "npu", **answers},
            defaults=True,
            unsafe=True,
            quiet=True,
            vcs_ref="HEAD",
        )
    assert not dest.exists() or not any(dest.iterdir())


def names_taken_in_one_release_only() -> list[tuple[str, str]]:
    """(name, release) for valid device names that torch has as an attribute in one supported release
    and not in another (copier/reserved_names.yml), each release's first such name."""
    parts = facts.copier_config()["reserved"]["default"]
    found = {}
    for part in parts:
        others = set().union(*(set(other["torch_attributes"]) for other in parts if other is not part))
        for name in sorted(set(part["torch_attributes"]) - others):
            if re.fullmatch(r"[a-z]+(_[a-z]+)*", name) and name not in found.values():
                found.setdefault(str(part["torch_version"]), name)
    return [(name, release) for release, name in found.items()]


@pytest.mark.parametrize(
    "name,release",
    names_taken_in_one_release_only()
    or [pytest.param("", "", marks=pytest.mark.skip(reason="the supported releases have the same attributes"))],
)
@pytest.mark.parametrize("chosen", facts.torch_releases())
def test_a_name_taken_in_another_supported_release_is_refused_naming_that_release(tmp_path, name, release, chosen):
    # The project's code must work on every supported release, whichever it is pinned to.
    dest = tmp_path / "out"
    with pytest.raises(ValueError, match=rf"torch\.{name} already exists \(torch {re.escape(release)}\)"):
        run_copy(
            str(ROOT),
            str(dest),
            data={"backend_name": name, "torch_version": chosen},
            defaults=True,
            unsafe=True,
            quiet=True,
            vcs_ref="HEAD",
        )
    assert not dest.exists() or not any(dest.iterdir())
