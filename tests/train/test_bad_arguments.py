"""Bad arguments to scripts/train_qat.py and to hlsnn.train's entry points (issue 84): each is
refused in one line naming the option (or argument), the value and what is allowed, never a
traceback. One mechanism, hlsnn.train.checks.Range, declared per option (the script's
``option_rules``) and per argument; these tables try each kind of bad value: non-numeric, NaN,
inf, out of range, a whole number expected, a missing file or folder, an unknown choice."""
import importlib.util
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from hlsnn.errors import HlsnnError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("train_qat_bad_args", ROOT / "scripts" / "train_qat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _refused(script, capsys, argv):
    with pytest.raises(SystemExit) as e:
        script.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert re.match(r"\S+: error: ", last), err         # argparse's line (after its usage)
    return last


@pytest.mark.parametrize("option, value, says", [
    ("--lr", "abc", "argument --lr: 'abc' is not a finite number > 0"),                   # non-numeric
    ("--qat-lr", "nan", "argument --qat-lr: 'nan' is not a finite number > 0"),            # NaN
    ("--prune-lr", "inf", "argument --prune-lr: 'inf' is not a finite number > 0"),        # inf
    ("--weight-decay", "-1", "argument --weight-decay: '-1' is not a finite number >= 0"),  # out of range
    ("--weight-decay", "inf", "argument --weight-decay: 'inf' is not a finite number >= 0"),
    ("--sparsity", "1", "argument --sparsity: '1' is not a number in [0, 1)"),
    ("--sparsity", "-inf", "argument --sparsity: '-inf' is not a number in [0, 1)"),
    ("--qat-epochs", "2.5", "argument --qat-epochs: '2.5' is not a whole number >= 0"),     # a whole number
    ("--float-epochs", "-1", "argument --float-epochs: '-1' is not a whole number >= 0"),
    ("--seed", "x", "argument --seed: 'x' is not a whole number >= 0"),
    ("--calibration-samples", "0", "argument --calibration-samples: '0' is not a whole number >= 1"),
    ("--overflow-ratio", "0.6", "argument --overflow-ratio: '0.6' is not a number in [0, 0.5]"),
    ("--prune-end", "0", "argument --prune-end: '0' is not a number in (0, 1]"),
    ("--augment", "40", "argument --augment: '40' is not a whole number in [0, 31]"),
    ("--distill-alpha", "1.5", "argument --distill-alpha: '1.5' is not a number in [0, 1]"),
    ("--label-smoothing", "nan", "argument --label-smoothing: 'nan' is not a number in [0, 1)"),
    ("--layer-sparsity", "conv=0.99x", "argument --layer-sparsity: 'conv=0.99x': LAYER=S"),
    ("--distill", "inf,0.5", "argument --distill: --distill 'inf,0.5': the temperature T > 0 and 0 <= alpha <= 1 (T finite)"),
    ("--fold", "5/5", "argument --fold: fold '5/5': N between 2 and 20 and K between 0 and N - 1"),
    ("--augment-affine", "nan,0.1", "argument --augment-affine: affine 'nan,0.1': DEG between 0 and 45"),
    ("--label-smoothing-phases", "prune,warmup", "argument --label-smoothing-phases: --label-smoothing-phases: "
                                                 "warmup is not a phase"),
    ("--from-pruned", "no/such.pt", "argument --from-pruned: 'no/such.pt': no such file"),       # a missing file
    ("--save", "no/such/folder/m", "argument --save: 'no/such/folder/m': its folder"),        # a missing folder
    ("--model", "vgg", "argument --model: invalid choice: 'vgg'"),                             # an unknown choice
    ("--format", "int4", "argument --format: invalid choice: 'int4'"),
    ("--kernel-balance", "16,16", "argument --kernel-balance: '16,16': P,B,S"),
    ("--kernel-balance", "16,0,2", "argument --kernel-balance: '16,0,2': P,B,S"),
    ("--accel", "sparse9_pynq-z2", "argument --accel: invalid choice: 'sparse9_pynq-z2'"),
])
def test_script_refuses_each_kind_of_bad_value(script, capsys, tmp_path, monkeypatch, option, value, says):
    monkeypatch.chdir(tmp_path)
    assert says in _refused(script, capsys, [f"{option}={value}"])      # = : "-1" is a value, not an option


def test_every_numeric_option_refuses_nan_and_inf(script, capsys):
    """Every option the script declares a Range for (all of its numeric ones: an option taking a
    value without a rule or choices stops the script, ``declare_ranges``) refuses NaN and inf."""
    from hlsnn.train.checks import Range
    ranges = {k: r for k, r in script.option_rules().items() if isinstance(r, Range)}
    assert len(ranges) >= 30
    for opt in ranges:
        for bad in ("nan", "inf"):
            assert f"argument {opt}: '{bad}' is not " in _refused(script, capsys, [f"{opt}={bad}"])


def test_a_file_that_is_no_checkpoint(script, capsys, tmp_path):
    bad = tmp_path / "x.pt"
    bad.write_text("not a checkpoint")
    last = _refused(script, capsys, ["--from-pruned", str(bad), "--format", "sparse"])
    assert f"--from-pruned {bad}: not a checkpoint --save-pruned wrote" in last


@pytest.fixture()
def small(tmp_path):
    cfg = tmp_path / "sparse.yaml"
    cfg.write_text("name: s\nmodel: m.onnx\ndata: digits32\nformats:\n  f: {type: sparse, accel: sparse8_pynq-z2}\n")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 10))
    return model, cfg


