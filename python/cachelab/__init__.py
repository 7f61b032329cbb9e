"""cachelab: a laboratory for in-memory object caches.

The public surface is the `cachelab` command (`cachelab.cli`, one module per subcommand
under `cachelab.commands`). Below it, one package per stage of an experiment, each
importing only those above it in this list:

- `cachelab.spec`: the experiment file, its points, the run order and the topology plan;
- `cachelab.analysis`: models and statistics over measured numbers (QoS, operational laws,
  factorial designs, queueing models, trust), pure;
- `cachelab.readers`: what the tools write (load generator reports, the middleware's stats
  file, HDR histograms, CPU samples), read into plain data;
- `cachelab.hosts`: where processes run (this host, emulated hosts, SSH hosts) and
  starting them there;
- `cachelab.store`: the results database, which owns every read and write;
- `cachelab.run`: running an experiment, validating it as it goes;
- `cachelab.report`: the HTML report, its tables and the exports.

`cachelab.errors.UserError` is a mistake the user can fix (one line, exit code 1);
`cachelab.paths` makes and checks output directories. No import circles, between modules
or between packages (tests/test_import_shape.py).
"""

__version__ = "0.1.0"
