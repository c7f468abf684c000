"""Migrations for `copier update`, run in the user's project by the `_migrations` of copier.yml.

    python copier/migrate.py move OLD NEW
    python copier/migrate.py retire OLD WHERE
    python copier/migrate.py check-torch TORCH_YML [REQUESTED]

`move`: the template moved the file OLD to NEW. Copier's update re-applies the user's changes as a
diff against a render of the old template version, and that diff cannot follow a moved file: on its
own, copier deletes OLD (user edits included) and writes NEW fresh. Run after the update (copier's
default stage for migrations), this three-way merges the user's last committed OLD ("ours") into
the new template's NEW ("theirs"), with the old template's render of OLD as the common base.
Overlapping edits are left as conflict markers in NEW and reported, as copier does for other files.

`retire`: the template removed OLD and spread its content over other files (WHERE says which, for
the message). Copier deletes OLD; if the user had edited it, their version is kept as OLD.orig (not
built, not imported) with a message, so that no work is lost and they carry it over by hand.

`check-torch`: run before every update (stage "before", before copier reads the answers). A project
pinned to a torch release the new template no longer supports (`retired:` in TORCH_YML, the
template's copier/torch.yml) would otherwise be re-pinned silently: copier drops a previous answer
that is no longer a valid choice and takes the default. Unless the update names a supported release
(REQUESTED: the update's `--data torch_version=...`), this stops the update before it changes
anything and says how to stay (the last template release that supports the pinned torch) or move.

copier.yml entry (paths may use Jinja, e.g. "{{ package_name }}/old.py"):

    _migrations:
      - version: v0.3.0
        command: ["{{ _copier_python }}", "{{ _copier_conf.src_path }}/copier/migrate.py", "move", "OLD", "NEW"]

Copier runs it with the project as working directory and VERSION_FROM set to the version the
project is updated from; the project is a git repository with a clean tree (copier checks that).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ANSWERS_FILE = ".copier-answers.yml"


def committed(path: str) -> bytes | None:
    """The file as last committed in the project (before the update), or None."""
    result = subprocess.run(["git", "show", f"HEAD:./{path}"], capture_output=True)
    return result.stdout if result.returncode == 0 else None


def render_old_version(destination: Path) -> Path:
    """The old template version rendered with the project's previous answers."""
    import warnings

    import yaml
    from copier import run_copy

    answers = yaml.safe_load(committed(ANSWERS_FILE) or b"{}") or {}
    source = answers.get("_src_path")
    version = os.environ.get("VERSION_FROM") or answers.get("_commit")
    if not source or not version:
        raise SystemExit(f"migrate: {ANSWERS_FILE} records no _src_path/_commit; cannot find the old template")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_copy(
            source,
            destination,
            data={k: v for k, v in answers.items() if not k.startswith("_")},
            vcs_ref=version,
            defaults=True,
            overwrite=True,
            unsafe=True,
            quiet=True,
            skip_tasks=True,
        )
    return destination


def move(old: str, new: str) -> int:
    ours = committed(old)
    target = Path(new)
    if ours is None or not target.exists():
        # The project had no OLD (deleted by its user, or its feature is off) or gets no NEW.
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        base_path = render_old_version(Path(tmp) / "old") / old
        if not base_path.exists():
            print(f"migrate: {old} was not part of the old template; left as it is", file=sys.stderr)
            return 0
        base = base_path.read_bytes()
        if ours == base:
            print(f"migrate: {old} -> {new} (no local edits to carry over)")
        else:
            ours_path = Path(tmp) / "ours"
            ours_path.write_bytes(ours)
            result = subprocess.run(
                ["git", "merge-file", "-L", "new template", "-L", "old template", "-L", "your edits", new]
                + [str(base_path), str(ours_path)],
            )
            if result.returncode < 0 or result.returncode > 127:
                raise SystemExit(f"migrate: git merge-file failed on {new}")
            if result.returncode:
                print(f"migrate: {old} -> {new}: {result.returncode} conflict(s) marked in {new}", file=sys.stderr)
            else:
                print(f"migrate: {old} -> {new}, your edits carried over")
    old_path = Path(old)
    if old_path.exists() and old_path.read_bytes() == ours:
        old_path.unlink()  # copier normally removed it already
    return 0


def retire(old: str, where: str) -> int:
    ours = committed(old)
    if ours is None:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        base_path = render_old_version(Path(tmp) / "old") / old
        if base_path.exists() and base_path.read_bytes() == ours:
            print(f"migrate: {old} is gone; its content now lives in {where}")
            return 0
    kept = Path(old + ".orig")
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(ours)
    print(
        f"migrate: {old} is gone (its content now lives in {where}); your edited version is kept as "
        f"{kept}: carry your changes over, then delete it",
        file=sys.stderr,
    )
    return 0


def check_torch(torch_yml: str, requested: str) -> int:
    import yaml

    facts = yaml.safe_load(Path(torch_yml).read_text())
    supported = [str(release) for release in facts["releases"]]
    retired = {str(release): str(tag) for release, tag in (facts.get("retired") or {}).items()}
    answers = yaml.safe_load(committed(ANSWERS_FILE) or b"{}") or {}
    pinned = str(answers.get("torch_version", ""))
    wanted = requested or pinned
    if not wanted or wanted in supported:
        return 0
    if wanted in retired:
        why = f"torch {wanted} is no longer supported by this template release (it supports {', '.join(supported)})"
        stay = f"copier update --vcs-ref {retired[wanted]}   (the last template release for torch {wanted})"
    else:
        why = f"torch {wanted} is not a release this template supports ({', '.join(supported)})"
        stay = ""
    lines = [f"migrate: {why}; nothing was changed.", "Choose one:"]
    if stay:
        lines.append(f"  stay on torch {wanted}:  {stay}")
    lines.append(f"  move to a supported release:  copier update --data torch_version={facts['default']}")
    lines.append("(The template's docs/updating.md, 'Moving a project to another torch release', says what changes.)")
    print("\n".join(lines), file=sys.stderr)
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("move", help="the template moved OLD to NEW: carry the user's edits over")
    p.add_argument("old")
    p.add_argument("new")
    p = sub.add_parser("retire", help="the template removed OLD: keep the user's edited version as OLD.orig")
    p.add_argument("old")
    p.add_argument("where", help="where OLD's content went, for the message")
    p = sub.add_parser("check-torch", help="stop an update that would silently re-pin a retired torch release")
    p.add_argument("torch_yml", help="the new template's copier/torch.yml")
    p.add_argument("requested", nargs="?", default="", help="the update's --data torch_version, if any")
    args = parser.parse_args()
    if args.command == "move":
        return move(args.old, args.new)
    if args.command == "retire":
        return retire(args.old, args.where)
    if args.command == "check-torch":
        return check_torch(args.torch_yml, args.requested)
    return 2


if __name__ == "__main__":
    sys.exit(main())
