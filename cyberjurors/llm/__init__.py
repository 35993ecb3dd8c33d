"""The LLM room: the port every stage calls (``port.py``: one structured call, many backends), the
waves that batch a round's calls (``waves.py``), the model catalog and its prices (``catalog.py``),
and the real providers (``llm/backends/``)."""
