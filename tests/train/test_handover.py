"""scripts/train_qat.py --save with --val: the deploy config it hands over names the images the
script calibrated on. The script calibrates on the first N training images left after the
validation split; a deployment of the saved config takes ``x_train[:samples]`` of the config's
data, so the saved config's data is an .npz of those training images (in the script's order) and
the test images: its ``x_train[:samples]`` are the split's, computed here from
``validation_split`` and digits32, and a deployment calibrated on them gives the script's figure.
The saved config is the one ``hlsnn.train.deployed`` deploys (``trained_config``'s formats) and
names the exported model beside it, so ``open_deployment`` of the saved files alone gives the
same outputs."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from .test_smoothing import run_train_qat  # noqa: E402


def test_saved_config_calibrates_on_the_scripts_images(monkeypatch, capsys, tmp_path):
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_deployment
    from hlsnn.train import deployed, trained_config
    from hlsnn.train.data import validation_split
    save = str(tmp_path / "q.pt")
    run_train_qat(monkeypatch, "train_qat_handover", ["--val", "40", "--calibration-samples", "64", "--save", save])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    cfg = load_deploy_config(save + ".yaml")
    assert cfg.calibration["samples"] == 64
    # the config as deployed: trained_config's formats (the script's sparse format left
    # bias_correction at auto, which deployed() sets to none), a fixed point of trained_config,
    # and the exported model beside it
    assert cfg.formats["f"].bias_correction == "none"
    assert trained_config(cfg, cfg.model).formats == cfg.formats
    assert cfg.model == str(tmp_path / "q.pt.onnx") and (tmp_path / "q.pt.onnx").is_file()
    ds, full = datasets.load(cfg.data, layout="nchw"), datasets.load("digits32")
    tr, _ = validation_split(len(full.x_train), 40)
    np.testing.assert_array_equal(ds.x_train[:64], full.x_train[tr[:64]])
    assert not np.array_equal(full.x_train[:64], full.x_train[tr[:64]])     # the whole set's first 64 differ
    np.testing.assert_array_equal(ds.x_test, full.x_test)
    np.testing.assert_array_equal(ds.y_test, full.y_test)
    q = torch.load(save, weights_only=False)
    with deployed(q, torch.zeros(1, 3, 32, 32), cfg) as dep:
        dep.calibrate(ds.x_train[:cfg.calibration["samples"]].astype(np.float64))
        y = dep.run(ds.x_test.astype(np.float64))
    assert float(np.mean(np.argmax(y, 1) == ds.y_test)) == res["deployed_acc"]
    with open_deployment(save + ".yaml") as dep:                  # the saved files alone, as hlsnn deploy reads them
        dep.calibrate(ds.x_train[:cfg.calibration["samples"]].astype(np.float64))
        np.testing.assert_array_equal(dep.run(ds.x_test.astype(np.float64)), y)


def test_a_validation_seed_holds_out_other_images_and_the_saved_config_follows(monkeypatch, capsys, tmp_path):
    """--val-seed S: the split of ``validation_split(n, N, seed=S)`` (not seed 0's), the JSON saying
    so, the saved config calibrating on that split's training images; without --val it is refused."""
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.train.data import validation_split
    save = str(tmp_path / "q.pt")
    run_train_qat(monkeypatch, "train_qat_valseed", ["--val", "40", "--val-seed", "5", "--calibration-samples", "64",
                                                     "--save", save])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["val"]["images"] == 40 and res["val"]["seed"] == 5
    full = datasets.load("digits32")
    tr5, va5 = validation_split(len(full.x_train), 40, seed=5)
    _, va0 = validation_split(len(full.x_train), 40)
    assert len(set(va5) & set(va0)) < 10                       # another hold-out, not seed 0's
    ds = datasets.load(load_deploy_config(save + ".yaml").data, layout="nchw")
    np.testing.assert_array_equal(ds.x_train[:64], full.x_train[tr5[:64]])
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_valseed2", ["--val-seed", "5"])
    assert "--val-seed 5: with --val N" in capsys.readouterr().err


def test_a_fold_trains_and_tests_on_its_images_and_the_saved_data_follows(monkeypatch, capsys, tmp_path):
    """--fold 2/5: the saved .npz holds fold 2's test images and the rest as training images
    (``cross_validation_fold`` of digits32), the JSON names the fold, the deployment of the saved
    files alone gives the script's accuracy on those test images; a fold out of range is refused."""
    from hlsnn.deploy import datasets
    from hlsnn.deploy.reports.evaluate import open_deployment
    from hlsnn.train.data import cross_validation_fold
    save = str(tmp_path / "q.pt")
    run_train_qat(monkeypatch, "train_qat_fold", ["--fold", "2/5", "--calibration-samples", "64", "--save", save])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["fold"] == "2/5"
    full = datasets.load("digits32")
    xtr, ytr, xte, yte = cross_validation_fold(full.x_train, full.y_train, full.x_test, full.y_test, 2, 5)
    saved = np.load(save + ".npz")
    for name, want in (("x_train", xtr), ("y_train", ytr), ("x_test", xte), ("y_test", yte)):
        np.testing.assert_array_equal(saved[name], want)
    with open_deployment(save + ".yaml") as dep:
        dep.calibrate(xtr[:64].astype(np.float64))
        y = dep.run(xte.astype(np.float64))
    assert float(np.mean(np.argmax(y, 1) == yte)) == res["deployed_acc"]
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_fold2", ["--fold", "5/5"])
    assert "--fold: fold '5/5'" in capsys.readouterr().err
    for bad in ("5000", "-3"):           # more held-out images than the fold's training images, or fewer than one
        with pytest.raises(SystemExit):
            run_train_qat(monkeypatch, "train_qat_fold3", ["--fold", "2/5", "--val", bad])
        err = capsys.readouterr().err
        assert (f"--val {bad}: n_val = {bad}: between 1 and {len(xtr) - 1} of the {len(xtr)} training images" if bad == "5000"
                else f"argument --val: '{bad}' is not a whole number >= 0") in err, err
        assert "Traceback" not in err
