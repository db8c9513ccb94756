"""Source 002's methods on simulated boards (issue 77): every circuit its own simulated PYNQ
board (the C-simulation of the kernel behind pynq's drivers); E7/E9's boards in the workers of
a Dask LocalCluster. The shipped digits CNN (fixed8 on sparse8_pynq-z2); ResNet-8's
C-simulation takes about 80 s per method and batch of 8, so ResNet-8 runs on emu here."""
from __future__ import annotations

import numpy as np
import pytest

from hlsnn.seed002 import calibrate, calibration_images
from hlsnn.seed002 import layout as layouts

from test_seed002_methods import check_classes

pytestmark = pytest.mark.slow
MODEL = "configs/models/digits_cnn.yaml"
RESNET8 = "configs/models/resnet8_digits32.yaml"


@pytest.fixture(scope="module")
def images():
    return calibration_images(MODEL, 16)


@pytest.mark.parametrize("percent", [25, 100])
def test_the_classes_on_simulated_boards(images, percent):
    res = {m: calibrate(MODEL, images, method=m, percent=percent, assignment="fixed8", target="sim")
           for m in layouts.METHODS}
    check_classes(res)
    emu = calibrate(MODEL, images, method="e6", percent=percent, assignment="fixed8")
    assert emu.same_bits(res["e6"])                                  # the boards give the emulator's bits
    for m, r in res.items():                                         # every circuit's calls counted cycles
        assert r.measured and {x["source"] for x in r.measured} >= {"measured"}, m
        assert {x["circuit"] for x in r.measured} == {c.name for c in r.layout.circuits}, m
    name = "sparse8_pynq_z2"                                         # 4A-4D: the instances of one overlay
    assert res["e6"].placement == {c: ("acc51", name + sfx) for c, sfx in zip("4A 4B 4C 4D".split(),
                                                                            ("", "_1", "_2", "_3"))}
    assert res["e7"].placement["56"] == ("acc56", name + "_c2")    # the quarter accelerator's narrower config
    if percent == 25:
        s = res["e6"].summary
        assert s["overhead_us"] <= 1.5 * s["longest_preceding_us"]
        assert not res["e2"].same_bits(res["e1"])


def test_e7_e9_on_boards_in_two_dask_workers(images):
    """Each board's circuits live in a worker process (its own simulated board there); the
    points travel in the calls' shifts and the saved results back: the bits are E2's."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster
    ref = calibrate(MODEL, images, method="e2", percent=25, assignment="fixed8", target="sim")
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=120)
        for m in ("e7", "e9"):
            r = calibrate(MODEL, images, method=m, percent=25, assignment="fixed8", target="sim", cluster=client)
            assert r.same_bits(ref), m
            pids = {p for ps in r.workers.values() for p in ps}
            assert len(pids) == 2, (m, r.workers)                    # three boards on two workers
            assert r.workers["51"] != r.workers["52"]
            low = [x for x in r.measured if x["circuit"] == "56" and x["phase"] in ("preceding", "main")]
            assert low and all(x["source"] == "measured" for x in low)   # its own narrower kernel's cycles


def test_resnet8_classes_on_emu():
    x = calibration_images(RESNET8, 8)
    for percent in (25, 100):
        res = {m: calibrate(RESNET8, x, method=m, percent=percent, assignment="fixed8") for m in layouts.METHODS}
        check_classes(res)
        if percent == 25:
            assert not res["e2"].same_bits(res["e1"])
            assert res["e6"].summary["end_us"] < res["e2"].summary["end_us"]
    r = calibrate(RESNET8, calibration_images(RESNET8, 16), method="e6", percent=12.5, assignment="fixed8")
    assert r.summary["overhead_us"] <= 1.5 * r.summary["longest_preceding_us"]
    assert np.isfinite(r.outputs).all()
