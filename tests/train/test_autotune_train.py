"""``hlsnn autotune --train`` (issue 78): the ONNX graph as a torch module against onnxruntime, and
the fine-tuning of a chosen assignment on the tiny digits CNN: its pruned layer's zeros held in the
kernel's shape, the tuned model deployed in one kernel start with the layer-by-layer emulator's bits.

References: onnxruntime for the float graph, :func:`hlsnn.deploy.quantize.kprune.keep` and the
kernel's block shape for the zeros, the layer-by-layer emulator for the one-start program."""
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import HlsnnError  # noqa: E402
from hlsnn.evaluation import autotune  # noqa: E402
from hlsnn.train.autotune import train_chosen  # noqa: E402
from hlsnn.train.finetune import OnnxNet  # noqa: E402

from conftest import ROOT  # noqa: E402


@pytest.mark.parametrize("model,data", [("digits_cnn", "digits"), ("resnet8_digits32_holdout", "digits32")])
def test_the_onnx_graph_as_a_torch_module_is_onnxruntimes_and_writes_back(tmp_path, model, data):
    path = ROOT / "configs" / "models" / f"{model}.onnx"
    x = datasets.load(data, layout="nchw").x_test[:3].astype(np.float32)
    sess = ort.InferenceSession(str(path))
    want = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i:i + 1]})[0] for i in range(len(x))])
    net = OnnxNet(path).eval()
    got = torch.softmax(net(torch.tensor(x)), 1).detach().numpy()      # the graph's last Softmax left out
    np.testing.assert_allclose(got, want, atol=1e-5)
    with torch.no_grad():
        net.weights[0].mul_(0.5)
    net.write(tmp_path / "w.onnx")
    sess = ort.InferenceSession(str(tmp_path / "w.onnx"))
    want = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i:i + 1]})[0] for i in range(len(x))])
    np.testing.assert_allclose(torch.softmax(net(torch.tensor(x)), 1).detach().numpy(), want, atol=1e-5)


def _cnn(tmp):
    shutil.copy(ROOT / "configs" / "models" / "digits_cnn.onnx", tmp)
    text = (ROOT / "configs" / "models" / "digits_cnn.yaml").read_text().replace("../accel/", f"{ROOT}/configs/accel/")
    text = text.replace("formats:\n", "formats:\n  fixed8_z2: {type: fixed, accel: sparse8net_pynq-z2}\n")
    text = text.replace("assignments:\n", "assignments:\n  fixed8_z2: {default: fixed8_z2}\n")
    (tmp / "digits_cnn.yaml").write_text(text)
    return tmp / "digits_cnn.yaml"


def test_train_holds_the_kernel_shaped_zeros_and_deploys_bit_exact_in_one_start(tmp_path):
    import onnx
    from onnx import numpy_helper
    from hlsnn.deploy.quantize import kprune
    from hlsnn.network.build import compile_model
    torch.set_num_threads(1)
    cfg = _cnn(tmp_path)
    s = autotune.Search(cfg, board="pynq-z2", levels=(0.5, 0.75), val_images=100)
    try:
        with pytest.raises(HlsnnError, match="prunes no layer"):
            train_chosen(s, {"levels": (0, 0, 0)}, cfg, "ft")
        r = train_chosen(s, {"levels": (0, 2, 0)}, cfg, "ft", epochs=1, test=True)      # conv2 at 75%
        with pytest.raises(HlsnnError, match="exists"):
            train_chosen(s, {"levels": (0, 2, 0)}, cfg, "ft", epochs=1)
    finally:
        s.close()
    assert r["layers"] == ["conv2"] and r["config"].endswith("digits_cnn_ft.yaml")
    m = onnx.load(r["model"])
    node = next(n for n in m.graph.node if n.name == "conv2")
    w = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == node.input[1]))
    w0 = numpy_helper.to_array(next(t for t in onnx.load(str(tmp_path / "digits_cnn.onnx")).graph.initializer
                                    if t.name == node.input[1]))
    assert not np.array_equal(w, w0)                                  # trained
    cols = (w != 0).reshape(w.shape[0], -1)
    from hlsnn.config import load_config
    p, nb, sub = kprune.shape_of(load_config("sparse8net_pynq-z2", check_fit=False).params)
    bank = kprune.banks(w.shape, nb).reshape(-1)
    for z0 in range(0, w.shape[0], p):                                # whole columns of a block, a bank's keep each
        blk = cols[z0:z0 + p]
        assert (blk == blk[:1]).all()
        for b in set(bank.tolist()):
            assert blk[0][bank == b].sum() == kprune.keep(int((bank == b).sum()), 0.75, sub)
    assert 0.0 <= r["validation"]["accuracy"] <= 1.0 and 0.0 <= r["test"] <= 1.0
    out = tmp_path / "ft.hlsnn"                                       # the written config compiles it, one start
    compile_model(r["config"], "ft", out, check_samples=2, calibration_samples=64)
    x = datasets.load("digits", layout="nchw").x_test[:8]
    np.testing.assert_array_equal(hlsnn.load(out, "emu")(x), hlsnn.load(out, "emu", network=False)(x))



@pytest.mark.slow
def test_the_command_with_train_chooses_fine_tunes_and_writes_the_tuned_model_and_config(tmp_path, capsys):
    """``hlsnn autotune --train`` as a user types it, on the held-out ResNet-8 (a pruned choice is
    worth its 1% there; the tiny CNN's host-bound 35 us is not): the search, the fine-tuning of its
    choice and the measurement again, one JSON object; the tuned ONNX file and config written
    beside the originals, the original config's assignment written too, the original model file
    untouched, and a second run under that name refused before it searches."""
    import json
    import onnx
    from hlsnn.cli import main
    torch.set_num_threads(1)
    name = "resnet8_digits32_holdout"
    shutil.copy(ROOT / "configs" / "models" / f"{name}.onnx", tmp_path)
    text = (ROOT / "configs" / "models" / f"{name}.yaml").read_text().replace("../accel/", f"{ROOT}/configs/accel/")
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(text)
    before = (tmp_path / f"{name}.onnx").read_bytes()
    argv = ["autotune", str(cfg), "--board", "pynq-z2", "--levels", "0.75", "--val-images", "100",
            "--max-drop", "5", "--train", "1", "--name", "ft", "--json", "-q"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    tr = res["train"]
    assert tr["epochs"] == 1 and tr["layers"]                         # pruned layers, fine-tuned
    assert 0.0 <= tr["validation"]["accuracy"] <= 1.0
    assert "ft:" in cfg.read_text()                                  # the choice, written into the config
    tuned = onnx.load(str(tmp_path / f"{name}_ft.onnx"))
    assert set(tr["layers"]) <= {n.name for n in tuned.graph.node}  # the layers it names are the model's nodes
    assert f"{name}_ft.onnx" in (tmp_path / f"{name}_ft.yaml").read_text()
    assert (tmp_path / f"{name}.onnx").read_bytes() == before       # the original model file is untouched
    assert main(argv) == 2                                            # run again: refused before the search, one line
    err = capsys.readouterr().err
    assert "already has an assignment" in err and "Traceback" not in err
