"""The offline ops demo (``rag demo ops``): a synthetic freight company's policies, tables and golden questions,
written deterministically from one seed (ops_demo.py writes it; ops_policies.py holds the policy text and the
numbers both the tables and the golden SQL use; ops_golden.py writes the golden set)."""
