"""The latency model's DMA bytes of a layer are the beats its calls move, whichever process
bounds the kernel (hlsnn.network.latency, ``ddr_us``)."""
from __future__ import annotations

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_a_dispatch_bound_sparse_layer_moves_its_beats_not_its_stream_stage_cycles(tmp_path, monkeypatch):
    """tcresnet_ts17 in fixed8 on sparse8_pynq-z2 at batch 32: layer ``/4/Conv``'s input stage
    (Dispatch) is the kernel's slowest process, so the cycle model reports 6,733 cycles of
    "input stream" for 3,654 + 768 beats. The DMA moves the beats (64-bit words: 8 bytes each);
    the stream stage's stalls are kernel time, already in ``kernel_us``. Before, the model took
    the larger of the two (53,864 bytes here instead of 35,376), so a faster compute stage that
    left Dispatch the bound made the layer slower end to end."""
    from hlsnn.measure import layers as ml
    from hlsnn.network import latency
    from hlsnn.network.build import compile_model
    y = tmp_path / "tcr.yaml"
    y.write_text(f"name: tcr\nmodel: {ROOT / 'tests/data/torch/beyond/tcresnet_ts17.onnx'}\ndata: digits\n"
                 "layout: auto\nformats: {fixed8: {type: fixed, accel: sparse8_pynq-z2}}\n")
    path = tmp_path / "tcr.hlsnn"
    compile_model(y, "fixed8", path, check_samples=1)
    seen = []
    real = ml.layer_kernel_cycles

    def spy(*a, **k):
        kc = real(*a, **k)
        seen.append(kc)
        return kc
    monkeypatch.setattr(ml, "layer_kernel_cycles", spy)
    res = latency.model(path, batch=32, network=False)
    engine = [r for r in res["layers"] if r["kind"] in ("conv", "dense")]
    assert len(engine) == len(seen) > 0
    stream = [sum(v for n, v in kc.phases.items() if n.startswith(("input stream", "output stream")))
              for kc in seen]
    # the premise: at least one layer whose stream stage's cycles exceed its beats (Dispatch-bound)
    assert any(s > kc.beats_in + kc.beats_out for s, kc in zip(stream, seen))
    for r, kc in zip(engine, seen):
        assert kc.beats_in + kc.beats_out > 0, r["name"]
        assert r["dma_bytes"] == (kc.beats_in + kc.beats_out) * 8, r["name"]
    conv4 = next(r for r in engine if r["name"] == "/4/Conv")
    assert conv4["dma_bytes"] == (3654 + 768) * 8
    assert res["end_to_end_us"] == pytest.approx(sum(r["end_to_end_us"] for r in res["layers"]))
