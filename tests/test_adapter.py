"""Sieve's prompt layout: constant system message, passages first, the task last, parsed like JSONAdapter."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils import DummyLM

from rag.lm.adapter import DEMOS_HEADER, PREAMBLE, SHARED_DEMOS_HEADER, SieveAdapter, program_demos
from rag.lm.grammar import bound_schema, cut_fields
from signatures import Answerer, Grader, Judge

CONTEXT = "[1] [with#001] with statement\n<<<\nThe with statement wraps a block.\n>>>"


def _messages(signature, **inputs):
    return SieveAdapter().format(signature, demos=[], inputs=inputs)


def test_system_message_is_the_same_for_every_role():
    grader = _messages(Grader, question="q?", context=CONTEXT)
    judge = _messages(Judge, question="q?", reference_answer="r", candidate_answer="c", context=CONTEXT)
    assert grader[0] == judge[0] == {"role": "system", "content": PREAMBLE}


def test_passages_come_first_and_the_task_last():
    user = _messages(Grader, question="What does with do?", context=CONTEXT)[-1]["content"]
    assert user.startswith("[[ ## context ## ]]\n" + CONTEXT)
    assert user.index("[[ ## question ## ]]") > user.index(CONTEXT)
    assert user.index(Grader.instructions.splitlines()[0]) > user.index("What does with do?")
    keys = [line.split(" ")[1] for line in user.splitlines() if line.startswith("- ")]
    assert keys == list(Grader.output_fields)  # the keys, in the order the schema asks for them


def test_grader_answerer_and_judge_prompts_share_the_passages_as_a_prefix():
    def prompt(signature, **inputs):
        return "\n".join(m["content"] for m in _messages(signature, **inputs))

    grader = prompt(Grader, question="What does with do?", context=CONTEXT)
    answerer = prompt(Answerer, question="What does with do?", context=CONTEXT)
    judge = prompt(Judge, question="What does with do?", reference_answer="r", candidate_answer="c", context=CONTEXT)
    shared = PREAMBLE + "\n[[ ## context ## ]]\n" + CONTEXT
    assert grader.startswith(shared) and answerer.startswith(shared) and judge.startswith(shared)


DEMO = {"question": "What is break?", "context": "[1] [break#000] break\n<<<\nbreak ends a loop.\n>>>",
        "subject": "break", "relevant_chunk_ids": ["break#000"], "relevant": True, "reason": "it says so",
        "cited_ids": ["break#000"], "answer": "It ends the loop [break#000]."}


def test_demos_sit_after_the_passages_so_compiled_roles_still_share_them_as_a_prefix():
    adapter, inputs = SieveAdapter(demo_position="after"), {"question": "What does with do?", "context": CONTEXT}
    grader, answerer = adapter.format(Grader, demos=[DEMO], inputs=inputs), adapter.format(Answerer, demos=[DEMO], inputs=inputs)
    assert [m["role"] for m in grader] == ["system", "user"]  # no demo turns ahead of the passages
    for messages in (grader, answerer):
        user = messages[-1]["content"]
        assert user.startswith("[[ ## context ## ]]\n" + CONTEXT + "\n\n" + DEMOS_HEADER)
        # the demo, then the real question, then the task: the question the model answers is the last one shown
        assert user.index("What is break?") < user.rindex("[[ ## question ## ]]\nWhat does with do?")
        assert user.rindex("What does with do?") < user.index("Reply with a JSON object")
    demo_reply = '{"subject": "break", "relevant_chunk_ids": ["break#000"], "relevant": true, "reason": "it says so"}'
    assert demo_reply in grader[-1]["content"]  # on one line, as the model writes it


def test_demos_can_go_before_the_passages_for_a_probe_and_nowhere_else():
    inputs = {"question": "What does with do?", "context": CONTEXT}
    user = SieveAdapter(demo_position="before").format(Grader, demos=[DEMO], inputs=inputs)[-1]["content"]
    assert user.startswith(DEMOS_HEADER)
    assert user.index("--- End of examples ---") < user.index("[[ ## context ## ]]\n" + CONTEXT)
    assert user.count(DEMOS_HEADER) == 1  # moved, not repeated
    plain = SieveAdapter(demo_position="before").format(Grader, demos=[], inputs=inputs)
    assert plain == SieveAdapter().format(Grader, demos=[], inputs=inputs)  # without demos nothing moves
    with pytest.raises(ValueError, match="allowed: after, before, shared"):
        SieveAdapter(demo_position="middle")


class _Compiled(dspy.Module):
    def __init__(self, demos=(DEMO,)):
        super().__init__()
        self.grade, self.respond = dspy.Predict(Grader), dspy.Predict(Answerer)
        self.grade.demos = [dspy.Example(**d) for d in demos]
        self.respond.demos = [dspy.Example(**d) for d in demos]


def _prompt(messages):
    return "\n".join(m["content"] for m in messages)


def test_shared_demos_are_one_block_ahead_of_the_passages_and_the_same_in_every_role():
    program, adapter = _Compiled(), SieveAdapter(demo_position="shared")
    inputs = {"question": "What does with do?", "context": CONTEXT}
    with program_demos(program):
        grader = _prompt(adapter.format(Grader, demos=program.grade.demos, inputs=inputs))
        answerer = _prompt(adapter.format(Answerer, demos=program.respond.demos, inputs=inputs))
        judge = _prompt(adapter.format(Judge, demos=[], inputs={**inputs, "reference_answer": "r",
                                                                 "candidate_answer": "c"}))
    shared = grader[:grader.index(CONTEXT) + len(CONTEXT)]
    assert shared.startswith(PREAMBLE + "\n" + SHARED_DEMOS_HEADER)
    assert answerer.startswith(shared) and judge.startswith(shared)  # a role without demos of its own too
    assert shared.index("--- Example 1, task grade ---") < shared.index("--- Example 2, task respond ---")
    assert shared.index("--- End of examples ---") < shared.index("[[ ## context ## ]]\n" + CONTEXT)
    assert grader.count("What is break?") == 2  # each role's demo once, not once per role that reads the block
    # outside program_demos (a role step of rag compile, the judge alone) a role shows its own demos before
    alone = adapter.format(Grader, demos=[DEMO], inputs=inputs)
    assert alone == SieveAdapter(demo_position="before").format(Grader, demos=[DEMO], inputs=inputs)
    with program_demos(_Compiled(demos=())):  # an uncompiled program: nothing moves
        plain = adapter.format(Grader, demos=[], inputs=inputs)
    assert plain == SieveAdapter().format(Grader, demos=[], inputs=inputs)


def test_demos_chosen_for_one_call_are_shown_beside_the_shared_block():
    """rag.data.labelled.SQLExamples picks the SQL writer's demos per question: a compiled program's shared block
    must not hide them, nor show them twice."""
    from signatures import SQLWriter

    program, adapter = _Compiled(), SieveAdapter(demo_position="shared")
    chosen = [dspy.Example(question="How many claims are open?", documents="", previous="",
                           sql="SELECT count(*) FROM claims WHERE status = 'open'")]
    with program_demos(program):
        prompt = _prompt(adapter.format(SQLWriter, demos=chosen, inputs={"question": "q", "tables": "TABLE t",
                                                                         "documents": "", "previous": ""}))
        grader = _prompt(adapter.format(Grader, demos=program.grade.demos, inputs={"question": "q", "context": CONTEXT}))
    assert SHARED_DEMOS_HEADER in prompt and prompt.count("WHERE status = 'open'") == 1
    assert prompt.index(SHARED_DEMOS_HEADER) < prompt.index("WHERE status = 'open'") < prompt.index("TABLE t")
    assert grader.count("What is break?") == 2  # a role's compiled demos: in the shared block only, as before


def test_a_demo_without_every_output_is_marked_not_given():
    partial = {k: v for k, v in DEMO.items() if k != "subject"}
    user = SieveAdapter().format(Grader, demos=[partial], inputs={"question": "q?", "context": CONTEXT})[-1]["content"]
    assert '"subject": "(not given)"' in user


def test_replies_parse_as_typed_fields():
    lm = DummyLM([{"relevant_chunk_ids": ["with#001"], "relevant": True, "reason": "it says so"}],
                 adapter=SieveAdapter())
    with dspy.context(lm=lm, adapter=SieveAdapter()):
        pred = dspy.Predict(Grader)(question="What does with do?", context=CONTEXT)
    assert pred.relevant is True and pred.relevant_chunk_ids == ["with#001"] and pred.reason == "it says so"


def test_a_field_that_reaches_its_bound_is_reported_as_cut():
    schema = {"type": "object", "properties": {"answer": {"type": "string"}, "ids": {"type": "array",
              "items": {"type": "string"}}}, "required": ["answer", "ids"]}
    bounded = bound_schema(schema, max_tokens=512)
    limit = bounded["properties"]["answer"]["maxLength"]
    assert limit >= 600  # room for a real answer: the bound stops rambling, it must not cut a normal answer
    assert cut_fields('{"answer": "%s", "ids": []}' % ("x" * limit), bounded) == [("answer", limit)]
    assert cut_fields('{"answer": "short", "ids": []}', bounded) == []


def test_output_max_length_reaches_the_schema_the_engine_constrains_to():
    from types import SimpleNamespace

    lm = SimpleNamespace(supported_params={"response_format"}, supports_response_schema=True)
    kwargs: dict = {}
    SieveAdapter()._prepare_response_format(lm, kwargs, Grader)
    properties = kwargs["response_format"].model_json_schema()["properties"]
    assert properties["reason"]["maxLength"] == 60
    assert "maxLength" not in properties["relevant_chunk_ids"]
    assert list(properties) == ["subject", "relevant_chunk_ids", "relevant", "reason"]


def test_length_hints_are_dropped_for_groq_strict_schemas_and_kept_for_best_effort_ones():
    from dspy.lm15 import Config, Message, Request

    from rag.lm.groq import response_format_for

    schema = {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 100}}, "required": ["reason"]}
    request = Request(model="x", messages=(Message.user("hi"),),
                      config=Config(response_format={"type": "json_schema", "schema": schema, "name": "Out"}))
    strict = response_format_for("openai/gpt-oss-20b", request)["json_schema"]
    assert strict["strict"] and strict["schema"]["properties"]["reason"] == {"type": "string"}
    loose = response_format_for("meta-llama/llama-4-scout-17b-16e-instruct", request)["json_schema"]
    assert loose["schema"]["properties"]["reason"]["maxLength"] == 100


def test_raw_quotes_in_the_last_free_text_field_survive_and_are_re_escaped():
    """The 'The ' bug: a JSON grammar ends a string at the model's first unescaped quote."""
    import json

    from rag.lm.grammar import close_last_string, open_last_string

    schema = {"type": "object", "properties": {"cited_ids": {"type": "array", "items": {"type": "string"}},
                                               "answer": {"type": "string"}}, "required": ["cited_ids", "answer"]}
    opened, name = open_last_string(bound_schema(schema, max_tokens=512))
    assert name == "answer" and '"' not in opened["properties"]["answer"]["pattern"].split("]")[0]  # quotes allowed
    raw = '{"cited_ids": ["bool#001"], "answer": "The expression "not \'foo\'" is False [bool#001]."}'
    text, cut, spilled = close_last_string(raw, "answer")
    assert json.loads(text)["answer"] == 'The expression "not \'foo\'" is False [bool#001].' and not cut
    assert not spilled
    text, cut, _ = close_last_string('{"cited_ids": [], "answer": "It runs on and o', "answer")
    assert json.loads(text)["answer"] == "It runs on and o" and cut  # generation stopped inside: noted as cut
    # A quoted list inside prose is text; a quote-comma-key is the model starting a field the schema lacks
    listed = '{"cited_ids": [], "answer": "Use "a", "b" or "c" [x#001]."}'
    assert json.loads(close_last_string(listed, "answer")[0])["answer"] == 'Use "a", "b" or "c" [x#001].'
    assert open_last_string({"type": "object", "properties": {"ok": {"type": "boolean"}}})[1] is None


