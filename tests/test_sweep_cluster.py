"""``hlsnn sweep --cluster`` on a Dask distributed cluster (hlsnn.cluster, issue 51).

The cluster is a ``distributed.LocalCluster`` of two worker processes on the loopback
interface. Its workers get their inputs as bytes and work in their own temporary folders, so
the results must equal the local process pool's (``--jobs 2``) field for field, timings aside;
a worker killed mid-sweep (SIGKILL from a test-only hook, as an out-of-memory kill) must not
change them; an address where no scheduler listens must give one ``hlsnn: error:`` line.
Skipped when dask distributed is not installed (``pip install "hlsnn[cluster]"``).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from hlsnn import cluster as cl  # noqa: E402
from hlsnn import sweep  # noqa: E402
from hlsnn.errors import InputError, MissingDependency  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
T2_TINY = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml"
BFP16 = ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml"
#: valid and fitting, over budget, and invalid (acc_bits 20 < 41) variants
RESOURCE_VARY = ["rows=8,16,64", "acc_bits=20,48"]
TIMES = ("time_s", "setup_s", "run_s")


@pytest.fixture(autouse=True)
def _no_extra_board_dirs(monkeypatch):
    monkeypatch.delenv("HLSNN_BOARDS", raising=False)


@pytest.fixture(scope="module")
def kill_marker(tmp_path_factory):
    """The test-only hook's marker: present (disarmed) until a test removes it."""
    m = tmp_path_factory.mktemp("kill") / "killed-once"
    m.touch()
    return m


@pytest.fixture(scope="module")
def local_cluster(kill_marker):
    """Two worker processes, one thread each, on 127.0.0.1; they inherit this environment
    (PYTHONPATH, the hook's variable)."""
    from distributed import LocalCluster
    old = os.environ.get(cl.KILL_ONCE_ENV)
    os.environ[cl.KILL_ONCE_ENV] = str(kill_marker)
    try:
        c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None)
    finally:
        if old is None:
            os.environ.pop(cl.KILL_ONCE_ENV, None)
        else:
            os.environ[cl.KILL_ONCE_ENV] = old
    with c:
        yield c


def _two_workers(c):
    """Wait until the cluster has its two workers (a killed one is restarted by its nanny)."""
    from distributed import Client
    with Client(c, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=120)


def _untimed(rep):
    """The report without wall-clock times (which differ from run to run), as JSON text."""
    rep = json.loads(json.dumps(rep))
    for r in rep["variants"]:
        if r["csim"]:
            for k in TIMES:
                r["csim"].pop(k, None)
    return json.dumps(rep, sort_keys=True)


def _table_untimed(rep):
    return re.sub(r", \d+\.\d s$", "", sweep.format_table(rep), flags=re.M)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------- quick: errors

def test_unreachable_scheduler_is_one_clear_error(monkeypatch, capsys):
    from hlsnn.cli import main
    monkeypatch.setenv("HLSNN_CLUSTER_TIMEOUT", "1")
    addr = f"tcp://127.0.0.1:{_free_port()}"
    rc = main(["sweep", str(BFP16), "--vary", "rows=8,16", "--no-csim", "--no-plot", "--cluster", addr])
    err = capsys.readouterr()
    assert rc == 2 and err.out == ""
    lines = err.err.strip().splitlines()
    assert len(lines) == 1, err.err
    assert lines[0].startswith(f"hlsnn: error: --cluster {addr}: no Dask scheduler answered within 1 s")


def test_bad_address_and_bad_timeout(monkeypatch):
    with pytest.raises(InputError, match="--cluster: give the scheduler's address"):
        cl.connect("  ")
    monkeypatch.setenv("HLSNN_CLUSTER_TIMEOUT", "soon")
    with pytest.raises(InputError, match="HLSNN_CLUSTER_TIMEOUT='soon': must be a number"):
        cl.connect("tcp://127.0.0.1:1")


_SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=str(ROOT / "host"), HLSNN_CLUSTER_TIMEOUT="1", HLSNN_PROGRESS="0")

