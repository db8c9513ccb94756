"""The network kernels' declared dependences (issue 45): every pipelined loop that reads and
writes ``act`` (and bfp's ``ConvMac`` its results ``tz``, ``e3z``) says ``DEPENDENCE inter
false``, and the strict C-simulation checks it: a memory a loop both reads and writes with no
checked distance fails, and so does a read of a word written fewer iterations earlier than the
declared distance. The allocation guarantee the pragma rests on (no op writes the buffer it
reads) is checked at allocation time too. Planted bugs: each must stop the strict run."""
import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
from hlsnn.engines.network import kernel as netkernel
from hlsnn.engines.shift_mac.network import kernel as shiftkernel
from hlsnn.deploy.lower import program as netmode
from hlsnn.errors import CsimError

from test_network_depthwise import _grouped_net  # noqa: E402

O = netmode.Op
NETWORK_TEMPLATES = sorted((Path(__file__).resolve().parents[2] / "hls" / "engines").glob("*/network.cpp.j2"))


def _net(ops, shapes, out):
    return netmode.NetProgram("t", ops, shapes, dict(name="x"), dict(tensor=out), [], {}, "a", {})


def test_no_op_is_given_the_activation_buffer_it_reads():
    s = (4, 2, 2)
    ops = [O("conv", "c0", ["x"], "t0"), O("conv", "c1", ["t0"], "t1"), O("add", "a1", ["t1", "t0"], "u1"),
           O("maxpool", "p", ["u1"], "v"), O("conv", "c2", ["v"], "t2")]
    net = _net(ops, dict.fromkeys(["x", "t0", "t1", "u1", "v", "t2"], s), "t2")
    place, _, _ = netkernel.allocate(net)
    for op in ops:                       # every op's source and destination buffers differ
        src = op.f["main"] if op.kind == "add" else op.ins[0]
        assert place[src][0] != place[op.out][0]
    # the check itself: a placement that would run an op in place is refused, naming the op
    bad = dict(place, t2=(place["v"][0], False))
    with pytest.raises(AssertionError, match=r"c2 would write activation buffer \d, which it reads \(v\)"):
        netkernel.check_disjoint(net, bad)


@pytest.mark.parametrize("path", NETWORK_TEMPLATES, ids=lambda p: p.parent.name)
def test_every_network_loop_that_reads_and_writes_act_declares_a_checked_dependence(path):
    text = path.read_text()
    for loop in re.findall(r"^(\w+):\n  for \(int \w+ = 0; \w+ < d\.n_iter; \+\+\w+\) \{", text, re.M):
        body = text[text.index(f"\n{loop}:\n"):]
        body = body[:body.index("\n}\n")]
        if re.search(r"HLSNN_STORE_AT\(act\[", body) and re.search(r"HLSNN_LOAD_AT\(act\[", body):
            assert "#pragma HLS DEPENDENCE variable = act inter false" in body, loop
    assert re.search(r"HLSNN_MEM\(act, hlsnn::k\w+, \{\{ act_distance \}\}\);", text)
    assert "HLSNN_MEM(act, hlsnn::kRamS2p, 0)" not in text and "HLSNN_MEM(act, hlsnn::kRamT2p, 0)" not in text
    # the image load and store: a plain sequential loop over the AXI words (bursts), no m_axi
    # access under a condition; the ports' depth covers a co-simulation's largest batch
    assert not re.search(r"if \(\(i & \d\) == 0\) w = in\[", text)
    assert "buf[k] = in[k];" in text
    assert "depth = {{ in_words * cosim_batch }}" in text and "depth = {{ out_words * cosim_batch }}" in text


def _planted(render, old, new):
    """``render`` with ``old`` (exactly once in network.cpp) replaced by ``new``; its own cache key."""
    def fn(net, out_dir):
        files, sha, t = render(net, out_dir)
        src = Path(out_dir) / "network.cpp"
        text = src.read_text()
        assert text.count(old) == 1, old
        src.write_text(text.replace(old, new))
        return files, hashlib.sha256((sha + old + new).encode()).hexdigest(), t
    return fn


def _shift_kernel(old, new):
    net = _grouped_net("shift_mac", 8, 16)
    return net, netkernel.NetKernel(net, strict=True, builder=lambda n, strict: netkernel.build(
        n, strict=strict, render_fn=_planted(shiftkernel.render, old, new)))


# slow: each plant is a strict library of its own (~10 CPU-s of g++); the quick suite checks the
# templates' pragmas above and the rule itself (tests/strict/test_strict_runtime.py)
@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("plant,error", [
    # an unchecked DEPENDENCE false: the distance 0 ("not checked") on act
    (("HLSNN_MEM(act, hlsnn::kRamS2p, 8);", "HLSNN_MEM(act, hlsnn::kRamS2p, 0);"),
     r"loop \w+: bank 'act\[\d\]\[\d+\]' is read and written in the loop with no checked read-after-write "
     r"distance \(HLSNN_MEM\(act, kind, 0\)\)"),
    # a conv that writes the buffer it reads: a pixel's output read by the next pixels' taps
    (("HLSNN_STORE_AT(act[d.dst][j], obase + pix, v, j);  // 2",
      "HLSNN_STORE_AT(act[d.src][j], obase + pix, v, j);  // 2"),
     r"array 'act\[\d\]\[\d+\]': word \d+ read [1-7] iteration\(s\) after its write in loop NetMac; the pipeline "
     r"needs 8 \(DEPENDENCE inter false"),
])
def test_a_planted_dependence_bug_stops_the_strict_run_of_the_shift_network_kernel(plant, error):
    net, k = _shift_kernel(*plant)
    assert k.strict
    xq = np.random.default_rng(2).integers(-128, 128, (2, 3, 8, 8))
    with pytest.raises(CsimError, match=error):
        k.run(xq)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netdep", calibration_samples=64, check_samples=2)


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim
def test_bfp_results_read_within_the_pipeline_distance_stop_the_strict_run(compiled, monkeypatch):
    """ConvMac's writes started one iteration after a pixel's last product (the old schedule):
    the results in tz are read before the pipeline has written them."""
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "bfp16")
    with hlsnn.load(path, "emu", network=True) as m:
        net = m.network
    plant = _planted(bfpkernel.render, "rstart[ws] = it + Cfg::kTzDistance;", "rstart[ws] = it + 1;")
    monkeypatch.setattr(bfpkernel, "build", lambda n, strict=None, out_root=None: netkernel.build(
        n, strict=strict, out_root=out_root, render_fn=plant))
    k = bfpkernel.BfpNetKernel(net, strict=True)
    xq = netmode.quantize_input(net, datasets.load("digits", layout="nchw").x_test[:2])
    with pytest.raises(CsimError, match=r"array '(tz|e3z)\[\d+\]': word \d+ read \d+ iteration\(s\) after its write "
                                        r"in loop ConvMac; the pipeline needs 16"):
        k.run(xq)
