"""The job log viewer (static/logview/) in headless Chromium, one feature a test.

test_browser_pipelines.py covers streaming, the first search, copy, download and the collapsed
middle of a long log; these cover the rest of what a reader can do: step filters, match and error
navigation (both directions, wrapping, revealing collapsed lines), Follow and what ends it, and the
window a running job's page keeps. Each checks what must happen and what must not.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.browser import LiveServer, sign_in
from tests.web.scenario import CI, Pipelines, StandardRun, standard_run
from tests.web.test_browser_pipelines import ONE_JOB, RUN

pytestmark = pytest.mark.browser


@pytest.fixture
def pipelines(live_server: LiveServer) -> Pipelines:
    return Pipelines(live_server.settings, live_server.database)


@pytest.fixture
def standard(pipelines: Pipelines) -> StandardRun:
    return standard_run(pipelines)


def _visible_texts(page: Any) -> list[str]:
    return list(page.locator("#log .line:visible").locator(".tx").all_inner_texts())


def _completed_job(pipelines: Pipelines, lines: list[str]) -> str:
    """A completed one-step job whose log is ``lines``; returns its page's path."""
    pipelines.commit({CI: ONE_JOB})
    number = pipelines.dispatch(ONE_JOB)
    build = pipelines.claim()
    assert build is not None
    build.start()
    build.step("make", "running")
    build.log("".join(f"{line}\n" for line in lines), "make")
    build.step("make", "completed", "success", 0)
    build.complete("success")
    return f"/olivia/app/pipelines/{number}/jobs/{pipelines.job_id(number, 'build')}"


AT_END = "() => window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2"


def _at_end(page: Any) -> bool:
    return bool(page.evaluate(AT_END))


def test_step_links_filter_search_copy_and_download_without_reloading(
    page: Any, standard: StandardRun, tmp_path: Any
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, "rita")
    job = f"{RUN}/jobs/{standard.jobs['build']}"
    page.goto(job)
    compile_lines = [f"Compile line {n}" for n in (1, 2, 3)]
    package_lines = [f"Package line {n}" for n in (1, 2, 3)]
    assert _visible_texts(page) == compile_lines + package_lines
    page.evaluate("window.marker = 'same document'")

    page.click("nav.steps a[data-step='package']")
    assert _visible_texts(page) == package_lines
    assert page.locator("#log .line.filtered").count() == 3
    assert page.get_attribute("nav.steps a[data-step='package']", "aria-current") == "true"
    assert page.get_attribute("nav.steps a[data-step='']", "aria-current") is None
    assert page.url.endswith(f"{job}?step=package")
    assert page.evaluate("window.marker") == "same document"
    # Search, errors, copy and download see the selected step only.
    page.fill(".log-search", "line 2")
    assert page.locator(".search-count").inner_text() == "1 of 1"
    assert page.locator("#log mark").all_inner_texts() == ["line 2"]
    assert page.locator("#log .line:has(mark) .tx").inner_text() == "Package line 2"
    page.click(".error-next")
    assert page.locator(".log-status").inner_text() == "No error lines in the loaded output."
    page.click(".copy")
    page.wait_for_function(
        "() => document.querySelector('.log-status').textContent === 'Copied 3 lines.'"
    )
    assert page.evaluate("navigator.clipboard.readText()") == "\n".join(package_lines) + "\n"
    with page.expect_download() as info:
        page.click(".download")
    assert info.value.suggested_filename == "olivia-app-run-1-build-package.log"
    target = tmp_path / "package.log"
    info.value.save_as(target)
    assert target.read_text() == "\n".join(package_lines) + "\n"

    # Back to all steps: every line again, and the current match stays the one it was.
    page.click("nav.steps a[data-step='']")
    assert _visible_texts(page) == compile_lines + package_lines
    assert page.locator("#log .line.filtered").count() == 0
    assert page.url.endswith(job)
    assert page.locator(".search-count").inner_text() == "2 of 2"
    assert page.locator("#log mark.current").count() == 1
    assert page.locator("#log .line:has(mark.current) .tx").inner_text() == "Package line 2"
    assert page.evaluate("window.marker") == "same document"

    # A step in the address filters from the first paint, and the script keeps to it.
    page.goto(f"{job}?step=compile")
    assert _visible_texts(page) == compile_lines
    page.fill(".log-search", "line")
    assert page.locator(".search-count").inner_text() == "1 of 3"
    with page.expect_download() as info:
        page.click(".download")
    assert info.value.suggested_filename == "olivia-app-run-1-build-compile.log"


