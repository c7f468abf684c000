"""Device strings, the device module torch.foo, torch.accelerator, and errors for bad input."""

import importlib
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import torch
from numerics import DRIVER, EXPECTED_DEVICE_COUNT

import torch_foo


def test_device_strings_parse():
    assert torch.device("foo").type == "foo"
    assert torch.device("foo").index is None
    assert torch.device("foo:1").index == 1
    assert torch.device("foo", 1) == torch.device("foo:1")
    assert str(torch.device("foo:0")) == "foo:0"


def test_device_module_is_registered():
    assert torch.foo is torch_foo
    assert torch.foo.is_available()
    assert torch.foo.device_count() == (EXPECTED_DEVICE_COUNT or torch.foo.device_count())
    assert torch.foo.device_count() >= 1
    assert torch._C._get_privateuse1_backend_name() == "foo"


def test_tensor_lands_on_requested_device(device):
    x = torch.ones(2, device=device)
    assert x.device == device
    assert x.is_foo
    torch.testing.assert_close((x + 1).cpu(), torch.full((2,), 2.0))


@pytest.mark.two_devices
def test_set_device_and_current_device():
    torch.foo.set_device(1)
    assert torch.foo.current_device() == 1
    assert torch.ones(1, device="foo").device == torch.device("foo:1")
    torch.foo.set_device("foo:0")
    assert torch.foo.current_device() == 0


@pytest.mark.two_devices
def test_device_context_manager_restores():
    with torch.foo.device(1):
        assert torch.foo.current_device() == 1
        assert torch.empty(1, device="foo").device.index == 1
        with torch.foo.device("foo:0"):
            assert torch.foo.current_device() == 0
        assert torch.foo.current_device() == 1
    assert torch.foo.current_device() == 0


@pytest.mark.two_devices
def test_device_of_tensor():
    x = torch.zeros(1, device="foo:1")
    with torch.foo.device_of(x):
        assert torch.foo.current_device() == 1
    with torch.foo.device_of(torch.zeros(1)):  # CPU tensor: no change
        assert torch.foo.current_device() == 0


@pytest.mark.two_devices
def test_current_device_is_per_thread():
    seen = {}

    def worker():
        torch.foo.set_device(1)
        seen["worker"] = torch.foo.current_device()
        seen["tensor"] = torch.ones(1, device="foo").device.index

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"worker": 1, "tensor": 1}
    assert torch.foo.current_device() == 0


def test_synchronize_and_properties(device):
    torch.foo.synchronize(device)
    torch.foo.synchronize()
    props = torch.foo.get_device_properties(device)
    assert props.total_memory > 0
    name = torch.foo.get_device_name(device)
    assert name and ("foo" in name or DRIVER != "emulated")  # a real device has its vendor's name
    assert torch.foo.get_device_capability(device) == (props.major, props.minor)


NO_DEVICE = """
    import warnings, torch, torch_foo
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        print("available:", torch.foo.is_available(), torch.foo.device_count())
    print("warned:", [str(warning.message) for warning in caught])
    print("reason:", torch.foo.no_device_reason())
    try:
        torch.ones(1, device="foo")
    except RuntimeError as error:
        print("error:", error)
"""


def test_without_devices_is_available_is_false_and_says_why(run_python):
    result = run_python(NO_DEVICE, FOO_DEVICE_COUNT="0")
    assert result.returncode == 0, result.stderr
    assert "available: False 0" in result.stdout
    assert "reason: FOO_DEVICE_COUNT=0" in result.stdout
    assert "foo is not available: FOO_DEVICE_COUNT=0" in result.stdout  # warned
    assert "error: No foo devices are available" in result.stdout


@pytest.mark.skipif(DRIVER != "opencl", reason="the OpenCL ICD loader's setting")
def test_without_an_opencl_platform_is_available_is_false_and_names_the_package(run_python, tmp_path):
    result = run_python(NO_DEVICE, OCL_ICD_VENDORS=str(tmp_path))  # a directory of no ICD
    assert result.returncode == 0, result.stderr
    assert "available: False 0" in result.stdout
    assert "reason: no OpenCL platform" in result.stdout and "pocl-opencl-icd" in result.stdout
    assert "error: No foo devices are available" in result.stdout


@pytest.mark.skipif(DRIVER != "opencl", reason="the OpenCL driver loads the ICD loader at run time")
def test_without_the_opencl_icd_loader_is_available_is_false_and_names_the_package(run_python, tmp_path):
    # As on a machine without libOpenCL.so.1: the runtime and the probe load it by this name.
    missing = tmp_path / "libOpenCL.so.1"
    result = run_python(NO_DEVICE, FOO_OPENCL_LIBRARY=str(missing))
    assert result.returncode == 0, result.stderr
    assert "available: False 0" in result.stdout
    assert "reason: no OpenCL ICD loader" in result.stdout and "ocl-icd-libopencl1" in result.stdout
    assert "error: No foo devices are available" in result.stdout


