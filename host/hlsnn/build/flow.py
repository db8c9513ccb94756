"""The bitstream flow: render → C-simulation (stops on any mismatch) → Vitis HLS (csynth,
export IP) → Vivado (block design, implementation, timing, bitstream) → overlay.

Every stage prints its start and elapsed time and logs to ``build/<name>/logs/<stage>.log``;
long tool runs print a heartbeat. The overlay is assembled in a temporary folder beside
``overlays/<name>`` and moved in only when everything succeeded, so a failed build never
leaves a half-written overlay and never replaces a good one. Tool exit codes are checked.

Exit statuses (:data:`EXIT`): 0 built; 1 failed (mismatch, tool error, timing); 3 tools missing
(everything up to the tools ran; the message lists the commands that finish the build).
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..version import __version__
from .. import codegen, regmap
from ..compare import compare, format_report
from ..engines import ENGINES
from ..errors import HlsnnError, printable
from ..files import pid_alive
from ..paths import build_dir
from ..blockdesign import boardfiles
from ..blockdesign.instances import instances_context, overlay_name
from . import reports, tools

EXIT = {"ok": 0, "failed": 1, "tools_missing": 3}


class BuildFailed(HlsnnError, RuntimeError):
    """A build stage failed; the message names the stage and where its log is."""


def _protocol_register_map(cfg, by_arg, header):
    """The manifest's register map, keyed by the engine protocol's register names
    (``REGS_IN``/``REGS_OUT``), from the generated header's map keyed by the kernel's C argument
    names (e.g. the protocol's ``k`` is the argument ``k_in``; :func:`hlsnn.blockdesign.hwh.kernel_arguments`
    pairs them from the template's pragmas). The board then looks registers up by protocol name
    and never guesses. Returns ``(map, {protocol name: argument name})``."""
    from ..blockdesign.hwh import kernel_arguments
    pairs = kernel_arguments(cfg)
    missing = [arg for _, arg, _ in pairs if arg.lower() not in by_arg]
    if missing:
        raise BuildFailed(f"the generated register header {header} has no register for kernel argument(s) "
                          f"{', '.join(missing)} (it has {', '.join(sorted(by_arg))}): the exported IP does not match "
                          f"the kernel template")
    regmap = {"ap_ctrl": by_arg.get("ap_ctrl", 0)}
    regmap.update({proto: by_arg[arg.lower()] for proto, arg, _ in pairs})
    return regmap, {proto: arg for proto, arg, _ in pairs}


def _say(msg):
    print(msg, flush=True)


def remove_stale_temporaries(out: Path, name: str) -> list:
    """Remove what an interrupted assembly of overlay ``name`` left in ``out`` (a SIGKILL
    leaves ``.<name>.tmp-<pid>-*`` with a partial .bit, or ``.<name>.old-<pid>``): those of
    processes that no longer run. Returns the folders removed."""
    removed = []
    for p in list(out.glob(f".{name}.tmp-*")) + list(out.glob(f".{name}.old-*")):
        pid = p.name.split("-")[1] if p.name.count("-") >= 1 else ""
        if pid.isdigit() and pid_alive(int(pid)):
            continue                                  # another build of this overlay is running
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
        _say(f"  [collect] removed {p.name}, left by an interrupted build")
    return removed


def shell_line(cwd, argv) -> str:
    """``mkdir -p CWD && cd CWD && ARGV`` with every word shell-quoted (``shlex.quote``), so a
    pasted line runs exactly these commands even for paths with spaces, ``$(...)`` or quotes."""
    import shlex
    q = shlex.quote(str(cwd))
    return f"mkdir -p {q} && cd {q} && {shlex.join(str(a) for a in argv)}"


def run_tool(argv, cwd, log_path, stage, heartbeat=60.0, progress=False):
    """Run a tool with its output going to ``log_path``; print a heartbeat every ``heartbeat``
    seconds (with ``progress``, on a terminal: an elapsed-time line instead, :mod:`hlsnn.progress`);
    raise BuildFailed (with the log tail) on a non-zero exit."""
    from ..progress import ticker
    t0 = time.time()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(map(str, argv)) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        done = threading.Event()

        def beat():
            while not done.wait(heartbeat):
                _say(f"  [{stage}] still running, {_fmt(time.time() - t0)} elapsed (log: {log_path})")
        if not progress:
            threading.Thread(target=beat, daemon=True).start()
        try:
            with ticker(f"[{stage}] {argv[0]}", show=progress):
                rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            raise
        finally:
            done.set()
    if rc != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise BuildFailed(f"stage {stage} failed: {argv[0]} exited with status {rc}; log: "
                          f"{printable(log_path)}\n{tail}")
    return time.time() - t0


def _fmt(s):
    return f"{int(s) // 3600}:{int(s) % 3600 // 60:02d}:{int(s) % 60:02d}" if s >= 3600 else f"{int(s) // 60}:{int(s) % 60:02d}"


def rerun_name(cfg) -> str:
    """How the printed rerun command names the config: a shipped one by its name (``bfp16_pynq-z2``:
    the machine with the Xilinx tools has hlsnn installed elsewhere, where an installed wheel's
    path would not exist), any other by its path."""
    from ..paths import CONFIGS_DIR
    if cfg.path and Path(cfg.path).resolve().parent == (CONFIGS_DIR / "accel").resolve():
        return Path(cfg.path).stem
    return str(cfg.path or cfg.name)


class Build:
    """One build of one config. ``run()`` returns an exit status (see :data:`EXIT`)."""

    def __init__(self, cfg, *, out="overlays", jobs=None, dry_run=False, cases=4, progress=False, instances=1):
        if Path(out).exists() and not Path(out).is_dir():     # found before anything runs, not after Vivado
            from ..errors import InputError
            raise InputError(f"--out {out}: is a file; overlays go into a folder (default overlays/)")
        self.cfg = cfg
        self.progress = progress  # elapsed-time lines for the compile and the tool runs (a terminal)
        self.out = Path(out)
        self.jobs = jobs or os.cpu_count() or 1
        self.dry_run = dry_run
        self.cases = cases
        # Absolute: the tools run in their own folders (cwd), so relative paths in their
        # arguments (the default build root is ./build) would point nowhere.
        self.root = Path(os.path.abspath(build_dir(cfg)))
        self.logs = self.root / "logs"
        self.hls_dir = self.root / "hls"
        self.vivado_dir = self.root / "vivado"
        #: kernel instances in the block design, each with its own AXI DMA (``--instances``;
        #: :mod:`hlsnn.blockdesign.instances`)
        self.instances = instances
        #: the overlay's (and its files') name: ``<config>_x<n>`` for several instances; the
        #: HLS project's (``<project>_prj``, one IP however many instances); the rerun command
        self.overlay_name = overlay_name(cfg, instances)
        self.project = cfg.name
        self.rerun = f"hlsnn build {shlex.quote(rerun_name(cfg))}" + (f" --instances {instances}" if instances > 1 else "")
        self.csim_reference = "the emulator"
        self.manifest = {"name": cfg.name, "engine": cfg.engine, "board": cfg.board.name, "part": cfg.board.part,
                         "config": cfg.as_dict(), "config_sha256": cfg.sha, "config_hash32": cfg.hash32,
                         "hlsnn_version": __version__, "instances": instances, "stages": {}}

    # ---------------------------------------------------------------- stages
    def stage(self, name, fn):
        t0 = time.time()
        _say(f"[{name}] ...")
        result = fn()
        dt = time.time() - t0
        self.manifest["stages"][name] = {"seconds": round(dt, 2)}
        _say(f"[{name}] done in {_fmt(dt)}")
        return result

    def render(self):
        r = codegen.render(self.cfg, self.hls_dir)
        codegen.render_extra(self.cfg, "bd.tcl.j2", self.hls_dir / "bd.tcl", instances_context(self.cfg, self.instances))
        self.rendered = r
        return r

    def csim(self):
        from ..runtime.targets import CsimTarget
        tgt = CsimTarget(self.cfg, ENGINES[self.cfg.engine], rendered=self.rendered, progress=self.progress)
        rep = compare(self.cfg, "csim", seed=0, n_random=self.cases, target_obj=tgt)
        (self.logs / "csim.log").parent.mkdir(parents=True, exist_ok=True)
        (self.logs / "csim.log").write_text(format_report(rep) + "\n" + json.dumps(rep, indent=1) + "\n")
        self.manifest["csim"] = {k: rep[k] for k in ("cases", "outputs", "mismatches", "register_mismatches")}
        if rep["mismatches"] or rep["register_mismatches"]:
            raise BuildFailed(f"C-simulation disagrees with the emulator: {format_report(rep)}; "
                              f"log: {printable(self.logs / 'csim.log')}")
        _say(f"  {rep['cases']} cases, {rep['outputs']} outputs, 0 mismatches")

    def commands(self, hls, vivado):
        """The tool commands that finish the build, as (stage, argv, cwd)."""
        hls_argv = (hls.command("run_hls.tcl") if hls else ["vitis_hls", "-f", "run_hls.tcl"])
        ip_repo = self.hls_dir / f"{self.project}_prj" / "solution1" / "impl" / "ip"
        stage_dir = self.vivado_dir / "out"
        viv = (vivado.command(self.hls_dir / "bd.tcl") if vivado else
               ["vivado", "-mode", "batch", "-notrace", "-source", str(self.hls_dir / "bd.tcl")])
        viv_argv = viv + ["-tclargs", str(ip_repo), str(stage_dir), str(self.jobs)]
        return [("hls", hls_argv, self.hls_dir), ("vivado", viv_argv, self.vivado_dir)]

    # ---------------------------------------------------------------- the flow
    def run(self) -> int:
        hls, vivado = tools.find_hls(), tools.find_vivado()
        self.manifest["tools"] = {t.name: {"path": t.path, "version": t.version} for t in (hls, vivado) if t}
        self.check_board_files(vivado)
        if self.dry_run:
            self.render()
            _say(f"# render: {self.hls_dir} (done; --dry-run still renders, it runs nothing else)")
            _say(f"# csim: compile {self.hls_dir} with g++ and compare with {self.csim_reference}")
            for stage, argv, cwd in self.commands(hls, vivado):
                _say(shell_line(cwd, argv))
            n = self.overlay_name
            _say(f"# then: collect {n}.bit, {n}.hwh and {n}.json into {self.out / n}/")
            return EXIT["ok"]
        self.stage("render", self.render)
        self.stage("csim", self.csim)
        missing = [n for n, t in (("vitis_hls (or vitis-run)", hls), ("vivado", vivado)) if t is None]
        if missing:
            cmds = "\n".join(f"  {shell_line(cwd, argv)}" for _, argv, cwd in self.commands(hls, vivado))
            _say(f"\nhlsnn: tools missing: {', '.join(missing)} not found (set XILINX_HLS / XILINX_VIVADO or put them "
                 f"on PATH).\nEverything up to the tools ran: the HLS project and all TCL are in {self.hls_dir}.\n"
                 f"On a machine with Vitis HLS and Vivado, finish the build with:\n{cmds}\n"
                 f"  {self.rerun}   # or rerun this command there; "
                 f"it collects the overlay")
            return EXIT["tools_missing"]
        (hls_stage, hls_argv, hls_cwd), (viv_stage, viv_argv, viv_cwd) = self.commands(hls, vivado)
        self.stage("hls", lambda: run_tool(hls_argv, hls_cwd, self.logs / "hls.log", "hls", progress=self.progress))
        self.stage("hls-report", self.read_hls_report)
        self.vivado_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.vivado_dir / "out", ignore_errors=True)
        try:
            self.stage("vivado", lambda: run_tool(viv_argv, viv_cwd, self.logs / "vivado.log", "vivado", 60.0, progress=self.progress))
        except BuildFailed as exc:
            timing = self.vivado_dir / "out" / "timing.txt"
            if timing.is_file():
                t = reports.parse_timing(timing)
                raise BuildFailed(f"{exc}\n  timing: WNS {t.get('wns')} ns, WHS {t.get('whs')} ns, run {t.get('progress')} "
                                  f"({t.get('status')})") from None
            raise
        self.stage("overlay", self.assemble)
        return EXIT["ok"]

    def check_board_files(self, vivado):
        """Warn (stderr) when the board's Vivado board files are not installed, or could not
        be checked; bd.tcl checks again inside Vivado (HLSNN-WARNING)."""
        bp = self.cfg.board.board_part
        if not bp:
            return None
        found = boardfiles.find(bp, boardfiles.vivado_root(vivado))
        self.manifest["board_files"] = {"board_part": bp, "status": found.status, "path": found.path}
        msg = found.warning(self.cfg.board.part, bool(self.cfg.board.ps_config))
        if msg:
            print(msg, file=sys.stderr, flush=True)
        return found

    # ---------------------------------------------------------------- --check
    CHECK_TCL = ("# hlsnn build --check: Vitis HLS C-simulation and synthesis only (no IP export, no Vivado)\n"
                 "set argv {csim synth}\n"
                 "source run_hls.tcl\n")

    def check(self) -> int:
        """``hlsnn build CONFIG --check``: render, then run only ``csim_design`` and
        ``csynth_design`` in Vitis HLS, and print each loop's achieved II (and target II) and
        latency, and the synthesized resources against the estimate. Exit 0 when the tool ran;
        3 when Vitis HLS is not installed (everything else was rendered)."""
        hls = tools.find_hls()
        self.stage("render", self.render)
        if hls is None:
            _say(f"\nhlsnn: tools missing: vitis_hls (or vitis-run) not found (set XILINX_HLS / XILINX_VITIS or put it "
                 f"on PATH); --check needs Vitis HLS (not Vivado).\nThe HLS project is in {self.hls_dir}; on a machine "
                 f"with Vitis HLS run there:\n  vitis_hls -f check_hls.tcl")
            (self.hls_dir / "check_hls.tcl").write_text(self.CHECK_TCL)
            return EXIT["tools_missing"]
        (self.hls_dir / "check_hls.tcl").write_text(self.CHECK_TCL)
        argv = hls.command("check_hls.tcl")
        self.stage("check", lambda: run_tool(argv, self.hls_dir, self.logs / "check.log", "check", progress=self.progress))
        report_dir = self.hls_dir / f"{self.cfg.name}_prj" / "solution1" / "syn" / "report"
        top = ENGINES[self.cfg.engine].TOP
        top_xml = next((x for x in (report_dir / f"{top}_csynth.xml", report_dir / "csynth.xml") if x.is_file()), None)
        if top_xml is None:
            raise BuildFailed(f"Vitis HLS wrote no synthesis report under {printable(report_dir)}; log: "
                              f"{printable(self.logs / 'check.log')}")
        summary = reports.parse_csynth(top_xml)
        loops = reports.parse_loops(report_dir, top=top)
        est = ENGINES[self.cfg.engine].estimate(self.cfg)["resources"]
        available = summary["available"] or {k: v for k, v in (
            ("dsp", self.cfg.board.resources.get("dsp")), ("bram_18k", 2 * self.cfg.board.resources.get("bram36", 0)),
            ("uram", self.cfg.board.resources.get("uram")), ("lut", self.cfg.board.resources.get("lut")),
            ("ff", self.cfg.board.resources.get("ff")))}
        rows = reports.compare_resources(summary["resources"], est, available)
        _say(f"\n{self.cfg.name} ({hls.name} {hls.version}, {self.cfg.board.part}): target clock "
             f"{summary['target_clock_ns']} ns, estimated {summary['estimated_clock_ns']} ns; "
             f"top latency {summary['latency_cycles']} cycles, interval {summary['interval']}")
        _say("loops (II: achieved; target II: the pragma's, where the report gives it):")
        _say(reports.format_loops(loops))
        _say("resources (estimated: hlsnn's model; BRAM_18K = 2 x its BRAM36):")
        _say(reports.format_resources(rows))
        missed = [lp for lp in loops if lp["target_ii"] and lp["achieved_ii"] and lp["achieved_ii"] > lp["target_ii"]]
        if missed:
            _say("hlsnn: WARNING: " + ", ".join(f"{lp['module']}/{lp['name']} II {lp['achieved_ii']} > target "
                                                 f"{lp['target_ii']}" for lp in missed))
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.logs / "check.json").write_text(json.dumps({"summary": summary, "loops": loops, "estimate": est,
                                                          "resources": rows}, indent=1, default=str) + "\n")
        return EXIT["ok"]

    def _csynth_report(self, sol, top):
        """The synthesis report of the top function ``top`` in the solution folder ``sol`` into the
        manifest; returns the register headers Vitis HLS generated for it."""
        xmls = sorted((sol / "syn" / "report").glob("*csynth.xml"))
        if not xmls:
            raise BuildFailed(f"Vitis HLS wrote no synthesis report under {sol / 'syn' / 'report'}; log: "
                              f"{printable(self.logs / 'hls.log')}")
        pick = [x for x in xmls if x.name == "csynth.xml"] or [x for x in xmls if top in x.name] or xmls
        self.manifest["hls_report"] = reports.parse_csynth(pick[0])
        return sorted((sol / "impl").glob(f"**/x{top}_hw.h"))

    def _exported(self, sol, hdr):
        """The IP catalog is there; the register map's source and the synthesis estimate, said."""
        self.manifest["register_map_source"] = str(hdr[0]) if hdr else "predicted (no generated header found)"
        if not (sol / "impl" / "ip").is_dir():
            raise BuildFailed(f"Vitis HLS exported no IP catalog under {sol / 'impl' / 'ip'}; log: "
                              f"{printable(self.logs / 'hls.log')}")
        est = self.manifest["hls_report"]
        _say(f"  latency {est['latency_cycles']}, II {est['interval']}, est. clock {est['estimated_clock_ns']} ns, "
             f"resources {est['resources']}")

    def read_hls_report(self):
        sol = self.hls_dir / f"{self.cfg.name}_prj" / "solution1"
        eng = ENGINES[self.cfg.engine]
        hdr = self._csynth_report(sol, eng.TOP)
        if hdr:
            self.manifest["register_map"], self.manifest["register_names"] = _protocol_register_map(
                self.cfg, reports.parse_register_header(hdr[0]), hdr[0])
        else:
            self.manifest["register_map"] = regmap.predicted_register_map(eng.protocol.REGS_IN, eng.protocol.REGS_OUT)
            self.manifest["register_names"] = {n: n for n in self.manifest["register_map"] if n != "ap_ctrl"}
        self._exported(sol, hdr)

    def assemble(self):
        name = self.overlay_name
        src = self.vivado_dir / "out"
        for f in (f"{name}.bit", f"{name}.hwh", "timing.txt"):
            if not (src / f).is_file():
                raise BuildFailed(f"Vivado finished but {src / f} is missing; log: "
                                  f"{printable(self.logs / 'vivado.log')}")
        self.manifest["timing"] = reports.parse_timing(src / "timing.txt")
        self.manifest["built"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.out.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(self.out, name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=self.out))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)      # mkdtemp makes it 0700; the overlay is a normal folder
        try:
            shutil.copy2(src / f"{name}.bit", tmp / f"{name}.bit")
            shutil.copy2(src / f"{name}.hwh", tmp / f"{name}.hwh")
            (tmp / f"{name}.json").write_text(json.dumps(self.manifest, indent=2, sort_keys=True, default=str) + "\n")
            final = self.out / name
            old = None
            if final.exists():
                old = self.out / f".{name}.old-{os.getpid()}"
                os.replace(final, old)
            try:
                os.replace(tmp, final)
            except BaseException:
                if old is not None:          # put the previous good overlay back
                    os.replace(old, final)
                raise
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _say(f"  overlay: {self.out / name}/{{{name}.bit, {name}.hwh, {name}.json}}")


def main_build(cfg, *, out="overlays", jobs=None, dry_run=False, check=False, progress=False, builder=None,
               instances=1) -> int:
    """``hlsnn build``: the exit status (:data:`EXIT`) of ``builder`` (default :class:`Build`;
    the network overlay's is :class:`hlsnn.build.netflow.NetBuild`) on ``cfg``."""
    from ..errors import CompileError, CsimError
    try:
        kw = {"instances": instances} if instances != 1 else {}
        b = (builder or Build)(cfg, out=out, jobs=jobs, dry_run=dry_run, progress=progress, **kw)
        return b.check() if check else b.run()
    except (BuildFailed, CompileError, CsimError) as exc:
        print(f"hlsnn: build failed: {exc}", file=sys.stderr)
        return EXIT["failed"]