def test_a_key_spilled_into_the_last_free_text_field_is_cut_off():
    """Seen on Qwen2.5-Coder-1.5B (test item pyref-a-050): it closed the answer, wrote a key of its own and then
    code fences until the bound; the grammar took all of it as answer text."""
    import json

    from rag.lm.grammar import close_last_string

    raw = ('{"cited_ids": ["formatstrings#012"], "answer": "The \'_\' option signals an underscore separator for '
           'type \'b\'", "chunk_ids": ["[formatstrings#012]"] }\n```\n```\n```"}')
    text, cut, spilled = close_last_string(raw, "answer")
    assert json.loads(text) == {"cited_ids": ["formatstrings#012"],
                                "answer": "The '_' option signals an underscore separator for type 'b'"}
    assert spilled and not cut
    # quotes the model escaped itself are its text, even when they look like a key
    escaped = '{"cited_ids": [], "answer": "Write \\", \\"key\\": 1 [a#001]"}'
    assert close_last_string(escaped, "answer") == (escaped, False, False)


def _id_schemas(signature, ids=None):
    from types import SimpleNamespace

    from rag.lm.adapter import shown_ids

    lm = SimpleNamespace(supported_params={"response_format"}, supports_response_schema=True)
    kwargs: dict = {}
    if ids is None:
        SieveAdapter()._prepare_response_format(lm, kwargs, signature)
    else:
        with shown_ids(ids):
            SieveAdapter()._prepare_response_format(lm, kwargs, signature)
    return kwargs["response_format"].model_json_schema()["properties"]