#: bad addresses (issue 84): each ended, after distributed's own waits, in a TimeoutError
#: traceback of the half-made Client's __del__ (ucx: a TypeError traceback first)
BAD_ADDRESSES = ["tcp://", "foo://host:8786", "/tmp/scheduler.json", "ucx://127.0.0.1:8786", "inproc://x",
                 "tcp://host:99999", "tcp://host", "host:8786 extra"]


def test_bad_addresses_are_one_line_each_and_nothing_waits():
    """Every bad address through the CLI in one child process (the Client's __del__ printed its
    traceback when the interpreter collected it, which pytest's capture would not show): one
    ``hlsnn: error:`` line each saying what is allowed, well within the 30 s connect timeout
    (after a warm-up call that imports what the sweep needs)."""
    script = (
        "import gc, sys, time\n"
        "from hlsnn.cli import main\n"
        f"main(['sweep', {str(BFP16)!r}, '--vary', 'rows=8', '--no-csim', '--no-plot', '--cluster', ' '])\n"
        f"for a in {BAD_ADDRESSES!r}:\n"
        "    t = time.perf_counter()\n"
        f"    rc = main(['sweep', {str(BFP16)!r}, '--vary', 'rows=8,16', '--no-csim', '--no-plot', '--cluster', a])\n"
        "    gc.collect()\n"
        "    print(rc, round(time.perf_counter() - t, 2), flush=True)\n")
    # a 30 s connect timeout: a refusal that waited for a connection would take it; one made up front takes
    # what the machine needs to run the command (seconds on a loaded 2-core machine, not 30)
    res = subprocess.run([sys.executable, "-c", script], env={**_SUBPROCESS_ENV, "HLSNN_CLUSTER_TIMEOUT": "30"},
                         capture_output=True, text=True, timeout=400)
    lines = res.stderr.strip().splitlines()[1:]          # after the warm-up's line (imports, the config)
    assert res.returncode == 0 and len(lines) == len(BAD_ADDRESSES), res.stderr[-3000:]
    for a, line, out in zip(BAD_ADDRESSES, lines, res.stdout.split("\n")):
        assert line.startswith(f"hlsnn: error: --cluster {a}: "), line
        assert "SCHEME://HOST:PORT with SCHEME one of tcp, tls, ws, wss" in line, line
        rc, secs = out.split()
        assert rc == "2" and float(secs) < 15, (a, out)
    assert "scheme 'ucx' is not one" in lines[3] and "scheme 'inproc' is not one" in lines[4]


