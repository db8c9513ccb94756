"""Recompute the modelled figures written by hand in docs/ (and the README's prose) and compare
(``--check``, exit 1 on a mismatch) or rewrite them (``--write``).

``benchmarks/readme_figures.py`` regenerates the README's two tables; this is its twin for the
sentences and table rows of the docs. Each entry of :data:`FIGURES` is one place in one file:

* ``template``: the text as it stands in the file, with each figure a hole in Python's format
  syntax, e.g. ``"takes {cycles:,} cycles ({util_pct:.1f}% of 616 MAC/cycle, {ms:.3g} ms)"``.
  A run of spaces in the template matches any whitespace (a line break of the Markdown too). A
  hole names a value of the source (``NAME_ms`` is ``NAME_us`` / 1000, ``A+B`` a sum) and
  matches a number (digits, ``,`` and ``.``); ``{_}`` matches any text of the line and is not
  checked (a table's "before" cell). The text must be found exactly once (after ``after``, where
  given: the start of the table's config row, say), so an edit of the prose that loses a
  figure's context fails too;
* ``source``: what computes the holes: :class:`Op` is ``hlsnn perf CONFIG --gemm/--conv``
  (:func:`hlsnn.measure.operation.measure`: the strict C-simulation's loop counts times each
  loop's derived II, :mod:`hlsnn.perf.schedule`); :class:`Net` is ``hlsnn compile MODEL
  --assignment A`` then ``hlsnn perf NAME.hlsnn [--batch N] [--board B] [--layer-by-layer]``
  (:func:`hlsnn.network.latency.model`: kernel, host model, end to end, and the network kernel's
  resource model); :class:`Res` is ``hlsnn info CONFIG``'s resource estimate. ``ii1=True`` (every
  loop at II 1) only where the text says that is its basis. A :class:`Net`'s model may be one the
  repository builds rather than stores, ``built(FAMILY, KEY)``: issue 52's families, exported first
  by ``python tests/fixtures/torch_families FAMILY export`` (torch + onnxscript; minutes a family;
  ``--models DIR`` keeps them, ``--built no`` leaves those entries out).

A figure reproduces when the hole's text in the file equals the computed value formatted by the
hole's format spec (a figure of a built model on the sparse engine: within :data:`TRAINED_REL`, as the
model is trained on the machine that checks it). Measured timings (host microseconds on this machine, emulation speed) are
benchmarks, not model figures: they are not here. Usage: ``python benchmarks/doc_figures.py
--check`` (or ``--write``; ``--only docs/engines`` for the entries of files under a path; ``--list``).
"""
from __future__ import annotations

import argparse
import functools
import pickle
import re
import string
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GEMM = (256, 1024, 1024)
GEMV = (1, 1024, 1024)
CONV = (64, 56, 56, 64, 3)
NUMBER = r"[-+]?[0-9][0-9,]*(?:\.[0-9]+)?"


def _config(name, edit=()):
    """The config ``configs/accel/NAME.yaml``, with ``edit``'s ``(key, value)`` pairs set in its
    engine's section (a variant the docs compare against, e.g. the unpacked array)."""
    from hlsnn.config import load_config, read_yaml
    path = ROOT / "configs" / "accel" / f"{name}.yaml"
    if not edit:
        return load_config(str(path))
    data = read_yaml(path)
    data[data["engine"]].update(dict(edit))
    data["name"] = data["name"] + "_" + "_".join(f"{k}{v}" for k, v in edit).lower()
    return load_config(data, source=f"{path} with {dict(edit)}", check_fit=False)


def _edits(edit):
    return "".join(f", {k}: {v}" for k, v in edit)


@dataclass(frozen=True)
class Res:
    """``hlsnn info configs/accel/CONFIG.yaml``'s resource estimate (the resource model).
    Values: ``dsp``, ``bram``, ``uram``, ``lut``, ``ff``, ``lut_k`` (thousands)."""
    config: str
    edit: tuple = ()

    def command(self):
        return f"hlsnn info configs/accel/{self.config}.yaml" + (f" (with {_edits(self.edit)[2:]})" if self.edit else "")

    def compute(self, ctx):
        r = _config(self.config, self.edit).estimates["resources"]
        return dict(r, bram=r["bram36"], lut_k=r["lut"] / 1e3)


@dataclass(frozen=True)
class Op:
    """``hlsnn perf configs/accel/CONFIG.yaml --gemm B,K,N | --conv C,H,W,Z,k [--mode M]
    [--density D] [--resident]``. Values: ``cycles``, ``calls``, ``us``, ``ms``, ``mpc`` (useful
    MACs a cycle), ``peak``, ``util_pct`` and the report's own keys."""
    config: str
    gemm: tuple = None
    conv: tuple = None
    mode: str = None
    density: float = 1.0
    resident: bool = False
    edit: tuple = ()
    ii1: bool = False       # every loop at II 1: a table that says so (not today's derived model)
    target: str = "csim"    # or sim: through the simulated board (its DMA splits transfers as a board's)

    def command(self):
        shape = f"--gemm {','.join(map(str, self.gemm))}" if self.gemm else f"--conv {','.join(map(str, self.conv))}"
        extra = "".join([f" --mode {self.mode}" if self.mode else "", f" --density {self.density}"
                         if self.density != 1.0 else "", " --resident" if self.resident else ""])
        return (f"hlsnn perf configs/accel/{self.config}.yaml {shape}{extra}"
                + (f" (with {_edits(self.edit)[2:]})" if self.edit else "") + (" at II 1" if self.ii1 else "") + (f" --target {self.target}" if self.target != "csim" else ""))

    def compute(self, ctx):
        from hlsnn.measure import operation
        from hlsnn.perf import schedule
        from hlsnn import csim
        derived, strict = schedule.ii_of, csim.strict_default()
        if self.ii1:             # the II derived from the C++ replaced by none: every loop at its own II
            schedule.ii_of = lambda rows: {}
        csim.set_strict_default(True)    # hlsnn perf's library (HLSNN_CSIM_FAST's counts can differ)
        try:
            r = operation.measure(_config(self.config, self.edit), gemm=self.gemm, conv=self.conv, mode=self.mode,
                                  density=self.density, resident=self.resident, target=self.target)
        finally:
            schedule.ii_of = derived
            csim.set_strict_default(strict)
        return dict(r, us=r["time_us"], ms=r["time_us"] / 1e3, mpc=r["macs_per_cycle"],
                    peak=r["peak_macs_per_cycle"], util_pct=100 * r["utilization"])


@dataclass(frozen=True)
class Net:
    """``hlsnn compile MODEL.yaml --assignment A -o X.hlsnn`` then ``hlsnn perf X.hlsnn [--batch N]
    [--board B] [--layer-by-layer]`` (``model``: a path from the repository's root). Values:
    ``kernel_us``, ``e2e_us``, ``host_us``, ``e2e_per_image_us`` (end to end /
    batch), ``starts``, ``c_call_us`` (the host's C call: its steps but the loader's Python),
    ``rule1_us`` (its quantize step), ``loader_us`` (the loader's Python), ``lut``, ``ff``, ``bram``,
    ``dsp``, ``lut_k`` (thousands), ``lut_pct``, ``dsp_pct``, ``bram_pct`` (of the board's), per layer
    ``LAYER.cycles``, ``LAYER.us`` and ``LAYER.ms`` (its kernel cycles and time) and ``LAYER.host_us``,
    ``kernel_cycles`` (the layers' sum), and the report's own keys."""
    model: str
    assignment: str
    batch: int = 1
    board: str = None
    layers: bool = False
    ii1: bool = False       # every loop at II 1: a figure that says so (not today's derived model)
    format: str = None      # a model given as an .onnx: the YAML's one format, as the tests write it
    regression: bool = False  # with format: a dense model's YAML (task: regression, targets: inputs)

    def command(self):
        extra = "".join([f" --batch {self.batch}" if self.batch != 1 else "", f" --board {self.board}"
                         if self.board else "", " --layer-by-layer" if self.layers else "",
                         " at II 1" if self.ii1 else ""])
        model = self.model if self.format is None else (f"Y.yaml (model: {self.model}, data: digits, layout: auto, "
                                                         + ("task: regression, targets: inputs, " if self.regression else "")
                                                         + f"formats: {{{self.assignment}: {self.format}}})")
        if _is_built(self.model):
            family, key = _built_parts(self.model)
            fmt = "" if self.format is None else f" (formats: {{{self.assignment}: {self.format}}})"
            return (f"python {FAMILIES_CLI} {family} export --out D && hlsnn compile D/{key}.yaml{fmt} "
                    f"--assignment {self.assignment} -o X.hlsnn && hlsnn perf X.hlsnn{extra}")
        return f"hlsnn compile {model} --assignment {self.assignment} -o X.hlsnn && hlsnn perf X.hlsnn{extra}"

    def compute(self, ctx):
        from hlsnn.network.latency import model
        from hlsnn.perf import schedule
        path = ctx.compiled(self.model, self.assignment, self.format, self.regression)
        derived = schedule.ii_of
        if self.ii1:
            schedule.ii_of = lambda rows: {}
        try:
            r = model(path, board=self.board, batch=self.batch, network=False if self.layers else None)
        finally:
            schedule.ii_of = derived
        out = dict(r, e2e_us=r["end_to_end_us"], e2e_per_image_us=r["end_to_end_us"] / self.batch,
                   starts=r["kernel_starts"], kernel_cycles=sum(x.get("kernel_cycles") or 0 for x in r.get("layers") or []))
        for layer in r.get("layers") or []:              # per layer: NAME.cycles, NAME.us (its kernel time)
            out[layer["name"] + ".cycles"] = layer.get("kernel_cycles")
            out[layer["name"] + ".us"] = layer["kernel_us"]
            out[layer["name"] + ".ms"] = layer["kernel_us"] / 1e3
            out[layer["name"] + ".host_us"] = layer.get("host_us")
        steps = {s["step"]: s["us"] for s in ((r.get("host") or {}).get("steps") or [])}
        if steps:
            out.update(loader_us=steps.get("loader's Python", 0.0),
                       rule1_us=sum(v for k, v in steps.items() if k.startswith("quantize")),
                       c_call_us=sum(v for k, v in steps.items() if k != "loader's Python"))
        if _is_built(self.model):       # the sparse engine's cycles follow the trained weights' zeros
            from hlsnn import load
            net = load(path, "emu", self_check=False, network=False)
            try:
                out["_trained_here"] = any(a.config.engine == "sparse_cluster" for a in net.accs.values())
            finally:
                net.close()
        res = r.get("kernel_resources") or {}
        if res:
            out.update(lut=res["lut"], ff=res["ff"], bram=res["bram36"], dsp=res["dsp"], lut_k=res["lut"] / 1e3)
            from hlsnn.config import load_board
            from hlsnn.errors import ConfigError
            try:
                avail = load_board(r["board"]).resources
            except ConfigError:                  # --board x86-sim: a host, no fabric
                avail = {}
            for k, a in (("lut", "lut"), ("dsp", "dsp"), ("bram", "bram36")):
                if avail.get(a):
                    out[f"{k}_pct"] = 100 * res[a] / avail[a]
        return out


@dataclass(frozen=True)
class Figure:
    path: str
    template: str
    source: object
    after: str = None


@functools.lru_cache(maxsize=None)
def _pattern(template):
    """The template's regex (literal text, whitespace runs as ``\\s+``, each hole a number
    group) and its holes ``[(name, spec)]``."""
    rx, holes = [], []
    for lit, name, spec, _ in string.Formatter().parse(template):
        rx.append(r"\s+".join(re.escape(part) for part in re.split(r"\s+", lit)))
        if name == "_":                   # any text of one line, not a figure (a table's "before" cell)
            rx.append(r"[^\n|]*?")
        elif name is not None:
            rx.append(f"({NUMBER})")
            holes.append((name, spec or ""))
    return re.compile("".join(rx)), holes


