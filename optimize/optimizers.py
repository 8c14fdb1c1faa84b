"""The DSPy optimizers ``rag compile`` can run, with settings sized for small models and small budgets.

    bootstrap      BootstrapFewShot: demos that pass the role's metric (default; cheapest)
    random-search  BootstrapFewShotWithRandomSearch: several demo sets, the best on dev wins
    mipro          MIPROv2 (auto=light|medium): proposes instructions and demos, searches on dev with optuna
    gepa           GEPA: evolves the instruction from textual feedback on failures, within a metric-call cap

``effort`` (light|medium) scales the search. Every setting that drives the number of LM calls is explicit
here, so ``calls_upper_bound`` is a true bound: ``--budget`` trims the splits until the bound fits, and the
tests check the counted calls against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dspy

from rag.errors import ConfigError

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")
EFFORTS = ("light", "medium")
MAX_DEMOS = 2  # default demos per predictor: each carries a whole context; more would overflow a 4k window
DEMO_PASSAGE_CHARS = 400  # rag compile: train examples (the demos' source) show each passage cut to this many characters
GEPA_MINIBATCH = 3  # examples GEPA reflects on per iteration


@dataclass(frozen=True)
class Search:
    """How hard each optimizer searches at one effort level."""

    random_candidates: int  # random-search: shuffled demo sets tried (DSPy adds 3 fixed ones)
    mipro_candidates: int  # MIPROv2's auto-mode N: N demo sets, N/2 instructions
    gepa_iterations: int  # GEPA: reflect-and-retry iterations on minibatches


SEARCH = {"light": Search(4, 6, 6), "medium": Search(8, 12, 12)}


def search(effort: str) -> Search:
    if effort not in SEARCH:
        raise ConfigError(f"unknown effort {effort!r}; allowed: {', '.join(EFFORTS)}")
    return SEARCH[effort]


def _mipro_trials(n: int, predictors: int) -> int:
    # MIPROv2's own rule with demos: max(2 * (2 * predictors) * log2(N), 1.5 * N)
    return int(max(4 * predictors * math.log2(n), 1.5 * n))


def gepa_metric_calls(n_train: int, n_dev: int, effort: str = "light") -> int:
    """GEPA's ``max_metric_calls``: one full dev evaluation plus, per iteration, a minibatch before and after."""
    return n_dev + search(effort).gepa_iterations * 2 * min(GEPA_MINIBATCH, max(n_train, 1))


