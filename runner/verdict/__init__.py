"""The verdict: is the candidate better than the model it would replace? Paired per-example evidence
from several seeds of each, an interval at a stated confidence, and one of four words
(runner/verdict/stats.py; its calibration: bench/verdict.py)."""
