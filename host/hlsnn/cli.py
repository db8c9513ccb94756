"""``hlsnn`` command line: accelerator kernels, bitstreams and whole networks.

Commands: configs to kernels (render, csim, compare, info, sweep, build), whole networks
(deploy, autotune, compile, run, perf, report, calibrate) and weight plots (plot-quant).

User mistakes (bad config, missing tool) end with one line ``hlsnn: error: …`` and exit
status 2; a mismatch between a target and the emulator ends with exit status 1.
"""
from __future__ import annotations

import argparse
import sys

from .version import __version__
from .errors import HlsnnError, filesystem_message  # noqa: F401 (filesystem_message: re-exported)
from .commands.builds import cmd_build, cmd_sweep
from .commands.kernels import cmd_compare, cmd_csim, cmd_info, cmd_perf, cmd_plot_quant, cmd_render, cmd_run
from .commands.models import cmd_autotune, cmd_deploy, cmd_report
from .commands.network import cmd_compile
from .commands.seed002 import cmd_calibrate


def _int_at_least(lo):
    """An argparse type: an integer >= ``lo`` (argparse turns the ValueError into exit 2)."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{v} must be an integer >= {lo}")
        return v
    parse.__name__ = f"integer >= {lo}"
    return parse


NONNEG, POSITIVE = _int_at_least(0), _int_at_least(1)


class _Parser(argparse.ArgumentParser):
    """argparse with hlsnn's one error line: ``hlsnn: error: <command>: <what>`` and exit 2, and
    no abbreviated options."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        command = self.prog[len("hlsnn"):].strip()
        self.exit(2, f"hlsnn: error: {command + ': ' if command else ''}{message} (see {self.prog} --help)\n")


def _allow_overfit(p, kernel="a kernel", tail="which is refused otherwise"):
    p.add_argument("--allow-overfit", action="store_true",
                   help=f"go on with {kernel} above 90%% of a board resource (LUT, FF, DSP, BRAM, URAM; "
                        f"hlsnn.resources.FIT_SHARE), {tail}")