def test_a_port_that_accepts_and_never_answers_is_one_line_after_the_timeout():
    """A socket this test listens on and never accepts from (the kernel completes the TCP
    handshake, nothing answers): distributed's connect waits for the scheduler's handshake
    without a bound, so the sweep hung; now one line naming the address and the 1 s bound."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        addr = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        res = subprocess.run([sys.executable, "-m", "hlsnn.cli", "sweep", str(BFP16), "--vary", "rows=8,16",
                              "--no-csim", "--no-plot", "--cluster", addr], env=_SUBPROCESS_ENV,
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == "", res.stderr[-3000:]
    assert res.stderr.strip().splitlines() == [
        f"hlsnn: error: --cluster {addr}: no Dask scheduler answered within 1 s (nothing answered the connection "
        f"within 1 s); start one (dask scheduler) or check the address"], res.stderr[-3000:]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e9", "601", "0", "-2", "soon"])
def test_a_timeout_that_is_not_finite_positive_and_at_most_600_s_is_refused(monkeypatch, value):
    """NaN and inf ended in a KeyError traceback of dask's time parser, 1e9 in a wait without end:
    each is refused (before dask is asked anything) naming the variable and the range."""
    monkeypatch.setenv("HLSNN_CLUSTER_TIMEOUT", value)
    msg = rf"^HLSNN_CLUSTER_TIMEOUT='{re.escape(value)}': must be a number of seconds above 0 and at most 600$"
    with pytest.raises(InputError, match=msg):
        cl.connect_timeout()                    # first: connect with 1e9 s would wait that long
    with pytest.raises(InputError, match=msg):
        cl.connect("tcp://127.0.0.1:1")
    monkeypatch.setenv("HLSNN_CLUSTER_TIMEOUT", "600")
    assert cl.connect_timeout() == 600.0 == cl.MAX_CONNECT_TIMEOUT_S


@pytest.mark.parametrize("payload", [b"\xff" * 4096, bytes(range(256)) * 16], ids=["ff", "counting"])
def test_a_port_that_answers_with_other_bytes_is_not_a_scheduler(payload):
    """A server that sends bytes which are no Dask handshake: distributed read a frame length of
    petabytes from them (a MemoryError: the CLI's 'out of memory' line), or a ValueError (then
    'not a scheduler address ...; write SCHEME://HOST:PORT', blaming a well-formed address)."""
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                c.sendall(payload)
    threading.Thread(target=serve, daemon=True).start()
    addr = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    try:
        with pytest.raises(InputError, match=rf"^--cluster {re.escape(addr)}: what answered there is not a Dask "
                                             rf"scheduler \(its first message: .*\); check the address and port$"):
            cl.connect(addr, timeout=2)
    finally:
        srv.close()


def test_tls_without_dask_tls_settings_is_one_line(monkeypatch):
    """distributed raised a TypeError (a traceback) for tls:// without an SSL context."""
    for k in [k for k in os.environ if k.startswith("DASK_DISTRIBUTED__COMM__TLS")]:
        monkeypatch.delenv(k)
    with pytest.raises(InputError, match=r"^--cluster tls://127\.0\.0\.1:1: a tls:// scheduler needs dask's TLS "
                                         r"settings .*; they are not set$"):
        cl.connect("tls://127.0.0.1:1", timeout=1)


def test_the_allowed_address_forms():
    for a in ("tcp://10.0.0.5:8786", "tls://login1.cluster:8786", "ws://h:1", "wss://[::1]:65535",
              " tcp://127.0.0.1:8786 "):
        assert cl.check_address(a) == a.strip()


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)      # import distributed -> ImportError
    with pytest.raises(MissingDependency, match=r'pip install "hlsnn\[cluster\]"'):
        sweep.run_sweep(BFP16, ["rows=8"], csim=False, cluster="tcp://127.0.0.1:8786")


def test_without_cluster_dask_is_not_imported():
    code = ("import sys; from hlsnn import sweep; sweep.run_sweep(%r, ['rows=8,16'], csim=False); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))" % str(BFP16))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_task_files_stay_in_their_folder(tmp_path):
    with pytest.raises(InputError, match="outside its folder"):
        cl.unpack({"../evil.h": b"x"}, tmp_path / "hls")
    assert not (tmp_path / "evil.h").exists()
    cl.unpack({"a/b.h": b"12"}, tmp_path / "hls")
    assert (tmp_path / "hls" / "a" / "b.h").read_bytes() == b"12"


# ------------------------------------------------------------------------------- on a LocalCluster

@pytest.mark.slow
def test_resource_sweep_equals_the_local_run(local_cluster):
    rep = sweep.run_sweep(BFP16, RESOURCE_VARY, csim=False, cluster=local_cluster.scheduler_address)
    loc = sweep.run_sweep(BFP16, RESOURCE_VARY, csim=False, jobs=2)
    s = rep["summary"]
    assert (s["variants"], s["invalid"], s["over_budget"], s["fit"]) == (6, 3, 2, 1)   # every kind of row
    assert json.dumps(rep, sort_keys=True) == json.dumps(loc, sort_keys=True)
    assert sweep.format_table(rep) == sweep.format_table(loc)


@pytest.mark.slow
def test_killed_worker_mid_sweep_gives_the_same_results(local_cluster, kill_marker):
    kill_marker.unlink()                     # arm the hook: the first task to see it kills its worker
    rep = sweep.run_sweep(BFP16, RESOURCE_VARY, csim=False, cluster=local_cluster.scheduler_address)
    assert kill_marker.exists()              # a worker did die (the hook creates it, then SIGKILLs itself)
    loc = sweep.run_sweep(BFP16, RESOURCE_VARY, csim=False, jobs=2)
    assert json.dumps(rep, sort_keys=True) == json.dumps(loc, sort_keys=True)
    _two_workers(local_cluster)