# --- models the repository builds instead of storing ---
#
# docs/history/deploy-beyond-cnn.md quotes models of issue 52's families that tests/fixtures/torch_families
# trains for seconds on bundled data and exports offline (torch + onnxscript; nothing downloaded). A figure
# of one names it ``built("variant_sixth", "k_ae_lin_ts17")``: the family's ``export`` step writes the
# whole family (training reseeds for each model, but most families build their tables' models in
# one stream seeded once, so a model's initial weights depend on the models built before it: a model
# added to a table moves the ones after it; variant_seventh builds each model from its own seed,
# ``steps.build``), and the family's own deployment YAML (``data.config``: what its ``status`` step
# compiles: bfp8 on bfp8_zcu104, two-hot on shift8_pynq-z2, fixed8 on sparse8_pynq-z2) is the one compiled.

#: the families' command line (``python FAMILIES_CLI FAMILY export --out D``)
FAMILIES_CLI = "tests/fixtures/torch_families"


def built(family, key):
    """The model KEY (``NAME_ts17`` / ``NAME_dynamo``) of FAMILY's export (tests/fixtures/torch_families)."""
    return f"build:{family}:{key}"


def _is_built(model):
    return model.startswith("build:")


def _built_parts(model):
    _, family, key = model.split(":")
    return family, key


def families():
    """tests/fixtures/torch_families' ``FAMILIES`` (family name -> spec)."""
    if str(ROOT / "tests" / "fixtures") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    from torch_families import FAMILIES
    return FAMILIES


def build_family(family, out, log=print):
    """``python tests/fixtures/torch_families FAMILY export --out OUT`` (one thread), unless an earlier
    run built OUT (``--models``; its mark ``OUT/BUILT`` is written once the export has finished)."""
    import os
    import subprocess
    out = Path(out)
    if (out / "BUILT").is_file():
        return out
    cmd = f"python {FAMILIES_CLI} {family} export --out {out}"
    log(f"building {family}'s models into {out} ({cmd}; minutes)")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(ROOT / FAMILIES_CLI), family, "export", "--out", str(out)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0 or not (out / "MANIFEST.json").is_file():
        raise SystemExit(f"{cmd} failed:\n{r.stderr[-2000:]}")
    (out / "BUILT").write_text(cmd + "\n")
    return out


def family_yaml(family, out, key):
    """The family's deployment YAML of KEY in OUT (``torch_families.data.config``)."""
    import json
    spec = families()[family]
    from torch_families import data
    entry = json.loads((Path(out) / "MANIFEST.json").read_text())["models"].get(key)
    if entry is None or "export_error" in entry:
        raise SystemExit(f"{family}'s export in {out} has no model {key}")
    return Path(data.config(spec, Path(out), key, entry))


class Context:
    """Compiled models and computed sources, once each per run; built families under ``models``
    (default: the run's temporary directory)."""

    def __init__(self, models=None):
        self.tmp = tempfile.TemporaryDirectory(prefix="doc-figures-")
        self.models = Path(models) if models else Path(self.tmp.name) / "models"
        self._compiled, self._values = {}, {}

    def compiled(self, model, assignment, fmt=None, regression=False):
        # --allow-overfit: the pages also model kernels of nets built for them, not all within a board's budget
        key = (model, assignment, fmt, regression)
        if key not in self._compiled:
            from hlsnn.cli import main
            stem = f"{Path(model).stem if not _is_built(model) else _built_parts(model)[1]}_{assignment}_{len(self._compiled)}"
            out = Path(self.tmp.name) / f"{stem}.hlsnn"
            if _is_built(model):
                family, name = _built_parts(model)
                yaml = family_yaml(family, build_family(family, self.models / family), name)
                if fmt is not None:     # the family's YAML with this one format (a variant the text names)
                    text = yaml.read_text()
                    yaml = Path(self.tmp.name) / f"{stem}.yaml"
                    yaml.write_text(text[:text.index("formats:")] + f"formats:\n  {assignment}: {fmt}\n")
                if main(["compile", str(yaml), "--assignment", assignment, "-o", str(out), "--allow-overfit"]) != 0:
                    raise SystemExit(f"hlsnn compile {yaml} --assignment {assignment} failed")
                self._compiled[key] = str(out)
                return str(out)
            yaml = ROOT / model
            if fmt is not None:         # a deployment YAML as the tests write one for an ONNX file
                yaml = Path(self.tmp.name) / f"{stem}.yaml"
                yaml.write_text(f"name: {Path(model).stem}\nmodel: {ROOT / model}\ndata: digits\nlayout: auto\n"
                                + ("task: regression\ntargets: inputs\n" if regression else "")
                                + f"formats:\n  {assignment}: {fmt}\n")
            if main(["compile", str(yaml), "--assignment", assignment, "-o", str(out), "--allow-overfit"]) != 0:
                raise SystemExit(f"hlsnn compile {model} --assignment {assignment} failed")
            self._compiled[key] = str(out)
        return self._compiled[key]

    def values(self, source):
        if source not in self._values:
            self._values[source] = source.compute(self)
        return self._values[source]


def _value(vals, name):
    """``vals[name]``; a name ending in ``_ms`` is its ``_us`` value / 1000; ``A+B+C`` the sum."""
    if "+" in name:
        return sum(_value(vals, part) for part in name.split("+"))
    if name not in vals and name.endswith("_ms") and name[:-3] + "_us" in vals:
        return vals[name[:-3] + "_us"] / 1e3
    return vals[name]


# A built model is trained when the check runs, and its float weights follow the CPU's arithmetic:
# on one machine, torch's AVX2 kernels (ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2) instead of its
# AVX-512 ones moved variant_sixth's k_unet_freq weights by up to 0.069 after its few epochs. The
# bfp and shift engines' cycles do not read weight values; the sparse engine's do (the zeros it
# skips), so k_ae_lin's fixed8 layer-by-layer end to end is 6,056.6 us here and 6,056.8 on the
# machine of 2026-11-28's CI. A figure of a built model on the sparse engine therefore reproduces
# within this relative tolerance (any other figure exactly; ``--write`` leaves such a figure as it is).
TRAINED_REL = 1e-3


def _within(text, value):
    """Whether the figure written as ``text`` is within :data:`TRAINED_REL` of ``value``."""
    written = float(text.replace(",", ""))
    return abs(written - value) <= TRAINED_REL * max(abs(value), abs(written))


def locate(text, fig):
    """``(match, problem)``: the template's one match in ``text`` (after ``fig.after``)."""
    rx, _ = _pattern(fig.template)
    start = 0
    if fig.after is not None:
        start = text.find(fig.after)
        if start < 0:
            return None, f"anchor {fig.after!r} not found"
    found = list(rx.finditer(text, start))
    if not found:
        return None, "text not found (the prose around the figure changed?)"
    if len(found) > 1 and fig.after is None:
        return None, f"text found {len(found)} times (give `after`)"
    return found[0], None


def check(figures, root=ROOT, ctx=None, write=False, log=print):
    """Check (or rewrite) every figure; the problems ``[(path, line, message)]``."""
    ctx = ctx or Context()
    problems = []
    for path in dict.fromkeys(f.path for f in figures):
        text = (root / path).read_text()
        new = text
        for fig in (f for f in figures if f.path == path):
            m, why = locate(new, fig)
            if m is None:
                problems.append((path, 0, f"{fig.template[:60]!r}: {why}"))
                continue
            line = new.count("\n", 0, m.start()) + 1
            vals = ctx.values(fig.source)
            _, holes = _pattern(fig.template)
            spans = []
            for i, (name, spec) in enumerate(holes, 1):
                want = format(_value(vals, name), spec)
                if m.group(i) != want and vals.get("_trained_here") and _within(m.group(i), _value(vals, name)):
                    continue                 # the CPU's arithmetic, not the model: see TRAINED_REL
                if m.group(i) != want:
                    problems.append((path, line, f"{name} {m.group(i)} -> {want} ({fig.source.command()})"))
                    spans.append((m.start(i), m.end(i), want))
            log(f"{path}:{line}: {'ok' if not spans else 'STALE'} {fig.source.command()}")
            for s, e, want in reversed(spans):
                new = new[:s] + want + new[e:]
        if write and new != text:
            (root / path).write_text(new)
    return problems


# --- the registry: every modelled figure written by hand in the docs, by file ---

BFP = "docs/engines/bfp_systolic.md"
CM = "docs/network-kernels.md"          # the network kernels' tables (the compiled-models history keeps its day's)
CMP = "docs/compiled-models.md"         # the task page: ResNet-8 per assignment and board
R8 = "configs/models/resnet8_digits32.yaml"
R8S = "configs/models/resnet8_digits32_sparse75.yaml"      # trained, 75% zeros in the sized kernel's shape
R8W4 = "configs/models/resnet8_w4a4_digits32.yaml"          # Brevitas W4A4 (issue 82): w8 and w4a4
DIGITS = "configs/models/digits_cnn.yaml"
DSCNN = "tests/data/torch/tiny/dscnn_ts17.yaml"
MNET6 = "tests/data/torch/tiny/mobilenet_relu6_ts17.yaml"
MNET = "tests/data/torch/tiny/mobilenet_relu_ts17.yaml"
DWA = "tests/data/torch/beyond/v_dw_a_ts17.onnx"
T10 = "{type: twohot, accel: shift10_pynq-z2"
SHIFT = "docs/engines/shift_mac.md"
SPARSE = "docs/engines/sparse_cluster.md"


def _row(op, cells):
    return f"| {op} | {cells}"


