"""Sweeps and batch builds on a Dask distributed cluster (``--cluster ADDRESS``).

``hlsnn sweep --cluster tcp://host:8786`` and ``hlsnn build A.yaml B.yaml --cluster ...`` send
each point (each config) to a running Dask scheduler as one task (``client.submit(...,
retries=2, pure=False)``). Workers are not assumed to share a file system with the submitting
machine: a task's inputs are bytes (the variant's YAML, its board file, and for C-simulation the
kernel rendered on the submitting machine, every file of the project), and its outputs come back
as bytes (the row as JSON, a built overlay as a tar archive). A worker runs in a temporary folder
of its own and removes it afterwards. What the submitting machine writes (plot, overlays) goes
through :mod:`hlsnn.files` (atomic renames), so nothing half-written is left.

A worker that dies while running a task (out of memory, killed by the batch system) makes the
scheduler run the task on another worker; after ``distributed.scheduler.allowed-failures`` such
deaths (default 3), or a task that raised on every one of its attempts, the point gets its row
with the reason and the sweep goes on.

dask is imported only here, and only when ``--cluster`` is given (``pip install
"hlsnn[cluster]"``). Locally (no ``--cluster``) nothing of this module runs.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

from .errors import HlsnnError, InputError, MissingDependency, excerpt, printable

#: Seconds to wait for the scheduler to answer (``$HLSNN_CLUSTER_TIMEOUT`` overrides it).
CONNECT_TIMEOUT_S = 10.0
#: The longest wait ``$HLSNN_CLUSTER_TIMEOUT`` may ask for: ten minutes (a scheduler that has not
#: answered by then is not coming; a longer wait only delays the error line).
MAX_CONNECT_TIMEOUT_S = 600.0
#: The address schemes a :class:`distributed.Client` can reach from here (``inproc://`` is within
#: one process only, ``ucx://`` needs UCX-Py and a UCX network).
SCHEMES = ("tcp", "tls", "ws", "wss")
#: Retries of a task that raised (a worker's death is retried by the scheduler itself).
RETRIES = 2
#: Test-only hook: when this environment variable names a file that does not exist, the first task
#: that sees it creates the file and kills its own worker process (SIGKILL), as an out-of-memory
#: kill would; the scheduler then runs the task again elsewhere (tests/test_sweep_cluster.py).
KILL_ONCE_ENV = "HLSNN_TEST_KILL_WORKER_ONCE"
#: Test-only hook: the task of the variant (or config) of this name kills its worker every time,
#: so the scheduler gives it up (KilledWorker) and its row must say why.
KILL_ALWAYS_ENV = "HLSNN_TEST_KILL_WORKER_FOR"

_INSTALL = 'pip install "hlsnn[cluster]" (dask[distributed])'
_FORM = f"write SCHEME://HOST:PORT with SCHEME one of {', '.join(SCHEMES)} (e.g. tcp://10.0.0.5:8786)"
_ADDRESS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)"
                      r":(?P<port>[0-9]{1,5})")


def check_address(address) -> str:
    """``address`` (stripped) when it is ``SCHEME://HOST:PORT`` with a scheme of :data:`SCHEMES`
    and a port 1..65535, else :class:`InputError` naming what is wrong and what is allowed.
    Checked before dask is asked anything."""
    if not isinstance(address, str) or not address.strip():
        raise InputError(f"--cluster: give the scheduler's address; {_FORM}")
    a = address.strip()
    shown = printable(a if len(a) <= 80 else a[:77] + "...")
    scheme = a.split("://", 1)[0] if "://" in a else None
    if scheme is not None and scheme.lower() not in SCHEMES:
        raise InputError(f"--cluster {shown}: scheme {scheme!r} is not one hlsnn can reach a Dask scheduler by; "
                         f"{_FORM}")
    m = _ADDRESS.fullmatch(a)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        raise InputError(f"--cluster {shown}: not a scheduler address; {_FORM}")
    return a


def connect_timeout(timeout=None) -> float:
    """The seconds to wait for the scheduler: ``timeout``, else ``$HLSNN_CLUSTER_TIMEOUT``, else
    :data:`CONNECT_TIMEOUT_S`; a finite number in (0, :data:`MAX_CONNECT_TIMEOUT_S`], else
    :class:`InputError`."""
    what = "timeout"
    if timeout is None:
        env = os.environ.get("HLSNN_CLUSTER_TIMEOUT", "").strip()
        if not env:
            return CONNECT_TIMEOUT_S
        what, timeout = "HLSNN_CLUSTER_TIMEOUT", env
    try:
        v = float(timeout)
    except (TypeError, ValueError):
        v = float("nan")
    if not 0 < v <= MAX_CONNECT_TIMEOUT_S:
        raise InputError(f"{what}={excerpt(timeout, 40)}: must be a number of seconds above 0 and at most "
                         f"{MAX_CONNECT_TIMEOUT_S:g}")
    return v


def _probe(address: str, timeout: float):
    """Open one connection to ``address`` and wait for the scheduler's handshake, all within
    ``timeout`` seconds, in an event loop of its own thread; raises TimeoutError or OSError
    (``distributed.Client`` bounds the connect but not the handshake's read)."""
    import asyncio
    import threading
    from distributed.comm import connect as comm_connect
    from distributed.security import Security

    async def go():
        comm = await asyncio.wait_for(comm_connect(address, timeout=timeout,
                                                   **Security().get_connection_args("client")), timeout)
        await comm.close()

    out = {}

    def run():
        try:
            asyncio.run(go())
        except BaseException as exc:        # handed to the caller's thread
            out["error"] = exc
    t = threading.Thread(target=run, name="hlsnn-cluster-probe", daemon=True)
    t.start()
    t.join(timeout + 5.0)
    err = out.get("error")
    if t.is_alive() or isinstance(err, asyncio.TimeoutError):
        raise TimeoutError(f"nothing answered the connection within {timeout:g} s")
    if isinstance(err, (OSError, TimeoutError)):
        raise err
    if isinstance(err, Exception):   # bytes that are no handshake: a frame length of petabytes (MemoryError), ...
        why = " ".join(str(err).split())[:120]
        raise InputError(f"--cluster {address}: what answered there is not a Dask scheduler (its first message: "
                         f"{type(err).__name__}{': ' + why if why else ''}); check the address and port")
    if err is not None:
        raise err


def connect(address: str, *, timeout: Optional[float] = None):
    """A :class:`distributed.Client` of the scheduler at ``address``, or one clear error: a bad
    address (:func:`check_address`) or timeout (:func:`connect_timeout`), dask missing
    (:class:`MissingDependency`), or no scheduler answering within ``timeout`` seconds
    (:class:`InputError`; one connection with its handshake is tried first, :func:`_probe`)."""
    address = check_address(address)
    timeout = connect_timeout(timeout)
    try:
        from distributed import Client
    except ImportError:
        raise MissingDependency(f"--cluster needs dask distributed: {_INSTALL}") from None
    if address.split("://", 1)[0].lower() == "tls":
        from distributed.security import Security
        if Security().get_connection_args("client").get("ssl_context") is None:     # distributed: a TypeError
            raise InputError(f"--cluster {address}: a tls:// scheduler needs dask's TLS settings (the config keys "
                             "distributed.comm.tls.ca-file and distributed.comm.tls.client.cert, with .client.key "
                             "unless the cert holds it); they are not set")
    try:
        _probe(address, timeout)
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        why = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(f"--cluster {address}: no Dask scheduler answered within {timeout:g} s ({why}); start "
                         f"one (dask scheduler) or check the address") from None
    except InputError:
        raise
    except ValueError as exc:       # an address dask still refuses (a host name it cannot parse)
        raise InputError(f"--cluster {address}: not a scheduler address ({' '.join(str(exc).split())[:160]}); "
                         f"{_FORM}") from None


def n_workers(client) -> int:
    """The workers the scheduler has now (at least 1, for the report)."""
    try:
        return max(1, len(client.scheduler_info().get("workers", {})))
    except Exception:   # pragma: no cover - a scheduler gone between connect and here
        return 1


def run_tasks(client, fn: Callable, payloads: list, on_done: Callable[[int, Any, Optional[str]], None]):
    """Submit ``fn(payload)`` for every payload and call ``on_done(i, result, error)`` as each
    ends (in the order they end): ``result`` the task's return value, or ``error`` a one-line
    reason (the task raised on every attempt, or its workers died too often)."""
    from distributed import as_completed
    futures = {client.submit(fn, p, retries=RETRIES, pure=False): i for i, p in enumerate(payloads)}
    try:
        for fut in as_completed(list(futures), loop=client.loop):
            i = futures[fut]
            try:
                res, err = fut.result(), None
            except Exception as exc:                        # KilledWorker, the task's own error, ...
                res = None
                name = type(exc).__name__
                if name == "KilledWorker":
                    err = "the task's worker died on every attempt (KilledWorker: out of memory or killed?)"
                else:
                    err = f"{name}: {' '.join(str(exc).split())[:300]}" if str(exc) else name
            on_done(i, res, err)
    finally:
        for fut in futures:
            fut.release()


# --------------------------------------------------------------------------- bytes in, bytes out

def pack_dir(folder) -> dict:
    """``{relative path: bytes}`` of every file under ``folder``."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def unpack(files: dict, folder) -> Path:
    """Write ``files`` (:func:`pack_dir`) under ``folder``; refuses paths that leave it."""
    folder = Path(folder)
    root = folder.resolve()
    for rel, data in files.items():
        target = (folder / rel).resolve()
        if root not in target.parents:
            raise InputError(f"cluster task: file {rel!r} is outside its folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return folder


def tar_bytes(folder, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(folder), arcname=arcname)
    return buf.getvalue()


def untar_atomic(data: bytes, dest) -> Path:
    """Unpack a :func:`tar_bytes` archive of one folder into ``dest`` (replacing it) through a
    temporary sibling folder renamed into place, so ``dest`` is either the old or the whole new one."""
    from .files import tmp_prefix
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=tmp_prefix(dest.name)))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            for m in members:
                parts = Path(m.name).parts
                if not parts or parts[0] != dest.name or ".." in parts or Path(m.name).is_absolute() \
                        or not (m.isfile() or m.isdir()):
                    raise InputError(f"cluster result for {dest.name}: unexpected archive member {m.name!r}")
            tar.extractall(tmp, members=members)
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=tmp_prefix(dest.name)))
            os.replace(dest, old / dest.name)
        os.replace(tmp / dest.name, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _maybe_kill_for_test(name=None):
    import signal
    if name is not None and os.environ.get(KILL_ALWAYS_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    marker = os.environ.get(KILL_ONCE_ENV)
    if not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _worker_config(payload: dict, tmp: Path):
    """The variant's data with its board written into ``tmp`` (the worker's own folder)."""
    data = dict(payload["data"])
    if payload.get("board_yaml") is not None:
        board = tmp / "boards" / payload["board_file"]
        board.parent.mkdir(parents=True, exist_ok=True)
        board.write_bytes(payload["board_yaml"])
        data["board"] = str(board)
    return data


# --------------------------------------------------------------------------- sweep points

def sweep_point(payload: bytes) -> bytes:
    """A dask task: one sweep variant (:func:`sweep_payload`'s bytes) -> its row as JSON bytes.
    Validation and the resource estimate run here as locally (:func:`hlsnn.variant._row`), with
    the board file written into the task's own temporary folder; with rendered files, the
    C-simulation compiles and runs them there against the emulator."""
    import pickle
    p = pickle.loads(payload)
    _maybe_kill_for_test(p["variant"]["name"])
    from .variant import _row
    with tempfile.TemporaryDirectory(prefix="hlsnn-task-") as t:
        tmp = Path(t)
        v = {**p["variant"], "data": _worker_config(p, tmp)}
        r, cfg = _row(v, p["csim"])
        if p.get("files") is not None and cfg is not None:
            r["csim"] = _csim_files(cfg, p, tmp)
        return json.dumps(r, default=_jsonable).encode()


def _csim_files(cfg, p, tmp: Path) -> dict:
    from .codegen import RenderedKernel
    from .files import sources_digest
    from .compare import compare
    from .engines import ENGINES
    from .runtime.targets import CsimTarget
    t0 = time.time()
    hls = unpack(p["files"], tmp / "build" / cfg.name / "hls")
    names = tuple(p["sources"])
    sources = tuple((f, p["files"][f]) for f in names)
    rendered = RenderedKernel(cfg, hls, names, sources_digest(sources), sources)
    try:
        tgt = CsimTarget(cfg, ENGINES[cfg.engine], rendered=rendered)
        rep = compare(cfg, "csim", seed=p["seed"], n_random=p["cases"], target_obj=tgt)
    except HlsnnError as exc:
        return {"error": str(exc), "time_s": round(time.time() - t0, 3)}
    keep = ("cases", "outputs", "mismatches", "first_mismatch", "register_mismatches", "setup_s", "run_s")
    return {**{k: rep[k] for k in keep}, "time_s": round(time.time() - t0, 3)}


def _jsonable(o):
    import numpy as np
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def board_payload(board) -> dict:
    """The board file's bytes when ``board`` (a variant's ``board:``) is a file's path."""
    if isinstance(board, str) and Path(board).is_file():
        return {"board_yaml": Path(board).read_bytes(), "board_file": Path(board).name}
    return {"board_yaml": None, "board_file": None}