@pytest.mark.slow
@pytest.mark.csim
def test_csim_sweep_equals_the_local_run(local_cluster, kill_marker, tmp_path):
    tiny = tmp_path / "t2_tiny.yaml"
    shutil.copy(T2_TINY, tiny)
    _two_workers(local_cluster)
    kill_marker.unlink()                     # and one worker dies at the start of its C-simulation task
    lines = []
    rep = sweep.run_sweep(tiny, ["rows=1,2"], cases=2, cluster=local_cluster.scheduler_address,
                          progress=lines.append)
    assert kill_marker.exists()
    loc = sweep.run_sweep(tiny, ["rows=1,2"], cases=2, jobs=2)
    assert rep["status"] == 0 and rep["jobs"] == 2
    for r in rep["variants"]:
        assert r["csim"]["mismatches"] == 0 and r["csim"]["cases"] >= 10 and r["csim"]["time_s"] > 0
    assert _untimed(rep) == _untimed(loc)
    assert _table_untimed(rep) == _table_untimed(loc)
    assert lines[0].startswith(f"cluster {local_cluster.scheduler_address}: 2 task(s) on 2 worker(s)")
    # nothing of the workers' was written next to the config or in ./build
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t2_tiny.yaml"]


@pytest.mark.slow
def test_cli_json_equals_jobs_2(local_cluster, tmp_path):
    def run(*extra):
        out = subprocess.run([sys.executable, "-m", "hlsnn.cli", "sweep", str(BFP16), "--vary", "rows=8,16,64",
                              "--vary", "acc_bits=20,48", "--no-csim", "--json", "--out", "s.png", *extra],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    rep = run("--cluster", local_cluster.scheduler_address)
    assert Path(rep.pop("out")).name == "s.png" and (tmp_path / "s.png").stat().st_size > 0
    loc = run("--jobs", "2")
    loc.pop("out")
    assert rep == loc


@pytest.mark.slow
def test_a_task_that_fails_on_every_attempt_gets_its_reason(local_cluster):
    from distributed import Client
    got = {}
    with Client(local_cluster.scheduler_address, set_as_default=False) as client:
        # int("x") raises ValueError on each of its 1 + RETRIES attempts; int("7") is 7
        cl.run_tasks(client, int, ["7", "x"], lambda i, res, err: got.__setitem__(i, (res, err)))
    assert got[0] == (7, None)
    assert got[1][0] is None and got[1][1].startswith("ValueError: invalid literal for int() with base 10: 'x'")


# ------------------------------------------------------------------------------- batch builds

def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def test_batch_exit_status():
    from hlsnn.commands.builds import _batch_status
    assert _batch_status([0, 0]) == 0
    assert _batch_status([0, 3, 0]) == 3          # tools missing for one: as a single build says
    assert _batch_status([3, 1, 0]) == 1          # a failed build wins


@pytest.mark.slow
def test_batch_dry_run_on_the_cluster_equals_the_local_one(local_cluster, tmp_path, monkeypatch, capsys):
    from hlsnn.cli import main
    configs = ["bfp8_zcu104", "shift8_pynq-z2"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "remote"))
    assert main(["build", *configs, "--dry-run", "-q", "--cluster", local_cluster.scheduler_address]) == 0
    remote = capsys.readouterr().out.replace(str(tmp_path / "remote"), "<build>")
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "local"))
    assert main(["build", *configs, "--dry-run", "-q"]) == 0
    local = capsys.readouterr().out.replace(str(tmp_path / "local"), "<build>")
    assert local.splitlines()[-1] == remote.splitlines()[-1] == "builds: bfp8_zcu104 ok, shift8_pynq_z2 ok"
    # each config's printed commands, with this machine's paths, as the local run printed them
    for name in ("bfp8_zcu104", "shift8_pynq_z2"):
        block = remote.split(f"== {name} (on the cluster) ==\n")[1].split("\n== ")[0].split("\nbuilds:")[0]
        cmds = [line for line in block.splitlines() if not line.startswith("hlsnn: WARNING")]
        assert any(f"<build>/{name}/hls" in line for line in cmds)
        assert "\n".join(cmds) in local
    # and the rendered projects came back byte for byte
    for name in ("bfp8_zcu104", "shift8_pynq_z2"):
        a, b = _tree(tmp_path / "remote" / name / "hls"), _tree(tmp_path / "local" / name / "hls")
        assert len(a) > 10 and a == b
    assert not (tmp_path / "overlays").exists()
    assert not any(p.name.startswith(".") for p in (tmp_path / "remote").rglob("*"))    # no temporaries left


