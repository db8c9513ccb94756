"""Hostile input, round four (session 31's audit): strings and files from users and third parties
that the earlier rounds (test_hostile_cli, deploy/test_hostile_compiled, deploy/test_rewrite_names,
build/test_quoted_commands, test_fuzz_*) did not reach. Each case ends in one clear hlsnn error
naming what is wrong and what is allowed, or in text where the string cannot act (no TCL command,
no C++ line), and leaves nothing half-written."""
import pytest

from hlsnn.cli import main
from hlsnn.errors import ConfigError
from conftest import ROOT

BOARD = (ROOT / "configs" / "boards" / "pynq-z2.yaml").read_text()
ACCEL = (ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml").read_text()


def _hostile_board(tmp_path, name):
    """A board file named ``<name>.yaml`` whose ``name`` is ``name`` (as load_board wants), and an
    accelerator config that gives it by path."""
    board = tmp_path / f"{name}.yaml"
    board.write_text(BOARD.replace("name: pynq-z2", "name: " + __import__("json").dumps(name)))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(ACCEL.replace("board: pynq-z2", "board: " + __import__("json").dumps(str(board))))
    return board, cfg


@pytest.mark.parametrize("name", ["x\nexec touch PWNED\n#", "a b", "x[exec id]", "a;b", "-rf"])
def test_a_board_file_name_is_a_board_name(tmp_path, monkeypatch, capsys, name):
    """A board given by path (``board: /path/<name>.yaml``, ``--board``) had any name equal to its
    file's stem: a newline in it put a line of its own in bd.tcl, which Vivado runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    board, cfg = _hostile_board(tmp_path, name)
    from hlsnn.config import load_board, load_config
    with pytest.raises(ConfigError, match="board name"):
        load_board(board)
    with pytest.raises(ConfigError, match="board name"):
        load_config(cfg)
    assert main(["build", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hlsnn: error:") and "letters, digits" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "build").exists() and not list(tmp_path.rglob("PWNED"))


def test_a_board_file_with_a_plain_name_still_loads(tmp_path):
    from hlsnn.config import load_config
    _, cfg = _hostile_board(tmp_path, "my-board_2.1")
    assert load_config(cfg).board.name == "my-board_2.1"


HWH_MASTER = ('<?xml version="1.0"?><EDKSYSTEM><MODULES><MODULE INSTANCE="n" MODTYPE="n">'
              '<BUSINTERFACES>{}</BUSINTERFACES></MODULE></MODULES></EDKSYSTEM>')
_BI = '<BUSINTERFACE NAME="{}" TYPE="MASTER" VLNV="xilinx.com:interface:aximm:1.0" DATAWIDTH="{}"/>'
LAUGHS = ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
          + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefg", "bcdefgh"))
          + ']><EDKSYSTEM>&h;</EDKSYSTEM>')
HOSTILE_HWH = {
    "not xml": "garbage <<<",
    "empty": "",
    "billion laughs": LAUGHS,
    "external entity": ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                        '<EDKSYSTEM>&x;</EDKSYSTEM>'),
    "width not a number": HWH_MASTER.format(_BI.format("m_axi_gmem0", "x") + _BI.format("m_axi_gmem1", "64")),
    "width huge": HWH_MASTER.format(_BI.format("m_axi_gmem0", "9" * 5000) + _BI.format("m_axi_gmem1", "64")),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_HWH))
def test_a_hostile_hwh_is_no_network_overlay_and_an_input_error(tmp_path, case):
    """An overlay folder's .hwh is read to tell a network overlay from a layer one (CompiledNet's
    overlays, `hlsnn run`) and to check its m_axi ports: a ParseError or an int() of a
    DATAWIDTH escaped as a traceback."""
    from hlsnn.errors import InputError
    from hlsnn.network.board import is_network_overlay, net_masters
    d = tmp_path / "n"
    d.mkdir()
    for ext in ("bit", "json"):
        (d / f"n.{ext}").write_text("")
    (d / "n.hwh").write_text(HOSTILE_HWH[case])
    assert is_network_overlay(d) is False
    with pytest.raises(InputError, match=r"n\.hwh: (not a readable \.hwh|interface 'm_axi_gmem0' of 'n' has "
                                         r"DATAWIDTH)") as e:
        net_masters(d / "n.hwh", "n")
    assert len(str(e.value)) < 400 and "root:" not in str(e.value)


def test_an_honest_network_hwh_still_reads():
    from hlsnn.network.board import net_masters
    import tempfile
    import pathlib
    with tempfile.TemporaryDirectory() as t:
        p = pathlib.Path(t) / "n.hwh"
        p.write_text(HWH_MASTER.format(_BI.format("m_axi_gmem0", "64") + _BI.format("m_axi_gmem1", "64")))
        assert net_masters(p, "n") == {"m_axi_gmem0": 64, "m_axi_gmem1": 64}


MATH = r"$\foo{$"          # matplotlib's mathtext: an unknown command and an open brace, a ValueError at draw


def test_a_layer_name_with_dollars_draws_as_text_in_the_report():
    """ONNX node names (printable, so ``$\\foo$`` passes the importer) label the report's bar
    charts and weight figures; matplotlib took a pair of ``$`` as mathtext and stopped the report
    with a ParseFatalException/ValueError."""
    pytest.importorskip("matplotlib")
    from hlsnn.deploy.reports import report
    new = report._matplotlib()
    fig = report._bars(new, [MATH, "b"], {MATH: [1.0, 2.0]}, "y", log=True, hline=(1.0, MATH), title=MATH)
    assert report._img(fig, MATH).startswith('<img src="data:image/png;base64,')
    texts = [t.get_text() for t in fig.axes[0].get_xticklabels()] + [fig.axes[0].get_title()]
    assert MATH.replace("$", r"\$") in texts


def test_plot_quant_of_a_file_named_with_dollars(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import numpy as np
    w = tmp_path / f"{MATH}.npy"
    np.save(w, np.linspace(-1, 1, 64).astype(np.float32))
    assert main(["plot-quant", str(w), "--out", str(tmp_path / "q.png")]) == 0
    assert (tmp_path / "q.png").stat().st_size > 1000


def _onnx_with(tmp_path, op_type, domain):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["t"], name="mm"),
             helper.make_node(op_type, ["t"], ["y"], name="r", domain=domain)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])], [w])
    ops = [helper.make_opsetid("", 15)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(g, opset_imports=ops), tmp_path / "m.onnx")
    return tmp_path / "m.onnx"


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("op_type,domain", [("Evil\n  mm (MatMul): forged line", "x.y"), ("Evil", "x.y\nz"),
                                            ("E\x1b[2Jvil", "x.y"), ("E" * 300, "x.y")],
                         ids=["newline in op type", "newline in domain", "escape in op type", "op type of 300"])
def test_an_op_type_or_domain_is_a_printable_name(tmp_path, op_type, domain, fallback):
    """A custom domain's op type (onnx's checker does not look at it) headed a line of the
    unsupported-node list, so a newline in it forged lines there; with --host-fallback it was
    imported into the host layer as it was."""
    pytest.importorskip("onnx")
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.errors import ModelError
    with pytest.raises(ModelError, match=r"m\.onnx: op (type|domain) ") as e:
        load_onnx(_onnx_with(tmp_path, op_type, domain), host_fallback=fallback)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)


def test_a_custom_op_of_a_plain_name_is_still_listed(tmp_path):
    pytest.importorskip("onnx")
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.errors import UnsupportedModelError
    with pytest.raises(UnsupportedModelError, match=r"r \(MyOp\)"):
        load_onnx(_onnx_with(tmp_path, "MyOp", "com.example"))


def test_a_batch_refuses_names_that_differ_only_in_case(tmp_path, monkeypatch, capsys):
    """build/Net and build/net are one folder on macOS and Windows: two builds of a batch wrote
    into each other's project."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    for n in ("Net", "net"):
        (tmp_path / f"{n}.yaml").write_text(ACCEL.replace("name: bfp16_pynq_z2", f"name: {n}"))
    assert main(["build", "Net.yaml", "net.yaml", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "differ only in case" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("name", ["reset", "dma", "ps", "ip_dict", "download"])
def test_an_accelerator_named_like_a_cell_or_an_overlay_attribute_is_refused(tmp_path, name):
    """``getattr(overlay, cfg.name)`` returned pynq's Overlay.reset for a config named ``reset``
    (an AttributeError traceback on sim and on the board), and ``dma`` / ``ps`` are cells of the
    block design."""
    from hlsnn.config import load_config
    p = tmp_path / "c.yaml"
    p.write_text(ACCEL.replace("name: bfp16_pynq_z2", f"name: {name}"))
    with pytest.raises(ConfigError, match="is reserved"):
        load_config(p)
    p.write_text(ACCEL.replace("name: bfp16_pynq_z2", f"name: {name}_accel"))
    assert load_config(p).name == f"{name}_accel"


def test_a_nul_in_a_config_path_or_a_model_path_is_one_line(tmp_path, capsys):
    """``model: "a\\0b.onnx"`` in a deployment config (YAML's escape) reached os.stat: a
    ValueError traceback from `hlsnn deploy` and `hlsnn compile`; so did load_onnx("a\\0b")."""
    pytest.importorskip("onnx")
    import re
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.errors import InputError
    text = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text()
    text = re.sub(r"(?m)^model:.*$", r'model: "a\\0b.onnx"', text).replace("../accel/", f"{ROOT}/configs/accel/")
    (tmp_path / "d.yaml").write_text(text)
    assert main(["compile", str(tmp_path / "d.yaml"), "--assignment", "twohot", "-o", str(tmp_path / "x.hlsnn")]) == 2
    err = capsys.readouterr().err.strip()
    assert "NUL character" in err and len(err.splitlines()) == 1
    with pytest.raises(InputError, match="NUL character"):
        load_onnx("a\0b.onnx")


@pytest.mark.parametrize("key", ['"fc9\\nforged line: x"', '"a\\tb"', "''", "null"])
def test_a_layer_name_in_an_assignment_is_printable(tmp_path, capsys, key):
    """A deployment config's ``layers: {NAME: FORMAT}`` key reached the "no engine layer named"
    error as it was: a newline in it forged a line of the message."""
    text = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text()
    text = text.replace("../accel/", f"{ROOT}/configs/accel/").replace(
        "model: digits_mlp.onnx", f"model: {ROOT}/configs/models/digits_mlp.onnx")
    assert "layers: {fc2: bfp8}" in text
    (tmp_path / "d.yaml").write_text(text.replace("layers: {fc2: bfp8}", f"layers: {{{key}: bfp8}}"))
    out = tmp_path / "x.hlsnn"
    assert main(["compile", str(tmp_path / "d.yaml"), "--assignment", "twohot+bfp8", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "layers" in err and len(err.splitlines()) == 1 and not (tmp_path / "x.hlsnn").exists()


def test_network_kernel_sources_enter_the_shared_cache_whole(tmp_path, monkeypatch):
    """The network kernel's cache folder (build/netkernel/<name>_<key>) is shared by processes
    that build the same network: its sources were rewritten in place (truncate, then write) on
    every build, so one process's compiler could read another's half-written file. Now a file of
    the same bytes is left alone and any other replaced by a rename (never seen partly written)."""
    from hlsnn.engines.network.kernel import place_sources
    src, cache = tmp_path / "src", tmp_path / "cache"
    (src / "include").mkdir(parents=True)
    (src / "network.cpp").write_text("int a;\n")
    (src / "include" / "h.h").write_text("#pragma once\n")
    place_sources(src, cache, ["network.cpp", "include/h.h"])
    ino = (cache / "network.cpp").stat().st_ino
    opened = []
    real_open = open

    def spy(path, mode="r", *a, **k):
        if "w" in mode and str(path).startswith(str(cache)):
            opened.append(str(path))
        return real_open(path, mode, *a, **k)
    monkeypatch.setattr("builtins.open", spy)
    place_sources(src, cache, ["network.cpp", "include/h.h"])                # the same bytes: untouched
    assert opened == [] and (cache / "network.cpp").stat().st_ino == ino
    (src / "network.cpp").write_text("int b;\n")
    place_sources(src, cache, ["network.cpp", "include/h.h"])
    assert (cache / "network.cpp").read_text() == "int b;\n"
    assert all(not p.endswith("/network.cpp") for p in opened)             # written to a temporary, renamed
    assert opened


def test_a_sweep_value_with_dollars_or_a_newline_is_drawn_and_printed_as_text(tmp_path, capsys):
    """An invalid variant's value is shown in the sweep's table and tick labels: ``$\\foo{$`` stopped
    the plot with matplotlib's mathtext ValueError, and a newline split its table row."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "s.png"
    rc = main(["sweep", "bfp8_zcu104", "--vary", f"rounding=nearest_even,{MATH}", "--no-csim", "--out", str(out)])
    assert rc in (0, 1) and out.stat().st_size > 1000
    capsys.readouterr()
    main(["sweep", "bfp8_zcu104", "--vary", 'rounding=nearest_even,"a\\nb"', "--no-csim", "--no-plot"])
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("bfp8_zcu104_v1"))
    assert "'a\\nb'" in row and "invalid" in row


def test_the_compiled_models_report_draws_layer_names_as_text():
    pytest.importorskip("matplotlib")
    from hlsnn.network.report import _chart
    res = {"layers": [{"name": MATH, "fabric_us": 1.0, "host_us": 0.5}, {"name": "fc", "fabric_us": 2.0, "host_us": 0}]}
    assert _chart(res).startswith('<img src="data:image/png;base64,')


def test_the_dma_check_refuses_a_width_that_is_no_number():
    """Quick cover of the rule below: PynqTarget._check_dma on the parameters pynq reads."""
    import types
    from hlsnn.runtime.pynq_target import OverlayMismatch, PynqTarget
    me = types.SimpleNamespace(cfg=types.SimpleNamespace(params={"stream_bits": 64}))
    par = {"C_INCLUDE_SG": "0", "C_M_AXIS_MM2S_TDATA_WIDTH": "x", "C_S_AXIS_S2MM_TDATA_WIDTH": "64"}
    with pytest.raises(OverlayMismatch, match="c_m_axis_mm2s_tdata_width = 'x': the kernel's input stream is 64"):
        PynqTarget._check_dma(me, {"parameters": par})


@pytest.mark.slow
@pytest.mark.parametrize("param,match", [("c_m_axis_mm2s_tdata_width", "c_m_axis_mm2s_tdata_width = 'x'"),
                                         ("c_micro_dma", "pynq's drivers cannot read")])
def test_a_dma_width_that_is_no_number_is_an_overlay_mismatch(tmp_path, param, match):
    """The layer overlay's DMA parameters come from its .hwh: ``int('x')`` of a stream width (in
    hlsnn) or of c_micro_dma (in pynq's DMA driver) was a ValueError traceback when the overlay
    loaded (sim and pynq). Every one of the 569 parameters of a sim overlay's .hwh set to 'x' in
    turn: 5 tracebacks before, 0 after (session 31)."""
    pytest.importorskip("pynq")
    import hlsnn
    from hlsnn.config import load_config
    from hlsnn.engines import ENGINES
    from hlsnn.errors import HlsnnError
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    cfg = load_config("bfp16_pynq-z2")
    d = prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path / cfg.name)
    hwh = d / f"{cfg.name}.hwh"
    text = hwh.read_text()
    import re
    text, n = re.subn(f'NAME="{param}" VALUE="[^"]*"', f'NAME="{param}" VALUE="x"', text)
    assert n == 1
    hwh.write_text(text)
    with pytest.raises(HlsnnError, match=match):
        hlsnn.Accelerator(d, target="sim")


@pytest.mark.slow            # imports pynq and renders a .hwh: about 3.5 s on the first case
@pytest.mark.parametrize("value", ["x", [1], None])
def test_a_manifest_hash_that_is_no_number_is_an_overlay_mismatch(tmp_path, value):
    """A layer overlay's <name>.json with ``config_hash32`` not an integer: the mismatch message
    formatted it with int(), a ValueError/TypeError traceback."""
    pytest.importorskip("pynq")
    import json
    import hlsnn
    from hlsnn.config import load_config
    from hlsnn.engines import ENGINES
    from hlsnn.errors import HlsnnError
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    cfg = load_config("bfp16_pynq-z2")
    d = prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path / cfg.name)
    js = d / f"{cfg.name}.json"
    js.write_text(json.dumps(dict(json.loads(js.read_text()), config_hash32=value)))
    with pytest.raises(HlsnnError, match="was built from config hash"):
        hlsnn.Accelerator(d, target="sim")


@pytest.mark.parametrize("kind", ["compiled model", "onnx model"])
def test_a_file_name_with_a_newline_stays_on_the_errors_line(tmp_path, monkeypatch, capsys, kind):
    """Errors printed a user's path as ``{path}``: a newline in a file name split the message and
    the rest of the name read as a line of its own (a forged ``error:`` line). The path is now
    printed by ``errors.printable`` (its repr when it has a control character)."""
    monkeypatch.chdir(tmp_path)
    name = "m\nerror: forged line"
    if kind == "compiled model":
        path = tmp_path / f"{name}.hlsnn"
        path.write_bytes(b"not a zip")                       # "not a compiled model (not a zip container ..."
        argv = ["perf", str(path)]
    else:
        text = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text()
        (tmp_path / "d.yaml").write_text(text.replace("../accel/", f"{ROOT}/configs/accel/").replace(
            "model: digits_mlp.onnx", "model: " + __import__("json").dumps(f"{name}.onnx")))
        argv = ["compile", "d.yaml", "--assignment", "bfp8", "-o", "x.hlsnn"]   # "model file ... does not exist"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert repr(f"{name}.hlsnn" if kind == "compiled model" else f"{name}.onnx")[1:-1] in err
