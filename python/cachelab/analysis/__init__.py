"""Models and statistics over numbers the experiments measured; no I/O.

One module per question the report asks:

- `qos`: the highest throughput whose latency percentile stays under a target;
- `laws`: the interactive response-time law and Little's law, to validate measurements;
- `factorial`: 2^k r factorial designs (Jain, ch. 18);
- `queueing`: M/M/1 and M/M/m (Erlang C);
- `mva`: exact mean value analysis of a closed network with multi-server stations;
- `histogram`: Freedman-Diaconis buckets with an overflow bucket.

Inputs a model cannot take raise `cachelab.analysis.errors.AnalysisError`, which is both a
`ValueError` (for library callers) and a `UserError` (so the CLI prints it as one line).
"""
