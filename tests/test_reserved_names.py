"""copier/reserved_names.yml must list every name the installed torch already uses."""

import sys

import yaml

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import update_reserved_names  # noqa: E402


def test_reserved_names_cover_the_installed_torch():
    listed = yaml.safe_load((ROOT / "copier" / "reserved_names.yml").read_text())
    current = update_reserved_names.collect()
    for category, names in current.items():
        if isinstance(names, list):
            missing = sorted(set(names) - set(listed[category]))
            assert not missing, (
                f"torch {current['torch_version']} uses {missing[:10]} ({category}) but copier/reserved_names.yml "
                "does not list them: run python scripts/update_reserved_names.py"
            )
