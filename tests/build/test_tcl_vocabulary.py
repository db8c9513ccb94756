"""Every command, option, property, CONFIG.* key and automation -config key in the rendered
bd.tcl (every shipped config on every board it fits, plus the narrow-stream extras) and
run_hls.tcl is one that public scripts use (tests/build/tcl_vocabulary.yaml, with provenance).
An invented command or property fails here before it meets the real tools."""
import re
from pathlib import Path

import pytest
import yaml

import hlsnn.build
from hlsnn import codegen
from hlsnn.engines import ENGINES

from test_bd_tcl import COMBOS, EXTRA, tcl_dict

HERE = Path(__file__).resolve().parent
VOCAB = yaml.safe_load((HERE / "tcl_vocabulary.yaml").read_text())
ALL = COMBOS + EXTRA


# ------------------------------------------------------------------ a small Tcl reader
def _split(text, seps, script=False):
    """Split ``text`` at characters in ``seps`` outside braces, brackets and quotes (a script:
    a ``#`` where a command starts comments out the rest of its line)."""
    out, cur, depth_b, depth_k, quote, i = [], [], 0, 0, False, 0
    while i < len(text):
        c = text[i]
        if script and c == "#" and not "".join(cur).strip() and depth_b == depth_k == 0 and not quote:
            while i < len(text) and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            continue
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] == "\n" and depth_b == 0:       # continuation line: a space
                cur.append(" ")
            else:
                cur.append(text[i:i + 2])
            i += 2
            continue
        if c == "{" and not quote:
            depth_b += 1
        elif c == "}" and not quote:
            depth_b -= 1
        elif c == "[" and depth_b == 0:
            depth_k += 1
        elif c == "]" and depth_b == 0:
            depth_k -= 1
        elif c == '"' and depth_b == 0 and depth_k == 0:
            quote = not quote
        if c in seps and depth_b == 0 and depth_k == 0 and not quote:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _brackets(word):
    """The command substitutions ``[...]`` in a word (outermost, outside braces)."""
    out, depth_b, start, depth = [], 0, None, 0
    for i, c in enumerate(word):
        if c == "{" and depth == 0:
            depth_b += 1
        elif c == "}" and depth == 0:
            depth_b -= 1
        elif c == "[" and depth_b == 0:
            if depth == 0:
                start = i + 1
            depth += 1
        elif c == "]" and depth_b == 0 and depth:
            depth -= 1
            if depth == 0:
                out.append(word[start:i])
    return out


# word positions that are scripts (bodies) or expressions, per control command
_BODIES = {"if": "if", "foreach": -1, "proc": -1, "while": -1}
_EXPR = ("expr",)


def commands(script):
    """Every command of a Tcl script, nested ones included, as (name, [words])."""
    out = []
    for raw in _split(script, "\n;", script=True):
        cmd = raw.strip()
        if not cmd or cmd.startswith("#"):
            continue
        words = [w for w in _split(cmd, " \t") if w]
        out.append((words[0], words[1:]))
        name, args = words[0], words[1:]
        bodies = set()
        if name == "if":
            # if cond body ?elseif cond body? ?else body?
            j = 0
            while j < len(args):
                if args[j] in ("elseif",):
                    j += 1
                    continue
                if args[j] == "else":
                    bodies.add(j + 1)
                    j += 2
                    continue
                bodies.add(j + 1)       # args[j] is a condition, the next its body
                j += 2
        elif name in ("foreach", "proc", "while"):
            bodies.add(len(args) - 1)
        for j, w in enumerate(args):
            if j in bodies and w.startswith("{"):
                out += commands(w[1:-1])
            elif w.startswith("{") and (name == "if" or name in _EXPR):
                for sub in _brackets(w[1:-1]):
                    out += commands(sub)
            elif not w.startswith("{"):
                for sub in _brackets(w):
                    out += commands(sub)
    return out


def test_reader():
    cmds = commands('set a [get_x -y [get_z w]]\nif {[llength $a] > 0} { puts "b [c d]" } else { e -f }\n'
                    '# comment [bogus]; x\nproc p {x} {\n  return [q $x]\n}\nfoo a \\\n  -bar b')
    names = [c for c, _ in cmds]
    assert names == ["set", "get_x", "get_z", "if", "llength", "puts", "c", "e", "proc", "return", "q", "foo"]
    assert cmds[-1] == ("foo", ["a", "-bar", "b"])


# ------------------------------------------------------------------ the check
def _options(words):
    return [w for w in words if re.fullmatch(r"-[A-Za-z_][A-Za-z0-9_]*", w)]


def _list_items(word):
    """The items of a ``[list ...]`` or a braced list."""
    if word.startswith("[list ") and word.endswith("]"):
        return [w for w in _split(word[6:-1].strip(), " \t\n") if w]
    if word.startswith("{"):
        return [x for kv in tcl_dict(word[1:-1]).items() for x in kv]
    raise AssertionError(f"not a literal list: {word}")