def test_search_moves_between_matches_both_ways_and_wraps(page: Any, standard: StandardRun) -> None:
    sign_in(page, "rita")
    page.goto(f"{RUN}/jobs/{standard.jobs['build']}")
    current = "#log .line:has(mark.current) .tx"
    page.fill(".log-search", "LINE")
    assert page.locator(".search-count").inner_text() == "1 of 6"
    assert page.locator("#log mark").count() == 6
    assert page.locator("#log mark.current").count() == 1
    assert page.locator(current).inner_text() == "Compile line 1"
    page.press(".log-search", "Enter")
    assert page.locator(".search-count").inner_text() == "2 of 6"
    assert page.locator(current).inner_text() == "Compile line 2"
    page.press(".log-search", "Shift+Enter")
    assert page.locator(".search-count").inner_text() == "1 of 6"
    page.click(".search-prev")  # wraps to the last match
    assert page.locator(".search-count").inner_text() == "6 of 6"
    assert page.locator(current).inner_text() == "Package line 3"
    page.click(".search-next")  # and back round to the first
    assert page.locator(".search-count").inner_text() == "1 of 6"
    assert page.locator("#log mark.current").count() == 1
    # Marks are display only: the text is unchanged, and a miss or an empty query leaves none.
    assert page.locator("#log .line .tx").nth(3).inner_text() == "Package line 1"
    page.fill(".log-search", "nothing like it")
    assert page.locator(".search-count").inner_text() == "no matches"
    assert page.locator("#log mark").count() == 0
    page.fill(".log-search", "")
    assert page.locator(".search-count").inner_text() == ""
    assert page.locator("#log mark").count() == 0
    assert page.locator("#log .line .tx").all_inner_texts()[-1] == "Package line 3"


def test_error_navigation_wraps_and_reveals_collapsed_lines(
    page: Any, pipelines: Pipelines
) -> None:
    lines = [f"step {n}" for n in range(1, 261)]
    lines[49] = "error: first"  # in the collapsed middle (lines 21-180)
    lines[119] = "FAILED second"  # also hidden
    lines[129] = "no errorless words here"  # not a whole word: not an error line
    lines[249] = "panic: third"  # in the tail that stays in view
    path = _completed_job(pipelines, lines)
    sign_in(page, "rita")
    page.goto(path)
    assert page.locator("#log .line:visible").count() == 100
    assert page.locator("#log .line.error-hit").count() == 3
    assert page.locator("#log button.expand").inner_text() == "Show 160 more lines (160 hidden)"
    page.click(".follow")
    assert page.get_attribute(".follow", "aria-pressed") == "true"

    page.click(".error-prev")  # before any error was chosen: the last one
    assert page.locator(".log-status").inner_text() == "Error line 3 of 3"
    assert page.locator("#log .current-error .tx").all_inner_texts() == ["panic: third"]
    assert page.get_attribute(".follow", "aria-pressed") == "false"  # moving to a line ends Follow
    page.click(".error-next")  # wraps to the first, which was hidden
    assert page.locator(".log-status").inner_text() == "Error line 1 of 3"
    assert page.locator("#log .current-error .tx").all_inner_texts() == ["error: first"]
    assert page.locator("#log .current-error").is_visible()
    assert page.locator("#log .line:visible").count() == 101  # only that line was revealed
    assert page.locator("#log button.expand").inner_text() == "Show 159 more lines (159 hidden)"
    page.click(".error-next")
    assert page.locator(".log-status").inner_text() == "Error line 2 of 3"
    assert page.locator("#log .current-error .tx").all_inner_texts() == ["FAILED second"]
    assert page.locator("#log .line:visible").count() == 102
    assert not page.locator("#log .line", has_text="errorless").is_visible()


