"""The main job: run the analyses and write the report (``gradlab report``)."""

from gradlab.report.runner import SECTIONS, run_report

__all__ = ["SECTIONS", "run_report"]
