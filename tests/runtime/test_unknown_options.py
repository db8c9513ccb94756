"""An option an engine's operation does not take (the README's two-hot `mode=` on a BFP config) is an
InputError naming the engine and its options, not Python's TypeError about `Kernel.gemm`."""
import numpy as np
import pytest

import hlsnn
from hlsnn.errors import InputError


def test_an_option_of_another_engine_is_named():
    x, w = np.ones((2, 8)), np.ones((4, 8))
    bfp = hlsnn.Accelerator("bfp16_pynq-z2", "emu")
    with pytest.raises(InputError, match=r"^gemm: engine bfp_systolic does not take 'mode', 'delta'; its options: "
                                         r"bias, relu, method"):
        bfp.gemm(x, w, mode="twohot", delta=2)
    shift = hlsnn.Accelerator("shift8_pynq-z2", "emu")
    with pytest.raises(InputError, match=r"^conv2d: engine shift_mac does not take 'method'; .*padding, relu, mode"):
        shift.conv2d(np.ones((3, 8, 8)), np.ones((4, 3, 3, 3)), method="max")
    # the options each engine takes still go through, with the same result as the kernel's own call
    assert np.array_equal(shift.gemm(x, w, mode="twohot", delta=2), shift.kernel.gemm(x, w, mode="twohot", delta=2))
    assert np.array_equal(bfp.gemm(x, w, method="max"), bfp.kernel.gemm(x, w, method="max"))


def test_a_missing_overlay_folder_on_pynq_is_named_as_one(tmp_path, monkeypatch):
    """The README's `hlsnn.Accelerator("overlays/bfp16_pynq_z2", target="pynq")` before a build said
    "no such config file"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^overlays/bfp16_pynq_z2: no such overlay folder \(target pynq runs an "
                                         r"overlay: a folder with <name>.bit, <name>.hwh and <name>.json"):
        hlsnn.Accelerator("overlays/bfp16_pynq_z2", target="pynq")
    with pytest.raises(InputError, match="runs an overlay, not config bfp16_pynq_z2: give the overlay folder"):
        hlsnn.Accelerator("bfp16_pynq-z2", target="pynq")        # a config by name: the config's message
