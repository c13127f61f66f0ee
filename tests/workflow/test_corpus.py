"""The parser against workflow files nobody on this project wrote (``shared/corpus``).

* Real-world files (actionlint's 1,503 and GitHub's starter workflows), actionlint's valid test
  files and SchemaStore's samples: each is accepted, or refused with located diagnostics; none
  crashes. Timing is measured by ``bench/workflow_parse.py``, not asserted here.
* Files the corpus profiles mark as inside the subset are accepted, except those listed below
  with the documented forge-ci difference that refuses them (checked by message).
* GitHub's own reader cases agree on accepted/refused and on the line of the first error, except
  for cases listed below by id, each with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow, plan_digest
from forge_ci.workflow.parser import workflow_plan_digest
from forge_ci_testing.corpus import corpus_root

# -- documented differences, as the phrase of the refusal they cause ---------------------------

CHECKOUT_UNKNOWN = "is not supported by the built-in checkout"
LITERAL_SHELL = "expressions are not allowed in shell"
RUNNER_GROUPS = "runner groups (runs-on: {group, labels}) are not supported"
LITERAL_TIMEOUT = "timeout-minutes must be a whole number of minutes"
DOCKER = "Docker container actions are not supported"
REUSABLE = "reusable workflows (jobs.<id>.uses) are not supported"
TAGS_YAML = "explicit YAML tags"
CONTAINERS = "job containers are not supported"
SERVICES = "service containers are not supported"
JOB_CONCURRENCY = "job-level concurrency is not supported"
MATRIX_EXPRESSIONS = "expressions are not allowed in matrix values"
BOTH_FILTERS = "branches and branches-ignore cannot be used together in one event"
LARGE_NUMBER = "is too large (at most 9007199254740991)"

#: Profile says "inside the subset"; forge-ci refuses them for the documented reason given.
PROFILED_INSIDE_BUT_REFUSED = {
    "actionlint-realworld/workflows/": {
        "commaai_openpilot_.github_workflows_tools_tests.yaml": "takes only lfs: false",
    },
    "starter-workflows/": {},
    "actionlint/testdata/ok/": {
        "dynamic_shell_name.yaml": LITERAL_SHELL,
        "issue-280_runs_on.yaml": RUNNER_GROUPS,
        "issue-384_narrow-logical-op.yaml": LITERAL_TIMEOUT,
    },
}
PROFILES = {
    "actionlint-realworld/workflows/": "actionlint-realworld/profile.json",
    "starter-workflows/": "starter-workflows/profile.json",
    "actionlint/testdata/ok/": "actionlint/profile-ok.json",
}

# -- GitHub's reader cases (actions-languageservices) ---------------------------------------------

#: GitHub accepts these; forge-ci refuses them on purpose (first refusal's phrase).
READER_REFUSED_ON_PURPOSE = {
    "background-steps.yml": "'background' is not a step key",  # experimental GitHub feature
    "coercion-to-string.yml": TAGS_YAML,
    "concurrency.yml": JOB_CONCURRENCY,
    "escape-html-values.yml": "is one expression: write it without ${{ }}",
    "events-mapping-all.yml": BOTH_FILTERS,
    "id-to-long.yml": DOCKER,
    "insert.yml": "is not supported as an env name",  # GitHub's ${{ insert }} directive
    "is-partial-rerun.yml": REUSABLE,
    "job-basic.yml": "cancel-timeout-minutes is not supported",
    "job-cancel-timeout-minutes.yml": "cancel-timeout-minutes is not supported",
    "job-concurrency.yml": JOB_CONCURRENCY,
    "job-container.yml": CONTAINERS,
    "job-defaults.yml": "github.test is not available",
    "job-environment.yml": "the inputs context is not available in environment.name",
    "job-if.yml": "a job's if needs an expression",  # GitHub reads an empty if as success()
    "job-runs-on.yml": "is not a valid runner label",
    "job-services-args.yml": SERVICES,
    "job-services.yml": SERVICES,
    "job-snapshot-mapping.yml": "custom image snapshots are not supported",
    "job-snapshot-simple.yml": "custom image snapshots are not supported",
    "job-strategy.yml": MATRIX_EXPRESSIONS,
    "matrix-basic.yml": LARGE_NUMBER,
    "misc-jobs.yml": "job 'build' needs steps",
    "misc-steps.yml": CHECKOUT_UNKNOWN,
    "on-workflow_dispatch-unknown-keys-ignored.yml": "'unknown-key' is not a workflow_dispatch key",
    "preserves-source-info-basic.yml": MATRIX_EXPRESSIONS,
    "preserves-source-info-reusable-workflow.yml": REUSABLE,
    "preserves-source-info-simple.yml": JOB_CONCURRENCY,
    "reusable-workflow-inputs.yml": REUSABLE,
    "reusable-workflow-job-basic.yml": REUSABLE,
    "reusable-workflow-job-inputs-type-coercion.yml": REUSABLE,
    "reusable-workflow-job-mvp.yml": REUSABLE,
    "reusable-workflow-job-name.yml": REUSABLE,
    "reusable-workflow-job-nested-basic.yml": REUSABLE,
    "reusable-workflow-job-nested-multiple.yml": REUSABLE,
    "reusable-workflow-job-nested-permissions.yml": REUSABLE,
    "reusable-workflow-job-permissions-default-limited-read-allows-contents-packages.yml": REUSABLE,
    "reusable-workflow-job-permissions-embedded-permissions-after-jobs.yml": REUSABLE,
    "reusable-workflow-job-permissions-embedded-permissions.yml": REUSABLE,
    "reusable-workflow-job-permissions-overrides-default-limited-read.yml": REUSABLE,
    "reusable-workflow-job-permissions-overrides-default-limited-write.yml": REUSABLE,
    "reusable-workflow-job-permissions-overrides-default-write.yml": REUSABLE,
    "reusable-workflow-job-permissions-overrides-workflow-level.yml": REUSABLE,
    "reusable-workflow-job-strategy.yml": REUSABLE,
    "reusable-workflow-multiple.yml": REUSABLE,
    "reusable-workflow-no-inputs.yml": REUSABLE,
    "reusable-workflow-outputs.yml": REUSABLE,
    "reusable-workflow-secrets-secret-without-definition.yml": REUSABLE,
    "reusable-workflow-secrets.yml": REUSABLE,
    "round-to-infinity.yml": LITERAL_TIMEOUT,
    "skip-reusable-workflows.yml": REUSABLE,
    "step-id-generates-counter-per-collision.yml": DOCKER,
    "step-id-generates-when-empty-and-considers-collisions.yml": DOCKER,
    "step-id-generates-when-empty.yml": "is not a valid owner name",
    "step-if.yml": "job 'build' is not listed in this job's needs",
    "workflow-description.yml": "'description' is not a workflow key",
    "yaml-schema-bool.yml": TAGS_YAML,
    "yaml-schema-float.yml": "is not a finite number",  # .inf/.nan cannot be JSON plan values
    "yaml-schema-int.yml": TAGS_YAML,
    "yaml-schema-null.yml": TAGS_YAML,
    "yaml-schema-str-block-styles.yml": TAGS_YAML,
    "yaml-schema-str-flow-styles.yml": TAGS_YAML,
}

#: Both refuse, but forge-ci's first error is an earlier feature outside its subset.
READER_REFUSED_EARLIER = {
    "errors-reusable-workflow-job-inputs-type-mismatch.yml": REUSABLE,
    "errors-reusable-workflow-job-inputs-undefined.yml": REUSABLE,
    "errors-reusable-workflow-job-nested-permissions-not-allowed-job-level-from-caller-job-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-job-nested-permissions-not-allowed-job-level-from-caller-workflow-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-job-nested-permissions-not-allowed-workflow-level-from-caller-job-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-job-nested-permissions-not-allowed-workflow-level-from-caller-workflow-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-job-secrets-undefined.yml": REUSABLE,
    "errors-reusable-workflow-job-secrets.yml": REUSABLE,
    "errors-reusable-workflow-max-result-size.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-job-level-from-caller-default.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-job-level-from-caller-job-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-permissions-not-allowed-job-level-from-caller-workflow-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-permissions-not-allowed-request-actions-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-checks-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-contents-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-deployments-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-discussions-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-id-token-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-issues-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-packages-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-pages-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-pull-requests-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-read-all-allowed-none.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-repository-projects-write.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-permissions-not-allowed-request-security-events-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-statuses-write.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-write-all-allowed-none.yml": REUSABLE,
    "errors-reusable-workflow-permissions-not-allowed-request-write-all-allowed-read-all.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-permissions-not-allowed-workflow-level-from-caller-default.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-permissions-not-allowed-workflow-level-from-caller-job-level.yml": REUSABLE,  # noqa: E501
    "errors-reusable-workflow-permissions-not-allowed-workflow-level-from-caller-workflow-level.yml": REUSABLE,  # noqa: E501
    "errors-step-uses-syntax.yml": DOCKER,
    "job-container-invalid-credentials.yml": CONTAINERS,
    "job-container-invalid.yml": CONTAINERS,
    "job-container-missing-image.yml": CONTAINERS,
}

#: Refused upstream only because its harness sets a tiny limit of its own; within forge-ci's
#: limits (64 KiB file, 1 MiB plan) they are valid, and that is what is checked.
READER_HARNESS_LIMITS = {
    "errors-max-file-size.yml": "harness option max-file-size=124; forge-ci's limit is 64 KiB",
    "errors-max-result-size.yml": "harness option max-result-size=1141; forge-ci's is a 1 MiB plan",
    "errors-max-depth.yml": "harness option max-depth=5; forge-ci's limit is 32 levels",
}


def _reader_cases() -> list[dict[str, Any]]:
    root = corpus_root()
    if root is None:
        return []
    path = root / "actions-languageservices" / "derived" / "workflow-reader-cases.json"
    cases: list[dict[str, Any]] = json.loads(path.read_text())
    return cases


READER_CASES = _reader_cases()


def outcome(data: str | bytes, path: str) -> WorkflowInvalid | None:
    """``None`` when accepted (and the plan digests); the error when refused."""
    try:
        workflow = parse_workflow(data, path)
    except WorkflowInvalid as exc:
        return exc
    assert workflow_plan_digest(workflow) == plan_digest(build_plan(workflow))
    return None


def check_located(error: WorkflowInvalid, data: str | bytes) -> None:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    last_line = text.count("\n") + 2
    assert error.diagnostics
    for diagnostic in error.diagnostics:
        assert 1 <= diagnostic.line <= last_line, diagnostic
        assert diagnostic.column >= 1 and diagnostic.message, diagnostic


@pytest.mark.parametrize(
    "folder",
    [
        "actionlint-realworld/workflows",
        "starter-workflows",
        "actionlint/testdata",
        "schemastore-github-workflow/src",
        "actions-languageservices/derived/reader-workflows",
    ],
)
def test_every_file_is_accepted_or_refused_with_located_errors(
    corpus_dir: Path, folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(p for p in (corpus_dir / folder).rglob("*") if p.suffix in (".yml", ".yaml"))
    assert files, f"no workflow files under {folder}"
    accepted = 0
    for path in files:
        data = path.read_bytes()
        error = outcome(data, str(path))
        if error is None:
            accepted += 1
        else:
            check_located(error, data)
    with capsys.disabled():
        print(
            f"\n{folder}: {len(files)} files, {accepted} accepted, {len(files) - accepted} refused"
        )


@pytest.mark.parametrize("prefix", sorted(PROFILES))
def test_files_inside_the_subset_are_accepted(corpus_dir: Path, prefix: str) -> None:
    refused_on_purpose = PROFILED_INSIDE_BUT_REFUSED[prefix]
    profile = json.loads((corpus_dir / PROFILES[prefix]).read_text())
    inside = [
        entry["file"].removeprefix(prefix) for entry in profile if not entry["outside_subset"]
    ]
    assert set(refused_on_purpose) <= set(inside), "stale entries in PROFILED_INSIDE_BUT_REFUSED"
    problems = []
    for name in inside:
        data = (corpus_dir / prefix / name).read_bytes()
        error = outcome(data, name)
        expected = refused_on_purpose.get(name)
        if expected is None and error is not None:
            problems.append(f"{name}: refused: {error}")
        elif expected is not None and (
            error is None or expected not in error.diagnostics[0].message
        ):
            problems.append(f"{name}: expected a refusal containing {expected!r}, got {error}")
    assert not problems, "\n".join(problems)


def test_schemastore_negative_samples_are_refused(corpus_dir: Path) -> None:
    folder = corpus_dir / "schemastore-github-workflow" / "src" / "negative_test"
    files = sorted(folder.rglob("*.y*ml"))
    assert len(files) == 20
    for path in files:
        data = path.read_bytes()
        error = outcome(data, path.name)
        assert error is not None, f"{path.name} was accepted"
        check_located(error, data)


def test_reader_case_lists_are_current(
    corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {case["file"] for case in READER_CASES}
    listed = (
        set(READER_REFUSED_ON_PURPOSE) | set(READER_REFUSED_EARLIER) | set(READER_HARNESS_LIMITS)
    )
    assert listed <= ids, f"unknown ids: {sorted(listed - ids)}"
    assert not (set(READER_REFUSED_ON_PURPOSE) & set(READER_REFUSED_EARLIER))
    compared = len(ids) - len(listed)
    with capsys.disabled():
        print(
            f"\nreader cases: {len(ids)}; compared fully {compared}; refused on purpose "
            f"{len(READER_REFUSED_ON_PURPOSE)}; refused at an earlier line "
            f"{len(READER_REFUSED_EARLIER)}; valid within forge-ci's limits "
            f"{len(READER_HARNESS_LIMITS)}"
        )


@pytest.mark.parametrize(
    "case", READER_CASES or [None], ids=[c["file"] for c in READER_CASES] or ["corpus-missing"]
)
def test_reader_case(corpus_dir: Path, case: dict[str, Any] | None) -> None:
    assert case is not None
    name = case["file"]
    error = outcome(case["workflow"], case["workflow_path"])
    if name in READER_HARNESS_LIMITS:
        assert error is None, f"{name} ({READER_HARNESS_LIMITS[name]}): {error}"
        return
    if error is not None:
        check_located(error, case["workflow"])
    phrase = READER_REFUSED_ON_PURPOSE.get(name) or READER_REFUSED_EARLIER.get(name)
    if phrase is not None:
        assert error is not None, f"{name}: accepted, but listed as refused"
        assert phrase in error.diagnostics[0].message, str(error)
        return
    if case["expect"] == "ok":
        assert error is None, f"GitHub accepts {name}; forge-ci refused it: {error}"
        return
    assert error is not None, f"GitHub refuses {name}; forge-ci accepted it"
    lines = [err["line"] for err in case["errors"] if "line" in err]
    if lines:
        assert error.diagnostics[0].line == lines[0], str(error)
