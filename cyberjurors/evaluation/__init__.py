"""Evaluation: datasets with real jury votes, the metrics the paper reports (and the fairness
ones it did not), the ablation ladder, the synthetic benchmark, and the eval driver that runs
cases through the real streaming pipeline."""
