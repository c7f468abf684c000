"""A headless Chromium driven through ChromeDriver (the W3C WebDriver protocol over HTTP, with the
standard library only), with no network: every request that is not for a local file goes to a
proxy on this machine that refuses it and records it. The documentation's offline test and the
diagram renderer use it.

Debian: apt-get install chromium chromium-driver (.ci/run does it when they are missing).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

INSTALL_HINT = "install Chromium and ChromeDriver: apt-get install chromium chromium-driver"


def find_tools() -> tuple[str, str] | None:
    """(chromium, chromedriver) paths, or None when either is missing."""
    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RefusingProxy:
    """An HTTP proxy on 127.0.0.1 that answers every request with 403 and records its first line
    (`CONNECT host:443`, `GET http://...`): what the browser tried to fetch from the network."""

    def __init__(self):
        self.requests: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
                    self.requests.append(first)
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


class Browser:
    """One headless Chromium session. Use as a context manager; every call is bounded in time."""

    def __init__(self, timeout: float = 60.0, width: int = 1280, height: int = 1000):
        tools = find_tools()
        if tools is None:
            raise RuntimeError(f"no headless browser: {INSTALL_HINT}")
        self.chromium, driver = tools
        self.timeout = timeout
        self.proxy = RefusingProxy()
        self._profile = tempfile.mkdtemp(prefix="browser-profile-")
        port = _free_port()
        self._base = f"http://127.0.0.1:{port}"
        self._driver = subprocess.Popen(
            [driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.session = None
        try:
            self._wait_for_driver()
            args = [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                # Everything but local files goes to the refusing proxy, loopback included.
                f"--proxy-server=http://127.0.0.1:{self.proxy.port}",
                "--proxy-bypass-list=<-loopback>",
                # file:// pages may read other local files (a canvas may inspect a local image).
                "--allow-file-access-from-files",
            ]
            options = {"binary": self.chromium, "args": args}
            capabilities = {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": options,
                    # DevTools network events of the pages, for requests()
                    "goog:loggingPrefs": {"performance": "ALL"},
                }
            }
            self.session = self._call("POST", "/session", {"capabilities": capabilities})["sessionId"]
            ms = int(timeout * 1000)
            self._call("POST", f"/session/{self.session}/timeouts", {"script": ms, "pageLoad": ms, "implicit": 0})
        except BaseException:
            self.close()
            raise

    def _wait_for_driver(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._driver.poll() is not None:
                raise RuntimeError(f"chromedriver exited with status {self._driver.returncode}")
            try:
                with urllib.request.urlopen(f"{self._base}/status", timeout=2) as response:
                    if json.load(response)["value"].get("ready"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError("chromedriver did not start within 20 s")

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        request = urllib.request.Request(self._base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the driver is local
        try:
            with opener.open(request, timeout=self.timeout + 10) as response:
                return json.load(response)["value"]
        except urllib.error.HTTPError as error:
            detail = json.load(error).get("value", {})
            raise RuntimeError(f"WebDriver {path}: {detail.get('error')}: {detail.get('message')}") from None

    def open(self, url: str) -> None:
        """Loads url and waits for its load event."""
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str, *args):
        """Runs a function body in the page and returns its result (JSON values)."""
        return self._call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": list(args)})

    def run_async(self, script: str, *args):
        """Runs a function body whose last argument is a callback taking the result."""
        return self._call("POST", f"/session/{self.session}/execute/async", {"script": script, "args": list(args)})

    def requests(self) -> list[str]:
        """URLs that the pages requested (loaded or not) since the last call, from the browser's
        DevTools network events: the pages' own requests, not the browser's background traffic."""
        entries = self._call("POST", f"/session/{self.session}/se/log", {"type": "performance"})
        urls = []
        for entry in entries:
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls

    def screenshot(self, path: Path) -> Path:
        Path(path).write_bytes(base64.b64decode(self._call("GET", f"/session/{self.session}/screenshot")))
        return Path(path)

    def close(self) -> None:
        try:
            if self.session:
                self._call("DELETE", f"/session/{self.session}")
        except (RuntimeError, OSError):
            pass
        finally:
            self.session = None
            if self._driver.poll() is None:
                os.killpg(self._driver.pid, 15)  # chromedriver and the browsers it started
                try:
                    self._driver.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self._driver.pid, 9)
                    self._driver.wait(timeout=10)
            self.proxy.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
