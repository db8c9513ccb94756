"""``hlsnn report MODEL.yaml``: one self-contained HTML page about a deployment config, from
:func:`hlsnn.evaluation.run.deploy` with per-layer statistics (the page's sections:
:mod:`hlsnn.deploy.reports.report`)."""
from __future__ import annotations

import shlex
from pathlib import Path

from ..paths import build_root
from ..config import load_config
from ..deploy.reports import evaluate
from ..deploy.config import load_deploy_config
from ..deploy.importer.onnx_import import load_onnx
from ..deploy.reports.report import _matplotlib, _sections, engine_input_shapes, page_out, write_page
from . import run


def write_report(config_path, target="emu", *, out=None, host_fallback=False, host_precision="float",
                 host_bits=8, test_samples=None, radix_update=None, radix_update_by=None) -> Path:
    """Run the deployment config ``config_path`` on ``target`` (per-layer statistics on) and
    write the HTML report to ``out`` (default ``<config stem>_report.html`` in the current
    folder). Returns the path written. ``radix_update`` / ``radix_update_by``: see
    :func:`~hlsnn.evaluation.run.deploy` (section 7 shows E5's choices).

    Raises
    ------
    InputError
        ``out`` does not end in .html/.htm, is a folder or its folder does not exist (checked
        before any work: :func:`hlsnn.deploy.reports.report.page_out`) or cannot be written, or anything
        :func:`~hlsnn.evaluation.run.deploy` rejects.
    MissingDependency
        matplotlib (or onnx) is not installed.
    """
    out = page_out(out if out is not None else build_root() / f"{Path(config_path).stem}_report.html")
    new = _matplotlib()
    cfg = load_deploy_config(config_path)
    res = run.deploy(config_path, target, per_layer=True, host_fallback=host_fallback,
                     host_precision=host_precision, host_bits=host_bits, test_samples=test_samples,
                     radix_update=radix_update, radix_update_by=radix_update_by)
    bits = evaluate.host_bits_of(host_precision, host_bits)
    net = load_onnx(cfg.model, host_fallback=host_fallback, output=cfg.output)
    accels = {f.accel: load_config(f.accel, check_fit=False) for f in cfg.formats.values()}
    shapes = engine_input_shapes(cfg.model, net)
    cmd = ["hlsnn", "report", str(config_path), "--target", target, "--out", str(out)]
    cmd += ["--test-samples", str(test_samples)] if test_samples is not None else []
    cmd += ["--host-fallback"] if host_fallback else []
    cmd += ["--host-precision", "quantized", "--host-bits", str(bits)] if bits is not None else []
    cmd += ["--radix-update", radix_update] if radix_update else []
    cmd += ["--radix-update-by", radix_update_by] if radix_update_by else []
    body = _sections(res, cfg, net, accels, shapes, new, " ".join(shlex.quote(c) for c in cmd))
    return write_page(out, f"hlsnn report: {res['model']}", body)
