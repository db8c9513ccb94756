"""A compiled model records the revision of its program (hlsnn.deploy.lower.programrev): which optional
fields its writer knew. A model compiled before rule 10c's ``gate_in`` (hand-made here: the field
and the revision removed, as an older hlsnn wrote it) fails to load with a message that says so
and how to recompile; the same field missing from a program of this revision keeps the rule's
own message; a newer revision and a malformed one are refused by name."""
import pytest

pytest.importorskip("onnx")

import hlsnn  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.network import artifact  # noqa: E402
from netfixtures import FORMATS, cbam_net, compile_onnx  # noqa: E402

FMT = "fixed8"


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """The CBAM-like net with a gate of a gate's product (rule 10c), compiled once."""
    tmp = tmp_path_factory.mktemp("progrev")
    model = cbam_net(tmp / "cbam.onnx", gate_on_gate=True)
    return compile_onnx(tmp, "cbam", model, FMT, formats={FMT: FORMATS[FMT]}, check_samples=2,
                        calibration_samples=16)


def _edited(path, out, *, drop_gate_in=True, revision="drop"):
    prog, arrays = artifact.read(path)
    if drop_gate_in:
        n = sum(1 for j in prog["layers"] if j.pop("gate_in", None) is not None)
        assert n == 1                                # the net has exactly one gate of a gate
    if revision == "drop":
        del prog["revision"]
    elif revision is not None:
        prog["revision"] = revision
    artifact.write(out, prog, arrays)
    return out


def test_this_hlsnn_writes_the_revision_and_loads_it(gated):
    prog, _ = artifact.read(gated)
    assert isinstance(prog["revision"], int) and prog["revision"] >= 2      # gate_in came with revision 2
    with hlsnn.load(gated, "emu", network=False):
        pass                                          # self-check passes


def test_a_model_compiled_before_gate_in_says_so_and_how_to_recompile(gated, tmp_path):
    old = _edited(gated, tmp_path / "old.hlsnn")
    with pytest.raises(InputError) as e:
        hlsnn.load(old, "emu", network=False)
    msg = str(e.value)
    assert "\n" not in msg
    assert "older hlsnn" in msg and "gate_in" in msg and "revision 1" in msg
    prog, _ = artifact.read(gated)
    assert f"hlsnn compile {prog['model']}.yaml --assignment {prog['assignment']}" in msg


def test_the_field_missing_from_a_current_program_keeps_the_rules_message(gated, tmp_path):
    bad = _edited(gated, tmp_path / "edited.hlsnn", revision=None)      # revision kept, gate_in removed
    with pytest.raises(InputError, match=r"no calibrated code radix .*\(rule 10c\)") as e:
        hlsnn.load(bad, "emu", network=False)
    assert "older hlsnn" not in str(e.value)


def test_a_newer_or_malformed_revision_is_refused_by_name(gated, tmp_path):
    from hlsnn.deploy.lower.programrev import REVISION
    new = _edited(gated, tmp_path / "new.hlsnn", drop_gate_in=False, revision=REVISION + 1)
    with pytest.raises(InputError, match=f"newer hlsnn .*revision {REVISION + 1}"):
        artifact.read(new)
    for bad in ("2", 0, True):
        p = _edited(gated, tmp_path / "bad.hlsnn", drop_gate_in=False, revision=bad)
        with pytest.raises(InputError, match="revision"):
            artifact.read(p)
