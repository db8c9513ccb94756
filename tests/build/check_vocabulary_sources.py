#!/usr/bin/env python3
"""Check tcl_vocabulary.yaml against the public files it cites (a maintenance tool, not a test:
it needs local clones). For every `repo` source, each command listed with that source must occur
in the file at the cited commit, each with every option it lists (somewhere in the file), and each
CONFIG.* key / automation key listed with that source must occur too.

    python tests/build/check_vocabulary_sources.py <folder of clones named owner+repo/repo>
"""
import re
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def text_of(clones, src):
    repo = Path(clones) / src["repo"].replace("/", "+") / "repo"
    return subprocess.run(["git", "-C", str(repo), "show", f"{src['commit']}:{src['path']}"],
                          capture_output=True, text=True, check=True).stdout


def main(clones):
    voc = yaml.safe_load((HERE / "tcl_vocabulary.yaml").read_text())
    texts = {k: text_of(clones, s) for k, s in voc["sources"].items() if "repo" in s}
    bad = []
    for tool in ("vivado", "vitis_hls"):
        for cmd, entry in voc[tool].items():
            for s in entry["sources"]:
                if s not in texts:
                    continue
                t = texts[s]
                if not re.search(rf"(^|[\s\[;]){re.escape(cmd)}\b", t, re.M):
                    bad.append(f"{cmd}: not in {s}")
    for ip, keys in voc["ip_config"].items():
        for key, srcs in keys.items():
            for s in srcs:
                if s in texts and key not in texts[s]:
                    bad.append(f"{ip} {key}: not in {s}")
    for rule, e in voc["automation"].items():
        for s in e["sources"]:
            if s in texts:
                if rule not in texts[s]:
                    bad.append(f"{rule}: not in {s}")
                for k in e["keys"]:
                    if not re.search(rf"\b{re.escape(k)}\b", texts[s]):
                        bad.append(f"{rule} {k}: not in {s}")
    # options: each listed option must occur with its command in at least one repo source (or the
    # entry has a non-repo source that documents it)
    for tool in ("vivado", "vitis_hls"):
        for cmd, entry in voc[tool].items():
            repo_srcs = [s for s in entry["sources"] if s in texts]
            if len(repo_srcs) < len(entry["sources"]):
                continue
            for opt in entry["options"]:
                if not any(re.search(rf"{re.escape(cmd)}\b[^\n]*\s{re.escape(opt)}\b", texts[s]) for s in repo_srcs):
                    bad.append(f"{cmd} {opt}: no cited file uses it")
    print("\n".join(bad) or f"ok: {len(texts)} files checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
