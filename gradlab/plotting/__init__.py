"""Figures from results and logs (matplotlib + seaborn). Reads data; computes no math."""

from gradlab.plotting.style import apply_style, batch_size_axis, load_results, save_figure

__all__ = ["apply_style", "batch_size_axis", "load_results", "save_figure"]
