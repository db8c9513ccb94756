"""Reading what the tools wrote: the Vitis HLS synthesis report (csynth.xml), the register
map of the exported IP (its generated ``x<top>_hw.h``), and Vivado's timing summary."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path


def _num(text):
    if text is None:
        return None
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        try:
            return float(t)
        except ValueError:
            return t


def parse_csynth(path) -> dict:
    """Latency, interval (II), estimated clock and resources from a Vitis HLS ``csynth.xml``.

    Missing fields are None; resources include DSP (``DSP`` or ``DSP48E``), BRAM_18K, URAM,
    LUT and FF, with the available counts of the part."""
    root = ET.parse(path).getroot()

    def find(*names):
        for n in names:
            el = root.find(f".//{n}")
            if el is not None and el.text is not None:
                return _num(el.text)
        return None

    res, avail = {}, {}
    for key, names in {"dsp": ("DSP", "DSP48E"), "bram_18k": ("BRAM_18K",), "uram": ("URAM",),
                       "lut": ("LUT",), "ff": ("FF",)}.items():
        for tag, out in (("Resources", res), ("AvailableResources", avail)):
            el = next((e for e in (root.find(f".//AreaEstimates/{tag}/{n}") for n in names) if e is not None), None)
            if el is not None:
                out[key] = _num(el.text)
    return {
        "top": find("TopModelName"),
        "target_clock_ns": find("TargetClockPeriod"),
        "estimated_clock_ns": find("EstimatedClockPeriod"),
        "latency_cycles": {"best": find("Best-caseLatency"), "worst": find("Worst-caseLatency")},
        "interval": {"min": find("Interval-min"), "max": find("Interval-max")},
        "resources": res,
        "available": avail,
    }


_REG = re.compile(r"#define\s+X\w+_CONTROL_ADDR_(\w+?)_(DATA|CTRL)\s+0x([0-9a-fA-F]+)")


def parse_register_header(path) -> dict:
    """Register offsets from the IP's generated ``x<top>_hw.h``: ``{name: offset}`` of each
    argument's data register (lower-case names), plus ``ap_ctrl`` at 0x00."""
    regs = {"ap_ctrl": 0x00}
    for name, kind, off in _REG.findall(Path(path).read_text(errors="replace")):
        if kind == "DATA":
            regs[name.lower()] = int(off, 16)
    return regs


def parse_timing(path) -> dict:
    """``<out_dir>/timing.txt`` written by bd.tcl: progress, status, WNS and WHS."""
    out = {}
    for line in Path(path).read_text().splitlines():
        key, _, value = line.partition(" ")
        out[key] = _num(value) if key in ("wns", "whs") else value.strip()
    return out


# ---------------------------------------------------------------- per-loop synthesis results
def _count(el):
    """A cycle count or trip count of a csynth.xml loop field: an int, ``{"min", "max"}`` (the
    ``<range><min/><max/></range>`` form), or None (``undef``, absent)."""
    if el is None:
        return None
    rng = el.find("range")
    if rng is not None:
        lo, hi = _num(rng.findtext("min")), _num(rng.findtext("max"))
        lo = lo if isinstance(lo, int) else None
        hi = hi if isinstance(hi, int) else None
        return lo if lo == hi else {"min": lo, "max": hi}
    v = _num(el.text)
    return v if isinstance(v, int) else None


_LOOP_FIELDS = ("TripCount", "Latency", "IterationLatency", "PipelineII", "PipelineDepth")


def _xml_loops(summary, depth=0):
    out = []
    for el in list(summary):
        if not any(el.find(f) is not None for f in _LOOP_FIELDS):
            continue
        out.append({"name": el.findtext("Name") or el.tag, "depth": depth,
                    "trip_count": _count(el.find("TripCount")), "latency": _count(el.find("Latency")),
                    "iteration_latency": _count(el.find("IterationLatency")),
                    "achieved_ii": _count(el.find("PipelineII")), "pipeline_depth": _count(el.find("PipelineDepth")),
                    "target_ii": None, "pipelined": el.find("PipelineII") is not None, "issue": None})
        out += _xml_loops(el, depth + 1)
    return out




def _rpt_loops(text):
    """Rows of the ``* Loop:`` table of a Vitis HLS ``<module>_csynth.rpt``: name, nesting
    depth (``|- a``, ``| + b``, ``|  ++ c``), achieved and target II, pipelined."""
    rows, in_table = [], False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("* Loop:"):
            in_table = True
            continue
        if not in_table:
            continue
        if s.startswith("=") or (s and not s.startswith(("|", "+"))):
            in_table = False
            continue
        m = re.match(r"^\|\s?(-|\s*\++)\s+(\S+)\s*\|(.*)\|\s*$", s)
        if not m:
            continue
        cells = [c.strip() for c in m.group(3).split("|")]
        if len(cells) < 7:
            continue
        marker = m.group(1).strip()
        rows.append({"name": m.group(2), "depth": 0 if marker == "-" else len(marker),
                     "achieved_ii": _num(cells[3]) if cells[3] not in ("-", "?") else None,
                     "target_ii": _num(cells[4]) if cells[4] not in ("-", "?") else None,
                     "pipelined": cells[6] == "yes"})
    return rows


