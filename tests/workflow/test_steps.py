"""Steps: run and checkout, their keys, ids, shells, working directories and timeouts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic
from forge_ci.workflow.defaults import normal_directory, working_directory_problem

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]

HEAD = "on: push\njobs:\n  build:\n    runs-on: self-hosted\n    steps:\n"


def steps(*items: str) -> str:
    body = ""
    for item in items:
        lines = item.strip("\n").splitlines()
        body += (
            "      - " + lines[0] + "\n" + "".join("        " + line + "\n" for line in lines[1:])
        )
    return HEAD + body


def plan_steps(plan: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = plan["jobs"][0]["steps"]
    return result


def test_run_step_plan(plan_of: PlanOf) -> None:
    (step,) = plan_steps(plan_of(steps("run: |\n  make\n  make test\nname: Build")))
    assert step == {
        "id": "step_1",
        "generated_id": True,
        "name": "Build",
        "uses": None,
        "run": "make\nmake test\n",
        "shell": None,
        "working_directory": None,
        "env": {},
        "if": "success()",
        "continue_on_error": False,
        "timeout_minutes": None,
    }


def test_default_step_names(plan_of: PlanOf) -> None:
    planned = plan_steps(
        plan_of(steps("uses: forge-ci/checkout@v1", "run: |\n\n  first\n  second"))
    )
    assert [s["name"] for s in planned] == ["Checkout", "Run first"]


@pytest.mark.parametrize(
    "uses", ["forge-ci/checkout@v1", "actions/checkout@v4", "actions/checkout@main"]
)
def test_builtin_checkout(plan_of: PlanOf, uses: str) -> None:
    (step,) = plan_steps(plan_of(steps(f"uses: {uses}\nid: src\nname: Get\ntimeout-minutes: 5")))
    assert step["uses"] == "forge-ci/checkout@v1"
    assert (step["id"], step["name"], step["timeout_minutes"], step["run"]) == (
        "src",
        "Get",
        5,
        None,
    )


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ("uses: actions/checkout@v4\nwith:\n  ssh-key: x", "with.ssh-key is not supported"),
        ("uses: actions/checkout@v4\nwith: [a]", "with must be a mapping of inputs"),
        (
            "uses: forge-ci/checkout@v1\nenv:\n  A: b",
            "the built-in checkout step cannot have 'env'",
        ),
        ("uses: forge-ci/checkout@v1\nshell: bash", "cannot have 'shell'"),
        ("uses: forge-ci/checkout@v1\nworking-directory: a", "cannot have 'working-directory'"),
        ("uses: forge-ci/checkout@v1\nenv:\n  A: b", "cannot have 'env'"),
        ("uses: forge-ci/checkout@v2", "'forge-ci/checkout@v2' is not a checkout version"),
        ("uses: actions/checkout", "needs a ref, like actions/checkout@v4"),
        ("uses: actions/setup-node", "uses: actions/setup-node needs a version"),
        ("uses: docker://alpine:3", "Docker container actions are not supported"),
        ("uses: ../local-action", "a local action is written ./PATH"),
        ("uses: ./a/../b", "must be a relative folder without '.', '..'"),
        ("uses: o/r@refs/tags/v1", "write the tag or branch name"),
        ("uses: o/r@v1\nrun: echo", "either run or uses, not both"),
        ("uses: o/r@v1\nshell: bash", "an action step (o/r@v1) cannot have 'shell'"),
        ("uses: o/r@v1\nwith: [a]", "with must be a mapping of o/r@v1's inputs"),
        ("uses: o/r@v1\nwith:\n  a: 1\n  A: 2", "input names are compared without regard"),
        ("uses: o/r@v1\nwith:\n  a: ${{ toJSON(secrets) }}", "name one secret, like secrets.NAME"),
        ("uses: o/r@v1\nname: ${{ secrets.X }}", "secrets can only be used in env, run and with"),
        ("uses: o/r@v1\nwith:\n  -x: 1", "'-x' is not an input name"),
        ("uses: ${{ matrix.action }}", "expressions are not allowed in uses"),
        ("run: echo a\nuses: forge-ci/checkout@v1", "either run or uses, not both"),
        ("name: nothing", "a step needs run"),
        ("run: echo a\nwith:\n  x: 1", "'with' is for actions"),
        ("run: echo a\nworking_directory: a", 'did you mean "working-directory"?'),
        ("run: echo a\nshell: zsh", "shell 'zsh' is not supported; use bash, sh, python"),
        ("run: echo ${{ github.head_ref }}\nshell: python", "shell python cannot read the values"),
        ("run: echo a\nshell: bash -e", "shell 'bash -e' is not supported"),
        ("run: ''", "run must not be empty"),
        ("run:", "run must be a string"),
        ("run: echo a\ntimeout-minutes: 0", "from 1 through 360"),
        ("run: echo a\ntimeout-minutes: 361", "from 1 through 360"),
        ("run: echo a\ntimeout-minutes: '5'", "from 1 through 360"),
        ("run: echo a\ntimeout-minutes: 1.5", "from 1 through 360"),
        ("run: echo a\ncontinue-on-error: yes", "continue-on-error must be true or false"),
        ("run: echo a\ncontinue-on-error: x${{ true }}", "true, false or one ${{ }} expression"),
    ],
)
def test_refused_steps(refuse: Refuse, step: str, reason: str) -> None:
    assert reason in messages(refuse(steps(step)))


def test_one_checkout_per_job(refuse: Refuse) -> None:
    diagnostics = refuse(steps("uses: forge-ci/checkout@v1", "uses: actions/checkout@v3"))
    assert diagnostics == [
        Diagnostic(7, 15, "a job has at most one checkout step (the first is at line 6)")
    ]


def test_steps_must_be_a_non_empty_list(refuse: Refuse) -> None:
    assert "steps must list at least one step" in messages(
        refuse(HEAD.replace("steps:\n", "steps: []\n"))
    )
    assert "steps must be a list" in messages(refuse(HEAD + "      run: echo\n"))
    assert "a step must be a mapping" in messages(refuse(HEAD + "      - echo hi\n"))


def test_at_most_64_steps(plan_of: PlanOf, refuse: Refuse) -> None:
    assert len(plan_steps(plan_of(steps(*["run: echo"] * 64)))) == 64
    diagnostics = refuse(steps(*["run: echo"] * 65))
    assert diagnostics == [Diagnostic(70, 9, "a job has at most 64 steps")]


def test_shell_and_working_directory_precedence(plan_of: PlanOf) -> None:
    text = (
        "on: push\ndefaults:\n  run:\n    shell: sh\n    working-directory: w\n"
        "jobs:\n  build:\n    runs-on: self-hosted\n    defaults:\n      run:\n"
        "        working-directory: j\n    steps:\n      - run: a\n"
        "      - run: b\n        shell: bash\n        working-directory: s\n"
    )
    first, second = plan_steps(plan_of(text))
    assert (first["shell"], first["working_directory"]) == ("sh", "j")
    assert (second["shell"], second["working_directory"]) == ("bash", "s")


def test_omitted_shell_stays_unspecified(plan_of: PlanOf) -> None:
    (step,) = plan_steps(plan_of(steps("run: a")))
    assert step["shell"] is None


@pytest.mark.parametrize(
    ("path", "normal"),
    [
        ("a", "a"),
        ("a/b", "a/b"),
        ("./a", "a"),
        ("a.b/c-d", "a.b/c-d"),
        ("with space", "with space"),
        # Empty components mean nothing to a path, as on GitHub's runner.
        ("a//b", "a/b"),
        ("a/", "a"),
        ("./", "."),
        (".", "."),
    ],
)
def test_valid_working_directories(path: str, normal: str, plan_of: PlanOf) -> None:
    assert working_directory_problem(path) is None
    assert normal_directory(path) == normal
    (step,) = plan_steps(plan_of(steps(f"run: a\nworking-directory: '{path}'")))
    assert step["working_directory"] == normal


@pytest.mark.parametrize(
    "path", ["", "/abs", "~/x", "C:/x", "c:", "a/../b", "..", "a//../b", "a\\b", "a\x01b"]
)
def test_refused_working_directories(path: str) -> None:
    assert working_directory_problem(path) is not None


def test_working_directory_may_be_an_expression(plan_of: PlanOf, refuse: Refuse) -> None:
    plan = plan_of(steps("run: a\nworking-directory: ${{ github.workspace }}/build"))
    directory = plan["jobs"][0]["steps"][0]["working_directory"]
    assert directory == {"template": [{"expr": "github.workspace"}, "/build"]}
    diagnostics = refuse(steps("run: a\nworking-directory: ${{ secrets.X }}"))
    assert "(not in working-directory)" in messages(diagnostics)


def test_defaults_working_directory_stays_literal(refuse: Refuse) -> None:
    # The workflow's defaults.run takes no contexts on GitHub; a job's may (test_on_github.py).
    text = steps("run: a").replace(
        "jobs:", "defaults:\n  run:\n    working-directory: ${{ github.workspace }}\njobs:"
    )
    assert "expressions are not allowed in working-directory" in messages(refuse(text))


def test_defaults_keys_are_checked(refuse: Refuse) -> None:
    text = steps("run: a").replace("jobs:", "defaults:\n  shell: bash\n  run:\n    shel: sh\njobs:")
    assert "'shell' is not a defaults key" in messages(refuse(text))
    assert 'did you mean "shell"?' in messages(refuse(text))


def test_step_ids(refuse: Refuse, plan_of: PlanOf) -> None:
    planned = plan_steps(plan_of(steps("run: a\nid: _x", "run: b\nid: a-b_2", "run: c")))
    assert [(s["id"], s["generated_id"]) for s in planned] == [
        ("_x", False),
        ("a-b_2", False),
        ("step_3", True),
    ]
    for bad, reason in [
        ("1a", "the id '1a' is invalid"),
        ("a.b", "the id 'a.b' is invalid"),
        ("__x", "ids starting with '__' are reserved"),
        ("a" * 100, "stay under 100 characters"),
    ]:
        assert reason in messages(refuse(steps(f"run: a\nid: {bad}")))


def test_duplicate_step_ids_are_refused_without_regard_to_case(refuse: Refuse) -> None:
    diagnostics = refuse(steps("run: a\nid: build", "run: b\nid: Build"))
    assert diagnostics == [
        Diagnostic(
            9,
            13,
            "the step id 'Build' is already used in this job (line 7); ids are compared without "
            "regard to case",
        )
    ]


def test_generated_ids_never_collide_with_written_ones(plan_of: PlanOf) -> None:
    planned = plan_steps(
        plan_of(steps("run: a\nid: step_2", "run: b", "run: c\nid: STEP_3_2", "run: d"))
    )
    ids = [s["id"] for s in planned]
    assert ids == ["step_2", "step_2_2", "STEP_3_2", "step_4"]
    assert len({i.lower() for i in ids}) == 4


def test_continue_on_error(plan_of: PlanOf) -> None:
    planned = plan_steps(
        plan_of(
            steps(
                "run: a\ncontinue-on-error: true",
                "run: b\nid: b",
                "run: c\ncontinue-on-error: ${{ steps.b.outcome == 'failure' }}",
            )
        )
    )
    assert [s["continue_on_error"] for s in planned] == [
        True,
        False,
        {"expr": "steps.b.outcome == 'failure'"},
    ]


@pytest.mark.parametrize(
    ("written", "planned"),
    [
        ("Python", "python"),
        ("pwsh", "pwsh"),
        ("cmd", "cmd"),
        ("bash -l {0}", "bash -l {0}"),
        ("bash --noprofile --norc -exo pipefail {0}", "bash --noprofile --norc -exo pipefail {0}"),
        ("Rscript {0}", "Rscript {0}"),
    ],
)
def test_githubs_shells_and_templates_are_planned(
    plan_of: PlanOf, written: str, planned: str
) -> None:
    (step,) = plan_steps(plan_of(steps(f"run: echo ${{{{ runner.os }}}}\nshell: {written}")))
    assert step["shell"] == planned


def test_the_checkout_may_have_an_if(plan_of: PlanOf) -> None:
    (step,) = plan_steps(plan_of(steps("uses: actions/checkout@v4\nif: github.ref == 'x'")))
    assert step["if"] == "success() && (github.ref == 'x')"