def sweep_payload(v: dict, cfg, *, csim: bool, seed: int, cases: int) -> bytes:
    """The bytes of one sweep task: the variant (its data, board file) and, when ``cfg`` is
    given, the kernel rendered here into a temporary folder (every file of the project) for the
    worker to C-simulate."""
    import pickle
    p = {"variant": {k: v[k] for k in ("index", "name", "values", "source")}, "data": v["data"], "csim": csim,
         "seed": seed, "cases": cases, "files": None, "sources": None, **board_payload(v["data"].get("board"))}
    if cfg is not None:
        from .codegen import render
        with tempfile.TemporaryDirectory(prefix="hlsnn-render-") as t:
            rendered = render(cfg, Path(t) / "hls")
            p["files"] = pack_dir(rendered.dir)
            p["sources"] = [f for f, _ in rendered.sources]
    return pickle.dumps(p)


# --------------------------------------------------------------------------- batch builds

def build_payload(cfg, *, dry_run: bool, check: bool, jobs) -> bytes:
    """The bytes of one build task: the config with its board as data (what the config hash
    covers), the name it was given by, and the flags."""
    import pickle
    return pickle.dumps({"config": cfg.as_dict(), "path": str(cfg.path or ""), "stem": cfg.stem,
                         "dry_run": dry_run, "check": check, "jobs": jobs})


