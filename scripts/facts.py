"""The facts the template states once, read the way copier reads them, for scripts and tests.

- the torch releases the template supports, and the default one: ``copier/torch.yml``
  (copier.yml offers them as the answers of ``torch_version``; the Makefile reads them too);
- the computed values of ``copier.yml`` (``max_device_count``, the names derived from a device name).

Everything else that states one of these facts either renders it from copier.yml, includes it (the
docs include generated files with snippets), or is compared with it by ``tests/test_facts.py``.

    python scripts/facts.py     print the facts
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


class _CopierLoader(yaml.SafeLoader):
    """copier.yml's YAML: ``!include PATH`` reads PATH (relative to the repository) as a list of
    its documents, as copier does."""


def _include(loader: yaml.SafeLoader, node: yaml.Node) -> list:
    path = ROOT / loader.construct_scalar(node)
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_CopierLoader) if doc is not None]


_CopierLoader.add_constructor("!include", _include)


@functools.cache
def copier_config() -> dict:
    """copier.yml with its includes read, as one mapping of settings and questions."""
    return yaml.load((ROOT / "copier.yml").read_text(), Loader=_CopierLoader)


def torch_releases() -> list[str]:
    """The torch releases the template supports, newest first, e.g. ["2.15.0", "2.14.1"]."""
    return [str(release) for release in copier_config()["torch"]["default"][0]["releases"]]


def torch_version() -> str:
    """The default answer of torch_version: the release the example pins and `make` installs."""
    return str(copier_config()["torch"]["default"][0]["default"])


def retired_torch_releases() -> dict[str, str]:
    """The releases that left the list -> the last template release (git tag) that supports each."""
    retired = copier_config()["torch"]["default"][0].get("retired") or {}
    return {str(release): str(tag) for release, tag in retired.items()}


def other_torch_releases() -> list[str]:
    """The supported releases other than the default, newest first."""
    return [release for release in torch_releases() if release != torch_version()]


def torch_spec(release: str | None = None) -> str:
    """The pip requirement that installs `release` (default: the default release)."""
    return f"torch=={release or torch_version()}"


def max_device_count() -> int:
    """How many devices the emulated runtime supports at most."""
    return int(copier_config()["max_device_count"]["default"])


def derived_names(backend_name: str) -> dict[str, str]:
    """The names copier.yml computes from a device name (package_name, runtime_prefix, ...),
    rendered from copier.yml's own expressions."""
    import jinja2

    env = jinja2.Environment()
    config = copier_config()
    names = {"backend_name": backend_name}
    context = {"reserved": config["reserved"]["default"]}  # names torch uses (ccl_name avoids them)
    for key, spec in config.items():
        if isinstance(spec, dict) and spec.get("when") is False and spec.get("type") == "str":
            default = spec.get("default")
            if isinstance(default, str) and "backend_name" in default:
                names[key] = env.from_string(default).render(**context, **names)
    return names


if __name__ == "__main__":
    print(f"torch: {torch_spec()} (supported: {', '.join(torch_releases())})")
    print(f"max_device_count: {max_device_count()}")
    for key, value in derived_names("my_accel").items():
        print(f"{key} (for my_accel): {value}")
