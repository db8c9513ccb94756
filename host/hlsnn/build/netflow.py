"""``hlsnn build NAME.hlsnn``: the bitstream flow of a compiled model's network kernel, a
*network overlay* ``overlays/<config>_net/`` (:mod:`hlsnn.network.hwh` describes its block
design; :class:`hlsnn.network.board.NetBoard` runs it).

The stages are the layer kernel's (:class:`hlsnn.build.flow.Build`), for the network kernel:

* **render** the network kernel with the model's tables (``network.cpp``, ``network.h``,
  ``network_data.h``: the weights are compiled in), ``run_hls.tcl`` (``hls/tcl/run_hls_net.tcl.j2``:
  synthesis and IP export of ``net_top`` as ``hlsnn.org:hls:<config>_net:1.0``) and ``bd.tcl``
  (``hls/tcl/bd.tcl.j2`` with ``network``: the kernel's ``m_axi`` ports gmem0 and gmem1 on the
  PS's HP port, its control on the GP master, no DMA) under ``build/<config>/network/<model>/``;
* **csim**: the network kernel's C-simulation against the network mode (the spec), bit for bit,
  on the model's stored self-check inputs and ``cases`` random ones;
* **hls**, **hls-report**: the generated register header must give the buffer addresses and the
  batch the offsets :func:`hlsnn.engines.network.kernel.layout` derives (0x10, 0x1C, 0x28);
* **vivado**, then **overlay**: the ``.hwh`` must declare the kernel's two ``m_axi`` ports; the
  manifest is :func:`hlsnn.network.board.manifest` plus the build's record.
"""
from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import numpy as np

from ..version import __version__
from .. import codegen
from ..errors import InputError, printable
from ..names import check_slug, comment
from ..paths import build_dir
from . import reports
from ..blockdesign.design import bd_context
from .flow import Build, BuildFailed, _say


