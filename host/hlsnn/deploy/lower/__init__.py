"""Stage 4, lower: a calibrated deployment becomes the network mode's integer program
(:mod:`~hlsnn.deploy.lower.program`, its rules in that module's docstring), with the host ops
before and after the kernel and the last check before C."""
