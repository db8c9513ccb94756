"""User mistakes end in one line `hlsnn: error: ...` and exit 2, never a traceback (issue 17's
list), and the API refuses the inputs it used to accept silently."""
import numpy as np
import pytest

import hlsnn
from hlsnn.cli import main
from hlsnn.errors import InputError


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("zero_d.npy", np.array(3.0))
    np.savez("a.npz", x=np.ones(3))
    open("empty.npy", "wb").close()
    np.save("x3d.npy", np.ones((2, 3, 4)))
    np.save("x.npy", np.ones((2, 8)))
    np.save("cplx.npy", np.ones((2, 8)) * (1 + 1j))
    np.save("strs.npy", np.array([["a", "b"]], dtype=object), allow_pickle=True)
    return tmp_path


CASES = [
    ["run", "bfp16_pynq-z2", "--input", "zero_d.npy"], ["run", "bfp16_pynq-z2", "--input", "a.npz"],
    ["run", "bfp16_pynq-z2", "--input", "empty.npy"], ["run", "bfp16_pynq-z2", "--input", "x3d.npy"],
    ["run", "bfp16_pynq-z2", "--input", "cplx.npy"], ["run", "bfp16_pynq-z2", "--input", "strs.npy"],
    ["run", "bfp16_pynq-z2", "--input", "x.npy", "--n", "-3"], ["csim", "bfp16_pynq-z2", "--seed", "-1"],
    ["compare", "bfp16_pynq-z2", "--target", "emu", "--cases", "-2"],
    ["build", "bfp16_pynq-z2", "--jobs", "-4", "--dry-run"], ["run", "overlays/nope", "--input", "x.npy"],
    ["deploy", "digits_mlp.yaml", "--test-samples", "0"], ["deploy", "digits_mlp.yaml", "--test-samples", "-5"],
    ["nosuchcommand"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a) for a in CASES])
def test_user_mistakes_are_one_line_and_exit_2(files, args, capsys):
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(args))
    out, err = capsys.readouterr()
    assert exc.value.code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hlsnn: error: ") and "Traceback" not in err, err


def test_missing_overlay_folder_is_named_as_such(files, capsys):
    main(["run", "overlays/nope", "--input", "x.npy"])
    assert "no such overlay folder or config file" in capsys.readouterr().err


def test_api_refuses_what_it_took_silently():
    bfp = hlsnn.Accelerator("bfp16_pynq-z2", "emu")
    sh = hlsnn.Accelerator("shift8_pynq-z2", "emu")
    x, w = np.ones((2, 4)), np.ones((3, 4))
    with pytest.raises(InputError, match="relu = 'no': must be True or False"):
        bfp.gemm(x, w, relu="no")                         # a truthy string applied ReLU
    with pytest.raises(InputError, match="stats_k = 2.7"):
        bfp.gemm(x, w, stats_k=2.7)                       # truncated to 2
    with pytest.raises(InputError, match="x: is complex"):
        bfp.gemm(x * (1 + 1j), w)                         # lost its imaginary part
    with pytest.raises(InputError, match="^w: has 3 non-finite"):
        bfp.gemm(x, np.where(np.eye(3, 4) > 0, np.nan, w))  # was reported as being in x
    with pytest.raises(InputError, match="^w: has 3 non-finite"):
        sh.gemm(x, np.where(np.eye(3, 4) > 0, np.nan, w))
    with pytest.raises(InputError, match="bias"):
        sh.gemm(x, w, bias=np.ones(5))
    with pytest.raises(InputError, match="dtype object"):
        sh.gemm(np.array([["a", 1.0]], dtype=object), np.ones((3, 2)))