@pytest.mark.slow
@pytest.mark.csim
def test_batch_build_without_xilinx_tools_is_tools_missing_per_config(local_cluster, tmp_path, monkeypatch, capsys):
    if shutil.which("vivado") or shutil.which("vitis_hls") or os.environ.get("XILINX_VIVADO"):
        pytest.skip("the Xilinx tools are installed here")
    from hlsnn.cli import main
    import yaml
    a = tmp_path / "t2_tiny.yaml"
    shutil.copy(T2_TINY, a)
    data = yaml.safe_load(a.read_text())
    data["name"] = "t2_tiny_b"
    b = tmp_path / "t2_tiny_b.yaml"
    b.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    rc = main(["build", str(a), str(b), "-q", "--cluster", local_cluster.scheduler_address])
    out = capsys.readouterr().out
    assert rc == 3, out
    assert out.splitlines()[-1] == "builds: t2_tiny tools missing, t2_tiny_b tools missing"
    for name in ("t2_tiny", "t2_tiny_b"):
        assert f"the HLS project and all TCL are in {tmp_path / 'build' / name / 'hls'}." in out
        assert (tmp_path / "build" / name / "hls" / "run_hls.tcl").is_file()
        assert "0 mismatches" in (tmp_path / "build" / name / "logs" / "csim.log").read_text()
    assert out.count("hlsnn: tools missing: vitis_hls (or vitis-run), vivado not found") == 2
    assert not (tmp_path / "overlays").exists()


def test_jobs_and_cluster_together_is_an_error(capsys):
    from hlsnn.cli import main
    rc = main(["sweep", str(BFP16), "--vary", "rows=8", "--no-plot", "--jobs", "2", "--cluster", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["hlsnn: error: hlsnn sweep: --jobs and --cluster cannot be combined (--jobs: processes "
                               "on this machine; --cluster: the scheduler's workers)"]


@pytest.mark.slow
def test_a_point_whose_worker_always_dies_gets_its_row_with_the_reason(monkeypatch, capsys):
    """One variant's task kills its worker on every attempt: after the scheduler's allowed
    failures (1 here) it is given up (KilledWorker); that row says so, the others are as locally."""
    import dask
    from distributed import LocalCluster
    monkeypatch.setenv(cl.KILL_ALWAYS_ENV, "bfp16_pynq_z2_v1")
    # worker-saturation 1.0: a worker of one thread holds one task at a time, so no other task is on
    # the worker when it dies (a dying worker's held tasks are suspects too, dask's rule)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1, "distributed.scheduler.worker-saturation": 1.0}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as c:
            monkeypatch.delenv(cl.KILL_ALWAYS_ENV)
            rep = sweep.run_sweep(BFP16, RESOURCE_VARY, csim=False, cluster=c.scheduler_address)
    loc = sweep.run_sweep(BFP16, RESOURCE_VARY, csim=False, jobs=2)
    bad = rep["variants"][1]
    assert bad["name"] == "bfp16_pynq_z2_v1" and bad["valid"] and bad["fits"]
    assert bad["csim_skipped"].startswith("task failed: the task's worker died on every attempt (KilledWorker")
    assert "TASK FAILED: the task's worker died on every attempt" in sweep.format_table(rep)
    bad["csim_skipped"] = "--no-csim"              # otherwise the local estimate, as the row says
    assert json.dumps(rep, sort_keys=True) == json.dumps(loc, sort_keys=True)
