"""docs/tutorials/train.md, run as written: every ``py`` block in the page's order in one
namespace, every ``$ hlsnn ...`` line through the CLI, the YAML blocks written as the files they
name. The page gives the pieces a user brings (``model``, ``loader``, ``x_cal``, ``x_test``,
``y_test``, ``float_model``, ``x``, ``y``, ``batches``); this test gives them on digits32 (a tiny
MobileNet, a few batches), re-runs steps 2-3 where step 4 says "as in step 2 ... step 3", and
checks what the page claims: the prepared model's eval outputs equal the deployed emulator's bit
for bit (power of two, then 90 % sparse), the export writes its metadata, the pruned model is at
90 %, and every CLI command succeeds. A renamed function, a changed signature or a broken command
in the page fails here.

Through the page's own commands too (issue 84): on every one of digits32's 360 test images,
``hlsnn compile`` + ``hlsnn run`` of the page's config give eval mode's outputs bit for bit, and
``hlsnn deploy`` prints eval mode's accuracy. (Before the deploy followed the export's sidecar,
``pot.yaml``, which leaves ``radix`` out, deployed with ``lse`` where training used ``msb``.)"""
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "train.md"


def _blocks():
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", PAGE.read_text(), re.S)]


def _float_model(nn, ds, epochs=2):
    from export_torch_models import _tiny_models
    torch.manual_seed(0)
    m = _tiny_models(nn)["mobilenet_relu6"][0]
    x, y = torch.tensor(ds.x_train), torch.tensor(ds.y_train)
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    for _ in range(epochs):
        m.train()
        for idx in torch.randperm(len(x), generator=torch.Generator().manual_seed(1)).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x[idx]), y[idx]).backward()
            opt.step()
    return m.eval()


def _bit_exact(ns, cfg):
    from hlsnn.train import deployed
    model, x_cal, x_test = ns["model"], ns["x_cal"], ns["x_test"]
    with torch.no_grad():
        mine = model.double().eval()(x_test.double()).numpy()
    with deployed(model.float(), torch.zeros(1, 3, 32, 32), cfg) as dep:
        dep.calibrate(x_cal.double().numpy())
        theirs = dep.run(x_test.double().numpy())
    np.testing.assert_array_equal(mine, theirs)
    return float(np.mean(mine.argmax(1) == ns["y_test"].numpy()))


def _eval_outputs(ns):
    """Training-time eval: the prepared model in eval mode, float64, on every test image."""
    model = ns["model"]
    with torch.no_grad():
        out = model.double().eval()(ns["x_test"].double()).numpy()
    model.float()
    return out


def _check_command(argv, out, ns):
    """What a page command must show of training-time eval (``out``: its stdout): ``deploy``
    eval mode's accuracy on every test image, ``run --output`` eval mode's outputs, bit for bit."""
    if argv[0] == "deploy":
        mine = _eval_outputs(ns)
        acc = float(np.mean(mine.argmax(1) == ns["y_test"].numpy()))
        shown = re.search(r"^  f +([0-9.]+)%", out, re.M)
        assert shown and shown.group(1) == f"{100 * acc:.2f}", (argv, out)
    if argv[0] == "run" and "--output" in argv:
        theirs = np.load(argv[argv.index("--output") + 1])
        mine = _eval_outputs(ns)
        assert theirs.shape == mine.shape
        same = np.all(theirs == mine, axis=1)
        assert same.all(), f"{' '.join(argv)}: {int(same.sum())} of {len(same)} test images as in eval mode"


def test_the_training_tutorial_runs_as_written(tmp_path, monkeypatch, capsys):
    from torch import nn

    from hlsnn.cli import main
    from hlsnn.deploy import datasets
    from hlsnn.train import overall_sparsity
    monkeypatch.syspath_prepend(str(PAGE.parents[2] / "scripts"))
    monkeypatch.chdir(tmp_path)
    ds = datasets.load("digits32")
    x_tr, y_tr = torch.tensor(ds.x_train), torch.tensor(ds.y_train)
    loader = [(x_tr[i:i + 64], y_tr[i:i + 64]) for i in range(0, 256, 64)]
    ns = {"model": _float_model(nn, ds), "loader": loader, "batches": loader,
          "x_cal": x_tr[:128], "x_test": torch.tensor(ds.x_test), "y_test": torch.tensor(ds.y_test),
          "x": x_tr[:64], "y": y_tr[:64]}
    blocks = _blocks()
    steps = {}                                  # step 2's and 3's blocks, for step 4's "as in step 2 ... 3"
    ran = {"py": 0, "cli": 0}
    for kind, text in blocks:
        if kind == "yaml":
            first = text.splitlines()[0]
            name = re.match(r"# (\S+\.yaml)", first).group(1)
            if "the same with" in first:        # sparse.yaml: pot.yaml with these formats
                base = Path("pot.yaml").read_text()
                text = base[:base.index("formats:")] + text[text.index("formats:"):]
            Path(name).write_text(text)
        elif kind == "console":
            for line in text.splitlines():
                if line.startswith("$ hlsnn "):
                    argv = shlex.split(line[len("$ hlsnn "):], comments=True)
                    capsys.readouterr()
                    assert main(argv) == 0, line
                    _check_command(argv, capsys.readouterr().out, ns)
                    ran["cli"] += 1
        elif kind == "py":
            if "BalancedPruner(" in text:       # step 4 prunes the float model
                ns["model"] = _float_model(nn, ds)
                ns["float_model"] = _float_model(nn, ds)
            if "cross_entropy(model(x), y).backward()" in text:
                steps["finetune"] = text
            if "calibrate(model, x_cal.double())" in text:
                steps["calibrate"] = text
            if "export(model," in text:
                steps["export"] = text
            exec(compile(text, f"{PAGE.name}:block", "exec"), ns)
            ran["py"] += 1
            if "export(model," in text:         # step 3: the metadata beside the model, and eval == deployed
                assert Path("trained.onnx.hlsnn-train.json").is_file()
                assert _bit_exact(ns, "pot.yaml") == pytest.approx(float(ns["acc_torch"]))
            if "fine-tune as in step 2" in text:
                assert overall_sparsity(ns["pruner"].named) >= 0.9
                for key in ("finetune", "calibrate", "export"):
                    exec(compile(steps[key], f"{PAGE.name}:{key}", "exec"), ns)
                _bit_exact(ns, "sparse.yaml")
    capsys.readouterr()
    assert ran == {"py": 7, "cli": 8}           # every block of the page ran (a new block: count it here)
    assert torch.isfinite(ns["loss"]) and ns["frozen"] is not None