def build_parser():
    ap = _Parser(prog="hlsnn", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"hlsnn {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("render", help="render a config into a Vitis HLS project (build/<config>/hls/)")
    p.add_argument("config")
    p.add_argument("--out", help="output folder (default build/<config name>/hls)")
    _allow_overfit(p)
    p.set_defaults(func=cmd_render)

    def compare_opts(p):
        p.add_argument("--seed", type=NONNEG, default=0, help="seed of the random cases (default 0)")
        p.add_argument("--cases", type=NONNEG, default=8, help="number of random cases besides the edge cases")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
        p.add_argument("--fast", action="store_true",
                       help="csim/sim: the plain sequential C-simulation, without the strict checks (bounded "
                            "FIFOs, threads, dependence distances, bank ports; docs/strict-csim.md)")

    p = sub.add_parser("csim", help="compile the rendered C++ and compare it with the emulator")
    p.add_argument("config")
    p.add_argument("--out", help="HLS project folder (default build/<config name>/hls)")
    compare_opts(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_csim)

    p = sub.add_parser("compare", help="compare a target with the emulator, bit for bit (exit 1 on mismatch)")
    p.add_argument("config", help="a config, or an overlay folder (for --target pynq or sim)")
    p.add_argument("--target", default="csim", help="csim, sim, emu, or pynq (with an overlay folder)")
    compare_opts(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("build", help="build an overlay: render, csim, Vitis HLS, Vivado -> overlays/<name>/ "
                                     "(exit 3 when the Xilinx tools are missing); given a compiled model "
                                     "(NAME.hlsnn), its network kernel's overlay -> overlays/<config>_net/")
    p.add_argument("config", nargs="+", help="a config (name or YAML), or a compiled model (hlsnn compile) for its "
                                             "network overlay; several configs: one build each (a batch)")
    p.add_argument("--board", help="build for another board: a name of configs/boards or a board file's path "
                        "(default: the config's)")
    p.add_argument("--jobs", type=POSITIVE, default=None, help="parallel Vivado jobs (default: CPU count)")
    p.add_argument("--out", default="overlays", help="overlay folder (default overlays/)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="build each config as a task on the Dask scheduler at ADDRESS (SCHEME://HOST:PORT, "
                        "SCHEME tcp, tls, ws or wss: tcp://host:8786); the overlays come back here; needs "
                        "hlsnn[cluster] (docs/tutorials/cluster.md)")
    p.add_argument("--instances", type=POSITIVE, default=1,
                   help="kernel instances in the overlay, each with its own AXI DMA (default 1): overlays/<name>_x<N>/, "
                        "driven as hlsnn.Accelerator(path, 'pynq', instance=i) (docs/radix-update-methods.md); the "
                        "resources are N times the kernel's")
    p.add_argument("--dry-run", action="store_true", help="render, then print every command without running it")
    p.add_argument("--check", action="store_true",
                   help="only Vitis HLS csim_design + csynth_design (no export, no Vivado); print each loop's II and "
                        "latency and the resources against the estimate (exit 3 without Vitis HLS)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    _allow_overfit(p, "a kernel (a config's, or a compiled model's network kernel)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("compile", help="calibrate one assignment of a deployment config and write everything an "
                                       "inference needs into one NAME.hlsnn file (docs/compiled-models.md)")
    p.add_argument("config", help="a deployment config (configs/models/*.yaml)")
    p.add_argument("--assignment", help="the layer-format assignment to compile (may be left out when the "
                                         "config has only one)")
    p.add_argument("-o", "--output", help="NAME.hlsnn (default: <config>_<assignment>.hlsnn)")
    p.add_argument("--check-samples", type=NONNEG, default=4, help="self-check input/output pairs (default 4)")
    p.add_argument("--host-fallback", action="store_true",
                   help="run the nodes no rule covers on the host with onnx's reference implementation, as "
                        "`hlsnn deploy --host-fallback` does (the compiled model then needs onnx where it runs)")
    p.add_argument("--recalibrate", action="store_true",
                   help="a model quantized elsewhere (QDQ, QONNX): calibrate every radix point instead of keeping "
                        "the file's, as `hlsnn deploy --recalibrate` does")
    p.add_argument("--json", action="store_true")
    _allow_overfit(p, "a network kernel")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run one layer (or a compiled NAME.hlsnn network) on a target and check it bit "
                                   "for bit against the emulator")
    p.add_argument("target_path", metavar="OVERLAY_OR_CONFIG", help="an overlay folder (pynq, sim), a config, or a "
                                                                    "compiled model NAME.hlsnn")
    p.add_argument("--input", required=True, help="x.npy: (batch, K) for a GEMM, (C, H, W) for a convolution, a "
                                                  "batch in the model's layout for NAME.hlsnn")
    p.add_argument("--no-self-check", action="store_true", help="NAME.hlsnn: skip the self-check on load")
    p.add_argument("--layer-by-layer", action="store_true", help="NAME.hlsnn: one kernel call per layer chunk, "
                                                                   "not the network kernel (one start per batch)")
    p.add_argument("--overlay", action="append", metavar="ACCEL=FOLDER",
                   help="NAME.hlsnn on pynq (or sim): the overlay folder of an accelerator of the model (its network "
                        "overlay, overlays/<config>_net, for the one-start path); repeat for each accelerator")
    p.add_argument("--weights", help="w.npy: (N, K) or (Z, C, k, k); default: seeded random weights")
    p.add_argument("--n", type=POSITIVE, default=64, help="outputs (N or Z) of the random weights (default 64)")
    p.add_argument("--target", default="sim", help="pynq, sim, csim or emu (default sim)")
    p.add_argument("--output", help="save the result to this .npy")
    p.add_argument("--repeat", type=POSITIVE, default=3, help="calls to time (default 3)")
    p.add_argument("--seed", type=NONNEG, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("perf", help="modelled cycles, MAC/cycle, utilization and bound of one operation, from "
                                    "the C-simulation's loop counters (hlsnn.perf)")
    p.add_argument("config", help="an accel config, or a compiled model NAME.hlsnn (end-to-end latency)")
    p.add_argument("--board", help="NAME.hlsnn: the board whose CPU and HP port are modelled (default: the "
                                   "accelerators' board)")
    p.add_argument("--batch", type=POSITIVE, default=1, help="NAME.hlsnn: images per call (default 1)")
    p.add_argument("--layer-by-layer", action="store_true", help="NAME.hlsnn: model today's per-layer kernel calls, "
                                                                   "not the network kernel (one start per batch)")
    p.add_argument("--host", choices=["c", "python"], help="NAME.hlsnn, network path: the host's driver, the C host "
                                                          "path (default) or the numpy driver")
    p.add_argument("--input-dtype", choices=["float32", "float64", "uint8"],
                   help="NAME.hlsnn, C host path: the images as the data set stores them (default float32)")
    p.add_argument("--sources", action="store_true", help="NAME.hlsnn: every host and CPU constant's source in "
                                                            "full (the text gives them in brief; --json has them too)")
    p.add_argument("--gemm", metavar="B,K,N", help="a GEMM of batch B, K inputs, N outputs (bfp_systolic, shift_mac)")
    p.add_argument("--conv", metavar="C,H,W,Z,k", help="a stride-1 convolution of C channels of HxW to Z channels, "
                                                     "k x k kernel (shift_mac, sparse_cluster)")
    p.add_argument("--mode", choices=["twohot", "pot", "pot_sum"], help="shift_mac weight mode (default: the config's)")
    p.add_argument("--resident", action="store_true",
                   help="weights stay on chip: a first call loads them, the second is reported (shift_mac)")
    p.add_argument("--density", type=float, default=1.0, help="sparse_cluster: share of non-zero inputs and weights")
    p.add_argument("--padding", default="same", choices=["same", "valid"], help="convolution padding (default same)")
    p.add_argument("--target", default="csim", choices=["csim", "sim"], help="default csim")
    p.add_argument("--loops", action="store_true", help="also print the engine's loop table (II, accesses, depth)")
    p.add_argument("--schedule-all", action="store_true", help="the schedule table lists every pipelined loop, not only "
                                                               "those above II 1 (hlsnn.perf.schedule)")
    p.add_argument("--seed", type=NONNEG, default=0, help="seed of the data (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_perf)

    p = sub.add_parser("deploy", help="run a whole ONNX model layer by layer in each format of a deployment "
                                      "config (configs/models/*.yaml) and report accuracy (or, task: regression, "
                                      "MSE) against float and the modelled latency; exit status 1 when an "
                                      "assignment failed (its row says why)")
    p.add_argument("config", help="a deployment config")
    p.add_argument("--target", default="emu", choices=["emu", "csim", "sim", "pynq"], help="default emu")
    p.add_argument("--assignment", action="append", help="evaluate only this layer-format assignment (repeatable)")
    p.add_argument("--host-fallback", action="store_true",
                   help="run ONNX ops hlsnn has no engine for on the host (onnx's reference implementation)")
    p.add_argument("--host-precision", choices=["float", "quantized"], default="float",
                   help="host layers that compute (fallback nodes, Add, pools that average, BN, Softmax): in float "
                        "(default), or between fixed-point inputs and outputs of --host-bits bits, as a board "
                        "would compute them")
    p.add_argument("--host-bits", type=int, help="width of --host-precision quantized (default 8; only with it)")
    p.add_argument("--radix-update", choices=["e1", "e5"],
                   help="how fixed-point layers update their radix points (default: the config's calibration.update, "
                        "else e1): e1, a preceding operation on every image; e5, per layer the faster of E2 (two "
                        "operations on a sample) and E4 (the sample's wide results saved) by the cycle model, shown "
                        "in the output")
    p.add_argument("--radix-update-by", choices=["layer", "op_type"],
                   help="--radix-update e5: choose per layer or per operation type (default: the config's "
                        "calibration.update_by, else layer)")
    p.add_argument("--recalibrate", action="store_true",
                   help="a model quantized elsewhere (ONNX QDQ): calibrate every radix point instead of keeping the "
                        "file's power-of-two scales")
    p.add_argument("--per-layer", action="store_true", help="radix points, sparsity and error of every layer")
    p.add_argument("--test-samples", type=POSITIVE, help="evaluate only the first N test images")
    p.add_argument("--layer-by-layer", action="store_true",
                   help="csim/sim: run the test images one kernel call per layer chunk, not through the "
                        "assignment's network kernel (one kernel start), which is the default where it exists")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("calibrate", help="calibrate one batch by source 002's methods e1-e4, e6-e9 on several "
                                         "circuits and boards: radix points, outputs and timelines "
                                         "(docs/seed002-methods.md)")
    p.add_argument("config", help="a deployment config (fixed-point formats of one accel config)")
    p.add_argument("--method", required=True, help="one or more of e1,e2,e3,e4,e6,e7,e8,e9 (comma-separated)")
    p.add_argument("--percent", type=float, default=25.0, help="N: the sampled share of the images (default 25)")
    p.add_argument("--assignment", help="the assignment (default the config's first in fixed point)")
    p.add_argument("--target", default="emu", choices=["emu", "csim", "sim"], help="default emu")
    p.add_argument("--images", type=POSITIVE, help="calibration images (default the config's calibration.samples)")
    p.add_argument("--circuits", type=POSITIVE, default=4, help="e6, e8: circuits of the accelerator (default 4)")
    p.add_argument("--low", type=float, default=0.25, help="e7, e9: the low-capability accelerator's share (0.25)")
    p.add_argument("--cluster", metavar="ADDRESS", help="e7, e9: run each board in a worker of this Dask scheduler")
    p.add_argument("--plot", metavar="PNG", help="draw the timelines into this png")
    p.add_argument("--timeline", action="store_true", help="print the timelines")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("info", help="validate a config and print it with resource estimates")
    p.add_argument("config")
    p.add_argument("--json", action="store_true")
    _allow_overfit(p, tail="refused otherwise; the estimate still says it is over")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("plot-quant",
                       help="plot weights against uniform, PoT and two-hot levels (needs hlsnn[plot])")
    p.add_argument("weights", help="a .npy file, or a .npz file with --key")
    p.add_argument("--key", help="the array of a .npz file (may be left out if it holds one)")
    p.add_argument("--bits", type=int, default=8, help="bit budget per weight, 4..16 (default 8)")
    p.add_argument("--delta", type=int, default=0, help="two-hot delta, 0..7 (default 0)")
    p.add_argument("--axis", choices=["none", "0"], default="none",
                   help="none: one scale for the whole tensor; 0: one scale per row (slice along axis 0)")
    p.add_argument("--out", help="image file (default <weights stem>_quant.png next to the weights)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plot_quant)

    p = sub.add_parser("report",
                       help="a deployment config: an HTML report (accuracy per format, per-layer error, weights "
                            "against quantization levels, sparsity, latency per board); a compiled model: an HTML "
                            "report of its modelled end-to-end latency per layer; a sparse_cluster config: "
                            "modelled per-unit work, imbalance and speedup over a density sweep "
                            "(plots need hlsnn[plot])")
    p.add_argument("config", help="a deployment config (configs/models/*.yaml), a compiled model NAME.hlsnn "
                                   "(its modelled end-to-end latency per layer) or a sparse_cluster config")
    p.add_argument("--target", default="emu", choices=["emu", "csim", "sim", "pynq"],
                   help="deployment report: where the layers run (default emu)")
    p.add_argument("--board", help="NAME.hlsnn: the board whose CPU and HP port are modelled (default: the "
                                   "accelerator config's board)")
    p.add_argument("--batch", type=POSITIVE, default=1, help="NAME.hlsnn: images per call (default 1)")
    p.add_argument("--host-fallback", action="store_true", help="deployment report: see `hlsnn deploy`")
    p.add_argument("--host-precision", choices=["float", "quantized"], default="float",
                   help="deployment report: see `hlsnn deploy`")
    p.add_argument("--host-bits", type=int, help="deployment report: see `hlsnn deploy`")
    p.add_argument("--radix-update", choices=["e1", "e5"], help="deployment report: see `hlsnn deploy`")
    p.add_argument("--radix-update-by", choices=["layer", "op_type"], help="deployment report: see `hlsnn deploy`")
    p.add_argument("--test-samples", type=POSITIVE, help="deployment report: only the first N test images")
    p.add_argument("--channels", type=int, default=64, help="input = output channels of the layer (default 64)")
    p.add_argument("--size", type=int, default=56, help="feature-map height = width (default 56)")
    p.add_argument("--ksize", type=int, default=3, help="odd kernel size, 'same' padding (default 3)")
    p.add_argument("--densities", default="1,0.5,0.2,0.1,0.05",
                   help="comma-separated fractions of non-zero inputs and weights (default 1,0.5,0.2,0.1,0.05)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--structured", action="store_true",
                      help="only inputs whose non-zeros cluster in blobs (default: random and structured rows)")
    kind.add_argument("--random", action="store_true", help="only uniformly random inputs")
    p.add_argument("--seed", type=NONNEG, default=0, help="seed of the synthetic layers (default 0)")
    p.add_argument("--out", help="output file (default build/<config stem>_report.png, or build/<config stem>_report.html for "
                                 "a deployment config or a NAME.hlsnn; build/ is $HLSNN_BUILD when set)")
    p.add_argument("--no-plot", action="store_true", help="print the table (or JSON) only")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("autotune", help="per-layer formats of a deployment config for the least modelled latency "
                                        "within an accuracy drop, in one network kernel start (docs/tutorials/autotune.md)")
    p.add_argument("config", help="deployment config (configs/models/*.yaml)")
    p.add_argument("--board", help="the board whose sized sparse_cluster kernel runs it (default: the config's only one)")
    p.add_argument("--max-drop", type=float, default=1.0, help="accuracy points below float allowed on the validation "
                                                               "split (default 1.0)")
    p.add_argument("--objective", default="latency", choices=("latency", "energy"),
                   help="modelled end to end (us) or energy per image (uJ, board power x time)")
    p.add_argument("--base", help="the fixed format on the sized kernel (default: the config's only one on the board)")
    p.add_argument("--levels", help="the kernel-shaped sparsities a layer may take (default 0.25,0.5,0.75,0.875)")
    p.add_argument("--val-images", type=NONNEG, default=0, help="validation images from the training split, at most "
                   "(of the config's validation: N held-out images, else of those beyond the calibration images; "
                   "default 0: all of them)")
    p.add_argument("--name", default="autotune", help="the assignment's name in the config (default autotune)")
    p.add_argument("--no-write", action="store_true", help="leave the config as it is")
    p.add_argument("--test", action="store_true", help="after the choice, the chosen assignment's and float's "
                                                       "accuracy on the test split (never used to choose)")
    p.add_argument("--train", nargs="?", type=NONNEG, const=4, default=0, metavar="EPOCHS",
                   help="fine-tune the chosen assignment with hlsnn.train (torch) for EPOCHS (default 4), write "
                        "<model>_<name>.onnx and <config>_<name>.yaml, and measure it again")
    p.add_argument("--plot", metavar="FILE.png", help="the Pareto front as an image (needs hlsnn[plot])")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_autotune)

    p = sub.add_parser("sweep",
                       help="vary config keys: validate, estimate resources, flag what does not fit, C-simulate "
                            "the rest in parallel (exit 1 on a mismatch; plot needs hlsnn[plot])")
    p.add_argument("config")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=v1,v2,...",
                   help="a key of the engine section (rows, bfp_systolic.rows or array.rows) or clock_mhz, and "
                        "its values (YAML scalars); repeat for more keys: the variants are the Cartesian product")
    p.add_argument("--jobs", type=POSITIVE, default=None, help="C-simulation worker processes (default: CPU count)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run every variant as a task on the Dask scheduler at ADDRESS (SCHEME://HOST:PORT, "
                        "SCHEME tcp, tls, ws or wss: tcp://host:8786) instead of local processes; needs "
                        "hlsnn[cluster] (docs/tutorials/cluster.md)")
    p.add_argument("--no-csim", action="store_true", help="estimates only; compile nothing")
    p.add_argument("--cases", type=NONNEG, default=2, help="random cases per variant besides the edge cases (default 2)")
    p.add_argument("--seed", type=NONNEG, default=0, help="seed of the cases (default 0)")
    p.add_argument("--out", help="image file (default build/<config stem>_sweep.png; build/ is $HLSNN_BUILD when set)")
    p.add_argument("--no-plot", action="store_true", help="print the table (or JSON) only")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_sweep)
    return ap


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: the same cleanup (temporary folders, DMA buffers), exit 143."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None):
    import signal
    import threading
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except HlsnnError as exc:
        msg = str(exc)
        print(f"hlsnn: error: {msg}", file=sys.stderr)
        return 2
    except Terminated:
        print("hlsnn: terminated (SIGTERM); cleaned up", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("hlsnn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # output piped into e.g. `head`: stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        msg = filesystem_message(exc)
        if msg is None:
            raise
        print(f"hlsnn: error: {msg}", file=sys.stderr)
        return 2
    except MemoryError as exc:
        print(f"hlsnn: error: out of memory ({str(exc).splitlines()[0][:160] if str(exc) else 'MemoryError'}); "
              "use smaller inputs (--test-samples, fewer cases) or free memory", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
