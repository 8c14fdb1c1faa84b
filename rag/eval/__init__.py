"""The evaluation harness: golden sets and their review (``golden``), golden sets drafted for any index (``draft``),
the runner (``runner``) and its run files (``runs``), named configurations and gates (``presets``), each decision
scored (``decisions``, ``agent_metrics``), retrieval metrics (``metrics``), pooled intervals (``pooled``), repeats
(``repeat``), the Judge (``judging``), reference overlap and near-duplicate questions (``overlap``), judge
calibration (``calibrate``) and failure diagnosis (``diagnose``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["agent_metrics", "calibrate", "decisions", "diagnose", "draft", "golden", "metrics", "overlap", "pooled", "presets", "runner", "runs"]
