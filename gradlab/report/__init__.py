"""The main job: run the analyses and write the report (``gradlab report``).

The report needs the ``studies`` extra; a part of it that is missing is named with that extra
(not with the smaller extra of the module that first imported it). ``SECTIONS`` and
``run_report`` are loaded when first used, so that importing this package for
:data:`SECTION_NAMES` (what ``gradlab report --help`` lists) costs nothing: loading the report
imports SymPy, SciPy, matplotlib and the studies (seconds).
"""

from gradlab.extras import MissingExtraError, missing_extra

__all__ = ["SECTIONS", "SECTION_NAMES", "run_report"]

SECTION_NAMES: tuple[str, ...] = (
    "audit", "verification", "tie_aware", "operating_region", "training", "losses", "scenes",
)
"""The report's section names, in report order: the keys of ``SECTIONS`` (a test holds them
equal)."""


def __getattr__(name: str):
    if name not in ("SECTIONS", "run_report"):
        raise AttributeError(f"module 'gradlab.report' has no attribute {name!r}")
    try:
        from gradlab.report import runner
    except MissingExtraError as error:
        raise missing_extra(error.name, "studies", "gradlab.report") from None
    return getattr(runner, name)