def calls_upper_bound(name: str, n_train: int, n_dev: int, calls_per_example: int, effort: str = "light",
                      predictors: int = 1) -> int:
    """An upper bound on the LM calls an optimizer makes (the dry run prints it; --budget trims to it).
    ``predictors``: how many predictors the program has (3 for the whole agent)."""
    per, s = calls_per_example, search(effort)
    if name == "bootstrap":
        return n_train * per
    if name == "random-search":  # candidates + 3 fixed sets, of which candidates + 1 bootstrap; all scored on dev
        return n_train * per * (s.random_candidates + 1) + n_dev * per * (s.random_candidates + 3)
    if name == "mipro":
        n = s.mipro_candidates
        # data summary (a call per 10 examples, one to sum up); per predictor and instruction: program
        # description, module description, instruction
        proposals = math.ceil(n_train / 10) + 1 + 3 * predictors * (n // 2)
        # demo sets (3 fixed ones cost nothing or one pass), trials on the full dev set, plus the default program
        return n_train * per * (n - 2) + proposals + (_mipro_trials(n, predictors) + 1) * n_dev * per
    if name == "gepa":  # GEPA may finish the iteration that crosses its cap: one more minibatch pair and dev pass
        metric_calls = gepa_metric_calls(n_train, n_dev, effort)
        overshoot = 2 * GEPA_MINIBATCH + n_dev
        # reflection: one call per iteration (each spends at least a minibatch), and one retry if it fails to parse
        reflections = 2 * (metric_calls // min(GEPA_MINIBATCH, max(n_train, 1)) + 1)
        return (metric_calls + overshoot) * per + reflections
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
            text = ("The new query retrieved a passage that answers the question, and the grader accepted it." if score > 0
                    else "The new query did not retrieve a passage that answers the question (or the grader rejected "
                         "it); use the documentation's terms.")
        elif role == "answerer":
            text = f"Score {score:.2f}. Reference answer: {gold.reference_answer}. Cite the passage ids you use."
        elif role == "agent":
            text = f"Score {score:.2f}. {'It should have refused.' if gold.should_refuse else 'Reference answer: ' + gold.reference_answer}"
        else:
            text = f"Human label: correct={gold.correct}, faithful={gold.faithful}."
        return dspy.Prediction(score=score, feedback=text)

    return feedback_metric


# roles whose every example carries the right output (a label: the route) and which choose among a few values:
# bootstrapping would keep only the values the uncompiled model already gets right (the router says "both" on
# doubt), so their demos are labelled examples, taken in turn from each value
LABEL_ROLES = {"router": "source"}


def labelled_round_robin(program: dspy.Module, train: list, label: str, max_demos: int) -> dspy.Module:
    """``program`` with up to ``max_demos`` labelled train examples as the demos of each predictor, one per value
    of ``label`` in turn (values in order of first appearance; examples in train order), so every value is shown."""
    by_value: dict[Any, list] = {}
    for ex in train:
        by_value.setdefault(ex[label], []).append(ex)
    demos, queues = [], [list(q) for q in by_value.values()]
    while len(demos) < max_demos and any(queues):
        for queue in queues:
            if queue and len(demos) < max_demos:
                demos.append(queue.pop(0))
    compiled = program.deepcopy()
    for predictor in compiled.predictors():
        predictor.demos = list(demos)
    return compiled


def run_optimizer(name: str, role: str, program: dspy.Module, metric: Any, train: list, dev: list,
                  lm: dspy.BaseLM, proposer_lm: dspy.BaseLM | None = None, seed: int = 0,
                  effort: str = "light", max_demos: int = MAX_DEMOS) -> dspy.Module:
    """Compile ``program`` with optimizer ``name``; returns the compiled copy. ``lm`` runs the task;
    ``proposer_lm`` (default ``lm``) writes the new instructions of MIPROv2 and GEPA. ``max_demos``: at most this
    many demos per predictor (0: instructions only; GEPA adds none)."""
    if max_demos < 0:
        raise ConfigError(f"max_demos must be 0 or more, got {max_demos}")
    proposer_lm = proposer_lm or lm
    s = search(effort)
    # a labelled demo is a raw golden example; for the whole agent it has none of a step's fields (no context,
    # no verdict), so end to end only bootstrapped traces, which carry every step's inputs and outputs, are demos
    labeled = 0 if role == "agent" else max_demos
    if name == "bootstrap" and role in LABEL_ROLES:
        return labelled_round_robin(program, train, LABEL_ROLES[role], max_demos)
    if name == "bootstrap":
        opt = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=max_demos, max_labeled_demos=labeled,
                                    max_rounds=1)
        return opt.compile(program, trainset=train)
    if name == "random-search":
        opt = dspy.BootstrapFewShotWithRandomSearch(metric=metric, max_bootstrapped_demos=max_demos,
                                                    max_labeled_demos=labeled, num_candidate_programs=s.random_candidates,
                                                    num_threads=1)
        return opt.compile(program, trainset=train, valset=dev or None)
    if name == "mipro":
        opt = dspy.MIPROv2(metric=metric, prompt_model=proposer_lm, task_model=lm, auto=effort, num_threads=1,
                           max_bootstrapped_demos=max_demos, max_labeled_demos=labeled, seed=seed, verbose=False)
        return opt.compile(program, trainset=train, valset=dev or None)
    if name == "gepa":
        opt = dspy.GEPA(metric=with_feedback(role, metric), max_metric_calls=gepa_metric_calls(len(train), len(dev), effort),
                        reflection_lm=proposer_lm, reflection_minibatch_size=GEPA_MINIBATCH,
                        num_threads=1, seed=seed, track_stats=False)
        return opt.compile(program, trainset=train, valset=dev or train)
    raise ConfigError(f"unknown optimizer {name!r}; allowed: {', '.join(OPTIMIZERS)}")