def test_follow_keeps_the_end_in_view_until_the_reader_moves_up(
    page: Any, standard: StandardRun
) -> None:
    step = standard.lint.assignment.steps[0].id
    standard.lint.log("\n" + "".join(f"filler {n}\n" for n in range(1, 121)), step)
    sign_in(page, "rita")
    page.goto(f"{RUN}/jobs/{standard.jobs['lint']}")
    page.set_viewport_size({"width": 1280, "height": 600})
    assert page.locator("#log .line").count() == 123
    assert page.evaluate("window.scrollY") == 0

    page.click(".follow")
    assert page.get_attribute(".follow", "aria-pressed") == "true"
    assert _at_end(page)
    standard.lint.log("".join(f"more {n}\n" for n in range(1, 21)), step)
    page.wait_for_function("() => document.querySelectorAll('#log .line').length === 143")
    page.wait_for_function(AT_END)
    # Scrolling down, or keys typed into the search box, do not end Follow.
    page.mouse.move(600, 300)
    page.mouse.wheel(0, 200)
    page.evaluate("document.querySelector('.log-search').focus({preventScroll: true})")
    page.keyboard.press("ArrowUp")
    assert page.get_attribute(".follow", "aria-pressed") == "true"
    # Moving up through the page does; new output then leaves the reader's place alone.
    page.mouse.wheel(0, -400)
    page.wait_for_function(
        "() => document.querySelector('.follow').getAttribute('aria-pressed') === 'false'"
    )
    page.wait_for_timeout(300)
    where = page.evaluate("window.scrollY")
    standard.lint.log("".join(f"late {n}\n" for n in range(1, 21)), step)
    page.wait_for_function("() => document.querySelectorAll('#log .line').length === 163")
    assert page.evaluate("window.scrollY") == where
    assert not _at_end(page)
    # Follow again, then a key that moves up ends it too.
    page.click(".follow")
    assert _at_end(page)
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("PageUp")
    assert page.get_attribute(".follow", "aria-pressed") == "false"


def test_a_running_job_keeps_its_last_5000_lines_and_copies_them_all(
    page: Any, standard: StandardRun
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    step = standard.lint.assignment.steps[0].id
    sign_in(page, "rita")
    page.goto(f"{RUN}/jobs/{standard.jobs['lint']}")
    assert page.locator("#log .trimmed").count() == 0
    standard.lint.log("\n" + "".join(f"n {n}\n" for n in range(1, 5101)), step)
    page.wait_for_function(
        "() => document.getElementById('run-page').forgeCi?.log.lines.length === 5103",
        timeout=15_000,
    )
    assert page.locator("#log .line").count() == 5000
    assert page.locator("#log .trimmed").inner_text() == (
        "103 earlier lines are not shown (the page keeps the last 5,000); "
        "Copy and Download include them."
    )
    assert page.locator("#log .line .tx").first.inner_text() == "n 101"
    assert page.locator("#log button.expand").count() == 0  # a running job does not collapse
    # n 10, n 100-109 and n 1000-1099 match; n 10 and n 100 are no longer on the page.
    page.fill(".log-search", "n 10")
    assert page.locator(".search-count").inner_text() == "1 of 109 (in the lines shown)"
    page.click(".copy")
    page.wait_for_function(
        "() => document.querySelector('.log-status').textContent === 'Copied 5,103 lines.'"
    )
    copied = page.evaluate("navigator.clipboard.readText()").splitlines()
    assert copied[0] == "checking <script>alert('x')</script>"
    assert copied[-1] == "n 5100"


#: A Clipboard API whose write never answers (as headless Chromium's once did on a loaded
#: machine): a fault the browser cannot be made to produce on purpose.
_SILENT_CLIPBOARD = "navigator.clipboard.writeText = () => new Promise(() => {});"
#: ...and a textarea copy the browser refuses (``execCommand`` answers false).
_NO_COPY = "document.execCommand = () => false;"


@pytest.mark.parametrize("refused", [False, True], ids=["textarea-copies", "nothing-copies"])
def test_copy_says_what_happened_when_the_clipboard_never_answers(
    page: Any, pipelines: Pipelines, refused: bool
) -> None:
    path = _completed_job(pipelines, ["first", "second"])
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.add_init_script(_SILENT_CLIPBOARD + (_NO_COPY if refused else ""))
    sign_in(page, "rita")
    page.goto(path)
    assert _visible_texts(page) == ["first", "second"]
    page.click(".copy")
    expected = "Copying is not available here; use Download." if refused else "Copied 2 lines."
    page.wait_for_function(
        f"() => document.querySelector('.log-status').textContent === {expected!r}",
        timeout=10_000,
    )
    if not refused:  # the textarea's copy reached the clipboard
        assert page.evaluate("navigator.clipboard.readText()") == "first\nsecond\n"
