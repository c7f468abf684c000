"""copier/reserved_names.yml must list every name the installed torch already uses, in the part of
the installed release (the part of each other supported release is checked in an environment of it:
the CI matrix builds every release, and scripts/update_reserved_names.py --check tells)."""

import sys

import yaml

import facts
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import update_reserved_names  # noqa: E402


def test_reserved_names_cover_the_installed_torch():
    current = update_reserved_names.collect()
    release = current["torch_version"]
    parts = {
        str(part["torch_version"]): part
        for part in yaml.safe_load_all((ROOT / "copier" / "reserved_names.yml").read_text())
    }
    assert release in parts, (
        f"torch {release} is installed; copier/reserved_names.yml has parts for {sorted(parts)} only "
        f"(copier/torch.yml supports {facts.torch_releases()})"
    )
    for category, names in current.items():
        if isinstance(names, list):
            missing = sorted(set(names) - set(parts[release][category]))
            assert not missing, (
                f"torch {release} uses {missing[:10]} ({category}) but its part of copier/reserved_names.yml "
                "does not list them: run python scripts/update_reserved_names.py"
            )
