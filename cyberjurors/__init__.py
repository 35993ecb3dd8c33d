"""CyberJurors: streaming e-commerce dispute verdicts by a simulated LLM jury."""

__version__ = "0.1.0"
