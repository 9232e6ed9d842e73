"""Shared fixtures. Integration tests use the real parts: Ray on this machine, quietly.

The expensive real parts are started once and shared (each is still the real thing):

- ``ray_session``: one Ray cluster for this process (2 CPUs), started on first ask and kept until the end; the
  process joins it for each test that asks for it (directly or through a fixture) and leaves it before a test
  that does not (no Ray in the process during a test that did not ask: a test must not pass only because a
  cluster happened to be joined). Modules that ask for it run next to each other
  (:func:`pytest_collection_modifyitems`). An in-process ``generate`` or sweep job reuses it (and leaves it
  running). Do not use it where a test starts its own cluster (``tests.cluster_support.local_cluster``) or
  checks how a run starts Ray (``ray.num_cpus``, ``ray.address``).
- ``ray_address``: that Ray's address, for a ``shp-sweep`` subprocess to join (``ray.address=...``).
- ``embedder_factory``: ``embedder_factory(batch_size=16)`` is a fresh :class:`Embedder` (its own cache and
  counters) over the one real all-MiniLM-L6-v2 loaded for the suite.
- ``embedded_llm``: ``embedded_llm("qwen2.5-coder-0.5b-instruct")`` is a running embedded llama.cpp server of
  that model, one per model for the suite (1 thread), stopped at the end. Never kill it or change it: a test
  that does starts its own ``LlamaServer``.
- ``small_store``: a synthetic store to read, never write.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a failure is reproduced by rerunning, never by luck) and
# keep no example database in the checkout (.hypothesis/).
settings.register_profile("shp-suite", derandomize=True, database=None, print_blob=True)
settings.load_profile("shp-suite")

# Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`) each worker is its own process with its own Ray,
# embedded servers and embedder, and gets a temp folder of its own (inside the run's): a worker's Ray never finds
# the other's record (`ray_current_cluster`), and no_shp_temp_leftovers sees only its own worker's entries.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_RUN_TMP = tempfile.gettempdir()  # the run's temp folder (make test's), before a worker takes one inside it
if _XDIST_WORKER:
    os.environ["TMPDIR"] = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix=f"{_XDIST_WORKER}.")
    tempfile.tempdir = None  # read TMPDIR again
    atexit.register(shutil.rmtree, os.environ["TMPDIR"], True)

# What reading a store records (verified parts, kept derived files: storage.user_cache) goes to the user's cache
# directory; the suite's goes to a folder of its own, removed at exit (set before any Ray worker or subprocess
# starts, so they inherit it). Not named shp-*: no_shp_temp_leftovers watches those.
os.environ["SHP_RAY_CACHE"] = tempfile.mkdtemp(prefix="shp_ray_cache-")
atexit.register(shutil.rmtree, os.environ["SHP_RAY_CACHE"], True)


def _shp_temp_entries(tmp: str) -> set[str]:
    try:
        return {name for name in os.listdir(tmp) if name.startswith("shp-")}
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def no_shp_temp_leftovers():
    """Fail a test that leaves new ``shp-*`` entries in the temp folder (spill folders, logs, ...)."""
    tmp = tempfile.gettempdir()  # read now: a test may point tempfile elsewhere for its own duration
    before = _shp_temp_entries(tmp)
    yield
    added = sorted(_shp_temp_entries(tmp) - before)
    if added:
        pytest.fail(f"the test left {len(added)} entr{'y' if len(added) == 1 else 'ies'} in {tmp}: {', '.join(added)}")


RAY_FIXTURE = "ray_session"
_ray_modules: set[object] = set()  # the test modules where some test asks for it

# Under `--dist loadgroup` (`make test`) a module runs whole on one worker (its module fixtures set up once), and
# the modules that share a session fixture run on the same worker, so it starts once: one Ray, one embedded
# server per model, one loaded embedder. A module marked ``pytest.mark.xdist_group("name")`` joins that group (the
# real-cluster modules share "ray-clusters": two multi-node clusters side by side on two cores would starve each
# other's raylets). Grouping saves starts only: every worker has its own session fixtures, so a module runs the
# same on any worker.
SHARED_FIXTURE_GROUPS = {
    RAY_FIXTURE: "shared-ray",
    "ray_address": "shared-ray",
    "embedded_llm": "embedded-llm",
    "embedder_factory": "embedder",
}
# Groups that take longest, sent to the workers first (wall time only: a group's tests run the same either way).
FIRST_GROUPS = ("shared-ray", "ray-clusters")


@functools.cache
def worker_group(module_file: Path) -> str:
    """The worker group of a test module, read from its text: the controller schedules before any worker has
    imported a module (and xdist 3.8's own loadgroup reads the marks into ``item._nodeid``, which pytest 9 no
    longer reads)."""
    text = module_file.read_text()
    marked = re.search(r"xdist_group\(\"([^\"]+)\"\)", text)
    if marked:
        return marked.group(1)
    asked = _asked_fixtures(text)
    for fixture, name in SHARED_FIXTURE_GROUPS.items():
        if fixture in asked:
            return name
    return module_file.name


def _asked_fixtures(text: str) -> set[str]:
    """The parameter names of a module's tests and fixtures (a helper's ``ray_address=`` keyword is not a
    fixture asked for)."""
    import ast

    asked: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and (
            node.name.startswith("test_") or any("fixture" in ast.unparse(d) for d in node.decorator_list)
        ):
            asked.update(a.arg for a in node.args.args + node.args.kwonlyargs)
    return asked


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own choice; optional: `-p no:xdist`
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup``: xdist's scope scheduling (a whole group to one worker, the next group to the first
    worker that runs low), with the groups of :func:`worker_group`."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(config.rootpath / nodeid.split("::", 1)[0])

    return SharedFixtureScheduling(config, log)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules that use the shared Ray one after another (at the place of the first of them; the order
    is otherwise unchanged), so that Ray starts once for all of them instead of once per module; on an xdist
    worker, the groups of ``FIRST_GROUPS`` first (xdist hands out the groups in this order)."""
    modules: dict[object, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.module, []).append(item)
    groups = list(modules.values())
    with_ray = [g for g in groups if any(RAY_FIXTURE in i.fixturenames for i in g)]
    _ray_modules.update(g[0].module for g in with_ray)
    if len(with_ray) >= 2:
        groups = [sum(with_ray, []) if g is with_ray[0] else g for g in groups if g is with_ray[0] or g not in with_ray]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        first = {name: rank for rank, name in enumerate(FIRST_GROUPS)}
        groups.sort(key=lambda g: first.get(worker_group(Path(str(g[0].path))), len(first)))  # stable otherwise
    items[:] = [i for g in groups for i in g]