def build_point(payload: bytes) -> bytes:
    """A dask task: ``hlsnn build`` of one config in the worker's own temporary folder. Returns
    pickled bytes: ``status`` (:data:`hlsnn.build.EXIT`), ``log`` (what the build printed,
    with the worker's folder written as ``<task>``), and tar archives of the overlay (when one
    was made), the rendered HLS project and the logs."""
    import contextlib
    import pickle
    from dataclasses import replace
    p = pickle.loads(payload)
    _maybe_kill_for_test(p["stem"])
    from .build.flow import Build, main_build
    from .config import config_from_data
    d = dict(p["config"])
    cfg = config_from_data({k: v for k, v in d.items() if k != "board"}, d["board"], source=p["path"] or d["name"])
    cfg = replace(cfg, path=p["path"], stem=p["stem"])
    with tempfile.TemporaryDirectory(prefix="hlsnn-task-") as t:
        tmp = Path(t).resolve()
        root = tmp / "build" / cfg.stem

        class TaskBuild(Build):                     # the build folder in the task's own folder
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.root, self.logs = root, root / "logs"
                self.hls_dir, self.vivado_dir = root / "hls", root / "vivado"

        log = io.StringIO()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                status = main_build(cfg, out=tmp / "overlays", jobs=p["jobs"], dry_run=p["dry_run"],
                                    check=p["check"], builder=TaskBuild)
            except HlsnnError as exc:
                print(f"hlsnn: error: {exc}")
                status = 2
        out = {"status": status, "log": log.getvalue().replace(str(tmp), "<task>"), "name": cfg.name,
               "stem": cfg.stem, "overlay": None, "hls": None, "logs": None}
        ov = tmp / "overlays" / cfg.name
        if ov.is_dir():
            out["overlay"] = tar_bytes(ov, cfg.name)
        for key, sub in (("hls", "hls"), ("logs", "logs")):
            if (root / sub).is_dir():
                out[key] = tar_bytes(root / sub, sub)
        return pickle.dumps(out)


