"""What an experiment asks for, before anything runs; pure, no I/O.

- `experiment`: the experiment file (TOML) parsed into frozen dataclasses, every mistake
  naming its field; its points, each a full run configuration;
- `sweep`: expanding `[sweep]` into points;
- `order`: the order of the runs (sweep, interleaved, random with a stored seed);
- `topology`: which host runs what, and the addresses of emulated hosts.
"""
