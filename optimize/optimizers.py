"""The DSPy optimizers ``rag compile`` can run, with settings sized for small models and small budgets.

    bootstrap      BootstrapFewShot: demos that pass the role's metric (default; cheapest)
    random-search  BootstrapFewShotWithRandomSearch: several demo sets, the best on dev wins
    mipro          MIPROv2 (auto=light): proposes instructions and demos, searches on dev
    gepa           GEPA (auto=light): evolves instructions from textual feedback on failures
"""

from __future__ import annotations

from typing import Any

import dspy

from rag.errors import ConfigError

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")
MAX_DEMOS = 2  # demos carry whole contexts; more would overflow a small model's window


def calls_upper_bound(name: str, n_train: int, n_dev: int, calls_per_example: int, candidates: int = 4) -> int:
    """An upper bound on the LM calls an optimizer makes (the dry run prints it; --budget trims to it)."""
    per = calls_per_example
    if name == "bootstrap":
        return n_train * per
    if name == "random-search":
        return n_train * per * candidates + n_dev * per * (candidates + 3)
    if name == "mipro":  # auto=light: 6 instruction candidates proposed, ~10 trials on minibatches of dev
        return n_train * per * 6 + 6 * 2 + 10 * min(n_dev, 35) * per
    if name == "gepa":  # auto=light budget is about 6 full dev evaluations plus reflection calls
        return 6 * (n_dev + n_train) * per + 30
    raise ConfigError(f"unknown optimizer {name!r}; allowed: {', '.join(OPTIMIZERS)}")


def with_feedback(role: str, metric: Any) -> Any:
    """GEPA wants (score, feedback text): explain in words what the decision metric saw."""

    def feedback_metric(gold: dspy.Example, pred: dspy.Prediction, trace=None, pred_name=None, pred_trace=None):
        score = float(metric(gold, pred))
        if role == "grader":
            if bool(pred.relevant) and not gold.relevant:
                text = "Grader said relevant but no passage shown contains the answer; be stricter."
            elif not pred.relevant and gold.relevant:
                text = f"Grader said not relevant, but passages {gold.relevant_chunk_ids} answer the question."
            elif gold.relevant:
                text = f"Verdict right; the passages that answer it are {gold.relevant_chunk_ids}."
            else:
                text = "Correct: nothing shown answers the question."
        elif role == "rewriter":
            text = ("The new query retrieved a passage that answers the question." if score > 0 else
                    "The new query did not retrieve any passage that answers the question; use the documentation's terms.")
        elif role == "answerer":
            text = f"Score {score:.2f}. Reference answer: {gold.reference_answer}. Cite the passage ids you use."
        else:
            text = f"Human label: correct={gold.correct}, faithful={gold.faithful}."
        return dspy.Prediction(score=score, feedback=text)

    return feedback_metric


def run_optimizer(name: str, role: str, program: dspy.Module, metric: Any, train: list, dev: list,
                  lm: dspy.BaseLM, reflection_lm: dspy.BaseLM | None = None, seed: int = 0) -> dspy.Module:
    """Compile ``program`` with optimizer ``name``; returns the compiled copy."""
    if name == "bootstrap":
        opt = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=MAX_DEMOS, max_labeled_demos=MAX_DEMOS,
                                    max_rounds=1)
        return opt.compile(program, trainset=train)
    if name == "random-search":
        opt = dspy.BootstrapFewShotWithRandomSearch(metric=metric, max_bootstrapped_demos=MAX_DEMOS,
                                                    max_labeled_demos=MAX_DEMOS, num_candidate_programs=4,
                                                    num_threads=1)
        return opt.compile(program, trainset=train, valset=dev or None)
    if name == "mipro":
        opt = dspy.MIPROv2(metric=metric, prompt_model=lm, task_model=lm, auto="light", num_threads=1,
                           max_bootstrapped_demos=MAX_DEMOS, max_labeled_demos=MAX_DEMOS, seed=seed, verbose=False)
        return opt.compile(program, trainset=train, valset=dev or None)
    if name == "gepa":
        opt = dspy.GEPA(metric=with_feedback(role, metric), auto="light", reflection_lm=reflection_lm or lm,
                        num_threads=1, seed=seed)
        return opt.compile(program, trainset=train, valset=dev or train)
    raise ConfigError(f"unknown optimizer {name!r}; allowed: {', '.join(OPTIMIZERS)}")
