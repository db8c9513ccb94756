"""``hlsnn autotune --train``: the chosen assignment's kernel-pruned layers fine-tuned with
``hlsnn.train`` (:func:`hlsnn.train.finetune.finetune`) before the final measurement (the
command passes :func:`train_chosen` to :func:`hlsnn.evaluation.autotune.run`, which imports no
torch).

The layers the choice prunes start from the weights the deploy would give them (the calibration
images' activation-aware mask and least-squares refit, :func:`hlsnn.deploy.quantize.kprune.apply`;
a layer whose ONNX weights are not the imported ones, a BatchNorm folded into them, starts from
its own weights under that mask), and the whole float network is fine-tuned on the training
images that are not validation images, the pruned layers' zeros held. The tuned network is
written beside the model as ``<model>_<name>.onnx``, and a copy of the config that deploys it as
``<config>_<name>.yaml`` (its ``model:`` that file, the chosen assignment in it). The final
measurement is that config's: the assignment calibrated and run on the deploy's integer path
(the emulator's bits, which the kernels give), on the same validation images and, with
``--test``, on the test split.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import InputError, printable

#: fine-tuning epochs (the chosen assignment, from the deploy's refitted weights)
EPOCHS = 4
_MODEL = re.compile(r"^model:[^\n]*$", re.M)


def train_chosen(s, chosen, config_path, name, *, epochs=EPOCHS, test=False, log=None):
    """Fine-tune the chosen assignment (levels ``chosen['levels']`` of the search ``s``), write the
    tuned model and its config (module docstring) and measure it; returns
    ``{model, config, epochs, layers, validation: {accuracy, drop, bound, confirm}, test}``."""
    import onnx
    from onnx import numpy_helper
    from ..deploy.quantize import kprune
    from ..evaluation import autotune
    from .finetune import finetune
    if chosen.get("levels") is None or not any(chosen["levels"]):
        raise InputError("--train: the choice prunes no layer of the sized kernel (nothing for hlsnn.train to "
                         "recover); run without --train")
    asg = s.assignment(chosen["levels"])
    new, changed = kprune.apply(s.net, s.x_cal, asg, s.cfg.formats, s.accs)
    old = {la.name: la for la in s.net.layers}
    model = onnx.load(str(s.cfg.model))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = {n.name: n for n in model.graph.node}
    masks, start = {}, {}
    for la in new.layers:
        if la.name not in changed:
            continue
        if la.name not in nodes:
            raise InputError(f"--train: layer {la.name!r} of the assignment is no node of {printable(s.cfg.model)}")
        w0 = inits[nodes[la.name].input[1]]
        if nodes[la.name].op_type == "Gemm" and not any(a.name == "transB" and a.i for a in nodes[la.name].attribute):
            w0 = w0.T
        masks[la.name] = (np.asarray(la.w) != 0).reshape(w0.shape)
        if np.allclose(np.asarray(old[la.name].w).reshape(w0.shape), w0, rtol=1e-5, atol=1e-7):
            start[la.name] = (la.w, la.b)          # the ONNX weights are the imported ones: the refit's
    n_train = len(s.ds.x_train)
    keep = np.setdiff1d(np.arange(n_train), s.val_index)
    src = Path(s.cfg.model)
    out_model = src.with_name(f"{src.stem}_{name}.onnx")
    cfg_path = Path(config_path)
    out_cfg = cfg_path.with_name(f"{cfg_path.stem}_{name}.yaml")
    for p in (out_model, out_cfg):
        if p.exists():
            raise InputError(f"--train: {printable(p)} exists; remove it or give another --name")
    (log or (lambda m: None))(f"train: {len(masks)} pruned layers, {len(keep)} training images, {epochs} epochs")
    finetune(src, masks, s.ds.x_train[keep], np.asarray(s.ds.y_train)[keep], out_model, inits=start,
             epochs=epochs, log=log)
    text = cfg_path.read_text()
    rel = out_model.name if out_model.parent.resolve() == cfg_path.parent.resolve() else str(out_model.resolve())
    out_cfg.write_text(_MODEL.sub(f"model: {rel}  # hlsnn autotune --train: {name} fine-tuned", text, count=1))
    from ..config import read_yaml
    if name not in (read_yaml(out_cfg).get("assignments") or {}):
        autotune.write_assignment(out_cfg, name, s.base, asg.layers, s)
    t = autotune.Search(out_cfg, board=s.board, base=s.base, objective=s.objective, levels=s.levels,
                        val_images=s.val_images)
    try:
        r = t.evaluate(chosen["levels"])
        res = dict(model=str(out_model), config=str(out_cfg), epochs=int(epochs), layers=sorted(masks),
                   validation=dict(accuracy=r["accuracy"], drop=r["drop"], bound=r["bound"], confirm=r["confirm"]),
                   cost=r["cost"])
        if test:
            res["test"] = t.evaluate(chosen["levels"], t.ds.x_test, np.asarray(t.ds.y_test))["accuracy"]
    finally:
        t.close()
    return res
