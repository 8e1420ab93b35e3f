"""Where a plan runs: the protocol and its defaults (base), the names (catalog) and a fresh target by
name (factory), the one clock (supervise), the parts container targets share (container: the
runtime; containerized: image, view, gate probe; kube_api), what a lost run left (leftovers), and
one folder per backend, none importing another's target. Environments come from runner.environments."""
