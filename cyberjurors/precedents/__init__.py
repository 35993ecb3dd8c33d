"""The precedent base B = <H, N>: historical cases H and verdict guidelines N, hybrid retrieval
over them (BM25 + embeddings, fused by reciprocal rank), and per-juror memory M_k."""