class NetBuild(Build):
    """One build of the network overlay of the compiled model ``model``."""

    def __init__(self, model, *, out="overlays", jobs=None, dry_run=False, cases=2, progress=False):
        from ..network import artifact
        from ..network.loader import config_of, kernel_network
        from ..network.board import manifest, net_ip_name
        prog, arrays = artifact.read(model)
        try:
            with artifact.as_internal_error(model):
                net, cls = kernel_network(prog, arrays)
        except InputError as exc:
            raise InputError(f"hlsnn build {model}: no network overlay for this compiled model: {exc}") from None
        cfg = config_of(prog["accels"][net.accel], str(model))
        super().__init__(cfg, out=out, jobs=jobs, dry_run=dry_run, cases=cases, progress=progress)
        self.model, self.net, self.arrays, self.kernel_class = Path(model), net, arrays, cls
        self.overlay_name = self.project = net_ip_name(cfg)
        self.rerun = f"hlsnn build {shlex.quote(str(model))}"
        self.csim_reference = "the network mode (the spec)"
        self.root = Path(os.path.abspath(build_dir(cfg))) / "network" / check_slug("compiled model name", net.name)
        self.logs, self.hls_dir, self.vivado_dir = self.root / "logs", self.root / "hls", self.root / "vivado"
        self.manifest = dict(manifest(cfg, net), board=cfg.board.name, part=cfg.board.part, hlsnn_version=__version__,
                             model=self.model.name, stages={})

    # ---------------------------------------------------------------- stages
    def render(self):
        from ..engine_registry import network_part
        from ..engines.network.kernel import TOP
        from ..network.board import network_digest
        render = network_part(self.net.engine, "kernel").render
        self.hls_dir.mkdir(parents=True, exist_ok=True)
        from ..network.artifact import as_internal_error
        with as_internal_error(self.model):
            files, sha, tables = render(self.net, self.hls_dir)
        if network_digest(self.net, tables) != self.manifest["network_sha256"]:     # pragma: no cover - a bug
            raise BuildFailed("the rendered kernel's tables are not those the manifest records")
        name = self.overlay_name
        codegen.render_extra(self.cfg, "run_hls_net.tcl.j2", self.hls_dir / "run_hls.tcl",
                             {"ip_name": name, "network": comment(self.net.name), "project": f"{name}_prj",
                              "top": TOP, "kernel_cpp": "network.cpp",
                              "clock_period_ns": round(1000.0 / self.cfg.clock_mhz, 3)})
        codegen.render_extra(self.cfg, "bd.tcl.j2", self.hls_dir / "bd.tcl",
                             dict(bd_context(self.cfg), network=comment(self.net.name), net_name=name,
                                  net_vlnv=f"hlsnn.org:hls:{name}:1.0"))
        self.manifest["sources_sha256"] = sha
        self.rendered = files
        return files

    def csim(self):
        """The network kernel's C-simulation equals the network mode on the stored check
        inputs and ``cases`` random images, every bit."""
        from ..deploy.lower import program as netmode
        net = self.net
        batches = []
        shape = tuple(net.shapes[net.aliases.get(net.input["name"], net.input["name"])])
        rng = np.random.default_rng(0)
        kernel = self.kernel_class(net)
        if net.engine == "bfp_systolic":      # float32 inputs, (mantissa, exponent) pairs out, one image a call
            xs = [np.asarray(self.arrays["check/x"], np.float64)] if "check/x" in self.arrays else []
            xs.append(rng.standard_normal((self.cases,) + shape).astype(np.float32).astype(np.float64))
            x = np.concatenate([v.reshape((len(v),) + shape) for v in xs])
            got, want = [], []
            for i in range(len(x)):           # batch 1: always the layer path's bits (netbfp rule bfp_conv)
                xq = netmode.quantize_input(net, x[i:i + 1])
                got.append(netmode.dequantize(net, kernel.run(xq)).reshape(-1))
                want.append(netmode.dequantize(net, netmode.run_ints(net, xq)).reshape(-1))
            got, want = np.concatenate(got).view(np.uint64), np.concatenate(want).view(np.uint64)
            xq = x
        else:
            if "check/x" in self.arrays:
                batches.append(netmode.quantize_input(net, np.asarray(self.arrays["check/x"], np.float64)))
            bits = int(net.input["bits"])
            batches.append(rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=(self.cases,) + shape))
            xq = np.concatenate([b.reshape((len(b),) + shape) for b in batches])
            got = kernel.run(xq)
            want = np.asarray(netmode.run_ints(net, xq)).reshape(len(xq), -1)
        bad = int(np.count_nonzero(got != want))
        self.manifest["csim"] = {"cases": len(xq), "outputs": int(want.size), "mismatches": bad,
                                 "library": str(kernel.path)}
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.logs / "csim.log").write_text(json.dumps(self.manifest["csim"], indent=1) + "\n")
        if bad:
            raise BuildFailed(f"C-simulation of the network kernel disagrees with the network mode (the spec) on "
                              f"{bad} of {want.size} outputs ({len(xq)} images); log: "
                              f"{printable(self.logs / 'csim.log')}")
        _say(f"  {len(xq)} images, {want.size} outputs, 0 mismatches")

    def read_hls_report(self):
        from .. import regmap
        from ..engines.network.kernel import TOP, layout
        sol = self.hls_dir / f"{self.overlay_name}_prj" / "solution1"
        hdr = self._csynth_report(sol, TOP)
        want = {regmap.rtl_name(arg): offs[0] for arg, offs in layout(self.net.engine)[1].items()}
        if hdr:
            got = reports.parse_register_header(hdr[0])
            bad = [n for n in want if got.get(n) != want[n]]
            if bad:
                raise BuildFailed(f"the generated register header {hdr[0]} has "
                                  f"{', '.join(f'{n} at {got[n]:#x}' if n in got else f'no {n}' for n in bad)}; the "
                                  f"network kernel's map (hlsnn.regmap) has "
                                  f"{', '.join(f'{n} at {want[n]:#x}' for n in bad)}: the exported IP does not match "
                                  f"the kernel template")
        self._exported(sol, hdr)

    def assemble(self):
        from ..network.board import M_AXI_PORTS, net_masters
        hwh = self.vivado_dir / "out" / f"{self.overlay_name}.hwh"
        if hwh.is_file():
            masters = net_masters(hwh, self.overlay_name)
            if not set(M_AXI_PORTS) <= set(masters):
                raise BuildFailed(f"Vivado's {printable(hwh)} has no IP {self.overlay_name} with the m_axi ports "
                                  f"{', '.join(M_AXI_PORTS)} (it has {sorted(masters) or 'none'}): the block design is "
                                  f"not the network overlay's; log: {printable(self.logs / 'vivado.log')}")
        return super().assemble()


def main_build_network(model, *, out="overlays", jobs=None, dry_run=False, check=False, progress=False) -> int:
    """``hlsnn build NAME.hlsnn``: the exit status of :class:`NetBuild` (:data:`hlsnn.build.flow.EXIT`)."""
    from .flow import main_build
    return main_build(model, out=out, jobs=jobs, dry_run=dry_run, check=check, progress=progress, builder=NetBuild)


def is_compiled_model(path) -> bool:
    """True for a compiled model file (``hlsnn compile``'s ``.npz`` container: a zip)."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
        with open(p, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except (OSError, ValueError):
        return False
