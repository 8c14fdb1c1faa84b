"""Context-window fitting (rag.lm.fit) with a word-count tokenizer: exact, deterministic budgets."""

import pytest

from rag.lm.fit import count_prompt, fit_messages


def words(text: str) -> int:
    return len(text.split())


def dspy_like_messages(passages: int) -> list[dict[str, str]]:
    context = "\n\n".join(f"[{i}] passage number {i} " + "filler " * 20 for i in range(1, passages + 1))
    user = (f"[[ ## question ## ]]\nwho wrote it?\n\n[[ ## context ## ]]\n{context}\n\n"
            "Respond with a JSON object in the following order of fields: `answer`.")
    return [{"role": "system", "content": "You grade passages."}, {"role": "user", "content": user}]


def test_fits_untouched_when_small():
    messages = dspy_like_messages(2)
    fit = fit_messages(messages, words, budget=10_000)
    assert fit.messages == messages and fit.dropped_tokens == 0 and fit.note is None


def test_cuts_tail_of_longest_field_and_keeps_instructions():
    messages = dspy_like_messages(30)
    budget = count_prompt(messages, words) // 3
    fit = fit_messages(messages, words, budget=budget)
    user = fit.messages[1]["content"]
    assert fit.prompt_tokens <= budget
    assert fit.field == "context" and fit.dropped_tokens > 0
    assert "[1] passage number 1" in user  # best-ranked passage survives
    assert "[30] passage number 30" not in user  # lowest-ranked is cut first
    assert user.endswith("Respond with a JSON object in the following order of fields: `answer`.")
    assert "who wrote it?" in user and "truncated" in user
    assert "context" in fit.note and str(fit.dropped_tokens) in fit.note


def test_refuses_when_instructions_alone_do_not_fit():
    with pytest.raises(ValueError, match="raise n_ctx"):
        fit_messages(dspy_like_messages(1), words, budget=20)


def test_bound_schema_caps_free_strings_and_arrays():
    from rag.lm.grammar import CHARS_PER_TOKEN, MAX_ITEM_CHARS, MAX_ITEMS, bound_schema

    schema = {"type": "object", "required": ["answer", "reasons", "label"], "properties": {
        "answer": {"type": "string"},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "label": {"type": "string", "enum": ["a", "b"]},
    }}
    bounded = bound_schema(schema, max_tokens=512)
    assert "maxLength" not in schema["properties"]["answer"]  # the input is not modified
    per = bounded["properties"]["answer"]["maxLength"]
    assert bounded["properties"]["reasons"]["maxItems"] == MAX_ITEMS
    assert bounded["properties"]["reasons"]["items"]["maxLength"] == MAX_ITEM_CHARS
    # every string together fits the token budget, even at the worst-case characters per token
    assert per + MAX_ITEMS * MAX_ITEM_CHARS <= 512 * CHARS_PER_TOKEN * 0.8
    assert per >= 200  # room for a real sentence
    assert "maxLength" not in bounded["properties"]["label"]
    assert bound_schema({"type": "string"}, max_tokens=4096)["maxLength"] == 1000  # llama.cpp's grammar limit


def test_few_shot_demos_give_way_before_the_question_context():
    from rag.lm.fit import count_prompt, fit_messages

    def words(text):
        return len(text.split())

    def user(ctx):
        return {"role": "user", "content": f"[[ ## question ## ]]\nq?\n\n[[ ## context ## ]]\n{ctx}\n\nRespond with JSON."}

    demo = user("demo passage word " * 300)
    final = user("final passage word " * 300)
    messages = [{"role": "system", "content": "sys"}, demo, {"role": "assistant", "content": "{}"},
                dict(demo), {"role": "assistant", "content": "{}"}, final]
    fit = fit_messages(messages, words, budget=1300)
    assert fit.prompt_tokens <= 1300 and count_prompt(fit.messages, words) == fit.prompt_tokens
    assert fit.messages[-1]["content"] == final["content"]  # the question's own context is untouched
    assert all("truncated" in fit.messages[i]["content"] for i in (1, 3))


def test_a_raw_newline_in_a_string_is_not_a_parse_failure():
    from rag.lm.grammar import json_problem

    schema = {"required": ["answer"]}
    assert json_problem('{"answer": "line one\nline two"}', schema) is None  # json_repair (DSPy) reads it too
    assert json_problem('{"answer": "unclosed', schema).startswith("invalid JSON")
    assert json_problem('{"other": 1}', schema) == "missing required keys ['answer']"
