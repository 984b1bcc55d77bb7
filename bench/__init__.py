"""Side-by-side benchmarks of temporal-recall and the pydantic-ai-harness reference.

Run `.venv/bin/python -m bench` (see `bench/run.py`). The reference runs in its own virtualenv
(`bench/.reference-venv/`, created on first use) because it pins an older pydantic-ai than ours;
both sides read the same generated workload from JSON files, so they store and search the very
same messages.
"""
