"""Running an experiment (SPEC 3): the one-way path spec -> runner -> store.

- `runner`: every point and repetition, the original method, stored run by run;
- `capacity`: the trials of a capacity search against a running system;
- `validate`: steady windows, coefficients of variation, another repetition or not;
- `machine`: whether a run measured the machine rather than the emulated system;
- `transport`: how a run's processes reach each other (TCP, TLS, Unix sockets);
- `progress`: what `cachelab run` shows while it works.
"""
