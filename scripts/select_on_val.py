"""Best of k seeds on the validation images (hlsnn.train.select): the runs of
benchmarks/train_qat_runs.jsonl named by their tags, the one of highest validation deployed
accuracy chosen, its test accuracy reported (model selection; the test figures play no part in
the choice). Prints one JSON line.

    python scripts/select_on_val.py rec_mb90_s0 rec_mb90_s1 rec_mb90_s2
    python scripts/select_on_val.py --tie pruned_float_loss rv_mb90_s40_p40 rv_mb90_s40_p140 rv_mb90_s40_p240
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "host"))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("tags", nargs="+", help="the runs' tags, the candidates of one recipe (e.g. its seeds)")
    ap.add_argument("--runs", default=str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
                                          / "train_qat_runs.jsonl"))
    ap.add_argument("--tie", metavar="FIGURE", default=None,
                    help="a tie on validation goes to the run with the lower training-image FIGURE "
                         "(e.g. pruned_float_loss: restarts of one float model, --prune-seed); "
                         "without it, to the earlier tag")
    a = ap.parse_args(argv)
    from hlsnn.train.select import selection_report
    rows = {}
    for line in pathlib.Path(a.runs).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows[r.get("tag")] = r
    missing = [t for t in a.tags if t not in rows]
    if missing:
        ap.error(f"no run tagged {missing} in {a.runs}")
    try:
        print(json.dumps(selection_report([rows[t] for t in a.tags], tie=a.tie)))
    except ValueError as exc:
        ap.error(str(exc))


if __name__ == "__main__":
    main()