FIGURES = [
    # bfp_systolic: the figures table and the DSP packing paragraph
    Figure(BFP, "| GEMV 1×1024×1024 | {cycles:,} | {ms:.3g} ms | {mpc:.1f} / 176 | {util_pct:.1f}% |",
           Op("bfp16_pynq-z2", gemm=GEMV), after="| bfp16_pynq-z2 (100 MHz; 8×11)"),
    Figure(BFP, "| GEMM 256×1024×1024 (6 calls) | {cycles:,} | {ms:.3g} ms | {mpc:.0f} / 176 | {util_pct:.1f}% |",
           Op("bfp16_pynq-z2", gemm=GEMM), after="| bfp16_pynq-z2 (100 MHz; 8×11)"),
    Figure(BFP, "| GEMM 64×4608×512, K in 5 passes (2 calls) | {cycles:,} | {ms:.3g} ms | {mpc:.0f} / 176 | "
                "{util_pct:.1f}% |", Op("bfp16_pynq-z2", gemm=(64, 4608, 512))),
    Figure(BFP, "| GEMV | {cycles:,} | {ms:.2f} ms | {mpc:.1f} / 256 | {util_pct:.1f}% |",
           Op("bfp12_ultra96v2-stats", gemm=GEMV), after="| bfp12_ultra96v2-stats (150 MHz; 16×8)"),
    Figure(BFP, "| GEMM 256×1024×1024 (8 calls) | {cycles:,} | {ms:.3g} ms | {mpc:.0f} / 256 | {util_pct:.1f}% |",
           Op("bfp12_ultra96v2-stats", gemm=GEMM), after="| bfp12_ultra96v2-stats (150 MHz; 16×8)"),
    Figure(BFP, "| GEMV | {cycles:,} | {ms:.2f} ms | {mpc:.1f} / 616 | {util_pct:.1f}% |",
           Op("bfp8_ultra96v2", gemm=GEMV), after="| bfp8_ultra96v2 (150 MHz; 28×11, packed)"),
    Figure(BFP, "| GEMM 256×1024×1024 (6 calls) | {cycles:,} | {ms:.3g} ms | {mpc:.0f} / 616 | {util_pct:.1f}% |",
           Op("bfp8_ultra96v2", gemm=GEMM), after="| bfp8_ultra96v2 (150 MHz; 28×11, packed)"),
    # bfp8_zcu104's rows (GEMV mode; the GEMM's split: hzov)
    Figure(BFP, "| GEMV | {cycles:,} | {ms:.2f} ms | {mpc:.1f} / 1536 | {util_pct:.1f}% |",
           Op("bfp8_zcu104", gemm=GEMV), after="| bfp8_zcu104 (150 MHz; 48×16)"),
    Figure(BFP, "| GEMV 1×1024×1024, `--resident` (GEMV mode) | {cycles:,} | {us:.1f} µs | {mpc:.0f} / 1536 | "
                "{util_pct:.1f}% |", Op("bfp8_zcu104", gemm=GEMV, resident=True)),
    Figure(BFP, "| GEMM 4×1024×1024, `--resident` (GEMV mode, the samples one after another) | {cycles:,} | "
                "{us:.1f} µs | {mpc:.0f} / 1536 | {util_pct:.1f}% |", Op("bfp8_zcu104", gemm=(4, 1024, 1024), resident=True)),
    Figure(BFP, "| GEMM 256×1024×1024 (2 calls: the weights streamed once, the second call's samples in the array "
                "loop) | {cycles:,} | {ms:.2f} ms | {mpc:.0f} / 1536 | {util_pct:.1f}% |", Op("bfp8_zcu104", gemm=GEMM)),
    Figure(BFP, "The GEMM is then {cycles:,} cycles, {util_pct:.1f}% of the peak", Op("bfp8_zcu104", gemm=GEMM)),
    Figure(BFP, "The ZCU104 config has 1,536 DSPs, and its GEMM takes {ms:.2f} ms.", Op("bfp8_zcu104", gemm=GEMM)),
    Figure(BFP, "Its GEMM 256×1024×1024 takes {cycles:,} cycles ({util_pct:.1f}% of 616 MAC/cycle, {ms:.2f} ms)",
           Op("bfp8_ultra96v2", gemm=GEMM)),
    Figure(BFP, "against {cycles:,} for the unpacked 14×11 ({ms:.2f} ms)",
           Op("bfp8_ultra96v2", gemm=GEMM, edit=(("rows", 14), ("dsp_packing", False)))),
    Figure(BFP, "ZU3EG's DSPs: {dsp} of 360, the same as an unpacked 14×11 array", Res("bfp8_ultra96v2")),
    Figure(BFP, "an estimated {lut_k:.1f}k LUTs instead of", Res("bfp8_ultra96v2")),
    Figure(BFP, "LUTs instead of {lut_k:.1f}k, and", Res("bfp8_ultra96v2", edit=(("rows", 14), ("dsp_packing", False)))),
    Figure(BFP, "and {bram} BRAM36 instead of", Res("bfp8_ultra96v2")),
    Figure(BFP, "BRAM36 instead of {bram} (wider weight words)",
           Res("bfp8_ultra96v2", edit=(("rows", 14), ("dsp_packing", False)))),
    # shift_mac: the figures table and the issue-13/14 shapes after it
    *[Figure(SHIFT, _row(op, "{cycles:,} | " + t + " | {mpc:.%df} / %d | {util_pct:.1f}%% |" % (d, peak)),
             Op(cfg, **kw), after=f"| {cfg} (") for cfg, op, t, d, peak, kw in [
        ("shift8_pynq-z2", "GEMV, two-hot", "{ms:.2f} ms", 1, 128, dict(gemm=GEMV, mode="twohot")),
        ("shift8_pynq-z2", "GEMV 1×256×256, two-hot, `--resident`", "{ms:.2f} ms", 1, 128,
         dict(gemm=(1, 256, 256), mode="twohot", resident=True)),
        ("shift8_pynq-z2", "GEMM 256×1024×1024, two-hot (2 calls)", "{ms:.3g} ms", 0, 128, dict(gemm=GEMM, mode="twohot")),
        ("shift8_pynq-z2", "GEMM 256×1024×1024, PoT (2 calls)", "{ms:.1f} ms", 0, 256, dict(gemm=GEMM, mode="pot")),
        ("shift8_pynq-z2", "conv 64→64 3×3 56×56, two-hot (1 call)", "{ms:.3g} ms", 0, 128, dict(conv=CONV, mode="twohot")),
        ("shift8_pynq-z2", "conv, PoT (1 call)", "{ms:.3g} ms", 0, 256, dict(conv=CONV, mode="pot")),
        ("shift8_zcu104", "GEMV, dual PoT", "{ms:.2f} ms", 1, 1216, dict(gemm=GEMV, mode="pot")),
        ("shift8_zcu104", "GEMV, dual PoT, `--resident`", "{ms:.2f} ms", 1, 1216, dict(gemm=GEMV, mode="pot", resident=True)),
        ("shift8_zcu104", "GEMM 256×1024×1024, two-hot", "{ms:.3g} ms", 0, 608, dict(gemm=GEMM, mode="twohot")),
        ("shift8_zcu104", "GEMM 256×1024×1024, PoT", "{ms:.3g} ms", 0, 1216, dict(gemm=GEMM, mode="pot")),
        ("shift8_zcu104", "conv 64→64 3×3 56×56, two-hot (1 call)", "{ms:.3g} ms", 0, 608, dict(conv=CONV, mode="twohot")),
        ("shift8_zcu104", "conv, PoT (1 call)", "{ms:.2f} ms", 0, 1216, dict(conv=CONV, mode="pot"))]],
    # shift_mac.md: dw_a two-hot on shift10_pynq-z2 with weight_terms: 2 (and one term)
    Figure(SHIFT, "one start of {kernel_us:.1f} us of kernel time and {e2e_us:.1f} us end to end",
           Net(DWA, "t10", format=T10 + ", weight_terms: 2}")),
    Figure(SHIFT, "against {starts} starts and {e2e_us:,.1f} us layer by layer",
           Net(DWA, "t10", format=T10 + ", weight_terms: 2}", layers=True)),
    Figure(SHIFT, "and {lut_k:.1f}k LUTs ({lut_pct:.0f} %), {bram} BRAM36,\n{dsp} DSP by the network kernel's",
           Net(DWA, "t10", format=T10 + ", weight_terms: 2}")),
    Figure(SHIFT, "(one term: {lut_k:.1f}k, {lut_pct:.0f} %)", Net(DWA, "t10", format=T10 + "}")),
    # shift_mac.md: ResNet-8 on the board-sized network kernels (issue 83)
    *[Figure(SHIFT, f"| `{a}` (`{c}`) | " + "{_} | {lut:,} ({lut_pct:.0f}%) | {bram} | {dsp} | {kernel_us:.1f} us | "
             "{e2e_us:.1f} us |", Net(R8, a))
      for a, c in (("twohot_z2", "shift8net_pynq-z2"), ("pot_z2", "shift8net_pot_pynq-z2"))],
    # deploy-beyond-cnn.md: the same dw_a in shift10 / shift8, one and two terms
    *[f for name, acc, terms, one, lut in [
        ("shift10, two terms", "shift10_pynq-z2", 2, "{kernel_us:.1f} us kernel, {e2e_us:.1f} us end to end",
         "{lut:,} ({lut_pct:.0f} %), {bram} BRAM36 |"),
        ("shift10, one term", "shift10_pynq-z2", 1, "{kernel_us:.1f} us, {e2e_us:.1f} us",
         "{lut:,} ({lut_pct:.0f} %), {bram} BRAM36 |"),
        ("shift8, two terms", "shift8_pynq-z2", 2, "{kernel_us:.1f} us, {e2e_us:.1f} us", "{lut:,}: more than"),
        ("shift8, one term", "shift8_pynq-z2", 1, "{kernel_us:.1f} us, {e2e_us:.1f} us",
         "{lut:,} ({lut_pct:.0f} %), {bram} BRAM36 |")]
      for fmt in ["{type: twohot, accel: %s%s}" % (acc, ", weight_terms: 2" if terms == 2 else "")]
      for f in [Figure("docs/history/deploy-beyond-cnn.md", f"| {name} | " + "{_} | {_} | " + one + " |", Net(DWA, "t", format=fmt)),
                Figure("docs/history/deploy-beyond-cnn.md", f"| {name} | " + "{_} | {_} | {_} | {_} | " + lut, Net(DWA, "t", format=fmt)),
                Figure("docs/history/deploy-beyond-cnn.md", f"| {name} | " + "{_} | {_} | {_} | {starts} starts, "
                       + ("{kernel_us:.1f} us kernel, " if terms == 2 else "") + "{e2e_us:,.1f} us |",
                       Net(DWA, "t", format=fmt, layers=True))]],
    Figure(SHIFT, "the model gives {cycles:,} cycles ({util_pct:.1f}%) on the 8×11 array", Op("bfp16_pynq-z2", gemm=(64, 512, 512))),
    Figure(SHIFT, "and {cycles:,} cycles ({util_pct:.1f}%) on the 48×16 one", Op("bfp8_zcu104", gemm=(64, 512, 512))),
    Figure(SHIFT, "it gives {cycles:,} ({util_pct:.1f}%) on 16×8", Op("shift8_pynq-z2", gemm=(64, 512, 512), mode="twohot")),
    # sparse_cluster: the figures table at the derived II (every loop at its page's II since the
    # output loops' DEPENDENCE pragmas, session 33: OutPixels/PoolPixels derived 6/7 before)
    *[Figure(SPARSE, _row(op, "{cycles:,} | {ms:.%s} ms | {mpc:.1f} / %d | {util_pct:.1f}%% |" % (f, peak)),
             Op(cfg, conv=CONV, density=d), after=f"| {cfg} (") for cfg, op, f, peak, d in [
        ("sparse8_pynq-z2", "conv, 100% dense", "3g", 128, 1.0), ("sparse8_pynq-z2", "conv, 50%", "3g", 128, 0.5),
        ("sparse8_pynq-z2", "conv, 10%", "2f", 128, 0.1), ("sparse20_zcu104", "conv, 100% dense", "3g", 320, 1.0),
        ("sparse20_zcu104", "conv, 50%", "3g", 320, 0.5), ("sparse20_zcu104", "conv, 10%", "2f", 320, 0.1)]],
    # the zeros the board-sized kernel skips: PTQ fixed8 against the model trained in the kernel's shape
    Figure(SPARSE, "| 0% | 98.61% (float 98.33%) | {kernel_ms:.2f} ms | {e2e_ms:.2f} ms |", Net(R8, "fixed8_z2")),
    Figure(SPARSE, "| 75.2% | 99.72% (float 100%) | {kernel_ms:.2f} ms | {e2e_ms:.2f} ms |", Net(R8S, "sparse75_z2")),
    # the W4A4 ResNet-8 on the int8 and the 4-bit kernel (issue 82; benchmarks/bench_w4a4_bound.py for the other shapes)
    Figure(SPARSE, "| `w8` on `sparse8net_pynq-z2` (two int8 products a DSP) | 512 | {kernel_ms:.3f} ms | {e2e_ms:.3f} ms |",
           Net(R8W4, "w8")),
    Figure(SPARSE, "| `w4a4` on `sparse4net_pynq-z2` (four int4 products a DSP) | 1,024 | {kernel_ms:.3f} ms | "
           "{e2e_ms:.3f} ms |", Net(R8W4, "w4a4")),
    Figure(SPARSE, "| four, one weight word a lane in LUT ROMs (`sparse4net_pynq-z2`) | {kernel_ms:.3f} ms | {_} | {_} | "
           "{bram} | {lut:,} |", Net(R8W4, "w4a4")),
    Figure("docs/tutorials/train.md", "99.72% on the test images (float 100%), {e2e_ms:.2f} ms end to end",
           Net(R8S, "sparse75_z2")),
    Figure("docs/tutorials/train.md", "against {e2e_ms:.2f} ms for the dense int8 model", Net(R8, "fixed8_z2")),
    # U = 2 against U = 1 (the percentages, 14% at 50% and 15% at 20%, are not checked): the
    # U = 1 variant's 272 loop counters had overflowed the C-simulation's 256-slot table, which made
    # its cycles change from call to call (notes/hsparse.md); with 1,024 slots they reproduce
    Figure(SPARSE, "than U = 1 ({cycles:,} → ", Op("sparse20_zcu104", conv=CONV, density=0.5,
                                                    edit=(("weights_per_round", 1),))),
    Figure(SPARSE, " → {cycles:,} cycles) and 15% fewer at 20%", Op("sparse20_zcu104", conv=CONV, density=0.5)),
    # README.md's prose beside the ResNet-8 table (the table itself: benchmarks/readme_figures.py)
    Figure("README.md", "on the PYNQ-Z2 in\n**{e2e_ms:.2f} ms end to end** by the model", Net(R8, "fixed8_z2")),
    Figure("README.md", "in that shape (`configs/models/resnet8_digits32_sparse75.yaml`, 99.72%, float 100%) takes "
                        "**{e2e_ms:.2f} ms**", Net(R8S, "sparse75_z2")),
    Figure("README.md", "The host is {host_ms:.3f} ms of each", Net(R8, "fixed8_z2")),
    Figure("README.md", "The host is {host_ms:.3f} ms of each", Net(R8S, "sparse75_z2")),
    # compiled-models.md: ResNet-8 in each assignment on its config's board, one start
    *[Figure(CMP, f"| `{a}` ({cfg}) | " + "{_} | {kernel_us:,.0f} us | {e2e_us:,.0f} us | {lut:,} | {dsp} | {bram} |",
             Net(R8, a)) for a, cfg in [
        ("fixed8_z2", "sparse8net_pynq-z2"), ("twohot_z2", "shift8net_pynq-z2"), ("pot_z2", "shift8net_pynq-z2"),
        ("bfp8_z2", "bfp8net_pynq-z2"), ("bfp16", "bfp16_pynq-z2"), ("twohot", "shift8_pynq-z2"), ("pot", "shift8_pynq-z2"),
        ("fixed8", "sparse8_pynq-z2"), ("sparse50", "sparse8_pynq-z2"), ("fixed8_kv260", "sparse8net_kv260"),
        ("fixed8_zu3", "sparse8net_aup-zu3"), ("bfp8_zu3", "bfp8_aup-zu3"), ("twohot_zu3", "shift8_aup-zu3"),
        ("fixed8_zcu104", "sparse8net_zcu104"), ("bfp8", "bfp8_zcu104")]],
    Figure(CMP, "`resnet8_digits32_sparse75.yaml`) | {_} | {kernel_us:,.0f} us | {e2e_us:,.0f} us | {lut:,} | {dsp} | {bram} |",
           Net(R8S, "sparse75_z2")),
    # network-kernels.md: the ResNet-8 and digits_cnn network-path tables
    Figure(CM, "| modelled kernel time on PYNQ-Z2 (`kernel_us`) | {kernel_us:.1f} us |", Net(DIGITS, "twohot")),
    Figure(CM, "| modelled kernel time on PYNQ-Z2 (`kernel_us`) | {_} | {kernel_ms:.2f} ms (", Net(R8, "twohot")),
    Figure(CM, "| modelled end to end on PYNQ-Z2, host included, batch 1 | {e2e_us:.1f} us |", Net(DIGITS, "twohot")),
    Figure(CM, " ms ({kernel_ms:.2f} ms layer by layer) |", Net(R8, "twohot", layers=True)),
    Figure(CM, " ms ({e2e_ms:.0f} ms with one call per layer) |", Net(R8, "twohot", layers=True)),
    Figure(CM, "| modelled end to end on PYNQ-Z2, host included, batch 1 | {_} | {e2e_ms:.2f} ms (", Net(R8, "twohot")),
    Figure(CM, "| the same per image at batch 16 (`--batch 16`) | | {e2e_per_image_ms:.2f} ms |",
           Net(R8, "twohot", batch=16)),
    Figure(CM, "| bytes the host touches per image (modelled `host_bytes`) | {host_bytes:,} |", Net(DIGITS, "twohot")),
    Figure(CM, "| bytes the host touches per image (modelled `host_bytes`) | {_} | {host_bytes:,} (", Net(R8, "twohot")),
    Figure(CM, "| the network kernel (`hlsnn.resources` + the datapath model) | | {bram} BRAM36, {lut:,} LUT, {dsp} DSP |",
           Net(R8, "twohot")),
    Figure(CM, "| kernel per image (`kernel_us`) | {kernel_ms:.2f} ms |", Net(R8, "fixed8")),
    Figure(CM, "| kernel per image (`kernel_us`) | {_} | {kernel_ms:.2f} ms |", Net(R8, "sparse50")),
    Figure(CM, "| end to end, host included (the network path's host constants), batch 1 | {e2e_ms:.2f} ms |",
           Net(R8, "fixed8")),
    Figure(CM, "| end to end, host included (the network path's host constants), batch 1 | {_} | {e2e_ms:.2f} ms |",
           Net(R8, "sparse50")),
    Figure(CM, "| the same per image at batch 16 (`--batch 16`) | {e2e_per_image_ms:.2f} ms |", Net(R8, "fixed8", batch=16)),
    Figure(CM, "| the same per image at batch 16 (`--batch 16`) | {_} | {e2e_per_image_ms:.2f} ms |",
           Net(R8, "sparse50", batch=16)),
    Figure(CM, "| the kernel (`hlsnn.resources` + the datapath allowances) | {bram} BRAM36, {lut:,} LUT, {dsp} DSP |",
           Net(R8, "fixed8")),
    Figure(CM, "| the kernel (`hlsnn.resources` + the datapath allowances) | {_} | {bram} BRAM36, {lut:,} LUT, {dsp} DSP |",
           Net(R8, "sparse50")),
    *[Figure(CM, f"| {board} (`{cfg}`) | " + "{_} | {_} | {kernel_ms:.3f} ms | {lut:,} ({lut_pct:.0f}%) | {dsp} "
                 "({dsp_pct:.0f}%) | {bram} ({bram_pct:.0f}%) |", Net(R8, a)) for board, cfg, a in [
        ("PYNQ-Z2", "sparse8net_pynq-z2", "fixed8_z2"), ("AUP-ZU3", "sparse8net_aup-zu3", "fixed8_zu3"),
        ("ZCU104", "sparse8net_zcu104", "fixed8_zcu104"), ("KV260", "sparse8net_kv260", "fixed8_kv260")]],
    *[Figure(CM, f"| {name} | " + "{_} | {_} → {kernel_us:.0f} us | {_} → {e2e_ms:.2f} ms | {bram} BRAM36"
                 + ", {lut:,} LUT, {dsp} DSP |", Net(m, a))
      for name, m, a in [("DS-CNN two-hot", DSCNN, "twohot"), ("DS-CNN fixed8", DSCNN, "fixed8"),
                         ("MobileNet-ReLU6 two-hot", MNET6, "twohot"), ("MobileNet-ReLU6 fixed8", MNET6, "fixed8"),
                         ("MobileNet-ReLU two-hot", MNET, "twohot")]],
    Figure(CM, "Per layer, DS-CNN two-hot: each depthwise conv {/3/Conv.cycles:,} cycles ({/3/Conv.us:.1f} us;",
           Net(DSCNN, "twohot")),
    Figure(CM, "pointwise conv {/6/Conv.cycles:,} ({/6/Conv.us:.1f} us), the 10 × 4 stem {/0/Conv.cycles:,} ({/0/Conv.us:.1f} "
               "us, unfolded into 12 banks), the image load {load.us:.1f} us", Net(DSCNN, "twohot")),
    Figure(CM, "(the kernel {lut:,} LUTs, {lut_pct:.0f}% of the Z-7020's)", Net(DSCNN, "twohot")),
    Figure(CM, "| kernel per image (`kernel_us`), layer by layer → network kernel | {_} → {kernel_ms:.2f} ms |",
           Net(R8, "bfp16")),
    Figure(CM, "| kernel per image (`kernel_us`), layer by layer → network kernel | {_} | {_} → {kernel_ms:.2f} ms |",
           Net(R8, "bfp8")),
    Figure(CM, "| end to end, host included, layer by layer → network kernel | {_} → {e2e_ms:.2f} ms |", Net(R8, "bfp16")),
    Figure(CM, "| end to end, host included, layer by layer → network kernel | {_} | {_} → {e2e_ms:.2f} ms |",
           Net(R8, "bfp8")),
    Figure(CM, "| the same per image at batch 16 | {e2e_per_image_ms:.2f} ms |", Net(R8, "bfp16", batch=16)),
    Figure(CM, "| the same per image at batch 16 | {_} | {e2e_per_image_ms:.2f} ms |", Net(R8, "bfp8", batch=16)),
    Figure(CM, "| the network kernel (`hlsnn.resources` + the datapath model) | {bram} BRAM36, {lut:,} LUT, {dsp} DSP (",
           Net(R8, "bfp16")),
    Figure(CM, "of the Z-7020's 53,200 LUTs) | {bram} BRAM36, {lut:,} LUT, {dsp} DSP |", Net(R8, "bfp8")),
    Figure(CM, "digits_cnn bfp16: {kernel_us:.1f} us of kernel, {e2e_us:.1f} us end to end", Net(DIGITS, "bfp16")),
    # deploy.md: ResNet-8's layer path, the engine layers' modelled kernel time at batch 1 (host left out)
    *[Figure("docs/deploy.md", f"| {fmt} (" + "{_} | {_} | {_} | {_} | {kernel_ms:.2f} ms |", Net(R8, a, layers=True))
      for fmt, a in [("bfp16", "bfp16"), ("twohot", "twohot"), ("pot", "pot"), ("fixed8", "fixed8"),
                     ("sparse50", "sparse50")]],
    Figure("docs/deploy.md", "| bfp8 (" + "{_} | {_} | {_} | {_} | {kernel_ms:.2f} ms |", Net(R8, "bfp8", layers=True)),
    Figure("docs/deploy.md", "s1a and s1b take {s1a.us:.0f} µs each", Net(R8, "bfp8", layers=True)),
    Figure("docs/deploy.md", "the 64-channel stage takes {s3a.ms+s3s.ms+s3b.ms:.1f} of the {kernel_ms:.1f} ms",
           Net(R8, "fixed8", layers=True)),
    Figure("docs/deploy.md", "It costs 648 of the ten layers' {kernel_cycles:,} cycles", Net(R8, "fixed8", layers=True)),
    # history/performance.md: the modelled host of ResNet-8 fixed8_z2 (the measured columns are benchmarks)
    Figure("docs/history/performance.md", "| ResNet-8 fixed8_z2 (PYNQ-Z2) | {_} | {_} | {host_us:.1f} us |",
           Net(R8, "fixed8_z2", board="x86-sim")),
    Figure("docs/history/performance.md", "| ResNet-8 fixed8_z2 (PYNQ-Z2) | {_} | {_} | {_} | {_} | {e2e_us:.0f} us (was 408) |",
           Net(R8, "fixed8_z2")),
    Figure("docs/history/performance.md", "ResNet-8 fixed8_z2 on the PYNQ-Z2: host {host_us:.0f} us (was 200): the C call "
                                  "{c_call_us:.1f} us (rule 1 on the 3,072 float32 values {rule1_us:.1f} us of it",
           Net(R8, "fixed8_z2")),
    Figure("docs/history/performance.md", "the loader's Python {loader_us:.1f} us (was 38.4)", Net(R8, "fixed8_z2")),
    Figure("docs/history/performance.md", "input check of its own (was 17.1); {e2e_us:.0f} us end to end against",
           Net(R8, "fixed8_z2")),
    # deploy-models.md: weight_terms' table, the one-term column's modelled us (two-hot, layer by layer)
    *[Figure("docs/deploy-models.md", f"| {name} | " + "{_} | {_}, {kernel_us:.0f} us |", Net(m, "twohot", layers=True))
      for name, m in [("dscnn_ts17 (tiny)", DSCNN), ("mobilenet_relu6_ts17 (tiny)", MNET6),
                      ("mobilenet_relu_ts17 (tiny)", MNET), ("resnet8_ts17 (tiny)", "tests/data/torch/tiny/resnet8_ts17.yaml"),
                      ("resnet8_digits32 (`configs/models`)", R8)]],
    # development.md (moved from hardware-rules.md): the "now" column of issue 30's before/after table (bfp8_zcu104's rows: hzcu)
    *[Figure("docs/development.md", f"| {op} | " + "{_} | " + cell, Op(cfg, gemm=g), after=f"| {cfg} |")
      for cfg, op, g, cell in [
          ("bfp16_pynq-z2", "GEMV 1×1024×1024", GEMV, "{cycles:,} |"),
          ("bfp16_pynq-z2", "GEMM 256×1024×1024", GEMM, "{cycles:,} ({util_pct:.1f}%) |"),
          ("bfp16_pynq-z2", "GEMM 64×4608×512", (64, 4608, 512), "{cycles:,} ({util_pct:.1f}%) |"),
          ("bfp12_ultra96v2-stats", "GEMV", GEMV, "{cycles:,} |"),
          ("bfp12_ultra96v2-stats", "GEMM 256×1024×1024", GEMM, "{cycles:,} ({util_pct:.1f}%) |"),
          ("bfp8_ultra96v2", "GEMV", GEMV, "{cycles:,} |"),
          ("bfp8_ultra96v2", "GEMM 256×1024×1024", GEMM, "{cycles:,} ({util_pct:.1f}%) |"),
          ("bfp8_zcu104", "GEMM 256×1024×1024", GEMM, "{cycles:,} ({util_pct:.1f}%) |")]],
    Figure("docs/development.md", "Its \"now\" is {cycles:,} ({util_pct:.1f}%) since session 33",
           Op("bfp8_zcu104", gemm=GEMM)),
    # models.md: the sim target's DMA split leaves bfp16's GEMM's calls and cycles as on csim
    Figure("docs/models.md", "same {calls} calls and {cycles:,} cycles there", Op("bfp16_pynq-z2", gemm=GEMM, target="sim")),
    Figure(BFP, "8×11 (176 multipliers, est. {dsp}/220 DSP with the exponent units)", Res("bfp16_pynq-z2")),
    Figure(BFP, "8×11 (176 multipliers, est. {dsp}/220 DSP; {bram} of 140 BRAM36)", Res("bfp8_pynq-z2")),
    Figure(BFP, "(616 multipliers in 308 DSPs, est. {dsp}/360 DSP with the exponent units)", Res("bfp8_ultra96v2")),
]


