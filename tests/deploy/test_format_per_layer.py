"""`hlsnn deploy --per-layer` prints each layer's figures in its table, not only in --json
(docs/tutorials/deploy-pytorch.md: "Add `--per-layer` for each layer's error against the float
network"; the text output had dropped them)."""
from hlsnn.deploy.reports.evaluate import format_result


def _result(per_layer):
    e = {"layers": {"c1": "fixed8", "fc": "fixed8"}, "accuracy": 0.5, "images_per_s": 10.0}
    if per_layer is not None:
        e["per_layer"] = per_layer
    return {"model": "m", "target": "emu", "test_images": 2, "calibration_images": 2, "calibration_mode": "static",
            "float_accuracy": 0.5, "assignments": {"fixed8": e}}


def test_per_layer_figures_are_printed():
    per = {"c1": {"format": "fixed8", "kind": "conv 1->8 3x3", "relative_rms_error": 0.0123, "f_in": 6, "f_w": 7,
                  "f_out": 4, "weight_sparsity": 0.25, "input_density": 0.5, "saturated_outputs": 3},
           "fc": {"format": "fixed8", "kind": "dense 8->2", "relative_rms_error": 0.5, "f_in": None, "f_w": [3, 4],
                  "f_out": 2, "weight_sparsity": 0.0, "input_density": 1.0, "saturated_outputs": 0}}
    text = format_result(_result(per))
    c1 = [ln for ln in text.splitlines() if "c1 (fixed8, conv 1->8 3x3)" in ln]
    assert len(c1) == 1, text
    for part in ("error 0.0123", "radix 6/7/4", "sparsity 25.0%", "density 50.0%", "saturated 3"):
        assert part in c1[0], (part, c1[0])
    fc = [ln for ln in text.splitlines() if "fc (fixed8, dense 8->2)" in ln]
    assert len(fc) == 1 and "radix -/3..4/2" in fc[0] and "error 0.5," in fc[0], text


def test_without_per_layer_no_layer_lines():
    assert "per layer: relative RMS error" not in format_result(_result(None))