class _SharedRay:
    """The suite's one Ray cluster for this process, started on first ask by a helper process of its own and
    kept until the session ends; this process joins it as a driver only for the tests that ask for it.

    Joining and leaving take ~0.1 s where starting a cluster takes ~5 s and ~9 CPU-s, so a worker starts Ray
    once however its Ray and non-Ray tests interleave. The cluster keeps its record in a temp folder of its
    own: a run that looks for "the recorded cluster" never finds it by accident.
    """

    _HELPER = (
        "import sys, ray\n"
        "ray.init(num_cpus=2, include_dashboard=False, logging_level='WARNING', log_to_driver=False)\n"
        "print(ray.get_runtime_context().gcs_address, flush=True)\n"
        "sys.stdin.read()\n"  # until the suite's process ends (killed included: the pipe closes)
        "ray.shutdown()\n"
    )

    def __init__(self) -> None:
        self.helper: subprocess.Popen | None = None
        self.folder = ""
        self.address = ""
        self.joined = False

    def up(self):  # noqa: ANN201 - the ray module
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        import ray

        if self.helper is None:
            # In the run's temp folder, not the worker's: Ray's socket paths must fit in 107 bytes.
            self.folder = tempfile.mkdtemp(prefix="r", dir=_RUN_TMP)
            env = {**os.environ, "RAY_TMPDIR": self.folder}
            self.helper = subprocess.Popen(
                [sys.executable, "-c", self._HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
            )
            self.address = (self.helper.stdout.readline() if self.helper.stdout else "").strip()
            if not self.address:
                raise RuntimeError(f"the suite's Ray did not start (helper exit status {self.helper.wait()})")
        if not ray.is_initialized():
            ray.init(address=self.address, logging_level="WARNING", log_to_driver=False)
            self.joined = True
        return ray

    def down(self) -> None:
        """Leave the cluster (it keeps running, idle): the next test finds no Ray in this process. The named
        actors the tests left (limiters are detached: they outlive a run by design) go first."""
        if not self.joined:
            return
        import ray

        if ray.is_initialized():
            for actor in ray.util.list_named_actors(all_namespaces=True):
                with contextlib.suppress(ValueError):
                    ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]))
            ray.shutdown()
        self.joined = False

    def stop(self) -> None:
        self.down()
        if self.helper is not None:
            try:
                self.helper.communicate(timeout=60)  # closes its stdin: it stops its cluster and exits
            except subprocess.TimeoutExpired:
                self.helper.kill()
                self.helper.wait()
            self.helper = None
            shutil.rmtree(self.folder, ignore_errors=True)


