"""The real providers behind the port in ``llm/__init__.py``: Anthropic (and its Message Batches),
any OpenAI-compatible endpoint, a router over several, and a scripted backend for tests. The offline
stand-in is the jury's simulator (``jury/offline.py``); ``assembly.py`` picks one from the settings."""
