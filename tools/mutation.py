"""Mutation testing of gradlab's checks with mutmut: do the tests notice a plausible bug?

``make mutants`` runs this script over the modules whose numbers users trust (the math in
``gradlab/functional/``, the Monitor, the audit and the loss modules). For each module group it
clones the committed tree into a scratch folder, lets mutmut (a maintained mutation tool: we
configure it, we do not write a mutator) apply its single-point mutations one at a time, and runs
only the tests that cover the mutated function (mutmut records which tests reach which
function on a first, instrumented run). It writes ``benchmarks/results/mutation.json``: per
group, mutants generated, killed, survived, without covering tests and timed out, the
survivors by name, and the survivors judged equivalent with their one-line reason (from
``tools/mutation_equivalents.json``: a change no input can observe). A judgement is stored with
the mutant's diff (what ``mutmut show`` prints, without line numbers) and holds for the mutant
of the same function with the same diff, however mutmut numbers it after an edit elsewhere;
when the lines of its diff change it attaches to nothing. Record one with::

    python tools/mutation.py --judge MUTANT "why no input can observe it"

Incremental by default. The JSON records, per group, the commit of its run and for every
mutated function (mutmut's key, e.g. ``gradlab.functional.harmonic.x_harmonic_number`` or
``gradlab.losses.xǁSmoothAPLossǁforward``) a hash of its source (its AST without the
docstring, so comments, formatting and docstrings do not count) and its counts. A plain run
hashes the functions of the committed tree and runs only the mutants of functions whose hash
differs from the recorded one or that are new; the other functions keep their recorded counts,
and functions that no longer exist are dropped. A group without per-function records runs in
full. See what would run, without mutmut::

    python tools/mutation.py --dry-run

A change to the tests alone changes no hash: run the group again with ``--full`` (or
``--recheck``) after adding tests that should kill a survivor. After an incremental run,
``--recheck`` runs again only the undetected mutants of the functions that run mutated and
keeps the other functions' records. After judging a survivor equivalent (or dropping a judgement),
``--reapply-equivalents --only GROUP`` re-reads the equivalents into the recorded group
without running mutmut. A run in which mutmut leaves asked-for mutants unchecked
(a test failing on the unmutated code stops its first, instrumented run) is not recorded: the
driver prints the end of mutmut's output and exits 1. Groups recorded before the
per-function records existed were given them once with ``--adopt`` (hashes at the group's
recorded commit, mutant counts from mutmut's own generator, no test run; it refuses a group
whose generated count differs from the recorded one).

Every mutant again (``make mutants-full``)::

    python tools/mutation.py --full

Run one module in minutes::

    python tools/mutation.py --only functional/harmonic --children 1

or a custom group (its own name, its own tests)::

    python tools/mutation.py --group harmonic=gradlab/functional/harmonic.py \\
        --tests tests/functional/test_harmonic.py

Not part of CI. A full run takes several hours on two cores: the three largest claim modules of
``symbolic/`` (smoothap, fappy and tie-aware claims) hold 2,100-3,100 mutants each at about
30-40 a minute with one child; every other group runs in minutes. ``--recheck`` resumes a
stopped group where it left off.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import difflib
import fcntl
import fnmatch
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
EQUIVALENTS = ROOT / "tools" / "mutation_equivalents.json"

HALF_PRECISION_HISTOGRAMS = (
    "tests/functional/test_half_precision.py::test_histogram_losses_bin_half_precision_in_float32"
)
"""FastAP's and FAPPY's half-precision inputs, computed in float32, against the float64 loops."""

HALF_PRECISION_DECOMPOSITION = (
    "tests/functional/test_half_precision.py::"
    "test_the_decomposition_of_half_embeddings_is_computed_in_float32"
)
"""The decomposition of half-precision embeddings, computed in float32, returned in their dtype."""

OPEN_CLIP_GLOO_PAIRS = [
    f"--deselect=tests/integrations/test_open_clip.py::{test}" for test in (
        "test_local_loss_across_two_processes_puts_the_positives_at_rank_offsets",
        "test_siglip_across_two_processes_records_one_matrix_whatever_the_exchange",
    )
]  # fmt: skip
"""open_clip's tests that start a gloo pair of processes (seconds each; mutmut's coverage does
not follow them): left out of the groups that run the open_clip tests."""

FUNCTIONAL_TESTS = {
    "siglip": ["tests/functional/test_siglip.py", "tests/test_siglip_loss.py",
               "tests/functional/test_half_precision.py",
               "tests/functional/test_score_losses_inputs.py",  # a learnable scale's refusal
               "tests/equivalence/test_siglip.py"],
    "retrieval_at_scale": ["tests/functional/test_retrieval_at_scale.py"],
    "blackbox_ap": [
        "tests/functional/test_fastap_blackbox.py",
        "tests/functional/test_blackbox_ap_rules.py",
        "tests/functional/test_blackbox_ap_calls.py",
        "tests/functional/test_functional_loss_calls.py",
        # half scores computed in float32, and the float16 refusal's bound
        "tests/functional/test_half_precision.py::test_blackbox_ap_of_half_scores_is_computed_in_"
        "float32",
        "tests/functional/test_half_precision.py::test_blackbox_ap_refuses_float16_scores_whose_"
        "gradient_can_pass_float16",
    ],
    "precision": ["tests/functional/test_precision.py",
                  # a call that does not fit the signature, said as gradlab's error
                  "tests/functional/test_call_forms.py",
                  "tests/functional/test_call_forms_everywhere.py",
                  # the float16 refusal names what was passed (scores_made_from)
                  "tests/functional/test_half_precision.py"],
    "decomposition": ["tests/functional/test_decomposition.py", HALF_PRECISION_DECOMPOSITION],
    "diagnostics": [
        "tests/functional/test_diagnostics.py",
        HALF_PRECISION_DECOMPOSITION,
        "tests/monitor/test_shared.py",
        "tests/monitor/test_recorded_column_weights.py",  # the split from SmoothAP's backward
    ],
    "fappy": ["tests/functional/test_fappy.py", "tests/functional/test_fappy_bin_widths.py",
              "tests/functional/test_functional_loss_calls.py",  # on_degenerate's check
              HALF_PRECISION_HISTOGRAMS,
              # a float16 gradient refused when backward runs (the hook of fappy_loss)
              "tests/functional/test_half_precision.py::test_fappy_refuses_a_float16_gradient_it_"
              "cannot_hold_when_backward_runs",
              "tests/functional/test_half_precision.py::test_an_empty_float16_batch_backward_"
              "through_fappy_gives_an_empty_gradient",
              "tests/functional/test_half_precision.py::test_fappy_loss_module_refuses_the_"
              "float16_gradient_as_its_function_does",
              # options refused before the scores; the module's degenerate count (on_degenerate)
              "tests/functional/test_functional_loss_calls.py", "tests/test_losses_degenerate.py",
              "tests/test_losses.py"],
    "fastap": ["tests/functional/test_fastap_blackbox.py", HALF_PRECISION_HISTOGRAMS],
    "geometry": ["tests/functional/test_geometry.py", "tests/functional/test_geometry_in_batch.py",
                 "tests/monitor/test_geometry_quantities.py"],
    "gradient_anatomy": ["tests/functional/test_gradient_anatomy.py"],
    "harmonic": [
        "tests/functional/test_harmonic.py",
        "tests/functional/test_harmonic_inputs.py",
        "tests/functional/test_relaxed_ranking.py",
    ],
    "layouts": ["tests/functional/test_layouts.py", "tests/functional/test_bool_options.py"],
    "losses": [
        "tests/functional/test_functional_losses.py",
        "tests/functional/test_functional_loss_calls.py",
        "tests/test_losses.py",
        "tests/test_loss_module_calls.py",
    ],
    "operating_region": ["tests/functional/test_operating_region.py"],
    "relaxed_ranking": ["tests/functional/test_relaxed_ranking.py"],
    "retrieval_metrics": ["tests/functional/test_retrieval_metrics.py"],
    "score_losses": [
        "tests/functional/test_score_losses.py",
        "tests/functional/test_score_losses_inputs.py",
        "tests/functional/test_half_precision.py",
    ],
    "sigmoid": ["tests/functional/test_sigmoid.py", "tests/functional/test_decomposition.py"],
    "smooth_ap": [
        "tests/functional/test_smooth_ap.py",
        "tests/functional/test_smooth_ap_blocks.py",
        "tests/monitor/test_recorded_column_weights.py",  # the backward's recorded weights
        "tests/functional/test_meta_inputs.py",  # a meta tensor refused before its kernels
        "tests/functional/test_masked_scores.py",  # -inf scores told of the candidate mask
        # R(i, S_Omega) of a query without negatives (smooth_ap_with_ranks's default)
        "tests/functional/test_operating_region.py::"
        "test_weighted_counts_of_a_query_whose_candidates_are_all_positive_use_its_true_ranks",
        # float16's gradient bound
        "tests/functional/test_half_precision.py::"
        "test_every_half_smooth_ap_call_that_validate_accepts_has_a_finite_gradient",
        "tests/functional/test_half_precision.py::"
        "test_the_smooth_ap_gradient_refusal_states_its_bound",
        "tests/functional/test_half_precision.py::"
        "test_a_smooth_ap_bound_of_exactly_float16s_largest_value_is_accepted",
    ],
    "suspects": ["tests/functional/test_suspects.py", "tests/monitor/test_suspects_quantity.py"],
    "tie_aware": ["tests/functional/test_tie_aware.py", "tests/functional/test_relaxed_ranking.py",
                  "tests/functional/test_harmonic_inputs.py"],  # harmonic_number's refusals
}
"""Each module of ``gradlab/functional/`` -> the test files that cover it (a run stays short)."""

_MONITOR_VALUES = ["tests/monitor/test_values.py", "tests/monitor/test_shared.py",
                   "tests/monitor/test_monitor_defaults.py",
                   # a batch's own score matrix; Temperature on a loss of one's own
                   "tests/monitor/test_in_batch_scores.py",
                   "tests/monitor/test_temperature_warnings.py",
                   # a learnable temperature; a score matrix beyond cosines' range
                   "tests/monitor/test_temperature_inverse.py",
                   "tests/monitor/test_scores_beyond_cosines.py",
                   # what a record describes: copies at the call, display calls, close()
                   "tests/monitor/test_values_at_the_call.py",
                   *(f"--deselect=tests/monitor/{test}" for test in (  # where warnings point
                       "test_in_batch_scores.py::"
                       "test_the_diagonal_positives_warning_points_at_the_call",
                       "test_temperature_warnings.py::"
                       "test_both_warnings_point_at_the_callers_step",
                       "test_scores_beyond_cosines.py::"
                       "test_the_warning_points_at_the_training_loop"))]  # fmt: skip
_MONITOR_RUNS = ["tests/monitor/test_monitor.py", "tests/monitor/test_runs.py",
                 "tests/monitor/test_options.py"]  # fmt: skip
# The fault-injection tests, but the one that checks where the warning points: mutmut's
# trampolines add frames, so a stacklevel that is right outside mutmut is wrong inside it.
_SINK_FAULTS = [
    "tests/monitor/test_sink_faults.py",
    "--deselect=tests/monitor/test_sink_faults.py::test_the_warning_points_at_the_training_loop",
]
# The agreement's decision and the one-rank group in process; the two-rank gloo tests spawn
# processes for about 15 s each, too slow per mutant.
_DISTRIBUTED_IN_PROCESS = [
    "tests/monitor/test_distributed_faults.py",
    *(
        f"--deselect=tests/monitor/test_distributed_faults.py::{test}"
        for test in (
            "test_without_fault_every_step_logs_the_mean_of_both_ranks",
            "test_a_rank_without_a_batch_skips_that_step_on_every_rank",
            "test_a_rank_skipping_monitor_step_stops_the_gathering_without_mixing",
        )
    ),
]
MONITOR_TESTS = {
    # test_anatomy and test_monitor_faults read what the adapters capture (first run without
    # them: 78 of 197 survivors were killed by these two files alone)
    "adapters": ["tests/monitor/test_adapters.py", "tests/monitor/test_adapters_messages.py",
                 "tests/monitor/test_adapters_reading.py", "tests/monitor/test_watch.py",
                 "tests/monitor/test_watch_bypassed.py",  # calls that build no graph
                 # pytorch-metric-learning's losses as the adapters read them
                 "tests/interop/test_pml.py",
                 "tests/monitor/test_monitor_paths.py::"
                 "test_a_score_loss_watched_as_an_embedding_loss_is_told_to_say_inputs_scores",
                 # a loss returning a tuple, a dict or a per-sample tensor, named at the call
                 "tests/monitor/test_monitor_contract.py::"
                 "test_a_loss_that_returns_no_single_value_is_named_at_the_call",
                 *_MONITOR_VALUES,
                 "tests/monitor/test_anatomy.py", "tests/monitor/test_monitor_faults.py",
                 # the workspace lent to the backward and the recorded column weights handed on
                 "tests/monitor/test_monitor_workspace.py",
                 "tests/monitor/test_recorded_column_weights.py",
                 # the hook that tells a step closed before backward
                 "tests/monitor/test_watch_bypassed.py", "--deselect=tests/monitor/"
                 "test_watch_bypassed.py::test_the_step_before_backward_warning_points_at_the_"
                 "callers_step",
                 "tests/monitor/test_loss_scale.py",
                 # what a score loss says of its logits, read by Temperature
                 "tests/monitor/test_geometry_quantities.py",
                 "tests/monitor/test_declared_logits.py",
                 "tests/monitor/test_distributed_agreement.py",  # on_scores: not gathered
                 # the adapters of pytorch-metric-learning's and sentence-transformers' losses
                 "tests/interop/test_pml.py", "tests/integrations/test_sentence_transformers.py",
                 # a MatryoshkaLoss around a loss that records is told to watch the inner one
                 "tests/integrations/test_sentence_transformers_matryoshka.py",
                 "--deselect=tests/monitor/test_watch.py::test_a_watched_score_loss_runs_under_torch_compile"],
    "anatomy": ["tests/monitor/test_anatomy.py", *_MONITOR_VALUES],
    # a loss module watched as a module: its parameters trained, saved and moved
    "watched": ["tests/monitor/test_watched.py"],
    # test_fast_paths / test_monitor_workspace: the CPU sort, searches and buffers of large
    # matrices (past _KEYED_SORT_FROM) against references
    # test_batch_view_inputs: empty, non-finite, meta-device, float64-default and long rows;
    # test_recorded_column_weights: the backward's weights handed to smooth_ap_terms once
    # the row counts and the per-step ranking flag (here since they are shared):
    # test_mask_layouts, test_runs_degenerate and the runs, as in the quantity group
    "batch": ["tests/monitor/test_batch_view.py", *_MONITOR_VALUES,
              "tests/monitor/test_anatomy.py", "tests/monitor/test_fast_paths.py",
              "tests/monitor/test_monitor_workspace.py", "tests/monitor/test_batch_view_inputs.py",
              "tests/monitor/test_recorded_column_weights.py", "tests/monitor/test_loss_scale.py",
              "tests/monitor/test_mask_layouts.py", "tests/monitor/test_runs_degenerate.py",
              "tests/monitor/test_quantity_declarations.py", *_MONITOR_RUNS,
              # the margins and geometry read the view's positive counts, anchors and ends
              "tests/monitor/test_geometry_quantities.py", "tests/monitor/test_geometry_edges.py",
              # the tensors a quantity of one's own changed in place, named (tensor_versions)
              "tests/monitor/test_quantity_values.py"],
    # test_lock_claims: the lock function by function (about a second); test_lock: the Monitor's use
    "config": ["tests/monitor/test_config.py", "tests/monitor/test_config_values.py",
               "tests/monitor/test_options.py", "tests/monitor/test_quantity_values.py",
               "tests/monitor/test_monitor_defaults.py", "tests/monitor/test_monitor_contract.py",
               "tests/monitor/test_runs.py",  # bad calls, such as a sink named twice
               "tests/monitor/test_schedules.py",  # every= refused or replacing schedules
               # a Quantity class where its object goes, refused saying so
               "tests/monitor/test_monitor_faults.py::"
               "test_a_quantity_class_where_its_object_goes_is_refused_saying_so"],
    "distributed": ["tests/monitor/test_distributed_agreement.py",
                    "tests/monitor/test_distributed_schedules.py",  # agree_on_schedules
                    # a one-process group in process: the agreement's and the step's errors
                    "tests/monitor/test_monitor_second_rank.py",
                    "tests/monitor/test_monitor_paths.py",
                    "tests/monitor/test_monitor_contract.py", *_DISTRIBUTED_IN_PROCESS],
    # the quantities against float64 loops (tests/reference/geometry_loops.py)
    "geometry": ["tests/monitor/test_geometry_quantities.py",
                 "tests/monitor/test_geometry_edges.py", *_MONITOR_VALUES,
                 "tests/monitor/test_declared_logits.py",  # Temperature follows the loss
                 # the open_clip wrapper's logits, read by Temperature
                 "tests/integrations/test_open_clip.py", *OPEN_CLIP_GLOO_PAIRS,
                 # several positives under a loss that declares no softmax, said once
                 "tests/interop/test_pml.py::test_chance_level_and_temperature_say_when_pml_"
                 "ntxent_has_several_positives"],
    "lock": ["tests/monitor/test_lock_claims.py", "tests/monitor/test_lock.py",
             *_SINK_FAULTS],
    # Without the tests that spend seconds in torch.compile, matplotlib or subprocesses
    # (mutmut cannot see subprocesses; test_monitor_paths runs torch.distributed in process).
    # test_lock: the Monitor's claim of its folder (test_lock_claims calls no Monitor code).
    "monitor": [*_MONITOR_RUNS, *_MONITOR_VALUES, "tests/monitor/test_watch.py",
                "tests/monitor/test_quantity_values.py",
                "tests/monitor/test_tau.py", "tests/monitor/test_runs_degenerate.py",
                "tests/monitor/test_anatomy.py", "tests/monitor/test_sink_roundtrip.py",
                "tests/monitor/test_monitor_paths.py", "tests/monitor/test_monitor_contract.py",
                "tests/monitor/test_lock.py", *_SINK_FAULTS,
                *_DISTRIBUTED_IN_PROCESS, "tests/monitor/test_distributed_agreement.py",
                "tests/monitor/test_watch_bypassed.py", "tests/monitor/test_monitor_workspace.py",
                "tests/monitor/test_monitor_second_rank.py",
                # the ranks' schedules compared past the first window, beside a simulated rank
                "tests/monitor/test_schedules_compared_beside_a_rank.py",
                "tests/monitor/test_monitor_warnings_say_why.py",
                "tests/monitor/test_loss_scale.py", "tests/monitor/test_watched.py",
                "tests/monitor/test_monitor_faults.py", "tests/monitor/test_several_losses.py",
                "tests/monitor/test_validation_calls.py",
                "tests/monitor/test_close_after_destroy.py",
                # the note of a disabled quantity in the log, and its schedule's own refusal
                "tests/monitor/test_disabled_in_the_log.py", "tests/monitor/test_schedules.py",
                # a sink's run marked failed; a GradlabError disabling a quantity, said alone
                "tests/monitor/test_sinks_remote.py::test_an_mlflow_run_the_sink_started_ends_"
                "failed_when_training_raised",
                "tests/monitor/test_suspects_quantity.py::test_a_hashes_source_that_returns_no_"
                "tensor_is_said_in_one_sentence",
                # a quantity's fewer needs named in the reason it is left out (_why_not)
                "tests/monitor/test_suspects_quantity.py::test_a_loss_without_a_score_matrix_"
                "is_told_the_gradient_free_suspects",
                # the capture reads the loss's scale for a parameter's gradient (Temperature)
                "tests/monitor/test_geometry_quantities.py::test_the_observed_gradient_is_the_"
                "watched_calls_own_under_accumulation_and_a_weight",
                # the last step at close() reads its call for the quantities due alone
                "tests/interop/test_pml.py::"
                "test_the_last_step_logged_at_close_does_not_say_its_loss_scored_nothing",
                # the header keeps the plots of a user's quantities (a second each)
                *(f"tests/plotting/test_monitor_plots.py::{test}" for test in (
                    "test_a_users_plot_family_is_drawn_from_the_run_header_without_its_class",
                    "test_a_header_family_that_is_no_safe_file_name_is_not_drawn")),
                "--deselect=tests/monitor/test_watch_bypassed.py::"
                "test_training_with_the_original_loss_warns_once_at_the_callers_line",
                *(f"--deselect=tests/monitor/{test}" for test in (
                    "test_watch.py::test_a_watched_score_loss_runs_under_torch_compile",
                    "test_monitor.py::test_plot_command",
                    "test_anatomy.py::test_plot_draws_the_anatomy_family_for_both_directions",
                    "test_lock.py::test_a_killed_writer_blocks_while_alive_and_its_lock_is_taken_over_after",
                    "test_runs.py::test_close_warns_at_the_callers_line_when_watched_calls_were_never_stepped",
                    "test_runs.py::test_the_resume_warning_points_at_the_training_loop",
                    "test_watch_bypassed.py::"
                    "test_a_second_step_call_per_optimizer_step_warns_once_at_the_callers_line",
                    "test_monitor_second_rank.py::"
                    "test_the_distributed_warnings_point_at_the_callers_step_and_close",
                    "test_monitor_warnings_say_why.py::"
                    "test_the_non_finite_warning_points_at_the_callers_step",
                    "test_monitor_warnings_say_why.py::"
                    "test_the_nothing_logged_warning_points_at_the_close",
                    "test_monitor_warnings_say_why.py::"
                    "test_the_not_backpropagated_warning_points_at_the_callers_step",
                    "test_monitor_warnings_say_why.py::"
                    "test_what_a_quantity_says_of_its_numbers_points_at_the_callers_step",
                    "test_watch_bypassed.py::"
                    "test_the_step_before_backward_warning_points_at_the_callers_step",
                    "test_tau.py::test_the_tau_change_warning_points_at_the_loss_call",
                    "test_close_after_destroy.py::test_the_warning_points_at_the_close_call"))],
    # test_anatomy: masks counted 8 flags at a time (large, contiguous) against the loops
    "quantity": ["tests/monitor/test_quantity_declarations.py", "tests/monitor/test_anatomy.py",
                 # what a quantity declares and returns, checked (check_declaration, Plot)
                 "tests/monitor/test_quantity_values.py",
                 # a Plot as the run header records it and as plotting reads it back
                 *(f"tests/plotting/test_monitor_plots.py::{test}" for test in (
                     "test_a_users_plot_family_is_drawn_from_the_run_header_without_its_class",
                     "test_a_resumed_run_draws_the_families_of_every_header",
                     "test_a_header_family_that_is_no_safe_file_name_is_not_drawn")),
                 "tests/monitor/test_mask_layouts.py",  # transposed, odd-length, unaligned masks
                 "tests/monitor/test_schedules.py",  # a schedule refused when a quantity is made
                 *_MONITOR_VALUES, *_MONITOR_RUNS],
    "run_folder": ["tests/monitor/test_run_folder_mutants.py",
                   "--deselect=tests/monitor/test_run_folder_mutants.py::"
                   "test_the_fault_warning_points_at_the_line_that_wrote",
                   "tests/monitor/test_runs.py", "tests/monitor/test_lock.py",
                   "tests/monitor/test_monitor_contract.py",
                   "tests/monitor/test_monitor.py::"  # the header's from_step of a resumption
                   "test_a_resumption_from_an_earlier_checkpoint_names_the_step_it_logs_from",
                   "tests/monitor/test_sink_roundtrip.py", *_SINK_FAULTS],
    # test_distributed_agreement: the agreement compares this rank's own call (in process)
    "quantities": [*_MONITOR_VALUES, "tests/monitor/test_runs_degenerate.py",
                   "tests/monitor/test_monitor.py", "tests/monitor/test_several_losses.py",
                   "tests/monitor/test_distributed_agreement.py"],
    "schedules": ["tests/monitor/test_schedules.py", *_MONITOR_RUNS,
                  "tests/monitor/test_monitor_defaults.py"],
    "suspects": ["tests/monitor/test_suspects_quantity.py", *_MONITOR_VALUES],
    "sinks": ["--deselect=tests/monitor/test_sinks.py::"  # where a warning points: mutmut's frames
              "test_the_last_steps_warning_of_a_bad_line_points_at_its_caller",
              "tests/monitor/test_sinks_mutants.py", "tests/monitor/test_sink_failed_open.py",
              "tests/monitor/test_sink_reopen_untouched.py",
              "tests/monitor/test_sinks.py", "tests/monitor/test_sink_roundtrip.py",
              *_SINK_FAULTS,
              "tests/monitor/test_sinks_remote.py", "tests/monitor/test_runs.py",
              "tests/monitor/test_monitor_defaults.py",
              "tests/monitor/test_config.py"],  # sinks that write one destination, refused,
}  # fmt: skip
"""Each module of ``gradlab/monitor/`` -> the test files that cover it (no compile, sync or
overhead tests: slow, and they check costs, not values)."""

# test_claim_definitions.py first: mutmut runs the fastest covering test first, and it rejects
# a changed definition (form, mutant, method) in milliseconds without running any check.
_CLAIM_RECORDS = ["tests/symbolic/test_claim_definitions.py",
                  "tests/symbolic/test_claim_records.py", "tests/symbolic/test_checks.py",
                  "tests/symbolic/test_claims_api.py"]  # fmt: skip
SYMBOLIC_TESTS = {
    "claims": [*_CLAIM_RECORDS, "tests/symbolic/test_no_verdict_literals.py",
               "tests/symbolic/test_claims_mutants.py", "tests/symbolic/test_claims_relative.py",
               "tests/symbolic/test_claims_accepted.py",
               # symbolic_equality's points at thresholds, stand-ins of abstract functions
               "tests/symbolic/test_equality_points.py",
               # how a form fails (wrong value, undefined), from what the helpers computed
               "tests/symbolic/test_failure_kinds.py"],
    # the driver and its outputs on hand-built claims and records: seconds per mutant, where
    # the whole-audit tests of test_audit.py take about 30 s
    "audit": ["tests/symbolic/test_audit_output.py", "tests/symbolic/test_audit_measurement.py",
              "tests/symbolic/test_claims_api.py::"
              "test_a_truthy_non_bool_mutants_option_is_refused_before_any_work",
              # run_audit's refusal of claims that are not a list of Claims (_listed_claims)
              "tests/symbolic/test_claims_api.py::"
              "test_run_audit_refuses_claims_that_are_not_a_list_of_claims",
              # why a check that accepted no form kills no mutant (_candidates)
              "tests/symbolic/test_claims_api.py::"
              "test_a_check_that_decides_no_form_kills_no_mutant_and_the_report_says_why",
              "tests/symbolic/test_claims_api.py::"
              "test_an_empirical_check_that_reproduces_a_mutant_kills_the_others",
              *(f"tests/symbolic/test_audit_mutants.py::{name}" for name in (
                  "test_a_check_that_accepts_every_mutant_fails_the_done_when",
                  "test_a_record_of_slips_alone_needs_a_reason_for_every_operator",
                  "test_a_not_testable_claim_needs_a_reason_for_every_operator_and_kills_nothing"))],
    "batch_size": ["tests/symbolic/test_batch_size.py", *_CLAIM_RECORDS],
    "derivations": ["tests/symbolic/test_audit.py", *_CLAIM_RECORDS],
    "seeds": ["tests/symbolic/test_seeds.py", *_CLAIM_RECORDS, "tests/symbolic/test_audit.py"],
    # the records, and checks given forms wrong by a little (loose tolerances, coarse samples)
    **{module: [*_CLAIM_RECORDS, f"tests/symbolic/test_{module}.py"]
       for module in ("smoothap_claims", "fappy_claims")},
    # and forms on a check's bounds, in the module a check evaluates in, or with an imaginary
    # part, each detail compared whole
    "tie_aware_claims": [*_CLAIM_RECORDS, "tests/symbolic/test_tie_aware_claims.py",
                         "tests/symbolic/test_tie_aware_bounds_and_approximations.py",
                         "tests/symbolic/test_tie_aware_checks_reject.py"],
    # the operation counters and helpers pinned against independent counts and loops
    # (and the failure kinds: Table S1's ill-typed R_pos against a wrong-value slip)
    "supplementary_claims": [*_CLAIM_RECORDS, "tests/symbolic/test_supplementary_claims.py",
                             "tests/symbolic/test_batch_size.py",
                             "tests/symbolic/test_failure_kinds.py"],
    "minibatch_claims": [*_CLAIM_RECORDS, "tests/symbolic/test_minibatch_claims.py",
                         "tests/symbolic/test_soft_counts_edges.py"],
    "temperature_claims": [*_CLAIM_RECORDS, "tests/symbolic/test_temperature_claims.py"],
    # the engine's helpers: their own tests and the mutants every claim is fed
    "orders": ["tests/symbolic/test_orders.py", "tests/symbolic/test_claims_mutants.py"],
    "mutation_operators": ["tests/symbolic/test_mutation_operators.py",
                           "tests/symbolic/test_mutation_equivalence.py",
                           "tests/symbolic/test_claims_mutants.py",
                           # the fast tier's records, every generated mutant listed (seconds;
                           # all the records take about 40 s per mutant)
                           *(f"tests/symbolic/test_claim_records.py::"
                             f"test_claim_reproduces_its_committed_record[{claim}]" for claim in (
                                 "000_e0f8edb24a02ffe3:eq4",
                                 "002_9d7d2555864f9baa:claim-table-s1",
                                 "003_9ae9ec3ce43e30ad:eq17", "003_9ae9ec3ce43e30ad:eq30",
                                 "003_9ae9ec3ce43e30ad:eq9",
                                 "004_e426679a66883031:claim-fig4-caption"))],
}  # fmt: skip
"""Each module of ``gradlab/symbolic/`` -> its tests: mainly one test per claim comparing its whole
record (verdict, detail, formulas, every mutant's verdict) with the committed audit.json, so a
mutant of one claim's check runs that claim only."""

DEFAULTS_TESTS = ["tests/test_defaults.py", "tests/functional/test_defaults.py",
                  "tests/functional/test_bool_options.py"]
"""The tests of every public default and of every bool option's check, run for every functional
group (only the tests that reach a mutated function run for its mutants, so they cost one
instrumented pass)."""

LOSS_TESTS = ["tests/test_losses_shared.py", "tests/test_loss_reliability.py"]
"""The losses' shared behaviour (validate, degenerate batches, second derivatives, parameters
that would overflow, bad input), run for every functional group and for the loss modules."""

_DATA_TESTS = [
    "tests/data/test_data.py",
    "tests/data/test_seeds_and_handwriting.py",
    "tests/data/test_digit_strings.py",
    "tests/data/test_image_folder.py",
    "tests/data/test_samplers.py",
    "tests/data/test_digit_string_images.py",
    "tests/data/test_digits_split.py",
]
STUDY_TESTS = {
    "data/samplers": _DATA_TESTS,
    "data/digit_strings": _DATA_TESTS,
    "data/digits": _DATA_TESTS,
    "data/image_folder": ["tests/data/test_image_folder.py"],
    "data/digit_scenes": ["tests/data/test_digit_scenes.py"],
    "models": ["tests/test_models.py", "tests/test_models_reference.py"],
    "backbones": ["tests/test_backbones.py", "tests/test_backbones_architecture.py"],
    "training": ["tests/test_training.py"],
    "experiments/statistics": ["tests/experiments/test_statistics.py"],
    "experiments/metrics": ["tests/experiments/test_metrics.py"],
    "report/prose": ["tests/report/test_prose.py", "tests/report/test_geometry_prose.py",
                     "tests/experiments/test_summaries.py",
                     "tests/report/test_collapsed_scenes.py"],  # the collapsed runs' words
    "report/summaries": ["tests/report/test_summary_words.py", "tests/report/test_prose.py",
                         # the audit's mutant counts and a scene run's name, in the findings
                         "tests/report/test_findings_text.py", "tests/report/test_findings.py",
                         "tests/report/test_collapsed_scenes.py",
                         "tests/experiments/test_summaries.py"],
    "report/monitor_captions": ["tests/report/test_monitor_captions.py"],
    "report/findings": ["tests/report/test_findings_text.py", "tests/report/test_findings.py",
                        "tests/report/test_headline_findings.py",
                        "tests/report/test_collapsed_scenes.py"],
    "experiments/planner": ["tests/experiments/test_plan_results.py",
                            "tests/experiments/test_planner.py",
                            # the CUDA branch with a stand-in torch.cuda, on any machine
                            "tests/experiments/test_plan_devices.py"],
    "report/figure_tables": ["tests/report/test_figure_tables.py"],
    "experiments/loss_comparison": [
        "tests/experiments/test_loss_selection.py",
        "tests/experiments/test_loss_comparison_runs.py",
        "tests/experiments/test_summaries.py::test_loss_comparison_summary_ranks_the_losses_that_train",
        "tests/experiments/test_studies.py::test_contrastive_loss_matches_a_loop",
        "tests/experiments/test_plan_results.py::test_the_plan_losses_are_the_comparisons_losses",
        "tests/experiments/test_runtime_seeds.py",  # measure() refuses bad seeds before tasks
        "tests/report/test_prose.py::"  # one seed ranks nothing
        "test_one_seed_ranks_no_loss_and_sets_apart_only_a_loss_without_gradient",
    ],
    "experiments/digit_scenes": [
        "tests/experiments/test_digit_scenes_runs.py",
        "tests/experiments/test_summaries.py",
        "tests/experiments/test_studies.py::test_scene_features_read_each_box",
        "tests/experiments/test_studies.py::test_scene_geometry_matches_float64_loops",
        "tests/experiments/test_runtime_seeds.py",
        # the collapse gate and the runs it lists apart (summarize on small results)
        "tests/report/test_collapsed_scenes.py",
    ],
    "experiments/captions_miniature": [
        "tests/experiments/test_captions_miniature.py",
        "tests/functional/test_score_losses.py::test_the_caption_study_losses_are_reproduced",
    ],
    "experiments/fappy_lemma": ["tests/experiments/test_fappy_lemma.py"],
    "experiments/pml_grouping": ["tests/experiments/test_pml_grouping.py"],
    "experiments/verification": ["tests/experiments/test_verification.py",
                                 "tests/experiments/test_verification_inputs.py"],
    # checkpoints of 1 and 2 steps instead of 10 and 30, a miniature of the digits
    "experiments/gradient_anatomy": [
        "tests/experiments/test_gradient_anatomy_study.py",
        "tests/monitor/test_anatomy_study.py::test_bad_study_options_name_the_argument",
    ],
    "experiments/digits_training": ["tests/experiments/test_digits_training.py"],
    "experiments/tie_aware": ["tests/experiments/test_tie_aware_miniature.py"],
    "experiments/p_vs_batch_size": [
        "tests/experiments/test_p_vs_batch_size.py",
        "tests/experiments/test_p_vs_batch_size_runs.py",  # measure() at tiny sizes
        "tests/experiments/test_summaries.py::"
        "test_p_vs_batch_size_summary_reads_each_setting_and_the_claim",
        "tests/experiments/test_runtime_seeds.py",
        "-m", "not slow",  # not measure(quick=True): 40 s
    ],
    "experiments/operating_region": [
        "tests/experiments/test_operating_region.py::"
        "test_closed_forms_match_an_independent_expectation_and_simulation",
        "tests/experiments/test_operating_region_runs.py",  # both studies at tiny sizes
        "tests/experiments/test_operating_region_settings.py",  # against the published JSON
    ],
    # the three studies at tiny sizes on two classes of generated images (about 6 s for the
    # whole file; a mutant runs only the tests that reach its function), and the command's
    # error paths (one line, exit code 2) without its four whole-study runs; the classes too
    # small for a batch, left out and said
    "experiments/image_studies": [
        "tests/experiments/test_image_studies_runs.py", "tests/experiments/test_image_studies.py",
        "tests/experiments/test_image_studies_defaults.py",
        "tests/experiments/test_image_studies_small_classes.py",
        "tests/experiments/test_image_studies_progress.py",  # the stages it names
        *(f"--deselect=tests/experiments/test_image_studies.py::{name}" for name in (
            "test_the_fig_s7a_command_writes_the_bundled_schema_and_a_figure",
            "test_the_losses_study_writes_the_bundled_schema_and_the_reports_page",
            "test_the_anatomy_study_writes_the_scenes_schema_over_training",
            "test_the_numbers_do_not_depend_on_the_loader_workers")),
    ],
    # in process (the pool's executor stood in by threads, milliseconds); one test spawns real
    # workers (last, about 10 s), not the signal tests (20 s each)
    "experiments/runtime": [
        "tests/experiments/test_runtime_pool.py",
        # the busy machine's note: when it is said, and in which words
        "tests/experiments/test_runtime_busy.py",
        # where the times were taken: the processor, cores, threads and processes
        "tests/experiments/test_loss_comparison_runs.py::test_each_losss_numbers_land_under_"
        "its_name_per_seed",
        "tests/report/test_side_by_side.py::"
        "test_a_result_computed_once_is_shared_with_a_caller_that_came_while_it_ran",
        "tests/report/test_side_by_side.py::test_a_failed_computation_is_not_kept",
        "tests/experiments/test_runtime_turns.py",
        "tests/experiments/test_runtime_seeds.py",
        # the learning rate's bound, named as the command line and as Python name it
        "tests/experiments/test_runtime_lr.py",
        "tests/test_cli_commands.py::test_a_study_refuses_bad_options_in_one_line_before_training",
        "tests/experiments/test_image_studies_runs.py::"
        "test_each_study_refuses_bad_options_before_training",
        # check_device: what torch has, CUDA and MPS stood in for, one CPU device
        "tests/test_cli.py::test_check_device_accepts_what_torch_has",
        *(f"tests/test_cli_commands.py::{name}" for name in (
            "test_check_device_on_a_machine_with_two_cuda_devices",
            "test_check_device_without_cuda_names_the_torch_build",
            "test_check_device_of_mps_asks_whether_it_is_here",
            "test_check_device_refuses_other_device_types",
            "test_check_device_keeps_the_users_spelling",
            "test_plan_refuses_a_device_torch_cannot_use_in_one_line",
            "test_plan_refuses_a_cpu_index_past_the_one_cpu_device")),
        "tests/experiments/test_image_studies.py::"
        "test_a_bad_device_or_slope_threshold_from_python_is_refused_before_training",
        "tests/experiments/test_runtime_devices.py",
    ],
    # stand-in sections (no study trained), side by side without worker processes
    # not the test that raises SIGINT in a section: under mutmut's trampolines the Ctrl-C does
    # not reach run_report (its stats pass saw no KeyboardInterrupt)
    "report/runner": ["tests/report/test_runner_page.py", "tests/report/test_runner_sections.py",
                      "tests/report/test_progress.py::test_after_ctrl_c_no_section_is_said_done",
                      # a user's study it cannot draw, named in one message
                      "tests/report/test_user_studies_in_report.py::"
                      "test_run_report_names_a_study_it_cannot_draw_in_one_message",
                      "--deselect=tests/report/test_runner_sections.py::"
                      "test_side_by_side_ctrl_c_here_stops_the_running_sections_and_skips_the_rest"],
    # hand-built study JSON rendered (figures drawn, nothing trained); not the report run
    "report/user_studies": ["tests/report/test_user_studies_pages.py",
                            "tests/report/test_user_studies_in_report.py",
                            # the earlier run's files an --out holds, found and replaced
                            "tests/test_cli_commands.py::test_a_study_refuses_an_out_holding_"
                            "another_run_unless_overwrite_replaces_it", "-m", "not slow"],
    # each section with stand-in studies, figures and prose (milliseconds; no network trained)
    "report/sections": ["tests/report/test_sections_stand_ins.py", "tests/report/test_findings.py"],
    # main([...]) in process: no subprocesses (slow marker), no network trained, no whole audit;
    # the cached-mnrl case imports sentence-transformers (about 12 s)
    "cli": ["tests/test_cli_commands.py", "tests/test_cli.py", "tests/test_cli_faults.py",
            "tests/test_cli_equivalence.py",
            # gradlab plot's --max-points, parsed and refused by the CLI
            "tests/plotting/test_monitor_long_runs.py",
            # the study command's own checks of its options, before any training
            "tests/experiments/test_image_studies.py::"
            "test_bad_input_is_one_line_and_exit_code_2_before_training",
            "-m", "not slow",
            "--deselect=tests/test_cli_equivalence.py::"
            "test_one_process_candidates_exit_0_when_equivalent_and_1_when_not[argv4-0]"],
    "report/html": ["tests/report/test_html.py",
                    "tests/report/test_runner_page.py::"
                    "test_a_link_to_a_section_left_out_is_its_text_alone"],
    # its checks on given pages and probes; no Chromium start (seconds each) per mutant
    "report/browser_check": ["tests/report/test_browser_check_driver.py",
                             "tests/report/test_browser_check.py", "-m", "not slow",
                             "--deselect=tests/report/test_browser_check.py::"
                             "test_a_sound_page_passes_with_one_screenshot_per_section",
                             "--deselect=tests/report/test_browser_check.py::"
                             "test_broken_pages_are_reported"],
}
"""Study module (``gradlab/<group>.py``) -> its fast tests (seconds per mutant: no report runs)."""

LIBRARY_TESTS = {
    # the argument checks every public function runs first: their own tests and the call
    # tests of the losses, whose messages name the argument, the value and what is allowed
    "validation": ["tests/test_validation.py", "tests/test_defaults.py",
                   "tests/functional/test_masked_scores.py",  # the -inf hint's words
                   "tests/functional/test_score_losses_inputs.py",  # refuse_learnable's message
                   "tests/functional/test_meta_inputs.py",
                   "tests/test_loss_module_calls.py", "tests/test_losses.py",
                   "tests/functional/test_functional_loss_calls.py",
                   # the recording distances, the one user of ScoreRecorderSlot's validate
                   *(f"tests/interop/test_pml.py::{name}" for name in (
                       "test_validate_false_skips_only_the_finiteness_check",
                       "test_bad_input_raises_gradlab_error_naming_the_argument"))],
    "paths": ["tests/test_paths.py", "tests/test_cli_faults.py"],
    # the run folders gradlab plot and plot_runs check (moved out of plotting/monitor)
    "run_dirs": ["tests/plotting/test_monitor_figures.py",
                 "tests/plotting/test_monitor_summaries.py", "tests/plotting/test_monitor_plots.py",
                 "tests/test_cli_faults.py", "tests/test_cli_commands.py",
                 "tests/monitor/test_sinks.py",
                 "tests/plotting/test_monitor_long_runs.py"],  # another logger's metrics.csv
    "memory": ["tests/test_memory.py", "tests/experiments/test_planner.py",
               "tests/equivalence/test_builtin.py", "tests/test_cli_equivalence.py"],
    "progress": ["tests/test_progress.py", "tests/report/test_progress.py"],
    # signals held while processes start (the CLI's fault tests spawn the whole command:
    # minutes per mutant; they are shown failing by hand on the two halves of the fix)
    "child_processes": ["tests/test_child_processes.py"],
    # the losses' warnings; the tests of where they point cannot run under mutmut (its
    # trampolines are frames caller_stacklevel counts): those mutants are killed by hand
    "errors": ["tests/test_losses_shared.py", "tests/test_losses.py", "tests/test_errors.py"],
    "jsonio": ["tests/test_jsonio.py"],
    # the extras' own tests (the rest of test_packaging reads files mutmut does not copy)
    "extras": [f"tests/test_packaging.py::{name}" for name in (
        "test_require_returns_the_module_when_installed",
        "test_require_names_the_extra_and_the_missing_package",
        "test_require_names_the_package_a_module_imports_when_that_one_is_missing",
        "test_an_unknown_extra_is_refused_before_any_import",
        "test_missing_extra_and_is_installed",
        "test_a_missing_extra_is_a_gradlab_error_and_an_import_error",
        "test_require_installed_names_the_first_missing_module_and_its_extra",
        "test_a_copy_installed_from_a_folder_is_told_how_to_add_an_extra_there")],
    "siglip_loss": ["tests/test_siglip_loss.py", "tests/functional/test_siglip.py",
                    "tests/equivalence/test_siglip.py",
                    "tests/test_loss_module_calls.py"],
    "interop/pml": ["tests/interop/test_pml.py"],
    "integrations/recorded": [
        "tests/integrations/test_recorded.py",
        "tests/integrations/test_open_clip.py",  # what a collector says of its loss's logits
        *OPEN_CLIP_GLOO_PAIRS,
    ],
    "integrations/settings": [
        "tests/integrations/test_settings.py",
        "tests/integrations/test_lightning_hooks.py::"
        "test_a_monitor_closed_by_hand_during_training_warns_once_and_training_goes_on",
        "tests/integrations/test_lightning_hooks.py::"
        "test_overwrite_on_a_fit_restored_at_a_later_step_warns_before_removing",
        # the warning of a resume behind the run's end (two short fits)
        "tests/integrations/test_lightning.py::"
        "test_resume_from_a_checkpoint_before_the_run_s_last_step_warns_that_steps_repeat",
    ],
    # the hooks called with a stand-in Trainer (seconds); of test_lightning.py only the tests
    # that fit nothing (a Trainer.fit takes seconds per mutant on a loaded machine)
    "integrations/lightning": [
        "tests/integrations/test_lightning_hooks.py",
        "tests/integrations/test_lightning_options.py",
        "tests/monitor/test_watched.py",  # copies and pickles of its watched loss
        *(f"tests/integrations/test_lightning.py::{name}" for name in (
            "test_the_watched_loss_is_the_loss_outside_training_and_keeps_its_attributes",
            "test_bad_calls_raise_naming_the_argument",
            "test_a_log_dir_that_is_a_file_is_refused_at_the_call",
            "test_a_watched_function_keeps_its_attributes_and_refuses_what_it_lacks")),
        # the callback given to a Hugging Face Trainer names the one to use
        "tests/integrations/test_transformers.py::"
        "test_the_lightning_callback_in_a_hugging_face_trainer_names_the_right_one",
        # a loss watched again is wrapped once (two steps of a real fit)
        "tests/integrations/test_lightning.py::test_a_loss_watched_again_is_wrapped_once",
        # the warnings: a prefix="" key the module logs, a loss watched by a second callback,
        # a fit that resumes behind the run's last step (real fits of 2-6 steps)
        *(f"tests/integrations/test_lightning.py::{name}" for name in (
            "test_an_empty_prefix_that_repeats_a_key_the_module_logs_warns_once",
            "test_a_loss_watched_by_a_second_callback_warns_that_the_first_logs_nothing",
            "test_resume_from_a_checkpoint_before_the_run_s_last_step_warns_that_steps_repeat",
            "test_resume_without_the_trainer_s_checkpoint_warns_that_steps_repeat")),
        # checkpoints, the tuner, a second fit, a later Trainer (real fits of 2-8 steps)
        "tests/integrations/test_lightning_fits.py",
        # two callbacks on one folder or under one prefix, refused at setup
        *(f"tests/integrations/test_lightning.py::{name}" for name in (
            "test_a_second_callback_on_the_same_folder_is_refused_at_setup",
            "test_two_callbacks_forwarding_under_one_prefix_are_refused_and_under_two_both_log",
            # a sink beside a logger of its backend; manual optimization's raw optimizer
            "test_a_sink_beside_a_logger_of_its_backend_warns_that_each_value_is_logged_twice",
            "test_manual_optimization_that_steps_the_raw_optimizer_is_told_why_nothing_is_logged",
            # a Monitor stepped by hand under a raw optimizer: its count, a second fit
            "test_the_same_trainer_fitting_again_goes_on_with_a_monitor_stepped_by_hand",
            "test_manual_optimization_that_steps_the_monitor_by_hand_logs_and_is_not_told_"
            "otherwise",
        )),
    ],
    # the events in the Trainer's order with stand-ins (seconds); of the tiny-BERT tests only
    # those that train nothing (a training takes seconds per mutant on a loaded machine)
    "integrations/transformers": [
        "tests/integrations/test_transformers_events.py",
        # which log_history entry takes a step's values (stand-in Trainer events)
        "tests/integrations/test_transformers_eval_entries.py",
        # two short trainings: the console lines' keys, the epoch that max_steps cuts short
        "tests/integrations/test_transformers.py::"
        "test_the_console_lines_show_the_trainers_keys_and_the_backends_get_gradlabs",
        "tests/integrations/test_transformers_logging_strategy.py::"
        "test_an_epoch_that_max_steps_cuts_short_is_logged_with_its_gradients",
        "tests/monitor/test_watched.py",  # copies of its watched loss
        # a crashed train() closing the Monitor, a forgotten attach, watch(inputs=): stand-in
        # trainers (the real-Trainer runs are marked slow and left out)
        "tests/integrations/test_transformers_crash.py",
        "tests/integrations/test_transformers_wiring.py", "-m", "not slow",
        # the warning names the caller's line: under mutmut, a trampoline's
        "--deselect=tests/integrations/test_transformers_wiring.py::"
        "test_a_watched_loss_in_a_training_step_of_a_trainer_without_the_callback_warns_once",
        # under mutmut the warning's frame is its trampoline, not the caller's line
        "--deselect=tests/integrations/test_transformers_events.py::"
        "test_the_unattached_warning_points_at_the_line_that_called_on_log",
        "--deselect=tests/integrations/test_transformers_events.py::"
        "test_a_step_without_a_watched_call_is_told_at_the_step_s_line",
        *(f"tests/integrations/test_transformers.py::{name}" for name in (
            "test_attach_moves_the_callback_before_the_reporting_callbacks",
            "test_the_watched_loss_is_the_loss_outside_a_training_step",
            "test_bad_arguments_are_refused_with_the_argument_and_the_value",
            "test_a_misspelt_keyword_is_named_with_the_callbacks_own_keywords")),
        # a watched sentence-transformers module (no training): its forward's name
        "tests/integrations/test_sentence_transformers_roles.py::test_names_and_rewrapping",
        # the callback given to a Lightning Trainer names the one to use
        "tests/integrations/test_lightning.py::"
        "test_the_hugging_face_callback_in_a_lightning_trainer_names_the_right_one",
        # tiny real Trainers, a fraction of a second each: the logging schedules, one folder
        # per callback, unreadable calls, a dataset dict's unwatched losses
        "tests/integrations/test_transformers_logging_strategy.py",
        "tests/integrations/test_transformers_two_callbacks.py",
        "tests/integrations/test_transformers_unreadable_loss.py",
        "tests/integrations/test_sentence_transformers_datasets.py",
        # watch() refusing a cached loss already inside MatryoshkaLoss (no training)
        "tests/integrations/test_sentence_transformers_matryoshka.py::"
        "test_a_cached_loss_wrapped_then_watched_is_refused_at_watch",
    ],
    # no SentenceTransformerTrainer run (seconds per mutant); the roles tests call the losses
    "integrations/sentence_transformers": [
        "tests/integrations/test_sentence_transformers_roles.py",
        "tests/integrations/test_sentence_transformers_directions.py",
        *(f"tests/integrations/test_sentence_transformers.py::{name}" for name in (
            "test_mnrl_records_the_query_to_doc_matrix_with_hard_negatives_past_b",
            "test_the_geometry_is_that_of_the_anchors_against_positives_and_hard_negatives",
            "test_mnsrl_records_the_symmetric_term_as_t2i",
            "test_cached_mnrl_stitches_its_mini_batches_into_mnrl_s_matrix_and_anatomy",
            "test_gist_records_anchor_positive_and_negative_columns_without_masked_pairs",
            "test_the_similarity_returns_the_wrapped_function_s_matrix_and_gradient",
            "test_bad_arguments_are_refused",
            "test_a_pairwise_similarity_is_named_not_read_as_a_matrix",
            "test_a_pair_loss_given_a_recording_similarity_around_cos_sim_is_refused_when_"
            "watched",
            "test_a_pair_loss_given_its_own_similarity_recorded_is_refused_when_watched",
            "test_a_loss_on_pairs_is_refused_saying_it_has_no_matrix_and_what_to_watch",
            "test_record_scores_of_a_loss_class_asks_for_an_instance",
            "test_gist_given_a_recording_similarity_around_cos_sim_is_refused_when_watched")),
        "tests/integrations/test_sentence_transformers_matryoshka.py",
    ],
    # open_clip's loss.py loaded by file and the stand-ins, one process (no gloo pair)
    "integrations/open_clip": [
        "tests/integrations/test_open_clip.py", *OPEN_CLIP_GLOO_PAIRS,
        "tests/integrations/test_open_clip_ranks.py",
    ],
}
"""Library adapter module (``gradlab/<group>.py``: interop/, integrations/) -> its fast tests
(small random models, CPU, seconds per mutant)."""

EQUIVALENCE_TESTS = [
    "tests/equivalence/test_synthetic.py", "tests/equivalence/test_objectives.py",
    "tests/equivalence/test_collectives.py", "tests/equivalence/test_builtin.py",
    "tests/equivalence/test_cached_mnrl_step.py", "tests/equivalence/test_problem.py",
    "tests/equivalence/test_steps.py", "tests/equivalence/test_runner.py",
    "tests/equivalence/test_compare_results.py", "tests/equivalence/test_compare_measures.py",
    "tests/equivalence/test_compare.py", "tests/equivalence/test_siglip.py",
    "tests/equivalence/test_docs_page.py", "tests/test_cli_equivalence.py",
    "tests/equivalence/test_checks_before_work.py", "tests/equivalence/test_no_gradient.py",
    "tests/equivalence/test_nothing_compared.py", "tests/equivalence/test_randomness.py",
    "tests/equivalence/test_non_finite.py", "tests/equivalence/test_batch_norm.py",
    "tests/equivalence/test_unsplit.py",
    # in process only: the two-process runs start gloo workers (seconds each; mutmut's
    # coverage does not follow them; their mutants are killed by hand), the cached-mnrl case
    # imports sentence-transformers
    "-m", "not slow",
    "--deselect=tests/equivalence/test_docs_page.py::test_the_two_process_example_runs",
    "--deselect=tests/test_cli_equivalence.py::"
    "test_one_process_candidates_exit_0_when_equivalent_and_1_when_not[argv4-0]",
    "--deselect=tests/test_cli_equivalence.py::test_the_console_command_runs_a_distributed_candidate",
    "--deselect=tests/equivalence/test_no_gradient.py::"
    "test_no_gradient_in_any_of_several_processes_is_said_too",
    "--deselect=tests/equivalence/test_randomness.py::"
    "test_every_step_in_the_processes_starts_from_the_callers_random_state",
]
"""The equivalence modules' fast tests: one process, small problems (seconds per mutant)."""

EQUIVALENCE_MODULES = ("builtin", "collectives", "compare", "objectives", "problem", "runner",
                       "sentence_transformers", "steps", "synthetic")  # fmt: skip

PLOTTING_TESTS = {
    "plotting/style": ["tests/plotting/test_style.py",  # step_axis: every caller's step ticks
                       *(f"tests/plotting/test_monitor_plots.py::{test}" for test in (
                           "test_large_step_numbers_are_written_out_not_offset",
                           "test_plotting_leaves_the_callers_matplotlib_settings_as_they_were")),
                       # save_figure names the figure a nameless OSError stopped
                       "tests/test_cli_faults.py::"
                       "test_a_full_disk_inside_matplotlibs_writer_names_the_figure",
                       "tests/plotting/test_monitor_figures.py::"
                       "test_a_run_of_one_or_two_steps_is_ticked_at_its_steps_only",
                       "tests/plotting/test_scene_geometry_figure.py::"
                       "test_two_logged_steps_are_ticked_at_the_two_steps_only"],
    "plotting/anatomy": ["tests/plotting/test_anatomy_figure.py"],
    "plotting/operating_region": ["tests/plotting/test_operating_region_plots.py"],
    "plotting/report_figures": ["tests/plotting/test_report_figures.py"],
    "plotting/scene_geometry": ["tests/plotting/test_scene_geometry_figure.py"],
    "plotting/studies": ["tests/plotting/test_study_plots.py"],
    # every test of gradlab plot's module: the header's schedules (gaps where a key was due),
    # a disabled quantity and one a resumption logs again are read by tests across the file
    # (a subset of it left the functions added for them without a test under mutmut)
    "plotting/monitor": ["tests/plotting/test_monitor_figures.py",
                         "tests/plotting/test_monitor_plots.py",
                         "tests/plotting/test_monitor_summaries.py",
                         "tests/plotting/test_monitor_axes.py",  # y scales, flat lines, gaps
                         "tests/plotting/test_monitor_long_runs.py",  # grouped means, resumptions
                         "tests/plotting/test_monitor_legends.py",  # bands, runs not logging
                         # the note of a disabled quantity, as gradlab plot says it
                         "tests/monitor/test_disabled_in_the_log.py"],
    "plotting/losses": ["tests/plotting/test_loss_figures.py",
                        "tests/experiments/test_fappy_lemma.py::test_lemma1_measurement"],
    "plotting/tie_aware": ["tests/plotting/test_tie_aware_figures.py"],
}
"""Plotting module (``gradlab/<group>.py``) -> its fast figure tests (tiny inputs, Agg, seconds
per mutant): they read the drawn Axes back, never the module's helpers."""

GROUPS = {
    **{f"functional/{module}": ([f"gradlab/functional/{module}.py"],
                                [*tests, *DEFAULTS_TESTS, *LOSS_TESTS])
       for module, tests in FUNCTIONAL_TESTS.items()},
    "losses": (["gradlab/losses.py"],
               ["tests/test_losses.py", "tests/test_loss_module_calls.py", "tests/test_defaults.py",
                # the warning of a masked call (cross-modal SmoothAP and Blackbox AP)
                "tests/test_losses_degenerate.py",
                "tests/functional/test_score_losses_inputs.py",  # a learnable scale's refusal
                "tests/functional/test_functional_loss_calls.py",  # the cross-modal twin
                *LOSS_TESTS]),
    **{f"monitor/{module}": ([f"gradlab/monitor/{module}.py"], tests)
       for module, tests in MONITOR_TESTS.items()},
    **{f"symbolic/{module}": ([f"gradlab/symbolic/{module}.py"], tests)
       for module, tests in SYMBOLIC_TESTS.items()},
    **{group: ([f"gradlab/{group}.py"], tests) for group, tests in STUDY_TESTS.items()},
    **{group: ([f"gradlab/{group}.py"], tests) for group, tests in LIBRARY_TESTS.items()},
    **{group: ([f"gradlab/{group}.py"], tests) for group, tests in PLOTTING_TESTS.items()},
    **{f"equivalence/{module}": ([f"gradlab/equivalence/{module}.py"], EQUIVALENCE_TESTS)
       for module in EQUIVALENCE_MODULES},
}  # fmt: skip
"""Group name -> (mutmut ``only_mutate`` globs, test paths that may kill its mutants)."""

UNDER_MUTMUT = [
    f"--deselect={test}" for test in (
        "tests/test_losses.py::test_the_degenerate_batch_warning_names_the_line_that_called_the_loss",
        "tests/test_losses_shared.py::test_the_warning_points_at_the_line_that_called_the_loss",
        "tests/plotting/test_monitor_figures.py::"
        "test_the_resumption_warning_names_the_line_that_called_load_runs",
    )
]  # fmt: skip
"""Tests that cannot pass under mutmut, deselected in every group: a loss's warning names the
first frame outside gradlab and torch, and a plot warning its caller's line two frames up, which
under mutmut is one of its trampolines (in its own package), not the caller's line. A failing
test stops mutmut's first, instrumented run."""

# mutmut's exit-code convention (mutmut.stats.status_by_exit_code), folded into our columns.
STATUS = {1: "killed", 3: "killed", 37: "killed", 0: "survived", 5: "no_tests", 33: "no_tests",
          36: "timeout", -24: "timeout", 34: "skipped"}  # fmt: skip


WRAPPERS = ("outside_autocast", "positional_candidate_mask", "renamed_keyword",
            "_form_errors_fail")
"""gradlab's decorators that wrap a function without changing what its body does (autocast off,
a deprecated argument form read, a check's errors made a failed verdict). mutmut leaves every
decorated function out (a decorator may have side effects when the function is copied); a
function decorated by these only is mutated like any other: mutmut's trampoline keeps the
decorators, and its copies (the original and each mutant, one change in its body) lose them
(:func:`mutate_wrapped_functions`), so that a wrapper runs once per call."""


def wrapped_only(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a function's decorators are all :data:`WRAPPERS` (called or not), and it has one.

    Example:
        >>> tree = ast.parse("@outside_autocast\\ndef f(x):\\n    return x\\n"
        ...                  "@renamed_keyword('a', 'b')\\n@property\\ndef g(x):\\n    return x\\n")
        >>> [wrapped_only(node) for node in tree.body]
        [True, False]
    """

    def name(decorator: ast.expr) -> str | None:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return target.id if isinstance(target, ast.Name) else None

    return bool(node.decorator_list) and all(name(d) in WRAPPERS for d in node.decorator_list)


def mutate_wrapped_functions() -> None:
    """Make mutmut mutate the functions :func:`wrapped_only` accepts (see :data:`WRAPPERS`): its
    rule that skips a decorated function sees them undecorated. Called before mutmut generates
    mutants, in this process (the generator of :func:`mutant_diffs`) and in the one that runs
    mutmut (:func:`_mutmut_run`)."""
    import libcst as cst
    from mutmut.mutation import file_mutation
    from mutmut.mutation.file_mutation import MutationVisitor

    skip = MutationVisitor._skip_node_and_children
    if getattr(skip, "gradlab_wrappers", False):
        return

    def wrapped(decorator: cst.Decorator) -> bool:
        target = decorator.decorator
        target = target.func if isinstance(target, cst.Call) else target
        return isinstance(target, cst.Name) and target.value in WRAPPERS

    def skips(self, node: cst.CSTNode) -> bool:
        if not (isinstance(node, cst.FunctionDef) and node.decorators
                and all(wrapped(d) for d in node.decorators)):  # fmt: skip
            return skip(self, node)
        decorators = node.decorators  # the node is frozen and its metadata keyed by identity:
        object.__setattr__(node, "decorators", ())  # the rule reads it undecorated, once
        try:
            return skip(self, node)
        finally:
            object.__setattr__(node, "decorators", decorators)

    skips.gradlab_wrappers = True  # type: ignore[attr-defined]
    MutationVisitor._skip_node_and_children = skips

    arrange = file_mutation.function_trampoline_arrangement

    def arranged(function, mutants, class_name):
        """mutmut's trampoline keeps the function's decorators; its copies (the original and
        each mutant) lose the wrappers, which would otherwise run twice and name a copy in
        their messages (``x_smooth_ap__mutmut_orig(...)``)."""
        declarations, nodes, assignments, names = arrange(function, mutants, class_name)
        trampoline, *copies = nodes
        copies = [node.with_changes(decorators=[d for d in node.decorators if not wrapped(d)])
                  if isinstance(node, cst.FunctionDef) else node for node in copies]  # fmt: skip
        return declarations, [trampoline, *copies], assignments, names

    file_mutation.function_trampoline_arrangement = arranged


_LAUNCH = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from tools.mutation import mutate_wrapped_functions; mutate_wrapped_functions(); "
    "[sys.modules.pop(m) for m in list(sys.modules) if m == 'tools' or m.startswith('tools.')]; "
    "sys.path.pop(0); "
    "from mutmut.__main__ import cli; sys.argv[0] = 'mutmut'; cli()"
)
"""mutmut's command line, run after :func:`mutate_wrapped_functions` (argv: the scratch clone,
then mutmut's arguments). The clone's ``tools`` is imported for the patch and forgotten
before mutmut starts, so that the tests import the clone's own files, as they would
without it."""


def _mutmut_config(only_mutate: list[str], tests: list[str]) -> str:
    quoted = ", ".join(json.dumps(p) for p in only_mutate)
    selected = ", ".join(json.dumps(p) for p in [*tests, *UNDER_MUTMUT])
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["gradlab/"]\n'
        # the symbolic record tests read the committed audit.json through tools/readme_audit;
        # test_adapters runs the README's Monitor examples as written; the study tests compare
        # the studies' full settings with those of the published runs (figures/studies/), the
        # Lemma 1 test its first configurations with those of the published figure, the
        # operating-region tests its settings with those of its two published studies
        'also_copy = ["tools/", "benchmarks/results/", "README.md", "docs/", "figures/studies/", '
        '"figures/fappy_lemma1_gradient.json", '
        '"figures/operating_region_p_vs_batch_size_10_classes.json", '
        '"figures/operating_region_training_dynamics.json"]\n'
        f"only_mutate = [{quoted}]\n"
        f"pytest_add_cli_args_test_selection = [{selected}]\n"
        'pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q", '
        '"-o", "addopts="]\n'
    )


def _scratch_clone(workdir: Path) -> None:
    if workdir.exists():
        shutil.rmtree(workdir)
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(workdir)], check=True)


def _collect(workdir: Path) -> dict[str, str]:
    """Mutant name -> status, read from mutmut's per-file ``.meta`` records."""
    statuses = {}
    for meta in (workdir / "mutants").rglob("*.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            statuses[name] = STATUS.get(code, "suspicious" if code is not None else "not_checked")
    return statuses


PACKAGES = {
    "functional": "gradlab/functional/",
    "monitor": "gradlab/monitor/",
    "symbolic": "gradlab/symbolic/",
    "losses.py": "gradlab/losses.py",
    "data": "gradlab/data/",
    "experiments": "gradlab/experiments/",
    "report": "gradlab/report/",
    "cli.py": "gradlab/cli.py",
    "models.py": "gradlab/models.py",
    "training.py": "gradlab/training.py",
    "interop": "gradlab/interop/",
    "integrations": "gradlab/integrations/",
    "plotting": "gradlab/plotting/",
    "equivalence": "gradlab/equivalence/",
    "other top-level modules": "gradlab/*.py",
}
"""Roll-up name -> the path prefix of the modules its groups mutate (a prefix ending in
``*.py``: the modules directly in that folder). The first that holds all of a group's modules
is its roll-up, so the last one gathers the top-level modules without a roll-up of their own."""

COUNTED = ("killed", "survived", "no_tests", "timeout")


def scratch_folder(name: str) -> Path:
    """The scratch clone of one group (``/`` in a group name becomes ``-``)."""
    return Path(tempfile.gettempdir()) / f"gradlab-mutants-{name.replace('/', '-')}"


def module_name(path: str) -> str:
    """The dotted module of a source path, as mutmut names it (``gradlab/losses.py`` ->
    ``gradlab.losses``; a package's ``__init__.py`` -> the package)."""
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def function_hashes(source: str, module: str) -> dict[str, str]:
    """mutmut's key of every function it mutates in ``source`` -> a hash of that function.

    Keys follow mutmut's mutant names without the ``__mutmut_N`` suffix: ``module.x_name`` for a
    module-level function, ``module.xǁClassǁmethod`` for a method (``Outer.Inner`` for a nested
    class); a function inside a function is part of it. The hash is the SHA-256 of the
    function's AST (decorators and signature included) without its docstring, so comments,
    formatting and docstrings do not mark a function as changed; a function decorated by
    :data:`WRAPPERS` only hashes with a mark, so that the records made before mutmut mutated
    such functions (none of their mutants) are out of date.

    Example:
        >>> before = function_hashes("def f(x):\\n    return x + 1\\n", "m")
        >>> list(before)
        ['m.x_f']
        >>> before == function_hashes('def f(x):\\n    "Doc."\\n    return x + 1  # ok\\n', "m")
        True
        >>> before == function_hashes("def f(x):\\n    return x - 1\\n", "m")
        False
    """
    hashes = {}

    def visit(body: list[ast.stmt], owner: str | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, node.name if owner is None else f"{owner}.{node.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                bare = copy.copy(node)
                if ast.get_docstring(node, clean=False) is not None:
                    bare.body = node.body[1:]
                key = f"x_{node.name}" if owner is None else f"xǁ{owner}ǁ{node.name}"
                # a wrapped function's hash changed when mutmut began to mutate it: recorded
                # with no mutants, it runs again in the next incremental run
                mark = "wrapped, mutated" if wrapped_only(node) else ""
                digest = hashlib.sha256((ast.dump(bare) + mark).encode()).hexdigest()[:16]
                hashes[f"{module}.{key}"] = digest

    visit(ast.parse(source).body, None)
    return hashes


def function_of(mutant: str) -> str:
    """The function key of a mutant name (``m.x_f__mutmut_3`` -> ``m.x_f``)."""
    return mutant.rsplit("__mutmut_", 1)[0]


def committed_hashes(
    only_mutate: list[str], root: Path = ROOT, rev: str = "HEAD"
) -> dict[str, str]:
    """:func:`function_hashes` of every committed file that a group's globs select, at ``rev``
    (a run mutates the committed tree, not the working copy)."""
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], cwd=root, check=True,
                            capture_output=True, text=True).stdout.split()  # fmt: skip
    hashes = {}
    for path in sorted(p for p in listed if any(fnmatch.fnmatch(p, g) for g in only_mutate)):
        source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
        hashes.update(function_hashes(source, module_name(path)))
    return hashes


def changed_functions(
    recorded: dict[str, str], current: dict[str, str]
) -> tuple[list[str], list[str]]:
    """Which functions an incremental run mutates again, and which records it drops.

    Args:
        recorded: function key -> hash, as the last run recorded them.
        current: function key -> hash now (:func:`committed_hashes`).

    Returns:
        ``(rerun, removed)``: the keys whose hash changed or that are new, and the recorded keys
        that no longer exist; both sorted.

    Example:
        >>> changed_functions({"m.x_f": "1", "m.x_g": "2", "m.x_h": "3"},
        ...                   {"m.x_f": "1", "m.x_g": "9", "m.x_k": "4"})
        (['m.x_g', 'm.x_k'], ['m.x_h'])
    """
    rerun = sorted(key for key, digest in current.items() if recorded.get(key) != digest)
    removed = sorted(key for key in recorded if key not in current)
    return rerun, removed


def function_records(statuses: dict[str, str], hashes: dict[str, str]) -> dict[str, dict]:
    """Per function: its hash and its mutants' counts (``generated``, the ``COUNTED`` statuses,
    ``not_checked``). Every hashed function gets a record, one without mutants too."""
    empty = {"generated": 0, **dict.fromkeys(COUNTED, 0), "not_checked": 0}
    functions = {key: {"hash": digest, **empty} for key, digest in sorted(hashes.items())}
    for mutant, status in statuses.items():
        record = functions.setdefault(function_of(mutant), {"hash": None, **empty})
        record["generated"] += 1
        if status in record:
            record[status] += 1
    return functions


BY_HAND = "Killed by hand:"
"""The start of a judgement that records a mutant killed by tests run by hand (tests that
cannot run under mutmut): a detection, not an equivalence."""
CUDA_ONLY = "CUDA only:"
"""The start of a judgement of a mutant that no CPU input reaches: not shown killed, so it
counts as undetected in the share until its tests run on a GPU."""


def judgement_counts(judged: dict[str, str]) -> dict[str, int]:
    """How many of the judged mutants (mutant -> reason) are equivalent, killed by hand
    (:data:`BY_HAND`) and CUDA only (:data:`CUDA_ONLY`).

    Example:
        >>> judgement_counts({"a": "same", "b": "Killed by hand: t", "c": "CUDA only: moved"})
        {'equivalent_proper': 1, 'killed_by_hand': 1, 'cuda_only': 1}
    """
    by_hand = sum(reason.startswith(BY_HAND) for reason in judged.values())
    cuda = sum(reason.startswith(CUDA_ONLY) for reason in judged.values())
    return {"equivalent_proper": len(judged) - by_hand - cuda, "killed_by_hand": by_hand,
            "cuda_only": cuda}  # fmt: skip


def judged_share(killed: int, undetected: int, kinds: dict[str, int]) -> float | None:
    """:func:`killed_share` with the judged mutants told apart (:func:`judgement_counts`): one
    killed by hand counts as killed, a CUDA-only one as undetected, an equivalent one not."""
    return killed_share(killed + kinds["killed_by_hand"], undetected - kinds["killed_by_hand"],
                        kinds["equivalent_proper"])  # fmt: skip


def group_totals(functions: dict[str, dict], undetected: list[str], judged: dict[str, str]) -> dict:
    """A group's counts, equivalents, share and survivors from its function records, the
    names of its undetected (survived or untested) mutants and the reasons of those judged
    (:func:`judge`)."""
    counts = {key: sum(f[key] for f in functions.values())
              for key in ("generated", *COUNTED, "not_checked")}  # fmt: skip
    judged = {m: judged[m] for m in sorted(undetected) if m in judged}
    kinds = judgement_counts(judged)
    return {
        **counts,
        "equivalent": judged,
        **kinds,
        "killed_share_of_non_equivalent": judged_share(
            counts["killed"] + counts["timeout"], counts["survived"] + counts["no_tests"], kinds),
        "survivors": sorted(m for m in undetected if m not in judged),
    }  # fmt: skip


def diff_lines(diff: str) -> list[str]:
    """What describes a mutant in the diff ``mutmut show`` prints: its hunks' context, removed
    and added lines, without the file names and with each hunk header cut to ``@@`` (the line
    numbers move when code above the mutation changes; the mutation does not).

    Example:
        >>> diff_lines("--- m.py\\n+++ m.py\\n@@ -2,2 +2,2 @@\\n     y = 1\\n-    return x + y\\n"
        ...            "+    return x - y")
        ['@@', '     y = 1', '-    return x + y', '+    return x - y']
    """
    lines = diff.splitlines()[2:]
    return ["@@" if line.startswith("@@") else line for line in lines]


def _module_of(mutant: str) -> str:
    """The dotted module of a mutant name (``a.b.xǁC.Dǁf__mutmut_1`` -> ``a.b``)."""
    head = function_of(mutant)
    cut = min(i for i in (head.find(".x_"), head.find(".xǁ")) if i >= 0)
    return head[:cut]


@contextlib.contextmanager
def _mutmut_generator():
    """mutmut's generator, run in a scratch folder (it reads its configuration there)."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    mutate_wrapped_functions()  # as the runs generate them
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            Path("pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["gradlab/"]\n')
            yield mutate_file_contents
        finally:
            os.chdir(here)


def mutant_diffs(
    names: list[str] | None, modules: list[str], root: Path = ROOT, rev: str = "HEAD"
) -> dict[str, list[str]]:
    """:func:`diff_lines` of mutants as mutmut generates them from the committed source at
    ``rev`` (no test runs, no scratch clone): those of ``names``, or (None) every mutant of the
    dotted ``modules``. Names whose function no longer exists at ``rev`` are left out."""
    import libcst as cst
    from mutmut.mutation.diff_apply import generated_function_names, parse_generated_function
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    def function_code(lines: list[str], spans: dict, generated: str, local: str) -> str:
        """One generated function, named as in the source (mutmut's ``show`` does the same)."""
        span = spans[generated]
        original, owner = orig_function_and_class_names_from_key(local)
        parsed = parse_generated_function("".join(lines[span.start - 1 : span.end]),
                                          name=generated, is_method=owner is not None)  # fmt: skip
        return cst.Module([parsed.with_changes(name=cst.Name(original))]).code.strip()

    wanted = None if names is None else set(names)
    if wanted is not None:
        modules = sorted({_module_of(m) for m in wanted})
    diffs = {}
    with _mutmut_generator() as generate:
        for module in modules:
            path = module.replace(".", "/") + ".py"
            shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root,
                                   capture_output=True, text=True)  # fmt: skip
            if shown.returncode:
                continue
            mutated = generate(path, shown.stdout)
            lines = mutated.code.splitlines(keepends=True)
            spans = mutated.line_span_by_function_name
            originals = {}
            for local in mutated.mutant_names:
                name = f"{module}.{local}"
                if wanted is not None and name not in wanted:
                    continue
                orig, generated = generated_function_names(local)
                if orig not in originals:
                    originals[orig] = function_code(lines, spans, orig, local)
                changed = function_code(lines, spans, generated, local)
                diffs[name] = diff_lines("\n".join(difflib.unified_diff(
                    originals[orig].split("\n"), changed.split("\n"),
                    fromfile=path, tofile=path, lineterm="")))  # fmt: skip
    return diffs


def judge(undetected: list[str], diffs: dict[str, list[str]], equivalents: list[dict]) -> dict:
    """The undetected mutants judged equivalent: mutant name -> reason.

    A judgement (an entry of ``tools/mutation_equivalents.json``: the ``mutant`` it was written
    for, that mutant's ``diff`` (:func:`diff_lines`) and the ``reason``) holds for the mutant of
    the same function with the same diff, whatever mutmut numbers it now: an edit elsewhere in
    the function renumbers its mutants but leaves the judgement attached; an edit of the lines
    the diff shows detaches it (a judgement of code that changed is not carried over).

    Example:
        >>> entry = {"mutant": "m.x_f__mutmut_2", "diff": ["@@", "-    a", "+    b"],
        ...          "reason": "the same sum"}
        >>> judge(["m.x_f__mutmut_5", "m.x_g__mutmut_2"],
        ...       {"m.x_f__mutmut_5": ["@@", "-    a", "+    b"],
        ...        "m.x_g__mutmut_2": ["@@", "-    a", "+    b"]}, [entry])
        {'m.x_f__mutmut_5': 'the same sum'}
    """
    reasons = {(function_of(e["mutant"]), tuple(e["diff"])): e["reason"] for e in equivalents}
    judged = {}
    for mutant in sorted(undetected):
        key = (function_of(mutant), tuple(diffs.get(mutant, ())))
        if key in reasons:
            judged[mutant] = reasons[key]
    return judged


def _judged(undetected: list[str], root: Path, rev: str) -> dict[str, str]:
    """:func:`judge` of a run's undetected mutants against the recorded judgements."""
    equivalents = _equivalents()
    if not undetected or not equivalents:
        return {}
    return judge(undetected, mutant_diffs(undetected, [], root, rev), equivalents)


def recheck_functions(recorded: dict) -> list[str]:
    """The functions a ``--recheck`` of a group recorded by an incremental run runs again: those
    of that run, and every function with a survivor that no judgement covers.

    A survivor of a function outside the incremental run was decided by an earlier run in
    another clone: in this clone its mutants were never run (mutmut left them unchecked), so a
    recheck limited to the incremental run's functions kept that old verdict however many new
    tests kill the mutant. Running such a function again runs all of its mutants here.

    Example:
        >>> recheck_functions({"incremental": {"functions": ["m.x_f"]},
        ...                    "survivors": ["m.x_g__mutmut_2", "m.x_h__mutmut_1"],
        ...                    "equivalent": {"m.x_h__mutmut_1": "same value"}})
        ['m.x_f', 'm.x_g']
    """
    judged = recorded.get("equivalent", {})
    undetected = {function_of(m) for m in recorded.get("survivors", []) if m not in judged}
    return sorted(set(recorded["incremental"]["functions"]) | undetected)


def merge_incremental(old: dict, fresh: dict, rerun: list[str], current: dict[str, str]) -> dict:
    """The group record after an incremental run: ``fresh``'s records of the re-run functions,
    ``old``'s of the unchanged ones, none of the removed ones; totals recomputed."""
    functions = {key: old["functions"][key] for key in current
                 if key not in rerun and key in old["functions"]}  # fmt: skip
    functions.update({key: fresh["functions"][key] for key in rerun if key in fresh["functions"]})
    kept_undetected = [m for m in [*old["survivors"], *old["equivalent"]]
                       if function_of(m) in functions and function_of(m) not in rerun]  # fmt: skip
    fresh_undetected = [m for m in [*fresh["survivors"], *fresh["equivalent"]]
                        if function_of(m) in rerun]  # fmt: skip
    functions = dict(sorted(functions.items()))
    # the kept functions are unchanged since, so their mutants' names hold at fresh's commit
    undetected = [*kept_undetected, *fresh_undetected]
    return {
        **fresh,
        **group_totals(functions, undetected, _judged(undetected, ROOT, fresh["commit"])),
        "incremental": {"since": old.get("commit"), "functions": rerun},
        "functions": functions,
    }


def reapply_equivalents(group: dict, equivalents: list[dict], diffs: dict[str, list[str]]) -> dict:
    """A recorded group with its undetected mutants (survivors and equivalents) judged again
    against ``equivalents`` (:func:`judge`; ``diffs``: the undetected mutants' diffs at the
    group's commit): after an entry is added or removed, without a mutmut run.

    Example:
        >>> group = {"functions": {"m.x_f": {"generated": 2, "killed": 1, "survived": 1,
        ...          "no_tests": 0, "timeout": 0, "not_checked": 0}},
        ...          "survivors": ["m.x_f__mutmut_2"], "equivalent": {}}
        >>> entry = {"mutant": "m.x_f__mutmut_1", "diff": ["@@", "-a", "+b"], "reason": "same"}
        >>> judged = reapply_equivalents(group, [entry], {"m.x_f__mutmut_2": ["@@", "-a", "+b"]})
        >>> judged["survivors"], judged["equivalent"], judged["killed_share_of_non_equivalent"]
        ([], {'m.x_f__mutmut_2': 'same'}, 1.0)
    """
    undetected = [*group["survivors"], *group["equivalent"]]
    judged = judge(undetected, diffs, equivalents)
    return {**group, **group_totals(group["functions"], undetected, judged)}


def _undetected_diffs(group: dict) -> dict[str, list[str]]:
    undetected = [*group["survivors"], *group["equivalent"]]
    return mutant_diffs(undetected, [], ROOT, group["commit"]) if undetected else {}


def _equivalents() -> list[dict]:
    return json.loads(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else []


def write_equivalents(entries: list[dict], path: Path = EQUIVALENTS) -> None:
    """Write the judgements sorted by mutant, one JSON line per diff line (diff-friendly)."""
    entries = sorted(entries, key=lambda e: (function_of(e["mutant"]), e["diff"], e["mutant"]))
    path.write_text(json.dumps(entries, indent=1) + "\n")


def add_judgements(recorded: dict[str, dict], judgements: list[tuple[str, str]]) -> set[str]:
    """Record ``(mutant, reason)`` judgements of recorded undetected mutants in
    ``tools/mutation_equivalents.json`` (each with its diff at its group's commit; a judgement
    of the same function and diff is replaced). Returns the groups they belong to.

    Raises:
        ValueError: a mutant that no recorded group left undetected.
    """
    owners = {}
    for mutant, _ in judgements:
        owners[mutant] = next((name for name, group in recorded.items()
                               if mutant in [*group.get("survivors", []),
                                             *group.get("equivalent", {})]), None)  # fmt: skip
        if owners[mutant] is None:
            raise ValueError(f"{mutant} is no recorded group's undetected mutant")
    diffs = {}
    for owner in set(owners.values()):  # one generator run per group
        mutants = [m for m, o in owners.items() if o == owner]
        diffs.update(mutant_diffs(mutants, [], ROOT, recorded[owner]["commit"]))
    entries = _equivalents()
    for mutant, reason in judgements:
        diff = diffs[mutant]
        entries = [e for e in entries if (function_of(e["mutant"]), e["diff"])
                   != (function_of(mutant), diff)]  # fmt: skip
        entries.append({"mutant": mutant, "diff": diff, "reason": reason})
    touched = set(owners.values())
    write_equivalents(entries)
    return touched


def killed_share(killed: int, undetected: int, equivalent: int) -> float | None:
    """Killed share of the non-equivalent mutants (None when every mutant is equivalent).

    A mutant no test reaches (``no_tests``) counts as undetected, as a survivor does; a timeout
    counts as detected (the tests notice a mutant that hangs).
    """
    non_equivalent = killed + undetected - equivalent
    return killed / non_equivalent if non_equivalent else None


def prepare_recheck(workdir: Path, only_mutate: list[str], tests: list[str]) -> list[str]:
    """Bring a group's scratch clone to the committed tree and name the mutants to run again:
    those the last run did not detect or did not check. mutmut keeps every other verdict and
    regenerates the mutants of changed functions.

    mutmut maps only *new* tests to the functions they reach; a test edited since the
    mapping keeps its old entry, so a test that now reaches a function it did not reach
    before would never run against that function's mutants, which would stay "survived" or
    "without tests". The mapping is therefore dropped here and rebuilt by one instrumented
    run of the group's tests."""
    (workdir / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    pyproject = workdir / "pyproject.toml"
    committed = subprocess.run(["git", "show", "HEAD:pyproject.toml"], cwd=workdir, check=True,
                               capture_output=True, text=True).stdout  # fmt: skip
    pyproject.write_text(committed)  # without the [tool.mutmut] table appended to it
    subprocess.run(["git", "pull", "--quiet", "--ff-only"], cwd=workdir, check=True)
    with open(pyproject, "a") as handle:
        handle.write(_mutmut_config(only_mutate, tests))
    return sorted(m for m, s in _collect(workdir).items() if s not in ("killed", "timeout"))


def run_group(
    name: str,
    only_mutate: list[str],
    tests: list[str],
    children: int,
    recheck: bool = False,
    functions: list[str] | None = None,
) -> dict:
    """Mutate one group in a scratch clone and count what its tests caught.

    ``recheck``: run again only the mutants the group's last run in its clone left undetected.
    ``functions``: run only the mutants of these function keys (an incremental run; mutmut
    still generates every mutant of the group, and leaves the others unchecked); with
    ``recheck``, only those of the rechecked mutants.

    Raises:
        MutmutStoppedError: mutmut left some of the mutants it was asked for unchecked.
    """
    workdir = scratch_folder(name)
    names = []
    if recheck and (workdir / "mutants").is_dir():
        names = [m for m in prepare_recheck(workdir, only_mutate, tests)
                 if functions is None or function_of(m) in functions]  # fmt: skip
    else:
        _scratch_clone(workdir)
        with open(workdir / "pyproject.toml", "a") as pyproject:
            pyproject.write(_mutmut_config(only_mutate, tests))
        names = [f"{key}__mutmut_*" for key in functions or []]
    started = time.perf_counter()
    output = _mutmut_run(workdir, children, names)
    statuses = _collect(workdir)
    unchecked = unchecked_mutants(statuses, functions)
    if recheck and names and unchecked:  # mutmut reset the verdicts of functions whose tests
        # changed, and a named run leaves those unchecked: run them too
        output = _mutmut_run(workdir, children, unchecked)
        statuses = _collect(workdir)
    left = unchecked_mutants(statuses, functions)
    if left:
        raise MutmutStoppedError(
            f"{len(left)} mutant(s) left unchecked (e.g. {left[0]}): mutmut stopped; the end of "
            f"its output:\n{output}"
        )
    records = function_records(statuses, committed_hashes(only_mutate, workdir))
    undetected = [m for m, s in statuses.items() if s in ("survived", "no_tests")]
    return {
        "modules": only_mutate,
        "tests": tests,
        "commit": _head(workdir),
        **group_totals(records, undetected, _judged(undetected, workdir, "HEAD")),
        "seconds": round(time.perf_counter() - started, 1),
        "functions": records,
    }


def _mutmut_run(workdir: Path, children: int, names: list[str]) -> str:
    """Run mutmut in a scratch clone; returns the end of its output (for an error message)."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCH, str(workdir), "run", "--max-children", str(children),
         *names],
        cwd=workdir, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(workdir)},
    )  # fmt: skip
    return "\n".join(done.stdout.splitlines()[-30:])


def unchecked_mutants(statuses: dict[str, str], functions: list[str] | None) -> list[str]:
    """The mutants a run was asked to check (those of ``functions``; None: all) that mutmut
    left unchecked, e.g. because a test failed on the unmutated code and stopped its first run.

    Example:
        >>> statuses = {"m.x_f__mutmut_1": "killed", "m.x_g__mutmut_1": "not_checked"}
        >>> unchecked_mutants(statuses, ["m.x_f"]), unchecked_mutants(statuses, None)
        ([], ['m.x_g__mutmut_1'])
    """
    wanted = None if functions is None else set(functions)
    return sorted(m for m, status in statuses.items() if status == "not_checked"
                  and (wanted is None or function_of(m) in wanted))  # fmt: skip


class MutmutStoppedError(Exception):
    """mutmut left mutants of a run unchecked: its result is not recorded."""


def package_of(group: dict) -> str | None:
    """The roll-up a group belongs to: the package every one of its modules lies in."""
    for package, prefix in PACKAGES.items():
        if group["modules"] and all(_under(m, prefix) for m in group["modules"]):
            return package
    return None


def _under(module: str, prefix: str) -> bool:
    """Whether ``module`` lies under ``prefix`` (``folder/*.py``: directly in that folder)."""
    if prefix.endswith("/*.py"):
        folder = prefix[: -len("*.py")]
        rest = module[len(folder) :]
        return module.startswith(folder) and "/" not in rest and rest.endswith(".py")
    return module.startswith(prefix)


def roll_up(groups: dict[str, dict]) -> dict[str, dict]:
    """Per package, the sums over its predefined groups present in ``groups``.

    Only the groups of ``GROUPS`` count (a custom ``--group`` may overlap them); a package's
    predefined groups mutate disjoint files, so no mutant is counted twice.
    """
    packages = {}
    for package in PACKAGES:
        members = sorted(name for name, group in groups.items()
                         if name in GROUPS and package_of(group) == package)  # fmt: skip
        if not members:
            continue
        total = {key: sum(groups[m][key] for m in members) for key in ("generated", *COUNTED)}
        total["equivalent"] = sum(len(groups[m]["equivalent"]) for m in members)
        kinds = judgement_counts({f"{m}:{mutant}": reason for m in members
                                  for mutant, reason in groups[m]["equivalent"].items()})
        total.update(kinds)
        total["killed_share_of_non_equivalent"] = judged_share(
            total["killed"] + total["timeout"], total["survived"] + total["no_tests"], kinds)
        packages[package] = {"groups": members, **total}
    return packages


def _head(folder: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=folder,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def write_results(out: Path, fresh: dict[str, dict], keep_commit: bool = False) -> dict:
    """Merge ``fresh`` groups into ``out`` under an exclusive lock and rewrite the roll-ups.

    Several people run groups at once: the file is re-read inside the lock (``out`` + ``.lock``,
    ``fcntl.flock``), so a group another run wrote meanwhile is kept, and replaced atomically.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        previous = json.loads(out.read_text()) if out.exists() else {}
        groups = {**previous.get("groups", {}), **fresh}
        report = {
            "tool": "mutmut",
            "commit": previous.get("commit", "?") if keep_commit else _head(ROOT),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
            "packages": roll_up(groups),
            "groups": dict(sorted(groups.items())),
        }
        staging = out.with_name(out.name + f".{os.getpid()}.tmp")
        staging.write_text(json.dumps(report, indent=1) + "\n")
        staging.replace(out)
    return report


def selected(wanted: str) -> dict[str, tuple[list[str], list[str]]]:
    """The predefined groups ``--only wanted`` names: itself, or all under a name ending in /."""
    return {name: spec for name, spec in GROUPS.items()
            if name == wanted or (wanted.endswith("/") and name.startswith(wanted))}  # fmt: skip


def plan(only_mutate: list[str], recorded: dict | None, full: bool, root: Path = ROOT) -> dict:
    """What a run does with one group: ``{"full": reason}`` or ``{"rerun": [...], "removed":
    [...], "current": {...}}`` (``rerun`` and ``removed`` empty: the group is up to date).
    ``recorded`` is the group's entry in the results JSON; hashes are those of ``root``'s HEAD."""
    if full:
        return {"full": "--full"}
    if recorded is None:
        return {"full": "no recorded run"}
    if "functions" not in recorded:
        return {"full": "the recorded run has no per-function hashes"}
    if recorded["modules"] != only_mutate:
        return {"full": "the group mutates other modules than its recorded run"}
    current = committed_hashes(only_mutate, root)
    recorded_hashes = {key: f["hash"] for key, f in recorded["functions"].items()}
    rerun, removed = changed_functions(recorded_hashes, current)
    return {"rerun": rerun, "removed": removed, "current": current}


def adopt(group: dict) -> dict:
    """Per-function records for a group recorded before they existed (a one-off migration).

    Hashes are taken at the group's recorded commit; each function's mutant count comes from
    mutmut's own generator run on that source (no test runs), and its undetected mutants are the
    recorded survivors and equivalents. Refused (``AdoptionError``) when the generator's count
    differs from the recorded one (another mutmut version) or when untested mutants cannot be
    told from survivors. Recorded timeouts are counted as killed in the function records.
    """
    if group["no_tests"]:
        raise AdoptionError("untested mutants are not named per function in the record")
    hashes = committed_hashes(group["modules"], ROOT, group["commit"])
    statuses = dict.fromkeys([*group["survivors"], *group["equivalent"]], "survived")
    with _mutmut_generator() as generate:
        for path in sorted({"/".join(k.split(".")[:-1]) for k in hashes}):
            shown = ["git", "show", f"{group['commit']}:{path}.py"]
            source = subprocess.run(shown, cwd=ROOT, check=True, capture_output=True,
                                    text=True).stdout  # fmt: skip
            for mutant in generate(f"{path}.py", source).mutant_names:
                statuses.setdefault(f"{path.replace('/', '.')}.{mutant}", "killed")
    if len(statuses) != group["generated"]:
        raise AdoptionError(f"mutmut generates {len(statuses)} mutants at {group['commit']}, "
                              f"the recorded run {group['generated']}")  # fmt: skip
    return {**group, "functions": function_records(statuses, hashes),
            "functions_adopted": {"from_commit": group["commit"],
                                  "timeouts_counted_as_killed": group["timeout"]}}  # fmt: skip


class AdoptionError(Exception):
    """A recorded group whose per-function records cannot be rebuilt exactly."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=re.sub(r"``(.+?)``", r"\1", __doc__.splitlines()[0]))  # plain text
    parser.add_argument(
        "--group", action="append", default=[],
        help="NAME=GLOB[,GLOB]: a custom group to mutate, with --tests",
    )  # fmt: skip
    parser.add_argument(
        "--tests", action="append", default=[],
        help="test paths for --group (default: the whole tests/ folder)",
    )  # fmt: skip
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME",
        help="run this predefined group only (repeatable; a name ending in / runs every group "
        "under it, e.g. functional/); default: every group of GROUPS",
    )  # fmt: skip
    parser.add_argument("--list", action="store_true", help="print the predefined groups and exit")
    parser.add_argument("--children", type=int, default=2, help="parallel mutants (default 2)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"default {RESULTS}")
    parser.add_argument(
        "--full", action="store_true",
        help="run every mutant of each selected group (default: only the mutants of functions "
        "changed since the group's recorded run)",
    )  # fmt: skip
    parser.add_argument(
        "--dry-run", action="store_true",
        help="print, per group, the functions a run would mutate, and exit (needs no mutmut)",
    )  # fmt: skip
    parser.add_argument(
        "--adopt", action="store_true",
        help="one-off: add per-function hashes and counts to groups recorded without them, "
        "from their recorded run (mutmut's generator, no tests), and exit",
    )  # fmt: skip
    parser.add_argument(
        "--reapply-equivalents", action="store_true",
        help="re-read tools/mutation_equivalents.json into each selected group's record (its "
        "undetected mutants judged again, no mutmut run), and exit",
    )  # fmt: skip
    parser.add_argument(
        "--judge", nargs=2, action="append", default=[], metavar=("MUTANT", "REASON"),
        help="record a recorded survivor as equivalent with a one-sentence reason (stored with "
        "its diff in tools/mutation_equivalents.json), re-judge its group and exit",
    )  # fmt: skip
    parser.add_argument(
        "--recheck", action="store_true",
        help="reuse each group's scratch clone (pulled to the committed tree) and run again "
        "only the mutants its last run left undetected: minutes after new tests",
    )  # fmt: skip
    arguments = parser.parse_args(argv)
    if arguments.list:
        for name, (only_mutate, tests) in GROUPS.items():
            print(f"{name}: {' '.join(only_mutate)} <- {' '.join(tests)}")
        return 0
    unknown = [wanted for wanted in arguments.only if not selected(wanted)]
    if unknown:
        print(f"mutation.py: --only {unknown[0]!r} is not a predefined group (see --list)",
              file=sys.stderr)  # fmt: skip
        return 2
    needs_mutmut = not arguments.dry_run
    if needs_mutmut and shutil.which("mutmut", path=str(Path(sys.executable).parent)) is None:
        print("mutation.py: mutmut is not installed: pip install 'gradlab-ranking[mutation]'",
              file=sys.stderr)  # fmt: skip
        return 2
    groups = {}
    for spec in arguments.group:
        name, _, globs = spec.partition("=")
        groups[name] = (globs.split(","), arguments.tests or ["tests"])
    for wanted in arguments.only:
        groups.update(selected(wanted))
    groups = groups or GROUPS
    recorded = {}
    if arguments.out.exists():
        recorded = json.loads(arguments.out.read_text()).get("groups", {})
    if arguments.judge:
        try:
            touched = add_judgements(recorded, [tuple(j) for j in arguments.judge])
        except ValueError as error:
            print(f"mutation.py: --judge: {error}", file=sys.stderr)
            return 2
        groups = {name: GROUPS.get(name) for name in touched}
    if arguments.reapply_equivalents or arguments.judge:
        judged = {name: reapply_equivalents(recorded[name], _equivalents(),
                                            _undetected_diffs(recorded[name]))
                  for name in groups if "functions" in recorded.get(name, {})}  # fmt: skip
        write_results(arguments.out, judged, keep_commit=True)
        print(f"mutation.py: equivalents re-read for {len(judged)} groups", file=sys.stderr)
        return 0
    if arguments.adopt:
        adopted = {}
        for name in groups:
            if name in recorded and "functions" not in recorded[name]:
                try:
                    adopted[name] = adopt(recorded[name])
                except AdoptionError as reason:
                    print(f"mutation.py: {name}: not adopted: {reason}", file=sys.stderr)
        write_results(arguments.out, adopted, keep_commit=True)
        print(f"mutation.py: adopted {len(adopted)} groups into {arguments.out}", file=sys.stderr)
        return 0
    failed = []
    for name, (only_mutate, tests) in groups.items():
        step = plan(only_mutate, recorded.get(name), arguments.full or arguments.recheck)
        if "full" in step:
            print(f"mutation.py: {name}: every mutant ({step['full']})", file=sys.stderr)
        elif not step["rerun"] and not step["removed"]:
            print(f"mutation.py: {name}: up to date", file=sys.stderr)
            continue
        else:
            print(f"mutation.py: {name}: mutants of {len(step['rerun'])} changed or new "
                  f"function(s), {len(step['removed'])} removed", file=sys.stderr)  # fmt: skip
            for key in step["rerun"]:
                print(f"  {key}")
        if arguments.dry_run:
            continue
        incremental = recorded.get(name, {}).get("incremental")
        try:
            if arguments.recheck and incremental and (scratch_folder(name) / "mutants").is_dir():
                # the clone of an incremental run: recheck those functions and every one with
                # an unjudged survivor, keep the others
                rerun = [key for key in recheck_functions(recorded[name])
                         if key in committed_hashes(only_mutate)]  # fmt: skip
                fresh = run_group(name, only_mutate, tests, arguments.children, True, rerun)
                result = merge_incremental(recorded[name], fresh, rerun,
                                           committed_hashes(only_mutate))  # fmt: skip
            elif "full" in step:
                result = run_group(name, only_mutate, tests, arguments.children,
                                   arguments.recheck)  # fmt: skip
            else:
                fresh = recorded[name]  # only removed functions: nothing to run
                if step["rerun"]:
                    fresh = run_group(name, only_mutate, tests, arguments.children,
                                      functions=step["rerun"])  # fmt: skip
                result = merge_incremental(recorded[name], fresh, step["rerun"], step["current"])
        except MutmutStoppedError as stopped:
            print(f"mutation.py: {name}: not recorded: {stopped}", file=sys.stderr)
            failed.append(name)
            continue
        write_results(arguments.out, {name: result})  # each group saved as soon as it is done
        share = result["killed_share_of_non_equivalent"]
        print(f"mutation.py: {name}: {result['killed']} of {result['generated']} killed, "
              f"{result['survived']} survived, {len(result['equivalent'])} equivalent, "
              f"{result['no_tests']} without tests, share {share}", file=sys.stderr)  # fmt: skip
    if not arguments.dry_run:
        print(f"mutation.py: wrote {arguments.out}", file=sys.stderr)
    if failed:
        print(f"mutation.py: not recorded: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
