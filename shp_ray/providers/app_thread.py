"""An aiohttp application served on a background thread: the hosting the in-process servers share.

The simulator (``sim.server.SimServer``) and the header-less double (``bench.headerless``) each write their own
behaviour; only this part — an event loop of its own on a thread, the port read back from the socket, startup
errors handed to the caller, a stop from any thread — is the same for both, so it is written once here.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web


class AppThread:
    """Serve ``app`` on ``host:port`` (0: a free port) until ``stop()``; ``port`` is the bound one."""

    def __init__(self, app: web.Application, *, host: str = "127.0.0.1", port: int = 0, name: str = "shp-app") -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> AppThread:
        """Return once the socket listens; a failure to bind (or to set up) is raised here, in the caller's thread."""
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(10.0):
            raise RuntimeError(f"{self.name} did not start within 10 s")
        if self._error is not None:
            raise RuntimeError(f"{self.name} failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.5)
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(web.TCPSite(runner, self.host, self.port).start())
            self.port = runner.addresses[0][1]
        except BaseException as exc:  # handed to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            for task in asyncio.all_tasks(loop):  # a stalled reply still held: ended, not left pending
                task.cancel()
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
        self._thread = None
