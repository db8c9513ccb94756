"""The reader of a Concat of the graph input takes the first layer's input radix under
``radix: lse`` when that radix is in its window (:mod:`hlsnn.deploy.quantize.catradix`), worked examples
on a three-layer graph: conv a reads x; Concat([a, x]) viewed by an Unsqueeze; conv b reads it."""
from types import SimpleNamespace

from hlsnn.deploy.quantize import catradix
from hlsnn.deploy.importer.graph import Layer, Network


def _dep(radix="lse", cat_inputs=("a", "x")):
    layers = [Layer("A", "conv", ["x"], "a"), Layer("cat", "host", list(cat_inputs), "c", op="Concat"),
              Layer("u", "host", ["c"], "cu", op="Unsqueeze"), Layer("B", "conv", ["cu"], "b")]
    net = Network("n", "", "x", (None, 8, 8), "b", layers)
    dep = SimpleNamespace(net=net, execs={})
    for la in (layers[0], layers[3]):
        dep.execs[la.name] = SimpleNamespace(layer=la, deploy=dep, fmt=SimpleNamespace(radix=radix), f_x=None)
    dep.execs["A"].f_x = 6
    return dep


def test_the_reader_takes_the_input_radix_inside_its_window_only():
    b = _dep().execs["B"]
    assert catradix.tied(b, 7, 4) == 6          # window [4, 7] holds 6: one radix for x
    assert catradix.tied(b, 7, 6) == 6          # its lower end
    assert catradix.tied(b, 5, 3) == 6          # its upper end (DEPTH 3)
    assert catradix.tied(b, 2, 2) == 2          # 6 beyond [2, 5]: the concat's other part is wide
    assert catradix.tied(b, 7, 7) == 7          # 6 would saturate more than DETERMINE allows


def test_no_tie_without_lse_or_without_the_graph_input_in_the_concat():
    assert catradix.tied(_dep(radix="msb").execs["B"], 5, 4) == 5
    assert catradix.tied(_dep(cat_inputs=("a", "a")).execs["B"], 5, 4) == 5
    assert catradix.tied(_dep().execs["A"], 5, 4) == 5          # the first layer itself