@pytest.mark.skipif(DRIVER != "opencl", reason="the OpenCL driver loads the ICD loader at run time")
def test_the_module_and_the_probe_do_not_link_the_opencl_icd_loader():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("needs readelf (binutils)")
    package = Path(torch_foo.__file__).parent
    binaries = [Path(torch_foo._C.__file__), package / "foo_opencl_probe"]
    for binary in binaries:
        assert binary.exists(), binary
        dynamic = subprocess.run([readelf, "-d", str(binary)], capture_output=True, text=True, check=True).stdout
        needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
        assert needed, dynamic  # the listing was read
        assert not any("libOpenCL" in line for line in needed), (binary, needed)


def test_is_initialized_after_use():
    torch.ones(1, device="foo")
    assert torch.foo.is_initialized()


def test_init_initialises_explicitly_and_once(run_python):
    code = """
        import torch, torch_foo
        print("before:", torch.foo.is_initialized())
        torch.foo.init()
        torch.foo.init()  # does nothing the second time
        print("after:", torch.foo.is_initialized(), torch.foo._initialized)
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "before: False" in result.stdout and "after: True True" in result.stdout


def test_torch_calls_lazy_init_before_the_first_device_tensor(run_python):
    code = """
        import torch, torch_foo
        calls = []
        original = torch.foo._lazy_init
        torch.foo._lazy_init = lambda: (calls.append(1), original())
        torch.ones(2, device="foo")
        torch.zeros(2, device="foo")
        print("calls:", len(calls), torch.foo.is_initialized())
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "calls: 1 True" in result.stdout


@pytest.mark.two_devices
def test_accelerator_api_sees_the_backend():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("foo")
    assert torch.accelerator.device_count() == torch.foo.device_count()
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.foo.current_device() == 1
    torch.accelerator.set_device_index(0)
    torch.accelerator.synchronize()


@pytest.mark.parametrize("index", [torch.foo.device_count(), torch.foo.device_count() + 5])
def test_bad_device_index_raises(index):
    with pytest.raises(RuntimeError, match=f"Invalid foo device index {index}"):
        torch.ones(2, device=f"foo:{index}")
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.foo.set_device(index)
    with pytest.raises(RuntimeError, match="Invalid foo device index"):
        torch.zeros(2).to(f"foo:{index}")
    assert torch.foo.current_device() == 0


def test_out_of_range_indices_raise():
    for index in (-3, 1000, 2**40):
        with pytest.raises(RuntimeError, match=f"Invalid foo device index {index}"):
            torch.foo.set_device(index)
    with pytest.raises(RuntimeError, match="Invalid foo device index 1000"):
        torch.foo.synchronize(1000)


def test_wrong_types_raise():
    with pytest.raises(TypeError):
        torch.foo.set_device(1.5)
    with pytest.raises(ValueError, match="Expected a foo device"):
        torch.foo.set_device("cpu")


def test_rename_to_another_name_raises_and_backend_keeps_working():
    with pytest.raises(RuntimeError, match="has already been set"):
        torch.utils.rename_privateuse1_backend("other_device")
    torch.utils.rename_privateuse1_backend("foo")  # the same name again is allowed
    assert (torch.ones(1, device="foo") * 3).item() == 3


def test_initialisation_is_idempotent():
    reloaded = importlib.reload(torch_foo)
    torch_foo._register()
    assert torch.foo is reloaded
    assert torch.ones(1).foo().is_foo


CONFIGURATION = "; ".join(
    [
        "import torch, torch_foo",
        "print(torch.foo.device_count(), torch.foo.get_device_properties(0).total_memory)",
    ]
)
UNSET = {"FOO_DEVICE_COUNT": None, "FOO_DEVICE_MEMORY": None}


@pytest.fixture(scope="module")
def default_configuration(run_python) -> str:
    """What CONFIGURATION prints with no configuration variable set (one interpreter for the module)."""
    default = run_python(CONFIGURATION, **UNSET)
    assert default.returncode == 0, default.stderr
    return default.stdout


@pytest.mark.parametrize(
    "variable,value",
    [("FOO_DEVICE_COUNT", "two"), ("FOO_DEVICE_COUNT", "99"), ("FOO_DEVICE_MEMORY", "8 GB")],
)
@pytest.mark.emulated_driver("device count and memory size set by environment variables")
def test_a_bad_configuration_value_warns_and_keeps_the_default(run_python, default_configuration, variable, value):
    result = run_python(CONFIGURATION, **{**UNSET, variable: value})
    assert result.returncode == 0, result.stderr
    assert result.stdout == default_configuration, "the default stays"
    assert f"ignoring {variable}={value}" in result.stderr