# --- docs/history/deploy-beyond-cnn.md (hbeyond): issue 52's models, one start and layer by layer ---
#
# The committed files of tests/data/torch/beyond compiled with the families' formats (bfp8 on
# bfp8_zcu104, two-hot on shift8_pynq-z2, fixed8 on sparse8_pynq-z2; a dense model's YAML a
# regression one, as the families' own), and the families' models the repository builds (built()).

BEYOND_PAGE = "docs/history/deploy-beyond-cnn.md"
FAMILY_FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
                  "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}
_DENSE = {"unet_upsample_ts17", "unet_convtranspose_ts17", "v_f_ae1d_lin_ts17", "v_f_unet_bil_ts17",
          "v_f_unet_milesial_ts17", "v_f_unet_reflect_ts17", "v_unet_bilinear_ts17", "v_unet_ct2_ts17",
          "v_unet_ct3_ts17", "v_unet_mix_ts17", "v_unet_size_ts17"}


def _beyond(name, a, **kw):
    """A committed file of tests/data/torch/beyond in the family format ``a``."""
    return Net(f"tests/data/torch/beyond/{name}.onnx", a, format=FAMILY_FORMATS[a], regression=name in _DENSE, **kw)


def _fam(family, key, a, **kw):
    """A model of FAMILY's export (tests/fixtures/torch_families) in its YAML's assignment ``a``."""
    return Net(built(family, key), a, **kw)