def violations(text, tool):
    """What ``text`` (a rendered Tcl script) uses that the vocabulary of ``tool`` lacks."""
    vocab, core = VOCAB[tool], set(VOCAB["tcl_core"]["commands"])
    cmds = commands(text)
    procs = {w[0] for c, w in cmds if c == "proc"}
    bad = []
    cells = {}          # bd cell name -> IP name
    for name, words in cmds:
        if name in core or name in procs:
            continue
        if name not in vocab:
            bad.append(f"command {name}")
            continue
        entry = vocab[name]
        for opt in _options(words):
            if opt not in entry["options"]:
                bad.append(f"option {name} {opt}")
        if name in ("set_property", "get_property"):
            prop = next((w for w in words if not w.startswith("-")), None)
            if prop and not prop.startswith("[") and prop not in entry.get("properties", []):
                bad.append(f"property {name} {prop}")
        if name == "create_bd_cell":
            m = re.search(r"xilinx\.com:ip:(\w+)", words[words.index("-vlnv") + 1])
            if m:
                cells[words[-1]] = m.group(1)
        if name == "apply_bd_automation":
            rule = words[words.index("-rule") + 1]
            if rule not in VOCAB["automation"]:
                bad.append(f"automation rule {rule}")
            else:
                items = _list_items(words[words.index("-config") + 1])
                for key in items[::2]:
                    if key not in VOCAB["automation"][rule]["keys"]:
                        bad.append(f"automation key {rule} {key}")
    # CONFIG.* keys: each set_property -dict on a cell, checked against that cell's IP
    seen = 0
    for name, words in cmds:
        if name == "set_property" and words and words[0] == "-dict":
            m = re.fullmatch(r"\[get_bd_cells (\S+)\]", words[-1])
            ip = cells.get(m.group(1)) if m else None
            for key in re.findall(r"CONFIG\.[A-Za-z0-9_.]+", words[1]):
                seen += 1
                if ip is None or key not in VOCAB["ip_config"].get(ip, {}):
                    bad.append(f"{ip} {key}")
    assert seen == len(re.findall(r"CONFIG\.[A-Za-z0-9_.]+", "\n".join(
        x for x in text.splitlines() if not x.lstrip().startswith("#")))), "a CONFIG key outside set_property -dict"
    return bad


def render_bd(cfg, tmp):
    return codegen.render_extra(cfg, "bd.tcl.j2", tmp / "bd.tcl", hlsnn.build.bd_context(cfg)).read_text()


def render_run_hls(cfg, tmp):
    eng = ENGINES[cfg.engine]
    ctx = {**eng.template_context(cfg), "project": f"{cfg.name}_prj", "kernel_cpp": "k.cpp", "tb_cpp": "tb.cpp",
           "clock_period_ns": round(1000.0 / cfg.clock_mhz, 3)}
    return codegen.render_extra(cfg, "run_hls.tcl.j2", tmp / "run_hls.tcl", ctx).read_text()


@pytest.mark.parametrize("path,board,cfg", ALL, ids=[f"{p.stem}@{b}" for p, b, _ in ALL])
def test_bd_tcl_uses_only_the_vocabulary(path, board, cfg, tmp_path):
    text = render_bd(cfg, tmp_path)
    assert violations(text, "vivado") == []
    assert len(commands(text)) > 40


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_run_hls_tcl_uses_only_the_vocabulary(engine, tmp_path):
    cfgs = [cfg for _, _, cfg in ALL if cfg.engine == engine]
    text = render_run_hls(cfgs[0], tmp_path)
    assert violations(text, "vitis_hls") == []
    assert {"open_project", "csim_design", "csynth_design", "export_design"} <= {c for c, _ in commands(text)}


# ------------------------------------------------------------------ planted inventions fail
_ZYNQ7 = next(cfg for _, _, cfg in ALL if cfg.board.ps == "zynq7")
_ZYNQMP = next(cfg for _, _, cfg in ALL if cfg.board.ps == "zynqmp")


@pytest.mark.parametrize("cfg, old, new, expected", [
    (_ZYNQ7, "validate_bd_design\n", "connect_bd_intf_nets_auto dma/x\nvalidate_bd_design\n",
     "command connect_bd_intf_nets_auto"),
    (_ZYNQ7, "-range 64K", "-range 64K -lock", "option assign_bd_address -lock"),
    (_ZYNQ7, "CONFIG.PCW_USE_M_AXI_GP0 {1}", "CONFIG.PCW_USE_M_AXI_GP0 {1} CONFIG.PCW_USE_HP_TURBO {1}",
     "processing_system7 CONFIG.PCW_USE_HP_TURBO"),
    (_ZYNQMP, "CONFIG.c_include_sg {0}", "CONFIG.c_include_sg {0} CONFIG.c_dma_turbo {1}",
     "axi_dma CONFIG.c_dma_turbo"),
    (_ZYNQMP, "master_apm {0}", "master_apm {0} Clk_rst {Auto}", "automation key xilinx.com:bd_rule:axi4 Clk_rst"),
    (_ZYNQMP, "set_property board_part", "set_property board_preset", "property set_property board_preset"),
])
def test_planted_inventions_fail(tmp_path, cfg, old, new, expected):
    text = render_bd(cfg, tmp_path)
    assert old in text
    assert expected in violations(text.replace(old, new, 1), "vivado")


def test_planted_vitis_invention_fails(tmp_path):
    text = render_run_hls(_ZYNQ7, tmp_path)
    assert "csynth_design" in text
    assert "command csynth_design_fast" in violations(text.replace("csynth_design", "csynth_design_fast"), "vitis_hls")
    assert "option csim_design -quick" in violations(text.replace("csim_design -argv", "csim_design -quick -argv"),
                                                     "vitis_hls")


def test_every_entry_has_known_sources():
    sources = VOCAB["sources"]
    for tool in ("vivado", "vitis_hls"):
        for cmd, entry in VOCAB[tool].items():
            assert entry["sources"] and set(entry["sources"]) <= set(sources), cmd
    for ip, keys in VOCAB["ip_config"].items():
        for key, srcs in keys.items():
            assert srcs and set(srcs) <= set(sources), key
    for s in sources.values():
        assert ("repo" in s and "path" in s and re.fullmatch(r"[0-9a-f]{40}", s["commit"])) or "doc" in s or "index" in s


def test_check_tcl_uses_only_the_vocabulary():
    from hlsnn.build.flow import Build
    text = Build.CHECK_TCL
    assert violations(text, "vitis_hls") == []
    assert [c for c, _ in commands(text)] == ["set", "source"]
