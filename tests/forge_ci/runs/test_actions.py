"""Actions at run creation (issue #15 items 2, 3, 7): resolved once, pinned, in the snapshot.

Real git throughout: the shared bundles of real actions (setup-python, github-script) mirrored
into the forge with the mirror use case from a ``file://`` clone, actions written by the tests
pushed with the git CLI, force-pushed tags and ``git gc --prune=now``.
"""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from sqlalchemy import func, select

from forge_ci.coordinator.action_sources import ActionTarget, build_action_archive
from forge_ci.coordinator.assignments import wire_actions
from forge_ci.coordinator.errors import SourceRefused
from forge_ci.gitstore import repository_path
from forge_ci.models import Run
from forge_ci.protocol import Action
from forge_ci.runs.action_cache import ACTION_PIN_PREFIX
from forge_ci.runs.actions import job_action_keys
from forge_ci.runs.mirrors import mirror_repository
from forge_ci.runs.rerun import rerun_run
from forge_ci.workflow import WorkflowInvalid
from tests.conftest import action_bundle
from tests.forge_ci.runs.conftest import CI, OPERATOR, Forge, Workdir
from worker.runner.archive import ArchiveRefused, extract_archive


def bundle_clone(tmp_path: Path, name: str) -> str:
    """A bare clone of a shared bundle, as a file:// URL (an upstream on the local disk)."""
    bundle = action_bundle(name)
    target = tmp_path / "upstream" / "actions" / name
    if not target.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(target)], check=True)
    return f"file://{target}"


def uses_workflow(*steps: str) -> str:
    body = "".join(f"      - {step}\n" for step in steps)
    return (
        "name: CI\non: workflow_dispatch\njobs:\n  build:\n    runs-on: [self-hosted]\n"
        f"    steps:\n{body}"
    )


