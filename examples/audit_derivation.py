"""Audit a derivation of your own with gradlab's claim engine (the ``audit`` extra).

The printed form is data (a SymPy expression); the truth comes from the definition (here
``sympy.diff``); mutants of the printed form show that the check can say no. The claim: the
gradient of InfoNCE with respect to a negative logit is that logit's softmax weight.

    python examples/audit_derivation.py
"""

from __future__ import annotations

import argparse

import sympy as sp

from gradlab.symbolic import Claim, Form, audit_claim, mutant, negated, symbolic_equality


def main() -> None:
    # no options: it only prints (an output folder given by habit is refused, not ignored)
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    s = sp.symbols("s0:3", real=True)  # logits; s0 is the positive
    softmax = [sp.exp(v) / sum(sp.exp(u) for u in s) for v in s]
    loss = -sp.log(softmax[0])
    printed = Form(softmax[1], lhs="dL/ds_1")  # my derivation: dL/ds_k = softmax_k - [k = 0]

    def check(form):
        return symbolic_equality(form.value, sp.diff(loss, s[1]), s)

    claim = Claim("my-notes", "eq3", "InfoNCE gradient of a negative logit", printed, check,
                  method="sympy.diff", mutants=(negated(printed),
                                                mutant(printed, softmax[1] - 1, "positive's form")))
    record = audit_claim(claim, mutants=True)
    print(f"{record['claim']['statement']}: {record['verdict']}")
    for result in record["mutant_results"]:
        print(f"  mutant {result['mutant']!r}: {result['verdict']}, "
              f"{'rejected' if result['killed'] else 'NOT rejected'}")
    print(f"{record['mutants_killed']} of {record['mutants']} mutants rejected")


if __name__ == "__main__":
    main()
