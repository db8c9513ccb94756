"""Stage 6, report: what ``hlsnn deploy`` measures (:mod:`~hlsnn.deploy.reports.evaluate`) and the
page of ``hlsnn report`` (:mod:`~hlsnn.deploy.reports.report`)."""