def run_builds(address: str, cfgs: list, *, out="overlays", jobs=None, dry_run=False, check=False,
               show_progress=False) -> list:
    """Build ``cfgs`` on the cluster at ``address``, one task each. What comes back is unpacked
    on this machine, each folder renamed into place whole: the overlay into ``out/<name>``,
    the rendered project and logs into ``<build root>/<name>/hls`` and ``.../logs``. Prints
    each build's output (the worker's folder written as this machine's) and returns the exit
    statuses, in the order of ``cfgs``."""
    import pickle
    import sys
    from .paths import build_dir
    client = connect(address)
    statuses = [None] * len(cfgs)
    try:
        payloads = [build_payload(c, dry_run=dry_run, check=check, jobs=jobs) for c in cfgs]
        from .progress import bar
        pbar = bar(total=len(cfgs), desc=f"build on cluster ({n_workers(client)} worker(s))", unit="config",
                   show=show_progress)

        def on_done(i, res, err):
            cfg = cfgs[i]
            if err is not None:
                print(f"hlsnn: build failed: {cfg.name}: the cluster task failed: {err}", file=sys.stderr, flush=True)
                statuses[i] = 1
            else:
                r = pickle.loads(res)
                local = Path(os.path.abspath(build_dir(cfg)))
                for key in ("hls", "logs"):
                    if r[key] is not None:
                        untar_atomic(r[key], local / key)
                if r["overlay"] is not None:
                    untar_atomic(r["overlay"], Path(out) / cfg.name)
                text = r["log"].replace(f"<task>/build/{cfg.stem}", str(local))
                text = text.replace(f"<task>/overlays", str(out))
                print(f"== {cfg.name} (on the cluster) ==\n{text.rstrip()}", flush=True)
                statuses[i] = r["status"]
            if show_progress:
                pbar.update(1)

        run_tasks(client, build_point, payloads, on_done)
        if show_progress:
            pbar.close()
    finally:
        client.close()
    return statuses
