"""The main job: run the analyses and write the report (``gradlab report``).

The report needs the ``studies`` extra; a part of it that is missing is named with that extra
(not with the smaller extra of the module that first imported it).
"""

from gradlab.extras import MissingExtraError, missing_extra

try:
    from gradlab.report.runner import SECTIONS, run_report
except MissingExtraError as error:
    raise missing_extra(error.name, "studies", "gradlab.report") from None

__all__ = ["SECTIONS", "run_report"]
