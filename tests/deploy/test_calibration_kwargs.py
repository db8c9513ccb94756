"""One config -> :class:`~hlsnn.deploy.run.runner.Deployment` rule (:func:`hlsnn.deploy.config.deployment_kwargs`):
a non-default value of every ``calibration`` key (and ``rounding``) reaches the Deployment in each
path that builds one from a config: ``hlsnn deploy`` (:func:`hlsnn.evaluation.run.deploy`),
:func:`hlsnn.deploy.reports.evaluate.open_deployment` and ``hlsnn compile``
(:func:`hlsnn.network.build.compile_model`); hlsnn.train's ``deployed`` is checked in
tests/train/test_strided_stats.py. The expected values are the YAML's, written out here; a
recorder stands in for the Deployment (the arguments bound to its signature, defaults filled; ``qmap``
is the file's Q/DQ mapping, empty for this float model)."""
import inspect
from pathlib import Path

import pytest

from hlsnn.deploy.run import runner

MODELS = Path(__file__).resolve().parents[2] / "configs" / "models"
SIG = inspect.signature(runner.Deployment.__init__)

#: every calibration key away from its default; mode dynamic (so e5 may be chosen), then static with
#: kept and clip_stats clipped
DYNAMIC = ("{samples: 7, overflow_ratio: 0.01, mode: dynamic, update: e5, update_by: op_type, percent: 37}",
           dict(overflow_ratio=0.01, rounding="truncate", dynamic=True, host_bits=None, update="e5",
                update_by="op_type", update_percent=37.0, strided_stats="all", clip_stats="off", qmap={},
                recalibrate=False))
STATIC_E5 = ("{samples: 7, overflow_ratio: 0.01, mode: static, update: e5, update_by: op_type, percent: 37}",
             dict(DYNAMIC[1], dynamic=False))
KEPT = ("{samples: 7, overflow_ratio: 0.02, strided_stats: kept, clip_stats: clipped}",
        dict(overflow_ratio=0.02, rounding="truncate", dynamic=False, host_bits=None, update="e1",
             update_by="layer", update_percent=20.0, strided_stats="kept", clip_stats="clipped", qmap={},
             recalibrate=False))


class _Stop(Exception):
    pass


def _recorder(seen):
    def fake(*args, **kwargs):
        b = SIG.bind(None, *args, **kwargs)
        b.apply_defaults()
        seen.append({k: v for k, v in b.arguments.items() if k not in ("self", "net", "assignment", "formats",
                                                                     "accelerators")})
        raise _Stop()
    return fake


def _config(tmp_path, cal):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: t\nmodel: {MODELS / 'digits_mlp.onnx'}\ndata: digits\ncalibration: {cal}\n"
                   "rounding: truncate\ntest_samples: 2\nformats:\n"
                   "  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")
    return cfg


@pytest.mark.parametrize("case", [DYNAMIC, KEPT], ids=["dynamic_e5", "kept"])
def test_hlsnn_deploy(tmp_path, monkeypatch, case):
    from hlsnn.evaluation import run
    seen = []
    monkeypatch.setattr(run, "Deployment", _recorder(seen))
    res = run.deploy(_config(tmp_path, case[0]), "emu", assignments=["fixed8"])
    assert res["calibration_images"] == 7
    assert seen == [case[1]]
    seen.clear()                 # the command line's update options over the config's, and the host's bits
    if case is DYNAMIC:
        run.deploy(_config(tmp_path, case[0]), "emu", assignments=["fixed8"], radix_update="e1",
                   radix_update_by="layer", host_precision="quantized", host_bits=6)
        assert seen == [dict(case[1], update="e1", update_by="layer", host_bits=6)]
    else:                        # kept needs update e1: the command line's e5 is refused before any work
        from hlsnn.errors import InputError
        with pytest.raises(InputError, match="strided_stats: kept .* e1 only"):
            run.deploy(_config(tmp_path, case[0]), "emu", radix_update="e5")
        assert seen == []


@pytest.mark.parametrize("case", [DYNAMIC, KEPT], ids=["dynamic_e5", "kept"])
def test_open_deployment(tmp_path, monkeypatch, case):
    from hlsnn.deploy.reports import evaluate
    seen = []
    monkeypatch.setattr(evaluate, "Deployment", _recorder(seen))
    with pytest.raises(_Stop):
        with evaluate.open_deployment(_config(tmp_path, case[0]), "fixed8"):
            pass
    assert seen == [case[1]]


@pytest.mark.parametrize("case", [STATIC_E5, KEPT], ids=["static_e5", "kept"])
def test_hlsnn_compile(tmp_path, monkeypatch, case):
    """A compiled model needs static radix points: mode dynamic is refused (below), not dropped."""
    from hlsnn.errors import InputError
    from hlsnn.network.build import compile_model
    seen = []
    monkeypatch.setattr(runner, "Deployment", _recorder(seen))
    with pytest.raises(_Stop):
        compile_model(_config(tmp_path, case[0]), "fixed8", tmp_path / "m.hlsnn", check_samples=0)
    assert seen == [case[1]]
    with pytest.raises(InputError, match="mode: static"):
        compile_model(_config(tmp_path, DYNAMIC[0]), "fixed8", tmp_path / "m.hlsnn")
