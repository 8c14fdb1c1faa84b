"""What LM calls cost: per-call records (``calls``), measuring one call (``metering``), recorded latencies for cache
hits (``latency``), the usage ledger (``ledger``) and list prices (``pricing``).

Nothing is imported here, so importing one module stays cheap.
"""

__all__ = ["calls", "latency", "ledger", "metering", "pricing"]
