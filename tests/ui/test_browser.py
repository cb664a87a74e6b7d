"""`bigtrain ui` in a real headless Chromium (Debian's chromium + chromium-driver, installed by
`make browser`, driven by selenium): open the runs page, follow a run to its DAG, open the pushed
model and walk its lineage to the raw input, open a diff, see a curve. A screenshot of each page
goes to build/ui-screenshots/. Outside CI, without Chromium, the tests skip naming the reason
(build/browser/unavailable); in CI that is an error."""

import os
import pathlib
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BROWSER_DIR = ROOT / "build" / "browser"
SHOTS = ROOT / "build" / "ui-screenshots"

pytestmark = pytest.mark.slow


def _driver_paths() -> tuple[str, str]:
    env_file = BROWSER_DIR / "env"
    if not env_file.exists():
        reason = ((BROWSER_DIR / "unavailable").read_text().strip()
                  if (BROWSER_DIR / "unavailable").exists() else "run `make browser` first")
        if os.environ.get("CI"):
            pytest.fail(f"Chromium for the browser tests is unavailable in CI: {reason}")
        pytest.skip(f"Chromium unavailable: {reason}")
    env = dict(line.split("=", 1) for line in env_file.read_text().split())
    return env["BIGTRAIN_TEST_CHROMIUM"], env["BIGTRAIN_TEST_CHROMEDRIVER"]


@pytest.fixture(scope="module")
def server(open_lineage, ui_home):
    from werkzeug.serving import make_server
    from pipeline.lineage.web.app import create_app
    from runners.local.home import readable_folders
    httpd = make_server("127.0.0.1", 0, create_app(open_lineage, readable_folders(str(ui_home))),
                        threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    chromium, chromedriver = _driver_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    driver.set_page_load_timeout(30)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def _follow(browser, element, url_part: str) -> None:
    """Click a link or button and wait for the page it opens (find_element would otherwise
    read the page being left)."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
    before = browser.current_url
    element.click()
    WebDriverWait(browser, 20).until(lambda b: b.current_url != before
                                     and expected_conditions.url_contains(url_part)(b))


def _shot(browser, name):
    browser.save_screenshot(str(SHOTS / f"{name}.png"))


def test_runs_page_to_run_dag(browser, server):
    from selenium.webdriver.common.by import By
    browser.get(server + "/")
    ids = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "a.run-id")]
    assert ids[0] == "run-c" and ids[-1] == "run-a"
    _shot(browser, "runs")
    _follow(browser, browser.find_element(By.LINK_TEXT, "run-a"), "/run/run-a")
    assert browser.find_element(By.ID, "run-id").text == "run-a"
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "svg.graph text")]
    assert any(label.startswith("Trainer") for label in labels)
    _shot(browser, "run")


def test_pushed_model_lineage_to_raw_input(browser, server):
    from selenium.webdriver.common.by import By
    browser.get(server + "/models")
    _shot(browser, "models")
    _follow(browser, browser.find_elements(By.CSS_SELECTOR, "a.pushed")[0], "/artifact/")  # version 2
    assert "PushedModel" in browser.find_element(By.TAG_NAME, "h1").text
    _shot(browser, "artifact-pushed")
    _follow(browser, browser.find_element(By.CSS_SELECTOR, "a.input-model"), "/artifact/")
    assert "Model" in browser.find_element(By.TAG_NAME, "h1").text
    assert browser.find_element(By.ID, "fine-tuned-from").is_displayed()
    _shot(browser, "artifact-model")
    _click_a_graph_node(browser)
    _follow(browser, browser.find_element(By.CSS_SELECTOR, "a.input-examples"), "/artifact/")
    raw = browser.find_element(By.ID, "raw-input").text
    assert "/data/corpus/*.txt" in raw
    _shot(browser, "artifact-examples")


def _click_a_graph_node(browser) -> None:
    """Click an artifact node of the lineage graph (an SVG link): the browser lands on that
    artifact's page. Catches graph nodes that link nowhere or to another id."""
    from selenium.webdriver.common.by import By
    here = browser.current_url.rsplit("/", 1)[1]
    nodes = [a for a in browser.find_elements(By.CSS_SELECTOR, "svg.graph a")
             if (a.get_dom_attribute("href") or "").startswith("/artifact/")
             and a.get_dom_attribute("href").rsplit("/", 1)[1] != here]
    target = nodes[0].get_dom_attribute("href").rsplit("/", 1)[1]
    _follow(browser, nodes[0].find_element(By.TAG_NAME, "text"), f"/artifact/{target}")
    assert browser.current_url.endswith(f"/artifact/{target}")
    assert browser.find_element(By.TAG_NAME, "h1").text.endswith(f"#{target}")
    browser.back()


def test_diff_and_curves(browser, server):
    from selenium.webdriver.common.by import By
    browser.get(server + "/models")
    _follow(browser, browser.find_element(By.CSS_SELECTOR, "#diff-form button"), "/diff")
    assert browser.find_element(By.ID, "diff-summary").text.startswith("data")
    _shot(browser, "diff")
    browser.get(server + "/run/run-a")
    _follow(browser, browser.find_element(By.ID, "curves-link"), "/curves")
    charts = browser.find_elements(By.CSS_SELECTOR, "#charts svg")
    assert len(charts) == 5 and charts[0].size["height"] > 100  # loss, validation, lr, tokens/s, MFU
    _shot(browser, "curves")