def test_inside_shown_ids_the_id_lists_may_name_only_those_ids():
    ids = ["with#001", "with#002", "compound#004"]
    assert _id_schemas(Grader, ids)["relevant_chunk_ids"]["items"] == {"type": "string", "enum": ids}
    assert _id_schemas(Answerer, ids)["cited_ids"]["items"] == {"type": "string", "enum": ids}
    assert _id_schemas(Grader, ids)["subject"] == _id_schemas(Grader)["subject"]  # other fields untouched
    assert "enum" not in str(_id_schemas(Judge, ids))  # no *_ids output: nothing to constrain


def test_outside_shown_ids_or_with_none_shown_ids_are_free_strings():
    from rag.lm.adapter import shown_ids

    assert _id_schemas(Grader)["relevant_chunk_ids"]["items"] == {"type": "string"}
    assert _id_schemas(Grader, [])["relevant_chunk_ids"]["items"] == {"type": "string"}
    with shown_ids(["a#001"]):
        with shown_ids(["b#002"]):
            assert _id_schemas(Grader)["relevant_chunk_ids"]["items"]["enum"] == ["b#002"]
        assert _id_schemas(Grader)["relevant_chunk_ids"]["items"]["enum"] == ["a#001"]
    assert _id_schemas(Grader)["relevant_chunk_ids"]["items"] == {"type": "string"}  # restored on exit
