"""Monitor option values that must be refused, with the message each must raise.

Shared by the Monitor's tests and the Lightning callback's, which checks the same options.
"""

from gradlab.monitor import EmbeddingNorms, Loss

BAD_OPTIONS = [
    ({"tau": -1}, r"tau must be .*got -1"),
    ({"tau": float("nan")}, r"tau must be .*got nan"),
    ({"preset": "bogus"},
     r"preset must be one of \['cheap', 'default', 'full'\] or None; got 'bogus'"),
    ({"every": 0}, r"every must be a positive integer n .*; got 0"),
    ({"every": -3}, r"every must be a positive integer n .*; got -3"),
    ({"every": 3.5}, r"every must be a positive integer n .*; got 3.5"),
    ({"every": True}, r"every must be a positive integer n .*; got True"),
    ({"every": "10"}, r"every must be a positive integer n .*; got '10'"),
    ({"every": lambda: True}, r"every must be .* taking one argument \(the step\).*signature \(\)"),
    ({"every": lambda a, b: True}, r"every must be .*signature \(a, b\)"),
    ({"sinks": "neptune"}, r"sinks must name one of .*; got 'neptune'"),
    ({"sinks": ["jsonl", 3]}, r"sinks must name one of .*; got 3"),
    ({"sinks": 3}, r"sinks must be a sink name, a Sink, or a list of them .*got 3"),
    ({"strict": "yes"}, r"strict must be True or False; got 'yes'"),
    ({"distributed": "ddp"}, r"distributed must be 'auto' or 'local'; got 'ddp'"),
    ({"quantities": ["loss"]}, r"quantities must be a list of Quantity instances; got \['loss'\]"),
    ({"quantities": []}, r"^quantities must hold at least one Quantity .*; got \[\]$"),
    ({"quantities": [Loss(), EmbeddingNorms(), Loss()]},  # one would overwrite the other's keys
     r"^quantities must hold each quantity once; got 'loss' more than once in "
     r"\['loss', 'embedding_norm', 'loss'\]$"),
    ({"quantities": [Loss(), EmbeddingNorms(), EmbeddingNorms(), Loss()]},
     r"^quantities must hold each quantity once; got 'embedding_norm', 'loss' more than once "
     r"in \['loss', 'embedding_norm', 'embedding_norm', 'loss'\]$"),
    ({"sinks": ()}, r"^sinks must hold at least one sink .*nothing would be written; got \(\)$"),
    ({"config": {"x": object()}}, r"config must hold JSON-ready values .*config\['x'\] is object"),
    ({"config": {"a": 1, "f": print}}, r"config\['f'\] is builtin_function_or_method"),
    ({"config": {1: "a"}}, r"config keys must be strings; got key 1"),
    ({"config": [("a", 1)]}, r"config must be a dict of JSON-ready settings"),
    # the header's own keys: config={'tau': 0.5} was recorded as the run's tau (gradlab plot
    # then warned of two taus for runs at one, and resume compared the user's value)
    ({"config": {"tau": 0.5, "lr": 0.1}},
     r"^config must not hold the keys the Monitor records in the run header itself \('preset', "
     r"'tau', 'tau_from'\); got 'tau' \(its options set them: tau=\.\.\., preset=\.\.\.; give a "
     r"setting of your own another name\)$"),
    ({"config": {"preset": "mine", "tau_from": "x"}},
     r"^config must not hold the keys .*; got 'preset', 'tau_from' \(its options"),
]
"""(keyword arguments, regular expression the GradlabError message must match)."""