_shared_ray = _SharedRay()


@pytest.fixture(scope="module")
def ray_session():
    """Ray in this process (2 CPUs), shared by every test that asks for it (see the top)."""
    return _shared_ray.up()


@pytest.fixture(scope="module", autouse=True)
def ray_only_in_modules_that_ask(request: pytest.FixtureRequest) -> None:
    """Before a module's own fixtures: this process leaves the shared Ray if no test of the module asks for it
    (a module fixture that runs a generation must start its own Ray, as it would alone)."""
    if request.module not in _ray_modules:
        _shared_ray.down()


@pytest.fixture(autouse=True)
def ray_only_where_asked(request: pytest.FixtureRequest) -> None:
    """Before each test: this process is joined to the shared Ray if the test asks for ``ray_session`` (directly
    or through a fixture), and has left it if it does not -- a test that starts its own Ray or cluster, or
    checks how a run starts one, finds no Ray in this process."""
    if RAY_FIXTURE in request.fixturenames:
        _shared_ray.up()
    else:
        _shared_ray.down()


@pytest.fixture
def ray_address(ray_session) -> Iterator[str]:
    """``ray.address=<this>`` makes a ``shp-sweep`` subprocess join the suite's Ray instead of starting its own
    (Ray's own processes cost ~6 s and ~5 CPU-s per start): for a test whose subject is not how a run starts Ray.
    The detached rate limiters such a run leaves (one per endpoint it called: on a long-lived cluster they outlive
    the run by design) are removed afterwards; the run's other actors died with its driver."""
    from shp_ray.providers.shared_limiter import LIMITER_PREFIX

    yield ray_session.get_runtime_context().gcs_address
    for actor in ray_session.util.list_named_actors(all_namespaces=True):
        if actor["name"].startswith(LIMITER_PREFIX):
            ray_session.kill(ray_session.get_actor(actor["name"], namespace=actor["namespace"]))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _shared_ray.stop()


@pytest.fixture(scope="session")
def embedder_factory():
    """``embedder_factory(**kw)``: a fresh real Embedder (own LRU cache and counters) over the suite's one
    loaded all-MiniLM-L6-v2 (loading it is what costs: torch, the weights)."""
    from shp_ray.generation.config import DEFAULT_EMBEDDER
    from shp_ray.generation.embedder import Embedder

    loaded = Embedder(DEFAULT_EMBEDDER)._load()

    def make(**kw: object) -> Embedder:
        e = Embedder(**kw)  # type: ignore[arg-type]
        if e.model_spec == DEFAULT_EMBEDDER:
            e._model = loaded  # the same weights, read only: sharing them changes nothing a test can see
        return e

    return make


@pytest.fixture(scope="session")
def embedded_llm():
    """``embedded_llm(alias)``: the suite's running embedded llama.cpp server for ``alias`` (started on first
    use, 1 thread, stopped at the end). Read-only use: a test that kills or reconfigures a server starts its own."""
    from shp_ray.providers.llama import MODEL_ALIAS, LlamaServer

    servers: dict[str, LlamaServer] = {}

    def get(alias: str = MODEL_ALIAS) -> LlamaServer:
        server = servers.get(alias)
        if server is None or not server.running:
            server = servers[alias] = LlamaServer(alias=alias, n_threads=1).start()
        return server

    yield get
    for server in servers.values():
        server.stop()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def small_store(tmp_path_factory):
    """A small synthetic store (12 trajectories x 3 rounds, real schemas) for the whole suite: read it, never write."""
    from storage.synthetic import SyntheticSpec, write_synthetic_store

    root = tmp_path_factory.mktemp("small-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=12, rounds=3, seed=5))
    return root
