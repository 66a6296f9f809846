"""GET /docs: the headers here, then the page itself in a real headless Chromium over a served app."""
import json
import os
import shutil
import threading
from urllib.parse import urlsplit

import pytest
from werkzeug.serving import make_server

from api.docs_page import CONTENT_SECURITY_POLICY

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# Set to a path to keep the page's screenshot there, to look at; none is kept in the repository, where it
# would go stale (docs/decisions.md, "The reference page").
SCREENSHOT = os.environ.get("REFERENCE_PAGE_SCREENSHOT")


def test_page_needs_no_token_and_loads_nothing_from_elsewhere(client):
    response = client.get("/docs")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "Service-Version" not in response.headers
    page = response.get_data(as_text=True)
    assert "//" not in page.replace("<!DOCTYPE html>", "")
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "docs-init.js"):
        assert f'"docs/{asset}"' in page
        with client.get(f"/docs/{asset}") as served:
            assert served.status_code == 200, asset
            assert served.headers["Cache-Control"] == "public, max-age=3600"


def test_a_trailing_slash_is_redirected_to_the_page(client):
    response = client.get("/docs/")
    assert (response.status_code, response.headers["Location"], response.get_data()) == (308, "/docs", b"")
    assert ("Content-Type" in response.headers, response.headers["Content-Length"]) == (False, "0")
    assert client.get("/docs/", follow_redirects=True).request.path == "/docs"
    assert client.head("/docs/").status_code == 308


@pytest.mark.parametrize("path", ["/docs/index.html", "/docs/swagger-editor.js", "/docs/LICENSE",
                                  "/docs/..%2Fapi%2Fguard.py", "/docs/swagger-ui.css.map"])
def test_other_files_are_unknown_routes(client, path):
    assert client.get(path).status_code == 404


def test_the_page_is_described_and_its_files_are_not(client):
    document = client.get("/openapi.json").json
    page = document["paths"]["/docs"]["get"]
    assert page["security"] == []
    assert page["responses"]["200"]["content"] == {"text/html": {"schema": {"type": "string"}}}
    assert [path for path in document["paths"] if path.startswith("/docs/")] == []


@pytest.fixture(scope="module")
def served(demo_database):
    """The demo app on a real HTTP server on 127.0.0.1; yields its base URL."""
    server = make_server("127.0.0.1", 0, demo_database.app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through its chromedriver, logging the console and the network."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed "
                    "(apt-get install -y chromium chromium-driver; .ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1900",
                     "--no-first-run", "--disable-background-networking", "--disable-component-update"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # An explicit chromedriver: Selenium Manager would otherwise try to download one.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def _requested_urls(driver):
    """Every URL the page asked for since the last call, from Chromium's network log."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.mark.slow
def test_reference_page_in_chromium(demo_database, served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    document = demo_database.app.test_client().get("/openapi.json").json
    # Swagger UI lists the webhooks (OpenAPI 3.1) under their names, as operations of their own.
    operations = {(method.upper(), name) for section in ("paths", "webhooks")
                  for name, item in document[section].items() for method in item}
    wait = WebDriverWait(browser, 30)

    browser.get(f"{served}/docs")
    wait.until(lambda driver: len(driver.find_elements(By.CSS_SELECTOR, ".opblock")) >= len(operations))
    shown = {(block.find_element(By.CSS_SELECTOR, ".opblock-summary-method").text,
              block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute("data-path"))
             for block in browser.find_elements(By.CSS_SELECTOR, ".opblock")}
    assert shown == operations
    # Every operation (down to the last webhook, not the schemas below), before any token is typed in.
    height = browser.execute_script(
        "return Math.max(...[...document.querySelectorAll('.opblock')].map(b => b.getBoundingClientRect().bottom))")
    browser.set_window_size(1280, int(height) + 200)
    browser.save_screenshot(SCREENSHOT or str(tmp_path / "reference-page.png"))

    # Authorize with a pasted token, then "Try it out" on GET /organization.
    token = demo_database.headers["Authorization"].removeprefix("Bearer ")
    browser.find_element(By.CSS_SELECTOR, ".auth-wrapper .authorize").click()
    # The dialog lists every security scheme; the token goes into the `bearer` one.
    bearer = wait.until(ready.visibility_of_element_located(
        (By.XPATH, "//*[contains(@class, 'auth-container')][.//code[text()='bearer']]")))
    bearer.find_element(By.CSS_SELECTOR, "input").send_keys(token)
    bearer.find_element(By.CSS_SELECTOR, ".auth-btn-wrapper .authorize").click()
    browser.find_element(By.CSS_SELECTOR, ".modal-ux .btn-done").click()
    # Swagger UI's id for it is operations-<tag>-get_organization.
    operation = browser.find_element(By.CSS_SELECTOR, ".opblock[id$='-get_organization']")
    operation.find_element(By.CSS_SELECTOR, ".opblock-summary-control").click()
    wait.until(lambda driver: operation.find_element(By.CSS_SELECTOR, ".try-out__btn")).click()
    operation.find_element(By.CSS_SELECTOR, ".execute").click()
    status = wait.until(lambda driver: operation.find_element(
        By.CSS_SELECTOR, ".live-responses-table .response .response-col_status"))
    assert status.text.split()[0] == "200"
    body = operation.find_element(By.CSS_SELECTOR, ".live-responses-table .response-col_description pre").text
    assert '"slug": "acme"' in body

    # No console error (a CSP violation is one), and every request went to this service.
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    urls = _requested_urls(browser)
    assert f"{served}/organization" in urls
    assert {urlsplit(url).hostname for url in urls if not url.startswith("data:")} == {"127.0.0.1"}
