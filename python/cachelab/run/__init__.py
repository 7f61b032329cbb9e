"""Running an experiment (SPEC 3): the one-way path spec -> runner -> store.

- `runner`: every point and repetition, the original method, stored run by run;
- `capacity`: the trials of a capacity search against a running system;
- `validate`: steady windows, coefficients of variation, another repetition or not;
- `progress`: what `cachelab run` shows while it works.
"""