def _violations(root):
    out = {}
    for el in root.iter("SummaryOfLoopViolations"):
        for v in el.iter():
            name, issue = v.findtext("Name"), v.findtext("IssueType")
            if name and issue and issue.strip() not in ("-", ""):
                out.setdefault(name, issue.strip())
    return out


def parse_loops(report_dir, top=None) -> list:
    """Every loop Vitis HLS reports under ``<solution>/syn/report``, one dict per loop:
    ``module``, ``name``, ``depth`` (nesting), ``trip_count``, ``latency`` (cycles; an int,
    ``{"min", "max"}`` or None when the tool says ``undef``), ``iteration_latency``,
    ``achieved_ii`` (``<PipelineII>``), ``target_ii`` (the ``.rpt`` loop table's "Initiation
    Interval / target" column, when the report has one), ``pipelined``, ``pipeline_depth`` and
    ``issue`` (e.g. ``II Violation``, from ``<SummaryOfLoopViolations>``).

    Reads each module's ``<module>_csynth.xml`` (``csynth.xml`` only when the top has no own
    file: it repeats the top's) and its ``.rpt`` beside it."""
    report_dir = Path(report_dir)
    xmls = sorted(p for p in report_dir.glob("*_csynth.xml"))
    if not xmls and (report_dir / "csynth.xml").is_file():
        xmls = [report_dir / "csynth.xml"]
    loops = []
    for xml in xmls:
        root = ET.parse(xml).getroot()
        module = root.findtext("UserAssignments/TopModelName") or xml.name[:-len("_csynth.xml")]
        summary = root.find("PerformanceEstimates/SummaryOfLoopLatency")
        mod_loops = _xml_loops(summary) if summary is not None else []
        issues = _violations(root)
        rpt = xml.with_suffix(".rpt")
        rows = _rpt_loops(rpt.read_text(errors="replace")) if rpt.is_file() else []
        # pair rows with loops in order, by name and nesting
        j = 0
        for lp in mod_loops:
            lp["module"] = module
            lp["issue"] = issues.get(lp["name"])
            for k in range(j, len(rows)):
                if rows[k]["name"] == lp["name"] and rows[k]["depth"] == lp["depth"]:
                    lp["target_ii"] = rows[k]["target_ii"]
                    if lp["achieved_ii"] is None:
                        lp["achieved_ii"] = rows[k]["achieved_ii"]
                    lp["pipelined"] = lp["pipelined"] or rows[k]["pipelined"]
                    j = k + 1
                    break
        if top is not None and module == top:
            loops = mod_loops + loops
        else:
            loops += mod_loops
    return loops


def _cycles(v):
    if v is None:
        return "?"
    if isinstance(v, dict):
        return f"{'?' if v['min'] is None else v['min']}..{'?' if v['max'] is None else v['max']}"
    return str(v)


def format_loops(loops) -> str:
    """A table of :func:`parse_loops` rows: module, loop (indented by nesting), trip count,
    latency, achieved II / target II, pipelined, issue."""
    head = ("module", "loop", "trips", "latency", "II", "target II", "pipelined", "issue")
    rows = [head]
    for lp in loops:
        rows.append((lp["module"], "  " * lp["depth"] + lp["name"], _cycles(lp["trip_count"]), _cycles(lp["latency"]),
                     _cycles(lp["achieved_ii"]) if lp["achieved_ii"] is not None else "-",
                     str(lp["target_ii"]) if lp["target_ii"] is not None else "-",
                     "yes" if lp["pipelined"] else "no", lp["issue"] or ""))
    if len(rows) == 1:
        return "  (the report lists no loops)"
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  " + "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows)


# report key -> (label, estimate key, factor from the estimate's unit to the report's)
_RES = (("dsp", "DSP", "dsp", 1), ("bram_18k", "BRAM_18K", "bram36", 2), ("uram", "URAM", "uram", 1),
        ("lut", "LUT", "lut", 1), ("ff", "FF", "ff", 1))


def compare_resources(reported, estimate, available=None) -> list:
    """Rows ``(label, synthesized, estimated, available)`` for DSP, BRAM_18K (the estimate's
    BRAM36 x 2), URAM, LUT and FF; a value the source lacks is None."""
    available = available or {}
    out = []
    for key, label, est_key, factor in _RES:
        est = estimate.get(est_key)
        out.append((label, reported.get(key), None if est is None else est * factor, available.get(key)))
    return out


def format_resources(rows) -> str:
    def s(v):
        return "-" if v is None else str(v)
    lines = [("resource", "synthesized", "estimated", "available", "synth/est")]
    for label, rep, est, av in rows:
        ratio = f"{rep / est:.2f}" if isinstance(rep, (int, float)) and est else "-"
        lines.append((label, s(rep), s(est), s(av), ratio))
    w = [max(len(r[i]) for r in lines) for i in range(5)]
    return "\n".join("  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)) for r in lines)