def _bf(template, source, after=None):
    return Figure(BEYOND_PAGE, template, source, after)


def _one_vs_layers(anchor, src, layers_src, one, lay):
    """A "one start ... against layer by layer" pair after ``anchor``."""
    return [_bf(one, src, anchor), _bf(lay, layers_src, anchor)]


V4, V5, V6, V7, VF, VFR, VD = ("variant_fourth", "variant_fifth", "variant_sixth", "variant_seventh",
                               "variant_family", "variant_fresh", "variant_dense")
ONE = "{e2e_us:.1f} ({kernel_us:.1f})"

BEYOND = [
    # the header: the four models moved to one start on 2026-11-26 and k_wavenet's host
    _bf("in brackets: s_ghost_ts17 bfp8 (ZCU104) {e2e_us:.1f} us ({host_us:.1f})", _fam(V7, "s_ghost_ts17", "bfp8")),
    _bf("two-hot {e2e_us:.1f} us ({host_us:.1f}), fixed8", _fam(V7, "s_ghost_ts17", "twohot"), "in brackets: s_ghost_ts17"),
    _bf("fixed8 {e2e_us:.1f} us ({host_us:.1f}); s_unet_res_dynamo", _fam(V7, "s_ghost_ts17", "fixed8"), "in brackets: s_ghost_ts17"),
    _bf("s_unet_res_dynamo bfp8 {e2e_us:.1f} us ({host_us:.1f})", _fam(V7, "s_unet_res_dynamo", "bfp8")),
    _bf("two-hot {e2e_us:.1f} us ({host_us:.1f}); h_dw_prelu_ts17", _fam(V7, "s_unet_res_dynamo", "twohot")),
    _bf("h_dw_prelu_ts17 bfp8 (ZCU104) {e2e_us:.1f} us ({host_us:.1f}", _fam(V5, "h_dw_prelu_ts17", "bfp8")),
    _bf("k_ae_lin_ts17 fixed8 {e2e_us:.1f} us ({host_us:.1f})", _fam(V6, "k_ae_lin_ts17", "fixed8")),
    _bf("k_wavenet two-hot host {host_us:.1f} us", _fam(V6, "k_wavenet_ts17", "twohot")),
    _bf("bfp8 host {host_us:.1f} us", _fam(V6, "k_wavenet_ts17", "bfp8"), "k_wavenet two-hot host"),
    # attention on the layer path (engine placement), at today's II
    _bf("at II 1 the engine placement gives mha_clf {e2e_us:,.0f} us", _beyond("mha_clf_ts17", "bfp8", layers=True)),
    _bf("us and encoder_clf {e2e_us:,.0f} us (`hlsnn perf", _beyond("encoder_clf_dynamo", "bfp8", layers=True)),
    # fixed8's layer-path figures of that day are history; since issue 79 one start (engines.network.tokens.attention)
    _bf("sparse network kernel, mha_clf {e2e_us:,.0f} us and", _beyond("mha_clf_ts17", "fixed8")),
    _bf("encoder_clf {e2e_us:,.0f} us end to end in one start, re-modelled", _beyond("encoder_clf_dynamo", "fixed8")),
    # the fourth family: g_glu and g_tcn
    _bf("| g_glu, one start | {_} | " + ONE + " |", _fam(V4, "g_glu_ts17", "twohot")),
    _bf("| g_glu, one start | {_} | {_} | " + ONE + " |", _fam(V4, "g_glu_ts17", "fixed8")),
    _bf("| g_glu, layer by layer | | {e2e_us:,.1f} ({starts} starts) |", _fam(V4, "g_glu_ts17", "twohot", layers=True)),
    _bf("| g_glu, layer by layer | | {_} | {e2e_us:,.1f} ({starts} starts) |", _fam(V4, "g_glu_ts17", "fixed8", layers=True)),
    _bf("| g_tcn, one start | " + ONE + " |", _fam(V4, "g_tcn_ts17", "bfp8")),
    _bf("| g_tcn, one start | {_} | " + ONE + " |", _fam(V4, "g_tcn_ts17", "twohot")),
    _bf("| g_tcn, one start | {_} | {_} | " + ONE + " |", _fam(V4, "g_tcn_ts17", "fixed8")),
    _bf("| g_tcn, layer by layer | {e2e_us:,.1f} ({starts} starts;", _fam(V4, "g_tcn_ts17", "bfp8", layers=True)),
    _bf("| g_tcn, layer by layer | {_} | {e2e_us:,.1f} ({starts} starts) |", _fam(V4, "g_tcn_ts17", "twohot", layers=True)),
    _bf("| g_tcn, layer by layer | {_} | {_} | {e2e_us:,.1f} ({starts} starts) |",
        _fam(V4, "g_tcn_ts17", "fixed8", layers=True)),
    _bf("g_glu two-hot {bram} BRAM36, {lut:,} LUT, {dsp} DSP;", _fam(V4, "g_glu_ts17", "twohot")),
    _bf("DSP; fixed8 {bram} BRAM36, {lut:,} LUT, {dsp} DSP; g_tcn bfp8", _fam(V4, "g_glu_ts17", "fixed8")),
    _bf("g_tcn bfp8 {bram} BRAM36, {lut:,} LUT, {dsp} DSP; two-hot", _fam(V4, "g_tcn_ts17", "bfp8")),
    _bf("DSP; two-hot {bram} BRAM36, {lut:,} LUT, {dsp} DSP; fixed8", _fam(V4, "g_tcn_ts17", "twohot"), "g_tcn bfp8"),
    _bf("LUT, {_} DSP; fixed8 {bram} BRAM36, {lut:,} LUT, {dsp} DSP. Re-modelled", _fam(V4, "g_tcn_ts17", "fixed8")),
    # tok_b (the family's), se_cnn, dw_b
    _bf("`hlsnn perf tok_b_ts17-twohot.hlsnn --batch 1` (pynq-z2, modelled, derived II): {e2e_us:.1f} us end to end",
        _fam(VF, "tok_b_ts17", "twohot")),
    _bf("in one start ({/0/LayerNormalization.host_us:.1f} us of it the host `LayerNormalization`)",
        _fam(VF, "tok_b_ts17", "twohot")),
    _bf("against {e2e_us:,.1f} us and {starts} starts", _fam(VF, "tok_b_ts17", "twohot", layers=True),
        "`hlsnn perf tok_b_ts17-twohot.hlsnn"),
    *_one_vs_layers("`hlsnn perf se_cnn_ts17-FORMAT.hlsnn --batch 1`", _beyond("se_cnn_ts17", "twohot"),
                    _beyond("se_cnn_ts17", "twohot", layers=True),
                    "two-hot {e2e_us:.1f} us end to end ({kernel_us:.1f} us of", "kernel) against {e2e_us:,.0f} us ({starts} starts)"),
    *_one_vs_layers("`hlsnn perf se_cnn_ts17-FORMAT.hlsnn --batch 1`", _beyond("se_cnn_ts17", "fixed8"),
                    _beyond("se_cnn_ts17", "fixed8", layers=True),
                    "fixed8 {e2e_us:.1f} us ({kernel_us:.1f}) against", "against {e2e_us:,.0f} us (estimates, not a"),
    *_one_vs_layers("`hlsnn perf se_cnn_ts17-bfp8.hlsnn", _beyond("se_cnn_ts17", "bfp8"),
                    _beyond("se_cnn_ts17", "bfp8", layers=True),
                    "{e2e_us:.1f} us end to end, {kernel_us:.1f} us of kernel", "against {e2e_us:,.1f} us and {starts} starts"),
    *[f for a, one, lay in [("twohot", "two-hot {e2e_us:.1f} us end to end ({kernel_us:.1f} us of kernel)",
                             "of kernel) against {e2e_us:,.0f} us and {starts} starts;"),
                            ("fixed8", "fixed8 {e2e_us:.1f} us ({kernel_us:.1f}) against",
                             "us ({_}) against {e2e_us:,.0f} us and {starts} starts; bfp8"),
                            ("bfp8", "bfp8 {e2e_us:.1f} us ({kernel_us:.1f}) against",
                             "against {e2e_us:,.0f} us and {starts} starts. **tok_res**")]
      for f in _one_vs_layers("`hlsnn perf dw_b_ts17-FORMAT.hlsnn --batch 1`", _fam(VF, "dw_b_ts17", a),
                              _fam(VF, "dw_b_ts17", a, layers=True), one, lay)],
    # the fresh family's f_unet_add and f_mbv3_dl (the committed v_f_mbv3_dl)
    *_one_vs_layers("f_unet_add_ts17 fixed8", _fam(VFR, "f_unet_add_ts17", "fixed8"),
                    _fam(VFR, "f_unet_add_ts17", "fixed8", layers=True),
                    "f_unet_add_ts17 fixed8 {e2e_us:.1f} us end to end ({kernel_us:.1f} us of kernel)",
                    "of kernel) against {e2e_us:,.1f} us and {starts}"),
    *_one_vs_layers("f_mbv3_dl_ts17 two-hot", _beyond("v_f_mbv3_dl_ts17", "twohot"),
                    _beyond("v_f_mbv3_dl_ts17", "twohot", layers=True),
                    "f_mbv3_dl_ts17 two-hot {e2e_us:.1f} us ({kernel_us:.1f})", "against {e2e_us:,.1f} us and {starts} starts"),
    *_one_vs_layers("f_mbv3_dl_ts17 two-hot", _beyond("v_f_mbv3_dl_ts17", "bfp8"),
                    _beyond("v_f_mbv3_dl_ts17", "bfp8", layers=True),
                    "bfp8 (ZCU104)\n{e2e_us:.1f} us ({kernel_us:.1f})", "us ({_}) against {e2e_us:,.1f} us and {starts} starts ("),
    # gates of gates: f_dw_cbam (committed), f_tc_cbam and f_dw_gate (the fresh family's)
    *[f for name, mk in [("f_dw_cbam", lambda a, **kw: _beyond("v_f_dw_cbam_ts17", a, **kw)),
                         ("f_tc_cbam", lambda a, **kw: _fam(VFR, "f_tc_cbam_dynamo", a, **kw)),
                         ("f_dw_gate", lambda a, **kw: _fam(VFR, "f_dw_gate_ts17", a, **kw))]
      for i, a in enumerate(["bfp8", "twohot", "fixed8"])
      for f in [_bf(f"| {name}, one start | " + "{_} | " * i + ONE + " |", mk(a)),
                _bf(f"| {name}, layer by layer (" + "{_} | " * (i + 1) + "{e2e_us:,.1f} ({kernel_us:.1f})"
                    + (" ⁸ |" if a == "bfp8" else " |"),
                    mk(a, layers=True))]],
    _bf("| f_dw_cbam, layer by layer ({starts} starts) |", _beyond("v_f_dw_cbam_ts17", "twohot", layers=True)),
    _bf("| f_tc_cbam, layer by layer ({starts} starts) |", _fam(VFR, "f_tc_cbam_dynamo", "twohot", layers=True)),
    _bf("| f_dw_gate, layer by layer ({starts}; fixed8", _fam(VFR, "f_dw_gate_ts17", "twohot", layers=True)),
    _bf("| f_dw_gate, layer by layer ({_}; fixed8 {starts} starts) |", _fam(VFR, "f_dw_gate_ts17", "fixed8", layers=True)),
    # v_dw_a bfp8 (rule 9d)
    *_one_vs_layers("`hlsnn perf v_dw_a_ts17-bfp8 --batch 1`", _beyond("v_dw_a_ts17", "bfp8"),
                    _beyond("v_dw_a_ts17", "bfp8", layers=True),
                    "{starts} start,\n{e2e_us:.1f} us end to end", "against {starts} starts and {e2e_us:,.1f} us layer by layer"),
    # tcresnet: dilation
    _bf("that layer takes {_} of the kernel's {kernel_us:.1f} us at batch 1", _beyond("tcresnet_ts17", "twohot")),
    _bf("us at batch 1 ({_} of {kernel_us:.1f} us\nat batch 32)", _beyond("tcresnet_ts17", "twohot", batch=32)),
    _bf("its non-zeros only) {_} of {kernel_us:.1f} us ({_} of {_})", _beyond("tcresnet_ts17", "fixed8")),
    _bf("its non-zeros only) {_} of {_} us ({_} of {kernel_us:.1f})", _beyond("tcresnet_ts17", "fixed8", batch=32)),
    _bf("End to end, one start against the layer path's {starts} (two-hot)", _beyond("tcresnet_ts17", "twohot", layers=True)),
    _bf("(two-hot) or {starts} (fixed8) per batch", _beyond("tcresnet_ts17", "fixed8", layers=True)),
    _bf("per batch: {e2e_us:.1f} us\nagainst", _beyond("tcresnet_ts17", "twohot")),
    _bf("against {e2e_us:,.0f} us (two-hot) and", _beyond("tcresnet_ts17", "twohot", layers=True)),
    _bf("(two-hot) and {e2e_us:.1f} against", _beyond("tcresnet_ts17", "fixed8")),
    _bf("against {e2e_us:,.0f} us (fixed8) at batch 1", _beyond("tcresnet_ts17", "fixed8", layers=True)),
    _bf("at batch 1; {e2e_us:.1f} against", _beyond("tcresnet_ts17", "twohot", batch=32)),
    _bf("against\n{e2e_us:,.0f} us and", _beyond("tcresnet_ts17", "twohot", batch=32, layers=True), "at batch 1; "),
    _bf("us and {e2e_us:.1f} against {_} us at batch 32", _beyond("tcresnet_ts17", "fixed8", batch=32), "at batch 1; "),
    _bf("against {e2e_us:,.0f} us at batch 32 (the layer path's", _beyond("tcresnet_ts17", "fixed8", batch=32, layers=True)),
    # tcresnet in bfp8 on bfp8_pynq-z2 and bfp8_zcu104 (batch 1 and 32)
    *[_bf(t, Net("tests/data/torch/beyond/tcresnet_ts17.onnx", "bfp8", format="{type: bfp, accel: %s}" % acc, batch=b,
                 layers=lay), "`hlsnn perf` of `tcresnet_ts17` in bfp8 on `bfp8_pynq-z2`") for acc, b, lay, t in [
        ("bfp8_pynq-z2", 1, True, "one start against the layer\npath's {starts}, "),
        ("bfp8_pynq-z2", 1, False, "path's {_}, {e2e_us:.1f} us against"),
        ("bfp8_pynq-z2", 1, True, "us against {e2e_us:,.1f} us end to end at batch 1"),
        ("bfp8_pynq-z2", 1, False, "at batch 1 (kernel {kernel_us:.1f} us against"),
        ("bfp8_pynq-z2", 1, True, "against the layer kernels'\n{kernel_us:.1f}),"),
        ("bfp8_pynq-z2", 32, False, "), {e2e_us:.1f} against"),
        ("bfp8_pynq-z2", 32, True, "against {e2e_us:,.1f} us at batch 32 (kernel"),
        ("bfp8_pynq-z2", 32, False, "at batch 32 (kernel {kernel_us:.1f} against"),
        ("bfp8_pynq-z2", 32, True, "against {kernel_us:.1f}: at batch 32"),
        ("bfp8_zcu104", 1, False, "(the accuracy table's): {e2e_us:.1f} against"),
        ("bfp8_zcu104", 1, True, "against {e2e_us:,.1f} us ({starts} starts) at batch 1"),
        ("bfp8_zcu104", 32, False, "at batch 1, {e2e_us:.1f} against"),
        ("bfp8_zcu104", 32, True, "against\n{e2e_us:,.1f} us at batch 32 (re-modelled")]],
    _bf("The bfp network kernel is modelled at {lut:,} LUTs, beyond the Z-7020's", Net(
        "tests/data/torch/beyond/tcresnet_ts17.onnx", "bfp8", format="{type: bfp, accel: bfp8_pynq-z2}")),
    _bf("transpose takes 0.1-0.2 us of the kernel's {kernel_us:.1f} us at batch 1", _beyond("tokens_clf_ts17", "twohot")),
    _bf("`f_unet_milesial` on the PYNQ-Z2 ({lut:,} LUT;", _beyond("v_f_unet_milesial_ts17", "twohot")),
    # tc_dw (the family's) bfp8
    *_one_vs_layers("`hlsnn perf tc_dw_ts17_bfp8.hlsnn --batch 1`", _fam(VF, "tc_dw_ts17", "bfp8"),
                    _fam(VF, "tc_dw_ts17", "bfp8", layers=True),
                    "--batch 1` {e2e_us:.1f} us end to end (kernel {kernel_us:.1f} us)",
                    "against {e2e_us:,.1f} us with `--layer-by-layer` ({starts} starts;"),
    _bf("dynamo export {e2e_us:.1f} against", _fam(VF, "tc_dw_dynamo", "bfp8"), "`hlsnn perf tc_dw_ts17_bfp8.hlsnn"),
    _bf("against {e2e_us:,.1f}).\nTested", _fam(VF, "tc_dw_dynamo", "bfp8", layers=True), "`hlsnn perf tc_dw_ts17_bfp8.hlsnn"),
    # tokens_clf on the PYNQ-Z2's CPU and clock
    *[_bf(t, _beyond("tokens_clf_ts17", a, board="pynq-z2", batch=b, layers=lay), "`hlsnn perf NAME.hlsnn --board pynq-z2`")
      for a, b, lay, t in [
          ("bfp8", 1, True, "layer path's {starts} per batch"),
          ("bfp8", 1, False, "bfp8 {e2e_us:.1f} us against"), ("bfp8", 1, True, "us against {e2e_us:,.0f} us at batch 1"),
          ("bfp8", 32, False, "at batch 1,\n{e2e_us:.1f} against"), ("bfp8", 32, True, "against {e2e_us:,.0f} us at batch 32 ("),
          ("twohot", 1, False, "two-hot {e2e_us:.1f} against"), ("twohot", 1, True, "two-hot {_} against {e2e_us:,.0f} us and"),
          ("twohot", 32, False, "us and {e2e_us:.1f} against {_} us;\nfixed8"),
          ("twohot", 32, True, "and {_} against {e2e_us:,.0f} us;\nfixed8"),
          ("fixed8", 1, False, "fixed8 {e2e_us:.1f} against"), ("fixed8", 1, True, "fixed8 {_} against {e2e_us:,.0f} us and"),
          ("fixed8", 32, False, "us and {e2e_us:.1f} against {_} us (the two"),
          ("fixed8", 32, True, "and {_} against {e2e_us:,.0f} us (the two exports alike)")]],
    # v_unet_ct2's kernel, unet_upsample two-hot
    _bf("latency model {kernel_us:.1f} /", _beyond("v_unet_ct2_ts17", "bfp8"), "shortcut buffer 64 + 16 = 80 words a bank"),
    _bf("/ {kernel_us:.1f} / {_} us of kernel a", _beyond("v_unet_ct2_ts17", "twohot"), "shortcut buffer 64 + 16 = 80 words a bank"),
    _bf("/ {kernel_us:.1f} us of kernel a", _beyond("v_unet_ct2_ts17", "fixed8"), "shortcut buffer 64 + 16 = 80 words a bank"),
    _bf("goes from {e2e_us:.0f} us layer by layer", _beyond("unet_upsample_ts17", "twohot", layers=True)),
    _bf("layer by layer to {e2e_us:.0f} us on the", _beyond("unet_upsample_ts17", "twohot")),
    # f_unet_milesial (the committed v_f_unet_milesial)
    *[f for a, lay, one in [
        ("bfp8", "bfp8 (ZCU104) {e2e_us:,.1f} us (", "starts -> {e2e_us:.1f} us ({kernel_us:.1f} us of"),
        ("twohot", "two-hot {e2e_us:,.1f} ->", "two-hot {_} -> {e2e_us:.1f} us ({kernel_us:.1f})"),
        ("fixed8", "fixed8 {e2e_us:,.1f} ->", "fixed8 {_} -> {e2e_us:.1f} us ({kernel_us:.1f}); relative")]
      for f in [_bf(lay, _beyond("v_f_unet_milesial_ts17", a, layers=True), "`f_unet_milesial` (both exports)"),
                _bf(one, _beyond("v_f_unet_milesial_ts17", a), "`f_unet_milesial` (both exports)")]],
    _bf("32) and {starts} starts ->", _beyond("v_f_unet_milesial_ts17", "bfp8", layers=True), "`f_unet_milesial` (both exports)"),
    # bilinear / average pools: v_unet_mix, v_unet_bilinear (committed), tc_avg (the family's)
    *[f for name, src, key, us in [("v_unet_mix", "c", "v_unet_mix_ts17", " us"), ("v_unet_bilinear", "c", "v_unet_bilinear_ts17", " us"),
                                   ("tc_avg (`nn.AvgPool1d(2)` in a 1-D net)", "f", "tc_avg_ts17", "")]
      for mk in [(lambda a, **kw: _beyond(key, a, **kw)) if src == "c" else (lambda a, **kw: _fam(VF, key, a, **kw))]
      for f in [_bf(f"| {name} | " + "{starts} starts, {e2e_us:,.1f}" + us + " ⁹ ->", mk("bfp8", layers=True)),
                _bf(f"| {name} | " + "{_} -> {starts} start, {e2e_us:.1f} us |", mk("bfp8")),
                _bf(f"| {name} | " + "{_} | {e2e_us:,.1f} ->", mk("twohot", layers=True)),
                _bf(f"| {name} | " + "{_} | {_} -> {e2e_us:.1f} us |", mk("twohot")),
                _bf(f"| {name} | " + "{_} | {_} | {e2e_us:,.1f} ->", mk("fixed8", layers=True)),
                _bf(f"| {name} | " + "{_} | {_} | {_} -> {e2e_us:.1f} us |", mk("fixed8"))]],
    # starts / kernel / end to end tables: the fresh family's 1-D autoencoders and f_tc_2d, f_unet_reflect
    *[f for name, mk in [("f_ae1d_ct", lambda a, **kw: _fam(VFR, "f_ae1d_ct_ts17", a, **kw)),
                         ("f_ae1d_lin", lambda a, **kw: _fam(VFR, "f_ae1d_lin_ts17", a, **kw)),
                         ("f_ae1d_near", lambda a, **kw: _fam(VFR, "f_ae1d_near_ts17", a, **kw)),
                         ("f_tc_2d", lambda a, **kw: _fam(VFR, "f_tc_2d_ts17", a, **kw)),
                         ("f_unet_reflect", lambda a, **kw: _beyond("v_f_unet_reflect_ts17", a, **kw))]
      for i, a in enumerate(["bfp8", "twohot", "fixed8"])
      for f in [_bf(f"| {name} | " + "{_} | " * i + "{starts} / {kernel_us:.1f} / {e2e_us:,.1f}"
                    + (" ¹⁰ ->" if a == "bfp8" else " ->"), mk(a, layers=True)),
                _bf(f"| {name} | " + "{_} | " * i + "{_} -> {starts} / {kernel_us:.1f} / {e2e_us:,.1f} |", mk(a))]],
    _bf("bfp8 uses {lut:,} LUTs on the ZCU104", _beyond("v_f_unet_reflect_ts17", "bfp8")),
    _bf("two-hot uses {lut:,} LUTs", _beyond("v_f_unet_reflect_ts17", "twohot"), "bfp8 uses"),
    _bf("and fixed8 {lut:,} on the PYNQ-Z2", _beyond("v_f_unet_reflect_ts17", "fixed8"), "bfp8 uses"),
    # v_tc_a (rule 4b)
    *[_bf(t, src, "`hlsnn perf v_tc_a_ts17-FORMAT.hlsnn") for t, src in [
        ("`--layer-by-layer` ({starts} starts)", _beyond("v_tc_a_ts17", "twohot", layers=True)),
        ("two-hot {e2e_us:.1f} us ({kernel_us:.1f} us of kernel)", _beyond("v_tc_a_ts17", "twohot")),
        ("of kernel) against {e2e_us:,.1f} us, fixed8", _beyond("v_tc_a_ts17", "twohot", layers=True)),
        ("fixed8 {e2e_us:.1f} ({kernel_us:.1f}) against", _beyond("v_tc_a_ts17", "fixed8")),
        ("against {e2e_us:,.1f} us on the PYNQ-Z2", _beyond("v_tc_a_ts17", "fixed8", layers=True)),
        ("bfp8 {e2e_us:.1f} ({kernel_us:.1f}) against", _beyond("v_tc_a_ts17", "bfp8")),
        ("against {e2e_us:,.1f} us on the ZCU104", _beyond("v_tc_a_ts17", "bfp8", layers=True)),
        ("alike, {e2e_us:,.1f} /", _beyond("v_tc_a_dynamo", "twohot", layers=True)),
        ("alike, {_} / {e2e_us:,.1f} /", _beyond("v_tc_a_dynamo", "fixed8", layers=True)),
        ("/ {e2e_us:,.1f} us layer by layer; bfp8", _beyond("v_tc_a_dynamo", "bfp8", layers=True))]],
    # dw_mult (the family's)
    *[_bf(t, src, "`hlsnn perf dw_mult_ts17-bfp8.hlsnn --batch 1`") for t, src in [
        ("--batch 1`: {e2e_us:.1f} us ({kernel_us:.1f} of kernel)", _fam(VF, "dw_mult_ts17", "bfp8")),
        ("against {e2e_us:,.1f} us layer by layer ({starts} starts)", _fam(VF, "dw_mult_ts17", "bfp8", layers=True)),
        ("two-hot {e2e_us:.1f} against", _fam(VF, "dw_mult_ts17", "twohot")),
        ("two-hot {_} against {e2e_us:,.1f} us,", _fam(VF, "dw_mult_ts17", "twohot", layers=True)),
        ("fixed8 {e2e_us:.1f} against", _fam(VF, "dw_mult_ts17", "fixed8")),
        ("fixed8 {_} against {e2e_us:,.1f} us.", _fam(VF, "dw_mult_ts17", "fixed8", layers=True))]],
    # the sixth family's k_ae_lin (rules 12w, 12t)
    _bf("k_ae_lin two-hot: {starts} -> 1", _fam(V6, "k_ae_lin_ts17", "twohot", layers=True)),
    _bf("start ({e2e_us:,.1f} -> {_} us modelled end to end on the PYNQ-Z2", _fam(V6, "k_ae_lin_ts17", "twohot", layers=True)),
    _bf("-> {e2e_us:.1f} us modelled end to end on the PYNQ-Z2, {lut:,} LUT)", _fam(V6, "k_ae_lin_ts17", "twohot")),
    _bf("k_ae_lin fixed8 (both exports): {starts} -> 1 start", _fam(V6, "k_ae_lin_ts17", "fixed8", layers=True)),
    _bf("--batch 1`: {e2e_us:,.1f} us layer by layer ({starts} starts;", _fam(V6, "k_ae_lin_ts17", "fixed8", layers=True),
        "k_ae_lin fixed8 (both exports)"),
    _bf("-> {e2e_us:.1f} us end to end in one start ({kernel_us:.1f} us kernel), {lut:,} LUT / {ff:,} FF / {dsp} DSP",
        _fam(V6, "k_ae_lin_ts17", "fixed8")),
    _bf("(one term in one start, `input_terms: 1`: {e2e_us:.1f} us, {lut:,} LUT)", _fam(
        V6, "k_ae_lin_ts17", "fixed8", format="{type: fixed, accel: sparse8_pynq-z2, input_terms: 1}")),
    # s_unet_res fixed8 (rule 12t of a pending Add); its board-sized kernel
    _bf("s_unet_res fixed8: layers ({starts} starts, {e2e_us:,.1f} us modelled end to end;",
        _fam(V7, "s_unet_res_dynamo", "fixed8", layers=True)),
    _bf("-> 1 start, {e2e_us:.1f} us ({kernel_us:.1f} us kernel; {lut:,} LUT / {ff:,} FF / {dsp} DSP / {bram} BRAM36",
        _fam(V7, "s_unet_res_dynamo", "fixed8"), "s_unet_res fixed8:"),
    _bf("`input_terms: 1` in one start: {e2e_us:.1f} us, {lut:,} LUT", _fam(
        V7, "s_unet_res_dynamo", "fixed8", format="{type: fixed, accel: sparse8_pynq-z2, input_terms: 1}")),
    _bf("with today's host and resource models {e2e_us:.1f} us and {lut:,} LUT)", _fam(
        V7, "s_unet_res_dynamo", "fixed8", format="{type: fixed, accel: sparse8net_pynq-z2}")),
    # the board-sized load at II 1: the before -> after pairs are that day's host model; today's after them
    _bf("today's model: s_unet_res_dynamo {kernel_cycles:,} cycles, {kernel_us:.1f} us, {e2e_us:.1f} us end to end", _fam(
        V7, "s_unet_res_dynamo", "fixed8", format="{type: fixed, accel: sparse8net_pynq-z2}")),
    _bf("k_ae_lin_ts17 {kernel_cycles:,} cycles, {e2e_us:.1f} us).", _fam(
        V6, "k_ae_lin_ts17", "fixed8", format="{type: fixed, accel: sparse8net_pynq-z2, input_terms: 2}"),
        "today's model: s_unet_res_dynamo"),
    _bf("(`input_terms: 2`) {_} -> {kernel_cycles:,} cycles,", _fam(
        V6, "k_ae_lin_ts17", "fixed8", format="{type: fixed, accel: sparse8net_pynq-z2, input_terms: 2}"),
        "k_ae_lin_ts17 fixed8 board-sized"),
    # s_unet_res (rules 6a, 8a)
    _bf("bfp8 on the ZCU104 {starts} starts, {e2e_us:,.1f} us (", _fam(V7, "s_unet_res_dynamo", "bfp8", layers=True),
        "s_unet_res (`hlsnn perf X.hlsnn --batch 1`, modelled"),
    _bf("-> 1 start, {e2e_us:.1f} us ({lut:,} LUT, {bram} BRAM36)", _fam(V7, "s_unet_res_dynamo", "bfp8"),
        "s_unet_res (`hlsnn perf X.hlsnn --batch 1`, modelled"),
    _bf("two-hot on the PYNQ-Z2 {starts} starts, {e2e_us:,.1f} us ->", _fam(V7, "s_unet_res_dynamo", "twohot", layers=True)),
    _bf("two-hot on the PYNQ-Z2 {_} starts, {_} us -> 1 start, {e2e_us:.1f} us ({lut:,} LUT)",
        _fam(V7, "s_unet_res_dynamo", "twohot")),
    _bf("with `input_terms: 1` {e2e_us:,.1f} ->", _fam(
        V7, "s_unet_res_dynamo", "fixed8", layers=True, format="{type: fixed, accel: sparse8_pynq-z2, input_terms: 1}")),
    _bf("with `input_terms: 1` {_} -> {e2e_us:.1f} us ({lut:,} LUT)", _fam(
        V7, "s_unet_res_dynamo", "fixed8", format="{type: fixed, accel: sparse8_pynq-z2, input_terms: 1}")),
    # rule 9p: h_dw_prelu and h_jet_bnin bfp8 (the fifth family's)
    _bf("h_dw_prelu {_} -> {kernel_cycles:,} (its", _fam(V5, "h_dw_prelu_ts17", "bfp8")),
    _bf("/ {_}), {_} -> {kernel_us:.1f} us, end to end", _fam(V5, "h_dw_prelu_ts17", "bfp8")),
    _bf("h_jet_bnin {_} -> {kernel_cycles:,}, {_} -> {kernel_us:.1f} us, end to end", _fam(V5, "h_jet_bnin_ts17", "bfp8")),
    _bf("today's end to end: h_dw_prelu {e2e_us:.1f} us,", _fam(V5, "h_dw_prelu_ts17", "bfp8")),
    _bf("us, h_jet_bnin {e2e_us:.1f} us; both exports alike", _fam(V5, "h_jet_bnin_ts17", "bfp8")),
    # rule 9w: h_dw_prelu in one start
    _bf("same): {e2e_us:,.1f} ->", _fam(V5, "h_dw_prelu_ts17", "bfp8", layers=True), "`hlsnn perf h_dw_prelu_ts17-bfp8.hlsnn"),
    _bf("-> {e2e_us:.1f} us end to end, {bram} BRAM36, {lut:,} LUT, {dsp} DSP", _fam(V5, "h_dw_prelu_ts17", "bfp8"),
        "`hlsnn perf h_dw_prelu_ts17-bfp8.hlsnn"),
    # the table of rules 10k, 6a, 8a, 9p, 12w, 12t
    *[f for name, mk, fmts in [("k_unet_freq", lambda a, **kw: _fam(V6, "k_unet_freq_ts17", a, **kw), 3),
                               ("k_ae_lin", lambda a, **kw: _fam(V6, "k_ae_lin_ts17", a, **kw), 3),
                               ("d_unet_silu", lambda a, **kw: _fam(VD, "d_unet_silu_ts17", a, **kw), 3),
                               ("h_jet_bnin", lambda a, **kw: _fam(V5, "h_jet_bnin_ts17", a, **kw), 1)]
      for i, a in enumerate(["bfp8", "twohot", "fixed8"][:fmts])
      for f in [_bf(f"| {name} | " + "{_} / " * i + "{starts} " + ("/" if i < 2 else "->"), mk(a, layers=True)),
                _bf(f"| {name} | " + "{_} | " * (i + 1) + "{e2e_us:,.1f}" + (" ¹⁰ ->" if a == "bfp8" else " ->"),
                    mk(a, layers=True)),
                _bf(f"| {name} | " + "{_} | " * (i + 1) + "{_} -> {e2e_us:.1f} us", mk(a))]],
    _bf("k_unet_freq bfp8 {lut:,} LUT (ZCU104)", _fam(V6, "k_unet_freq_ts17", "bfp8")),
    _bf("(ZCU104), two-hot {lut:,} and", _fam(V6, "k_unet_freq_ts17", "twohot")),
    _bf("and fixed8 {lut:,} LUT (PYNQ-Z2);", _fam(V6, "k_unet_freq_ts17", "fixed8")),
    _bf("d_unet_silu {lut:,} /", _fam(VD, "d_unet_silu_ts17", "bfp8"), "k_unet_freq bfp8"),
    _bf("d_unet_silu {_} / {lut:,} /", _fam(VD, "d_unet_silu_ts17", "twohot"), "k_unet_freq bfp8"),
    _bf("d_unet_silu {_} / {_} / {lut:,} LUT;", _fam(VD, "d_unet_silu_ts17", "fixed8"), "k_unet_freq bfp8"),
    _bf("h_jet_bnin bfp8 {lut:,} LUT and {dsp} DSP", _fam(V5, "h_jet_bnin_ts17", "bfp8")),
    # d_unet_shuffle in one start (its layer-by-layer figures are the old program's: not re-run)
    _bf("-> {e2e_us:.1f} us (ZCU104, {lut:,} LUT, {dsp} DSP)", _fam(VD, "d_unet_shuffle_ts17", "bfp8")),
    _bf("two-hot {_} -> {e2e_us:.1f} us (PYNQ-Z2, {lut:,} LUT)", _fam(VD, "d_unet_shuffle_ts17", "twohot"),
        "d_unet_shuffle (both exports)"),
    _bf("fixed8 {_} -> {e2e_us:.1f} us ({lut:,} LUT). `scripts/variant_dense.py", _fam(VD, "d_unet_shuffle_ts17", "fixed8")),
    # s_ghost (rule 10s: a gate of a concat)
    _bf("s_ghost (both exports): {starts} /", _fam(V7, "s_ghost_ts17", "bfp8", layers=True)),
    _bf("s_ghost (both exports): {_} / {starts} /", _fam(V7, "s_ghost_ts17", "twohot", layers=True)),
    _bf("s_ghost (both exports): {_} / {_} / {starts} -> 1 start", _fam(V7, "s_ghost_ts17", "fixed8", layers=True)),
    _bf("bfp8 ZCU104): two-hot {e2e_us:,.1f} ->", _fam(V7, "s_ghost_ts17", "twohot", layers=True)),
    _bf("bfp8 ZCU104): two-hot {_} -> {e2e_us:.1f} us end to end", _fam(V7, "s_ghost_ts17", "twohot")),
    _bf("us end to end, fixed8 {e2e_us:,.1f} ->", _fam(V7, "s_ghost_ts17", "fixed8", layers=True), "bfp8 ZCU104): two-hot"),
    _bf("us end to end, fixed8 {_} -> {e2e_us:.1f} us, bfp8", _fam(V7, "s_ghost_ts17", "fixed8"), "bfp8 ZCU104): two-hot"),
    _bf("us, bfp8 {e2e_us:,.1f} (", _fam(V7, "s_ghost_ts17", "bfp8", layers=True), "bfp8 ZCU104): two-hot"),
    _bf("session 32) -> {e2e_us:.1f} us. A pool or gate", _fam(V7, "s_ghost_ts17", "bfp8")),
    _bf("chip); {bram} since its weight ROMs are paired (next paragraph), which fits ({lut:,} LUT, {dsp} DSP)",
        _fam(V7, "s_ghost_ts17", "fixed8")),
    # the sixth family's WaveNet, InceptionTime, flat conv (the committed v_k_* files)
    *[f for name in ["k_wavenet", "k_inception", "k_flat_conv"]
      for i, a in enumerate(["bfp8", "twohot", "fixed8"])
      for f in [_bf(f"| {name} | " + "{_} | " * i + "{e2e_us:.1f} ({kernel_us:.1f}) vs", _beyond(f"v_{name}_ts17", a)),
                _bf(f"| {name} | " + "{_} | " * i + "{_} vs {e2e_us:,.1f} [{starts}] |",
                    _beyond(f"v_{name}_ts17", a, layers=True))]],
]



