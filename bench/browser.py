"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client): what opens the HTML report
in a real browser, for tests/test_report_browser.py and ``shp-bench report``.

    async with Chromium.start(profile_dir) as page:
        await page.open(Path("report/index.html"))         # returns once the page's load event has fired
        await page.evaluate("document.title")
        page.errors                                         # console errors and uncaught exceptions, as text

Every wait is on a protocol event or a promise in the page, with a deadline; none is a sleep.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-allow-origins=*",
)  # fmt: skip
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
DEADLINE_S = 60.0


class BrowserError(RuntimeError):
    """Chromium did not start, or the page did not answer in time."""


def find_chromium() -> str | None:
    """The Chromium binary on PATH (the OS package: ``apt-get install chromium``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    """One tab of the browser: send commands, wait for events, collect console errors."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._next = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._waiters: list[tuple[str, asyncio.Future]] = []
        self.errors: list[str] = []
        self.requests: list[str] = []  # every URL the page asked for (a self-contained page: its own file only)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            m = json.loads(msg.data)
            if "id" in m:
                fut = self._pending.pop(m["id"], None)
                if fut and not fut.done():
                    fut.set_result(m)
                continue
            self._note(m["method"], m.get("params", {}))
            for item in [w for w in self._waiters if w[0] == m["method"]]:
                self._waiters.remove(item)
                if not item[1].done():
                    item[1].set_result(m.get("params", {}))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(BrowserError("the browser closed the connection"))

    def _note(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.errors.append(str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(f"{params['entry'].get('source')}: {params['entry'].get('text')}")

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._next] = fut
        await self._ws.send_str(json.dumps({"id": self._next, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, DEADLINE_S)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def expect(self, method: str) -> asyncio.Future:
        """A future set by the next ``method`` event (ask before causing it)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((method, fut))
        return fut

    async def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited), or BrowserError with the page's error."""
        res = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise BrowserError(str(d.get("exception", {}).get("description") or d.get("text")))
        return res["result"].get("value")

    async def open(self, path: Path) -> None:
        """Navigate to a file and return once its load event has fired."""
        loaded = self.expect("Page.loadEventFired")
        await self.send("Page.navigate", url=path.resolve().as_uri())
        await asyncio.wait_for(loaded, DEADLINE_S)

    async def screenshot(self, path: Path) -> Path:
        res = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(res["data"]))
        return path


class Chromium:
    @staticmethod
    @contextlib.asynccontextmanager
    async def start(
        profile: Path, binary: str | None = None, width: int = 1400, height: int = 1000
    ) -> AsyncIterator[Page]:
        """Start a fresh headless Chromium (its own ``profile`` folder) and yield its first tab, ready."""
        exe = binary or find_chromium()
        if exe is None:
            raise BrowserError("no Chromium on PATH (install it: apt-get install -y chromium)")
        proc = await asyncio.create_subprocess_exec(
            exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        drain = None
        try:
            url = await asyncio.wait_for(_listening(proc), DEADLINE_S)
            drain = asyncio.get_running_loop().create_task(_drain(proc))  # a full stderr pipe would stall it
            port = re.search(r":(\d+)/", url).group(1)  # type: ignore[union-attr]  # ws://host:port/...
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                    targets = await resp.json()
                ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
                async with http.ws_connect(ws_url, max_msg_size=0) as ws:
                    page = Page(ws)
                    for domain in ("Page", "Runtime", "Log", "Network"):
                        await page.send(f"{domain}.enable")
                    await page.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                                    deviceScaleFactor=1, mobile=False)  # fmt: skip
                    yield page
        finally:
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()
            if drain is not None:
                await drain


async def _listening(proc: asyncio.subprocess.Process) -> str:
    said: list[str] = []
    while True:
        line = await proc.stderr.readline()  # type: ignore[union-attr]  # started with stderr=PIPE
        if not line:
            raise BrowserError("Chromium exited before it listened: " + " | ".join(said[-5:]))
        text = line.decode(errors="replace").strip()
        said.append(text)
        found = _LISTENING.search(text)
        if found:
            return found.group(1)


async def _drain(proc: asyncio.subprocess.Process) -> None:
    while await proc.stderr.readline():  # type: ignore[union-attr]  # started with stderr=PIPE
        pass
