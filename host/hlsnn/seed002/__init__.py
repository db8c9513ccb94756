"""Source 002's radix-point update methods E1-E4 and E6-E9 (dynamic fixed point, the point
from statistics of the current operation) on several circuits and boards: which circuit does
the preceding operation, DETERMINE, the conversion of saved results and the main operation
(:mod:`~hlsnn.seed002.layout`), a group of kernel instances driven as one accelerator
(:mod:`~hlsnn.seed002.circuits`), boards on a Dask cluster (:mod:`~hlsnn.seed002.boards`), the
timelines (:mod:`~hlsnn.seed002.timeline`) and :func:`calibrate`
(:mod:`~hlsnn.seed002.methods`). ``docs/seed002-methods.md`` explains them; E5 (per layer the
faster of E2 and E4) is ``hlsnn deploy --radix-update e5`` (:mod:`hlsnn.deploy.quantize.update`)."""
from .layout import METHODS, Circuit, Layout
from .methods import Result, calibrate, calibration_images

__all__ = ["METHODS", "Circuit", "Layout", "Result", "calibrate", "calibration_images"]