def _ln(name, a):
    """A graph of tests/deploy/test_network_layernorm.py (stored in tests/data/layernorm) in the
    family format ``a``."""
    return Net(f"tests/data/layernorm/{name}.onnx", a, format=FAMILY_FORMATS[a])


_LN_ROWS = {"mlp_ln": "| mlp_ln (Gemm 64x32, LayerNorm, Relu, Gemm) | ",
            "conv_ln": "| conv_ln (conv 3x3, LayerNorm over 8 channels, conv, Gemm) | ",
            "convnext": "| convnext (conv, depthwise 7x7, LayerNorm over 16 channels, 1x1 MLP with Erf, residual Add, pool) | "}

# rule 15's table (the LayerNorm's loops over every (position, channel block), hln2)
LAYERNORM = [
    *[_bf(row + "{_} | {_} | " + "{_} | " * i + "{e2e_us:.1f} us (", _ln(name, a))
      for name, row in _LN_ROWS.items() for i, a in enumerate(("fixed8", "twohot"))],
    _bf("The LayerNorm's kernel rows: {n.us:.1f} us (mlp_ln:", _ln("mlp_ln", "fixed8")),
    _bf("two channel blocks) and {n.us:.1f} us (conv_ln", _ln("conv_ln", "fixed8")),
    _bf("convnext's two-hot kernel, {lut:,} LUT,", _ln("convnext", "twohot")),
]

