"""Where a plan runs: the protocol and its defaults (base), the registry, the one clock (supervise), one folder per backend."""
