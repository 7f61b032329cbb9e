"""Models and statistics over numbers the experiments measured; no I/O.

One module per question the report asks:

- `qos`: the highest throughput whose latency percentile stays under a target;
- `laws`: the interactive response-time law and Little's law, to validate measurements;
- `factorial`: 2^k r factorial designs (Jain, ch. 18), their residuals;
- `design`: which stored runs form a balanced 2^k r design (steady runs only);
- `queueing`: M/M/1 and M/M/m (Erlang C);
- `mva`: exact mean value analysis of a closed network with multi-server stations;
- `histogram`: Freedman-Diaconis buckets with an overflow bucket;
- `middleware_model`: M/M/1 and M/M/m for the middleware beside its measurements;
- `network_model`: the closed network of clients, middleware and servers from measured
  demands, solved by `mva`, with its bottleneck;
- `compare`: matching the points of experiments and testing their differences.

Inputs a model cannot take raise `cachelab.analysis.errors.AnalysisError`, which is both a
`ValueError` (for library callers) and a `UserError` (so the CLI prints it as one line).
"""