# --- docs/deploy-beyond-cnn.md: attention in one start (issue 79: hlsnn.engines.network.tokens.attention) ---
ATT, VIT, BPAGE = "docs/beyond/attention.yaml", "docs/beyond/vit.yaml", "docs/deploy-beyond-cnn.md"
ATTENTION = [
    Figure(BPAGE, "It models {e2e_us:.0f} us end to end ({kernel_us:.0f} us of kernel)", Net(ATT, "fixed8")),
    Figure(BPAGE, "against {e2e_ms:.1f} ms layer by layer (`hlsnn perf\n--layer-by-layer`: {starts} kernel starts",
           Net(ATT, "fixed8", layers=True)),
    Figure(BPAGE, "fits the PYNQ-Z2 ({dsp} of 220 DSP)", Net(ATT, "fixed8")),
    Figure(BPAGE, "(float 94.17%), {e2e_us:.0f} us\nend to end", Net(VIT, "fixed8")),
    Figure(BPAGE, "against {e2e_ms:.1f} ms layer by layer ({starts} starts; 23.8 ms", Net(VIT, "fixed8", layers=True)),
    Figure(BPAGE, "the layer path's bits on emu, csim and sim): {e2e_us:.0f} us end to end on the ZCU104",
           Net(VIT, "bfp8")),
    Figure(BPAGE, "against {e2e_ms:.1f} ms\nlayer by layer ({starts} starts).", Net(VIT, "bfp8", layers=True)),
    Figure(BPAGE, "perf` models {e2e_us:.0f} us end to end on the ZCU104 ({kernel_us:.0f} us of kernel; {bram} BRAM36, "
           "{lut:,} LUT, {dsp} DSP)", Net(ATT, "bfp8")),
    Figure(BPAGE, "against {e2e_us:,.0f} us layer by layer (`--layer-by-layer`: {starts} kernel starts",
           Net(ATT, "bfp8", layers=True)),
    Figure(BPAGE, "float 96.67%;\n{e2e_us:.0f} us), but that kernel", Net(ATT, "twohot")),
    Figure(BPAGE, "95.00%), {e2e_us:.1f} us end to end on the ZCU104 ({bram}\nBRAM36 of its 312)",
           Net("docs/beyond/lstm_kws.yaml", "bfp8")),
]