def _lib_cases():
    from hlsnn.train import (BalancedPruner, balanced_mask, calibrate, cubic_schedule, deployed, deployed_accuracy,
                             distillation_loss, erk_sparsities, export, prepare)
    from hlsnn.train.smoothing import phase_cross_entropy
    from hlsnn.train.average import update_batchnorm
    from hlsnn.train.data import cross_validation_fold, random_affine, random_shift, validation_split
    from hlsnn.train.regrow import RegrowPruner
    nan, inf = float("nan"), float("inf")
    x = torch.zeros(2, 3, 8, 8)
    s, y = torch.zeros(2, 10), torch.zeros(2, dtype=torch.long)

    def named(m):
        return [(n, q) for n, q in m.named_modules() if isinstance(q, (nn.Conv2d, nn.Linear))]

    def deploy_with(m, c, **kw):
        with deployed(prepare(m, c), torch.zeros(1, 3, 8, 8), c, **kw):
            pass
    return [
        ("target = nan: a number in [0, 1)", lambda m, c: BalancedPruner(m, nan, 0, 10)),
        ("target = 1.0: a number in [0, 1)", lambda m, c: BalancedPruner(m, 1.0, 0, 10)),
        ("end = -5: a whole number >= 0", lambda m, c: BalancedPruner(m, 0.5, 0, -5)),
        ("lanes = 2.5: a whole number >= 1", lambda m, c: BalancedPruner(m, 0.5, 0, 10, lanes=2.5)),
        ("allocation = 'erx': one of uniform, erk", lambda m, c: BalancedPruner(m, 0.5, 0, 10, allocation="erx")),
        ("sparsities['0'] = inf: a number in [0, 1)",
         lambda m, c: BalancedPruner(m, 0.5, 0, 10, sparsities={"0": inf, "3": 0.5})),
        ("alpha = inf: a number in [0, 1]", lambda m, c: RegrowPruner(m, 0.5, 0, 10, stop=20, alpha=inf)),
        ("sparsity = 'half': a number in [0, 1]", lambda m, c: balanced_mask(m[0].weight, "half")),
        ("target = 1.5: a number in [0, 1)", lambda m, c: cubic_schedule(5, 1.5, 0, 10)),
        ("power = nan: a finite number >= 0", lambda m, c: erk_sparsities(named(m), 0.5, power=nan)),
        ("temperature = inf: a finite number > 0", lambda m, c: distillation_loss(s, s, y, temperature=inf)),
        ("alpha = 'x': a number in [0, 1]", lambda m, c: distillation_loss(s, s, y, alpha="x")),
        ("overflow_ratio = nan: a number in [0, 0.5]", lambda m, c: prepare(m, c, overflow_ratio=nan)),
        ("layers: nope is not a Conv2d / Linear of the model", lambda m, c: prepare(m, c, layers={"nope": "f"})),
        ("strided_stats 'some': one of all, kept", lambda m, c: prepare(m, c, strided_stats="some")),
        ("no such", lambda m, c: prepare(m, c.parent / "missing.yaml")),
        ("x_cal: 192 value(s) NaN or infinite",
         lambda m, c: calibrate(prepare(m, c), torch.cat([x[:1], x[:1] + nan]))),
        ("x_cal: a float tensor of at least one image", lambda m, c: calibrate(prepare(m, c), x[:0])),
        ("its folder does not exist", lambda m, c: export(prepare(m, c), x[:1], c.parent / "no" / "m.onnx")),
        ("max_shift = -1: a whole number >= 0", lambda m, c: random_shift(x, -1)),
        ("degrees = nan", lambda m, c: random_affine(x, nan, 0.1)),
        ("n_val = 2.5: a whole number >= 0", lambda m, c: validation_split(100, 2.5)),
        ("batch = 0: a whole number >= 1", lambda m, c: update_batchnorm(m, x, batch=0)),
        ("target = 'board'", lambda m, c: deploy_with(m, c, target="board")),
        ("workdir = ", lambda m, c: deploy_with(m, c, workdir=str(c.parent / "no"))),
        ("x and y: 2 inputs and 1 labels", lambda m, c: deployed_accuracy(prepare(m, c), x[:1], c, x, x, y[:1])),
        ("smoothing = 1.0: a number in [0, 1)", lambda m, c: phase_cross_entropy(s, y, 1.0, ("prune",), "prune")),
        ("k = 5: a whole number in [0, 4]", lambda m, c: cross_validation_fold(x, y, x, y, 5, 5)),
    ]


CASES = _lib_cases()


@pytest.mark.parametrize("says, call", CASES, ids=[c[0][:48] for c in CASES])
def test_library_refuses_each_kind_of_bad_argument(small, says, call):
    with pytest.raises(ValueError) as e:             # InputError, ConfigError: ValueErrors
        call(*small)
    msg = str(e.value)
    assert says in msg and "\n" not in msg, msg
    assert isinstance(e.value, HlsnnError)          # hlsnn's own: the CLI's one line


def test_kernel_balance_needs_the_sparse_format_and_no_lane_balance(script, capsys):
    assert "--kernel-balance 16,16,2: with --format sparse" in _refused(
        script, capsys, ["--format", "pot", "--kernel-balance", "16,16,2"])
    assert "--kernel-balance: not with --lane-balance" in _refused(
        script, capsys, ["--format", "sparse", "--kernel-balance", "16,16,2", "--lane-balance", "8"])
