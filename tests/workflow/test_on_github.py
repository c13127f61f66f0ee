"""What real files write and GitHub accepts, accepted the same way (issue #16's acceptance goal).

Each construct with its acceptance (and the notice, where GitHub does something silently or
reads an empty value) and the refusal that stays next to it: any env name but what no process
can hold, GitHub's default variables ignored, unknown step ids and matrix keys read as null,
empty path components, a job's ``defaults.run`` with contexts, the whole ``github`` context.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from wf_support import Accept, Refuse, messages

from forge_ci.workflow import Workflow, build_plan


def job_file(steps: str, job: str = "", top: str = "") -> str:
    """One job ``build`` whose ``steps`` (and extra job keys) are indented as in the file."""
    return (
        f"on: push\n{top}jobs:\n  build:\n    runs-on: ubuntu-latest\n{job}    steps:\n"
        + textwrap.indent(textwrap.dedent(steps), "      ")
    )


def notices(workflow: Workflow) -> list[str]:
    return [f"{n.line}:{n.column}: {n.message}" for n in workflow.notices]


def first_step(workflow: Workflow) -> dict[str, Any]:
    step: dict[str, Any] = build_plan(workflow)["jobs"][0]["steps"][0]
    return step


# -- env names --------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["top", "job", "step"])
def test_any_env_name_a_process_can_hold_reaches_the_plan_as_written(
    accept: Accept, level: str
) -> None:
    env = "env:\n  ruby-version: '3.3'\n  VIRTUALCAM-GUID: x\n  a.b: y\n  1A: z\n"
    text = {
        "top": job_file("- run: echo\n", top=env),
        "job": job_file("- run: echo\n", job=textwrap.indent(env, "    ")),
        "step": job_file("- run: echo\n" + textwrap.indent(env, "  ")),
    }[level]
    workflow = accept(text)
    assert first_step(workflow)["env"] == {
        "ruby-version": "3.3",
        "VIRTUALCAM-GUID": "x",
        "a.b": "y",
        "1A": "z",
    }
    assert workflow.notices == ()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ('"A=B"', "contains '=', which no process environment can hold"),
        ('"A\\tB"', "contains a control character"),
        ("${{ insert }}", "is not supported as an env name; write the names out"),
        ("FORGE_CI_X", "env names starting with FORGE_CI_ are reserved for the executor"),
        ("LD_PRELOAD", "would let the shell or the loader run other code"),
    ],
)
def test_env_names_no_process_can_hold_stay_refused(
    refuse: Refuse, name: str, message: str
) -> None:
    found = messages(refuse(job_file(f"- run: echo\n  env:\n    {name}: x\n")))
    assert "8:11: " in found and message in found, found


# -- GitHub's default variables ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["GITHUB_SHA", "GITHUB_REPOSITORY", "github_workspace"])
def test_a_default_variable_keeps_the_runners_value_and_says_so(accept: Accept, name: str) -> None:
    text = job_file(f"- run: echo\n  env:\n    {name}: mine\n    GITHUB_TOKEN: t\n")
    workflow = accept(text)
    assert first_step(workflow)["env"] == {"GITHUB_TOKEN": "t"}
    assert notices(workflow) == [f"8:11: env {name} is ignored: the runner sets it"]


def test_a_default_variable_is_ignored_at_every_level(accept: Accept) -> None:
    text = job_file(
        "- run: echo\n  env:\n    GITHUB_REF: c\n",
        job="    env:\n      GITHUB_REF: b\n",
        top="env:\n  GITHUB_SHA: a\n",
    )
    workflow = accept(text)
    assert first_step(workflow)["env"] == {}
    assert [n.message for n in workflow.notices] == [
        "env GITHUB_SHA is ignored: the runner sets it",
        "env GITHUB_REF is ignored: the runner sets it",
    ]


# -- references GitHub reads as null -----------------------------------------------------------


def test_an_unknown_step_id_reads_null_with_a_notice_naming_it_and_where(accept: Accept) -> None:
    text = job_file(
        """\
        - run: echo ${{ steps.later.outputs.x }}
        - id: later
          if: steps.cache.outputs.hit != 'true'
          run: echo
        """,
        job="    outputs:\n      o: ${{ steps.gone.outputs.o }}\n",
    )
    workflow = accept(text)
    assert notices(workflow) == [
        "6:14: steps.gone is always empty in job outputs: no step in this job has the id 'gone' "
        "(GitHub reads it as null too)",
        "8:23: steps.later is always empty in run: no earlier step has the id 'later' "
        "(GitHub reads it as null too)",
        "10:13: steps.cache is always empty in a step's if: no earlier step has the id 'cache' "
        "(GitHub reads it as null too)",
    ]
    steps = build_plan(workflow)["jobs"][0]["steps"]
    assert steps[1]["if"] == "success() && (steps.cache.outputs.hit != 'true')"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("- id: a\n  run: echo\n- run: echo ${{ steps.a.output.x }}\n", "steps.a.output does not"),
        ("- run: echo\n  env:\n    X: ${{ steps.x.outputs.y }}\n", None),
        ("- run: echo ${{ matrix.x.y }}\n", None),
    ],
)
def test_a_wrong_field_of_a_step_stays_refused(
    accept: Accept, refuse: Refuse, step: str, message: str | None
) -> None:
    if message is None:
        assert "is always empty" in accept(job_file(step)).notices[0].message
    else:
        assert message in messages(refuse(job_file(step)))


def test_a_missing_matrix_key_reads_null_with_a_notice(accept: Accept) -> None:
    strategy = "    strategy:\n      matrix:\n        node-version: [18]\n"
    workflow = accept(job_file("- run: echo ${{ matrix.node_version }}\n", job=strategy))
    assert notices(workflow) == [
        "9:23: matrix.node_version is always empty in run: the matrix has no key "
        "'node_version'; did you mean \"node-version\"? (GitHub reads it as null too)"
    ]
    assert first_step(workflow)["run"] == "echo "


def test_the_matrix_of_a_job_without_one_is_empty_with_a_notice(accept: Accept) -> None:
    workflow = accept(job_file("- name: Node ${{ matrix.node }}\n  run: echo\n"))
    assert notices(workflow) == [
        "6:24: matrix.node is always empty in a step name: the job has no strategy.matrix "
        "(GitHub reads it as null too)"
    ]
    assert first_step(workflow)["name"] == "Node "


# -- working directories ----------------------------------------------------------------------


def test_a_jobs_defaults_working_directory_may_use_its_contexts(accept: Accept) -> None:
    job = (
        "    strategy:\n      matrix:\n        app: [web]\n"
        "    defaults:\n      run:\n        working-directory: ${{ github.workspace }}/${{ "
        "matrix.app }}/\n"
    )
    workflow = accept(job_file("- run: make\n- run: make\n  working-directory: ./x//y/\n", job=job))
    steps = build_plan(workflow)["jobs"][0]["steps"]
    # The matrix is filled in when the plan is built; github.workspace is the runner's.
    assert steps[0]["working_directory"] == {"template": [{"expr": "github.workspace"}, "/web/"]}
    assert steps[1]["working_directory"] == "x/y"


@pytest.mark.parametrize(
    ("directory", "message"),
    [
        ("${{ steps.a.outputs.dir }}", "the steps context is not available in defaults.run"),
        ("${{ runner.temp }}", "the runner context is not available in defaults.run"),
        ("${{ secrets.DIR }}", "(not in defaults.run.working-directory)"),
        ("a/../..", "must not leave the workspace with '..'"),
        ("/etc", "must be relative to the workspace"),
    ],
)
def test_a_jobs_defaults_working_directory_refusals(
    refuse: Refuse, directory: str, message: str
) -> None:
    job = f"    defaults:\n      run:\n        working-directory: {directory}\n"
    assert message in messages(refuse(job_file("- run: make\n", job=job)))


def test_a_matrix_directory_left_empty_is_the_workspace(accept: Accept) -> None:
    workflow = accept(job_file("- run: make\n  working-directory: ${{ matrix.dir }}\n"))
    assert first_step(workflow)["working_directory"] is None
    assert "matrix.dir is always empty" in workflow.notices[0].message


# -- the whole github context -----------------------------------------------------------------


def test_the_whole_github_context_is_readable_and_passed_as_data(accept: Accept) -> None:
    text = job_file(
        """\
        - run: echo "$CONTEXT" ${{ toJSON(github) }}
          if: contains(toJSON(github), 'push')
          env:
            CONTEXT: ${{ toJSON(github) }}
            FIELD: ${{ github[matrix.k] }}
        """,
        job="    strategy:\n      matrix:\n        k: [sha]\n",
    )
    step = first_step(accept(text))
    # Untrusted text (the event payload is in it): a generated variable, never script text.
    assert step["run"] == 'echo "$CONTEXT" ${_FORGE_CI_EXPR_1}'
    assert step["env"]["_FORGE_CI_EXPR_1"] == {"template": [{"expr": "toJSON(github)"}]}
    assert step["env"]["CONTEXT"] == {"template": [{"expr": "toJSON(github)"}]}


def test_an_unknown_github_field_stays_refused(refuse: Refuse) -> None:
    found = messages(refuse(job_file("- run: echo ${{ github.repositoryUrl }}\n")))
    assert "github.repositoryUrl is not available" in found


# -- the checkout's with.path -----------------------------------------------------------------


def test_a_checkout_path_may_use_step_contexts(accept: Accept, refuse: Refuse) -> None:
    job = "    strategy:\n      matrix:\n        repo: [tools]\n"
    checkout = "- id: where\n  run: echo\n- uses: actions/checkout@v4\n  with:\n    path: {}\n"
    literal = build_plan(accept(job_file(checkout.format("vendor//${{ matrix.repo }}/"), job)))
    assert literal["jobs"][0]["steps"][1]["with"]["path"] == "vendor/tools"
    runtime = build_plan(accept(job_file(checkout.format("${{ steps.where.outputs.dir }}"), job)))
    assert runtime["jobs"][0]["steps"][1]["with"]["path"] == {
        "template": [{"expr": "steps.where.outputs.dir"}]
    }
    # A path that reads env gets the job's env (its secrets left out) as its env context.
    env = (
        job
        + "    env:\n      SRC: src\n      KEY: ${{ secrets.KEY }}\n      K2: a${{ secrets.K }}\n"
    )
    with_env = build_plan(accept(job_file(checkout.format("${{ env.SRC }}"), env)))
    assert with_env["jobs"][0]["steps"][1]["env"] == {"SRC": "src"}
    assert (
        build_plan(accept(job_file(checkout.format("x"), env)))["jobs"][0]["steps"][1]["env"] == {}
    )
    # A path the matrix makes is checked once the plan is built, like a literal one.
    escaping = job.replace("[tools]", "['../out']")
    found = messages(refuse(job_file(checkout.format("${{ matrix.repo }}"), escaping)))
    assert "with.path: '../out' must stay inside the workspace (no '..')" in found


# -- a job's timeout-minutes from the matrix ----------------------------------------------------


def test_a_jobs_timeout_may_come_from_its_matrix(accept: Accept) -> None:
    job = (
        "    timeout-minutes: ${{ matrix.timeout }}\n"
        "    strategy:\n      matrix:\n        timeout: [30, '45']\n"
    )
    jobs = build_plan(accept(job_file("- run: make\n", job)))["jobs"]
    assert [j["timeout_minutes"] for j in jobs] == [30, 45]


@pytest.mark.parametrize(
    ("timeout", "values", "message"),
    [
        ("${{ matrix.t }}", "[500]", "is 500 here; it must be a whole number of minutes from 1"),
        ("${{ matrix.t }}", "[0]", "is 0 here"),
        ("${{ matrix.t }}", "[x]", "is 'x' here"),
        ("${{ matrix.t }}", "[true]", "is True here"),
        ("${{ matrix.t }} min", "[1]", "timeout-minutes is one expression"),
        ("${{ github.event.inputs.t }}", "[1]", "the github context is not available in timeout"),
        ("600", "[1]", "timeout-minutes must be a whole number of minutes from 1 through 360"),
    ],
)
def test_a_jobs_timeout_is_checked_per_instance(
    refuse: Refuse, timeout: str, values: str, message: str
) -> None:
    job = f"    timeout-minutes: {timeout}\n    strategy:\n      matrix:\n        t: {values}\n"
    assert message in messages(refuse(job_file("- run: make\n", job)))