FIGURES = FIGURES + BEYOND + LAYERNORM + ATTENTION


def needs_build(fig):
    """Whether the figure's model is one the repository builds (``built``)."""
    return _is_built(getattr(fig.source, "model", ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="exit 1 when a figure does not reproduce")
    g.add_argument("--write", action="store_true", help="rewrite the stale figures in place")
    g.add_argument("--list", action="store_true", help="print each entry's file and command")
    ap.add_argument("--only", help="the entries of files under this path (e.g. docs/engines)")
    ap.add_argument("--models", help="where the families of built(...) models are (built there first when "
                                     "absent: python tests/fixtures/torch_families FAMILY export; default a "
                                     "temporary directory)")
    ap.add_argument("--built", choices=("yes", "no", "only"), default="yes",
                    help="the entries of models the repository builds (no: skip them; only: just them)")
    ap.add_argument("--family", help="the entries of this family's built models only (e.g. variant_seventh)")
    ap.add_argument("--cache", help="a pickle of computed values to reuse and extend (a --check then --write "
                                    "without computing twice)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "host"))
    figs = [f for f in FIGURES if (args.only is None or f.path.startswith(args.only))
            and {"yes": True, "no": not needs_build(f), "only": needs_build(f)}[args.built]
            and (args.family is None or needs_build(f) and _built_parts(f.source.model)[0] == args.family)]
    if args.list:
        for f in figs:
            print(f"{f.path}: {f.source.command()}")
        return 0
    ctx = Context(args.models)
    sig = Path(__file__).read_bytes()          # a cache is valid for this file's sources only
    if args.cache and Path(args.cache).is_file():
        saved = pickle.loads(Path(args.cache).read_bytes())
        if saved.get("sig") == sig:
            ctx._values.update(saved["values"])
    try:
        problems = check(figs, ctx=ctx, write=args.write)
    finally:
        if args.cache:
            Path(args.cache).write_bytes(pickle.dumps({"sig": sig, "values": ctx._values}))
    for path, line, msg in problems:
        print(f"{'REWRITTEN' if args.write else 'MISMATCH'} {path}:{line}: {msg}")
    if args.write:
        print(f"{len(problems)} figure(s) rewritten or not found")
        return 0
    print("doc figures reproduce" if not problems else f"{len(problems)} doc figure(s) do not reproduce; "
          "python benchmarks/doc_figures.py --write rewrites the stale ones")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
