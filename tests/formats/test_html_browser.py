"""report.html as a person sees it: the bundled examples' pages in a real headless Chromium (Debian's ``chromium``,
driven through its ``chromedriver`` by selenium), with no console error, their charts drawn, and the outcome filter
working; with scripts off, every case still shown; a page of hostile text inert.

Skipped, saying what is missing, where Chromium, its driver or selenium is not installed (``.ci/run`` installs
all three).
"""
from __future__ import annotations

import importlib.util
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.formats.escape import clean
from envelope_ci.formats.html import CHART_MAX, render_html
from envelope_ci.report.model import Report
from tests.support.hostile import HOSTILE, hostile_report, pinned_differently
from tests.support.suites import EXAMPLES, example_report_text, run_report


def _missing() -> str | None:
    """What the test needs and this machine lacks, in words; None when nothing is."""
    if shutil.which("chromium") is None:
        return "no chromium on PATH: apt-get install chromium chromium-driver (.ci/run does)"
    if shutil.which("chromedriver") is None:
        return "no chromedriver on PATH: apt-get install chromium-driver (.ci/run does)"
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed: pip install '.[test]'"
    return None


pytestmark = [pytest.mark.skipif(_missing() is not None, reason=str(_missing())), pytest.mark.usefixtures("clean_env")]

# Bundled examples with pins (charts to draw, answers to set beside the pinned ones) and without (new cases only).
PINNED = ("support-bot", "booking-agent")
EXAMPLE_SUITES = (*PINNED, "planted", "alerts/easy-regression")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module, its console kept (``goog:loggingPrefs``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    # --no-sandbox: CI runs as root, where Chromium's sandbox will not start.
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(shutil.which("chromedriver"))))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def opened(browser: Any, page: Path) -> list[dict[str, Any]]:
    """Open ``page``; the console's errors while it loaded (the log is emptied before)."""
    browser.get_log("browser")
    browser.get(page.as_uri())
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def example_page(suite: str, tmp_path: Path) -> tuple[Path, Report]:
    """``envelope-ci run fixtures_example/SUITE --format html``, in place (git holds its pins' commit): the page, the
    report."""
    out = tmp_path / "out"
    result, data = run_report(EXAMPLES / suite, out, "--format", "html")
    assert data is not None, result.err
    return out / "report.html", Report.from_json(data)


def shown_outcomes(browser: Any) -> Counter[str]:
    """The outcomes of the case cards a reader sees."""
    from selenium.webdriver.common.by import By

    return Counter(card.get_attribute("data-outcome")
                   for card in browser.find_elements(By.CSS_SELECTOR, "#cases .case") if card.is_displayed())


@pytest.mark.parametrize("suite", EXAMPLE_SUITES)
def test_an_example_page_opens_without_a_console_error(browser: Any, suite: str, tmp_path: Path) -> None:
    page, report = example_page(suite, tmp_path)
    assert opened(browser, page) == []
    assert browser.title == f"envelope-ci: {report.verdict.value}"
    assert shown_outcomes(browser) == Counter(c.outcome.value for c in report.cases)


@pytest.mark.parametrize("suite", PINNED)
def test_an_example_page_draws_its_charts(browser: Any, suite: str, tmp_path: Path) -> None:
    page, report = example_page(suite, tmp_path)
    assert opened(browser, page) == []
    timed = sum(1 for c in report.cases if c.pin and c.pin.ms is not None and c.ms is not None)
    sized = sum(1 for c in report.cases if c.pin and c.pin.chars is not None and c.chars is not None)
    drawn = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg.chart'), svg => ({"
        " title: svg.querySelector('title').textContent,"
        " bars: Array.from(svg.querySelectorAll('rect.pin, rect.run'), r => r.getBoundingClientRect().width)}));")
    expected = {f"{what} against the pins ({unit})": count for what, unit, count in
                (("Time", "ms", timed), ("Size", "chars", sized)) if count}
    assert {chart["title"]: len(chart["bars"]) for chart in drawn} == {t: 2 * min(n, CHART_MAX) + 2
                                                                        for t, n in expected.items()}  # and the legend
    assert all(width > 0 for chart in drawn for width in chart["bars"])


@pytest.mark.parametrize("suite", ("support-bot", "planted"))
def test_clicking_an_outcome_shows_only_its_cases_and_all_shows_them_again(browser: Any, suite: str,
                                                                          tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page, report = example_page(suite, tmp_path)
    assert opened(browser, page) == []
    every = Counter(c.outcome.value for c in report.cases)
    assert len(every) > 1  # something to filter out
    for outcome, count in every.items():
        browser.find_element(By.CSS_SELECTOR, f"#filter button[data-outcome='{outcome}']").click()
        assert shown_outcomes(browser) == Counter({outcome: count})
    browser.find_element(By.CSS_SELECTOR, "#filter button[data-outcome='all']").click()
    assert shown_outcomes(browser) == every
    assert browser.get_log("browser") == []


def test_with_scripts_off_every_case_is_shown_and_the_filter_is_not(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page, report = example_page("support-bot", tmp_path)
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        opened(browser, page)
        assert not browser.find_element(By.ID, "filter").is_displayed()
        assert shown_outcomes(browser) == Counter(c.outcome.value for c in report.cases)
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart rect.run")) > 0  # drawn without a script
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def test_a_page_of_hostile_text_runs_and_loads_nothing_of_it(browser: Any, tmp_path: Path) -> None:
    example = Report.from_json(json.loads(example_report_text("support-bot")))
    report = hostile_report(example)
    page = tmp_path / "report.html"
    page.write_text(render_html(report, pinned=pinned_differently(report)), "utf-8")
    assert opened(browser, page) == []  # a blocked script or style would be a policy error here
    assert browser.title == "envelope-ci: fail"  # no injected script retitled it
    found = browser.execute_script(
        "return {scripts: document.scripts.length,"
        " foreign: document.querySelectorAll('img, iframe, object, embed, foreignObject, link, base, form').length,"
        " handlers: Array.from(document.querySelectorAll('*')).filter("
        "   e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,"
        " ids: Array.from(document.querySelectorAll('#cases .case h3 code'), c => c.textContent)};")
    assert found["scripts"] == 1 and found["foreign"] == 0 and found["handlers"] == 0
    assert found["ids"] == [clean(text) for text in HOSTILE]
