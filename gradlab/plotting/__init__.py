"""Figures from results and logs (matplotlib + seaborn). Reads data; computes no math.

Needs the ``plot`` extra (``pip install 'gradlab-ranking[plot]'``); without it, importing this
package raises a :class:`~gradlab.GradlabError` naming the extra. Importing it leaves
matplotlib's backend as it was.
"""

from gradlab.plotting.style import apply_style, batch_size_axis, load_results, save_figure

__all__ = ["apply_style", "batch_size_axis", "load_results", "save_figure"]