def tag_commit(forge: Forge, full_name: str, tag: str) -> str:
    owner, name = full_name.split("/")
    path = repository_path(forge.settings.repositories_dir, owner, name)
    out = subprocess.run(
        ["git", f"--git-dir={path}", "rev-parse", f"refs/tags/{tag}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def archive_files(target: ActionTarget) -> dict[str, bytes]:
    archive = build_action_archive(target)
    with archive.file, tarfile.open(fileobj=io.BytesIO(archive.file.read())) as tar:
        return {
            member.name: tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar.getmembers()
            if member.isfile()
        }


def archive_links(target: ActionTarget) -> dict[str, str]:
    archive = build_action_archive(target)
    with archive.file, tarfile.open(fileobj=io.BytesIO(archive.file.read())) as tar:
        return {member.name: member.linkname for member in tar.getmembers() if member.issym()}


def target_of(forge: Forge, run: Run, key: str) -> ActionTarget:
    from forge_ci.runs.actions import action_repository

    entry = run.actions["actions"][key]  # type: ignore[index]
    directory = action_repository(forge.session, forge.settings, forge.path, entry)
    assert directory is not None
    pin = run.pin_ref if entry["source"]["kind"] == "run" else entry["pin_ref"]
    return ActionTarget(directory, entry["commit"], entry["path"], pin, entry["reference"])


@pytest.fixture
def setup_python(forge: Forge, tmp_path: Path) -> str:
    url = bundle_clone(tmp_path, "setup-python")
    result = mirror_repository(forge.session, forge.settings, OPERATOR, "actions/setup-python", url)
    forge.session.commit()
    assert result.created_repository and result.created_owner
    assert "refs/tags/v5" in result.added and "refs/tags/v6" in result.added
    return url


GREET_V1 = """\
name: Greet
inputs:
  who:
    required: true
  greeting:
    default: Hello
outputs:
  said:
    value: ${{ steps.say.outputs.text }}
runs:
  using: composite
  steps:
    - id: say
      run: echo "text=${{ inputs.greeting }} ${{ inputs.who }}" >> "$GITHUB_OUTPUT"
      shell: bash
    - uses: alice/inner@v1
"""
INNER = (
    "name: Inner\nruns:\n  using: composite\n  steps:\n    - run: echo inner v1\n      shell: sh\n"
)


def action_repo(forge: Forge, tmp_path: Path, name: str, files: dict[str, str]) -> Workdir:
    from forge_ci.repos import create_repository

    create_repository(forge.session, forge.settings, OPERATOR, f"alice/{name}")
    forge.session.commit()
    work = Workdir(
        tmp_path / f"work-{name}", repository_path(forge.settings.repositories_dir, "alice", name)
    )
    work.commit(files)
    work.git("tag", "v1")
    work.push()
    work.git(
        "push",
        "-q",
        "--receive-pack=git -c core.hooksPath=/dev/null receive-pack",
        str(work.bare),
        "refs/tags/v1",
    )
    return work


def test_real_action_is_resolved_pinned_and_stored(
    forge: Forge, setup_python: str, tmp_path: Path
) -> None:
    forge.commit(
        {
            CI: uses_workflow(
                "uses: actions/setup-python@v5\n        with:\n          python-version: '3.11'"
            )
        }
    )
    run = forge.dispatch()
    forge.session.commit()
    commit = tag_commit(forge, "actions/setup-python", "v5")
    key = f"{commit}:"
    assert run.actions is not None
    assert run.actions["references"] == {"actions/setup-python@v5": key}
    entry = run.actions["actions"][key]
    assert entry["commit"] == commit and entry["repository"] == "actions/setup-python"
    assert entry["source"]["kind"] == "forge"
    assert entry["pin_ref"] == ACTION_PIN_PREFIX + commit
    assert entry["metadata"]["runs"]["main"] == "dist/setup/index.js"
    assert entry["action_yml"].startswith('---\nname: "Setup Python"')
    # The assignment's map for the job: the snapshot's entry with its archive path.
    steps = run.plan["jobs"][0]["steps"]
    wired = wire_actions(run, 7, job_action_keys(run.actions, steps))
    assert list(wired) == [key]
    assert Action.from_json(wired[key].to_json(), "a").archive_path.endswith(
        "/attempts/7/actions/0.tar"
    )
    files = archive_files(target_of(forge, run, key))
    assert "dist/setup/index.js" in files and "action.yml" in files
    # The upstream tree's symbolic links (setup-python has two under __tests__) are kept, and
    # the runner's extractor makes them, last, as links that resolve inside the tree.
    links = archive_links(target_of(forge, run, key))
    assert links == {
        "__tests__/data/inner/poetry.lock": "../poetry.lock",
        "__tests__/data/inner/pyproject.toml": "../pyproject.toml",
    }
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    with build_action_archive(target_of(forge, run, key)).file as spool:
        data = spool.read()
    extract_archive(data, str(unpacked), links=True)
    inner = unpacked / "__tests__/data/inner/poetry.lock"
    assert inner.is_symlink() and os.readlink(inner) == "../poetry.lock"
    assert inner.read_bytes() == files["__tests__/data/poetry.lock"]
    with pytest.raises(ArchiveRefused, match="symbolic link"):
        extract_archive(data, str(tmp_path / "elsewhere"), links=False)
    # Built once and kept: the next job is served the kept tar (after the same pin check).
    kept = dataclasses.replace(target_of(forge, run, key), archives_dir=tmp_path / "archives")
    with build_action_archive(kept).file as first:
        assert first.read() == data
    (stored,) = (tmp_path / "archives").iterdir()
    assert stored.name.startswith(commit) and stored.read_bytes() == data
    with build_action_archive(kept).file as second:
        assert second.name == str(stored) and second.read() == data
    gone = dataclasses.replace(kept, pin_ref="refs/forge-ci/actions/" + "0" * 40)
    with pytest.raises(SourceRefused, match="no longer pinned"):
        build_action_archive(gone)


def test_unresolvable_reference_names_every_place_looked(forge: Forge, tmp_path: Path) -> None:
    empty = tmp_path / "empty-source"
    empty.mkdir()
    forge.settings = dataclasses.replace(forge.settings, action_sources=(f"file://{empty}",))
    forge.commit({CI: uses_workflow("run: echo", "uses: nobody/nothing@v1")})
    with pytest.raises(WorkflowInvalid) as caught:
        forge.dispatch()
    (diagnostic,) = caught.value.diagnostics
    assert (diagnostic.line, diagnostic.column) == (8, 15)
    assert diagnostic.message.startswith("uses: nobody/nothing@v1 cannot be resolved; looked in: ")
    assert "the forge repository nobody/nothing (not found or not readable)" in diagnostic.message
    assert f"file://{empty}/nobody/nothing (" in diagnostic.message
    assert forge.session.scalar(select(func.count()).select_from(Run)) == 0


def test_none_as_sources_is_said(forge: Forge, setup_python: str) -> None:
    forge.commit({CI: uses_workflow("uses: actions/setup-python@v99")})
    with pytest.raises(WorkflowInvalid) as caught:
        forge.dispatch()
    message = caught.value.diagnostics[0].message
    assert "the forge repository actions/setup-python (no tag, branch or commit v99)" in message
    assert "no upstream action source (action_sources is none)" in message


def test_a_mistyped_input_is_refused_with_the_inputs(forge: Forge, setup_python: str) -> None:
    forge.commit(
        {
            CI: uses_workflow(
                "uses: actions/setup-python@v5\n        with:\n          pyhton-version: '3.11'"
            )
        }
    )
    with pytest.raises(WorkflowInvalid) as caught:
        forge.dispatch()
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.line == 9
    assert "has no input 'pyhton-version'; did you mean \"python-version\"?" in diagnostic.message
    assert "(its inputs: python-version, python-version-file, cache" in diagnostic.message


def test_upstream_source_fills_the_cache(forge: Forge, tmp_path: Path) -> None:
    url = bundle_clone(tmp_path, "github-script")
    base = url.rsplit("/actions/", 1)[0]
    forge.settings = dataclasses.replace(forge.settings, action_sources=(base,))
    forge.commit(
        {
            CI: uses_workflow(
                "uses: actions/github-script@v8\n        with:\n          script: return 1"
            )
        }
    )
    run = forge.dispatch()
    forge.session.commit()
    (entry,) = run.actions["actions"].values()  # type: ignore[index]
    assert entry["source"]["kind"] == "upstream" and entry["source"]["url"] == url
    cache = forge.settings.action_cache_dir / entry["source"]["cache"]
    out = subprocess.run(
        ["git", f"--git-dir={cache}", "rev-parse", entry["pin_ref"]],
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == entry["commit"]
    upstream_commit = subprocess.run(
        ["git", f"--git-dir={url[7:]}", "rev-parse", "v8^{commit}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert entry["commit"] == upstream_commit
    assert "dist/index.js" in archive_files(target_of(forge, run, f"{entry['commit']}:"))


def test_nested_and_local_actions(forge: Forge, tmp_path: Path) -> None:
    action_repo(forge, tmp_path, "inner", {"action.yml": INNER})
    action_repo(forge, tmp_path, "greet", {"action.yml": GREET_V1})
    local = "name: Local\nruns:\n  using: node20\n  main: index.js\n"
    forge.commit(
        {
            CI: uses_workflow(
                "uses: alice/greet@v1\n        with:\n          who: world",
                "uses: ./.github/actions/local",
            ),
            ".github/actions/local/action.yml": local,
            ".github/actions/local/index.js": "console.log('local')\n",
        }
    )
    run = forge.dispatch()
    forge.session.commit()
    snapshot = run.actions
    assert snapshot is not None
    refs = snapshot["references"]
    assert set(refs) == {"alice/greet@v1", "alice/inner@v1", "./.github/actions/local"}
    assert refs["./.github/actions/local"] == f"{run.sha}:.github/actions/local"
    greet = snapshot["actions"][refs["alice/greet@v1"]]
    assert greet["metadata"]["runs"]["steps"][1]["action"] == refs["alice/inner@v1"]
    keys = job_action_keys(snapshot, run.plan["jobs"][0]["steps"])
    assert set(keys) == set(refs.values())
    files = archive_files(target_of(forge, run, refs["./.github/actions/local"]))
    assert files == {"action.yml": local.encode(), "index.js": b"console.log('local')\n"}


def test_rerun_keeps_the_pinned_commit_after_force_push_and_gc(
    forge: Forge, tmp_path: Path
) -> None:
    inner = action_repo(forge, tmp_path, "inner", {"action.yml": INNER})
    forge.commit({CI: uses_workflow("uses: alice/inner@v1")})
    first = forge.dispatch()
    forge.session.commit()
    old_key = first.actions["references"]["alice/inner@v1"]  # type: ignore[index]
    forge.finish(first, "build", "failure")
    # The tag moves to a new, unrelated commit and the old one becomes unreachable upstream.
    inner.git("checkout", "-q", "--orphan", "rewrite")
    inner.commit({"action.yml": INNER.replace("inner v1", "inner v2")}, "rewritten")
    inner.git("tag", "-f", "v1")
    receive = "--receive-pack=git -c core.hooksPath=/dev/null receive-pack"
    inner.git(
        "push", "-q", "--force", receive, str(inner.bare), "refs/tags/v1", "HEAD:refs/heads/main"
    )
    inner.bare_git("reflog", "expire", "--expire=now", "--all")
    inner.bare_git("gc", "-q", "--prune=now")
    old_commit = old_key.split(":")[0]
    assert inner.bare_git("rev-parse", "refs/tags/v1") != old_commit

    rerun = rerun_run(forge.session, forge.settings, forge.alice, forge.full_name, first.number)
    forge.session.commit()
    assert rerun.actions == first.actions
    files = archive_files(target_of(forge, rerun, old_key))
    assert b"inner v1" in files["action.yml"]

    fresh = forge.dispatch()
    forge.session.commit()
    new_key = fresh.actions["references"]["alice/inner@v1"]  # type: ignore[index]
    assert new_key != old_key
    assert b"inner v2" in archive_files(target_of(forge, fresh, new_key))["action.yml"]


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (
            {"action.yml": "name: x\nruns:\n  using: docker\n  image: Dockerfile\n"},
            "runs.using: docker is not supported",
        ),
        ({"action.yml": "name: x\nruns:\n  using: java\n"}, "runs.using 'java' is not supported"),
        ({"action.yml": "name: [x\n"}, "YAML syntax error"),
        (
            {"action.yml": "name: x\n#" + "a" * 70_000 + "\nruns: {using: node20, main: a.js}\n"},
            "bytes; the limit is 65536",
        ),
        ({"README": "no metadata\n"}, "there is no action.yml (or action.yaml)"),
        (
            {"action.yml": "name: x\ninputs:\n  '-bad': {}\nruns: {using: node20, main: a.js}\n"},
            "is not a valid input name",
        ),
    ],
)
def test_bad_actions_refuse_the_run(
    forge: Forge, tmp_path: Path, files: dict[str, str], reason: str
) -> None:
    action_repo(forge, tmp_path, "bad", files)
    forge.commit({CI: uses_workflow("uses: alice/bad@v1")})
    with pytest.raises(WorkflowInvalid) as caught:
        forge.dispatch()
    message = caught.value.diagnostics[0].message
    assert "alice/bad@v1" in message and reason in message, message
    assert forge.session.scalar(select(func.count()).select_from(Run)) == 0


def test_links_are_delivered_as_links_and_bad_targets_refuse_the_action(
    forge: Forge, tmp_path: Path
) -> None:
    """A link may point anywhere (it resolves in the job's container, never on the host: the
    archive is built from git objects); one the runner could not make refuses the action."""
    work = action_repo(forge, tmp_path, "linky", {"action.yml": INNER})
    (work.path / "escape").symlink_to("../../etc/passwd")
    (work.path / "inside").symlink_to("action.yml")
    receive = "--receive-pack=git -c core.hooksPath=/dev/null receive-pack"

    def retag(message: str) -> None:
        work.git("add", "-A")
        work.git("commit", "-q", "-m", message)
        work.git("tag", "-f", "v1")
        work.git("push", "-q", "--force", receive, str(work.bare), "refs/tags/v1")

    retag("links")
    forge.commit({CI: uses_workflow("uses: alice/linky@v1")})
    run = forge.dispatch()
    forge.session.commit()
    assert run.actions is not None
    (key,) = run.actions["actions"]
    assert archive_links(target_of(forge, run, key)) == {
        "escape": "../../etc/passwd",
        "inside": "action.yml",
    }
    os.symlink(b"latin-1-\xe9", os.fsencode(work.path / "bad"))
    retag("a target that is not UTF-8")
    forge.commit({CI: uses_workflow("uses: alice/linky@v1", "run: echo again")})
    with pytest.raises(WorkflowInvalid) as caught:
        forge.dispatch()
    assert (
        "action alice/linky@v1: the symbolic link 'bad' needs a UTF-8 target of 1 to 4096 bytes"
        in str(caught.value)
    )


def test_mirror_refresh_keeps_tags_unless_pruned(forge: Forge, tmp_path: Path) -> None:
    upstream = tmp_path / "up.git"
    work = Workdir(tmp_path / "up-work", upstream)
    subprocess.run(["git", "init", "-q", "--bare", str(upstream)], check=True)
    work.commit({"action.yml": INNER})
    work.git("tag", "v1")
    work.git("tag", "old")
    work.git("push", "-q", str(upstream), "HEAD:refs/heads/main", "--tags")
    first = mirror_repository(
        forge.session, forge.settings, OPERATOR, "mirrors/inner", f"file://{upstream}"
    )
    assert first.added == ["refs/heads/main", "refs/tags/old", "refs/tags/v1"]
    work.git("push", "-q", str(upstream), ":refs/tags/old")
    work.commit({"action.yml": INNER.replace("v1", "v2")})
    work.git("tag", "-f", "v1")
    work.git("push", "-q", "--force", str(upstream), "HEAD:refs/heads/main", "refs/tags/v1")
    second = mirror_repository(
        forge.session, forge.settings, OPERATOR, "mirrors/inner", f"file://{upstream}"
    )
    assert not second.created_repository
    assert second.moved == ["refs/heads/main", "refs/tags/v1"] and second.deleted == []
    third = mirror_repository(
        forge.session, forge.settings, OPERATOR, "mirrors/inner", f"file://{upstream}", prune=True
    )
    assert third.deleted == ["refs/tags/old"]
    with pytest.raises(Exception, match="only operators and site administrators"):
        mirror_repository(
            forge.session, forge.settings, forge.alice, "mirrors/inner", f"file://{upstream}"
        )
    with pytest.raises(Exception, match="cannot mirror mirrors/inner"):
        mirror_repository(
            forge.session, forge.settings, OPERATOR, "mirrors/inner", f"file://{tmp_path}/missing"
        )
    with pytest.raises(Exception, match="cannot mirror mirrors/other"):
        mirror_repository(
            forge.session, forge.settings, OPERATOR, "mirrors/other", f"file://{tmp_path}/missing"
        )
    from forge_ci.models import Repository

    names = {r.name for r in forge.session.scalars(select(Repository))}
    assert "other" not in names  # a failed first mirror leaves no empty repository


def test_push_records_an_unresolvable_action_as_a_diagnostic(forge: Forge, tmp_path: Path) -> None:
    from forge_ci.models import PushEventWorkflow
    from forge_ci.repos import set_push_workflows
    from tests.forge_ci.runs.test_events import _event, _process

    set_push_workflows(forge.session, OPERATOR, "alice/demo", True)
    forge.session.commit()
    action_repo(forge, tmp_path, "inner", {"action.yml": INNER})
    text = uses_workflow("uses: alice/inner@v1").replace("workflow_dispatch", "push")
    good = forge.commit({".github/workflows/good.yml": text, CI: text.replace("@v1", "@v9")})
    outcome = _process(forge, _event(forge, good))
    assert outcome.runs == (1,)
    row = forge.session.scalar(
        select(PushEventWorkflow).where(PushEventWorkflow.workflow_path == CI)
    )
    assert row is not None and row.outcome == "invalid" and row.run_id is None
    assert row.diagnostics is not None
    (diagnostic,) = row.diagnostics
    assert (diagnostic["line"], diagnostic["column"]) == (7, 15)
    assert diagnostic["message"].startswith("uses: alice/inner@v9 cannot be resolved; looked in: ")
    assert forge.run(1).actions["references"] == {  # type: ignore[index]
        "alice/inner@v1": f"{tag_commit(forge, 'alice/inner', 'v1')}:"
    }


def test_dispatch_refusal_is_exit_status_2_with_the_reference(forge: Forge, tmp_path: Path) -> None:
    from forge_ci.cli.common import EXIT_REFUSED
    from forge_ci.errors import InvalidInput

    forge.commit({CI: uses_workflow("uses: nobody/nothing@v1")})
    with pytest.raises(InvalidInput) as caught:
        forge.dispatch()
    assert caught.value.http_status == 400 and EXIT_REFUSED == 2
    assert "uses: nobody/nothing@v1 cannot be resolved" in caught.value.message


def test_the_action_snapshot_cannot_be_changed(forge: Forge, tmp_path: Path) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    action_repo(forge, tmp_path, "inner", {"action.yml": INNER})
    forge.commit({CI: uses_workflow("uses: alice/inner@v1")})
    run = forge.dispatch()
    forge.session.commit()
    with pytest.raises(ValueError, match="actions is part of the immutable snapshot"):
        run.actions = {}
    forge.session.rollback()
    for value in ("'{}'", "NULL"):
        with pytest.raises(DBAPIError, match="snapshot of a run"):
            forge.session.execute(text(f"UPDATE runs SET actions = {value} WHERE id = {run.id}"))
        forge.session.rollback()


def test_a_traversal_path_in_the_action_tree_refuses_it(forge: Forge) -> None:
    import pygit2
    from pygit2.enums import ObjectType

    from forge_ci.repos import create_repository

    create_repository(forge.session, forge.settings, OPERATOR, "alice/trav")
    forge.session.commit()
    git = pygit2.Repository(str(repository_path(forge.settings.repositories_dir, "alice", "trav")))
    action = git.create_blob(INNER.encode())
    evil = git.create_blob(b"owned\n")
    # libgit2 will not build such a tree; a hand-written tree object can still hold one.
    raw = b"".join(
        mode + b" " + name + b"\0" + oid.raw
        for mode, name, oid in ((b"100644", b"..", evil), (b"100644", b"action.yml", action))
    )
    tree = git.odb.write(ObjectType.TREE, raw)
    signature = pygit2.Signature("A", "a@example.com")
    commit = git.create_commit(None, signature, signature, "evil", tree, [])
    git.references.create("refs/tags/v1", commit)
    forge.commit({CI: uses_workflow("uses: alice/trav@v1")})
    with pytest.raises(WorkflowInvalid) as caught:
        forge.dispatch()
    assert "action alice/trav@v1: its tree holds the path '..'" in str(caught.value)
