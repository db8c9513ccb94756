"""The sim target: the pynq target's code path (pynq.Overlay, pynq.allocate, the unmodified
pynq DMA driver) on the simulated device, with every engine's kernel served by its
C-simulation library; overlay checks and the classic failures with their messages."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import hlsnn
from hlsnn.engines import ENGINES

from conftest import ROOT

pytest.importorskip("pynq")
pytestmark = pytest.mark.csim
ACCEL = ROOT / "configs" / "accel"


def test_every_engine_on_sim_equals_emu():
    rng = np.random.default_rng(0)
    with hlsnn.Accelerator(ACCEL / "bfp16_pynq-z2.yaml", "sim") as s, hlsnn.Accelerator(ACCEL / "bfp16_pynq-z2.yaml") as e:
        x, w, b = rng.normal(size=(9, 70)), rng.normal(size=(33, 70)), rng.normal(size=33)
        np.testing.assert_array_equal(s.gemm(x, w, bias=b, relu=True), e.gemm(x, w, bias=b, relu=True))
        assert s.target.name == "sim" and s.target.last_timing["bytes_in"] > 0
    with hlsnn.Accelerator(ACCEL / "shift8_pynq-z2.yaml", "sim") as s, hlsnn.Accelerator(ACCEL / "shift8_pynq-z2.yaml") as e:
        xc, wc = rng.normal(size=(2, 9, 8)), rng.normal(size=(5, 2, 3, 3))
        np.testing.assert_array_equal(s.conv2d(xc, wc, mode="pot"), e.conv2d(xc, wc, mode="pot"))
    with hlsnn.Accelerator(ACCEL / "sparse8_pynq-z2.yaml", "sim") as s, \
            hlsnn.Accelerator(ACCEL / "sparse8_pynq-z2.yaml") as e:
        x8 = (rng.integers(-128, 128, (3, 21, 19)) * (rng.random((3, 21, 19)) < 0.3)).astype(np.int8)
        w8 = (rng.integers(-128, 128, (6, 3, 3, 3)) * (rng.random((6, 3, 3, 3)) < 0.5)).astype(np.int8)
        np.testing.assert_array_equal(s.conv2d(x8, w8, requantize=False), e.conv2d(x8, w8, requantize=False))


def test_beats_packed_into_the_dma_buffer_are_not_copied_again():
    """gemm_bfp packs straight into the target's DMA input buffer (input_buffer); run() given
    those beats sends them as they are, given other beats copies them in: same results."""
    from hlsnn.engines.bfp_systolic import protocol
    rng = np.random.default_rng(5)
    with hlsnn.Accelerator(ACCEL / "bfp16_pynq-z2.yaml", "sim") as s, hlsnn.Accelerator(ACCEL / "bfp16_pynq-z2.yaml") as e:
        xq, wq, bq = e.kernel.quantize_operands(rng.normal(size=(6, 20)), rng.normal(size=(5, 20)), rng.normal(size=5))
        got, ref = s.gemm_bfp(xq, wq, bq), e.gemm_bfp(xq, wq, bq)
        np.testing.assert_array_equal(got.mantissas, ref.mantissas)
        np.testing.assert_array_equal(got.exponents, ref.exponents)
        p, t = s.config.params, s.target
        xm, xe, wm, we, bm, be = s.kernel._check_bfp(xq, wq, bq)
        fresh = protocol.pack_input(p, xm, xe, wm, we, bm, be)
        regs = [6, 5, 20, protocol.FLAG_BIAS, 0]
        n_out = protocol.n_output_beats(p, 6, 5)
        out1, regs1 = t.run(fresh, regs, n_out)                      # copied into the buffer
        staged = protocol.pack_input(p, xm, xe, wm, we, bm, be, out=t.input_buffer(fresh.nbytes))
        assert np.shares_memory(staged, t._in_np)
        out2, regs2 = t.run(staged, regs, n_out)                     # already there
        np.testing.assert_array_equal(out1, out2)
        np.testing.assert_array_equal(regs1, regs2)
        assert not np.shares_memory(out2, t._out_np)                 # run's result never aliases the buffer


def test_cli_compare_on_sim_and_run():
    # shift8_pynq-z2: a library the quick suite compiles anyway (the subprocess gets the run's
    # HLSNN_BUILD); shift8_zcu104's is one of SLOW_CSIM_CONFIGS
    res = subprocess.run([sys.executable, "-m", "hlsnn.cli", "compare", str(ACCEL / "shift8_pynq-z2.yaml"), "--target",
                          "sim", "--json"], capture_output=True, text=True, timeout=600)
    rep = json.loads(res.stdout)
    assert res.returncode == 0 and rep["mismatches"] == 0 and rep["target"] == "sim"


def _sim_overlay(tmp_path, name="bfp16_pynq-z2.yaml"):
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    cfg = hlsnn.load_config(ACCEL / name)
    return cfg, prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path / cfg.name)


def test_overlay_from_folder_and_config_mismatch(tmp_path):
    """An overlay folder carries its config; a config with another hash is refused, naming both."""
    cfg, d = _sim_overlay(tmp_path)
    with hlsnn.Accelerator(d, target="sim") as acc:          # config read from <name>.json
        assert acc.config.sha == cfg.sha
        y = acc.gemm(np.ones((2, 5)), np.ones((3, 5)))
        assert y.shape == (2, 3)
    other = hlsnn.load_config({**yaml_of("bfp16_pynq-z2.yaml"), "bfp_systolic": {**yaml_of("bfp16_pynq-z2.yaml")[
        "bfp_systolic"], "max_k": 512}}, source="other")
    with pytest.raises(hlsnn.HlsnnError, match=f"0x{cfg.hash32:08x}.*0x{other.hash32:08x}"):
        hlsnn.Accelerator(other, target="sim", overlay=d)


def test_register_map_without_a_protocol_register_is_refused(tmp_path):
    """The manifest's register map is keyed by the protocol's names (hlsnn build translates the
    kernel's argument names, e.g. k_in); an overlay lacking one is refused, naming it."""
    cfg, d = _sim_overlay(tmp_path)
    js = d / f"{cfg.name}.json"
    m = json.loads(js.read_text())
    m["register_map"]["k_in"] = m["register_map"].pop("k")       # an argument name, not the protocol's
    js.write_text(json.dumps(m))
    with pytest.raises(hlsnn.HlsnnError, match=r"register_map has no register for k \(it has .*k_in.*rebuild"):
        hlsnn.Accelerator(d, target="sim")


def yaml_of(name):
    import yaml
    return yaml.safe_load((ACCEL / name).read_text())


def test_bit_hwh_name_mismatch_is_clear(tmp_path):
    cfg, d = _sim_overlay(tmp_path)
    shutil.move(d / f"{cfg.name}.hwh", d / "design_1.hwh")
    with pytest.raises(hlsnn.InputError, match=r"missing .*\.hwh.*same stem"):
        hlsnn.Accelerator(d, target="sim")


def test_missing_tlast_is_an_error_not_a_hang(tmp_path):
    """A kernel that never sets TLAST: the S2MM channel can never complete."""
    from hlsnn.runtime import sim_target
    cfg = hlsnn.load_config(ACCEL / "bfp16_pynq-z2.yaml")
    real = sim_target.csim_kernel_model

    def no_tlast(cfg_, engine, lib):
        fn = real(cfg_, engine, lib)
        return lambda beats, regs: fn(beats, regs)[:2] + (None,)
    sim_target.csim_kernel_model = no_tlast
    try:
        with hlsnn.Accelerator(cfg, target="sim") as acc:
            with pytest.raises(hlsnn.HlsnnError, match="TLAST"):
                acc.gemm(np.ones((2, 5)), np.ones((3, 5)))
    finally:
        sim_target.csim_kernel_model = real


def test_receive_buffer_smaller_than_the_packet(tmp_path):
    cfg = hlsnn.load_config(ACCEL / "bfp16_pynq-z2.yaml")
    eng = ENGINES[cfg.engine]
    with hlsnn.Accelerator(cfg, target="sim") as acc:
        case = eng.cases.make_cases(cfg, 0, 1)[-1]
        beats = eng.protocol.pack_input(cfg.params, case.xm, case.xe, case.wm, case.we, case.bm, case.be)
        n = eng.protocol.n_output_beats(cfg.params, case.xm.shape[0], case.wm.shape[0])
        with pytest.raises(hlsnn.HlsnnError, match="DMAIntErr|longer than"):
            acc.target.run(beats, case.regs(), n // 2)


def test_dmasr_decoding():
    from hlsnn.runtime.pynq_target import decode_dmasr
    text = decode_dmasr(0x4011)
    assert "halted" in text and "DMAIntErr" in text and "error interrupt" in text
    assert "idle" in decode_dmasr(0x2)


def test_zynq7000_pl_clock_without_a_frequency_is_filled_in(monkeypatch):
    """On a PYNQ-Z2 board pynq 4.0.0 gets clock_dict[0]['frequency'] None (pynqmetadata reads no
    frequency from a Zynq-7000 .hwh) and Overlay.download() raises TypeError in
    Clocks.set_pl_clk; the pynq target fills it in from the PS parameters before downloading.
    Here the simulated device keeps its metadata as pynq returns it on the board."""
    import pynq

    from hlsnn.runtime.pynq_target import fill_pl_clock_frequencies
    from hlsnn.runtime.sim import SimDevice
    monkeypatch.setattr(SimDevice, "_fill_clock_frequencies", lambda self, parser: None)
    with hlsnn.Accelerator(ACCEL / "bfp16_pynq-z2.yaml", "sim") as acc:
        assert acc.target.sim.fixups == []
        assert acc.target.overlay.clock_dict[0]["frequency"] == pytest.approx(100.0)
        assert pynq.Clocks.fclk0_mhz == pytest.approx(100.0)
        assert acc.gemm(np.ones((2, 5)), np.ones((3, 5))).shape == (2, 3)
    assert fill_pl_clock_frequencies({0: {"enable": 1, "frequency": None}}, parser=None) == []
