"""The LLM room: the port every stage calls (``port.py``: one structured call, many backends), the
waves that batch a round's calls (``waves.py``), the price table (``prices.py``, over the dated model
catalog in ``config/catalog.py``, which the settings check model names against), and the real
providers (``llm/backends/``)."""
